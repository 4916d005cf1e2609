"""The knowledge-augmented encoder of REALM pre-training: `p(y | z, x)` by masked language modeling over
`[CLS] x [SEP] z_body [SEP]`, marginalized over the K retrieved candidates."""

from __future__ import annotations

import os

import torch
from torch import nn
from transformers.models.bert.modeling_bert import BertOnlyMLMHead

from ..configuration import RealmKnowledgeEncoderConfig
from .common import (
    RealmPreTrainedModel, build_bert, check_same_shape, check_token_inputs, flatten_candidates, load_bert_for_masked_lm,
    run_bert,
)
from .outputs import RealmKnowledgeEncoderOutput

IGNORE_INDEX = -100
"""The label of a position that is not predicted (`labels`), as in `torch.nn.CrossEntropyLoss`; the data collators
and the masking pass write it."""


def marginalize_over_candidates(
    candidate_log_likelihood: torch.Tensor, relevance_scores: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`log p(y | x) = logsumexp_k (log p(y | z_k, x) + log_softmax(f)_k)`, all in log space.

    Args:
        candidate_log_likelihood: `[B, K]`, `log p(y | z_k, x)`.
        relevance_scores: `[B, K]`, `f(x, z_k)`.

    Returns:
        `(marginal [B], retrieval_log_probs [B, K], posterior_log_probs [B, K])`.
    """
    if relevance_scores.shape != candidate_log_likelihood.shape:
        raise ValueError(
            f"`relevance_scores` has shape {list(relevance_scores.shape)} but the candidates give "
            f"{list(candidate_log_likelihood.shape)}; pass one score per candidate ([B, K])."
        )
    retrieval_log_probs = torch.log_softmax(relevance_scores.float(), dim=-1)  # [B, K]
    joint = candidate_log_likelihood.float() + retrieval_log_probs  # [B, K]
    marginal = torch.logsumexp(joint, dim=-1)  # [B]
    posterior = joint - marginal.unsqueeze(-1)  # [B, K]
    return marginal, retrieval_log_probs, posterior


class RealmKnowledgeEncoder(RealmPreTrainedModel):
    r"""
    The REALM knowledge-augmented encoder: a BERT with a masked-LM head reading each masked sentence `x` joined
    with each retrieved document `z_k` as `[CLS] x [SEP] z_k [SEP]`.

    Given the retriever's `relevance_scores` `[B, K]`, the loss is the negative marginal log-likelihood
    `-mean_b log Σ_k p(y | z_k, x) p(z_k | x)`, with `p(y | z, x) = Π_j p(y_j | z, x)` over the masked positions.
    The loss is differentiable in `relevance_scores`, so the same loss trains the retriever. Vocabulary logits are
    computed only at masked positions (never a `[B, K, L, V]` tensor).

    Args:
        config ([`RealmKnowledgeEncoderConfig`]): Model configuration.
    """

    config: RealmKnowledgeEncoderConfig
    config_class = RealmKnowledgeEncoderConfig
    pretraining_checkpoint_folder = "encoder"
    _tied_weights_keys = {
        "mlm_head.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "mlm_head.predictions.decoder.bias": "mlm_head.predictions.bias",
    }

    def __init__(self, config: RealmKnowledgeEncoderConfig):
        super().__init__(config)
        self.bert = build_bert(config.bert_config)
        self.mlm_head = BertOnlyMLMHead(config.bert_config)
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.bert.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.bert.set_input_embeddings(value)

    def get_output_embeddings(self) -> nn.Module:
        return self.mlm_head.predictions.decoder

    def set_output_embeddings(self, new_embeddings: nn.Module) -> None:
        self.mlm_head.predictions.decoder = new_embeddings
        self.mlm_head.predictions.bias = new_embeddings.bias

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        relevance_scores: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        null_candidate_index: int | None = None,
        **kwargs,
    ) -> RealmKnowledgeEncoderOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, num_candidates, seq_length)`):
                The joined sequences `[CLS] x [SEP] z_k [SEP]`, the masked sentence first.
            attention_mask, token_type_ids (`torch.LongTensor` of shape `(batch_size, num_candidates, seq_length)`, *optional*)
            relevance_scores (`torch.FloatTensor` of shape `(batch_size, num_candidates)`, *optional*):
                Retriever scores `f(x, z_k)`; required for the loss. Gradients flow back into them.
            labels (`torch.LongTensor` of shape `(batch_size, seq_length)` or `(batch_size, num_candidates, seq_length)`, *optional*):
                Target token ids at the masked positions and `-100` elsewhere. A `[B, L]` tensor applies to every
                candidate (the sentence comes first, so its positions are the same in every joined sequence).
                Without labels, predictions are made at the `[MASK]` tokens (`config.mask_token_id`).
            null_candidate_index (`int`, *optional*):
                Position of the null document ∅ among the candidates; enables `retrieval_utility`.

        Returns:
            [`RealmKnowledgeEncoderOutput`]
        """
        check_token_inputs("input_ids", input_ids, 3)
        check_same_shape("input_ids", input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        batch_size, num_candidates, seq_length = input_ids.shape
        if relevance_scores is not None and relevance_scores.shape != (batch_size, num_candidates):
            raise ValueError(
                f"`relevance_scores` must have shape [B={batch_size}, K={num_candidates}], got "
                f"{list(relevance_scores.shape)}."
            )
        if null_candidate_index is not None and not 0 <= null_candidate_index < num_candidates:
            raise ValueError(
                f"`null_candidate_index`={null_candidate_index} is not a candidate position in [0, {num_candidates})."
            )
        masked = self._masked_positions(input_ids, labels)  # [B, K, L] bool

        hidden, _ = run_bert(
            self.bert, flatten_candidates(input_ids), flatten_candidates(attention_mask),
            flatten_candidates(token_type_ids), length_buckets=self.config.length_buckets,
        )  # [B*K, L, H]
        hidden = hidden.view(batch_size, num_candidates, seq_length, -1)  # [B, K, L, H]
        masked_positions = masked.nonzero()  # [M, 3]
        masked_token_logits = self.mlm_head(hidden[masked])  # [M, V]

        if labels is None:
            return RealmKnowledgeEncoderOutput(
                masked_token_logits=masked_token_logits, masked_positions=masked_positions
            )

        targets = self._expand_labels(labels, num_candidates)[masked]  # [M]
        token_log_probs = torch.log_softmax(masked_token_logits.float(), dim=-1)  # [M, V]
        target_log_probs = token_log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)  # [M]
        flat_candidate = masked_positions[:, 0] * num_candidates + masked_positions[:, 1]  # [M]
        candidate_log_likelihood = (
            target_log_probs.new_zeros(batch_size * num_candidates)
            .index_add(0, flat_candidate, target_log_probs)
            .view(batch_size, num_candidates)
        )  # [B, K]

        retrieval_utility = None
        if null_candidate_index is not None:
            retrieval_utility = candidate_log_likelihood - candidate_log_likelihood[:, null_candidate_index : null_candidate_index + 1]

        loss = marginal = retrieval_log_probs = posterior = None
        if relevance_scores is not None:
            marginal, retrieval_log_probs, posterior = marginalize_over_candidates(
                candidate_log_likelihood, relevance_scores
            )
            loss = -marginal.mean()
        return RealmKnowledgeEncoderOutput(
            loss=loss,
            marginal_log_likelihood=marginal,
            candidate_log_likelihood=candidate_log_likelihood,
            retrieval_log_probs=retrieval_log_probs,
            posterior_log_probs=posterior,
            retrieval_utility=retrieval_utility,
            masked_token_logits=masked_token_logits,
            masked_positions=masked_positions,
        )

    @staticmethod
    def _expand_labels(labels: torch.Tensor, num_candidates: int) -> torch.Tensor:
        if labels.dim() == 2:
            return labels.unsqueeze(1).expand(-1, num_candidates, -1)  # [B, K, L]
        return labels

    def _masked_positions(self, input_ids: torch.Tensor, labels: torch.Tensor | None) -> torch.Tensor:
        """Boolean `[B, K, L]` of the positions to predict, with clear errors for unusable labels."""
        batch_size, num_candidates, seq_length = input_ids.shape
        if labels is None:
            masked = input_ids == self.config.mask_token_id
            if not masked.any():
                raise ValueError(
                    f"No `labels` and no [MASK] token (id {self.config.mask_token_id}) in `input_ids`: nothing to "
                    "predict. Mask a span of the sentence or pass `labels`."
                )
            return masked
        if labels.dim() == 2:
            expected = (batch_size, seq_length)
        else:
            expected = (batch_size, num_candidates, seq_length)
        if tuple(labels.shape) != expected:
            raise ValueError(
                f"`labels` must have shape [B, L] = {list((batch_size, seq_length))} or [B, K, L] = "
                f"{list((batch_size, num_candidates, seq_length))}, got {list(labels.shape)}."
            )
        masked = self._expand_labels(labels, num_candidates) != IGNORE_INDEX  # [B, K, L]
        empty = ~masked.any(dim=-1)  # [B, K]
        if empty.any():
            example, candidate = empty.nonzero()[0].tolist()
            raise ValueError(
                f"`labels` of example {example} (candidate {candidate}) have no masked position (all -100): the "
                "marginal likelihood would be vacuous. Drop the example or mask at least one token."
            )
        vocab_size = self.config.bert_config.vocab_size
        targets = labels[labels != IGNORE_INDEX]
        if targets.numel() and (targets.min() < 0 or targets.max() >= vocab_size):
            raise ValueError(
                f"`labels` hold token ids outside [0, {vocab_size}) (min {targets.min().item()}, max "
                f"{targets.max().item()}); use -100 for positions that are not predicted."
            )
        return masked

    @classmethod
    def from_bert(cls, bert_name_or_path: str | os.PathLike, **config_kwargs) -> "RealmKnowledgeEncoder":
        r"""
        Initialize from a BERT checkpoint. Its MLM head is used when the checkpoint has one; otherwise (e.g.
        all-MiniLM-L6-v2) the decoder stays tied to the word embeddings and the head's transform is fresh.

        Args:
            bert_name_or_path (`str` or `os.PathLike`): A Hub id or a local BERT directory.
            config_kwargs: Overrides of [`RealmKnowledgeEncoderConfig`].
        """
        bert = load_bert_for_masked_lm(bert_name_or_path)
        config = RealmKnowledgeEncoderConfig(bert_config=bert.config.to_dict(), **config_kwargs)
        model = cls(config)
        model.bert.load_state_dict(bert.bert.state_dict())
        model.mlm_head.load_state_dict(bert.cls.state_dict())
        model.tie_weights()
        return model
