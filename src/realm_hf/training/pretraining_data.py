"""The data of REALM pre-training: the knowledge corpus Z cut into blocks, and the masked sentences X.

Masking runs spaCy (salient spans), which a GPU node may not have and which is slow next to a GPU: `realm-hf mask`
masks ahead, on any machine, with the same config as `realm-hf pretrain`, and writes the sentences to a directory
(Arrow, `datasets.save_to_disk`); `realm-hf pretrain --masked_sentences DIR` then trains on them without masking.

    realm-hf mask --config examples/configs/wiki-gpu-realm.yaml --masked_sentences outputs/wiki/masked
    accelerate launch -m realm_hf.cli pretrain --config examples/configs/wiki-gpu-realm.yaml \
        --masked_sentences outputs/wiki/masked

Sentences drawn from Z itself (X = Z) point at the block they came from (`source_block_id`, excluded from their
candidates), so the directory records a checksum of the blocks' wordpieces: pre-training refuses it when its own
blocks differ (another corpus slice, block length or tokenizer). With another pre-training corpus (X != Z), the
reading steps read Z's own sentences: `--reading_sentences DIR` reads them from a `realm-hf mask` directory made
without a pre-training corpus (an X = Z run's), checked the same way.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass

import datasets
import numpy as np
import xxhash

from ..corpus import load_corpus_articles, split_into_blocks
from ..corpus.store import RaggedRows
from ..data.masking import build_masked_dataset
from ..utils.files import read_json_file, reading_file
from .arguments import CorpusArguments, PretrainingArguments
from .reading_steps import ReadingSchedule

logger = logging.getLogger(__name__)

MASKED_SENTENCES_FILE = "masked_sentences.json"
"""The metadata file of a `realm-hf mask` directory (beside the Arrow files of `save_to_disk`)."""
_FORMAT = 1
_MASK_AGAIN = "it is damaged or cut short (an interrupted write or copy?): delete the directory and run `realm-hf mask` again"


@dataclass
class PretrainingData:
    """The blocks of Z (`block_id`, `input_ids`, ...), the masked sentences X, whether X is drawn from Z, the
    sentences of Z read with their own block at the reading steps (`reading`: Z's own masked sentences when X is
    another corpus and the run has reading steps; else None, X = Z reading X's own), and the number of articles X was
    masked from when X is another corpus masked in this run (`num_pretraining_articles`; else None)."""

    blocks: datasets.Dataset
    masked: datasets.Dataset
    x_is_z: bool
    reading: datasets.Dataset | None = None
    num_pretraining_articles: int | None = None

    def record(self, corpus_args: CorpusArguments, training_sentences: int, held_out_sentences: int | None) -> dict:
        r"""
        What the run read, for `trainer_state.json` (`"data"`) and the model card: X and Z by name, with their counts.

        Args:
            corpus_args ([`CorpusArguments`]): The run's corpus settings (the names of Z and X).
            training_sentences (`int`): The masked sentences trained on.
            held_out_sentences (`int`, *optional*): The masked sentences of X held out for evaluation (None when the
                evaluation sentences were given to the trainer instead).

        Returns:
            `dict`: `x_is_z`, `knowledge_corpus` and `knowledge_corpus_blocks` (Z), `pretraining_corpus` (None when
            X = Z) and `pretraining_articles` (None when unknown: X = Z, or sentences masked ahead), `masked_sentences`,
            `training_sentences`, `held_out_sentences`, and `reading_sentences` (the sentences of Z read at the reading
            steps when X is another corpus; None otherwise).
        """
        return {
            "x_is_z": self.x_is_z,
            "knowledge_corpus": corpus_args.corpus,
            "knowledge_corpus_blocks": len(self.blocks),
            "pretraining_corpus": None if self.x_is_z else corpus_args.pretraining_corpus,
            "pretraining_articles": self.num_pretraining_articles,
            "masked_sentences": len(self.masked),
            "training_sentences": training_sentences,
            "held_out_sentences": held_out_sentences,
            "reading_sentences": None if self.reading is None else len(self.reading),
        }


def blocks_checksum(blocks: datasets.Dataset) -> str:
    """xxh64 of every block's wordpieces in order: equal iff the block ids mean the same text."""
    if blocks._indices is not None:  # a select/shuffle view: hash the rows it shows, not the table underneath
        blocks = blocks.select_columns(["input_ids"]).flatten_indices()
    rows = RaggedRows.from_arrow(blocks.data.column("input_ids"))  # one row per block
    digest = xxhash.xxh64()
    digest.update(rows.offsets.tobytes())  # [N + 1] int64
    digest.update(np.asarray(rows.values, dtype=np.int64).tobytes())
    return digest.hexdigest()


def masking_settings(corpus_args: CorpusArguments, pretraining_args: PretrainingArguments, seed: int) -> dict:
    """The settings a masked-sentences directory is made with (compared when it is reused)."""
    return {
        "corpus": corpus_args.corpus,
        "max_articles": corpus_args.max_articles,
        "pretraining_corpus": corpus_args.pretraining_corpus,
        "max_pretraining_articles": corpus_args.max_pretraining_articles,
        "block_length": corpus_args.block_length,
        "query_max_length": corpus_args.query_max_length,
        "masking": pretraining_args.masking,
        "mask_source_blocks": pretraining_args.mask_source_blocks,
        "seed": seed,
    }


def sentence_shaping_settings(
    corpus_args: CorpusArguments, pretraining_args: PretrainingArguments, seed: int
) -> dict:
    """The settings of [`masking_settings`] that shape a masked sentence (masking, query_max_length): a directory of
    `realm-hf mask` must have been made with this run's."""
    settings = masking_settings(corpus_args, pretraining_args, seed)
    return {name: settings[name] for name in ("masking", "query_max_length")}


def load_blocks(tokenizer, corpus_args: CorpusArguments) -> datasets.Dataset:
    """The first `max_articles` articles of `corpus` cut into blocks of `block_length` wordpieces (cached)."""
    articles = load_corpus_articles(corpus_args.corpus, corpus_args.max_articles)
    return split_into_blocks(
        articles, tokenizer, max_length=corpus_args.block_length, num_proc=corpus_args.num_proc,
        cache_dir=corpus_args.cache_dir,
    )


def masking_source(
    blocks: datasets.Dataset, corpus_args: CorpusArguments, pretraining_args: PretrainingArguments, seed: int
) -> datasets.Dataset:
    """What the masked sentences X are cut from: the articles of `pretraining_corpus` when given, else the blocks of Z
    (all of them, or a seeded sample of `mask_source_blocks`)."""
    if corpus_args.pretraining_corpus is not None:
        return load_corpus_articles(corpus_args.pretraining_corpus, corpus_args.max_pretraining_articles)
    sample = pretraining_args.mask_source_blocks
    if sample is None or sample >= len(blocks):
        return blocks
    rows = np.sort(np.random.default_rng(seed).choice(len(blocks), size=sample, replace=False))
    logger.info("Masking sentences of %d of the %d blocks (mask_source_blocks, seed %d)", sample, len(blocks), seed)
    return blocks.select(rows)


def mask_sentences(
    tokenizer, blocks: datasets.Dataset, corpus_args: CorpusArguments, pretraining_args: PretrainingArguments,
    seed: int, tagger=None, source: datasets.Dataset | None = None,
) -> datasets.Dataset:
    r"""
    The masked sentences X: those of `source` (default: [`masking_source`]) masked by `pretraining_args.masking`
    ([`build_masked_dataset`]). Z's own sentences read at the reading steps of an X != Z run are these of a
    `corpus_args` without `pretraining_corpus`.
    """
    if source is None:
        source = masking_source(blocks, corpus_args, pretraining_args, seed)
    return build_masked_dataset(
        source, tokenizer, strategy=pretraining_args.masking, tagger=tagger,
        query_max_length=corpus_args.query_max_length, seed=seed, num_proc=corpus_args.num_proc,
        cache_dir=corpus_args.cache_dir,
    )


def save_masked_sentences(
    masked: datasets.Dataset, directory: str | os.PathLike, blocks: datasets.Dataset, settings: dict
) -> None:
    """Write `masked` to `directory` (`save_to_disk`) with `masked_sentences.json`: the settings and the blocks'
    checksum. The metadata file is written last, so a directory without it is an interrupted write."""
    directory = os.fspath(directory)
    masked.save_to_disk(directory)
    metadata = {
        "format": _FORMAT,
        "num_sentences": len(masked),
        "num_blocks": len(blocks),
        "blocks_checksum": blocks_checksum(blocks),
        "settings": settings,
    }
    with open(os.path.join(directory, MASKED_SENTENCES_FILE), "w", encoding="utf-8") as f:
        json.dump(metadata, f, indent=2)
    logger.info("Wrote %d masked sentences to %s", len(masked), directory)


def read_masked_metadata(directory: str | os.PathLike) -> dict | None:
    """The metadata of a complete `realm-hf mask` directory; None when there is none (nothing or an interrupted
    write)."""
    path = os.path.join(os.fspath(directory), MASKED_SENTENCES_FILE)
    if not os.path.isfile(path):
        return None
    return read_json_file(path, _MASK_AGAIN)


def load_masked_sentences(
    directory: str | os.PathLike, blocks: datasets.Dataset, x_is_z: bool, expected: dict | None = None,
    option: str = "--masked_sentences",
) -> datasets.Dataset:
    r"""
    The masked sentences of a `realm-hf mask` directory, checked against the blocks of this run and, for the names
    in `expected`, against the settings of this run (those that shape a sentence: masking, query_max_length).
    `option` is the argument that named the directory, in messages.

    Raises:
        `ValueError`: naming the directory and the fix, when it is not a complete `realm-hf mask` output, or when its
            sentences point at blocks (X = Z) that are not these.
    """
    directory = os.fspath(directory)
    expected = expected or {}
    metadata = read_masked_metadata(directory)
    if metadata is None:
        raise ValueError(
            f"{option} {directory!r} holds no {MASKED_SENTENCES_FILE} (not written by `realm-hf mask`, or "
            "its write was interrupted); run `realm-hf mask` with this config and --masked_sentences there."
        )
    if metadata.get("format") != _FORMAT:
        raise ValueError(
            f"{option} {directory!r} has format {metadata.get('format')!r}; this realm_hf reads format "
            f"{_FORMAT}. Run `realm-hf mask` again."
        )
    made_with = metadata.get("settings", {})
    differing = {
        name: (made_with.get(name), value) for name, value in expected.items() if made_with.get(name) != value
    }
    if differing:
        raise ValueError(
            f"{option} {directory!r} was masked with other settings than this run's: "
            + ", ".join(f"{name}={was!r} there, {now!r} here" for name, (was, now) in differing.items())
            + ". Run `realm-hf mask` again with this config, or pass the settings it was made with."
        )
    with reading_file(directory, _MASK_AGAIN):
        masked = datasets.load_from_disk(directory)
    if x_is_z:
        checksum = blocks_checksum(blocks)
        if metadata["blocks_checksum"] != checksum or metadata["num_blocks"] != len(blocks):
            raise ValueError(
                f"{option} {directory!r} was masked from other blocks ({metadata['num_blocks']} blocks, "
                f"checksum {metadata['blocks_checksum']}) than this run's ({len(blocks)} blocks, checksum {checksum}): "
                f"its sentences' source_block_id would exclude the wrong blocks. Use the corpus, max_articles, "
                f"block_length and tokenizer it was made with ({metadata['settings']}), or run `realm-hf mask` again."
            )
    logger.info("Read %d masked sentences from %s (masked ahead by `realm-hf mask`)", len(masked), directory)
    return masked


def prepare_pretraining_data(
    tokenizer, corpus_args: CorpusArguments, pretraining_args: PretrainingArguments, seed: int, tagger=None
) -> PretrainingData:
    """The blocks of Z and the masked sentences X of a pre-training run: read from `--masked_sentences` when given,
    else masked here; with another pre-training corpus and reading steps, Z's own sentences for them
    ([`reading_sentences_of_z`])."""
    blocks = load_blocks(tokenizer, corpus_args)
    x_is_z = corpus_args.pretraining_corpus is None
    num_articles = None
    if pretraining_args.masked_sentences is not None:
        expected = sentence_shaping_settings(corpus_args, pretraining_args, seed)
        masked = load_masked_sentences(pretraining_args.masked_sentences, blocks, x_is_z, expected)
    else:
        source = masking_source(blocks, corpus_args, pretraining_args, seed)
        num_articles = None if x_is_z else len(source)
        masked = mask_sentences(tokenizer, blocks, corpus_args, pretraining_args, seed, tagger, source=source)
    reading = None
    if not x_is_z and ReadingSchedule.reads(pretraining_args.reading_warmup_steps, pretraining_args.reading_loss_weight):
        # the reading steps read Z's own sentences (each with its source block), whatever X is
        reading = reading_sentences_of_z(tokenizer, blocks, corpus_args, pretraining_args, seed, tagger)
    elif pretraining_args.reading_sentences is not None:
        why = "X = Z: the reading steps read X's own sentences" if x_is_z else "this run has no reading steps"
        raise ValueError(
            f"--reading_sentences {pretraining_args.reading_sentences!r} is read only at the reading steps of a run "
            f"with another pre-training corpus, but {why}; drop --reading_sentences."
        )
    return PretrainingData(blocks, masked, x_is_z, reading, num_articles)


def reading_sentences_of_z(
    tokenizer, blocks: datasets.Dataset, corpus_args: CorpusArguments, pretraining_args: PretrainingArguments,
    seed: int, tagger=None,
) -> datasets.Dataset:
    r"""
    Z's own masked sentences, read at the reading steps of a run whose X is another corpus: those of the
    `realm-hf mask` directory `reading_sentences` when given (masked without a pre-training corpus, from these
    blocks: e.g. the `--masked_sentences` of an X = Z run on the same corpus), else masked here (spaCy for salient
    spans) from the blocks of `mask_source_blocks`.

    Raises:
        `ValueError`: naming the directory, when it was masked from another corpus X, from other blocks, or with
            other masking settings.
    """
    if pretraining_args.reading_sentences is None:
        logger.info("Masking sentences of the knowledge corpus for the reading steps (X is another corpus)")
        z_only = dataclasses.replace(corpus_args, pretraining_corpus=None)
        return mask_sentences(tokenizer, blocks, z_only, pretraining_args, seed, tagger)
    expected = sentence_shaping_settings(corpus_args, pretraining_args, seed)
    expected["pretraining_corpus"] = None  # sentences of Z, each pointing at its own block
    return load_masked_sentences(
        pretraining_args.reading_sentences, blocks, x_is_z=True, expected=expected, option="--reading_sentences"
    )
