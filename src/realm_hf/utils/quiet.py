"""Keep terminal output to what a user needs: no per-checkpoint progress bars, no alarming load reports for the
weights we know are absent, no faiss loader chatter, and log lines that never land on a progress bar's line.

Each helper is scoped: a context manager that restores what it changed, or a logger level set only when the user has
not set one. Nothing here changes the output of code outside realm_hf's own calls.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

QUIET_TRANSFORMERS_BARS = ("Loading weights", "Writing model shards")
"""`desc` of the transformers 5 progress bars shown once per checkpoint read or written (a demo shows a dozen)."""
TRANSFORMERS_LOAD_LOGGER = "transformers.modeling_utils"
"""The logger of transformers' load report ("LOAD REPORT", "This checkpoint seem corrupted ...")."""
FAISS_LOADER_LOGGER = "faiss.loader"
"""faiss logs every instruction-set build it tries ("Loading faiss with AVX2 support", ModuleNotFoundError) at INFO."""


class _SharedScope:
    """A process-wide change made when the first of any number of (nested or concurrent) blocks enters and undone
    when the last one exits: `undo(apply())`."""

    def __init__(self, apply: Callable[[], Any], undo: Callable[[Any], None]) -> None:
        self._apply, self._undo = apply, undo
        self._lock = threading.Lock()
        self._depth = 0
        self._saved: Any = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                self._saved = self._apply()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    self._undo(self._saved)
                    self._saved = None


# ------------------------------------------------------------------------------ transformers' checkpoint bars
def _hide_checkpoint_bars() -> Any:
    from transformers.utils import logging as transformers_logging

    previous: list[Any] = [None]

    def hook(factory: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if kwargs.get("desc") in QUIET_TRANSFORMERS_BARS:
            return transformers_logging.EmptyTqdm(*args, **kwargs)
        return factory(*args, **kwargs) if previous[0] is None else previous[0](factory, args, kwargs)

    previous[0] = transformers_logging.set_tqdm_hook(hook)
    return previous[0]


def _restore_checkpoint_bars(previous_hook: Any) -> None:
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_tqdm_hook(previous_hook)


_transformers_bars_hidden = _SharedScope(_hide_checkpoint_bars, _restore_checkpoint_bars)


# ----------------------------------------------------------------------------------------- datasets' bars
def _hide_datasets_bars() -> bool:
    import datasets

    enabled = datasets.is_progress_bar_enabled()
    if enabled:
        datasets.disable_progress_bars()
    return enabled


def _restore_datasets_bars(were_enabled: bool) -> None:
    import datasets

    if were_enabled:
        datasets.enable_progress_bars()


without_datasets_bars = _SharedScope(_hide_datasets_bars, _restore_datasets_bars)
"""Context manager: no `datasets` progress bars while the block runs (for quick steps whose result is logged)."""


@contextmanager
def quiet_checkpoint_io() -> Iterator[None]:
    r"""
    Hide the progress bars of reading and writing a checkpoint while the block runs: transformers' "Loading weights"
    and "Writing model shards" bars and `datasets`' "Saving the dataset" bars. Download bars of the Hub stay, and so
    do transformers' other bars. Re-entrant and thread-safe (the bars stay hidden while any thread is inside);
    everything is restored when the last block exits.
    """
    with _transformers_bars_hidden(), without_datasets_bars():
        yield


# ------------------------------------------------------------------------------------- transformers' load report
def _errors_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR


def _filter_load_report() -> None:
    logging.getLogger(TRANSFORMERS_LOAD_LOGGER).addFilter(_errors_only)


def _unfilter_load_report(_: None) -> None:
    logging.getLogger(TRANSFORMERS_LOAD_LOGGER).removeFilter(_errors_only)


without_load_report = _SharedScope(_filter_load_report, _unfilter_load_report)
"""Context manager: silence transformers' load report and its tied-weights warning while the block runs, for a
load whose missing and unexpected keys the caller checks and reports itself (`output_loading_info=True`). Errors
still show. A filter, not a level: transformers runs extra checks (and warns about tensor-parallel plans) when the
level of its loading logger is WARNING or above."""


# ------------------------------------------------------------------------------------------------- faiss, logs
def quiet_faiss_loader() -> None:
    """Keep faiss' loader at WARNING (call before `import faiss`), unless the user has set its level."""
    logger = logging.getLogger(FAISS_LOADER_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.WARNING)


BM25S_LOGGER = "bm25s"
"""bm25s sets its logger to DEBUG when imported (0.2), so its debug lines ("Building index from IDs objects") pass
the handlers of any program that logs at INFO."""


def unforce_bm25s_debug() -> None:
    """Let bm25s' logger inherit its level again (call right after `import bm25s`) when it is at the DEBUG level
    bm25s itself forces on import; a level set later by the user stays."""
    logger = logging.getLogger(BM25S_LOGGER)
    if logger.level == logging.DEBUG:
        logger.setLevel(logging.NOTSET)


DEEPSPEED_CPU_NOTICE = ("DeepSpeed", "Setting accelerator to CPU")
"""(logger, start of the message) of DeepSpeed's warning when it finds no GPU. accelerate imports DeepSpeed whenever
it is installed (`extract_model_from_parallel`, which every `save_pretrained` and the Trainer call), so every run of
a machine without a GPU printed it, whether or not it asked for DeepSpeed. The logger does not propagate: the filter
sits on it, not on the CLI's handler."""


def _not_deepspeed_cpu_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(DEEPSPEED_CPU_NOTICE[1])


def hide_deepspeed_cpu_notice() -> None:
    """Drop DeepSpeed's "Setting accelerator to CPU" warning (`DEEPSPEED_CPU_NOTICE`) and only it, whenever DeepSpeed
    is imported (call it before); DeepSpeed's other lines still show, and `realm-hf -v` shows this one too."""
    logger = logging.getLogger(DEEPSPEED_CPU_NOTICE[0])
    if _not_deepspeed_cpu_notice not in logger.filters:
        logger.addFilter(_not_deepspeed_cpu_notice)


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


# ------------------------------------------------------------------------------------------- the log itself
LOG_FORMAT = "%(asctime)s %(name)s: %(message)s"


SHARED_TENSOR_NOTICE = ("accelerate.utils.other", "Removed shared tensor ")
"""(logger, words of the message; accelerate prefixes "[RANK n] ") of accelerate's warning at every checkpoint (`save_state`) of a model with tied weights:
REALM's masked-LM decoder is the word embeddings, safetensors keeps one copy of them, and loading ties them again."""


def _not_shared_tensor_notice(record: logging.LogRecord) -> bool:
    logger_name, words = SHARED_TENSOR_NOTICE
    return not (record.name == logger_name and words in record.getMessage())


def configure_logging(verbose: bool = False) -> None:
    """
    The log of a realm_hf command or example script: realm_hf's own INFO lines, other libraries' only from WARNING
    (`datasets` announces at INFO which of JAX / TensorFlow it found, accelerate its set-up), each line on its own
    under the progress bars ([`ProgressBarSafeHandler`]), without accelerate's "Removed shared tensor" notice of every
    checkpoint (`SHARED_TENSOR_NOTICE`). `verbose`: everything from DEBUG, that notice too. Like `logging.basicConfig`,
    it leaves the logging of a program that configured its own (a root logger with handlers) as it is.

    Args:
        verbose (`bool`, *optional*, defaults to `False`): DEBUG lines of every library too.
    """
    if logging.getLogger().handlers:
        return
    handler = ProgressBarSafeHandler()
    if not verbose:
        handler.addFilter(_not_shared_tensor_notice)
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format=LOG_FORMAT, handlers=[handler])
    if not verbose and logging.getLogger("realm_hf").level == logging.NOTSET:
        logging.getLogger("realm_hf").setLevel(logging.INFO)
