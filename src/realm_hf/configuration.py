"""Configurations of the REALM models.

Every model reads its settings only from its config. Each config wraps one or more BERT configs (the
encoders are plain `BertModel`s) and adds the REALM-specific settings; invalid values raise a
`ValueError` that names the value and says what is allowed.
"""

from __future__ import annotations

import math
import os
from typing import Any, Literal

from huggingface_hub.dataclasses import strict
from transformers import BertConfig, PreTrainedConfig

try:
    from transformers.configuration_utils import SubConfigSpec
except ImportError as error:  # transformers < 5.20: a bare "cannot import name" says nothing of the fix
    import transformers

    raise ImportError(
        f"realm_hf needs transformers>=5.20 (its configs use SubConfigSpec); this environment has transformers "
        f"{transformers.__version__}: pip install 'transformers>=5.20,<6'."
    ) from error

POOLINGS = ("cls", "pooler", "mean")
"""How the retriever reduces BERT's outputs to one vector: the [CLS] row, BERT's pooler, or the mean of the tokens."""

# `BertConfig()` defaults are BERT-base, the encoder of the released REALM checkpoints.
_BERT_BASE: dict = {}


def _is_local_path(name: Any) -> bool:
    """Whether a recorded `_name_or_path` is a path of this machine rather than a Hub id."""
    return isinstance(name, str) and (os.path.isabs(name) or name.startswith(("./", "../", "~")) or os.sep + os.sep in name)


class _NoLocalPaths:
    """Saved (and published) REALM configs carry no path of the machine that wrote them: the `_name_or_path` of a
    nested BERT config made from a local folder (e.g. the packaged MiniLM inside a virtual environment) is cleared,
    as a Hub id is kept."""

    def to_dict(self) -> dict[str, Any]:
        output = super().to_dict()
        pending = [output]
        while pending:  # the config and every config nested in it, at any depth
            holder = pending.pop()
            if _is_local_path(holder.get("_name_or_path")):
                holder["_name_or_path"] = ""
            pending.extend(value for value in holder.values() if isinstance(value, dict))
        return output


def _check_positive(name: str, value: int | None, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"`{name}` must be a positive integer, got {value!r}.")


def _check_fits_positions(name: str, length: int, bert_config: BertConfig) -> None:
    if length > bert_config.max_position_embeddings:
        raise ValueError(
            f"`{name}`={length} exceeds the encoder's `max_position_embeddings`="
            f"{bert_config.max_position_embeddings}; use a length of at most "
            f"{bert_config.max_position_embeddings} or an encoder with more positions."
        )


@strict
class RealmRetrieverConfig(_NoLocalPaths, PreTrainedConfig):
    r"""
    Configuration of [`RealmRetriever`], the dense retriever `f(x, z) = Embed_input(x)ᵀ Embed_doc(z)`.

    Args:
        bert_config (`dict` or `BertConfig`, *optional*):
            The BERT encoder of the query tower (and of the document tower). Defaults to BERT-base.
        share_towers (`bool`, *optional*, defaults to `True`):
            Whether the query and the document embedders are one network (as in the released REALM
            checkpoints) or two networks of the same architecture (as in ORQA / DPR).
        projection_size (`int`, *optional*, defaults to 128):
            Size of the retrieval embeddings: `W · pooled` projects the pooled BERT vector to this many
            dimensions. `None` keeps the BERT hidden size and uses no projection (useful to start from a
            sentence-embedding model whose geometry a random projection would blur).
        projection_layer_norm (`bool`, *optional*, defaults to `True`):
            Whether a LayerNorm follows the projection, as in the released checkpoints.
        pooling (`str`, *optional*, defaults to `"cls"`):
            How the sequence is pooled before the projection: `"cls"` (the final [CLS] state), `"pooler"`
            (BERT's pooler, `tanh(W·h_CLS)`, which the released transformers-REALM checkpoints use) or `"mean"`
            (masked mean of the token states, how sentence-transformers models such as all-MiniLM-L6-v2 were
            trained).
        normalize_embeddings (`bool`, *optional*, defaults to `False`):
            Whether embeddings are L2-normalized (inner product becomes cosine similarity).
        similarity_scale (`float`, *optional*, defaults to 1.0):
            The relevance score is `similarity_scale · Embed_input(x)ᵀ Embed_doc(z)`. With normalized embeddings
            the inner products are cosines in [-1, 1], so `p(z | x)` over a handful of retrieved blocks is nearly
            uniform and the retriever can neither say which block to trust nor learn to: set the scale the model
            was trained with, e.g. 20 for all-MiniLM-L6-v2 (sentence-transformers'
            `MultipleNegativesRankingLoss`). Search is unchanged (a positive scale keeps the ranking).
        query_max_length (`int`, *optional*, defaults to 96):
            Maximum number of wordpieces of a query `[CLS] x [SEP]`.
        block_max_length (`int`, *optional*, defaults to 288):
            Maximum number of wordpieces of a block `[CLS] title [SEP] body [SEP]`.
        null_document_score (`str`, *optional*, defaults to `"learned"`):
            How the null document ∅ is scored when the caller says which candidate it is
            (`null_candidate_index` of [`RealmRetriever.forward`]):

            - `"learned"`: ∅ gets `logsumexp_k f(x, z_k) - log(K-1) + b` over the K-1 other candidates, with `b` a
              learned scalar (`RealmRetriever.null_document_logit`, initialized to 0). Hence
              `p(∅ | x) = e^b / (K-1 + e^b)`: a query-independent prior mass that starts at 1/K whatever the scale
              of the inner products, while the distribution among the retrieved blocks is unchanged.
            - `"embedding"`: ∅ is scored like any block, `Embed_input(x)ᵀ Embed_doc(empty block)`, as in the paper.

            `"learned"` is a deliberate departure from the paper. With an embedded empty block, ∅ must compete through
            the geometry of the embeddings, where its score can end up far below the retrieved blocks' (`p(∅ | x)`
            vanishes and the "no retrieval needed" path is dead; figures in docs/results.md). A learned prior keeps
            ∅ in the running and lets the marginal likelihood decide its mass. Checkpoints converted from the
            released REALM models use `"embedding"` (what they were trained with); saved models without this field
            load with the default and `null_document_logit` = 0.
        length_buckets (`int`, *optional*, defaults to 1):
            Run BERT over the candidate blocks of a batch in this many length buckets, each padded only to its own longest row (see
            [`realm_hf.modeling.common.run_bert`]): the same outputs to float rounding with less work on padding.
            1 runs them as one padded batch.
        corpus (`dict`, *optional*):
            The corpus this retriever was trained on and its index built over, recorded by pre-training, ICT and
            fine-tuning (`realm_hf.training.trained_corpus`): `name` (a path relative to the working directory of the
            run, a file name, or `"embedded"`; never a machine's absolute path), `max_articles` and `blocks`. A
            fine-tuning started from this model without `--corpus` takes that corpus, or refuses when it is gone.
            None: unknown (a BERT start, a converted checkpoint).

    Example:

    ```python
    >>> from realm_hf import RealmRetrieverConfig, RealmRetriever
    >>> config = RealmRetrieverConfig(bert_config={"hidden_size": 32, "num_hidden_layers": 2,
    ...     "num_attention_heads": 2, "intermediate_size": 64})
    >>> retriever = RealmRetriever(config)
    ```"""

    model_type = "realm_retriever"
    sub_configs_defaults = {"bert_config": SubConfigSpec(BertConfig, init_kwargs=_BERT_BASE)}

    bert_config: dict | PreTrainedConfig | None = None
    share_towers: bool = True
    projection_size: int | None = 128
    projection_layer_norm: bool = True
    pooling: Literal["cls", "pooler", "mean"] = "cls"
    normalize_embeddings: bool = False
    similarity_scale: float = 1.0
    query_max_length: int = 96
    block_max_length: int = 288
    null_document_score: Literal["learned", "embedding"] = "learned"
    length_buckets: int = 1
    corpus: dict | None = None

    def validate_realm_retriever(self):
        """Part of `@strict` validation: REALM-specific values."""
        _check_positive("projection_size", self.projection_size, allow_none=True)
        if self.pooling not in POOLINGS:
            raise ValueError(f"`pooling` must be 'cls', 'pooler' or 'mean', got {self.pooling!r}.")
        if self.null_document_score not in ("learned", "embedding"):
            raise ValueError(
                f"`null_document_score` must be 'learned' (a learned prior logit for the null document) or "
                f"'embedding' (embed the empty block like any document), got {self.null_document_score!r}."
            )
        if isinstance(self.similarity_scale, bool) or not (
            isinstance(self.similarity_scale, (int, float)) and math.isfinite(self.similarity_scale)
            and self.similarity_scale > 0
        ):
            raise ValueError(
                f"`similarity_scale` must be a finite number > 0 (e.g. 20 for normalized embeddings), got "
                f"{self.similarity_scale!r}."
            )
        _check_positive("query_max_length", self.query_max_length)
        _check_positive("block_max_length", self.block_max_length)
        _check_positive("length_buckets", self.length_buckets)
        _check_fits_positions("query_max_length", self.query_max_length, self.bert_config)
        _check_fits_positions("block_max_length", self.block_max_length, self.bert_config)

    @property
    def embedding_size(self) -> int:
        """Dimension `D` of the query and document embeddings."""
        return self.projection_size if self.projection_size is not None else self.bert_config.hidden_size


@strict
class RealmKnowledgeEncoderConfig(_NoLocalPaths, PreTrainedConfig):
    r"""
    Configuration of [`RealmKnowledgeEncoder`], the knowledge-augmented encoder `p(y | z, x)` used in
    pre-training: a BERT with a masked-LM head over `[CLS] x [SEP] z_body [SEP]`.

    Args:
        bert_config (`dict` or `BertConfig`, *optional*):
            The BERT encoder. Defaults to BERT-base.
        num_candidates (`int`, *optional*, defaults to 8):
            Number of documents per masked sentence in pre-training, the null document included.
        use_null_document (`bool`, *optional*, defaults to `True`):
            Whether every candidate set holds the null document ∅ (an empty block), so the model can put
            probability on "no retrieval needed".
        max_length (`int`, *optional*, defaults to 288):
            Maximum number of wordpieces of the joined sequence `[CLS] x [SEP] z_body [SEP]`.
        mask_token_id (`int`, *optional*, defaults to 103):
            Id of `[MASK]`; where no labels are given, predictions are made at these positions.
        tie_word_embeddings (`bool`, *optional*, defaults to `True`):
            Whether the MLM decoder shares its weights with the input word embeddings.
        length_buckets (`int`, *optional*, defaults to 1):
            Run BERT over the joined sequences of a batch (the null document's are short) in this many length buckets, each padded only to its own longest row (see
            [`realm_hf.modeling.common.run_bert`]): the same outputs to float rounding with less work on padding.
            1 runs them as one padded batch.
    """

    model_type = "realm_knowledge_encoder"
    sub_configs_defaults = {"bert_config": SubConfigSpec(BertConfig, init_kwargs=_BERT_BASE)}

    bert_config: dict | PreTrainedConfig | None = None
    num_candidates: int = 8
    use_null_document: bool = True
    max_length: int = 288
    mask_token_id: int = 103
    tie_word_embeddings: bool = True
    length_buckets: int = 1

    def validate_realm_knowledge_encoder(self):
        """Part of `@strict` validation: REALM-specific values."""
        _check_positive("num_candidates", self.num_candidates)
        _check_positive("length_buckets", self.length_buckets)
        _check_positive("max_length", self.max_length)
        _check_fits_positions("max_length", self.max_length, self.bert_config)
        if self.use_null_document and self.num_candidates < 2:
            raise ValueError(
                f"`num_candidates`={self.num_candidates} leaves no room for a retrieved document next to the "
                "null document; use num_candidates >= 2 or use_null_document=False."
            )
        if not 0 <= self.mask_token_id < self.bert_config.vocab_size:
            raise ValueError(
                f"`mask_token_id`={self.mask_token_id} is outside the vocabulary of size "
                f"{self.bert_config.vocab_size}; pass the tokenizer's `mask_token_id`."
            )


SPAN_NORMALIZATIONS = ("block", "global")
"""Values of `RealmReaderConfig.span_normalization`."""


@strict
class RealmReaderConfig(_NoLocalPaths, PreTrainedConfig):
    r"""
    Configuration of [`RealmReader`], the Open-QA span reader over `[CLS] question [SEP] block [SEP]`.

    Args:
        bert_config (`dict` or `BertConfig`, *optional*):
            The BERT encoder. Defaults to BERT-base.
        span_hidden_size (`int`, *optional*, defaults to 256):
            Hidden size of the span scorer `MLP([h_start; h_end])`.
        max_span_width (`int`, *optional*, defaults to 10):
            Longest answer span, in wordpieces.
        max_length (`int`, *optional*, defaults to 288):
            Maximum number of wordpieces of the joined sequence `[CLS] question [SEP] block [SEP]`.
        span_layer_norm_eps (`float`, *optional*, defaults to 1e-3):
            Epsilon of the LayerNorm inside the span scorer (the released checkpoints use 1e-3).
        length_buckets (`int`, *optional*, defaults to 1):
            Run BERT over the joined sequences of a batch in this many length buckets, each padded only to its own
            longest row (see [`realm_hf.modeling.common.run_bert`]): the same outputs to float rounding with less
            work on padding. 1 runs them as one padded batch.
        span_normalization (`str`, *optional*, defaults to `"block"`):
            How span scores become probabilities. `"block"`: a softmax over the spans of each block, weighted by the
            retriever's `p(z | x)` (the REALM paper's `p(y | z, x) p(z | x)`). `"global"`: one softmax over every span
            of every retrieved block of `retrieval score + span score` (ORQA's objective, which REALM's released
            Open-QA code builds on): a block whose spans all score low loses weight, so `p(z | x)` becomes the
            softmax of `retrieval score + logsumexp of its span scores`.
    """

    model_type = "realm_reader"
    sub_configs_defaults = {"bert_config": SubConfigSpec(BertConfig, init_kwargs=_BERT_BASE)}

    bert_config: dict | PreTrainedConfig | None = None
    span_hidden_size: int = 256
    max_span_width: int = 10
    max_length: int = 288
    span_layer_norm_eps: float = 1e-3
    length_buckets: int = 1
    span_normalization: str = "block"

    def validate_realm_reader(self):
        """Part of `@strict` validation: REALM-specific values."""
        if self.span_normalization not in SPAN_NORMALIZATIONS:
            raise ValueError(
                f"span_normalization must be one of {SPAN_NORMALIZATIONS}, got {self.span_normalization!r}."
            )
        _check_positive("span_hidden_size", self.span_hidden_size)
        _check_positive("length_buckets", self.length_buckets)
        _check_positive("max_span_width", self.max_span_width)
        _check_positive("max_length", self.max_length)
        _check_fits_positions("max_length", self.max_length, self.bert_config)


ANSWER_RULES = ("marginal", "best_span")
"""Values of `RealmForOpenQAConfig.answer_rule`."""


@strict
class RealmForOpenQAConfig(_NoLocalPaths, PreTrainedConfig):
    r"""
    Configuration of [`RealmForOpenQA`]: a retriever (query tower fine-tuned, documents from a fixed index) and a
    span reader.

    Args:
        retriever_config (`dict` or `RealmRetrieverConfig`, *optional*):
            Settings of the retriever.
        reader_config (`dict` or `RealmReaderConfig`, *optional*):
            Settings of the reader.
        top_k (`int`, *optional*, defaults to 5):
            Number of retrieved blocks the reader reads per question.
        index_repo_id (`str`, *optional*):
            Hub dataset repo (or local directory) of the default corpus index of this model.
        index_revision (`str`, *optional*):
            Revision of `index_repo_id` (a commit hash pins it).
        index_fingerprint (`str`, *optional*):
            Fingerprint (manifest `fingerprint`) of the document tower that built the paired index. Set by the
            Open-QA trainer and `realm_hf.hub.publish`; an index with another fingerprint is refused on load
            (a fine-tuned shared tower no longer hashes to the one that built its index, hence the record).
        answer_rule (`str`, *optional*, defaults to `"marginal"`):
            How the Open-QA pipeline and `realm-hf ask` pick the answer. `"marginal"` (realm_hf's rule): answers
            ranked by `p(y | x)`, summed over every span of the same text in every retrieved block, answers that
            only repeat the question left out, the text cut from the block's own characters. `"best_span"` (the
            rule of transformers' `RealmForOpenQA`, set by `realm-hf convert` on its checkpoints): the single span
            with the highest retrieval score + span score over the blocks read, no filter, the reader input built
            as the old classes built it (the question and the block text tokenized as a pair, truncated longest
            first to the reader's `max_length`), the text its wordpieces decoded by the tokenizer.
    """

    model_type = "realm_open_qa"
    sub_configs_defaults = {
        "retriever_config": SubConfigSpec(RealmRetrieverConfig),
        "reader_config": SubConfigSpec(RealmReaderConfig),
    }

    retriever_config: dict | PreTrainedConfig | None = None
    reader_config: dict | PreTrainedConfig | None = None
    top_k: int = 5
    index_repo_id: str | None = None
    index_revision: str | None = None
    index_fingerprint: str | None = None
    answer_rule: str = "marginal"

    def validate_realm_open_qa(self):
        """Part of `@strict` validation: REALM-specific values."""
        _check_positive("top_k", self.top_k)
        if self.answer_rule not in ANSWER_RULES:
            raise ValueError(f"answer_rule must be one of {ANSWER_RULES}, got {self.answer_rule!r}.")


REALM_CONFIGS = (RealmRetrieverConfig, RealmKnowledgeEncoderConfig, RealmReaderConfig, RealmForOpenQAConfig)


def register_configs() -> None:
    """Register the REALM configs with transformers' `AutoConfig` (idempotent), so that `AutoConfig` and
    `transformers.pipeline(...)` resolve the `model_type` of a saved REALM model."""
    from transformers import AutoConfig

    for config_class in REALM_CONFIGS:
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
