"""A fine-tuning without --corpus takes the corpus its model was pre-trained (or ICT-trained) on, recorded in the saved
configs, or refuses in one line: never the bundled Wikipedia in silence."""

from __future__ import annotations

import json
import logging
import os
import shutil

import pytest

from openqa_helpers import ARTICLES, QUESTIONS, write_jsonl
from training_outputs import CONFIGS

from realm_hf.cli import main
from realm_hf.training.trained_corpus import corpus_hint, corpus_record, recorded_corpus_path

pytest.importorskip("faiss")

FINETUNE = [
    "--train_file", "qa.jsonl", "--max_steps", "1", "--per_device_batch_size", "2", "--block_length", "64",
    "--query_max_length", "32", "--joined_max_length", "96", "--index_type", "torch-exact", "--embed_dtype", "float32",
    "--top_k", "2", "--report_to", "none", "--save_steps", "0", "--logging_steps", "1",
]


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A 2-step pre-training of cpu-tiny.yaml over the user's own articles.jsonl, run from the folder that holds it."""
    pytest.importorskip("spacy")
    folder = tmp_path_factory.mktemp("own_corpus")
    return _train_in(folder, [
        "pretrain", "--config", os.fspath(CONFIGS / "cpu-tiny.yaml"), "--output_dir", "realm", "--corpus",
        os.fspath(folder / "articles.jsonl"), "--max_steps", "2", "--refresh_schedule", "0", "--save_steps", "0",
        "--eval_mlm_examples", "0", "--report_to", "none",
    ])


def _train_in(folder, argv: list[str]):
    """Write articles.jsonl and qa.jsonl into `folder` and run `realm-hf ARGV` from it; returns the folder."""
    write_jsonl(folder / "articles.jsonl", ARTICLES)
    write_jsonl(folder / "qa.jsonl", QUESTIONS)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        assert main(argv) == 0
    finally:
        os.chdir(cwd)
    return folder


def _config(path) -> dict:
    return json.loads(path.read_text())


def test_the_pretraining_records_its_corpus_without_a_machine_path(pretrained):
    record = _config(pretrained / "realm" / "final" / "retriever" / "config.json")["corpus"]
    assert record == {"name": "articles.jsonl", "max_articles": 60, "blocks": len(ARTICLES)}


def _finetune(folder, output, *extra, monkeypatch):
    monkeypatch.chdir(folder)
    return main(["finetune", "--model", "realm/final", "--output_dir", output, *FINETUNE, *extra])


def test_finetune_without_corpus_takes_the_index_of_the_pretraining(pretrained, monkeypatch, caplog):
    with caplog.at_level(logging.INFO, logger="realm_hf"):
        assert _finetune(pretrained, "qa-own-index", monkeypatch=monkeypatch) == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("No --corpus")]
    assert lines == [
        f"No --corpus: fine-tuning over 'articles.jsonl' ({len(ARTICLES)} blocks, its first 60 articles), the corpus "
        f"realm/final was trained on (its index {os.path.join('realm/final', 'index')})"
    ]
    assert not any("embedded" in r.getMessage() for r in caplog.records)
    saved = _config(pretrained / "qa-own-index" / "final" / "config.json")
    assert saved["retriever_config"]["corpus"]["name"] == "articles.jsonl"


def test_finetune_without_corpus_indexes_the_recorded_corpus_when_the_model_has_no_index(
    pretrained, tmp_path, monkeypatch, caplog
):
    shutil.copytree(pretrained / "realm", tmp_path / "realm", ignore=shutil.ignore_patterns("index"))
    shutil.copy(pretrained / "articles.jsonl", tmp_path)
    shutil.copy(pretrained / "qa.jsonl", tmp_path)
    with caplog.at_level(logging.INFO, logger="realm_hf"):
        assert _finetune(tmp_path, "qa", monkeypatch=monkeypatch) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert f"No --corpus: indexing 'articles.jsonl' ({len(ARTICLES)} blocks, its first 60 articles), the corpus " \
        "realm/final was trained on" in messages
    assert f"Building the fixed index over {len(ARTICLES)} blocks of articles.jsonl" in messages


def test_finetune_without_corpus_refuses_when_the_corpus_is_gone(pretrained, tmp_path, monkeypatch, capsys):
    shutil.copytree(pretrained / "realm", tmp_path / "realm", ignore=shutil.ignore_patterns("index"))
    shutil.copy(pretrained / "qa.jsonl", tmp_path)
    assert _finetune(tmp_path, "qa", monkeypatch=monkeypatch) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"realm-hf finetune: error: --model realm/final was trained on the corpus 'articles.jsonl' ({len(ARTICLES)} "
        "blocks, its first 60 articles), which is not in this folder, and no --corpus was given: pass that corpus "
        "(or the one to answer from) with --corpus PATH."
    ]
    assert not (tmp_path / "qa" / "final").exists()


def test_a_given_corpus_wins_over_the_record(pretrained, tmp_path, monkeypatch, caplog):
    shutil.copytree(pretrained / "realm", tmp_path / "realm", ignore=shutil.ignore_patterns("index"))
    shutil.copy(pretrained / "qa.jsonl", tmp_path)
    write_jsonl(tmp_path / "other.jsonl", ARTICLES[:4])
    with caplog.at_level(logging.INFO, logger="realm_hf"):
        assert _finetune(tmp_path, "qa", "--corpus", "other.jsonl", monkeypatch=monkeypatch) == 0
    assert "Building the fixed index over 4 blocks of other.jsonl" in [r.getMessage() for r in caplog.records]
    assert _config(tmp_path / "qa" / "final" / "config.json")["retriever_config"]["corpus"] == {
        "name": "other.jsonl", "max_articles": None, "blocks": 4,
    }


def test_the_record_names_a_corpus_outside_the_working_directory_by_its_file_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    assert corpus_hint(os.fspath(tmp_path / "data" / "a.jsonl")) == os.path.join("data", "a.jsonl")
    assert corpus_hint("/elsewhere/b.jsonl,embedded") == "b.jsonl,embedded"
    assert recorded_corpus_path(corpus_record("embedded", 6, 9)) == "embedded"
    assert recorded_corpus_path(corpus_record("missing.jsonl", None, 9)) is None


def test_evaluate_names_the_corpus_of_the_index(pretrained, monkeypatch, caplog):
    monkeypatch.chdir(pretrained)
    if not (pretrained / "qa-own-index" / "final").is_dir():
        assert _finetune(pretrained, "qa-own-index", monkeypatch=monkeypatch) == 0
    with caplog.at_level(logging.INFO, logger="realm_hf"):
        assert main(["evaluate", "--model", "qa-own-index/final", "--qa_file", "qa.jsonl", "--max_questions", "2"]) == 0
    assert f"qa-own-index/final answers from its index over the corpus 'articles.jsonl' ({len(ARTICLES)} blocks, its " \
        "first 60 articles)" in [r.getMessage() for r in caplog.records]


ICT = [
    "--max_steps", "2", "--per_device_batch_size", "2", "--report_to", "none", "--save_steps", "0",
    "--logging_steps", "1",
]


@pytest.fixture(scope="module")
def ict_trained(tmp_path_factory):
    """A 2-step ICT run of ict-cpu-tiny.yaml over the user's own articles.jsonl, run from the folder that holds it."""
    return _train_in(tmp_path_factory.mktemp("ict_own_corpus"), [
        "ict", "--config", os.fspath(CONFIGS / "ict-cpu-tiny.yaml"), "--output_dir", "ict", "--corpus", "articles.jsonl",
        *ICT,
    ])


def test_ict_records_its_corpus(ict_trained):
    record = _config(ict_trained / "ict" / "final" / "config.json")["corpus"]
    assert record == {"name": "articles.jsonl", "max_articles": 40, "blocks": len(ARTICLES)}


def test_finetune_of_an_ict_retriever_without_corpus_indexes_its_corpus(ict_trained, monkeypatch, caplog):
    monkeypatch.chdir(ict_trained)
    with caplog.at_level(logging.INFO, logger="realm_hf"):
        assert main(["finetune", "--retriever", "ict/final", "--output_dir", "qa", *FINETUNE]) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert f"No --corpus: indexing 'articles.jsonl' ({len(ARTICLES)} blocks, its first 40 articles), the corpus " \
        "ict/final was trained on" in messages
    assert f"Building the fixed index over {len(ARTICLES)} blocks of articles.jsonl" in messages
    saved = _config(ict_trained / "qa" / "final" / "config.json")
    assert saved["retriever_config"]["corpus"]["name"] == "articles.jsonl"


def test_finetune_of_an_ict_model_refuses_when_its_corpus_is_gone(ict_trained, tmp_path, monkeypatch, capsys):
    shutil.copytree(ict_trained / "ict", tmp_path / "ict")
    shutil.copy(ict_trained / "qa.jsonl", tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["finetune", "--model", "ict/final", "--output_dir", "qa", *FINETUNE]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"realm-hf finetune: error: --model ict/final was trained on the corpus 'articles.jsonl' ({len(ARTICLES)} "
        "blocks, its first 40 articles), which is not in this folder, and no --corpus was given: pass that corpus "
        "(or the one to answer from) with --corpus PATH."
    ]
    assert not (tmp_path / "qa" / "final").exists()
