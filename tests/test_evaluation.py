"""Open-QA evaluation: batch-size invariance, EM / regex / Recall@k scoring, provenance, BM25 swap, bad input."""

import json
import os
import re

import pytest
import torch
from openqa_helpers import ARTICLES, QUESTIONS, load_tokenizer, tiny_index, tiny_model
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf.evaluation import block_embeddings, evaluate_open_qa, load_open_qa, resolve_index_directory
from realm_hf.pipelines.index_loading import resolve_model_index
from realm_hf.metrics import exact_match


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
        ([{"question": "where " * 50, "answers": ["x"]}], "more than query_max_length"),
    ],
)
def test_bad_input_raises_clear_errors(setup, examples, message):
    model, tokenizer, index = setup
    with pytest.raises(ValueError, match=message):
        evaluate_open_qa(model, tokenizer, index, examples, progress=False)


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
