"""The background builder's device and thread budget: real builder processes report what they ran with (device, torch
threads, niceness), the trainer's threads are partitioned while a build runs, and the pre-trainer's defaults resolve
to a builder on the trainer's GPU, or on the CPU at 1 thread and low priority."""

from __future__ import annotations

import os

import pytest
import torch
from index_helpers import MeanPoolEmbedder
from test_refresh_faults import build_flat_index

from realm_hf.index import IndexRefresher
from realm_hf.training.index_builder import refresh_resources


pytest.importorskip("faiss")


def _swap_when_built(refresher: IndexRefresher, step: int, timeout: float = 120) -> None:
    assert refresher.wait(timeout=timeout)
    assert refresher.maybe_swap(step) is not None


def test_builder_process_reports_its_threads_and_niceness_and_the_trainer_threads_are_partitioned(tmp_path, blocks_dir):
    tower = MeanPoolEmbedder()
    initial = build_flat_index(tower.state_dict(), 0, blocks_dir)
    threads_before = torch.get_num_threads()
    refresher = IndexRefresher(
        tmp_path / "r", build_flat_index, {"blocks_dir": blocks_dir}, mode="process", index=initial,
        # niceness 10, not 19: at 19 the builder got ~1.5 % of a core on a loaded machine and missed the timeout
        num_threads=1, niceness=10, trainer_threads=1,
    )
    try:
        refresher.request_refresh(1, tower.state_dict())
        assert torch.get_num_threads() == 1  # the trainer's share while the builder runs
        _swap_when_built(refresher, 2)
        assert torch.get_num_threads() == threads_before  # given back once the builder is idle
        report = refresher.builder_reports[-1]
        assert report["device"] == "cpu" and report["num_threads"] == 1
        assert report["niceness"] == min(19, os.nice(0) + 10) and report["pid"] != os.getpid()
        assert refresher.stats[-1]["builder_threads"] == 1 and refresher.stats[-1]["builder_niceness"] == min(19, os.nice(0) + 10)
    finally:
        refresher.close()
        torch.set_num_threads(threads_before)


def test_default_resources_follow_the_trainer_device():
    # on the CPU: a paced builder thread (0.1 of the trainer's time, between steps), the trainer keeps its threads
    cpu = refresh_resources("cpu", cores=2)
    assert (cpu.device, cpu.mode, cpu.refresher_mode, cpu.time_share, cpu.trainer_threads) == (
        "cpu", "paced", "thread", 0.1, None
    )
    # a builder process on the CPU: 1 thread at the lowest priority
    process = refresh_resources("cpu", cores=2, mode="process")
    assert (process.num_threads, process.niceness, process.time_share) == (1, 19, None)
    assert refresh_resources("cpu", mode="paced", time_share=0.05).time_share == 0.05
    # a GPU trainer: the builder process embeds on the same GPU at normal priority (no CUDA needed to resolve it)
    gpu = refresh_resources(torch.device("cuda", 1))
    assert (gpu.device, gpu.niceness, gpu.mode) == ("cuda:1", 0, "process")
    # explicit choices win: another GPU, or a half/half partition of the CPU cores
    partition = refresh_resources(
        "cpu", device="cpu", num_threads=1, niceness=0, trainer_threads=1, cores=2, mode="process"
    )
    assert (partition.num_threads, partition.niceness, partition.trainer_threads) == (1, 0, 1)
    with pytest.raises(ValueError, match="refresh_device must be 'cpu', 'cuda' or 'cuda:<n>'"):
        refresh_resources("cpu", device="mps")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available here; use --refresh_device cpu"):
            refresh_resources("cpu", device="cuda:1")


def test_a_bad_refresh_device_is_a_usage_error_before_any_work():
    from realm_hf.training.arguments import PretrainingArguments
    from realm_hf.training.entry_points import check_arguments
    from realm_hf.utils.options import UsageError

    with pytest.raises(UsageError, match="--refresh_device: refresh_device must be 'cpu', 'cuda' or 'cuda:<n>'"):
        check_arguments([PretrainingArguments(refresh_device="mps")])
    check_arguments([PretrainingArguments(refresh_device="cpu")])
