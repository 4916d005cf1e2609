"""`realm_hf.checkpoints`: a checkpoint's parts found in a folder, a subfolder (`final/encoder`) or next to it, and the
folder checks the CLI makes before it loads anything."""

from __future__ import annotations

import os
import shutil

import pytest

from realm_hf import RealmKnowledgeEncoder, RealmRetriever
from realm_hf.checkpoints import (
    CheckpointSource,
    checkpoint_source,
    encoder_subfolder,
    find_index,
    find_retriever,
    find_tokenizer,
    holds_model,
    is_pretraining_checkpoint,
    load_pretraining_parts,
    model_around_index,
)
from realm_hf.index.manifest import fingerprint_module


def test_a_final_folder_gives_all_four_parts(pretraining_dir):
    parts = load_pretraining_parts(pretraining_dir)
    assert isinstance(parts.encoder, RealmKnowledgeEncoder) and isinstance(parts.retriever, RealmRetriever)
    assert parts.index.dim == parts.retriever.config.embedding_size
    assert parts.index.fingerprint == fingerprint_module(parts.retriever.document_embedder)
    assert parts.tokenizer.is_fast and parts.tokenizer.mask_token_id is not None
    # the encoder was read from final/encoder (its name_or_path stays final/); retriever/ and index/ are found there
    final = os.path.abspath(pretraining_dir)
    assert parts.source.dirs == [final, os.path.dirname(final)]


def test_the_encoder_subfolder_finds_the_same_parts(pretraining_dir):
    whole = load_pretraining_parts(pretraining_dir)
    sub = load_pretraining_parts(os.path.join(pretraining_dir, "encoder"))
    assert sub.index.num_blocks == whole.index.num_blocks
    assert sub.index.fingerprint == whole.index.fingerprint


def test_encoder_subfolder_only_for_a_pretraining_output(pretraining_dir, tmp_path):
    assert encoder_subfolder(pretraining_dir) == "encoder"
    assert encoder_subfolder(os.path.join(pretraining_dir, "encoder")) == ""
    assert encoder_subfolder(pretraining_dir, "retriever") == "retriever"  # an explicit subfolder wins
    assert encoder_subfolder("org/some-repo") == ""  # a Hub id is left to from_pretrained
    assert is_pretraining_checkpoint(pretraining_dir) and not is_pretraining_checkpoint(tmp_path)


def test_a_missing_part_is_named_with_the_places_looked_at(pretraining_dir, tmp_path):
    lone = tmp_path / "encoder-only"
    shutil.copytree(os.path.join(pretraining_dir, "encoder"), lone / "encoder")
    encoder = RealmKnowledgeEncoder.from_pretrained(str(lone))
    source = checkpoint_source(encoder)
    with pytest.raises(ValueError, match="needs the REALM retriever: pass `retriever=`.*Looked in: .*retriever"):
        find_retriever(None, source)
    with pytest.raises(FileNotFoundError, match="needs the corpus index: pass `index=`.*Looked in: .*index"):
        find_index(None, source, expected_dim=8)
    with pytest.raises(ValueError, match="No tokenizer for the REALM encoder.*Looked for tokenizer files in: "):
        find_tokenizer(source, None)  # neither the folder given, nor a retriever's, nor <parent>/encoder holds one
    assert find_tokenizer(source, str(lone / "encoder")).is_fast
    in_memory = CheckpointSource()
    assert "nowhere (the encoder was built in memory)" in in_memory.describe("index")


def test_an_index_of_other_weights_is_refused(pretraining_dir):
    source = CheckpointSource(dirs=[pretraining_dir])
    retriever, _ = find_retriever(None, source)
    with pytest.raises(ValueError, match="check_fingerprint=False"):
        find_index(None, source, retriever.config.embedding_size, expected_fingerprint="0" * 64)


def test_folders_read_by_their_files(pretraining_dir, tmp_path):
    index = os.path.join(pretraining_dir, "index")
    assert holds_model(pretraining_dir) and not holds_model(index)
    assert model_around_index(index) == pretraining_dir  # an index folder named as a model names its model
    lone = tmp_path / "lone-index"
    lone.mkdir()
    assert model_around_index(str(lone)) is None
