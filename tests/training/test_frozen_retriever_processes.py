"""A frozen or gated retriever trains the same on one process and on two: no gradient enters the clipped norm and
the optimizer keeps no state for it while it is frozen (DDP computes its gradients on several processes; they are
dropped). Launched for real: `python examples/pretrain.py` and `accelerate launch` with 2 gloo processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fault_helpers import two_process_launch

pytest.importorskip("faiss")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "examples" / "pretrain.py")


def arguments(output: Path) -> list[str]:
    # a gate that cannot open: the retriever is frozen for all 4 steps
    return [
        "--config", str(REPO / "examples" / "configs" / "cpu-tiny.yaml"), "--output_dir", str(output),
        "--max_articles", "8", "--reading_warmup_steps", "0", "--retriever_gate_utility", "10",
        "--retriever_gate_window", "2", "--max_steps", "4", "--save_steps", "4", "--report_to", "none",
    ]


def optimizer_state(output: Path) -> tuple[int, int]:
    """(parameters with optimizer state, parameters) in checkpoint-4's optimizer."""
    state = torch.load(output / "checkpoint-4" / "optimizer.bin", weights_only=True)
    total = sum(len(group["params"]) for group in state["param_groups"])
    return len(state["state"]), total


def test_a_gated_retriever_gets_no_optimizer_state_on_one_process_or_two(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, SCRIPT, *arguments(one)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    command, env = two_process_launch(SCRIPT, *arguments(two))
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]

    from realm_hf import RealmRetriever

    retriever_parameters = sum(1 for p in RealmRetriever.from_pretrained(one / "final" / "retriever").parameters()
                                if p.requires_grad)
    with_state_one, total = optimizer_state(one)
    with_state_two, total_two = optimizer_state(two)
    assert total == total_two
    # the encoder's parameters have Adam moments, the retriever's none, on either number of processes
    assert with_state_one == with_state_two == total - retriever_parameters, (with_state_one, with_state_two, total)
    for output in (one, two):
        record = json.loads((output / "trainer_state.json").read_text())["retriever_learning"]
        assert record["steps_learning"] == 0 and record["steps_total"] == 4
