"""Ctrl-C during a `realm-hf` training command: one line (the step reached, the last checkpoint, the command that
resumes), exit status 130, no traceback; and that command resumes."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest
from cli_helpers import ENV, realm_hf_argv, realm_hf_command
from training_outputs import CONFIGS

from realm_hf.cli.training import interrupted_line

PRETRAIN = [
    "pretrain", "--config", os.fspath(CONFIGS / "cpu-tiny.yaml"), "--max_steps", "400", "--max_articles", "6",
    "--save_steps", "2", "--eval_mlm_examples", "0", "--report_to", "none", "--logging_steps", "1",
]


def _lines(stream: str) -> list[str]:
    """The lines a terminal would keep (progress bars redraw with carriage returns)."""
    return [line for line in stream.replace("\r", "\n").splitlines() if line.strip()]


EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "pretrain.py")


@pytest.mark.parametrize("launcher", ["realm-hf", "example"])
def test_ctrl_c_during_pretraining_prints_where_it_stopped_and_how_to_resume(tmp_path, launcher):
    """`realm-hf pretrain` and `python examples/pretrain.py` alike."""
    pytest.importorskip("spacy")
    output = tmp_path / "run"
    if launcher == "realm-hf":
        argv, name, program = realm_hf_argv(*PRETRAIN, "--output_dir", str(output)), "realm-hf pretrain", ["realm-hf", "pretrain"]
    else:
        argv, name, program = [sys.executable, EXAMPLE, *PRETRAIN[1:], "--output_dir", str(output)], "pretrain.py", ["python", EXAMPLE]
    # the child gets SIGINT's default action, as from a terminal: a child inherits an ignored SIGINT, and some test
    # earlier in the session leaves the pytest process ignoring it
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while not (output / "checkpoint-2" / "trainer_state.json").is_file():  # a step was logged and saved
            assert process.poll() is None and time.monotonic() < deadline, "the run ended before its first checkpoint"
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert "Removed shared tensor" not in stderr  # accelerate's notice at each checkpoint stays out of the log
    last = _lines(stderr)[-1]
    match = re.fullmatch(
        re.escape(name) + r": interrupted at step (\d+) of 400; last checkpoint (\S+); resume with: (.+)", last
    )
    assert match, last
    step, checkpoint, resume = int(match[1]), match[2], match[3]
    assert step >= 2 and re.fullmatch(re.escape(str(output / "checkpoint-")) + r"\d+", checkpoint)
    assert (output / os.path.basename(checkpoint) / "trainer_state.json").is_file()
    argv = shlex.split(resume)
    assert argv[: len(program)] == program and argv[-2:] == ["--resume_from_checkpoint", "latest"]
    if launcher == "example":
        return  # the resume command itself is run once, below

    # the printed command resumes (one step more than the checkpoint, so that it ends)
    saved = int(checkpoint.rpartition("-")[2])
    done = realm_hf_command(*argv[1:], "--max_steps", str(saved + 1), "--save_steps", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"Resumed from {checkpoint} at step {saved}" in done.stderr


def test_ctrl_c_before_any_checkpoint(tmp_path):
    """Interrupted before the loop (no trainer in the traceback) and with no checkpoint: the line says so and the
    same command starts again."""
    argv = ["-v", "ict", "--config", "ict.yaml", "--output_dir", str(tmp_path), "--resume_from_checkpoint", "x"]
    line = interrupted_line(argv, "ict", argv[2:], KeyboardInterrupt())
    assert line == (
        "realm-hf ict: interrupted before the first step; no checkpoint saved yet (--save_steps N saves every N "
        f"steps), so `realm-hf -v ict --config ict.yaml --output_dir {tmp_path} --resume_from_checkpoint latest` "
        "starts again from step 0."
    )


def test_ctrl_c_during_evaluation_is_one_line():
    assert interrupted_line(["evaluate"], "evaluate", [], KeyboardInterrupt()) == "realm-hf evaluate: interrupted."


def test_ctrl_c_before_the_loop_names_the_checkpoint_of_the_config_output_dir(tmp_path):
    """Interrupted while a resumed run prepares its data: the checkpoint is found through --config's output_dir."""
    (tmp_path / "run" / "checkpoint-3").mkdir(parents=True)
    (tmp_path / "run" / "checkpoint-3" / "trainer_state.json").write_text('{"step": 3}')
    config = tmp_path / "job.yaml"
    config.write_text(f"output_dir: {tmp_path / 'run'}\nmax_steps: 10\n")
    argv = ["pretrain", "--config", str(config)]
    assert interrupted_line(argv, "pretrain", argv[1:], KeyboardInterrupt()) == (
        f"realm-hf pretrain: interrupted before the first step; last checkpoint {tmp_path / 'run' / 'checkpoint-3'}; "
        f"resume with: realm-hf pretrain --config {config} --resume_from_checkpoint latest"
    )


def test_an_example_script_refuses_another_runs_output_dir_in_one_line(tmp_path):
    """A refusal the trainer makes (not the argument parser) ends an example script as it ends `realm-hf`."""
    (tmp_path / "trainer_state.json").write_text('{"step": 4}')  # another run's
    argv = [sys.executable, EXAMPLE, *PRETRAIN[1:], "--output_dir", os.fspath(tmp_path)]
    done = subprocess.run(argv, capture_output=True, text=True, env=ENV, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = _lines(done.stderr)
    assert lines[-1].startswith("pretrain.py: error: --output_dir ") and "holds another run" in lines[-1]
    assert not any("Traceback" in line for line in lines)
