"""`commands.load_retriever` (what `realm-hf build-index` / `search --model` load): a pre-training output directory
(`<output_dir>/final`, whose top-level config.json is the encoder's) gives its trained `retriever/`, not a fresh
sentence embedder built from the encoder's BERT."""

from __future__ import annotations

import torch
from realm_pipeline_helpers import make_pretraining_dir

from realm_hf import RealmRetriever
from realm_hf.cli import main
from realm_hf.retrieval import load_retriever


def test_a_pretraining_output_loads_its_retriever(tmp_path):
    final = make_pretraining_dir(str(tmp_path / "final"))
    saved = RealmRetriever.from_pretrained(tmp_path / "final" / "retriever")
    retriever, tokenizer = load_retriever(final)
    assert retriever.config.projection_size == 16 and retriever.config.projection_size == saved.config.projection_size
    for (name, loaded), (_, expected) in zip(retriever.state_dict().items(), saved.state_dict().items()):
        assert torch.equal(loaded, expected), name
    assert tokenizer.mask_token == "[MASK]"


def test_search_with_a_pretraining_output_as_model(tmp_path, capsys):
    final = make_pretraining_dir(str(tmp_path / "final"))
    capsys.readouterr()
    status = main(["search", "--index", f"{final}/index", "--model", final, "-k", "2", "which river flows through cairo"])
    out = capsys.readouterr()
    assert status == 0, out.err
    assert "Q: which river flows through cairo" in out.out and "  2. [" in out.out
