"""Open-QA data: the collator that joins questions with their retrieved blocks (and, from `data.qa_examples`, the
question/answer examples: [`load_qa_examples`], [`normalize_qa_example`]).

An example is a dict `{"id", "question", "answers": [..], "answer_format": "text" | "regex"}` (the JSONL format of
`../shared/data/qa`; regex answers are CuratedTrec's). [`OpenQaCollator`] turns a batch of examples and, per
question, the K blocks retrieved from a `RealmIndex` into the inputs of `RealmForOpenQA`:

- the query tower reads `[CLS] question [SEP]`;
- the reader reads `[CLS] question [SEP] body [SEP]` for each block: the block *body* without its title, the
  sequence the knowledge-augmented encoder reads in pre-training (`[CLS] x [SEP] z_body [SEP]`), so a reader
  initialized from the pre-trained encoder sees the format it was trained on. Token types are 0 for
  `[CLS] question [SEP]` and 1 for `body [SEP]`, so `RealmReader`'s default block mask (token type 1, attended, not
  the final `[SEP]`) is exactly the body. The title stays available as provenance;
- gold spans `S(z, y)` come from [`find_answer_spans`] on the body wordpieces (text or regex answers).

The collator also keeps, for every candidate, what is needed to turn a predicted span back into text: the body's
character offsets (the block text re-tokenized with offsets, used when it gives back the stored wordpieces; else the
wordpieces are decoded) and the provenance (`block_id`, `title`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .answer_spans import find_answer_spans, pad_answer_spans, tokenize_text_answers
from .collators import pad_sequences
from .qa_examples import load_qa_examples, normalize_qa_example  # load_qa_examples: part of this module's API
from ..utils.messages import excerpt


logger = logging.getLogger(__name__)

__all__ = [
    "MODEL_INPUT_NAMES",
    "OpenQaCollator",
    "CandidateBlock",
    "load_qa_examples",
    "model_inputs",
    "normalize_qa_example",
]


MODEL_INPUT_NAMES = (
    "query_input_ids",
    "query_attention_mask",
    "query_token_type_ids",
    "reader_input_ids",
    "reader_attention_mask",
    "reader_token_type_ids",
    "candidate_embeds",
    "start_positions",
    "end_positions",
)
"""The keys of an [`OpenQaCollator`] batch that `RealmForOpenQA.forward` takes."""


def model_inputs(batch: Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """The `RealmForOpenQA.forward` arguments of a collated batch (drops provenance and diagnostics)."""
    return {name: batch[name] for name in MODEL_INPUT_NAMES if batch.get(name) is not None}


# ------------------------------------------------------------------------------------------------- collator
@dataclass
class CandidateBlock:
    r"""
    One retrieved block as the reader saw it, with what is needed to map a span back to text.

    Args:
        block_id (`int`): Id of the block in the index (-1 when unknown).
        title (`str`): Article title (provenance).
        text (`str`): The block body text (`""` when the blocks carry no text).
        body_start (`int`): Position of the first body wordpiece in the joined reader sequence.
        body_ids (`list[int]`): The body wordpieces the reader read (possibly cut to fit `reader_max_length`).
        char_offsets (`list[tuple[int, int]]`, *optional*): Character span in `text` of each body wordpiece, when
            `text` re-tokenizes to the stored wordpieces; otherwise `None` and answers are decoded from wordpieces.
    """

    block_id: int
    title: str
    text: str
    body_start: int
    body_ids: list[int]
    char_offsets: list[tuple[int, int]] | None = None

    def span_to_text(self, start: int, end: int, tokenizer: Any) -> tuple[str, int | None, int | None]:
        r"""
        The answer text of the inclusive joined-sequence span `(start, end)`.

        Returns:
            `(answer, char_start, char_end)`: the original text of the block when character offsets are known
            (then `text[char_start:char_end] == answer`), else the decoded wordpieces and `(None, None)`. A span
            outside the body gives `("", None, None)`.
        """
        first, last = start - self.body_start, end - self.body_start
        if first < 0 or last >= len(self.body_ids) or last < first:
            return "", None, None
        if self.char_offsets is not None:
            char_start, char_end = self.char_offsets[first][0], self.char_offsets[last][1]
            return self.text[char_start:char_end], char_start, char_end
        return tokenizer.decode(self.body_ids[first : last + 1]).strip(), None, None

    def evidence(self, start: int, end: int, tokenizer: Any, marker: str = "**", window: int = 200) -> str:
        """A snippet of the body around the span, the answer wrapped in `marker` (at most `window` chars each side)."""
        first, last = start - self.body_start, end - self.body_start
        if first < 0 or last >= len(self.body_ids) or last < first:
            return self.text[: 2 * window]
        if self.char_offsets is not None:
            char_start, char_end = self.char_offsets[first][0], self.char_offsets[last][1]
            before, answer, after = self.text[:char_start], self.text[char_start:char_end], self.text[char_end:]
        else:
            before = tokenizer.decode(self.body_ids[:first]).strip() + " "
            answer = tokenizer.decode(self.body_ids[first : last + 1]).strip()
            after = " " + tokenizer.decode(self.body_ids[last + 1 :]).strip()
        left = ("..." + before[-window:]) if len(before) > window else before
        right = (after[:window] + "...") if len(after) > window else after
        return f"{left}{marker}{answer}{marker}{right}"


def _as_int_list(values: Any) -> list[int]:
    if hasattr(values, "tolist"):
        values = values.tolist()
    return [int(v) for v in values]


def _rows_from_blocks(retrieved_blocks: Any, batch_size: int) -> list[list[Mapping]]:
    """`index.get_blocks(ids)` output (a dict of `[B][K]` columns) or `[B][K]` row dicts -> `[B][K]` row dicts."""
    if isinstance(retrieved_blocks, Mapping):
        columns = {name: values for name, values in retrieved_blocks.items()}
        if "input_ids" not in columns:
            raise ValueError(f"Retrieved blocks need an `input_ids` column, got {sorted(columns)}.")
        if len(columns["input_ids"]) != batch_size:
            raise ValueError(f"Got retrieved blocks for {len(columns['input_ids'])} questions, expected {batch_size}.")
        return [
            [{name: columns[name][b][k] for name in columns} for k in range(len(columns["input_ids"][b]))]
            for b in range(batch_size)
        ]
    rows = [list(blocks) for blocks in retrieved_blocks]
    if len(rows) != batch_size:
        raise ValueError(f"Got retrieved blocks for {len(rows)} questions, expected {batch_size}.")
    return rows


class OpenQaCollator:
    r"""
    Collate questions and their retrieved blocks into the inputs of [`RealmForOpenQA`].

    Reader sequences are `[CLS] question [SEP] body [SEP]` (the body without the title, as in pre-training; see the
    module docstring), token type 0 for the question part and 1 for `body [SEP]`; bodies are cut to fit
    `reader_max_length`.

    Args:
        tokenizer (`PreTrainedTokenizerFast`): The BERT wordpiece tokenizer of the model.
        query_max_length (`int`, defaults to 64): Longest `[CLS] question [SEP]`, in wordpieces. A longer question
            raises (or is cut with `truncate_questions=True`).
        reader_max_length (`int`, defaults to 288): Longest joined reader sequence.
        max_span_width (`int`, defaults to 10): Longest gold span kept (the reader's `max_span_width`).
        max_answers (`int`, *optional*): Gold spans kept per block (default: all).
        truncate_questions (`bool`, defaults to `False`): Cut over-long questions instead of raising.
        pad_to_multiple_of (`int`, *optional*): Round padded lengths up to a multiple of this.
        char_offsets (`bool`, defaults to `True`): Find each candidate's character offsets (its text tokenized
            again, every call), which map predicted spans back to the text; training, which maps no span, passes
            False (`CandidateBlock.char_offsets` is then None; the tensors are the same).

    Call it as `collator(examples, retrieved_blocks, candidate_embeds=None)`:
        - `examples`: `B` QA dicts (`question`, optional `answers` / `answer_format`) or question strings;
        - `retrieved_blocks`: what `RealmIndex.get_blocks(block_ids)` returns for `[B, K]` ids (a dict of `[B][K]`
          columns with `input_ids`, `token_type_ids`, and for provenance `block_id`, `title`, `text`), or `[B][K]`
          row dicts;
        - `candidate_embeds`: the blocks' stored embeddings `[B, K, D]` (tensor or array).

    Returns a dict with:
        - `query_input_ids`, `query_attention_mask`, `query_token_type_ids`: `[B, Lq]`;
        - `reader_input_ids`, `reader_attention_mask`, `reader_token_type_ids`: `[B, K, L]`;
        - `candidate_embeds`: `[B, K, D]` float32 (when given);
        - `start_positions`, `end_positions`: `[B, K, A]` inclusive gold spans padded with -1, and `answerable`
          `[B]` (some gold span in some block), when every example has answers;
        - `candidate_block_ids`: `[B, K]`;
        - `candidates`: `[B][K]` [`CandidateBlock`] (provenance and span -> text mapping);
        - `examples`: the normalized examples.
    Pass `model_inputs(batch)` to the model.
    """

    def __init__(
        self,
        tokenizer: Any,
        query_max_length: int = 64,
        reader_max_length: int = 288,
        max_span_width: int = 10,
        max_answers: int | None = None,
        truncate_questions: bool = False,
        pad_to_multiple_of: int | None = None,
        char_offsets: bool = True,
    ):
        if query_max_length < 3:
            raise ValueError(f"query_max_length must be at least 3 ([CLS] q [SEP]), got {query_max_length}.")
        if reader_max_length < query_max_length + 2:
            raise ValueError(
                f"reader_max_length={reader_max_length} leaves no room for a block after a question of up to "
                f"query_max_length={query_max_length} wordpieces; use reader_max_length > query_max_length + 1."
            )
        if max_span_width < 1:
            raise ValueError(f"max_span_width must be at least 1, got {max_span_width}.")
        self.tokenizer = tokenizer
        self.query_max_length = query_max_length
        self.reader_max_length = reader_max_length
        self.max_span_width = max_span_width
        self.max_answers = max_answers
        self.truncate_questions = truncate_questions
        self.pad_to_multiple_of = pad_to_multiple_of
        self.char_offsets = char_offsets
        self._last_questions: tuple[tuple[str, ...], list[list[int]]] | None = None  # see question_ids
        self.cls_id, self.sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        if self.cls_id is None or self.sep_id is None:
            raise ValueError("The tokenizer needs [CLS] and [SEP] tokens (a BERT wordpiece tokenizer).")

    # ------------------------------------------------------------------------------------------- questions
    def normalize_examples(self, examples: Sequence[Any]) -> list[dict[str, Any]]:
        """Check the batch's examples (see [`normalize_qa_example`]); raises on `None` / empty questions."""
        if isinstance(examples, (str, Mapping)) or not isinstance(examples, Sequence):
            raise ValueError("Pass a list of QA examples (dicts or question strings), not a single one.")
        if len(examples) == 0:
            raise ValueError("Cannot collate an empty batch of questions.")
        return [normalize_qa_example(example, i) for i, example in enumerate(examples)]

    def question_ids(self, questions: Sequence[str]) -> list[list[int]]:
        """`[CLS] question [SEP]` wordpieces of each question; raises on over-long questions unless truncating.

        The questions of the last call are remembered: a training step tokenizes its batch for retrieval
        ([`encode_questions`]) and again when it collates, and the second time costs a copy."""
        key = tuple(questions)
        if self._last_questions is not None and self._last_questions[0] == key:
            return [list(ids) for ids in self._last_questions[1]]
        out = self._question_ids(key)
        self._last_questions = (key, [list(ids) for ids in out])
        return out

    def _question_ids(self, questions: Sequence[str]) -> list[list[int]]:
        encoded = self.tokenizer(list(questions), add_special_tokens=True)["input_ids"]
        out = []
        for question, ids in zip(questions, encoded):
            if len(ids) > self.query_max_length:
                if not self.truncate_questions:
                    raise ValueError(
                        f"The question {excerpt(question)} has {len(ids)} wordpieces with [CLS]/[SEP], more than "
                        f"query_max_length={self.query_max_length}. Shorten it, raise query_max_length, or pass "
                        "truncate_questions=True."
                    )
                ids = ids[: self.query_max_length - 1] + [self.sep_id]
            out.append(list(ids))
        return out

    def check_question_lengths(self, examples: Sequence[Mapping[str, Any]], source: str | None = None) -> int:
        r"""
        Find the questions longer than `query_max_length` before any batch runs, so that one question never stops a
        job midway: with `truncate_questions` they are cut (one warning names them), else refused (one error names
        them and the fix).

        Args:
            examples (`Sequence[Mapping]`): Normalized QA examples (`id`, `question`; see [`normalize_qa_example`]).
            source (`str`, *optional*): Where they come from, for the messages (e.g. a file name).

        Returns:
            `int`: how many questions are cut (0 when none is too long).

        Raises:
            `ValueError`: without `truncate_questions`, when some question is too long.
        """
        encoded = self.tokenizer([example["question"] for example in examples], add_special_tokens=True)["input_ids"]
        lengths = [len(ids) for ids in encoded]
        over = [(example["id"], length) for example, length in zip(examples, lengths) if length > self.query_max_length]
        if not over:
            return 0
        named = ", ".join(f"id {example_id!r} ({length})" for example_id, length in over[:5])
        named += f" and {len(over) - 5} more" if len(over) > 5 else ""
        what = (
            f"{len(over)} of {len(examples)} questions{f' of {source}' if source else ''} are longer than "
            f"query_max_length={self.query_max_length} wordpieces with [CLS]/[SEP]: {named}"
        )
        if not self.truncate_questions:
            raise ValueError(f"{what}. Pass truncate_questions=True (--truncate_questions) to cut them to that length.")
        logger.warning("%s; they are cut to that length (truncated_questions in the metrics).", what)
        return len(over)

    def encode_questions(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        """The query-tower inputs `[B, Lq]` alone (for retrieval before the blocks are known)."""
        examples = self.normalize_examples(examples)
        return self._query_tensors(self.question_ids([e["question"] for e in examples]))

    def _query_tensors(self, queries: list[list[int]]) -> dict[str, torch.Tensor]:
        input_ids = pad_sequences(queries, self.pad_id, self.pad_to_multiple_of)  # [B, Lq]
        lengths = torch.tensor([len(q) for q in queries])
        return {
            "query_input_ids": input_ids,
            "query_attention_mask": (torch.arange(input_ids.shape[1])[None] < lengths[:, None]).long(),
            "query_token_type_ids": torch.zeros_like(input_ids),
        }

    # ----------------------------------------------------------------------------------------------- blocks
    def _body(self, row: Mapping) -> list[int]:
        """Body wordpieces of a `[CLS] title [SEP] body [SEP]` block: token type 1 without the final [SEP]."""
        ids = _as_int_list(row["input_ids"])
        types = row.get("token_type_ids")
        if types is not None:
            types = _as_int_list(types)
            if len(types) != len(ids):
                raise ValueError(f"A block has {len(ids)} input_ids but {len(types)} token_type_ids.")
            first = types.index(1) if 1 in types else len(ids)
        else:  # no token types: the body starts after the first [SEP]
            first = ids.index(self.sep_id) + 1 if self.sep_id in ids else 0
        body = ids[first:]
        if body and body[-1] == self.sep_id:
            body = body[:-1]
        return body

    def _char_offsets(self, texts: list[str], bodies: list[list[int]]) -> list[list[tuple[int, int]] | None]:
        """Character offsets of each body wordpiece in its text, when the text re-tokenizes to the same ids."""
        offsets: list[list[tuple[int, int]] | None] = [None] * len(texts)
        todo = [i for i, text in enumerate(texts) if text and bodies[i]]
        if not todo or not self.char_offsets or not getattr(self.tokenizer, "is_fast", False):
            return offsets
        encoded = self.tokenizer(
            [texts[i] for i in todo], add_special_tokens=False, return_offsets_mapping=True
        )
        for i, ids, mapping in zip(todo, encoded["input_ids"], encoded["offset_mapping"]):
            if list(ids) == bodies[i]:
                offsets[i] = [tuple(m) for m in mapping]
        return offsets

    def _text_answer_ids(self, examples: list[dict[str, Any]]) -> list[list[list[int]] | None]:
        """The wordpieces of each example's text answers (None for regex answers), from one tokenizer call for the
        batch: [`find_answer_spans`] then matches them in every retrieved block without tokenizing them again."""
        answers = [
            answer for example in examples if example["answer_format"] == "text" for answer in example["answers"]
        ]
        encoded = iter(tokenize_text_answers(answers, self.tokenizer))
        return [
            [next(encoded) for _ in example["answers"]] if example["answer_format"] == "text" else None
            for example in examples
        ]

    # ------------------------------------------------------------------------------------------------- call
    def __call__(
        self,
        examples: Sequence[Any],
        retrieved_blocks: Any,
        candidate_embeds: torch.Tensor | np.ndarray | None = None,
    ) -> dict[str, Any]:
        examples = self.normalize_examples(examples)
        batch_size = len(examples)
        rows = _rows_from_blocks(retrieved_blocks, batch_size)
        counts = {len(r) for r in rows}
        if len(counts) != 1 or 0 in counts:
            raise ValueError(f"Every question needs the same number K >= 1 of retrieved blocks, got {sorted(counts)}.")
        num_candidates = counts.pop()
        queries = self.question_ids([e["question"] for e in examples])
        with_answers = all(e["answers"] for e in examples)

        flat_rows = [row for question_rows in rows for row in question_rows]
        full_bodies = [self._body(row) for row in flat_rows]
        texts = [str(row.get("text") or "") for row in flat_rows]
        offsets = self._char_offsets(texts, full_bodies)
        answer_ids = self._text_answer_ids(examples) if with_answers else [None] * batch_size

        joined, joined_types, spans, candidates = [], [], [], []
        for b, (example, query) in enumerate(zip(examples, queries)):
            room = self.reader_max_length - len(query) - 1  # [CLS] q [SEP] body [SEP]
            question_candidates, question_spans = [], []
            for k in range(num_candidates):
                i = b * num_candidates + k
                row, body = flat_rows[i], full_bodies[i][:room]
                joined.append(query + body + [self.sep_id])
                joined_types.append([0] * len(query) + [1] * (len(body) + 1))
                question_candidates.append(
                    CandidateBlock(
                        block_id=int(row.get("block_id", -1) if row.get("block_id") is not None else -1),
                        title=str(row.get("title") or ""),
                        text=texts[i],
                        body_start=len(query),
                        body_ids=body,
                        char_offsets=offsets[i][: len(body)] if offsets[i] is not None else None,
                    )
                )
                if with_answers:
                    question_spans.append(
                        find_answer_spans(
                            body, example["answers"], self.tokenizer, answer_format=example["answer_format"],
                            max_span_width=self.max_span_width, block_offset=len(query), answer_ids=answer_ids[b],
                        )
                    )
            candidates.append(question_candidates)
            spans.append(question_spans)

        reader_input_ids = pad_sequences(joined, self.pad_id, self.pad_to_multiple_of)  # [B*K, L]
        length = reader_input_ids.shape[1]
        lengths = torch.tensor([len(j) for j in joined])
        batch: dict[str, Any] = self._query_tensors(queries)
        batch.update(
            {
                "reader_input_ids": reader_input_ids.view(batch_size, num_candidates, length),
                "reader_attention_mask": (torch.arange(length)[None] < lengths[:, None])
                .long()
                .view(batch_size, num_candidates, length),
                "reader_token_type_ids": pad_sequences(joined_types, 0, length=length).view(
                    batch_size, num_candidates, length
                ),
                "candidate_block_ids": torch.tensor(
                    [[c.block_id for c in cs] for cs in candidates], dtype=torch.long
                ),  # [B, K]
                "candidates": candidates,
                "examples": examples,
            }
        )
        if candidate_embeds is not None:
            embeds = torch.as_tensor(np.asarray(candidate_embeds) if not isinstance(candidate_embeds, torch.Tensor)
                                     else candidate_embeds).float()
            if embeds.dim() != 3 or tuple(embeds.shape[:2]) != (batch_size, num_candidates):
                raise ValueError(
                    f"candidate_embeds must have shape [B={batch_size}, K={num_candidates}, D], got "
                    f"{list(embeds.shape)}."
                )
            batch["candidate_embeds"] = embeds
        if with_answers:
            start_positions, end_positions = pad_answer_spans(spans, self.max_answers)  # [B, K, A]
            batch["start_positions"], batch["end_positions"] = start_positions, end_positions
            batch["answerable"] = (start_positions >= 0).flatten(1).any(-1)  # [B]
        return batch
