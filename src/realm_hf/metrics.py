"""Open-QA metrics for REALM: exact match (text and regex answers), Recall@k and Retrieval Utility.

The definitions follow the reference implementations the REALM paper was compared against, so that numbers
are comparable with published ones:

- [`normalize_answer`] and text exact match are the official SQuAD v1.1 evaluation script.
- Regex exact match (CuratedTrec) is DrQA's / ORQA's `regex_match_score`, which REALM inherited from ORQA.
- [`has_answer`] (used by Recall@k) is DPR's `has_answer` from `dpr/data/qa_validation.py` with DPR's
  `SimpleTokenizer`.
- [`retrieval_utility`] is RU(z|x) from Appendix D of the REALM paper.
"""

from __future__ import annotations

import os
import re
import string
import unicodedata
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import regex
import torch


__all__ = [
    "ANSWER_FORMATS",
    "EVALUATE_MODULE_PATH",
    "bootstrap_interval",
    "CorpusAnswerFinder",
    "compile_answer_pattern",
    "evaluate_predictions",
    "exact_match",
    "has_answer",
    "normalize_answer",
    "recall_at_k",
    "retrieval_utility",
    "simple_tokenize",
]

AnswerFormat = Literal["text", "regex"]

ANSWER_FORMATS: tuple[str, ...] = ("text", "regex")
"""The answer formats understood by every function of this module."""

EVALUATE_MODULE_PATH: str = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "evaluate_metrics", "realm_open_qa"
)
"""Folder of the local `evaluate` metric wrapping this module: `evaluate.load(EVALUATE_MODULE_PATH)` works offline."""

# DPR's SimpleTokenizer: runs of letters/digits/marks, or any single other non-space, non-control character.
_SIMPLE_TOKEN_RE = regex.compile(
    r"([\p{L}\p{N}\p{M}]+)|([^\p{Z}\p{C}])", flags=regex.IGNORECASE + regex.UNICODE + regex.MULTILINE
)
# The flags of DrQA / ORQA / DPR for regex answers.
_ANSWER_REGEX_FLAGS = re.IGNORECASE | re.UNICODE | re.MULTILINE
_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """
    Normalizes an answer string exactly like the official SQuAD v1.1 evaluation script.

    Lowercases, removes ASCII punctuation (`string.punctuation`), removes the articles "a", "an" and "the" as
    whole words (so "theater" is kept), and collapses whitespace runs into single spaces. Non-ASCII punctuation
    (for example "—" or "’") and accents are kept, as in the official script.

    Args:
        text (`str`):
            The answer string to normalize.

    Returns:
        `str`: The normalized answer.

    Example:

    ```python
    >>> normalize_answer("The  Eiffel-Tower!")
    'eiffeltower'
    ```
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


def compile_answer_pattern(pattern: str) -> re.Pattern[str]:
    """
    Compiles a regex answer (CuratedTrec style) with the flags of DrQA, ORQA and DPR.

    The flags are `re.IGNORECASE | re.UNICODE | re.MULTILINE`. Unlike the reference implementations, which log
    and score a pattern that fails to compile as "no match", a bad pattern raises here: a silently wrong score is
    worse than a loud error.

    Args:
        pattern (`str`):
            The regular expression.

    Returns:
        `re.Pattern`: The compiled pattern.

    Raises:
        `ValueError`: If `pattern` is not a valid Python regular expression; the message names the pattern.
    """
    try:
        return re.compile(pattern, flags=_ANSWER_REGEX_FLAGS)
    except re.error as error:
        raise ValueError(
            f"Answer regex {pattern!r} does not compile ({error}). Fix the pattern in the dataset, or pass "
            "answer_format='text' if the answers are plain strings."
        ) from error


def _composed(text: str) -> str:
    r"""NFC, the form in which a regex answer and the text it is matched against are compared: an accented letter is
    one code point there, so an escaped one (CuratedTrec writes `Jes\ús`) and one inside a class (`V[áa]zquez`) keep
    their meaning (in NFD the escape or the class would take the bare letter and leave its accent outside)."""
    return unicodedata.normalize("NFC", text)


def _check_answer_format(answer_format: str) -> None:
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"answer_format must be one of {ANSWER_FORMATS}, got {answer_format!r}.")


def _as_reference_list(references: str | Sequence[str]) -> list[str]:
    # A bare string is one reference, not a sequence of one-character references.
    if isinstance(references, str):
        return [references]
    return list(references)


def exact_match(prediction: str, references: str | Sequence[str], answer_format: AnswerFormat = "text") -> bool:
    """
    Whether a predicted answer is correct: exact match against any reference answer.

    - `"text"`: `normalize_answer(prediction) == normalize_answer(reference)` for some reference (SQuAD v1.1).
    - `"regex"` (CuratedTrec): some reference pattern, compiled with `re.IGNORECASE | re.UNICODE |
      re.MULTILINE`, matches the *raw* prediction with `pattern.match(prediction)`. This is DrQA's and ORQA's
      `regex_match_score`, the code REALM was evaluated with: `match` is anchored at the start of the prediction
      but not at its end (so `"\\d+ years?"` accepts `"130 years ago"` but not `"about 130 years"`), and the
      prediction is not normalized beyond Unicode NFC, as the pattern (so `"The Beatles"` matches the pattern `"the beatles"` but `"Beatles"` does
      not). Use `^...$` in a pattern to require a full match.

    Args:
        prediction (`str`):
            The predicted answer string.
        references (`str` or `Sequence[str]`):
            The reference answers (strings for `"text"`, regular expressions for `"regex"`). A bare string is
            treated as a single reference. With no references, the prediction is wrong.
        answer_format (`str`, *optional*, defaults to `"text"`):
            `"text"` or `"regex"`.

    Returns:
        `bool`: `True` when the prediction matches at least one reference.

    Raises:
        `ValueError`: If `answer_format` is unknown or a regex reference does not compile.
    """
    _check_answer_format(answer_format)
    references = _as_reference_list(references)
    if answer_format == "regex":
        # Compile every pattern first so that a bad pattern raises even when an earlier one matched.
        patterns = [compile_answer_pattern(_composed(pattern)) for pattern in references]
        prediction = _composed(prediction)  # the same letters in the same form as the pattern's (NFC)
        return any(pattern.match(prediction) is not None for pattern in patterns)
    normalized_prediction = normalize_answer(prediction)
    return any(normalized_prediction == normalize_answer(reference) for reference in references)


def simple_tokenize(text: str) -> list[str]:
    """
    DPR's `SimpleTokenizer`, lowercased: runs of letters, digits and combining marks, and every other
    non-space character on its own.

    Args:
        text (`str`):
            The text to tokenize.

    Returns:
        `list[str]`: The lowercased tokens.

    Example:

    ```python
    >>> simple_tokenize("U.S. Route 66, (1926)")
    ['u', '.', 's', '.', 'route', '66', ',', '(', '1926', ')']
    ```
    """
    return [match.group().lower() for match in _SIMPLE_TOKEN_RE.finditer(text)]


def has_answer(
    text: str,
    references: str | Sequence[str],
    answer_format: AnswerFormat = "text",
    tokenizer: Callable[[str], list[str]] | None = None,
) -> bool:
    """
    Whether a retrieved block contains an answer, as DPR decides it for Recall@k (`dpr/data/qa_validation.py`).

    Text answers and the text are first put in Unicode NFD form (DPR's); regex answers and the text in NFC, so that an
    escaped accented letter or one in a character class means what it says.

    - `"text"`: the block and each answer are split into lowercased tokens ([`simple_tokenize`] by default) and
      the block contains the answer when the answer's tokens occur as a contiguous subsequence, so `"1889"`
      is found in `"in 1889, the tower"` but not in `"18890"`. Answers with no tokens are skipped (DPR would
      count an empty answer as found in every block).
    - `"regex"`: `pattern.search(text)` with `re.IGNORECASE | re.UNICODE | re.MULTILINE`, anywhere in the block.

    Args:
        text (`str`):
            The block text (title and body, as it should be searched).
        references (`str` or `Sequence[str]`):
            The reference answers; a bare string is a single reference.
        answer_format (`str`, *optional*, defaults to `"text"`):
            `"text"` or `"regex"`.
        tokenizer (`Callable[[str], list[str]]`, *optional*):
            Tokenizer for `"text"` answers, applied to both text and answers. Defaults to [`simple_tokenize`]
            (already lowercased); a custom one should lowercase as well if matching must ignore case.

    Returns:
        `bool`: `True` when the text contains at least one reference answer.

    Raises:
        `ValueError`: If `answer_format` is unknown or a regex reference does not compile.
    """
    _check_answer_format(answer_format)
    references = _as_reference_list(references)
    if answer_format == "regex":
        patterns = [compile_answer_pattern(_composed(pattern)) for pattern in references]
        text = _composed(text)
        return any(pattern.search(text) is not None for pattern in patterns)
    text = unicodedata.normalize("NFD", text)

    tokenize = tokenizer if tokenizer is not None else simple_tokenize
    text_tokens = tokenize(text)
    for reference in references:
        answer_tokens = tokenize(unicodedata.normalize("NFD", reference))
        width = len(answer_tokens)
        if width == 0:
            continue
        for start in range(len(text_tokens) - width + 1):
            if text_tokens[start : start + width] == answer_tokens:
                return True
    return False


def _expand_answer_formats(
    answer_formats: str | Sequence[str] | None, num_examples: int, argument: str = "answer_formats"
) -> list[str]:
    if answer_formats is None:
        return ["text"] * num_examples
    if isinstance(answer_formats, str):
        _check_answer_format(answer_formats)
        return [answer_formats] * num_examples
    answer_formats = list(answer_formats)
    if len(answer_formats) != num_examples:
        raise ValueError(
            f"{argument} has {len(answer_formats)} entries but there are {num_examples} examples; pass one "
            "format per example, a single format string for all, or None for 'text'."
        )
    for answer_format in answer_formats:
        _check_answer_format(answer_format)
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


class CorpusAnswerFinder:
    r"""
    Whether a question's answer occurs anywhere in a corpus, as [`has_answer`] decides it for one block: the questions
    a retriever over that corpus can find at all (the ceiling of Recall@k). The corpus is tokenized once, so each
    question costs one substring search.

    Args:
        texts (`Iterable[str]`):
            The corpus blocks, as retrieval shows them (title and body).

    Example:

    ```python
    >>> finder = CorpusAnswerFinder(["Paris. Paris is the capital of France.", "Berlin. It rains."])
    >>> finder.has_answer(["the capital of France"]), finder.has_answer(["Rome"])
    (True, False)
    ```
    """

    def __init__(self, texts):
        self.texts = list(texts)
        # one line per block, tokens between single spaces: a token sequence occurs in a block iff " a b c " is a
        # substring of its line (tokens hold no spaces or newlines, so no match crosses a block)
        self._joined = "\n".join(
            " " + " ".join(simple_tokenize(unicodedata.normalize("NFD", text))) + " " for text in self.texts
        )

    def has_answer(self, references: str | Sequence[str], answer_format: AnswerFormat = "text") -> bool:
        """Whether some block contains one of `references` (see [`has_answer`] for the formats)."""
        _check_answer_format(answer_format)
        references = _as_reference_list(references)
        if answer_format == "regex":
            return any(has_answer(text, references, "regex") for text in self.texts)
        for reference in references:
            tokens = simple_tokenize(unicodedata.normalize("NFD", reference))
            if tokens and " " + " ".join(tokens) + " " in self._joined:
                return True
        return False


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
