"""REALM pre-training under DeepSpeed ZeRO-2 through Accelerate, launched for real as a user does
(`accelerate launch --use_deepspeed --deepspeed_config_file examples/configs/ds_zero2.json examples/pretrain.py`):
it starts, refreshes its index, checkpoints, resumes exactly (the refresh swapped in at a set step) and saves a
loadable model; ZeRO-3 is refused before any work. On CPU DeepSpeed runs one process (gloo); the same command takes
a GPU where there is one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("deepspeed")
pytest.importorskip("faiss")

REPO = Path(__file__).resolve().parents[2]


def launch(output: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--use_deepspeed",
        "--deepspeed_config_file", str(REPO / "examples" / "configs" / "ds_zero2.json"),
        str(REPO / "examples" / "pretrain.py"), "--config", str(REPO / "examples" / "configs" / "cpu-tiny.yaml"),
        "--output_dir", str(output), "--max_steps", "8", "--save_steps", "4", "--report_to", "none",
        # the refresh asked at step 6 is swapped in at step 6 (blocking), not whenever the builder thread finishes:
        # every run swaps at the same step, so the swap is always seen and the resumed run repeats the whole one
        "--refresh_max_staleness", "0", *extra,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def losses(output: Path) -> dict[int, float]:
    with open(output / "history.json", encoding="utf-8") as f:
        return {row["step"]: row["loss"] for row in json.load(f) if "loss" in row}


@pytest.mark.filterwarnings("ignore")
def test_zero2_pretraining_starts_refreshes_resumes_exactly_and_saves_a_loadable_model(tmp_path):
    whole = tmp_path / "whole"
    result = launch(whole)
    assert "Swapped in the index of step" in result.stderr  # the index refreshed from the trained doc tower
    state = json.loads((whole / "trainer_state.json").read_text())
    assert state["step"] == 8 and state["retriever_learning"]["steps_learning"] == 4  # after 4 reading steps

    resumed = tmp_path / "resumed"
    resumed.mkdir()
    for name in ("checkpoint-4", "corpus", "index"):
        shutil.copytree(whole / name, resumed / name, symlinks=True)
    launch(resumed, "--resume_from_checkpoint", str(resumed / "checkpoint-4"))
    expected, got = losses(whole), losses(resumed)
    assert [step for step in got if step > 4] == [step for step in expected if step > 4] == [6, 8]
    # model, optimizer, data order and the checkpoint's index come back exactly: the first logged step is the same
    assert got[6] == pytest.approx(expected[6], rel=1e-6), (got, expected)
    # and so do the later steps: the refresh of step 6 lands at step 6 in both runs
    assert got[8] == pytest.approx(expected[8], rel=1e-6), (got, expected)

    from transformers import pipeline

    import realm_hf

    realm_hf.register_auto_classes()  # realm_hf was imported before transformers' pipelines

    fill = pipeline("realm-fill-mask", model=str(whole / "final"))
    assert fill("Paris is the capital of [MASK].", top_k=1)[0]["supporting_blocks"]


def test_zero3_is_refused_before_any_work_naming_zero2(tmp_path):
    config = tmp_path / "ds_zero3.json"
    config.write_text(json.dumps({
        "zero_optimization": {"stage": 3}, "gradient_accumulation_steps": "auto", "train_micro_batch_size_per_gpu": "auto",
    }))
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "1", "--use_deepspeed",
        "--deepspeed_config_file", str(config), str(REPO / "examples" / "pretrain.py"),
        "--config", str(REPO / "examples" / "configs" / "cpu-tiny.yaml"), "--output_dir", str(tmp_path / "run"),
        "--max_steps", "2", "--report_to", "none",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode != 0
    assert "DeepSpeed ZeRO-3 (zero_optimization.stage 3) partitions the weights" in result.stderr
    assert "examples/configs/ds_zero2.json" in result.stderr
    assert not (tmp_path / "run" / "final").exists()
