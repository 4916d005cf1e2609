"""The Accelerator of a training run: the seed, the process group, the agreed mixed precision and the claim of the
output folder, made first thing by every trainer (through [`make_accelerator`])."""

from __future__ import annotations

import logging
import os

import torch
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from accelerate.utils import (
    DataLoaderConfiguration, DistributedDataParallelKwargs, broadcast_object_list, parse_flag_from_env, set_seed,
)

from ..registration import register_what_is_loaded
from ..utils.precision import resolve_mixed_precision
from .arguments import LoopArguments
from .output_dir import claim_output_dir
from .zero3 import load_models_whole

__all__ = ["make_accelerator"]

logger = logging.getLogger(__name__)


def make_accelerator(args: LoopArguments, find_unused_parameters: bool = False) -> Accelerator:
    """The Accelerator of a training loop; `find_unused_parameters` tells distributed data parallel that some steps
    leave parameters out of the loss (e.g. the retriever during the reading warm-up). Every trainer makes its
    accelerator here first thing, so this is also where `args.output_dir` is claimed for the run (refused when it holds
    another run, see [`claim_output_dir`])."""
    set_seed(args.seed)
    # Before the process group exists (the next line, or the Accelerator, creates it under `accelerate launch`):
    # torch.distributed.fsdp, which transformers' models import (as does the "auto" probe's BERT), imported while a
    # gloo group is up keeps that group alive past end_training()'s destroy_process_group (torch 2.13). Its worker
    # threads then outlive the script and may free a finished collective's tensors while the interpreter exits,
    # which aborts the process after all its work ("terminate called without an active exception", SIGABRT; the
    # crash of pytorch/pytorch#190489).
    import torch.distributed.fsdp  # noqa: F401

    # the REALM configs and models with transformers' Auto classes, so that a tokenizer or config read from a model
    # directory resolves our model types (cheap: transformers' auto modules are loaded by now)
    register_what_is_loaded()
    _process_group()
    args.mixed_precision = _agreed_mixed_precision(args.mixed_precision)  # "auto" becomes what this machine runs
    _release_other_precision(args.mixed_precision)
    handlers = [DistributedDataParallelKwargs(find_unused_parameters=True)] if find_unused_parameters else None
    accelerator = Accelerator(
        kwargs_handlers=handlers,
        # the data order is a function of (seed, epoch), so a resumed run sees the same batches
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True),
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        mixed_precision=args.mixed_precision,
        log_with=None if args.report_to == "none" else args.report_to,
        project_dir=args.output_dir,
    )
    # before any work: a run never mixes its outputs with another run's in the same directory
    claim_output_dir(args.output_dir, args.resume_from_checkpoint, args.overwrite_output_dir, accelerator.state)
    load_models_whole(accelerator)  # ZeRO-3: the models load whole; `accelerator.prepare` partitions them
    return accelerator


def _release_other_precision(mixed_precision: str) -> None:
    """Let this trainer set its own precision when a trainer earlier in the same process set another one (pre-training
    in fp32, then fine-tuning in bf16, in one script): accelerate keeps one precision per process and refuses a change,
    so its accelerator state starts afresh, as transformers' `TrainingArguments` does; the process group (the partial
    state) is kept."""
    previous = AcceleratorState._shared_state.get("_mixed_precision")
    if previous is not None and previous != mixed_precision:
        logger.info(
            "mixed_precision %s replaces %s, set by an earlier trainer in this process", mixed_precision, previous
        )
        AcceleratorState._reset_state()


def _process_group() -> PartialState:
    """The process state of this run, made as the Accelerator will make it (it takes this one), with one fix: launched
    with DeepSpeed on a machine without an accelerator, accelerate picks no backend, so DeepSpeed joins the ranks
    (gloo) while accelerate counts one process and every rank acts as the main one. There the backend is gloo."""
    cpu = parse_flag_from_env("ACCELERATE_USE_CPU")  # CPU ranks stay ranks
    launched = int(os.environ.get("LOCAL_RANK", -1)) != -1
    deepspeed_on_cpu = parse_flag_from_env("ACCELERATE_USE_DEEPSPEED") and launched and not cpu
    if deepspeed_on_cpu and not torch.accelerator.is_available():
        return PartialState(cpu=cpu, backend="gloo")
    return PartialState(cpu=cpu)


def _agreed_mixed_precision(mixed_precision: str) -> str:
    """`mixed_precision` resolved on this machine (see `precision.resolve_mixed_precision`); under "auto" every
    process takes the main process's choice, so that all ranks train alike."""
    if mixed_precision != "auto":
        return resolve_mixed_precision(mixed_precision, "cpu")  # checks the name
    state = _process_group()
    chosen = [resolve_mixed_precision("auto", state.device.type) if state.is_main_process else None]
    if state.num_processes > 1:
        broadcast_object_list(chosen, from_process=0)
    return chosen[0]
