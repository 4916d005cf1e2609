"""The optimizer's parameter groups and the learning-rate schedule of the training loop: transformers' linear warm-up
and decay, per group, with groups that start late (a callable start step: the retriever's gate) or rest a while."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn


def decay_parameter_groups(
    model: nn.Module, weight_decay: float, select: Callable[[str], bool] | None = None, **group_options
) -> list[dict]:
    """AdamW groups: no weight decay on biases, LayerNorm weights and the null document's learned logit.
    `select(name)` keeps some of the parameters (named in `model`, so a tied weight is counted once); `group_options`
    (e.g. `start_step`, `lr`) are added to both groups; empty groups are dropped."""
    decay, no_decay = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad or (select is not None and not select(name)):
            continue
        (no_decay if name.endswith(("bias", "null_document_logit")) or "LayerNorm" in name or "layer_norm" in name else decay).append(parameter)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return [{**group, **group_options} for group in groups if group["params"]]


def linear_schedule(step: int, warmup_steps: int, total_steps: int, start_step: int | None = 0) -> float:
    """Learning-rate factor of transformers' `get_linear_schedule_with_warmup` (linear warm-up over `warmup_steps`,
    then linear decay to 0 at `total_steps`), held at 0 before `start_step` (and while it is None: not started yet)
    and with the warm-up counted from it."""
    if start_step is None or step < start_step:
        return 0.0
    if step - start_step < warmup_steps:
        return (step - start_step) / max(1, warmup_steps)
    return max(0.0, (total_steps - step) / max(1, total_steps - start_step - warmup_steps))


# parameter-group options read by the schedule, not by the optimizer
SCHEDULE_OPTIONS = ("start_step", "pause_steps")


def group_schedule(
    step: int, warmup_steps: int, total_steps: int, start_step: int | Callable[[], int | None], processes: int,
    pause_steps: tuple[int, int] | None = None,
) -> float:
    """`linear_schedule` of one parameter group; a callable `start_step` is asked at every step (it returns None
    until the trainer decides that the group starts learning, e.g. the retriever's utility gate). During
    `pause_steps` (`(first, end)`, optimizer steps) the group does not learn, and its warm-up starts again at `end`."""
    start = start_step() if callable(start_step) else start_step
    if pause_steps is not None and start is not None and step >= pause_steps[0] * processes:
        if step < pause_steps[1] * processes:
            return 0.0
        start = max(start, pause_steps[1])
    return linear_schedule(step, warmup_steps, total_steps, None if start is None else start * processes)
