"""The index builder that the asynchronous refresher runs: document-tower snapshot -> fresh `RealmIndex`.

A module-level function (the refresher starts it by import path in a spawned process); everything it needs
arrives as a state dict plus JSON-able paths.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import datasets
import torch

from ..checkpoints.parts import CheckpointSource, find_retriever, load_tokenizer_from
from ..index import RealmIndex
from ..index.refresh.options import builder_defaults
from ..index.sharded import build_shard
from ..utils.files import reading_file
from ..utils.precision import autocast_dtype
from .arguments import refuse_ignored_refresh_settings

logger = logging.getLogger(__name__)


def build_index_from_snapshot(
    state_dict: dict[str, torch.Tensor],
    step: int,
    retriever_dir: str,
    blocks_dir: str,
    tokenizer_dir: str,
    index_type: str = "Flat",
    batch_size: int = 64,
    dtype: str | None = "bfloat16",
    device: str | None = None,
    shard: list[int] | None = None,
) -> RealmIndex:
    """Rebuild the document tower of the retriever saved at `retriever_dir` with `state_dict` and index the blocks.

    Args:
        state_dict: `RealmRetriever.document_embedder.state_dict()` at the snapshot step.
        step: The training step of the snapshot (recorded in the manifest).
        retriever_dir: A saved `RealmRetriever` (architecture and the weights not in the snapshot).
        blocks_dir: The blocks dataset (`datasets.Dataset.save_to_disk`).
        tokenizer_dir: The tokenizer (for the pad id).
        index_type: faiss factory string or `"torch-exact"`.
        batch_size: Blocks per forward.
        dtype: Autocast dtype name (`"bfloat16"`, `"float16"`, or None for fp32).
        device: Where the document tower embeds the corpus (`"cpu"`, `"cuda"`, `"cuda:1"`; None: CPU). The index
            returned lives on the CPU (the trainer moves it on load); `index.build_info["device"]` says where the
            tower ran, for the refresher's report.
        shard: `[rank, world_size]`: embed and index only that rank's contiguous shard of the blocks (a sharded
            index, see [`~realm_hf.index.ShardedRealmIndex`]); None: all of them.
    """
    target = torch.device(device or "cpu")
    if target.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"The index builder was given device {device!r} but CUDA is not available here; use 'cpu'.")
    retriever, _ = find_retriever(retriever_dir, CheckpointSource())
    retriever.document_embedder.load_state_dict(state_dict)
    retriever.to(target)
    with reading_file(blocks_dir):
        blocks = datasets.load_from_disk(blocks_dir)
    tokenizer = load_tokenizer_from([tokenizer_dir], "index builder's retriever")
    autocast = autocast_dtype(dtype)
    used = str(next(retriever.document_embedder.parameters()).device)
    logger.info("Embedding the corpus on %s with %d torch threads", used, torch.get_num_threads())
    # the tower embeds on `target`; the search structure stays on the CPU (the trainer moves it on load), so a
    # builder on a GPU neither copies a faiss index there nor warns that faiss-cpu has no GPU
    if shard is not None:
        pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        index = build_shard(
            blocks, retriever, int(shard[0]), int(shard[1]), index_type=index_type, batch_size=batch_size,
            dtype=autocast, pad_token_id=pad_token_id, step=step,
        )
    else:
        index = RealmIndex.build(
            blocks, retriever, tokenizer=tokenizer, index_type=index_type, batch_size=batch_size, dtype=autocast,
            step=step,
        )
    index.build_info = {"device": used}
    return index


DEFAULT_TIME_SHARE = 0.1
"""The paced builder's share of the trainer's time (`refresh_mode="paced"`, the default on the CPU): the trainer runs
about that much slower while a build is in flight, and a build takes its CPU time / the share, so a smaller share
delivers staler indexes (benchmarks/results/refresh-paced-0.1.md, refresh-paced-0.15.md)."""


@dataclass(frozen=True)
class RefreshResources:
    """Where and how hard the background builder runs, and the trainer's torch threads while it does.

    Attributes:
        device: The builder's device (`"cpu"`, `"cuda:0"`, ...).
        num_threads: torch threads of the builder process (None: torch's default, all cores).
        niceness: `os.nice` increment of the builder process.
        trainer_threads: torch threads of the trainer while a build runs (None: unchanged).
        mode: `"process"`, `"thread"` or `"paced"` (a thread that runs only between steps, see `index.pacing`).
        time_share: The paced builder's share of the trainer's time (None unless `mode` is `"paced"`).
    """

    device: str
    num_threads: int | None
    niceness: int
    trainer_threads: int | None
    mode: str = "process"
    time_share: float | None = None

    @property
    def refresher_mode(self) -> str:
        """`IndexRefresher`'s `mode`: a paced builder is a thread."""
        return "thread" if self.mode == "paced" else self.mode


def refresh_resources(
    trainer_device: str | torch.device,
    device: str | None = None,
    num_threads: int | None = None,
    niceness: int | None = None,
    trainer_threads: int | None = None,
    cores: int | None = None,
    mode: str | None = None,
    time_share: float | None = None,
) -> RefreshResources:
    r"""
    Resolve the builder's device and resources: from the pre-training arguments (`refresh_device`, `refresh_mode`,
    `refresh_time_share`), the rest fixed per mode ([`~realm_hf.index.refresh.options.builder_defaults`]) unless a
    caller from Python sets them (`num_threads`, `niceness`, `trainer_threads`: e.g. `benchmarks/bench_refresh.py`'s
    half/half partition of the cores, passed to [`RealmPretrainer`] as `refresh_resources`).

    Defaults: the builder runs on the trainer's device when that is a GPU (embedding there is tens of times faster
    than on the CPU; give `"cuda:1"` for a GPU of its own), in a spawned process with 1 CPU thread (it feeds the GPU)
    at normal priority. On the CPU the builder shares the trainer's cores: by default it is paced (a thread that runs
    only between steps, alone on the cores, for `DEFAULT_TIME_SHARE` of the trainer's time), which bounds the
    trainer's slowdown and still delivers indexes; a builder process beside the trainer either oversubscribes the
    cores (all threads: the trainer's steps take several times as long while it builds) or, at 1 thread and niceness
    19, gets too little CPU to finish its builds (benchmarks/results/refresh.md, refresh-paced.md). `mode="process"`
    on the CPU keeps that niced 1-thread builder.

    Args:
        trainer_device: The trainer's device (`accelerator.device`).
        device: `refresh_device`: `"cpu"`, `"cuda"`, `"cuda:1"`, or None for the default above.
        num_threads: Builder torch threads (None: the mode's default, 1).
        niceness: `os.nice` increment of a builder process, `mode="process"` only (None: the mode's default).
        trainer_threads: Trainer threads while a builder process builds, `mode="process"` only (None: unchanged).
        cores: CPU cores (defaults to `os.cpu_count()`).
        mode: `refresh_mode`: `"process"`, `"thread"`, `"paced"`, or None for the default above.
        time_share: `refresh_time_share` of a paced builder (None: `DEFAULT_TIME_SHARE`).

    Raises:
        `ValueError`: for a device that is neither CPU nor CUDA, or CUDA asked for where there is none; a setting
        the resolved mode ignores (`niceness` or `trainer_threads` outside process mode;
        [`refuse_ignored_refresh_settings`] for `time_share` outside paced mode).
    """
    trainer = torch.device(trainer_device)
    target = torch.device(device) if device else (trainer if trainer.type == "cuda" else torch.device("cpu"))
    if target.type not in ("cpu", "cuda"):
        raise ValueError(f"refresh_device must be 'cpu', 'cuda' or 'cuda:<n>', got {device!r}.")
    if target.type == "cuda" and device and not torch.cuda.is_available():
        raise ValueError(f"refresh_device={device!r} but CUDA is not available here; use --refresh_device cpu.")
    if target.type == "cuda" and target.index is None:
        target = torch.device("cuda", trainer.index if trainer.type == "cuda" and trainer.index is not None else 0)
    on_cpu = target.type == "cpu"
    cores = cores or os.cpu_count() or 1
    mode = mode or ("paced" if on_cpu else "process")  # values checked by PretrainingArguments
    refuse_ignored_refresh_settings(mode, time_share)
    for name, value in (("niceness", niceness), ("trainer_threads", trainer_threads)):
        if value is not None and mode != "process":
            raise ValueError(
                f"{name}={value} sets a builder process's resources, but the builder runs in {mode} mode: pass "
                f"mode='process', or leave {name} out."
            )
    defaults = builder_defaults(mode, on_cpu)
    return RefreshResources(
        device=str(target),
        num_threads=num_threads if num_threads is not None else defaults["num_threads"],
        niceness=niceness if niceness is not None else defaults["niceness"],
        trainer_threads=defaults["trainer_threads"] if trainer_threads is None else max(1, min(trainer_threads, cores)),
        mode=mode,
        time_share=(time_share or DEFAULT_TIME_SHARE) if mode == "paced" else None,
    )
