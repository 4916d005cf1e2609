"""`pipeline("realm-fill-mask", ...)` (and transformers' `"fill-mask"`) over a tiny pre-training output directory."""

from __future__ import annotations

import itertools
import logging
import math
import os

import pytest
import torch
from realm_pipeline_helpers import ARTICLES, minilm_tokenizer
from transformers import pipeline

import realm_hf  # noqa: F401  (registers the tasks)
from realm_hf import RealmFillMaskPipeline, RealmKnowledgeEncoder, RealmRetriever
from realm_hf.index import RealmIndex
from realm_hf.pipelines import RealmPretrainingEncoder, RealmRetrievalAugmentedMaskedLM, beam_search

TASK = "realm-fill-mask"
TEXT = "paris is the capital of [MASK]."
SPAN_TEXT = "the eiffel tower was completed in [MASK] [MASK]."
RESULT_KEYS = {"token", "token_str", "sequence", "score", "score_without_retrieval", "supporting_blocks", "null_document"}
TITLES = {article["title"] for article in ARTICLES}


@pytest.fixture(scope="module")
def fill(pretraining_dir):
    return RealmFillMaskPipeline.from_pretrained(pretraining_dir)


def _check_result(result: dict, num_blocks: int) -> None:
    assert set(result) == RESULT_KEYS
    assert 0.0 <= result["score"] <= 1.0
    assert 0.0 <= result["score_without_retrieval"] <= 1.0
    blocks = result["supporting_blocks"]
    assert len(blocks) == num_blocks
    posteriors = [b["posterior"] for b in blocks]
    assert posteriors == sorted(posteriors, reverse=True)
    for block in blocks:
        assert set(block) == {"block_id", "title", "score", "posterior", "likelihood"}
        assert block["title"] in TITLES
        assert 0.0 <= block["score"] <= 1.0 and 0.0 <= block["posterior"] <= 1.0 and 0.0 <= block["likelihood"] <= 1.0
    null = result["null_document"]
    # priors and posteriors are distributions over ∅ + the retrieved blocks
    assert sum(b["score"] for b in blocks) + null["score"] == pytest.approx(1.0, abs=1e-5)
    assert sum(b["posterior"] for b in blocks) + null["posterior"] == pytest.approx(1.0, abs=1e-5)
    assert null["likelihood"] == pytest.approx(result["score_without_retrieval"])
    # the marginal is the prior-weighted mixture of the likelihoods
    mixture = sum(b["score"] * b["likelihood"] for b in blocks) + null["score"] * null["likelihood"]
    assert result["score"] == pytest.approx(mixture, rel=1e-4)


def test_task_is_registered():
    from transformers.pipelines import PIPELINE_REGISTRY

    _, impl, _ = PIPELINE_REGISTRY.check_task(TASK)
    assert impl["impl"] is RealmFillMaskPipeline and impl["pt"] == (RealmPretrainingEncoder,)


def test_output_dir_loads_by_its_top_level_path_in_both_pipelines(fill, pretraining_dir):
    """`pipeline(task, model=<pre-training output>)`: the directory `RealmPretrainer.save_model` writes, as is."""
    expected = fill(TEXT, top_k=3)
    realm = pipeline(TASK, model=pretraining_dir)
    assert isinstance(realm, RealmFillMaskPipeline)
    got = realm(TEXT, top_k=3)
    assert [r["token"] for r in got] == [r["token"] for r in expected]
    assert [r["score"] for r in got] == pytest.approx([r["score"] for r in expected], rel=1e-5)

    # transformers' own fill-mask pipeline: per mask, the same marginal p(y | x) over ∅ and the retrieved blocks
    plain = pipeline("fill-mask", model=pretraining_dir)
    assert isinstance(plain.model, RealmRetrievalAugmentedMaskedLM)
    out = plain(TEXT, top_k=3)
    assert [r["token"] for r in out] == [r["token"] for r in expected]
    assert [r["score"] for r in out] == pytest.approx([r["score"] for r in expected], rel=1e-4)
    assert out[0]["sequence"] == expected[0]["sequence"]


def test_single_mask_scores_are_probabilities(fill):
    results = fill(TEXT, top_k=5)
    assert len(results) == 5
    num_blocks = fill.model.config.num_candidates - 1
    for result in results:
        _check_result(result, num_blocks)
        assert isinstance(result["token"], int)
        assert result["sequence"].startswith("paris is the capital of")
    scores = [r["score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert sum(scores) <= 1.0 + 1e-6
    assert len({r["token"] for r in results}) == 5


def _by_hand(fill, text: str) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """`log p(z|x)` `[K]` (∅ first) and `log p(y_j = v | z, x)` `[K, m, V]`, computed from the models directly.

    Retrieval goes through the index; ∅ is `[CLS] x [SEP] [SEP]`; every tensor is built here, not by the pipeline, on
    the pipeline's device (a GPU when there is one); the results come back on the CPU.
    """
    tokenizer, retriever, encoder, index = fill.tokenizer, fill.retriever, fill.model, fill.index

    def tensor(rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor(rows, device=fill.device)

    query = tokenizer(text)["input_ids"]
    query_ids = tensor([query])
    with torch.no_grad():
        _, block_ids = index.search(retriever.embed_queries(query_ids), encoder.config.num_candidates - 1)
        rows = index.get_blocks(block_ids[0], columns=["input_ids", "token_type_ids"])
        candidates = [[tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.sep_token_id]] + [
            list(ids) for ids in rows["input_ids"]
        ]
        candidate_types = [[0, 0, 1]] + [list(types) for types in rows["token_type_ids"]]
        query_embed = retriever.embed_queries(query_ids)[0]  # [D]
        doc_embeds = torch.stack(
            [
                retriever.embed_documents(tensor([ids]), token_type_ids=tensor([types]))[0]
                for ids, types in zip(candidates, candidate_types)
            ]
        )  # [K, D]
        scores = doc_embeds @ query_embed  # [K]
        if retriever.config.null_document_score == "learned":  # ∅ gets the learned prior, p(∅|x) = e^b / (K-1 + e^b)
            scores[0] = torch.logsumexp(scores[1:], 0) - math.log(len(scores) - 1) + retriever.null_document_logit
        log_prior = torch.log_softmax(scores, dim=0)  # [K]
        masks = [i for i, t in enumerate(query) if t == tokenizer.mask_token_id]
        log_probs = []
        for ids, types in zip(candidates, candidate_types):
            body = [t for t, s in zip(ids, types) if s == 1][:-1]  # body without its final [SEP]
            joined = tensor([query + body + [tokenizer.sep_token_id]])
            token_types = tensor([[0] * len(query) + [1] * (len(body) + 1)])
            hidden = encoder.bert(input_ids=joined, token_type_ids=token_types).last_hidden_state[0]  # [L, H]
            log_probs.append(torch.log_softmax(encoder.mlm_head(hidden[masks]), dim=-1))  # [m, V]
    return log_prior.cpu(), torch.stack(log_probs).cpu(), masks  # [K], [K, m, V]


def test_marginal_equals_hand_computation(fill):
    log_prior, log_probs, masks = _by_hand(fill, TEXT)
    assert len(masks) == 1
    # p(y|x) = Σ_z p(z|x) p(y|z,x) for every word of the vocabulary
    marginal = (log_prior.exp().unsqueeze(-1) * log_probs[:, 0].exp()).sum(0)  # [V]
    assert float(marginal.sum()) == pytest.approx(1.0, abs=1e-4)
    expected = marginal.topk(3)
    results = fill(TEXT, top_k=3)
    assert [r["token"] for r in results] == expected.indices.tolist()
    for result in results:
        y = result["token"]
        assert result["score"] == pytest.approx(float(marginal[y]), rel=1e-4)
        assert result["score_without_retrieval"] == pytest.approx(float(log_probs[0, 0, y].exp()), rel=1e-4)
        assert result["null_document"]["score"] == pytest.approx(float(log_prior[0].exp()), rel=1e-4)
        posterior = log_prior.exp() * log_probs[:, 0, y].exp() / marginal[y]  # p(z|y,x), [K]
        by_posterior = sorted(range(1, len(posterior)), key=lambda k: -float(posterior[k]))
        assert [b["posterior"] for b in result["supporting_blocks"]] == pytest.approx(
            [float(posterior[k]) for k in by_posterior], rel=1e-4, abs=1e-7
        )
        assert [b["score"] for b in result["supporting_blocks"]] == pytest.approx(
            [float(log_prior[k].exp()) for k in by_posterior], rel=1e-4, abs=1e-7
        )


def test_multi_mask_span_marginal_equals_hand_computation(fill):
    log_prior, log_probs, masks = _by_hand(fill, SPAN_TEXT)
    assert len(masks) == 2
    results = fill(SPAN_TEXT, top_k=3, beam_size=8)
    for result in results:
        _check_result(result, fill.model.config.num_candidates - 1)
        tokens = result["token"]
        assert isinstance(tokens, list) and len(tokens) == 2
        # p(y|z,x) = Π_j p(y_j|z,x); p(y|x) = Σ_z p(z|x) p(y|z,x)
        likelihood = (log_probs[:, 0, tokens[0]] + log_probs[:, 1, tokens[1]]).exp()  # [K]
        assert result["score"] == pytest.approx(float((log_prior.exp() * likelihood).sum()), rel=1e-4)
        assert result["score_without_retrieval"] == pytest.approx(float(likelihood[0]), rel=1e-4)
        assert result["token_str"] == fill.tokenizer.decode(tokens)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)


def test_beam_search_finds_the_exact_top_k_on_a_small_vocabulary():
    generator = torch.Generator().manual_seed(0)
    num_candidates, num_masks, vocab = 4, 3, 6
    log_prior = torch.log_softmax(torch.randn(num_candidates, generator=generator) * 2, 0)
    log_probs = torch.log_softmax(torch.randn(num_candidates, num_masks, vocab, generator=generator) * 3, -1)
    exact = {}
    for y in itertools.product(range(vocab), repeat=num_masks):
        joint = log_prior + sum(log_probs[:, j, t] for j, t in enumerate(y))
        exact[y] = float(torch.logsumexp(joint, 0))
    best = sorted(exact, key=exact.get, reverse=True)[:4]
    found = beam_search(log_prior, log_probs, top_k=4, beam_size=vocab**num_masks)  # wide enough to be exact
    assert [tokens for tokens, _ in found] == best
    for tokens, joint in found:
        assert float(torch.logsumexp(joint, 0)) == pytest.approx(exact[tokens], abs=1e-5)
    greedy = beam_search(log_prior, log_probs, top_k=1, beam_size=1)
    assert len(greedy) == 1 and len(greedy[0][0]) == num_masks


def test_factory_paths_agree(fill, pretraining_dir):
    expected = fill(TEXT, top_k=2)
    by_encoder_dir = pipeline(TASK, model=os.path.join(pretraining_dir, "encoder"))
    by_subfolder = pipeline(TASK, model=pretraining_dir, model_kwargs={"subfolder": "encoder"})
    explicit = pipeline(
        TASK,
        model=RealmKnowledgeEncoder.from_pretrained(os.path.join(pretraining_dir, "encoder")),
        tokenizer=minilm_tokenizer(),
        retriever=RealmRetriever.from_pretrained(os.path.join(pretraining_dir, "retriever")),
        index=RealmIndex.from_pretrained(os.path.join(pretraining_dir, "index")),
    )
    for pipe in (by_encoder_dir, by_subfolder, explicit):
        assert isinstance(pipe, RealmFillMaskPipeline)
        got = pipe(TEXT, top_k=2)
        assert [r["token"] for r in got] == [r["token"] for r in expected]
        assert [r["score"] for r in got] == pytest.approx([r["score"] for r in expected], rel=1e-5)


def test_batched_results_equal_one_by_one(fill):
    texts = [TEXT, SPAN_TEXT, "[MASK] is the largest planet in the solar system.", "python was created by [MASK]."]
    one_by_one = fill(texts, top_k=2, batch_size=1)
    batched = fill(texts, top_k=2, batch_size=4)
    for single, batch in zip(one_by_one, batched):
        assert [r["token"] for r in single] == [r["token"] for r in batch]
        assert [r["score"] for r in single] == pytest.approx([r["score"] for r in batch], rel=1e-4)
        assert [r["score_without_retrieval"] for r in single] == pytest.approx(
            [r["score_without_retrieval"] for r in batch], rel=1e-4
        )
        assert [b["block_id"] for b in single[0]["supporting_blocks"]] == [
            b["block_id"] for b in batch[0]["supporting_blocks"]
        ]


def test_bad_inputs_raise_clear_errors(fill, pretraining_dir, caplog):
    with pytest.raises(ValueError, match=r"no \[MASK\]"):
        fill("paris is the capital of france.")
    with pytest.raises(ValueError, match="empty"):
        fill("  ")
    with pytest.raises(ValueError, match="Text 1 of the batch is None"):
        fill([TEXT, None])
    with pytest.raises(ValueError, match="top_k"):
        fill(TEXT, top_k=0)
    long_tail = " and".join(["paris is the capital of france"] * 10)
    with pytest.raises(ValueError, match=r"cut 1 \[MASK\]"):
        fill(f"{long_tail} [MASK].")
    with caplog.at_level(logging.WARNING, logger="realm_hf"):
        results = fill(f"[MASK] is the capital of france {long_tail}", top_k=1)
    assert any("query_max_length" in r.getMessage() for r in caplog.records)
    _check_result(results[0], fill.model.config.num_candidates - 1)
    # an encoder with no retriever or index beside it
    encoder = RealmKnowledgeEncoder.from_pretrained(os.path.join(pretraining_dir, "encoder"))
    encoder.name_or_path = ""  # as if built in memory
    with pytest.raises(ValueError, match="retriever"):
        pipeline(TASK, model=encoder, tokenizer=minilm_tokenizer())
    with pytest.raises(FileNotFoundError, match="not a REALM pre-training output directory"):
        RealmFillMaskPipeline.from_pretrained(os.path.join(pretraining_dir, "index"))


def test_an_index_of_other_weights_is_refused_unless_check_fingerprint_is_off(fill, pretraining_dir, tmp_path):
    """Same dims, same blocks, another document tower: only the manifest's fingerprint tells it apart."""
    import shutil

    from realm_pipeline_helpers import make_pretraining_dir

    other = make_pretraining_dir(str(tmp_path / "other"), seed=1)
    other_index = os.path.join(other, "index")
    refused = r"was built by document-tower weights .* not by the retriever's document tower .* check_fingerprint=False"
    # an explicit index at construction
    with pytest.raises(ValueError, match=refused):
        pipeline(TASK, model=pretraining_dir, index=other_index)
    with pytest.raises(ValueError, match=refused):
        pipeline(TASK, model=pretraining_dir, index=RealmIndex.from_pretrained(other_index))
    # an index passed to one call
    with pytest.raises(ValueError, match=refused):
        fill(TEXT, index=other_index)
    # the index found next to the model (a pre-training output whose index/ was replaced by another run's)
    mixed = tmp_path / "mixed"
    shutil.copytree(pretraining_dir, mixed)
    shutil.rmtree(mixed / "index")
    shutil.copytree(other_index, mixed / "index")
    with pytest.raises(ValueError, match=refused):
        pipeline(TASK, model=str(mixed))
    with pytest.raises(ValueError, match=refused):
        pipeline("fill-mask", model=str(mixed))

    # the explicit opt-out loads and uses it
    unchecked = pipeline(TASK, model=pretraining_dir, index=other_index, check_fingerprint=False)
    _check_result(unchecked(TEXT, top_k=1)[0], unchecked.model.config.num_candidates - 1)
    assert unchecked(TEXT, index=other_index, top_k=1)
    assert pipeline(TASK, model=str(mixed), check_fingerprint=False)(TEXT, top_k=1)
    plain = pipeline("fill-mask", model=str(mixed), model_kwargs={"check_fingerprint": False})
    assert plain.model.index.fingerprint == RealmIndex.from_pretrained(other_index).fingerprint
    assert len(plain(TEXT, top_k=2)) == 2


def test_a_continuation_piece_never_fills_a_word_on_its_own(pretraining_dir):
    fill = RealmFillMaskPipeline.from_pretrained(pretraining_dir)
    piece = fill.tokenizer.convert_tokens_to_ids("##gar")
    with torch.no_grad():  # the head now prefers "##gar" everywhere, by far
        fill.model.mlm_head.predictions.bias[piece] += 100.0
    single = fill(TEXT, top_k=5)
    assert piece not in [r["token"] for r in single]
    assert not any(r["token_str"].startswith("##") for r in single)
    assert sum(r["score"] for r in single) <= 1.0 + 1e-6  # p(y | x) over the whole vocabulary, not renormalized
    # one [MASK] per wordpiece: a later mask of a run may continue the word
    span = fill(SPAN_TEXT, top_k=3)
    assert all(r["token"][0] != piece for r in span)
    assert span[0]["token"][1] == piece
