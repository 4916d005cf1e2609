"""`load_index_for_model`, the one index resolver: explicit index > <model dir>/index > config.index_repo_id (a
folder inside the model, or a Hub dataset repo); a config path that leaves the model folder is refused; a faiss file
from the Hub is rebuilt from the embeddings unless trusted."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from markdown_blocks import populate_cache
from transformers import pipeline

import realm_hf  # noqa: F401  (registers the tasks)
from realm_hf import RealmForOpenQA
from realm_hf.index import RealmIndex
from realm_hf.pipelines import load_index_for_model

TASK = "realm-open-qa"
QUESTION = "what is the capital of france"


@pytest.fixture(scope="module")
def config(open_qa_dir):
    return RealmForOpenQA.from_pretrained(open_qa_dir).config


def test_explicit_index_wins(open_qa_dir, config, tmp_path):
    other = tmp_path / "other_index"
    shutil.copytree(os.path.join(open_qa_dir, "index"), other)
    index = load_index_for_model(open_qa_dir, config, index=str(other))
    assert isinstance(index, RealmIndex)
    instance = RealmIndex.from_pretrained(other)
    assert load_index_for_model(open_qa_dir, config, index=instance) is instance
    with pytest.raises(FileNotFoundError, match="not an index directory"):
        load_index_for_model(open_qa_dir, config, index=str(tmp_path / "missing"))
    with pytest.raises(TypeError, match="RealmIndex"):
        load_index_for_model(open_qa_dir, config, index=42)


def test_model_dir_index_then_a_folder_inside_the_model(open_qa_dir, config, tmp_path):
    assert load_index_for_model(open_qa_dir, config).num_blocks == 10  # <model dir>/index

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copytree(os.path.join(open_qa_dir, "index"), model_dir / "corpus" / "index")
    config.index_repo_id = "corpus/index"  # relative to the model directory
    try:
        assert load_index_for_model(str(model_dir), config).num_blocks == 10
    finally:
        config.index_repo_id = "index"


@pytest.fixture
def outside_index(open_qa_dir, config, tmp_path) -> Path:
    """A valid index at `<tmp>/other/index`, which `config.index_fingerprint` vouches for, and a model directory
    `<tmp>/models/model` without an index of its own: `../../other/index` from there is that index."""
    other = tmp_path / "other" / "index"
    shutil.copytree(os.path.join(open_qa_dir, "index"), other)
    (tmp_path / "models" / "model").mkdir(parents=True)
    saved = config.index_repo_id, config.index_fingerprint
    config.index_fingerprint = RealmIndex.from_pretrained(other).fingerprint
    yield other
    config.index_repo_id, config.index_fingerprint = saved


@pytest.mark.parametrize("kind", ["dot-dot", "absolute"])
def test_a_config_path_outside_the_model_folder_is_refused_in_one_line(config, tmp_path, outside_index, kind):
    value = "../../other/index" if kind == "dot-dot" else str(outside_index)
    config.index_repo_id = value
    with pytest.raises(ValueError) as error:
        load_index_for_model(str(tmp_path / "models" / "model"), config)
    message = str(error.value)
    assert "\n" not in message and f"config.index_repo_id={value!r}" in message
    assert f"index={value!r}" in message  # the fix: pass that index yourself
    assert ("absolute path" if kind == "absolute" else "leaves the model's folder") in message


def test_a_folder_of_the_model_that_links_outside_is_refused(config, tmp_path, outside_index):
    model_dir = tmp_path / "models" / "model"
    (model_dir / "corpus").symlink_to(outside_index, target_is_directory=True)
    config.index_repo_id = "corpus"
    with pytest.raises(ValueError, match=r"'corpus'.* resolves to .*other.*, outside the model's folder"):
        load_index_for_model(str(model_dir), config)


def test_the_pipeline_refuses_a_model_whose_config_points_outside_its_folder(open_qa_dir, tmp_path, outside_index):
    model_dir = tmp_path / "models" / "model"
    shutil.rmtree(model_dir)
    shutil.copytree(open_qa_dir, model_dir, ignore=shutil.ignore_patterns("index"))
    config = json.loads((model_dir / "config.json").read_text())
    config["index_repo_id"] = "../../other/index"
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"index_repo_id='\.\./\.\./other/index'"):
        pipeline(TASK, model=str(model_dir))
    assert pipeline(TASK, model=str(model_dir), index=str(outside_index)).index.num_blocks == 10  # the user's choice


def test_an_index_from_the_hub_is_rebuilt_from_its_embeddings_unless_trusted(open_qa_dir, tmp_path, monkeypatch):
    faiss = pytest.importorskip("faiss")
    # the repo's index was written by another user's realm_hf (their key, not this user's: realm_hf.index.provenance)
    this_user = os.environ["REALM_HF_CACHE"]
    monkeypatch.setenv("REALM_HF_CACHE", str(tmp_path / "another-user"))
    RealmIndex.from_pretrained(Path(open_qa_dir) / "index").save_pretrained(tmp_path / "theirs")
    monkeypatch.setenv("REALM_HF_CACHE", this_user)
    snapshot = populate_cache(tmp_path / "hub", "org/realm-index", tmp_path / "theirs", "2" * 40, "dataset")
    reads = []
    native = faiss.read_index
    monkeypatch.setattr(faiss, "read_index", lambda path, *args: reads.append(path) or native(path, *args))

    from_hub = pipeline(TASK, model=open_qa_dir, index=str(snapshot))
    assert reads == []  # the faiss file of the repo was never parsed: rebuilt from embeddings.npy
    assert from_hub.index.index_type == "Flat" and from_hub.index.num_blocks == 10
    own = pipeline(TASK, model=open_qa_dir)  # an index this user's realm_hf wrote: its faiss file is read
    assert reads == [os.path.join(open_qa_dir, "index", "index.faiss")]
    trusted = pipeline(TASK, model=open_qa_dir, index=str(snapshot), trust_index_file=True)
    assert reads[1:] == [os.path.join(snapshot, "index.faiss")]
    assert from_hub(QUESTION) == own(QUESTION) == trusted(QUESTION)  # Flat: the rebuilt structure is the same


def test_nothing_found_names_what_was_looked_for(config, tmp_path):
    config.index_repo_id = None
    try:
        with pytest.raises(FileNotFoundError) as error:
            load_index_for_model(str(tmp_path), config)
    finally:
        config.index_repo_id = "index"
    message = str(error.value)
    assert os.path.join(str(tmp_path), "index", "manifest.json") in message
    assert "index=" in message


def test_hub_repo_id_not_available_offline(config, tmp_path):
    config.index_repo_id = "some-user/some-realm-index"
    config.index_revision = "abc123"
    try:
        with pytest.raises(FileNotFoundError, match="some-user/some-realm-index"):
            load_index_for_model(str(tmp_path), config)
    finally:
        config.index_repo_id, config.index_revision = "index", None


def test_dimension_mismatch_is_refused(open_qa_dir, config):
    with pytest.raises(ValueError, match="dimensions|dim"):
        load_index_for_model(open_qa_dir, config, expected_dim=config.retriever_config.embedding_size + 1)


def test_bare_folder_name_is_never_read_from_the_working_directory(open_qa_dir, config, tmp_path, monkeypatch):
    shutil.copytree(os.path.join(open_qa_dir, "index"), tmp_path / "index")
    model_dir = tmp_path / "model_without_index"
    model_dir.mkdir()
    monkeypatch.chdir(tmp_path)  # ./index exists, but "index" means <model dir>/index
    with pytest.raises(FileNotFoundError, match="model_without_index"):
        load_index_for_model(str(model_dir), config)
