"""A faiss file is trusted by who wrote it, not by where it lies: it is parsed only when the manifest's MAC verifies
with this user's key (this user's realm_hf wrote it) or the caller trusts it; otherwise the search structure is
rebuilt from embeddings.npy, with one log line saying why and what it costs."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat

import numpy as np
import pytest
import torch
from index_helpers import make_blocks

from realm_hf.index import RealmIndex
from realm_hf.index.backends import FaissBackend
from realm_hf.index.manifest import file_checksum
from realm_hf.index.provenance import CACHE_ENV, key_path
from realm_hf.utils.files import UnreadableFileError


faiss = pytest.importorskip("faiss")

VECTORS = np.random.default_rng(0).standard_normal((40, 16)).astype(np.float32)
QUERIES = torch.from_numpy(np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32))


@pytest.fixture
def user(tmp_path, monkeypatch):
    """This user's realm_hf cache (its key) in tmp_path; returns a function that switches to another user's."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "me"))
    return lambda name: monkeypatch.setenv(CACHE_ENV, str(tmp_path / name))


@pytest.fixture
def calls(monkeypatch) -> dict[str, list]:
    """The faiss files handed to faiss's native reader, and the rebuilds from the embeddings."""
    seen: dict[str, list] = {"parsed": [], "rebuilt": []}
    native, build = faiss.read_index, FaissBackend.build.__func__
    monkeypatch.setattr(faiss, "read_index", lambda path, *args: seen["parsed"].append(path) or native(path, *args))

    def spy(cls, *args, **kwargs):
        seen["rebuilt"].append(args[2])  # the factory string
        return build(cls, *args, **kwargs)

    monkeypatch.setattr(FaissBackend, "build", classmethod(spy))
    return seen


def _save(path, index_type: str = "Flat") -> str:
    RealmIndex.from_embeddings(make_blocks(40), VECTORS, index_type=index_type).save_pretrained(path)
    return str(path)


def _manifest(directory) -> dict:
    with open(os.path.join(directory, "manifest.json"), encoding="utf-8") as f:
        return json.load(f)


def _write_manifest(directory, manifest: dict) -> None:
    with open(os.path.join(directory, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f)


def _rebuild_lines(caplog) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.getMessage().startswith("Rebuilding the faiss")]


def test_an_index_this_user_saved_loads_its_faiss_file_wherever_it_lies(tmp_path, user, calls, caplog):
    saved = _save(tmp_path / "index")
    manifest = _manifest(saved)
    assert manifest["index_file_mac"].startswith("hmac-sha256:")
    assert stat.S_IMODE(os.stat(key_path()).st_mode) == 0o600 and os.path.getsize(key_path()) == 32
    moved = tmp_path / "elsewhere" / "index"
    shutil.copytree(saved, moved)  # a copy this user made: still this user's realm_hf's file
    calls["rebuilt"].clear()  # the build of the saved index
    with caplog.at_level(logging.INFO, logger="realm_hf.index.storage"):
        for directory in (saved, moved):
            loaded = RealmIndex.from_pretrained(directory)
            assert loaded.manifest.index_file_mac is None  # checked, not kept: a bundle of it carries none
    assert calls["rebuilt"] == [] and calls["parsed"] == [os.path.join(saved, "index.faiss"), str(moved / "index.faiss")]
    assert _rebuild_lines(caplog) == []


def test_the_same_folder_under_another_users_key_is_rebuilt_not_parsed(tmp_path, user, calls, caplog):
    saved = _save(tmp_path / "index", "HNSW32")
    copy = tmp_path / "colleague" / "index"
    shutil.copytree(saved, copy)
    user("colleague")
    calls["rebuilt"].clear()
    with caplog.at_level(logging.INFO, logger="realm_hf.index.storage"):
        loaded = RealmIndex.from_pretrained(copy)
    assert calls["parsed"] == [] and calls["rebuilt"] == ["HNSW32"]
    (line,) = _rebuild_lines(caplog)
    assert "\n" not in line and str(copy) in line and "(40 vectors)" in line
    assert "no key yet" in line and "trust_index_file=True" in line
    exact = RealmIndex.from_embeddings(make_blocks(40), VECTORS, index_type="torch-exact")
    assert torch.equal(loaded.search(QUERIES, 3)[1], exact.search(QUERIES, 3)[1])

    _save(tmp_path / "theirs")  # the colleague has a key now: it is not the one that signed the copy
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="realm_hf.index.storage"):
        RealmIndex.from_pretrained(copy)
    (line,) = _rebuild_lines(caplog)
    assert "not written by this user's realm_hf" in line and calls["parsed"] == []


def _craft(directory) -> None:
    """Garbage in place of the faiss file, the manifest's checksum rewritten to match (the MAC left as it was)."""
    path = os.path.join(directory, "index.faiss")
    with open(path, "wb") as f:
        f.write(b"not a faiss index " * 16)  # an unknown fourcc: faiss refuses it before allocating anything
    manifest = _manifest(directory)
    manifest["checksums"]["index.faiss"] = file_checksum(path)
    _write_manifest(directory, manifest)


@pytest.mark.parametrize("whose", ["mine", "copied"])
def test_a_crafted_faiss_file_is_never_handed_to_faiss_unless_trusted(tmp_path, user, calls, whose):
    saved = _save(tmp_path / "index")
    directory = saved if whose == "mine" else shutil.copytree(saved, tmp_path / "copy")
    _craft(directory)  # the MAC covers the bytes: editing the checksum does not make the file this user's
    calls["rebuilt"].clear()
    loaded = RealmIndex.from_pretrained(directory)
    assert calls["parsed"] == [] and calls["rebuilt"] == ["Flat"]
    exact = RealmIndex.from_embeddings(make_blocks(40), VECTORS, index_type="torch-exact")
    for got, want in zip(loaded.search(QUERIES, 4), exact.search(QUERIES, 4)):
        torch.testing.assert_close(got, want)
    with pytest.raises(UnreadableFileError, match=r"index\.faiss cannot be read"):  # the caller's choice: parsed
        RealmIndex.from_pretrained(directory, trust_index_file=True)
    assert calls["parsed"] == [os.path.join(directory, "index.faiss")]


def test_an_old_manifest_without_a_mac_is_rebuilt_saying_so(tmp_path, user, calls, caplog):
    saved = _save(tmp_path / "index")
    manifest = _manifest(saved)
    del manifest["index_file_mac"]
    _write_manifest(saved, manifest)
    calls["rebuilt"].clear()
    with caplog.at_level(logging.INFO, logger="realm_hf.index.storage"):
        RealmIndex.from_pretrained(saved)
    (line,) = _rebuild_lines(caplog)
    assert "records no index_file_mac" in line and "save the index again" in line
    assert calls["parsed"] == [] and calls["rebuilt"] == ["Flat"]
    RealmIndex.from_pretrained(saved).save_pretrained(tmp_path / "resaved")  # the fix it names: nothing parsed
    RealmIndex.from_pretrained(tmp_path / "resaved")
    assert calls["parsed"] == [str(tmp_path / "resaved" / "index.faiss")]


def test_a_key_file_others_can_read_is_not_used(tmp_path, user, calls, caplog):
    saved = _save(tmp_path / "index")
    os.chmod(key_path(), 0o644)
    calls["rebuilt"].clear()
    with caplog.at_level(logging.INFO, logger="realm_hf.index.storage"):
        RealmIndex.from_pretrained(saved)
    (line,) = _rebuild_lines(caplog)
    assert f"chmod 600 {key_path()}" in line and calls["parsed"] == []
