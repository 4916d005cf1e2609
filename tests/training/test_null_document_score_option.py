"""`--null_document_score`: the paper's null document (the empty block embedded by the document tower) chosen from the
command line, for a new retriever and for one loaded from a warm start (an ICT output) saved in the other mode."""

import pytest

from realm_hf import RealmRetriever, RealmRetrieverConfig
from realm_hf.training.arguments import CorpusArguments, ModelArguments, PretrainingArguments
from realm_hf.training.models import load_models


def _load(null_document_score, ict_warm_start=None):
    model = ModelArguments(random_init=True, pooling="mean", projection_size=16)
    retriever, _ = load_models(model, CorpusArguments(), 64, 4, ict_warm_start=ict_warm_start,
                               null_document_score=null_document_score)
    return retriever


@pytest.mark.parametrize("mode", ["embedding", "learned"])
def test_a_new_retriever_takes_the_mode(mode):
    retriever = _load(mode)
    assert retriever.config.null_document_score == mode
    assert hasattr(retriever, "null_document_logit") == (mode == "learned")


def test_no_option_keeps_the_default():
    assert _load(None).config.null_document_score == RealmRetrieverConfig().null_document_score


@pytest.mark.parametrize("saved, asked", [("learned", "embedding"), ("embedding", "learned")])
def test_a_warm_start_saved_in_the_other_mode_takes_the_asked_one(tmp_path, tiny_bert, saved, asked):
    config = RealmRetrieverConfig(bert_config={**tiny_bert, "max_position_embeddings": 512}, null_document_score=saved)
    RealmRetriever(config).save_pretrained(tmp_path)
    retriever = _load(asked, ict_warm_start=str(tmp_path))
    assert retriever.config.null_document_score == asked
    assert hasattr(retriever, "null_document_logit") == (asked == "learned")
    assert _load(None, ict_warm_start=str(tmp_path)).config.null_document_score == saved


def test_bad_values_are_refused_in_one_line():
    with pytest.raises(ValueError, match="'embedding' .*'learned', got 'paper'"):
        PretrainingArguments(null_document_score="paper")
    with pytest.raises(ValueError, match="--use_null_document is False"):
        PretrainingArguments(null_document_score="embedding", use_null_document=False)
