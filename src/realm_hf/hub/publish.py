"""`publish`: a saved model (+ card) and its index to the Hub, the model pinned to the index commit."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..index.manifest import MANIFEST_NAME
from ..utils.files import MODEL_FILE_HINT, read_json_file
from .bundles import CARD_FILE
from .cards import render_model_card
from .pairing import check_index_matches_model, rebuild_command
from .remote_code import add_remote_code
from .upload import commit_files, push_index_to_hub


logger = logging.getLogger(__name__)

__all__ = ["PublishResult", "publish"]


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
    """`("open_qa" | "pretrained" | "retriever" | <model_type>, [model subfolders with a config.json])`.

    A pre-training `final/` is recognized by its `retriever/` and `encoder/` first: its top-level `config.json` is only
    the copy of the encoder's that transformers' `pipeline()` reads."""
    if all(os.path.isfile(os.path.join(model_dir, sub, "config.json")) for sub in ("retriever", "encoder")):
        return "pretrained", ["retriever", "encoder"]
    if os.path.isfile(os.path.join(model_dir, "config.json")):
        model_type = read_json_file(os.path.join(model_dir, "config.json"), MODEL_FILE_HINT).get("model_type")
        return {"realm_open_qa": "open_qa", "realm_retriever": "retriever"}.get(model_type, model_type), [""]
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
    """The model whose document tower an index must match: the Open-QA model, or the (pre-training run's) retriever."""
    from ..modeling import RealmForOpenQA, RealmRetriever

    if kind == "open_qa":
        return RealmForOpenQA.from_pretrained(model_dir)
    if kind in ("retriever", "pretrained"):
        return RealmRetriever.from_pretrained(os.path.join(model_dir, "retriever") if kind == "pretrained" else model_dir)
    raise ValueError(
        f"{model_dir} holds a {kind!r} model; an index pairs with a RealmForOpenQA, a RealmRetriever or a pre-training "
        "run's final/ directory. Publish one of those, or leave the index out (no <model_dir>/index, no --index-dir)."
    )


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

    from ..configuration import register_configs

    register_configs()  # AutoConfig reads the configs below by their model_type, whatever the caller imported
    model_dir = os.path.abspath(os.fspath(model_dir))
    kind, config_dirs = _model_kind(model_dir)
    card_kind = "open_qa" if kind == "open_qa" else "pretrained"
    facts = dict(card_facts or {})
    if index_dir is None and os.path.isfile(os.path.join(model_dir, "index", MANIFEST_NAME)):
        index_dir = os.path.join(model_dir, "index")
    result = PublishResult(repo_id=repo_id, kind=kind)
    fingerprint_to_record = None
    if index_dir is not None:
        from ..index import RealmIndex

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
            "one (%s) or pass their own", model_dir, rebuild_command(repo_id),
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
            result.model_commit = commit_files(
                HfApi(token=token), repo_id, "model", staging, result.model_files, revision=revision,
                private=private, commit_message=commit_message or f"Upload REALM {card_kind} model",
                commit_description=None, create_pr=None,
            )
    return result
