"""Named recipes of `realm-hf pretrain` (recipe < --config < flags; the bare default is cold-start), removed options
and settings that would be ignored, each refused in one line."""

from __future__ import annotations

import configparser
import dataclasses
import json
import logging
import os
import re
from pathlib import Path

import pytest

from realm_hf.training.argument_parsing import command_line, parse_arguments
from realm_hf.training.entry_points import PRETRAIN_ARGUMENTS, main_pretrain
from realm_hf.training.index_builder import refresh_resources
from realm_hf.training.recipes import DEFAULT_RECIPE, load_recipe, recipe_names, recipe_summaries
from realm_hf.utils.options import UsageError

ROOT = Path(__file__).resolve().parents[2]


def _settings(argv: list[str]) -> dict:
    parsed = parse_arguments(PRETRAIN_ARGUMENTS, ["--output_dir", "out", *argv], prog="realm-hf pretrain")
    return {name: value for args in parsed for name, value in vars(args).items()}


def test_each_shipped_recipe_names_only_options_and_has_a_summary_and_is_packaged():
    fields = {field.name for types in PRETRAIN_ARGUMENTS for field in dataclasses.fields(types)}
    assert {"paper", "cold-start"} <= set(recipe_names()) and DEFAULT_RECIPE in recipe_names()
    for name in recipe_names():
        assert set(load_recipe(name)) <= fields, name
        assert len(recipe_summaries()[name]) > 20
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf-8")
    assert "recipes/*.yaml" in parser["options.package_data"]["realm_hf"]


def test_the_bare_default_is_the_cold_start_recipe():
    settings = _settings([])
    assert settings["recipe"] == "cold-start"
    assert (settings["reading_warmup_steps"], settings["retriever_gate_utility"]) == (100, 0.2)
    assert settings["mlm_head_learning_rate"] == 0.001 and settings["null_document_score"] == "learned"


def test_the_paper_recipe_is_the_papers_objective():
    settings = _settings(["--recipe", "paper"])
    assert settings["null_document_score"] == "embedding" and settings["num_candidates"] == 8
    assert settings["masking"] == "salient_span" and settings["refresh_schedule"] == "500"
    assert settings["learning_rate"] == 3e-5 and settings["use_null_document"]
    assert settings["reading_warmup_steps"] == 0 and settings["retriever_gate_utility"] is None
    assert settings["mlm_head_learning_rate"] is None and settings["reading_loss_weight"] == 0.0
    assert _settings(["--recipe=paper"])["null_document_score"] == "embedding"


def test_a_config_overrides_the_recipe_and_flags_override_the_config(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("recipe: paper\nlearning_rate: 0.0002\nnum_candidates: 4\nretriever_gate_utility: 0.1\n")
    settings = _settings(["--config", str(config), "--num_candidates", "6"])
    assert settings["recipe"] == "paper" and settings["null_document_score"] == "embedding"  # the recipe's
    assert settings["learning_rate"] == 0.0002 and settings["retriever_gate_utility"] == 0.1  # the config's
    assert settings["num_candidates"] == 6  # the flag's
    assert _settings(["--config", str(config), "--recipe", "cold-start"])["reading_warmup_steps"] == 100


def test_null_sets_an_option_back_to_its_default_over_the_recipe(tmp_path):
    assert _settings(["--retriever_gate_utility", "null"])["retriever_gate_utility"] is None
    config = tmp_path / "run.yaml"
    config.write_text("mlm_head_learning_rate: null\n")
    settings = _settings(["--config", str(config)])
    assert settings["mlm_head_learning_rate"] is None and settings["retriever_gate_utility"] == 0.2
    with pytest.raises(UsageError, match="--retriever_gate_utilty is not an option; did you mean --retriever_gate_utility"):
        _settings(["--retriever_gate_utilty", "null"])


def test_the_recorded_command_of_a_recipe_run_parses_back_into_its_settings():
    settings = _settings(["--recipe", "cold-start", "--retriever_gate_utility", "null", "--learning_rate", "3e-05"])
    command = command_line(PRETRAIN_ARGUMENTS, settings)
    assert command[command.index("--recipe") + 1] == "cold-start"
    assert command[command.index("--retriever_gate_utility") + 1] == "null"
    assert _settings(command[2:]) == settings


def test_an_unknown_recipe_is_refused_in_one_line_naming_the_choices(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main_pretrain(["--recipe", "papr", "--output_dir", str(tmp_path)], prog="realm-hf pretrain")
    assert exit_info.value.code == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line == "realm-hf pretrain: error: --recipe 'papr' is not a recipe; choose one of: cold-start, paper."


@pytest.mark.parametrize("option, value, fix", [
    ("encoder_freeze_steps", "100", "use --reading_loss_weight"),
    ("reading_replay_every", "3", "use --reading_loss_weight"),
    ("retriever_freeze_steps", "50", "--retriever_learning_rate 0 freezes it for the whole run"),
    ("refresh_threads", "1", "fixed per --refresh_mode"),
    ("refresh_niceness", "19", "fixed per --refresh_mode"),
    ("refresh_trainer_threads", "1", "fixed per --refresh_mode"),
])
def test_a_removed_option_is_refused_with_what_to_use_instead(option, value, fix, tmp_path):
    with pytest.raises(UsageError, match=rf"^--{option} was removed: .*{re.escape(fix)}"):
        _settings([f"--{option}", value])
    config = tmp_path / "old.yaml"
    config.write_text(f"{option}: {value}\n")
    with pytest.raises(UsageError, match=rf"^--{option} \(a key of {re.escape(str(config))}\) was removed: .*{re.escape(fix)}"):
        _settings(["--config", str(config)])


def test_help_lists_the_recipes_one_line_each(capsys):
    with pytest.raises(SystemExit):
        main_pretrain(["--help"], prog="realm-hf pretrain")
    out = capsys.readouterr().out
    for name, summary in recipe_summaries().items():
        assert f"  {name.ljust(10)}  {summary}\n" in out
    assert "--encoder_freeze_steps" not in out and "--reading_replay_every" not in out
    assert "--retriever_freeze_steps" not in out and "--refresh_niceness" not in out


@pytest.mark.parametrize("option, value", [("pooling", "mean"), ("projection_size", "64"), ("retriever", "bert-x")])
def test_model_settings_an_ict_warm_start_decides_are_refused_with_it(option, value, tmp_path, capsys):
    ict = tmp_path / "ict"
    ict.mkdir()
    (ict / "config.json").write_text(json.dumps({"model_type": "realm_retriever"}))
    with pytest.raises(SystemExit):
        main_pretrain(["--output_dir", str(tmp_path / "out"), "--random_init", "--ict_warm_start", str(ict),
                       f"--{option}", value], prog="realm-hf pretrain")
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"realm-hf pretrain: error: --{option} {value} is ignored with --ict_warm_start {ict}")


def test_builder_settings_its_mode_would_ignore_are_refused():
    with pytest.raises(UsageError, match="--refresh_time_share 0.2 paces the builder: use --refresh_mode paced"):
        _settings(["--refresh_mode", "thread", "--refresh_time_share", "0.2"])
    with pytest.raises(UsageError, match="--refresh_time_share 0.2 paces the builder"):
        refresh_resources("cpu", mode="thread", time_share=0.2)
    # from Python: a process's resources outside process mode (the default on the CPU: paced)
    with pytest.raises(ValueError, match="^trainer_threads=1 sets a builder process's resources, but the builder runs "
                                         "in paced mode: pass mode='process', or leave trainer_threads out.$"):
        refresh_resources("cpu", trainer_threads=1)
    with pytest.raises(ValueError, match="^niceness=5 .* in thread mode"):
        refresh_resources("cpu", niceness=5, mode="thread")
    assert refresh_resources("cpu", niceness=5, mode="process").niceness == 5


def test_shard_index_on_one_process_is_said_to_have_no_effect(tmp_path, caplog):
    pytest.importorskip("spacy")
    from test_pretrainer import make_trainer

    with caplog.at_level(logging.WARNING, logger="realm_hf.training.pretrain"):
        make_trainer(tmp_path, max_steps=1, shard_index=True)
    assert "--shard_index has no effect on one process" in caplog.text


def test_a_paper_recipe_run_scores_the_null_document_by_its_embedding(tmp_path):
    pytest.importorskip("spacy")
    output = tmp_path / "paper"
    main_pretrain([
        "--recipe", "paper", "--random_init", "--output_dir", str(output), "--corpus", "embedded",
        "--max_articles", "6", "--block_length", "64", "--query_max_length", "32", "--joined_max_length", "96",
        "--index_type", "torch-exact", "--embed_dtype", "float32", "--num_candidates", "4", "--max_steps", "2",
        "--refresh_schedule", "0", "--refresh_mode", "thread", "--save_steps", "0", "--eval_mlm_examples", "0",
        "--report_to", "none", "--logging_steps", "1",
    ], prog="realm-hf pretrain")
    retriever_config = json.loads((output / "final" / "retriever" / "config.json").read_text())
    assert retriever_config["null_document_score"] == "embedding"
    recorded = json.loads((output / "training_args.json").read_text())
    assert recorded["recipe"] == "paper" and recorded["null_document_score"] == "embedding"
    state = json.loads((output / "trainer_state.json").read_text())
    assert state["command"][state["command"].index("--recipe") + 1] == "paper"
    assert os.path.isdir(output / "final" / "index")
