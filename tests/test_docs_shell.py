"""Every shell line of README.md and docs/*.md (```bash, ```sh, ```shell blocks) runs from a clean checkout, or is
marked and, for missing data, stops in one line.

The lines run in order, page after page (README first), in one working directory: a copy of the checkout's
`examples/`, `benchmarks/`, `docs/` and `model_cards/` with no `../shared` beside it, holding what the README's demo
writes (at test size, `markdown_blocks.docs_workdir`) and a Hugging Face cache of the Hub repos the pages name,
offline (`HF_HUB_OFFLINE=1`). `realm-hf ...` lines run through the console script's own function
(`realm_hf.cli.main`) and `python examples/*.py` lines through `runpy`, in this process (a new interpreter per line
would cost most of the time); `accelerate launch` lines run as they are written, in a new process.

Marks, in the line's comment or, for a whole block, in `<!-- shell: MARK -->` right above its fence:
- `[long]`: installs, the demo itself, the test suite, benchmarks: not run here (CI runs the demo another way);
- `[needs-gpu]`: not run here;
- `[needs-data]`: the real corpora and QA sets of docs/data.md, or files of your own: run, and it must stop with a
  non-zero status and one line on stderr (the error naming the option and the fix).
Lines that would run for minutes are shortened by the flags of `SHORTER`, appended to them (later flags win). The
smoke runs appear on several pages, each writing its config's output_dir: after the first, each starts afresh there
(`--overwrite_output_dir`, as a reader who reruns one must; without it the run is refused in one line).
"""

from __future__ import annotations

import os
import re
import runpy
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from markdown_blocks import DOCS, README, REPO, RUN_ALONE, TINY_OPEN_QA, docs_workdir, enter_workdir  # noqa: F401 (a fixture)
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

MARKS = ("long", "needs-gpu", "needs-data")
BLOCK = re.compile(r"(?:<!--\s*shell:\s*([\w, -]+?)\s*-->\n)?^```(?:bash|sh|shell)[^\n]*\n(.*?)^```", re.M | re.S)
SHORTER = {
    "realm-hf pretrain --config examples/configs/cpu-tiny.yaml": [
        "--max_steps", "2", "--max_articles", "10", "--overwrite_output_dir"],
    "examples/pretrain.py --config examples/configs/cpu-tiny.yaml": ["--max_steps", "2", "--max_articles", "10"],
    "realm-hf build-index --corpus embedded": ["--max-articles", "20"],
    "realm-hf ict --config examples/configs/ict-cpu-tiny.yaml": [
        "--max_steps", "2", "--max_articles", "10", "--overwrite_output_dir"],
    "realm-hf mlm --config examples/configs/wiki-tiny-mlm.yaml": [
        "--max_steps", "2", "--max_articles", "10", "--overwrite_output_dir"],
    "realm-hf finetune --config examples/configs/openqa-cpu-tiny.yaml": TINY_OPEN_QA,
    "realm-hf evaluate --model outputs/openqa-tiny/final": ["--max_questions", "2"],
}
"""Flags appended to the lines that start with these words: the same job, seconds instead of minutes."""


def shell_commands(page: Path) -> list[tuple[int, str, set[str]]]:
    """(line number, command with its continuation lines joined, marks) of each shell line of `page`."""
    text = page.read_text(encoding="utf-8")
    commands = []
    for block in BLOCK.finditer(text):
        block_marks = {mark.strip() for mark in (block.group(1) or "").split(",") if mark.strip()}
        first = text[: block.start(2)].count("\n") + 1
        code, comments, start = "", "", None
        for offset, line in enumerate(block.group(2).splitlines()):
            if not code and (not line.strip() or line.lstrip().startswith("#")):
                continue
            start = first + offset if not code else start
            part, _, comment = line.partition(" # ")
            code += " " + part.rstrip().removesuffix("\\").strip()
            comments += " " + comment
            if not part.rstrip().endswith("\\"):
                marks = block_marks | set(re.findall(r"\[(" + "|".join(MARKS) + r")\]", comments))
                commands.append((start, " ".join(code.split()), marks))
                code, comments = "", ""
    return commands


PAGES = [README, *DOCS]
COMMANDS = [
    pytest.param(page, line, command, marks, id=f"{page.relative_to(REPO).as_posix()}:{line}")
    for page in PAGES if page.name not in RUN_ALONE for line, command, marks in shell_commands(page)
]


def test_the_pages_have_shell_lines_and_every_mark_is_known():
    assert len(COMMANDS) >= 40
    for page in PAGES:
        for mark in re.findall(r"\[((?:needs|long)[\w-]*)\]", page.read_text(encoding="utf-8")):
            assert mark in MARKS, f"{page.name}: unknown mark [{mark}]; the test knows {MARKS}"


def test_the_marks_are_read():
    lines = {command: marks for _, command, marks in shell_commands(README)}
    assert lines["realm-hf pretrain --config examples/configs/cpu-small.yaml"] == {"needs-data"}
    assert lines["realm-hf pretrain --config examples/configs/cpu-tiny.yaml"] == set()


@pytest.fixture(scope="module")
def shell_workdir(docs_workdir, tmp_path_factory) -> Path:
    """A clean checkout's files and the pages' demo outputs and Hub cache, without `../shared` beside it."""
    directory = tmp_path_factory.mktemp("clone") / "realm_hf"
    for name in ("examples", "benchmarks", "docs", "model_cards"):
        shutil.copytree(REPO / name, directory / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("outputs", "hf"):
        shutil.copytree(docs_workdir / name, directory / name, symlinks=True)
    assert not (directory.parent / "shared").exists()
    return directory


def run_command(words: list[str], directory: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run one command of a line (no `&&`) in `directory`; its exit status."""
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):  # VAR=value before the command
        name, _, value = words.pop(0).partition("=")
        monkeypatch.setenv(name, value)
    program, args = words[0], words[1:]
    if program in ("realm-hf", "python") and (program == "realm-hf" or args[0].startswith("examples/")):
        from realm_hf.cli import main

        try:  # as the console script and the interpreter end: a return value or SystemExit
            if program == "realm-hf":
                return main(args)
            monkeypatch.setattr(sys, "argv", args)
            runpy.run_path(args[0], run_name="__main__")
            return 0
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    if program == "accelerate":
        env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
        return subprocess.run(words, cwd=directory, env=env, timeout=600).returncode
    raise AssertionError(f"{program!r}: the test does not know how to run it; mark the line")


@pytest.mark.parametrize("page,line,command,marks", COMMANDS)
def test_shell_line(page, line, command, marks, shell_workdir, monkeypatch, capfd):
    if marks & {"long", "needs-gpu"}:
        pytest.skip(f"marked {sorted(marks)}: not run here")
    enter_workdir(shell_workdir, monkeypatch)
    for part in command.split(" && "):
        words = shlex.split(part)
        text = " ".join(words)
        words += next((extra for start, extra in SHORTER.items() if text.startswith(start) or
                       text.startswith("accelerate launch " + start)), [])
        status = run_command(words, shell_workdir, monkeypatch)
        stderr = capfd.readouterr().err
        if "needs-data" in marks:
            lines = [row for row in stderr.replace("\r", "\n").splitlines() if row.strip()]
            assert status not in (0, None), f"{command}: marked needs-data, but it ran without the data"
            assert len(lines) == 1, f"{command}: say what is missing in one line, not {len(lines)}: {lines[-5:]}"
            return
        assert status in (0, None), f"{command}: exit status {status}: {stderr[-3000:]}"
