"""State-dict mapping of old checkpoints onto realm_hf models: explicit prefix renames, tensors dropped by name with a
reason, tied tensors filled once, and an error that lists every tensor left over on either side."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence

import torch

from .checkpoint import RealmConversionError

logger = logging.getLogger(__name__)

__all__ = [
    "EMBEDDING_BUFFERS", "add_source_aliases", "embedder_drops", "embedder_renames", "load_mapped",
    "reader_renames_and_drops", "towers_are_shared",
]

# Buffers that some transformers versions saved with the BERT embeddings; they are recomputed, never loaded.
EMBEDDING_BUFFERS = ("realm.embeddings.position_ids", "realm.embeddings.token_type_ids")


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


def add_source_aliases(state_dict: dict[str, torch.Tensor], prefixes: Iterable[str]) -> dict[str, torch.Tensor]:
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


def load_mapped(
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


def embedder_drops(prefix: str) -> dict[str, str]:
    """Tensors of an old embedder under `prefix` that have no place in a retriever, with the reason."""
    drops = {f"{prefix}cls.predictions.": "MLM head inside the old RealmEmbedder, unused by its forward"}
    drops.update({f"{prefix}{buffer}": "position/token-type buffer, recomputed" for buffer in EMBEDDING_BUFFERS})
    return drops


def embedder_renames(old_prefix: str, new_prefix: str) -> list[tuple[str, str]]:
    """Prefix renames of an old embedder (`cls.dense`, `cls.LayerNorm`: the projection) onto a retriever tower."""
    return [
        (f"{old_prefix}realm.", f"{new_prefix}bert."),  # the whole BERT, pooler included
        (f"{old_prefix}cls.dense.", f"{new_prefix}projection."),
        (f"{old_prefix}cls.LayerNorm.", f"{new_prefix}layer_norm."),
    ]


def reader_renames_and_drops(old_prefix: str, new_prefix: str) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """Prefix renames of an old reader onto a `RealmReader`, and its unused tensors with the reason."""
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
    drops.update({f"{old_prefix}{buffer}": "position/token-type buffer, recomputed" for buffer in EMBEDDING_BUFFERS})
    return renames, drops


def towers_are_shared(state_dict: Mapping[str, torch.Tensor]) -> bool:
    """Whether a `RealmScorer`'s `query_embedder.*` is its `embedder.*` (saved twice in `.bin` files) or absent."""
    query = {name[len("query_embedder.") :]: t for name, t in state_dict.items() if name.startswith("query_embedder.")}
    if not query:
        return True
    for name, tensor in query.items():
        other = state_dict.get(f"embedder.{name}")
        if other is None or other.shape != tensor.shape or not torch.equal(other, tensor):
            return False
    return True
