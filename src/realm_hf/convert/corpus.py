"""The corpus of an old transformers-REALM Open-QA checkpoint as a realm_hf index directory.

An old `google/realm-orqa-*` folder holds its corpus twice: the block texts in `block_records.npy` (a pickled NumPy
object array, read here without unpickling by [`iter_block_records`]) and their embeddings as the `block_emb` tensor
of the weights. [`convert_corpus`] streams both into an index directory: the blocks as an Arrow `save_to_disk` folder
written batch by batch (block id = record position), the embeddings copied row range by row range into
`embeddings.npy` (never re-embedded), then the search structure and a manifest that records where both came from.
Peak memory does not grow with the number of blocks (beyond what the chosen faiss type itself holds).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import datasets
import numpy as np
from datasets.arrow_writer import ArrowWriter
from tqdm.auto import tqdm

from ..index import RealmIndex
from ..index.backends import TORCH_EXACT, FaissBackend, TorchExactBackend
from ..index.index_types import is_supported_index_type, unsupported_index_type_message
from ..index.manifest import IndexManifest
from ..index.storage import BLOCKS_DIR, EMBEDDINGS_FILE
from .block_records import count_block_records, iter_block_records
from .checkpoint import BlockEmbeddingFile, RealmConversionError, find_block_embeddings

logger = logging.getLogger(__name__)

__all__ = [
    "BLOCK_RECORDS_FILE", "EXACT_INDEX_MAX_BLOCKS", "LARGE_INDEX_TYPE", "convert_corpus", "default_index_type",
    "write_blocks",
]

BLOCK_RECORDS_FILE = "block_records.npy"
"""The file name of the old corpus texts (`transformers` `_REALM_BLOCK_RECORDS_FILENAME`)."""

EXACT_INDEX_MAX_BLOCKS = 2_000_000
"""Up to this many blocks a converted corpus gets an exact `"Flat"` index (at most ~1 GB of 128-d vectors in RAM);
above it [`LARGE_INDEX_TYPE`]."""

LARGE_INDEX_TYPE = "IVF4096,SQ8"
"""The index type of a converted corpus of more than [`EXACT_INDEX_MAX_BLOCKS`] blocks: 8-bit codes in 4,096 lists,
~136 bytes a block. Measured at the paper's 13,353,718 blocks on 2 cores (benchmarks/results/convert-13m.md): built
in 8 min, recall@5 0.96 of exact search. The `"compressed"` preset (~64 bytes a block) would take hours to train
at that size on such a machine."""

BLOCK_FEATURES = datasets.Features(
    {"block_id": datasets.Value("int64"), "title": datasets.Value("string"), "text": datasets.Value("string")}
)
_DATA_FILE = "data-00000-of-00001.arrow"
_EMBEDDING_CHUNK_ROWS = 65_536


def default_index_type(num_blocks: int) -> str:
    """The index type a converted corpus of `num_blocks` blocks gets unless one is asked for (see
    [`EXACT_INDEX_MAX_BLOCKS`])."""
    return "Flat" if num_blocks <= EXACT_INDEX_MAX_BLOCKS else LARGE_INDEX_TYPE


def write_blocks(records_path: str | os.PathLike, directory: str | os.PathLike, batch_size: int = 10_000) -> int:
    r"""
    Stream the old block records into `directory` as a `datasets.save_to_disk` folder of `block_id` (the record's
    position), `title` (empty: the old records are whole block texts) and `text`, one Arrow batch at a time.

    Args:
        records_path (`str` or `os.PathLike`): The old `block_records.npy`.
        directory (`str` or `os.PathLike`): The folder to create (must not exist).
        batch_size (`int`, defaults to 10000): Records per batch.

    Returns:
        `int`: the number of blocks written.
    """
    directory = Path(directory)
    directory.mkdir(parents=True)
    total = count_block_records(records_path)
    written = 0
    writer = ArrowWriter(features=BLOCK_FEATURES, path=str(directory / _DATA_FILE), writer_batch_size=batch_size)
    try:
        with tqdm(total=total, desc="Block records", unit=" blocks", disable=None) as progress:
            for texts in iter_block_records(records_path, batch_size=batch_size):
                ids = list(range(written, written + len(texts)))
                writer.write_batch({"block_id": ids, "title": [""] * len(texts), "text": texts})
                written += len(texts)
                progress.update(len(texts))
        writer.finalize()
    finally:
        writer.close()
    # the two files `save_to_disk` writes beside its Arrow shards, so that `load_from_disk` reads the folder
    state = {
        "_data_files": [{"filename": _DATA_FILE}],
        "_fingerprint": uuid.uuid4().hex[:16],
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    (directory / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True), encoding="utf-8")
    datasets.DatasetInfo(features=BLOCK_FEATURES).write_to_directory(str(directory), pretty_print=True)
    return written


def _write_embeddings(source: BlockEmbeddingFile, path: Path) -> str:
    """Copy `block_emb` to the `.npy` file `path` (float32) in row ranges; returns the sha256 of its float32 rows."""
    num_blocks, dim = source.shape
    digest = hashlib.sha256()
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")), "fortran_order": False, "shape": (num_blocks, dim)}
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        with tqdm(total=num_blocks, desc="Block embeddings", unit=" rows", disable=None) as progress:
            for start in range(0, num_blocks, _EMBEDDING_CHUNK_ROWS):
                rows = source.read_rows(start, min(start + _EMBEDDING_CHUNK_ROWS, num_blocks))  # [C, D]
                data = np.ascontiguousarray(rows, dtype="<f4").tobytes()
                digest.update(data)
                f.write(data)
                progress.update(len(rows))
        f.flush()
        os.fsync(f.fileno())
    return digest.hexdigest()


def convert_corpus(
    src_dir: str | os.PathLike,
    index_dir: str | os.PathLike,
    index_type: str | None = None,
    provenance: dict[str, Any] | None = None,
    batch_size: int = 10_000,
) -> RealmIndex:
    r"""
    Write the corpus of an old `RealmForOpenQA` folder (`block_records.npy` + the `block_emb` of its weights) as an
    index directory, without unpickling anything and without re-embedding.

    Args:
        src_dir (`str` or `os.PathLike`): The old checkpoint folder.
        index_dir (`str` or `os.PathLike`): The index directory to write (must not exist; written atomically).
        index_type (`str`, *optional*): Any type [`RealmIndex.build`] takes; defaults to [`default_index_type`].
        provenance (`dict`, *optional*): Recorded in the manifest beside what this function records itself.
        batch_size (`int`, defaults to 10000): Records per Arrow batch.

    Returns:
        [`RealmIndex`]: the written index (blocks and embeddings memory-mapped). Its `fingerprint` is the sha256 of
        the embedding matrix: the tower that embedded the blocks is not part of the checkpoint, so pair the converted
        model with the index through `config.index_fingerprint`.
    """
    src_dir, index_dir = Path(src_dir), Path(index_dir)
    records_path = src_dir / BLOCK_RECORDS_FILE
    if not records_path.is_file():
        raise FileNotFoundError(
            f"No {BLOCK_RECORDS_FILE} in {src_dir}: the old corpus texts are part of the RealmForOpenQA repo; download "
            f"the whole repo (`hf download google/realm-orqa-nq-openqa --local-dir {src_dir}`)."
        )
    source = find_block_embeddings(src_dir)
    num_records = count_block_records(records_path)
    if num_records != source.shape[0]:
        raise RealmConversionError(
            f"{records_path} holds {num_records} records but block_emb of {source.path} has {source.shape[0]} rows; "
            "they must come from the same checkpoint (download both from the same repo revision)."
        )
    index_type = default_index_type(num_records) if index_type is None else index_type
    if not is_supported_index_type(index_type):
        raise ValueError(unsupported_index_type_message(index_type, "--index-type"))
    if index_dir.exists():
        raise FileExistsError(f"{index_dir} exists; the index is written to a new directory.")

    began = time.perf_counter()
    staging = index_dir.parent / f".{index_dir.name}.staging-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        written = write_blocks(records_path, staging / BLOCKS_DIR, batch_size=batch_size)
        if written != num_records:
            raise RealmConversionError(f"{records_path}: the header says {num_records} records, the file holds {written}.")
        embedding_digest = _write_embeddings(source, staging / EMBEDDINGS_FILE)
        logger.info("Wrote %d blocks and their embeddings in %.1fs", written, time.perf_counter() - began)
        blocks = datasets.load_from_disk(str(staging / BLOCKS_DIR))
        embeddings = np.load(staging / EMBEDDINGS_FILE, mmap_mode="r", allow_pickle=False)  # [N, D]
        ids = np.arange(written, dtype=np.int64)
        if index_type == TORCH_EXACT:
            backend: TorchExactBackend | FaissBackend = TorchExactBackend(embeddings, ids)
        else:
            backend = FaissBackend.build(embeddings, ids, index_type)
        manifest = IndexManifest(
            num_blocks=written,
            dim=int(source.shape[1]),
            index_type=index_type,
            embedding_dtype="float32",
            fingerprint=embedding_digest,
            search_params=backend.search_params,
            max_norm=backend.transform.max_norm if getattr(backend, "transform", None) is not None else None,
            provenance={
                "blocks": f"{BLOCK_RECORDS_FILE} of {src_dir} (block_id = record position)",
                "embeddings": f"block_emb of {source.path.name} in {src_dir}, copied as float32 (not re-embedded)",
                "fingerprint": "sha256 of embeddings.npy's float32 rows",
                **(provenance or {}),
            },
        )
        index = RealmIndex(blocks, embeddings, backend, manifest)
        index.save_pretrained(index_dir)  # blocks and embeddings hard-linked from the staging folder
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("Converted the corpus of %s (%d blocks, %s) in %.1fs", src_dir, written, index_type,
                time.perf_counter() - began)
    # just written and checksummed by save_pretrained: reading every file again to verify it would double the time
    return RealmIndex.from_pretrained(index_dir, verify_checksums=False)
