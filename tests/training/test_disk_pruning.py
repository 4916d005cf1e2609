"""A long run keeps at most `save_total_limit` checkpoints and the index versions they need (plus the refresher's
`keep_last`), launched for real: `python examples/pretrain.py --config examples/configs/cpu-tiny.yaml`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from realm_hf.training import LoopArguments

pytest.importorskip("faiss")

REPO = Path(__file__).resolve().parents[2]


def test_checkpoints_and_index_versions_are_pruned_to_what_the_run_needs(tmp_path):
    output = tmp_path / "run"
    # a blocking refresh at every step from step 3 (the retriever learns after 2 reading steps): the index of step t is
    # swapped in at step t, so which versions exist, and which one each checkpoint names, is known exactly
    command = [
        sys.executable, str(REPO / "examples" / "pretrain.py"), "--config", str(REPO / "examples" / "configs" / "cpu-tiny.yaml"),
        "--output_dir", str(output), "--max_articles", "8", "--reading_warmup_steps", "2", "--refresh_schedule", "1",
        "--refresh_max_staleness", "0", "--max_steps", "12", "--save_steps", "4", "--save_total_limit", "2",
        "--report_to", "none",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    checkpoints = sorted((p.name for p in output.glob("checkpoint-*")), key=lambda name: int(name.split("-")[1]))
    assert checkpoints == ["checkpoint-8", "checkpoint-12"]
    named = [json.loads((output / name / "trainer_state.json").read_text())["index_step"] for name in checkpoints]
    assert named == [8, 11]  # no refresh is asked at the last step
    versions = sorted(int(p.name.split("-")[1]) for p in (output / "index").glob("index-*"))
    # 9 versions were built (steps 3 .. 11); left: what the kept checkpoints name (8, 11) and the newest keep_last (2):
    # index-8 only because checkpoint-8 needs it, index-4 gone with checkpoint-4
    assert versions == [8, 10, 11], versions
    assert "Deleted" in done.stderr and "save_total_limit=2" in done.stderr


def test_a_negative_save_total_limit_is_refused_and_0_keeps_every_checkpoint():
    with pytest.raises(ValueError, match="--save_total_limit -1 cannot be right: it must be at least 0"):
        LoopArguments(output_dir="unused", save_total_limit=-1)
    assert LoopArguments(output_dir="unused", save_total_limit=0).save_total_limit is None
