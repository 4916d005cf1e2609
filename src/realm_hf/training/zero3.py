"""Whole weights of a model whose parameters DeepSpeed ZeRO-3 partitions over the ranks.

Under ZeRO-3 each rank holds a 1/N slice of every parameter, and `param.data` is empty outside the submodule that
DeepSpeed's hooks are running. What reads the weights whole gathers them first: the index refresh's snapshot of the
document tower, the document tower's fingerprint, the saved model, and the forward passes that not every rank takes
in step with the others (an index build over shards of unequal size, an evaluation on the main process), which run
on a plain copy. Gathering is a collective: every rank calls these functions at the same point. Without ZeRO-3 each
of them hands back the module itself, or reads it as it is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from accelerate import Accelerator
from torch import nn
from transformers import PreTrainedModel

from ..index.manifest import fingerprint_module

__all__ = ["is_partitioned", "load_models_whole", "whole_copy", "whole_fingerprint", "whole_parameters", "whole_state_dict"]


def is_partitioned(accelerator: Accelerator) -> bool:
    """Whether DeepSpeed ZeRO-3 (`zero_optimization.stage` 3) partitions the parameters of this run."""
    plugin = accelerator.state.deepspeed_plugin
    return plugin is not None and plugin.zero_stage == 3


def load_models_whole(accelerator: Accelerator) -> None:
    """Under ZeRO-3, make transformers' `from_pretrained` load whole models (no `deepspeed.zero.Init`): the trainers
    load theirs after the Accelerator exists and before `accelerator.prepare` partitions them, and the index refresher
    loads a document tower in a thread, where a partitioning load would issue collectives that no other rank joins."""
    if is_partitioned(accelerator):
        from transformers.integrations import unset_hf_deepspeed_config

        unset_hf_deepspeed_config()


@contextlib.contextmanager
def whole_parameters(accelerator: Accelerator, module: nn.Module) -> Iterator[nn.Module]:
    r"""
    The module with its parameters whole inside the block (every rank enters it together under ZeRO-3).

    For reading the weights (`state_dict`, `save_pretrained`, a fingerprint), not for forward passes: ZeRO-3's hooks
    partition a submodule's parameters again after its forward; use [`whole_copy`] for those.

    Args:
        accelerator (`Accelerator`): The run's accelerator.
        module (`nn.Module`): The unwrapped model or one of its submodules.
    """
    if not is_partitioned(accelerator):
        yield module
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=None):
        yield module


def whole_state_dict(accelerator: Accelerator, module: nn.Module) -> dict[str, torch.Tensor]:
    """The module's whole state dict, e.g. for the snapshot of the document tower that the index refresher embeds the
    corpus with: without ZeRO-3 the module's own tensors (the next optimizer step changes them: copy what you keep, as
    the refresher does at once), under it a CPU copy of the gathered weights (a collective)."""
    if not is_partitioned(accelerator):
        return module.state_dict()
    with whole_parameters(accelerator, module):
        return {name: tensor.detach().to("cpu", copy=True) for name, tensor in module.state_dict().items()}


def whole_fingerprint(accelerator: Accelerator, module: nn.Module) -> str:
    """[`fingerprint_module`] of the module's whole weights (a collective under ZeRO-3)."""
    with whole_parameters(accelerator, module):
        return fingerprint_module(module)


def whole_copy(accelerator: Accelerator, model: PreTrainedModel) -> PreTrainedModel:
    r"""
    A model whose forward passes any rank may run alone: `model` itself without ZeRO-3; under it (a collective) a
    plain copy with the whole weights, on the accelerator's device and in `model`'s train/eval mode. The copy holds
    the whole model on every rank while it lives: drop it after the passes.

    Args:
        accelerator (`Accelerator`): The run's accelerator.
        model (`PreTrainedModel`): A model of the run (unwrapped), or one of its `PreTrainedModel` parts.
    """
    if not is_partitioned(accelerator):
        return model
    state = whole_state_dict(accelerator, model)
    copy = type(model)(model.config)
    copy.load_state_dict(state)
    return copy.to(accelerator.device).train(model.training)
