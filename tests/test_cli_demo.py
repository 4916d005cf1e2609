"""`realm-hf demo` (the knowledge recipe): REALM pre-training with the retriever trained and frozen, figures before
and after, answers with their document and evidence.

It runs with the hidden `--tiny-models` flag (tiny random BERTs, 10 people, 4 steps per stage): seconds, not the
minutes of the real demo. That the recipe *teaches* the retriever is guarded by tests/training/test_knowledge_benchmark.py,
which runs the same stages (`realm_hf.demo.knowledge_runs`) long enough to learn.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging

import pytest
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf.cli import main
from realm_hf.demo.defaults import KNOWLEDGE_INITS
from realm_hf.demo.knowledge import KnowledgeDemoSettings, evidence, masked_sentence
from realm_hf.demo.knowledge_runs import KNOWLEDGE_RECIPES

pytest.importorskip("faiss")

TINY = ["--tiny-models", "--entities", "10"]


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of `realm-hf ARGV`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    output = tmp_path_factory.mktemp("knowledge-demo") / "run"
    status, stdout, stderr = run_cli(["demo", "--output", str(output), *TINY])
    with open(output / "summary.json", encoding="utf-8") as f:
        summary = json.load(f)
    return {"output": output, "status": status, "stdout": stdout, "stderr": stderr, "summary": summary}


def test_the_demo_runs_both_variants_and_writes_its_figures(demo_run):
    assert demo_run["status"] == 0, demo_run["stderr"]
    output, summary = demo_run["output"], demo_run["summary"]
    assert set(summary["settings"]) == {"tiny/recipe", "tiny/control"}
    for variant in ("realm", "control", "reading-warmup"):
        assert (output / variant / "final" / "encoder" / "config.json").is_file(), variant
    for variant in ("realm", "control"):
        assert (output / variant / "final" / "index" / "manifest.json").is_file(), variant
    assert (output / "retrieval.png").stat().st_size > 1000
    for name in ("corpus", "train", "held_out"):
        assert (output / "task" / f"{name}.jsonl").is_file()
    assert summary["task"]["held_out_sentences"] == 20  # 2 per person
    for run in summary["settings"].values():
        assert run["steps"] == 4
        assert [point["step"] for point in run["curve"]] == [0, 2, 4]  # before, every --eval-every, after


def test_the_control_keeps_its_retriever_frozen(demo_run):
    control = demo_run["summary"]["settings"]["tiny/control"]
    assert control["retrieval_top1_after"] == control["retrieval_top1_before"]
    assert control["gold_posterior_before"] == control["gold_posterior_after"] or control["retriever_start_step"] is None
    assert demo_run["summary"]["settings"]["tiny/recipe"]["retriever_start_step"] == 0


def test_the_report_shows_before_and_after_and_answers_with_their_document(demo_run):
    stdout, summary = demo_run["stdout"], demo_run["summary"]
    assert "right document first" in stdout and "blank filled right" in stdout
    assert "retriever trained" in stdout and "retriever frozen" in stdout
    assert "REALM run: The retriever learned in 4 of 4 steps." in stdout
    answers = summary["answers"]
    assert len(answers) == 4
    task = [json.loads(line) for line in open(demo_run["output"] / "task" / "corpus.jsonl", encoding="utf-8")]
    titles = {document["title"] for document in task}
    for row in answers:
        assert "[MASK]" in row["sentence"] and row["answer"] not in row["sentence"].split()
        for variant in ("realm", "control"):
            answer = row[variant]
            assert answer["title"] in titles
            assert answer["right"] == (answer["answer"] == row["answer"])
            assert f'read from "{answer["title"]}"' in stdout
        assert row["sentence"] in stdout


def test_the_models_load_in_the_fill_mask_pipeline(demo_run):
    from transformers import pipeline

    import realm_hf

    realm_hf.register_auto_classes()  # this process imported realm_hf before transformers' pipelines

    fill = pipeline("realm-fill-mask", model=str(demo_run["output"] / "realm" / "final"))
    result = fill(demo_run["summary"]["answers"][0]["sentence"], top_k=2)
    assert len(result) == 2 and result[0]["supporting_blocks"]


def test_a_rerun_reuses_the_finished_stages(demo_run, caplog):
    with caplog.at_level(logging.INFO, logger="realm_hf.demo.knowledge"):
        status, stdout, _ = run_cli(["demo", "--output", str(demo_run["output"]), *TINY])
    assert status == 0
    assert caplog.text.count("reusing") == 3  # reading warm-up, realm, control
    assert "retriever trained" in stdout


def test_a_rerun_with_other_settings_is_refused(demo_run):
    status, _, stderr = run_cli(["demo", "--output", str(demo_run["output"]), *TINY, "--seed", "1"])
    assert status == 2
    assert "holds a demo run with other settings (seed: 0 there, 1 now)" in stderr


def test_the_precision_is_reported_and_a_rerun_in_another_is_refused(demo_run):
    precision = demo_run["summary"]["recipe_values"]["mixed_precision"]  # "auto" resolved on this machine
    assert precision in ("bf16", "no")
    assert f", {'bf16' if precision == 'bf16' else 'fp32'}; figures in" in demo_run["stdout"]
    other = "no" if precision == "bf16" else "bf16"
    status, _, stderr = run_cli(["demo", "--output", str(demo_run["output"]), *TINY, "--mixed-precision", other])
    assert status == 2
    assert f"'mixed_precision': {other!r}" in stderr and "holds a demo run with other settings" in stderr


def test_a_renamed_flag_is_refused_with_its_new_name(tmp_path):
    status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--output", str(tmp_path / "a"), "--reader-warmup-steps", "3"])
    assert status == 2
    assert "--reader-warmup-steps was renamed: use --evidence-steps." in stderr
    assert not (tmp_path / "a").exists()


def test_options_of_the_other_recipe_are_refused_before_any_work(tmp_path):
    status, _, stderr = run_cli(["demo", "--output", str(tmp_path / "a"), "--finetune-steps", "3"])
    assert status == 2
    assert "--finetune-steps belong to --recipe wikipedia-qa, not knowledge" in stderr
    status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--output", str(tmp_path / "b"), "--entities", "5"])
    assert status == 2
    assert "--entities belong to --recipe knowledge, not wikipedia-qa" in stderr
    status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--output", str(tmp_path / "b"), "--mixed-precision", "no"])
    assert status == 2
    assert "--mixed-precision belong to --recipe knowledge, not wikipedia-qa" in stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("flag,value", [("--entities", "0"), ("--steps", "0"), ("--eval-every", "-1"), ("--warmup-steps", "-1")])
def test_bad_values_are_named(tmp_path, flag, value):
    status, _, stderr = run_cli(["demo", "--output", str(tmp_path / "run"), flag, value])
    assert status == 2
    assert flag in stderr and value in stderr
    assert not (tmp_path / "run").exists()


def test_settings_are_checked():
    with pytest.raises(ValueError, match="init='bert'"):
        KnowledgeDemoSettings(init="bert")
    with pytest.raises(ValueError, match=r"overrides \['stepz'\]"):
        KnowledgeDemoSettings(overrides={"stepz": 3}).resolved_recipe()
    assert KnowledgeDemoSettings(steps=7).resolved_recipe()["steps"] == 7


def test_every_init_has_a_recipe():
    assert set(KNOWLEDGE_INITS) == set(KNOWLEDGE_RECIPES)


def test_masked_sentence_and_evidence():
    sentence = {"text": "Friends visit Ana Rome in rome.", "value": "rome"}
    assert masked_sentence(sentence, "[MASK]") == "Friends visit Ana Rome in [MASK]."
    document = "Ana Rome lives in rome. They were taught by Bo Li. They own a cat."
    assert evidence(document, "cat") == "They own a **cat**."
    assert evidence(document, "dog") == "Ana Rome lives in rome."
