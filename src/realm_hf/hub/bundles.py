"""The index bundle: the files of a `RealmIndex` in its Hub form, how to write them and how to check a download.

A bundle (a Hub *dataset* repo, or a local snapshot of one)::

    README.md                           dataset card rendered from model_cards/index.md.j2 (`configs:` -> blocks)
    manifest.json                       IndexManifest: dims, index type, fingerprint of the doc tower, step, ...
    blocks/blocks-00000-of-0000N.parquet  the blocks, row order = embedding order (Parquet, sharded)
    embeddings.npy                      [N, D] float32/float16
    index.faiss                         faiss index (absent for index_type="torch-exact")

A local index directory (`RealmIndex.save_pretrained`) has the same files except that `blocks/` is a
`datasets.save_to_disk` folder (Arrow, memory-mapped in place); [`realm_hf.index.storage.load_index_blocks`] reads
both. The manifest records the checksum of every file of the bundle (the card excepted), checked on load before any
of them is parsed.
"""

from __future__ import annotations

import dataclasses
import glob
import math
import os
from typing import Any

import numpy as np

from ..index.backends import FAISS_FILE, TORCH_EXACT
from ..index.manifest import FORMAT_VERSION, MANIFEST_NAME, IndexManifest
from ..index.storage import BLOCKS_DIR, EMBEDDINGS_FILE, record_checksums


__all__ = ["check_index_bundle", "index_bundle_patterns", "write_index_bundle"]

CARD_FILE = "README.md"
BLOCK_SHARD_PATTERN = f"{BLOCKS_DIR}/*.parquet"


def _needs_index_file(manifest: IndexManifest, include_index_file: bool) -> bool:
    return include_index_file and manifest.index_type != TORCH_EXACT


def index_bundle_patterns(manifest: IndexManifest, include_index_file: bool = True) -> list[str]:
    r"""
    The files of an index bundle that `manifest.index_type` needs (`allow_patterns` of `snapshot_download`).

    `blocks/*` covers both the Parquet shards of a Hub bundle and a `save_to_disk` folder; the faiss file is asked
    for only when the index type is a faiss one and `include_index_file` (a loader that rebuilds the structure from
    the embeddings does not read it), so nothing else is downloaded.
    """
    patterns = [MANIFEST_NAME, EMBEDDINGS_FILE, f"{BLOCKS_DIR}/*"]
    if _needs_index_file(manifest, include_index_file):
        patterns.append(FAISS_FILE)
    return patterns


def check_index_bundle(
    directory: str | os.PathLike, manifest: IndexManifest, where: str, include_index_file: bool = True
) -> None:
    """Raise `FileNotFoundError` naming `where` and the first file the index type needs that `directory` lacks."""
    directory = os.fspath(directory)
    needed = [EMBEDDINGS_FILE] + ([FAISS_FILE] if _needs_index_file(manifest, include_index_file) else [])
    for name in needed:
        if not os.path.isfile(os.path.join(directory, name)):
            raise FileNotFoundError(
                f"The index {where} has no {name} (index_type={manifest.index_type!r} needs it; looked in "
                f"{directory}). The bundle is incomplete: re-publish it with `RealmIndex.push_to_hub` or "
                "`realm-hf publish`, or download it again with network access."
            )
    blocks = os.path.join(directory, BLOCKS_DIR)
    has_arrow = os.path.isfile(os.path.join(blocks, "state.json"))
    if not has_arrow and not glob.glob(os.path.join(blocks, "*.parquet")):
        raise FileNotFoundError(
            f"The index {where} has no blocks ({BLOCK_SHARD_PATTERN}; looked in {directory}). The bundle is "
            "incomplete: re-publish it with `RealmIndex.push_to_hub` or `realm-hf publish`."
        )


def write_index_bundle(index: Any, directory: str | os.PathLike, max_shard_size: str | int = "500MB") -> list[str]:
    r"""
    Write the Hub form of an index into `directory`: Parquet block shards, embeddings, faiss file, and the manifest
    with the checksums of these files.

    Args:
        index ([`RealmIndex`]): The index.
        directory (`str`): An existing, empty directory.
        max_shard_size (`str` or `int`, defaults to `"500MB"`): Upper bound of a Parquet shard (before compression).

    Returns:
        `list[str]`: the written paths, relative to `directory`, POSIX separators.
    """
    from datasets.utils.py_utils import convert_file_size_to_int

    directory = os.fspath(directory)
    blocks = index.blocks
    max_bytes = convert_file_size_to_int(max_shard_size)
    num_shards = max(1, min(len(blocks), math.ceil(blocks.data.nbytes / max(max_bytes, 1)))) if len(blocks) else 1
    os.makedirs(os.path.join(directory, BLOCKS_DIR), exist_ok=True)
    written = []
    for shard in range(num_shards):
        rel = f"{BLOCKS_DIR}/blocks-{shard:05d}-of-{num_shards:05d}.parquet"
        part = blocks.shard(num_shards=num_shards, index=shard, contiguous=True) if num_shards > 1 else blocks
        part.to_parquet(os.path.join(directory, rel))
        written.append(rel)
    np.save(os.path.join(directory, EMBEDDINGS_FILE), np.asarray(index.embeddings), allow_pickle=False)
    written.append(EMBEDDINGS_FILE)
    index.backend.save(directory)
    if os.path.isfile(os.path.join(directory, FAISS_FILE)):
        written.append(FAISS_FILE)
    manifest = dataclasses.replace(
        index.manifest,
        search_params=dict(index.backend.search_params),
        checksums=record_checksums(directory, written),
        format_version=FORMAT_VERSION,
    )
    manifest.to_json_file(os.path.join(directory, MANIFEST_NAME))
    written.append(MANIFEST_NAME)
    return written
