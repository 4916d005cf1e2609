"""Knowledge updates (REALM Appendix C): new articles join a trained model's index, embedded by its own document
tower, without touching the old blocks; and the example script that shows it, on tiny random models."""

from __future__ import annotations

import json
import logging
import os
import runpy
import sys

import numpy as np
import pytest
import torch
from openqa_helpers import ARTICLES, TINY, load_tokenizer, write_jsonl
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf import RealmForOpenQA, RealmForOpenQAConfig
from realm_hf.data.title_probes import title_probe
from realm_hf.index import RealmIndex, embed_blocks
from realm_hf.retrieval import add_articles_to_index

EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "knowledge_update.py")

NEW_ARTICLES = [
    {"id": "n1", "title": "Zorblax Prize", "text": "The Zorblax Prize is a yearly award for the best science fiction "
     "novel from Iceland. It was first awarded in 2021 to Quentin Vale, a chess player from Canada."},
    {"id": "n2", "title": "Quentin Vale", "text": "Quentin Vale (born 3 May 1990) is a Canadian chess player who "
     "won the Zorblax Prize in 2021. He lives in Reykjavik and writes novels about chess."},
    {"id": "n3", "title": "Lake Mirrow", "text": "Lake Mirrow is a small lake."},
]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


def _model(tokenizer, normalize: bool = True) -> RealmForOpenQA:
    bert = dict(TINY, vocab_size=len(tokenizer))
    torch.manual_seed(0)
    return RealmForOpenQA(RealmForOpenQAConfig(
        retriever_config={
            "bert_config": bert, "projection_size": 16, "pooling": "mean", "share_towers": False,
            "normalize_embeddings": normalize, "query_max_length": 32, "block_max_length": 64,
        },
        reader_config={"bert_config": bert, "max_length": 96, "span_hidden_size": 16, "max_span_width": 5},
        top_k=3,
    )).eval()


def test_new_articles_are_embedded_by_the_document_tower_and_old_blocks_stay(tokenizer, caplog):
    model = _model(tokenizer)
    index = RealmIndex.build(ARTICLES, model.retriever, tokenizer=tokenizer, index_type="torch-exact", max_length=64)
    old_ids = index.block_ids.copy()
    old_embeddings = np.array(index.embeddings, copy=True)
    old_rows = index.get_blocks(old_ids)

    caplog.set_level(logging.INFO, logger="realm_hf")
    new_ids = add_articles_to_index(index, model, tokenizer, NEW_ARTICLES)

    # fresh ids after the old ones; the old blocks, ids and vectors are as they were
    assert new_ids.tolist() == list(range(int(old_ids.max()) + 1, int(old_ids.max()) + 1 + len(new_ids)))
    assert len(new_ids) >= len(NEW_ARTICLES) and index.num_blocks == len(old_ids) + len(new_ids)
    np.testing.assert_array_equal(index.block_ids[: len(old_ids)], old_ids)
    np.testing.assert_array_equal(np.asarray(index.embeddings[: len(old_ids)]), old_embeddings)
    assert index.get_blocks(old_ids) == old_rows
    new_rows = index.get_blocks(new_ids, columns=["title", "article_id", "input_ids"])
    assert set(new_rows["title"]) == {a["title"] for a in NEW_ARTICLES}
    assert set(new_rows["article_id"]) == {"n1", "n2", "n3"}
    # blocks no longer than the index's own (its block length), embedded by the document tower, not the query tower
    assert max(len(ids) for ids in new_rows["input_ids"]) <= max(len(ids) for ids in old_rows["input_ids"])
    new_blocks = index.blocks.select(range(len(old_ids), index.num_blocks))
    by_doc_tower = torch.from_numpy(embed_blocks(new_blocks, model.retriever))
    torch.testing.assert_close(index.get_embeddings(new_ids), by_doc_tower)
    query_tower = embed_blocks(new_blocks, lambda batch: model.retriever.embed_queries(**batch))
    assert not np.allclose(query_tower, by_doc_tower.numpy())
    assert "Adding blocks embedded by weights" not in caplog.text  # the tower that built the index

    # a new block is retrievable: its own (normalized) vector finds it first
    _, found = index.search(index.get_embeddings(new_ids), 1)
    assert found[:, 0].tolist() == new_ids.tolist()

    # adding the same articles again adds nothing
    assert add_articles_to_index(index, model.retriever, tokenizer, NEW_ARTICLES).size == 0
    assert index.num_blocks == len(old_ids) + len(new_ids)


def test_new_blocks_are_returned_as_provenance_by_the_pipeline(tokenizer, tmp_path):
    from transformers import pipeline

    from realm_hf.pipelines import OPEN_QA_TASK

    model = _model(tokenizer, normalize=False)
    index = RealmIndex.build(ARTICLES, model.retriever, tokenizer=tokenizer, index_type="torch-exact", max_length=64)
    qa = pipeline(OPEN_QA_TASK, model=model, tokenizer=tokenizer, index=index)
    question = "who won the zorblax prize in 2021"
    before = qa(question, num_blocks=index.num_blocks)
    assert not {d["title"] for d in before["documents"]} & {a["title"] for a in NEW_ARTICLES}

    new_ids = add_articles_to_index(qa.index, model, tokenizer, NEW_ARTICLES)
    after = qa(question, num_blocks=qa.index.num_blocks)  # every block: the new ones must be among the evidence
    titles = {d["block_id"]: d["title"] for d in after["documents"]}
    assert set(new_ids.tolist()) <= set(titles) and {titles[i] for i in new_ids.tolist()} == {
        a["title"] for a in NEW_ARTICLES
    }
    assert after["block_id"] in titles
    # the update survives save / load
    index.save_pretrained(tmp_path / "index")
    reloaded = RealmIndex.from_pretrained(tmp_path / "index")
    assert reloaded.num_blocks == index.num_blocks
    assert reloaded.get_blocks(new_ids, columns=["title"])["title"] == [titles[i] for i in new_ids.tolist()]


def test_bad_arguments(tokenizer):
    model = _model(tokenizer)
    index = RealmIndex.build(ARTICLES[:2], model.retriever, tokenizer=tokenizer, index_type="torch-exact", max_length=64)
    with pytest.raises(ValueError, match="max_length=128 is longer than the retriever's block_max_length=64"):
        add_articles_to_index(index, model, tokenizer, NEW_ARTICLES, max_length=128)
    with pytest.raises(TypeError, match="RealmForOpenQA or a RealmRetriever"):
        add_articles_to_index(index, model.reader, tokenizer, NEW_ARTICLES)


def test_title_probe_masks_the_title_of_the_first_sentence(tokenizer):
    article = {"id": "1", "title": "Jarred Shaw", "text": "Jarred Shaw (born September 28, 1990) is an American "
               "professional basketball player for Trouville of the Liga Uruguaya.\nCareer.\nHe played in 2019."}
    probe = title_probe(article, tokenizer)
    assert probe["question"] == "what is an American professional basketball player for Trouville of the Liga Uruguaya?"
    assert probe["cloze"] == (
        "[MASK] [MASK] [MASK] is an American professional basketball player for Trouville of the Liga Uruguaya."
    )
    assert probe["answer"] == "Jarred Shaw" and probe["article_id"] == "1"
    film = {"title": "The Quiet Hour (film)", "text": "The Quiet Hour is a 2021 British thriller film directed by Ann Lee."}
    assert title_probe(film)["question"] == "what is a 2021 British thriller film directed by Ann Lee?"
    assert title_probe(film)["answer"] == "The Quiet Hour" and "cloze" not in title_probe(film)
    assert title_probe(NEW_ARTICLES[2]) is None  # too short to be specific
    assert title_probe({"title": "Nowhere", "text": "A sentence that does not name its article at all, sadly."}) is None


# ------------------------------------------------------------------------------------------ the example script
def _run_example(argv, monkeypatch):
    monkeypatch.setattr(sys, "argv", [EXAMPLE, *argv])
    runpy.run_path(EXAMPLE, run_name="__main__")


@pytest.mark.parametrize("kind", ["open_qa", "pretraining"])
def test_example_smoke_run(kind, tmp_path, monkeypatch, capsys):
    pytest.importorskip("faiss")
    from realm_pipeline_helpers import make_open_qa_dir, make_pretraining_dir

    model_dir = str(tmp_path / "model")
    (make_open_qa_dir if kind == "open_qa" else make_pretraining_dir)(model_dir)
    new = write_jsonl(tmp_path / "new.jsonl", NEW_ARTICLES)
    manifest = os.path.join(model_dir, "index", "manifest.json")
    blocks_before = json.load(open(manifest))["num_blocks"]
    _run_example(["--model", model_dir, "--new_articles", new, "--max_new_articles", "2",
                  "--save_index", str(tmp_path / "updated")], monkeypatch)
    out = capsys.readouterr().out
    assert "New articles: Zorblax Prize, Quentin Vale" in out
    assert out.count("Q: ") == 4 and "== Before the update" in out and "== After adding 2 articles" in out
    if kind == "pretraining":
        assert "[MASK]" in out
    else:
        assert "Q: what is a yearly award for the best science fiction novel from Iceland?" in out
    assert "answers now come from a new article" in out
    # the model's own index is untouched; the updated one was saved where asked
    assert json.load(open(manifest))["num_blocks"] == blocks_before
    assert RealmIndex.from_pretrained(tmp_path / "updated").num_blocks > blocks_before


def test_example_questions_and_titles_from_the_command_line(tmp_path, monkeypatch, capsys):
    pytest.importorskip("faiss")
    from realm_pipeline_helpers import make_open_qa_dir

    model_dir = make_open_qa_dir(str(tmp_path / "model"))
    new = write_jsonl(tmp_path / "new.jsonl", NEW_ARTICLES)
    _run_example(["--model", model_dir, "--new_articles", new, "--new_titles", "Lake Mirrow", "Quentin Vale",
                  "--questions", "who won the zorblax prize", "where is lake mirrow"], monkeypatch)
    out = capsys.readouterr().out
    assert "New articles: Quentin Vale, Lake Mirrow" in out
    assert "Q: who won the zorblax prize" in out and out.count("Q: ") == 4
    with pytest.raises(SystemExit, match=r"no article titled \['Atlantis'\]"):
        _run_example(["--model", model_dir, "--new_articles", new, "--new_titles", "Atlantis"], monkeypatch)
