"""The configs of converted models, from an old `RealmConfig` (`config.json`, with `RealmConfig`'s defaults for what it
omits), and the `[MASK]` id of an old checkpoint."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from ..configuration import RealmReaderConfig, RealmRetrieverConfig
from .checkpoint import RealmCheckpoint, RealmConversionError

logger = logging.getLogger(__name__)

__all__ = ["bert_config", "clip_length", "find_mask_token_id", "reader_config", "realm_config_value", "retriever_config"]

# `RealmConfig.__init__` defaults, for config files that omit a value (the old class filled these in).
REALM_DEFAULTS = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "retriever_proj_size": 128,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_candidates": 8,
    "intermediate_size": 3072,
    "hidden_act": "gelu_new",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
    "layer_norm_eps": 1e-12,
    "span_hidden_size": 256,
    "max_span_width": 10,
    "reader_layer_norm_eps": 1e-3,
    "reader_beam_size": 5,
    "reader_seq_len": 320,
    "num_block_records": 13353718,
    "searcher_beam_size": 5000,
    "pad_token_id": 1,
}
BERT_KEYS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "hidden_act",
    "hidden_dropout_prob",
    "attention_probs_dropout_prob",
    "max_position_embeddings",
    "type_vocab_size",
    "initializer_range",
    "layer_norm_eps",
    "pad_token_id",
)


def realm_config_value(config: Mapping, key: str):
    """`config[key]`, or `RealmConfig`'s default for it."""
    return config.get(key, REALM_DEFAULTS[key])


def bert_config(config: Mapping) -> dict:
    """The BERT config of the old checkpoint's encoders."""
    # `hidden_act` defaults to "gelu_new" in REALM (BERT's is "gelu"): always carried over explicitly.
    return {key: realm_config_value(config, key) for key in BERT_KEYS}


def clip_length(length: int, config: Mapping) -> int:
    """`length`, at most the old model's `max_position_embeddings`."""
    return min(length, realm_config_value(config, "max_position_embeddings"))


def retriever_config(config: Mapping, share_towers: bool = True) -> RealmRetrieverConfig:
    """The config of the retriever that computes what the old embedder computes."""
    return RealmRetrieverConfig(
        bert_config=bert_config(config),
        share_towers=share_towers,
        projection_size=realm_config_value(config, "retriever_proj_size"),
        projection_layer_norm=True,
        pooling="pooler",  # the old RealmEmbedder projects BERT's pooler output tanh(W h_CLS)
        normalize_embeddings=False,
        query_max_length=clip_length(96, config),
        block_max_length=clip_length(288, config),
        # The released checkpoints score ∅ as an embedded empty block and carry no learned prior: "embedding" keeps the
        # function they compute (and every converted tensor accounted for). Continuing pre-training with a learned
        # prior: set `null_document_score="learned"` in config.json; the missing logit then loads as 0 (mass 1/K).
        null_document_score="embedding",
    )


def reader_config(config: Mapping) -> RealmReaderConfig:
    """The config of the reader that computes what the old reader computes."""
    return RealmReaderConfig(
        bert_config=bert_config(config),
        span_hidden_size=realm_config_value(config, "span_hidden_size"),
        max_span_width=realm_config_value(config, "max_span_width"),
        max_length=clip_length(realm_config_value(config, "reader_seq_len"), config),
        span_layer_norm_eps=realm_config_value(config, "reader_layer_norm_eps"),
        # the old RealmReader ranks (and its loss normalizes) spans over all the blocks it reads by retrieval score +
        # span score: ORQA's one softmax, not a softmax per block
        span_normalization="global",
    )


def find_mask_token_id(checkpoint: RealmCheckpoint, mask_token_id: int | None) -> int:
    """`mask_token_id`, else the `[MASK]` id of the checkpoint's `vocab.txt`, else BERT uncased's (103)."""
    if mask_token_id is not None:
        return mask_token_id
    vocab_size = realm_config_value(checkpoint.config, "vocab_size")
    if checkpoint.path is not None and (checkpoint.path / "vocab.txt").is_file():
        vocab = (checkpoint.path / "vocab.txt").read_text(encoding="utf-8").splitlines()
        if "[MASK]" in vocab:
            return vocab.index("[MASK]")
    if 103 < vocab_size:  # the [MASK] id of the BERT uncased vocabulary the released checkpoints use
        logger.warning("No vocab.txt with [MASK] next to the checkpoint; assuming mask_token_id=103 (BERT uncased).")
        return 103
    raise RealmConversionError(
        f"Cannot find the [MASK] id: no vocab.txt with [MASK] in {checkpoint.path} and the vocabulary "
        f"({vocab_size} tokens) is not BERT's. Pass mask_token_id= (--mask-token-id)."
    )
