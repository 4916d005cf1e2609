"""The learned null-document prior of the retriever (`config.null_document_score`)."""

import json
import math

import pytest
import torch
from huggingface_hub.errors import StrictDataclassClassValidationError
from safetensors.torch import load_file, save_file

from realm_hf import RealmRetriever, RealmRetrieverConfig
from realm_hf.modeling.knowledge_encoder import marginalize_over_candidates

from test_retriever import inputs, make

B, K, D = 3, 5, 128


def scores_at(retriever, scale, null_candidate_index=0, K=K):
    """Relevance scores for random candidate embeddings of a given scale (inner products of size ~ scale²)."""
    query, _ = inputs(B=B)
    embeds = scale * torch.randn(B, K, D)
    return retriever(query_input_ids=query, candidate_embeds=embeds, null_candidate_index=null_candidate_index)


@pytest.mark.parametrize("scale", [0.01, 1.0, 10.0, 100.0])
@pytest.mark.parametrize("logit", [0.0, -3.0, 2.5])
def test_null_prior_mass_is_a_function_of_the_logit_only(tiny_bert, scale, logit):
    retriever = make(tiny_bert)
    with torch.no_grad():
        retriever.null_document_logit.fill_(logit)
    scores = scores_at(retriever, scale).relevance_scores  # [B, K]
    prior = torch.softmax(scores, dim=-1)
    expected = math.exp(logit) / (K - 1 + math.exp(logit))
    # float32 scores of size |f| are known to about |f| · 1e-7: so is the prior mass, relatively
    rtol = 1e-6 * max(10.0, scores.abs().max().item())
    torch.testing.assert_close(prior[:, 0], torch.full((B,), expected), rtol=rtol, atol=1e-7)


@pytest.mark.parametrize("null_index", [0, 2, K - 1])
def test_distribution_among_retrieved_blocks_is_unchanged(tiny_bert, null_index):
    learned = make(tiny_bert)
    with torch.no_grad():
        learned.null_document_logit.fill_(1.3)
    embedding = make(tiny_bert, null_document_score="embedding")
    embedding.load_state_dict({k: v for k, v in learned.state_dict().items() if k != "null_document_logit"})
    query, _ = inputs(B=B)
    embeds = 5 * torch.randn(B, K, D)
    new = learned(query_input_ids=query, candidate_embeds=embeds, null_candidate_index=null_index).relevance_scores
    old = embedding(query_input_ids=query, candidate_embeds=embeds, null_candidate_index=null_index).relevance_scores
    retrieved = [k for k in range(K) if k != null_index]
    torch.testing.assert_close(new[:, retrieved], old[:, retrieved])
    torch.testing.assert_close(
        torch.softmax(new[:, retrieved], -1), torch.softmax(old[:, retrieved], -1)
    )
    # p(z_k | x) = (1 - p(∅ | x)) · softmax over the retrieved blocks
    prior = torch.softmax(new, -1)
    renormalized = prior[:, retrieved] / (1 - prior[:, null_index : null_index + 1])
    torch.testing.assert_close(renormalized, torch.softmax(old[:, retrieved], -1))


def test_a_single_candidate_scores_the_logit(tiny_bert):
    retriever = make(tiny_bert)
    with torch.no_grad():
        retriever.null_document_logit.fill_(0.7)
    out = scores_at(retriever, 1.0, K=1)
    torch.testing.assert_close(out.relevance_scores, torch.full((B, 1), 0.7))


def test_gradients_are_those_of_the_marginal_likelihood(tiny_bert):
    """∂ log p(y|x)/∂b = post_∅ - prior_∅; ∂/∂f_k = post_k - q_k (1 - post_∅) for the retrieved blocks, where q is the
    softmax over them: the logsumexp term is not detached, so shifting every retrieved score changes nothing."""
    retriever = make(tiny_bert).train()
    query, _ = inputs(B=B)
    embeds = torch.randn(B, K, D)
    out = retriever(query_input_ids=query, candidate_embeds=embeds, null_candidate_index=0)
    out.relevance_scores.retain_grad()
    raw = torch.einsum("bd,bkd->bk", out.query_embeds, out.candidate_embeds).detach().requires_grad_(True)  # [B, K]
    log_likelihood = torch.randn(B, K) * 3  # log p(y | z_k, x)
    marginal, prior, posterior = marginalize_over_candidates(log_likelihood, out.relevance_scores)
    marginal.sum().backward()
    assert retriever.null_document_logit.grad is not None
    post, pri = posterior.exp().detach(), prior.exp().detach()
    torch.testing.assert_close(retriever.null_document_logit.grad, (post[:, 0] - pri[:, 0]).sum().reshape(1), rtol=1e-4, atol=1e-6)

    # the same gradient w.r.t. the raw inner products of the retrieved blocks, through the same replacement
    rescored = retriever._with_null_document_prior(raw, 0)
    marginalize_over_candidates(log_likelihood, rescored)[0].sum().backward()
    q = torch.softmax(raw[:, 1:].detach(), -1)
    expected = post[:, 1:] - q * (1 - post[:, :1])
    torch.testing.assert_close(raw.grad[:, 1:], expected, rtol=1e-4, atol=1e-6)
    assert raw.grad[:, 0].abs().max() == 0  # the embedded score of ∅ is unused
    torch.testing.assert_close(raw.grad[:, 1:].sum(-1), torch.zeros(B), rtol=0, atol=1e-6)
    # and the gradient reaches the query tower
    assert retriever.query_embedder.projection.weight.grad.abs().sum() > 0


def test_embedding_mode_reproduces_the_inner_products(tiny_bert):
    retriever = make(tiny_bert, null_document_score="embedding")
    assert not hasattr(retriever, "null_document_logit")
    assert "null_document_logit" not in retriever.state_dict()
    query, candidates = inputs(B=2, K=3)
    plain = retriever(query_input_ids=query, candidate_input_ids=candidates).relevance_scores
    told = retriever(query_input_ids=query, candidate_input_ids=candidates, null_candidate_index=0).relevance_scores
    q = retriever.embed_queries(query)
    d = retriever.embed_documents(candidates.view(-1, 11)).view(2, 3, -1)
    assert torch.equal(plain, told)
    torch.testing.assert_close(told, torch.einsum("bd,bkd->bk", q, d))


def test_learned_mode_without_a_null_index_scores_like_before(tiny_bert):
    retriever = make(tiny_bert)
    query, candidates = inputs(B=2, K=3)
    out = retriever(query_input_ids=query, candidate_input_ids=candidates)
    q = retriever.embed_queries(query)
    d = retriever.embed_documents(candidates.view(-1, 11)).view(2, 3, -1)
    torch.testing.assert_close(out.relevance_scores, torch.einsum("bd,bkd->bk", q, d))


@pytest.mark.parametrize("mode", ["learned", "embedding"])
@pytest.mark.parametrize("bad", [3, -1, 1.0, True])
def test_bad_null_candidate_index(tiny_bert, mode, bad):
    retriever = make(tiny_bert, null_document_score=mode)
    query, candidates = inputs(B=2, K=3)
    with pytest.raises(ValueError, match=r"null_candidate_index.*\[0, 3\)"):
        retriever(query_input_ids=query, candidate_input_ids=candidates, null_candidate_index=bad)


def test_bad_mode_is_refused(tiny_bert):
    with pytest.raises(StrictDataclassClassValidationError, match="null_document_score.*'zero'"):
        RealmRetrieverConfig(bert_config=tiny_bert, null_document_score="zero")


def test_save_and_load_keeps_the_logit(tmp_path, tiny_bert):
    retriever = make(tiny_bert)
    with torch.no_grad():
        retriever.null_document_logit.fill_(-2.25)
    retriever.save_pretrained(tmp_path)
    loaded = RealmRetriever.from_pretrained(tmp_path)
    assert loaded.config.null_document_score == "learned"
    assert loaded.null_document_logit.item() == -2.25
    embedding = make(tiny_bert, null_document_score="embedding")
    embedding.save_pretrained(tmp_path / "embedding")
    assert RealmRetriever.from_pretrained(tmp_path / "embedding").config.null_document_score == "embedding"


def test_a_model_saved_before_the_field_existed_loads_with_a_zero_logit(tmp_path, tiny_bert):
    retriever = make(tiny_bert)
    retriever.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["null_document_score"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    weights = load_file(tmp_path / "model.safetensors")
    del weights["null_document_logit"]
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    for _ in range(3):  # a fresh (uninitialized) parameter each time: 0 must come from initialization
        loaded = RealmRetriever.from_pretrained(tmp_path)
        assert loaded.config.null_document_score == "learned"
        assert loaded.null_document_logit.item() == 0.0
    for key, tensor in retriever.state_dict().items():
        if key != "null_document_logit":
            assert torch.equal(tensor, loaded.state_dict()[key]), key
    # and the old config dict as such
    old_config = RealmRetrieverConfig(**{k: v for k, v in config.items() if k != "model_type"})
    assert old_config.null_document_score == "learned"


def test_the_logit_is_a_one_element_vector_and_older_scalar_checkpoints_still_load(tiny_bert, tmp_path):
    """DeepSpeed broadcasts parameters as byte views, which a 0-dim tensor cannot give: the logit has shape [1]. A
    checkpoint that stored it as a 0-dim scalar loads into the [1] parameter with its value, and saves as [1]."""
    retriever = make(tiny_bert)
    assert retriever.null_document_logit.shape == (1,)
    retriever.save_pretrained(tmp_path / "old")
    weights = load_file(tmp_path / "old" / "model.safetensors")
    weights["null_document_logit"] = torch.tensor(0.7)  # as saved before it had a dimension
    save_file(weights, tmp_path / "old" / "model.safetensors", metadata={"format": "pt"})
    loaded = RealmRetriever.from_pretrained(tmp_path / "old")
    torch.testing.assert_close(loaded.null_document_logit.detach(), torch.tensor([0.7]))
    loaded.save_pretrained(tmp_path / "new")
    assert load_file(tmp_path / "new" / "model.safetensors")["null_document_logit"].shape == (1,)
    torch.testing.assert_close(RealmRetriever.from_pretrained(tmp_path / "new").null_document_logit.detach(),
                               torch.tensor([0.7]))
