"""Pieces of the one-line messages the package logs and raises."""

from __future__ import annotations

__all__ = ["EXCERPT_CHARS", "excerpt"]

EXCERPT_CHARS = 80
"""How much of a user's text (a question, a text to fill) a message echoes."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """`text` quoted (`repr`) as a message echoes it: its first `limit` characters and `…` when it is longer, so a
    2,000-word question does not fill the terminal."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}… ({len(text):,} characters)"
