"""The retriever, tokenizer and index that go with a knowledge-augmented encoder, found where a REALM pre-training
checkpoint keeps them: next to the encoder in a local directory, or in the Hub repo it was read from.

A local pre-training output (`<output_dir>/final`)::

    retriever/  encoder/  index/  (config.json, tokenizer files)

The same checkpoint published by `realm-hf publish` (a Hub model repo, its index a dataset repo)::

    org/realm-cc-news           retriever/  encoder/  config.json  tokenizer files  README.md
    org/realm-cc-news-index     the index bundle, named with its commit in encoder/config.json and retriever/config.json
                                (`index_repo_id`, `index_revision`)

Used by the `"realm-fill-mask"` pipeline and by `RealmRetrievalAugmentedMaskedLM` (`"fill-mask"`).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from ..index.manifest import MANIFEST_NAME
from ..modeling import RealmRetriever
from ..modeling.checkpoint_layout import pretraining_checkpoint_part
from ._utils import load_tokenizer_from
from .index_loading import (
    DEFAULT_INDEX_FOLDER,
    FINGERPRINT_OPT_OUT,
    check_index_fingerprint,
    index_source,
    load_index_for_model,
)

__all__ = ["CheckpointSource", "checkpoint_source", "find_index", "find_retriever", "find_tokenizer"]

FILL_MASK_TASK = "realm-fill-mask"


@dataclasses.dataclass(frozen=True)
class CheckpointSource:
    r"""
    Where the parts of a pre-training checkpoint are looked for.

    Args:
        dirs (`list[str]`): Local directories that may hold `retriever/` and `index/`: the encoder's own, then its
            parent (the output dir).
        repo_id (`str`, *optional*): The Hub repo the encoder was read from (its `retriever/` and tokenizer are read
            there, its index from the dataset repo its config names).
        revision (`str`, *optional*): The revision of `repo_id` the encoder was read from.
    """

    dirs: list[str] = dataclasses.field(default_factory=list)
    repo_id: str | None = None
    revision: str | None = None

    def describe(self, folder: str) -> str:
        """The places looked at for `folder`, for messages."""
        places = [os.path.join(d, folder) for d in self.dirs]
        if self.repo_id is not None:
            places.append(f"{folder}/ of the Hub repo {self.repo_id!r}")
        return ", ".join(places) or "nowhere (the encoder was built in memory)"


def checkpoint_source(encoder: Any) -> CheckpointSource:
    """Where the parts of `encoder`'s checkpoint are: its directory and the parent, or the Hub repo it came from."""
    name = getattr(encoder, "name_or_path", None) or None
    if name is None:
        return CheckpointSource()
    if os.path.isdir(name):
        name = os.path.abspath(name)
        return CheckpointSource(dirs=[name, os.path.dirname(name)])
    from ..hub.download import is_repo_id

    if is_repo_id(name):
        return CheckpointSource(repo_id=name, revision=getattr(encoder, "hub_revision", None))
    return CheckpointSource()


def find_retriever(retriever: Any, source: CheckpointSource) -> tuple[RealmRetriever, str | None]:
    """The retriever given (an instance or a directory), else `retriever/` in the first of `source.dirs` that has
    one, else that of `source.repo_id`; with the directory it was read from (None for an instance or a Hub repo)."""
    if isinstance(retriever, RealmRetriever):
        return retriever, retriever.name_or_path or None
    if retriever is not None:
        path = os.fspath(retriever)
        return RealmRetriever.from_pretrained(path), path
    for directory in source.dirs:
        path = os.path.join(directory, "retriever")
        if os.path.isfile(os.path.join(path, "config.json")):
            return RealmRetriever.from_pretrained(path), path
    hub = {"revision": source.revision}
    if source.repo_id is not None and pretraining_checkpoint_part(source.repo_id, "retriever", **hub):
        return RealmRetriever.from_pretrained(source.repo_id, subfolder="retriever", **hub), None
    raise ValueError(
        f"The {FILL_MASK_TASK!r} pipeline needs the REALM retriever: pass `retriever=` (a RealmRetriever or its "
        f"directory). Looked in: {source.describe('retriever')}."
    )


def find_index(
    index: Any, source: CheckpointSource, expected_dim: int, expected_fingerprint: str | None = None,
    trust_index_file: bool = False, config: Any = None,
) -> Any:
    """The index given (an instance or a directory), else `index/` in the first of `source.dirs` that has one, else
    the one the encoder's `config` names for the Hub repo it came from (`index_repo_id` at `index_revision`, as
    `realm-hf publish` records it); refused unless its manifest names `expected_fingerprint` (the retriever's document
    tower; `None`: not checked). `trust_index_file`: see [`load_index_for_model`]."""
    if index is not None:
        loaded = load_index_for_model(None, None, index, expected_dim=expected_dim, trust_index_file=trust_index_file)
        check_index_fingerprint(loaded, expected_fingerprint, index_source(index), FINGERPRINT_OPT_OUT)
        return loaded
    for directory in source.dirs:
        if os.path.isfile(os.path.join(directory, DEFAULT_INDEX_FOLDER, MANIFEST_NAME)):
            loaded = load_index_for_model(directory, None, expected_dim=expected_dim, trust_index_file=trust_index_file)
            where = f"The index {os.path.join(directory, DEFAULT_INDEX_FOLDER)!r}"
            check_index_fingerprint(loaded, expected_fingerprint, where, FINGERPRINT_OPT_OUT)
            return loaded
    if source.repo_id is not None:
        loaded = load_index_for_model(
            source.repo_id, config, expected_dim=expected_dim, model_revision=source.revision,
            trust_index_file=trust_index_file,
        )
        check_index_fingerprint(loaded, expected_fingerprint, index_source(None, source.repo_id), FINGERPRINT_OPT_OUT)
        return loaded
    raise FileNotFoundError(
        f"The {FILL_MASK_TASK!r} pipeline needs the corpus index: pass `index=` (a RealmIndex or its directory). "
        f"Looked in: {source.describe('index')}."
    )


def find_tokenizer(source: CheckpointSource, retriever_dir: str | None) -> Any:
    """The tokenizer saved with the checkpoint: in the encoder's directory, the retriever's or `<output dir>/encoder`,
    or the `encoder/` of the Hub repo."""
    if source.repo_id is not None and not source.dirs:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(
            source.repo_id, subfolder="encoder", revision=source.revision, use_fast=True
        )
    return load_tokenizer_from(
        [*source.dirs[:1], retriever_dir, *(os.path.join(d, "encoder") for d in source.dirs[1:])], "REALM encoder"
    )
