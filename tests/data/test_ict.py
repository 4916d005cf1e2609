import logging

import datasets
import numpy as np
import pytest
import torch

from realm_hf.data.ict import IctCollator, build_ict_dataset, sentence_char_spans


_WORDS = "river valley wheat barley children water summer mountain castle forest bridge harbor".split()


def _make_blocks(tokenizer, count, seed=0, single_sentence_every=0):
    """Blocks as split_into_blocks makes them: [CLS] title [SEP] body [SEP], token types 0 / 1."""
    rng = np.random.default_rng(seed)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    rows = []
    for block_id in range(count):
        if single_sentence_every and block_id % single_sentence_every == 0:
            sentences = [f"Only one sentence in block {block_id}."]
        else:
            sentences = [
                f"Sentence {s} of block {block_id} mentions the {' '.join(rng.choice(_WORDS, size=3))}."
                for s in range(int(rng.integers(2, 6)))
            ]
        text = " ".join(sentences)
        title = f"Title {block_id}"
        title_ids = tokenizer(title, add_special_tokens=False)["input_ids"]
        body_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        rows.append(
            {
                "block_id": block_id,
                "article_id": str(block_id),
                "title": title,
                "text": text,
                "input_ids": [cls, *title_ids, sep, *body_ids, sep],
                "token_type_ids": [0] * (len(title_ids) + 2) + [1] * (len(body_ids) + 1),
            }
        )
    return datasets.Dataset.from_list(rows)


def _contains(sequence, part):
    return any(sequence[i : i + len(part)] == part for i in range(len(sequence) - len(part) + 1))


def test_sentence_char_spans():
    text = "First one. Second one!\nThird one?"
    assert [text[s:e] for s, e in sentence_char_spans(text)] == ["First one.", "Second one!", "Third one?"]


def test_ict_removes_the_query_sentence_about_90_percent(tokenizer):
    blocks = _make_blocks(tokenizer, 1000)
    examples = build_ict_dataset(blocks, tokenizer, seed=0)
    assert len(examples) == len(blocks)
    removed = np.array(examples["sentence_removed"])
    assert abs(removed.mean() - 0.9) < 0.038  # 4 standard deviations of a Bernoulli(0.9) mean over 1000 blocks
    for example, block in zip(examples, blocks):
        query = example["query_input_ids"]
        assert query[0] == tokenizer.cls_token_id and query[-1] == tokenizer.sep_token_id
        sentence = query[1:-1]
        positive = example["block_input_ids"]
        types = example["block_token_type_ids"]
        assert len(types) == len(positive)
        first_body = types.index(1)
        # title kept: [CLS] title [SEP] as in the block
        assert positive[:first_body] == block["input_ids"][: block["token_type_ids"].index(1)]
        assert positive[-1] == tokenizer.sep_token_id and all(t == 1 for t in types[first_body:])
        body, full_body = positive[first_body:-1], block["input_ids"][block["token_type_ids"].index(1) : -1]
        assert _contains(full_body, sentence)
        if example["sentence_removed"]:
            assert not _contains(body, sentence), "the query never appears in a removed positive"
            assert len(body) == len(full_body) - len(sentence)
        else:
            assert body == full_body


def test_ict_is_seeded_and_skips_single_sentence_blocks(tokenizer, caplog):
    blocks = _make_blocks(tokenizer, 30, seed=1, single_sentence_every=3)
    with caplog.at_level(logging.INFO, logger="realm_hf.data.ict"):
        first = build_ict_dataset(blocks, tokenizer, seed=5)
    assert len(first) == 20
    assert 0 not in first["block_id"] and 3 not in first["block_id"]
    assert "10 blocks skipped (fewer than 2 sentences)" in caplog.text
    again = build_ict_dataset(blocks, tokenizer, seed=5, batch_size=7)
    other = build_ict_dataset(blocks, tokenizer, seed=6)
    assert first["query_input_ids"] == again["query_input_ids"]
    assert first["block_input_ids"] == again["block_input_ids"]
    assert first["query_input_ids"] != other["query_input_ids"]


def test_ict_lengths_and_remove_probability_bounds(tokenizer):
    blocks = _make_blocks(tokenizer, 20, seed=2)
    short = build_ict_dataset(blocks, tokenizer, query_max_length=6, block_max_length=12, remove_probability=0.0)
    assert all(len(q) <= 6 for q in short["query_input_ids"])
    assert all(len(b) <= 12 for b in short["block_input_ids"])
    assert not any(short["sentence_removed"])
    always = build_ict_dataset(blocks, tokenizer, remove_probability=1.0)
    assert all(always["sentence_removed"])
    with pytest.raises(ValueError, match="remove_probability"):
        build_ict_dataset(blocks, tokenizer, remove_probability=1.5)
    with pytest.raises(ValueError, match="block_id"):
        build_ict_dataset(blocks.remove_columns("block_id"), tokenizer)


def test_ict_collator_pads_and_trains_in_batch_negatives(tokenizer, tiny_bert):
    from realm_hf import RealmRetriever, RealmRetrieverConfig

    examples = build_ict_dataset(_make_blocks(tokenizer, 6, seed=3), tokenizer)
    rows = [examples[i] for i in range(4)]
    batch = IctCollator(tokenizer)(rows)
    lq = max(len(row["query_input_ids"]) for row in rows)
    lb = max(len(row["block_input_ids"]) for row in rows)
    assert batch["query_input_ids"].shape == (4, lq) and batch["block_input_ids"].shape == (4, lb)
    for name, tensor in batch.items():
        assert tensor.dtype == torch.long, name
    for b, row in enumerate(rows):
        n = len(row["block_input_ids"])
        assert batch["block_input_ids"][b, :n].tolist() == row["block_input_ids"]
        assert batch["block_attention_mask"][b].tolist() == [1] * n + [0] * (lb - n)
        assert (batch["block_input_ids"][b, n:] == tokenizer.pad_token_id).all()
        assert batch["block_token_type_ids"][b, :n].tolist() == row["block_token_type_ids"]
        assert batch["query_attention_mask"][b].sum() == len(row["query_input_ids"])
    assert batch["block_ids"].tolist() == [row["block_id"] for row in rows]
    assert IctCollator(tokenizer, pad_to_multiple_of=8)(rows)["query_input_ids"].shape[1] % 8 == 0

    bert = {**tiny_bert, "vocab_size": len(tokenizer), "max_position_embeddings": 512}
    retriever = RealmRetriever(RealmRetrieverConfig(bert_config=bert, projection_size=16))
    query = retriever.embed_queries(
        batch["query_input_ids"], batch["query_attention_mask"], batch["query_token_type_ids"]
    )  # [B, D]
    blocks = retriever.embed_documents(
        batch["block_input_ids"], batch["block_attention_mask"], batch["block_token_type_ids"]
    )  # [B, D]
    loss = torch.nn.functional.cross_entropy(query @ blocks.T, torch.arange(4))  # [B, B] in-batch negatives
    assert torch.isfinite(loss)
    loss.backward()
