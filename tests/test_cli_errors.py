"""Bad inputs to `realm-hf <command>`: one line on stderr naming the value and the fix, exit status 2, no traceback
(unless `--debug`); every argument checked before a model is loaded or data is prepared."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_helpers import realm_hf_command
from openqa_helpers import ARTICLES, QUESTIONS, write_jsonl

from realm_hf.cli import main
from realm_hf.corpus.articles import load_articles
from realm_hf.utils.options import UsageError

MISSING_MODEL = os.path.join(os.sep, "nonexistent", "realm-model")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cli_errors")
    malformed = directory / "malformed.jsonl"
    malformed.write_text('{"id": "1", "title": "A", "text": "a b c"}\n\n{"id": "2", "title": "B", "text": oops}\n')
    return {
        "dir": directory,
        "corpus": write_jsonl(directory / "articles.jsonl", ARTICLES),
        "qa": write_jsonl(directory / "qa.jsonl", QUESTIONS),
        "malformed": str(malformed),
    }


def error_line(capsys, command: str) -> str:
    """The one line a bad input prints; fails unless stderr holds exactly it and no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip() and "Generating train split" not in line]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"realm-hf {command}: error: ")
    return lines[0]


def test_a_model_directory_that_does_not_exist(capsys):
    assert main(["ask", "who wrote hamlet", "--model", MISSING_MODEL]) == 2
    line = error_line(capsys, "ask")
    assert f"--model {MISSING_MODEL!r}: no such directory" in line and "RealmForOpenQA directory" in line
    assert "Repo id" not in line and "connection" not in line.lower()


def test_a_relative_model_path_is_not_taken_for_a_hub_repo_offline(capsys, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert main(["ask", "who wrote hamlet", "--model", "outputs/no-such-run"]) == 2
    line = error_line(capsys, "ask")
    assert "--model 'outputs/no-such-run': no such directory, and no Hub repo of that name in the local cache" in line


def test_a_run_directory_instead_of_its_final_model(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "final").mkdir(parents=True)
    (run / "final" / "config.json").write_text("{}")
    assert main(["ask", "who wrote hamlet", "--model", str(run)]) == 2
    line = error_line(capsys, "ask")
    assert f"--model {str(run)!r} holds no config.json, so no model; did you mean {run / 'final'}?" in line


def test_a_corpus_whose_titles_are_not_text(tmp_path, capsys):
    corpus = write_jsonl(tmp_path / "lists.jsonl", [{"title": "A", "text": "a"}, {"title": ["B"], "text": "b"}])
    status = main(["build-index", "--corpus", corpus, "--output", str(tmp_path / "index"),
                   "--index-type", "torch-exact"])
    assert status == 2
    line = error_line(capsys, "build-index")
    assert "Article columns ['title'] must hold strings" in line and corpus in line


def test_a_malformed_jsonl_corpus_names_file_and_line(data, tmp_path, capsys):
    status = main(["build-index", "--corpus", data["malformed"], "--output", str(tmp_path / "index"),
                   "--index-type", "torch-exact"])
    assert status == 2
    line = error_line(capsys, "build-index")
    assert f"{data['malformed']}:3 is not valid JSON" in line
    assert not (tmp_path / "index").exists()


def test_the_corpus_loader_names_file_and_line(data):
    with pytest.raises(ValueError, match=r"malformed\.jsonl:3 is not valid JSON"):
        load_articles(data["malformed"])


def test_a_missing_corpus(tmp_path, capsys):
    missing = str(tmp_path / "missing.jsonl")
    assert main(["build-index", "--corpus", missing, "--output", str(tmp_path / "index")]) == 2
    line = error_line(capsys, "build-index")
    assert f"--corpus {missing!r}: no article file" in line and "'embedded'" in line


def test_an_index_type_typo_in_build_index(data, tmp_path, capsys):
    pytest.importorskip("faiss")
    status = main(["build-index", "--corpus", data["corpus"], "--output", str(tmp_path / "index"),
                   "--index-type", "HNSW32x"])
    assert status == 2
    assert "--index-type 'HNSW32x' is not an index type realm_hf builds" in error_line(capsys, "build-index")


@pytest.mark.parametrize("command", ["pretrain", "finetune"])
def test_an_index_type_typo_is_refused_before_any_data_preparation(command, data, tmp_path, capsys):
    pytest.importorskip("faiss")
    output = tmp_path / "run"
    argv = [command, "--output_dir", str(output), "--random_init", "--corpus", data["corpus"], "--index_type", "Flatt"]
    if command == "finetune":
        argv += ["--train_file", data["qa"]]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "--index_type 'Flatt' is not an index type realm_hf builds" in error_line(capsys, command)
    assert not output.exists()  # refused before the trainer made its output directory


@pytest.mark.parametrize(
    "command, option, value, expected",
    [
        ("finetune", "--train_file", "no-such-qa.jsonl", "No QA file at no-such-qa.jsonl"),
        ("pretrain", "--corpus", "no-such-corpus.jsonl", "no article file"),
        ("pretrain", "--refresh_schedule", "every-100", "Cannot parse refresh schedule"),
        ("evaluate", "--model", MISSING_MODEL, "no such directory"),
    ],
)
def test_training_job_arguments_are_checked_first(command, option, value, expected, data, tmp_path, capsys):
    argv = [command, option, value]
    if command == "evaluate":
        argv += ["--qa_file", data["qa"]]
    else:
        argv += ["--output_dir", str(tmp_path / "run"), "--random_init"]
        if command == "finetune":
            argv += ["--corpus", data["corpus"]]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    line = error_line(capsys, command)
    assert f"{option} {value!r}" in line or option in line
    assert expected in line


@pytest.mark.parametrize("query", ["", "   "])
def test_search_refuses_an_empty_query(query, capsys):
    assert main(["search", "--index", "no-index", query]) == 2
    assert "query 1 is empty" in error_line(capsys, "search")


def test_search_refuses_a_missing_index(capsys):
    assert main(["search", "--index", "no-such-index", "who wrote hamlet"]) == 2
    assert "--index 'no-such-index': no such directory, so no index" in error_line(capsys, "search")


def test_ask_refuses_an_empty_second_question(capsys):
    assert main(["ask", "who wrote hamlet", " ", "--model", MISSING_MODEL]) == 2
    assert "question 2 is empty" in error_line(capsys, "ask")


def test_debug_shows_the_traceback():
    with pytest.raises(UsageError, match="no such directory"):
        main(["--debug", "ask", "who wrote hamlet", "--model", MISSING_MODEL])


def test_the_console_command_prints_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "realm_hf.cli", "search", "--index", "no-such-index", "who wrote hamlet"],
        capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=120,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "realm-hf search: error: --index 'no-such-index': no such directory, so no index; pass a directory written "
        "by `realm-hf build-index --output DIR` or a trainer's <output_dir>/final/index."
    ]


def test_demo_refuses_an_empty_question_before_any_work(tmp_path, capsys):
    output = tmp_path / "demo"
    assert main(["demo", "--recipe", "wikipedia-qa", "--output", str(output), "--question", "who wrote hamlet", "--question", " "]) == 2
    assert "question 2 is empty" in error_line(capsys, "demo")
    assert not output.exists()


# ------------------------------------------------------------------- a model folder of the wrong kind, or not there
@pytest.mark.parametrize("command", ["ask", "evaluate"])
def test_a_pretraining_output_given_to_an_open_qa_command(command, pretrain_output, data):
    """A fresh `realm-hf` process: one line saying what the folder is and what to use, none of transformers' lines."""
    final = str(pretrain_output)
    args = ["ask", "who wrote hamlet", "--model", final] if command == "ask" else [
        "evaluate", "--model", final, "--qa_file", data["qa"]]
    done = realm_hf_command(*args)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"realm-hf {command}: error: --model {final!r} is a REALM pre-training output")
    assert "pipeline(\"realm-fill-mask\"" in lines[0] and f"realm-hf finetune --model {final}" in lines[0]


@pytest.mark.parametrize(
    "command, model, writer",
    [
        ("ask", "outputs/demo-wikipedia-qa/openqa/final", "realm-hf demo --recipe wikipedia-qa"),
        ("evaluate", "outputs/demo-wikipedia-qa/openqa/final", "realm-hf demo --recipe wikipedia-qa"),
        ("ask", "outputs/demo/realm/final", "realm-hf demo"),
    ],
)
def test_a_demo_model_not_made_yet_names_the_command_that_makes_it(command, model, writer, data, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["ask", "who wrote hamlet", "--model", model] if command == "ask" else [
        "evaluate", "--model", model, "--qa_file", data["qa"]]
    assert main(args) == 2
    line = error_line(capsys, command)
    assert f"--model {model!r}: no such directory yet; `{writer}` writes it" in line


def test_a_missing_final_folder_names_the_training_that_writes_it(tmp_path, capsys):
    model = str(tmp_path / "my-run" / "final")
    assert main(["ask", "who wrote hamlet", "--model", model]) == 2
    line = error_line(capsys, "ask")
    assert f"--output_dir {tmp_path / 'my-run'}" in line and "realm-hf finetune" in line


def test_search_with_another_model_than_the_one_that_built_the_index(pretrain_output, capsys):
    """The default `--model minilm` (384 dims) on a trained model's index (128): the fix is that model's folder."""
    index = str(pretrain_output / "index")
    assert main(["search", "--index", index, "who wrote hamlet"]) == 2
    line = error_line(capsys, "search")
    assert "'minilm' embeds queries in 384 dims" in line and "128-dim model (doc-tower fingerprint " in line
    assert line.endswith(f"--model {pretrain_output}.")
    assert "RealmIndex.build" not in line


def test_search_with_the_model_that_built_the_index(pretrain_output, capsys):
    assert main(["search", "--index", str(pretrain_output / "index"), "--model", str(pretrain_output), "-k", "2",
                 "who wrote hamlet"]) == 0
    assert "1. [" in capsys.readouterr().out


def test_missing_data_is_named_before_a_missing_model(tmp_path):
    """On a machine without the corpus, the error is about the corpus (and says where it comes from), even when a
    model path of the same command is missing too (a later stage's output)."""
    from realm_hf.training.arguments import CorpusArguments, ModelArguments
    from realm_hf.training.entry_points import check_arguments
    from realm_hf.utils.options import UsageError

    corpus = str(tmp_path / "wiki-2015")
    with pytest.raises(UsageError, match=r"^--corpus '.*wiki-2015': no article file .*docs/data\.md"):
        check_arguments([ModelArguments(encoder=str(tmp_path / "stage-1" / "encoder")), CorpusArguments(corpus=corpus)])


# ------------------------------------------------------------------- corpora that are empty, or articles without text
@pytest.mark.parametrize("content, expected", [("", "is empty (0 bytes), so it holds no article"),
                                               ("\n  \n", "holds no article (only blank lines)")])
def test_an_empty_corpus_file(content, expected, tmp_path, capsys):
    corpus = tmp_path / "empty.jsonl"
    corpus.write_text(content)
    status = main(["build-index", "--corpus", str(corpus), "--output", str(tmp_path / "index"),
                   "--index-type", "torch-exact"])
    assert status == 2
    line = error_line(capsys, "build-index")
    assert f"{corpus} {expected}" in line and "StopIteration" not in line
    assert not (tmp_path / "index").exists()


def test_pretraining_on_an_empty_corpus(tmp_path):
    corpus = tmp_path / "empty.jsonl"
    corpus.write_text("")
    done = realm_hf_command("pretrain", "--output_dir", str(tmp_path / "run"), "--random_init", "--corpus", str(corpus))
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip() and "Generating train split" not in line]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"realm-hf pretrain: error: {corpus} is empty (0 bytes)")


def test_an_article_without_text_is_refused_by_file_and_line(tmp_path, capsys):
    rows = [{"title": f"T{i}", "text": f"article number {i}"} for i in range(10)]
    corpus = write_jsonl(tmp_path / "articles.jsonl", rows[:5] + [{"title": "No body"}] + rows[5:])
    status = main(["build-index", "--corpus", corpus, "--output", str(tmp_path / "index"),
                   "--index-type", "torch-exact"])
    assert status == 2
    line = error_line(capsys, "build-index")
    assert f"{corpus}:6 has no 'text' (1 article in all)" in line
    assert not (tmp_path / "index").exists()


def test_articles_without_text_or_title_in_memory_are_refused():
    with pytest.raises(ValueError, match=r"^article 1 \(counting from 0\) of the list given has no 'text'"):
        load_articles([{"title": "A", "text": "a"}, {"title": "B"}])
    with pytest.raises(ValueError, match=r"^article 1 \(counting from 0\) of the list given has no 'title'"):
        load_articles([{"title": "A", "text": "a"}, {"text": "b"}])
    assert load_articles([{"title": "A", "text": ""}])["text"] == [""]  # an empty body is an article (no block)


def test_a_broken_jsonl_line_gives_json_s_whole_reason(tmp_path):
    corpus = tmp_path / "control.jsonl"
    corpus.write_text('{"title": "A", "text": "a"}\n{"title": "B", "text": "tab\there"}\n')
    with pytest.raises(ValueError) as error:
        load_articles(str(corpus))
    assert f"{corpus}:2 is not valid JSON (Invalid control character at column 28)" in str(error.value)


# ----------------------------------------------------------------------------------- the Hub offline, an index folder
def test_download_offline_of_a_repo_not_in_the_cache(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    assert main(["download", "org/realm-openqa", "--cache-dir", str(tmp_path / "cache")]) == 2
    line = error_line(capsys, "download")
    assert "'org/realm-openqa' is not in the Hugging Face cache" in line and "HF_HUB_OFFLINE=1 is set" in line
    assert "unset HF_HUB_OFFLINE" in line and "local_files_only" not in line


def test_an_index_folder_given_as_the_model(tmp_path, capsys):
    model = tmp_path / "final"
    (model / "index").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "index" / "manifest.json").write_text("{}")
    index = str(model / "index")
    assert main(["ask", "who wrote hamlet", "--model", index]) == 2
    line = error_line(capsys, "ask")
    assert line.endswith(f"--model {index!r} is an index folder (manifest.json), not a model; pass the model it "
                         f"belongs to (--model {model}, --index {index}).")
    lone = tmp_path / "lone-index"
    lone.mkdir()
    (lone / "manifest.json").write_text("{}")
    assert main(["build-index", "--corpus", "embedded", "--model", str(lone), "--output", str(tmp_path / "out")]) == 2
    assert f"(--model MODEL, --index {lone})" in error_line(capsys, "build-index")


def test_no_deepspeed_notice_on_a_run_that_does_not_use_it(tmp_path):
    """accelerate imports DeepSpeed (when installed) at every save_pretrained: its CPU notice is not shown."""
    done = realm_hf_command("convert", "--src", os.path.join(os.path.dirname(__file__), "fixtures", "old_realm",
                                                             "embedder"), "--output", str(tmp_path / "converted"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "real_accelerator" not in done.stdout + done.stderr
