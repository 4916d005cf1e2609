"""`realm-hf pretrain | ict | finetune | evaluate`: the example scripts' arguments and code behind the CLI.

Tiny random models on a few articles and a few steps, as in tests/training; each job takes seconds.
"""

from __future__ import annotations

import json
import os
import runpy
import sys

import pytest
from openqa_helpers import QUESTIONS
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)
from training_outputs import write_qa_data

from realm_hf.cli import main
from realm_hf.hub import collect_training_facts
from realm_hf.training import entry_points

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
CONFIGS = os.path.join(EXAMPLES, "configs")


@pytest.fixture(scope="module")
def qa_data(tmp_path_factory):
    return write_qa_data(tmp_path_factory.mktemp("cli_train_data"))


@pytest.fixture(scope="module")
def finetuned(qa_data, tmp_path_factory):
    """`realm-hf finetune --config FILE` with command-line overrides (2 steps instead of the file's 30)."""
    output = tmp_path_factory.mktemp("cli_finetune") / "run"
    status = main(["finetune", "--config", qa_data["config"], "--output_dir", str(output), "--max_steps", "2"])
    return status, output


def test_finetune_writes_the_model_its_index_and_the_evaluation(finetuned):
    status, output = finetuned
    assert status == 0
    final = output / "final"
    assert (final / "config.json").is_file() and (final / "tokenizer.json").is_file()
    assert json.loads((final / "config.json").read_text())["index_repo_id"] == "index"
    assert (final / "index" / "manifest.json").is_file()
    predictions = (output / "eval_predictions.jsonl").read_text().splitlines()
    assert len(predictions) == len(QUESTIONS)
    # the command-line override won over the file: 2 optimizer steps, not 30
    history = json.loads((output / "history.json").read_text())
    assert max(record["step"] for record in history) == 2
    # the merged arguments are saved next to the history, and a model card reads them back
    saved = json.loads((output / "training_args.json").read_text())
    assert saved["max_steps"] == 2 and saved["top_k"] == 3
    facts = collect_training_facts(final)
    assert facts["args"]["max_steps"] == 2 and facts["steps"] == 2


def test_evaluate_prints_and_writes_the_metrics(finetuned, qa_data, tmp_path, capsys):
    _, output = finetuned
    metrics_file, predictions_file = tmp_path / "metrics.json", tmp_path / "predictions.jsonl"
    status = main([
        "evaluate", "--model", str(output / "final"), "--qa_file", qa_data["qa"], "--max_questions", "4",
        "--batch_size", "2", "--metrics_file", str(metrics_file), "--predictions_file", str(predictions_file),
        "--device", "cpu",
    ])
    assert status == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads(metrics_file.read_text())
    assert printed["count"] == 4 and {"exact_match", "recall@3"} <= set(printed)
    assert written["exact_match"] == printed["exact_match"] and written["qa_file"] == qa_data["qa"]
    assert len(predictions_file.read_text().splitlines()) == 4


def test_evaluate_cuts_an_over_long_question_and_counts_it_in_the_metrics_file(finetuned, qa_data, tmp_path, capsys):
    _, output = finetuned
    rows = [json.loads(line) for line in open(qa_data["qa"], encoding="utf-8")][:4]
    rows.insert(3, {"id": "too-long", "question": "which " * 80, "answers": ["x"]})  # after a batch of 2 has run
    qa_file = tmp_path / "qa.jsonl"
    qa_file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    metrics_file = tmp_path / "metrics.json"
    status = main(["evaluate", "--model", str(output / "final"), "--qa_file", str(qa_file), "--batch_size", "2",
                   "--metrics_file", str(metrics_file), "--device", "cpu"])
    assert status == 0
    written = json.loads(metrics_file.read_text())
    assert written["count"] == 5 and written["truncated_questions"] == 1
    status = main(["evaluate", "--model", str(output / "final"), "--qa_file", str(qa_file), "--no_truncate_questions",
                   "--device", "cpu"])
    assert status == 2 and "id 'too-long'" in capsys.readouterr().err


def test_ict_from_the_tiny_config_with_overrides(tmp_path):
    output = tmp_path / "ict"
    status = main([
        "ict", "--config", os.path.join(CONFIGS, "ict-cpu-tiny.yaml"), "--output_dir", str(output),
        "--max_steps", "2", "--max_articles", "8", "--report_to", "none", "--logging_steps", "1",
    ])
    assert status == 0
    config = json.loads((output / "final" / "config.json").read_text())
    assert config["model_type"] == "realm_retriever" and config["pooling"] == "mean"
    assert (output / "final" / "model.safetensors").is_file()
    assert [r["step"] for r in json.loads((output / "history.json").read_text()) if "loss" in r] == [1, 2]


def test_pretrain_from_the_tiny_config_with_overrides(tmp_path):
    pytest.importorskip("spacy")
    pytest.importorskip("faiss")
    output = tmp_path / "pretrain"
    status = main([
        "-v", "pretrain", f"--config={os.path.join(CONFIGS, 'cpu-tiny.yaml')}", "--output_dir", str(output),
        "--max_steps", "2", "--max_articles", "6", "--refresh_schedule", "0", "--save_steps", "0",
        "--eval_mlm_examples", "0", "--report_to", "none", "--logging_steps", "1",
    ])
    assert status == 0
    for part in ("retriever", "encoder"):
        assert (output / "final" / part / "config.json").is_file()
    assert (output / "final" / "index" / "manifest.json").is_file()
    assert max(r["step"] for r in json.loads((output / "history.json").read_text())) == 2


@pytest.mark.parametrize(
    "command, field",
    [("pretrain", "--refresh_schedule"), ("ict", "--remove_probability"), ("finetune", "--train_file"),
     ("evaluate", "--qa_file")],
)
def test_help_lists_the_dataclass_fields(command, field, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: realm-hf {command} ") and field in out and "--config" in out


def test_the_top_level_help_lists_the_training_commands(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(command in out for command in ("pretrain", "ict", "finetune", "evaluate"))


def test_unknown_arguments_fail_with_a_message_naming_them(qa_data, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["finetune", "--config", qa_data["config"], "--output_dir", str(tmp_path), "--max_stepz", "2"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "realm-hf finetune: error: --max_stepz is not an option; did you mean --max_steps?" in err
    # an unknown key of the YAML file, too
    config = tmp_path / "bad.yaml"
    config.write_text("qa_file: x.jsonl\nmodel: m\nnum_beams: 3\n")
    with pytest.raises(SystemExit):
        main(["evaluate", "--config", str(config)])
    err = capsys.readouterr().err
    assert f"num_beams (a key of {config}) is not an option; run with `realm-hf evaluate --help`" in err
    with pytest.raises(SystemExit) as exit_info:
        main(["ict", "--config", str(tmp_path / "missing.yaml")])
    assert exit_info.value.code == 2 and "--config needs a YAML file" in capsys.readouterr().err
    # argparse's own errors name the subcommand too
    with pytest.raises(SystemExit) as exit_info:
        main(["ict", "--max_steps", "2"])
    assert exit_info.value.code == 2
    assert "realm-hf ict: error: the following arguments are required: --output_dir" in capsys.readouterr().err


@pytest.mark.parametrize(
    "script, entry_point",
    [("pretrain.py", "main_pretrain"), ("ict.py", "main_ict"), ("finetune_openqa.py", "main_finetune"),
     ("evaluate_openqa.py", "main_evaluate")],
)
def test_the_example_scripts_call_the_same_entry_points(script, entry_point, monkeypatch):
    calls = []

    def fake(*args, **kwargs):
        calls.append((args, kwargs))

    # realm_hf.training first: its lazy name still resolves to the real entry point, which the undo puts back (patched
    # second, it would keep the fake for every later test)
    monkeypatch.setattr("realm_hf.training." + entry_point, fake)
    monkeypatch.setattr(entry_points, entry_point, fake)
    monkeypatch.setattr(sys, "argv", [script, "--config", "x.yaml"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(os.path.join(EXAMPLES, script), run_name="__main__")
    assert exited.value.code == 0
    assert calls == [((["--config", "x.yaml"],), {})]  # the script's own command line, as `realm-hf <job>` passes it
