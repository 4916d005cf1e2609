"""MIPS index benchmark: build throughput, and recall vs queries/s curves of approximate index types vs exact search.

The full run, the one in benchmarks/results/index.md (estimated at 12 minutes, 15 at most, on 2 idle cores: about 4
for the real-data parts, 8 for the 1M synthetic vectors; the Markdown records the time it took):

    HF_HUB_OFFLINE=1 python benchmarks/bench_index.py --max-articles 100 --synthetic-size 1000000

A quick run of the synthetic part only, keeping the 1M run's cluster structure (1000 vectors per cluster, about 244
per inverted list) at a fifth of the size, written next to it as index-200k.{json,md,png}:

    python benchmarks/bench_index.py --skip-real --synthetic-size 200000 --synthetic-clusters 200 --nlist 819 \
        --output-name index-200k

Writes benchmarks/results/<output-name>.json, .md and _recall_qps.png. Parts:
(a) build: `RealmIndex.build` over wiki-2015 blocks (MiniLM retriever, bf16 autocast) vs the bare document-tower
    forward over the same length-sorted batches (the floor);
(b) index types, each built once and then searched at a sweep of search-time parameters
    (`RealmIndex.set_search_params`: HNSW `efSearch`, IVF `nprobe`, refine `k_factor`, `rerank`): build time, bytes
    per block (serialized faiss index, ids included; `rerank` also reads that many stored embeddings per query from
    embeddings.npy, which every index directory holds), queries/s at k=5 and k=100, recall@5 / @100 vs exact
    search. On the real NQ-dev question embeddings over the real block embeddings, and on `--synthetic-size`
    clustered 128-d vectors (REALM's embedding size; the scale where approximate search matters). Every operating
    point is a row, marked with the goals it meets (`GOALS`);
(c) exact search: faiss Flat and torch exact (batched) vs the old transformers-REALM way, one fp32
    `einsum` + `topk` over the whole block matrix per question.
(d) refresh overhead and staleness are measured by the pre-training run itself (see README).
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import logging
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from bench_common import RESULTS, cpu_model


logger = logging.getLogger("bench_index")

# The goals, checked on every operating point: an approximate type at recall@5 >= 0.95 that answers >= 10x
# the queries/s of exact search (faiss Flat, k=5), and a compressed type (<= 64 bytes per block, ids included).
GOALS = {
    "approximate": {"min_recall@5": 0.95, "min_qps_vs_exact": 10.0},
    "compressed": {"min_recall@5": 0.9, "max_bytes_per_block": 64.0},
}

# Index types (faiss factory strings; {nlist} is filled in per data set). Bytes per block at 128 dims: 8 for the id
# (+ ~2 for the IVF centroids at 1M) + the codes: Flat 512 B (float32), SQ8 128 B, PQ64 64 B (2-dim sub-vectors,
# 8 bits), PQ64x6 48 B, PQ64x4fs 32 B (4-bit fast-scan codes scored with SIMD lookup tables); RFlat adds the float32
# vectors (512 B) to re-score the k * k_factor best candidates exactly. Left out for the 1M run's time budget (15
# minutes on 2 cores): OPQ (its training alone took > 8 minutes on 20k vectors), RQ / LSQ (slower still to encode),
# and IVF,PQ32 / IVF,PQ32x4fs,RFlat (at 200k, recall@5 at most 0.17 at 43 B, like IVF,PQ64x4fs's 0.13 at 44 B, and
# 0.89 where IVF,PQ32,RFlat reaches 0.998).
INDEX_TYPES = [
    "Flat",
    "HNSW32",
    "IVF{nlist},Flat",
    "IVF{nlist},SQ8",
    "IVF{nlist},PQ32,RFlat",
    "IVF{nlist},PQ64x4fs",
    "IVF{nlist},PQ64x6",
    "IVF{nlist},PQ64",
    "SQfp16",
]

# Search-time parameters swept on each built index (those it has): the product of the outer lists, and for each
# outer setting the innermost parameter ascending until recall@5 and @100 stop rising (SATURATED) or reach 1.
SWEEP = {
    "rerank": [0, 25, 100],
    "k_factor": [2, 8, 32, 128],
    "efSearch": [16, 32, 64, 128, 256, 512],
    "nprobe": [1, 2, 4, 8, 16, 32, 64, 128],
}
INNER = ("efSearch", "nprobe")
SATURATED = 0.002


def timed(fn: Callable[[], Any], repeats: int = 1) -> tuple[float, Any]:
    """Median wall-clock seconds of `repeats` calls of `fn`, and its last result."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def recall(found: torch.Tensor, exact: torch.Tensor, k: int) -> float:
    """Mean fraction of the exact top-k ids of each query that `found` also has in its top k."""
    hits = [len(set(f[:k].tolist()) & set(e[:k].tolist())) / k for f, e in zip(found, exact)]
    return float(np.mean(hits))


def index_bytes(index) -> int:
    """Size of the serialized search structure (the faiss file: codes, ids, quantizers)."""
    with tempfile.TemporaryDirectory() as directory:
        index.backend.save(directory)
        return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))


def clustered_vectors(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    """`n` vectors around `clusters` standard-normal centers (drawn first from `seed`), noise 0.35 per dim."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim)).astype(np.float32)
    assignment = rng.integers(0, clusters, n)
    vectors = centers[assignment] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    return vectors


def goals_met(row: dict) -> list[str]:
    """The names of the `GOALS` an operating point meets."""
    met = []
    approximate, compressed = GOALS["approximate"], GOALS["compressed"]
    if row["recall@5"] >= approximate["min_recall@5"] and row["qps_vs_exact"] >= approximate["min_qps_vs_exact"]:
        met.append("approximate")
    if row["recall@5"] >= compressed["min_recall@5"] and row["bytes_per_block"] <= compressed["max_bytes_per_block"]:
        met.append("compressed")
    return met


def sweep_settings(search_params: dict[str, Any], nlist: int, index_type: str) -> list[list[dict[str, Any]]]:
    """Settings to try, as runs whose last parameter ascends (a run may stop early once recall saturates). `rerank`
    is swept on every type with lossy codes and no refinement codes of its own (PQ, SQ8 / SQ4, the preset), whether
    it is on by default or not."""
    refined = "RFlat" in index_type or "Refine" in index_type
    lossy = index_type == "compressed" or "PQ" in index_type or re.search(r"SQ[0-8]\b", index_type) is not None
    lossy = lossy and not refined
    names = [name for name in SWEEP if name in search_params or (name == "rerank" and lossy)]
    if not names:
        return []
    values = {name: [v for v in SWEEP[name] if name != "nprobe" or v <= nlist] for name in names}
    inner = names[-1] if names[-1] in INNER else None
    outer = [name for name in names if name != inner]
    runs = []
    for fixed in itertools.product(*(values[name] for name in outer)):
        settings = dict(zip(outer, fixed))
        runs.append([{**settings, inner: value} for value in values[inner]] if inner else [settings])
    return runs


class Measurer:
    """Searches an index's search structure with the benchmark's queries and scores the result against exact search.

    `RealmIndex.approximate_search` is measured (the faiss index, and its exact re-scoring of `rerank` candidates
    from the stored embeddings when that parameter is set), not `RealmIndex.search`, which completes the rows where an
    approximate index comes up short (fewer than k hits in the probed lists) with exact search: such rows count as
    misses here, and `short@k` is their fraction.
    """

    def __init__(self, queries: torch.Tensor, exact_ids: torch.Tensor, repeats: int = 3) -> None:
        self.queries = queries  # [Q, D]
        self.exact_ids = exact_ids  # [Q, 100]
        self.repeats = repeats

    def __call__(self, index) -> dict[str, Any]:
        row: dict[str, Any] = {"search_params": index.search_params}
        for k, repeats in ((5, self.repeats), (100, 1)):
            seconds, (_, ids) = timed(lambda: index.approximate_search(self.queries, k), repeats=repeats)  # [Q, k]
            row[f"qps@{k}"] = len(self.queries) / seconds
            row[f"recall@{k}"] = recall(ids, self.exact_ids, k)
            row[f"short@{k}"] = float((ids < 0).any(dim=1).float().mean())
        return row


def compare_types(blocks, embeddings: np.ndarray, queries: torch.Tensor, label: str, nlist: int,
                  index_types: list[str]) -> list[dict]:
    """One row per (index type, search-parameter setting); the first row is exact search (faiss Flat)."""
    from realm_hf.index import RealmIndex

    exact_build, exact = timed(lambda: RealmIndex.from_embeddings(blocks, embeddings, index_type="Flat"))
    _, (_, exact_ids) = timed(lambda: exact.search(queries, 100))
    measure = Measurer(queries, exact_ids)
    exact_row = {"data": label, "index_type": "Flat", "build_s": exact_build,
                 "bytes_per_block": index_bytes(exact) / len(embeddings), "default": True, **measure(exact)}
    del exact
    rows = [exact_row]
    for template in index_types:
        if template == "Flat":
            continue
        index_type = template.format(nlist=nlist)
        began = time.perf_counter()
        build_time, index = timed(lambda: RealmIndex.from_embeddings(blocks, embeddings, index_type=index_type))
        common = {"data": label, "index_type": index_type, "build_s": build_time,
                  "bytes_per_block": index_bytes(index) / len(embeddings)}
        default = index.search_params
        rows.append({**common, "default": True, **measure(index)})
        for run in sweep_settings(default, nlist, index_type):
            previous = None
            for settings in run:
                index.set_search_params(**settings)
                if index.search_params == default:
                    continue  # measured above
                row = {**common, "default": False, **measure(index)}
                rows.append(row)
                if row["recall@5"] >= 1.0 and row["recall@100"] >= 1.0:
                    break
                if previous is not None and max(row["recall@5"] - previous["recall@5"],
                                                row["recall@100"] - previous["recall@100"]) < SATURATED:
                    break
                previous = row
        logger.info("%s %s: built in %.1fs, %d operating points in %.1fs total", label, index_type, build_time,
                    sum(r["index_type"] == index_type for r in rows), time.perf_counter() - began)
        del index
        gc.collect()
    for row in rows:
        row["qps_vs_exact"] = row["qps@5"] / exact_row["qps@5"]
        row["goals"] = goals_met(row)
    return rows


def add_argument(parser: argparse.ArgumentParser, name: str, **kwargs: Any) -> None:
    """An option spelled with dashes or with underscores (`--synthetic-size` / `--synthetic_size`)."""
    names = [name] + (["--" + name[2:].replace("-", "_")] if "-" in name[2:] else [])
    parser.add_argument(*names, **kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_argument(parser, "--wiki", default="../shared/data/wiki-2015/wiki-2015-00000-of-00008.jsonl.gz")
    add_argument(parser, "--questions", default="../shared/data/qa/nq-dev.jsonl")
    add_argument(parser, "--max-articles", type=int, default=100)
    add_argument(parser, "--block-length", type=int, default=128)
    add_argument(parser, "--num-questions", type=int, default=1000)
    add_argument(parser, "--synthetic-size", type=int, default=1_000_000, help="0 skips the synthetic part")
    add_argument(parser, "--synthetic-clusters", type=int, default=1000)
    add_argument(parser, "--nlist", type=int, default=4096, help="inverted lists of the IVF types (synthetic data)")
    add_argument(parser, "--index-types", nargs="+", default=INDEX_TYPES, help="factory strings, {nlist} filled in")
    add_argument(parser, "--skip-real", action="store_true", help="skip (a), (c) and the real-embedding types")
    add_argument(parser, "--saved-index", default=None,
                 help="(b) on the embeddings of a saved RealmIndex too, with --saved-index-model's query tower "
                      "(e.g. the 35,718-block index of an Open-QA run): the index types at corpus scale, real vectors")
    add_argument(parser, "--saved-index-model", default=None, help="the model whose document tower built --saved-index")
    add_argument(parser, "--saved-index-label", default="saved index", help="what the saved index holds, for the tables")
    add_argument(parser, "--batch-size", type=int, default=64)
    add_argument(parser, "--threads", type=int, default=2)
    add_argument(parser, "--output-name", default="index", help="results/<name>.json, .md, _recall_qps.png")
    add_argument(parser, "--append", action="store_true",
                 help="add this run's rows to results/<output-name>.json (replacing rows of the same data and index "
                      "type, the first run's exact reference kept) instead of overwriting it")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    import faiss

    faiss.omp_set_num_threads(args.threads)
    began = time.perf_counter()
    results: dict = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                                 "torch": torch.__version__, "faiss": faiss.__version__, "threads": args.threads,
                                 "load_average_at_start": os.getloadavg()},
                     "settings": vars(args), "goals": GOALS, "index_types": []}
    if not args.skip_real:
        results.update(real_data(args))
    if args.saved_index:
        results["index_types"] += saved_index_types(args)
    if args.synthetic_size:
        import datasets

        dim = 128  # REALM's projection size
        synthetic = clustered_vectors(args.synthetic_size, dim, clusters=args.synthetic_clusters, seed=0)
        # queries from the same clusters (same centers: seed 0), with their own noise
        synthetic_queries = torch.from_numpy(
            clustered_vectors(args.num_questions, dim, clusters=args.synthetic_clusters, seed=0)
            + 0.1 * np.random.default_rng(1).standard_normal((args.num_questions, dim)).astype(np.float32))
        fake_blocks = datasets.Dataset.from_dict({"block_id": np.arange(args.synthetic_size, dtype=np.int64)})
        results["index_types"] += compare_types(fake_blocks, synthetic, synthetic_queries,
                                                f"{args.synthetic_size:,} synthetic", args.nlist, args.index_types)
    results["total_s"] = time.perf_counter() - began
    if args.append and os.path.isfile(os.path.join(RESULTS, f"{args.output_name}.json")):
        results = append_to(results, args.output_name)
    write(results, args.output_name)


def append_to(results: dict, name: str) -> dict:
    """The results in results/<name>.json with this run's rows added: a (data, index type) measured again replaces
    the old rows, except the exact reference (faiss Flat) of a data set whose other old rows stay (their ratios use
    it). The new rows keep their × exact against their own run's Flat, measured side by side in that run."""
    with open(os.path.join(RESULTS, f"{name}.json"), encoding="utf-8") as f:
        merged = json.load(f)
    measured = {(row["data"], row["index_type"]) for row in results["index_types"]}
    kept_data = {r["data"] for r in merged["index_types"] if r["index_type"] != "Flat" and (r["data"], r["index_type"])
                 not in measured}
    new = [row for row in results["index_types"] if not (row["index_type"] == "Flat" and row["data"] in kept_data)]
    replaced = {(row["data"], row["index_type"]) for row in new}
    merged["index_types"] = [r for r in merged["index_types"] if (r["data"], r["index_type"]) not in replaced] + new
    for run in merged.get("appended_runs", []):  # earlier appended runs keep only the rows still theirs
        run["rows"] = [row for row in run["rows"] if tuple(row.split(": ", 1)) not in replaced]
    merged["appended_runs"] = [run for run in merged.get("appended_runs", []) if run["rows"]]
    merged["appended_runs"].append({
        "command": command_line(results["settings"], name), "total_s": results["total_s"],
        "machine": results["machine"], "rows": sorted({f"{data}: {index_type}" for data, index_type in replaced})})
    return merged


def command_line(settings: dict, name: str) -> str:
    """The command that reproduces a run with these settings."""
    options = ["--skip-real"] if settings["skip_real"] else [f"--max-articles {settings['max_articles']}"]
    options += [f"--{key.replace('_', '-')} {settings[key]}" for key in ("synthetic_size", "synthetic_clusters", "nlist")]
    options += [f"--threads {settings['threads']}"] if settings["threads"] != 2 else []
    if settings.get("saved_index"):
        options += [f"--saved-index {settings['saved_index']} --saved-index-model {settings['saved_index_model']} "
                    f"--saved-index-label '{settings['saved_index_label']}'"]
    if settings["index_types"] != INDEX_TYPES:
        options.append("--index-types " + " ".join(f"'{t}'" if "{" in t else t for t in settings["index_types"]))
    options += [f"--output-name {name}"] if name != "index" else []
    options += ["--append"] if settings.get("append") else []
    return "HF_HUB_OFFLINE=1 python benchmarks/bench_index.py " + " ".join(options)


def question_embeddings(retriever, tokenizer, path: str, num_questions: int) -> torch.Tensor:
    """The first `num_questions` questions of a QA JSONL file through the retriever's query tower: `[Q, D]`."""
    with open(path, encoding="utf-8") as f:
        questions = [json.loads(line)["question"] for _, line in zip(range(num_questions), f)]
    encoded = tokenizer(questions, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        return retriever.embed_queries(encoded["input_ids"], encoded["attention_mask"]).float()  # [Q, D]


def saved_index_types(args: argparse.Namespace) -> list[dict]:
    """(b) on the embeddings of a saved index, queried by the questions through its model's query tower."""
    from realm_hf.retrieval import load_retriever
    from realm_hf.index import RealmIndex

    if not args.saved_index_model:
        raise SystemExit("--saved-index needs --saved-index-model (the model whose query tower asks the questions)")
    saved = RealmIndex.from_pretrained(args.saved_index)
    retriever, tokenizer = load_retriever(args.saved_index_model)
    queries = question_embeddings(retriever, tokenizer, args.questions, args.num_questions)
    embeddings = np.ascontiguousarray(np.asarray(saved.embeddings), dtype=np.float32)  # [N, D]
    label = f"{len(embeddings):,} real ({args.saved_index_label})"
    return compare_types(saved.blocks.select_columns(["block_id"]), embeddings, queries, label,
                         nlist=max(16, int(4 * np.sqrt(len(embeddings)))), index_types=args.index_types)


def real_data(args: argparse.Namespace) -> dict:
    """Parts (a), (b) on the real embeddings, and (c)."""
    from realm_hf.retrieval import load_retriever
    from realm_hf.corpus import load_articles, split_into_blocks
    from realm_hf.index import RealmIndex
    from realm_hf.index.embedding import embed_blocks

    retriever, tokenizer = load_retriever("minilm")
    articles = load_articles(args.wiki)
    articles = articles.select(range(min(args.max_articles, len(articles))))
    blocks = split_into_blocks(articles, tokenizer, max_length=args.block_length)
    results: dict = {"num_blocks": len(blocks)}

    # (a) build throughput: the pipeline vs the bare doc-tower forward over the same batches (alternating runs)
    def bare_forward():
        return embed_blocks(blocks, lambda batch: retriever.document_embedder(**batch), batch_size=args.batch_size,
                            dtype=torch.bfloat16)

    def pipeline_build():
        return RealmIndex.build(blocks, retriever, tokenizer=tokenizer, index_type="Flat", batch_size=args.batch_size,
                                dtype=torch.bfloat16)

    bare_times, build_times = [], []
    for _ in range(2):
        bare_times.append(timed(bare_forward)[0])
        seconds, index = timed(pipeline_build)
        build_times.append(seconds)
    bare, build = statistics.median(bare_times), statistics.median(build_times)
    results["build"] = {"bare_forward_s": bare, "realm_index_build_s": build, "overhead": build / bare - 1,
                        "blocks_per_s": len(blocks) / build, "bare_blocks_per_s": len(blocks) / bare,
                        "raw": {"bare": bare_times, "build": build_times}}
    logger.info("build: %s", results["build"])

    queries = question_embeddings(retriever, tokenizer, args.questions, args.num_questions)

    # (b) index types on the real embeddings
    embeddings = np.ascontiguousarray(np.asarray(index.embeddings), dtype=np.float32)
    results["index_types"] = compare_types(blocks, embeddings, queries, "wiki-2015 real",
                                           nlist=max(16, int(4 * np.sqrt(len(blocks)))), index_types=args.index_types)

    # (c) exact search: batched (ours) vs per-question einsum + topk (the old transformers-REALM way)
    matrix = torch.from_numpy(embeddings)
    old_time, _ = timed(lambda: [torch.topk(torch.einsum("d,nd->n", q, matrix), 5) for q in queries])
    torch_index = RealmIndex.from_embeddings(blocks, embeddings, index_type="torch-exact")
    torch_time, _ = timed(lambda: torch_index.search(queries, 5), repeats=3)
    flat_time, _ = timed(lambda: index.search(queries, 5), repeats=3)
    results["exact"] = {"old_einsum_topk_qps": len(queries) / old_time, "torch_exact_qps": len(queries) / torch_time,
                        "faiss_flat_qps": len(queries) / flat_time}
    logger.info("exact: %s", results["exact"])
    return results


def format_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(params.items())) or "-"


def goal_summary(rows: list[dict]) -> list[str]:
    """Per data set and goal: the fastest operating point meeting it, or the closest miss."""
    lines = []
    for data in dict.fromkeys(r["data"] for r in rows):
        subset = [r for r in rows if r["data"] == data]
        for goal, limits in GOALS.items():
            meeting = [r for r in subset if goal in r["goals"]]
            if meeting:
                best = max(meeting, key=lambda r: r["qps@5"])
                verdict = "**met**"
            elif goal == "approximate":
                best = max(subset, key=lambda r: (r["recall@5"] >= limits["min_recall@5"], r["qps_vs_exact"]))
                verdict = "not met; fastest at the recall target" if best["recall@5"] >= limits["min_recall@5"] else "not met"
            else:
                small = [r for r in subset if r["bytes_per_block"] <= limits["max_bytes_per_block"]]
                if not small:
                    lines.append(f"| {data} | {goal} | no index type that small in this run | | | | | | |")
                    continue
                best = max(small, key=lambda r: r["recall@5"])
                verdict = "not met; best recall@5 within the size"
            lines.append(f"| {data} | {goal} | {verdict} | {best['index_type']} | {format_params(best['search_params'])} | "
                         f"{best['bytes_per_block']:.0f} | {best['qps@5']:.0f} | {best['qps_vs_exact']:.1f} | "
                         f"{best['recall@5']:.3f} |")
    return lines


def write(results: dict, name: str = "index") -> None:
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, default=str)
    settings, machine = results["settings"], results["machine"]
    lines = [
        "# MIPS index benchmark", "",
        f"Command: `{command_line(settings, name)}` ({results['total_s'] / 60:.1f} minutes).", "",
        f"Machine: {machine['cores']} cores, torch {machine['torch']}, faiss {machine['faiss']}, "
        f"{machine['threads']} threads; load average at start {machine['load_average_at_start']}.",
    ]
    if "build" in results:
        build = results["build"]
        lines += [
            f"{results['num_blocks']:,} wiki-2015 blocks (first {settings['max_articles']} articles of shard 0, "
            f"≤ {settings['block_length']} wordpieces), packaged MiniLM retriever, bf16 autocast.", "",
            "## Build", "",
            "| | seconds | blocks/s |", "|---|---:|---:|",
            f"| bare document-tower forward | {build['bare_forward_s']:.1f} | {build['bare_blocks_per_s']:.0f} |",
            f"| `RealmIndex.build` (embed + faiss Flat) | {build['realm_index_build_s']:.1f} | {build['blocks_per_s']:.0f} |",
            "", f"Overhead of the pipeline over the model's own forward: {100 * build['overhead']:+.1f}%.",
        ]
    for run in results.get("appended_runs", []):
        lines += ["", f"Rows of {', '.join(run['rows'])} added by `{run['command']}` ({run['total_s'] / 60:.1f} "
                      f"minutes, {run['machine']['threads']} threads, load average at start "
                      f"{[round(x, 2) for x in run['machine']['load_average_at_start']]}: the machine was shared, so "
                      "their × exact is against the faiss Flat search of that same run, measured side by side)."]
    approximate, compressed = GOALS["approximate"], GOALS["compressed"]
    lines += [
        "", "## Goals", "",
        f"*approximate*: recall@5 ≥ {approximate['min_recall@5']} vs exact at ≥ {approximate['min_qps_vs_exact']:g}× "
        f"exact search's queries/s (faiss Flat, k=5); *compressed*: recall@5 ≥ {compressed['min_recall@5']} at "
        f"≤ {compressed['max_bytes_per_block']:g} bytes/block (serialized index, 8-byte ids included).", "",
        "| data | goal | verdict | index | search parameters | bytes/block | queries/s | × exact | recall@5 |",
        "|---|---|---|---|---|---:|---:|---:|---:|",
        *goal_summary(results["index_types"]),
        "", "## Index types × search parameters (recall vs exact search on the same vectors)", "",
        "Each index is built once, then searched at each setting (`RealmIndex.set_search_params`); *default* marks the "
        "build-time parameters. Queries/s at k=5 (the goal's) and k=100, of the faiss index itself: *short rows* are "
        "the queries that got fewer than k hits from the probed IVF lists (counted as misses here; "
        "`RealmIndex.search` completes them with exact search). Note: for inner product, faiss trains the IVF "
        "centroids with spherical k-means (unit norm), so on embeddings that are not normalized the PQ / SQ codes "
        "encode nearly the whole vector rather than a small residual.", "",
        "| data | index | search parameters | build s | bytes/block | q/s k=5 | × exact | q/s k=100 | recall@5 | "
        "recall@100 | short rows k=5 / 100 | goals |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in results["index_types"]:
        params = format_params(row["search_params"]) + (" (default)" if row["default"] else "")
        lines.append(f"| {row['data']} | {row['index_type']} | {params} | {row['build_s']:.1f} | "
                     f"{row['bytes_per_block']:.0f} | {row['qps@5']:.0f} | {row['qps_vs_exact']:.1f} | "
                     f"{row['qps@100']:.0f} | {row['recall@5']:.3f} | {row['recall@100']:.3f} | "
                     f"{row['short@5']:.2f} / {row['short@100']:.2f} | {', '.join(row['goals'])} |")
    if "exact" in results:
        exact = results["exact"]
        lines += ["", "## Exact search, queries/s (real embeddings, k=5)", "",
                  "| old transformers-REALM (einsum + topk per question) | torch exact (batched) | faiss Flat (batched) |",
                  "|---:|---:|---:|",
                  f"| {exact['old_einsum_topk_qps']:.0f} | {exact['torch_exact_qps']:.0f} | {exact['faiss_flat_qps']:.0f} |"]
    with open(os.path.join(RESULTS, f"{name}.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    plot(results["index_types"], os.path.join(RESULTS, f"{name}_recall_qps.png"))


def pareto_frontier(points: list[dict]) -> list[dict]:
    """The operating points no other point beats on both recall@5 and queries/s, by ascending recall."""
    frontier: list[dict] = []
    for row in sorted(points, key=lambda r: (-r["recall@5"], -r["qps@5"])):
        if not frontier or row["qps@5"] > frontier[-1]["qps@5"]:
            frontier.append(row)
    return frontier[::-1]


def plot(rows: list[dict], path: str) -> None:
    """Recall@5 vs queries/s, one panel per data set, one curve (the Pareto frontier of its settings, all settings as
    dots) per index type, the approximate goal's region shaded."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.info("matplotlib not installed; no plot")
        return
    datas = list(dict.fromkeys(r["data"] for r in rows))
    figure, axes = plt.subplots(1, len(datas), figsize=(6.5 * len(datas), 5), squeeze=False)
    approximate = GOALS["approximate"]
    for axis, data in zip(axes[0], datas):
        subset = [r for r in rows if r["data"] == data]
        exact_qps = subset[0]["qps@5"]
        for index_type in dict.fromkeys(r["index_type"] for r in subset):
            points = [r for r in subset if r["index_type"] == index_type]
            small = points[0]["bytes_per_block"] <= GOALS["compressed"]["max_bytes_per_block"]
            frontier = pareto_frontier(points)
            (line,) = axis.plot([r["recall@5"] for r in frontier], [r["qps@5"] for r in frontier], marker="o",
                                markersize=3, linestyle="--" if small else "-",
                                label=f"{index_type} ({points[0]['bytes_per_block']:.0f} B)")
            axis.scatter([r["recall@5"] for r in points], [r["qps@5"] for r in points], s=6, alpha=0.35,
                         color=line.get_color())
        goal_qps = approximate["min_qps_vs_exact"] * exact_qps
        axis.axhline(exact_qps, color="gray", linewidth=0.8)
        axis.axhline(goal_qps, color="green", linewidth=0.8, linestyle=":")
        axis.axvline(approximate["min_recall@5"], color="green", linewidth=0.8, linestyle=":")
        axis.axvline(GOALS["compressed"]["min_recall@5"], color="purple", linewidth=0.8, linestyle=":")
        axis.fill_between([approximate["min_recall@5"], 1.005], goal_qps, axis.get_ylim()[1], color="green", alpha=0.08)
        axis.set_title(f"{data}: exact {exact_qps:.0f} q/s (gray), 10× (green)", fontsize=9)
        axis.set_xlabel("recall@5 vs exact (compressed ≤ 64 B: dashed; goals at 0.9 / 0.95)")
        axis.set_ylabel("queries/s at k=5 (log)")
        axis.set_yscale("log")
        axis.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


if __name__ == "__main__":
    main()
