import re

import pytest
import torch

from realm_hf.data.collators import RealmPretrainingCollator
from realm_hf.data.masking import build_masked_dataset
from realm_hf.modeling.knowledge_encoder import IGNORE_INDEX


def _capitalized_words(texts):
    """A stand-in NER (fast, no spaCy): capitalized words after the first one."""
    return [[m.span() for m in re.finditer(r"(?<=\s)[A-Z][a-z]+", text)] for text in texts]


@pytest.fixture(scope="module")
def masked(tokenizer):
    sentences = [
        "The astronaut Neil Armstrong walked on the Moon.",
        "The city of Paris is the capital of France.",
        "A tower was built by Gustave Eiffel for the fair.",
    ]
    articles = [{"id": str(i), "title": "t", "text": s} for i, s in enumerate(sentences)]
    dataset = build_masked_dataset(articles, tokenizer, tagger=_capitalized_words, seed=0)
    assert len(dataset) == 3
    return [dataset[i] for i in range(3)]


def _block(tokenizer, block_id, title, body):
    title_ids = tokenizer(title, add_special_tokens=False)["input_ids"]
    body_ids = tokenizer(body, add_special_tokens=False)["input_ids"]
    return {
        "block_id": block_id,
        "title": title,
        "text": body,
        "input_ids": [tokenizer.cls_token_id, *title_ids, tokenizer.sep_token_id, *body_ids, tokenizer.sep_token_id],
        "token_type_ids": [0] * (len(title_ids) + 2) + [1] * (len(body_ids) + 1),
    }


@pytest.fixture(scope="module")
def retrieved(tokenizer):
    bodies = [
        ("Apollo 11", "Apollo 11 was the spaceflight that first landed humans on the Moon in 1969."),
        ("Paris", "Paris is the capital and most populous city of France."),
        ("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris. " * 3),
        ("Moon", "The Moon is Earth's only natural satellite."),
    ]
    blocks = [_block(tokenizer, 100 + i, title, body) for i, (title, body) in enumerate(bodies)]
    # 3 retrieved blocks per example (k - 1 = 3), the trivial candidate already excluded by the trainer
    return [[blocks[0], blocks[3], blocks[2]], [blocks[1], blocks[2], blocks[0]], [blocks[2], blocks[1], blocks[3]]]


def _body(row):
    first = row["token_type_ids"].index(1)
    return row["input_ids"][first:-1]


def test_shapes_null_document_and_joined_sequences(tokenizer, masked, retrieved):
    collator = RealmPretrainingCollator(tokenizer)
    batch = collator(masked, retrieved)
    B, K = 3, 4
    lq = max(len(example["input_ids"]) for example in masked)
    assert batch["query_input_ids"].shape == (B, lq)
    assert batch["candidate_input_ids"].shape[:2] == (B, K)
    assert batch["input_ids"].shape[:2] == (B, K)
    L = batch["input_ids"].shape[-1]
    assert batch["labels"].shape == (B, L)
    assert batch["null_candidate_index"] == 0 and isinstance(batch["null_candidate_index"], int)
    for name, value in batch.items():
        if isinstance(value, torch.Tensor):
            assert value.dtype == torch.long, name
    assert batch["candidate_block_ids"][0].tolist() == [-1, 100, 103, 102]
    assert batch["source_block_ids"].tolist() == [-1, -1, -1]

    cls, sep, pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
    for b, example in enumerate(masked):
        x = example["input_ids"]
        # query: [CLS] x [SEP], token types 0
        assert batch["query_input_ids"][b, : len(x)].tolist() == x
        assert batch["query_attention_mask"][b].tolist() == [1] * len(x) + [0] * (lq - len(x))
        assert (batch["query_token_type_ids"] == 0).all()
        # the null document is candidate 0: [CLS] [SEP] [SEP], types 0 0 1, and joined [CLS] x [SEP] [SEP]
        null = batch["candidate_input_ids"][b, 0]
        assert null[:3].tolist() == [cls, sep, sep] and (null[3:] == pad).all()
        assert batch["candidate_token_type_ids"][b, 0, :3].tolist() == [0, 0, 1]
        assert batch["candidate_attention_mask"][b, 0].sum() == 3
        assert batch["input_ids"][b, 0, : len(x) + 1].tolist() == x + [sep]
        assert batch["attention_mask"][b, 0].sum() == len(x) + 1
        for k, row in enumerate(retrieved[b], start=1):
            n = len(row["input_ids"])
            assert batch["candidate_input_ids"][b, k, :n].tolist() == row["input_ids"]
            assert batch["candidate_token_type_ids"][b, k, :n].tolist() == row["token_type_ids"]
            assert batch["candidate_attention_mask"][b, k].sum() == n
            joined = x + _body(row) + [sep]
            length = len(joined)
            assert batch["input_ids"][b, k, :length].tolist() == joined
            assert (batch["input_ids"][b, k, length:] == pad).all()
            assert batch["attention_mask"][b, k].tolist() == [1] * length + [0] * (L - length)
            assert batch["token_type_ids"][b, k, :length].tolist() == [0] * len(x) + [1] * (length - len(x))
            assert (batch["token_type_ids"][b, k, length:] == 0).all()


def test_labels_align_with_mask_positions_in_every_candidate(tokenizer, masked, retrieved):
    batch = RealmPretrainingCollator(tokenizer)(masked, retrieved)
    labelled = batch["labels"] != IGNORE_INDEX  # [B, L]
    assert labelled.any(dim=-1).all()
    is_mask = batch["input_ids"] == tokenizer.mask_token_id  # [B, K, L]
    assert torch.equal(is_mask, labelled.unsqueeze(1).expand_as(is_mask))
    for b, example in enumerate(masked):
        n = len(example["labels"])
        assert batch["labels"][b, :n].tolist() == example["labels"]
        assert (batch["labels"][b, n:] == IGNORE_INDEX).all()


def test_body_truncation_respects_joined_and_block_max_length(tokenizer, masked, retrieved):
    collator = RealmPretrainingCollator(tokenizer, block_max_length=20, joined_max_length=24)
    batch = collator(masked, retrieved)
    assert batch["input_ids"].shape[-1] <= 24
    assert batch["candidate_input_ids"].shape[-1] <= 20
    sep = tokenizer.sep_token_id
    for b, example in enumerate(masked):
        x = example["input_ids"]
        for k, row in enumerate(retrieved[b], start=1):
            length = int(batch["attention_mask"][b, k].sum())
            assert length <= 24
            ids = batch["input_ids"][b, k, :length].tolist()
            assert ids[: len(x)] == x and ids[-1] == sep
            body = _body(row)
            kept = ids[len(x) : -1]
            assert kept == body[: len(kept)]  # a prefix of the body
            assert len(kept) == min(len(body), 24 - len(x) - 1)
            n = int(batch["candidate_attention_mask"][b, k].sum())
            candidate = batch["candidate_input_ids"][b, k, :n].tolist()
            assert n == min(20, len(row["input_ids"])) and candidate[-1] == sep
            assert candidate[:-1] == row["input_ids"][: n - 1]


def test_without_null_document_and_bad_input(tokenizer, masked, retrieved):
    collator = RealmPretrainingCollator(tokenizer, use_null_document=False, pad_to_multiple_of=8)
    batch = collator([dict(example, retrieved_blocks=blocks) for example, blocks in zip(masked, retrieved)])
    assert batch["input_ids"].shape[:2] == (3, 3)
    assert batch["input_ids"].shape[-1] % 8 == 0 and batch["candidate_input_ids"].shape[-1] % 8 == 0
    assert batch["null_candidate_index"] is None
    assert batch["candidate_block_ids"][0].tolist() == [100, 103, 102]
    with pytest.raises(ValueError, match="same number of retrieved blocks"):
        collator(masked, [retrieved[0], retrieved[1][:2], retrieved[2]])
    with pytest.raises(ValueError, match="labels"):
        collator([dict(masked[0], labels=masked[0]["labels"][:-1])], [retrieved[0]])
    with pytest.raises(ValueError, match="joined_max_length"):
        RealmPretrainingCollator(tokenizer, joined_max_length=5)(masked, retrieved)


def test_collator_output_feeds_retriever_and_knowledge_encoder(tokenizer, masked, retrieved, tiny_bert):
    from realm_hf import (
        RealmKnowledgeEncoder,
        RealmKnowledgeEncoderConfig,
        RealmRetriever,
        RealmRetrieverConfig,
    )

    bert = {**tiny_bert, "vocab_size": len(tokenizer), "max_position_embeddings": 512}
    retriever = RealmRetriever(RealmRetrieverConfig(bert_config=bert, projection_size=16))
    encoder = RealmKnowledgeEncoder(
        RealmKnowledgeEncoderConfig(bert_config=bert, num_candidates=4, mask_token_id=tokenizer.mask_token_id)
    )
    batch = RealmPretrainingCollator(tokenizer)(masked, retrieved)
    scores = retriever(**batch).relevance_scores  # [B, K]
    assert scores.shape == (3, 4)
    output = encoder(**batch, relevance_scores=scores)
    assert torch.isfinite(output.loss)
    assert output.retrieval_utility.shape == (3, 4)
    assert torch.equal(output.retrieval_utility[:, 0], torch.zeros(3))  # RU(∅ | x) = 0
    output.loss.backward()
    assert retriever.query_embedder.projection.weight.grad is not None
