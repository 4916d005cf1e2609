"""Real outputs of the training commands, made cheaply (tiny random models, 2 steps) by `realm_hf.cli.main` in this
process: a REALM pre-training `final/` (retriever/ + encoder/ + index/), an ICT `final/` (a RealmRetriever) and an
Open-QA fine-tuning `final/` (a RealmForOpenQA + index/). The session fixtures of tests/conftest.py build each once."""

from __future__ import annotations

import os
from pathlib import Path

from openqa_helpers import ARTICLES, QUESTIONS, write_jsonl

CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "configs"

FINETUNE_CONFIG = """\
max_steps: 30
per_device_batch_size: 5
learning_rate: 0.002
logging_steps: 1
save_steps: 0
report_to: none
random_init: true
pooling: mean
projection_size: 16
block_length: 64
query_max_length: 32
joined_max_length: 96
index_type: torch-exact
embed_dtype: float32
embed_batch_size: 8
top_k: 3
eval_batch_size: 4
"""
"""The Open-QA settings of tests/training/test_openqa.py, as a YAML config (corpus and QA files appended)."""

PRETRAIN_ARGS = [
    "--max_steps", "2", "--max_articles", "6", "--refresh_schedule", "0", "--save_steps", "0",
    "--eval_mlm_examples", "0", "--report_to", "none", "--logging_steps", "1",
]
"""A 2-step run of examples/configs/cpu-tiny.yaml (random models, 6 embedded articles)."""


def write_qa_data(directory: Path) -> dict[str, str]:
    """The synthetic articles and questions of tests/openqa_helpers as JSONL files, and the fine-tuning config."""
    corpus = write_jsonl(directory / "articles.jsonl", ARTICLES)
    qa = write_jsonl(directory / "qa.jsonl", QUESTIONS)
    config = directory / "openqa-tiny.yaml"
    config.write_text(FINETUNE_CONFIG + f"corpus: {corpus}\ntrain_file: {qa}\neval_file: {qa}\n")
    return {"corpus": corpus, "qa": qa, "config": str(config)}


def _run(argv: list[str]) -> None:
    from realm_hf.cli import main

    status = main(argv)
    assert status == 0, f"realm-hf {' '.join(argv)} exited {status}"


def make_pretrain_output(output: Path) -> Path:
    """`realm-hf pretrain --config cpu-tiny.yaml` for 2 steps; returns its `final/`."""
    _run(["pretrain", "--config", os.fspath(CONFIGS / "cpu-tiny.yaml"), "--output_dir", os.fspath(output), *PRETRAIN_ARGS])
    return output / "final"


def make_ict_output(output: Path) -> Path:
    """`realm-hf ict --config ict-cpu-tiny.yaml` for 2 steps; returns its `final/`."""
    _run([
        "ict", "--config", os.fspath(CONFIGS / "ict-cpu-tiny.yaml"), "--output_dir", os.fspath(output),
        "--max_steps", "2", "--max_articles", "8", "--report_to", "none", "--logging_steps", "1",
    ])
    return output / "final"


def make_finetune_output(output: Path, qa_data: dict[str, str]) -> Path:
    """`realm-hf finetune` of the tiny config above for 2 steps; returns its `final/`."""
    _run(["finetune", "--config", qa_data["config"], "--output_dir", os.fspath(output), "--max_steps", "2"])
    return output / "final"
