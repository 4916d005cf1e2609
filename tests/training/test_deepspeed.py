"""REALM pre-training under DeepSpeed ZeRO-2 and ZeRO-3 through Accelerate, launched for real as a user does
(`accelerate launch --use_deepspeed --deepspeed_config_file examples/configs/ds_zero2.json examples/pretrain.py`):
it starts, refreshes its index, checkpoints, resumes exactly (the refresh swapped in at a set step) and saves a
loadable model. ZeRO-2 runs one process, ZeRO-3 two, whose parameters it partitions (gloo on the CPU); the same
commands take GPUs where there are some."""

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


def launch(
    output: Path, *extra: str, deepspeed_config: str = "ds_zero2.json", processes: int = 1
) -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(processes), "--use_deepspeed",
        "--deepspeed_config_file", str(REPO / "examples" / "configs" / deepspeed_config),
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


def assert_resumes_exactly(tmp_path: Path, whole: Path, **launch_options) -> None:
    """Resume a copy of the run `whole` from its checkpoint-4: the losses of steps 6 and 8 are the uninterrupted run's."""
    resumed = tmp_path / "resumed"
    resumed.mkdir()
    for name in ("checkpoint-4", "corpus", "index"):
        shutil.copytree(whole / name, resumed / name, symlinks=True)
    launch(resumed, "--resume_from_checkpoint", str(resumed / "checkpoint-4"), **launch_options)
    expected, got = losses(whole), losses(resumed)
    assert [step for step in got if step > 4] == [step for step in expected if step > 4] == [6, 8]
    # model, optimizer, data order and the checkpoint's index come back exactly: the first logged step is the same
    assert got[6] == pytest.approx(expected[6], rel=1e-6), (got, expected)
    # and so do the later steps: the refresh of step 6 lands at step 6 in both runs
    assert got[8] == pytest.approx(expected[8], rel=1e-6), (got, expected)


def assert_fill_mask_loads(final: Path) -> None:
    """The saved model answers in the `realm-fill-mask` pipeline, with its index (whose fingerprint it checks)."""
    from transformers import pipeline

    import realm_hf

    realm_hf.register_auto_classes()  # realm_hf was imported before transformers' pipelines

    fill = pipeline("realm-fill-mask", model=str(final))
    assert fill("Paris is the capital of [MASK].", top_k=1)[0]["supporting_blocks"]


@pytest.mark.filterwarnings("ignore")
def test_zero2_pretraining_starts_refreshes_resumes_exactly_and_saves_a_loadable_model(tmp_path):
    whole = tmp_path / "whole"
    result = launch(whole)
    assert "Swapped in the index of step" in result.stderr  # the index refreshed from the trained doc tower
    state = json.loads((whole / "trainer_state.json").read_text())
    assert state["step"] == 8 and state["retriever_learning"]["steps_learning"] == 4  # after 4 reading steps
    assert_resumes_exactly(tmp_path, whole)
    assert_fill_mask_loads(whole / "final")


@pytest.mark.filterwarnings("ignore")
def test_zero3_on_two_processes_refreshes_resumes_exactly_and_saves_whole_weights(tmp_path):
    zero3 = {"deepspeed_config": "ds_zero3.json", "processes": 2}
    whole = tmp_path / "whole"
    result = launch(whole, **zero3)
    # two ranks, each holding half of every parameter: the checkpoint keeps one partition of model and optimizer
    # states per rank
    partitions = sorted(path.name for path in (whole / "checkpoint-4").rglob("zero_pp_rank_*_model_states.pt"))
    assert partitions == ["zero_pp_rank_0_mp_rank_00_model_states.pt", "zero_pp_rank_1_mp_rank_00_model_states.pt"]
    # the snapshot of the partitioned document tower was gathered whole: the builder loaded it and the swap came
    assert "Swapped in the index of step 6 at step 6" in result.stderr
    from realm_hf import RealmRetriever
    from realm_hf.index import RealmIndex, fingerprint_module

    refreshed = RealmIndex.from_pretrained(str(whole / "index" / "index-6"))
    assert refreshed.fingerprint != RealmIndex.from_pretrained(str(whole / "index" / "index-0")).fingerprint
    # the saved model holds the whole weights, and the final index is the one its document tower builds
    retriever = RealmRetriever.from_pretrained(str(whole / "final" / "retriever"))
    final_index = RealmIndex.from_pretrained(str(whole / "final" / "index"))
    assert final_index.step == 8 and final_index.fingerprint == fingerprint_module(retriever.document_embedder)
    assert_resumes_exactly(tmp_path, whole, **zero3)
    assert_fill_mask_loads(whole / "final")
