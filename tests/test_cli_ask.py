"""`realm-hf ask`: one question, several answers, and --interactive over stdin."""

from __future__ import annotations

import io
import os
import re

import pytest
from realm_pipeline_helpers import ARTICLES, make_open_qa_dir

from realm_hf.cli import main
from realm_hf.cli.output import evidence_snippet

TITLES = {article["title"] for article in ARTICLES}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    return make_open_qa_dir(str(tmp_path_factory.mktemp("ask_model")))


def _answer_blocks(stdout: str) -> list[dict]:
    """Parse the printed answers: answer line, source line, evidence line."""
    pattern = re.compile(
        r"^A\d*: (?P<answer>.+)  \(score (?P<score>[0-9.]+)\)\n"
        r"   source: (?P<title>.+) \(block (?P<block>\d+)\)\n"
        r"   evidence: (?P<evidence>.+)$",
        re.MULTILINE,
    )
    return [match.groupdict() for match in pattern.finditer(stdout)]


def test_ask_prints_answer_title_and_marked_evidence(model_dir, capsys):
    assert main(["ask", "what is the capital of france?", "--model", model_dir]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Q: what is the capital of france?\n")
    (answer,) = _answer_blocks(out)
    assert answer["title"] in TITLES
    assert f"**{answer['answer']}**" in answer["evidence"]
    assert 0.0 < float(answer["score"]) <= 1.0


def test_ask_with_index_blocks_and_several_answers(model_dir, capsys):
    index = os.path.join(model_dir, "index")
    assert main(["ask", "who created python", "--model", model_dir, "--index", index, "-k", "2", "--answers", "3"]) == 0
    out = capsys.readouterr().out
    assert "Q: who created python" in out
    answers = _answer_blocks(out)
    assert len(answers) == 3
    assert [line.split(":")[0] for line in out.splitlines() if re.match(r"^A\d:", line)] == ["A1", "A2", "A3"]
    assert all(a["title"] in TITLES for a in answers)


def test_ask_answers_each_question_given(model_dir, capsys):
    assert main(["ask", "what is the capital of france?", "who walked on the moon", "--model", model_dir]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^Q: (.+)$", out, re.MULTILINE) == ["what is the capital of france?", "who walked on the moon"]
    assert len(_answer_blocks(out)) == 2


def test_search_shows_the_blocks_of_each_query(model_dir, capsys):
    index = os.path.join(model_dir, "index")
    assert main(["search", "--index", index, "--model", model_dir, "-k", "2", "capital of france", "moon landing"]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^Q: (.+)$", out, re.MULTILINE) == ["capital of france", "moon landing"]
    assert len(re.findall(r"^  \d\. \[", out, re.MULTILINE)) == 4


def test_ask_interactive_reads_stdin_until_eof(model_dir, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("which river flows through cairo\n\n   \nwho walked on the moon\n"))
    assert main(["ask", "--interactive", "--model", model_dir]) == 0
    out = capsys.readouterr().out
    assert re.findall(r"^Q: (.+)$", out, re.MULTILINE) == ["which river flows through cairo", "who walked on the moon"]
    assert len(_answer_blocks(out)) == 2


def test_ask_bad_usage_and_bad_question(model_dir, capsys):
    assert main(["ask", "--model", model_dir]) == 2
    assert "pass a question" in capsys.readouterr().err
    assert main(["ask", "a question", "--interactive", "--model", model_dir]) == 2
    assert main(["ask", "   ", "--model", model_dir]) == 2
    assert "empty" in capsys.readouterr().err
    assert main(["ask", "a question", "--model", model_dir, "--answers", "0"]) == 2


def test_evidence_snippet_keeps_the_marked_answer():
    evidence = "x" * 500 + " the **answer** " + "y" * 500
    snippet = evidence_snippet(evidence, width=40)
    assert "**answer**" in snippet and snippet.startswith("...") and snippet.endswith("...")
    assert len(snippet) < 140
    assert evidence_snippet("short **one** text") == "short **one** text"
