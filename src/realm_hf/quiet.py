"""Keep terminal output to what a user needs: no per-checkpoint progress bars, no alarming load reports for the
weights we know are absent, no faiss loader chatter, and log lines that never land on a progress bar's line.

Each helper is scoped: a context manager that restores what it changed, or a logger level set only when the user has
not set one. Nothing here changes the output of code outside realm_hf's own load/save calls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

QUIET_TRANSFORMERS_BARS = ("Loading weights", "Writing model shards")
"""`desc` of the transformers 5 progress bars shown once per checkpoint read or written (a demo shows a dozen)."""
TRANSFORMERS_LOAD_LOGGER = "transformers.modeling_utils"
"""The logger of transformers' load report ("LOAD REPORT", "This checkpoint seem corrupted ...")."""
FAISS_LOADER_LOGGER = "faiss.loader"
"""faiss logs every instruction-set build it tries ("Loading faiss with AVX2 support", ModuleNotFoundError) at INFO."""

_lock = threading.Lock()
_depth = 0
_previous_hook: Any = None
_datasets_bars_were_enabled = False


def _quiet_bar_hook(factory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """transformers' tqdm hook: an empty bar for a checkpoint read/write, anything else as before."""
    if kwargs.get("desc") in QUIET_TRANSFORMERS_BARS:
        from transformers.utils.logging import EmptyTqdm

        return EmptyTqdm(*args, **kwargs)
    if _previous_hook is not None:
        return _previous_hook(factory, args, kwargs)
    return factory(*args, **kwargs)


@contextmanager
def quiet_checkpoint_io() -> Iterator[None]:
    r"""
    Hide the progress bars of reading and writing a checkpoint while the block runs: transformers' "Loading weights"
    and "Writing model shards" bars and `datasets`' "Saving the dataset" bars. Download bars of the Hub stay, and so
    do the bars of any other work. Re-entrant and thread-safe (the bars stay hidden while any thread is inside);
    everything is restored when the last block exits.
    """
    global _depth, _previous_hook, _datasets_bars_were_enabled
    import datasets
    from transformers.utils import logging as transformers_logging

    with _lock:
        if _depth == 0:
            _previous_hook = transformers_logging.set_tqdm_hook(_quiet_bar_hook)
            _datasets_bars_were_enabled = datasets.is_progress_bar_enabled()
            if _datasets_bars_were_enabled:
                datasets.disable_progress_bars()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                transformers_logging.set_tqdm_hook(_previous_hook)
                _previous_hook = None
                if _datasets_bars_were_enabled:
                    datasets.enable_progress_bars()


def _errors_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


_report_depth = 0


@contextmanager
def without_load_report() -> Iterator[None]:
    r"""
    Silence transformers' load report and its tied-weights warning while the block runs, for a load whose missing
    and unexpected keys the caller checks and reports itself (load with `output_loading_info=True`). Errors still
    show. Re-entrant and thread-safe, like [`quiet_checkpoint_io`].

    A filter, not a level: transformers runs extra checks (and warns about tensor-parallel plans) when the level of
    its loading logger is WARNING or above.
    """
    global _report_depth
    logger = logging.getLogger(TRANSFORMERS_LOAD_LOGGER)
    with _lock:
        if _report_depth == 0:
            logger.addFilter(_errors_only)
        _report_depth += 1
    try:
        yield
    finally:
        with _lock:
            _report_depth -= 1
            if _report_depth == 0:
                logger.removeFilter(_errors_only)


def quiet_faiss_loader() -> None:
    """Keep faiss' loader at WARNING (call before `import faiss`), unless the user has set its level."""
    logger = logging.getLogger(FAISS_LOADER_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)


class ProgressBarSafeHandler(logging.StreamHandler):
    r"""
    A `logging.StreamHandler` that writes each record through `tqdm.write`: an active progress bar is cleared, the
    record printed on a line of its own, and the bar redrawn below it (a plain handler appends the record to the
    bar's line). What the CLI installs.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm

            tqdm.write(self.format(record), file=self.stream)
            self.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)
