"""The vectorized collation of REALM pre-training gives the very batches of the implementation it replaced
(`reference_collators.py`, verbatim): the same tensors (values, dtype, shape), the same errors, from block rows as
dicts and from the Arrow columns that `BlockStore.take` reads. Likewise `pad_sequences`, and the text-answer spans of
`find_answer_spans` with the answers tokenized once per question."""

from __future__ import annotations

import random
from types import SimpleNamespace

import datasets
import numpy as np
import pytest
import torch
from reference_collators import OldRealmPretrainingCollator, old_pad_sequences, old_text_spans

from realm_hf.corpus.store import BlockStore
from realm_hf.data.answer_spans import find_answer_spans, tokenize_text_answers
from realm_hf.data.collators import RealmPretrainingCollator, pad_sequences
from realm_hf.data.openqa import OpenQaCollator

CLS, SEP, PAD = 101, 102, 1  # a pad id unlike the token types' 0
TOKENS = SimpleNamespace(cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD)
BLOCK_FEATURES = datasets.Features(
    {
        "block_id": datasets.Value("int64"),
        "input_ids": datasets.List(datasets.Value("int32")),
        "token_type_ids": datasets.List(datasets.Value("int8")),
    }
)


def assert_same_batch(expected, actual):
    assert list(actual) == list(expected)
    for name, value in expected.items():
        if isinstance(value, torch.Tensor):
            got = actual[name]
            assert got.dtype == value.dtype and got.shape == value.shape, (name, got.shape, value.shape)
            assert torch.equal(got, value), name
            assert got.is_contiguous(), name
        else:
            assert actual[name] == value, name


def collate_both(old, new, *args):
    """Both collators' batches, or both errors (same type and message)."""
    try:
        expected = old(*args)
    except Exception as error:  # noqa: BLE001 (the error itself is compared)
        with pytest.raises(type(error)) as raised:
            new(*args)
        assert str(raised.value) == str(error)
        return None
    actual = new(*args)
    assert_same_batch(expected, actual)
    return actual


def random_block(rng: random.Random, block_id: int, types: str = "any") -> dict:
    """Blocks of every shape the collator meets: `[CLS] title [SEP] body [SEP]`, empty, too long, without [SEP] or
    without a body, with token types, without (None or missing: derived from the first [SEP])."""
    length = rng.choice([0, 1, 2, 3, 4, 7, 20, 47, 60, 75])
    ids = [rng.randrange(103, 140) for _ in range(length)]
    if length >= 3 and rng.random() < 0.8:
        title_end = rng.randrange(1, length - 1)
        ids[0], ids[title_end] = CLS, SEP
        if rng.random() < 0.85:
            ids[-1] = SEP
        token_types = [0] * (title_end + 1) + [1] * (length - title_end - 1)
    else:
        token_types = [rng.randrange(0, 2) for _ in range(length)]
    if rng.random() < 0.1 and length:
        ids[rng.randrange(length)] = SEP  # a stray [SEP]
    row = {"block_id": block_id, "input_ids": ids}
    draw = rng.random() if types == "any" else 0.0
    if draw < 0.7:
        row["token_type_ids"] = token_types
    elif draw < 0.85:
        row["token_type_ids"] = None
    return row


def random_examples(rng: random.Random, batch_size: int, joined_max_length: int) -> list[dict]:
    examples = []
    for _ in range(batch_size):
        length = rng.randrange(2, min(joined_max_length - 1, 24) + 1)
        example = {
            "input_ids": [CLS] + [rng.randrange(103, 140) for _ in range(length - 2)] + [SEP],
            "labels": [rng.choice([-100, -100, rng.randrange(103, 140)]) for _ in range(length)],
        }
        if rng.random() < 0.7:
            example["source_block_id"] = rng.randrange(0, 100)
        examples.append(example)
    return examples


def block_columns(rows: list[list[dict]]):
    """The rows as a blocks dataset and the `BlockStore.take` columns of their `[B, k]` ids (what the trainer's
    `_collate` passes); the rows renumbered to their ids in it."""
    flat = [row for example_rows in rows for row in example_rows]
    blocks = datasets.Dataset.from_dict(
        {
            "block_id": list(range(len(flat))),
            "input_ids": [row["input_ids"] for row in flat],
            "token_type_ids": [row.get("token_type_ids") for row in flat],
        },
        features=BLOCK_FEATURES,
    )
    width = len(rows[0]) if rows else 0
    ids = np.arange(len(flat)).reshape(len(rows), width)
    columns = BlockStore(blocks).take(ids, ["block_id", "input_ids", "token_type_ids"])
    renumbered = [[{**row, "block_id": b * width + j} for j, row in enumerate(r)] for b, r in enumerate(rows)]
    return columns, renumbered


@pytest.mark.parametrize("seed", range(6))
def test_vectorized_collation_matches_the_reference_on_random_batches(seed):
    rng = random.Random(seed)
    errors = batches = 0
    for _ in range(60):
        batch_size, num_retrieved = rng.randrange(1, 5), rng.randrange(0, 4)
        use_null = rng.random() < 0.6
        settings = {
            "block_max_length": rng.choice([3, 8, 50, 288]),
            "joined_max_length": rng.choice([12, 30, 64, 352]),
            "use_null_document": use_null,
            "pad_to_multiple_of": rng.choice([None, None, 8]),
        }
        old, new = OldRealmPretrainingCollator(TOKENS, **settings), RealmPretrainingCollator(TOKENS, **settings)
        examples = random_examples(rng, batch_size, settings["joined_max_length"])
        rows = [[random_block(rng, rng.randrange(1000)) for _ in range(num_retrieved)] for _ in range(batch_size)]
        batch = collate_both(old, new, examples, rows)
        errors += batch is None
        batches += batch is not None
        # the Arrow columns of the same blocks (a missing token_type_ids is a null there)
        if num_retrieved:
            columns, renumbered = block_columns(rows)
            expected = None
            try:
                expected = old(examples, renumbered)
            except ValueError:
                pass
            if expected is not None:
                assert_same_batch(expected, new(examples, columns))
    assert batches > 20 and errors > 0  # both kinds of outcome were compared


def test_rows_in_examples_ragged_counts_and_bad_token_types_fail_alike():
    rng = random.Random(7)
    old, new = OldRealmPretrainingCollator(TOKENS), RealmPretrainingCollator(TOKENS)
    examples = random_examples(rng, 2, 288)
    rows = [[random_block(rng, 1, types="given"), random_block(rng, 2, types="given")] for _ in range(2)]
    # blocks under "retrieved_blocks" in each example
    collate_both(old, new, [{**e, "retrieved_blocks": r} for e, r in zip(examples, rows)])
    for bad in (
        [rows[0], rows[1][:1]],  # ragged counts
        rows[:1],  # too few lists
        [[{"input_ids": [CLS, 5, SEP], "token_type_ids": [0]}], [rows[1][0]]],  # ids and types of unequal length
    ):
        with pytest.raises(ValueError) as raised:
            old(examples, bad)
        with pytest.raises(ValueError, match=raised.value.args[0][:40].replace("[", r"\[")):
            new(examples, bad)
    with pytest.raises(ValueError, match="No retrieved blocks and no null document"):
        RealmPretrainingCollator(TOKENS, use_null_document=False)(examples, [[], []])


def test_arrow_columns_with_uneven_token_types_fail_like_rows():
    rng = random.Random(3)
    examples = random_examples(rng, 1, 288)
    blocks = datasets.Dataset.from_dict(
        {"block_id": [0], "input_ids": [[CLS, 5, SEP, 7, SEP]], "token_type_ids": [[0, 0, 0]]}, features=BLOCK_FEATURES
    )
    columns = BlockStore(blocks).take(np.array([[0]]), ["block_id", "input_ids", "token_type_ids"])
    with pytest.raises(ValueError, match="A block has 5 input_ids but 3 token_type_ids"):
        RealmPretrainingCollator(TOKENS)(examples, columns)
    with pytest.raises(ValueError, match=r"block_id array \[B=2, k\]"):
        RealmPretrainingCollator(TOKENS)(examples * 2, columns)


def test_real_blocks_and_sentences_collate_as_before(tokenizer):
    """Wordpieces of a real tokenizer, blocks cut by block_max_length and bodies by joined_max_length."""
    texts = [
        ("Apollo 11", "Apollo 11 was the spaceflight that first landed humans on the Moon in 1969. " * 3),
        ("Paris", "Paris is the capital and most populous city of France."),
        ("Moon", "The Moon is Earth's only natural satellite."),
    ]
    rows = []
    for i, (title, body) in enumerate(texts):
        encoded = tokenizer(title, body, truncation=False)
        rows.append({"block_id": 10 + i, "input_ids": encoded["input_ids"], "token_type_ids": encoded["token_type_ids"]})
    sentences = ["The astronaut [MASK] [MASK] walked on the Moon.", "[MASK] is the capital of France."]
    examples = []
    for sentence in sentences:
        ids = tokenizer(sentence)["input_ids"]
        examples.append({"input_ids": ids, "labels": [-100 if t != tokenizer.mask_token_id else 2000 for t in ids]})
    retrieved = [[rows[0], rows[2]], [rows[1], rows[0]]]
    for block_max_length, joined_max_length in ((288, 288), (24, 40), (16, 14)):
        settings = {"block_max_length": block_max_length, "joined_max_length": joined_max_length}
        collate_both(OldRealmPretrainingCollator(tokenizer, **settings), RealmPretrainingCollator(tokenizer, **settings),
                     examples, retrieved)
        columns, renumbered = block_columns(retrieved)
        assert_same_batch(
            OldRealmPretrainingCollator(tokenizer, **settings)(examples, renumbered),
            RealmPretrainingCollator(tokenizer, **settings)(examples, columns),
        )


@pytest.mark.parametrize("seed", range(3))
def test_pad_sequences_matches_the_reference(seed):
    rng = random.Random(seed)
    for _ in range(100):
        count = rng.randrange(0, 6)
        rows = [[rng.randrange(-5, 500) for _ in range(rng.choice([0, 1, 3, 9]))] for _ in range(count)]
        kind = rng.choice(["list", "tuple", "numpy", "tensor", "mixed"])
        if kind == "tuple":
            rows = [tuple(row) for row in rows]
        elif kind == "numpy":
            rows = [np.asarray(row, dtype=np.int32) for row in rows]
        elif kind == "tensor":
            rows = [torch.tensor(row, dtype=torch.long) for row in rows]
        elif kind == "mixed" and rows:
            rows[0] = np.asarray(rows[0], dtype=np.int64)
        pad, multiple, length = rng.choice([0, -100]), rng.choice([None, 4]), rng.choice([None, 0, 5, 12])
        expected = old_pad_sequences(rows, pad, multiple, length)
        actual = pad_sequences(rows, pad, multiple, length)
        assert actual.dtype == expected.dtype and torch.equal(actual, expected)


def test_text_answer_spans_tokenized_once_match_the_reference(tokenizer):
    rng = random.Random(0)
    words = "the eiffel tower paris france 1889 river seine is was in on capital city of a".split()
    answers_pool = ["Eiffel Tower", "Paris", "the", "1889", "river seine", "in 1889", "", "capital city of france"]
    for _ in range(60):
        text = " ".join(rng.choice(words) for _ in range(rng.randrange(0, 40)))
        block = tokenizer(text, add_special_tokens=False)["input_ids"]
        answers = rng.sample(answers_pool, rng.randrange(1, 4))
        width = rng.choice([1, 2, 4, 10])
        offset = rng.choice([0, 7])
        expected = [(s + offset, e + offset) for s, e in sorted(old_text_spans(block, answers, tokenizer, width))]
        ids = tokenize_text_answers(answers, tokenizer)
        assert ids == [tokenizer(a, add_special_tokens=False)["input_ids"] for a in answers]
        assert find_answer_spans(block, answers, tokenizer, max_span_width=width, block_offset=offset) == expected
        assert find_answer_spans(
            block, answers, tokenizer, max_span_width=width, block_offset=offset, answer_ids=ids
        ) == expected
        tokens = tokenizer.convert_ids_to_tokens(block)  # blocks given as wordpiece strings
        assert find_answer_spans(tokens, answers, tokenizer, max_span_width=width, answer_ids=ids) == [
            (s - offset, e - offset) for s, e in expected
        ]
    with pytest.raises(ValueError, match="one list per answer"):
        find_answer_spans([1, 2], ["a", "b"], tokenizer, answer_ids=[[1]])
    with pytest.raises(ValueError, match="one list per answer"):
        find_answer_spans([1, 2], ["a"], tokenizer, answer_format="regex", answer_ids=[[1]])


def test_open_qa_batches_without_char_offsets_and_with_remembered_questions_are_the_same(tokenizer):
    blocks = [
        {"block_id": 1, "title": "Eiffel Tower", "text": "The Eiffel Tower was completed in 1889 in Paris."},
        {"block_id": 2, "title": "Paris", "text": "Paris is the capital of France, on the Seine."},
        {"block_id": 3, "title": "Seine", "text": "The Seine flows through Paris; 5,778 K is not here."},
    ]
    for block in blocks:
        encoded = tokenizer(block["title"], block["text"])
        block.update(input_ids=encoded["input_ids"], token_type_ids=encoded["token_type_ids"])
    examples = [
        {"question": "when was the eiffel tower completed?", "answers": ["1889", "in 1889"]},
        {"question": "what river flows through paris?", "answers": ["Seine|Sena"], "answer_format": "regex"},
        {"question": "what is the capital of france?", "answers": ["Paris", "the capital"]},
    ]
    rows = [[blocks[0], blocks[1]], [blocks[2], blocks[0]], [blocks[1], blocks[2]]]
    with_offsets = OpenQaCollator(tokenizer, query_max_length=24, reader_max_length=40)
    without = OpenQaCollator(tokenizer, query_max_length=24, reader_max_length=40, char_offsets=False)
    expected = with_offsets(examples, rows)
    # the questions, once for retrieval and again for the batch: the second call reads what the first tokenized
    without.encode_questions(examples)
    actual = without(examples, rows)
    for name, value in expected.items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(actual[name], value), name
    assert expected["start_positions"].ge(0).any() and expected["answerable"].all()
    for old_row, new_row in zip(expected["candidates"], actual["candidates"]):
        for old_candidate, new_candidate in zip(old_row, new_row):
            assert new_candidate.char_offsets is None
            assert (new_candidate.block_id, new_candidate.body_ids) == (old_candidate.block_id, old_candidate.body_ids)
    # the gold spans are those of find_answer_spans called block by block, each answer tokenized there
    for b, example in enumerate(with_offsets.normalize_examples(examples)):
        for k, candidate in enumerate(expected["candidates"][b]):
            spans = find_answer_spans(
                candidate.body_ids, example["answers"], tokenizer, answer_format=example["answer_format"],
                max_span_width=with_offsets.max_span_width, block_offset=candidate.body_start,
            )
            starts = expected["start_positions"][b, k]
            assert [(int(s), int(e)) for s, e in zip(starts, expected["end_positions"][b, k]) if s >= 0] == spans
    # remembered questions come back as fresh lists, and other questions are tokenized
    first = without.question_ids(["what is the capital of france?"])
    first[0].append(-1)
    assert without.question_ids(["what is the capital of france?"]) == [tokenizer("what is the capital of france?")["input_ids"]]
    assert without.question_ids(["a new question"]) == [tokenizer("a new question")["input_ids"]]
