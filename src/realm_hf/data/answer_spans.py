"""Answer spans S(z, y) for the REALM Open-QA reader: where in a retrieved block the answer occurs.

The reader scores spans of `[CLS] x [SEP] z_body [SEP]` and is trained on `log Σ_{s∈S(z,y)} exp(score(s))`, so
training needs, for each retrieved block, every wordpiece span that spells a reference answer. As in ORQA and
REALM, a text answer is found by exact wordpiece-subsequence match with the answer tokenized by the same
tokenizer. Regex answers (CuratedTrec) are matched on the block text and mapped back to wordpieces with the fast
tokenizer's offset mapping.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from numbers import Integral
from typing import Any, Literal

import torch

from .answers import compile_answer_pattern


logger = logging.getLogger(__name__)

__all__ = ["find_answer_spans", "pad_answer_spans", "tokenize_text_answers"]

Span = tuple[int, int]

# Whitespace next to a punctuation character (anything neither a word character nor a space).
_SPACE_AROUND_PUNCTUATION = re.compile(r"\s+(?=[^\w\s])|(?<=[^\w\s])\s+")


def _as_block(block_token_ids: Sequence[int] | Sequence[str] | torch.Tensor) -> list[Any]:
    if isinstance(block_token_ids, torch.Tensor):
        if block_token_ids.dim() != 1:
            raise ValueError(
                f"block_token_ids must be one block (1-D), got a tensor of shape {tuple(block_token_ids.shape)}."
            )
        return block_token_ids.tolist()
    if isinstance(block_token_ids, str):
        raise ValueError("block_token_ids must be token ids or wordpiece strings, not a raw string; tokenize it first.")
    return list(block_token_ids)


def tokenize_text_answers(answers: str | Sequence[str], tokenizer: Any) -> list[list[int]]:
    """
    The wordpieces (without special tokens) of each text answer, as [`find_answer_spans`] matches them: pass them as
    its `answer_ids` to tokenize the answers of a question once for all of its retrieved blocks.
    """
    if isinstance(answers, str):
        answers = [answers]
    if not answers:
        return []
    return [list(ids) for ids in tokenizer(list(answers), add_special_tokens=False)["input_ids"]]


def _text_spans(
    block: list[Any], answers: Sequence[str], tokenizer: Any, max_span_width: int,
    answer_ids: Sequence[Sequence[int]] | None = None,
) -> set[Span]:
    as_tokens = bool(block) and isinstance(block[0], str)
    unk_token_id = getattr(tokenizer, "unk_token_id", None)
    spans: set[Span] = set()
    if answer_ids is None:
        answer_ids = [tokenizer(answer, add_special_tokens=False)["input_ids"] for answer in answers]
    for ids in answer_ids:
        ids = list(ids)
        width = len(ids)
        if width == 0 or width > max_span_width:
            continue
        # An answer the vocabulary cannot spell would "match" any unrelated [UNK] in the block.
        if unk_token_id is not None and unk_token_id in ids:
            continue
        needle = tokenizer.convert_ids_to_tokens(ids) if as_tokens else ids
        first, last_start = needle[0], len(block) - width
        if last_start < 0:  # the block is shorter than the answer
            continue
        start = -1
        while True:  # each occurrence of the answer's first wordpiece (list.index: the scan runs in C)
            try:
                start = block.index(first, start + 1, last_start + 1)
            except ValueError:
                break
            if block[start : start + width] == needle:
                spans.add((start, start + width - 1))
    return spans


def _offsets_if_round_trip(text: str, ids: list[int], tokenizer: Any) -> list[tuple[int, int] | None] | None:
    # Offsets are only valid when the text re-tokenizes to the very same wordpieces.
    encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    if list(encoding["input_ids"]) != ids:
        return None
    return [tuple(offset) for offset in encoding["offset_mapping"]]


def _incremental_offsets(ids: list[int], tokenizer: Any) -> tuple[str, list[tuple[int, int] | None]]:
    # Slow tokenizers have no offset mapping: grow the text one wordpiece at a time.
    offsets: list[tuple[int, int] | None] = []
    previous = ""
    for index in range(len(ids)):
        current = tokenizer.decode(ids[: index + 1], skip_special_tokens=False)
        if not current.startswith(previous):
            offsets.append(None)
        else:
            start = len(previous)
            while start < len(current) and current[start].isspace():
                start += 1
            offsets.append((start, len(current)) if start < len(current) else None)
        previous = current
    return previous, offsets


def _block_texts(ids: list[int], tokenizer: Any) -> list[tuple[str, list[tuple[int, int] | None]]]:
    """Readings of the block as text, each with the character span of every wordpiece (`None`: not placed)."""
    decoded = tokenizer.decode(ids, skip_special_tokens=False)
    if not getattr(tokenizer, "is_fast", False):
        return [_incremental_offsets(ids, tokenizer)]
    # Wordpieces do not record where the original text had spaces: decode gives "5, 778" and "u. s." for
    # "5,778" and "U.S.". A second reading without spaces around punctuation lets patterns written for either
    # spelling match; both readings re-tokenize to the same wordpieces, so their spans agree.
    compact = _SPACE_AROUND_PUNCTUATION.sub("", decoded)
    readings = []
    for text in dict.fromkeys([decoded, compact]):
        offsets = _offsets_if_round_trip(text, ids, tokenizer)
        if offsets is not None:
            readings.append((text, offsets))
    if not readings:
        readings.append(_incremental_offsets(ids, tokenizer))
    return readings


def _regex_spans(block: list[Any], answers: Sequence[str], tokenizer: Any, max_span_width: int) -> set[Span]:
    patterns = [compile_answer_pattern(answer) for answer in answers]
    ids = list(tokenizer.convert_tokens_to_ids(block)) if block and isinstance(block[0], str) else block
    spans: set[Span] = set()
    for text, offsets in _block_texts(ids, tokenizer):
        token_starting_at: dict[int, int] = {}
        token_ending_at: dict[int, int] = {}
        for index, offset in enumerate(offsets):
            if offset is None or offset[1] <= offset[0]:  # special tokens have empty offsets
                continue
            token_starting_at.setdefault(offset[0], index)
            token_ending_at[offset[1]] = index
        for pattern in patterns:
            for match in pattern.finditer(text):
                char_start, char_end = match.span()
                # Whitespace that a pattern swallows at its edges belongs to no wordpiece.
                while char_start < char_end and text[char_start].isspace():
                    char_start += 1
                while char_end > char_start and text[char_end - 1].isspace():
                    char_end -= 1
                if char_start == char_end:
                    continue
                start = token_starting_at.get(char_start)
                end = token_ending_at.get(char_end)
                # Only matches that begin and end on wordpiece boundaries map to a span.
                if start is None or end is None or end < start:
                    continue
                if end - start + 1 <= max_span_width:
                    spans.add((start, end))
    return spans


def find_answer_spans(
    block_token_ids: Sequence[int] | Sequence[str] | torch.Tensor,
    answers: str | Sequence[str],
    tokenizer: Any,
    answer_format: Literal["text", "regex"] = "text",
    max_span_width: int = 10,
    block_offset: int = 0,
    *,
    answer_ids: Sequence[Sequence[int]] | None = None,
) -> list[Span]:
    """
    Finds every wordpiece span of a block that spells a reference answer.

    - `"text"` answers are tokenized with `tokenizer` (no special tokens) and matched as exact contiguous
      subsequences of the block's wordpieces, as ORQA and REALM do. Answers containing the unknown token are
      skipped, since they would match any unrelated unknown token in the block.
    - `"regex"` answers (CuratedTrec) are searched with `re.finditer` (flags `IGNORECASE | UNICODE | MULTILINE`)
      in the block text decoded from its wordpieces; a match becomes a span only when it starts and ends exactly
      on wordpiece boundaries (given by the fast tokenizer's offset mapping). Whitespace at the edges of a match
      is ignored. Wordpieces do not record the original spacing, so the block is read twice: as
      `tokenizer.decode` gives it (`"5, 778"`, `"u. s."`) and with the spaces around punctuation removed
      (`"5,778"`, `"u.s."`); a match in either reading counts. The text is lowercased for uncased models, which
      the case-insensitive match does not mind.

    Args:
        block_token_ids (`Sequence[int]`, `Sequence[str]` or 1-D `torch.Tensor`):
            The block's wordpieces, as ids or as token strings, without padding.
        answers (`str` or `Sequence[str]`):
            The reference answers (regular expressions for `"regex"`); a bare string is a single answer.
        tokenizer ([`PreTrainedTokenizerBase`]):
            The reader's tokenizer. `"regex"` works best with a fast tokenizer; a slow one falls back to decoding
            the block one wordpiece at a time.
        answer_format (`str`, *optional*, defaults to `"text"`):
            `"text"` or `"regex"`.
        max_span_width (`int`, *optional*, defaults to 10):
            Longest span kept, in wordpieces (`end - start + 1`); longer matches are dropped, as the reader
            cannot score them.
        block_offset (`int`, *optional*, defaults to 0):
            Position of the block's first wordpiece in the joined reader sequence (`[CLS] x [SEP] z [SEP]` gives
            `len(x) + 2`); added to every returned position.
        answer_ids (`Sequence[Sequence[int]]`, *optional*):
            `"text"` answers only: their wordpieces from [`tokenize_text_answers`] (one list per answer, in order), so
            that the answers of a question are tokenized once for all of its blocks instead of once per block.

    Returns:
        `list[tuple[int, int]]`: Inclusive `(start, end)` positions, sorted and without duplicates; empty when the
        block contains no answer.

    Raises:
        `ValueError`: If `answer_format` is unknown, `max_span_width < 1`, `block_offset < 0`, or a regex answer
        does not compile.

    Example:

    ```python
    >>> ids = tokenizer("the eiffel tower was completed in 1889.", add_special_tokens=False)["input_ids"]
    >>> find_answer_spans(ids, ["Eiffel Tower"], tokenizer)  # "e ##iff ##el tower"
    [(1, 4)]
    ```
    """
    if answer_format not in ("text", "regex"):
        raise ValueError(f"answer_format must be 'text' or 'regex', got {answer_format!r}.")
    if max_span_width < 1:
        raise ValueError(f"max_span_width must be at least 1, got {max_span_width}.")
    if block_offset < 0:
        raise ValueError(f"block_offset must be non-negative, got {block_offset}.")
    if isinstance(answers, str):
        answers = [answers]
    block = _as_block(block_token_ids)
    if not block or not answers:
        return []
    if answer_ids is not None and (answer_format != "text" or len(answer_ids) != len(answers)):
        raise ValueError(
            f"answer_ids are the wordpieces of text answers, one list per answer: got {len(answer_ids)} for "
            f"{len(answers)} {answer_format} answers."
        )
    if answer_format == "text":
        spans = _text_spans(block, answers, tokenizer, max_span_width, answer_ids)
    else:
        spans = _regex_spans(block, answers, tokenizer, max_span_width)
    return [(start + block_offset, end + block_offset) for start, end in sorted(spans)]


def _is_span(item: Any) -> bool:
    return (
        isinstance(item, (tuple, list))
        and len(item) == 2
        and all(isinstance(value, Integral) and not isinstance(value, bool) for value in item)
    )


def _is_span_list(item: Any) -> bool:
    return isinstance(item, (tuple, list)) and all(_is_span(span) for span in item)


def _max_spans(item: Any) -> int:
    if _is_span_list(item):
        return len(item)
    return max((_max_spans(child) for child in item), default=0)


def _pad(item: Any, max_answers: int) -> tuple[list[Any], list[Any]]:
    if _is_span_list(item):
        kept = list(item)[:max_answers]
        padding = [-1] * (max_answers - len(kept))
        return [int(span[0]) for span in kept] + padding, [int(span[1]) for span in kept] + padding
    if not isinstance(item, (tuple, list)):
        raise ValueError(f"Expected a list of (start, end) spans or a list of such lists, got {type(item).__name__}.")
    padded = [_pad(child, max_answers) for child in item]
    return [starts for starts, _ in padded], [ends for _, ends in padded]


def pad_answer_spans(
    spans: Sequence[Sequence[Span]] | Sequence[Sequence[Sequence[Span]]], max_answers: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """
    Pads per-block span lists into `start_positions` and `end_positions` tensors, padding with -1.

    Args:
        spans (nested `Sequence` of `(start, end)` tuples):
            A list of span lists (one per block, e.g. the outputs of [`find_answer_spans`]) or a list of such
            lists (e.g. `[batch_size][num_candidates]`). Every list at the same depth must have the same length.
        max_answers (`int`, *optional*):
            Size of the last dimension. Blocks with more spans keep their first `max_answers`. Defaults to the
            largest number of spans of any block (at least 1).

    Returns:
        `tuple[torch.Tensor, torch.Tensor]`: `start_positions` and `end_positions`, `torch.long` of shape
        `(num_blocks, max_answers)` (or `(batch_size, num_candidates, max_answers)`), -1 where there is no span.

    Raises:
        `ValueError`: If `max_answers < 1` or the nesting is ragged.
    """
    if max_answers is None:
        max_answers = max(_max_spans(spans), 1)
    if max_answers < 1:
        raise ValueError(f"max_answers must be at least 1, got {max_answers}.")
    if len(spans) == 0:
        empty = torch.empty(0, max_answers, dtype=torch.long)
        return empty, empty.clone()
    if _is_span_list(spans):
        raise ValueError(
            "pad_answer_spans expects a list of span lists (one per block); wrap a single block in a list."
        )
    starts, ends = _pad(spans, max_answers)
    try:
        return torch.tensor(starts, dtype=torch.long), torch.tensor(ends, dtype=torch.long)
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"Span lists must nest evenly (the same number of blocks per example), got a ragged structure: {error}"
        ) from error
