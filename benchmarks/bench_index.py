"""MIPS index benchmark on real data: build throughput, approximate-search recall vs exact, queries/s, bytes/block.

    HF_HUB_OFFLINE=1 python benchmarks/bench_index.py --max-articles 300 --synthetic-size 1000000

Writes benchmarks/results/index.json, index.md and index_recall_qps.png. Parts:
(a) build: `RealmIndex.build` over wiki-2015 blocks (MiniLM retriever, bf16 autocast) vs the bare document-tower
    forward over the same length-sorted batches (the floor);
(b) for Flat / HNSW32 / IVF-PQ / SQfp16: build time, bytes per block (serialized faiss index), queries/s and
    recall@5 / @100 vs exact search, with real NQ-dev question embeddings over the real block embeddings, and on
    `--synthetic-size` clustered 128-d vectors (REALM's embedding size; the scale where approximate search
    matters);
(c) exact search: faiss Flat and torch exact (batched) vs the old transformers-REALM way, one fp32
    `einsum` + `topk` over the whole block matrix per question.
(d) refresh overhead and staleness are measured by the pre-training run itself (see README).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import tempfile
import time

import numpy as np
import torch

logger = logging.getLogger("bench_index")
RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
APPROXIMATE_TYPES = ["HNSW32", "IVF{nlist},PQ32", "IVF{nlist},PQ64", "IVF{nlist},PQ32,RFlat", "SQfp16"]


def timed(fn, repeats: int = 1):
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def recall(found: torch.Tensor, exact: torch.Tensor, k: int) -> float:
    hits = [len(set(f[:k].tolist()) & set(e[:k].tolist())) / k for f, e in zip(found, exact)]
    return float(np.mean(hits))


def index_bytes(index) -> int:
    with tempfile.TemporaryDirectory() as directory:
        index.backend.save(directory)
        return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))


def clustered_vectors(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim)).astype(np.float32)
    assignment = rng.integers(0, clusters, n)
    vectors = centers[assignment] + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    return vectors


def compare_types(blocks, embeddings: np.ndarray, queries: torch.Tensor, label: str, nlist: int) -> list[dict]:
    from realm_hf.index import RealmIndex

    rows = []
    exact_build, exact = timed(lambda: RealmIndex.from_embeddings(blocks, embeddings, index_type="Flat"))
    exact_time, (_, exact_ids) = timed(lambda: exact.search(queries, 100), repeats=3)
    rows.append({"data": label, "index_type": "Flat", "build_s": exact_build, "bytes_per_block": index_bytes(exact) / len(embeddings),
                 "qps": len(queries) / exact_time, "recall@5": 1.0, "recall@100": 1.0})
    for template in APPROXIMATE_TYPES:
        index_type = template.format(nlist=nlist)
        build_time, index = timed(lambda: RealmIndex.from_embeddings(blocks, embeddings, index_type=index_type))
        search_time, (_, ids) = timed(lambda: index.search(queries, 100), repeats=3)
        rows.append({
            "data": label, "index_type": index_type, "build_s": build_time,
            "bytes_per_block": index_bytes(index) / len(embeddings), "qps": len(queries) / search_time,
            "recall@5": recall(ids, exact_ids, 5), "recall@100": recall(ids, exact_ids, 100),
            "search_params": index.manifest.search_params if hasattr(index.manifest, "search_params") else None,
        })
        logger.info("%s %s: %s", label, index_type, rows[-1])
    for row in rows:
        row["qps_vs_exact"] = row["qps"] / rows[0]["qps"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wiki", default="../shared/data/wiki-2015/wiki-2015-00000-of-00008.jsonl.gz")
    parser.add_argument("--questions", default="../shared/data/qa/nq-dev.jsonl")
    parser.add_argument("--max-articles", type=int, default=300)
    parser.add_argument("--block-length", type=int, default=128)
    parser.add_argument("--num-questions", type=int, default=1000)
    parser.add_argument("--synthetic-size", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    import faiss
    from transformers import AutoTokenizer

    from realm_hf.corpus import load_articles, split_into_blocks
    from realm_hf.index import RealmIndex
    from realm_hf.index.embedding import embed_blocks
    from realm_hf.commands import load_retriever

    faiss.omp_set_num_threads(args.threads)
    retriever, tokenizer = load_retriever("minilm")
    articles = load_articles(args.wiki)
    articles = articles.select(range(min(args.max_articles, len(articles))))
    blocks = split_into_blocks(articles, tokenizer, max_length=args.block_length)
    results: dict = {"machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                                 "torch": torch.__version__, "faiss": faiss.__version__, "threads": args.threads,
                                 "load_average_at_start": os.getloadavg()},
                     "settings": vars(args), "num_blocks": len(blocks)}

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

    # real question embeddings
    with open(args.questions, encoding="utf-8") as f:
        questions = [json.loads(line)["question"] for _, line in zip(range(args.num_questions), f)]
    encoded = tokenizer(questions, padding=True, truncation=True, max_length=64, return_tensors="pt")
    with torch.no_grad():
        queries = retriever.embed_queries(encoded["input_ids"], encoded["attention_mask"]).float()  # [Q, D]

    # (b) index types on the real embeddings and on clustered synthetic vectors
    embeddings = index.embeddings if isinstance(index.embeddings, np.ndarray) else np.asarray(index.embeddings)
    rows = compare_types(blocks, np.ascontiguousarray(embeddings, dtype=np.float32), queries, "wiki-2015 real",
                         nlist=max(16, int(4 * np.sqrt(len(blocks)))))
    if args.synthetic_size:
        import datasets

        dim = 128  # REALM's projection size
        synthetic = clustered_vectors(args.synthetic_size, dim, clusters=1000, seed=0)
        # queries from the same clusters (same centers: seed 0), with their own noise
        synthetic_queries = torch.from_numpy(clustered_vectors(args.num_questions, dim, clusters=1000, seed=0)
                                             + 0.1 * np.random.default_rng(1).standard_normal((args.num_questions, dim)).astype(np.float32))
        fake_blocks = datasets.Dataset.from_dict({"block_id": np.arange(args.synthetic_size, dtype=np.int64)})
        rows += compare_types(fake_blocks, synthetic, synthetic_queries, f"{args.synthetic_size:,} synthetic", nlist=4096)
    results["index_types"] = rows

    # (c) exact search: batched (ours) vs per-question einsum + topk (the old transformers-REALM way)
    matrix = torch.from_numpy(np.ascontiguousarray(embeddings, dtype=np.float32))
    old_time, _ = timed(lambda: [torch.topk(torch.einsum("d,nd->n", q, matrix), 5) for q in queries])
    torch_index = RealmIndex.from_embeddings(blocks, np.ascontiguousarray(embeddings, dtype=np.float32), index_type="torch-exact")
    torch_time, _ = timed(lambda: torch_index.search(queries, 5), repeats=3)
    flat_time, _ = timed(lambda: index.search(queries, 5), repeats=3)
    results["exact"] = {"old_einsum_topk_qps": len(queries) / old_time, "torch_exact_qps": len(queries) / torch_time,
                        "faiss_flat_qps": len(queries) / flat_time}
    logger.info("exact: %s", results["exact"])
    write(results)


def write(results: dict) -> None:
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "index.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2, default=str)
    build, exact = results["build"], results["exact"]
    lines = [
        "# MIPS index benchmark", "",
        "Command: `HF_HUB_OFFLINE=1 python benchmarks/bench_index.py " + " ".join(
            f"--{k.replace('_', '-')} {v}" for k, v in results["settings"].items() if k in ("max_articles", "synthetic_size")) + "`", "",
        f"Machine: {results['machine']['cores']} cores, torch {results['machine']['torch']}, faiss {results['machine']['faiss']}, "
        f"{results['machine']['threads']} threads; load average at start {results['machine']['load_average_at_start']}. "
        f"{results['num_blocks']:,} wiki-2015 blocks (first {results['settings']['max_articles']} articles of shard 0, "
        f"≤ {results['settings']['block_length']} wordpieces), packaged MiniLM retriever, bf16 autocast.", "",
        "## Build", "",
        "| | seconds | blocks/s |", "|---|---:|---:|",
        f"| bare document-tower forward | {build['bare_forward_s']:.1f} | {build['bare_blocks_per_s']:.0f} |",
        f"| `RealmIndex.build` (embed + faiss Flat) | {build['realm_index_build_s']:.1f} | {build['blocks_per_s']:.0f} |",
        "", f"Overhead of the pipeline over the model's own forward: {100 * build['overhead']:+.1f}%.", "",
        "## Index types (recall vs exact search on the same vectors)", "",
        "| data | index | build s | bytes/block | queries/s | × exact | recall@5 | recall@100 |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["index_types"]:
        lines.append(f"| {row['data']} | {row['index_type']} | {row['build_s']:.1f} | {row['bytes_per_block']:.0f} | "
                     f"{row['qps']:.0f} | {row['qps_vs_exact']:.1f} | {row['recall@5']:.3f} | {row['recall@100']:.3f} |")
    lines += ["", "## Exact search, queries/s", "",
              "| old transformers-REALM (einsum + topk per question) | torch exact (batched) | faiss Flat (batched) |",
              "|---:|---:|---:|",
              f"| {exact['old_einsum_topk_qps']:.0f} | {exact['torch_exact_qps']:.0f} | {exact['faiss_flat_qps']:.0f} |", ""]
    with open(os.path.join(RESULTS, "index.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(6, 4))
        for data in sorted({r["data"] for r in results["index_types"]}):
            subset = [r for r in results["index_types"] if r["data"] == data]
            axis.scatter([r["recall@5"] for r in subset], [r["qps"] for r in subset], label=data)
            for r in subset:
                axis.annotate(r["index_type"], (r["recall@5"], r["qps"]), fontsize=7)
        axis.set_xlabel("recall@5 vs exact")
        axis.set_ylabel("queries/s (log)")
        axis.set_yscale("log")
        axis.legend()
        figure.tight_layout()
        figure.savefig(os.path.join(RESULTS, "index_recall_qps.png"), dpi=120)
    except ImportError:
        logger.info("matplotlib not installed; no plot")


if __name__ == "__main__":
    main()
