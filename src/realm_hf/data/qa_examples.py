"""Open-QA examples: `{"id", "question", "answers": [..], "answer_format": "text" | "regex"}` dicts, read from JSONL
files (the format of `../shared/data/qa`; regex answers are CuratedTrec's), `datasets` datasets or lists of dicts, and
checked one by one."""

from __future__ import annotations

import glob
import gzip
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..utils.slicing import split_slice

__all__ = ["ANSWER_FORMATS", "load_qa_examples", "normalize_qa_example", "resolve_qa_files"]

ANSWER_FORMATS = ("text", "regex")


def _as_answers(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):  # SQuAD-style {"text": [...], "answer_start": [...]}
        if "text" not in value:
            raise ValueError(f"{where}: answers given as a dict need a 'text' entry, got keys {sorted(value)}.")
        return _as_answers(value["text"], where)
    if isinstance(value, (list, tuple, np.ndarray)):
        answers = [a for a in list(value)]
        bad = [a for a in answers if not isinstance(a, str)]
        if bad:
            raise ValueError(f"{where}: every answer must be a string, got {bad[:3]!r}.")
        return answers
    raise ValueError(f"{where}: answers must be a list of strings (or one string), got {type(value).__name__}.")


def normalize_qa_example(
    example: Any,
    index: int = 0,
    answer_format: str | None = None,
    question_column: str = "question",
    answers_column: str = "answers",
    require_answers: bool = False,
) -> dict[str, Any]:
    r"""
    Check one QA example and bring it to `{"id", "question", "answers", "answer_format"}`.

    Args:
        example (`dict` or `str`): A dict with a question (and answers), or a bare question string.
        index (`int`): Position of the example, for error messages and as its default `id`.
        answer_format (`str`, *optional*): Format for examples without an `answer_format` field (default `"text"`).
        question_column, answers_column (`str`): Field names; `answers_column` falls back to `"answer"`
            (the `nq_open` column name) when absent.
        require_answers (`bool`): Raise when the example has no reference answer (training and evaluation need one).

    Raises:
        `ValueError`: on a missing, `None`, non-string or empty question, a bad answer list or format.
    """
    if isinstance(example, str):
        example = {question_column: example}
    if not isinstance(example, Mapping):
        raise ValueError(f"QA example {index} must be a dict or a question string, got {type(example).__name__}.")
    where = f"QA example {index} (id={example.get('id', index)!r})"
    question = example.get(question_column)
    if question is None:
        raise ValueError(f"{where} has no question (`{question_column}` is missing or None).")
    if not isinstance(question, str):
        raise ValueError(f"{where}: the question must be a string, got {type(question).__name__}.")
    if not question.strip():
        raise ValueError(f"{where} has an empty question; drop it from the dataset.")
    column = answers_column if answers_column in example or "answer" not in example else "answer"
    answers = _as_answers(example.get(column), where)
    if require_answers and not answers:
        raise ValueError(f"{where} has no reference answers (`{answers_column}`); training and evaluation need them.")
    fmt = example.get("answer_format") or answer_format or "text"
    if fmt not in ANSWER_FORMATS:
        raise ValueError(f"{where}: answer_format must be 'text' or 'regex', got {fmt!r}.")
    example_id = example.get("id", index)
    return {"id": example_id if example_id is not None else index, "question": question.strip(), "answers": answers,
            "answer_format": fmt}


def resolve_qa_files(source: str | os.PathLike | Sequence[str | os.PathLike]) -> list[tuple[str, slice]]:
    """The QA files of `source` (paths or globs, comma-separated, each with an optional `[start:stop]` row slice) and
    their row slices; `FileNotFoundError` names a part that matches no file."""
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    files: list[tuple[str, slice]] = []
    for item in items:
        for part in os.fspath(item).split(","):
            part = part.strip()
            if not part:
                continue
            part, rows = split_slice(part)
            matches = sorted(glob.glob(part)) if glob.has_magic(part) else ([part] if os.path.isfile(part) else [])
            if not matches:
                raise FileNotFoundError(f"No QA file at {part} (expected JSONL or JSONL.gz with question/answers).")
            files.extend((match, rows) for match in matches)
    if not files:
        raise FileNotFoundError(f"No QA file in {source!r}.")
    return files


def _read_jsonl(path: str, limit: int | None, rows_slice: slice = slice(None)) -> list[dict]:
    """The JSON rows `rows_slice` of a JSONL file (blank lines not counted), at most `limit` of them."""
    opener = gzip.open if path.endswith(".gz") else open
    start, stop = rows_slice.start or 0, rows_slice.stop
    rows, seen = [], 0
    with opener(path, "rt", encoding="utf-8") as f:
        for line_number, line in enumerate(f, 1):
            if (limit is not None and len(rows) >= limit) or (stop is not None and seen >= stop):
                break
            if not line.strip():
                continue
            seen += 1
            if seen <= start:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}:{line_number} is not valid JSON ({error}).") from error
    return rows


def load_qa_examples(
    source: Any,
    max_questions: int | None = None,
    split: str | None = None,
    answer_format: str | None = None,
    question_column: str = "question",
    answers_column: str = "answers",
    require_answers: bool = True,
) -> list[dict[str, Any]]:
    r"""
    Load Open-QA examples as a list of `{"id", "question", "answers", "answer_format"}` dicts.

    Args:
        source: A JSONL / JSONL.gz file, a glob, a comma-separated list of those, or a list of paths (the format of
            `../shared/data/qa`), each optionally sliced like a `datasets` split: `nq-dev.jsonl[:1000]`,
            `nq-dev.jsonl[1000:]`; a `datasets.Dataset` (or a `DatasetDict` with `split`) with question and answers
            columns; or a list of dicts.
        max_questions (`int`, *optional*): Keep only the first N questions.
        split (`str`, *optional*): Split of a `DatasetDict`.
        answer_format (`str`, *optional*): `"text"` or `"regex"` for examples without an `answer_format` field
            (default `"text"`; CuratedTrec's JSONL marks each example `"regex"`).
        question_column, answers_column (`str`): Column names of a `datasets` dataset (`"answer"` is also accepted
            for the answers, as in `nq_open`).
        require_answers (`bool`, defaults to `True`): Raise on an example without reference answers.

    Raises:
        `ValueError`: naming the first bad example (missing / empty question, bad answers or format).
        `FileNotFoundError`: when a path matches no file.
    """
    if max_questions is not None and max_questions < 1:
        raise ValueError(f"max_questions must be positive or None, got {max_questions}.")
    try:
        import datasets
    except ImportError:  # pragma: no cover - datasets is a dependency
        datasets = None
    if datasets is not None and isinstance(source, datasets.DatasetDict):
        if split is None:
            raise ValueError(f"Got a DatasetDict with splits {list(source)}; pass split=... .")
        source = source[split]
    if datasets is not None and isinstance(source, datasets.Dataset):
        if max_questions is not None:
            source = source.select(range(min(max_questions, len(source))))
        rows = source.to_list()
    elif isinstance(source, (str, os.PathLike)) or (
        isinstance(source, Sequence) and source and all(isinstance(s, (str, os.PathLike)) for s in source)
    ):
        rows = []
        for path, rows_slice in resolve_qa_files(source):
            left = None if max_questions is None else max_questions - len(rows)
            if left is not None and left <= 0:
                break
            rows.extend(_read_jsonl(path, left, rows_slice))
    elif isinstance(source, Sequence):
        rows = list(source)[:max_questions] if max_questions is not None else list(source)
    else:
        raise ValueError(
            f"Cannot load QA examples from {type(source).__name__}; pass JSONL paths, a datasets.Dataset or a list of "
            "dicts."
        )
    examples = [
        normalize_qa_example(row, i, answer_format, question_column, answers_column, require_answers)
        for i, row in enumerate(rows)
    ]
    if not examples:
        raise ValueError(f"No QA examples in {source!r}.")
    return examples
