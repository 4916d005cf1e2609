"""`load_index_for_model`: explicit index > <model dir>/index > config.index_repo_id (relative, absolute, Hub)."""

from __future__ import annotations

import os
import shutil

import pytest

from realm_hf import RealmForOpenQA
from realm_hf.index import RealmIndex
from realm_hf.pipelines import load_index_for_model


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


def test_model_dir_index_then_relative_and_absolute_index_repo_id(open_qa_dir, config, tmp_path):
    assert load_index_for_model(open_qa_dir, config).num_blocks == 10  # <model dir>/index

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    shutil.copytree(os.path.join(open_qa_dir, "index"), model_dir / "corpus_index")
    config.index_repo_id = "corpus_index"  # relative to the model directory
    try:
        assert load_index_for_model(str(model_dir), config).num_blocks == 10
        config.index_repo_id = str(model_dir / "corpus_index")  # absolute
        assert load_index_for_model(None, config).num_blocks == 10
        config.index_repo_id = str(tmp_path / "nowhere")
        with pytest.raises(FileNotFoundError, match="nowhere"):
            load_index_for_model(str(model_dir), config)
    finally:
        config.index_repo_id = "index"


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
