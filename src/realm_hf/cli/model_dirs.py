"""What a `--model` directory given to an Open-QA command (`ask`, `evaluate`) is, and the one-line error that names
the fix when it is not a RealmForOpenQA: a REALM pre-training output, or a folder that is not there yet (with the
command that writes it)."""

from __future__ import annotations

import os

from ..utils.options import UsageError
from .demo import DEMO_OUTPUTS

__all__ = ["check_open_qa_model_dir", "command_that_writes", "is_pretraining_output"]


def is_pretraining_output(path: str) -> bool:
    """Whether the local folder `path` is what a REALM pre-training run saves (`<output_dir>/final`: `retriever/` +
    `encoder/`, no weights at its top level)."""
    from ..checkpoints.folders import is_pretraining_checkpoint

    return os.path.isdir(path) and is_pretraining_checkpoint(path)


def command_that_writes(path: str) -> str | None:
    """The `realm-hf` command whose default output holds `path` (a demo's), or None."""
    relative = os.path.normpath(path)
    for recipe, output in DEMO_OUTPUTS.items():
        if relative == output or relative.startswith(output + os.sep):
            return "realm-hf demo" if recipe == "knowledge" else f"realm-hf demo --recipe {recipe}"
    return None


def check_open_qa_model_dir(value: str, option: str = "--model") -> None:
    """
    Raise a one-line [`UsageError`] when `value` cannot be an Open-QA model: a REALM pre-training output (what to do
    with it instead), or a missing folder that looks like a path (which command writes it). A Hub repo id, `minilm`
    and other directories are left to the loader's own checks.
    """
    if os.path.isdir(value):
        if is_pretraining_output(value):
            raise UsageError(
                f"{option} {value!r} is a REALM pre-training output (retriever/ + encoder/), not an Open-QA model: fill "
                f"blanks with it (`pipeline(\"realm-fill-mask\", model={value!r})`), or fine-tune it for questions "
                f"first (`realm-hf finetune --model {value} --output_dir DIR ...`, then {option} DIR/final)."
            )
        return
    writer = command_that_writes(value)
    if writer is not None:
        raise UsageError(f"{option} {value!r}: no such directory yet; `{writer}` writes it (run it first).")
    if os.path.basename(os.path.normpath(value)) == "final":
        run = os.path.dirname(os.path.normpath(value)) or "."
        raise UsageError(
            f"{option} {value!r}: no such directory; an Open-QA fine-tuning writes it "
            f"(`realm-hf finetune --config FILE --output_dir {run}`), or pass the path of an existing one."
        )
