"""Whether an answer is right: exact match of a prediction, and an answer found in a retrieved block or a corpus.

- Text exact match is the official SQuAD v1.1 evaluation script's (normalization: `realm_hf.data.answers`).
- Regex exact match (CuratedTrec) is DrQA's / ORQA's `regex_match_score`, which REALM inherited from ORQA.
- [`has_answer`] (used by Recall@k) is DPR's `has_answer` from `dpr/data/qa_validation.py` with DPR's
  `SimpleTokenizer` ([`simple_tokenize`]); [`CorpusAnswerFinder`] asks it of a whole corpus at once.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence

import regex

from ..data.answers import (
    AnswerFormat, as_reference_list, check_answer_format, compile_answer_patterns, composed, normalize_answer,
)


__all__ = ["CorpusAnswerFinder", "exact_match", "has_answer", "simple_tokenize"]

# DPR's SimpleTokenizer: runs of letters/digits/marks, or any single other non-space, non-control character.
_SIMPLE_TOKEN_RE = regex.compile(
    r"([\p{L}\p{N}\p{M}]+)|([^\p{Z}\p{C}])", flags=regex.IGNORECASE + regex.UNICODE + regex.MULTILINE
)


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
    check_answer_format(answer_format)
    if answer_format == "regex":
        patterns = compile_answer_patterns(references)
        prediction = composed(prediction)  # the same letters in the same form as the pattern's (NFC)
        return any(pattern.match(prediction) is not None for pattern in patterns)
    references = as_reference_list(references)
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
    check_answer_format(answer_format)
    if answer_format == "regex":
        text = composed(text)
        return any(pattern.search(text) is not None for pattern in compile_answer_patterns(references))
    references = as_reference_list(references)
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
        check_answer_format(answer_format)
        references = as_reference_list(references)
        if answer_format == "regex":
            return any(has_answer(text, references, "regex") for text in self.texts)
        for reference in references:
            tokens = simple_tokenize(unicodedata.normalize("NFD", reference))
            if tokens and " " + " ".join(tokens) + " " in self._joined:
                return True
        return False
