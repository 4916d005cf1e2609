"""Conversion of transformers-REALM checkpoints: parity with the old classes, strict name mapping, round trips.

The fixtures under `tests/fixtures/old_realm/` (tiny random REALM checkpoints and the old classes' outputs on fixed
inputs) were written by `tests/fixtures/make_old_realm_reference.py` with transformers 4.57, the last release with
REALM; these tests need only the main environment.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModel, AutoTokenizer

from realm_hf import RealmForOpenQA, RealmKnowledgeEncoder, RealmReader, RealmRetriever
from realm_hf.convert import (
    RealmCheckpoint,
    RealmConversionError,
    convert_checkpoint,
    convert_embedder,
    convert_knowledge_encoder,
    convert_open_qa,
    convert_reader,
    detect_kind,
    extract_block_embeddings,
    load_realm_checkpoint,
    main,
)

FIXTURES = Path(__file__).parent / "fixtures" / "old_realm"
ATOL = 1e-5
MASK_ID = 4  # [MASK] in the fixtures' vocab.txt


@pytest.fixture(scope="module")
def ref() -> dict[str, torch.Tensor]:
    return load_file(FIXTURES / "reference.safetensors")


@pytest.fixture(scope="module")
def retriever() -> RealmRetriever:
    return convert_embedder(FIXTURES / "embedder")


@pytest.fixture(scope="module")
def encoder() -> RealmKnowledgeEncoder:
    return convert_knowledge_encoder(FIXTURES / "encoder")


@pytest.fixture(scope="module")
def reader() -> RealmReader:
    return convert_reader(FIXTURES / "reader")


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def retrieval_outputs(model: RealmRetriever, ref: dict) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        out = model(
            query_input_ids=ref["scorer.query_input_ids"],
            query_attention_mask=ref["scorer.query_attention_mask"],
            query_token_type_ids=ref["scorer.query_token_type_ids"],
            candidate_input_ids=ref["scorer.candidate_input_ids"],
            candidate_attention_mask=ref["scorer.candidate_attention_mask"],
            candidate_token_type_ids=ref["scorer.candidate_token_type_ids"],
        )
    return {"query": out.query_embeds, "candidates": out.candidate_embeds, "scores": out.relevance_scores}


def reader_span_logits(model: RealmReader, ref: dict, block_mask: torch.Tensor | None) -> torch.Tensor:
    with torch.no_grad():
        out = model(
            input_ids=ref["reader.input_ids"].unsqueeze(0),  # the old reader's beam is our K: [1, K, L]
            attention_mask=ref["reader.attention_mask"].unsqueeze(0),
            token_type_ids=ref["reader.token_type_ids"].unsqueeze(0),
            block_mask=None if block_mask is None else block_mask.unsqueeze(0),
            relevance_scores=ref["reader.relevance_scores"].unsqueeze(0),
        )
    torch.testing.assert_close(out.span_starts, ref["reader.span_starts"], rtol=0, atol=0)
    torch.testing.assert_close(out.span_ends, ref["reader.span_ends"], rtol=0, atol=0)
    return out.span_logits[0]  # [K, S]


# ---------------------------------------------------------------------------------------------------------------
# Parity with the old classes
# ---------------------------------------------------------------------------------------------------------------


def test_embedder_config(retriever):
    config = retriever.config
    assert (config.pooling, config.projection_layer_norm, config.share_towers) == ("pooler", True, True)
    assert config.projection_size == 16 and config.bert_config.hidden_act == "gelu_new"
    assert not retriever.training


def test_embedder_parity(retriever, ref):
    with torch.no_grad():
        query = retriever.embed_queries(
            ref["scorer.query_input_ids"], ref["scorer.query_attention_mask"], ref["scorer.query_token_type_ids"]
        )
        docs = retriever.embed_documents(
            ref["scorer.candidate_input_ids"].flatten(0, 1),
            ref["scorer.candidate_attention_mask"].flatten(0, 1),
            ref["scorer.candidate_token_type_ids"].flatten(0, 1),
        )
    assert max_diff(query, ref["embedder.query_embeds"]) < ATOL
    assert max_diff(query, ref["scorer.query_embeds"]) < ATOL
    assert max_diff(docs.view(2, 3, -1), ref["scorer.candidate_embeds"]) < ATOL
    out = retrieval_outputs(retriever, ref)
    assert max_diff(out["scores"], ref["scorer.relevance_scores"]) < ATOL


def test_scorer_bin_checkpoint_parity(ref):
    """The RealmScorer checkpoint is a pytorch_model.bin holding the shared embedder under two names."""
    checkpoint = load_realm_checkpoint(FIXTURES / "scorer")
    assert any(name.startswith("query_embedder.") for name in checkpoint.state_dict)
    model = convert_embedder(checkpoint)
    assert model.config.share_towers and model.doc_embedder is None
    out = retrieval_outputs(model, ref)
    assert max_diff(out["query"], ref["scorer.query_embeds"]) < ATOL
    assert max_diff(out["candidates"], ref["scorer.candidate_embeds"]) < ATOL
    assert max_diff(out["scores"], ref["scorer.relevance_scores"]) < ATOL


def test_scorer_with_its_own_query_embedder_gives_two_towers():
    checkpoint = load_realm_checkpoint(FIXTURES / "scorer")
    state_dict = {name: tensor.clone() for name, tensor in checkpoint.state_dict.items()}
    state_dict["query_embedder.cls.dense.weight"] += 1.0  # a query tower of its own
    model = convert_embedder(RealmCheckpoint(config=checkpoint.config, state_dict=state_dict))
    assert not model.config.share_towers
    torch.testing.assert_close(model.query_embedder.projection.weight, state_dict["query_embedder.cls.dense.weight"])
    torch.testing.assert_close(model.doc_embedder.projection.weight, state_dict["embedder.cls.dense.weight"])
    torch.testing.assert_close(
        model.doc_embedder.bert.pooler.dense.weight, state_dict["embedder.realm.pooler.dense.weight"]
    )


def test_knowledge_encoder_parity(encoder, ref):
    assert encoder.config.mask_token_id == MASK_ID and encoder.config.tie_word_embeddings
    assert encoder.mlm_head.predictions.decoder.weight is encoder.bert.embeddings.word_embeddings.weight
    with torch.no_grad():
        out = encoder(
            input_ids=ref["encoder.input_ids"],
            attention_mask=ref["encoder.attention_mask"],
            token_type_ids=ref["encoder.token_type_ids"],
            labels=ref["encoder.labels"],
            relevance_scores=ref["encoder.relevance_scores"],
        )
    labelled = (ref["encoder.labels"] != -100).unsqueeze(1).expand(-1, 3, -1)
    torch.testing.assert_close(out.masked_positions, labelled.nonzero(), rtol=0, atol=0)
    log_probs = torch.log_softmax(out.masked_token_logits, dim=-1)  # [M, V]
    assert max_diff(log_probs, ref["encoder.masked_log_probs"]) < ATOL
    # log p(y | z_k, x) = Σ_j log p(y_j | z_k, x)
    assert max_diff(out.candidate_log_likelihood, ref["encoder.target_log_probs"].sum(-1)) < ATOL

    # The old class's loss marginalizes each token separately (and averages over all L positions); recomputing it
    # from our per-token log-probs ties the two models together even where the objectives differ.
    target_log_probs = torch.zeros(2, 3, labelled.shape[-1])
    targets = ref["encoder.labels"].unsqueeze(1).expand(-1, 3, -1)[labelled]
    target_log_probs[labelled] = log_probs.gather(1, targets.unsqueeze(1)).squeeze(1)
    per_token = (ref["encoder.relevance_scores"].log_softmax(-1).unsqueeze(-1) + target_log_probs).logsumexp(1)
    assert abs(-per_token.mean().item() - ref["encoder.old_loss"].item()) < ATOL

    # Without labels the predictions are made at the [MASK] tokens: the same positions here.
    with torch.no_grad():
        unlabelled = encoder(
            input_ids=ref["encoder.input_ids"],
            attention_mask=ref["encoder.attention_mask"],
            token_type_ids=ref["encoder.token_type_ids"],
        )
    assert max_diff(unlabelled.masked_token_logits.log_softmax(-1), ref["encoder.masked_log_probs"]) < ATOL


@pytest.mark.parametrize("explicit_block_mask", [True, False])
def test_reader_parity(reader, ref, explicit_block_mask):
    assert reader.config.span_layer_norm_eps == pytest.approx(1e-3) and reader.config.max_span_width == 4
    assert reader.config.span_normalization == "global"  # the old reader ranks spans over all its blocks
    block_mask = ref["reader.block_mask"]  # [K, L], as the old RealmForOpenQA built it
    with torch.no_grad():
        out = reader(
            input_ids=ref["reader.input_ids"].unsqueeze(0),  # the old reader's beam is our K: [1, K, L]
            attention_mask=ref["reader.attention_mask"].unsqueeze(0),
            token_type_ids=ref["reader.token_type_ids"].unsqueeze(0),
            block_mask=block_mask.unsqueeze(0) if explicit_block_mask else None,
            relevance_scores=ref["reader.relevance_scores"].unsqueeze(0),
        )
    span_logits, old = out.span_logits[0], ref["reader.span_logits"]
    valid = block_mask[:, ref["reader.span_starts"]] & block_mask[:, ref["reader.span_ends"]]
    assert valid.any() and (~valid).any()
    assert max_diff(span_logits[valid], old[valid]) < ATOL
    assert (span_logits[~valid] == torch.finfo(span_logits.dtype).min).all()
    assert (old[~valid] < -1e30).all()  # the old code adds finfo.min to invalid spans too

    # The converted reader's own prediction is the old class's (block_idx, start_pos, end_pos)
    assert out.best_candidate.item() == ref["reader.old_block_idx"].item()
    assert out.best_start.item() == ref["reader.old_start_pos"].item()
    assert out.best_end.item() == ref["reader.old_end_pos"].item()


def test_open_qa_parity_and_block_embeddings(ref, tmp_path):
    model = convert_open_qa(FIXTURES / "openqa")
    assert "block_emb" not in dict(model.named_buffers()) and "block_emb" not in model.state_dict()
    assert model.config.top_k == 3
    out = retrieval_outputs(model.retriever, ref)
    assert max_diff(out["query"], ref["scorer.query_embeds"]) < ATOL
    assert max_diff(out["scores"], ref["scorer.relevance_scores"]) < ATOL
    span_logits = reader_span_logits(model.reader, ref, ref["reader.block_mask"])
    valid = span_logits > torch.finfo(span_logits.dtype).min
    assert max_diff(span_logits[valid], ref["reader.span_logits"][valid]) < ATOL

    path = tmp_path / "block_embeddings.safetensors"
    embeddings = extract_block_embeddings(FIXTURES / "openqa", path)
    torch.testing.assert_close(embeddings, ref["openqa.block_emb"], rtol=0, atol=0)
    torch.testing.assert_close(load_file(path)["embeddings"], ref["openqa.block_emb"], rtol=0, atol=0)

    # The corpus embeddings feed the model from outside, as an index would.
    with torch.no_grad():
        qa = model(
            query_input_ids=ref["scorer.query_input_ids"][:1],
            query_attention_mask=ref["scorer.query_attention_mask"][:1],
            reader_input_ids=ref["reader.input_ids"].unsqueeze(0),
            reader_attention_mask=ref["reader.attention_mask"].unsqueeze(0),
            reader_token_type_ids=ref["reader.token_type_ids"].unsqueeze(0),
            candidate_embeds=embeddings[:3].unsqueeze(0),
        )
    expected = out["query"][:1] @ embeddings[:3].T
    assert max_diff(qa.relevance_scores, expected) < ATOL


def test_block_embeddings_only_from_open_qa():
    with pytest.raises(RealmConversionError, match="block_emb"):
        extract_block_embeddings(FIXTURES / "reader")


# ---------------------------------------------------------------------------------------------------------------
# convert_checkpoint, round trips, CLI
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, kind, model_class",
    [
        ("embedder", "embedder", RealmRetriever),
        ("scorer", "embedder", RealmRetriever),
        ("encoder", "encoder", RealmKnowledgeEncoder),
        ("reader", "reader", RealmReader),
        ("openqa", "openqa", RealmForOpenQA),
    ],
)
def test_convert_checkpoint_round_trip(tmp_path, name, kind, model_class):
    checkpoint = load_realm_checkpoint(FIXTURES / name)
    assert detect_kind(checkpoint.state_dict.keys() | ({"block_emb"} if checkpoint.block_emb_shape else set())) == kind
    output = tmp_path / name
    model = convert_checkpoint(FIXTURES / name, output)
    assert isinstance(model, model_class)
    assert (output / "model.safetensors").is_file() and not list(output.glob("*.bin"))
    assert json.loads((output / "config.json").read_text())["model_type"] == model.config.model_type

    reloaded = AutoModel.from_pretrained(output)
    assert type(reloaded) is model_class
    assert type(AutoConfig.from_pretrained(output)) is type(model.config)
    expected, actual = model.state_dict(), reloaded.state_dict()
    assert expected.keys() == actual.keys()
    for key in expected:
        assert torch.equal(expected[key], actual[key]), key

    tokenizer = AutoTokenizer.from_pretrained(output)
    assert tokenizer.mask_token_id == MASK_ID and tokenizer.convert_tokens_to_ids("w7") == 12


def test_round_trip_outputs_bit_exact(tmp_path, ref, reader):
    reader.save_pretrained(tmp_path)
    reloaded = RealmReader.from_pretrained(tmp_path).eval()
    a = reader_span_logits(reader, ref, ref["reader.block_mask"])
    b = reader_span_logits(reloaded, ref, ref["reader.block_mask"])
    assert torch.equal(a, b)


def test_convert_checkpoint_writes_block_embeddings_on_request(tmp_path, ref):
    convert_checkpoint(FIXTURES / "openqa", tmp_path / "model", kind="openqa")
    assert not (tmp_path / "model" / "block_embeddings.safetensors").exists()
    assert "block_emb" not in load_file(tmp_path / "model" / "model.safetensors")
    convert_checkpoint(FIXTURES / "openqa", tmp_path / "model2", block_embeddings_path=tmp_path / "emb.safetensors")
    torch.testing.assert_close(load_file(tmp_path / "emb.safetensors")["embeddings"], ref["openqa.block_emb"])
    with pytest.raises(RealmConversionError, match="no block_emb"):
        convert_checkpoint(FIXTURES / "reader", tmp_path / "r", block_embeddings_path=tmp_path / "x.safetensors")


def test_cli_main(tmp_path):
    assert main(["--src", str(FIXTURES / "reader"), "--output", str(tmp_path / "out"), "--kind", "reader"]) == 0
    assert isinstance(RealmReader.from_pretrained(tmp_path / "out"), RealmReader)


def test_legacy_bin_with_buffers_and_duplicated_ties(tmp_path, ref, encoder):
    """Checkpoints written by transformers 4.1x keep position_ids buffers and the tied decoder tensors in the .bin."""
    state_dict = load_file(FIXTURES / "encoder" / "model.safetensors")
    state_dict["cls.predictions.decoder.weight"] = state_dict["realm.embeddings.word_embeddings.weight"]
    state_dict["cls.predictions.decoder.bias"] = state_dict["cls.predictions.bias"]
    state_dict["realm.embeddings.position_ids"] = torch.arange(64).unsqueeze(0)
    directory = tmp_path / "legacy"
    directory.mkdir()
    shutil.copy(FIXTURES / "encoder" / "config.json", directory)
    shutil.copy(FIXTURES / "encoder" / "vocab.txt", directory)
    torch.save(state_dict, directory / "pytorch_model.bin")
    model = convert_knowledge_encoder(directory)
    assert model.config.tie_word_embeddings
    for key, tensor in encoder.state_dict().items():
        assert torch.equal(model.state_dict()[key], tensor), key


def test_untied_decoder_is_kept(tmp_path):
    """A knowledge encoder whose decoder matrix differs from its embeddings converts untied, keeping both."""
    checkpoint = load_realm_checkpoint(FIXTURES / "encoder")
    state_dict = dict(checkpoint.state_dict)
    decoder = state_dict["realm.embeddings.word_embeddings.weight"] + 0.5
    state_dict["cls.predictions.decoder.weight"] = decoder
    model = convert_knowledge_encoder(RealmCheckpoint(checkpoint.config, state_dict, checkpoint.path))
    assert not model.config.tie_word_embeddings
    torch.testing.assert_close(model.mlm_head.predictions.decoder.weight, decoder, rtol=0, atol=0)
    torch.testing.assert_close(
        model.bert.embeddings.word_embeddings.weight, state_dict["realm.embeddings.word_embeddings.weight"]
    )
    torch.testing.assert_close(model.mlm_head.predictions.decoder.bias, state_dict["cls.predictions.bias"])
    model.save_pretrained(tmp_path)
    reloaded = RealmKnowledgeEncoder.from_pretrained(tmp_path)
    torch.testing.assert_close(reloaded.mlm_head.predictions.decoder.weight, decoder, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# Corrupted checkpoints
# ---------------------------------------------------------------------------------------------------------------


def write_corrupted(tmp_path: Path, name: str, edit) -> Path:
    directory = tmp_path / f"corrupted-{name}"
    shutil.copytree(FIXTURES / name, directory)
    if (directory / "model.safetensors").exists():
        state_dict = load_file(directory / "model.safetensors")
        edit(state_dict)
        save_file(state_dict, directory / "model.safetensors")
    else:
        state_dict = torch.load(directory / "pytorch_model.bin", weights_only=True)
        edit(state_dict)
        torch.save(state_dict, directory / "pytorch_model.bin")
    return directory


def test_missing_tensor_is_named(tmp_path):
    directory = write_corrupted(
        tmp_path, "encoder", lambda sd: sd.pop("realm.encoder.layer.1.output.dense.weight")
    )
    with pytest.raises(RealmConversionError, match=r"do(es)? not fill.*bert\.encoder\.layer\.1\.output\.dense\.weight"):
        convert_knowledge_encoder(directory)


def test_missing_reader_tensor_is_named(tmp_path):
    directory = write_corrupted(tmp_path, "reader", lambda sd: sd.pop("qa_outputs.layer_normalization.bias"))
    with pytest.raises(RealmConversionError, match=r"span_scorer\.layer_norm\.bias"):
        convert_reader(directory)


def test_unknown_tensor_is_named(tmp_path):
    def add(sd):
        sd["realm.encoder.layer.2.output.dense.weight"] = torch.zeros(32, 64)  # a layer the config does not have
        sd["cls.seq_relationship.weight"] = torch.zeros(2, 32)  # a head REALM never had

    directory = write_corrupted(tmp_path, "embedder", add)
    with pytest.raises(RealmConversionError) as error:
        convert_embedder(directory)
    message = str(error.value)
    assert "realm.encoder.layer.2.output.dense.weight" in message and "cls.seq_relationship.weight" in message


def test_shape_mismatch_is_named(tmp_path):
    checkpoint = load_realm_checkpoint(FIXTURES / "reader")
    config = dict(checkpoint.config, span_hidden_size=8)
    with pytest.raises(RealmConversionError, match=r"qa_outputs\.dense_intermediate\.weight \[32, 32\]"):
        convert_reader(RealmCheckpoint(config, checkpoint.state_dict))


def test_conflicting_tied_tensors_are_refused():
    checkpoint = load_realm_checkpoint(FIXTURES / "encoder")
    state_dict = dict(checkpoint.state_dict)
    state_dict["cls.predictions.decoder.bias"] = state_dict["cls.predictions.bias"] + 1.0
    with pytest.raises(RealmConversionError, match=r"cls\.predictions\.decoder\.bias"):
        convert_knowledge_encoder(RealmCheckpoint(checkpoint.config, state_dict, checkpoint.path))


def test_not_a_realm_checkpoint(tmp_path):
    directory = tmp_path / "bert"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(RealmConversionError, match="model_type='bert'"):
        load_realm_checkpoint(directory)
    (directory / "config.json").write_text(json.dumps({"model_type": "realm"}))
    with pytest.raises(FileNotFoundError, match="No weights"):
        load_realm_checkpoint(directory)
    with pytest.raises(ValueError, match="kind='retreiver'"):
        convert_checkpoint(FIXTURES / "reader", tmp_path / "x", kind="retreiver")
