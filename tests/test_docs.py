"""docs/*.md: every ```python block runs as written (tests/markdown_blocks.py, as the README's do), and every local
link of the README and the docs points at a file that exists (and at a heading that exists, for `page.md#anchor`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from markdown_blocks import DOCS, README, REPO, RUN_ALONE, block_params, docs_workdir, run_block  # noqa: F401 (a fixture)
from openqa_helpers import single_torch_thread  # noqa: F401 (an autouse fixture)

BLOCKS = block_params([page for page in DOCS if page.name not in RUN_ALONE])
PAGES = [README, *DOCS]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)


def heading_anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for heading in re.findall(r"^#+\s+(.*?)\s*$", FENCE.sub("", text), flags=re.MULTILINE):
        anchors.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return anchors


def test_there_is_a_page_per_job():
    names = {page.name for page in DOCS}
    assert {"pretraining.md", "ict.md", "openqa.md", "index.md", "hub.md", "scale.md", "knowledge-updates.md",
            "migration.md", "results.md", "experiments.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=[page.relative_to(REPO).as_posix() for page in PAGES])
def test_local_links_resolve(page: Path):
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in heading_anchors(linked.read_text(encoding="utf-8")):
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


@pytest.mark.parametrize("page,line,code", BLOCKS)
def test_docs_block_runs(page, line, code, docs_workdir, monkeypatch):
    run_block(page, line, code, docs_workdir, monkeypatch)


TRACKER_OR_LEASE = re.compile(r"\bissue \d+|lent machine|per upload|device time ran out", re.IGNORECASE)
"""What a page for users must not lean on: the project's issue numbers, the limits of a machine a run was lent."""


@pytest.mark.parametrize("page", [page for page in DOCS if page.name != "results.md"], ids=lambda page: page.name)
def test_pages_say_what_was_run_without_issue_numbers_or_lease_limits(page: Path):
    found = [line for line in page.read_text(encoding="utf-8").splitlines() if TRACKER_OR_LEASE.search(line)]
    assert found == [], f"{page.name}: say what was run, on what machine, for how long: {found}"
