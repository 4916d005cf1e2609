"""Reading the files of the package's formats so that a damaged one is named, with what to do.

A truncated `model.safetensors` fails in safetensors with "incomplete metadata", a damaged `manifest.json` with a bare
`JSONDecodeError ... (char 443)`: neither says which file. Every loader of the package reads through these helpers,
and an unreadable file ends in one [`UnreadableFileError`] that names the file, the parser's complaint and the fix.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
from collections.abc import Iterator
from typing import Any

__all__ = [
    "MODEL_FILE_HINT",
    "REWRITE_HINT",
    "UnreadableFileError",
    "damaged_model_file",
    "read_json_file",
    "read_yaml_file",
    "reading_file",
    "reading_model_files",
]

REWRITE_HINT = "it is damaged or cut short (an interrupted write or copy?): restore it, or write it again"
"""What to do about an unreadable file when the caller knows nothing better."""

MODEL_FILE_HINT = (
    "it is damaged or cut short (an interrupted copy, download or save?): copy the model directory again, save the "
    "model again, or for a Hub download delete it from the cache and download it again"
)
"""What to do about an unreadable file of a saved model (config, weights, tokenizer)."""


class UnreadableFileError(ValueError):
    """A file that is there but cannot be parsed; the message is one line naming it, the parser's complaint and the
    fix."""


def _parse_errors() -> tuple[type[BaseException], ...]:
    """What a parser raises on a damaged file (JSON, YAML, safetensors, numpy, Arrow and Parquet, faiss)."""
    import yaml
    from safetensors import SafetensorError

    return ValueError, EOFError, OSError, RuntimeError, KeyError, yaml.YAMLError, SafetensorError


_NAMED_ALREADY = (FileNotFoundError, IsADirectoryError, PermissionError, UnreadableFileError)
"""Errors that name their file (or were made here): passed through as they are."""


def _describe(path: str | os.PathLike, error: BaseException, fix: str) -> str:
    complaint = " ".join(str(error).split()) or "no detail"
    return f"{os.fspath(path)} cannot be read ({type(error).__name__}: {complaint}); {fix}."


@contextlib.contextmanager
def reading_file(path: str | os.PathLike, fix: str = REWRITE_HINT) -> Iterator[None]:
    r"""
    Turn the parse error of the code inside into an [`UnreadableFileError`] naming `path`. Put only the reading of
    that one file inside: every error of the listed kinds is blamed on it.

    Args:
        path (`str` or `os.PathLike`): The file (or the folder of one dataset) being read.
        fix (`str`, defaults to [`REWRITE_HINT`]): What to do, e.g. `"rebuild the index (realm-hf build-index)"`.
    """
    try:
        yield
    except _NAMED_ALREADY:
        raise
    except _parse_errors() as error:
        raise UnreadableFileError(_describe(path, error, fix)) from error


def read_json_file(path: str | os.PathLike, fix: str = REWRITE_HINT) -> Any:
    """The parsed JSON of `path`; an [`UnreadableFileError`] naming it when it is not UTF-8 JSON."""
    with reading_file(path, fix), open(path, encoding="utf-8") as f:
        return json.load(f)


def read_yaml_file(path: str | os.PathLike, fix: str = "correct the YAML (one `name: value` per line)") -> Any:
    """The parsed YAML of `path` (`yaml.safe_load`); an [`UnreadableFileError`] naming it when it does not parse."""
    import yaml

    with reading_file(path, fix), open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def damaged_model_file(directory: str | os.PathLike) -> tuple[str, BaseException] | None:
    r"""
    The first JSON or safetensors file of a saved model directory (its sub-folders included) that does not parse,
    with the parser's error; None when every one parses (or `directory` is not a local directory).
    """
    from safetensors import safe_open

    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        return None
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "**", "*.json"), recursive=True)):
        try:
            read_json_file(path)
        except UnreadableFileError as error:
            return path, error.__cause__
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "**", "*.safetensors"), recursive=True)):
        try:
            with safe_open(path, framework="pt") as f:
                for name in f.keys():  # the header parses; a tensor past the end of a cut file does not
                    f.get_slice(name)
            if os.path.getsize(path) < _safetensors_end(path):
                raise EOFError(f"the file ends before its last tensor ({os.path.getsize(path)} bytes)")
        except _parse_errors() as error:
            return path, error
    return None


def _safetensors_end(path: str) -> int:
    """The byte size a safetensors file must have: its 8-byte header length, the header, and the last tensor's end."""
    with open(path, "rb") as f:
        header_size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_size))
    ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
    return 8 + header_size + max(ends, default=0)


@contextlib.contextmanager
def reading_model_files(name_or_path: str | os.PathLike | None, fix: str = REWRITE_HINT) -> Iterator[None]:
    r"""
    Around a `from_pretrained` of a local directory: when loading fails and a JSON or safetensors file of the
    directory does not parse, an [`UnreadableFileError`] naming that file (transformers and safetensors name
    neither a truncated weights file nor, always, a damaged config). Other failures pass through unchanged.

    Args:
        name_or_path (`str` or `os.PathLike`, *optional*): What `from_pretrained` was given.
        fix (`str`, defaults to [`REWRITE_HINT`]): What to do about a damaged file.
    """
    try:
        yield
    except UnreadableFileError:
        raise
    except Exception as error:
        damaged = damaged_model_file(name_or_path) if name_or_path is not None else None
        if damaged is None:
            raise
        path, cause = damaged
        raise UnreadableFileError(_describe(path, cause, fix)) from error
