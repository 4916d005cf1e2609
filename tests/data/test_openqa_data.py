"""Open-QA examples and the collator: gold spans at the right positions, span -> text with provenance, bad input."""

import datasets
import numpy as np
import pytest
import torch
from openqa_helpers import ARTICLES, QUESTIONS, load_tokenizer, write_jsonl
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

from realm_hf.corpus import split_into_blocks
from realm_hf.data.openqa import OpenQaCollator, load_qa_examples, model_inputs


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def blocks(tokenizer):
    return split_into_blocks(ARTICLES, tokenizer, max_length=64)


def rows_for(blocks, block_ids):
    """What RealmIndex.get_blocks returns for [B, K] ids (block_id == row here)."""
    columns = ["block_id", "title", "text", "input_ids", "token_type_ids"]
    return {c: [[blocks[int(i)][c] for i in row] for row in block_ids] for c in columns}


# --------------------------------------------------------------------------------------------- loading
def test_load_jsonl_with_regex_answers_and_limit(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", QUESTIONS)
    examples = load_qa_examples(path)
    assert len(examples) == len(QUESTIONS)
    assert examples[8] == {"id": 8, "question": "when was moby-dick published", "answers": ["18[0-9]{2}"],
                           "answer_format": "regex"}
    assert len(load_qa_examples(path, max_questions=3)) == 3
    # comma-separated files
    other = write_jsonl(tmp_path / "more.jsonl", QUESTIONS[:2])
    assert len(load_qa_examples(f"{path},{other}")) == len(QUESTIONS) + 2


def test_slices_hold_questions_out_without_overlap(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", QUESTIONS)
    held_out = load_qa_examples(f"{path}[:3]")
    rest = load_qa_examples(f"{path}[3:]")
    assert [e["question"] for e in held_out] == [q["question"] for q in QUESTIONS[:3]]
    assert [e["question"] for e in rest] == [q["question"] for q in QUESTIONS[3:]]
    assert [e["question"] for e in load_qa_examples(f"{path}[2:5]")] == [q["question"] for q in QUESTIONS[2:5]]
    # a slice per file in a list, and max_questions on top of a slice
    both = load_qa_examples(f"{path}[1:2],{path}[4:]", max_questions=3)
    assert [e["question"] for e in both] == [q["question"] for q in QUESTIONS[1:2] + QUESTIONS[4:6]]
    with pytest.raises(ValueError, match=r"qa.jsonl\[-1:\]"):
        load_qa_examples(f"{path}[-1:]")


def test_load_from_a_datasets_dataset_with_an_answer_column():
    dataset = datasets.Dataset.from_dict({"question": ["who wrote moby-dick", "capital?"],
                                          "answer": [["Melville"], ["Paris", "paris"]]})
    examples = load_qa_examples(dataset, answer_format="text")
    assert examples[1] == {"id": 1, "question": "capital?", "answers": ["Paris", "paris"], "answer_format": "text"}
    regex = load_qa_examples(dataset, answer_format="regex")
    assert {e["answer_format"] for e in regex} == {"regex"}
    split = load_qa_examples(datasets.DatasetDict({"dev": dataset}), split="dev", max_questions=1)
    assert len(split) == 1


@pytest.mark.parametrize(
    "row, message",
    [
        ({"question": "", "answers": ["x"]}, "empty question"),
        ({"question": "   ", "answers": ["x"]}, "empty question"),
        ({"question": None, "answers": ["x"]}, "no question"),
        ({"answers": ["x"]}, "no question"),
        ({"question": 3, "answers": ["x"]}, "must be a string"),
        ({"question": "q", "answers": [1]}, "every answer must be a string"),
        ({"question": "q", "answers": []}, "no reference answers"),
        ({"question": "q", "answers": ["x"], "answer_format": "glob"}, "answer_format"),
    ],
)
def test_bad_examples_are_refused_with_the_reason(row, message):
    with pytest.raises(ValueError, match=message):
        load_qa_examples([QUESTIONS[0], row])


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load_qa_examples(str(tmp_path / "nope.jsonl"))


# -------------------------------------------------------------------------------------------- collator
def test_gold_spans_decode_to_the_answers(tokenizer, blocks):
    collator = OpenQaCollator(tokenizer, query_max_length=32, reader_max_length=96, max_span_width=5)
    examples = [QUESTIONS[0], QUESTIONS[7], QUESTIONS[8]]
    # the right article is not always first; each question gets 3 blocks
    block_ids = [[1, 0, 2], [5, 3, 0], [4, 5, 1]]
    embeds = np.random.default_rng(0).normal(size=(3, 3, 16)).astype(np.float32)
    batch = collator(examples, rows_for(blocks, block_ids), embeds)

    B, K = 3, 3
    L = batch["reader_input_ids"].shape[-1]
    assert batch["reader_input_ids"].shape == batch["reader_token_type_ids"].shape == (B, K, L)
    assert batch["query_input_ids"].shape[0] == B and batch["candidate_embeds"].shape == (B, K, 16)
    assert batch["start_positions"].shape == batch["end_positions"].shape and batch["start_positions"].shape[:2] == (B, K)
    assert batch["candidate_block_ids"].tolist() == block_ids
    assert batch["answerable"].tolist() == [True, True, True]

    found = {}
    for b in range(B):
        for k in range(K):
            ids = batch["reader_input_ids"][b, k]
            types = batch["reader_token_type_ids"][b, k]
            query_len = int(batch["query_attention_mask"][b].sum())
            # [CLS] question [SEP] (type 0) body [SEP] (type 1)
            assert ids[:query_len].tolist() == batch["query_input_ids"][b, :query_len].tolist()
            assert (types[:query_len] == 0).all() and types[query_len] == 1
            candidate = batch["candidates"][b][k]
            assert candidate.block_id == block_ids[b][k] and candidate.title == blocks[block_ids[b][k]]["title"]
            assert candidate.body_start == query_len and candidate.char_offsets is not None
            for start, end in zip(batch["start_positions"][b, k].tolist(), batch["end_positions"][b, k].tolist()):
                if start < 0:
                    assert end < 0
                    continue
                assert types[start] == 1 and types[end] == 1
                decoded = tokenizer.decode(ids[start : end + 1])
                text, char_start, char_end = candidate.span_to_text(start, end, tokenizer)
                assert text == candidate.text[char_start:char_end]
                found.setdefault(b, set()).add((k, decoded, text))
    # text answers: exact wordpiece matches, original casing recovered from the block text
    assert found[0] == {(1, "1889", "1889")}
    assert found[1] == {(0, "herman melville", "Herman Melville"), (0, "melville", "Melville")}
    # regex answer 18[0-9]{2}: 1851 in Moby-Dick's block only (the Sahara's "180" does not match)
    assert found[2] == {(1, "1851", "1851")}

    inputs = model_inputs(batch)
    assert set(inputs) == {
        "query_input_ids", "query_attention_mask", "query_token_type_ids", "reader_input_ids",
        "reader_attention_mask", "reader_token_type_ids", "candidate_embeds", "start_positions", "end_positions",
    }


def test_reader_default_block_mask_is_exactly_the_body(tokenizer, blocks):
    from realm_hf.modeling.reader import default_block_mask

    collator = OpenQaCollator(tokenizer, query_max_length=32, reader_max_length=96)
    batch = collator([QUESTIONS[0], "a question without answers"], rows_for(blocks, [[0, 1], [2, 3]]))
    assert "start_positions" not in batch  # no gold spans without answers
    mask = default_block_mask(batch["reader_input_ids"], batch["reader_attention_mask"], batch["reader_token_type_ids"])
    for b in range(2):
        for k in range(2):
            candidate = batch["candidates"][b][k]
            body = batch["reader_input_ids"][b, k][mask[b, k]].tolist()
            assert body == candidate.body_ids


def test_long_bodies_are_cut_to_fit_and_spans_beyond_the_cut_are_dropped(tokenizer, blocks):
    collator = OpenQaCollator(tokenizer, query_max_length=16, reader_max_length=18)
    batch = collator([QUESTIONS[1]], rows_for(blocks, [[0]]))  # "paris" is the last word of the block
    assert batch["reader_input_ids"].shape[-1] <= 18
    assert batch["reader_input_ids"][0, 0, int(batch["reader_attention_mask"][0, 0].sum()) - 1] == tokenizer.sep_token_id
    assert not batch["answerable"][0]
    assert (batch["start_positions"] == -1).all()


def test_evidence_marks_the_answer(tokenizer, blocks):
    collator = OpenQaCollator(tokenizer, query_max_length=32, reader_max_length=96)
    batch = collator([QUESTIONS[4]], rows_for(blocks, [[3]]))
    start, end = int(batch["start_positions"][0, 0, 0]), int(batch["end_positions"][0, 0, 0])
    evidence = batch["candidates"][0][0].evidence(start, end, tokenizer)
    assert "Marie Curie discovered **polonium**." in evidence


def test_answers_are_decoded_when_the_text_does_not_give_back_the_wordpieces(tokenizer, blocks):
    rows = rows_for(blocks, [[0]])
    rows["text"] = [["something else entirely"]]
    collator = OpenQaCollator(tokenizer, query_max_length=32, reader_max_length=96)
    batch = collator([QUESTIONS[0]], rows)
    candidate = batch["candidates"][0][0]
    assert candidate.char_offsets is None
    start, end = int(batch["start_positions"][0, 0, 0]), int(batch["end_positions"][0, 0, 0])
    assert candidate.span_to_text(start, end, tokenizer) == ("1889", None, None)
    assert "**1889**" in candidate.evidence(start, end, tokenizer)


@pytest.mark.parametrize(
    "questions, message",
    [
        ([QUESTIONS[0], {"question": None, "answers": ["x"]}], "no question"),
        ([QUESTIONS[0], ""], "empty question"),
        ([], "empty batch"),
        ([QUESTIONS[0], {"question": "tell me " * 40, "answers": ["x"]}], "more than query_max_length=32"),
    ],
)
def test_collator_refuses_bad_questions(tokenizer, blocks, questions, message):
    collator = OpenQaCollator(tokenizer, query_max_length=32, reader_max_length=96)
    with pytest.raises(ValueError, match=message):
        collator(questions, rows_for(blocks, [[0, 1]] * max(len(questions), 1)))


def test_over_long_questions_can_be_truncated(tokenizer, blocks):
    collator = OpenQaCollator(tokenizer, query_max_length=32, reader_max_length=96, truncate_questions=True)
    batch = collator(["tell me " * 40], rows_for(blocks, [[0]]))
    assert batch["query_input_ids"].shape == (1, 32)
    assert batch["query_input_ids"][0, -1] == tokenizer.sep_token_id


def test_collator_checks_shapes(tokenizer, blocks):
    collator = OpenQaCollator(tokenizer, query_max_length=32, reader_max_length=96)
    with pytest.raises(ValueError, match="same number K"):
        collator([QUESTIONS[0], QUESTIONS[1]], [[blocks[0]], [blocks[0], blocks[1]]])
    with pytest.raises(ValueError, match="candidate_embeds must have shape"):
        collator([QUESTIONS[0]], rows_for(blocks, [[0, 1]]), torch.zeros(1, 3, 8))
    with pytest.raises(ValueError, match="reader_max_length"):
        OpenQaCollator(tokenizer, query_max_length=32, reader_max_length=33)
