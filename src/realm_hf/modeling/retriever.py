"""The REALM retriever: `f(x, z) = Embed_input(x)ᵀ Embed_doc(z)`, `p(z | x) = softmax_z f(x, z)`."""

from __future__ import annotations

import logging
import math
import os

import torch
import torch.nn.functional as F
from torch import nn
from transformers import BertModel
from transformers import initialization as init
from transformers.conversion_mapping import register_checkpoint_conversion_mapping
from transformers.core_model_loading import ConversionOps, WeightConverter

from ..configuration import RealmRetrieverConfig
from .common import (
    RealmPreTrainedModel, build_bert, check_same_shape, check_token_inputs, flatten_candidates, load_bert,
    run_bert,
)
from .outputs import RealmRetrieverOutput

logger = logging.getLogger(__name__)


class RealmEmbedder(nn.Module):
    """One tower: `W · pool(BERT(tokens))`, optionally LayerNorm-ed and L2-normalized."""

    def __init__(self, config: RealmRetrieverConfig):
        super().__init__()
        self.config = config  # read at each call: `length_buckets` may be changed on a loaded model
        self.pooling = config.pooling
        self.normalize = config.normalize_embeddings
        self.bert = build_bert(config.bert_config, add_pooling_layer=config.pooling == "pooler")
        hidden_size = config.bert_config.hidden_size
        if config.projection_size is None:
            self.projection = nn.Identity()
            self.layer_norm = nn.Identity()
        else:
            self.projection = nn.Linear(hidden_size, config.projection_size)
            self.layer_norm = (
                nn.LayerNorm(config.projection_size, eps=config.bert_config.layer_norm_eps)
                if config.projection_layer_norm
                else nn.Identity()
            )

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        hidden, pooler_output = run_bert(
            self.bert, input_ids, attention_mask, token_type_ids, length_buckets=self.config.length_buckets
        )  # [N, L, H], [N, H] or None
        if self.pooling == "cls":
            pooled = hidden[:, 0]  # [N, H]
        elif self.pooling == "pooler":
            pooled = pooler_output  # [N, H]
        else:
            weights = attention_mask.unsqueeze(-1).to(hidden.dtype)  # [N, L, 1]
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)  # [N, H]
        embeds = self.layer_norm(self.projection(pooled))  # [N, D]
        if self.normalize:
            embeds = F.normalize(embeds, dim=-1)
        return embeds


class RealmRetriever(RealmPreTrainedModel):
    r"""
    The REALM dense retriever: a query tower `Embed_input` and a document tower `Embed_doc` (one shared network
    when `config.share_towers`), each a BERT followed by a projection to `config.projection_size` dimensions.

    Queries are `[CLS] x [SEP]`; documents are `[CLS] title [SEP] body [SEP]` (token types 0 / 1). The relevance
    score is the inner product of the two embeddings (times `config.similarity_scale`); `p(z | x)` is its softmax
    over the candidates. With
    `config.null_document_score="learned"` the null document ∅ (when `forward` is told its position) is scored by a
    learned prior logit `null_document_logit` instead, so that `p(∅ | x) = e^b / (K-1 + e^b)`.

    Args:
        config ([`RealmRetrieverConfig`]): Model configuration.

    Example:

    ```python
    >>> retriever = RealmRetriever.from_bert("bert-base-uncased")
    >>> scores = retriever(query_input_ids=q.input_ids, candidate_input_ids=c.input_ids).relevance_scores  # [B, K]
    ```
    """

    config: RealmRetrieverConfig
    config_class = RealmRetrieverConfig
    pretraining_checkpoint_folder = "retriever"

    def __init__(self, config: RealmRetrieverConfig):
        super().__init__(config)
        self.query_embedder = RealmEmbedder(config)
        self.doc_embedder = None if config.share_towers else RealmEmbedder(config)
        if config.null_document_score == "learned":
            # b in p(∅ | x) = e^b / (K-1 + e^b); 0 gives ∅ the prior mass 1/K. Shape [1], not a 0-dim scalar:
            # DeepSpeed broadcasts parameters as byte views, which a 0-dim tensor cannot give
            self.null_document_logit = nn.Parameter(torch.zeros(1))
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        # also reached for a saved model without the logit (saved before it existed): it starts at 0, not garbage
        if module is self and hasattr(module, "null_document_logit"):
            init.zeros_(module.null_document_logit)

    def freeze_null_document_prior(self) -> None:
        r"""
        Stop training `null_document_logit` (when there is one): for training without ∅ among the candidates (ICT,
        Open-QA fine-tuning, pre-training with `use_null_document=False`), where it would get no gradient and
        distributed data parallel refuses unused trainable parameters.
        """
        if hasattr(self, "null_document_logit"):
            self.null_document_logit.requires_grad_(False)

    @property
    def document_embedder(self) -> RealmEmbedder:
        """The document tower (the query tower itself when towers are shared)."""
        return self.query_embedder if self.doc_embedder is None else self.doc_embedder

    def get_input_embeddings(self) -> nn.Module:
        return self.query_embedder.bert.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Module) -> None:
        self.query_embedder.bert.set_input_embeddings(value)

    def embed(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        tower: str = "query",
    ) -> torch.Tensor:
        r"""
        Embed token batches with one tower: queries `[CLS] x [SEP]` (`tower="query"`) or documents
        `[CLS] title [SEP] body [SEP]` (`tower="document"`, what the index stores).

        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, length)`): Token ids.
            attention_mask (`torch.LongTensor` of shape `(batch_size, length)`, *optional*): 1 for tokens.
            token_type_ids (`torch.LongTensor` of shape `(batch_size, length)`, *optional*): Segment ids (documents: 0
                title, 1 body).
            tower (`str`, defaults to `"query"`): `"query"` or `"document"`.

        Returns:
            `torch.FloatTensor` of shape `(batch_size, embedding_size)`.
        """
        towers = {"query": self.query_embedder, "document": self.document_embedder}
        if tower not in towers:
            raise ValueError(f"tower must be 'query' or 'document', got {tower!r}.")
        check_token_inputs("input_ids", input_ids, 2)
        check_same_shape("input_ids", input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return towers[tower](input_ids, attention_mask, token_type_ids)

    def embed_queries(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                      token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Embed queries `[CLS] x [SEP]` with the query tower: `(batch_size, embedding_size)` (see [`embed`])."""
        return self.embed(input_ids, attention_mask, token_type_ids, tower="query")

    def embed_documents(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                        token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Embed documents `[CLS] title [SEP] body [SEP]` with the document tower (what the index stores):
        `(num_docs, embedding_size)` (see [`embed`])."""
        return self.embed(input_ids, attention_mask, token_type_ids, tower="document")

    def forward(
        self,
        query_input_ids: torch.Tensor,
        candidate_input_ids: torch.Tensor | None = None,
        query_attention_mask: torch.Tensor | None = None,
        query_token_type_ids: torch.Tensor | None = None,
        candidate_attention_mask: torch.Tensor | None = None,
        candidate_token_type_ids: torch.Tensor | None = None,
        candidate_embeds: torch.Tensor | None = None,
        null_candidate_index: int | None = None,
        **kwargs,
    ) -> RealmRetrieverOutput:
        r"""
        Score K candidates per query. Differentiable w.r.t. both towers (or only the query tower when
        precomputed `candidate_embeds` from an index are given).

        Args:
            query_input_ids (`torch.LongTensor` of shape `(batch_size, query_length)`): Query token ids.
            candidate_input_ids (`torch.LongTensor` of shape `(batch_size, num_candidates, block_length)`, *optional*):
                Candidate block token ids. Either these or `candidate_embeds` are required.
            query_attention_mask, query_token_type_ids (`torch.LongTensor` of shape `(batch_size, query_length)`, *optional*)
            candidate_attention_mask, candidate_token_type_ids (`torch.LongTensor` of shape `(batch_size, num_candidates, block_length)`, *optional*)
            candidate_embeds (`torch.FloatTensor` of shape `(batch_size, num_candidates, embedding_size)`, *optional*):
                Precomputed document embeddings (for example from the index).
            null_candidate_index (`int`, *optional*):
                Position of the null document ∅ among the candidates. With `config.null_document_score="learned"`
                its score becomes `logsumexp(other scores) - log(K-1) + null_document_logit` (just the logit when
                K = 1), and the scores are returned in float32; with `"embedding"` it is only validated.

        Returns:
            [`RealmRetrieverOutput`]: `relevance_scores` `[B, K]`, `query_embeds` `[B, D]`, `candidate_embeds` `[B, K, D]`.
        """
        if (candidate_input_ids is None) == (candidate_embeds is None):
            raise ValueError("Pass exactly one of `candidate_input_ids` ([B, K, L]) or `candidate_embeds` ([B, K, D]).")
        query_embeds = self.embed_queries(query_input_ids, query_attention_mask, query_token_type_ids)  # [B, D]
        batch_size = query_embeds.shape[0]
        if candidate_input_ids is not None:
            check_token_inputs("candidate_input_ids", candidate_input_ids, 3)
            check_same_shape(
                "candidate_input_ids",
                candidate_input_ids,
                candidate_attention_mask=candidate_attention_mask,
                candidate_token_type_ids=candidate_token_type_ids,
            )
            if candidate_input_ids.shape[0] != batch_size:
                raise ValueError(
                    f"`candidate_input_ids` holds {candidate_input_ids.shape[0]} candidate sets for {batch_size} "
                    "queries; pass one set of K candidates per query ([B, K, L])."
                )
            num_candidates = candidate_input_ids.shape[1]
            candidate_embeds = self.embed_documents(
                flatten_candidates(candidate_input_ids),
                flatten_candidates(candidate_attention_mask),
                flatten_candidates(candidate_token_type_ids),
            ).view(batch_size, num_candidates, -1)  # [B, K, D]
        elif candidate_embeds.dim() != 3 or candidate_embeds.shape[0] != batch_size:
            raise ValueError(
                f"`candidate_embeds` must have shape [B={batch_size}, K, D], got {list(candidate_embeds.shape)}."
            )
        if candidate_embeds.shape[-1] != query_embeds.shape[-1]:
            raise ValueError(
                f"Candidate embeddings have {candidate_embeds.shape[-1]} dimensions but query embeddings have "
                f"{query_embeds.shape[-1]}; the index was built by another retriever configuration, rebuild it."
            )
        num_candidates = candidate_embeds.shape[1]
        if null_candidate_index is not None and (
            isinstance(null_candidate_index, bool)
            or not isinstance(null_candidate_index, int)
            or not 0 <= null_candidate_index < num_candidates
        ):
            raise ValueError(
                f"`null_candidate_index`={null_candidate_index!r} is not a candidate position in "
                f"[0, {num_candidates}); pass the position of the null document (the collator's "
                "`null_candidate_index`) or None."
            )
        candidate_embeds = candidate_embeds.to(query_embeds.dtype)
        # float32 even under autocast: p(z | x) is a softmax of these scores, and bf16 rounds a score of 74.41 to 74.0
        # (p(z | x) off by a factor 1.5); the towers themselves may run in low precision
        with torch.autocast(device_type=query_embeds.device.type, enabled=False):
            relevance_scores = torch.einsum("bd,bkd->bk", query_embeds.float(), candidate_embeds.float())  # [B, K]
        if self.config.similarity_scale != 1.0:
            relevance_scores = relevance_scores * self.config.similarity_scale  # cosines in [-1, 1] -> logits
        if null_candidate_index is not None and self.config.null_document_score == "learned":
            relevance_scores = self._with_null_document_prior(relevance_scores, null_candidate_index)
        return RealmRetrieverOutput(
            relevance_scores=relevance_scores, query_embeds=query_embeds, candidate_embeds=candidate_embeds
        )

    def _with_null_document_prior(self, relevance_scores: torch.Tensor, null_index: int) -> torch.Tensor:
        """Replace the score of ∅ by `logsumexp(others) - log(K-1) + b`, so `p(∅ | x) = e^b / (K-1 + e^b)`."""
        scores = relevance_scores.float()  # [B, K]; the prior must not suffer bf16 rounding of a large logsumexp
        others = torch.cat([scores[:, :null_index], scores[:, null_index + 1 :]], dim=1)  # [B, K-1]
        logit = self.null_document_logit.float().reshape(())  # [] (stored as [1])
        if others.shape[1] == 0:
            null_score = logit.expand(scores.shape[0])  # [B]; ∅ alone: p(∅ | x) = 1 anyway
        else:
            # Not detached. The loss depends on the retrieved scores only through q = softmax(others) (∅'s mass is a
            # function of b alone), and this expression is the exact forward of that function, so its gradient is
            # the true one: ∂ log p(y|x) / ∂f_k = post_k - q_k (1 - post_∅), which sums to zero over a shift of all
            # the scores. Detaching would hand the retriever the gradient of a *different* function (∅ at a fixed
            # offset), post_k - prior_k, whose sum prior_∅ - post_∅ ≠ 0 pushes every score up or down along a
            # direction the loss does not depend on: drift of the embedding norms for nothing.
            null_score = torch.logsumexp(others, dim=1) - math.log(others.shape[1]) + logit  # [B]
        return torch.cat([scores[:, :null_index], null_score[:, None], scores[:, null_index + 1 :]], dim=1)  # [B, K]

    @classmethod
    def from_bert(cls, bert_name_or_path: str | os.PathLike, **config_kwargs) -> "RealmRetriever":
        r"""
        Initialize both towers from a BERT checkpoint (the projection is initialized fresh).

        Args:
            bert_name_or_path (`str` or `os.PathLike`):
                A Hub id (`"bert-base-uncased"`) or a local directory holding a BERT (e.g. all-MiniLM-L6-v2).
            config_kwargs:
                Overrides of [`RealmRetrieverConfig`] (e.g. `projection_size=None, pooling="mean"`).
        """
        bert = load_bert(bert_name_or_path, add_pooling_layer=True)
        config = RealmRetrieverConfig(bert_config=bert.config.to_dict(), **config_kwargs)
        model = cls(config)
        towers = [model.query_embedder] if model.doc_embedder is None else [model.query_embedder, model.doc_embedder]
        for tower in towers:
            load_bert_weights(tower.bert, bert)
        return model


def load_bert_weights(target: BertModel, source: BertModel) -> None:
    """Copy the weights of `source` into `target`. The pooler is optional on both sides: one absent from the source
    stays freshly initialized, one absent from the target (it pools otherwise) is not needed."""
    missing, unexpected = target.load_state_dict(source.state_dict(), strict=False)
    missing = [name for name in missing if not name.startswith("pooler.")]
    unexpected = [name for name in unexpected if not name.startswith("pooler.")]
    if missing or unexpected:
        raise ValueError(
            f"The BERT checkpoint does not fit the REALM encoder: missing {missing}, unexpected {unexpected}."
        )


class _NullDocumentLogitAsVector(ConversionOps):
    """Loads a `null_document_logit` saved as a 0-dim scalar (checkpoints before it became shape [1]) as shape [1]."""

    @torch.no_grad()
    def convert(self, input_dict: dict, source_patterns: list[str], target_patterns: list[str], **kwargs) -> dict:
        tensors = next(iter(input_dict.values()))
        tensor = tensors[0] if isinstance(tensors, list) else tensors
        return {target_patterns[0]: tensor.reshape(1)}

    @property
    def reverse_op(self) -> ConversionOps:
        return _SameShape()


class _SameShape(ConversionOps):
    """Saving keeps shape [1]."""

    def convert(self, input_dict: dict, source_patterns: list[str], target_patterns: list[str], **kwargs) -> dict:
        tensors = next(iter(input_dict.values()))
        return {target_patterns[0]: tensors[0] if isinstance(tensors, list) else tensors}


def _register_null_document_logit_conversion() -> None:
    for owner, prefix in (("RealmRetriever", ""), ("RealmForOpenQA", "retriever.")):
        key = f"{prefix}null_document_logit"
        register_checkpoint_conversion_mapping(
            owner, [WeightConverter(key, key, [_NullDocumentLogitAsVector()])], overwrite=True
        )


_register_null_document_logit_conversion()
