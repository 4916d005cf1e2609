"""The training and evaluation jobs as functions of their command line: one per job, called by `realm-hf <command>`
and by the example scripts alike (the same arguments, the same code).

    realm-hf pretrain --config examples/configs/cpu-tiny.yaml
    realm-hf ict --config examples/configs/ict-cpu-tiny.yaml --max_steps 10
    accelerate launch -m realm_hf.cli finetune --config examples/configs/openqa-cpu-tiny.yaml
    realm-hf evaluate --model outputs/openqa-tiny/final --qa_file ../shared/data/qa/nq-dev.jsonl --max_questions 100
    accelerate launch examples/finetune_openqa.py --config examples/configs/openqa-cpu-tiny.yaml   (the same job)

Each takes `--config FILE.yaml` (keys are the argument names) and/or command-line arguments, which override the file
(see [`parse_arguments`]); `--help` lists every argument. Logging is configured by the caller (the CLI, the script).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from transformers import HfArgumentParser

from .validation import (
    check_corpus, check_index_dir, check_index_type, check_model, check_qa_files, check_refresh_device,
    check_refresh_schedule,
)
from ..utils.options import UsageError
from .argument_parsing import parse_arguments
from .recipes import DEFAULT_RECIPE, recipe_summaries
from .arguments import (
    CorpusArguments, IctArguments, LoopArguments, MlmArguments, ModelArguments, OpenQaArguments,
    OpenQaEvaluationArguments, PretrainingArguments,
)

__all__ = [
    "ENTRY_POINTS", "main_evaluate", "main_finetune", "main_ict", "main_mask", "main_mlm", "main_pretrain", "parse_command_line",
    "run_evaluation",
]

_CONFIG_HELP = (
    "Arguments come from `--config FILE.yaml` (keys are the argument names below) and/or the command line; "
    "command-line values override the file."
)

NEGATED_HELP = {
    "share_towers": "Two networks: a query tower and a document tower (default: one shared network).",
    "use_null_document": "Leave the null document out of the candidate sets.",
    "rebuild_final_index": "Save the last refreshed index as final/index instead of re-embedding the corpus (its "
    "fingerprint does not match the final model).",
    "check_index_fingerprint": "Accept an index built by other document-tower weights (its scores may not match).",
    "check_fingerprint": "Accept an index built by other document-tower weights (its scores may not match).",
    "truncate_questions": "Refuse questions longer than the retriever's query_max_length before any batch runs (one "
    "error names them) instead of cutting them.",
    "untie_towers": "With shared towers, fine-tune the one network for queries and documents alike (the index goes "
    "stale as it learns).",
}
"""`--help` of the `--no_<field>` switch of a boolean field that is on by default (transformers repeats the field's
own help there, which says the opposite)."""

_MODEL_CHECK = {
    "retriever": "a RealmRetriever directory, a BERT directory or Hub id, or 'minilm'",
    "encoder": "a RealmKnowledgeEncoder directory, a BERT directory or Hub id, or 'minilm'",
    "model": "a RealmForOpenQA directory, a pre-training output directory, a BERT, or 'minilm'",
    "ict_warm_start": "a retriever directory written by `realm-hf ict` (<output_dir>/final)",
}
_CHECKS: dict[str, Callable[[str, str], None]] = {
    "corpus": check_corpus,
    "pretraining_corpus": check_corpus,
    "index_type": check_index_type,
    "refresh_schedule": check_refresh_schedule,
    "refresh_device": check_refresh_device,
    "train_file": check_qa_files,
    "eval_file": check_qa_files,
    "qa_file": check_qa_files,
    "eval_qa_file": check_qa_files,
    "index_dir": check_index_dir,
    **{
        name: functools.partial(check_model, expected=expected, index_option="--index_dir")
        for name, expected in _MODEL_CHECK.items()
    },
}
"""Cheap checks of argument fields by name (`training.validation`), run on every given value before the job starts."""
_DATA_FIELDS = frozenset({"corpus", "pretraining_corpus", "train_file", "eval_file", "qa_file", "eval_qa_file"})
"""The fields of `_CHECKS` that name data (checked before the models)."""


def parse_command_line(
    dataclass_types: tuple[type, ...],
    argv: Sequence[str] | None = None,
    prog: str | None = None,
    description: str | None = None,
) -> tuple:
    r"""
    [`parse_arguments`] with command-line manners: `--help` prints the fields of `dataclass_types` and exits 0;
    an argument that is not exactly an option (naming the nearest one), a value out of its limits, or a `--config`
    without a readable file, prints one line naming it and exits 2.

    Args:
        dataclass_types (`tuple[type, ...]`): The argument dataclasses, in the order they are returned.
        argv (`Sequence[str]`, *optional*): The arguments (default: `sys.argv[1:]`); `--config=FILE` is accepted too.
        prog (`str`, *optional*): The command's name in messages (default: the script's file name).
        description (`str`, *optional*): What the command does, shown by `--help`.

    Returns:
        `tuple`: one instance per dataclass type.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = prog or os.path.basename(sys.argv[0]) or "realm-hf"
    argv = [part for arg in argv for part in (arg.split("=", 1) if arg.startswith("--config=") else [arg])]
    if "-h" in argv or "--help" in argv:
        has_recipes = any(field.name == "recipe" for types in dataclass_types for field in dataclasses.fields(types))
        parser = HfArgumentParser(
            dataclass_types, prog=prog,
            description=f"{description or ''}\n\n{_CONFIG_HELP}{_recipes_help() if has_recipes else ''}".strip(),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _negate_help(parser)
        parser.print_help()
        raise SystemExit(0)
    if "--config" in argv:
        position = argv.index("--config")
        path = argv[position + 1] if position + 1 < len(argv) else None
        if path is None or not os.path.isfile(path):
            _fail(prog, f"--config needs a YAML file, got {path!r} (no such file); e.g. --config examples/configs/x.yaml")
    try:
        parsed = parse_arguments(dataclass_types, argv, prog=prog)
        check_arguments(parsed)
    except ValueError as error:  # a name that is not an option, a value out of its limits, a check of `_CHECKS`
        _fail(prog, " ".join(str(error).split()))
    return parsed


def _recipes_help() -> str:
    """The recipes listed by `--help`, one line each."""
    summaries = recipe_summaries()
    width = max(len(name) for name in summaries)
    lines = [f"  {name.ljust(width)}  {summary}" for name, summary in summaries.items()]
    return (
        f"\n\nRecipes (--recipe NAME, or `recipe: NAME` in the config; default {DEFAULT_RECIPE}; their files: "
        "realm_hf/recipes/NAME.yaml):\n" + "\n".join(lines) + "\nA recipe < --config < the command line; "
        "`--name null` (or `name: null`) sets an option back to its built-in default."
    )


_DECIDED_BY_ICT = ("retriever", "pooling", "projection_size", "share_towers")
"""Model arguments that an ICT warm start's saved retriever decides (given with `--ict_warm_start`, refused)."""


def _refuse_ignored_by_ict_warm_start(parsed: Sequence[Any]) -> None:
    """Refuse `--retriever`, `--pooling`, `--projection_size` or `--no_share_towers` given with `--ict_warm_start`:
    the ICT checkpoint's retriever is loaded as saved, so they would be ignored."""
    settings = {field.name: (getattr(args, field.name), field.default) for args in parsed for field in dataclasses.fields(args)}
    warm_start = settings.get("ict_warm_start", (None, None))[0]
    if warm_start is None:
        return
    for name in _DECIDED_BY_ICT:
        value, default = settings.get(name, (None, None))
        if value != default:
            raise UsageError(
                f"--{name} {value} is ignored with --ict_warm_start {warm_start}: the ICT checkpoint's retriever is "
                f"loaded as it was saved (set --{name} on `realm-hf ict` instead), so drop --{name}."
            )


def check_arguments(parsed: Sequence[Any]) -> None:
    r"""
    Check the given paths, models, index type and refresh schedule of parsed argument dataclasses before any work
    (a typo must not surface after data preparation and embedding). Fields left at their defaults are not checked
    (a default the job does not use must not refuse it), nor the starting models of `--random_init` runs.

    Raises:
        [`UsageError`]: naming the option, its value and the fix.
    """
    _refuse_ignored_by_ict_warm_start(parsed)
    random_init = any(getattr(arguments, "random_init", False) for arguments in parsed)
    given = []
    for arguments in parsed:
        for field in dataclasses.fields(arguments):
            value = getattr(arguments, field.name)
            if field.name not in _CHECKS or value is None or value == field.default:
                continue
            if random_init and field.name in ("retriever", "encoder"):
                continue
            given.append((field.name, value))
    # the data first: on a machine without the corpus, that is what to fix (a missing model may be a later stage's)
    for name, value in sorted(given, key=lambda item: item[0] not in _DATA_FIELDS):
        _CHECKS[name](value, f"--{name}")


def _negate_help(parser: argparse.ArgumentParser) -> None:
    """Give each `--no_<field>` switch its own help (see [`NEGATED_HELP`])."""
    for action in parser._actions:
        negated = [option[len("--no_"):] for option in action.option_strings if option.startswith("--no_")]
        if negated:
            action.help = NEGATED_HELP.get(negated[0], f"Turn --{negated[0]} off (it is on by default).")


def _fail(prog: str, message: str) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


PRETRAIN_ARGUMENTS = (LoopArguments, ModelArguments, CorpusArguments, PretrainingArguments)
ICT_ARGUMENTS = (LoopArguments, ModelArguments, CorpusArguments, IctArguments)
MLM_ARGUMENTS = (LoopArguments, ModelArguments, CorpusArguments, MlmArguments)


def _train(
    trainer: Callable[..., Any], arguments: tuple[type, ...], argv: Sequence[str] | None, prog: str | None,
    description: str,
) -> list[dict]:
    """A training job: its command line parsed into the `arguments` dataclasses, which `trainer` takes in that order;
    returns the logged history of `trainer(...).train()`."""
    return trainer(*parse_command_line(arguments, argv, prog, description)).train()


def main_pretrain(argv: Sequence[str] | None = None, prog: str | None = None) -> list[dict]:
    r"""
    REALM pre-training with asynchronous index refresh ([`RealmPretrainer`]); the model and its index land in
    `<output_dir>/final`.

    `argv` holds the arguments of [`LoopArguments`], [`ModelArguments`], [`CorpusArguments`] and
    [`PretrainingArguments`] (default: `sys.argv[1:]`), `prog` is the command's name in messages; returns the logged
    history.
    """
    from .pretrain import RealmPretrainer

    return _train(
        RealmPretrainer, PRETRAIN_ARGUMENTS, argv, prog, "REALM pre-training with asynchronous index refresh."
    )


def main_mask(argv: Sequence[str] | None = None, prog: str | None = None) -> dict:
    r"""
    Masking ahead of pre-training: the masked sentences of a `realm-hf pretrain` config (salient spans need spaCy)
    written to `--masked_sentences DIR`, which `realm-hf pretrain --masked_sentences DIR` then trains on. A complete
    directory made with the same settings is kept (the stage is done); one made with others is refused.

    Args:
        argv (`Sequence[str]`, *optional*): The arguments of `realm-hf pretrain` (default: `sys.argv[1:]`);
            `--masked_sentences` is required.
        prog (`str`, *optional*): The command's name in messages.

    Returns:
        `dict`: the directory's metadata (sentence and block counts, blocks checksum, settings).
    """
    from transformers import AutoTokenizer

    from .models import pretraining_tokenizer_path
    from .pretraining_data import (
        load_blocks, mask_sentences, masking_settings, read_masked_metadata, save_masked_sentences,
    )

    loop, model, corpus, pretraining = parse_command_line(
        PRETRAIN_ARGUMENTS, argv, prog, "Mask the pre-training sentences ahead (salient spans: spaCy), for "
        "`realm-hf pretrain --masked_sentences DIR`.",
    )
    prog = prog or "realm-hf mask"
    directory = pretraining.masked_sentences
    if directory is None:
        _fail(prog, "--masked_sentences DIR is required: the directory to write the masked sentences to.")
    settings = masking_settings(corpus, pretraining, loop.seed)
    existing = read_masked_metadata(directory)
    if existing is not None:
        if existing.get("settings") != settings:
            _fail(
                prog,
                f"--masked_sentences {directory!r} already holds sentences masked with other settings "
                f"({existing.get('settings')}); choose another directory or delete it.",
            )
        print(f"{directory} already holds the masked sentences of these settings ({existing['num_sentences']}).")
        return existing
    if os.path.exists(directory) and os.listdir(directory):
        _fail(
            prog,
            f"--masked_sentences {directory!r} exists and is not a complete `realm-hf mask` output (an interrupted "
            "write?); delete it or choose another directory.",
        )
    tokenizer = AutoTokenizer.from_pretrained(pretraining_tokenizer_path(model))
    blocks = load_blocks(tokenizer, corpus)
    masked = mask_sentences(tokenizer, blocks, corpus, pretraining, loop.seed)
    save_masked_sentences(masked, directory, blocks, settings)
    metadata = read_masked_metadata(directory)
    print(json.dumps({name: metadata[name] for name in ("num_sentences", "num_blocks", "blocks_checksum")}))
    return metadata


def main_ict(argv: Sequence[str] | None = None, prog: str | None = None) -> list[dict]:
    r"""
    Inverse Cloze Task warm start of the retriever ([`IctTrainer`]); the retriever lands in `<output_dir>/final`
    (pass it to pre-training with `--ict_warm_start`).

    `argv` holds the arguments of [`LoopArguments`], [`ModelArguments`], [`CorpusArguments`] and [`IctArguments`]
    (default: `sys.argv[1:]`), `prog` is the command's name in messages; returns the logged history.
    """
    from .ict import IctTrainer

    return _train(IctTrainer, ICT_ARGUMENTS, argv, prog, "Inverse Cloze Task warm start of the REALM retriever.")


def main_mlm(argv: Sequence[str] | None = None, prog: str | None = None) -> list[dict]:
    r"""
    Masked-LM training of the encoder's start on the knowledge corpus ([`MlmTrainer`]): continued BERT pre-training
    of `--encoder` (or its architecture from scratch), held-out accuracy logged as `eval/mlm_accuracy`. A
    `BertForMaskedLM` with its tokenizer lands in `<output_dir>/final`: pass it as `--encoder` of pre-training and
    fine-tuning.

    `argv` holds the arguments of [`LoopArguments`], [`ModelArguments`], [`CorpusArguments`] and [`MlmArguments`]
    (default: `sys.argv[1:]`), `prog` is the command's name in messages; returns the logged history.
    """
    from .mlm import MlmTrainer

    return _train(
        MlmTrainer, MLM_ARGUMENTS, argv, prog,
        "Masked-LM training of the knowledge-augmented encoder's start (a BERT that reads).",
    )


def main_finetune(argv: Sequence[str] | None = None, prog: str | None = None) -> list[dict]:
    r"""
    Open-QA fine-tuning of `RealmForOpenQA` ([`OpenQaTrainer`]): the index is built once from the document tower and
    kept fixed; the model, its tokenizer and its index land in `<output_dir>/final`.

    `argv` holds the arguments of [`LoopArguments`], [`ModelArguments`], [`CorpusArguments`] and [`OpenQaArguments`]
    (default: `sys.argv[1:]`), `prog` is the command's name in messages; returns the logged history (the last record
    holds the final evaluation when an `eval_file` is given).
    """
    from .openqa import OpenQaTrainer

    return _train(
        # the --config file is read for `corpus` once parse_command_line has checked it
        lambda *arguments: OpenQaTrainer(*arguments, corpus_given=_is_given(argv, "corpus")),
        (LoopArguments, ModelArguments, CorpusArguments, OpenQaArguments), argv, prog,
        "Open-QA fine-tuning of RealmForOpenQA: query tower and reader trained, index fixed (REALM section 3.4).",
    )


def _is_given(argv: Sequence[str] | None, name: str) -> bool:
    """Whether `--name` is on the command line `argv` (default: `sys.argv[1:]`) or a key of its `--config` file
    (read after `parse_command_line` checked it)."""
    from ..utils.files import read_yaml_file

    argv = list(sys.argv[1:] if argv is None else argv)
    argv = [part for arg in argv for part in (arg.split("=", 1) if arg.startswith("--") else [arg])]
    if f"--{name}" in argv:
        return True
    if "--config" in argv:
        values = read_yaml_file(argv[argv.index("--config") + 1]) or {}
        return values.get(name) is not None
    return False


def main_evaluate(argv: Sequence[str] | None = None, prog: str | None = None) -> dict[str, float]:
    r"""
    Open-QA evaluation of a saved `RealmForOpenQA` with its index ([`run_evaluation`]); prints the metrics as JSON
    on stdout (the command's output) and writes the files asked for (`--predictions_file`, `--metrics_file`).

    Args:
        argv (`Sequence[str]`, *optional*): The arguments of [`OpenQaEvaluationArguments`] (default: `sys.argv[1:]`).
        prog (`str`, *optional*): The command's name in messages.

    Returns:
        `dict[str, float]`: the metrics.
    """
    (args,) = parse_command_line(
        (OpenQaEvaluationArguments,), argv, prog,
        "Open-QA evaluation of a saved RealmForOpenQA with its index: exact match, Recall@k, predictions.",
    )
    metrics = run_evaluation(args)
    print(json.dumps(metrics, indent=2))
    return metrics



def run_evaluation(args: OpenQaEvaluationArguments) -> dict[str, float]:
    """Load the model and its index, evaluate, write the files asked for; returns the metrics."""
    import torch

    from ..data.openqa import load_qa_examples
    from ..evaluation.loading import load_open_qa
    from ..evaluation.open_qa import evaluate_open_qa, parse_recall_at, write_metrics_file

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    model, tokenizer, index = load_open_qa(
        args.model, args.index_dir, check_fingerprint=args.check_fingerprint, device=device,
        trust_index_file=args.trust_index_file,
    )
    record = model.retriever.config.corpus
    if record is not None and args.index_dir is None:
        from .trained_corpus import describe_corpus

        logging.getLogger(__name__).info("%s answers from its index over the corpus %s", args.model, describe_corpus(record))
    limit = None if args.max_questions is None else args.skip_questions + args.max_questions
    examples = load_qa_examples(args.qa_file, max_questions=limit)[args.skip_questions :]
    metrics, _ = evaluate_open_qa(
        model, tokenizer, index, examples, top_k=args.top_k, batch_size=args.batch_size, retrieval=args.retrieval,
        predictions_file=args.predictions_file, truncate_questions=args.truncate_questions,
        recall_at=parse_recall_at(args.recall_at),
    )
    if args.metrics_file:
        write_metrics_file(args.metrics_file, metrics, model=args.model, qa_file=args.qa_file, retrieval=args.retrieval)
    return metrics


ENTRY_POINTS: dict[str, Callable[..., Any]] = {
    "pretrain": main_pretrain,
    "mask": main_mask,
    "ict": main_ict,
    "mlm": main_mlm,
    "finetune": main_finetune,
    "evaluate": main_evaluate,
}
"""`realm-hf <command>` -> its entry point `(argv, prog) -> result`."""
