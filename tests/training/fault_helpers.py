"""A tiny [`TrainingLoop`] (linear regression) for fault-injection tests, runnable as a script so that a test can
kill it with SIGKILL in the middle of a checkpoint save:

    python tests/training/fault_helpers.py OUTPUT_DIR --max-steps 6 --save-steps 2 --hang-at-save 4

`--hang-at-save N` writes `OUTPUT_DIR/saving-N` once the model and optimizer of checkpoint N are on disk (before the
trainer state) and then hangs, for the test to kill the process at that point.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time

import torch
from torch import nn

from realm_hf.training.arguments import LoopArguments
from realm_hf.training.loop import TrainingLoop


def two_process_launch(script: str, *script_args: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment of the README's `accelerate launch` with 2 gloo CPU processes, on a free port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
        "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(port),
        script, *script_args,
    ]
    return command, {**os.environ, "HF_HUB_OFFLINE": "1", "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1"}


class TinyRegressionLoop(TrainingLoop):
    """`nn.Linear(4, 1)` fit to a fixed random linear target; `hang_at_save` as in the module docstring."""

    def __init__(self, args: LoopArguments, hang_at_save: int | None = None) -> None:
        generator = torch.Generator().manual_seed(1)
        inputs = torch.randn(64, 4, generator=generator)  # [N, 4]
        targets = inputs @ torch.randn(4, 1, generator=generator) + 0.1 * torch.randn(64, 1, generator=generator)
        dataset = torch.utils.data.TensorDataset(inputs, targets)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=args.per_device_batch_size, shuffle=True, generator=torch.Generator().manual_seed(0)
        )
        torch.manual_seed(args.seed)
        super().__init__(args, nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.1), nn.Linear(8, 1)), loader)
        self.hang_at_save = hang_at_save

    def training_step(self, batch) -> tuple[torch.Tensor, dict[str, float]]:
        inputs, targets = batch
        return nn.functional.mse_loss(self.model(inputs), targets), {}

    def extra_state(self) -> dict:
        if self.step == self.hang_at_save:
            open(os.path.join(self.args.output_dir, f"saving-{self.step}"), "w").close()
            time.sleep(600)  # killed here
        return {}

    def save_model(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)


def loop_arguments(output_dir: str, max_steps: int, save_steps: int, resume: str | None = None) -> LoopArguments:
    return LoopArguments(
        output_dir=str(output_dir), max_steps=max_steps, per_device_batch_size=8, learning_rate=1e-2,
        logging_steps=1, save_steps=save_steps, report_to="none", resume_from_checkpoint=resume,
    )


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("output_dir")
    parser.add_argument("--max-steps", type=int, default=6)
    parser.add_argument("--save-steps", type=int, default=2)
    parser.add_argument("--hang-at-save", type=int, default=None)
    options = parser.parse_args(argv)
    args = loop_arguments(options.output_dir, options.max_steps, options.save_steps)
    TinyRegressionLoop(args, hang_at_save=options.hang_at_save).train()


if __name__ == "__main__":
    main(sys.argv[1:])
