"""What the benchmarks share: where results go, the machine they ran on, timing that waits for the GPU, running
`realm-hf`, and writing a result file. Each bench_*.py holds one measurement and imports these from here."""

from __future__ import annotations

import argparse
import json
import logging
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
    "RESULTS", "add_knowledge_run_arguments", "cpu_model", "describe_machine", "device_name", "machine",
    "run_realm_hf", "single_thread_logging", "synchronize", "write_json",
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


def add_knowledge_run_arguments(parser: argparse.ArgumentParser, output: str, num_entities: int) -> None:
    """The options of the benchmarks that run the hard knowledge task's recipe per training seed (bench_ablations,
    bench_x_not_z): seeds, task size, evaluation, the held-out half, recipe overrides, where results and runs go, and
    merging the files of seeds run side by side. `output` is the default prefix of the result files."""
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--num-entities", type=int, default=num_entities)
    parser.add_argument("--eval-sentences", type=int, default=400)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--warm-start-only", action="store_true",
                        help="Only train (or find in --work-dir) each seed's warm start: for runs that reuse them.")
    parser.add_argument("--half", choices=("choose", "report"), default="report",
                        help="Held-out half evaluated: 'choose' to choose a recipe on, 'report' to report it on.")
    parser.add_argument("--set", action="append", default=[], help="Override a recipe value: KEY=VALUE (JSON).")
    parser.add_argument("--output", default=output, help="Prefix of the result files (.json, .md, ...).")
    parser.add_argument("--work-dir", default=None, help="Keep the runs here (default: a temporary directory).")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="Only merge these result files (e.g. seeds run side by side) into --output.")


def single_thread_logging() -> None:
    """Warnings logged with their time, and torch's threads set to OMP_NUM_THREADS: with 1, runs go side by side, one
    process per core (the tiny models scale poorly over threads)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1))
