"""What a folder converted from transformers' REALM says of its source, for its model card: `conversion.json`, which
`realm-hf convert` writes next to the converted model (`realm_hf.convert`, a room above this one, writes it; the name
and the format are defined here, where the card reads them)."""

from __future__ import annotations

import os
from typing import Any

from ..utils.files import read_json_file
from .download import is_repo_id

__all__ = ["ANSWER_RULE_NOTES", "CONVERSION_FILE", "read_conversion_facts"]

CONVERSION_FILE = "conversion.json"
"""What a converted folder records of its source: `{"format": 1, "source": <Hub id or null>, "source_path",
"old_class", "kind", "license", "converted": [...], "realm_hf_version", "answer_rule" (Open-QA only)}`."""

CONVERSION_FORMAT = 1

ANSWER_RULE_NOTES = {
    "best_span": "it answers as transformers' `RealmForOpenQA` did: the single best span over the blocks it reads, "
    "ranked by retrieval score + span score",
    "marginal": "it answers by realm_hf's own rule: the marginal `p(y | x)` over every span of the same text in "
    "every retrieved block",
}
"""What each `config.answer_rule` means, for the card."""

NEW_CLASSES = {
    "embedder": "RealmRetriever", "encoder": "RealmKnowledgeEncoder", "reader": "RealmReader", "openqa": "RealmForOpenQA",
}
"""The realm_hf class a converted checkpoint of each kind becomes."""


def read_conversion_facts(model_dir: str | os.PathLike) -> dict[str, Any] | None:
    r"""
    The card's facts of a converted folder, read from its `conversion.json`; None when it has none (a model realm_hf
    trained).

    Returns:
        `dict`: `source` (the Hub id, or None), `source_url` (`https://huggingface.co/<source>` for a Hub id),
        `source_name` (the Hub id, else the name of the folder converted), `old_class`, `new_class`, `kind`,
        `license`, `converted` (what was carried over, human-readable), `answer_rule` and `answer_rule_note`
        (Open-QA), `realm_hf_version`, `by_google` (a `google/` checkpoint: the weights are Google Research's).

    Raises:
        `ValueError`: for a `conversion.json` that is not a record of a format this version reads (one line).
    """
    path = os.path.join(os.fspath(model_dir), CONVERSION_FILE)
    if not os.path.isfile(path):
        return None
    hint = "convert the checkpoint again (realm-hf convert --src OLD --output NEW)"
    record = read_json_file(path, hint)
    if not isinstance(record, dict) or record.get("format") != CONVERSION_FORMAT:
        found = record.get("format") if isinstance(record, dict) else type(record).__name__
        raise ValueError(f"{path}: expected a conversion record of format {CONVERSION_FORMAT}, got {found!r}; {hint}.")
    source = record.get("source") or None
    hub_id = source if source is not None and "/" in source and is_repo_id(source) else None
    source_path = record.get("source_path")
    rule = record.get("answer_rule")
    return {
        "source": hub_id,
        "source_url": f"https://huggingface.co/{hub_id}" if hub_id else None,
        "source_name": hub_id or source or (os.path.basename(os.path.normpath(source_path)) if source_path else None),
        "old_class": record.get("old_class"),
        "new_class": NEW_CLASSES.get(record.get("kind")),
        "kind": record.get("kind"),
        "license": record.get("license"),
        "converted": [str(item) for item in record.get("converted") or []],
        "answer_rule": rule,
        "answer_rule_note": ANSWER_RULE_NOTES.get(rule),
        "realm_hf_version": record.get("realm_hf_version"),
        "by_google": bool(hub_id and hub_id.startswith("google/")),
    }
