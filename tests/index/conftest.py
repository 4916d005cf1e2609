"""Fixtures of the index tests (helpers live in index_helpers.py, a name no other conftest can shadow)."""

from __future__ import annotations

import numpy as np
import pytest
from index_helpers import MeanPoolEmbedder, clustered, make_blocks


@pytest.fixture
def embedder() -> MeanPoolEmbedder:
    return MeanPoolEmbedder()


@pytest.fixture
def blocks_dir(tmp_path) -> str:
    """25 synthetic blocks saved with `datasets.save_to_disk` (what a refresh builder loads)."""
    path = str(tmp_path / "blocks")
    make_blocks(25).save_to_disk(path)
    return path


@pytest.fixture(scope="session")
def clustered_vectors() -> tuple[np.ndarray, np.ndarray]:
    return clustered(4000, 32, 50, seed=0)


@pytest.fixture(autouse=True, scope="session")
def _single_threaded_faiss() -> None:
    """Two small CPUs shared with other jobs: OpenMP threads only add contention to these tiny indexes."""
    try:
        import faiss
    except ImportError:
        return
    faiss.omp_set_num_threads(1)
