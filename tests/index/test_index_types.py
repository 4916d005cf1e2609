"""Only the index types the package builds reach faiss: a manifest's `index_type` is checked when it is read (an index
from a downloaded repo must not hand faiss a factory string of its choosing), and so are the build and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from index_helpers import make_blocks

from realm_hf.index import RealmIndex
from realm_hf.index.index_types import is_supported_index_type
from realm_hf.utils.options import UsageError
from realm_hf.training.validation import check_index_type

faiss = pytest.importorskip("faiss")

BUILT = [
    "Flat", "HNSW32", "HNSW32,SQ8", "SQfp16", "PQ8", "IVF284,Flat", "IVF284,SQ8", "IVF284,PQ64", "IVF284,PQ64x6",
    "IVF284,PQ64x4fs", "IVF755,PQ32,RFlat", "IVF4096,PQ32,Refine(Flat)", "IVF64_HNSW32,PQ16", "OPQ48_192,IVF755,PQ48",
]
"""The factory strings the docs, configs and benchmarks build (and their shapes)."""
REFUSED = ["IDMap,Flat", "LSH", "Flat ", "IVF10,Flat,IVF20,Flat", "HNSW32x", "Flatt", "", "PQ8;rm -rf", "flat"]


@pytest.mark.parametrize("index_type", BUILT)
def test_the_types_the_package_builds_are_accepted_and_parse(index_type):
    assert is_supported_index_type(index_type)
    check_index_type(index_type)
    faiss.index_factory(192, index_type, faiss.METRIC_INNER_PRODUCT)


@pytest.mark.parametrize("index_type", REFUSED)
def test_other_strings_are_refused_in_one_line(index_type):
    assert not is_supported_index_type(index_type)
    with pytest.raises(UsageError, match=r"^--index-type .* is not an index type realm_hf builds; use one such as Flat"):
        check_index_type(index_type)


def test_the_build_refuses_a_type_faiss_would_take():
    vectors = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    with pytest.raises(ValueError, match=r"^index_type 'IDMap,Flat' is not an index type realm_hf builds"):
        RealmIndex.from_embeddings(make_blocks(16), vectors, index_type="IDMap,Flat")


@pytest.mark.parametrize("written", ["IDMap,Flat", "LSH", 42, None])
def test_a_manifest_with_another_index_type_is_refused_naming_it_before_faiss_reads_anything(tmp_path, written):
    vectors = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    RealmIndex.from_embeddings(make_blocks(16), vectors, index_type="Flat").save_pretrained(tmp_path / "index")
    path = tmp_path / "index" / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "index_type": written}))
    with pytest.raises(ValueError, match=rf"^{path}: index_type {written!r} is not an index type realm_hf builds"):
        RealmIndex.from_pretrained(tmp_path / "index")


ABSURD = [
    ("HNSW100000000", "HNSW M=100000000 is outside 2..256"), ("HNSW1", "HNSW M=1 is outside"),
    ("IVF0,Flat", "IVF nlist=0 is outside"), ("IVF2000000,PQ32", "IVF nlist=2000000 is outside 1..1048576"),
    ("IVF64_HNSW1000,Flat", "HNSW M=1000"), ("PQ5000", "PQ m=5000 is outside 1..4096"),
    ("IVF64,PQ8x17", "PQ nbits=17 is outside 1..16"), ("PQ8fs", "PQ8fs needs 4 bits a code"),
    ("OPQ16_8,PQ16", "OPQ m=16 is more than its output dim d=8"), ("OPQ16_9000,PQ16", "OPQ d=9000 is outside"),
    ("PCAR5000,Flat", "PCAR d=5000 is outside 1..4096"),
]
"""Factory strings of a supported shape whose numbers faiss would try to honour (HNSW100000000: ~50 GB)."""


@pytest.mark.parametrize("index_type, problem", ABSURD)
def test_absurd_numbers_are_refused_in_one_line_naming_the_number(index_type, problem):
    assert not is_supported_index_type(index_type)
    with pytest.raises(UsageError) as error:
        check_index_type(index_type)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"--index-type {index_type!r} is not an index type realm_hf")
    assert problem in message and "use smaller numbers" in message


def test_a_manifest_with_an_absurd_number_is_refused_before_faiss_sees_it(tmp_path, monkeypatch):
    vectors = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    RealmIndex.from_embeddings(make_blocks(16), vectors, index_type="Flat").save_pretrained(tmp_path / "index")
    path = tmp_path / "index" / "manifest.json"
    manifest = json.loads(path.read_text())

    def refuse(*args, **kwargs):
        raise AssertionError("faiss was asked to build it")

    monkeypatch.setattr(faiss, "index_factory", refuse)
    monkeypatch.setattr(faiss, "read_index", refuse)
    for written, problem in [("HNSW100000000", "HNSW M=100000000"), ("PQ16", "PQ m=16 is outside 1..8")]:
        path.write_text(json.dumps({**manifest, "index_type": written}))  # PQ16 fits no 8-dim index
        with pytest.raises(ValueError, match=rf"^{path}: index_type {written!r} is not .*: {problem}.* Rebuild"):
            RealmIndex.from_pretrained(tmp_path / "index")


@pytest.mark.parametrize(
    "index_type, problem",
    [("IVF64,Flat", "IVF nlist=64 is more than the 40 vectors it is trained on"), ("PQ8", "PQ m=8 is outside 1..4"),
     ("PQ2x12", "PQ nbits=12 needs 4096 training vectors, it is trained on 40"), ("PCAR8,Flat", "PCAR output dim 8")],
)
def test_the_build_bounds_numbers_by_the_vectors_it_has(index_type, problem):
    vectors = np.random.default_rng(0).standard_normal((40, 4)).astype(np.float32)
    with pytest.raises(ValueError) as error:
        RealmIndex.from_embeddings(make_blocks(40), vectors, index_type=index_type)
    assert problem in str(error.value) and "\n" not in str(error.value)
