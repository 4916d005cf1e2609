"""What the benchmarks share: where results go, the machine they ran on, timing that waits for the GPU, running
`realm-hf`, and writing a result file. Each bench_*.py holds one measurement and imports these from here."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time

import torch

try:
    from realm_hf.utils.machine import cpu_model, describe_machine
except ImportError:  # bench_models' `--worker old` runs in the transformers-REALM venv, which has no realm_hf
    cpu_model = platform.processor

    def describe_machine(gpu: bool = True) -> str:
        return f"{cpu_model()}, {os.cpu_count()} cores"

__all__ = [
    "RESULTS", "cpu_model", "describe_machine", "device_name", "machine", "run_realm_hf", "synchronize", "write_json",
]

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
"""benchmarks/results/: every benchmark writes its JSON and Markdown there."""


def machine() -> str:
    """`"<CPU model>, <n> cores[, GPU <name>], torch <version>"`: the line a result names its machine with."""
    return f"{describe_machine()}, torch {torch.__version__}"


def synchronize(device: torch.device) -> None:
    """Wait for the GPU's queued work, so that a wall-clock interval covers it (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_name(device: torch.device, threads: bool = False) -> str:
    """The GPU's name, or the CPU's model and cores (and torch's threads, with `threads`)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{cpu_model()}, {os.cpu_count()} cores" + (f", {torch.get_num_threads()} torch threads" if threads else "")


def run_realm_hf(command: list[str], log: str) -> float:
    """Run `python -m realm_hf.cli COMMAND` (what `realm-hf COMMAND` runs), its output appended to `log`; returns the
    seconds it took. Raises `CalledProcessError` when it fails (its output is in `log`)."""
    began = time.time()
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"\n$ realm-hf {' '.join(command)}\n")
        f.flush()
        subprocess.run([sys.executable, "-m", "realm_hf.cli", *command], stdout=f, stderr=subprocess.STDOUT, check=True)
    return time.time() - began


def write_json(path: str, data: dict, indent: int = 1) -> None:
    """Write a result as JSON (the folder made first), so that a run cut short keeps what it measured so far."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=indent, default=str)
