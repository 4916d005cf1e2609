"""A run never mixes its outputs with another run's: an output_dir that holds another run is refused, in one line
naming --resume_from_checkpoint and --overwrite_output_dir, unless the run resumes it or overwrites it (which deletes
the other run's checkpoints, final model, state, history and index versions first); the same decision on every rank."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from fault_helpers import TinyRegressionLoop, loop_arguments, two_process_launch

from realm_hf.training.arguments import LoopArguments
from realm_hf.training.output_dir import previous_run_outputs
from realm_hf.utils.options import UsageError

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "examples" / "configs"


def tree(directory: Path) -> dict[str, float]:
    """Every path below `directory` with its modification time."""
    return {os.fspath(path.relative_to(directory)): path.stat().st_mtime_ns for path in directory.rglob("*")}


def finished_run(output: Path, max_steps: int = 4) -> Path:
    TinyRegressionLoop(loop_arguments(output, max_steps=max_steps, save_steps=2)).train()
    assert previous_run_outputs(output) == [
        # the last two checkpoints (save_total_limit's default)
        *(f"checkpoint-{step}" for step in list(range(2, max_steps + 1, 2))[-2:]), "final", "history.json",
        "trainer_state.json",
    ]
    return output


def test_a_second_run_into_the_directory_of_another_is_refused_and_changes_nothing(tmp_path):
    run = finished_run(tmp_path / "run")
    before = tree(run)
    with pytest.raises(UsageError) as refused:
        TinyRegressionLoop(loop_arguments(run, max_steps=2, save_steps=1))
    message = str(refused.value)
    assert "\n" not in message and f"--output_dir {run} holds another run (checkpoint-2, checkpoint-4" in message
    assert "--resume_from_checkpoint latest" in message and "--overwrite_output_dir" in message
    assert tree(run) == before  # not a file written, replaced or deleted


def test_overwrite_output_dir_deletes_the_other_run_so_that_latest_resumes_this_one(tmp_path):
    run = finished_run(tmp_path / "run", max_steps=6)
    (run / "index" / "index-6").mkdir(parents=True)  # pre-training's index versions go too
    (run / ".checkpoint-8.tmp").mkdir()  # a save a crash interrupted
    (run / "corpus").mkdir()  # a cache the next run checks before it reuses it: kept
    args = loop_arguments(run, max_steps=2, save_steps=1)
    args.overwrite_output_dir = True
    TinyRegressionLoop(args).train()
    assert sorted(os.listdir(run)) == [
        "checkpoint-1", "checkpoint-2", "corpus", "final", "history.json", "trainer_state.json", "training_args.json",
    ]
    assert json.loads((run / "trainer_state.json").read_text())["step"] == 2
    assert max(record["step"] for record in json.loads((run / "history.json").read_text())) == 2

    resumed = TinyRegressionLoop(loop_arguments(run, max_steps=3, save_steps=1, resume="latest"))
    resumed.train()
    assert resumed.history[-1]["step"] == 3  # from this run's checkpoint-2 (the old checkpoint-6 would end at 6)


def test_fine_tunings_fixed_index_is_kept_for_reuse_when_overwriting(tmp_path):
    run = finished_run(tmp_path / "run")
    (run / "index").mkdir()
    (run / "index" / "manifest.json").write_text("{}")  # an index itself: reused only if its fingerprint matches
    args = loop_arguments(run, max_steps=1, save_steps=0)
    args.overwrite_output_dir = True
    TinyRegressionLoop(args)
    assert sorted(os.listdir(run)) == ["index", "training_args.json"]


def test_resume_latest_without_a_complete_checkpoint_is_refused_instead_of_starting_over(tmp_path):
    run = tmp_path / "run"
    TinyRegressionLoop(loop_arguments(run, max_steps=2, save_steps=0)).train()
    refused = "no complete checkpoint for --resume_from_checkpoint latest.*--overwrite_output_dir"
    with pytest.raises(UsageError, match=refused):
        TinyRegressionLoop(loop_arguments(run, max_steps=4, save_steps=0, resume="latest"))
    # a directory without another run's outputs (new, or what a run left before its first checkpoint) is taken
    (tmp_path / "started").mkdir()
    (tmp_path / "started" / "training_args.json").write_text("{}")
    TinyRegressionLoop(loop_arguments(tmp_path / "started", max_steps=1, save_steps=0, resume="latest")).train()


def test_overwriting_and_resuming_at_once_is_refused():
    with pytest.raises(ValueError, match="--overwrite_output_dir deletes the checkpoints that --resume_from_checkpoint "):
        LoopArguments(output_dir="unused", overwrite_output_dir=True, resume_from_checkpoint="latest")


def test_the_command_refuses_in_one_line_before_any_work(pretrain_output, capsys):
    from realm_hf.cli import main

    run = pretrain_output.parent
    before = tree(run)
    status = main(["pretrain", "--config", os.fspath(CONFIGS / "cpu-tiny.yaml"), "--output_dir", os.fspath(run),
                   "--max_steps", "5", "--report_to", "none"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"realm-hf pretrain: error: --output_dir {run} holds another run (")
    assert "--resume_from_checkpoint latest" in lines[0] and "--overwrite_output_dir" in lines[0]
    assert tree(run) == before


def test_every_rank_of_a_two_process_run_gets_the_refusal(tmp_path):
    run = finished_run(tmp_path / "run")
    before = tree(run)
    command, env = two_process_launch(
        str(Path(__file__).with_name("fault_helpers.py")), str(run), "--max-steps", "2", "--save-steps", "1"
    )
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    # both ranks raise (neither waits for the other at a collective), and nothing of the old run was touched
    assert done.stderr.count(f"UsageError: --output_dir {run} holds another run") == 2, done.stderr[-3000:]
    assert tree(run) == before
