"""Background index refresh: the schedule, swaps with staleness stats, and surviving a crashed builder."""

from __future__ import annotations

import json
import logging
import os
import threading
import time

import datasets
import pytest
import torch
from torch import nn

from realm_hf.index import IndexRefresher, RealmIndex, RefreshSchedule, fingerprint_state_dict


class _DocTower(nn.Module):
    """Mean-pooled embeddings; its state dict is what the trainer snapshots."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, 8)
        with torch.no_grad():
            self.embedding.weight.copy_(torch.randn(50, 8, generator=torch.Generator().manual_seed(seed)))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        mask = batch["attention_mask"].unsqueeze(-1).float()  # [N, L, 1]
        return (self.embedding(batch["input_ids"]) * mask).sum(1) / mask.sum(1)  # [N, D]


def build_index(state_dict, step, blocks_dir, crash_steps=(), fail_steps=()):
    """The builder: module-level, rebuilds the doc tower from the snapshot and embeds the corpus."""
    if step in crash_steps:
        os._exit(1)  # a hard crash: no exception, no cleanup
    if step in fail_steps:
        raise RuntimeError(f"builder failure at step {step} (simulated)")
    tower = _DocTower()
    tower.load_state_dict(state_dict)
    return RealmIndex.build(datasets.load_from_disk(blocks_dir), tower, index_type="torch-exact", step=step)


def test_refresh_schedule():
    every = RefreshSchedule("500")
    assert [s for s in range(0, 2001, 250) if every.should_refresh(s)] == [500, 1000, 1500, 2000]
    atlas = RefreshSchedule("0-1000:100,1000-:500")
    assert [s for s in range(0, 2600, 50) if atlas.should_refresh(s)] == [
        *range(100, 1000, 100),
        1000,
        1500,
        2000,
        2500,
    ]
    bounded = RefreshSchedule("100-300:100")
    assert [s for s in range(0, 600, 50) if bounded.should_refresh(s)] == [100, 200]
    assert not any(RefreshSchedule("none").should_refresh(s) for s in range(1000))
    assert RefreshSchedule(20).should_refresh(40)
    for bad in ("every 5", "10-5:3", "0-:10,5-:10", "0-100:0"):
        with pytest.raises(ValueError, match="schedule"):
            RefreshSchedule(bad)


def test_two_refreshes_are_swapped_in_with_staleness_logged(tmp_path, blocks_dir, caplog):
    caplog.set_level("INFO", logger="realm_hf")
    tower = _DocTower(seed=0)
    initial = build_index(tower.state_dict(), 0, blocks_dir)
    refresher = IndexRefresher(
        tmp_path / "refresh", build_index, {"blocks_dir": blocks_dir}, mode="thread", index=initial, schedule="10"
    )
    assert refresher.maybe_swap(1) is None  # nothing built yet

    snapshots = {}
    swapped = []
    for step in range(1, 31):
        with torch.no_grad():
            tower.embedding.weight.add_(0.1)  # "training"
        if refresher.schedule.should_refresh(step):
            snapshots[step] = fingerprint_state_dict(tower.state_dict())
        new = refresher.on_step(step, tower.state_dict)
        if new is not None:
            swapped.append(new)
        if step in (12, 22):
            refresher.wait()  # make sure the build finishes before the next request in this fast toy loop
    refresher.wait()
    last = refresher.maybe_swap(31)
    swapped += [last] if last is not None else []

    assert [index.step for index in swapped] == [10, 20, 30]
    assert [index.fingerprint for index in swapped] == [snapshots[10], snapshots[20], snapshots[30]]
    assert refresher.index is swapped[-1] and refresher.index_step == 30
    assert [s["snapshot_step"] for s in refresher.stats] == [10, 20, 30]
    for record in refresher.stats:
        assert record["staleness_steps"] == record["swap_step"] - record["snapshot_step"] >= 1
        assert record["staleness_seconds"] >= record["build_seconds"] > 0
    assert "steps and" in caplog.text and "stale (build took" in caplog.text
    assert json.loads((tmp_path / "refresh" / "LATEST").read_text())["directory"] == "index-30"
    assert sorted(n for n in os.listdir(tmp_path / "refresh") if n.startswith("index-")) == ["index-20", "index-30"]
    # the new index is what the snapshot embeds
    expected = build_index(tower.state_dict(), 30, blocks_dir)
    queries = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(refresher.index.search(queries, 5)[1], expected.search(queries, 5)[1])


def gated_build(state_dict, step, blocks_dir, gate):
    """A builder that cannot finish before the file `gate` exists (the test decides when the build ends)."""
    while not os.path.exists(gate):
        time.sleep(0.01)
    return build_index(state_dict, step, blocks_dir)


def test_max_staleness_waits_for_a_build_exactly_when_it_is_due(tmp_path, blocks_dir):
    gate = tmp_path / "gate"
    refresher = IndexRefresher(
        tmp_path / "r", gated_build, {"blocks_dir": blocks_dir, "gate": str(gate)}, mode="thread", max_staleness=2
    )
    refresher.request_refresh(1, _DocTower().state_dict())
    assert refresher.maybe_swap(1) is None and refresher.maybe_swap(2) is None  # not due yet: no wait
    assert refresher.ready_step(2) is None and refresher.busy
    timer = threading.Timer(0.5, gate.touch)
    timer.start()
    began = time.perf_counter()
    swapped = refresher.maybe_swap(3)  # due at 1 + 2: waits for the gate, then swaps
    assert time.perf_counter() - began >= 0.4 and swapped is not None and swapped.step == 1
    assert refresher.stats[-1]["swap_step"] == 3
    timer.join()

    blocking = IndexRefresher(tmp_path / "b", build_index, {"blocks_dir": blocks_dir}, mode="thread", max_staleness=0)
    blocking.request_refresh(5, _DocTower().state_dict())
    assert blocking.ready_step(5) == 5 and blocking.maybe_swap(5).step == 5  # a blocking refresh: at its own step
    with pytest.raises(ValueError, match="max_staleness must be >= 0"):
        IndexRefresher(tmp_path / "n", build_index, {"blocks_dir": blocks_dir}, mode="thread", max_staleness=-1)


def test_busy_builder_keeps_the_newest_request_pending(tmp_path, blocks_dir, caplog):
    caplog.set_level("INFO", logger="realm_hf")
    tower = _DocTower()
    refresher = IndexRefresher(tmp_path / "r", build_index, {"blocks_dir": blocks_dir}, mode="thread")
    refresher.request_refresh(1, tower.state_dict())
    refresher.request_refresh(2, tower.state_dict())  # pending (if 1 is still running)
    refresher.request_refresh(3, tower.state_dict())  # replaces 2
    refresher.wait()
    assert refresher.maybe_swap(4).step == 3
    skipper = IndexRefresher(tmp_path / "s", build_index, {"blocks_dir": blocks_dir}, mode="thread", on_busy="skip")
    assert skipper.request_refresh(1, tower.state_dict())
    started = skipper.request_refresh(2, tower.state_dict())
    skipper.wait()
    assert skipper.maybe_swap(3).step == (2 if started else 1)


def test_failed_builder_thread_keeps_the_previous_index(tmp_path, blocks_dir, caplog):
    tower = _DocTower()
    refresher = IndexRefresher(
        tmp_path / "r", build_index, {"blocks_dir": blocks_dir, "fail_steps": [5]}, mode="thread"
    )
    refresher.request_refresh(5, tower.state_dict())
    refresher.wait()
    assert refresher.maybe_swap(6) is None
    assert "failed (builder failure at step 5 (simulated))" in caplog.text
    refresher.request_refresh(7, tower.state_dict())
    refresher.wait()
    assert refresher.maybe_swap(8).step == 7


def test_crashed_builder_process_keeps_the_previous_index_and_restarts(tmp_path, blocks_dir, caplog):
    caplog.set_level("INFO", logger="realm_hf")
    tower = _DocTower()
    initial = build_index(tower.state_dict(), 0, blocks_dir)
    refresher = IndexRefresher(
        tmp_path / "r",
        build_index,
        {"blocks_dir": blocks_dir, "crash_steps": [10]},
        mode="process",
        index=initial,
        num_threads=1,
    )
    refresher.request_refresh(10, tower.state_dict())
    assert refresher.wait(timeout=120)
    assert refresher.maybe_swap(11) is None
    assert refresher.index is initial and refresher.index_step == 0
    assert "Index builder for snapshot step 10 failed (exit code 1); keeping the index from step 0" in caplog.text
    assert not os.path.exists(tmp_path / "r" / "index-10") and not os.path.exists(tmp_path / "r" / "LATEST")

    with torch.no_grad():
        tower.embedding.weight.mul_(2)
    refresher.request_refresh(20, tower.state_dict())  # a fresh builder process
    deadline = time.monotonic() + 120
    swapped = None
    while swapped is None and time.monotonic() < deadline:
        swapped = refresher.maybe_swap(21)  # the trainer polls between steps
        time.sleep(0.05)
    assert swapped is not None and swapped.step == 20
    assert swapped.fingerprint == fingerprint_state_dict(tower.state_dict())
    assert refresher.stats[-1]["snapshot_step"] == 20 and refresher.stats[-1]["swap_step"] == 21
    assert os.listdir(tmp_path / "r" / "snapshots") == []  # snapshot files are cleaned up


def test_builder_must_be_importable(tmp_path):
    with pytest.raises(ValueError, match="module-level function"):
        IndexRefresher(tmp_path, lambda state_dict, step: None)
    with pytest.raises(ValueError, match="JSON-able"):
        IndexRefresher(tmp_path, build_index, {"blocks": object()})


def test_the_builder_process_logs_as_the_trainer_does(tmp_path, blocks_dir, caplog, capfd):
    # the CLI shows realm_hf's INFO lines and other libraries' from WARNING (`configure_logging`): so does the builder
    caplog.set_level("INFO", logger="realm_hf")
    assert logging.getLogger().getEffectiveLevel() > logging.INFO
    tower = _DocTower()
    refresher = IndexRefresher(
        tmp_path / "r", build_index, {"blocks_dir": blocks_dir}, mode="process",
        index=build_index(tower.state_dict(), 0, blocks_dir), num_threads=1,
    )
    refresher.request_refresh(10, tower.state_dict())
    assert refresher.wait(timeout=120)
    assert refresher.maybe_swap(11) is not None
    assert "[index builder] INFO realm_hf.index.mips: Built torch-exact index" in capfd.readouterr().err
