"""The paced builder: a background build that runs only in the slices of time the trainer lends it, on its thread."""

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


def _paced_build(pacer: BuildPacer, units: int, unit_seconds: float, done: list[float]) -> None:
    """Start a build of `units` units of busy work with a pause point before each; `done` gets one entry per unit
    (-1.0 when cancelled)."""

    def work() -> None:
        try:
            for _ in range(units):
                pause_point()
                began = time.monotonic()
                while time.monotonic() - began < unit_seconds:
                    pass
                done.append(time.monotonic())
        except BuildCancelled:
            done.append(-1.0)

    pacer.start(work)


def test_paced_build_runs_only_inside_lend_and_for_its_share():
    pacer = BuildPacer(0.25)
    done: list[float] = []
    _paced_build(pacer, units=40, unit_seconds=0.01, done=done)
    assert pacer.lend() == 0.0 and done == []  # the first call only starts the trainer's clock
    trainer_seconds = 0.0
    for _ in range(8):
        before = len(done)
        began = time.monotonic()
        time.sleep(0.1)  # "a training step": the build waits, whatever the time
        trainer_seconds += time.monotonic() - began
        assert len(done) == before, "the build worked outside its slice"
        pacer.lend()
    # 8 slices of ~0.025 s of 0.01 s units: some units done, far from all 40; overruns repaid, so the build's time
    # is its share of the trainer's, give or take one unit
    assert 0 < len(done) < 40
    assert pacer.builder_seconds <= 0.25 * (trainer_seconds + 0.1) + 0.01 + 0.05
    pacer.lend(unlimited=True)  # the end of training: the build runs to its end
    assert len(done) == 40 and not pacer.is_alive()
    assert pacer.lend() == 0.0  # nothing left to run


def test_the_paced_build_runs_on_the_trainers_thread_and_leaves_its_grad_mode_alone():
    """One OpenMP team (index.pacing): the build computes on the thread that lends it the time, and its no_grad
    blocks never leak into the trainer's steps (nor the trainer's modes into the build)."""
    pacer = BuildPacer(1.0)
    seen: list[tuple[int, bool]] = []

    def work() -> None:
        with torch.no_grad():
            seen.append((threading.get_ident(), torch.is_grad_enabled()))
        pause_point()
        seen.append((threading.get_ident(), torch.is_grad_enabled()))
        torch.set_grad_enabled(False)  # a build that leaves grad off at its pause points
        for _ in range(3):
            pause_point()
            seen.append((threading.get_ident(), torch.is_grad_enabled()))

    pacer.start(work)
    pacer.lend()
    while pacer.is_alive():
        time.sleep(0.01)
        pacer.lend()
        assert torch.is_grad_enabled(), "the build's grad mode leaked into the trainer"
    assert seen[0] == (threading.get_ident(), False) and seen[1][1]
    assert {ident for ident, _ in seen} == {threading.get_ident()}
    assert [enabled for _, enabled in seen[2:]] == [False, False, False]  # its own mode, kept across switches


def test_a_pause_point_inside_autocast_is_refused():
    pacer = BuildPacer(1.0)
    errors: list[BaseException] = []

    def work() -> None:
        try:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                time.sleep(0.02)  # past its slice
                pause_point()
        except RuntimeError as err:
            errors.append(err)

    pacer.start(work)
    pacer.lend()
    time.sleep(0.01)
    pacer.lend()
    assert not pacer.is_alive() and "inside a torch.autocast block" in str(errors[0])
    assert not torch.is_autocast_enabled("cpu")


def test_cancelled_paced_build_stops_at_its_next_pause_point():
    pacer = BuildPacer(0.5)
    done: list[float] = []
    _paced_build(pacer, units=1000, unit_seconds=0.001, done=done)
    pacer.lend()
    time.sleep(0.02)
    pacer.lend()
    assert 0 < len(done) < 1000
    pacer.cancel()
    assert not pacer.is_alive() and done[-1] == -1.0 and len(done) < 1000

    unstarted = BuildPacer(0.5)
    never: list[float] = []
    _paced_build(unstarted, units=10, unit_seconds=0.001, done=never)
    unstarted.cancel()
    assert not unstarted.is_alive() and never == []  # none of it ran


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
    assert worker.is_alive()  # it has work left, and runs only when lent time (a started build: test above)
    closing.close()
    assert not worker.is_alive() and not closing.busy
    assert not os.path.exists(tmp_path / "c" / "LATEST")


def test_time_share_needs_thread_mode(tmp_path, capsys):
    with pytest.raises(ValueError, match="needs mode='thread'"):
        IndexRefresher(tmp_path, build_index, mode="process", time_share=0.15)
    with pytest.raises(ValueError, match="use --refresh_mode paced"):
        PretrainingArguments(refresh_mode="process", refresh_time_share=0.15)
    with pytest.raises(ValueError, match=r"--refresh_time_share 2.0 cannot be right: it must be above 0 and at most 1"):
        PretrainingArguments(refresh_mode="paced", refresh_time_share=2.0)
    with pytest.raises(ValueError, match="--refresh_mode must be 'process', 'thread' or 'paced', got 'paced2'"):
        PretrainingArguments(refresh_mode="paced2")
    with pytest.raises(SystemExit) as exit_info:
        main_pretrain(["--refresh_mode", "thread", "--refresh_time_share", "0.15", "--output_dir", str(tmp_path)],
                      prog="realm-hf pretrain")
    assert exit_info.value.code == 2
    assert "use --refresh_mode paced" in capsys.readouterr().err


def slow_build(state_dict, step, blocks_dir, units=2000):
    """A builder that takes seconds, with a pause point between its units (as the embedding loop has)."""
    for _ in range(units):
        pause_point()
        time.sleep(0.002)
    return build_index(state_dict, step, blocks_dir)


def test_a_cancelled_build_thread_stops_at_its_next_pause_point_and_others_go_on():
    from realm_hf.index.pacing import cancellable_thread

    done: list[float] = []
    other: list[int] = []

    def work() -> None:
        try:
            for _ in range(10_000):
                pause_point()
                time.sleep(0.001)
                done.append(1.0)
        except BuildCancelled:
            done.append(-1.0)

    def elsewhere() -> None:  # pause points of a thread nobody cancelled never raise
        for _ in range(200):
            pause_point()
            other.append(1)

    thread, cancelled = cancellable_thread(work, name="index-builder-test")
    thread.start()
    time.sleep(0.05)
    cancelled.set()
    thread.join(timeout=10)
    bystander = threading.Thread(target=elsewhere)
    bystander.start()
    bystander.join(timeout=10)
    assert not thread.is_alive() and done[-1] == -1.0 and 0 < len(done) < 10_000
    assert len(other) == 200
    pause_point()  # nor on the main thread


def test_closing_a_thread_refresher_stops_the_running_build(tmp_path, blocks_dir, caplog):
    """A build thread must not outlive training: one left inside CUDA work when the interpreter exits aborts the
    process (seen on an H200: "terminate called without an active exception" after a refresh at the last step)."""
    caplog.set_level("INFO", logger="realm_hf")
    tower = _DocTower()
    refresher = IndexRefresher(tmp_path / "r", slow_build, {"blocks_dir": blocks_dir}, mode="thread")
    refresher.request_refresh(5, tower.state_dict())
    worker = refresher._running.worker
    time.sleep(0.1)
    assert worker.is_alive()
    began = time.monotonic()
    refresher.close()
    assert not worker.is_alive() and not refresher.busy
    assert time.monotonic() - began < 2.0  # stopped at its next pause point, not run to its end (~4 s)
    assert not os.path.exists(tmp_path / "r" / "LATEST")
    assert "Cancelled the index build of step 5" in caplog.text
