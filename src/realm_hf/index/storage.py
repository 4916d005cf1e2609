"""The files of an index directory: writing them with their checksums, and reading them only after every file that
will be parsed has matched the manifest.

Layout of an index directory (a downloaded Hub bundle has the same layout, with `blocks/*.parquet` shards)::

    blocks/                 datasets.save_to_disk (Arrow, memory-mapped on load); in a Hub bundle blocks/*.parquet;
                            hard links to the corpus folder the blocks were read from, when unchanged
    embeddings.npy          [N, D] float32 or float16, memory-mapped on load
    index.faiss             faiss.write_index (absent for index_type="torch-exact")
    manifest.json           IndexManifest, with the checksum of every other file

Trust rules (see docs/index.md, "Trust"):

- No symbolic link inside an index directory is followed: one is refused before anything is read, naming it, unless
  it resolves inside the Hugging Face cache repo folder the directory is a snapshot of (the cache stores snapshot
  files as links into the repo's `blobs/`).
- Every file the loader parses (each block file, `embeddings.npy`, the faiss file when it is read) is checked against
  the manifest's checksums first. A manifest of format 2 that records no checksum for one of them is refused; a
  format-1 manifest (realm_hf before block checksums) loads with a warning saying how to re-save it.
- A faiss file is handed to faiss's native reader only when this user's realm_hf wrote it (the manifest's
  `index_file_mac` verifies with this user's key, see `realm_hf.index.provenance`) or the caller trusts it
  (`trust_index_file=True`): provenance, not location (a `git clone` of a Hub repo or a copy out of the cache is
  not "local"). Otherwise the search structure is rebuilt from `embeddings.npy` (plain numbers, read with
  `allow_pickle=False`) with the manifest's factory string, and one log line says why and what it costs.
"""

from __future__ import annotations

import dataclasses
import glob
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
from datasets.table import ConcatenationTable, MemoryMappedTable

from ..corpus.store import int_column
from ..utils.files import read_json_file, reading_file
from ..utils.quiet import quiet_checkpoint_io
from .backends import FAISS_FILE, TORCH_EXACT, FaissBackend, TorchExactBackend
from .compressed import COMPRESSED, MipsToL2
from .manifest import (
    DAMAGED_INDEX_HINT, FORMAT_VERSION, MANIFEST_NAME, REBUILD_HINT, IndexManifest, check_checksums, file_checksum,
)
from .locations import came_from_hub, check_no_links
from .provenance import sign_index_file, verify_index_file


logger = logging.getLogger(__name__)

__all__ = [
    "BLOCKS_DIR",
    "EMBEDDINGS_FILE",
    "came_from_hub",
    "check_no_links",
    "load_backend",
    "load_index_blocks",
    "read_index_files",
    "record_checksums",
    "save_blocks",
    "save_embeddings",
    "saved_file_of",
    "saved_folder_of",
    "write_index_files",
]

BLOCKS_DIR = "blocks"
EMBEDDINGS_FILE = "embeddings.npy"


# ------------------------------------------------------------------------------------------------------ write
def record_checksums(directory: str | os.PathLike, names: list[str] | None = None) -> dict[str, str]:
    r"""
    [`file_checksum`] of the files of an index directory, for its manifest.

    Args:
        directory (`str` or `os.PathLike`): A complete index directory or Hub bundle staging folder.
        names (`list[str]`, *optional*): Relative POSIX paths of the files; default: every file under `directory`
            but the manifest.

    Returns:
        `dict[str, str]`: relative POSIX path (`"blocks/data-00000-of-00001.arrow"`) -> checksum, sorted by path.
    """
    directory = os.fspath(directory)
    if names is None:
        names = _relative_files(directory)
    names = sorted(name for name in names if name != MANIFEST_NAME)
    return {name: file_checksum(os.path.join(directory, *name.split("/"))) for name in names}


def _relative_files(directory: str, folder: str = "") -> list[str]:
    """The files under `directory/folder`, as POSIX paths relative to `directory`."""
    return [
        Path(os.path.relpath(os.path.join(root, name), directory)).as_posix()
        for root, _, files in os.walk(os.path.join(directory, folder))
        for name in files
    ]


def write_index_files(index: Any, directory: str | os.PathLike) -> None:
    r"""
    Write the files of `index` into the empty `directory`, the manifest last (with the checksums of all the others,
    and the MAC that marks the faiss file as written by this user's realm_hf, see `realm_hf.index.provenance`).

    Args:
        index ([`RealmIndex`]): The index.
        directory (`str` or `os.PathLike`): An existing, empty directory (the temporary one of an atomic save).
    """
    directory = os.fspath(directory)
    save_blocks(index.blocks, os.path.join(directory, BLOCKS_DIR))
    save_embeddings(index.embeddings, os.path.join(directory, EMBEDDINGS_FILE))
    index.backend.save(directory)
    manifest = index.manifest
    manifest.search_params = dict(index.backend.search_params)
    manifest.format_version = FORMAT_VERSION
    manifest.checksums = record_checksums(directory)
    manifest.index_file_mac = None  # never kept in memory: only the file written here vouches for its faiss file
    faiss_path = os.path.join(directory, FAISS_FILE)
    mac = sign_index_file(faiss_path) if os.path.isfile(faiss_path) else None  # who wrote it (module docstring)
    dataclasses.replace(manifest, index_file_mac=mac).to_json_file(
        os.path.join(directory, MANIFEST_NAME)  # last: its presence marks completeness
    )


def saved_file_of(embeddings: np.ndarray) -> str | None:
    r"""
    The `.npy` file whose data is exactly `embeddings`, or None: a whole file memory-mapped read-only with
    `np.load(..., mmap_mode="r")` (not a slice or a copy of one).

    Args:
        embeddings (`np.ndarray`): Any array.
    """
    if not isinstance(embeddings, np.memmap) or embeddings.mode != "r" or not embeddings.flags.c_contiguous:
        return None
    path = getattr(embeddings, "filename", None)
    if path is None or not os.path.isfile(path):
        return None
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran_order, dtype = read_header(f)
            data_offset = f.tell()
    except (OSError, ValueError):
        return None
    whole = (tuple(shape), fortran_order, dtype) == (embeddings.shape, False, embeddings.dtype)
    return path if whole and embeddings.offset == data_offset else None


def save_embeddings(embeddings: np.ndarray, path: str | os.PathLike) -> None:
    r"""
    Write the embedding matrix to `path` (`.npy`). Embeddings memory-mapped from a whole `.npy` file (see
    [`saved_file_of`]) are hard-linked, not copied: a converted or refreshed corpus of millions of rows is not written
    twice, and nothing is read into memory. Where a link cannot be made, the matrix is written.

    Args:
        embeddings (`np.ndarray` of shape `(N, D)`): The embeddings.
        path (`str` or `os.PathLike`): The file to create.
    """
    source = saved_file_of(embeddings)
    if source is not None:
        try:
            os.link(source, path)
            return
        except OSError as err:  # EXDEV, EPERM: copy instead
            logger.info("Could not hard-link %s to %s (%s); writing the embeddings", source, path, err)
    np.save(path, np.asarray(embeddings), allow_pickle=False)


def saved_folder_of(dataset: datasets.Dataset) -> str | None:
    r"""
    The `save_to_disk` folder whose files hold exactly `dataset`, or None.

    That is a dataset loaded with `datasets.load_from_disk` (memory-mapped) and not changed since: no indices mapping
    (`select`, `shuffle`), no column added, renamed or cast (its tables are the folder's Arrow files, with no operation
    but the schema metadata `datasets` sets on load), the folder's `state.json` naming those files in that order.

    Args:
        dataset (`datasets.Dataset`): Any dataset.
    """
    if dataset._indices is not None:
        return None
    # rows of column blocks: one table per row, else columns were concatenated (e.g. add_column)
    rows = dataset._data.blocks if isinstance(dataset._data, ConcatenationTable) else [[dataset._data]]
    if any(len(row) != 1 for row in rows):
        return None
    tables = [row[0] for row in rows]
    if not tables or not all(
        isinstance(table, MemoryMappedTable)
        and all(replay[0] == "replace_schema_metadata" for replay in table.replays or [])
        for table in tables
    ):
        return None
    paths = [os.path.abspath(table.path) for table in tables]
    folder = os.path.dirname(paths[0])
    return folder if _saved_files(folder) == paths else None


def _data_files(state_path: str) -> list[dict]:
    """The `_data_files` entries of a `save_to_disk` folder's `state.json`."""
    state = read_json_file(state_path, DAMAGED_INDEX_HINT)
    return state.get("_data_files", []) if isinstance(state, dict) else []


def _saved_files(folder: str) -> list[str]:
    """The Arrow files the `state.json` of a `save_to_disk` folder names, in order (none without it)."""
    state_path = os.path.join(folder, "state.json")
    if not os.path.isfile(state_path):
        return []
    return [os.path.join(folder, entry.get("filename", "")) for entry in _data_files(state_path)]


def save_blocks(blocks: datasets.Dataset, directory: str | os.PathLike) -> None:
    r"""
    Write the blocks of an index into `directory` as a `save_to_disk` folder. Blocks read unchanged from such a folder
    (e.g. the corpus blocks of a training run, or another index's) are hard-linked, not copied: every index version
    of a run is a complete directory of its own, while the corpus is stored once on disk (a refresh writes only its
    embeddings). Where a link cannot be made (another filesystem), the blocks are copied.

    Args:
        blocks (`datasets.Dataset`): The blocks.
        directory (`str` or `os.PathLike`): Where to write them (must not exist yet).
    """
    directory = os.fspath(directory)
    folder = saved_folder_of(blocks)
    if folder is not None:
        os.makedirs(directory)
        metadata = [os.path.join(folder, name) for name in ("state.json", "dataset_info.json")]
        try:
            for path in [*_saved_files(folder), *filter(os.path.isfile, metadata)]:
                os.link(path, os.path.join(directory, os.path.basename(path)))
            return
        except OSError as err:  # EXDEV (another filesystem), EPERM (links not allowed): copy instead
            logger.info("Could not hard-link the blocks of %s into %s (%s); copying them", folder, directory, err)
            shutil.rmtree(directory)
    with quiet_checkpoint_io():  # the save is logged by the caller; a bar per save is noise
        blocks.save_to_disk(directory)


# ------------------------------------------------------------------------------------------------------- read
def _check_recorded_paths(directory: str, manifest: IndexManifest) -> None:
    """Refuse a manifest whose checksums name a file outside the directory (the Parquet shards read are its keys)."""
    for name in manifest.checksums or {}:
        parts = name.split("/")
        if os.path.isabs(name) or "\\" in name or ".." in parts or "" in parts:
            raise ValueError(
                f"{os.path.join(directory, MANIFEST_NAME)} records a checksum for {name!r}, which is not a path inside "
                f"the index directory: the manifest was edited. {REBUILD_HINT}"
            )


def _block_files(directory: str, manifest: IndexManifest, verify: bool) -> list[str]:
    """The block files the loader parses, as manifest keys: for a `save_to_disk` folder, `state.json` (checked first,
    then read for the names of its Arrow files), `dataset_info.json` and those Arrow files; for a Hub bundle, the
    Parquet shards the manifest records (all `*.parquet` for a format-1 manifest)."""
    state = f"{BLOCKS_DIR}/state.json"
    if os.path.isfile(os.path.join(directory, BLOCKS_DIR, "state.json")):
        if verify and manifest.format_version >= 2:  # format 1 records no block files: one warning, below
            _verify(directory, manifest, [state])
        data_files = [entry.get("filename", "") for entry in _data_files(os.path.join(directory, BLOCKS_DIR, "state.json"))]
        for name in data_files:
            if not name or os.path.basename(name) != name or name in (".", ".."):
                raise ValueError(f"{os.path.join(directory, state)} names a data file {name!r} outside its folder.")
        info = f"{BLOCKS_DIR}/dataset_info.json"
        extra = [info] if info in (manifest.checksums or {}) or os.path.exists(os.path.join(directory, info)) else []
        return [state, *extra, *(f"{BLOCKS_DIR}/{name}" for name in data_files)]
    recorded = [name for name in manifest.checksums or {} if name.startswith(f"{BLOCKS_DIR}/")]
    shards = recorded or _relative_files(directory, BLOCKS_DIR)  # a format-1 manifest records no blocks
    return sorted(name for name in shards if name.endswith(".parquet"))


def _verify(directory: str, manifest: IndexManifest, names: list[str]) -> None:
    """Check `names` against the manifest's checksums before anything parses them (see the module docstring)."""
    checksums = manifest.checksums or {}
    unrecorded = [name for name in names if name not in checksums]
    if manifest.format_version < 2:
        if unrecorded:
            shown = ", ".join(unrecorded[:3]) + (", ..." if len(unrecorded) > 3 else "")
            logger.warning(
                "%s was written by an older realm_hf (index format %d), whose checksums do not cover %s: loading "
                "them unchecked. Save the index again to record them: RealmIndex.from_pretrained(%r)"
                ".save_pretrained(<new dir>).", directory, manifest.format_version, shown, directory,
            )
    elif unrecorded:
        raise ValueError(
            f"{os.path.join(directory, MANIFEST_NAME)} records no checksum for {unrecorded[0]}"
            + (f" (and {len(unrecorded) - 1} more files)" if len(unrecorded) > 1 else "")
            + f", so it cannot be checked before it is read: the manifest was edited or does not belong to these "
            f"files. {REBUILD_HINT}"
        )
    check_checksums(directory, {name: checksums[name] for name in names if name in checksums})


def load_index_blocks(
    path: str | os.PathLike, mmap: bool = True, shards: list[str] | None = None
) -> datasets.Dataset:
    r"""
    The blocks of an index directory: a `save_to_disk` folder (local indexes) or `*.parquet` shards (Hub bundles,
    read in file-name order, which is the row order of the embeddings).

    Args:
        path (`str`): The `blocks` directory.
        mmap (`bool`, defaults to `True`): Memory-map (Parquet is converted once to an Arrow cache by `datasets`).
        shards (`list[str]`, *optional*): The Parquet shards to read (the ones the manifest records); default: every
            `*.parquet` in `path`.
    """
    path = os.fspath(path)
    if os.path.isfile(os.path.join(path, "state.json")):
        with reading_file(path, DAMAGED_INDEX_HINT):
            return datasets.load_from_disk(path, keep_in_memory=not mmap)
    shards = sorted(shards) if shards is not None else sorted(glob.glob(os.path.join(path, "*.parquet")))
    if not shards:
        raise FileNotFoundError(f"No blocks in {path}: expected a datasets.save_to_disk folder or *.parquet shards.")
    with reading_file(path, DAMAGED_INDEX_HINT):
        return datasets.Dataset.from_parquet(shards, keep_in_memory=not mmap)


def read_index_files(
    directory: str | os.PathLike,
    expected_dim: int | None = None,
    expected_fingerprint: str | None = None,
    mmap: bool = True,
    verify_checksums: bool = True,
    read_index_file: bool = True,
) -> tuple[IndexManifest, datasets.Dataset, np.ndarray]:
    r"""
    The manifest, blocks and embeddings of an index directory, each file checked against the manifest first.

    Args:
        directory (`str` or `os.PathLike`): The index directory.
        expected_dim, expected_fingerprint: see [`IndexManifest.check_compatible`].
        mmap (`bool`, defaults to `True`): Memory-map blocks and embeddings.
        verify_checksums (`bool`, defaults to `True`): Check the files against the manifest (`False`: an explicit
            opt-out, nothing is checked).
        read_index_file (`bool`, defaults to `True`): Whether the faiss file may be read too: then it is checked with
            the others when it is there, and a missing one is named (unless a Hub download left it out, see
            [`came_from_hub`]). Whether it is then parsed or rebuilt is [`load_backend`]'s choice.

    Returns:
        `(manifest, blocks, embeddings)`.

    Raises:
        `FileNotFoundError`: naming a missing file. `ValueError`: on a dim or fingerprint mismatch, a file that does
        not match its checksum or that a format-2 manifest does not record, saying how to rebuild.
    """
    directory = os.fspath(directory)
    if os.path.isdir(directory):
        check_no_links(directory)  # before anything is read, the manifest included
    manifest = IndexManifest.from_json_file(os.path.join(directory, MANIFEST_NAME))
    manifest.check_compatible(expected_dim, expected_fingerprint, source=directory)
    blocks_path = os.path.join(directory, BLOCKS_DIR)
    embeddings_path = os.path.join(directory, EMBEDDINGS_FILE)
    for path in (blocks_path, embeddings_path):
        if not os.path.exists(path):
            raise FileNotFoundError(f"Missing {os.path.basename(path)} in index directory {directory}.")
    _check_recorded_paths(directory, manifest)
    block_files = _block_files(directory, manifest, verify_checksums)
    names = [EMBEDDINGS_FILE, *block_files]
    if read_index_file and manifest.index_type != TORCH_EXACT:
        left_out = not os.path.lexists(os.path.join(directory, FAISS_FILE)) and came_from_hub(directory)
        if not left_out:  # a download fetches it only to read it (realm_hf.hub.resolve_index_dir)
            names.append(FAISS_FILE)
    if verify_checksums:
        _verify(directory, manifest, names)
    shards = [os.path.join(directory, *name.split("/")) for name in block_files if name.endswith(".parquet")]
    blocks = load_index_blocks(blocks_path, mmap=mmap, shards=shards or None)
    with reading_file(embeddings_path, DAMAGED_INDEX_HINT):
        embeddings = np.load(embeddings_path, mmap_mode="r" if mmap else None, allow_pickle=False)  # [N, D]
    if embeddings.shape != (manifest.num_blocks, manifest.dim):
        raise ValueError(
            f"{embeddings_path} has shape {list(embeddings.shape)} but the manifest says "
            f"[{manifest.num_blocks}, {manifest.dim}]; the directory is corrupt, rebuild the index."
        )
    return manifest, blocks, embeddings


def load_backend(
    directory: str,
    manifest: IndexManifest,
    embeddings: np.ndarray,
    blocks: datasets.Dataset,
    trust_index_file: bool,
    search_params: dict[str, Any] | None = None,
    device: str | torch.device | None = None,
) -> TorchExactBackend | FaissBackend:
    r"""
    The search structure of a loaded index: exact search, the saved faiss file (when this user's realm_hf wrote it or
    the caller trusts it, see the module docstring), or a faiss index rebuilt from the embeddings with the manifest's
    factory string (the manifest's `max_norm` is updated to the rebuilt transform's for the `"compressed"` preset),
    with one log line saying why and what it costs.

    Args:
        directory (`str`): The index directory, its files checked by [`read_index_files`] (faiss file included).
        manifest ([`IndexManifest`]): Its manifest. Its `index_file_mac` is checked here and dropped.
        embeddings (`np.ndarray` of shape `(N, D)`), blocks (`datasets.Dataset`): What [`read_index_files`] read.
        trust_index_file (`bool`): Read `index.faiss` with faiss's native reader whoever wrote it.
        search_params (`dict`, *optional*): Overrides of the stored search parameters.
        device (`str` or `torch.device`, *optional*): Device of the backend.
    """
    ids = int_column(blocks, "block_id")
    recorded_mac, manifest.index_file_mac = manifest.index_file_mac, None  # never kept in memory (see the manifest)
    if manifest.index_type == TORCH_EXACT:
        return TorchExactBackend(embeddings, ids, device=device)
    params = {**manifest.search_params, **(search_params or {})}
    path = os.path.join(directory, FAISS_FILE)
    if not os.path.isfile(path):
        if trust_index_file or not came_from_hub(directory):
            raise FileNotFoundError(
                f"Missing {FAISS_FILE} in index directory {directory} (index_type={manifest.index_type!r} needs it)."
            )
        why = f"the download left {FAISS_FILE} out (trust_index_file=True fetches and reads it)"
    else:
        why = None if trust_index_file else verify_index_file(path, recorded_mac)
    if why is not None:
        level = logging.INFO if came_from_hub(directory) else logging.WARNING
        logger.log(
            level, "Rebuilding the faiss %s structure of %s from %s (%d vectors) instead of parsing %s: %s. Pass "
            "trust_index_file=True to parse it if you trust who wrote it; to stop rebuilding, save the index again "
            "(RealmIndex.from_pretrained(<dir>).save_pretrained(<new dir>) keeps the rebuilt structure).",
            manifest.index_type, directory, EMBEDDINGS_FILE, len(embeddings), FAISS_FILE, why,
        )
        backend = FaissBackend.build(embeddings, ids, manifest.index_type, search_params=params, device=device)
        if backend.transform is not None:
            manifest.max_norm = backend.transform.max_norm
        return backend
    transform = None
    if manifest.index_type == COMPRESSED:
        if manifest.max_norm is None:
            raise ValueError(
                f"{directory} is a 'compressed' index without max_norm in its manifest; rebuild the index."
            )
        transform = MipsToL2(manifest.dim, manifest.max_norm)
    return FaissBackend.load(directory, manifest.index_type, search_params=params, device=device, transform=transform)
