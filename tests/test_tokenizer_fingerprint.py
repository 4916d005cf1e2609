"""`tokenizer_fingerprint`: what a tokenizer does to text, not where it was loaded from, keys the caches of blocks
(and of the ICT and masked datasets made from them): a pre-training output and the BERT it started from share them."""

from __future__ import annotations

import os

import pytest
from datasets.fingerprint import Hasher
from openqa_helpers import ARTICLES, load_tokenizer
from transformers import AutoTokenizer, BertTokenizerFast

from realm_hf.corpus import split_into_blocks
from realm_hf.data.masking import build_masked_dataset
from realm_hf.utils.tokenizer_fingerprint import tokenizer_fingerprint


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """The packaged MiniLM tokenizer and the same tokenizer saved to, and reloaded from, another directory."""
    original = load_tokenizer()
    directory = tmp_path_factory.mktemp("saved-tokenizer")
    original.save_pretrained(directory)
    reloaded = AutoTokenizer.from_pretrained(directory)
    assert reloaded.name_or_path != original.name_or_path
    return original, reloaded


def _arrow_files(directory, prefix: str) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith(prefix) and name.endswith(".arrow"))


def test_a_tokenizer_reloaded_from_another_directory_has_the_same_fingerprint(copies):
    original, reloaded = copies
    assert tokenizer_fingerprint(reloaded) == tokenizer_fingerprint(original)
    assert tokenizer_fingerprint(original) == tokenizer_fingerprint(load_tokenizer())  # and it is stable
    assert isinstance(tokenizer_fingerprint(original), str) and tokenizer_fingerprint(original)


def test_using_a_tokenizer_or_saving_it_after_use_keeps_its_fingerprint(tmp_path):
    # transformers sets the backend's truncation and padding on every call: the state of the last call, which the
    # serialized pipeline holds (and a copy saved after use, e.g. a pre-training output, writes to its tokenizer.json)
    fresh = load_tokenizer()
    used = load_tokenizer()
    expected = tokenizer_fingerprint(fresh)
    used(["the cat sat", "a"], padding=True, truncation=True, max_length=8)
    assert tokenizer_fingerprint(used) == expected
    used("the cat sat", add_special_tokens=False, return_offsets_mapping=True)
    assert tokenizer_fingerprint(used) == expected
    used.save_pretrained(tmp_path)
    assert tokenizer_fingerprint(AutoTokenizer.from_pretrained(tmp_path)) == expected


def test_a_tokenizer_with_another_vocabulary_has_another_fingerprint(copies, tmp_path):
    original, _ = copies
    added = load_tokenizer()
    added.add_tokens(["qwertyzebra"])
    assert tokenizer_fingerprint(added) != tokenizer_fingerprint(original)
    # two wordpiece vocabularies one word apart
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", "the", "cat", "sat"]
    (tmp_path / "a.txt").write_text("\n".join(words) + "\n")
    (tmp_path / "b.txt").write_text("\n".join([*words, "mat"]) + "\n")
    small = BertTokenizerFast(vocab=str(tmp_path / "a.txt"))
    larger = BertTokenizerFast(vocab=str(tmp_path / "b.txt"))
    assert tokenizer_fingerprint(small) != tokenizer_fingerprint(larger)
    assert tokenizer_fingerprint(small) == tokenizer_fingerprint(BertTokenizerFast(vocab=str(tmp_path / "a.txt")))
    # another normalizer (cased) with the same vocabulary cuts text into other ids
    cased = BertTokenizerFast(vocab=str(tmp_path / "a.txt"), do_lower_case=False)
    assert tokenizer_fingerprint(cased) != tokenizer_fingerprint(small)


def test_split_into_blocks_reuses_the_cache_of_a_tokenizer_loaded_from_elsewhere(copies, tmp_path):
    original, reloaded = copies
    cache = tmp_path / "cache"
    first = split_into_blocks(ARTICLES, original, max_length=32, cache_dir=cache)
    (written,) = _arrow_files(cache, "blocks-")
    modified = os.stat(cache / written).st_mtime_ns
    second = split_into_blocks(ARTICLES, reloaded, max_length=32, cache_dir=cache)
    assert _arrow_files(cache, "blocks-") == [written]
    assert os.stat(cache / written).st_mtime_ns == modified  # read back, not written again
    assert second._fingerprint == first._fingerprint
    assert second["input_ids"] == first["input_ids"]

    # the masked sentences of those blocks share their cache too
    masked = [
        build_masked_dataset(blocks, tokenizer, strategy="random_span", query_max_length=32, cache_dir=cache)
        for blocks, tokenizer in ((first, original), (second, reloaded))
    ]
    assert len(_arrow_files(cache, "masked-random_span-")) == 1
    assert masked[0]._fingerprint == masked[1]._fingerprint

    # a tokenizer with one more token is another tokenizer: its own blocks, its own cache file
    added = load_tokenizer()
    added.add_tokens(["qwertyzebra"])
    third = split_into_blocks(ARTICLES, added, max_length=32, cache_dir=cache)
    assert len(_arrow_files(cache, "blocks-")) == 2
    assert third._fingerprint != first._fingerprint


def test_a_tokenizer_without_a_rust_backend_falls_back_to_hashing_the_object():
    class Plain:
        vocab = {"a": 0}

    assert tokenizer_fingerprint(Plain()) == Hasher.hash(Plain())
