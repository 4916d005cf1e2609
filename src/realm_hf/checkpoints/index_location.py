"""How a model finds its corpus index: the one resolver that `pipeline(...)`, `realm-hf evaluate` and the Open-QA
trainer share, so that they always read the same index.

A `RealmForOpenQA` names its index in its config: `index_repo_id` and `index_revision`. [`resolve_model_index`] turns
them into a place, in this order:

1. `<model dir>/index` when it holds a `manifest.json` (the folder a saved RealmForOpenQA carries);
2. `index_repo_id` as a folder of the model directory: a relative path without `..`, whose real path (symbolic links
   resolved) stays inside the model directory;
3. `index_repo_id` of the form `namespace/name` that is no such folder: a Hub *dataset* repo at `index_revision` (a
   warning says when the config pins no revision).

An absolute `index_repo_id`, or one that leaves the model directory, is refused in one line naming the value and the
fix: a model's config is written by whoever published the model, and its `index_fingerprint` would vouch for an index
the model does not ship. A bare name is only ever a folder of the model directory, never of the working directory. An
index anywhere else is the user's choice, passed explicitly (`index=`, `realm-hf evaluate --index_dir`).

The model directory is the path itself or, for a Hub model repo id, its snapshot in the Hugging Face cache at the
revision the model was loaded from (`model.hub_revision`, which `from_pretrained` records; the default branch when
unknown). When the Hub is reachable and that snapshot lacks the index folder, only `<folder>/*` is downloaded, at the
same revision.

[`load_index_for_model`] then loads through [`RealmIndex.from_pretrained`]: every file is checked against the
manifest's checksums before it is parsed, and a faiss file that this user's realm_hf did not write (one from the Hub,
a copied folder) is rebuilt from the embeddings unless `trust_index_file=True`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..index.manifest import MANIFEST_NAME

if TYPE_CHECKING:
    from ..index import RealmIndex

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_INDEX_FOLDER", "FINGERPRINT_OPT_OUT", "IndexLocation", "check_index_fingerprint", "index_source",
    "load_index_for_model", "model_revision", "resolve_model_dir", "resolve_model_index",
]

DEFAULT_INDEX_FOLDER = "index"
# the argument that pairs a model with an index of other weights anyway (the name realm_hf.evaluation uses)
FINGERPRINT_OPT_OUT = "check_fingerprint=False"


@dataclasses.dataclass(frozen=True)
class IndexLocation:
    r"""
    Where a model's index is: a local directory (`directory`), or a Hub dataset repo (`repo_id` at `revision`).

    Args:
        directory (`str`, *optional*): An index directory (a folder of the model directory or of its Hub snapshot).
        repo_id (`str`, *optional*): A Hub dataset repo holding an index bundle.
        revision (`str`, *optional*): The revision of `repo_id` (`config.index_revision`).
    """

    directory: str | None = None
    repo_id: str | None = None
    revision: str | None = None

    def __str__(self) -> str:
        if self.directory is not None:
            return self.directory
        return f"dataset repo {self.repo_id!r}" + (f" at revision {self.revision}" if self.revision else "")


def _is_index_dir(path: str | os.PathLike | None) -> bool:
    return path is not None and os.path.isfile(os.path.join(os.fspath(path), MANIFEST_NAME))


def _looks_like_repo_id(name: str) -> bool:
    parts = name.split("/")
    return 1 <= len(parts) <= 2 and all(parts) and not name.startswith((".", "~")) and not os.path.isabs(name)


def _is_hub_repo_id(name: str) -> bool:
    return _looks_like_repo_id(name) and name.count("/") == 1


def model_revision(model: Any) -> str | None:
    """The Hub revision `model` was loaded from (`model.hub_revision`), `None` for a local or in-memory model."""
    return getattr(model, "hub_revision", None)


def resolve_model_dir(
    model_name_or_path: str | os.PathLike | None, index_folder: str | None = None, revision: str | None = None
) -> str | None:
    r"""
    The local directory of a model: the path itself, or the cached snapshot of a Hub repo id.

    Args:
        model_name_or_path: A local directory or a Hub model repo id (`None`: no directory).
        index_folder (`str`, *optional*): The relative index folder the caller wants next to the model. When the Hub is
            reachable and the cached snapshot lacks it, only `<index_folder>/*` of the repo is downloaded.
        revision (`str`, *optional*): Revision of the model repo: the snapshot and any download are of that revision
            (default: the repo's default branch).

    Returns:
        `str` or `None`: the directory, or `None` when there is none (no path, not cached, Hub out of reach).
    """
    if model_name_or_path is None:
        return None
    name = os.fspath(model_name_or_path)
    if os.path.isdir(name):
        return name
    if not _looks_like_repo_id(name):
        return None
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - huggingface_hub is a transformers dependency
        return None
    from ..hub.download import hub_offline

    snapshot = None
    try:
        snapshot = snapshot_download(name, revision=revision, local_files_only=True)
    except Exception as error:  # not cached (LocalEntryNotFoundError), bad id (HFValidationError), ...
        logger.debug("No cached snapshot of %s at revision %s: %s", name, revision, error)
    needs_index = index_folder is not None and not (snapshot and _is_index_dir(os.path.join(snapshot, index_folder)))
    if needs_index and not hub_offline():
        try:
            snapshot = snapshot_download(name, revision=revision, allow_patterns=[f"{index_folder.strip('/')}/*"])
        except Exception as error:
            logger.debug("Could not download %s/%s from the Hub: %s", name, index_folder, error)
    return snapshot


def _refuse_outside(index_repo_id: str, model_name_or_path: Any, why: str) -> None:
    model = os.fspath(model_name_or_path) if model_name_or_path is not None else "(in memory)"
    raise ValueError(
        f"config.index_repo_id={index_repo_id!r} of the model {model!r} {why}; a model config may only name a folder "
        f"inside the model (such as {DEFAULT_INDEX_FOLDER!r}) or a Hub dataset repo ('namespace/name'). To use that "
        f"index, pass it yourself: index={index_repo_id!r} (realm-hf evaluate: --index_dir)."
    )


def _check_config_path(index_repo_id: str, model_name_or_path: Any) -> None:
    """Refuse an `index_repo_id` that is an absolute path or climbs out of the model folder (before any lookup)."""
    parts = index_repo_id.replace("\\", "/").split("/")
    drive = os.path.splitdrive(index_repo_id)[0]
    if index_repo_id.startswith(("/", "\\", "~")) or os.path.isabs(index_repo_id) or drive:
        _refuse_outside(index_repo_id, model_name_or_path, "is an absolute path")
    if ".." in parts:
        _refuse_outside(index_repo_id, model_name_or_path, "leaves the model's folder ('..')")


def _folder_inside(model_dir: str, folder: str, index_repo_id: str | None, model_name_or_path: Any) -> str:
    """`model_dir/folder`, refused when its real path (symbolic links resolved) is outside the model directory."""
    candidate = os.path.join(model_dir, *folder.strip("/").split("/"))
    root, real = os.path.realpath(model_dir), os.path.realpath(candidate)
    if os.path.exists(candidate) and os.path.commonpath([root, real]) != root:
        _refuse_outside(index_repo_id or folder, model_name_or_path, f"resolves to {real}, outside the model's folder")
    return candidate


def resolve_model_index(
    model_name_or_path: str | os.PathLike | None,
    index_repo_id: str | None = None,
    index_revision: str | None = None,
    *,
    model_revision: str | None = None,
) -> IndexLocation:
    r"""
    Where the index of a model is, by the rules of the module docstring. Nothing is loaded.

    Args:
        model_name_or_path (`str` or `os.PathLike`, *optional*): The model's directory or Hub repo id.
        index_repo_id (`str`, *optional*): `config.index_repo_id`.
        index_revision (`str`, *optional*): `config.index_revision`, for a Hub dataset repo.
        model_revision (`str`, *optional*): The revision the model was loaded from ([`model_revision`]).

    Returns:
        [`IndexLocation`]

    Raises:
        `ValueError`: when `index_repo_id` is an absolute path or leaves the model's folder (one line, naming the
        value and the fix). `FileNotFoundError`: naming every place that was looked at.
    """
    index_repo_id = os.fspath(index_repo_id) if index_repo_id else None
    if index_repo_id:
        _check_config_path(index_repo_id, model_name_or_path)
    folders = [DEFAULT_INDEX_FOLDER]
    if index_repo_id and index_repo_id.strip("/") != DEFAULT_INDEX_FOLDER:
        folders.append(index_repo_id)
    # the folder to fetch from a Hub model repo whose cached snapshot lacks it (not a "namespace/name" index repo id)
    hub_folder = folders[-1] if not _is_hub_repo_id(folders[-1]) else DEFAULT_INDEX_FOLDER
    model_dir = resolve_model_dir(model_name_or_path, index_folder=hub_folder, revision=model_revision)
    looked_at: list[str] = []
    if model_name_or_path is not None and model_dir is None:
        looked_at.append(f"the model {os.fspath(model_name_or_path)!r} (neither a local directory nor a cached repo)")
    if model_dir is not None:
        for folder in folders:
            candidate = _folder_inside(model_dir, folder, index_repo_id, model_name_or_path)
            if _is_index_dir(candidate):
                return IndexLocation(directory=candidate)
            looked_at.append(os.path.join(candidate, MANIFEST_NAME))
    if index_repo_id and _is_hub_repo_id(index_repo_id):
        if index_revision is None:
            logger.warning(
                "config.index_repo_id=%r pins no index_revision: loading whatever its default branch holds now. "
                "Pin the index commit the model was published with (`realm-hf publish` records it).", index_repo_id,
            )
        return IndexLocation(repo_id=index_repo_id, revision=index_revision)
    raise FileNotFoundError(_not_found_message(model_name_or_path, looked_at, None))


def _load_directory(
    path: str, expected_dim: int | None, search_params: dict | None, trust_index_file: bool
) -> RealmIndex:
    from ..index import RealmIndex

    return RealmIndex.from_pretrained(
        path, expected_dim=expected_dim, search_params=search_params, trust_index_file=trust_index_file
    )


def _check_dim(index: Any, expected_dim: int | None) -> None:
    dim = getattr(index, "dim", None)
    if expected_dim is not None and dim is not None and dim != expected_dim:
        raise ValueError(
            f"The index has {dim}-dimensional embeddings but the model's retriever embeds into {expected_dim} "
            "dimensions; the index was built by another retriever. Rebuild it with the model's document tower "
            "(`realm-hf build-index --model <model dir> ...`)."
        )


def index_source(index: Any, model_name_or_path: str | os.PathLike | None = None) -> str:
    """Where an index came from, for messages: the `index=` given (a directory or an instance), else the model's."""
    if isinstance(index, (str, os.PathLike)):
        return f"The index {os.fspath(index)!r}"
    if index is not None:
        return "The index passed as `index=`"
    return f"The index of the model {os.fspath(model_name_or_path)!r}" if model_name_or_path else "The model's index"


def check_index_fingerprint(
    index: Any, expected_fingerprint: str | Sequence[str] | None, source: str, opt_out: str
) -> None:
    r"""
    Refuse an index built by other document-tower weights than the retriever that will search it.

    An index's embeddings are only comparable with the query embeddings of the retriever whose document tower built
    them; an index of another checkpoint (or of earlier weights of the same run) loads and searches without error but
    retrieves the wrong blocks. Dims alone do not catch it: the manifest's doc-tower fingerprint does.

    Args:
        index ([`RealmIndex`]): The index (its `manifest.fingerprint` is read; an index without one passes with a
            warning, e.g. one built from a plain embed function).
        expected_fingerprint (`str` or `Sequence[str]`, *optional*): [`fingerprint_module`] of the retriever's
            document tower, or the accepted fingerprints, that one first (an Open-QA model also accepts the
            `config.index_fingerprint` recorded at fine-tuning); `None` checks nothing.
        source (`str`): Where the index came from, for the message.
        opt_out (`str`): The argument that skips this check, named in the message (e.g. `"check_fingerprint=False"`).

    Raises:
        `ValueError`: naming both fingerprints, how to rebuild the index and how to opt out.
    """
    if expected_fingerprint is None:
        return
    accepted = [expected_fingerprint] if isinstance(expected_fingerprint, str) else list(expected_fingerprint)
    manifest = getattr(index, "manifest", None)
    if manifest is None:  # an index-like object of the caller's (search + get_blocks): nothing to read
        logger.debug("%s has no manifest; its document-tower fingerprint is not checked", source)
        return
    found = manifest.fingerprint
    if found is None:
        logger.warning("%s records no document-tower fingerprint; cannot check that the retriever built it", source)
        return
    if found not in accepted:
        raise ValueError(
            f"{source} was built by document-tower weights {found[:12]}... (step {manifest.step}), "
            f"not by the retriever's document tower ({accepted[0][:12]}...): its embeddings do not match the "
            "retriever's queries, so retrieval would be wrong. Use the index saved with the retriever, or rebuild "
            "it with the retriever: `realm-hf build-index --corpus <corpus> --model <retriever dir> --output <dir>`. "
            f"To use this index anyway, pass {opt_out}."
        )


def _config_get(config: Any, name: str) -> Any:
    return getattr(config, name, None) if config is not None else None


def load_index_for_model(
    model_name_or_path: str | os.PathLike | None,
    config: Any = None,
    index: Any = None,
    *,
    expected_dim: int | None = None,
    search_params: dict | None = None,
    model_revision: str | None = None,
    trust_index_file: bool = False,
) -> RealmIndex:
    r"""
    The corpus index of a model: `index` when given, else the one [`resolve_model_index`] finds.

    Args:
        model_name_or_path (`str` or `os.PathLike`, *optional*):
            The model's directory or Hub repo id (`model.name_or_path`); `None` for a model built in memory.
        config (*optional*):
            The model config; its `index_repo_id` and `index_revision` (a `RealmForOpenQAConfig`) are read when present.
        index (`RealmIndex`, `str` or `os.PathLike`, *optional*):
            An explicit index, the path of an index directory, or a Hub dataset repo id. Wins over everything else.
        expected_dim (`int`, *optional*):
            The retriever's embedding size; an index of another dimension is refused with a message saying how to
            rebuild it. Defaults to `config.retriever_config.embedding_size` when the config has one.
        search_params (`dict`, *optional*):
            faiss search parameters (`nprobe`, `efSearch`) overriding the stored ones of an index loaded from disk.
        model_revision (`str`, *optional*):
            The Hub revision the model was loaded from ([`model_revision`]): the model repo's index folder is read at
            that revision.
        trust_index_file (`bool`, defaults to `False`):
            Read the faiss file with faiss's native reader even when this user's realm_hf did not write it (a Hub
            repo, a copied or cloned folder) instead of rebuilding the search structure from the embeddings (see
            [`RealmIndex.from_pretrained`]).

    Returns:
        [`RealmIndex`]

    Raises:
        `FileNotFoundError`: naming every place that was looked at, when no index is found.
        `ValueError`: when `config.index_repo_id` points outside the model's folder, or the index's dimension does
        not match the retriever.
    """
    if expected_dim is None:
        retriever_config = _config_get(config, "retriever_config")
        expected_dim = getattr(retriever_config, "embedding_size", None) if retriever_config is not None else None

    if index is not None:
        if isinstance(index, (str, os.PathLike)):
            path = os.fspath(index)
            if _is_index_dir(path):
                return _load_directory(path, expected_dim, search_params, trust_index_file)
            if not os.path.exists(path) and _is_hub_repo_id(path):
                return _load_from_hub(
                    IndexLocation(repo_id=path), expected_dim, search_params, trust_index_file, None, []
                )
            raise FileNotFoundError(
                f"`index={path!r}` is not an index directory (no {MANIFEST_NAME} in it). Pass a directory written "
                "by RealmIndex.save_pretrained (or `realm-hf build-index --output DIR`), a Hub dataset repo id, or "
                "a RealmIndex."
            )
        if not hasattr(index, "search") or not hasattr(index, "get_blocks"):
            raise TypeError(
                f"`index` must be a RealmIndex or the path of an index directory, got {type(index).__name__}."
            )
        _check_dim(index, expected_dim)
        return index

    location = resolve_model_index(
        model_name_or_path,
        _config_get(config, "index_repo_id"),
        _config_get(config, "index_revision"),
        model_revision=model_revision,
    )
    if location.directory is not None:
        logger.info("Using the index at %s", location.directory)
        return _load_directory(location.directory, expected_dim, search_params, trust_index_file)
    return _load_from_hub(location, expected_dim, search_params, trust_index_file, model_name_or_path, [])


def _load_from_hub(
    location: IndexLocation,
    expected_dim: int | None,
    search_params: dict | None,
    trust_index_file: bool,
    model_name_or_path: Any,
    looked_at: list[str],
) -> RealmIndex:
    """`RealmIndex.from_pretrained(repo_id, revision=...)`, a missing repo or file reported as `FileNotFoundError`."""
    from ..index import RealmIndex

    not_found: tuple[type[BaseException], ...] = (OSError,)
    try:
        from huggingface_hub.errors import EntryNotFoundError, HFValidationError

        not_found += (EntryNotFoundError, HFValidationError)
    except ImportError:  # pragma: no cover
        pass
    try:
        return RealmIndex.from_pretrained(
            location.repo_id, expected_dim=expected_dim, search_params=search_params, revision=location.revision,
            trust_index_file=trust_index_file,
        )
    except not_found as error:
        looked_at.append(f"the index {location}")
        raise FileNotFoundError(_not_found_message(model_name_or_path, looked_at, str(error))) from error


def _not_found_message(model_name_or_path: Any, looked_at: list[str], cause: str | None) -> str:
    where = "; ".join(looked_at) if looked_at else "nothing (the model has no directory and no `index_repo_id`)"
    message = (
        f"No corpus index found for the model {os.fspath(model_name_or_path) if model_name_or_path else '(in memory)'}."
        f" Looked at: {where}."
    )
    if cause:
        message += f" ({cause})"
    return (
        message + " Pass `index=` (a RealmIndex or an index directory), save the index as `<model dir>/index`, or set "
        "`config.index_repo_id` to a folder inside the model directory or a Hub dataset repo."
    )
