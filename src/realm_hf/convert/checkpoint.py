"""Reading old transformers-REALM checkpoints (`config.json` + safetensors or `torch.load(weights_only=True)`
weights, sharded or not) and telling which old class wrote them."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import torch
from safetensors import safe_open

logger = logging.getLogger(__name__)

__all__ = [
    "BLOCK_EMB", "KINDS", "KIND_ALIASES", "RealmCheckpoint", "RealmConversionError", "as_checkpoint", "detect_kind",
    "load_realm_checkpoint",
]

KINDS = ("embedder", "encoder", "reader", "openqa")
KIND_ALIASES = {
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
"""The corpus embeddings of an old `RealmForOpenQA`: data for the index, never a model buffer."""


class RealmConversionError(ValueError):
    """A transformers-REALM checkpoint does not fit the realm_hf model it is converted into."""


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


def as_checkpoint(src: str | os.PathLike | RealmCheckpoint) -> RealmCheckpoint:
    """`src` as a read checkpoint: read from its directory unless it is one already."""
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
