"""How a model finds its corpus index.

A `RealmForOpenQA` directory may carry its index in `<model_dir>/index/` (a [`RealmIndex.save_pretrained`] directory);
its config names the default index with `index_repo_id` (a path relative to the model directory such as `"index"`,
an absolute path, or a Hub dataset repo id) and `index_revision`. [`load_index_for_model`] resolves, in order:

1. an explicit `index` (a `RealmIndex`, or a path to an index directory);
2. `<model_dir>/index` when it holds a `manifest.json`;
3. `config.index_repo_id` resolved relative to the model directory when it is a relative path that exists there,
   or as is when it is an absolute path;
4. `RealmIndex.from_pretrained(config.index_repo_id, revision=config.index_revision)` when `index_repo_id` has the
   form `namespace/name` of a Hub dataset repo, for the Hub helper of `realm_hf.hub` (the revision is passed only
   when that function takes one). A bare name such as `"index"` is only ever a folder of the model directory: it is
   never looked up on the Hub or in the working directory.

`model_name_or_path` is the model's local directory or, for a model loaded from the Hub, its repo id: the repo's
snapshot in the local Hub cache is used as the model directory (`snapshot_download(..., local_files_only=True)`);
when the Hub is reachable (`HF_HUB_OFFLINE` unset) and the index folder of the model repo is not cached yet, only
that folder (`<index_repo_id>/*`, default `index/*`) is downloaded.
"""

from __future__ import annotations

import inspect
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..index import RealmIndex

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_INDEX_FOLDER", "FINGERPRINT_OPT_OUT", "check_index_fingerprint", "index_source", "load_index_for_model",
    "resolve_model_dir",
]

DEFAULT_INDEX_FOLDER = "index"
MANIFEST_NAME = "manifest.json"
# the argument that pairs a model with an index of other weights anyway (the name realm_hf.evaluation uses)
FINGERPRINT_OPT_OUT = "check_fingerprint=False"


def _is_index_dir(path: str | os.PathLike | None) -> bool:
    return path is not None and os.path.isfile(os.path.join(os.fspath(path), MANIFEST_NAME))


def _looks_like_repo_id(name: str) -> bool:
    parts = name.split("/")
    return 1 <= len(parts) <= 2 and all(parts) and not name.startswith((".", "~")) and not os.path.isabs(name)


def resolve_model_dir(
    model_name_or_path: str | os.PathLike | None, index_folder: str | None = None, revision: str | None = None
) -> str | None:
    r"""
    The local directory of a model: the path itself, or the cached snapshot of a Hub repo id.

    Args:
        model_name_or_path: A local directory or a Hub model repo id (`None`: no directory).
        index_folder (`str`, *optional*): The relative index folder the caller wants next to the model. When the Hub is
            reachable and the cached snapshot lacks it, only `<index_folder>/*` of the repo is downloaded.
        revision (`str`, *optional*): Revision of the model repo.

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
        logger.debug("No cached snapshot of %s: %s", name, error)
    needs_index = index_folder is not None and not (snapshot and _is_index_dir(os.path.join(snapshot, index_folder)))
    if needs_index and not hub_offline():
        try:
            snapshot = snapshot_download(name, revision=revision, allow_patterns=[f"{index_folder.strip('/')}/*"])
        except Exception as error:
            logger.debug("Could not download %s/%s from the Hub: %s", name, index_folder, error)
    return snapshot


def _load_directory(path: str, expected_dim: int | None, search_params: dict | None) -> RealmIndex:
    from ..index import RealmIndex

    return RealmIndex.from_pretrained(path, expected_dim=expected_dim, search_params=search_params)


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
) -> RealmIndex:
    r"""
    The corpus index of a model (see the module docstring for the lookup order).

    Args:
        model_name_or_path (`str` or `os.PathLike`, *optional*):
            The model's directory or Hub repo id (`model.name_or_path`); `None` for a model built in memory.
        config (*optional*):
            The model config; its `index_repo_id` and `index_revision` (a `RealmForOpenQAConfig`) are read when present.
        index (`RealmIndex`, `str` or `os.PathLike`, *optional*):
            An explicit index, or the path of an index directory. Wins over everything else.
        expected_dim (`int`, *optional*):
            The retriever's embedding size; an index of another dimension is refused with a message saying how to
            rebuild it. Defaults to `config.retriever_config.embedding_size` when the config has one.
        search_params (`dict`, *optional*):
            faiss search parameters (`nprobe`, `efSearch`) overriding the stored ones of an index loaded from disk.

    Returns:
        [`RealmIndex`]

    Raises:
        `FileNotFoundError`: naming every place that was looked at, when no index is found.
        `ValueError`: when the index's dimension does not match the retriever.
    """
    if expected_dim is None:
        retriever_config = _config_get(config, "retriever_config")
        expected_dim = getattr(retriever_config, "embedding_size", None) if retriever_config is not None else None

    # 1. explicit index
    if index is not None:
        if isinstance(index, (str, os.PathLike)):
            path = os.fspath(index)
            if not _is_index_dir(path):
                raise FileNotFoundError(
                    f"`index={path!r}` is not an index directory (no {MANIFEST_NAME} in it). Pass a directory written "
                    "by RealmIndex.save_pretrained (or `realm-hf build-index --output DIR`), or a RealmIndex."
                )
            return _load_directory(path, expected_dim, search_params)
        if not hasattr(index, "search") or not hasattr(index, "get_blocks"):
            raise TypeError(
                f"`index` must be a RealmIndex or the path of an index directory, got {type(index).__name__}."
            )
        _check_dim(index, expected_dim)
        return index

    index_repo_id = _config_get(config, "index_repo_id")
    index_revision = _config_get(config, "index_revision")
    # folders to try inside the model directory: "index", then index_repo_id when it is a relative path
    folders = [DEFAULT_INDEX_FOLDER]
    if index_repo_id and not os.path.isabs(index_repo_id) and index_repo_id.strip("/") != DEFAULT_INDEX_FOLDER:
        folders.append(index_repo_id)
    looked_at: list[str] = []

    # the folder to fetch from a Hub model repo whose cached snapshot lacks it (not a "namespace/name" index repo id)
    hub_folder = folders[-1] if not _is_hub_repo_id(folders[-1]) else DEFAULT_INDEX_FOLDER
    model_dir = resolve_model_dir(model_name_or_path, index_folder=hub_folder)
    if model_name_or_path is not None and model_dir is None:
        looked_at.append(f"the model {os.fspath(model_name_or_path)!r} (neither a local directory nor a cached repo)")

    # 2. <model_dir>/index, 3. index_repo_id relative to the model directory
    if model_dir is not None:
        for folder in folders:
            candidate = os.path.join(model_dir, folder)
            if _is_index_dir(candidate):
                logger.info("Using the index at %s", candidate)
                return _load_directory(candidate, expected_dim, search_params)
            looked_at.append(os.path.join(candidate, MANIFEST_NAME))

    # 3b. an absolute path
    if index_repo_id and os.path.isabs(index_repo_id):
        if _is_index_dir(index_repo_id):
            return _load_directory(index_repo_id, expected_dim, search_params)
        looked_at.append(os.path.join(index_repo_id, MANIFEST_NAME))
    # 4. a Hub dataset repo "namespace/name" (a bare name such as "index" is only ever a folder of the model)
    elif index_repo_id and _is_hub_repo_id(index_repo_id):
        return _load_from_hub(index_repo_id, index_revision, expected_dim, search_params, model_name_or_path, looked_at)
    raise FileNotFoundError(_not_found_message(model_name_or_path, looked_at, None))


def _is_hub_repo_id(name: str) -> bool:
    parts = name.split("/")
    return len(parts) == 2 and all(parts) and not name.startswith((".", "~"))


def _load_from_hub(
    repo_id: str,
    revision: str | None,
    expected_dim: int | None,
    search_params: dict | None,
    model_name_or_path: Any,
    looked_at: list[str],
) -> RealmIndex:
    """`RealmIndex.from_pretrained(repo_id, revision=...)`: repo ids are resolved where `realm_hf.hub` extends it."""
    from ..index import RealmIndex

    kwargs: dict[str, Any] = {"expected_dim": expected_dim}
    parameters = inspect.signature(RealmIndex.from_pretrained).parameters
    if revision is not None:
        if "revision" in parameters:
            kwargs["revision"] = revision
        else:
            logger.warning(
                "RealmIndex.from_pretrained takes no `revision`; loading %s without pinning index_revision=%s",
                repo_id,
                revision,
            )
    if search_params is not None:
        kwargs["search_params"] = search_params
    not_found: tuple[type[BaseException], ...] = (OSError,)
    try:
        from huggingface_hub.errors import EntryNotFoundError, HFValidationError

        not_found += (EntryNotFoundError, HFValidationError)
    except ImportError:  # pragma: no cover
        pass
    try:
        return RealmIndex.from_pretrained(repo_id, **kwargs)
    except not_found as error:
        looked_at.append(f"the index repo {repo_id!r}" + (f" at revision {revision}" if revision else ""))
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
        "`config.index_repo_id` to an index directory or a Hub dataset repo."
    )
