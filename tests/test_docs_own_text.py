"""docs/own-text.md end to end: its python and shell blocks in page order, in a fresh folder, offline (corpus →
index → pre-training → fill-mask → questions → fine-tuning → ask). The training lines run with fewer steps
(`SHORTER`): the same commands, seconds instead of minutes."""

from __future__ import annotations

import json
import shlex
import time

import pytest
from markdown_blocks import REPO, python_blocks
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)
from test_docs_shell import run_command, shell_commands

PAGE = REPO / "docs" / "own-text.md"
SHORTER = {
    "realm-hf pretrain": ["--max_steps", "3", "--reading_warmup_steps", "2", "--refresh_schedule", "0"],
    "realm-hf finetune": ["--max_steps", "2"],
}
"""Flags appended to the page's training lines (later flags win)."""


def page_steps() -> list[tuple[int, str, str]]:
    """(line, "python" or "shell", code) of every block of the page, in page order."""
    text = PAGE.read_text(encoding="utf-8")
    steps = [(line, "python", code) for line, code in python_blocks(text)]
    steps += [(line, "shell", command) for line, command, _ in shell_commands(PAGE)]
    return sorted(steps)


def test_the_page_walks_every_step():
    shell = " ".join(code for _, kind, code in page_steps() if kind == "shell")
    for command in ("realm-hf build-index", "realm-hf pretrain", "realm-hf finetune", "realm-hf ask"):
        assert command in shell
    assert "--corpus" not in shell.split("realm-hf finetune")[1]  # the model's own corpus, taken from its record
    assert "realm-fill-mask" in PAGE.read_text(encoding="utf-8")


def test_the_page_runs_in_order(tmp_path, monkeypatch, capfd):
    pytest.importorskip("spacy")
    pytest.importorskip("faiss")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    began, timings = time.perf_counter(), []
    for line, kind, code in page_steps():
        started = time.perf_counter()
        if kind == "python":
            exec(compile(code, f"{PAGE.name}:{line}", "exec"), {"__name__": "__markdown__"})  # noqa: S102 (our page)
        else:
            words = shlex.split(code)
            words += next((extra for start, extra in SHORTER.items() if code.startswith(start)), [])
            status = run_command(words, tmp_path, monkeypatch)
            assert status in (0, None), f"{PAGE.name}:{line}: {code}: exit status {status}: {capfd.readouterr().err[-3000:]}"
        timings.append(f"{PAGE.name}:{line} {time.perf_counter() - started:.0f}s")
    out = capfd.readouterr().out
    print(f"{PAGE.name} ran in {time.perf_counter() - began:.0f}s: {', '.join(timings)}")
    assert "Q: who built the larkspur lighthouse" in out  # realm-hf ask answered from the fine-tuned model
    record = json.loads((tmp_path / "outputs" / "my-qa" / "final" / "config.json").read_text())
    assert record["retriever_config"]["corpus"]["name"] == "my_articles.jsonl"
