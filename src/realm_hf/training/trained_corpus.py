"""The corpus a model was trained on: recorded in what pre-training, ICT and fine-tuning save
(`RealmRetrieverConfig.corpus`), and taken back by a fine-tuning started from that model without `--corpus` (or refused
in one line naming it).

A record holds no path of the machine that wrote it (a published config would ship it): `name` is the corpus as given
when it lies under the working directory (a relative hint such as `my_articles.jsonl`), else its file name, or
`"embedded"`; with `max_articles` (the articles the run read) and `blocks` (its index's size).
"""

from __future__ import annotations

import glob
import logging
import os
from typing import Any

from ..utils.options import UsageError

logger = logging.getLogger(__name__)

__all__ = ["corpus_hint", "corpus_record", "describe_corpus", "recorded_corpus_path", "refuse_missing_corpus"]

EMBEDDED = "embedded"
"""The packaged demo corpus (`realm_hf.corpus.embedded`): what a start with no corpus record indexes by default."""


def corpus_hint(corpus: str) -> str:
    r"""
    What a saved config records of `corpus` (one source or comma-separated ones): each part as given when it is
    `"embedded"` or a path under the working directory (relative to it), else its file name only.
    """
    parts = []
    for part in str(corpus).split(","):
        part = part.strip()
        if part == EMBEDDED:
            parts.append(part)
            continue
        relative = os.path.relpath(os.path.abspath(part))
        parts.append(os.path.basename(os.path.normpath(part)) if relative.startswith(os.pardir) else relative)
    return ",".join(parts)


def corpus_record(corpus: str, max_articles: int | None, num_blocks: int) -> dict[str, Any]:
    r"""
    The record of the corpus an index was built over, for `RealmRetrieverConfig.corpus`.

    Args:
        corpus (`str`): The corpus as the run was given it (`--corpus`).
        max_articles (`int`, *optional*): The articles of it the run read (`--max_articles`; None: all).
        num_blocks (`int`): The blocks of the index built over it (ICT, which builds none: the blocks it learned from).

    Returns:
        `dict`: `name` ([`corpus_hint`]), `max_articles` and `blocks`.
    """
    return {"name": corpus_hint(corpus), "max_articles": max_articles, "blocks": int(num_blocks)}


def describe_corpus(record: dict[str, Any]) -> str:
    """`'NAME' (N blocks[, its first M articles])`, for log lines and messages."""
    first = f", its first {record['max_articles']} articles" if record.get("max_articles") else ""
    return f"{record.get('name')!r} ({record.get('blocks')} blocks{first})"


def recorded_corpus_path(record: dict[str, Any]) -> str | None:
    """The recorded corpus when it is here (every part found from the working directory, or `"embedded"`), else
    None."""
    name = record.get("name")
    if not name:
        return None
    for part in name.split(","):
        if part != EMBEDDED and not (os.path.exists(part) or glob.glob(part)):
            return None
    return name


def refuse_missing_corpus(model: str, record: dict[str, Any]) -> UsageError:
    """The one-line refusal of a fine-tuning without `--corpus` whose model's corpus is not here."""
    return UsageError(
        f"--model {model} was trained on the corpus {describe_corpus(record)}, which is not in this folder, and no "
        f"--corpus was given: pass that corpus (or the one to answer from) with --corpus PATH."
    )
