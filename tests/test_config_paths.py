"""Saved REALM configs carry no path of the machine that wrote them (a published config would ship it)."""

from __future__ import annotations

import json
import os

from transformers import BertConfig

from realm_hf import RealmForOpenQA, RealmForOpenQAConfig, RealmRetrieverConfig

TINY = dict(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
            max_position_embeddings=64)


def _strings(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_a_bert_config_from_a_local_folder_leaves_no_path(tmp_path):
    bert = BertConfig(**TINY)
    bert._name_or_path = str(tmp_path / "venv" / "site-packages" / "minilm")  # as from_pretrained(local dir) records
    retriever = RealmRetrieverConfig(bert_config=bert.to_dict(), query_max_length=16, block_max_length=32)
    retriever.bert_config._name_or_path = bert._name_or_path
    config = RealmForOpenQAConfig(retriever_config=retriever.to_dict(), reader_config={"bert_config": TINY, "max_length": 64})
    config.retriever_config.bert_config._name_or_path = bert._name_or_path
    model = RealmForOpenQA(config)
    model.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert not [text for text in _strings(saved) if str(tmp_path) in text or os.path.isabs(text)]
    assert type(RealmForOpenQA.from_pretrained(tmp_path / "saved")) is RealmForOpenQA


def test_a_hub_id_is_kept():
    bert = BertConfig(**TINY)
    bert._name_or_path = "bert-base-uncased"
    retriever = RealmRetrieverConfig(bert_config=bert.to_dict(), query_max_length=16, block_max_length=32)
    retriever.bert_config._name_or_path = "bert-base-uncased"
    assert retriever.to_dict()["bert_config"]["_name_or_path"] == "bert-base-uncased"
