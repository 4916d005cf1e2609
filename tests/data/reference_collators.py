"""The collation of REALM pre-training as it was before it was vectorized (realm_hf 568419e), kept verbatim as the
reference that tests/data/test_collator_equivalence.py compares the current `realm_hf.data.collators` with: same
tensors, same errors. Also the text-answer scan of `find_answer_spans` as it was (one answer tokenized per block, a
Python loop over the block's positions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from realm_hf.modeling.knowledge_encoder import IGNORE_INDEX


def _as_list(values: Any) -> list[int]:
    """Token ids from a list, a numpy array or a tensor."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    return [int(value) for value in values]


def old_pad_sequences(
    sequences: Sequence[Sequence[int]], pad_value: int, pad_to_multiple_of: int | None = None, length: int | None = None
) -> torch.Tensor:
    """Right-pad lists of ids to one length (the longest, or `length`, rounded up to `pad_to_multiple_of`): `[N, L]`."""
    longest = max((len(sequence) for sequence in sequences), default=0)
    length = longest if length is None else max(length, longest)
    if pad_to_multiple_of:
        length = -(-length // pad_to_multiple_of) * pad_to_multiple_of
    out = torch.full((len(sequences), length), pad_value, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        if len(sequence):
            out[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
    return out


class OldRealmPretrainingCollator:
    r"""
    Collate masked sentences and their retrieved blocks into the inputs of [`RealmRetriever`] and
    [`RealmKnowledgeEncoder`].

    For each masked example `x` (`[CLS] x_masked [SEP]` with `labels`, from [`build_masked_dataset`]) and its
    retrieved blocks `z` (rows of the blocks dataset with `input_ids` `[CLS] title [SEP] body [SEP]` and
    `token_type_ids`, the trivial candidate already excluded), it builds K candidates: the null document ∅ (the empty
    block `[CLS] [SEP] [SEP]`) first when `use_null_document`, then the retrieved blocks in order.

    Args:
        tokenizer: The BERT tokenizer (its `[CLS]`, `[SEP]` and pad ids are used).
        block_max_length (`int`, defaults to 288): Candidates longer than this are cut (their last id kept `[SEP]`).
        joined_max_length (`int`, defaults to 288):
            Length limit of `[CLS] x [SEP] z_body [SEP]`; the body is cut to fit.
        use_null_document (`bool`, defaults to `True`): Whether ∅ is candidate 0.
        pad_to_multiple_of (`int`, *optional*): Round padded lengths up to a multiple of this.

    Call it as `collator(examples, retrieved_blocks)` with `retrieved_blocks[b]` the list of block rows of example
    `b` (the same number for every example), or `collator(examples)` with each example holding them under
    `"retrieved_blocks"`.

    Returns a dict of `torch.long` tensors:
        - `query_input_ids`, `query_attention_mask`, `query_token_type_ids`: `[B, Lq]`;
        - `candidate_input_ids`, `candidate_attention_mask`, `candidate_token_type_ids`: `[B, K, Lb]`;
        - `input_ids`, `attention_mask`, `token_type_ids`: `[B, K, L]`, the joined sequences (token types 0 for
          `[CLS] x [SEP]`, 1 for `z_body [SEP]`);
        - `labels`: `[B, L]`, the example labels at the positions of the sentence (the same in every candidate),
          -100 elsewhere;
        - `candidate_block_ids`: `[B, K]`, the `block_id` of each candidate (-1 for ∅ or when unknown);
        - `source_block_ids`: `[B]`, the block each sentence came from (-1 when unknown);
    and `null_candidate_index`: the int 0 with the null document, else `None`.
    """

    def __init__(
        self,
        tokenizer: Any,
        block_max_length: int = 288,
        joined_max_length: int = 288,
        use_null_document: bool = True,
        pad_to_multiple_of: int | None = None,
    ):
        if block_max_length < 3:
            raise ValueError(f"block_max_length must be at least 3 ([CLS] [SEP] [SEP]), got {block_max_length}.")
        if joined_max_length < 4:
            raise ValueError(f"joined_max_length must be at least 4 ([CLS] x [SEP] [SEP]), got {joined_max_length}.")
        self.tokenizer = tokenizer
        self.block_max_length = block_max_length
        self.joined_max_length = joined_max_length
        self.use_null_document = use_null_document
        self.pad_to_multiple_of = pad_to_multiple_of
        self.cls_id = tokenizer.cls_token_id
        self.sep_id = tokenizer.sep_token_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        if self.cls_id is None or self.sep_id is None:
            raise ValueError("The tokenizer needs [CLS] and [SEP] tokens (a BERT wordpiece tokenizer).")

    @property
    def null_document(self) -> dict[str, list[int]]:
        """The null document ∅: an empty block `[CLS] [SEP] [SEP]` (empty title, empty body)."""
        return {"input_ids": [self.cls_id, self.sep_id, self.sep_id], "token_type_ids": [0, 0, 1], "block_id": -1}

    def _block(self, row: Mapping) -> tuple[list[int], list[int]]:
        """A block row as (ids, token types), cut to `block_max_length` with its final [SEP] kept."""
        ids = _as_list(row["input_ids"])
        types = _as_list(row["token_type_ids"]) if row.get("token_type_ids") is not None else None
        if types is None:
            first_sep = ids.index(self.sep_id) if self.sep_id in ids else len(ids) - 1
            types = [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
        if len(types) != len(ids):
            raise ValueError(f"A block has {len(ids)} input_ids but {len(types)} token_type_ids.")
        if len(ids) > self.block_max_length:
            ids, types = ids[: self.block_max_length], types[: self.block_max_length]
            ids[-1] = self.sep_id
        return ids, types

    def _body(self, ids: list[int], types: list[int]) -> list[int]:
        """The body wordpieces of `[CLS] title [SEP] body [SEP]`: the token type 1 part without its final [SEP]."""
        first = types.index(1) if 1 in types else len(ids)
        body = ids[first:]
        if body and body[-1] == self.sep_id:
            body = body[:-1]
        return body

    def __call__(
        self, examples: Sequence[Mapping], retrieved_blocks: Sequence[Sequence[Mapping]] | None = None
    ) -> dict[str, Any]:
        if not examples:
            raise ValueError("Cannot collate an empty batch.")
        if retrieved_blocks is None:
            if any("retrieved_blocks" not in example for example in examples):
                raise ValueError(
                    "Pass the retrieved blocks: collator(examples, retrieved_blocks) or a 'retrieved_blocks' key "
                    "in every example."
                )
            retrieved_blocks = [example["retrieved_blocks"] for example in examples]
        if len(retrieved_blocks) != len(examples):
            raise ValueError(f"Got {len(retrieved_blocks)} lists of retrieved blocks for {len(examples)} examples.")
        counts = {len(blocks) for blocks in retrieved_blocks}
        if len(counts) != 1:
            raise ValueError(
                f"Every example needs the same number of retrieved blocks, got {sorted(counts)}; retrieve k-1 blocks "
                "for each (after excluding the trivial candidate)."
            )
        num_retrieved = counts.pop()
        if num_retrieved == 0 and not self.use_null_document:
            raise ValueError("No retrieved blocks and no null document: every example needs at least one candidate.")

        queries, labels, query_lengths = [], [], []
        candidates, candidate_types, candidate_block_ids = [], [], []
        joined, joined_types = [], []
        source_block_ids = []
        for index, (example, blocks) in enumerate(zip(examples, retrieved_blocks)):
            query = _as_list(example["input_ids"])
            example_labels = _as_list(example["labels"])
            if len(example_labels) != len(query):
                raise ValueError(
                    f"Example {index} has {len(query)} input_ids but {len(example_labels)} labels; they must align."
                )
            if len(query) + 1 > self.joined_max_length:
                raise ValueError(
                    f"Example {index} has {len(query)} wordpieces, which leaves no room in joined_max_length="
                    f"{self.joined_max_length}; build the masked dataset with query_max_length < joined_max_length."
                )
            queries.append(query)
            labels.append(example_labels)
            query_lengths.append(len(query))
            source_block_ids.append(int(example.get("source_block_id", -1)))

            rows = ([self.null_document] if self.use_null_document else []) + list(blocks)
            room = self.joined_max_length - len(query) - 1  # [CLS] x [SEP] body [SEP]
            for row in rows:
                ids, types = self._block(row)
                candidates.append(ids)
                candidate_types.append(types)
                candidate_block_ids.append(int(row.get("block_id", -1)))
                body = self._body(ids, types)[:room]
                joined.append(query + body + [self.sep_id])
                joined_types.append([0] * len(query) + [1] * (len(body) + 1))

        batch_size, num_candidates = len(examples), len(candidates) // len(examples)
        multiple = self.pad_to_multiple_of

        query_input_ids = old_pad_sequences(queries, self.pad_id, multiple)  # [B, Lq]
        candidate_input_ids = old_pad_sequences(candidates, self.pad_id, multiple)  # [B*K, Lb]
        input_ids = old_pad_sequences(joined, self.pad_id, multiple)  # [B*K, L]
        joined_length = input_ids.shape[-1]

        def mask(lengths: list[int], length: int) -> torch.Tensor:
            return (torch.arange(length).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()

        batch = {
            "query_input_ids": query_input_ids,
            "query_attention_mask": mask(query_lengths, query_input_ids.shape[-1]),
            "query_token_type_ids": torch.zeros_like(query_input_ids),
            "candidate_input_ids": candidate_input_ids.view(batch_size, num_candidates, -1),
            "candidate_attention_mask": mask([len(c) for c in candidates], candidate_input_ids.shape[-1]).view(
                batch_size, num_candidates, -1
            ),
            "candidate_token_type_ids": old_pad_sequences(candidate_types, 0, length=candidate_input_ids.shape[-1]).view(
                batch_size, num_candidates, -1
            ),
            "input_ids": input_ids.view(batch_size, num_candidates, -1),
            "attention_mask": mask([len(j) for j in joined], joined_length).view(batch_size, num_candidates, -1),
            "token_type_ids": old_pad_sequences(joined_types, 0, length=joined_length).view(batch_size, num_candidates, -1),
            # the sentence comes first in every joined sequence, so its label positions are the query's
            "labels": old_pad_sequences(labels, IGNORE_INDEX, length=joined_length),  # [B, L]
            "candidate_block_ids": torch.tensor(candidate_block_ids, dtype=torch.long).view(batch_size, num_candidates),
            "source_block_ids": torch.tensor(source_block_ids, dtype=torch.long),
            "null_candidate_index": 0 if self.use_null_document else None,
        }
        return batch


def old_text_spans(block: list[Any], answers: Sequence[str], tokenizer: Any, max_span_width: int) -> set:
    """`realm_hf.data.answer_spans._text_spans` before answers could be tokenized once per question."""
    as_tokens = bool(block) and isinstance(block[0], str)
    unk_token_id = getattr(tokenizer, "unk_token_id", None)
    spans: set = set()
    for answer in answers:
        answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
        width = len(answer_ids)
        if width == 0 or width > max_span_width:
            continue
        if unk_token_id is not None and unk_token_id in answer_ids:
            continue
        needle = tokenizer.convert_ids_to_tokens(answer_ids) if as_tokens else answer_ids
        first = needle[0]
        for start in range(len(block) - width + 1):
            if block[start] == first and block[start : start + width] == needle:
                spans.add((start, start + width - 1))
    return spans
