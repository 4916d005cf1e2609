"""A refresh in flight at a checkpoint survives a kill: a real tiny pre-training run in a subprocess is SIGKILLed (with
its builder process) right after a checkpoint saved while the refresh of that step was still building; the resumed
run takes that refresh up at once, as `IndexRefresher.resume_in_flight` documents:

- the builder had not finished: the build restarts from the snapshot the checkpoint kept, and its index (the doc
  tower of the snapshot step, checked by fingerprint) is swapped in when it is done;
- the builder had finished (its index on disk): no rebuild, swapped in at the first step after the checkpoint.

And the pre-training builder function embeds on the device it is given.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch


pytest.importorskip("spacy")
pytest.importorskip("faiss")

from refresh_resume_helper import make_pretrainer  # noqa: E402

from realm_hf.index import RealmIndex  # noqa: E402
from realm_hf.index.refresh_job import run_build_job  # noqa: E402
from realm_hf.training.index_builder import build_index_from_snapshot  # noqa: E402


HELPER = os.path.join(os.path.dirname(__file__), "refresh_resume_helper.py")


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory) -> str:
    """The output directory of a run killed right after checkpoint-4, the refresh of step 4 still building."""
    run = tmp_path_factory.mktemp("killed") / "run"
    hold = run.parent / "hold"
    hold.touch()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.Popen(
        [sys.executable, HELPER, str(run), "--hold", str(hold), "--hang-at-save", "4"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (run / "saved-4").exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (run / "saved-4").exists(), process.stderr.read().decode()[-3000:] if process.poll() else "timeout"
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the trainer and its builder process: no clean-up of any kind
        process.wait()
    hold.unlink()
    return str(run)


def _state(run: str, checkpoint: str) -> dict:
    with open(os.path.join(run, checkpoint, "trainer_state.json"), encoding="utf-8") as f:
        return json.load(f)


def test_the_checkpoint_records_the_refresh_in_flight_and_keeps_its_snapshot(killed_run):
    state = _state(killed_run, "checkpoint-4")
    assert state["index_step"] == 0
    assert [record["step"] for record in state["refresh_in_flight"]] == [4]
    assert state["refresh_in_flight"][0]["fingerprint"]
    assert os.path.isfile(os.path.join(killed_run, "index", "snapshots", "snapshot-4.safetensors"))
    assert not os.path.exists(os.path.join(killed_run, "index", "index-4"))  # the build never finished


def test_resume_restarts_the_build_in_flight_from_its_snapshot(killed_run, tmp_path, caplog):
    run = str(tmp_path / "run")
    shutil.copytree(killed_run, run)
    expected = _state(run, "checkpoint-4")["refresh_in_flight"][0]["fingerprint"]
    resumed = make_pretrainer(run, max_steps=8, resume=os.path.join(run, "checkpoint-4"))
    try:
        with caplog.at_level("INFO", logger="realm_hf.index.refresh"):
            resumed.resume(resumed.args.resume_from_checkpoint)
        assert "Resuming the refresh of snapshot step 4: restarting its build from the snapshot" in caplog.text
        assert resumed.refresher.busy and resumed.index.step == 0
        assert resumed.refresher.wait(timeout=180)
        resumed.on_step_end(5)  # the first step after the checkpoint that sees the finished build swaps it in
        assert resumed.index.step == 4 and resumed.index.fingerprint == expected  # the doc tower of step 4
        assert resumed.refresher.stats[-1]["snapshot_step"] == 4
        # the builder process reports what it ran with: the CPU default, 1 thread at low priority
        report = resumed.refresher.builder_reports[-1]
        assert report["device"] == "cpu" and report["num_threads"] == 1 and report["niceness"] == 19
        assert report["pid"] != os.getpid()
        # its snapshot is gone once the index is on disk; the index stays (a checkpoint names it)
        assert not os.path.exists(os.path.join(run, "index", "snapshots", "snapshot-4.safetensors"))
        assert 4 in resumed.refresher.pinned
    finally:
        resumed.refresher.close()


def test_resume_swaps_in_an_index_the_builder_finished_at_the_first_step_without_rebuilding(
    killed_run, tmp_path, caplog
):
    run = str(tmp_path / "run")
    shutil.copytree(killed_run, run)
    # what a builder that finished between the checkpoint and the kill leaves: index-4 published, LATEST pointing at
    # it (the job file the killed trainer wrote, with the paths of the killed run's directory)
    with open(os.path.join(run, "index", "snapshots", "job-4.json"), encoding="utf-8") as f:
        job = json.load(f)
    run_build_job({**job, "root": os.path.join(run, "index"), "snapshot": job["snapshot"].replace(killed_run, run)})
    built = RealmIndex.from_pretrained(os.path.join(run, "index", "index-4"))
    assert built.fingerprint == _state(run, "checkpoint-4")["refresh_in_flight"][0]["fingerprint"]

    with caplog.at_level("INFO", logger="realm_hf"):
        history = make_pretrainer(run, max_steps=6, save_steps=0, resume="latest").train()
    assert "Resuming the refresh of snapshot step 4: its index is on disk, swapped in next" in caplog.text
    assert "Started index build" not in caplog.text  # nothing rebuilt (no refresh is due in steps 5-6)
    index_steps = {record["step"]: record["index_step"] for record in history if "index_step" in record}
    assert index_steps[5] == 4.0 and index_steps[6] == 4.0
    swaps = [record for record in history if record["step"] > 4 and "refresh/snapshot_step" in record]
    assert [(r["step"], r["refresh/snapshot_step"]) for r in swaps] == [(5, 4.0)]


def test_pretraining_builder_honours_its_device(tmp_path):
    """`build_index_from_snapshot` embeds where it is told and says so; a CUDA device where there is none is refused."""
    trainer = make_pretrainer(str(tmp_path), max_steps=1, refresh_schedule="0", refresh_mode="thread")
    kwargs = dict(retriever_dir=trainer.retriever_dir, blocks_dir=trainer.blocks_dir,
                  tokenizer_dir=trainer.retriever_dir, dtype="float32")
    state = trainer.retriever.document_embedder.state_dict()
    index = build_index_from_snapshot(state, 1, device="cpu", **kwargs)
    assert index.build_info == {"device": "cpu"} and index.num_blocks == len(trainer.blocks)
    if torch.cuda.is_available():
        index = build_index_from_snapshot(state, 1, device="cuda", **kwargs)
        assert index.build_info["device"].startswith("cuda")
    else:
        with pytest.raises(ValueError, match="CUDA is not available"):
            build_index_from_snapshot(state, 1, device="cuda", **kwargs)
