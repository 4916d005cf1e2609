import pytest
import torch
from transformers import AutoModel

from realm_hf import (
    RealmForOpenQA,
    RealmForOpenQAConfig,
    RealmKnowledgeEncoder,
    RealmKnowledgeEncoderConfig,
    RealmReader,
    RealmReaderConfig,
    RealmRetriever,
    RealmRetrieverConfig,
)


def build(name, tiny_bert):
    retriever = {"bert_config": tiny_bert, "projection_size": 16, "query_max_length": 32, "block_max_length": 64, "share_towers": False}
    reader = {"bert_config": tiny_bert, "max_span_width": 4, "span_hidden_size": 8, "max_length": 64}
    return {
        "retriever": lambda: RealmRetriever(RealmRetrieverConfig(**retriever)),
        "encoder": lambda: RealmKnowledgeEncoder(RealmKnowledgeEncoderConfig(bert_config=tiny_bert, max_length=64, mask_token_id=3)),
        "reader": lambda: RealmReader(RealmReaderConfig(**reader)),
        "open_qa": lambda: RealmForOpenQA(RealmForOpenQAConfig(retriever_config=retriever, reader_config=reader)),
    }[name]()


@pytest.mark.parametrize("name", ["retriever", "encoder", "reader", "open_qa"])
def test_save_and_load_is_bit_exact_through_auto_model(tmp_path, tiny_bert, name):
    model = build(name, tiny_bert)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    assert not list(tmp_path.glob("*.bin")) and not list(tmp_path.glob("*.pkl"))
    loaded = AutoModel.from_pretrained(tmp_path)
    assert type(loaded) is type(model)
    original = model.state_dict()
    for key, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, original[key]), key
    assert original.keys() == loaded.state_dict().keys()


def test_tied_decoder_survives_save_and_load(tmp_path, tiny_bert):
    model = build("encoder", tiny_bert)
    model.save_pretrained(tmp_path)
    loaded = RealmKnowledgeEncoder.from_pretrained(tmp_path)
    assert loaded.mlm_head.predictions.decoder.weight.data_ptr() == loaded.bert.embeddings.word_embeddings.weight.data_ptr()


def test_open_qa_from_components_keeps_weights(tiny_bert):
    qa = build("open_qa", tiny_bert)
    rebuilt = RealmForOpenQA.from_components(qa.retriever, qa.reader, top_k=2)
    assert rebuilt.config.top_k == 2
    for key, tensor in rebuilt.state_dict().items():
        assert torch.equal(tensor, qa.state_dict()[key]), key


def test_knowledge_encoder_from_packaged_minilm_ties_decoder():
    from realm_hf.modeling.initial_weights import packaged_minilm_path

    encoder = RealmKnowledgeEncoder.from_bert(packaged_minilm_path(), max_length=128)
    embeddings = encoder.bert.embeddings.word_embeddings.weight
    assert encoder.mlm_head.predictions.decoder.weight.data_ptr() == embeddings.data_ptr()
    assert encoder.config.bert_config.num_hidden_layers == 6 and encoder.config.bert_config.hidden_size == 384
    # encoder weights come from the checkpoint, not a fresh init
    from transformers import BertModel

    bert = BertModel.from_pretrained(packaged_minilm_path())
    assert torch.equal(encoder.bert.encoder.layer[3].output.dense.weight, bert.encoder.layer[3].output.dense.weight)


def test_a_pretraining_checkpoint_gives_its_parts_without_subfolder_and_refuses_other_models(tmp_path, tiny_bert):
    """The layout RealmPretrainer.save_model writes (retriever/, encoder/, a copy of the encoder's config on top)."""
    retriever, encoder = build("retriever", tiny_bert), build("encoder", tiny_bert)
    retriever.save_pretrained(tmp_path / "retriever")
    encoder.save_pretrained(tmp_path / "encoder")
    encoder.config.save_pretrained(tmp_path)
    for model, loaded in (
        (retriever, RealmRetriever.from_pretrained(tmp_path)),
        (encoder, RealmKnowledgeEncoder.from_pretrained(tmp_path)),
        (encoder, AutoModel.from_pretrained(tmp_path)),  # the top-level config names the encoder
    ):
        assert type(loaded) is type(model)
        assert all(torch.equal(tensor, model.state_dict()[key]) for key, tensor in loaded.state_dict().items())
    for model_class in (RealmForOpenQA, RealmReader):
        with pytest.raises(ValueError) as refused:
            model_class.from_pretrained(tmp_path)
        message = str(refused.value)
        assert "\n" not in message and message.startswith(f"{str(tmp_path)!r} is a REALM pre-training checkpoint")
        assert f"holds no {model_class.__name__}" in message and f"realm-hf finetune --model {tmp_path} " in message
    # a model directory of its own is read as before, whatever folders it also holds
    encoder.save_pretrained(tmp_path)
    assert isinstance(RealmKnowledgeEncoder.from_pretrained(tmp_path), RealmKnowledgeEncoder)
