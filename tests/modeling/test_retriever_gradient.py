"""The retriever's gradient in the paper's setting (`null_document_score="embedding"`: ∅ is the empty block embedded
by the document tower, a query-dependent score like any block's), through retriever + knowledge-augmented encoder:
REALM Appendix A, ∂ log p(y|x) / ∂f(x, z) = p(z | y, x) - p(z | x) for every candidate, ∅ included, and the
parameter gradient against finite differences."""

import pytest
import torch

from realm_hf import RealmKnowledgeEncoder, RealmKnowledgeEncoderConfig, RealmRetriever, RealmRetrieverConfig

import hand_computations as hand

B, K, LQ, LB, L = 2, 4, 6, 9, 12
CLS, SEP, MASK = 1, 2, 3


SCALE = 0.1


def make_models(tiny_bert):
    """Weights drawn wider than BERT's 0.02 (and the scores scaled down): a random encoder whose p(y | z, x) depends
    on z, and scores that leave every candidate a share, so that p(z | y, x) - p(z | x) is far from 0 everywhere."""
    retriever = RealmRetriever(RealmRetrieverConfig(
        bert_config=dict(tiny_bert, initializer_range=0.3), share_towers=False, null_document_score="embedding",
        similarity_scale=SCALE, query_max_length=16, block_max_length=32,
    )).eval()
    encoder = RealmKnowledgeEncoder(RealmKnowledgeEncoderConfig(
        bert_config=dict(tiny_bert, initializer_range=0.5), num_candidates=K, max_length=64, mask_token_id=MASK,
    )).eval()
    return retriever, encoder


def make_batch():
    """Queries, K candidates with ∅ = `[CLS] [SEP] [SEP]` first, and the joined sequences with 2 masked tokens."""
    generator = torch.Generator().manual_seed(1)
    query = torch.randint(5, 64, (B, LQ), generator=generator)
    query[:, 0], query[:, -1] = CLS, SEP
    candidates = torch.randint(5, 64, (B, K, LB), generator=generator)
    candidates[:, :, 0], candidates[:, :, 2], candidates[:, :, -1] = CLS, SEP, SEP
    candidate_types = torch.zeros(B, K, LB, dtype=torch.long)
    candidate_types[:, :, 3:] = 1
    candidate_mask = torch.ones(B, K, LB, dtype=torch.long)
    candidates[:, 0] = 0  # ∅: [CLS] [SEP] [SEP], then padding
    candidates[:, 0, :3] = torch.tensor([CLS, SEP, SEP])
    candidate_types[:, 0] = 0
    candidate_types[:, 0, 2] = 1
    candidate_mask[:, 0, 3:] = 0
    joined = torch.randint(5, 64, (B, K, L), generator=generator)
    labels = torch.full((B, L), -100)
    labels[:, 2] = torch.randint(5, 64, (B,), generator=generator)
    labels[:, 3] = torch.randint(5, 64, (B,), generator=generator)
    joined[:, :, 2:4] = MASK
    joined[:, 0, 6:] = 0  # ∅'s joined sequence is [CLS] x [SEP] [SEP]: shorter
    joined_mask = torch.ones(B, K, L, dtype=torch.long)
    joined_mask[:, 0, 6:] = 0
    return {
        "query_input_ids": query, "candidate_input_ids": candidates, "candidate_token_type_ids": candidate_types,
        "candidate_attention_mask": candidate_mask, "input_ids": joined, "attention_mask": joined_mask,
        "labels": labels,
    }


def log_likelihood_of_marginal(retriever, encoder, batch, keep=None):
    """Σ_b log p(y | x), and the retriever's output (embeddings kept for their gradients)."""
    scored = retriever(
        query_input_ids=batch["query_input_ids"], candidate_input_ids=batch["candidate_input_ids"],
        candidate_token_type_ids=batch["candidate_token_type_ids"],
        candidate_attention_mask=batch["candidate_attention_mask"], null_candidate_index=0,
    )
    if keep:
        for tensor in (scored.relevance_scores, scored.query_embeds, scored.candidate_embeds):
            tensor.retain_grad()
    out = encoder(
        input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], relevance_scores=scored.relevance_scores,
        labels=batch["labels"], null_candidate_index=0,
    )
    return out.marginal_log_likelihood.sum(), scored


def test_gradient_wrt_every_score_null_document_included_is_posterior_minus_prior(tiny_bert):
    """∂ log p(y|x) / ∂f(x, z) = p(z | y, x) - p(z | x) for each of the K candidates, ∅ (candidate 0) included, with
    f computed by hand as q·d, and p(z | x), p(z | y, x) by hand from f and the per-candidate log-likelihoods. The
    gradient is read at the scores and recovered from the embeddings' gradients (∂/∂d_k = g_k q, ∂/∂q = Σ_k g_k d_k),
    so a score cut from the graph between the embeddings and the loss (∅'s detached, say) is seen too."""
    retriever, encoder = make_models(tiny_bert)
    batch = make_batch()
    total, scored = log_likelihood_of_marginal(retriever, encoder, batch, keep=True)
    total.backward()
    q = scored.query_embeds.detach().double()  # [B, D]
    d = scored.candidate_embeds.detach().double()  # [B, K, D]
    scores = SCALE * torch.einsum("bd,bkd->bk", q, d)  # f(x, z) by hand, ∅'s embedded empty block included
    torch.testing.assert_close(scored.relevance_scores.detach().double(), scores, rtol=1e-5, atol=1e-4)
    with torch.no_grad():
        per_candidate = hand.candidate_log_likelihoods(
            encoder, batch["input_ids"], batch["labels"], attention_mask=batch["attention_mask"]
        )  # [B, K]
    prior, posterior = hand.prior_and_posterior(per_candidate, scores)
    expected = posterior - prior  # [B, K]
    assert expected[:, 0].abs().min() > 0.05  # ∅'s gradient is far from zero here: the checks below have teeth
    torch.testing.assert_close(scored.relevance_scores.grad.double(), expected, rtol=1e-4, atol=1e-6)
    # through the towers: the gradient of each candidate embedding is g_k · SCALE · q, of the query Σ_k g_k SCALE d_k
    from_documents = torch.einsum("bkd,bd->bk", scored.candidate_embeds.grad.double(), q) / (SCALE * (q * q).sum(-1, keepdim=True))
    torch.testing.assert_close(from_documents, expected, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(
        scored.query_embeds.grad.double(), SCALE * torch.einsum("bk,bkd->bd", expected, d), rtol=1e-4, atol=1e-5
    )


PARAMETERS = [
    "query_embedder.projection.weight",
    "query_embedder.bert.encoder.layer.0.attention.self.query.weight",
    "doc_embedder.projection.weight",
    "doc_embedder.bert.embeddings.word_embeddings.weight",  # [SEP] is in every block, and all of ∅
    "doc_embedder.bert.encoder.layer.1.output.dense.bias",
]


def test_retriever_parameter_gradient_matches_finite_differences(tiny_bert):
    """Autograd's derivative of log p(y|x) along a random direction v of each of a few retriever weight tensors,
    <∇θ, v>, equals the central finite difference (L(θ + hv) - L(θ - hv)) / 2h. The models run in float64; the
    scores and the marginal are float32 by design (cast to float32 for bf16 runs), so h = 1e-3 and the tolerance is
    that of float32 rounding of the loss divided by h (differences measured: <= 6e-4 on derivatives of 0.1 to 2.4)."""
    retriever, encoder = make_models(tiny_bert)
    retriever.double()
    encoder.double()
    batch = make_batch()
    parameters = dict(retriever.named_parameters())
    directions = {
        name: torch.randn(parameters[name].shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
        for name in PARAMETERS
    }
    total, _ = log_likelihood_of_marginal(retriever, encoder, batch)
    total.backward()
    step = 1e-3
    results = {}
    for name, direction in directions.items():
        parameter = parameters[name]
        analytic = (parameter.grad * direction).sum().item()
        with torch.no_grad():
            original = parameter.detach().clone()
            parameter.copy_(original + step * direction)
            plus = log_likelihood_of_marginal(retriever, encoder, batch)[0].item()
            parameter.copy_(original - step * direction)
            minus = log_likelihood_of_marginal(retriever, encoder, batch)[0].item()
            parameter.copy_(original)
        results[name] = ((plus - minus) / (2 * step), analytic)
    assert all(abs(analytic) > 0.05 for _, analytic in results.values()), results  # derivatives worth checking
    wrong = {name: pair for name, pair in results.items() if pair[0] != pytest.approx(pair[1], rel=1e-2, abs=2e-3)}
    assert not wrong, f"(finite difference, autograd) disagree: {wrong}"
