"""Answer strings as the Open-QA evaluation compares them: SQuAD normalization and regex answers (CuratedTrec).

- [`normalize_answer`] is the official SQuAD v1.1 evaluation script's.
- Regex answers are compiled with DrQA's / ORQA's / DPR's flags ([`compile_answer_pattern`]) and compared in NFC.

The QA readers (`data.answer_spans` finds the gold spans with them), the Open-QA pipeline and the metrics
(`realm_hf.evaluation`) share these definitions, so they sit here, below all three.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Sequence
from typing import Literal


__all__ = [
    "ANSWER_FORMATS", "AnswerFormat", "as_reference_list", "check_answer_format", "compile_answer_pattern",
    "compile_answer_patterns", "composed", "normalize_answer",
]

AnswerFormat = Literal["text", "regex"]

ANSWER_FORMATS: tuple[str, ...] = ("text", "regex")
"""The answer formats understood by the answer and metric functions."""

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


def composed(text: str) -> str:
    r"""NFC, the form in which a regex answer and the text it is matched against are compared: an accented letter is
    one code point there, so an escaped one (CuratedTrec writes `Jes\ús`) and one inside a class (`V[áa]zquez`) keep
    their meaning (in NFD the escape or the class would take the bare letter and leave its accent outside)."""
    return unicodedata.normalize("NFC", text)


def check_answer_format(answer_format: str) -> None:
    """Raise `ValueError` naming the accepted formats unless `answer_format` is one of [`ANSWER_FORMATS`]."""
    if answer_format not in ANSWER_FORMATS:
        raise ValueError(f"answer_format must be one of {ANSWER_FORMATS}, got {answer_format!r}.")


def as_reference_list(references: str | Sequence[str]) -> list[str]:
    """The references as a list: a bare string is one reference, not a sequence of one-character references."""
    if isinstance(references, str):
        return [references]
    return list(references)


def compile_answer_patterns(references: str | Sequence[str]) -> list[re.Pattern[str]]:
    """Every regex reference compiled ([`compile_answer_pattern`]) in NFC, all of them first, so that a bad pattern
    raises even when an earlier one would have matched."""
    return [compile_answer_pattern(composed(pattern)) for pattern in as_reference_list(references)]
