"""benchmarks/bench_step_overhead.py runs through both real trainers on a few embedded articles and writes every
phase of their steps, and leaves the process as it found it (TINY_BERT, torch threads, the garbage collector's
callbacks, evaluation.retrieve_blocks)."""

import gc
import json
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
import bench_step_overhead  # noqa: E402

import realm_hf.evaluation.retrieval  # noqa: E402
from realm_hf.training import models  # noqa: E402

QUESTIONS = [
    {"question": "what is the capital of france?", "answers": ["Paris"]},
    {"question": "who wrote hamlet?", "answers": ["Shakespeare", "William Shakespeare"]},
    {"question": "when did the war end?", "answers": ["19(18|45)"], "answer_format": "regex"},
    {"question": "what river flows through egypt?", "answers": ["Nile"]},
]


@pytest.mark.usefixtures("restore_logging")
def test_bench_step_overhead_times_every_phase_of_both_trainers(tmp_path):
    qa = tmp_path / "qa.jsonl"
    qa.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS * 2))
    output = tmp_path / "overhead.json"
    tiny, threads, callbacks = dict(models.TINY_BERT), torch.get_num_threads(), list(gc.callbacks)
    retrieve_blocks = realm_hf.evaluation.retrieval.retrieve_blocks
    bench_step_overhead.main([
        "--corpus", "embedded", "--articles", "40", "--masking", "random_span", "--qa_file", str(qa),
        "--batch_size", "4", "--warmup_steps", "2", "--steps", "2", "--skip", "0", "--profile_steps", "1",
        "--search_blocks", "500", "--cache_dir", str(tmp_path / "cache"), "--output", str(output),
    ])
    assert models.TINY_BERT == tiny and torch.get_num_threads() == threads and gc.callbacks == callbacks
    assert realm_hf.evaluation.retrieval.retrieve_blocks is retrieve_blocks

    result = json.loads(output.read_text())["this tree"]
    pretrain, openqa = result["runs"]["pretrain"], result["runs"]["openqa"]
    assert set(pretrain["timings"]) == {"reading warm-up", "retrieval"}
    retrieval = pretrain["timings"]["retrieval"]["phases"]
    for phase in ("data (DataLoader next)", "query embedding", "index search", "block fetch (get_blocks)",
                  "collation", "forward", "backward", "optimizer+sched+zero_grad"):
        assert retrieval[phase]["median_ms"] > 0, phase
    assert pretrain["timings"]["reading warm-up"]["phases"]["index search"]["median_ms"] == 0  # no search then
    for step in pretrain["samples"]["retrieval"]:  # the phases and the rest add up to the step
        parts = sum(step.get(phase, 0.0) for phase in bench_step_overhead.PRETRAIN_PHASES)
        assert abs(parts - step["total"]) < 1e-6 * max(1.0, step["total"])
        assert step["host"] == step["total"] - step["forward"] - step["backward"]
    qa_phases = openqa["timings"]["top-5 retrieval"]["phases"]
    for phase in ("retrieve: tokenize+embed", "index search", "block fetch (get_blocks)", "collation", "forward"):
        assert qa_phases[phase]["median_ms"] > 0, phase
    assert "cumulative" in pretrain["profile"] and "tottime" in openqa["profile"]
    assert result["search_at_scale"]["blocks"] == 500 and result["search_at_scale"]["median_ms"] > 0
