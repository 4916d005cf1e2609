"""The layout of a REALM pre-training checkpoint, and which of its folders a model class reads.

What `RealmPretrainer.save_model` writes (`<output_dir>/final`) and `realm-hf publish` pushes as a Hub model repo::

    config.json, tokenizer files   a copy of the encoder's config (what `transformers.pipeline` reads first)
    retriever/                     RealmRetriever (+ tokenizer)
    encoder/                       RealmKnowledgeEncoder (+ tokenizer)

So `RealmKnowledgeEncoder.from_pretrained("org/realm-cc-news")` reads `encoder/` and
`RealmRetriever.from_pretrained("org/realm-cc-news")` reads `retriever/`, as with `subfolder=`; a model that such a
checkpoint does not hold (a `RealmForOpenQA`, a `RealmReader`) is refused in one line that names how to get one.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

__all__ = [
    "PRETRAINING_PARTS",
    "is_pretraining_checkpoint",
    "not_a_part_error",
    "pretraining_checkpoint_part",
]

PRETRAINING_PARTS = ("retriever", "encoder")
"""The folders of a pre-training checkpoint, one model each."""

_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
_HUB_KWARGS = ("revision", "cache_dir", "token", "local_files_only", "force_download", "proxies")


def _has_file(name_or_path: str, filename: str, hub_kwargs: dict[str, Any]) -> bool:
    """Whether a local directory, or a Hub repo (its cache offline; otherwise asked once), holds `filename`."""
    if os.path.isdir(name_or_path):
        return os.path.isfile(os.path.join(name_or_path, *filename.split("/")))
    from transformers.utils import cached_file

    try:
        found = cached_file(
            name_or_path, filename, _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False, _raise_exceptions_for_gated_repo=False,
            **{key: value for key, value in hub_kwargs.items() if key in _HUB_KWARGS},
        )
    except OSError:  # no such repo or revision, not a repo id: the load itself says so
        return False
    return found is not None


def pretraining_checkpoint_part(
    name_or_path: str | os.PathLike | None, part: str, **hub_kwargs: Any
) -> bool:
    r"""
    Whether `name_or_path` is a REALM pre-training checkpoint whose `part` folder holds the model to load.

    A local directory is one when it has `<part>/config.json` and no weights at its top level; a Hub repo id when it
    has `<part>/config.json` (one lookup, answered by the cache when offline).

    Args:
        name_or_path (`str` or `os.PathLike`, *optional*): What `from_pretrained` was given.
        part (`str`): `"retriever"` or `"encoder"`.
        hub_kwargs: `revision`, `cache_dir`, `token`, `local_files_only` as given to `from_pretrained` (others are
            ignored).
    """
    if name_or_path is None or part not in PRETRAINING_PARTS:
        return False
    name = os.fspath(name_or_path)
    if os.path.isdir(name) and any(os.path.isfile(os.path.join(name, f)) for f in _WEIGHT_FILES):
        return False
    if not os.path.isdir(name) and (os.path.exists(name) or name.count("/") > 1 or os.path.isabs(name)):
        return False  # a file, or a path that is no directory: not a checkpoint, nor a repo id
    return _has_file(name, f"{part}/config.json", hub_kwargs)


def is_pretraining_checkpoint(name_or_path: str | os.PathLike | None, **hub_kwargs: Any) -> bool:
    """Whether `name_or_path` is a REALM pre-training checkpoint (`retriever/` + `encoder/`, no top-level weights)."""
    return all(pretraining_checkpoint_part(name_or_path, part, **hub_kwargs) for part in PRETRAINING_PARTS)


def not_a_part_error(name_or_path: str | os.PathLike, model_class: str) -> ValueError:
    """The one-line refusal of loading a `model_class` that a pre-training checkpoint does not hold."""
    name = os.fspath(name_or_path)
    folder = shlex.quote(name)  # a local folder or a Hub repo id: `finetune --model` takes either
    return ValueError(
        f"{name!r} is a REALM pre-training checkpoint (retriever/ + encoder/), which holds no {model_class}: fine-tune "
        f"it for open-domain QA first (`realm-hf finetune --model {folder} --output_dir DIR ...`, then "
        f"{model_class}.from_pretrained(DIR/final)), or use its parts: RealmRetriever.from_pretrained({name!r}), "
        f"RealmKnowledgeEncoder.from_pretrained({name!r}), pipeline(\"realm-fill-mask\", model={name!r})."
    )
