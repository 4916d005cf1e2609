"""`realm-hf mask` and `realm-hf pretrain --masked_sentences DIR`: masking ahead of pre-training, written to a
directory with its settings and the blocks' checksum, reused as it is, refused when made from other blocks or
settings; `--mask_source_blocks N` masks a seeded sample of N blocks. The settings of examples/configs/cpu-tiny.yaml
on 6 embedded articles, `random_span` masking (no spaCy), tiny random models: seconds each."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re

import datasets
import pytest
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)
from transformers import AutoTokenizer

from realm_hf.training import pretrain as pretrain_module
from realm_hf.training import pretraining_data
from realm_hf.training.arguments import CorpusArguments, ModelArguments, PretrainingArguments
from realm_hf.training.entry_points import PRETRAIN_ARGUMENTS, main_mask, main_pretrain, parse_command_line
from realm_hf.training.models import pretraining_tokenizer_path
from realm_hf.training.pretraining_data import (
    MASKED_SENTENCES_FILE,
    blocks_checksum,
    load_blocks,
    load_masked_sentences,
    mask_sentences,
    prepare_pretraining_data,
)

CONFIG = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples", "configs", "cpu-tiny.yaml"
)
MASK = "realm-hf mask"
SETTINGS = {  # what masking_settings records for `arguments(...)`
    "corpus": "embedded",
    "max_articles": 6,
    "pretraining_corpus": None,
    "max_pretraining_articles": None,
    "block_length": 64,
    "query_max_length": 32,
    "masking": "random_span",
    "mask_source_blocks": None,
    "seed": 0,
}


def arguments(output_dir, masked_dir, *extra: str) -> list[str]:
    """cpu-tiny.yaml on 6 articles with random-span masking, as `realm-hf mask` and `realm-hf pretrain` take it."""
    return [
        "--config", CONFIG, "--output_dir", str(output_dir), "--max_articles", "6", "--masking", "random_span",
        "--report_to", "none", "--masked_sentences", str(masked_dir), *extra,
    ]


def corpus_arguments(**overrides) -> CorpusArguments:
    return CorpusArguments(
        **{"corpus": "embedded", "max_articles": 6, "block_length": 64, "query_max_length": 32, **overrides}
    )


def restored(sentence: dict) -> list[int]:
    """The wordpieces of a masked sentence before masking, without [CLS] and [SEP]."""
    return [label if label != -100 else token for token, label in zip(sentence["input_ids"], sentence["labels"])][1:-1]


def contains(sequence: list[int], part: list[int]) -> bool:
    return any(sequence[i : i + len(part)] == part for i in range(len(sequence) - len(part) + 1))


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(pretraining_tokenizer_path(ModelArguments(random_init=True)))


@pytest.fixture(scope="module")
def blocks(tokenizer):
    return load_blocks(tokenizer, corpus_arguments())


@pytest.fixture(scope="module")
def masked(tmp_path_factory):
    """One `realm-hf mask` run, shared by the tests that only read its directory: (directory, returned metadata,
    printed output)."""
    root = tmp_path_factory.mktemp("mask")
    directory = root / "masked"
    with contextlib.redirect_stdout(io.StringIO()) as out:
        metadata = main_mask(arguments(root / "out", directory), prog=MASK)
    return directory, metadata, out.getvalue()


def test_mask_writes_the_sentences_with_their_count_settings_and_the_checksum_of_the_blocks(
    masked, tokenizer, blocks
):
    directory, metadata, printed = masked
    saved = json.loads((directory / MASKED_SENTENCES_FILE).read_text())
    assert saved == metadata
    sentences = datasets.load_from_disk(str(directory))
    assert saved["num_sentences"] == len(sentences) > 0
    assert saved["num_blocks"] == len(blocks) > 1
    assert saved["blocks_checksum"] == blocks_checksum(blocks)
    assert saved["settings"] == SETTINGS
    assert json.loads(printed.strip().splitlines()[-1]) == {
        name: saved[name] for name in ("num_sentences", "num_blocks", "blocks_checksum")
    }
    # the sentences are those that masking the blocks with these settings gives, pointing at their own blocks
    expected = mask_sentences(tokenizer, blocks, corpus_arguments(), PretrainingArguments(masking="random_span"), 0)
    for column in ("input_ids", "labels", "source_block_id", "strategy"):
        assert sentences[column] == expected[column], column
    assert set(sentences["strategy"]) == {"random_span"}
    assert all(contains(blocks[row["source_block_id"]]["input_ids"], restored(row)) for row in sentences)


def test_the_checksum_of_the_blocks_follows_their_wordpieces(tokenizer, blocks):
    assert blocks_checksum(load_blocks(tokenizer, corpus_arguments())) == blocks_checksum(blocks)
    assert blocks_checksum(blocks.select(range(len(blocks) - 1))) != blocks_checksum(blocks)
    assert blocks_checksum(load_blocks(tokenizer, corpus_arguments(block_length=48))) != blocks_checksum(blocks)
    # the same wordpieces cut at other block boundaries are other blocks
    rows = blocks.select(range(2))
    ids = rows["input_ids"]
    moved = datasets.Dataset.from_dict({"input_ids": [ids[0] + ids[1][:1], ids[1][1:]]})
    assert blocks_checksum(moved) != blocks_checksum(datasets.Dataset.from_dict({"input_ids": ids}))
    # a view through an indices mapping (shuffle, a non-contiguous select) is the blocks it shows, in its order
    shuffled = blocks.shuffle(seed=0)
    assert blocks_checksum(shuffled) != blocks_checksum(blocks)
    assert blocks_checksum(shuffled) == blocks_checksum(shuffled.flatten_indices())
    every_other = blocks.select(range(0, len(blocks), 2))
    assert blocks_checksum(every_other) == blocks_checksum(
        datasets.Dataset.from_dict({"input_ids": every_other["input_ids"]}))


def test_mask_again_with_the_same_settings_keeps_the_directory(masked, tmp_path, capsys):
    directory, metadata, _ = masked
    before = {path.name: path.stat().st_mtime_ns for path in directory.iterdir()}
    assert main_mask(arguments(tmp_path / "out", directory), prog=MASK) == metadata
    assert {path.name: path.stat().st_mtime_ns for path in directory.iterdir()} == before
    assert "already holds" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra",
    [("--seed", "3"), ("--masking", "random_token"), ("--max_articles", "5"), ("--mask_source_blocks", "4"),
     ("--query_max_length", "24"), ("--block_length", "48")],
)
def test_mask_with_other_settings_into_a_written_directory_is_refused_naming_it(masked, tmp_path, capsys, extra):
    directory, _, _ = masked
    before = {path.name: path.stat().st_mtime_ns for path in directory.iterdir()}
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main_mask(arguments(tmp_path / "out", directory) + list(extra), prog=MASK)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith(f"{MASK}: error: --masked_sentences {str(directory)!r} already holds")
    assert "other settings" in error
    assert {path.name: path.stat().st_mtime_ns for path in directory.iterdir()} == before


def test_mask_refuses_a_non_empty_directory_without_its_metadata_and_needs_a_directory(tmp_path, capsys):
    directory = tmp_path / "masked"
    directory.mkdir()
    (directory / "data-00000-of-00001.arrow").write_bytes(b"half written")
    with pytest.raises(SystemExit) as exit_info:
        main_mask(arguments(tmp_path / "out", directory), prog=MASK)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert f"--masked_sentences {str(directory)!r} exists and is not a complete `realm-hf mask` output" in error
    assert sorted(os.listdir(directory)) == ["data-00000-of-00001.arrow"]
    assert (directory / "data-00000-of-00001.arrow").read_bytes() == b"half written"
    # pre-training refuses it too, before reading the Arrow file
    with pytest.raises(ValueError, match=f"holds no {MASKED_SENTENCES_FILE}"):
        load_masked_sentences(directory, blocks=None, x_is_z=True)

    with pytest.raises(SystemExit) as exit_info:
        main_mask(["--config", CONFIG, "--output_dir", str(tmp_path / "out"), "--max_articles", "6"], prog=MASK)
    assert exit_info.value.code == 2
    assert "--masked_sentences DIR is required" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _qa_file(tmp_path) -> str:
    """Questions whose recall over any retrieval is known: regex '.' matches every block, 'zq{5}x' none."""
    rows = [
        {"question": f"question {i}", "answers": [answer], "answer_format": "regex"}
        for i, answer in enumerate(["zq{5}x", ".", ".", "zq{5}x", "zq{5}x"])
    ]
    path = tmp_path / "qa.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_pretraining_trains_on_exactly_the_saved_sentences_without_masking(masked, tmp_path, monkeypatch):
    pytest.importorskip("faiss")
    directory, metadata, _ = masked

    def no_masking(*args, **kwargs):
        raise AssertionError("pre-training with --masked_sentences masked sentences itself")

    monkeypatch.setattr(pretraining_data, "mask_sentences", no_masking)
    trainers = []

    class RecordingPretrainer(pretrain_module.RealmPretrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            trainers.append(self)

    monkeypatch.setattr(pretrain_module, "RealmPretrainer", RecordingPretrainer)
    # the zero-shot recall of a sliced QA file: rows 1 and 2 only ('.', '.'): 100, where the whole file gives 40
    history = main_pretrain(
        arguments(
            tmp_path / "out", directory, "--max_steps", "2", "--refresh_schedule", "0", "--save_steps", "0",
            "--logging_steps", "1", "--eval_mlm_examples", "3", "--eval_qa_file", f"{_qa_file(tmp_path)}[1:3]",
        ),
        prog="realm-hf pretrain",
    )
    (trainer,) = trainers
    assert len(trainer.train_examples) + len(trainer.eval_examples) == metadata["num_sentences"]
    assert len(trainer.eval_examples) == 2  # min(3, 27 // 10)
    saved = datasets.load_from_disk(str(directory))
    used = [*trainer.train_examples, *trainer.eval_examples]

    def key(row):
        return tuple(row["input_ids"]), tuple(row["labels"]), row["source_block_id"]

    assert sorted(map(key, used)) == sorted(map(key, saved))
    assert trainer.x_is_z and blocks_checksum(trainer.blocks) == metadata["blocks_checksum"]
    assert [record["step"] for record in history if "loss" in record] == [1, 2]
    (evaluation,) = [record for record in history if any("zero_shot_recall@5" in name for name in record)]
    assert next(value for name, value in evaluation.items() if "zero_shot_recall@5" in name) == 100.0


def test_pretraining_refuses_sentences_masked_from_other_blocks(masked, tmp_path):
    directory, _, _ = masked
    with pytest.raises(ValueError, match="was masked from other blocks"):
        main_pretrain(arguments(tmp_path / "out", directory, "--max_articles", "5"), prog="realm-hf pretrain")


def _prepare(directory, tokenizer, *extra: str):
    loop, _, corpus, pretraining = parse_command_line(PRETRAIN_ARGUMENTS, arguments("unused", directory, *extra))
    return prepare_pretraining_data(tokenizer, corpus, pretraining, loop.seed)


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--query_max_length", "24"), "query_max_length=32 there, 24 here"),
        (("--masking", "random_token"), "masking='random_span' there, 'random_token' here"),
        (("--block_length", "48"), "was masked from other blocks"),
        (("--max_articles", "7"), "was masked from other blocks"),
    ],
)
def test_pretraining_refuses_sentences_of_other_settings_naming_the_setting(masked, tokenizer, extra, message):
    directory, _, _ = masked
    with pytest.raises(ValueError, match=message) as error:
        _prepare(directory, tokenizer, *extra)
    assert repr(str(directory)) in str(error.value)


def test_pretraining_reads_the_saved_sentences_with_a_seed_that_does_not_shape_them(masked, tokenizer):
    directory, metadata, _ = masked
    data = _prepare(directory, tokenizer, "--seed", "5")
    assert len(data.masked) == metadata["num_sentences"] and data.x_is_z


def test_mask_source_blocks_masks_the_sentences_of_a_seeded_sample_of_blocks(tokenizer, blocks, tmp_path):
    corpus = corpus_arguments()
    everything = mask_sentences(tokenizer, blocks, corpus, PretrainingArguments(masking="random_span"), 0)
    assert set(everything["source_block_id"]) == set(range(len(blocks)))  # every block has sentences
    args = PretrainingArguments(masking="random_span", mask_source_blocks=4)
    samples = []
    for seed in (0, 1, 2, 3):
        sample = mask_sentences(tokenizer, blocks, corpus, args, seed)
        sources = set(sample["source_block_id"])
        assert len(sources) == 4, (seed, sources)
        # each sentence points at the block it was cut from (a block id, not a row of the sample)
        assert all(contains(blocks[row["source_block_id"]]["input_ids"], restored(row)) for row in sample)
        again = mask_sentences(tokenizer, blocks, corpus, args, seed)
        assert again["input_ids"] == sample["input_ids"] and again["source_block_id"] == sample["source_block_id"]
        samples.append(frozenset(sources))
    assert len(set(samples)) > 1  # the sample follows the seed (not the first N blocks)
    # a sample as large as the corpus is the corpus
    whole = mask_sentences(
        tokenizer, blocks, corpus, PretrainingArguments(masking="random_span", mask_source_blocks=len(blocks)), 0
    )
    assert whole["input_ids"] == everything["input_ids"]

    # through `realm-hf mask`, into an empty directory made beforehand
    directory = tmp_path / "masked"
    directory.mkdir()
    metadata = main_mask(arguments(tmp_path / "out", directory, "--mask_source_blocks", "4"), prog=MASK)
    assert metadata["settings"] == {**SETTINGS, "mask_source_blocks": 4}
    assert metadata["num_blocks"] == len(blocks) and metadata["blocks_checksum"] == blocks_checksum(blocks)
    written = datasets.load_from_disk(str(directory))
    first = mask_sentences(tokenizer, blocks, corpus, args, 0)
    assert metadata["num_sentences"] == len(written) == len(first) < len(everything)
    assert written["source_block_id"] == first["source_block_id"] and written["input_ids"] == first["input_ids"]


@pytest.mark.parametrize("value", ["0", "-2"])
def test_mask_source_blocks_below_one_is_refused_when_parsed(tmp_path, capsys, value):
    refused = f"--mask_source_blocks {value} cannot be right: it must be at least 1"
    with pytest.raises(ValueError, match=refused):
        PretrainingArguments(mask_source_blocks=int(value))
    for main in (main_mask, main_pretrain):
        with pytest.raises(SystemExit) as exit_info:
            main(arguments(tmp_path / "out", tmp_path / "masked", "--mask_source_blocks", value), prog="realm-hf")
        assert exit_info.value.code == 2
        assert refused in capsys.readouterr().err
    assert not (tmp_path / "masked").exists() and not (tmp_path / "out").exists()


@pytest.fixture(scope="module")
def news(tmp_path_factory):
    """X != Z: 3 articles (not among Z's 6) as a JSONL.gz with a column articles do not have, like news-bbc; and
    their sentences masked ahead by `realm-hf mask --pretraining_corpus` (directory)."""
    import gzip

    from realm_hf.corpus.embedded import load_embedded_corpus

    root = tmp_path_factory.mktemp("news")
    path = root / "news.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for article in load_embedded_corpus(limit=9)[6:]:
            f.write(json.dumps({"id": article["title"], "category": "tech", **article}) + "\n")
    directory = root / "masked-news"
    with contextlib.redirect_stdout(io.StringIO()):
        main_mask(arguments(root / "out", directory, "--pretraining_corpus", str(path)), prog=MASK)
    return str(path), directory


def test_reading_sentences_of_an_x_equals_z_mask_are_read_at_the_reading_steps_of_x_not_z(
    masked, news, tokenizer, blocks, monkeypatch
):
    z_directory, _, _ = masked
    news_path, x_directory = news

    def no_masking(*args, **kwargs):
        raise AssertionError("pre-training with --reading_sentences masked Z's sentences itself")

    monkeypatch.setattr(pretraining_data, "mask_sentences", no_masking)
    data = _prepare(x_directory, tokenizer, "--pretraining_corpus", news_path, "--reading_warmup_steps", "2",
                    "--reading_sentences", str(z_directory))
    assert not data.x_is_z and len(data.blocks) == len(blocks)
    assert data.masked["input_ids"] == datasets.load_from_disk(str(x_directory))["input_ids"]
    saved = datasets.load_from_disk(str(z_directory))
    assert data.reading["input_ids"] == saved["input_ids"]
    assert data.reading["source_block_id"] == saved["source_block_id"]
    assert data.record(corpus_arguments(), 10, 2)["reading_sentences"] == len(saved)


def test_reading_sentences_that_are_not_z_s_own_or_not_read_are_refused(masked, news, tokenizer):
    z_directory, _, _ = masked
    news_path, x_directory = news
    x_not_z = ("--pretraining_corpus", news_path, "--reading_warmup_steps", "2")
    cases = [  # (masked_sentences, arguments, the refusal)
        (x_directory, (*x_not_z, "--reading_sentences", str(z_directory), "--max_articles", "7"),
         f"--reading_sentences {str(z_directory)!r} was masked from other blocks"),
        (x_directory, (*x_not_z, "--reading_sentences", str(x_directory)),
         f"--reading_sentences {str(x_directory)!r} was masked with other settings than this run's: "
         f"pretraining_corpus={news_path!r} there, None here"),
        (x_directory, ("--pretraining_corpus", news_path, "--reading_warmup_steps", "0", "--reading_sentences",
                       str(z_directory)),
         "this run has no reading steps; drop --reading_sentences"),
        (z_directory, ("--reading_warmup_steps", "2", "--reading_sentences", str(z_directory)),
         "X = Z: the reading steps read X's own sentences; drop --reading_sentences"),
    ]
    for directory, extra, message in cases:
        with pytest.raises(ValueError, match=re.escape(message)):
            _prepare(directory, tokenizer, *extra)
