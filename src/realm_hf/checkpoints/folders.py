"""What a local folder holds, read from its file names alone (no model is loaded, nothing heavier than `os` is
imported): a saved tokenizer, a model (flat or a pre-training output's `retriever/` / `encoder/`), the model folder an
index folder sits in; and, from `realm_hf.modeling.checkpoint_layout` (which `from_pretrained` reads below this room),
whether a folder or Hub repo is a pre-training checkpoint. The CLI checks its arguments with these before it imports
torch."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..modeling.checkpoint_layout import PRETRAINING_PARTS, is_pretraining_checkpoint, pretraining_checkpoint_part

__all__ = [
    "PRETRAINING_PARTS", "has_tokenizer_files", "holds_model", "is_pretraining_checkpoint", "model_around_index",
    "pretraining_checkpoint_part",
]

_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "tokenizer_config.json")


def has_tokenizer_files(directory: str | os.PathLike | None) -> bool:
    """Whether `directory` holds a saved tokenizer."""
    return directory is not None and any(
        os.path.isfile(os.path.join(os.fspath(directory), name)) for name in _TOKENIZER_FILES
    )


def holds_model(path: str | os.PathLike, parts: Sequence[str] = PRETRAINING_PARTS) -> bool:
    """Whether the local folder `path` holds a model: a `config.json` at its top or in one of its `parts` folders (a
    pre-training output's `retriever/`, `encoder/`)."""
    folders = ((), *((part,) for part in parts))
    return any(os.path.isfile(os.path.join(os.fspath(path), *sub, "config.json")) for sub in folders)


def model_around_index(index_dir: str | os.PathLike) -> str | None:
    """The model folder an index folder sits in (`<model>/index`, as the trainers, `convert` and `realm-hf demo` write
    it: a `config.json` or a `retriever/config.json` beside it), or None; the messages that refuse an index folder
    given as a model name it."""
    parent = os.path.dirname(os.path.normpath(os.fspath(index_dir))) or "."
    return parent if holds_model(parent, parts=("retriever",)) else None
