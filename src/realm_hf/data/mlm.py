"""Masked-LM examples for the start of the knowledge-augmented encoder: blocks of the knowledge corpus with random
wordpieces (or whole words) masked afresh at every step, BERT's recipe (15 %; of those 80 % [MASK], 10 % a random
token, 10 % kept), and a held-out split by article.

The REALM paper starts its encoder from BERT, a masked LM; where none can be downloaded (or a domain-adapted start is
wanted), `realm-hf mlm` trains one on these examples (`realm_hf.training.mlm`).
"""

from __future__ import annotations

from collections.abc import Sequence

import datasets
import numpy as np
import torch

from ..modeling.knowledge_encoder import IGNORE_INDEX
from .collators import pad_sequences

__all__ = ["MlmCollator", "mask_wordpieces", "split_held_out_articles"]


def split_held_out_articles(
    blocks: datasets.Dataset, num_articles: int, seed: int
) -> tuple[datasets.Dataset, datasets.Dataset]:
    r"""
    Split blocks into training blocks and the blocks of `num_articles` held-out articles (a seeded sample): no
    block of a held-out article is trained on, so held-out accuracy measures reading, not recall of the same text.

    Returns:
        `(train_blocks, held_out_blocks)`.
    """
    article_ids = np.asarray(blocks["article_id"])
    unique = np.unique(article_ids)
    if not 0 < num_articles < len(unique):
        raise ValueError(
            f"eval_articles={num_articles} must be between 1 and the corpus's {len(unique)} articles - 1 (some must "
            "be left to train on); lower --eval_articles or use more articles."
        )
    held_out = np.random.default_rng(seed).choice(unique, size=num_articles, replace=False)
    is_held_out = np.isin(article_ids, held_out)
    return blocks.select(np.flatnonzero(~is_held_out)), blocks.select(np.flatnonzero(is_held_out))


def mask_wordpieces(
    input_ids: torch.Tensor,
    maskable: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    probability: float = 0.15,
    generator: torch.Generator | None = None,
    continuation: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""
    BERT's masking of a padded batch: each maskable wordpiece (or whole word, with `continuation`) is chosen with
    `probability`; a chosen one becomes [MASK] (80 %), a random token (10 %) or stays (10 %). A row where nothing was
    chosen gets its likeliest maskable position, so every row has a label.

    Args:
        input_ids (`torch.LongTensor` of shape `(batch_size, seq_length)`)
        maskable (`torch.BoolTensor` of shape `(batch_size, seq_length)`): False at special tokens and padding.
        continuation (`torch.BoolTensor` of shape `(vocab_size,)`, *optional*): True for wordpieces that continue a
            word (`##...`): whole-word masking, a word's pieces chosen together.

    Returns:
        `(masked_input_ids, labels)`, both `[B, L]`; labels are the original ids at chosen positions, -100 elsewhere.
    """
    draws = torch.rand(input_ids.shape, generator=generator)  # [B, L]
    if continuation is not None:
        starts = ~continuation[input_ids] | ~maskable  # [B, L] a word starts here
        positions = torch.arange(input_ids.shape[1]).expand_as(input_ids)
        word_start = torch.where(starts, positions, 0).cummax(dim=1).values  # [B, L]
        draws = draws.gather(1, word_start)  # a word's pieces share their first piece's draw
    chosen = (draws < probability) & maskable  # [B, L]
    empty = ~chosen.any(dim=1) & maskable.any(dim=1)  # [B]
    if empty.any():
        fallback = draws.masked_fill(~maskable, 2.0).argmin(dim=1)  # [B]
        chosen[empty, fallback[empty]] = True
    labels = torch.where(chosen, input_ids, IGNORE_INDEX)
    action = torch.rand(input_ids.shape, generator=generator)  # [B, L]
    masked = input_ids.clone()
    masked[chosen & (action < 0.8)] = mask_token_id
    randomized = chosen & (action >= 0.8) & (action < 0.9)
    masked[randomized] = torch.randint(vocab_size, (int(randomized.sum()),), generator=generator)
    return masked, labels


class MlmCollator:
    r"""
    Blocks (`input_ids`, `token_type_ids`, as [`split_into_blocks`] writes them) to a masked-LM batch: padded
    `input_ids`, `attention_mask`, `token_type_ids` and `labels`, `[B, L]`, masked afresh at every call
    ([`mask_wordpieces`]); with `seed`, the same masks every time (held-out evaluation).

    Args:
        tokenizer: The BERT tokenizer of the blocks (special token ids, vocabulary for whole words).
        max_length (`int`): Longer blocks are cut (their last wordpiece becomes [SEP]).
        probability (`float`): Share of wordpieces (words) chosen.
        whole_word (`bool`): Choose whole words (all `##` pieces of a word together).
        seed (`int`, *optional*): Fixed masks (a generator reseeded at every call).
    """

    def __init__(
        self, tokenizer, max_length: int, probability: float = 0.15, whole_word: bool = False, seed: int | None = None
    ):
        if not 0.0 < probability < 1.0:
            raise ValueError(f"mlm_probability={probability} must be in (0, 1); BERT uses 0.15.")
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.probability = probability
        self.seed = seed
        self.vocab_size = len(tokenizer)
        self.special_ids = torch.tensor(sorted({tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id}))
        self.continuation = None
        if whole_word:
            continuation = torch.zeros(self.vocab_size, dtype=torch.bool)
            pieces = [i for token, i in tokenizer.get_vocab().items() if token.startswith("##")]
            continuation[pieces] = True
            self.continuation = continuation

    def __call__(self, examples: Sequence[dict]) -> dict[str, torch.Tensor]:
        sep = self.tokenizer.sep_token_id
        ids = [_cut(list(example["input_ids"]), self.max_length, sep) for example in examples]
        types = [list(example["token_type_ids"])[: self.max_length] for example in examples]
        input_ids = pad_sequences(ids, self.tokenizer.pad_token_id)  # [B, L]
        lengths = torch.tensor([len(row) for row in ids])
        attention_mask = (torch.arange(input_ids.shape[1])[None] < lengths[:, None]).long()  # [B, L]
        maskable = attention_mask.bool() & ~torch.isin(input_ids, self.special_ids)
        generator = torch.Generator().manual_seed(self.seed) if self.seed is not None else None
        masked, labels = mask_wordpieces(
            input_ids, maskable, self.tokenizer.mask_token_id, self.vocab_size, self.probability, generator,
            self.continuation,
        )
        return {
            "input_ids": masked, "attention_mask": attention_mask, "token_type_ids": pad_sequences(types, 0),
            "labels": labels,
        }


def _cut(ids: list[int], max_length: int, sep_id: int) -> list[int]:
    return ids if len(ids) <= max_length else ids[: max_length - 1] + [sep_id]
