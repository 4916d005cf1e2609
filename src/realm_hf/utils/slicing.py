"""Row slices on file paths: `"file.jsonl[1000:]"`, the `datasets` split-slicing syntax written after a path.

A helper of its own (no torch, no datasets) because the QA readers (`realm_hf.data.openqa`) and the model cards
(`realm_hf.hub.cards`, which name the evaluated rows of a metrics file) both read it.
"""

from __future__ import annotations

import re


__all__ = ["split_slice"]

_SLICE_PATTERN = re.compile(r"^(?P<path>.+?)\[(?P<start>\d*):(?P<stop>\d*)\]$")


def split_slice(part: str) -> tuple[str, slice]:
    r"""
    Split `"file.jsonl[1000:]"` (the `datasets` split-slicing syntax on a path) into the path and `slice(1000, None)`;
    a path without brackets gets `slice(None)`. Used to hold questions out: `nq-dev.jsonl[:1000]` for evaluation and
    `nq-dev.jsonl[1000:]` for training.

    Args:
        part (`str`): A path, optionally followed by `[start:stop]` (non-negative integers, either may be empty).

    Returns:
        `tuple[str, slice]`: the path and the row slice.

    Raises:
        `ValueError`: for brackets that are not a `[start:stop]` slice of non-negative integers.
    """
    match = _SLICE_PATTERN.match(part)
    if match is None:
        if part.endswith("]") and "[" in part:
            raise ValueError(f"Bad slice in {part!r}: use file.jsonl[start:stop] with non-negative integers.")
        return part, slice(None)
    start, stop = (int(match[name]) if match[name] else None for name in ("start", "stop"))
    return match["path"], slice(start, stop)
