"""The Open-QA span reader: `score(s) = MLP([h_start; h_end])` over `[CLS] question [SEP] block [SEP]`, and the
loss `-log Σ_z p(z | x) Σ_{s ∈ S(z, y)} p(s | z, x)` marginalized over retrieved blocks and matching spans."""

from __future__ import annotations

import os

import torch
from torch import nn

from ..configuration import RealmReaderConfig
from .common import (
    RealmPreTrainedModel, build_bert, check_same_shape, check_token_inputs, flatten_candidates, load_bert,
    run_bert,
)
from .outputs import RealmReaderOutput
from .retriever import load_bert_weights


def enumerate_spans(seq_length: int, max_span_width: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """All spans of 1..max_span_width positions, ordered by width then start (the order of the released code).

    Returns:
        `(starts [S], ends [S])`, inclusive positions.
    """
    starts, ends = [], []
    for width in range(1, min(max_span_width, seq_length) + 1):
        starts.append(torch.arange(seq_length - width + 1, device=device))
        ends.append(torch.arange(width - 1, seq_length, device=device))
    return torch.cat(starts), torch.cat(ends)


class RealmSpanScorer(nn.Module):
    """`MLP([h_start; h_end])`: the first layer is linear in the concatenation, so it is computed as the sum of a
    start and an end projection (no `[S, 2H]` tensor), then ReLU, LayerNorm and a linear output."""

    def __init__(self, config: RealmReaderConfig):
        super().__init__()
        hidden_size = config.bert_config.hidden_size
        self.dense_intermediate = nn.Linear(hidden_size, config.span_hidden_size * 2)
        self.layer_norm = nn.LayerNorm(config.span_hidden_size, eps=config.span_layer_norm_eps)
        self.dense_output = nn.Linear(config.span_hidden_size, 1)

    def forward(self, hidden: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        # hidden: [N, L, H]; starts, ends: [S]
        start_projection, end_projection = self.dense_intermediate(hidden).chunk(2, dim=-1)  # [N, L, P] each
        span_hidden = start_projection[:, starts] + end_projection[:, ends]  # [N, S, P]
        span_hidden = self.layer_norm(torch.relu(span_hidden))
        return self.dense_output(span_hidden).squeeze(-1)  # [N, S]


class RealmReader(RealmPreTrainedModel):
    r"""
    The REALM / ORQA reader. For each of K retrieved blocks it scores every span of up to
    `config.max_span_width` wordpieces inside the block part of `[CLS] question [SEP] block [SEP]`.

    With `relevance_scores` and gold spans, the loss is
    `-log Σ_z p(z | x) Σ_{s ∈ S(z, y)} p(s | z, x)` where `p(s | z, x)` is the softmax of span scores within block
    z. Questions whose answer occurs in no retrieved block contribute no loss. Any batch size works.

    With `config.span_normalization="global"` (ORQA's objective), `p(z | x)` is the softmax of the retrieval score
    plus the logsumexp of the block's span scores, so that `p(z | x) p(s | z, x)` is one softmax over every span of
    every retrieved block of `retrieval score + span score`; the reader then also says how well each block answers.

    Args:
        config ([`RealmReaderConfig`]): Model configuration.
    """

    config: RealmReaderConfig
    config_class = RealmReaderConfig

    def __init__(self, config: RealmReaderConfig):
        super().__init__(config)
        self.bert = build_bert(config.bert_config)
        self.span_scorer = RealmSpanScorer(config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.bert.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.bert.set_input_embeddings(value)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        block_mask: torch.Tensor | None = None,
        relevance_scores: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> RealmReaderOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_candidates, seq_length)`):
                The joined sequences `[CLS] question [SEP] block [SEP]`.
            attention_mask, token_type_ids (`torch.LongTensor` of shape `(batch_size, num_candidates, seq_length)`, *optional*)
            block_mask (`torch.BoolTensor` of shape `(batch_size, num_candidates, seq_length)`, *optional*):
                Positions an answer may start or end at. Defaults to the block's tokens: token type 1 and attended,
                excluding the final `[SEP]`.
            relevance_scores (`torch.FloatTensor` of shape `(batch_size, num_candidates)`, *optional*):
                Retriever scores; `p(z | x)` is their softmax (see `config.span_normalization`). Defaults to uniform.
            start_positions, end_positions (`torch.LongTensor` of shape `(batch_size, num_candidates, num_answers)`, *optional*):
                Inclusive gold span positions in each joined sequence, padded with -1.

        Returns:
            [`RealmReaderOutput`]
        """
        check_token_inputs("input_ids", input_ids, 3)
        check_same_shape(
            "input_ids", input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, block_mask=block_mask
        )
        batch_size, num_candidates, seq_length = input_ids.shape
        if relevance_scores is None:
            relevance_scores = input_ids.new_zeros((batch_size, num_candidates), dtype=torch.float32)
        elif relevance_scores.shape != (batch_size, num_candidates):
            raise ValueError(
                f"`relevance_scores` must have shape [B={batch_size}, K={num_candidates}], got "
                f"{list(relevance_scores.shape)}."
            )
        if block_mask is None:
            block_mask = default_block_mask(input_ids, attention_mask, token_type_ids)

        hidden, _ = run_bert(
            self.bert, flatten_candidates(input_ids), flatten_candidates(attention_mask),
            flatten_candidates(token_type_ids), length_buckets=self.config.length_buckets,
        )  # [B*K, L, H]
        starts, ends = enumerate_spans(seq_length, self.config.max_span_width, input_ids.device)  # [S], [S]
        span_logits = self.span_scorer(hidden, starts, ends).view(batch_size, num_candidates, -1).float()  # [B, K, S]
        valid = block_mask[:, :, starts] & block_mask[:, :, ends]  # [B, K, S]
        span_logits = span_logits.masked_fill(~valid, torch.finfo(span_logits.dtype).min)

        span_log_probs = torch.log_softmax(span_logits, dim=-1)  # [B, K, S]
        block_logits = relevance_scores.float()  # [B, K]
        if self.config.span_normalization == "global":  # one softmax over all (z, s) of score(z) + span(z, s)
            block_logits = block_logits + torch.logsumexp(span_logits, dim=-1)
        block_log_probs = torch.log_softmax(block_logits, dim=-1)  # [B, K]
        joint = (span_log_probs + block_log_probs.unsqueeze(-1)).masked_fill(
            ~valid, torch.finfo(span_logits.dtype).min
        )  # [B, K, S]
        best_score, best_flat = joint.view(batch_size, -1).max(dim=-1)  # [B], [B]
        best_candidate = best_flat // joint.shape[-1]
        best_span = best_flat % joint.shape[-1]

        loss = answerable = None
        if start_positions is not None or end_positions is not None:
            loss, answerable = self._marginal_span_loss(joint, starts, ends, start_positions, end_positions)
        return RealmReaderOutput(
            loss=loss,
            span_logits=span_logits,
            span_starts=starts,
            span_ends=ends,
            span_log_probs=span_log_probs,
            block_log_probs=block_log_probs,
            answerable=answerable,
            best_candidate=best_candidate,
            best_start=starts[best_span],
            best_end=ends[best_span],
            best_score=best_score,
        )

    @staticmethod
    def _marginal_span_loss(
        joint: torch.Tensor,
        starts: torch.Tensor,
        ends: torch.Tensor,
        start_positions: torch.Tensor | None,
        end_positions: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`-mean over answerable questions of logsumexp over (z, s ∈ S(z, y)) of log p(z|x) + log p(s|z,x)`."""
        if start_positions is None or end_positions is None:
            raise ValueError("Pass both `start_positions` and `end_positions` (padded with -1), or neither.")
        batch_size, num_candidates, _ = joint.shape
        if start_positions.shape != end_positions.shape or start_positions.shape[:2] != (batch_size, num_candidates):
            raise ValueError(
                f"`start_positions` {list(start_positions.shape)} and `end_positions` {list(end_positions.shape)} "
                f"must both have shape [B={batch_size}, K={num_candidates}, num_answers], padded with -1."
            )
        # [B, K, A, S]: span s of candidate k is gold answer a
        is_gold = (starts.view(1, 1, 1, -1) == start_positions.unsqueeze(-1)) & (
            ends.view(1, 1, 1, -1) == end_positions.unsqueeze(-1)
        )
        is_gold = is_gold.any(dim=2)  # [B, K, S]
        gold_scores = joint.masked_fill(~is_gold, float("-inf")).view(batch_size, -1)  # [B, K*S]
        answerable = is_gold.view(batch_size, -1).any(dim=-1)  # [B]
        if not answerable.any():
            # Nothing to learn from this batch; a zero that keeps the graph connected.
            # (clamped: masked spans hold finfo.min, and inf * 0 would be nan)
            return (joint.clamp(min=-1e4) * 0.0).sum(), answerable
        log_likelihood = torch.logsumexp(gold_scores[answerable], dim=-1)  # [B']
        return -log_likelihood.mean(), answerable

    @classmethod
    def from_bert(cls, bert_name_or_path: str | os.PathLike, **config_kwargs) -> "RealmReader":
        r"""
        Initialize the reader's encoder from a BERT checkpoint (the span scorer is initialized fresh).

        Args:
            bert_name_or_path (`str` or `os.PathLike`): A Hub id or a local BERT directory.
            config_kwargs: Overrides of [`RealmReaderConfig`].
        """
        bert = load_bert(bert_name_or_path, add_pooling_layer=False)
        config = RealmReaderConfig(bert_config=bert.config.to_dict(), **config_kwargs)
        model = cls(config)
        load_bert_weights(model.bert, bert)
        return model


def default_block_mask(
    input_ids: torch.Tensor, attention_mask: torch.Tensor | None, token_type_ids: torch.Tensor | None
) -> torch.Tensor:
    """Block positions of `[CLS] question [SEP] block [SEP]`: token type 1, attended, not the final `[SEP]`."""
    if token_type_ids is None:
        raise ValueError(
            "`token_type_ids` (0 for `[CLS] question [SEP]`, 1 for `block [SEP]`) or an explicit `block_mask` is "
            "needed to know where the block starts."
        )
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    block = (token_type_ids == 1) & (attention_mask == 1)  # [B, K, L]
    # the last attended position of each sequence is the final [SEP]
    last = attention_mask.cumsum(-1).argmax(-1, keepdim=True)  # [B, K, 1]
    return block & (torch.arange(input_ids.shape[-1], device=input_ids.device) != last)
