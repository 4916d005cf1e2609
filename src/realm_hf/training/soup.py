"""Weight averages of Open-QA models that start from one model and read one index: model soups and WiSE-FT.

Wortsman et al. (2022), "Model soups: averaging weights of multiple fine-tuned models improves accuracy without
increasing inference time". Fine-tunings of one start that differ only in the order they read their questions land
in one basin, so their average is a model too, and it evens out part of what the order alone changes in one
fine-tuning (the demo's runs: benchmarks/results/demo-history.md).

Wortsman et al. (2022), "Robust fine-tuning of zero-shot models" (WiSE-FT): the average of a model *before* and
after its fine-tuning, with weights `(1 - alpha, alpha)`, keeps much of what the start knew that fine-tuning
forgets. The demo averages its reading stage's model with its fine-tuning(s) that way (`--reading-weight`).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Sequence

import torch
from transformers import AutoTokenizer

from ..index.atomic import atomic_directory
from ..index.manifest import MANIFEST_NAME
from ..modeling import RealmForOpenQA
from .openqa import INDEX_SUBDIR

logger = logging.getLogger(__name__)


def check_average_weights(weights: Sequence[float] | None, count: int) -> list[float]:
    r"""
    The weights of an average of `count` models: `weights` as floats when there is one per model, none negative and
    their sum 1 (to 1e-6), or uniform when `None`.

    Raises:
        `ValueError`: naming the weights and what is wrong with them.
    """
    if weights is None:
        return [1.0 / count] * count
    weights = [float(weight) for weight in weights]
    if len(weights) != count:
        raise ValueError(f"{len(weights)} weights {weights} for {count} models: give one weight per model.")
    if any(weight < 0 for weight in weights) or abs(sum(weights) - 1.0) > 1e-6:
        raise ValueError(f"The weights {weights} must be 0 or more and sum to 1 (they sum to {sum(weights):g}).")
    return weights


def average_state_dicts(
    state_dicts: Sequence[dict[str, torch.Tensor]], weights: Sequence[float] | None = None
) -> dict[str, torch.Tensor]:
    r"""
    The weighted average of state dicts with the same tensors: floating-point tensors averaged in float32 and cast
    back to their dtype; other tensors (e.g. `position_ids`) must be equal in all and are kept.

    Args:
        state_dicts (`Sequence[dict[str, torch.Tensor]]`): At least one state dict; all with the same names and shapes.
        weights (`Sequence[float]`, *optional*): One weight per state dict, 0 or more, summing to 1 (default:
            uniform, a model soup).

    Returns:
        `dict[str, torch.Tensor]`: The average.
    """
    if not state_dicts:
        raise ValueError("average_state_dicts needs at least one state dict, got none.")
    coefficients = torch.tensor(check_average_weights(weights, len(state_dicts)), dtype=torch.float32)
    first = state_dicts[0]
    for position, state_dict in enumerate(state_dicts[1:], start=1):
        if state_dict.keys() != first.keys():
            differing = sorted(state_dict.keys() ^ first.keys())[:3]
            raise ValueError(f"State dict {position} holds other tensors than the first (e.g. {differing}).")
    average = {}
    for name, tensor in first.items():
        tensors = [state_dict[name] for state_dict in state_dicts]
        if any(other.shape != tensor.shape for other in tensors):
            raise ValueError(f"{name} has shapes {[tuple(t.shape) for t in tensors]}: only models of one shape average.")
        if tensor.is_floating_point():
            # [num_models, *shape] -> [*shape]
            stacked = torch.stack([t.float() for t in tensors])
            average[name] = (stacked * coefficients.view(-1, *[1] * tensor.dim())).sum(0).to(tensor.dtype)
        elif all(torch.equal(t, tensor) for t in tensors[1:]):
            average[name] = tensor
        else:
            raise ValueError(f"{name} ({tensor.dtype}) differs between the models and cannot be averaged.")
    return average


def average_open_qa_models(
    model_dirs: Sequence[str | os.PathLike], output_dir: str | os.PathLike, weights: Sequence[float] | None = None
) -> str:
    r"""
    Write the weight average of `model_dirs` (saved [`RealmForOpenQA`] models with their index in `<dir>/index`, as
    `OpenQaTrainer` saves them) to `output_dir`: their weights averaged (uniformly: a model soup; or with `weights`),
    the first's config, tokenizer and index. The models must share their index
    (`config.index_fingerprint`): fine-tunings of one model with the document tower frozen, as REALM's Open-QA
    fine-tunes, differing in their seed or data order, or such a fine-tuning and the model it started from (WiSE-FT).

    Args:
        model_dirs (`Sequence[str | os.PathLike]`): The models (e.g. `<finetune output_dir>/final` of runs with
            `--seed 0` and `--seed 1`; or the model a fine-tuning started from and its `final`).
        output_dir (`str | os.PathLike`): Where the average goes; replaced as a whole, only once it is complete.
        weights (`Sequence[float]`, *optional*): One per model, 0 or more, summing to 1 (default: uniform).

    Returns:
        `str`: `output_dir`.

    Example:

    ```python
    >>> from realm_hf.training.soup import average_open_qa_models

    >>> average_open_qa_models(["outputs/openqa-seed0/final", "outputs/openqa-seed1/final"], "outputs/openqa-soup")
    ```
    """
    model_dirs = [os.fspath(directory) for directory in model_dirs]
    output_dir = os.fspath(output_dir)
    if not model_dirs:
        raise ValueError("A model soup needs at least one fine-tuned model directory, got none.")
    weights = check_average_weights(weights, len(model_dirs))
    for directory in model_dirs:
        if not os.path.isfile(os.path.join(directory, INDEX_SUBDIR, MANIFEST_NAME)):
            raise ValueError(
                f"{directory} is not a fine-tuned RealmForOpenQA with its index (no {INDEX_SUBDIR}/{MANIFEST_NAME}): "
                "pass the final/ directories that `realm-hf finetune` writes."
            )
    models = [RealmForOpenQA.from_pretrained(directory) for directory in model_dirs]
    fingerprints = {directory: model.config.index_fingerprint for directory, model in zip(model_dirs, models)}
    if len(set(fingerprints.values())) != 1:
        raise ValueError(
            f"The models read different indexes ({fingerprints}): only fine-tunings of one model with the document "
            "tower frozen (one index) can be averaged."
        )
    soup = models[0]
    soup.load_state_dict(average_state_dicts([model.state_dict() for model in models], weights))
    with atomic_directory(output_dir) as tmp:
        soup.save_pretrained(tmp)
        AutoTokenizer.from_pretrained(model_dirs[0]).save_pretrained(tmp)
        shutil.copytree(os.path.join(model_dirs[0], INDEX_SUBDIR), os.path.join(tmp, INDEX_SUBDIR))
    logger.info("Averaged %d models (weights %s) into %s", len(model_dirs), ", ".join(f"{w:g}" for w in weights), output_dir)
    return output_dir
