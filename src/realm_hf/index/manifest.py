"""The `manifest.json` of an index directory, the fingerprint of the weights that built it, and the checksums of
its files."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import logging
import os
from collections.abc import Mapping
from importlib import metadata

import torch
import xxhash
from torch import nn

from ..utils.files import UnreadableFileError, read_json_file
from .index_types import is_supported_index_type, unsupported_index_type_message


logger = logging.getLogger(__name__)

FORMAT_VERSION = 2
"""Version of the index directory layout: 1 had checksums of the embeddings and faiss files only (read with a warning,
see `realm_hf.index.storage`); 2 records the checksum of every file, the blocks included."""
MANIFEST_NAME = "manifest.json"
REBUILD_HINT = (
    "Rebuild the index with the model you are using: `realm-hf build-index --model <model> --output <dir>` "
    "or `RealmIndex.build(blocks, retriever, tokenizer).save_pretrained(<dir>)`."
)
DAMAGED_INDEX_HINT = (
    "the index directory is damaged (an interrupted copy or download?): copy or download it again, or rebuild it "
    "(`realm-hf build-index --model <model> --output <dir>`)"
)
"""What to do about an unreadable file of an index directory (the end of an `UnreadableFileError`)."""


def package_version() -> str:
    """The installed realm_hf's version (`"unknown"` for a source tree that is not installed)."""
    try:
        return metadata.version("realm_hf")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


def fingerprint_state_dict(state_dict: Mapping[str, torch.Tensor]) -> str:
    r"""
    SHA-256 over the sorted parameter names, dtypes, shapes and raw tensor bytes of a state dict.

    Two state dicts have the same fingerprint if and only if (up to hash collisions) they hold the same tensors
    under the same names, so an index can tell whether it was built by the document tower in use.

    Args:
        state_dict (`Mapping[str, torch.Tensor]`): For example `retriever.document_embedder.state_dict()`.

    Returns:
        `str`: a 64-character hexadecimal digest.
    """
    digest = hashlib.sha256()
    for name in sorted(state_dict):
        tensor = state_dict[name]
        if not isinstance(tensor, torch.Tensor):
            continue  # extra state such as python objects is not part of the weights
        tensor = tensor.detach().to("cpu").contiguous()
        digest.update(name.encode("utf-8"))
        digest.update(f"{tensor.dtype}{tuple(tensor.shape)}".encode())
        # view as bytes so bfloat16 (which numpy lacks) hashes too
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


CHECKSUM_ALGORITHM = "xxh3_128"
_CHUNK = 16 * 1024 * 1024


def file_checksum(path: str | os.PathLike) -> str:
    r"""
    Checksum of a file's bytes as `"xxh3_128:<hex>"` (xxHash3, about 15 GB/s: it detects damaged, truncated,
    swapped or reordered files, not tampering).

    Args:
        path (`str` or `os.PathLike`): The file.

    Returns:
        `str`: the algorithm name, a colon and the hexadecimal digest.
    """
    digest = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return f"{CHECKSUM_ALGORITHM}:{digest.hexdigest()}"


def check_checksums(directory: str | os.PathLike, checksums: Mapping[str, str]) -> None:
    r"""
    Check the files of an index directory against the checksums its manifest recorded.

    Args:
        directory (`str` or `os.PathLike`): The index directory.
        checksums (`Mapping[str, str]`): Relative POSIX path (inside `directory`) -> [`file_checksum`] value.

    Raises:
        `FileNotFoundError`: naming a missing file. `ValueError`: naming the file that differs, and how to rebuild.
    """
    for name, expected in sorted(checksums.items()):
        path = os.path.join(directory, *name.split("/"))
        algorithm = expected.partition(":")[0]
        if algorithm != CHECKSUM_ALGORITHM:
            raise ValueError(
                f"{os.path.join(directory, MANIFEST_NAME)} records a {algorithm!r} checksum for {name}; this realm_hf "
                f"knows {CHECKSUM_ALGORITHM!r}. Upgrade realm_hf or rebuild the index."
            )
        if not os.path.isfile(path):
            raise FileNotFoundError(f"Missing {name} in index directory {directory} (its manifest records it).")
        actual = file_checksum(path)
        if actual != expected:
            raise ValueError(
                f"{path} does not match the checksum in its manifest ({actual} != {expected}): the file was damaged, "
                f"truncated or replaced by another index's. {REBUILD_HINT}"
            )


def fingerprint_module(module: nn.Module) -> str:
    r"""
    Fingerprint of a module's weights: [`fingerprint_state_dict`] of `module.state_dict()`.

    Args:
        module (`torch.nn.Module`): the document tower that embeds the corpus.

    Returns:
        `str`: a 64-character hexadecimal digest.
    """
    return fingerprint_state_dict(module.state_dict())


@dataclasses.dataclass
class IndexManifest:
    r"""
    What an index directory holds, written as `manifest.json` next to the blocks, embeddings and faiss file.

    Args:
        num_blocks (`int`): Number of blocks (rows of the embedding matrix).
        dim (`int`): Embedding dimension.
        index_type (`str`): `"torch-exact"`, a faiss factory string such as `"HNSW32"` or `"IVF4096,PQ64"`, or the
            `"compressed"` preset.
        embedding_dtype (`str`): `"float32"` or `"float16"`, the dtype of the stored embedding matrix.
        fingerprint (`str`, *optional*): [`fingerprint_module`] of the document tower that built the index.
        step (`int`, *optional*): Training step of the document tower snapshot.
        metric (`str`, defaults to `"inner_product"`): The only metric REALM uses.
        search_params (`dict`, *optional*): Backend search parameters (`nprobe`, `efSearch`, `k_factor`).
        max_norm (`float`, *optional*): `index_type="compressed"` only: the norm `M` of its MIPS->L2 transform
            ([`MipsToL2`]), needed to add vectors and to turn L2 distances back into inner products.
        created_at (`str`, *optional*): ISO-8601 UTC time; filled in when omitted.
        realm_hf_version (`str`, *optional*): Version of the package that wrote the index; filled in when omitted.
        checksums (`dict`, *optional*): Relative POSIX path -> [`file_checksum`] of every file of the directory but
            the manifest (blocks, embeddings, faiss file), written by `RealmIndex.save_pretrained` and the Hub bundle,
            and checked before any of them is parsed (`None`: one changed in memory since it was saved, or an index
            written before checksums).
        provenance (`dict`, *optional*): Where the blocks and embeddings came from when they were not built by this
            package from a tower it can fingerprint, e.g. `realm-hf convert` of a transformers-REALM checkpoint:
            the source files, the tower that embedded the blocks and the converted tower whose queries match them.
        index_file_mac (`str`, *optional*): `"hmac-sha256:<hex>"` over the bytes of the faiss file under the key of
            the user whose realm_hf wrote the directory (see `realm_hf.index.provenance`): the faiss file is parsed
            only when it verifies with this user's key (or the caller trusts the file). Written to `manifest.json`
            by `RealmIndex.save_pretrained` and checked on load, never kept in memory: an index in memory (changed,
            or written as a Hub bundle) carries none.
        format_version (`int`): Version of this directory layout ([`FORMAT_VERSION`]).
    """

    num_blocks: int
    dim: int
    index_type: str
    embedding_dtype: str = "float32"
    fingerprint: str | None = None
    step: int | None = None
    metric: str = "inner_product"
    search_params: dict = dataclasses.field(default_factory=dict)
    max_norm: float | None = None
    created_at: str | None = None
    realm_hf_version: str | None = None
    checksums: dict[str, str] | None = None
    format_version: int = FORMAT_VERSION
    provenance: dict | None = None
    index_file_mac: str | None = None

    def __post_init__(self) -> None:
        if self.created_at is None:
            self.created_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        if self.realm_hf_version is None:
            self.realm_hf_version = package_version()

    def to_json_file(self, path: str | os.PathLike) -> None:
        """Write the manifest as indented JSON."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(dataclasses.asdict(self), f, indent=2, sort_keys=True)
            f.write("\n")

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> IndexManifest:
        """Read a manifest, refusing a damaged file, unknown format versions and metrics, and an index type the
        package does not build (the factory string would go to faiss)."""
        if not os.path.isfile(path):
            raise FileNotFoundError(f"No index manifest at {path}; this directory is not a RealmIndex. {REBUILD_HINT}")
        data = read_json_file(path, DAMAGED_INDEX_HINT)
        if not isinstance(data, dict):
            raise UnreadableFileError(f"{path} holds a JSON {type(data).__name__}, not a manifest; {DAMAGED_INDEX_HINT}.")
        version = data.get("format_version")
        if version is None or version > FORMAT_VERSION:
            raise ValueError(
                f"{path} has format_version={version}, this realm_hf reads format_version <= {FORMAT_VERSION}. "
                "Upgrade realm_hf (`pip install -U realm_hf`) or rebuild the index."
            )
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            logger.warning("Ignoring unknown manifest fields %s in %s", unknown, path)
        dim = data.get("dim")
        dim = dim if isinstance(dim, int) and not isinstance(dim, bool) and dim > 0 else None
        if not is_supported_index_type(data.get("index_type"), dim):
            raise ValueError(
                unsupported_index_type_message(data.get("index_type"), f"{path}: index_type", dim)
                + f" {REBUILD_HINT}"
            )
        manifest = cls(**{key: value for key, value in data.items() if key in known})
        if manifest.metric != "inner_product":
            raise ValueError(
                f"{path} has metric={manifest.metric!r}; REALM indexes use 'inner_product'. {REBUILD_HINT}"
            )
        return manifest

    def check_compatible(
        self, expected_dim: int | None = None, expected_fingerprint: str | None = None, source: str = "index"
    ) -> None:
        r"""
        Refuse an index that does not belong to the model in use.

        Args:
            expected_dim (`int`, *optional*): The retriever's embedding size.
            expected_fingerprint (`str`, *optional*): [`fingerprint_module`] of the retriever's document tower.
            source (`str`): Where the index came from, for the error message.

        Raises:
            `ValueError`: naming the values that differ and how to rebuild.
        """
        problems = []
        if expected_dim is not None and int(expected_dim) != self.dim:
            problems.append(f"embedding dim: index has {self.dim}, model expects {expected_dim}")
        if expected_fingerprint is not None and expected_fingerprint != self.fingerprint:
            problems.append(
                f"document-tower fingerprint: index was built by {self.fingerprint}, model has {expected_fingerprint}"
            )
        if problems:
            raise ValueError(f"The index at {source} does not match the model ({'; '.join(problems)}). {REBUILD_HINT}")
