"""Load articles `{"id", "title", "text"}` from files, globs, directories, lists of dicts or datasets."""

from __future__ import annotations

import glob
import gzip
import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import datasets


logger = logging.getLogger(__name__)

ARTICLE_COLUMNS = ("id", "title", "text")
_JSON_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".json.gz")
_PARQUET_SUFFIXES = (".parquet",)
_DATASETS_JSON_LOGGER = "datasets.packaged_modules.json.json"
"""The logger of `datasets`' JSON builder, which logs a parse error before raising it without file or line."""


def _is_path(item: Any) -> bool:
    return isinstance(item, (str, os.PathLike))


def resolve_files(source: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    r"""
    Expand a file, a glob pattern, a directory (searched recursively for JSONL / JSONL.gz / JSON / Parquet), or a
    list of those into a sorted, de-duplicated list of files.

    Raises:
        `FileNotFoundError`: naming the source when it matches no file.
    """
    items = [source] if _is_path(source) else list(source)
    files: list[str] = []
    for item in items:
        path = os.fspath(item)
        if os.path.isdir(path):
            matches = [
                f
                for suffix in _JSON_SUFFIXES + _PARQUET_SUFFIXES
                for f in glob.glob(os.path.join(path, "**", f"*{suffix}"), recursive=True)
            ]
        elif glob.has_magic(path):
            matches = glob.glob(path, recursive=True)
        else:
            matches = [path] if os.path.isfile(path) else []
        if not matches:
            raise FileNotFoundError(f"No article files (.jsonl, .jsonl.gz, .json, .parquet) found at {path}.")
        files.extend(matches)
    return sorted(set(files))


def _load_files(files: list[str], cache_dir: str | None) -> datasets.Dataset:
    parquet = [f for f in files if f.endswith(_PARQUET_SUFFIXES)]
    json_files = [f for f in files if f.endswith(_JSON_SUFFIXES)]
    unknown = sorted(set(files) - set(parquet) - set(json_files))
    if unknown:
        raise ValueError(f"Unsupported article files {unknown[:5]}; use .jsonl, .jsonl.gz, .json or .parquet.")
    if parquet and json_files:
        raise ValueError("Mixing Parquet and JSON article files in one source is not supported; load them separately.")
    builder = "parquet" if parquet else "json"
    empty = [f for f in files if os.path.getsize(f) == 0]
    if empty:
        raise ValueError(f"{empty[0]} is empty (0 bytes), so it holds no article; add {{\"title\", \"text\"}} rows or "
                         "leave it out of the corpus.")
    blank = _first_blank_json([f for f in json_files if os.path.getsize(f) < 65536])  # whitespace only: cheap to see
    if blank is not None:
        raise ValueError(blank)
    json_logger = logging.getLogger(_DATASETS_JSON_LOGGER)
    json_logger.addFilter(_drop_json_parse_errors)  # a malformed row is reported below, with its file and line
    try:
        return datasets.load_dataset(builder, data_files=files, split="train", cache_dir=cache_dir)
    except StopIteration as error:  # `datasets` reads the first file's first rows for its schema: there are none
        blank = _first_blank_json(json_files)
        if blank is None:
            raise RuntimeError(f"datasets found no rows to read in {files[:5]}") from error
        raise ValueError(blank) from error
    except datasets.exceptions.DatasetGenerationError as error:
        bad = _first_malformed_json(json_files)
        if bad is None:
            raise
        raise ValueError(bad) from error
    finally:
        json_logger.removeFilter(_drop_json_parse_errors)


def _drop_json_parse_errors(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Failed to load JSON from file")


def _first_blank_json(files: list[str]) -> str | None:
    """'FILE holds only blank lines ...' for the first JSON(L) file of `files` without a row; None when all have."""
    for path in files:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            if not any(line.strip() for line in f):
                return (f"{path} holds no article (only blank lines); add {{\"title\", \"text\"}} rows or leave it "
                        "out of the corpus.")
    return None


def _json_reason(error: json.JSONDecodeError) -> str:
    """json's whole reason: its message and the column ('Invalid control character at: line 1 column 27' is cut)."""
    return f"{error.msg} column {error.colno}" if error.msg.endswith(" at") else f"{error.msg} at column {error.colno}"


def _first_malformed_json(files: list[str]) -> str | None:
    """'FILE:LINE is not valid JSON (...)' for the first unreadable row of JSON(L) `files`; None when all read."""
    for path in files:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            if ".jsonl" not in os.path.basename(path):  # one JSON document (an array of articles)
                try:
                    json.load(f)
                except json.JSONDecodeError as error:
                    reason = _json_reason(error)
                    return f"{path}:{error.lineno} is not valid JSON ({reason}); fix or remove the article."
                continue
            for line_number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as error:
                    return f"{path}:{line_number} is not valid JSON ({_json_reason(error)}); fix or remove the line."
                if not isinstance(row, dict):
                    return f"{path}:{line_number} is not a JSON object; each line must be one {{\"title\", \"text\"}} article."
    return None


def _first_row_without(column: str, files: list[str]) -> str | None:
    """'FILE:LINE' of the first JSONL row of `files` without a `column` value (absent or null); None if none is."""
    for path in files:
        if ".jsonl" not in os.path.basename(path):
            continue
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line_number, line in enumerate(f, 1):
                if line.strip() and json.loads(line).get(column) is None:
                    return f"{path}:{line_number}"
    return None


def _refuse_missing_values(articles: datasets.Dataset, source: Any, files: list[str]) -> None:
    """Refuse articles without a 'title' or 'text' (a row lacking the key is null in Arrow) rather than drop them."""
    for column in ("text", "title"):
        if articles._indices is None:  # the Arrow table is the dataset: its null count is free
            nulls = articles.data.column(column).null_count
        else:  # a selection of a larger table
            nulls = sum(value is None for value in articles[column])
        if not nulls:
            continue
        where = _first_row_without(column, files)
        if where is None:
            first = articles[column].index(None)
            where = f"article {first} (counting from 0) of {_describe(source)}"
        raise ValueError(
            f"{where} has no {column!r} ({nulls} article{'s' if nulls > 1 else ''} in all); give every article a "
            f"{column!r} string (\"\" for none) or remove it."
        )


def _is_string(feature: Any) -> bool:
    return isinstance(feature, datasets.Value) and feature.dtype in ("string", "large_string")


def _describe(source: Any) -> str:
    """`source` in a message: its path(s), or its kind."""
    if _is_path(source):
        return os.fspath(source)
    if isinstance(source, Sequence) and source and all(_is_path(s) for s in source):
        return ", ".join(os.fspath(s) for s in source)
    return f"the {type(source).__name__} given"


def load_articles(source: Any, cache_dir: str | None = None) -> datasets.Dataset:
    r"""
    Load articles into an Arrow-backed `datasets.Dataset` with string columns `id`, `title`, `text`.

    Args:
        source: One of
            - a path to a `.jsonl`, `.jsonl.gz`, `.json` or `.parquet` file, a glob pattern, a directory, or a list
              of paths;
            - a `datasets.Dataset`;
            - a list of dicts.
            Rows need `title` and `text`; `id` (any type, stored as a string) defaults to the row number.
        cache_dir (`str`, *optional*): Where `datasets` caches the Arrow files of file sources.

    Returns:
        `datasets.Dataset` with exactly the columns `id`, `title`, `text`.
    """
    loaded_from = None  # logged only when read from files: in-memory sources are checked, not loaded
    files: list[str] = []
    if isinstance(source, datasets.Dataset):
        articles = source
    elif isinstance(source, datasets.DatasetDict):
        raise ValueError(f"Got a DatasetDict with splits {list(source)}; pass one split, e.g. source['train'].")
    elif _is_path(source) or (isinstance(source, Sequence) and source and all(_is_path(s) for s in source)):
        files = resolve_files(source)
        articles = _load_files(files, cache_dir)
        loaded_from = _describe(source)
    elif isinstance(source, Sequence) and all(isinstance(row, Mapping) for row in source):
        articles = datasets.Dataset.from_list([dict(row) for row in source])
    else:
        raise TypeError(
            f"Cannot load articles from {type(source).__name__}; pass file paths, a glob, a directory, "
            "a datasets.Dataset or a list of {'id', 'title', 'text'} dicts."
        )
    missing = [name for name in ("title", "text") if name not in articles.column_names]
    if missing:
        raise ValueError(f"Articles need columns 'title' and 'text'; missing {missing} in {articles.column_names}.")
    not_text = {name: articles.features[name] for name in ("title", "text") if not _is_string(articles.features[name])}
    if not_text:
        raise ValueError(
            f"Article columns {sorted(not_text)} must hold strings, got {list(not_text.values())} in {_describe(source)}; "
            "give every row a text 'title' and 'text'."
        )
    _refuse_missing_values(articles, source, files)
    if "id" not in articles.column_names:
        articles = articles.add_column("id", [str(i) for i in range(len(articles))])
    articles = articles.select_columns(list(ARTICLE_COLUMNS))
    if articles.features["id"] != datasets.Value("string"):
        articles = articles.cast_column("id", datasets.Value("string"))
    if loaded_from is not None:
        logger.info("Loaded %d articles from %s", len(articles), loaded_from)
    return articles


def load_corpus_articles(source: Any, limit: int | None = None) -> datasets.Dataset:
    """The first `limit` articles of a corpus ([`load_articles`] sources); `"embedded"` is the packaged demo corpus
    (see `corpus.embedded`)."""
    if source == "embedded":
        from .embedded import load_embedded_corpus

        return datasets.Dataset.from_list(load_embedded_corpus(limit=limit))
    articles = load_articles(source)
    return articles if limit is None or limit >= len(articles) else articles.select(range(limit))
