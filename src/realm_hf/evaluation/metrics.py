"""Open-QA scores over a set of questions: exact match (REALM's Table 1), Recall@k, their bootstrap intervals, and
Retrieval Utility.

The definitions follow the reference implementations the REALM paper was compared against, so that numbers are
comparable with published ones (one answer at a time: [`exact_match`] and [`has_answer`], `evaluation.answer_match`):

- [`evaluate_predictions`]: exact match of predictions, the percentage of the paper's Table 1; the `evaluate` module
  in [`EVALUATE_MODULE_PATH`] wraps it.
- [`recall_at_k`]: DPR's "top-k retrieval accuracy".
- [`retrieval_utility`] is RU(z|x) from Appendix D of the REALM paper.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch

from ..data.answers import check_answer_format
from .answer_match import exact_match, has_answer


__all__ = ["EVALUATE_MODULE_PATH", "bootstrap_interval", "evaluate_predictions", "recall_at_k", "retrieval_utility"]

EVALUATE_MODULE_PATH: str = os.path.join(os.path.dirname(os.path.abspath(__file__)), "realm_open_qa")
"""Folder of the local `evaluate` metric wrapping this module: `evaluate.load(EVALUATE_MODULE_PATH)` works offline."""


def _expand_answer_formats(
    answer_formats: str | Sequence[str] | None, num_examples: int, argument: str = "answer_formats"
) -> list[str]:
    if answer_formats is None:
        return ["text"] * num_examples
    if isinstance(answer_formats, str):
        check_answer_format(answer_formats)
        return [answer_formats] * num_examples
    answer_formats = list(answer_formats)
    if len(answer_formats) != num_examples:
        raise ValueError(
            f"{argument} has {len(answer_formats)} entries but there are {num_examples} examples; pass one "
            "format per example, a single format string for all, or None for 'text'."
        )
    for answer_format in answer_formats:
        check_answer_format(answer_format)
    return answer_formats


def recall_at_k(
    retrieved_texts: Sequence[Sequence[str]],
    references: Sequence[Sequence[str]],
    k: int,
    answer_formats: str | Sequence[str] | None = None,
) -> float:
    """
    Recall@k (DPR's "top-k retrieval accuracy"): the percentage of questions for which at least one of the first
    `k` retrieved blocks contains an answer according to [`has_answer`].

    Args:
        retrieved_texts (`Sequence[Sequence[str]]`):
            For each question, the retrieved block texts, best first. A question with fewer than `k` blocks is
            judged on the blocks it has.
        references (`Sequence[Sequence[str]]`):
            For each question, its reference answers.
        k (`int`):
            How many of the top blocks count; at least 1.
        answer_formats (`str` or `Sequence[str]`, *optional*):
            One format per question, a single format for all, or `None` for `"text"`.

    Returns:
        `float`: Recall@k as a percentage in [0, 100] (the scale of the papers' tables).

    Raises:
        `ValueError`: If `k < 1`, the inputs are empty or have different lengths, or a format or regex is bad.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}.")
    if len(retrieved_texts) != len(references):
        raise ValueError(
            f"retrieved_texts has {len(retrieved_texts)} questions but references has {len(references)}; "
            "pass one list of references per question."
        )
    if len(references) == 0:
        raise ValueError("recall_at_k got no questions; pass at least one question.")
    formats = _expand_answer_formats(answer_formats, len(references))
    hits = 0
    for texts, answers, answer_format in zip(retrieved_texts, references, formats):
        if isinstance(texts, str):
            raise ValueError("Each entry of retrieved_texts must be a list of block texts, not a single string.")
        if any(has_answer(text, answers, answer_format) for text in list(texts)[:k]):
            hits += 1
    return 100.0 * hits / len(references)


def bootstrap_interval(
    hits: Sequence[bool | float], confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    r"""
    Percentile bootstrap interval of a percentage (exact match, Recall@k) over questions: the questions are resampled
    with replacement `resamples` times and the mean of each resample is taken.

    Args:
        hits (`Sequence[bool | float]`): One value per question (1/True when it counts, e.g. the answer was exact).
        confidence (`float`, defaults to 0.95): The interval's coverage.
        resamples (`int`, defaults to 10,000): Bootstrap resamples.
        seed (`int`, defaults to 0): Seed of the resampling (the interval is reproducible).

    Returns:
        `(low, high)`: the interval as percentages in [0, 100].

    Example:

    ```python
    >>> low, high = bootstrap_interval([True] * 30 + [False] * 70)
    >>> round(low), round(high)
    (21, 39)
    ```
    """
    values = np.asarray(hits, dtype=np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"bootstrap_interval needs one value per question, got shape {values.shape}.")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}.")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}.")
    generator = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 1000):  # 1,000 resamples at a time: [1000, N] indices
        stop = min(start + 1000, resamples)
        means[start:stop] = values[generator.integers(0, values.size, size=(stop - start, values.size))].mean(axis=1)
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return 100.0 * float(low), 100.0 * float(high)


def retrieval_utility(candidate_log_likelihood: torch.Tensor, null_log_likelihood: torch.Tensor) -> torch.Tensor:
    """
    Retrieval Utility of each candidate document (REALM paper, Appendix D):
    `RU(z|x) = log p(y|z,x) - log p(y|∅,x)`.

    Positive values mean that the document helps predict `y` more than the null document does. When both
    likelihoods are `-inf` (the answer is impossible either way) the result is `nan`.

    Args:
        candidate_log_likelihood (`torch.Tensor` of shape `(batch_size, num_candidates)`):
            `log p(y|z,x)` for each retrieved document `z`.
        null_log_likelihood (`torch.Tensor` of shape `(batch_size,)` or `(batch_size, 1)`):
            `log p(y|∅,x)`, the likelihood with the null (empty) document.

    Returns:
        `torch.Tensor` of shape `(batch_size, num_candidates)`: the Retrieval Utility of each candidate.

    Raises:
        `ValueError`: If the shapes do not line up.
    """
    if candidate_log_likelihood.dim() != 2:
        raise ValueError(
            "candidate_log_likelihood must have shape [batch_size, num_candidates], got "
            f"{tuple(candidate_log_likelihood.shape)}."
        )
    batch_size = candidate_log_likelihood.shape[0]
    if null_log_likelihood.dim() == 2 and null_log_likelihood.shape[1] == 1:
        null_log_likelihood = null_log_likelihood.squeeze(1)
    if null_log_likelihood.shape != (batch_size,):
        raise ValueError(
            f"null_log_likelihood must have shape [{batch_size}] (or [{batch_size}, 1]) to match "
            f"candidate_log_likelihood {tuple(candidate_log_likelihood.shape)}, got {tuple(null_log_likelihood.shape)}."
        )
    return candidate_log_likelihood - null_log_likelihood.unsqueeze(-1)  # [B, K]


def evaluate_predictions(
    predictions: Sequence[str],
    references: Sequence[Sequence[str]],
    answer_formats: str | Sequence[str] | None = None,
) -> dict[str, float | int]:
    """
    Exact match of a set of Open-QA predictions, as reported in the REALM paper (Table 1).

    Args:
        predictions (`Sequence[str]`):
            One predicted answer per question.
        references (`Sequence[Sequence[str]]`):
            For each question, its reference answers (strings, or regular expressions for `"regex"`).
        answer_formats (`str` or `Sequence[str]`, *optional*):
            One format per question, a single format for all, or `None` for `"text"`. See [`exact_match`].

    Returns:
        `dict`: `{"exact_match": float, "count": int}`, exact match as a percentage in [0, 100] and the number of
        questions.

    Raises:
        `ValueError`: If the inputs are empty or have different lengths, or a format or regex is bad.
    """
    if len(predictions) != len(references):
        raise ValueError(
            f"Got {len(predictions)} predictions but {len(references)} reference lists; pass one of each per question."
        )
    if len(predictions) == 0:
        raise ValueError("evaluate_predictions got no predictions; pass at least one question.")
    formats = _expand_answer_formats(answer_formats, len(predictions))
    correct = sum(
        exact_match(prediction, answers, answer_format)
        for prediction, answers, answer_format in zip(predictions, references, formats)
    )
    return {"exact_match": 100.0 * correct / len(predictions), "count": len(predictions)}
