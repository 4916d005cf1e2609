import pytest
import torch

from realm_hf import RealmReader, RealmReaderConfig
from realm_hf.modeling.reader import enumerate_spans

import hand_computations as hand

B, K, L, W = 2, 3, 14, 3


@pytest.fixture
def reader(tiny_bert):
    return RealmReader(RealmReaderConfig(bert_config=tiny_bert, max_span_width=W, span_hidden_size=8, max_length=64)).eval()


def make_inputs():
    input_ids = torch.randint(5, 64, (B, K, L))
    token_type_ids = torch.zeros(B, K, L, dtype=torch.long)
    token_type_ids[:, :, 5:] = 1  # [CLS] q q q [SEP] | block ... [SEP]
    attention_mask = torch.ones(B, K, L, dtype=torch.long)
    attention_mask[1, 2, 10:] = 0  # a shorter block
    token_type_ids[1, 2, 10:] = 0
    return input_ids, attention_mask, token_type_ids


def test_spans_stay_inside_the_block(reader):
    input_ids, attention_mask, token_type_ids = make_inputs()
    out = reader(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    starts, ends = out.span_starts, out.span_ends
    assert ((ends - starts) < W).all() and (ends >= starts).all()
    valid = out.span_logits > torch.finfo(torch.float32).min / 2  # [B, K, S]
    # block positions are 5..L-2 (L-1 is the final [SEP]); the shorter block ends at 8 ([SEP] at 9)
    assert valid[0, 0].sum() == sum(1 for s, e in zip(starts, ends) if s >= 5 and e <= L - 2)
    assert valid[1, 2].sum() == sum(1 for s, e in zip(starts, ends) if s >= 5 and e <= 8)
    assert not valid[0, 0, (starts < 5)].any()
    torch.testing.assert_close(out.span_log_probs.exp().sum(-1), torch.ones(B, K))


def test_span_softmax_covers_exactly_the_valid_spans_of_each_block(reader):
    """p(s | z, x) is a softmax over exactly the spans whose start and end are block positions (token type 1,
    attended, not the final [SEP]) and whose width is at most max_span_width: those spans' log-probabilities equal a
    log-softmax of their MLP([h_start; h_end]) scores computed by hand, and every other span has probability 0."""
    input_ids, attention_mask, token_type_ids = make_inputs()
    out = reader(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
    spans = list(zip(out.span_starts.tolist(), out.span_ends.tolist()))
    for b in range(B):
        by_hand = hand.span_scores(reader, input_ids[b], attention_mask[b], token_type_ids[b], W)  # K dicts
        for k in range(K):
            expected = hand.span_log_probs(by_hand[k])
            assert set(expected) == {s for s in spans if s in expected}  # every valid span is enumerated
            for i, span in enumerate(spans):
                if span in expected:
                    torch.testing.assert_close(out.span_log_probs[b, k, i].double(), expected[span], rtol=1e-5, atol=1e-5)
                else:
                    assert out.span_log_probs[b, k, i].exp() == 0.0, (b, k, span)
    # the shorter block (attended up to 9, its [SEP] at 9) has spans in 5..8 only
    shorter = hand.span_scores(reader, input_ids[1], attention_mask[1], token_type_ids[1], W)[2]
    assert min(start for start, _ in shorter) == 5 and max(end for _, end in shorter) == 8


GOLD_SPANS = {
    "answer twice in block 0 and once in block 2; example 1 answerable nowhere": {
        (0, 0): [(6, 7), (9, 9)], (0, 2): [(5, 7)],
    },
    "both answerable, one answer in the shorter block": {
        (0, 1): [(12, 12)], (1, 2): [(7, 8)], (1, 0): [(5, 5), (8, 10)],
    },
}


@pytest.mark.parametrize("gold", GOLD_SPANS.values(), ids=GOLD_SPANS.keys())
def test_span_marginal_loss_by_hand(reader, gold):
    """loss = -mean over answerable questions of log Σ_z p(z | x) Σ_{s ∈ S(z, y)} p(s | z, x), with p(z | x) the
    softmax of the retrieval scores and p(s | z, x) the softmax of the span scores over the valid spans of block z,
    all computed by hand from the BERT states and the span scorer's weights (tests/modeling/hand_computations.py)."""
    input_ids, attention_mask, token_type_ids = make_inputs()
    relevance = torch.randn(B, K)
    starts = torch.full((B, K, 2), -1)
    ends = torch.full((B, K, 2), -1)
    for (b, k), answers in gold.items():
        for a, (start, end) in enumerate(answers):
            starts[b, k, a], ends[b, k, a] = start, end
    out = reader(
        input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
        relevance_scores=relevance, start_positions=starts, end_positions=ends,
    )
    log_likelihoods = []
    for b in range(B):
        log_prior = hand.log_normalize(relevance[b].double())  # [K]
        by_hand = hand.span_scores(reader, input_ids[b], attention_mask[b], token_type_ids[b], W)
        terms = [
            log_prior[k] + hand.span_log_probs(by_hand[k])[span]
            for (gold_b, k), answers in gold.items() if gold_b == b for span in answers
        ]
        if terms:
            log_likelihoods.append(hand.log_sum_exp(terms))
    torch.testing.assert_close(out.loss.double(), -torch.stack(log_likelihoods).mean(), rtol=1e-5, atol=1e-5)
    assert out.answerable.tolist() == [any(b == gold_b for gold_b, _ in gold) for b in range(B)]


def test_unanswerable_batch_has_zero_loss_with_graph(reader):
    input_ids, attention_mask, token_type_ids = make_inputs()
    none = torch.full((B, K, 1), -1)
    out = reader(input_ids=input_ids, token_type_ids=token_type_ids, start_positions=none, end_positions=none)
    assert out.loss.item() == 0.0 and out.loss.requires_grad


def test_any_batch_size_gives_the_same_predictions(reader):
    input_ids, attention_mask, token_type_ids = make_inputs()
    relevance = torch.randn(B, K)
    batched = reader(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, relevance_scores=relevance)
    for b in range(B):
        single = reader(
            input_ids=input_ids[b : b + 1], attention_mask=attention_mask[b : b + 1],
            token_type_ids=token_type_ids[b : b + 1], relevance_scores=relevance[b : b + 1],
        )
        for name in ("best_candidate", "best_start", "best_end"):
            assert getattr(single, name)[0] == getattr(batched, name)[b]
        torch.testing.assert_close(single.best_score[0], batched.best_score[b], rtol=1e-5, atol=1e-5)


def test_best_span_maximizes_retrieval_plus_span_log_prob(reader):
    input_ids, attention_mask, token_type_ids = make_inputs()
    relevance = torch.randn(B, K)
    out = reader(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, relevance_scores=relevance)
    joint = out.span_log_probs + torch.log_softmax(relevance, -1)[..., None]
    joint = joint.masked_fill(out.span_logits <= torch.finfo(torch.float32).min / 2, float("-inf"))
    torch.testing.assert_close(out.best_score, joint.flatten(1).max(-1).values)


def test_enumerate_spans_order():
    starts, ends = enumerate_spans(4, 2, torch.device("cpu"))
    assert list(zip(starts.tolist(), ends.tolist())) == [(0, 0), (1, 1), (2, 2), (3, 3), (0, 1), (1, 2), (2, 3)]


def test_reader_bad_inputs(reader):
    input_ids, attention_mask, token_type_ids = make_inputs()
    with pytest.raises(ValueError, match="token_type_ids"):
        reader(input_ids=input_ids)
    with pytest.raises(ValueError, match="both"):
        reader(input_ids=input_ids, token_type_ids=token_type_ids, start_positions=torch.full((B, K, 1), -1))
    with pytest.raises(ValueError, match="relevance_scores"):
        reader(input_ids=input_ids, token_type_ids=token_type_ids, relevance_scores=torch.zeros(B, K + 1))


def test_global_normalization_is_one_softmax_over_all_spans_of_all_blocks(tiny_bert, reader):
    """ORQA's objective: `p(z|x) p(s|z,x)` = softmax over every (block, span) of `retrieval score + span score`."""
    config = RealmReaderConfig(
        bert_config=tiny_bert, max_span_width=W, span_hidden_size=8, max_length=64, span_normalization="global"
    )
    global_reader = RealmReader(config).eval()
    global_reader.load_state_dict(reader.state_dict())
    input_ids, attention_mask, token_type_ids = make_inputs()
    relevance = torch.randn(B, K)
    starts = torch.full((B, K, 1), -1)
    ends = torch.full((B, K, 1), -1)
    starts[0, 0, 0], ends[0, 0, 0] = 6, 7
    starts[0, 2, 0], ends[0, 2, 0] = 5, 5
    inputs = dict(
        input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids, relevance_scores=relevance,
        start_positions=starts, end_positions=ends,
    )
    out, per_block = global_reader(**inputs), reader(**inputs)
    torch.testing.assert_close(out.span_logits, per_block.span_logits)  # same weights, same span scores
    valid = out.span_logits > torch.finfo(torch.float32).min / 2  # [B, K, S]
    scores = (relevance[..., None] + out.span_logits).masked_fill(~valid, float("-inf"))  # [B, K, S]
    joint = torch.log_softmax(scores.flatten(1), -1).view_as(scores)  # one softmax per question
    torch.testing.assert_close(out.block_log_probs, torch.logsumexp(joint, -1))
    torch.testing.assert_close((out.span_log_probs + out.block_log_probs[..., None])[valid], joint[valid])
    span_index = {(s.item(), e.item()): i for i, (s, e) in enumerate(zip(out.span_starts, out.span_ends))}
    expected = -torch.logsumexp(torch.stack([joint[0, 0, span_index[(6, 7)]], joint[0, 2, span_index[(5, 5)]]]), 0)
    torch.testing.assert_close(out.loss, expected)
    torch.testing.assert_close(out.best_score, joint.flatten(1).max(-1).values)
    # the paper's per-block normalization weighs the blocks by the retriever alone
    torch.testing.assert_close(per_block.block_log_probs, torch.log_softmax(relevance, -1))
    assert not torch.allclose(out.block_log_probs, per_block.block_log_probs, atol=1e-3)
