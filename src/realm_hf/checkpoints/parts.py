"""Finding the parts of a REALM checkpoint: the encoder, the retriever, the tokenizer and the corpus index, in a local
folder, a subfolder of it or a Hub repo. The one module that the pipelines, the index builder, the CLI and `convert`
ask; the layout itself (folder names, which folder a model class reads) is `realm_hf.modeling.checkpoint_layout`, and
how a model names its index is [`realm_hf.checkpoints.index_location`].

A local pre-training output (`<output_dir>/final`)::

    retriever/  encoder/  index/  (config.json, tokenizer files)

The same checkpoint published by `realm-hf publish` (a Hub model repo, its index a dataset repo)::

    org/realm-cc-news           retriever/  encoder/  config.json  tokenizer files  README.md
    org/realm-cc-news-index     the index bundle, named with its commit in encoder/config.json and retriever/config.json
                                (`index_repo_id`, `index_revision`)

[`load_pretraining_parts`] reads all four (what `pipeline("fill-mask")` and `pipeline("realm-fill-mask")` load);
[`find_retriever`], [`find_index`] and [`find_tokenizer`] one each.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from ..index.manifest import MANIFEST_NAME, fingerprint_module
from ..modeling import RealmKnowledgeEncoder, RealmRetriever
from .folders import has_tokenizer_files, pretraining_checkpoint_part
from .index_location import (
    DEFAULT_INDEX_FOLDER,
    FINGERPRINT_OPT_OUT,
    check_index_fingerprint,
    index_source,
    load_index_for_model,
)

__all__ = [
    "FILL_MASK_TASK",
    "CheckpointSource",
    "PretrainingParts",
    "checkpoint_source",
    "encoder_subfolder",
    "find_index",
    "find_retriever",
    "find_tokenizer",
    "load_encoder",
    "load_pretraining_parts",
    "load_tokenizer_from",
]

FILL_MASK_TASK = "realm-fill-mask"
"""The task that reads a pre-training checkpoint whole (named in the messages of a missing part)."""

def load_tokenizer_from(candidates: Sequence[str | os.PathLike | None], what: str) -> Any:
    """The fast tokenizer saved in the first candidate directory that has one; a clear error otherwise."""
    from transformers import AutoTokenizer

    for directory in candidates:
        if has_tokenizer_files(directory):
            return AutoTokenizer.from_pretrained(os.fspath(directory), use_fast=True)
    looked = ", ".join(os.fspath(c) for c in candidates if c) or "nowhere (the model was built in memory)"
    raise ValueError(
        f"No tokenizer for the {what}: pass `tokenizer=` (the fast BERT tokenizer the model was trained with). "
        f"Looked for tokenizer files in: {looked}."
    )


def encoder_subfolder(path: str | os.PathLike, subfolder: str = "") -> str:
    r"""
    The subfolder that holds the encoder weights of `path`: `"encoder"` for a pre-training output directory (no
    weights at its top level, an `encoder/config.json`), else `subfolder` unchanged (an encoder directory, a Hub repo
    or an explicit `model_kwargs={"subfolder": ...}`).
    """
    path = os.fspath(path)
    if subfolder or not os.path.isdir(path):
        return subfolder
    return "encoder" if pretraining_checkpoint_part(path, "encoder") else subfolder


def load_encoder(pretrained_model_name_or_path: str | os.PathLike, *model_args: Any, **kwargs: Any) -> RealmKnowledgeEncoder:
    """The [`RealmKnowledgeEncoder`] of a pre-training output directory (from `encoder/`), of an encoder directory, or
    of a Hub repo; `kwargs` go to its `from_pretrained` (a `config` is dropped: the top-level `config.json` of a
    pre-training output is a copy, the encoder's own is read from its folder)."""
    kwargs.pop("config", None)
    kwargs["subfolder"] = encoder_subfolder(pretrained_model_name_or_path, kwargs.get("subfolder", ""))
    return RealmKnowledgeEncoder.from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)


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


@dataclasses.dataclass
class PretrainingParts:
    r"""
    The parts of a REALM pre-training checkpoint, loaded.

    Args:
        encoder ([`RealmKnowledgeEncoder`]), retriever ([`RealmRetriever`]), index ([`RealmIndex`]), tokenizer
            (`PreTrainedTokenizerFast`): The checkpoint's parts.
        source ([`CheckpointSource`]): Where they were found.
    """

    encoder: RealmKnowledgeEncoder
    retriever: RealmRetriever
    index: Any
    tokenizer: Any
    source: CheckpointSource


def load_pretraining_parts(
    pretrained_model_name_or_path: str | os.PathLike,
    *model_args: Any,
    check_fingerprint: bool = True,
    trust_index_file: bool = False,
    **kwargs: Any,
) -> PretrainingParts:
    r"""
    Load a pre-training output directory (or its `encoder/`, or a Hub repo): the encoder, and the retriever, index and
    tokenizer found next to it (`retriever/`, `index/` in the directory or its parent, or the Hub repo's).

    Args:
        pretrained_model_name_or_path (`str` or `os.PathLike`): The directory or Hub repo id.
        check_fingerprint (`bool`, defaults to `True`): Refuse an index whose manifest names other document-tower
            weights than the retriever's.
        trust_index_file (`bool`, defaults to `False`): Read the faiss file of an index that this user's realm_hf did
            not write (see [`load_index_for_model`]).
        model_args, kwargs: Passed to the encoder's `from_pretrained` (`dtype`, `subfolder`, ...).
    """
    encoder = load_encoder(pretrained_model_name_or_path, *model_args, **kwargs)
    source = checkpoint_source(encoder)
    retriever, retriever_dir = find_retriever(None, source)
    expected = fingerprint_module(retriever.document_embedder) if check_fingerprint else None
    index = find_index(None, source, retriever.config.embedding_size, expected, trust_index_file, encoder.config)
    return PretrainingParts(encoder, retriever, index, find_tokenizer(source, retriever_dir), source)
