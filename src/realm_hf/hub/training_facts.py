"""Training details for a model card, read from the files the trainers write (nothing is typed by hand)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any

from ..index.manifest import MANIFEST_NAME
from ..utils.files import read_json_file


__all__ = ["collect_training_facts", "format_command"]

TRAINING_ARGS_FILES = ("training_args.json", "args.json")
HISTORY_FILE = "history.json"
TRAINER_STATE_FILE = "trainer_state.json"  # what realm_hf.training writes at the end of a run (training.output_dir)


def round_metric(value: Any) -> Any:
    """A number rounded to 2 decimals as cards show metrics (bools and non-numbers pass through)."""
    return round(float(value), 2) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def collect_training_facts(model_dir: str | os.PathLike) -> dict[str, Any]:
    r"""
    Training details for a card, read from what the trainers write (nothing is typed by hand).

    Looks in `model_dir` and its parent (the trainer's `output_dir` when `model_dir` is `<output_dir>/final`) for
    `history.json` (the loop's log records), `training_args.json` (the merged argument dataclasses, if the trainer
    saved them) and `trainer_state.json` (what the trainer recorded at the end), and reads
    `model_dir/index/manifest.json` when present.

    Returns:
        `dict`: `args` (the saved arguments, possibly empty), `steps`, `final_loss`, `num_refreshes`,
        `mean_staleness_steps`, `eval` (last `eval/*` values of the history) and `eval_step` (the step of the last
        record that has one), `index_manifest` (dict or None), and from a pre-training run's `trainer_state.json`:
        `data` (X and Z with their counts, see [`PretrainingData.record`]), `retriever_learning` (its record),
        `retriever_learning_summary` (the line the run logged), `command` (the argv of the `realm-hf pretrain` that
        makes the run) and `realm_hf_version`; keys whose source is absent are None (`eval` and `data`: empty).
    """
    model_dir = os.path.abspath(os.fspath(model_dir))
    folders = [model_dir, os.path.dirname(model_dir)]
    facts: dict[str, Any] = {
        "args": {}, "steps": None, "final_loss": None, "num_refreshes": None, "mean_staleness_steps": None,
        "eval": {}, "eval_step": None, "index_manifest": None, "data": {}, "retriever_learning": None,
        "retriever_learning_summary": None, "command": None, "realm_hf_version": None, "sources": [],
    }
    for folder in folders:
        path = os.path.join(folder, TRAINER_STATE_FILE)
        if os.path.isfile(path) and not any(source.endswith(TRAINER_STATE_FILE) for source in facts["sources"]):
            state = read_json_file(path)
            facts["sources"].append(path)
            for key in ("retriever_learning", "retriever_learning_summary", "command", "realm_hf_version"):
                facts[key] = state.get(key)
            facts["data"] = dict(state.get("data") or {})
        for name in TRAINING_ARGS_FILES:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not facts["args"]:
                facts["args"] = read_json_file(path)
                facts["sources"].append(path)
        path = os.path.join(folder, HISTORY_FILE)
        if os.path.isfile(path) and facts["steps"] is None:
            history = [record for record in read_json_file(path) if isinstance(record, Mapping)]
            facts["sources"].append(path)
            if history:
                facts["steps"] = int(max(record.get("step", 0) for record in history))
                losses = [record["loss"] for record in history if "loss" in record]
                facts["final_loss"] = round_metric(losses[-1]) if losses else None
                swaps = [record for record in history if "refresh/swap_step" in record]
                facts["num_refreshes"] = len(swaps)
                staleness = [r["refresh/staleness_steps"] for r in swaps if "refresh/staleness_steps" in r]
                facts["mean_staleness_steps"] = round_metric(sum(staleness) / len(staleness)) if staleness else None
                for record in history:
                    for key, value in record.items():
                        if key.startswith("eval/"):
                            facts["eval"][key[len("eval/"):]] = round_metric(value)
                            facts["eval_step"] = record.get("step")
    manifest_path = os.path.join(model_dir, "index", MANIFEST_NAME)
    if os.path.isfile(manifest_path):
        facts["index_manifest"] = read_json_file(manifest_path)
    return facts


def format_command(argv: list[str]) -> str:
    """A recorded command line for a card: shell-quoted, one `--option value` a line (backslash continued)."""
    words = [shlex.quote(str(word)) for word in argv]
    head = [word for word in words[:2] if not word.startswith("--")]
    lines, rest = [" ".join(head)], words[len(head):]
    while rest:
        take = 2 if len(rest) > 1 and rest[0].startswith("--") and not rest[1].startswith("--") else 1
        lines.append(" ".join(rest[:take]))
        rest = rest[take:]
    return " \\\n    ".join(lines)
