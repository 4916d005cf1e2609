"""When to refresh the index during training, by step: a fixed period or Atlas-style ranges of periods."""

from __future__ import annotations

import re

__all__ = ["RefreshSchedule"]

_SEGMENT = re.compile(r"^\s*(\d+)\s*-\s*(\d*)\s*:\s*(\d+)\s*$")


class RefreshSchedule:
    r"""
    When to refresh the index, by training step.

    Args:
        spec (`str` or `int`): `"500"` (or `500`): every 500 steps (steps 500, 1000, ...). Atlas-style ranges
            `"0-1000:100,1000-:500"`: every 100 steps in `[0, 1000)`, then every 500 steps from 1000 on (an empty
            end is open). `"0"`, `""` or `"none"`: never. Step 0 never triggers a refresh (the initial index is
            built before training).
    """

    def __init__(self, spec: str | int) -> None:
        self.spec = str(spec).strip()
        self.segments: list[tuple[int, int | None, int]] = []  # (start, stop or None, every)
        if self.spec.lower() in ("", "0", "none", "never"):
            return
        if self.spec.isdigit():
            self.segments = [(0, None, int(self.spec))]
            return
        for part in self.spec.split(","):
            match = _SEGMENT.match(part)
            if match is None or int(match.group(3)) <= 0:
                raise ValueError(
                    f"Cannot parse refresh schedule {self.spec!r} at {part!r}; use '500' or "
                    "'0-1000:100,1000-:500' (start-end:every, with an empty end for 'onwards')."
                )
            start, stop = int(match.group(1)), (int(match.group(2)) if match.group(2) else None)
            if stop is not None and stop <= start:
                raise ValueError(f"Refresh schedule range {part!r} in {self.spec!r} ends before it starts.")
            self.segments.append((start, stop, int(match.group(3))))
        self.segments.sort()
        for (_, stop, _), (next_start, _, _) in zip(self.segments, self.segments[1:]):
            if stop is None or stop > next_start:
                raise ValueError(f"Refresh schedule {self.spec!r} has overlapping ranges.")

    def should_refresh(self, step: int) -> bool:
        """Whether the index should be refreshed at `step`."""
        if step <= 0:
            return False
        for start, stop, every in self.segments:
            if start <= step and (stop is None or step < stop):
                return (step - start) % every == 0
        return False

    def __repr__(self) -> str:
        return f"RefreshSchedule({self.spec!r})"
