"""README.md stays a README, and every ```python block in it runs as written (tests/markdown_blocks.py): in a fresh
namespace, in a directory holding what the README's own commands write, offline, with the Hub repos it names in a
local Hugging Face cache."""

from __future__ import annotations

import pytest
from markdown_blocks import README, block_params, docs_workdir, python_blocks, run_block  # noqa: F401 (a fixture)
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

MAX_LINES = 250
BLOCKS = block_params([README])


def test_the_readme_is_short_and_has_python_blocks():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES, "the README is for users: move details to docs/"
    blocks = python_blocks(text)
    assert len(blocks) >= 3
    for line, code in blocks:
        compile(code, f"README.md:{line}", "exec")


@pytest.mark.parametrize("page,line,code", BLOCKS)
def test_readme_block_runs(page, line, code, docs_workdir, monkeypatch):
    run_block(page, line, code, docs_workdir, monkeypatch)
