"""What machine a run measured on: the CPU's model, its cores and the GPU, for the reports of the demo and the
benchmarks (a figure means little without the machine that made it)."""

from __future__ import annotations

import os
import platform

__all__ = ["cpu_model", "describe_machine"]


def cpu_model() -> str:
    """The CPU's model name (`/proc/cpuinfo`), else what `platform` knows of it."""
    if os.path.isfile("/proc/cpuinfo"):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def describe_machine(gpu: bool = True) -> str:
    """`"<CPU model>, <n> cores"`, and `", GPU <name>"` when `gpu` and CUDA is there (torch is imported only then)."""
    text = f"{cpu_model()}, {os.cpu_count()} cores"
    if gpu:
        import torch

        if torch.cuda.is_available():
            text += f", GPU {torch.cuda.get_device_name()}"
    return text
