"""Convert transformers-REALM checkpoints (the `google/realm-*` family) into realm_hf models.

transformers shipped REALM as `RealmEmbedder` / `RealmScorer`, `RealmKnowledgeAugEncoder`, `RealmReader` and
`RealmForOpenQA` (all with `model_type: "realm"`) and deleted them in v5. Their checkpoints map onto realm_hf:

| old class (released checkpoint)                               | realm_hf model          | kind       |
|---------------------------------------------------------------|-------------------------|------------|
| `RealmEmbedder` (`google/realm-cc-news-pretrained-embedder`)  | `RealmRetriever`        | `embedder` |
| `RealmScorer` (`google/realm-cc-news-pretrained-scorer`)      | `RealmRetriever`        | `embedder` |
| `RealmKnowledgeAugEncoder` (`...-pretrained-encoder`)         | `RealmKnowledgeEncoder` | `encoder`  |
| `RealmReader`                                                 | `RealmReader`           | `reader`   |
| `RealmForOpenQA` (`google/realm-orqa-{nq,wq}-openqa`)         | `RealmForOpenQA`        | `openqa`   |

Every tensor name is mapped by an explicit table of prefix renames. The old classes carry a few tensors that have no
role in their forward pass (the MLM head inside `RealmEmbedder` and `RealmReader`, the BERT pooler of the encoder and
the reader); those are dropped by name, with the reason logged. Anything else that is not consumed, and any tensor of
the new model that is not filled, is an error that lists the names.

The corpus embeddings `block_emb` of an old `RealmForOpenQA` are data, not weights: they are never a model buffer
here. [`extract_block_embeddings`] returns them, and [`convert_checkpoint`] writes them to a separate safetensors
file on request, for the index builder.

Weights are read from `model.safetensors` when present (preferred), otherwise from `pytorch_model.bin` with
`torch.load(..., weights_only=True)` (no arbitrary unpickling); sharded checkpoints (`*.index.json`) work too.

Command line (`python -m realm_hf.convert --help`):

    python -m realm_hf.convert --src path/to/realm-cc-news-pretrained-embedder --output converted/embedder
    python -m realm_hf.convert --src path/to/realm-orqa-nq-openqa --output converted/orqa-nq \
        --block-embeddings converted/orqa-nq-block-embeddings.safetensors
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from .configuration import (
    RealmForOpenQAConfig,
    RealmKnowledgeEncoderConfig,
    RealmReaderConfig,
    RealmRetrieverConfig,
)
from .modeling import RealmForOpenQA, RealmKnowledgeEncoder, RealmReader, RealmRetriever
from .utils.quiet import configure_logging

logger = logging.getLogger(__name__)

__all__ = [
    "KINDS",
    "RealmCheckpoint",
    "RealmConversionError",
    "convert_checkpoint",
    "convert_embedder",
    "convert_knowledge_encoder",
    "convert_open_qa",
    "convert_reader",
    "detect_kind",
    "extract_block_embeddings",
    "load_realm_checkpoint",
    "main",
]

KINDS = ("embedder", "encoder", "reader", "openqa")
_KIND_ALIASES = {
    "embedder": "embedder",
    "scorer": "embedder",
    "retriever": "embedder",
    "encoder": "encoder",
    "knowledge_encoder": "encoder",
    "reader": "reader",
    "openqa": "openqa",
    "open_qa": "openqa",
}

BLOCK_EMB = "block_emb"
BLOCK_EMBEDDINGS_KEY = "embeddings"

# `RealmConfig.__init__` defaults, for config files that omit a value (the old class filled these in).
_REALM_DEFAULTS = {
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
_BERT_KEYS = (
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
# Buffers that some transformers versions saved with the BERT embeddings; they are recomputed, never loaded.
_EMBEDDING_BUFFERS = ("realm.embeddings.position_ids", "realm.embeddings.token_type_ids")

_TOKENIZER_FILES = ("vocab.txt", "tokenizer.json")


class RealmConversionError(ValueError):
    """A transformers-REALM checkpoint does not fit the realm_hf model it is converted into."""


# ----------------------------------------------------------------------------------------------------------------
# Reading old checkpoints
# ----------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class RealmCheckpoint:
    r"""
    An old transformers-REALM checkpoint in memory.

    Args:
        config (`dict`): The `config.json` (`model_type: "realm"`).
        state_dict (`dict[str, torch.Tensor]`): The weights, without the corpus `block_emb` unless it was asked for.
        path (`Path`, *optional*): The directory it was read from (its tokenizer files are copied on conversion).
        block_emb_shape (`tuple`, *optional*): Shape of the corpus embeddings `block_emb` when the checkpoint holds
            them (an old `RealmForOpenQA`), whether or not they were loaded.
    """

    config: dict
    state_dict: dict[str, torch.Tensor]
    path: Path | None = None
    block_emb_shape: tuple[int, ...] | None = None


def _read_safetensors(files: Sequence[Path], skip: Iterable[str]) -> tuple[dict[str, torch.Tensor], dict]:
    skip = set(skip)
    tensors, shapes = {}, {}
    for file in files:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            for name in f.keys():
                if name in skip:
                    shapes[name] = tuple(f.get_slice(name).get_shape())
                else:
                    tensors[name] = f.get_tensor(name)
    return tensors, shapes


def _read_torch_bin(files: Sequence[Path], skip: Iterable[str]) -> tuple[dict[str, torch.Tensor], dict]:
    skip = set(skip)
    tensors, shapes = {}, {}
    for file in files:
        try:
            # mmap: a multi-GB `block_emb` that is skipped is never read into memory
            loaded = torch.load(str(file), map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError:  # legacy (non-zip) serialization cannot be memory-mapped
            loaded = torch.load(str(file), map_location="cpu", weights_only=True)
        if not isinstance(loaded, Mapping):
            raise RealmConversionError(f"{file} does not hold a state dict (got a {type(loaded).__name__}).")
        for name, tensor in loaded.items():
            if name in skip:
                shapes[name] = tuple(tensor.shape)
            else:
                tensors[name] = tensor
    return tensors, shapes


def _weight_files(directory: Path) -> tuple[str, list[Path]]:
    """The weight files of a checkpoint directory, safetensors first."""
    for fmt, single, index in (
        ("safetensors", "model.safetensors", "model.safetensors.index.json"),
        ("bin", "pytorch_model.bin", "pytorch_model.bin.index.json"),
    ):
        if (directory / single).is_file():
            return fmt, [directory / single]
        if (directory / index).is_file():
            weight_map = json.loads((directory / index).read_text(encoding="utf-8"))["weight_map"]
            return fmt, [directory / name for name in sorted(set(weight_map.values()))]
    raise FileNotFoundError(
        f"No weights in {directory}: expected model.safetensors or pytorch_model.bin (or a sharded *.index.json). "
        "Download the whole checkpoint, e.g. `huggingface-cli download google/realm-cc-news-pretrained-embedder "
        "--local-dir <dir>`."
    )


def load_realm_checkpoint(src: str | os.PathLike, load_block_embeddings: bool = False) -> RealmCheckpoint:
    r"""
    Read an old transformers-REALM checkpoint directory: `config.json` and the weights.

    Args:
        src (`str` or `os.PathLike`): The checkpoint directory (a local download of a `google/realm-*` repo).
        load_block_embeddings (`bool`, *optional*, defaults to `False`):
            Whether to read the corpus embeddings `block_emb` of an old `RealmForOpenQA` (13M x 128 floats in the
            released ones). When `False` only their shape is recorded.

    Returns:
        [`RealmCheckpoint`]
    """
    directory = Path(src)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory; pass the folder holding config.json and the weights.")
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"No config.json in {directory}; this is not a transformers-REALM checkpoint.")
    config = json.loads(config_file.read_text(encoding="utf-8"))
    if config.get("model_type") != "realm":
        raise RealmConversionError(
            f"{config_file} has model_type={config.get('model_type')!r}; the converter reads transformers-REALM "
            "checkpoints (model_type 'realm'). A realm_hf checkpoint loads directly with `from_pretrained`."
        )
    fmt, files = _weight_files(directory)
    skip = () if load_block_embeddings else (BLOCK_EMB,)
    reader = _read_safetensors if fmt == "safetensors" else _read_torch_bin
    state_dict, skipped_shapes = reader(files, skip)
    block_emb_shape = skipped_shapes.get(BLOCK_EMB)
    if BLOCK_EMB in state_dict:
        block_emb_shape = tuple(state_dict[BLOCK_EMB].shape)
    logger.info("Read %d tensors from %s", len(state_dict), ", ".join(str(f) for f in files))
    return RealmCheckpoint(config=config, state_dict=state_dict, path=directory, block_emb_shape=block_emb_shape)


def _as_checkpoint(src: str | os.PathLike | RealmCheckpoint) -> RealmCheckpoint:
    return src if isinstance(src, RealmCheckpoint) else load_realm_checkpoint(src)


def detect_kind(state_dict_names: Iterable[str]) -> str:
    r"""
    Which old class wrote a state dict, from its tensor names.

    Returns:
        `str`: `"openqa"` (`embedder.*` + `reader.*`, maybe `block_emb`), `"reader"` (`qa_outputs.*`), `"embedder"`
        (`cls.dense.*`, or `embedder.*` of a `RealmScorer`) or `"encoder"` (`realm.*` + `cls.predictions.*`).
    """
    names = set(state_dict_names)
    has = lambda prefix: any(name.startswith(prefix) for name in names)  # noqa: E731
    if BLOCK_EMB in names or (has("embedder.") and has("reader.")):
        return "openqa"
    if has("qa_outputs."):
        return "reader"
    if has("embedder.cls.dense.") or "cls.dense.weight" in names:
        return "embedder"
    if has("realm.") and has("cls.predictions."):
        return "encoder"
    sample = sorted(names)[:8]
    raise RealmConversionError(
        f"Cannot tell which REALM model these weights belong to (first names: {sample}); pass kind= one of {KINDS}."
    )


# ----------------------------------------------------------------------------------------------------------------
# Configs
# ----------------------------------------------------------------------------------------------------------------


def _value(config: Mapping, key: str):
    return config.get(key, _REALM_DEFAULTS[key])


def _bert_config(config: Mapping) -> dict:
    # `hidden_act` defaults to "gelu_new" in REALM (BERT's is "gelu"): always carried over explicitly.
    return {key: _value(config, key) for key in _BERT_KEYS}


def _clip_length(length: int, config: Mapping) -> int:
    return min(length, _value(config, "max_position_embeddings"))


def _retriever_config(config: Mapping, share_towers: bool = True) -> RealmRetrieverConfig:
    return RealmRetrieverConfig(
        bert_config=_bert_config(config),
        share_towers=share_towers,
        projection_size=_value(config, "retriever_proj_size"),
        projection_layer_norm=True,
        pooling="pooler",  # the old RealmEmbedder projects BERT's pooler output tanh(W h_CLS)
        normalize_embeddings=False,
        query_max_length=_clip_length(96, config),
        block_max_length=_clip_length(288, config),
        # The released checkpoints score ∅ as an embedded empty block and carry no learned prior: "embedding" keeps the
        # function they compute (and every converted tensor accounted for). Continuing pre-training with a learned
        # prior: set `null_document_score="learned"` in config.json; the missing logit then loads as 0 (mass 1/K).
        null_document_score="embedding",
    )


def _reader_config(config: Mapping) -> RealmReaderConfig:
    return RealmReaderConfig(
        bert_config=_bert_config(config),
        span_hidden_size=_value(config, "span_hidden_size"),
        max_span_width=_value(config, "max_span_width"),
        max_length=_clip_length(_value(config, "reader_seq_len"), config),
        span_layer_norm_eps=_value(config, "reader_layer_norm_eps"),
    )


def _mask_token_id(checkpoint: RealmCheckpoint, mask_token_id: int | None) -> int:
    if mask_token_id is not None:
        return mask_token_id
    vocab_size = _value(checkpoint.config, "vocab_size")
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


# ----------------------------------------------------------------------------------------------------------------
# State-dict mapping
# ----------------------------------------------------------------------------------------------------------------


def _rename(name: str, renames: Sequence[tuple[str, str]]) -> str | None:
    for old, new in sorted(renames, key=lambda rule: -len(rule[0])):  # longest prefix wins
        if name == old or name.startswith(old):
            return new + name[len(old) :]
    return None


def _dropped(name: str, drops: Mapping[str, str]) -> str | None:
    for prefix, reason in drops.items():
        if name == prefix or name.startswith(prefix):
            return reason
    return None


def _add_source_aliases(state_dict: dict[str, torch.Tensor], prefixes: Iterable[str]) -> dict[str, torch.Tensor]:
    """Complete the names that old checkpoints save only once because they alias another tensor.

    In every old MLM head `cls.predictions.decoder.bias` *is* `cls.predictions.bias`; in `RealmKnowledgeAugEncoder`
    the decoder weight *is* the word-embedding matrix (tied), so safetensors files keep only one of each pair.
    """
    state_dict = dict(state_dict)
    for prefix in prefixes:
        bias, decoder_bias = f"{prefix}cls.predictions.bias", f"{prefix}cls.predictions.decoder.bias"
        if bias in state_dict and decoder_bias not in state_dict:
            state_dict[decoder_bias] = state_dict[bias]
    return state_dict


def _alias_groups(model: torch.nn.Module) -> list[list[str]]:
    """The model's state-dict names grouped by the tensor they share (tied weights form one group)."""
    groups: dict[tuple, list[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        groups.setdefault(key, []).append(name)
    return list(groups.values())


def _load_mapped(
    model: torch.nn.Module,
    state_dict: Mapping[str, torch.Tensor],
    renames: Sequence[tuple[str, str]],
    drops: Mapping[str, str],
    description: str,
) -> None:
    """Fill `model` from `state_dict` by the prefix `renames`; refuse leftovers on either side."""
    targets = model.state_dict()
    mapped: dict[str, torch.Tensor] = {}
    sources_of: dict[str, str] = {}
    unknown, unexpected, mismatched, dropped = [], [], [], {}
    for name, tensor in state_dict.items():
        reason = _dropped(name, drops)
        if reason is not None:
            dropped.setdefault(reason, []).append(name)
            continue
        target = _rename(name, renames)
        if target is None:
            unknown.append(name)
        elif target not in targets:
            unexpected.append(f"{name} -> {target}")
        elif tuple(tensor.shape) != tuple(targets[target].shape):
            mismatched.append(f"{name} {list(tensor.shape)} -> {target} {list(targets[target].shape)}")
        else:
            mapped[target] = tensor
            sources_of[target] = name

    missing, conflicting = [], []
    to_load: dict[str, torch.Tensor] = {}
    for group in _alias_groups(model):
        filled = [name for name in group if name in mapped]
        if not filled:
            missing.append(" = ".join(group))
            continue
        first = mapped[filled[0]]
        for other in filled[1:]:
            if not torch.equal(first.to(mapped[other].dtype), mapped[other]):
                conflicting.append(
                    f"{sources_of[filled[0]]} != {sources_of[other]} (both fill the tied {filled[0]} = {other})"
                )
        to_load[filled[0]] = first

    problems = []
    if unknown:
        problems.append(f"{len(unknown)} checkpoint tensor(s) with no place in the {description}: {unknown}")
    if unexpected:
        problems.append(f"{len(unexpected)} checkpoint tensor(s) mapped to names the model lacks: {unexpected}")
    if mismatched:
        problems.append(f"{len(mismatched)} tensor(s) with mismatched shapes (does config.json fit?): {mismatched}")
    if missing:
        problems.append(f"{len(missing)} model tensor(s) that the checkpoint does not fill: {missing}")
    if conflicting:
        problems.append(f"{len(conflicting)} tied tensor(s) with different values in the checkpoint: {conflicting}")
    if problems:
        raise RealmConversionError(
            f"The checkpoint does not convert cleanly into a {description}:\n  - " + "\n  - ".join(problems)
        )

    result = model.load_state_dict(to_load, strict=False)
    aliased = {name for group in _alias_groups(model) for name in group[1:]}
    left = [name for name in result.missing_keys if name not in aliased]
    if left or result.unexpected_keys:  # cannot happen after the checks above; a guard against silent partial loads
        raise RealmConversionError(f"Partial load: missing {left}, unexpected {result.unexpected_keys}.")
    for reason, names in dropped.items():
        logger.info("Dropped %d tensor(s) (%s): %s", len(names), reason, _abbreviate(names))
    model.eval()


def _abbreviate(names: Sequence[str], limit: int = 6) -> str:
    names = sorted(names)
    return ", ".join(names[:limit]) + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _embedder_drops(prefix: str) -> dict[str, str]:
    drops = {f"{prefix}cls.predictions.": "MLM head inside the old RealmEmbedder, unused by its forward"}
    drops.update({f"{prefix}{buffer}": "position/token-type buffer, recomputed" for buffer in _EMBEDDING_BUFFERS})
    return drops


def _embedder_renames(old_prefix: str, new_prefix: str) -> list[tuple[str, str]]:
    return [
        (f"{old_prefix}realm.", f"{new_prefix}bert."),  # the whole BERT, pooler included
        (f"{old_prefix}cls.dense.", f"{new_prefix}projection."),
        (f"{old_prefix}cls.LayerNorm.", f"{new_prefix}layer_norm."),
    ]


def _reader_renames_and_drops(old_prefix: str, new_prefix: str) -> tuple[list[tuple[str, str]], dict[str, str]]:
    renames = [
        (f"{old_prefix}realm.", f"{new_prefix}bert."),
        (f"{old_prefix}qa_outputs.dense_intermediate.", f"{new_prefix}span_scorer.dense_intermediate."),
        (f"{old_prefix}qa_outputs.dense_output.", f"{new_prefix}span_scorer.dense_output."),
        (f"{old_prefix}qa_outputs.layer_normalization.", f"{new_prefix}span_scorer.layer_norm."),
    ]
    drops = {
        f"{old_prefix}realm.pooler.": "BERT pooler of the old RealmReader, unused by span scoring",
        f"{old_prefix}cls.predictions.": "MLM head inside the old RealmReader, unused by its forward",
    }
    drops.update({f"{old_prefix}{buffer}": "position/token-type buffer, recomputed" for buffer in _EMBEDDING_BUFFERS})
    return renames, drops


def _towers_are_shared(state_dict: Mapping[str, torch.Tensor]) -> bool:
    """Whether a `RealmScorer`'s `query_embedder.*` is its `embedder.*` (saved twice in `.bin` files) or absent."""
    query = {name[len("query_embedder.") :]: t for name, t in state_dict.items() if name.startswith("query_embedder.")}
    if not query:
        return True
    for name, tensor in query.items():
        other = state_dict.get(f"embedder.{name}")
        if other is None or other.shape != tensor.shape or not torch.equal(other, tensor):
            return False
    return True


# ----------------------------------------------------------------------------------------------------------------
# Converters
# ----------------------------------------------------------------------------------------------------------------


def convert_embedder(src: str | os.PathLike | RealmCheckpoint) -> RealmRetriever:
    r"""
    Convert an old `RealmEmbedder` or `RealmScorer` checkpoint (e.g. `google/realm-cc-news-pretrained-embedder`,
    `google/realm-cc-news-pretrained-scorer`) into a [`RealmRetriever`].

    The old embedder projects BERT's pooler output (`tanh(W h_CLS)`) with `cls.dense` and `cls.LayerNorm`, so the
    retriever uses `pooling="pooler"` and `projection_layer_norm=True`. One embedder serves queries and documents
    (`share_towers=True`), unless a `RealmScorer` checkpoint holds a `query_embedder` with weights of its own.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory (or one already read).

    Returns:
        [`RealmRetriever`] in eval mode.
    """
    checkpoint = _as_checkpoint(src)
    state_dict = checkpoint.state_dict
    if any(name.startswith("embedder.") for name in state_dict):  # RealmScorer
        shared = _towers_are_shared(state_dict)
        renames = _embedder_renames("embedder.", "query_embedder." if shared else "doc_embedder.")
        drops = _embedder_drops("embedder.")
        if shared:
            drops["query_embedder."] = "second name of the shared embedder in RealmScorer"
        else:
            renames += _embedder_renames("query_embedder.", "query_embedder.")
            drops.update(_embedder_drops("query_embedder."))
    else:  # RealmEmbedder
        shared = True
        renames, drops = _embedder_renames("", "query_embedder."), _embedder_drops("")
    model = RealmRetriever(_retriever_config(checkpoint.config, share_towers=shared))
    _load_mapped(model, state_dict, renames, drops, "RealmRetriever")
    return model


def convert_knowledge_encoder(
    src: str | os.PathLike | RealmCheckpoint, mask_token_id: int | None = None
) -> RealmKnowledgeEncoder:
    r"""
    Convert an old `RealmKnowledgeAugEncoder` checkpoint (`google/realm-cc-news-pretrained-encoder`) into a
    [`RealmKnowledgeEncoder`]: `realm.*` is the BERT, `cls.predictions.*` the MLM head (its decoder tied to the word
    embeddings, unless the checkpoint holds a different decoder matrix). The unused BERT pooler is dropped.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory (or one already read).
        mask_token_id (`int`, *optional*): Id of `[MASK]`; read from the checkpoint's `vocab.txt` when omitted.

    Returns:
        [`RealmKnowledgeEncoder`] in eval mode.
    """
    checkpoint = _as_checkpoint(src)
    state_dict = _add_source_aliases(checkpoint.state_dict, [""])
    decoder, embeddings = "cls.predictions.decoder.weight", "realm.embeddings.word_embeddings.weight"
    tied = decoder not in state_dict or (
        embeddings in state_dict
        and state_dict[decoder].shape == state_dict[embeddings].shape
        and torch.equal(state_dict[decoder], state_dict[embeddings])
    )
    num_candidates = _value(checkpoint.config, "num_candidates")
    config = RealmKnowledgeEncoderConfig(
        bert_config=_bert_config(checkpoint.config),
        num_candidates=num_candidates,
        use_null_document=num_candidates >= 2,
        max_length=_clip_length(288, checkpoint.config),
        mask_token_id=_mask_token_id(checkpoint, mask_token_id),
        tie_word_embeddings=tied,
    )
    model = RealmKnowledgeEncoder(config)
    renames = [("realm.", "bert."), ("cls.predictions.", "mlm_head.predictions.")]
    drops = {"realm.pooler.": "BERT pooler of the old RealmKnowledgeAugEncoder, unused by the MLM head"}
    drops.update({buffer: "position/token-type buffer, recomputed" for buffer in _EMBEDDING_BUFFERS})
    if tied and decoder in state_dict:
        drops[decoder] = "tied to the word embeddings"
    _load_mapped(model, state_dict, renames, drops, "RealmKnowledgeEncoder")
    return model


def convert_reader(src: str | os.PathLike | RealmCheckpoint) -> RealmReader:
    r"""
    Convert an old `RealmReader` checkpoint into a [`RealmReader`]: `realm.*` is the BERT and
    `qa_outputs.{dense_intermediate, layer_normalization, dense_output}` the span scorer, whose LayerNorm keeps the
    old `reader_layer_norm_eps`. The old reader's unused MLM head and BERT pooler are dropped.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory (or one already read).

    Returns:
        [`RealmReader`] in eval mode.
    """
    checkpoint = _as_checkpoint(src)
    model = RealmReader(_reader_config(checkpoint.config))
    renames, drops = _reader_renames_and_drops("", "")
    _load_mapped(model, checkpoint.state_dict, renames, drops, "RealmReader")
    return model


def convert_open_qa(src: str | os.PathLike | RealmCheckpoint) -> RealmForOpenQA:
    r"""
    Convert an old `RealmForOpenQA` checkpoint (`google/realm-orqa-{nq,wq}-openqa`) into a [`RealmForOpenQA`]:
    `embedder.*` becomes the retriever (its query tower; one shared tower) and `reader.*` the reader.

    The old checkpoint's `block_emb` buffer (the corpus embeddings, 13,353,718 x 128 in the released models) is
    *not* part of the converted model: an index is data, never a model buffer. Get it with
    [`extract_block_embeddings`] or `convert_checkpoint(..., block_embeddings_path=...)`, and build the index from it
    together with the block texts. Those embeddings were made by the *pre-trained* document tower, not by the
    fine-tuned query tower of this checkpoint, so `embed_documents` of the converted model does not reproduce them
    and their index has no fingerprint of a tower in this model.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory (or one already read).

    Returns:
        [`RealmForOpenQA`] in eval mode (`top_k` = the old `reader_beam_size`).
    """
    checkpoint = _as_checkpoint(src)
    config = RealmForOpenQAConfig(
        retriever_config=_retriever_config(checkpoint.config).to_dict(),
        reader_config=_reader_config(checkpoint.config).to_dict(),
        top_k=_value(checkpoint.config, "reader_beam_size"),
    )
    model = RealmForOpenQA(config)
    reader_renames, reader_drops = _reader_renames_and_drops("reader.", "reader.")
    renames = _embedder_renames("embedder.", "retriever.query_embedder.") + reader_renames
    drops = {
        **_embedder_drops("embedder."),
        **reader_drops,
        BLOCK_EMB: "corpus embeddings, data for the index (extract_block_embeddings), not weights",
    }
    _load_mapped(model, checkpoint.state_dict, renames, drops, "RealmForOpenQA")
    return model


def extract_block_embeddings(
    src: str | os.PathLike | RealmCheckpoint, output_path: str | os.PathLike | None = None
) -> torch.Tensor:
    r"""
    The corpus embeddings `block_emb` `[num_blocks, D]` of an old `RealmForOpenQA` checkpoint.

    Args:
        src (`str`, `os.PathLike` or [`RealmCheckpoint`]): The old checkpoint directory, or a checkpoint read with
            `load_realm_checkpoint(..., load_block_embeddings=True)`.
        output_path (`str` or `os.PathLike`, *optional*): Where to also write them, as a safetensors file holding
            one float32 tensor `"embeddings"` `[num_blocks, D]` (row i = block record i of the old corpus), the
            format an index directory stores.

    Returns:
        `torch.FloatTensor` of shape `(num_blocks, embedding_size)`.
    """
    if isinstance(src, RealmCheckpoint) and BLOCK_EMB not in src.state_dict and src.path is not None:
        src = src.path
    checkpoint = src if isinstance(src, RealmCheckpoint) else load_realm_checkpoint(src, load_block_embeddings=True)
    if BLOCK_EMB not in checkpoint.state_dict:
        raise RealmConversionError(
            f"{checkpoint.path or 'The checkpoint'} holds no `block_emb`: only old RealmForOpenQA checkpoints "
            "(google/realm-orqa-*) carry corpus embeddings."
        )
    embeddings = checkpoint.state_dict[BLOCK_EMB].float().contiguous()
    if output_path is not None:
        output_path = Path(output_path)
        output_path.parent.mkdir(parents=True, exist_ok=True)
        save_file(
            {BLOCK_EMBEDDINGS_KEY: embeddings},
            str(output_path),
            metadata={
                "source": str(checkpoint.path or ""),
                "num_blocks": str(embeddings.shape[0]),
                "dim": str(embeddings.shape[1]),
            },
        )
        logger.info("Wrote %d block embeddings (dim %d) to %s", embeddings.shape[0], embeddings.shape[1], output_path)
    return embeddings


_CONVERTERS = {
    "embedder": convert_embedder,
    "encoder": convert_knowledge_encoder,
    "reader": convert_reader,
    "openqa": convert_open_qa,
}


def _save_tokenizer(checkpoint: RealmCheckpoint, output_dir: Path) -> bool:
    """Re-save the old RealmTokenizer files as a `BertTokenizer` (REALM's tokenizer was BERT's wordpiece)."""
    if checkpoint.path is None or not any((checkpoint.path / name).is_file() for name in _TOKENIZER_FILES):
        return False
    from transformers import BertTokenizer

    # `tokenizer_config.json` names `RealmTokenizer`, which transformers v5 no longer has: load as BERT explicitly
    tokenizer = BertTokenizer.from_pretrained(str(checkpoint.path))
    tokenizer.save_pretrained(str(output_dir))
    return True


def convert_checkpoint(
    src_dir: str | os.PathLike,
    output_dir: str | os.PathLike,
    kind: str | None = None,
    block_embeddings_path: str | os.PathLike | None = None,
    mask_token_id: int | None = None,
):
    r"""
    Convert an old transformers-REALM checkpoint directory and `save_pretrained` the realm_hf model (safetensors)
    to `output_dir`, with the tokenizer when the checkpoint has one.

    Args:
        src_dir (`str` or `os.PathLike`): The old checkpoint directory.
        output_dir (`str` or `os.PathLike`): Where the converted model is saved.
        kind (`str`, *optional*): `"embedder"` (also `RealmScorer`), `"encoder"`, `"reader"` or `"openqa"`;
            detected from the tensor names when omitted.
        block_embeddings_path (`str` or `os.PathLike`, *optional*): For an old `RealmForOpenQA`, where to write its
            corpus embeddings `block_emb` (see [`extract_block_embeddings`]). They never go into `output_dir`'s
            weights; without this argument they are left out (with a log line saying so).
        mask_token_id (`int`, *optional*): `[MASK]` id for the encoder when the checkpoint has no `vocab.txt`.

    Returns:
        The converted model (eval mode).
    """
    checkpoint = load_realm_checkpoint(src_dir)
    detected = detect_kind(checkpoint.state_dict.keys() | ({BLOCK_EMB} if checkpoint.block_emb_shape else set()))
    if kind is None:
        kind = detected
    else:
        if kind not in _KIND_ALIASES:
            raise ValueError(f"kind={kind!r} is not one of {KINDS} (or None to detect it).")
        kind = _KIND_ALIASES[kind]
        if kind != detected:
            logger.warning(
                "kind=%r was given but the tensor names look like %r; converting as %r.", kind, detected, kind
            )
    logger.info("Converting %s as a REALM %s checkpoint", src_dir, kind)
    if kind == "encoder":
        model = convert_knowledge_encoder(checkpoint, mask_token_id=mask_token_id)
    else:
        model = _CONVERTERS[kind](checkpoint)

    output_dir = Path(output_dir)
    model.save_pretrained(str(output_dir))
    if _save_tokenizer(checkpoint, output_dir):
        logger.info("Saved the tokenizer (as BertTokenizer) to %s", output_dir)
    if checkpoint.block_emb_shape is not None:
        if block_embeddings_path is not None:
            extract_block_embeddings(checkpoint.path, block_embeddings_path)
        else:
            logger.info(
                "The checkpoint holds corpus embeddings block_emb %s; they are not model weights and were left out. "
                "Pass block_embeddings_path= (--block-embeddings FILE) to write them for the index.",
                list(checkpoint.block_emb_shape),
            )
    elif block_embeddings_path is not None:
        raise RealmConversionError(f"{src_dir} holds no block_emb to write to {block_embeddings_path}.")
    logger.info("Saved the converted %s to %s", type(model).__name__, output_dir)
    return model


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m realm_hf.convert --src OLD_DIR --output NEW_DIR [--kind ...] [--block-embeddings FILE]`."""
    parser = argparse.ArgumentParser(
        prog="realm-hf convert", description="Convert a transformers-REALM (google/realm-*) checkpoint to realm_hf."
    )
    parser.add_argument("--src", required=True, help="Old checkpoint directory (config.json + weights).")
    parser.add_argument("--output", required=True, help="Directory for the converted model.")
    parser.add_argument("--kind", default=None, choices=sorted(_KIND_ALIASES), help="Detected when omitted.")
    parser.add_argument("--block-embeddings", default=None, help="openqa only: write block_emb to this .safetensors.")
    parser.add_argument("--mask-token-id", type=int, default=None, help="encoder only, when there is no vocab.txt.")
    args = parser.parse_args(argv)
    configure_logging()  # leaves a root logger that has handlers as it is
    convert_checkpoint(
        args.src,
        args.output,
        kind=args.kind,
        block_embeddings_path=args.block_embeddings,
        mask_token_id=args.mask_token_id,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
