"""Output dataclasses of the REALM models."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers.utils import ModelOutput


@dataclass
class RealmRetrieverOutput(ModelOutput):
    r"""
    Output of [`RealmRetriever`].

    Args:
        relevance_scores (`torch.FloatTensor` of shape `(batch_size, num_candidates)`):
            `f(x, z) = Embed_input(x)ᵀ Embed_doc(z)` for every candidate; `softmax` over the last dimension is
            `p(z | x)`. Differentiable with respect to both towers.
        query_embeds (`torch.FloatTensor` of shape `(batch_size, embedding_size)`):
            The query embeddings.
        candidate_embeds (`torch.FloatTensor` of shape `(batch_size, num_candidates, embedding_size)`):
            The candidate (document) embeddings.
    """

    relevance_scores: torch.FloatTensor | None = None
    query_embeds: torch.FloatTensor | None = None
    candidate_embeds: torch.FloatTensor | None = None


@dataclass
class RealmKnowledgeEncoderOutput(ModelOutput):
    r"""
    Output of [`RealmKnowledgeEncoder`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `labels` and `relevance_scores` are given):
            `-mean_b log Σ_k p(y | z_k, x) p(z_k | x)`, the negative marginal log-likelihood.
        marginal_log_likelihood (`torch.FloatTensor` of shape `(batch_size,)`, *optional*):
            `log p(y | x) = logsumexp_k (log p(y | z_k, x) + log p(z_k | x))`.
        candidate_log_likelihood (`torch.FloatTensor` of shape `(batch_size, num_candidates)`, *optional*):
            `log p(y | z_k, x) = Σ_j log p(y_j | z_k, x)` over the masked positions.
        retrieval_log_probs (`torch.FloatTensor` of shape `(batch_size, num_candidates)`, *optional*):
            `log p(z_k | x)`, the log-softmax of the relevance scores.
        posterior_log_probs (`torch.FloatTensor` of shape `(batch_size, num_candidates)`, *optional*):
            `log p(z_k | y, x)`; the gradient of the log-likelihood w.r.t. the relevance score of candidate k is
            `p(z_k | y, x) - p(z_k | x)` (paper, Appendix A).
        retrieval_utility (`torch.FloatTensor` of shape `(batch_size, num_candidates)`, *optional*):
            `RU(z_k | x) = log p(y | z_k, x) - log p(y | ∅, x)` (paper, Appendix D), when a null candidate is marked.
        masked_token_logits (`torch.FloatTensor` of shape `(num_masked, vocab_size)`, *optional*):
            Vocabulary logits at the masked positions only, in the order of `masked_positions`.
        masked_positions (`torch.LongTensor` of shape `(num_masked, 3)`, *optional*):
            `(batch index, candidate index, token position)` of each row of `masked_token_logits`.
    """

    loss: torch.FloatTensor | None = None
    marginal_log_likelihood: torch.FloatTensor | None = None
    candidate_log_likelihood: torch.FloatTensor | None = None
    retrieval_log_probs: torch.FloatTensor | None = None
    posterior_log_probs: torch.FloatTensor | None = None
    retrieval_utility: torch.FloatTensor | None = None
    masked_token_logits: torch.FloatTensor | None = None
    masked_positions: torch.LongTensor | None = None


@dataclass
class RealmReaderOutput(ModelOutput):
    r"""
    Output of [`RealmReader`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*):
            `-mean over answerable questions of log Σ_z p(z | x) Σ_{s ∈ S(z, y)} p(s | z, x)`.
        span_logits (`torch.FloatTensor` of shape `(batch_size, num_candidates, num_spans)`):
            Scores of all spans of up to `max_span_width` wordpieces; spans outside the block are `-inf`-like.
        span_starts (`torch.LongTensor` of shape `(num_spans,)`):
            Start position (inclusive) of each span in the joined sequence.
        span_ends (`torch.LongTensor` of shape `(num_spans,)`):
            End position (inclusive) of each span in the joined sequence.
        span_log_probs (`torch.FloatTensor` of shape `(batch_size, num_candidates, num_spans)`):
            `log p(s | z, x)`: span scores normalized within each block.
        block_log_probs (`torch.FloatTensor` of shape `(batch_size, num_candidates)`):
            `log p(z | x)` the reader weighs each block's spans by: the softmax of the retrieval scores (plus each
            block's span logsumexp with `span_normalization="global"`).
        answerable (`torch.BoolTensor` of shape `(batch_size,)`, *optional*):
            Whether an answer span occurs in at least one of the question's candidates.
        best_candidate (`torch.LongTensor` of shape `(batch_size,)`):
            Index of the candidate holding the best span, maximizing `log p(z | x) + log p(s | z, x)`.
        best_start (`torch.LongTensor` of shape `(batch_size,)`):
            Start position of the best span in that candidate's joined sequence.
        best_end (`torch.LongTensor` of shape `(batch_size,)`):
            End position of the best span.
        best_score (`torch.FloatTensor` of shape `(batch_size,)`):
            `log p(z | x) + log p(s | z, x)` of the best span.
    """

    loss: torch.FloatTensor | None = None
    span_logits: torch.FloatTensor | None = None
    span_starts: torch.LongTensor | None = None
    span_ends: torch.LongTensor | None = None
    span_log_probs: torch.FloatTensor | None = None
    block_log_probs: torch.FloatTensor | None = None
    answerable: torch.BoolTensor | None = None
    best_candidate: torch.LongTensor | None = None
    best_start: torch.LongTensor | None = None
    best_end: torch.LongTensor | None = None
    best_score: torch.FloatTensor | None = None


@dataclass
class RealmForOpenQAOutput(RealmReaderOutput):
    r"""
    Output of [`RealmForOpenQA`]: the reader's output plus the retrieval side.

    Args:
        relevance_scores (`torch.FloatTensor` of shape `(batch_size, num_candidates)`):
            Relevance of the retrieved blocks under the current query tower.
        retrieval_log_probs (`torch.FloatTensor` of shape `(batch_size, num_candidates)`):
            `log p(z | x)` over the retrieved blocks from the retriever alone (the reader's `block_log_probs` are
            what the answers are weighed by).
        query_embeds (`torch.FloatTensor` of shape `(batch_size, embedding_size)`):
            The question embeddings.
    """

    relevance_scores: torch.FloatTensor | None = None
    retrieval_log_probs: torch.FloatTensor | None = None
    query_embeds: torch.FloatTensor | None = None
