"""Reading old transformers-REALM checkpoints (`config.json` + safetensors or `torch.load(weights_only=True)`
weights, sharded or not) and telling which old class wrote them."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import struct
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open

logger = logging.getLogger(__name__)

__all__ = [
    "BLOCK_EMB", "KINDS", "KIND_ALIASES", "BlockEmbeddingFile", "RealmCheckpoint", "RealmConversionError",
    "as_checkpoint", "detect_kind", "find_block_embeddings", "load_realm_checkpoint",
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


@dataclasses.dataclass
class BlockEmbeddingFile:
    r"""
    Where the corpus embeddings `block_emb` `[num_blocks, D]` of an old `RealmForOpenQA` lie in its weight file, read
    in row ranges with plain file reads (13M x 128 floats in the released checkpoints: they never need to be in
    memory, nor mapped into it, at once).

    Args:
        path (`Path`): The weight file.
        offset (`int`): Byte offset of row 0 in it.
        shape (`tuple[int, int]`): `(num_blocks, D)`.
        dtype (`np.dtype`): The stored dtype (little-endian float32 in the released checkpoints).
    """

    path: Path
    offset: int
    shape: tuple[int, int]
    dtype: np.dtype

    def read_rows(self, start: int, stop: int) -> np.ndarray:
        """Rows `start:stop` as a float32 array `[stop - start, D]`."""
        row_bytes = self.shape[1] * self.dtype.itemsize
        with open(self.path, "rb") as f:
            f.seek(self.offset + start * row_bytes)
            data = f.read((stop - start) * row_bytes)
        if len(data) != (stop - start) * row_bytes:
            raise RealmConversionError(f"{self.path} ends inside block_emb (row {start}); download the file again.")
        return np.frombuffer(data, dtype=self.dtype).reshape(stop - start, self.shape[1]).astype(np.float32)


_TORCH_DTYPES = {torch.float32: np.dtype("<f4"), torch.float16: np.dtype("<f2")}
_SAFETENSORS_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2")}


def _zip_member_offset(file: Path, info: zipfile.ZipInfo) -> int:
    """Byte offset of an uncompressed zip member's data (after its local header)."""
    with open(file, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        raise RealmConversionError(f"{file}: damaged zip entry {info.filename}; download the file again.")
    name_length, extra_length = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_length + extra_length


def _block_emb_in_torch_file(file: Path) -> BlockEmbeddingFile | None:
    """`block_emb` of a torch zip file: the one uncompressed storage whose bytes are the tensor's (its first and last
    bytes compared through a memory map, which reads two pages)."""
    loaded = torch.load(str(file), map_location="cpu", weights_only=True, mmap=True)
    tensor = loaded.get(BLOCK_EMB) if isinstance(loaded, Mapping) else None
    if tensor is None:
        return None
    if tensor.dim() != 2 or tensor.dtype not in _TORCH_DTYPES:
        raise RealmConversionError(
            f"{file}: block_emb has shape {list(tensor.shape)} and dtype {tensor.dtype}; expected a float matrix "
            "[num_blocks, D]."
        )
    nbytes = tensor.numel() * tensor.element_size()
    if tensor.storage_offset() != 0 or not tensor.is_contiguous() or tensor.untyped_storage().nbytes() != nbytes:
        raise RealmConversionError(f"{file}: block_emb is a view of a larger storage; re-save the checkpoint.")
    flat = tensor.reshape(-1).view(torch.uint8)
    edge = min(nbytes, 4096)
    head, tail = bytes(flat[:edge].numpy()), bytes(flat[nbytes - edge :].numpy())
    matches = []
    with zipfile.ZipFile(file) as archive:
        for info in archive.infolist():
            if "/data/" not in info.filename or info.file_size != nbytes or info.compress_type != zipfile.ZIP_STORED:
                continue
            offset = _zip_member_offset(file, info)
            with open(file, "rb") as f:
                f.seek(offset)
                first = f.read(edge)
                f.seek(offset + nbytes - edge)
                last = f.read(edge)
            if first == head and last == tail:
                matches.append(offset)
    if len(matches) != 1:
        raise RealmConversionError(
            f"{file}: cannot locate block_emb's bytes in the zip archive ({len(matches)} candidate entries); "
            "re-save the checkpoint with torch.save or as safetensors."
        )
    return BlockEmbeddingFile(file, matches[0], tuple(tensor.shape), _TORCH_DTYPES[tensor.dtype])


def _block_emb_in_safetensors(file: Path) -> BlockEmbeddingFile | None:
    with open(file, "rb") as f:
        (header_length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_length))
    entry = header.get(BLOCK_EMB)
    if entry is None:
        return None
    if entry.get("dtype") not in _SAFETENSORS_DTYPES or len(entry.get("shape", ())) != 2:
        raise RealmConversionError(
            f"{file}: block_emb has dtype {entry.get('dtype')} and shape {entry.get('shape')}; expected F32/F16 "
            "[num_blocks, D]."
        )
    begin, _ = entry["data_offsets"]
    return BlockEmbeddingFile(file, 8 + header_length + begin, tuple(entry["shape"]), _SAFETENSORS_DTYPES[entry["dtype"]])


def find_block_embeddings(src: str | os.PathLike) -> BlockEmbeddingFile:
    r"""
    Locate the corpus embeddings `block_emb` of an old `RealmForOpenQA` checkpoint directory without loading them.

    Raises:
        [`RealmConversionError`]: when no weight file holds `block_emb`.
    """
    directory = Path(src)
    fmt, files = _weight_files(directory)
    for file in files:
        found = _block_emb_in_safetensors(file) if fmt == "safetensors" else _block_emb_in_torch_file(file)
        if found is not None:
            return found
    raise RealmConversionError(
        f"{directory} holds no block_emb: only old RealmForOpenQA checkpoints (google/realm-orqa-*) carry corpus "
        "embeddings."
    )
