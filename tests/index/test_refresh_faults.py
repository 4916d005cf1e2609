"""Faults around the background refresh, with real faiss files and real builder processes: a damaged refreshed
index, an index of other weights, a builder killed with SIGKILL mid-build, and clean-up of indexes still needed."""

from __future__ import annotations

import os
import signal
import time

import datasets
import pytest
import torch
from index_helpers import MeanPoolEmbedder

from realm_hf.index import IndexRefresher, RealmIndex, fingerprint_state_dict


pytest.importorskip("faiss")


def build_flat_index(state_dict, step, blocks_dir, other_weights=False, hold_marker=None):
    """The builder: a faiss `Flat` index of the snapshot's embeddings. `other_weights` ignores the snapshot (an index
    of the wrong model); with `hold_marker`, the first attempt creates that file and then hangs, to be killed."""
    if hold_marker is not None and not os.path.exists(hold_marker):
        open(hold_marker, "w").close()
        time.sleep(600)
    tower = MeanPoolEmbedder(seed=99) if other_weights else MeanPoolEmbedder()
    if not other_weights:
        tower.load_state_dict(state_dict)
    return RealmIndex.build(datasets.load_from_disk(blocks_dir), tower, index_type="Flat", step=step)


def _wait_for_file(path: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(path), f"{path} did not appear within {timeout}s"


def _refresher(tmp_path, blocks_dir, mode="thread", **kwargs) -> tuple[IndexRefresher, MeanPoolEmbedder]:
    tower = MeanPoolEmbedder()
    initial = build_flat_index(tower.state_dict(), 0, blocks_dir)
    builder_kwargs = {"blocks_dir": blocks_dir, **kwargs.pop("builder_kwargs", {})}
    refresher = IndexRefresher(tmp_path / "r", build_flat_index, builder_kwargs, mode=mode, index=initial, **kwargs)
    return refresher, tower


@pytest.mark.parametrize("damage", ["garbage", "truncated_without_checksums"])
def test_damaged_refreshed_faiss_file_is_rejected_and_the_old_index_kept(tmp_path, blocks_dir, caplog, damage):
    # trusted, so that faiss reads the file (untrusted, a file the MAC does not vouch for is rebuilt instead: below)
    refresher, tower = _refresher(tmp_path, blocks_dir, load_kwargs={"trust_index_file": True})
    initial = refresher.index
    refresher.request_refresh(5, tower.state_dict())
    assert refresher.wait(timeout=60)
    directory = tmp_path / "r" / "index-5"
    faiss_file = directory / "index.faiss"
    if damage == "garbage":
        faiss_file.write_bytes(os.urandom(4096))  # the checksum catches it
    else:  # an index written without checksums (format 1, an older realm_hf): only faiss itself can tell
        manifest = directory / "manifest.json"
        text = manifest.read_text().replace('"checksums"', '"checksums_of_nothing"')
        manifest.write_text(text.replace('"format_version": 2', '"format_version": 1'))
        faiss_file.write_bytes(faiss_file.read_bytes()[:100])
    with caplog.at_level("WARNING", logger="realm_hf.index.refresh"):
        assert refresher.maybe_swap(6) is None
    assert refresher.index is initial and refresher.index_step == 0
    assert f"Rejected the refreshed index at {directory}" in caplog.text
    assert ("ValueError" if damage == "garbage" else "RuntimeError") in caplog.text
    assert "keeping the index from step 0" in caplog.text
    # training goes on: the next refresh is swapped in
    refresher.request_refresh(10, tower.state_dict())
    assert refresher.wait(timeout=60)
    assert refresher.maybe_swap(11).step == 10


def test_a_refreshed_faiss_file_that_is_not_the_one_written_is_rebuilt_not_parsed(tmp_path, blocks_dir, caplog):
    refresher, tower = _refresher(tmp_path, blocks_dir)
    refresher.request_refresh(5, tower.state_dict())
    assert refresher.wait(timeout=60)
    directory = tmp_path / "r" / "index-5"
    manifest = directory / "manifest.json"  # written without checksums (format 1), the faiss file cut short
    text = manifest.read_text().replace('"checksums"', '"checksums_of_nothing"')
    manifest.write_text(text.replace('"format_version": 2', '"format_version": 1'))
    (directory / "index.faiss").write_bytes((directory / "index.faiss").read_bytes()[:100])
    with caplog.at_level("WARNING", logger="realm_hf.index.storage"):
        swapped = refresher.maybe_swap(6)
    assert swapped is not None and swapped.step == 5 and swapped.num_blocks == 25  # from its embeddings
    assert "Rebuilding the faiss Flat structure" in caplog.text and "not written by this user's realm_hf" in caplog.text


def test_refreshed_index_of_other_weights_is_refused_unless_the_check_is_off(tmp_path, blocks_dir, caplog):
    refresher, tower = _refresher(tmp_path, blocks_dir, builder_kwargs={"other_weights": True})
    refresher.request_refresh(5, tower.state_dict())
    assert refresher.wait(timeout=60)
    with caplog.at_level("WARNING", logger="realm_hf.index.refresh"):
        assert refresher.maybe_swap(6) is None
    assert "document-tower fingerprint" in caplog.text and refresher.index_step == 0

    unchecked, tower = _refresher(
        tmp_path / "unchecked", blocks_dir, builder_kwargs={"other_weights": True}, check_fingerprint=False
    )
    unchecked.request_refresh(5, tower.state_dict())
    assert unchecked.wait(timeout=60)
    swapped = unchecked.maybe_swap(6)
    assert swapped is not None and swapped.fingerprint != fingerprint_state_dict(tower.state_dict())


def test_builder_killed_mid_build_is_restarted_at_once(tmp_path, blocks_dir, caplog):
    caplog.set_level("INFO", logger="realm_hf.index.refresh")
    marker = str(tmp_path / "builder-started")
    refresher, tower = _refresher(
        tmp_path, blocks_dir, mode="process", num_threads=1, builder_kwargs={"hold_marker": marker}
    )
    refresher.request_refresh(5, tower.state_dict())
    _wait_for_file(marker)
    os.kill(refresher.builder_pid, signal.SIGKILL)
    swapped, deadline = None, time.monotonic() + 120
    while swapped is None and time.monotonic() < deadline:  # the trainer polls between steps; no new request
        swapped = refresher.maybe_swap(6)
        time.sleep(0.05)
    assert swapped is not None and swapped.step == 5
    assert swapped.fingerprint == fingerprint_state_dict(tower.state_dict())
    assert "Index builder for snapshot step 5 was killed (signal 9)" in caplog.text
    assert "restarting it at once (restart 1 of 2)" in caplog.text
    assert os.listdir(tmp_path / "r" / "snapshots") == []


def test_builder_killed_more_often_than_allowed_gives_up_with_a_warning(tmp_path, blocks_dir, caplog):
    marker = str(tmp_path / "builder-started")
    refresher, tower = _refresher(
        tmp_path, blocks_dir, mode="process", num_threads=1, max_restarts=0, builder_kwargs={"hold_marker": marker}
    )
    refresher.request_refresh(5, tower.state_dict())
    _wait_for_file(marker)
    os.kill(refresher.builder_pid, signal.SIGKILL)
    assert refresher.wait(timeout=120)
    assert refresher.maybe_swap(6) is None and refresher.index_step == 0
    assert "restarting" not in caplog.text
    assert "Index builder for snapshot step 5 failed (exit code -9); keeping the index from step 0" in caplog.text


def test_clean_up_keeps_pinned_indexes(tmp_path, blocks_dir):
    refresher, tower = _refresher(tmp_path, blocks_dir, keep_last=1)
    refresher.index.save_pretrained(tmp_path / "r" / "index-0")
    refresher.pin(0)  # e.g. named by a checkpoint
    for step in (3, 6, 9):
        with torch.no_grad():
            tower.embedding.weight.add_(0.1)
        refresher.request_refresh(step, tower.state_dict())
        assert refresher.wait(timeout=60)
        assert refresher.maybe_swap(step + 1).step == step
    assert sorted(n for n in os.listdir(tmp_path / "r") if n.startswith("index-")) == ["index-0", "index-9"]
