"""The paced builder: a background build that runs only in the slices of time the trainer lends it."""

from __future__ import annotations

import os
import threading
import time

import pytest
import torch
from test_index_refresh import _DocTower, build_index

from realm_hf.index import BuildPacer, IndexRefresher
from realm_hf.index.pacing import BuildCancelled, pause_point
from realm_hf.training.arguments import PretrainingArguments
from realm_hf.training.entry_points import main_pretrain


def _paced_worker(pacer: BuildPacer, units: int, unit_seconds: float, done: list[float]) -> threading.Thread:
    """A builder of `units` units of busy work with a pause point before each; `done` gets one entry per unit."""

    def work() -> None:
        try:
            pacer.attach()
            for _ in range(units):
                pause_point()
                began = time.monotonic()
                while time.monotonic() - began < unit_seconds:
                    pass
                done.append(time.monotonic())
        except BuildCancelled:
            done.append(-1.0)
        finally:
            pacer.detach()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_paced_builder_runs_only_inside_lend_and_for_its_share():
    pacer = BuildPacer(0.25)
    done: list[float] = []
    worker = _paced_worker(pacer, units=40, unit_seconds=0.01, done=done)
    assert pacer.lend(worker) == 0.0  # the first call only starts the trainer's clock
    trainer_seconds = 0.0
    for _ in range(8):
        before = len(done)
        began = time.monotonic()
        time.sleep(0.1)  # "a training step": the builder waits, whatever the time
        trainer_seconds += time.monotonic() - began
        assert len(done) == before, "the builder worked outside its slice"
        pacer.lend(worker)
    # 8 slices of ~0.025 s of 0.01 s units: some units done, far from all 40; overruns repaid, so the builder's time
    # is its share of the trainer's, give or take one unit
    assert 0 < len(done) < 40
    assert pacer.builder_seconds <= 0.25 * (trainer_seconds + 0.1) + 0.01 + 0.05
    pacer.lend(worker, unlimited=True)  # the end of training: the build runs to its end
    assert len(done) == 40 and not worker.is_alive()
    assert pacer.lend(worker) == 0.0  # nothing left to run


def test_cancelled_paced_builder_stops_at_its_next_pause_point():
    pacer = BuildPacer(0.5)
    done: list[float] = []
    worker = _paced_worker(pacer, units=1000, unit_seconds=0.001, done=done)
    pacer.lend(worker)
    pacer.cancel()
    worker.join(timeout=10)
    assert not worker.is_alive() and done[-1] == -1.0


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
def test_share_must_be_a_fraction(share):
    with pytest.raises(ValueError, match=r"share of the trainer's time must be in \(0, 1\]"):
        BuildPacer(share)


def test_paced_refresher_builds_in_the_trainers_slices_then_swaps(tmp_path, blocks_dir):
    tower = _DocTower()
    initial = build_index(tower.state_dict(), 0, blocks_dir)
    refresher = IndexRefresher(
        tmp_path / "r", build_index, {"blocks_dir": blocks_dir}, mode="thread", index=initial, time_share=0.5
    )
    with torch.no_grad():
        tower.embedding.weight.add_(1.0)
    refresher.request_refresh(1, tower.state_dict())
    time.sleep(1.0)  # the trainer trains; an unpaced builder thread would have published index-1 by now
    assert not os.path.exists(tmp_path / "r" / "LATEST")
    swapped, step = None, 1
    while swapped is None and step < 500:
        time.sleep(0.02)
        step += 1
        swapped = refresher.maybe_swap(step)  # lends the builder half of the 0.02 s just spent
    assert swapped is not None and swapped.step == 1 and step > 2
    record = refresher.stats[-1]
    assert record["staleness_seconds"] > 1.0 > record["paced_seconds"] > 0  # it ran only in its slices
    assert swapped.fingerprint == build_index(tower.state_dict(), 1, blocks_dir).fingerprint


def test_paced_refresher_wait_finishes_and_close_cancels(tmp_path, blocks_dir):
    tower = _DocTower()
    waiting = IndexRefresher(tmp_path / "w", build_index, {"blocks_dir": blocks_dir}, mode="thread", time_share=0.1)
    waiting.request_refresh(3, tower.state_dict())
    assert waiting.wait(timeout=60)  # runs the paced build to its end
    assert waiting.maybe_swap(4).step == 3

    closing = IndexRefresher(tmp_path / "c", build_index, {"blocks_dir": blocks_dir}, mode="thread", time_share=0.1)
    closing.request_refresh(3, tower.state_dict())
    worker = closing._running.worker
    closing.close()
    assert not worker.is_alive() and not closing.busy
    assert not os.path.exists(tmp_path / "c" / "LATEST")


def test_time_share_needs_thread_mode(tmp_path, capsys):
    with pytest.raises(ValueError, match="needs mode='thread'"):
        IndexRefresher(tmp_path, build_index, mode="process", time_share=0.15)
    with pytest.raises(ValueError, match="use --refresh_mode paced"):
        PretrainingArguments(refresh_mode="process", refresh_time_share=0.15)
    with pytest.raises(ValueError, match=r"--refresh_time_share must be in \(0, 1\]"):
        PretrainingArguments(refresh_mode="paced", refresh_time_share=2.0)
    with pytest.raises(ValueError, match="--refresh_mode must be 'process', 'thread' or 'paced', got 'paced2'"):
        PretrainingArguments(refresh_mode="paced2")
    with pytest.raises(SystemExit) as exit_info:
        main_pretrain(["--refresh_mode", "thread", "--refresh_time_share", "0.15", "--output_dir", str(tmp_path)],
                      prog="realm-hf pretrain")
    assert exit_info.value.code == 2
    assert "use --refresh_mode paced" in capsys.readouterr().err
