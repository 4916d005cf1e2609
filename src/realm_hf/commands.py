"""What the `realm-hf` subcommands do (the CLI module only parses arguments)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import torch
from transformers import AutoTokenizer

from .corpus import split_into_blocks
from .index import RealmIndex
from .initial_weights import resolve_bert_path
from .modeling import RealmForOpenQA, RealmRetriever

logger = logging.getLogger(__name__)

DEMO_QUESTIONS = [
    "who developed the theory of general relativity",
    "what is the largest planet in the solar system",
    "which river flows through cairo",
    "what language is spoken in brazil",
]


def load_retriever(name_or_path: str) -> tuple[RealmRetriever, object]:
    """A retriever and its tokenizer from a RealmRetriever / RealmForOpenQA directory, or any BERT ('minilm').

    A plain BERT (such as the packaged all-MiniLM-L6-v2) is used as a sentence embedder: mean pooling, no
    projection, normalized, the geometry it was trained with; REALM training then learns its own.
    """
    path = resolve_bert_path(name_or_path)
    config_file = os.path.join(path, "config.json")
    model_type = None
    if os.path.isfile(config_file):
        with open(config_file, encoding="utf-8") as f:
            model_type = json.load(f).get("model_type")
    if model_type == "realm_retriever":
        retriever = RealmRetriever.from_pretrained(path)
    elif model_type == "realm_open_qa":
        retriever = RealmForOpenQA.from_pretrained(path).retriever
    else:
        retriever = RealmRetriever.from_bert(path, projection_size=None, pooling="mean", normalize_embeddings=True)
    tokenizer_path = path if os.path.isfile(os.path.join(path, "tokenizer.json")) or os.path.isfile(
        os.path.join(path, "vocab.txt")
    ) else resolve_bert_path("minilm")
    return retriever.eval(), AutoTokenizer.from_pretrained(tokenizer_path)


def _load_articles(corpus: str, max_articles: int | None):
    from .training.pretrain import load_corpus_articles

    return load_corpus_articles(corpus, max_articles)


def build_index(
    corpus: str, model: str, output: str, index_type: str = "Flat", max_articles: int | None = None,
    block_length: int = 288, batch_size: int = 64, dtype: str = "bfloat16",
) -> RealmIndex:
    """Split a corpus into blocks, embed them with the retriever's document tower, save the index."""
    retriever, tokenizer = load_retriever(model)
    articles = _load_articles(corpus, max_articles)
    blocks = split_into_blocks(articles, tokenizer, max_length=min(block_length, retriever.config.block_max_length))
    autocast = None if dtype == "float32" else getattr(torch, dtype)
    index = RealmIndex.build(blocks, retriever, tokenizer=tokenizer, index_type=index_type, batch_size=batch_size, dtype=autocast)
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


def run_demo(max_articles: int | None, output: str, questions: list[str] | None, top_k: int, batch_size: int) -> None:
    """Index the embedded corpus with the packaged MiniLM and retrieve evidence for a few questions."""
    began = time.time()
    if os.path.isfile(os.path.join(output, "manifest.json")):
        logger.info("Reusing the index at %s (delete it to rebuild)", output)
        index = RealmIndex.from_pretrained(output)
    else:
        index = build_index("embedded", "minilm", output, max_articles=max_articles, batch_size=batch_size)
    retriever, tokenizer = load_retriever("minilm")
    logger.info("Index of %d blocks ready in %.0fs", index.num_blocks, time.time() - began)
    for question in questions or DEMO_QUESTIONS:
        _print_hits(question, search(index, retriever, tokenizer, [question], top_k)[0])


def build_index_command(args: argparse.Namespace) -> None:
    build_index(
        args.corpus, args.model, args.output, index_type=args.index_type, max_articles=args.max_articles,
        block_length=args.block_length, batch_size=args.batch_size, dtype=args.dtype,
    )


def search_command(args: argparse.Namespace) -> None:
    index = RealmIndex.from_pretrained(args.index)
    retriever, tokenizer = load_retriever(args.model)
    query = " ".join(args.query)
    _print_hits(query, search(index, retriever, tokenizer, [query], args.top_k)[0])


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


def ask_command(args: argparse.Namespace) -> int:
    """`realm-hf ask`: answer a question (or each line of stdin with --interactive) with evidence."""
    import sys

    from transformers import pipeline

    from .pipelines import OPEN_QA_TASK

    if args.interactive and args.question:
        print("error: pass a question or --interactive, not both", file=sys.stderr)
        return 2
    if not args.interactive and not args.question:
        print("error: pass a question, e.g. realm-hf ask \"who wrote hamlet\" --model DIR (or --interactive)", file=sys.stderr)
        return 2
    for name in ("top_k", "answers"):
        value = getattr(args, name)
        if value is not None and value < 1:
            print(f"error: --{name.replace('_', '-')} must be at least 1, got {value}", file=sys.stderr)
            return 2
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
        return 0 if answer(" ".join(args.question)) else 2
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

        path = snapshot_download(
            args.repo_id, revision=args.revision, cache_dir=args.cache_dir, local_files_only=args.local_files_only
        )
    print(path)
