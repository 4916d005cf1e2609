"""The training loop's host work per step: step figures may be 0-d tensors that are read at the logging steps only
(the logged means are those of the floats read at every step before), batches of example dicts skip accelerate's
device placement (a walk over every token id) while batches of tensors keep it, and the unwrapped model is kept."""

from __future__ import annotations

import pytest
import torch

from realm_hf.training import LoopArguments
from realm_hf.training.loop import TrainingLoop, as_examples


class TinyLoop(TrainingLoop):
    """A linear model fitting `y = 2x`; its step figures are tensors or floats (`as_tensors`)."""

    def __init__(self, output_dir, collate_fn, as_tensors: bool, max_steps: int = 6):
        args = LoopArguments(
            output_dir=str(output_dir), max_steps=max_steps, per_device_batch_size=2, learning_rate=0.1,
            logging_steps=3, save_steps=0, report_to="none", seed=0,
        )
        examples = [{"x": [float(i)], "y": [2.0 * i]} for i in range(8)]
        loader = torch.utils.data.DataLoader(examples, batch_size=2, collate_fn=collate_fn)
        self.as_tensors = as_tensors
        self.seen: list[dict[str, float]] = []  # each step's figures, as floats at the step
        super().__init__(args, torch.nn.Linear(1, 1), loader)

    def training_step(self, batch):
        if isinstance(batch, list):  # examples as dicts (as_examples)
            x = torch.tensor([example["x"] for example in batch])
            y = torch.tensor([example["y"] for example in batch])
        else:
            x, y = batch["x"], batch["y"]
        error = self.model(x) - y
        loss = error.pow(2).mean()
        logs = {"abs_error": error.detach().abs().mean(), "max_error": error.detach().abs().max()}
        self.seen.append({"loss": loss.item(), **{k: v.item() for k, v in logs.items()}})
        return loss, (logs if self.as_tensors else {k: v.item() for k, v in logs.items()})

    def save_model(self, directory: str) -> None:
        pass


def tensor_batches(examples):
    return {name: torch.tensor([example[name] for example in examples]) for name in ("x", "y")}


@pytest.mark.parametrize("as_tensors", [True, False])
def test_logged_means_are_those_of_the_step_floats(tmp_path, as_tensors):
    loop = TinyLoop(tmp_path, as_examples, as_tensors)
    history = loop.train()
    records = [record for record in history if "loss" in record]
    assert [record["step"] for record in records] == [3, 6]
    for record, window in zip(records, (loop.seen[:3], loop.seen[3:])):
        for name in ("loss", "abs_error", "max_error"):
            floats = [seen[name] for seen in window]
            assert record[name] == sum(floats) / len(floats)  # exactly: the same floats, summed in the same order
            assert type(record[name]) is float


def test_batches_of_example_dicts_are_not_walked_for_device_placement(tmp_path):
    examples = TinyLoop(tmp_path / "examples", as_examples, True)
    assert examples.dataloader.device is None
    tensors = TinyLoop(tmp_path / "tensors", tensor_batches, True)
    assert tensors.dataloader.device == tensors.accelerator.device  # tensors are still moved for the step
    assert tensors.train()[-1]["step"] == 6


def test_the_unwrapped_model_is_kept_while_the_model_is_the_same(tmp_path, monkeypatch):
    loop = TinyLoop(tmp_path, as_examples, True)
    calls = []
    unwrap = loop.accelerator.unwrap_model
    monkeypatch.setattr(loop.accelerator, "unwrap_model", lambda model: calls.append(model) or unwrap(model))
    first = loop.unwrapped_model()
    assert loop.unwrapped_model() is first and len(calls) == 1
    loop.model = torch.nn.Linear(1, 1)  # another model: unwrapped again
    assert loop.unwrapped_model() is loop.model and len(calls) == 2
