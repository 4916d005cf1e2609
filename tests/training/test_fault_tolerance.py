"""Fault injection around checkpoints and resume, with real processes: a trainer killed with SIGKILL in the middle of a
checkpoint save, a half-written checkpoint left by an older version, and REALM resumes that must train on the very
index the checkpoint names (index step 0 included), even after refreshes cleaned up older indexes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from fault_helpers import TinyRegressionLoop, loop_arguments, two_process_launch


HELPER = os.path.join(os.path.dirname(__file__), "fault_helpers.py")


def _losses(history: list[dict]) -> dict[int, float]:
    return {record["step"]: record["loss"] for record in history if "loss" in record}


def _checkpoints(directory) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith("checkpoint-"))


def test_kill_during_a_checkpoint_save_leaves_no_checkpoint_and_latest_resumes_exactly(tmp_path):
    run = tmp_path / "run"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, HELPER, str(run), "--max-steps", "6", "--save-steps", "2", "--hang-at-save", "4"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not (run / "saving-4").exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (run / "saving-4").exists(), process.stderr.read().decode() if process.poll() is not None else "timeout"
    finally:
        process.kill()  # SIGKILL: no cleanup of any kind
        process.wait()
    # the model and optimizer of step 4 were written, the trainer state was not: no checkpoint-4 may exist
    assert _checkpoints(run) == ["checkpoint-2"]

    resumed = TinyRegressionLoop(loop_arguments(run, max_steps=6, save_steps=2, resume="latest"))
    history = resumed.train()
    reference = _losses(TinyRegressionLoop(loop_arguments(tmp_path / "reference", max_steps=6, save_steps=2)).train())
    continued = {step: loss for step, loss in _losses(history).items() if step > 2}
    assert sorted(continued) == [3, 4, 5, 6]  # resumed from step 2, the last complete checkpoint
    assert continued == {step: reference[step] for step in continued}
    assert _checkpoints(run) == ["checkpoint-4", "checkpoint-6"]  # save_total_limit 2 (the default) pruned checkpoint-2
    assert not [name for name in os.listdir(run) if name.startswith(".checkpoint-")]  # no temporary left behind


def test_latest_skips_a_half_written_checkpoint_with_a_warning(tmp_path, caplog):
    run = tmp_path / "run"
    TinyRegressionLoop(loop_arguments(run, max_steps=4, save_steps=2)).train()
    # what a crash during a save by an older realm_hf left behind: the files of accelerate, no trainer state
    shutil.copytree(run / "checkpoint-4", run / "checkpoint-6")
    os.remove(run / "checkpoint-6" / "trainer_state.json")

    resumed = TinyRegressionLoop(loop_arguments(run, max_steps=6, save_steps=0, resume="latest"))
    with caplog.at_level("WARNING", logger="realm_hf.training.loop"):
        history = resumed.train()
    assert f"Skipping {run / 'checkpoint-6'}: it has no trainer_state.json" in caplog.text
    assert sorted(step for step in _losses(history) if step > 4) == [5, 6]  # resumed from checkpoint-4


# ------------------------------------------------------------------------------------------------ REALM resume
pytest.importorskip("spacy")
pytest.importorskip("faiss")


@pytest.fixture
def no_dropout(monkeypatch):
    # a resumed run draws dropout masks from a global RNG stream that the DataLoader's iterator creation shifts
    # (see test_pretrainer.py); the index version and the data order are what these tests pin down
    from realm_hf.training import models

    monkeypatch.setattr(
        models, "TINY_BERT", dict(models.TINY_BERT, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    )


def _make_pretrainer(output_dir, **kwargs):
    from test_pretrainer import make_trainer

    return make_trainer(output_dir, logging_steps=1, **kwargs)


def test_resume_at_index_step_0_trains_on_the_same_index(tmp_path, no_dropout):
    full = _make_pretrainer(tmp_path, max_steps=4, refresh="0", save_steps=2)
    reference = full.train()
    index_0 = full.refresher.index.fingerprint
    resumed = _make_pretrainer(tmp_path, max_steps=4, refresh="0", resume=str(tmp_path / "checkpoint-2"))
    history = resumed.train()
    # the index of step 0 is loaded from disk, not rebuilt from the resumed weights (and labelled step 2)
    assert resumed.refresher.index.step == 0 and resumed.refresher.index.fingerprint == index_0
    assert [r["index_step"] for r in history if r["step"] > 2 and "index_step" in r] == [0.0, 0.0]
    continued = {step: loss for step, loss in _losses(history).items() if step > 2}
    assert continued == pytest.approx({step: _losses(reference)[step] for step in continued}, rel=1e-5)


def test_resume_loads_the_checkpoint_index_without_embedding_the_corpus_first(tmp_path, no_dropout, caplog):
    full = _make_pretrainer(tmp_path, max_steps=4, refresh="0", save_steps=2)
    reference = full.train()
    with caplog.at_level("INFO", logger="realm_hf.index"):
        caplog.clear()
        resumed = _make_pretrainer(tmp_path, max_steps=4, refresh="0", resume="latest")  # checkpoint-4
        resumed.resume(resumed.args.resume_from_checkpoint)
    # no corpus pass at all before the checkpoint's index is in use: neither the initial build (weights of step 0,
    # thrown away at once) nor a rebuild from the resumed weights
    embedded = [r.getMessage() for r in caplog.records if r.name == "realm_hf.index.embedding"]
    assert embedded == []
    assert resumed.index.step == 0 and resumed.index.fingerprint == full.refresher.index.fingerprint
    resumed.refresher.close()

    # the same from checkpoint-2 through train(): the steps after it match the uninterrupted run
    caplog.clear()
    with caplog.at_level("INFO", logger="realm_hf"):
        history = _make_pretrainer(tmp_path, max_steps=4, refresh="0", resume=str(tmp_path / "checkpoint-2")).train()
    embedded = [r.getMessage() for r in caplog.records if r.name == "realm_hf.index.embedding"]
    assert len(embedded) == 1  # the final index only (the retriever learned over steps 3-4)
    assert "Rebuilding the index with the final document tower (step 4" in caplog.text
    continued = {step: loss for step, loss in _losses(history).items() if step > 2}
    assert sorted(continued) == [3, 4]
    assert continued == pytest.approx({step: _losses(reference)[step] for step in continued}, rel=1e-5)


def test_every_checkpoint_keeps_its_index_and_resume_refuses_a_replaced_one(tmp_path, no_dropout):
    # blocking refreshes (asked at steps 2, 4, 6, 8; none at the last step): each swapped in at the step that asks
    trainer = _make_pretrainer(tmp_path, max_steps=10, refresh="2", save_steps=2, refresh_max_staleness=0,
                               save_total_limit=0)  # every checkpoint kept
    trainer.train()
    assert [record["swap_step"] for record in trainer.refresher.stats] == [2, 4, 6, 8]
    states = {c: json.loads((tmp_path / c / "trainer_state.json").read_text()) for c in _checkpoints(tmp_path)}
    named = {checkpoint: (state["index_step"], state["index_fingerprint"]) for checkpoint, state in states.items()}
    assert {checkpoint: step for checkpoint, (step, _) in named.items()} == {
        "checkpoint-2": 2, "checkpoint-4": 4, "checkpoint-6": 6, "checkpoint-8": 8, "checkpoint-10": 8,
    }
    # the index each checkpoint trained with is still on disk, although the refresher's keep_last=2 alone would keep
    # only 6 and 8;
    # index-0, which no checkpoint names, is gone
    on_disk = sorted(name for name in os.listdir(tmp_path / "index") if name.startswith("index-"))
    assert on_disk == ["index-2", "index-4", "index-6", "index-8"], (states, on_disk)
    for checkpoint, (step, fingerprint) in named.items():
        manifest = json.loads((tmp_path / "index" / f"index-{step}" / "manifest.json").read_text())
        assert manifest["fingerprint"] == fingerprint, checkpoint  # and it is that index

    step, fingerprint = named["checkpoint-8"]
    resumed = _make_pretrainer(tmp_path, max_steps=9, refresh="2", resume=str(tmp_path / "checkpoint-8"))
    resumed.resume(resumed.args.resume_from_checkpoint)
    assert (resumed.index.step, resumed.index.fingerprint) == (step, fingerprint)
    resumed.refresher.close()

    # an index directory swapped for another after the checkpoint was saved is refused, with the way out
    other = max(s for s, _ in named.values() if s != step)  # the version another kept checkpoint names
    target = tmp_path / "index" / f"index-{step}"
    shutil.rmtree(target)
    shutil.copytree(tmp_path / "index" / f"index-{other}", target)
    stale = _make_pretrainer(tmp_path, max_steps=9, refresh="2", resume=str(tmp_path / "checkpoint-8"))
    with pytest.raises(ValueError, match="has changed since .* Restore that index, or delete the directory"):
        stale.resume(stale.args.resume_from_checkpoint)
    stale.refresher.close()


# ----------------------------------------------------------------------------------------- two processes
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))



def _launch_two_processes(output, *overrides: str) -> subprocess.CompletedProcess:
    """The README's 2-process command (cpu-tiny under 2 gloo processes), with a tiny corpus and `overrides`."""
    command, env = two_process_launch(
        os.path.join(REPO, "examples", "pretrain.py"),
        "--config", os.path.join(REPO, "examples", "configs", "cpu-tiny.yaml"),
        "--output_dir", str(output), "--max_articles", "8", "--reading_warmup_steps", "2", "--refresh_schedule", "2",
        "--save_steps", "2", "--report_to", "none", *overrides,
    )
    done = subprocess.run(command, env=env, cwd=output.parent, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def _assert_fresh_final_index(output, step: int) -> None:
    from realm_hf import RealmRetriever
    from realm_hf.index.manifest import fingerprint_module

    manifest = json.loads((output / "final" / "index" / "manifest.json").read_text())
    retriever = RealmRetriever.from_pretrained(output / "final" / "retriever")
    assert manifest["step"] == step
    assert manifest["fingerprint"] == fingerprint_module(retriever.document_embedder)


def test_two_process_launch_of_the_readme_command_finishes_with_a_fresh_final_index_and_resumes(tmp_path):
    # the retriever learns from step 2 and the refresh of step 4 is still building at the end: the index in use is
    # stale, so the final save must rebuild it (a collective on every rank)
    output = tmp_path / "run"
    done = _launch_two_processes(output, "--max_steps", "4")
    assert done.stderr.count("Rebuilding the index with the final document tower (step 4") == 2  # on both ranks
    _assert_fresh_final_index(output, step=4)
    assert _checkpoints(output) == ["checkpoint-2", "checkpoint-4"]

    # resumed under 2 processes: each rank loads the checkpoint's index, no corpus pass before training goes on
    done = _launch_two_processes(
        output, "--max_steps", "6", "--resume_from_checkpoint", "latest", "--logging_steps", "1"
    )
    assert done.stderr.count(f"Resuming from {output / 'checkpoint-4'}: its index is loaded") == 2
    # step 5 ends on both ranks together (DDP), after both were built and resumed; no refresh is due at step 5
    before_step_5 = done.stderr[: done.stderr.index("realm_hf.training.loop: step 5:")]
    assert "realm_hf.index.embedding" not in before_step_5
    _assert_fresh_final_index(output, step=6)
    assert _checkpoints(output) == ["checkpoint-4", "checkpoint-6"]  # the default save_total_limit (2) pruned the first
