"""The module REALM pre-training trains: the retriever and the knowledge-augmented encoder as one `nn.Module`, so that
Accelerate (DDP, DeepSpeed) wraps them once and each step is one forward call, its reading loss included."""

from __future__ import annotations

import os

import torch
from torch import nn

from ..data.collators import retriever_inputs
from ..modeling import RealmKnowledgeEncoder, RealmRetriever


class RealmPretrainingModel(nn.Module):
    """Retriever + knowledge-augmented encoder as one trainable module (one Accelerate/DDP wrapper)."""

    def __init__(self, retriever: RealmRetriever, encoder: RealmKnowledgeEncoder):
        super().__init__()
        self.retriever = retriever
        self.encoder = encoder

    def forward(
        self, batch: dict, null_candidate_index: int | None = None, train_retriever: bool = True,
        score_candidates: bool = True, reading_batch: dict | None = None, reading_loss_weight: float = 0.0,
    ):
        """`train_retriever=False` scores the candidates without building the retriever's graph (a frozen retriever,
        in a single process: distributed data parallel needs every parameter in the graph); `score_candidates=False`
        gives every candidate the same score, without running the retriever (one candidate: p(z|x) = 1).

        With `reading_batch` (sentences each with its own block as the only candidate, `[B', 1, L]`) the returned
        `loss` is REALM's plus `reading_loss_weight` times the masked-LM loss of reading them, and the output's
        `reading_loss` holds the latter (detached): both in this one call, as distributed data parallel needs.

        A `batch` holding `candidate_embeds` `[B, K, D]` (the document tower's embeddings of its candidates, computed
        by these very weights, e.g. an index just built from them) is scored with those instead of running the
        document tower again: held-out evaluation on a fresh index. Training never passes them: its index is stale."""
        if score_candidates:
            with torch.set_grad_enabled(train_retriever and torch.is_grad_enabled()):
                scores = self.retriever(**_scoring_inputs(batch), null_candidate_index=null_candidate_index).relevance_scores
        else:
            scores = _equal_scores(batch)
        out = self._encode(batch, scores, null_candidate_index)
        if reading_batch is not None:
            reading = self._encode(reading_batch, _equal_scores(reading_batch)).loss  # the own block: p(z|x) = 1
            out.loss = out.loss + reading_loss_weight * reading
            out.reading_loss = reading.detach()
        return out

    def _encode(self, batch: dict, scores: torch.Tensor, null_candidate_index: int | None = None):
        """The knowledge-augmented encoder on a candidate batch, its candidates scored `scores` `[B, K]`."""
        return self.encoder(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
            relevance_scores=scores,
            labels=batch["labels"],
            null_candidate_index=null_candidate_index,
        )

    def save_pretrained(self, directory: str) -> None:
        self.retriever.save_pretrained(os.path.join(directory, "retriever"))
        self.encoder.save_pretrained(os.path.join(directory, "encoder"))


def _scoring_inputs(batch: dict) -> dict:
    """The retriever's arguments for `batch`: its query and candidate tokens, or its query tokens and precomputed
    `candidate_embeds` `[B, K, D]` when the batch holds them."""
    inputs = retriever_inputs(batch)
    if batch.get("candidate_embeds") is None:
        return inputs
    return {name: value for name, value in inputs.items() if not name.startswith("candidate_")} | {
        "candidate_embeds": batch["candidate_embeds"]
    }


def _equal_scores(batch: dict) -> torch.Tensor:
    """The same score for every candidate of `batch`, `[B, K]` (without running the retriever)."""
    return batch["input_ids"].new_zeros(batch["input_ids"].shape[:2], dtype=torch.float32)
