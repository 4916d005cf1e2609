"""Masked sentences for REALM pre-training: salient spans (entities + dates), random tokens or random spans.

A preprocessing pass (`datasets.map`, cached as an Arrow file) turns articles or blocks into one example per
sentence, `[CLS] masked sentence [SEP]` with labels at the masked positions; nothing is masked per training step.
The sentence is REALM's unit: the query `x` the retriever embeds and the knowledge encoder reads next to `z`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import datasets
import numpy as np
import pyarrow.compute as pc
from datasets.fingerprint import Hasher

from ..corpus.articles import load_articles
from ..corpus.blocks import split_sentences
from ..modeling.knowledge_encoder import IGNORE_INDEX
from ..utils.cached_map import cache_file, cached_map
from ..utils.quiet import without_datasets_bars
from ..utils.tokenizer_fingerprint import tokenizer_fingerprint
from .salient_spans import SalientSpanTagger, Span, Tagger, find_date_spans


logger = logging.getLogger(__name__)

__all__ = ["MASKED_FEATURES", "STRATEGIES", "build_masked_dataset"]

STRATEGIES = ("salient_span", "random_token", "random_span")
# bump when the output of a strategy changes, so stale Arrow caches are not reused
_MASKING_VERSION = 1

MASKED_FEATURES = datasets.Features(
    {
        "input_ids": datasets.List(datasets.Value("int32")),
        "labels": datasets.List(datasets.Value("int32")),
        "source_block_id": datasets.Value("int64"),
        "num_masked": datasets.Value("int32"),
        "strategy": datasets.Value("string"),
    }
)

# ---------------------------------------------------------------------------------------------------------------
# masking of one window of wordpieces; every function returns the positions to predict (window-relative)


def _salient_positions(
    starts: np.ndarray, ends: np.ndarray, spans: list[Span], window: tuple[int, int], rng: np.random.Generator
) -> list[int]:
    """All wordpieces of ONE salient span chosen uniformly among the spans that lie inside the window."""
    lo, hi = window
    ranges = set()
    for start, end in spans:
        covered = np.flatnonzero((starts < end) & (ends > start))
        if covered.size and covered[0] >= lo and covered[-1] < hi:
            ranges.add((int(covered[0]), int(covered[-1]) + 1))
    if not ranges:
        return []
    first, stop = sorted(ranges)[rng.integers(len(ranges))]
    return list(range(first - lo, stop - lo))


def _random_token_positions(length: int, mask_probability: float, rng: np.random.Generator) -> list[int]:
    count = min(length, max(1, int(round(length * mask_probability))))
    return sorted(rng.choice(length, size=count, replace=False).tolist())


_SPAN_P, _SPAN_MAX = 0.2, 10
# SpanBERT's truncated geometric distribution of span lengths (in words): p (1 - p)^(l - 1), l = 1..10, renormalized
_SPAN_LENGTH_PROBS = np.array([_SPAN_P * (1 - _SPAN_P) ** (n - 1) for n in range(1, _SPAN_MAX + 1)])
_SPAN_LENGTH_PROBS /= _SPAN_LENGTH_PROBS.sum()


def _random_span_positions(
    word_ids: list[int | None], mask_probability: float, rng: np.random.Generator
) -> list[int]:
    """SpanBERT: spans of whole words, length ~ Geo(0.2) clipped to 10 words, until ~15% of the wordpieces."""
    words: list[list[int]] = []  # [first, stop) wordpiece range of each word
    previous = object()
    for position, word in enumerate(word_ids):
        if word is None or word != previous:
            words.append([position, position + 1])
        else:
            words[-1][1] = position + 1
        previous = word
    length = len(word_ids)
    budget = max(1, int(round(length * mask_probability)))
    masked = np.zeros(length, dtype=bool)
    count = 0
    for _ in range(10 * len(words) + 10):
        if count >= budget:
            break
        span_words = int(rng.choice(_SPAN_MAX, p=_SPAN_LENGTH_PROBS)) + 1
        first_word = int(rng.integers(len(words)))
        first = words[first_word][0]
        stop = words[min(first_word + span_words, len(words)) - 1][1]
        if masked[first:stop].any() or count + (stop - first) > budget:
            continue  # SpanBERT rejects spans that overlap or overshoot the budget
        masked[first:stop] = True
        count += stop - first
    if count == 0:  # every word is longer than the budget: mask one whole word
        first, stop = words[int(rng.integers(len(words)))]
        masked[first:stop] = True
    return np.flatnonzero(masked).tolist()


# ---------------------------------------------------------------------------------------------------------------
# the datasets.map function


def _mask_batch(
    batch: dict[str, list],
    indices: list[int],
    *,
    tokenizer: Any,
    strategy: str,
    tagger: Tagger | None,
    query_max_length: int,
    mask_probability: float,
    seed: int,
    special_ids: list[int],
) -> dict[str, list]:
    """A batch of articles or blocks in, one row per sentence window out (num_masked = 0 marks a skipped one)."""
    sentences, owners = [], []
    for row, text in enumerate(batch["text"]):
        for _, sentence in split_sentences(text or ""):
            sentences.append(sentence)
            owners.append(row)
    out: dict[str, list] = {name: [] for name in MASKED_FEATURES}
    if not sentences:
        return out
    encoded = tokenizer(sentences, add_special_tokens=False, return_offsets_mapping=True, verbose=False)

    salient: list[list[Span]] | None = None
    if strategy == "salient_span":
        tagged = tagger(sentences)
        if len(tagged) != len(sentences):
            raise ValueError(
                f"The tagger returned {len(tagged)} span lists for {len(sentences)} texts; return one per text."
            )
        salient = []
        for sentence, entities in zip(sentences, tagged):
            spans = {(int(span[0]), int(span[1])) for span in entities} | set(find_date_spans(sentence))
            salient.append(sorted((s, e) for s, e in spans if 0 <= s < e <= len(sentence)))

    cls_id, sep_id, mask_id = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    vocab_size = len(tokenizer)
    specials = set(special_ids)
    block_ids = batch.get("block_id")
    # one generator per source row, seeded by its global index: the result does not depend on num_proc or batching
    rngs: dict[int, np.random.Generator] = {}
    window_size = query_max_length - 2
    for j, sentence in enumerate(sentences):
        row = owners[j]
        rng = rngs.get(row)
        if rng is None:
            rng = rngs[row] = np.random.default_rng([seed, indices[row]])
        ids = encoded["input_ids"][j]
        if not ids:
            continue
        if strategy == "salient_span":
            offsets = np.asarray(encoded["offset_mapping"][j], dtype=np.int64).reshape(-1, 2)
            starts, ends = offsets[:, 0], offsets[:, 1]
        elif strategy == "random_span":
            word_ids = encoded.word_ids(j)
        source_block_id = int(block_ids[row]) if block_ids is not None else -1
        for lo in range(0, len(ids), window_size):
            hi = min(lo + window_size, len(ids))
            window = list(ids[lo:hi])
            if strategy == "salient_span":
                positions = _salient_positions(starts, ends, salient[j], (lo, hi), rng)
            elif strategy == "random_token":
                positions = _random_token_positions(hi - lo, mask_probability, rng)
            else:
                positions = _random_span_positions(word_ids[lo:hi], mask_probability, rng)

            out["source_block_id"].append(source_block_id)
            out["strategy"].append(strategy)
            out["num_masked"].append(len(positions))
            if not positions:  # skipped (no salient span); filtered out after counting
                out["input_ids"].append([])
                out["labels"].append([])
                continue
            labels = [IGNORE_INDEX] * len(window)
            for position in positions:
                labels[position] = window[position]
            if strategy == "random_token":
                # BERT: 80% [MASK], 10% a random wordpiece, 10% unchanged (still predicted)
                for position, draw in zip(positions, rng.random(len(positions))):
                    if draw < 0.8:
                        window[position] = mask_id
                    elif draw < 0.9:
                        replacement = int(rng.integers(vocab_size))
                        while replacement in specials:
                            replacement = int(rng.integers(vocab_size))
                        window[position] = replacement
            else:
                for position in positions:
                    window[position] = mask_id
            out["input_ids"].append([cls_id, *window, sep_id])
            out["labels"].append([IGNORE_INDEX, *labels, IGNORE_INDEX])
    return out


def _load_source(source: Any) -> tuple[datasets.Dataset, bool]:
    """Blocks (a dataset or list of dicts with `block_id` and `text`) or anything `load_articles` takes."""
    if isinstance(source, Sequence) and not isinstance(source, (str, bytes)) and source:
        if all(isinstance(row, Mapping) for row in source) and "block_id" in source[0]:
            source = datasets.Dataset.from_list([dict(row) for row in source])
    if isinstance(source, datasets.Dataset) and "block_id" in source.column_names:
        if "text" not in source.column_names:
            raise ValueError(
                f"The blocks dataset needs a 'text' column (the block body); it has {source.column_names}."
            )
        return source, True
    return load_articles(source), False


def _tagger_fingerprint(tagger: Any) -> str | None:
    fingerprint = getattr(tagger, "fingerprint", None)
    if isinstance(fingerprint, str):
        return fingerprint
    try:
        return Hasher.hash(tagger)
    except Exception:  # noqa: BLE001 - any unpicklable callable: fall back to no caching
        return None


def build_masked_dataset(
    source: Any,
    tokenizer: Any,
    strategy: str = "salient_span",
    tagger: Tagger | None = None,
    query_max_length: int = 96,
    seed: int = 0,
    num_proc: int | None = 1,
    cache_dir: str | os.PathLike | None = None,
    *,
    mask_probability: float = 0.15,
    batch_size: int = 256,
) -> datasets.Dataset:
    r"""
    Turn pre-training text into masked sentences `[CLS] x_masked [SEP]`, one per sentence (a sentence longer than
    `query_max_length - 2` wordpieces gives one example per window of that many wordpieces).

    Strategies:
        - `"salient_span"` (REALM's default): one salient span per sentence, a named entity from `tagger` or a date
          from [`find_date_spans`], chosen uniformly with a seeded generator; all its wordpieces become `[MASK]`.
          Sentences without a salient span are skipped (their count is logged).
        - `"random_token"` (BERT): 15% of the wordpieces; each is replaced by `[MASK]` (80%), a random wordpiece
          (10%) or kept (10%); all are predicted.
        - `"random_span"` (SpanBERT): spans of whole words, lengths ~ Geometric(0.2) clipped to 10 words, until
          about 15% of the wordpieces are masked; all become `[MASK]`.

    Args:
        source: Articles `{"id", "title", "text"}` (anything [`realm_hf.corpus.load_articles`] takes), or the blocks
            dataset of [`realm_hf.corpus.split_into_blocks`] (detected by its `block_id` column): then each example
            keeps the `block_id` of its sentence as `source_block_id`, so the trainer can exclude the trivial
            candidate (the block the sentence came from).
        tokenizer (`PreTrainedTokenizerFast`): A fast BERT tokenizer (offsets map entity characters to wordpieces).
        strategy (`str`, defaults to `"salient_span"`): One of `"salient_span"`, `"random_token"`, `"random_span"`.
        tagger (`Callable[[list[str]], list[list[tuple[int, int]]]]`, *optional*): Entity tagger for salient spans;
            defaults to [`SalientSpanTagger`] (spaCy). Give it a `fingerprint` string attribute so the cache key
            does not have to hash it.
        query_max_length (`int`, defaults to 96): Maximum length of an example, `[CLS]` and `[SEP]` included.
        seed (`int`, defaults to 0): Seed of the choices; the result is the same for any `num_proc`.
        num_proc (`int`, *optional*, defaults to 1): Processes for `datasets.map`.
        cache_dir (`str` or `os.PathLike`, *optional*): Directory of the Arrow cache files (reused when the
            source, tokenizer, strategy, tagger, lengths and seed are the same).
        mask_probability (`float`, defaults to 0.15): Fraction of wordpieces masked by the random strategies.
        batch_size (`int`, defaults to 256): Source rows per `map` batch (the tagger sees their sentences at once).

    Returns:
        `datasets.Dataset` with columns `input_ids` (`[CLS] masked sentence [SEP]`), `labels` (same length: the
        original id at masked positions, -100 elsewhere), `source_block_id` (-1 for articles), `num_masked` and
        `strategy`.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"Unknown masking strategy {strategy!r}; use one of {STRATEGIES}.")
    if query_max_length < 3:
        raise ValueError(f"query_max_length must be at least 3 ([CLS] x [SEP]), got {query_max_length}.")
    if not 0.0 < mask_probability < 1.0:
        raise ValueError(f"mask_probability must be in (0, 1), got {mask_probability}.")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"build_masked_dataset needs a fast tokenizer (offset mappings), got {type(tokenizer).__name__}; "
            "load it with AutoTokenizer.from_pretrained(..., use_fast=True)."
        )
    if tokenizer.mask_token_id is None or tokenizer.cls_token_id is None or tokenizer.sep_token_id is None:
        raise ValueError("The tokenizer needs [CLS], [SEP] and [MASK] tokens (a BERT wordpiece tokenizer).")
    if strategy == "salient_span":
        tagger = SalientSpanTagger() if tagger is None else tagger
        if not callable(tagger):
            raise TypeError(
                f"tagger must be callable (texts -> list of (start, end) spans), got {type(tagger).__name__}."
            )
    elif tagger is not None:
        logger.warning("tagger is ignored by strategy=%r (only 'salient_span' uses one)", strategy)
        tagger = None

    dataset, is_blocks = _load_source(source)
    tagger_key = _tagger_fingerprint(tagger) if tagger is not None else "none"
    fingerprint = None
    if tagger_key is not None:
        fingerprint = Hasher.hash(
            (
                _MASKING_VERSION,
                dataset._fingerprint,
                tokenizer_fingerprint(tokenizer),
                strategy,
                tagger_key,
                query_max_length,
                seed,
                mask_probability,
            )
        )
    filter_cache_file_name = None
    if cache_dir is not None and fingerprint is None:
        logger.warning(
            "The tagger %r cannot be hashed; the masked dataset is not cached (give it a `fingerprint`).", tagger
        )
    elif fingerprint is not None:
        filter_cache_file_name = cache_file(cache_dir, f"masked-{strategy}-{fingerprint}-kept.arrow")

    began = time.perf_counter()
    units = cached_map(
        dataset,
        _mask_batch,
        cache_dir=cache_dir,
        name=f"masked-{strategy}-{fingerprint}.arrow",
        fingerprint=fingerprint,
        with_indices=True,
        batch_size=batch_size,
        num_proc=num_proc,
        features=MASKED_FEATURES,
        fn_kwargs={
            "tokenizer": tokenizer,
            "strategy": strategy,
            "tagger": tagger,
            "query_max_length": query_max_length,
            "mask_probability": mask_probability,
            "seed": seed,
            "special_ids": list(tokenizer.all_special_ids),
        },
        desc=f"Masking sentences ({strategy})",
    )
    skipped = int(pc.sum(pc.equal(units.data.column("num_masked"), 0)).as_py() or 0)
    masked = units
    if skipped:
        with without_datasets_bars():  # a quick filter, counted in the log line below
            masked = units.filter(
                _has_masks,
                batched=True,
                input_columns="num_masked",
                cache_file_name=filter_cache_file_name,
                new_fingerprint=None if fingerprint is None else Hasher.hash((fingerprint, "kept")),
            )
    seconds = time.perf_counter() - began
    logger.info(
        "Masked %d %s with %s in %.1fs: %d sentences (windows) -> %d examples, %d skipped without a salient span "
        "(%.1f%%)",
        len(dataset),
        "blocks" if is_blocks else "articles",
        strategy,
        seconds,
        len(units),
        len(masked),
        skipped,
        100.0 * skipped / max(len(units), 1),
    )
    return masked


def _has_masks(num_masked: list[int]) -> list[bool]:
    return [n > 0 for n in num_masked]
