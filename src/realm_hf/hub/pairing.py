"""Which index goes with which model: the manifest's doc-tower fingerprint against the model's.

A model accepts an index whose fingerprint is `config.index_fingerprint` when the config has one (an Open-QA model
fine-tuned from the checkpoint whose doc tower built the index; see [`record_index_pairing`]), otherwise the
fingerprint of its own document tower.
"""

from __future__ import annotations

import logging
from typing import Any

from ..index.manifest import IndexManifest, fingerprint_module


logger = logging.getLogger(__name__)

__all__ = ["check_index_matches_model", "expected_index_fingerprint", "rebuild_command", "record_index_pairing"]


def rebuild_command(model: str = "<model dir or repo>") -> str:
    return f"`realm-hf build-index --corpus <corpus> --model {model} --output <index dir>`"


def _retriever_of(model: Any) -> Any:
    """The `RealmRetriever` inside `model` (itself, `model.retriever`)."""
    if hasattr(model, "document_embedder") and hasattr(model, "embed_queries"):
        return model
    retriever = getattr(model, "retriever", None)
    if retriever is not None and hasattr(retriever, "document_embedder"):
        return retriever
    raise TypeError(
        f"Expected a RealmRetriever or a model with a `.retriever` (RealmForOpenQA), got {type(model).__name__}."
    )


def _pairing_config(model: Any) -> Any:
    """The config that records which index the model goes with: the model's own (RealmForOpenQA, RealmRetriever)."""
    return model.config


def expected_index_fingerprint(model: Any) -> str:
    r"""
    The manifest fingerprint an index must have to be used with `model`.

    `config.index_fingerprint` when set (an Open-QA model whose index was built by the doc tower of the checkpoint it
    was fine-tuned from; with shared towers that doc tower moved during fine-tuning), else the fingerprint of the
    model's current document tower.
    """
    recorded = getattr(_pairing_config(model), "index_fingerprint", None)
    if recorded:
        return recorded
    return fingerprint_module(_retriever_of(model).document_embedder)


def check_index_matches_model(
    index: Any, model: Any, *, source: str | None = None, model_name: str | None = None
) -> None:
    r"""
    Refuse an index that was not built for `model`: embedding dims and the doc-tower fingerprint of the manifest.

    Args:
        index ([`RealmIndex`] or [`IndexManifest`]): The index (or its manifest).
        model ([`RealmForOpenQA`] or [`RealmRetriever`]): The model that will search it.
        source (`str`, *optional*): Where the index came from, for the message.
        model_name (`str`, *optional*): The model's directory or repo id, for the rebuild command.

    Raises:
        `ValueError`: naming what differs and the command that rebuilds the index. An index without a fingerprint
        (built from a plain embed function) passes with a warning.
    """
    manifest = index if isinstance(index, IndexManifest) else index.manifest
    retriever = _retriever_of(model)
    source = source or "the index"
    model_name = model_name or getattr(model, "name_or_path", None) or "<model dir or repo>"
    problems = []
    dim = retriever.config.embedding_size
    if manifest.dim != dim:
        problems.append(f"embedding dim: index has {manifest.dim}, the model's retriever produces {dim}")
    expected = expected_index_fingerprint(model)
    recorded = getattr(_pairing_config(model), "index_fingerprint", None)
    if manifest.fingerprint is None:
        logger.warning("%s has no doc-tower fingerprint; cannot verify that it was built for %s", source, model_name)
    elif manifest.fingerprint != expected:
        what = "config.index_fingerprint" if recorded else "the model's document tower"
        problems.append(
            f"document-tower fingerprint: index was built by {manifest.fingerprint[:12]}... (step {manifest.step}), "
            f"{what} is {expected[:12]}..."
        )
    if problems:
        raise ValueError(
            f"{source} does not match the model {model_name} ({'; '.join(problems)}). Use the index the model was "
            f"published with (config.index_repo_id={getattr(model.config, 'index_repo_id', None)!r}, "
            f"index_revision={getattr(model.config, 'index_revision', None)!r}), or rebuild it with this model's "
            f"document tower: {rebuild_command(model_name)}."
        )


def record_index_pairing(
    model: Any, index: Any, repo_id: str | None = None, revision: str | None = None, *, force: bool = False
) -> None:
    r"""
    Record in `model.config` the index the model goes with: `index_fingerprint` (+ `index_repo_id`/`index_revision`).

    Call it when an Open-QA model starts fine-tuning from a checkpoint whose document tower built `index` (the
    paper's recipe: the index is built once, the query tower and the reader are fine-tuned). The fingerprint keeps
    pairing the model with that index after its (shared) towers have moved. Saved with the config (`config.json`).

    Args:
        model: [`RealmForOpenQA`] or [`RealmRetriever`].
        index ([`RealmIndex`] or [`IndexManifest`]): The index.
        repo_id, revision (`str`, *optional*): Where the index is published.
        force (`bool`, defaults to `False`): Record even when the model's current doc tower did not build the index.

    Raises:
        `ValueError`: when the index was not built by the model's current doc tower (unless `force`), or the dims
        differ.
    """
    manifest = index if isinstance(index, IndexManifest) else index.manifest
    retriever = _retriever_of(model)
    if manifest.dim != retriever.config.embedding_size:
        raise ValueError(
            f"The index has dim {manifest.dim} but the model's retriever produces {retriever.config.embedding_size}; "
            f"rebuild it: {rebuild_command()}."
        )
    current = fingerprint_module(retriever.document_embedder)
    if manifest.fingerprint is not None and manifest.fingerprint != current and not force:
        raise ValueError(
            f"The index was built by doc tower {manifest.fingerprint[:12]}... (step {manifest.step}), not by this "
            f"model's document tower ({current[:12]}...); pass force=True if it was built by the checkpoint this "
            f"model comes from, or rebuild it: {rebuild_command()}."
        )
    config = _pairing_config(model)
    config.index_fingerprint = manifest.fingerprint
    if repo_id is not None:
        config.index_repo_id = repo_id
        config.index_revision = revision
