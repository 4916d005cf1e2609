import pytest
import torch

from realm_hf import RealmKnowledgeEncoder, RealmKnowledgeEncoderConfig

import hand_computations as hand

B, K, L = 3, 4, 12


@pytest.fixture
def encoder(tiny_bert):
    config = RealmKnowledgeEncoderConfig(bert_config=tiny_bert, num_candidates=K, max_length=64, mask_token_id=3)
    return RealmKnowledgeEncoder(config).eval()


def make_batch(vocab=64):
    input_ids = torch.randint(5, vocab, (B, K, L))
    labels = torch.full((B, L), -100)
    labels[0, 2] = 10
    labels[1, 3:6] = torch.tensor([11, 12, 13])  # a multi-wordpiece span
    labels[2, 1] = 20
    labels[2, 7] = 21
    input_ids[:, :, :8][labels[:, None, :8].expand(-1, K, -1) != -100] = 3  # [MASK] where predicted
    relevance = torch.randn(B, K, requires_grad=True)
    return input_ids, labels, relevance


def test_marginal_loss_equals_logsumexp_of_separate_single_candidate_calls(encoder):
    input_ids, labels, relevance = make_batch()
    out = encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels)
    per_candidate = torch.stack(
        [
            encoder(input_ids=input_ids[:, k : k + 1], relevance_scores=torch.zeros(B, 1), labels=labels)
            .candidate_log_likelihood[:, 0]
            for k in range(K)
        ],
        dim=1,
    )  # [B, K]
    expected = -torch.logsumexp(torch.log_softmax(relevance, -1) + per_candidate, dim=-1).mean()
    torch.testing.assert_close(out.loss, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.candidate_log_likelihood, per_candidate, rtol=1e-5, atol=1e-5)


def test_candidate_likelihood_is_product_over_masked_tokens(encoder):
    input_ids, labels, relevance = make_batch()
    out = encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels)
    # by hand from the masked-position logits: sum of log p(y_j | z, x) over the masked tokens of example 1
    rows = (out.masked_positions[:, 0] == 1) & (out.masked_positions[:, 1] == 2)
    logits = out.masked_token_logits[rows]
    targets = torch.tensor([11, 12, 13])
    expected = torch.log_softmax(logits, -1).gather(1, targets[:, None]).sum()
    torch.testing.assert_close(out.candidate_log_likelihood[1, 2], expected)
    # logits only at masked positions, never [B, K, L, V]
    assert out.masked_token_logits.shape == (K * 6, 64)  # 1 + 3 + 2 masked tokens per candidate


def test_marginal_log_likelihood_by_hand_from_raw_logits(encoder):
    """log p(y | x) = log Σ_z p(y | z, x) p(z | x) with p(y | z, x) = Π_j p(y_j | z, x): each factor a softmax of the
    MLM head's vocabulary logits over the BERT states of `[CLS] x [SEP] z [SEP]`, computed by hand
    (tests/modeling/hand_computations.py), and p(z | x) the softmax of the relevance scores."""
    input_ids, labels, relevance = make_batch()
    out = encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels)
    with torch.no_grad():
        per_candidate = hand.candidate_log_likelihoods(encoder, input_ids, labels)  # [B, K]
    expected = hand.marginal_log_likelihood(per_candidate, relevance.detach())  # [B]
    torch.testing.assert_close(out.candidate_log_likelihood.double(), per_candidate, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.marginal_log_likelihood.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.loss.double(), -expected.mean(), rtol=1e-5, atol=1e-5)


def test_gradient_wrt_relevance_is_posterior_minus_prior(encoder):
    """Paper, Appendix A: d log p(y|x) / d f(x, z_k) = p(z_k | y, x) - p(z_k | x), with the posterior and the prior
    computed by hand from the raw scores and the raw per-candidate log-likelihoods (not the model's outputs)."""
    input_ids, labels, relevance = make_batch()
    out = encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels)
    (-out.loss * B).backward()  # sum over examples of log p(y|x)
    with torch.no_grad():
        per_candidate = hand.candidate_log_likelihoods(encoder, input_ids, labels)  # [B, K]
    prior, posterior = hand.prior_and_posterior(per_candidate, relevance.detach())
    torch.testing.assert_close(relevance.grad.double(), posterior - prior, rtol=1e-5, atol=1e-6)
    # the gradient sums to zero per example: adding a constant to every score changes nothing
    torch.testing.assert_close(relevance.grad.sum(-1), torch.zeros(B), atol=1e-6, rtol=0)
    # and the model's own posterior is that one
    torch.testing.assert_close(out.posterior_log_probs.exp().double(), posterior, rtol=1e-5, atol=1e-6)


def test_null_document_gives_retrieval_utility(encoder):
    input_ids, labels, relevance = make_batch()
    out = encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels, null_candidate_index=1)
    torch.testing.assert_close(out.retrieval_utility[:, 1], torch.zeros(B))
    torch.testing.assert_close(
        out.retrieval_utility, out.candidate_log_likelihood - out.candidate_log_likelihood[:, 1:2]
    )
    assert encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels).retrieval_utility is None


def test_all_mass_on_one_candidate_reduces_to_its_likelihood(encoder):
    input_ids, labels, _ = make_batch()
    relevance = torch.full((B, K), -1e4)
    relevance[:, 2] = 0.0
    out = encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels)
    torch.testing.assert_close(out.marginal_log_likelihood, out.candidate_log_likelihood[:, 2])


def test_labels_per_candidate_and_mask_token_prediction(encoder):
    input_ids, labels, relevance = make_batch()
    shared = encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels)
    per_candidate = encoder(
        input_ids=input_ids, relevance_scores=relevance, labels=labels[:, None].expand(-1, K, -1).clone()
    )
    torch.testing.assert_close(shared.loss, per_candidate.loss)
    unlabeled = encoder(input_ids=input_ids)
    assert unlabeled.loss is None
    assert torch.equal(unlabeled.masked_positions, (input_ids == 3).nonzero())


def test_loss_trains_encoder_and_relevance(encoder):
    encoder.train()
    input_ids, labels, _ = make_batch()
    relevance = torch.zeros(B, K, requires_grad=True)
    optimizer = torch.optim.Adam(list(encoder.parameters()) + [relevance], lr=1e-2)
    losses = []
    for _ in range(15):
        loss = encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_bad_inputs_raise_clear_errors(encoder):
    input_ids, labels, relevance = make_batch()
    with pytest.raises(ValueError, match=r"no masked position"):
        bad = labels.clone()
        bad[1] = -100
        encoder(input_ids=input_ids, relevance_scores=relevance, labels=bad)
    with pytest.raises(ValueError, match=r"\[B, K, L\]"):
        encoder(input_ids=input_ids[:, 0], labels=labels)
    with pytest.raises(ValueError, match="empty"):
        encoder(input_ids=input_ids[:, :0], relevance_scores=relevance[:, :0], labels=labels)  # K = 0
    with pytest.raises(ValueError, match="relevance_scores"):
        encoder(input_ids=input_ids, relevance_scores=relevance[:, :2], labels=labels)
    with pytest.raises(ValueError, match="labels"):
        encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels[:, :5])
    with pytest.raises(ValueError, match="outside"):
        bad = labels.clone()
        bad[0, 2] = 999
        encoder(input_ids=input_ids, relevance_scores=relevance, labels=bad)
    with pytest.raises(ValueError, match="null_candidate_index"):
        encoder(input_ids=input_ids, relevance_scores=relevance, labels=labels, null_candidate_index=K)
    with pytest.raises(ValueError, match="attention_mask"):
        encoder(input_ids=input_ids, attention_mask=torch.ones(B, K, L + 1), labels=labels)
