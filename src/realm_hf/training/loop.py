"""The training loop shared by ICT, REALM pre-training and Open-QA fine-tuning, on Accelerate.

A trainer subclasses [`TrainingLoop`] and implements `training_step(batch) -> (loss, logs)` (logs: floats or 0-d
tensors, which the loop reads at its logging steps only, so a step need not wait for the device); it may override
`on_step_end(step)` (e.g. to swap a refreshed index), `status()` (a short line for the progress bar and the log),
`evaluate(step) -> dict`, `extra_state() / load_extra_state()` (what a checkpoint records beside models and
optimizer), `on_train_begin()` / `on_train_end()` and `save_model(directory)`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import shutil
import time

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType, broadcast_object_list
from torch import nn
from tqdm.auto import tqdm

from ..index.atomic import atomic_directory, publish_directory, write_json_atomic
from ..utils.files import read_json_file, reading_model_files
from .accelerator import make_accelerator  # also the loop's public name: the trainers import it from here
from .arguments import LoopArguments
from .early_stopping import EarlyStopping
from .logging_window import LoggingWindow
from .output_dir import (  # noqa: F401 - complete_checkpoints, latest_checkpoint: also the loop's public names
    FINAL_NAME, HISTORY_NAME, TRACKER_RUN_NAME, TRAINER_STATE, complete_checkpoints, latest_checkpoint,
)
from .schedule import (  # noqa: F401 - decay_parameter_groups, linear_schedule: also the loop's public names
    SCHEDULE_OPTIONS, decay_parameter_groups, group_schedule, linear_schedule,
)
from .zero3 import whole_parameters

logger = logging.getLogger(__name__)

CHECKPOINT_HINT = (
    "the checkpoint is damaged (an interrupted copy?): resume from an earlier one (--resume_from_checkpoint "
    "<output_dir>/checkpoint-<step>) or delete this one"
)
"""What to do about an unreadable file of a checkpoint."""


def as_examples(batch: list[dict]) -> list[dict]:
    """DataLoader collate_fn of the trainers: keep the examples as dicts (collation needs the retrieved blocks first)."""
    return batch


def resolve_checkpoint(output_dir: str, checkpoint: str | None) -> str | None:
    """The checkpoint directory a `resume_from_checkpoint` value names: `"latest"` is the last complete checkpoint of
    `output_dir` (None when there is none, a fresh start); a path is returned as is, checked to be complete."""
    if not checkpoint:
        return None
    if checkpoint == "latest":
        return latest_checkpoint(output_dir)
    if not os.path.isfile(os.path.join(checkpoint, TRAINER_STATE)):
        raise FileNotFoundError(
            f"{checkpoint} is not a realm_hf checkpoint (no {TRAINER_STATE}); pass a checkpoint-<step> directory "
            "or 'latest'."
        )
    return checkpoint


class TrainingLoop:
    r"""
    Accelerate training loop: gradient accumulation, mixed precision, clipping, linear schedule, tracker logging
    with a tqdm bar, `accelerator.save_state` checkpoints with the trainer's extra state, and exact resume (the
    data order is seeded; resumed runs skip the batches already seen).

    Args:
        args ([`LoopArguments`]): Loop settings.
        model (`nn.Module`): Everything that is trained, as one module (wrapped by Accelerate).
        dataloader (`torch.utils.data.DataLoader`): Training batches (re-iterated by epoch).
        accelerator (`Accelerator`, *optional*): Created from `args` when not given.
        config (`dict`, *optional*): Hyper-parameters to log with the trackers.
    """

    def __init__(
        self,
        args: LoopArguments,
        model: nn.Module,
        dataloader: torch.utils.data.DataLoader,
        accelerator: Accelerator | None = None,
        config: dict | None = None,
    ):
        self.args = args
        self.accelerator = accelerator or make_accelerator(args)
        groups = self.parameter_groups(model)
        # `start_step` and `pause_steps` are the schedule's, not the optimizer's (a callable would not survive its
        # state_dict)
        # the fused kernel: one pass over all parameters instead of a loop of small ops (several times faster on the
        # CPU; docs/experiments.md, Speed)
        optimizer = torch.optim.AdamW(
            [{k: v for k, v in group.items() if k not in SCHEDULE_OPTIONS} for group in groups], lr=args.learning_rate,
            fused=self.accelerator.device.type in ("cpu", "cuda") or None,
        )
        # Accelerate steps a prepared scheduler once per process per optimizer step
        processes = self.accelerator.num_processes
        schedules = [
            functools.partial(
                group_schedule, warmup_steps=args.warmup_steps * processes,
                total_steps=max(args.max_steps, 1) * processes, start_step=group.get("start_step", 0),
                processes=processes, pause_steps=group.get("pause_steps"),
            )
            for group in groups
        ]
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedules)
        # batches of examples as dicts (`as_examples`) hold no tensor: accelerate's device placement would only walk
        # every list of token ids, item by item, at every step (DeepSpeed and Megatron-LM take no per-object choice)
        placement = None
        if dataloader.collate_fn is as_examples and self.accelerator.distributed_type not in (
            DistributedType.DEEPSPEED, DistributedType.MEGATRON_LM
        ):
            placement = [None, None, False, None]
        self.model, self.optimizer, self.dataloader, self.scheduler = self.accelerator.prepare(
            model, optimizer, dataloader, scheduler, device_placement=placement
        )
        self.step = 0
        self.history: list[dict] = []
        self._publishing: tuple[str, str] | None = None  # (temporary folder, destination) while save_final runs
        self.early_stopping = (
            EarlyStopping(args.early_stopping_metric, args.early_stopping_patience, args.early_stopping_threshold)
            if args.early_stopping_metric else None
        )
        if self.accelerator.is_main_process:
            os.makedirs(args.output_dir, exist_ok=True)
            # the merged arguments, for the model card (realm_hf.hub.collect_training_facts) and reproducibility
            with open(os.path.join(args.output_dir, TRAINING_ARGS_NAME), "w", encoding="utf-8") as f:
                json.dump(config if config is not None else vars(args), f, indent=2, default=str)
        if args.report_to != "none":
            self.accelerator.init_trackers(TRACKER_RUN_NAME, config=_loggable(config or {}))

    def unwrapped_model(self) -> nn.Module:
        """`accelerator.unwrap_model(self.model)`, kept while `self.model` is the same object: unwrapping walks every
        submodule (accelerate looks for compiled regions), milliseconds that the trainers would pay several times a
        step."""
        cached = self.__dict__.get("_unwrapped")
        if cached is None or cached[0] is not self.model:
            cached = self.__dict__["_unwrapped"] = (self.model, self.accelerator.unwrap_model(self.model))
        return cached[1]

    # --------------------------------------------------------------------------------- hooks for subclasses
    def parameter_groups(self, model: nn.Module) -> list[dict]:
        """Optimizer parameter groups; a group's `start_step` keeps its learning rate at 0 until that step (then it
        warms up like the others did; a callable returning the step, or None while not started, is asked at every
        step), and a group's `lr` overrides `args.learning_rate`."""
        return decay_parameter_groups(model, self.args.weight_decay)

    def training_step(self, batch) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError

    def on_step_end(self, step: int) -> dict[str, float]:
        return {}

    def frozen_parameters(self) -> list[nn.Parameter]:
        """Parameters that must not learn at the step being taken: their gradients are dropped after the backward
        pass, so they take no share of the clipped norm and the optimizer keeps no state for them (the same on one
        process as on several, where DDP computes every gradient)."""
        return []

    def status(self) -> str:
        """A short line on the step just taken, shown in the progress bar and at the end of each periodic log line
        (empty: nothing shown)."""
        return ""

    def on_train_begin(self) -> None:
        """Runs on every process once the run starts (after a resume: at the checkpoint's step)."""

    def on_train_end(self) -> dict:
        """Runs on every process after the final save; what it returns is written, beside the step, into
        `<output_dir>/trainer_state.json` (main process)."""
        return {}

    def evaluate(self, step: int) -> dict[str, float]:
        return {}

    def extra_state(self) -> dict:
        return {}

    def load_extra_state(self, state: dict) -> None:
        pass

    def before_final_save(self) -> None:
        """Runs on every process after training, before the main process alone calls `save_model`: the place for
        work that needs collectives (e.g. re-embedding the corpus sharded over the ranks), which `save_model` must not
        issue since the other ranks never join it."""

    def save_model(self, directory: str) -> None:
        """Write the final model (main process only: no collectives here, see `before_final_save`; under ZeRO-3 `train`
        calls it with the weights gathered whole). `train` calls it through [`save_final`]: `directory` is then a
        temporary folder renamed to `final/` once this returns (name files in messages with [`published_path`])."""
        self.accelerator.unwrap_model(self.model).save_pretrained(directory)

    def save_final(self, directory: str) -> None:
        """Write the final model the way indexes are written: `save_model` fills a hidden temporary sibling
        (`.final.tmp-*`), renamed into place once complete, so a crash during the save leaves no half model where
        users and `realm-hf publish` look (and a previous `final/` stays whole until the new one replaces it)."""
        began = time.perf_counter()
        with atomic_directory(directory) as tmp:
            self._publishing = (tmp, directory)
            try:
                self.save_model(tmp)
            finally:
                self._publishing = None
        logger.info("Saved the final model to %s in %.1fs", directory, time.perf_counter() - began)

    def published_path(self, path: str) -> str:
        """`path` as it will be named once the final save in progress is renamed into place (for messages that name a
        file of the model being saved, e.g. a command to run on it later); unchanged outside [`save_final`]."""
        if self._publishing is None:
            return path
        tmp, directory = self._publishing
        relative = os.path.relpath(os.path.abspath(path), tmp)
        if relative == os.curdir:
            return directory
        return path if relative.startswith(os.pardir) else os.path.join(directory, relative)

    # ------------------------------------------------------------------------------------------ checkpoints
    def save_checkpoint(self) -> str:
        """Write `checkpoint-<step>` the way indexes are written: every rank saves into one hidden temporary
        directory, the main process adds `trainer_state.json` last and renames the whole into place, so a crash
        during the save never leaves a `checkpoint-<step>` that `latest` would pick."""
        directory = os.path.join(self.args.output_dir, f"checkpoint-{self.step}")
        tmp = os.path.join(self.args.output_dir, f".checkpoint-{self.step}.tmp")  # one name for every rank
        if self.accelerator.is_main_process and os.path.lexists(tmp):
            shutil.rmtree(tmp)  # left by a crash during an earlier save of this step
        self.accelerator.wait_for_everyone()
        self.accelerator.save_state(tmp)
        self.accelerator.wait_for_everyone()
        if self.accelerator.is_main_process:
            state = {"step": self.step, "history": self.history, **self.extra_state()}
            if self.early_stopping is not None:
                state["early_stopping"] = self.early_stopping.state_dict()
            write_json_atomic(os.path.join(tmp, TRAINER_STATE), state)
            publish_directory(tmp, directory)
            self._prune_checkpoints()
        self.accelerator.wait_for_everyone()
        logger.info("Saved checkpoint %s", directory)
        return directory

    def _prune_checkpoints(self) -> None:
        """Delete the oldest complete checkpoints beyond `save_total_limit` (main process)."""
        limit = self.args.save_total_limit
        if limit is None:
            return
        for old in complete_checkpoints(self.args.output_dir)[:-limit]:
            shutil.rmtree(old, ignore_errors=True)
            logger.info("Deleted %s (save_total_limit=%d)", old, limit)

    def resume(self, checkpoint: str) -> int:
        """Load a checkpoint; returns the number of micro-batches of the current epoch to skip."""
        resolved = resolve_checkpoint(self.args.output_dir, checkpoint)
        if resolved is None:
            logger.info("No checkpoint in %s; starting from scratch", self.args.output_dir)
            return 0
        checkpoint = resolved
        with reading_model_files(checkpoint, CHECKPOINT_HINT):
            self.accelerator.load_state(checkpoint)
        state = read_json_file(os.path.join(checkpoint, TRAINER_STATE), CHECKPOINT_HINT)
        self.step = int(state["step"])
        self.history = state.get("history", [])
        if self.early_stopping is not None and "early_stopping" in state:
            self.early_stopping.load_state_dict(state["early_stopping"])
        self.load_extra_state(state)
        logger.info("Resumed from %s at step %d", checkpoint, self.step)
        return (self.step * self.args.gradient_accumulation_steps) % max(len(self.dataloader), 1)

    # ---------------------------------------------------------------------------------------------- the loop
    def train(self) -> list[dict]:
        """Train to `max_steps` (or until early stopping), then evaluate, save `final/` and the history; returns the
        history (one record per logging step and per evaluation)."""
        args = self.args
        skip = self.resume(args.resume_from_checkpoint) if args.resume_from_checkpoint else 0
        micro_per_epoch = len(self.dataloader)
        if micro_per_epoch == 0:
            raise ValueError("The training dataloader is empty; check the corpus and the batch size.")
        epoch = (self.step * args.gradient_accumulation_steps) // micro_per_epoch
        progress = tqdm(
            total=args.max_steps, initial=self.step, desc="train", disable=not self.accelerator.is_local_main_process
        )
        window = LoggingWindow(started=time.time(), steps_at_start=self.step)
        self.on_train_begin()
        if args.eval_on_start and self.step == 0:
            self._log_evaluation(self.evaluate(0))
        self.model.train()
        stop = False
        while self.step < args.max_steps and not stop:
            stop = self._train_epoch(epoch, skip, progress, window)
            skip = 0
            epoch += 1
        progress.close()
        self._evaluate_at_end()
        self._save_at_end()
        return self._end_training()

    def _train_epoch(self, epoch: int, skip: int, progress: tqdm, window: LoggingWindow) -> bool:
        """One pass over the dataloader (its first `skip` micro-batches left out, after a resume), ended early at
        `max_steps` or by early stopping; returns whether early stopping ended training."""
        if hasattr(self.dataloader, "set_epoch"):
            self.dataloader.set_epoch(epoch)
        batches = self.accelerator.skip_first_batches(self.dataloader, skip) if skip else self.dataloader
        for batch in batches:
            loss, logs = self._micro_step(batch)
            window.add(loss, logs)
            if not self.accelerator.sync_gradients:
                continue
            self.step += 1
            stop = self._after_optimizer_step(progress, window)
            if self.step >= self.args.max_steps or stop:
                return stop
        return False

    def _micro_step(self, batch) -> tuple[torch.Tensor, dict[str, float]]:
        """Forward and backward of one micro-batch; at the last of an accumulation, the frozen parameters' gradients
        dropped, clipping, and the optimizer and schedule stepped."""
        with self.accelerator.accumulate(self.model):
            loss, logs = self.training_step(batch)
            self.accelerator.backward(loss)
            if self.accelerator.sync_gradients:
                for parameter in self.frozen_parameters():
                    parameter.grad = None
            if self.accelerator.sync_gradients and self.args.max_grad_norm > 0:
                self.accelerator.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad()
        return loss, logs

    def _after_optimizer_step(self, progress: tqdm, window: LoggingWindow) -> bool:
        """What follows optimizer step `self.step`: the trainer's hook, the progress bar, the periodic log, an
        evaluation and a checkpoint when due; returns whether early stopping ends training."""
        args = self.args
        window.latest.update(self.on_step_end(self.step))
        status = self.status()
        if status:
            progress.set_postfix_str(status, refresh=False)
        progress.update(1)
        if self.step % args.logging_steps == 0 or self.step == args.max_steps:
            self._log(window.record(self.step, self.scheduler.get_last_lr()[0]), status)
        stop = False
        if args.eval_steps and self.step % args.eval_steps == 0:
            metrics = self.evaluate(self.step)
            self._log_evaluation(metrics)
            stop = self._early_stop(metrics)
        if args.save_steps and self.step % args.save_steps == 0:
            self.save_checkpoint()
        return stop

    def _evaluate_at_end(self) -> None:
        """Evaluate the last step, unless the periodic evaluation just did."""
        evaluated_last_step = bool(self.args.eval_steps) and self.step % self.args.eval_steps == 0
        final_eval = {} if evaluated_last_step else self.evaluate(self.step)
        if final_eval:
            self._log_evaluation(final_eval)

    def _save_at_end(self) -> None:
        """`before_final_save` on every rank in lockstep, then `final/` (weights gathered whole under ZeRO-3) and the
        history, written by the main process."""
        self.accelerator.wait_for_everyone()
        self.before_final_save()  # every rank, in lockstep
        self.accelerator.wait_for_everyone()
        # every rank: ZeRO-3 gathers the partitioned weights for the main process to save them whole
        with whole_parameters(self.accelerator, self.unwrapped_model()):
            if self.accelerator.is_main_process:
                self.save_final(os.path.join(self.args.output_dir, FINAL_NAME))
        if self.accelerator.is_main_process:
            with open(os.path.join(self.args.output_dir, HISTORY_NAME), "w", encoding="utf-8") as f:
                json.dump(self.history, f, indent=2)

    def _end_training(self) -> list[dict]:
        """`on_train_end`, its summary written into `trainer_state.json` beside the step, and the trackers closed;
        returns the history."""
        summary = self.on_train_end()
        if self.early_stopping is not None:
            summary["early_stopping"] = self.early_stopping.state_dict()
        if self.accelerator.is_main_process:
            write_json_atomic(os.path.join(self.args.output_dir, TRAINER_STATE), {"step": self.step, **summary})
        self.accelerator.end_training()
        return self.history

    def _early_stop(self, metrics: dict[str, float]) -> bool:
        """Whether early stopping ends training after this evaluation: decided by the main process (evaluations may
        run there only) and shared with the others, so every rank leaves the loop at the same step."""
        if self.early_stopping is None:
            return False
        decision = [self.early_stopping.update(self.step, metrics) if self.accelerator.is_main_process else None]
        if self.accelerator.num_processes > 1:
            broadcast_object_list(decision, from_process=0)
        if decision[0]:
            self.early_stopping.stopped_at = self.step
        if decision[0] and self.accelerator.is_main_process:
            stopping = self.early_stopping
            logger.info(
                "Early stopping at step %d of %d: eval/%s has not improved for %d evaluations (best %.4g at step %s)",
                self.step, self.args.max_steps, stopping.metric, stopping.patience, stopping.best, stopping.best_step,
            )
        return bool(decision[0])

    def _log(self, record: dict[str, float], status: str = "") -> None:
        record = {k: v for k, v in record.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        if not record:
            return
        self.history.append({"step": self.step, **record})
        if self.args.report_to != "none":
            self.accelerator.log(record, step=self.step)
        line = " ".join(f"{k}={v:.4g}" for k, v in sorted(record.items()))
        logger.info("step %d: %s%s", self.step, line, f" | {status}" if status else "")

    def _log_evaluation(self, metrics: dict[str, float]) -> None:
        """Log an evaluation's metrics under `eval/`."""
        self._log({f"eval/{k}": v for k, v in metrics.items()})


TRAINING_ARGS_NAME = "training_args.json"


def _loggable(config: dict) -> dict:
    return {k: v for k, v in config.items() if isinstance(v, (int, float, str, bool))}
