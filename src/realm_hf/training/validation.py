"""Cheap checks of the values a user passes to `realm-hf` and the example scripts, run before any expensive work.

Each check raises [`UsageError`] with one line that names the option, the value and the fix; the CLI prints it
without a traceback and exits with status 2. The checks look at the file system, the Hugging Face cache and the
faiss factory parser only: no model is loaded and no corpus is read.

They live beside the arguments they check (`training.entry_points` runs them on every given field by name) and
serve the `realm-hf` subcommands too; [`UsageError`] itself sits in `realm_hf.utils.options`, below every room.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..modeling.initial_weights import resolve_bert_path
from ..utils.options import UsageError

__all__ = [
    "DATA_PAGE",
    "check_corpus",
    "check_index_dir",
    "check_index_type",
    "check_model",
    "check_positive",
    "check_qa_files",
    "check_refresh_device",
    "check_refresh_schedule",
    "check_texts",
]

DATA_PAGE = "docs/data.md"
"""The page of the source checkout that says where the real corpora and QA sets come from and how to point at them."""
_PROBE_DIM = 1920
"""Vector size used to parse a faiss factory string before the real size is known (2^7·3·5: most PQ splits fit)."""


def _could_be_repo_id(value: str) -> bool:
    """Whether `value` is spelled like a Hub repo id (`name` or `namespace/name`) rather than only like a path."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if os.path.isabs(value) or value.startswith((".", "~")) or "\\" in value or value.count("/") > 1:
        return False
    try:
        validate_repo_id(value)
    except HFValidationError:
        return False
    return True


def _in_hub_cache(repo_id: str) -> bool:
    """Whether the HF cache holds a model config of `repo_id` (flat, or that of a pre-training output's parts)."""
    from huggingface_hub import try_to_load_from_cache

    return any(
        isinstance(try_to_load_from_cache(repo_id, name), str)
        for name in ("config.json", "retriever/config.json", "encoder/config.json")
    )


def check_model(
    value: str, option: str, expected: str = "a saved model directory", index_option: str = "--index"
) -> None:
    r"""
    Check that `value` names a model that can be loaded: `minilm` (the packaged weights), an existing directory, or
    a Hub repo id (offline, `HF_HUB_OFFLINE=1`: one in the local cache).

    Args:
        value (`str`): The value given.
        option (`str`): The option it was given to, e.g. `"--model"` (named in the message).
        expected (`str`): What the option takes, e.g. `"a RealmForOpenQA directory (<finetune output>/final)"`.
        index_option (`str`): The option of the same command that takes an index (named when `value` is one).

    Raises:
        [`UsageError`]: naming the value and what to pass instead.
    """
    try:
        path = resolve_bert_path(value)
    except (ImportError, FileNotFoundError) as error:
        raise UsageError(f"{option} {value!r}: {error}") from error
    if os.path.isdir(path):
        _check_model_dir(path, value, option, expected, index_option)
        return
    if os.path.exists(path):
        raise UsageError(f"{option} {value!r} is a file; pass {expected}.")
    if not _could_be_repo_id(value):
        raise UsageError(f"{option} {value!r}: no such directory; pass {expected}.")
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE and not _in_hub_cache(value):
        raise UsageError(
            f"{option} {value!r}: no such directory, and no Hub repo of that name in the local cache (HF_HUB_OFFLINE "
            f"is set); pass {expected}, or download the repo first (`realm-hf download {value}` with network access)."
        )


def _check_model_dir(path: str, value: str, option: str, expected: str, index_option: str = "--index") -> None:
    """An existing directory must hold a config.json (flat, or a pre-training output's retriever/ and encoder/), and
    not be an index folder (which names the model it sits in, when it sits in one)."""
    from ..checkpoints.folders import holds_model, model_around_index
    from ..index.manifest import MANIFEST_NAME

    if os.path.isfile(os.path.join(path, MANIFEST_NAME)):
        owner = model_around_index(value) or "MODEL"
        raise UsageError(
            f"{option} {value!r} is an index folder ({MANIFEST_NAME}), not a model; pass the model it belongs to "
            f"({option} {owner}, {index_option} {value})."
        )
    if holds_model(path):
        return
    final = os.path.join(value, "final")
    hint = f"did you mean {final}? " if os.path.isfile(os.path.join(final, "config.json")) or os.path.isdir(
        os.path.join(final, "retriever")
    ) else ""
    raise UsageError(f"{option} {value!r} holds no config.json, so no model; {hint}pass {expected}.")


def check_corpus(value: str, option: str = "--corpus") -> None:
    """Check that `value` is `embedded` (and its package installed) or matches article files; else [`UsageError`]."""
    if value == "embedded":
        from ..corpus.embedded import embedded_corpus_path

        try:
            embedded_corpus_path()
        except ImportError as error:
            raise UsageError(f"{option} embedded: {error}") from error
        return
    from ..corpus.articles import resolve_files

    try:
        resolve_files(value)
    except FileNotFoundError as error:
        raise UsageError(
            f"{option} {value!r}: no article file (.jsonl, .jsonl.gz, .json, .parquet) there; pass such a file, a "
            f"glob, a directory of them, or 'embedded' ({DATA_PAGE} says where Wikipedia dumps come from)."
        ) from error


def check_qa_files(value: str, option: str) -> None:
    """Check that each comma-separated part of `value` (a file or glob, an optional `[start:stop]`) names a file."""
    from ..data.qa_examples import resolve_qa_files

    try:
        resolve_qa_files(value)
    except FileNotFoundError as error:
        raise UsageError(
            f"{option} {value!r}: {error} Pass JSONL files of {{\"question\", \"answers\"}} rows (comma-separated, "
            f"globs and [start:stop] row slices allowed; {DATA_PAGE} says where NQ-open, WebQuestions, CuratedTrec and "
            "TriviaQA come from)."
        ) from error


def check_index_dir(value: str, option: str = "--index") -> None:
    """Check that `value` is an index directory (one with a `manifest.json`); else [`UsageError`]."""
    from ..index.manifest import MANIFEST_NAME

    if not os.path.isfile(os.path.join(value, MANIFEST_NAME)):
        found = "no such directory" if not os.path.isdir(value) else f"no {MANIFEST_NAME} in it"
        raise UsageError(
            f"{option} {value!r}: {found}, so no index; pass a directory written by `realm-hf build-index --output "
            "DIR` or a trainer's <output_dir>/final/index."
        )


def check_index_type(value: str, option: str = "--index-type") -> None:
    r"""
    Check that `value` is an index type the package builds (`torch-exact`, the `compressed` preset, or a faiss factory
    string of the shapes of `realm_hf.index.index_types`) that faiss can parse (and faiss is installed).
    A string that parses but does not fit the embedding size (e.g. `PQ7` of 128 dimensions) is left to the build,
    which knows the size and names it.
    """
    from ..index.compressed import COMPRESSED
    from ..index.faiss_loader import import_faiss
    from ..index.index_types import (
        INDEX_TYPE_EXAMPLES, TORCH_EXACT, is_supported_index_type, unsupported_index_type_message,
    )

    if not is_supported_index_type(value):
        raise UsageError(unsupported_index_type_message(value, option))
    if value == TORCH_EXACT:
        return
    try:
        faiss = import_faiss()
    except ImportError as error:
        raise UsageError(f"{option} {value!r}: {error}") from error
    if value == COMPRESSED:  # a preset, not a factory string
        return
    try:
        faiss.index_factory(_PROBE_DIM, value, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as error:
        if "could not parse" in str(error):
            raise UsageError(f"{option} {value!r} is not a faiss factory string; use one such as {INDEX_TYPE_EXAMPLES}.") from error


def check_refresh_schedule(value: str, option: str = "--refresh_schedule") -> None:
    """Check that `value` parses as a [`RefreshSchedule`] (`"500"`, `"0-1000:100,1000-:500"`, `"0"`)."""
    from ..index.refresh_schedule import RefreshSchedule

    try:
        RefreshSchedule(value)
    except ValueError as error:
        raise UsageError(f"{option}: {error}") from error


def check_refresh_device(value: str, option: str = "--refresh_device") -> None:
    """Check that the index builder's device is `cpu`, `cuda` or `cuda:<n>`, and that CUDA exists when asked for."""
    from .index_builder import refresh_resources

    try:
        refresh_resources("cpu", device=value)
    except (ValueError, RuntimeError) as error:
        raise UsageError(f"{option}: {error}") from error


def check_positive(value: int | None, option: str) -> None:
    """Check that an optional count is at least 1; else [`UsageError`]."""
    if value is not None and value < 1:
        raise UsageError(f"{option} must be at least 1, got {value}.")


def check_texts(texts: Sequence[str], what: str, example: str) -> list[str]:
    r"""
    The stripped `texts` (questions, queries), or [`UsageError`] when one is empty or there are none.

    Args:
        texts (`Sequence[str]`): The texts given, one per command-line argument.
        what (`str`): What they are, e.g. `"question"`.
        example (`str`): A command that passes one right, shown in the message.
    """
    stripped = [text.strip() for text in texts]
    if not stripped:
        raise UsageError(f"pass a {what}, e.g. {example}")
    for position, text in enumerate(stripped, 1):
        if not text:
            raise UsageError(f"{what} {position} is empty ({texts[position - 1]!r}); pass a {what}, e.g. {example}")
    return stripped
