"""Open-QA evaluation of a `RealmForOpenQA` against a fixed index: exact match, Recall@k, predictions with provenance.

    metrics, predictions = evaluate_open_qa(model, tokenizer, index, load_qa_examples("nq-dev.jsonl"), top_k=5)

Per question: embed it with the query tower, retrieve the top-k blocks (dense MIPS, or BM25 over the same blocks),
score them with the blocks' stored embeddings, read `[CLS] question [SEP] body [SEP]` for each, and predict the span
maximizing `log p(z|x) + log p(s|z,x)`. Exact match follows `evaluation.answer_match.exact_match` (SQuAD normalization;
`pattern.match` for regex answers); Recall@k is DPR's `has_answer` on the title and body of the top-k blocks.
With `recall_at=(5, 20, 100)` one more pass retrieves (without reading) the top-100 blocks of each question and reports
the retriever's `retrieval_recall@5/20/100` on the same questions.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data.openqa import model_inputs, normalize_qa_example
from .answer_match import exact_match, has_answer
from .metrics import evaluate_predictions, recall_at_k
from .retrieval import RETRIEVALS, block_text, make_collator, retrieval_hits, retrieve_and_collate


logger = logging.getLogger(__name__)

__all__ = ["evaluate_open_qa", "parse_recall_at", "write_metrics_file"]


def parse_recall_at(value: str | Sequence[int] | None, option: str = "--recall_at") -> tuple[int, ...] | None:
    r"""
    The depths of [`evaluate_open_qa`]'s `recall_at`: `"5,20,100"` or `(5, 20, 100)` -> `(5, 20, 100)` (sorted, without
    repeats); `None` -> `None`.

    Raises:
        `ValueError`: naming `option` and the value, when a depth is not a positive integer.
    """
    if value is None:
        return None
    if isinstance(value, str):
        parts = [part.strip() for part in value.split(",")]
        ok = all(part.isdigit() and int(part) > 0 for part in parts)
        depths = [int(part) for part in parts] if ok else []
    else:
        depths = list(value) if isinstance(value, Sequence) else []
        ok = bool(depths) and all(
            isinstance(k, (int, np.integer)) and not isinstance(k, bool) and k > 0 for k in depths
        )
    if not ok:
        text = isinstance(value, str)
        wanted, example = ("comma-separated", "5,20,100") if text else ("a sequence of", "(5, 20, 100)")
        raise ValueError(f"{option} needs {wanted} positive integers, got {value!r} (e.g. {example}).")
    return tuple(sorted({int(k) for k in depths}))


@torch.no_grad()
def evaluate_open_qa(
    model: Any,
    tokenizer: Any,
    index: Any,
    examples: Sequence[Any],
    top_k: int | None = None,
    batch_size: int = 16,
    retrieval: str = "dense",
    bm25: Any = None,
    predictions_file: str | os.PathLike | None = None,
    device: torch.device | str | None = None,
    query_max_length: int | None = None,
    reader_max_length: int | None = None,
    truncate_questions: bool = True,
    progress: bool = True,
    recall_at: Sequence[int] | None = None,
) -> tuple[dict[str, float], list[dict[str, Any]]]:
    r"""
    Open-QA evaluation: exact match and Recall@k over `examples`, with per-question predictions and provenance.

    Results do not depend on `batch_size` (beyond float round-off in padded batches).

    Args:
        model (`RealmForOpenQA`): The model (put in eval mode for the call, then restored).
        tokenizer: Its tokenizer.
        index (`RealmIndex`): The fixed index the model retrieves from.
        examples: QA dicts `{"question", "answers", "answer_format"}` (see [`load_qa_examples`]).
        top_k (`int`, *optional*): Blocks read per question (default `model.config.top_k`).
        batch_size (`int`, defaults to 16): Questions per forward pass.
        retrieval (`str`, defaults to `"dense"`): `"dense"`, or `"bm25"` to retrieve with BM25 (`bm25`, a
            [`Bm25Retriever`]; built over `index.blocks` when not given) and read with the same reader. BM25's
            candidates are still weighted by the dense `p(z|x)` of their stored embeddings.
        predictions_file (`str`, *optional*): Write the predictions as JSONL there.
        device: Where the model runs (default: its device).
        query_max_length, reader_max_length (`int`, *optional*): Shorter limits than the model's config.
        truncate_questions (`bool`, defaults to `True`): Cut questions longer than `query_max_length` (one warning
            names them; `metrics["truncated_questions"]` counts them); with `False` they are refused before any batch
            runs (one error names them).
        progress (`bool`): Show a tqdm bar.
        recall_at (`Sequence[int]`, *optional*): Retrieval depths, e.g. `(5, 20, 100)`: one more pass retrieves the
            top `max(recall_at)` blocks of each question (the same `retrieval`, `batch_size` questions a search) without
            reading them, for the retriever's `retrieval_recall@{k}` at each depth (independent of `top_k`).

    Returns:
        `(metrics, predictions)`: `metrics` holds `exact_match` and `recall@{k}` (and `recall@1`) as percentages,
        `answerable` (percentage of questions with a gold span in the blocks the reader read: the reader's ceiling),
        `reader_exact_match` (exact match on the questions whose answer is in the retrieved blocks, `answer_in_top_k`:
        the reader's share of the errors apart from the retriever's; absent when there is none), `count`,
        `truncated_questions` (how many questions were cut to `query_max_length`), `seconds`;
        each prediction is a dict with `id`, `question`, `answers`, `answer_format`, `prediction`, `correct`,
        `score` (`log p(z|x) + log p(s|z,x)`), `retrieval_prob` (`p(z|x)` of the block), `block_id`, `title`,
        `evidence` (the block body with the answer marked `**...**`), `answer_in_top_k`, `retrieved_block_ids`.
        With `recall_at`, `metrics` holds `retrieval_recall@{k}` for each depth (percentages, by [`recall_at_k`]'s
        rule) and each prediction `retrieval_hits`, `{"5": bool, "20": bool, ...}`: whether an answer is in the top-k
        blocks of that question (for a bootstrap of the recall).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    examples = [normalize_qa_example(e, i, require_answers=True) for i, e in enumerate(examples)]
    if not examples:
        raise ValueError("evaluate_open_qa got no examples.")
    k = int(top_k or model.config.top_k)
    depths = parse_recall_at(recall_at, option="recall_at")
    if depths is not None and depths[-1] > index.num_blocks:
        raise ValueError(f"recall_at={depths[-1]} is more than the {index.num_blocks} blocks of the index; lower it.")
    if retrieval == "bm25" and bm25 is None:
        from ..index.bm25 import Bm25Retriever

        bm25 = Bm25Retriever(index)
    if retrieval not in RETRIEVALS:
        raise ValueError(f"retrieval must be one of {RETRIEVALS}, got {retrieval!r}.")
    collator = make_collator(model, tokenizer, query_max_length, reader_max_length, truncate_questions)
    truncated = collator.check_question_lengths(examples)  # before any batch: one question never stops the run
    device = torch.device(device) if device is not None else next(model.parameters()).device
    was_training = model.training
    model.eval()
    began = time.perf_counter()
    predictions: list[dict[str, Any]] = []
    retrieved_texts: list[list[str]] = []
    answerable = 0
    try:
        bar = tqdm(total=len(examples), desc="evaluate", disable=not progress)
        for start in range(0, len(examples), batch_size):
            chunk = examples[start : start + batch_size]
            batch = retrieve_and_collate(model, index, collator, chunk, k, device, retrieval=retrieval, bm25=bm25)
            inputs = {
                name: tensor.to(device)
                for name, tensor in model_inputs(batch).items()
                if name not in ("start_positions", "end_positions")
            }
            out = model(**inputs)
            retrieval_probs = out.retrieval_log_probs.exp().cpu()  # [B, k]
            answerable += int(batch["answerable"].sum())
            for b, example in enumerate(batch["examples"]):
                candidate = int(out.best_candidate[b])
                span_start, span_end = int(out.best_start[b]), int(out.best_end[b])
                block = batch["candidates"][b][candidate]
                answer, _, _ = block.span_to_text(span_start, span_end, tokenizer)
                texts = [block_text(c.title, c.text) for c in batch["candidates"][b]]
                retrieved_texts.append(texts)
                predictions.append(
                    {
                        "id": example["id"],
                        "question": example["question"],
                        "answers": example["answers"],
                        "answer_format": example["answer_format"],
                        "prediction": answer,
                        "correct": exact_match(answer, example["answers"], example["answer_format"]),
                        "score": float(out.best_score[b]),
                        "retrieval_prob": float(retrieval_probs[b, candidate]),
                        "block_id": block.block_id,
                        "title": block.title,
                        "evidence": block.evidence(span_start, span_end, tokenizer),
                        "answer_in_top_k": any(
                            has_answer(text, example["answers"], example["answer_format"]) for text in texts
                        ),
                        "retrieved_block_ids": [c.block_id for c in batch["candidates"][b]],
                        "retrieval": retrieval,
                    }
                )
            bar.update(len(chunk))
        bar.close()
        if depths is not None:
            hits = retrieval_hits(
                model, index, collator, examples, depths, batch_size, device, retrieval=retrieval, bm25=bm25,
                progress=progress,
            )
            for prediction, question_hits in zip(predictions, hits):
                prediction["retrieval_hits"] = question_hits
    finally:
        model.train(was_training)

    references = [p["answers"] for p in predictions]
    formats = [p["answer_format"] for p in predictions]
    metrics: dict[str, float] = dict(
        evaluate_predictions([p["prediction"] for p in predictions], references, formats)
    )
    metrics[f"recall@{k}"] = recall_at_k(retrieved_texts, references, k, formats)
    if k > 1:
        metrics["recall@1"] = recall_at_k(retrieved_texts, references, 1, formats)
    for depth in depths or ():
        found = sum(p["retrieval_hits"][str(depth)] for p in predictions)
        metrics[f"retrieval_recall@{depth}"] = 100.0 * found / len(predictions)
    metrics["answerable"] = 100.0 * answerable / len(predictions)
    metrics["truncated_questions"] = truncated
    retrieved = [p["correct"] for p in predictions if p["answer_in_top_k"]]
    if retrieved:  # the reader's share, apart from the retriever's
        metrics["reader_exact_match"] = 100.0 * sum(retrieved) / len(retrieved)
    metrics["seconds"] = time.perf_counter() - began
    if predictions_file is not None:
        directory = os.path.dirname(os.fspath(predictions_file))
        if directory:
            os.makedirs(directory, exist_ok=True)
        with open(predictions_file, "w", encoding="utf-8") as f:
            for prediction in predictions:
                f.write(json.dumps(prediction, ensure_ascii=False) + "\n")
        logger.info("Wrote %d predictions to %s", len(predictions), predictions_file)
    logger.info(
        "Open-QA (%s, k=%d) on %d questions: %s", retrieval, k, len(predictions),
        " ".join(f"{name}={value:.4g}" for name, value in metrics.items()),
    )
    return metrics, predictions


def write_metrics_file(path: str, metrics: dict[str, float], model: str, qa_file: str, retrieval: str = "dense") -> None:
    r"""
    Write Open-QA metrics as JSON `{"model", "qa_file", "retrieval", "exact_match", "recall@k", ...}`: the evaluation
    output that `realm_hf.hub.load_eval_results` reads into a model card.
    """
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"model": model, "qa_file": qa_file, "retrieval": retrieval, **metrics}, f, indent=2)
