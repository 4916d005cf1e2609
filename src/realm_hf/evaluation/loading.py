"""A saved `RealmForOpenQA` with its tokenizer and index, for evaluation: the index found by the one resolver that
`pipeline(...)` uses too (`realm_hf.checkpoints.index_location`).
"""

from __future__ import annotations

import os
from typing import Any

import torch


__all__ = ["load_open_qa", "resolve_index_directory"]


def resolve_index_directory(
    model_dir: str | os.PathLike, index_repo_id: str | None, index_revision: str | None = None
) -> str:
    r"""
    The local index directory of a saved `RealmForOpenQA`, from `config.index_repo_id` (and `index_revision`).

    The rules are those of the one index resolver, [`realm_hf.checkpoints.index_location.resolve_model_index`], which
    `pipeline(...)` uses too: `<model_dir>/index`, a folder inside the model directory, or a Hub dataset repo
    (downloaded, or read from the cache offline). An absolute path or one that leaves the model directory is refused;
    nothing is looked up in the working directory.

    Raises:
        `ValueError`: when `index_repo_id` points outside the model directory. `FileNotFoundError`: naming every place
        that was looked at, when there is no index.
    """
    from ..hub.download import resolve_index_dir
    from ..checkpoints.index_location import resolve_model_index

    location = resolve_model_index(model_dir, index_repo_id, index_revision)
    if location.directory is not None:
        return location.directory
    return resolve_index_dir(location.repo_id, revision=location.revision, include_index_file=False)


def load_open_qa(
    model_dir: str | os.PathLike,
    index_dir: str | os.PathLike | None = None,
    check_fingerprint: bool = True,
    device: torch.device | str | None = None,
    trust_index_file: bool = False,
) -> tuple[Any, Any, Any]:
    r"""
    A saved `RealmForOpenQA`, its tokenizer and its index (from `index_dir`, else the model's own, found by the index
    resolver `pipeline(...)` uses, [`realm_hf.checkpoints.index_location.load_index_for_model`]). The index must match
    the retriever's embedding size and, with `check_fingerprint`, its document tower's weights or the
    `config.index_fingerprint` recorded at fine-tuning. `trust_index_file`: see [`RealmIndex.from_pretrained`].
    """
    from transformers import AutoTokenizer

    from ..index.manifest import fingerprint_module
    from ..registration import register_what_is_loaded
    from ..modeling import RealmForOpenQA
    from ..checkpoints.index_location import load_index_for_model, model_revision

    model = RealmForOpenQA.from_pretrained(model_dir).eval()
    if device is not None:
        model.to(device)
    register_what_is_loaded()  # AutoTokenizer reads the model's config.json (model_type realm_open_qa)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    index = load_index_for_model(
        model_dir, model.config, index_dir, expected_dim=model.config.retriever_config.embedding_size,
        model_revision=model_revision(model), trust_index_file=trust_index_file,
    )
    current = fingerprint_module(model.retriever.document_embedder)
    # the document tower, or the index the model recorded it was fine-tuned against (shared towers that moved)
    if check_fingerprint and index.fingerprint not in {current, getattr(model.config, "index_fingerprint", None)}:
        source = os.fspath(index_dir) if index_dir is not None else f"the index of the model at {model_dir}"
        index.manifest.check_compatible(expected_fingerprint=current, source=source)  # raises
    return model, tokenizer, index
