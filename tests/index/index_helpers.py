"""Helpers of the index tests: synthetic blocks, clustered vectors and a tiny real embedding module."""

from __future__ import annotations

import datasets
import numpy as np
import torch
from torch import nn


VOCAB_SIZE = 50
PAD, CLS, SEP = 0, 1, 2


class MeanPoolEmbedder(nn.Module):
    """A fixed random embedding table, mean-pooled over the attention mask: `embed_fn(batch) -> [N, D]`."""

    def __init__(self, vocab_size: int = VOCAB_SIZE, dim: int = 16, seed: int = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim)
        with torch.no_grad():
            self.embedding.weight.copy_(torch.randn(vocab_size, dim, generator=torch.Generator().manual_seed(seed)))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        mask = batch["attention_mask"].unsqueeze(-1).float()  # [N, L, 1]
        summed = (self.embedding(batch["input_ids"]) * mask).sum(1)  # [N, D]
        return summed / mask.sum(1)


def make_blocks(num_blocks: int, seed: int = 0, min_len: int = 4, max_len: int = 20) -> datasets.Dataset:
    """Synthetic blocks with random lengths: `[CLS] t [SEP] body... [SEP]`."""
    rng = np.random.default_rng(seed)
    rows = {"block_id": [], "article_id": [], "title": [], "text": [], "input_ids": [], "token_type_ids": []}
    for i in range(num_blocks):
        body = rng.integers(3, VOCAB_SIZE, size=int(rng.integers(min_len, max_len))).tolist()
        title = int(rng.integers(3, VOCAB_SIZE))
        rows["block_id"].append(i)
        rows["article_id"].append(str(i // 3))
        rows["title"].append(f"title {i // 3}")
        rows["text"].append(f"block {i}")
        rows["input_ids"].append([CLS, title, SEP, *body, SEP])
        rows["token_type_ids"].append([0, 0, 0] + [1] * (len(body) + 1))
    return datasets.Dataset.from_dict(rows)


def clustered(num: int, dim: int, num_clusters: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`num` vectors around `num_clusters` random centers, and 64 queries drawn the same way."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((num_clusters, dim)).astype(np.float32) * 2.0
    vectors = centers[rng.integers(0, num_clusters, num)] + 0.5 * rng.standard_normal((num, dim)).astype(np.float32)
    queries = centers[rng.integers(0, num_clusters, 64)] + 0.5 * rng.standard_normal((64, dim)).astype(np.float32)
    return vectors.astype(np.float32), queries.astype(np.float32)
