"""What a REALM pre-training run records at its end, for its model card: `<output_dir>/trainer_state.json`.

Beside the step: the retriever's learning record and the line that sums it up (the one the run logs), what the run
read (X and Z with their counts, [`PretrainingData.record`]), the `realm-hf pretrain` command of its settings, and the
realm_hf version that ran it. `realm_hf.hub.collect_training_facts` reads it back and `render_model_card` shows it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..index.manifest import package_version
from .argument_parsing import command_line
from .retriever_learning import RetrieverLearningTracker

__all__ = ["PRETRAIN_COMMAND", "pretraining_record"]

PRETRAIN_COMMAND = ("realm-hf", "pretrain")
"""The command whose arguments are the pre-training dataclasses (`realm_hf.training.entry_points.main_pretrain`)."""


def pretraining_record(
    tracker: RetrieverLearningTracker, data: dict[str, Any], arguments: Sequence[Any], reproducible: bool = True
) -> tuple[int, str, dict[str, Any]]:
    r"""
    The end-of-run record of a pre-training run, and the summary line to log at its level.

    Args:
        tracker ([`RetrieverLearningTracker`]): How the retriever learned.
        data (`dict`): What the run read ([`PretrainingData.record`]).
        arguments (`Sequence`): The run's argument dataclasses, in the order of `realm-hf pretrain`'s
            (`LoopArguments`, `ModelArguments`, `CorpusArguments`, `PretrainingArguments`).
        reproducible (`bool`, defaults to `True`): Whether these arguments alone made the run; a trainer also handed
            objects no command line can pass (a tagger, evaluation sentences) records no command.

    Returns:
        `tuple`: the log level and the summary line ([`RetrieverLearningTracker.summary`]), and the record:
        `retriever_learning`, `retriever_learning_summary`, `data`, `realm_hf_version` and, when `reproducible`,
        `command` (the argv of `realm-hf pretrain` with the settings that differ from the defaults, [`command_line`]).
    """
    level, summary = tracker.summary()
    record: dict[str, Any] = {
        "retriever_learning": tracker.state_dict(),
        "retriever_learning_summary": summary,
        "data": data,
        "realm_hf_version": package_version(),
    }
    if reproducible:
        settings = {name: value for args in arguments for name, value in vars(args).items()}
        record["command"] = [*PRETRAIN_COMMAND, *command_line(tuple(type(args) for args in arguments), settings)]
    return level, summary, record
