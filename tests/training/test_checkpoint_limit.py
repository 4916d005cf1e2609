"""Disk by default: a run keeps its newest 2 checkpoints unless told otherwise (`--save_total_limit`, 0 keeps every
one), `--help` says so, and `--resume_from_checkpoint latest` resumes from what is left."""

from __future__ import annotations

import os

from fault_helpers import TinyRegressionLoop, loop_arguments

from realm_hf.cli import main
from realm_hf.training import LoopArguments


def _checkpoints(directory) -> list[str]:
    return sorted((name for name in os.listdir(directory) if name.startswith("checkpoint-")), key=lambda n: int(n[11:]))


def test_a_run_keeps_its_newest_two_checkpoints_by_default_and_resumes_from_latest(tmp_path):
    run = tmp_path / "run"
    TinyRegressionLoop(loop_arguments(run, max_steps=6, save_steps=1)).train()  # save_total_limit left at its default
    assert _checkpoints(run) == ["checkpoint-5", "checkpoint-6"]

    resumed = TinyRegressionLoop(loop_arguments(run, max_steps=9, save_steps=1, resume="latest"))
    history = resumed.train()
    assert [record["step"] for record in history if "loss" in record and record["step"] > 6] == [7, 8, 9]
    assert min(record["step"] for record in history if "loss" in record) == 1  # the history of steps 1-6 came along
    assert _checkpoints(run) == ["checkpoint-8", "checkpoint-9"]


def test_0_keeps_every_checkpoint(tmp_path):
    args = loop_arguments(tmp_path, max_steps=4, save_steps=1)
    args.save_total_limit = LoopArguments(output_dir=str(tmp_path), save_total_limit=0).save_total_limit
    TinyRegressionLoop(args).train()
    assert _checkpoints(tmp_path) == [f"checkpoint-{step}" for step in range(1, 5)]


def test_the_help_states_the_default(capsys):
    try:
        main(["pretrain", "--help"])
    except SystemExit:
        pass
    help_text = " ".join(capsys.readouterr().out.split())
    assert "Checkpoints kept on disk, the newest 2 by default" in help_text and "0 keeps every one" in help_text
