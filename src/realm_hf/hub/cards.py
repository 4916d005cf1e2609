"""Model cards (and the index's dataset card) rendered from the Jinja templates in `realm_hf/model_cards/`."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..index.manifest import IndexManifest
from ..utils.slicing import split_slice
from ..utils.files import read_json_file
from .bundles import BLOCK_SHARD_PATTERN
from .conversion_facts import read_conversion_facts
from .training_facts import collect_training_facts, format_command, round_metric


__all__ = ["CARD_KINDS", "TEMPLATES_DIR", "load_eval_results", "render_model_card"]

TEMPLATES_DIR = Path(__file__).resolve().parent.parent / "model_cards"
"""Jinja templates of the cards (shipped with the package: `package_data` `model_cards/*.j2`)."""

CARD_KINDS = {"pretrained": "pretrained.md.j2", "open_qa": "open_qa.md.j2", "index": "index.md.j2"}

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


PRETRAINING_FIGURES = {
    "mlm_accuracy_with_retrieval": "masked-token accuracy, marginal over the retrieved blocks and ∅ (%)",
    "mlm_accuracy_null_document": "masked-token accuracy reading the null document only, i.e. no retrieval (%)",
    "mlm_accuracy_source_block": "masked-token accuracy reading the sentence's own block alone (%)",
    "mlm_accuracy_gold_document": "masked-token accuracy reading the gold block alone (%)",
    "gold_top1": "fraction of sentences whose gold block is retrieved first",
    "gold_prior_mass": "mean p(gold block | x) among the candidates",
    "gold_posterior_mass": "mean p(gold block | x, y) among the candidates",
    "zero_shot_recall@5": "zero-shot Recall@5 of the eval_qa_file questions (%)",
}
"""What the held-out figures of REALM pre-training (`eval/*` of its history) measure, for the card."""


def _pretraining_corpora(
    training: Mapping[str, Any], args: Mapping[str, Any], manifest: Mapping[str, Any] | None, facts: Mapping[str, Any]
) -> dict[str, Any] | None:
    """X and Z of a pre-training run for the card: the run's record (`trainer_state.json` "data"), else its arguments
    and its index manifest; names given to the card (`corpus`, `pretraining_corpus`) shown before the recorded paths.
    None when nothing names Z."""
    data = training.get("data") or {}

    def named(name: str | None, recorded: str | None) -> str | None:
        if name and recorded and name != recorded:
            return f"{name} (`{recorded}`)"
        return name or (f"`{recorded}`" if recorded else None)

    z = named(facts.get("corpus"), data.get("knowledge_corpus") or args.get("corpus"))
    if z is None:
        return None
    x_recorded = data.get("pretraining_corpus") if data else args.get("pretraining_corpus")
    if data:
        x_is_z = bool(data.get("x_is_z"))
    else:
        x_is_z = None if not args else x_recorded is None
    return {
        "x_is_z": x_is_z,
        "z": z,
        "z_blocks": data.get("knowledge_corpus_blocks") or (manifest or {}).get("num_blocks"),
        "block_length": args.get("block_length"),
        "x": named(facts.get("pretraining_corpus"), x_recorded),
        "x_articles": data.get("pretraining_articles"),
        "sentences": data.get("masked_sentences"),
        "training": data.get("training_sentences"),
        "held_out": data.get("held_out_sentences"),
        "reading": data.get("reading_sentences"),
    }


def _check_pretraining_corpus_name(
    name: str | None, kind: str, layout: str | None, training: Mapping[str, Any], args: Mapping[str, Any]
) -> None:
    """Refuse a name for the pre-training corpus X that the card cannot show: of another kind of model, or of a run
    whose sentences came from its knowledge corpus (X = Z)."""
    if name is None:
        return
    fix = "leave it out (`realm-hf publish`: --pretraining-corpus)"
    if kind != "pretrained" or layout != "pretrained":
        raise ValueError(
            f"pretraining_corpus={name!r} names the pre-training corpus X of a REALM pre-training run's final/ "
            f"(retriever/ + encoder/), but this card is of a {layout or kind!r} model; {fix}."
        )
    data = training.get("data") or {}
    x_is_z = data.get("x_is_z") if data else (args.get("pretraining_corpus") is None if args else None)
    if x_is_z:
        raise ValueError(
            f"pretraining_corpus={name!r} names a pre-training corpus X, but this run masked the sentences of its "
            f"knowledge corpus (X = Z: no pretraining_corpus in its training_args.json); {fix}, and name the "
            "knowledge corpus with corpus= (--corpus)."
        )


def _size_category(num: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                         (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M")):
        if num < bound:
            return label
    return "100M<n<1B"


def load_eval_results(source: str | os.PathLike | Mapping | Sequence) -> list[dict[str, Any]]:
    r"""
    Read evaluation results for a model card.

    The evaluation output JSON (one object, a list of them, or `{"results": [...]}`), one object per dataset/split::

        {"dataset": "nq_open", "dataset_name": "Natural Questions (open)", "split": "test",
         "exact_match": 40.4, "recall@5": 61.2, "count": 3610}

    `dataset` (a Hub dataset id or a short name) is required, and at least one metric: `exact_match` and/or
    `recall@K` (percentages in [0, 100], as [`realm_hf.evaluation`] returns them). Optional: `dataset_name`, `split`,
    `count`, `task` (model-index task type, default `"question-answering"`), `top_k`, `index_repo_id`, `model`.
    Without `dataset`, the name of `qa_file` (as `realm_hf.training.entry_points.run_evaluation` writes it) stands in.

    Returns:
        `list[dict]`: one entry per object: `dataset`, `dataset_name`, `split`, `count`, `task`, `metrics`
        (`{"exact_match": ..., "recall@5": ...}`, values rounded to 2 decimals).

    Raises:
        `ValueError`: naming the file and what is missing.
    """
    origin = "evaluation results"
    if isinstance(source, (str, os.PathLike)):
        origin = os.fspath(source)
        source = read_json_file(origin, "write the evaluation results again (realm-hf evaluate --metrics_file FILE)")
    if isinstance(source, Mapping) and "results" in source and "dataset" not in source:
        source = source["results"]
    entries = [source] if isinstance(source, Mapping) else list(source)
    results = []
    for position, entry in enumerate(entries):
        if isinstance(entry, Mapping) and not entry.get("dataset") and isinstance(entry.get("qa_file"), str):
            # the metrics file of realm_hf.training.entry_points.run_evaluation names the QA file, not the dataset
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
            metrics["exact_match"] = round_metric(entry["exact_match"])
        for key in sorted(entry, key=str):
            match = re.fullmatch(r"recall(?:@|_at_)(\d+)", str(key))
            if match and entry[key] is not None:
                metrics[f"recall@{match.group(1)}"] = round_metric(entry[key])
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
            `language`, `index_repo_id`, `index_revision`, `corpus` (the name of the knowledge corpus Z),
            `pretraining_corpus` (the name of the pre-training corpus X), `training` (overrides of collected facts),
            `manifest` ([`IndexManifest`] or dict, for `"index"`), `model_repo_id` (for `"index"`), `model_layout`
            (`"pretrained"` for a pre-training run's `retriever/` + `encoder/`: its card names X and Z with their
            counts, the figures the run recorded and the `realm-hf pretrain` command of its settings), `conversion`
            (a folder converted from transformers' REALM: [`read_conversion_facts`], read from `training_dir`'s
            `conversion.json` when not given; its source becomes `base_model` and its license `license` unless those
            are given, and the card names the source, what was converted and the answer rule).

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
    conversion = facts.pop("conversion", None)
    if conversion is None and training_dir is not None:
        conversion = read_conversion_facts(training_dir)
    if conversion:
        for fact, value in (("base_model", conversion["source"]), ("license", conversion["license"])):
            if facts.get(fact) is None and value is not None:
                facts[fact] = value
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
    _check_pretraining_corpus_name(facts.get("pretraining_corpus"), kind, facts.get("model_layout"), training, args)
    if kind == "pretrained" and facts.get("model_layout") == "pretrained":
        facts.setdefault("corpora", _pretraining_corpora(training, args, manifest, facts))
        facts.setdefault("command", format_command(training["command"]) if training.get("command") else None)
    template = _card_environment().get_template(CARD_KINDS[kind])
    content = template.render(
        card_data=data.to_yaml(), model_id=model_id, kind=kind, results=results, training=training, args=args,
        manifest=manifest, license=license_, language=language, bibtex=REALM_BIBTEX, conversion=conversion,
        figure_names=PRETRAINING_FIGURES, **facts,
    )
    return card_cls(content)
