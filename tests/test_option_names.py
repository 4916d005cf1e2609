"""Configuration typos are refused, never run as another option: a flag or a `--config` key that is not exactly an
option (`--max_step`, `max_question:`) ends in one line naming the nearest option, for every job and subcommand; a
value that cannot be right (a negative learning rate, a utility gate of 100 nats) ends in one line naming it."""

from __future__ import annotations

import os

import pytest

from realm_hf.cli import main
from realm_hf.convert.command_line import main as convert_main
from realm_hf.training import IctArguments, LoopArguments, ModelArguments, OpenQaArguments, PretrainingArguments
from realm_hf.training.argument_parsing import parse_arguments
from realm_hf.training.arguments import MlmArguments, OpenQaEvaluationArguments
from realm_hf.training.entry_points import ICT_ARGUMENTS, MLM_ARGUMENTS, PRETRAIN_ARGUMENTS, parse_command_line
from realm_hf.utils.options import UsageError

CPU_TINY = os.path.join(os.path.dirname(__file__), "..", "examples", "configs", "cpu-tiny.yaml")
EVALUATE = (OpenQaEvaluationArguments,)


def one_error_line(capsys, prog: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("job", "argv", "given", "nearest"),
    [
        (PRETRAIN_ARGUMENTS, ["--config", CPU_TINY, "--max_step", "5"], "--max_step", "--max_steps"),
        (PRETRAIN_ARGUMENTS, ["--output_dir", "o", "--max_step=5"], "--max_step", "--max_steps"),
        (ICT_ARGUMENTS, ["--output_dir", "o", "--learning_rat", "1e-4"], "--learning_rat", "--learning_rate"),
        (MLM_ARGUMENTS, ["--output_dir", "o", "--mlm_prob", "0.2"], "--mlm_prob", "--mlm_probability"),
        (EVALUATE, ["--model", "m", "--qa_file", "q", "--max_question", "1"], "--max_question", "--max_questions"),
    ],
)
def test_an_abbreviated_or_misspelt_flag_is_refused_with_the_nearest_option(job, argv, given, nearest):
    with pytest.raises(UsageError, match=f"^{given} is not an option; did you mean {nearest}\\?$"):
        parse_arguments(job, argv)


@pytest.mark.parametrize(
    ("job", "yaml", "key", "nearest"),
    [
        (PRETRAIN_ARGUMENTS, "output_dir: o\nmax_step: 5\n", "max_step", "max_steps"),
        (EVALUATE, "model: m\nqa_file: q\nmax_question: 1\n", "max_question", "max_questions"),
        (PRETRAIN_ARGUMENTS, "output_dir: o\nsave_total_limit: null\nmax_step: null\n", "max_step", "max_steps"),
    ],
)
def test_a_misspelt_config_key_is_refused_with_the_nearest_option(tmp_path, job, yaml, key, nearest):
    config = tmp_path / "run.yaml"
    config.write_text(yaml)
    with pytest.raises(UsageError, match=f"^{key} \\(a key of {config}\\) is not an option; did you mean {nearest}\\?"):
        parse_arguments(job, ["--config", str(config)])


def test_exact_names_and_their_hyphen_spelling_still_parse(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("output_dir: o\nmax_steps: 7\nlearning-rate: 0.001\n")
    loop, *_ = parse_arguments(PRETRAIN_ARGUMENTS, ["--config", str(config), "--max-steps", "9"])
    assert (loop.max_steps, loop.learning_rate) == (9, 0.001)
    (evaluation,) = parse_arguments(EVALUATE, ["--model", "m", "--qa_file", "q", "--max_questions=3"])
    assert evaluation.max_questions == 3


def test_the_training_commands_print_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["pretrain", "--config", CPU_TINY, "--max_step", "5"])
    assert exit_info.value.code == 2
    assert one_error_line(capsys, "realm-hf pretrain").endswith("--max_step is not an option; did you mean --max_steps?")


@pytest.mark.parametrize(
    ("argv", "prog", "message"),
    [
        (["build-index", "--corpu", "x", "--output", "o"], "realm-hf build-index", "--corpu is not an option; did you "
         "mean --corpus?"),
        (["ask", "who wrote hamlet", "--mod", "m"], "realm-hf ask", "--mod is not an option; did you mean --model?"),
        (["search", "q", "--index", "i", "--model", "m", "--top", "3"], "realm-hf search", "--top is not an option; did you mean --top-k?"),
        (["--verb", "ask", "q", "--model", "m"], "realm-hf", "--verb is not an option; did you mean --verbose?"),
    ],
)
def test_the_subcommands_refuse_abbreviations_in_one_line(capsys, argv, prog, message):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert one_error_line(capsys, prog) == f"{prog}: error: {message}"


def test_convert_refuses_an_abbreviated_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        convert_main(["--sr", "old", "--output", "new"])
    assert exit_info.value.code == 2
    assert one_error_line(capsys, "realm-hf convert") == (
        "realm-hf convert: error: --sr is not an option; did you mean --src?"
    )


@pytest.mark.parametrize(
    ("make", "option", "value"),
    [
        (lambda: LoopArguments(output_dir="o", learning_rate=-1e-3), "--learning_rate", "-0.001"),
        (lambda: LoopArguments(output_dir="o", learning_rate=float("nan")), "--learning_rate", "nan"),
        (lambda: LoopArguments(output_dir="o", per_device_batch_size=0), "--per_device_batch_size", "0"),
        (lambda: LoopArguments(output_dir="o", mixed_precision="bf61"), "--mixed_precision", "'bf61'"),
        (lambda: PretrainingArguments(retriever_gate_utility=100.0), "--retriever_gate_utility", "100.0"),
        (lambda: PretrainingArguments(refresh_time_share=2.0), "--refresh_time_share", "2.0"),
        (lambda: ModelArguments(pooling="max"), "--pooling", "'max'"),
        (lambda: MlmArguments(mlm_probability=15.0), "--mlm_probability", "15.0"),
        (lambda: IctArguments(temperature=0.0), "--temperature", "0.0"),
        (lambda: OpenQaArguments(train_file="t", top_k=0), "--top_k", "0"),
        (lambda: OpenQaEvaluationArguments(model="m", qa_file="q", retrieval="bm52"), "--retrieval", "'bm52'"),
    ],
)
def test_a_value_that_cannot_be_right_is_refused_by_name(make, option, value):
    with pytest.raises(UsageError, match=f"^{option} {value} (cannot be right|is not one of)"):
        make()


def test_a_value_out_of_its_limits_on_the_command_line_is_one_line_with_a_working_value(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_command_line(
            PRETRAIN_ARGUMENTS, ["--config", CPU_TINY, "--learning_rate=-3e-5"], prog="realm-hf pretrain"
        )
    assert exit_info.value.code == 2
    line = one_error_line(capsys, "realm-hf pretrain")
    assert "--learning_rate -3e-05 cannot be right: it must be above 0 and at most 1" in line
    assert line.endswith("e.g. --learning_rate 3e-05.")
    with pytest.raises(SystemExit):
        parse_command_line(PRETRAIN_ARGUMENTS, ["--config", CPU_TINY, "--retriever_gate_utility", "100"])
    assert "--retriever_gate_utility 100.0 cannot be right: it must be between -10 and 10" in capsys.readouterr().err


def test_the_command_line_of_recorded_settings_parses_back_to_them():
    """What a model card shows as "the command that made it" (realm_hf.hub.pretraining_command)."""
    from realm_hf.training.argument_parsing import command_line

    recorded = {
        "output_dir": "runs/news x", "max_steps": 4, "learning_rate": 1e-05, "use_null_document": False,
        "random_init": True, "pretraining_corpus": "data/news.jsonl", "projection_size": 128, "save_total_limit": None,
        "refresh_schedule": "0", "recipe": "cold-start", "retriever_gate_utility": None, "null_document_score": None,
        "not_an_option": 1,
    }
    argv = command_line(PRETRAIN_ARGUMENTS, recorded)
    assert argv == [
        "--output_dir", "runs/news x", "--max_steps", "4", "--learning_rate", "1e-05", "--random_init", "True",
        "--pretraining_corpus", "data/news.jsonl", "--recipe", "cold-start", "--use_null_document", "False",
        "--null_document_score", "null", "--refresh_schedule", "0", "--retriever_gate_utility", "null",
    ]  # the fields in order, the defaults (projection_size 128) and None left out, the recipe's ∅ and gate set back
    parsed = {name: value for args in parse_arguments(PRETRAIN_ARGUMENTS, argv) for name, value in vars(args).items()}
    assert {name: parsed[name] for name in recorded if name != "not_an_option"} == {
        **{name: value for name, value in recorded.items() if name != "not_an_option"}, "save_total_limit": 2,
    }
