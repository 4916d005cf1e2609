"""Hub publishing and loading: index bundles as dataset repos, model/index pairing, model cards from templates.

Models need nothing special: they are `PreTrainedModel`s, so `save_pretrained` / `push_to_hub` / `from_pretrained`
work as for any transformers model, and `AutoModel.from_pretrained(dir_or_repo)` resolves our model types once
`realm_hf` is imported (see `realm_hf/__init__.py`). [`add_remote_code`] is the opt-in alternative for users who
load with `trust_remote_code=True` instead of importing `realm_hf` (the package must still be installed).

The corpus index is data, so it goes to a *dataset* repo (one `create_commit`)::

    README.md                           dataset card rendered from model_cards/index.md.j2 (`configs:` -> blocks)
    manifest.json                       IndexManifest: dims, index type, fingerprint of the doc tower, step, ...
    blocks/blocks-00000-of-0000N.parquet  the blocks, row order = embedding order (Parquet, sharded)
    embeddings.npy                      [N, D] float32/float16
    index.faiss                         faiss index (absent for index_type="torch-exact")

A local index directory (`RealmIndex.save_pretrained`) has the same files except that `blocks/` is a
`datasets.save_to_disk` folder (Arrow, memory-mapped in place); [`realm_hf.index.mips.load_index_blocks`] reads both.
Parquet from the Hub is converted once to a memory-mapped Arrow cache by `datasets` (under `HF_DATASETS_CACHE`).

Which doc tower built an index: the manifest's `fingerprint`. A model accepts an index whose fingerprint is
`config.index_fingerprint` when the config has one (an Open-QA model fine-tuned from the checkpoint whose doc tower
built the index; see [`record_index_pairing`]), otherwise the fingerprint of its own document tower.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import logging
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .data.openqa import split_slice
from .index.backends import FAISS_FILE, TORCH_EXACT
from .index.manifest import MANIFEST_NAME, IndexManifest, fingerprint_module


logger = logging.getLogger(__name__)

__all__ = [
    "CARD_KINDS",
    "PublishResult",
    "TEMPLATES_DIR",
    "add_remote_code",
    "check_index_matches_model",
    "collect_training_facts",
    "expected_index_fingerprint",
    "index_bundle_patterns",
    "is_repo_id",
    "load_eval_results",
    "publish",
    "push_index_to_hub",
    "record_index_pairing",
    "render_model_card",
    "resolve_index_dir",
    "write_index_bundle",
]

TEMPLATES_DIR = Path(__file__).resolve().parent / "model_cards"
"""Jinja templates of the cards (shipped with the package: `package_data` `model_cards/*.j2`)."""

CARD_KINDS = {"pretrained": "pretrained.md.j2", "open_qa": "open_qa.md.j2", "index": "index.md.j2"}

BLOCKS_DIR = "blocks"
EMBEDDINGS_FILE = "embeddings.npy"
CARD_FILE = "README.md"
BLOCK_SHARD_PATTERN = "blocks/*.parquet"
TRAINING_ARGS_FILES = ("training_args.json", "args.json")
HISTORY_FILE = "history.json"
REMOTE_CODE_FILE = "realm_hf_remote.py"

DATASET_NAMES = {
    "nq": "Natural Questions (open)",
    "nq_open": "Natural Questions (open)",
    "natural_questions": "Natural Questions (open)",
    "google-research-datasets/nq_open": "Natural Questions (open)",
    "wq": "WebQuestions",
    "web_questions": "WebQuestions",
    "webquestions": "WebQuestions",
    "stanford/web_questions": "WebQuestions",
    "ct": "CuratedTrec",
    "curated_trec": "CuratedTrec",
    "curatedtrec": "CuratedTrec",
}

REALM_BIBTEX = """@inproceedings{guu2020realm,
  title     = {{REALM}: Retrieval-Augmented Language Model Pre-Training},
  author    = {Guu, Kelvin and Lee, Kenton and Tung, Zora and Pasupat, Panupong and Chang, Ming-Wei},
  booktitle = {Proceedings of the 37th International Conference on Machine Learning},
  series    = {Proceedings of Machine Learning Research},
  volume    = {119},
  pages     = {3929--3938},
  year      = {2020},
  eprint    = {2002.08909},
  archivePrefix = {arXiv}
}"""


def _rebuild_command(model: str = "<model dir or repo>") -> str:
    return f"`realm-hf build-index --corpus <corpus> --model {model} --output <index dir>`"


# ============================================================================================== Hub resolution
def is_repo_id(name: str | os.PathLike) -> bool:
    """Whether `name` can be a Hub repo id (`name` or `namespace/name`) rather than only a local path."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    name = os.fspath(name)
    if os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1 or os.sep in name.replace("/", ""):
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def index_bundle_patterns(manifest: IndexManifest) -> list[str]:
    r"""
    The files of an index bundle that `manifest.index_type` needs (`allow_patterns` of `snapshot_download`).

    `blocks/*` covers both the Parquet shards of a Hub bundle and a `save_to_disk` folder; the faiss file is asked
    for only when the index type is a faiss one, so nothing of other index types is downloaded.
    """
    patterns = [MANIFEST_NAME, EMBEDDINGS_FILE, f"{BLOCKS_DIR}/*"]
    if manifest.index_type != TORCH_EXACT:
        patterns.append(FAISS_FILE)
    return patterns


def _where(repo_id: str, revision: str | None) -> str:
    return f"dataset repo '{repo_id}'" + (f" (revision '{revision}')" if revision else "")


def resolve_index_dir(
    repo_id: str,
    revision: str | None = None,
    *,
    token: str | bool | None = None,
    cache_dir: str | os.PathLike | None = None,
    local_files_only: bool = False,
    force_download: bool = False,
) -> str:
    r"""
    Download (or find in the cache) the files of an index bundle and return the local snapshot directory.

    The manifest comes first (`hf_hub_download`), then only what its index type needs (`snapshot_download` with
    `allow_patterns`, pinned to the manifest's commit so the files belong together). With `HF_HUB_OFFLINE=1` or
    `local_files_only=True` everything is read from the cache (`HF_HUB_CACHE`).

    Args:
        repo_id (`str`): The dataset repo, e.g. `"org/realm-cc-news-index"`.
        revision (`str`, *optional*): Branch, tag or commit (a commit hash pins the index).
        token, cache_dir, local_files_only, force_download: as in `huggingface_hub.snapshot_download`.

    Returns:
        `str`: the snapshot directory (same layout as a local index directory).

    Raises:
        `FileNotFoundError`: naming the repo and the missing file (manifest, embeddings, faiss file or blocks).
    """
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = _where(repo_id, revision)
    offline_hint = (
        f"It is not in the local Hugging Face cache and the Hub cannot be reached (offline or HF_HUB_OFFLINE=1); "
        f"fetch it once with network access: `realm-hf download {repo_id} --index"
        + (f" --revision {revision}" if revision else "")
        + "`."
    )
    kwargs = {"repo_type": "dataset", "token": token, "cache_dir": cache_dir, "local_files_only": local_files_only}
    try:
        manifest_path = hf_hub_download(
            repo_id, MANIFEST_NAME, revision=revision, force_download=force_download, **kwargs
        )
    except LocalEntryNotFoundError as error:
        raise FileNotFoundError(f"{MANIFEST_NAME} of the index {where}: {offline_hint}") from error
    except RepositoryNotFoundError as error:
        raise FileNotFoundError(
            f"No index {where} on the Hub (and no local directory of that name): the repo does not exist or you "
            "have no access to it (pass token=... / `hf auth login` for a private repo)."
        ) from error
    except RevisionNotFoundError as error:
        raise FileNotFoundError(f"The index {where} has no such revision.") from error
    except EntryNotFoundError as error:
        raise FileNotFoundError(
            f"The {where} has no {MANIFEST_NAME}: it is not a RealmIndex bundle. Publish one with "
            "`RealmIndex.push_to_hub(...)` or `realm-hf publish`."
        ) from error
    manifest = IndexManifest.from_json_file(manifest_path)
    snapshot = Path(manifest_path).parent
    # pin the rest of the bundle to the commit the manifest came from
    commit = snapshot.name if snapshot.parent.name == "snapshots" else revision
    try:
        directory = snapshot_download(
            repo_id, revision=commit, allow_patterns=index_bundle_patterns(manifest), force_download=force_download,
            **kwargs,
        )
    except LocalEntryNotFoundError as error:  # includes an incomplete cached snapshot
        raise FileNotFoundError(f"Files of the index {where} are missing: {error}. {offline_hint}") from error
    check_index_bundle(directory, manifest, where)
    return os.fspath(directory)


def check_index_bundle(directory: str | os.PathLike, manifest: IndexManifest, where: str) -> None:
    """Raise `FileNotFoundError` naming `where` and the first file the index type needs that `directory` lacks."""
    directory = os.fspath(directory)
    needed = [EMBEDDINGS_FILE] + ([FAISS_FILE] if manifest.index_type != TORCH_EXACT else [])
    for name in needed:
        if not os.path.isfile(os.path.join(directory, name)):
            raise FileNotFoundError(
                f"The index {where} has no {name} (index_type={manifest.index_type!r} needs it; looked in "
                f"{directory}). The bundle is incomplete: re-publish it with `RealmIndex.push_to_hub` or "
                "`realm-hf publish`, or download it again with network access."
            )
    blocks = os.path.join(directory, BLOCKS_DIR)
    has_arrow = os.path.isfile(os.path.join(blocks, "state.json"))
    if not has_arrow and not glob.glob(os.path.join(blocks, "*.parquet")):
        raise FileNotFoundError(
            f"The index {where} has no blocks ({BLOCK_SHARD_PATTERN}; looked in {directory}). The bundle is "
            "incomplete: re-publish it with `RealmIndex.push_to_hub` or `realm-hf publish`."
        )


# ==================================================================================================== upload
def _size_category(num: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                         (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M")):
        if num < bound:
            return label
    return "100M<n<1B"


def write_index_bundle(index: Any, directory: str | os.PathLike, max_shard_size: str | int = "500MB") -> list[str]:
    r"""
    Write the Hub form of an index into `directory`: Parquet block shards, embeddings, faiss file, manifest.

    Args:
        index ([`RealmIndex`]): The index.
        directory (`str`): An existing, empty directory.
        max_shard_size (`str` or `int`, defaults to `"500MB"`): Upper bound of a Parquet shard (before compression).

    Returns:
        `list[str]`: the written paths, relative to `directory`, POSIX separators.
    """
    from datasets.utils.py_utils import convert_file_size_to_int

    directory = os.fspath(directory)
    blocks = index.blocks
    max_bytes = convert_file_size_to_int(max_shard_size)
    num_shards = max(1, min(len(blocks), math.ceil(blocks.data.nbytes / max(max_bytes, 1)))) if len(blocks) else 1
    os.makedirs(os.path.join(directory, BLOCKS_DIR), exist_ok=True)
    written = []
    for shard in range(num_shards):
        rel = f"{BLOCKS_DIR}/blocks-{shard:05d}-of-{num_shards:05d}.parquet"
        part = blocks.shard(num_shards=num_shards, index=shard, contiguous=True) if num_shards > 1 else blocks
        part.to_parquet(os.path.join(directory, rel))
        written.append(rel)
    np.save(os.path.join(directory, EMBEDDINGS_FILE), np.asarray(index.embeddings), allow_pickle=False)
    written.append(EMBEDDINGS_FILE)
    index.backend.save(directory)
    if os.path.isfile(os.path.join(directory, FAISS_FILE)):
        written.append(FAISS_FILE)
    manifest = dataclasses.replace(index.manifest, search_params=dict(index.backend.search_params))
    manifest.to_json_file(os.path.join(directory, MANIFEST_NAME))
    written.append(MANIFEST_NAME)
    return written


def _stale_paths(api: Any, repo_id: str, repo_type: str, revision: str | None, keep: set[str],
                 prefixes: Sequence[str], files: Sequence[str]) -> list[str]:
    """Files of an earlier upload that the new one would leave behind (old block shards, a faiss file of another
    index type). Best effort: a repo that cannot be listed (new, offline) has nothing stale."""
    try:
        existing = api.list_repo_files(repo_id, repo_type=repo_type, revision=revision)
    except Exception as error:  # noqa: BLE001 - a new repo, a missing branch or no network: nothing to delete
        logger.debug("Could not list %s (%s); not deleting stale files", repo_id, error)
        return []
    return sorted(
        path for path in existing
        if path not in keep and (path in files or any(path.startswith(prefix) for prefix in prefixes))
    )


def _commit(
    api: Any, repo_id: str, repo_type: str, staging: str, paths: Iterable[str], *, revision: str | None,
    private: bool | None, commit_message: str, commit_description: str | None, create_pr: bool | None,
    stale: Sequence[str] = (),
) -> Any:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
    if revision is not None and revision != "main":
        api.create_branch(repo_id, branch=revision, repo_type=repo_type, exist_ok=True)
    operations = [CommitOperationDelete(path_in_repo=path) for path in stale]
    operations += [
        CommitOperationAdd(path_in_repo=path, path_or_fileobj=os.path.join(staging, *path.split("/")))
        for path in sorted(paths)
    ]
    return api.create_commit(
        repo_id, operations, commit_message=commit_message, commit_description=commit_description,
        repo_type=repo_type, revision=revision, create_pr=create_pr,
    )


def push_index_to_hub(
    index: Any,
    repo_id: str,
    revision: str | None = None,
    private: bool | None = None,
    commit_message: str | None = None,
    token: str | bool | None = None,
    *,
    commit_description: str | None = None,
    create_pr: bool | None = None,
    card_facts: Mapping[str, Any] | None = None,
    max_shard_size: str | int = "500MB",
) -> Any:
    r"""
    Publish an index as a Hub *dataset* repo in one commit (see the module docstring for the files).

    Args:
        index ([`RealmIndex`]): The index to publish.
        repo_id (`str`): The dataset repo, created if missing.
        revision (`str`, *optional*): Branch to commit to (created from main if missing).
        private (`bool`, *optional*): Visibility of a newly created repo.
        commit_message (`str`, *optional*): Defaults to a summary of the manifest.
        token (`str`, *optional*): Hub token (default: the logged-in one).
        commit_description, create_pr: as in `HfApi.create_commit`.
        card_facts (`dict`, *optional*): Extra facts for the dataset card (`model_repo_id`, `corpus`, `license`,
            `corpus_description`, ...), see `model_cards/index.md.j2`.
        max_shard_size (`str` or `int`, defaults to `"500MB"`): Size bound of one Parquet shard of blocks.

    Returns:
        `huggingface_hub.CommitInfo`: `.oid` is the commit to pin in `config.index_revision`.
    """
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    manifest = index.manifest
    message = commit_message or (
        f"Upload REALM index: {manifest.num_blocks} blocks, dim {manifest.dim}, {manifest.index_type}"
        + (f", doc tower step {manifest.step}" if manifest.step is not None else "")
    )
    with tempfile.TemporaryDirectory(prefix="realm-index-bundle-") as staging:
        paths = write_index_bundle(index, staging, max_shard_size=max_shard_size)
        facts = {"repo_id": repo_id, **dict(card_facts or {})}
        card = render_model_card("index", manifest=manifest, files=paths, **facts)
        card.save(os.path.join(staging, CARD_FILE))
        paths.append(CARD_FILE)
        stale = _stale_paths(
            api, repo_id, "dataset", revision, set(paths), prefixes=(f"{BLOCKS_DIR}/",), files=(FAISS_FILE,)
        )
        info = _commit(
            api, repo_id, "dataset", staging, paths, revision=revision, private=private, commit_message=message,
            commit_description=commit_description, create_pr=create_pr, stale=stale,
        )
    logger.info("Pushed %r to dataset repo %s (%s)", index, repo_id, getattr(info, "oid", None))
    return info


# ============================================================================================ model <-> index
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
            f"document tower: {_rebuild_command(model_name)}."
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
            f"rebuild it: {_rebuild_command()}."
        )
    current = fingerprint_module(retriever.document_embedder)
    if manifest.fingerprint is not None and manifest.fingerprint != current and not force:
        raise ValueError(
            f"The index was built by doc tower {manifest.fingerprint[:12]}... (step {manifest.step}), not by this "
            f"model's document tower ({current[:12]}...); pass force=True if it was built by the checkpoint this "
            f"model comes from, or rebuild it: {_rebuild_command()}."
        )
    config = _pairing_config(model)
    config.index_fingerprint = manifest.fingerprint
    if repo_id is not None:
        config.index_repo_id = repo_id
        config.index_revision = revision


# ============================================================================================ remote code shim
_REMOTE_CODE = '''"""Entry point for `AutoModel.from_pretrained(<this repo>, trust_remote_code=True)`.

The model code is the `realm_hf` package (`pip install realm_hf`); this file only subclasses its classes so that
transformers can find them without `import realm_hf` (and so that saving keeps pointing here).
"""

import realm_hf


class {config}(realm_hf.{config}):
    pass


class {model}(realm_hf.{model}):
    config_class = {config}
'''


def add_remote_code(model_dir: str | os.PathLike) -> str:
    r"""
    Opt-in `trust_remote_code` support for a saved REALM model directory (before uploading it).

    Writes `realm_hf_remote.py` (thin subclasses of the `realm_hf` classes) and an `auto_map` in `config.json`, so
    `AutoModel.from_pretrained(repo, trust_remote_code=True)` works **without** `import realm_hf`. Requirements:
    the loading machine has `realm_hf` installed (transformers checks the imports of the file and names the missing
    package), and the user trusts the repo. Without `trust_remote_code`, `import realm_hf` then `AutoModel` keeps
    working as before. The code is not copied into the repo: transformers' `register_for_auto_class` would copy
    single module files, and REALM's models span several modules of the package.

    Args:
        model_dir (`str`): A directory with the `config.json` of a REALM model.

    Returns:
        `str`: the path of the written module file.
    """
    from . import RealmForOpenQA, RealmKnowledgeEncoder, RealmReader, RealmRetriever

    model_dir = os.fspath(model_dir)
    config_path = os.path.join(model_dir, "config.json")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    classes = {
        cls.config_class.model_type: cls for cls in (RealmForOpenQA, RealmKnowledgeEncoder, RealmReader, RealmRetriever)
    }
    model_cls = classes.get(config.get("model_type"))
    if model_cls is None:
        raise ValueError(
            f"{config_path} has model_type={config.get('model_type')!r}, not a realm_hf model type {sorted(classes)}."
        )
    module = REMOTE_CODE_FILE[: -len(".py")]
    config_name, model_name = model_cls.config_class.__name__, model_cls.__name__
    path = os.path.join(model_dir, REMOTE_CODE_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write(_REMOTE_CODE.format(config=config_name, model=model_name))
    config["auto_map"] = {"AutoConfig": f"{module}.{config_name}", "AutoModel": f"{module}.{model_name}"}
    with open(config_path, "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    return path


# ================================================================================================ model cards
def _round(value: Any) -> Any:
    return round(float(value), 2) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def load_eval_results(source: str | os.PathLike | Mapping | Sequence) -> list[dict[str, Any]]:
    r"""
    Read evaluation results for a model card.

    The evaluation output JSON (one object, a list of them, or `{"results": [...]}`), one object per dataset/split::

        {"dataset": "nq_open", "dataset_name": "Natural Questions (open)", "split": "test",
         "exact_match": 40.4, "recall@5": 61.2, "count": 3610}

    `dataset` (a Hub dataset id or a short name) is required, and at least one metric: `exact_match` and/or
    `recall@K` (percentages in [0, 100], as [`realm_hf.metrics`] returns them). Optional: `dataset_name`, `split`,
    `count`, `task` (model-index task type, default `"question-answering"`), `top_k`, `index_repo_id`, `model`.
    Without `dataset`, the name of `qa_file` (as `realm_hf.evaluation.run_evaluation` writes it) stands in.

    Returns:
        `list[dict]`: one entry per object: `dataset`, `dataset_name`, `split`, `count`, `task`, `metrics`
        (`{"exact_match": ..., "recall@5": ...}`, values rounded to 2 decimals).

    Raises:
        `ValueError`: naming the file and what is missing.
    """
    origin = "evaluation results"
    if isinstance(source, (str, os.PathLike)):
        origin = os.fspath(source)
        with open(origin, encoding="utf-8") as f:
            source = json.load(f)
    if isinstance(source, Mapping) and "results" in source and "dataset" not in source:
        source = source["results"]
    entries = [source] if isinstance(source, Mapping) else list(source)
    results = []
    for position, entry in enumerate(entries):
        if isinstance(entry, Mapping) and not entry.get("dataset") and isinstance(entry.get("qa_file"), str):
            # the metrics file of realm_hf.evaluation.run_evaluation names the QA file, not the dataset
            # a row slice of the file (nq-dev.jsonl[:1000], see realm_hf.data.openqa.split_slice) is the split
            path, rows = split_slice(entry["qa_file"].split(",")[0])
            split = f"rows {rows.start or 0}-{rows.stop - 1}" if rows.stop is not None else (
                f"rows {rows.start}-" if rows.start else None)
            entry = {"split": split, **entry, "dataset": os.path.basename(path).split(".")[0]}
        if not isinstance(entry, Mapping) or not entry.get("dataset"):
            raise ValueError(
                f"{origin}: result {position} has no 'dataset'; each result must look like "
                '{"dataset": "nq_open", "split": "test", "exact_match": 40.4, "recall@5": 61.2, "count": 3610}.'
            )
        metrics = {}
        if entry.get("exact_match") is not None:
            metrics["exact_match"] = _round(entry["exact_match"])
        for key in sorted(entry, key=str):
            match = re.fullmatch(r"recall(?:@|_at_)(\d+)", str(key))
            if match and entry[key] is not None:
                metrics[f"recall@{match.group(1)}"] = _round(entry[key])
        if not metrics:
            raise ValueError(
                f"{origin}: result {position} ({entry['dataset']}) has no metric; give 'exact_match' and/or "
                "'recall@K' (percentages)."
            )
        dataset = str(entry["dataset"])
        results.append({
            "dataset": dataset,
            "dataset_name": entry.get("dataset_name") or DATASET_NAMES.get(dataset.lower(), dataset),
            "split": entry.get("split"),
            "count": entry.get("count"),
            "task": entry.get("task") or "question-answering",
            "metrics": metrics,
        })
    return results


def _eval_results_metadata(results: Sequence[Mapping[str, Any]]) -> list[Any]:
    """`huggingface_hub.EvalResult`s (the card's `model-index`) of [`load_eval_results`] entries."""
    from huggingface_hub import EvalResult

    task_names = {"question-answering": "Open-Domain Question Answering", "text-retrieval": "Retrieval"}
    out = []
    for result in results:
        for metric, value in result["metrics"].items():
            common = {
                "task_type": result["task"],
                "task_name": task_names.get(result["task"], result["task"]),
                "dataset_type": result["dataset"],
                "dataset_name": result["dataset_name"],
                "dataset_split": result["split"],
                "metric_value": value,
            }
            if metric == "exact_match":
                out.append(EvalResult(metric_type="exact_match", metric_name="Exact Match", **common))
            else:
                k = int(metric.split("@")[1])
                out.append(EvalResult(metric_type="recall", metric_name=f"Recall@{k}", metric_args={"k": k}, **common))
    return out


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def collect_training_facts(model_dir: str | os.PathLike) -> dict[str, Any]:
    r"""
    Training details for a card, read from what the trainers write (nothing is typed by hand).

    Looks in `model_dir` and its parent (the trainer's `output_dir` when `model_dir` is `<output_dir>/final`) for
    `history.json` (the loop's log records) and `training_args.json` (the merged argument dataclasses, if the trainer
    saved them), and reads `model_dir/index/manifest.json` when present.

    Returns:
        `dict`: `args` (the saved arguments, possibly empty), `steps`, `final_loss`, `num_refreshes`,
        `mean_staleness_steps`, `eval` (last `eval/*` values of the history) and `index_manifest` (dict or None);
        keys whose source is absent are None.
    """
    model_dir = os.path.abspath(os.fspath(model_dir))
    folders = [model_dir, os.path.dirname(model_dir)]
    facts: dict[str, Any] = {
        "args": {}, "steps": None, "final_loss": None, "num_refreshes": None, "mean_staleness_steps": None,
        "eval": {}, "index_manifest": None, "sources": [],
    }
    for folder in folders:
        for name in TRAINING_ARGS_FILES:
            path = os.path.join(folder, name)
            if os.path.isfile(path) and not facts["args"]:
                facts["args"] = _read_json(path)
                facts["sources"].append(path)
        path = os.path.join(folder, HISTORY_FILE)
        if os.path.isfile(path) and facts["steps"] is None:
            history = [record for record in _read_json(path) if isinstance(record, Mapping)]
            facts["sources"].append(path)
            if history:
                facts["steps"] = int(max(record.get("step", 0) for record in history))
                losses = [record["loss"] for record in history if "loss" in record]
                facts["final_loss"] = _round(losses[-1]) if losses else None
                swaps = [record for record in history if "refresh/swap_step" in record]
                facts["num_refreshes"] = len(swaps)
                staleness = [r["refresh/staleness_steps"] for r in swaps if "refresh/staleness_steps" in r]
                facts["mean_staleness_steps"] = _round(sum(staleness) / len(staleness)) if staleness else None
                for record in history:
                    for key, value in record.items():
                        if key.startswith("eval/"):
                            facts["eval"][key[len("eval/"):]] = _round(value)
    manifest_path = os.path.join(model_dir, "index", MANIFEST_NAME)
    if os.path.isfile(manifest_path):
        facts["index_manifest"] = _read_json(manifest_path)
    return facts


def _card_environment() -> Any:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.fspath(TEMPLATES_DIR)), keep_trailing_newline=True, trim_blocks=True,
        lstrip_blocks=True, autoescape=False,
    )


def render_model_card(
    kind: str,
    *,
    eval_results: str | os.PathLike | Mapping | Sequence | None = None,
    training_dir: str | os.PathLike | None = None,
    **facts: Any,
) -> Any:
    r"""
    Render a model card (or the index's dataset card) from the templates in `realm_hf/model_cards/`.

    Args:
        kind (`str`): `"pretrained"` (retriever + knowledge encoder, like realm-cc-news-pretrained), `"open_qa"`
            (a fine-tuned `RealmForOpenQA`) or `"index"` (the dataset card of an index bundle).
        eval_results (*optional*): An evaluation output JSON file (or its parsed content), see [`load_eval_results`];
            its metrics become the card's `model-index` and its results table.
        training_dir (`str`, *optional*): The saved model directory; training details are read from the trainer's
            files there (see [`collect_training_facts`]).
        **facts: Anything the template shows; the common ones: `model_id` / `repo_id`, `base_model`, `license`,
            `language`, `index_repo_id`, `index_revision`, `corpus`, `training` (overrides of collected facts),
            `manifest` ([`IndexManifest`] or dict, for `"index"`), `model_repo_id` (for `"index"`).

    Returns:
        `huggingface_hub.ModelCard` (or `DatasetCard` for `"index"`): `str(card)` is the README; `card.data` its
        metadata.
    """
    from huggingface_hub import DatasetCard, DatasetCardData, ModelCard, ModelCardData

    if kind not in CARD_KINDS:
        raise ValueError(f"kind must be one of {sorted(CARD_KINDS)}, got {kind!r}.")
    results = load_eval_results(eval_results) if eval_results is not None else []
    collected = collect_training_facts(training_dir) if training_dir is not None else {}
    training = {**collected, **dict(facts.pop("training", None) or {})}
    args = dict(training.get("args") or {})
    model_id = facts.pop("model_id", None) or facts.get("repo_id") or "realm-model"
    facts.setdefault("repo_id", model_id)
    language = facts.pop("language", "en")
    license_ = facts.pop("license", None)
    tags = ["realm", "realm_hf", "retrieval-augmented", *facts.pop("tags", [])]

    manifest = facts.pop("manifest", None)
    if manifest is None and training.get("index_manifest"):
        manifest = training["index_manifest"]
    if isinstance(manifest, IndexManifest):
        manifest = dataclasses.asdict(manifest)

    if kind == "index":
        if manifest is None:
            raise ValueError("render_model_card('index', ...) needs manifest=<IndexManifest or dict>.")
        data = DatasetCardData(
            language=language, license=license_,
            pretty_name=facts.pop("pretty_name", None) or f"REALM index {model_id}",
            size_categories=[_size_category(int(manifest["num_blocks"]))], task_categories=["text-retrieval"],
            tags=sorted(set(tags + ["faiss"])),
            configs=[{"config_name": "default", "data_files": [{"split": "train", "path": BLOCK_SHARD_PATTERN}]}],
        )
        card_cls = DatasetCard
    else:
        datasets_ = [result["dataset"] for result in results]
        if facts.get("corpus_dataset"):
            datasets_.insert(0, facts["corpus_dataset"])
        data = ModelCardData(
            language=language, license=license_, library_name="transformers",
            pipeline_tag="question-answering" if kind == "open_qa" else "fill-mask",
            tags=tags + (["open-domain-qa"] if kind == "open_qa" else []),
            datasets=list(dict.fromkeys(datasets_)) or None, base_model=facts.get("base_model"),
            model_name=model_id, eval_results=_eval_results_metadata(results) or None,
        )
        card_cls = ModelCard
    if isinstance(eval_results, (str, os.PathLike)):
        facts.setdefault("eval_source", os.path.basename(os.fspath(eval_results)))
    if manifest is not None:
        facts.setdefault("embedding_size", manifest["dim"])
    template = _card_environment().get_template(CARD_KINDS[kind])
    content = template.render(
        card_data=data.to_yaml(), model_id=model_id, kind=kind, results=results, training=training, args=args,
        manifest=manifest, license=license_, language=language, bibtex=REALM_BIBTEX, **facts,
    )
    return card_cls(content)


# ==================================================================================================== publish
@dataclasses.dataclass
class PublishResult:
    """What [`publish`] did: the commits (None in a dry run), the index pinned in the config, the staged files."""

    repo_id: str
    kind: str
    model_commit: Any = None
    index_repo_id: str | None = None
    index_revision: str | None = None
    index_commit: Any = None
    model_files: list[str] = dataclasses.field(default_factory=list)
    card: str = ""


_SKIP_DIRS = {"index", "checkpoints", "runs", "corpus", "__pycache__"}
_INDEX_CARD_FACTS = ("corpus", "corpus_description", "license")


def _model_kind(model_dir: str) -> tuple[str, list[str]]:
    """`("open_qa" | "pretrained" | "retriever" | <model_type>, [model subfolders with a config.json])`."""
    if os.path.isfile(os.path.join(model_dir, "config.json")):
        model_type = _read_json(os.path.join(model_dir, "config.json")).get("model_type")
        return {"realm_open_qa": "open_qa", "realm_retriever": "retriever"}.get(model_type, model_type), [""]
    if all(os.path.isfile(os.path.join(model_dir, sub, "config.json")) for sub in ("retriever", "encoder")):
        return "pretrained", ["retriever", "encoder"]
    raise FileNotFoundError(
        f"{model_dir} is not a saved REALM model: expected a config.json (RealmForOpenQA, RealmRetriever) or "
        "retriever/ and encoder/ sub-directories (a pre-training run's `final/`)."
    )


def _stage_model(model_dir: str, staging: str, index_dir: str | None) -> list[str]:
    """Copy the model files (not the index, checkpoints, logs) into `staging`; return the relative paths."""
    paths = []
    skip = {os.path.abspath(index_dir)} if index_dir else set()
    for root, dirs, files in os.walk(model_dir):
        dirs[:] = sorted(
            d for d in dirs
            if d not in _SKIP_DIRS and not d.startswith((".", "checkpoint-"))
            and os.path.abspath(os.path.join(root, d)) not in skip
        )
        for name in sorted(files):
            if name.startswith(".") or name.endswith(".log"):
                continue
            rel = os.path.relpath(os.path.join(root, name), model_dir)
            os.makedirs(os.path.dirname(os.path.join(staging, rel)), exist_ok=True)
            shutil.copy2(os.path.join(root, name), os.path.join(staging, rel))
            paths.append(Path(rel).as_posix())
    return paths


def _load_pairing_model(model_dir: str, kind: str) -> Any:
    from transformers import AutoModel

    from . import RealmForOpenQA, RealmRetriever  # noqa: F401  (registers the Auto classes)

    sub = "retriever" if kind == "pretrained" else ""
    return AutoModel.from_pretrained(os.path.join(model_dir, sub) if sub else model_dir)


def publish(
    model_dir: str | os.PathLike,
    repo_id: str,
    index_repo_id: str | None = None,
    eval_results: str | os.PathLike | None = None,
    *,
    index_dir: str | os.PathLike | None = None,
    revision: str | None = None,
    private: bool | None = None,
    token: str | bool | None = None,
    accept_index: bool = False,
    remote_code: bool = False,
    card_facts: Mapping[str, Any] | None = None,
    card_output: str | os.PathLike | None = None,
    commit_message: str | None = None,
    dry_run: bool = False,
) -> PublishResult:
    r"""
    Publish a saved model (+ card) and its index: what `realm-hf publish` runs.

    1. The index (`index_dir`, default `<model_dir>/index`), if any, is checked against the model
       ([`check_index_matches_model`]) and pushed as the dataset repo `index_repo_id` (default `<repo_id>-index`).
    2. The model config gets `index_repo_id` and `index_revision` (the index commit) and, with `accept_index`, the
       index's fingerprint as `index_fingerprint` (see [`record_index_pairing`]).
    3. The model files (not the index, checkpoints or logs) and the card are pushed in one commit.

    Args:
        model_dir (`str`): A saved `RealmForOpenQA` / `RealmRetriever` directory, or a pre-training `final/`
            directory (`retriever/` + `encoder/`).
        repo_id (`str`): The model repo.
        index_repo_id (`str`, *optional*): The index dataset repo.
        eval_results (`str`, *optional*): Evaluation output JSON for the card (see [`load_eval_results`]).
        index_dir (`str`, *optional*): The index directory, default `<model_dir>/index`.
        revision, private, token: as in `HfApi.create_commit` / `create_repo`.
        accept_index (`bool`): Pair the model with an index built by another doc tower (the checkpoint the model was
            fine-tuned from, or an earlier refresh of a pre-training run) by recording its fingerprint.
        remote_code (`bool`): Also add [`add_remote_code`] files (`trust_remote_code` loading).
        card_facts (`dict`, *optional*): Extra facts for the card (`base_model`, `corpus`, `license`, ...).
        card_output (`str`, *optional*): Also write the rendered card here (e.g. `model_cards/<name>.md`).
        dry_run (`bool`): Stage and render everything, push nothing.
    """
    from transformers import AutoConfig

    model_dir = os.path.abspath(os.fspath(model_dir))
    kind, config_dirs = _model_kind(model_dir)
    card_kind = "open_qa" if kind == "open_qa" else "pretrained"
    facts = dict(card_facts or {})
    if index_dir is None and os.path.isfile(os.path.join(model_dir, "index", MANIFEST_NAME)):
        index_dir = os.path.join(model_dir, "index")
    result = PublishResult(repo_id=repo_id, kind=kind)
    fingerprint_to_record = None
    if index_dir is not None:
        from .index import RealmIndex

        index_repo_id = index_repo_id or f"{repo_id}-index"
        index = RealmIndex.from_pretrained(index_dir)
        model = _load_pairing_model(model_dir, kind)
        try:
            model_name = os.path.join(model_dir, "retriever") if kind == "pretrained" else model_dir
            check_index_matches_model(index, model, source=f"The index at {index_dir}", model_name=model_name)
        except ValueError:
            if not accept_index:
                raise
            logger.warning(
                "Pairing %s with the index at %s built by another doc tower (step %s), as asked (accept_index)",
                model_dir, index_dir, index.step,
            )
            fingerprint_to_record = index.fingerprint
        result.index_repo_id = index_repo_id
        if not dry_run:
            result.index_commit = push_index_to_hub(
                index, index_repo_id, private=private, token=token,
                card_facts={"model_repo_id": repo_id, **{k: v for k, v in facts.items() if k in _INDEX_CARD_FACTS}},
            )
            result.index_revision = getattr(result.index_commit, "oid", None)
        del model
    elif index_repo_id is not None:
        logger.warning("No index directory found in %s; --index-repo-id %s is recorded as is", model_dir, index_repo_id)
        result.index_repo_id = index_repo_id
    else:
        logger.warning(
            "No index directory in %s (and no --index-dir): the published model names no Hub index; users must build "
            "one (%s) or pass their own", model_dir, _rebuild_command(repo_id),
        )

    from huggingface_hub import HfApi

    with tempfile.TemporaryDirectory(prefix="realm-model-") as staging:
        paths = set(_stage_model(model_dir, staging, index_dir))
        for sub in config_dirs:
            target = os.path.join(staging, sub) if sub else staging
            config = AutoConfig.from_pretrained(target)
            if result.index_repo_id is not None:
                config.index_repo_id = result.index_repo_id
                config.index_revision = result.index_revision
            if fingerprint_to_record is not None and sub in ("", "retriever"):
                config.index_fingerprint = fingerprint_to_record
            config.save_pretrained(target)
            if remote_code:
                paths.add(Path(os.path.relpath(add_remote_code(target), staging)).as_posix())
        card = render_model_card(
            card_kind, eval_results=eval_results, training_dir=model_dir, model_id=repo_id,
            index_repo_id=result.index_repo_id, index_revision=result.index_revision,
            model_layout=kind, **facts,
        )
        card.save(os.path.join(staging, CARD_FILE))
        paths.add(CARD_FILE)
        result.card = str(card)
        result.model_files = sorted(paths)
        if card_output is not None:
            os.makedirs(os.path.dirname(os.path.abspath(card_output)), exist_ok=True)
            card.save(os.fspath(card_output))
        if not dry_run:
            result.model_commit = _commit(
                HfApi(token=token), repo_id, "model", staging, result.model_files, revision=revision,
                private=private, commit_message=commit_message or f"Upload REALM {card_kind} model",
                commit_description=None, create_pr=None,
            )
    return result
