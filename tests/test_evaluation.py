"""Open-QA evaluation: batch-size invariance, EM / regex / Recall@k scoring, provenance, BM25 swap, bad input, and the
retriever-only `recall_at` pass (`retrieval_recall@k`, per-question `retrieval_hits`, `--recall_at`)."""

import json
import os
import re

import pytest
import torch
from openqa_helpers import ARTICLES, QUESTIONS, load_tokenizer, tiny_index, tiny_model
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf.evaluation import (
    block_embeddings,
    evaluate_open_qa,
    exact_match,
    has_answer,
    load_open_qa,
    parse_recall_at,
    recall_at_k,
    resolve_index_directory,
)
from realm_hf.checkpoints.index_location import resolve_model_index


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    tokenizer = load_tokenizer()
    model = tiny_model(tokenizer, top_k=3)
    index = tiny_index(model, tokenizer)
    return model, tokenizer, index


def test_block_embeddings_are_the_rows_the_index_searched(setup):
    model, tokenizer, index = setup
    ids = torch.tensor([[3, 0], [5, 5]])
    embeds = block_embeddings(index, ids)
    assert embeds.shape == (2, 2, index.dim) and embeds.dtype == torch.float32
    torch.testing.assert_close(embeds[0, 0], torch.from_numpy(index.embeddings[3]).float())
    with pytest.raises(KeyError):
        block_embeddings(index, torch.tensor([[99]]))


def test_predictions_do_not_depend_on_the_batch_size(setup):
    model, tokenizer, index = setup
    one, predictions_one = evaluate_open_qa(model, tokenizer, index, QUESTIONS, batch_size=1, progress=False)
    seven, predictions_seven = evaluate_open_qa(model, tokenizer, index, QUESTIONS, batch_size=7, progress=False)
    keys = ("id", "prediction", "block_id", "title", "retrieved_block_ids", "correct", "evidence")
    assert [{k: p[k] for k in keys} for p in predictions_one] == [{k: p[k] for k in keys} for p in predictions_seven]
    torch.testing.assert_close(
        torch.tensor([p["score"] for p in predictions_one]), torch.tensor([p["score"] for p in predictions_seven])
    )
    for name in ("exact_match", "recall@3", "recall@1", "answerable", "count"):
        assert one[name] == seven[name]
    assert one["count"] == len(QUESTIONS)
    assert not model.training


def test_predictions_carry_provenance_and_are_written(setup, tmp_path):
    model, tokenizer, index = setup
    path = tmp_path / "out" / "predictions.jsonl"
    _, predictions = evaluate_open_qa(model, tokenizer, index, QUESTIONS[:4], predictions_file=path, progress=False)
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert written == predictions
    titles = {a["title"] for a in ARTICLES}
    for prediction in predictions:
        assert prediction["prediction"] and prediction["title"] in titles
        assert prediction["block_id"] in prediction["retrieved_block_ids"] and len(prediction["retrieved_block_ids"]) == 3
        # the evidence is the block text with the predicted span marked
        assert f"**{prediction['prediction']}**" in prediction["evidence"]
        block = index.get_blocks([prediction["block_id"]])
        assert prediction["evidence"].replace("**", "") == block["text"][0]
        assert prediction["score"] <= 0 and 0 < prediction["retrieval_prob"] <= 1


def test_exact_match_and_regex_scoring(setup):
    model, tokenizer, index = setup
    _, predictions = evaluate_open_qa(model, tokenizer, index, QUESTIONS, progress=False)
    for prediction in predictions:
        assert prediction["correct"] == exact_match(
            prediction["prediction"], prediction["answers"], prediction["answer_format"]
        )
    # Re-ask the same questions with the model's own predictions as references (text, regex, wrong, mixed).
    said = [p["prediction"] for p in predictions]
    as_text = [dict(q, answers=[f"  {s.upper()}!"], answer_format="text") for q, s in zip(QUESTIONS, said)]
    as_regex = [dict(q, answers=[re.escape(s)], answer_format="regex") for q, s in zip(QUESTIONS, said)]
    wrong = [dict(q, answers=["zebra crossing"], answer_format="text") for q in QUESTIONS]
    half = as_text[:5] + wrong[5:]
    for examples, expected in ((as_text, 100.0), (as_regex, 100.0), (wrong, 0.0), (half, 50.0)):
        metrics, again = evaluate_open_qa(model, tokenizer, index, examples, batch_size=4, progress=False)
        assert [p["prediction"] for p in again] == said
        assert metrics["exact_match"] == expected, examples[0]
    # the reader's share: the "zebra crossing" half has its answer in no block, so it is left out, not counted wrong
    # (regex answers: found in a block by `re.search`, as the reader's own span always is)
    metrics, _ = evaluate_open_qa(model, tokenizer, index, as_regex[:5] + wrong[5:], progress=False)
    assert metrics["exact_match"] == 50.0 and metrics["reader_exact_match"] == 100.0
    assert "reader_exact_match" not in evaluate_open_qa(model, tokenizer, index, wrong, progress=False)[0]
    # a regex must match at the start of the prediction, not necessarily up to its end (DrQA / ORQA semantics)
    prefix = [dict(q, answers=[re.escape(s[:1])], answer_format="regex") for q, s in zip(QUESTIONS, said)]
    shifted = [dict(q, answers=["#" + re.escape(s)], answer_format="regex") for q, s in zip(QUESTIONS, said)]
    assert evaluate_open_qa(model, tokenizer, index, prefix, progress=False)[0]["exact_match"] == 100.0
    assert evaluate_open_qa(model, tokenizer, index, shifted, progress=False)[0]["exact_match"] == 0.0


def test_recall_at_k_uses_the_retrieved_blocks(setup):
    model, tokenizer, index = setup
    # every block holds "the"; nothing holds "zebra"; an answer only in the Sahara article is found when retrieved
    examples = [
        {"question": "what is everywhere", "answers": ["the"]},
        {"question": "what is nowhere", "answers": ["zebra"]},
        {"question": "which desert", "answers": ["Sahara"]},
    ]
    metrics, predictions = evaluate_open_qa(model, tokenizer, index, examples, top_k=len(ARTICLES), progress=False)
    assert [p["answer_in_top_k"] for p in predictions] == [True, False, True]
    assert metrics[f"recall@{len(ARTICLES)}"] == pytest.approx(200 / 3)
    # answerable: a gold span in the bodies the reader read ("Sahara" is in the body too)
    assert metrics["answerable"] == pytest.approx(200 / 3)


def test_bm25_retrieval_with_the_same_reader(setup):
    pytest.importorskip("bm25s")
    from realm_hf.index.bm25 import Bm25Retriever

    model, tokenizer, index = setup
    bm25 = Bm25Retriever(index)
    ids = bm25.search_text(["who discovered polonium", "which novel did herman melville write"], k=2)
    assert ids.shape == (2, 2) and ids.dtype == torch.long
    titles = index.get_blocks(ids[:, 0])["title"]
    assert titles == ["Marie Curie", "Moby-Dick"]
    ids, scores = bm25.search_text(["polonium"], k=3, return_scores=True)
    assert scores[0, 0] > 0 and (scores[0, 1:] == 0).all()
    metrics, predictions = evaluate_open_qa(model, tokenizer, index, QUESTIONS, retrieval="bm25", bm25=bm25, progress=False)
    assert all(p["retrieval"] == "bm25" for p in predictions)
    # lexical overlap finds the right article for these questions
    assert metrics["recall@3"] == 100.0
    with pytest.raises(ValueError, match="empty"):
        bm25.search_text(["ok", " "], k=2)
    with pytest.raises(ValueError, match="k must be"):
        bm25.search_text(["ok"], k=len(index) + 1)


@pytest.mark.parametrize(
    "examples, message",
    [
        ([QUESTIONS[0], {"question": "", "answers": ["x"]}], "empty question"),
        ([QUESTIONS[0], {"question": None, "answers": ["x"]}], "no question"),
        ([{"question": "who", "answers": []}], "no reference answers"),
        ([], "no examples"),
    ],
)
def test_bad_input_raises_clear_errors(setup, examples, message):
    model, tokenizer, index = setup
    with pytest.raises(ValueError, match=message):
        evaluate_open_qa(model, tokenizer, index, examples, progress=False)


def test_an_over_long_question_is_cut_named_once_and_counted_and_the_run_finishes(setup, caplog):
    model, tokenizer, index = setup
    long = {"id": "q-long", "question": "where " * 50 + QUESTIONS[3]["question"], "answers": ["x"]}
    examples = QUESTIONS[:5] + [long] + QUESTIONS[5:]  # in the second batch, after a batch has run
    with caplog.at_level("WARNING", logger="realm_hf"):
        metrics, predictions = evaluate_open_qa(model, tokenizer, index, examples, batch_size=4, progress=False)
    assert metrics["count"] == len(examples) and metrics["truncated_questions"] == 1
    assert [p["id"] for p in predictions] == [e.get("id", i) for i, e in enumerate(examples)]
    warnings = [r.getMessage() for r in caplog.records if "query_max_length" in r.getMessage()]
    assert len(warnings) == 1 and "1 of 11 questions" in warnings[0] and "id 'q-long' (" in warnings[0]
    plain, _ = evaluate_open_qa(model, tokenizer, index, QUESTIONS, batch_size=4, progress=False)
    assert plain["truncated_questions"] == 0

    # refused before any batch runs, naming the question and the fix
    with pytest.raises(ValueError, match=r"1 of 11 questions .* longer than query_max_length=\d+ .*id 'q-long' "
                                         r"\(\d+\)\. Pass truncate_questions=True"):
        evaluate_open_qa(model, tokenizer, index, examples, batch_size=4, progress=False, truncate_questions=False)


def test_bad_options_raise(setup):
    model, tokenizer, index = setup
    with pytest.raises(ValueError, match="batch_size"):
        evaluate_open_qa(model, tokenizer, index, QUESTIONS, batch_size=0)
    with pytest.raises(ValueError, match="retrieval"):
        evaluate_open_qa(model, tokenizer, index, QUESTIONS, retrieval="sparse")
    with pytest.raises(ValueError, match="k=99"):
        evaluate_open_qa(model, tokenizer, index, QUESTIONS, top_k=99)


@pytest.fixture
def saved_model(setup, tmp_path):
    """The tiny model in `<tmp>/models/model` with its index in `index/`, and a copy of that index in
    `<tmp>/other/index` (`../../other/index` from the model)."""
    model, tokenizer, index = setup
    model_dir = tmp_path / "models" / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    index.save_pretrained(model_dir / "index")
    index.save_pretrained(tmp_path / "other" / "index")
    _set_index_repo_id(model_dir, "index")
    return model_dir


def _set_index_repo_id(model_dir, value) -> None:
    config = json.loads((model_dir / "config.json").read_text())
    config["index_repo_id"] = value
    (model_dir / "config.json").write_text(json.dumps(config))


def test_evaluate_finds_the_index_by_the_pipelines_rules(saved_model, setup):
    expected = os.path.join(saved_model, "index")
    assert resolve_index_directory(saved_model, "index") == expected == resolve_model_index(saved_model, "index").directory
    assert resolve_index_directory(saved_model, None) == expected  # <model dir>/index needs no config entry
    model, tokenizer, index = load_open_qa(saved_model)
    assert index.num_blocks == setup[2].num_blocks
    with pytest.raises(FileNotFoundError, match="user/wiki-index"):  # a Hub dataset repo, not in the offline cache
        resolve_index_directory(saved_model.parent, "user/wiki-index")


@pytest.mark.parametrize("kind", ["dot-dot", "absolute"])
def test_evaluate_refuses_an_index_path_outside_the_model(saved_model, tmp_path, kind):
    value = "../../other/index" if kind == "dot-dot" else str(tmp_path / "other" / "index")
    with pytest.raises(ValueError, match=re.escape(f"config.index_repo_id={value!r}")):
        resolve_index_directory(saved_model, value)
    (saved_model / "index").rename(tmp_path / "moved")  # so that only the config's path could name an index
    _set_index_repo_id(saved_model, value)
    with pytest.raises(ValueError, match=re.escape(f"index={value!r}")):  # what `realm-hf evaluate` runs
        load_open_qa(saved_model)
    assert load_open_qa(saved_model, index_dir=tmp_path / "other" / "index")[2].num_blocks  # the user's own choice


def test_evaluate_never_reads_an_index_from_the_working_directory(saved_model, tmp_path, monkeypatch):
    os.rename(saved_model / "index", saved_model / "gone")
    monkeypatch.chdir(tmp_path / "other")  # ./index exists here, but "index" means <model dir>/index
    with pytest.raises(FileNotFoundError, match=re.escape(os.path.join(str(saved_model), "index", "manifest.json"))):
        resolve_index_directory(saved_model, "index")
    with pytest.raises(FileNotFoundError, match="model"):
        load_open_qa(saved_model)


# ----------------------------------------------------------------------------------- recall_at (retriever only)
def _recall_by_hand(model, tokenizer, index, examples, depth, bm25=None):
    """Per question, the title + body texts of its top-`depth` blocks, from one search done here (not by the code
    under test): the query tower and `index.search`, or `bm25.search_text`."""
    from realm_hf.evaluation import make_collator

    if bm25 is not None:
        block_ids = bm25.search_text([e["question"] for e in examples], depth)
    else:
        queries = make_collator(model, tokenizer).encode_questions(examples)
        with torch.no_grad():
            embeds = model.embed_queries(
                queries["query_input_ids"], queries["query_attention_mask"], queries["query_token_type_ids"]
            )
        _, block_ids = index.search(embeds, depth)
    rows = index.get_blocks(block_ids, columns=["title", "text"])
    return [[f"{t} {x}".strip() for t, x in zip(titles, texts)] for titles, texts in zip(rows["title"], rows["text"])]


def test_recall_at_is_the_recall_of_one_index_search(setup, tmp_path):
    model, tokenizer, index = setup
    depths = (1, 2, 4, index.num_blocks)
    # an answer only title + body hold ("Marie Curie" + " " + "Marie Curie discovered ...")
    examples = QUESTIONS + [{"question": "who was she", "answers": ["Curie Marie Curie"], "answer_format": "regex"}]
    path = tmp_path / "predictions.jsonl"
    metrics, predictions = evaluate_open_qa(
        model, tokenizer, index, examples, batch_size=3, recall_at=[4, 1, 2, index.num_blocks, 2],
        predictions_file=path, progress=False,
    )
    texts = _recall_by_hand(model, tokenizer, index, examples, index.num_blocks)
    references, formats = [q["answers"] for q in examples], [q["answer_format"] for q in examples]
    by_hand = {k: recall_at_k(texts, references, k, formats) for k in depths}
    assert {k: metrics[f"retrieval_recall@{k}"] for k in depths} == by_hand
    # every block searched: every answer found; the random retriever misses some at k=1, so the test can tell
    assert by_hand[index.num_blocks] == 100.0 and by_hand[1] < 100.0
    values = [metrics[f"retrieval_recall@{k}"] for k in depths]
    assert values == sorted(values)  # monotone in k
    # per-question hits, written with the predictions: their mean is the metric
    for prediction, question_texts, question in zip(predictions, texts, examples):
        assert list(prediction["retrieval_hits"]) == [str(k) for k in depths]
        for k in depths:
            found = any(has_answer(t, question["answers"], question["answer_format"]) for t in question_texts[:k])
            assert prediction["retrieval_hits"][str(k)] == found
    assert [json.loads(line)["retrieval_hits"] for line in path.read_text().splitlines()] == [
        p["retrieval_hits"] for p in predictions
    ]
    # the same figures at any batch size
    again = evaluate_open_qa(model, tokenizer, index, examples, batch_size=7, recall_at=depths, progress=False)[0]
    assert {k: again[f"retrieval_recall@{k}"] for k in depths} == by_hand


def test_recall_at_top_k_is_the_readers_recall_and_the_reader_is_unchanged(setup):
    model, tokenizer, index = setup
    plain, read = evaluate_open_qa(model, tokenizer, index, QUESTIONS, top_k=3, progress=False)
    metrics, predictions = evaluate_open_qa(
        model, tokenizer, index, QUESTIONS, top_k=3, recall_at=(1, 3, 5), progress=False
    )
    assert metrics["retrieval_recall@3"] == metrics["recall@3"] == plain["recall@3"]
    assert metrics["retrieval_recall@1"] == metrics["recall@1"]
    assert [p["retrieval_hits"]["3"] for p in predictions] == [p["answer_in_top_k"] for p in predictions]
    assert [{k: v for k, v in p.items() if k not in ("retrieval_hits", "score")} for p in predictions] == [
        {k: v for k, v in p.items() if k != "score"} for p in read
    ]
    assert "retrieval_hits" not in read[0] and not any(name.startswith("retrieval_recall") for name in plain)


def test_recall_at_with_bm25(setup):
    pytest.importorskip("bm25s")
    from realm_hf.index.bm25 import Bm25Retriever

    model, tokenizer, index = setup
    bm25 = Bm25Retriever(index)
    examples = [
        {"question": "who discovered polonium", "answers": ["Warsaw"]},  # Marie Curie's block, first for BM25
        {"question": "what did herman melville write", "answers": ["Africa"]},  # the Sahara's: not BM25's first
    ]
    metrics, predictions = evaluate_open_qa(
        model, tokenizer, index, examples, retrieval="bm25", bm25=bm25, recall_at=(1, 6), progress=False
    )
    texts = _recall_by_hand(model, tokenizer, index, examples, 6, bm25=bm25)
    assert metrics["retrieval_recall@1"] == recall_at_k(texts, [e["answers"] for e in examples], 1) == 50.0
    assert metrics["retrieval_recall@6"] == 100.0
    assert [p["retrieval_hits"] for p in predictions] == [{"1": True, "6": True}, {"1": False, "6": True}]


@pytest.mark.parametrize(
    "value, message",
    [
        ("5,x", "recall_at needs comma-separated positive integers, got '5,x'"),
        ("0,5", "got '0,5'"),
        ("", "got ''"),
        ([5, 0], r"recall_at needs a sequence of positive integers, got \[5, 0\]"),
        ([2.5], "got \\[2.5\\]"),
        ([True], "got \\[True\\]"),
        ((), "got \\(\\)"),
        ([99], "recall_at=99 is more than the 6 blocks of the index"),
    ],
)
def test_bad_recall_at_raises(setup, value, message):
    model, tokenizer, index = setup
    with pytest.raises(ValueError, match=message):
        evaluate_open_qa(model, tokenizer, index, QUESTIONS, recall_at=value, progress=False)


def test_parse_recall_at():
    assert parse_recall_at(None) is None
    assert parse_recall_at(" 100, 5,20,5") == (5, 20, 100)
    with pytest.raises(ValueError, match=re.escape("--recall_at needs comma-separated positive integers, got '5,-1'")):
        parse_recall_at("5,-1")


def test_the_recall_at_flag_reaches_the_evaluation(saved_model, tmp_path, capsys):
    from realm_hf.training import main_evaluate

    qa_file = tmp_path / "qa.jsonl"
    qa_file.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS[:4]))
    predictions_file = tmp_path / "predictions.jsonl"
    argv = ["--model", str(saved_model), "--qa_file", str(qa_file), "--predictions_file", str(predictions_file)]
    metrics = main_evaluate(argv + ["--recall_at", "6,1"], prog="realm-hf evaluate")
    assert metrics["retrieval_recall@6"] == 100.0 and "retrieval_recall@1" in metrics
    assert set(json.loads(predictions_file.read_text().splitlines()[0])["retrieval_hits"]) == {"1", "6"}
    assert "retrieval_recall@6" not in main_evaluate(argv, prog="realm-hf evaluate")
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main_evaluate(argv + ["--recall_at", "5,x"], prog="realm-hf evaluate")
    assert exit_info.value.code == 2
    assert "--recall_at needs comma-separated positive integers, got '5,x'" in capsys.readouterr().err


def test_evaluate_runs_the_model_on_the_device_given(saved_model, tmp_path, monkeypatch):
    from realm_hf.evaluation import loading as evaluation
    from realm_hf.training import main_evaluate
    from realm_hf.training.arguments import OpenQaEvaluationArguments
    from realm_hf.training.entry_points import parse_command_line

    devices, load = [], evaluation.load_open_qa

    def recording_load(*args, **kwargs):
        devices.append(kwargs["device"])
        loaded = load(*args, **kwargs)
        devices.append(next(loaded[0].parameters()).device.type)
        return loaded

    monkeypatch.setattr(evaluation, "load_open_qa", recording_load)
    qa_file = tmp_path / "qa.jsonl"
    qa_file.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS[:3]))
    argv = ["--model", str(saved_model), "--qa_file", str(qa_file)]
    (args,) = parse_command_line((OpenQaEvaluationArguments,), argv + ["--device", "cpu"], prog="realm-hf evaluate")
    assert args.device == "cpu"
    metrics = main_evaluate(argv + ["--device", "cpu"], prog="realm-hf evaluate")
    assert devices == ["cpu", "cpu"] and metrics["count"] == 3
    # without --device: cuda when there is one
    devices.clear()
    again = main_evaluate(argv, prog="realm-hf evaluate")
    assert {k: v for k, v in again.items() if k != "seconds"} == {k: v for k, v in metrics.items() if k != "seconds"}
    assert devices[0] == ("cuda" if torch.cuda.is_available() else "cpu")
