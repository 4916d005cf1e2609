import pytest
import torch

from realm_hf import RealmReader, RealmReaderConfig
from realm_hf.modeling.reader import enumerate_spans

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


def test_span_marginal_loss_by_hand(reader):
    input_ids, attention_mask, token_type_ids = make_inputs()
    relevance = torch.randn(B, K)
    starts = torch.full((B, K, 2), -1)
    ends = torch.full((B, K, 2), -1)
    starts[0, 0, 0], ends[0, 0, 0] = 6, 7  # example 0: answer twice in block 0, once in block 2
    starts[0, 0, 1], ends[0, 0, 1] = 9, 9
    starts[0, 2, 0], ends[0, 2, 0] = 5, 7
    # example 1: answer nowhere -> no loss contribution
    out = reader(
        input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
        relevance_scores=relevance, start_positions=starts, end_positions=ends,
    )
    span_index = {(s.item(), e.item()): i for i, (s, e) in enumerate(zip(out.span_starts, out.span_ends))}
    log_pz = torch.log_softmax(relevance[0], -1)
    terms = [
        log_pz[0] + out.span_log_probs[0, 0, span_index[(6, 7)]],
        log_pz[0] + out.span_log_probs[0, 0, span_index[(9, 9)]],
        log_pz[2] + out.span_log_probs[0, 2, span_index[(5, 7)]],
    ]
    expected = -torch.logsumexp(torch.stack(terms), 0)
    torch.testing.assert_close(out.loss, expected)
    assert out.answerable.tolist() == [True, False]


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
