"""Length buckets (`length_buckets` in the retriever and encoder configs): BERT runs over groups of rows padded only to
their own longest row, with the same outputs and gradients as one padded batch."""

import pytest
import torch

from realm_hf import (
    RealmKnowledgeEncoder, RealmKnowledgeEncoderConfig, RealmReader, RealmReaderConfig, RealmRetriever,
    RealmRetrieverConfig,
)
from realm_hf.modeling.common import length_bucket_groups, run_bert

BERT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64, "vocab_size": 120}
B, K, L = 2, 4, 24


def right_padded(lengths: list[int], length: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(5, 120, (len(lengths), length), generator=generator)  # [N, L]
    mask = (torch.arange(length)[None] < torch.tensor(lengths)[:, None]).long()  # [N, L]
    return ids * mask, mask


def pair(model_class, config_class, **config):
    """The same random weights, one batch vs three length buckets."""
    torch.manual_seed(0)
    padded = model_class(config_class(bert_config=BERT, **config))
    bucketed = model_class(config_class(bert_config=BERT, length_buckets=3, **config))
    bucketed.load_state_dict(padded.state_dict())
    return padded.eval(), bucketed.eval()


def bert_lengths(model) -> list[int]:
    """Record the sequence length of every BERT call of `model`."""
    seen = []
    for module in model.modules():
        if module.__class__.__name__ == "BertEmbeddings":
            module.register_forward_hook(lambda m, args, kwargs, out: seen.append(out.shape[1]), with_kwargs=True)
    return seen


def test_encoder_loss_and_gradients_match_one_padded_batch_while_short_rows_run_short():
    g = torch.Generator().manual_seed(1)
    # the null document (short) and blocks of several lengths, as in a REALM candidate set
    ids, mask = right_padded([6, 24, 17, 11, 6, 20, 24, 9], L, g)
    ids, mask = ids.view(B, K, L), mask.view(B, K, L)
    types = torch.zeros_like(ids)
    labels = torch.full((B, L), -100)
    labels[:, 2] = ids[:, 0, 2]
    scores = torch.randn(B, K, generator=g)
    padded, bucketed = pair(RealmKnowledgeEncoder, RealmKnowledgeEncoderConfig, num_candidates=K, max_length=L)
    lengths = bert_lengths(bucketed)
    losses = []
    for model in (padded, bucketed):
        model_scores = scores.clone().requires_grad_(True)
        out = model(input_ids=ids, attention_mask=mask, token_type_ids=types, relevance_scores=model_scores, labels=labels)
        out.loss.backward()
        losses.append((out.loss, out.candidate_log_likelihood, model_scores.grad,
                       model.bert.embeddings.word_embeddings.weight.grad))
    for reference, bucketed_value in zip(*losses):
        torch.testing.assert_close(bucketed_value, reference, atol=1e-5, rtol=1e-4)
    # three groups of rows, sorted by length: the shortest group ran at its own length, not at L
    assert len(lengths) == 3 and sorted(lengths) == lengths and lengths[0] < L and lengths[-1] == L


@pytest.mark.parametrize("pooling", ["mean", "cls", "pooler"])
def test_retriever_scores_match_one_padded_batch(pooling):
    g = torch.Generator().manual_seed(2)
    query_ids, query_mask = right_padded([7, 12], 12, g)
    block_ids, block_mask = right_padded([5, 24, 18, 9, 5, 24, 13, 21], L, g)
    padded, bucketed = pair(RealmRetriever, RealmRetrieverConfig, pooling=pooling, query_max_length=12, block_max_length=L)
    lengths = bert_lengths(bucketed)
    scores = [
        model(query_input_ids=query_ids, query_attention_mask=query_mask, candidate_input_ids=block_ids.view(B, K, L),
              candidate_attention_mask=block_mask.view(B, K, L)).relevance_scores
        for model in (padded, bucketed)
    ]
    torch.testing.assert_close(scores[1], scores[0], atol=1e-5, rtol=1e-4)
    assert min(lengths) < L  # the blocks did run in buckets


def test_a_mask_that_is_not_right_padded_runs_as_one_batch():
    torch.manual_seed(0)
    encoder = RealmKnowledgeEncoder(RealmKnowledgeEncoderConfig(bert_config=BERT, max_length=L)).eval()
    ids = torch.randint(5, 120, (4, L))
    mask = torch.ones(4, L, dtype=torch.long)
    mask[1, 3] = 0  # a hole: slicing rows to their "length" would change what they attend to
    lengths = bert_lengths(encoder)
    reference, _ = run_bert(encoder.bert, ids, mask)
    bucketed, _ = run_bert(encoder.bert, ids, mask, length_buckets=3)
    assert lengths == [L, L]
    torch.testing.assert_close(bucketed, reference)


def test_buckets_part_the_null_documents_from_the_blocks_first():
    lengths = torch.tensor([30, 31, 240, 251, 262, 286, 288, 288])  # sorted: two null-document rows, six blocks
    assert length_bucket_groups(lengths, 2) == [slice(0, 2), slice(2, 8)]
    assert length_bucket_groups(lengths, 3) == [slice(0, 2), slice(2, 5), slice(5, 8)]  # then the 262 -> 286 gap
    assert length_bucket_groups(torch.tensor([288, 288, 288]), 4) == [slice(0, 3)]  # nothing to cut


def test_reader_span_scores_and_loss_match_one_padded_batch():
    g = torch.Generator().manual_seed(3)
    ids, mask = right_padded([9, 24, 14, 20, 9, 22, 16, 24], L, g)
    ids, mask = ids.view(B, K, L), mask.view(B, K, L)
    types = (torch.arange(L) >= 5).long().expand(B, K, L) * mask  # the question is the first 5 wordpieces
    starts = torch.full((B, K, 1), 6)
    padded, bucketed = pair(RealmReader, RealmReaderConfig, span_hidden_size=16, max_length=L)
    lengths = bert_lengths(bucketed)
    outputs = [
        model(input_ids=ids, attention_mask=mask, token_type_ids=types, relevance_scores=torch.zeros(B, K),
              start_positions=starts, end_positions=starts + 1)
        for model in (padded, bucketed)
    ]
    torch.testing.assert_close(outputs[1].loss, outputs[0].loss, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(outputs[1].span_log_probs, outputs[0].span_log_probs, atol=1e-4, rtol=1e-4)
    for name in ("best_candidate", "best_start", "best_end"):
        assert torch.equal(getattr(outputs[1], name), getattr(outputs[0], name)), name
    assert min(lengths) < L
