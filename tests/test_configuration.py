import subprocess
import sys

import pytest
from huggingface_hub.errors import StrictDataclassClassValidationError
from transformers import AutoConfig, BertConfig

from realm_hf import RealmForOpenQAConfig, RealmKnowledgeEncoderConfig, RealmReaderConfig, RealmRetrieverConfig


def test_defaults_follow_the_paper():
    retriever = RealmRetrieverConfig()
    assert (retriever.projection_size, retriever.query_max_length, retriever.block_max_length) == (128, 96, 288)
    assert retriever.bert_config.hidden_size == 768 and retriever.embedding_size == 128
    encoder = RealmKnowledgeEncoderConfig()
    assert encoder.num_candidates == 8 and encoder.use_null_document
    reader = RealmReaderConfig()
    assert (reader.span_hidden_size, reader.max_span_width) == (256, 10)
    assert RealmForOpenQAConfig().top_k == 5


@pytest.mark.parametrize(
    "cls, kwargs, message",
    [
        (RealmRetrieverConfig, {"projection_size": 0}, "projection_size"),
        (RealmRetrieverConfig, {"pooling": "max"}, "pooling"),
        (RealmRetrieverConfig, {"block_max_length": 1000}, "max_position_embeddings"),
        (RealmKnowledgeEncoderConfig, {"num_candidates": 1}, "num_candidates"),
        (RealmKnowledgeEncoderConfig, {"mask_token_id": 10**6}, "mask_token_id"),
        (RealmReaderConfig, {"max_span_width": 0}, "max_span_width"),
        (RealmReaderConfig, {"span_normalization": "orqa"}, r"one of \('block', 'global'\), got 'orqa'"),
        (RealmForOpenQAConfig, {"top_k": -1}, "top_k"),
    ],
)
def test_invalid_values_are_rejected_naming_the_value(cls, kwargs, message):
    with pytest.raises(StrictDataclassClassValidationError, match=message):
        cls(**kwargs)


def test_composite_config_round_trip(tmp_path, tiny_bert):
    config = RealmForOpenQAConfig(
        retriever_config={"bert_config": tiny_bert, "projection_size": 16, "query_max_length": 32, "block_max_length": 64},
        reader_config=RealmReaderConfig(bert_config=BertConfig(**tiny_bert), max_span_width=4, max_length=64),
        top_k=3,
        index_repo_id="org/realm-index",
    )
    config.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, RealmForOpenQAConfig)
    drop_path = lambda d: {k: v for k, v in d.items() if k != "_name_or_path"}
    assert drop_path(loaded.to_dict()) == drop_path(config.to_dict())
    assert isinstance(loaded.retriever_config, RealmRetrieverConfig)
    assert loaded.retriever_config.bert_config.hidden_size == 32
    assert loaded.reader_config.max_span_width == 4


def test_a_transformers_without_sub_config_specs_is_named_with_the_fix():
    # transformers < 5.20 has no SubConfigSpec: a GPU image with 5.17 failed with a bare "cannot import name"
    script = (
        "import transformers.configuration_utils as utils\n"
        "del utils.SubConfigSpec  # as in transformers 5.19 and before\n"
        "import realm_hf.configuration\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "realm_hf needs transformers>=5.20" in last and "pip install 'transformers>=5.20,<6'" in last, last
