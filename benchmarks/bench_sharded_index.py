"""What one rank holds and how fast it searches: `ShardedRealmIndex` (each rank a contiguous shard, `search` a
collective that all_gathers the queries and merges the shards' top-k) vs every rank holding the whole `RealmIndex`.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_sharded_index.py --num-blocks 2000000

Synthetic float32 embeddings `--num-blocks` x `--dim` (standard normal, seeded) and a blocks dataset with only a
`block_id` column are indexed once with `RealmIndex.from_embeddings(..., index_type="torch-exact")` and saved with
`save_pretrained` into a temporary directory. Then, for each layout, `--world-size` real processes (gloo,
`torch.multiprocessing.spawn`, `torch.set_num_threads(1)` each) load it:

- whole: `RealmIndex.from_pretrained(dir, mmap=False)` on every rank (the vectors read into RAM);
- sharded: `ShardedRealmIndex.from_pretrained(dir, index_type="torch-exact")`, which memory-maps `embeddings.npy` and
  keeps a view of its rows (nothing is copied: the shard's pages become resident, file-backed, when a search first
  reads them), so its memory is measured after the searches too.

Per rank: VmRSS (with RssAnon / RssFile and VmHWM) from /proc/self/status before the load, after it and after the
searches, with the resident bytes of each mapped file from /proc/self/smaps; the latency of a search of `--batch`
queries and of 1 query, k=`--k` (median over `--repeats` after `--warmup`, a barrier before each so that the ranks
start together); and whether the sharded ids equal the whole index's for the same queries. The two layouts run one
after the other (the whole layout first), each in fresh processes, so neither's memory is counted in the other's.
As the machine may be shared, the sharded processes then also time, in `--interleaved-rounds` alternating rounds
under the same load, the sharded search, the whole index (loaded into RAM there too), and their shard searched alone
(no collective) for the W*B queries the collective gathers, memory-mapped and copied into RAM.

What a rank *holds* is the private memory (RssAnon) the load added plus the resident pages of the index files it
maps after the searches; the rest of its VmRSS growth is search scratch (score chunks, the allocator's cache, modules
imported on first use), constant in N. The held bytes are extrapolated linearly to `--target-blocks` (13.35M: the
paper's corpus) for 1, 2 and 8 ranks from the measured bytes per block, the scratch added as a constant: the whole
layout holds N blocks on every rank; for the sharded layout, the part that grows with the whole corpus on every rank
(the int64 `block_id` array of `ShardedRealmIndex.store` and the resident pages of the blocks' Arrow file) is
separated from the rest, which grows with the shard's N/W rows.

Writes benchmarks/results/<output-name>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp


HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
PAPER_BLOCKS = 13_350_000
MIB = 2**20
GIB = 2**30

logger = logging.getLogger("bench_sharded_index")


# ---------------------------------------------------------------------------------------------------- memory
def proc_status() -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, RssShmem and VmHWM of this process, in bytes."""
    fields = {}
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                fields[name] = int(value.split()[0]) * 1024
    return fields


def mapped_file_rss() -> dict[str, int]:
    """Resident bytes of each memory-mapped file of this process (from /proc/self/smaps)."""
    rss: dict[str, int] = {}
    path = None
    with open("/proc/self/smaps", encoding="utf-8") as f:
        for line in f:
            head = line.split()
            # a mapping's header: range perms offset dev inode [path]
            if head and "-" in head[0] and not head[0].endswith(":"):
                path = head[5] if len(head) > 5 and head[5].startswith("/") else None
            elif head and head[0] == "Rss:" and path is not None:
                rss[path] = rss.get(path, 0) + int(head[1]) * 1024
    return rss


def memory(index_dir: str) -> dict:
    """proc_status() plus the resident bytes of the index directory's files mapped by this process."""
    files = {
        os.path.relpath(path, index_dir): size
        for path, size in mapped_file_rss().items()
        if path.startswith(index_dir + os.sep) and size
    }
    return {**proc_status(), "index_files": files}


# ---------------------------------------------------------------------------------------------------- worker
def queries_of(rank: int, batch: int, dim: int, seed: int) -> torch.Tensor:
    """The queries rank `rank` searches (the same in both layouts)."""
    return torch.randn(batch, dim, generator=torch.Generator().manual_seed(seed + 1000 * (rank + 1)))  # [B, D]


def timed_searches(index, queries: torch.Tensor, k: int, warmup: int, repeats: int) -> dict:
    """Latencies (seconds) of `index.search(queries, k)`, a barrier before each call; the last call's hits."""
    times = []
    for _ in range(warmup + repeats):
        dist.barrier()
        began = time.perf_counter()
        scores, ids = index.search(queries, k)
        times.append(time.perf_counter() - began)
    measured = times[warmup:]
    return {
        "first_s": times[0],
        "warmup_s": times[:warmup],
        "median_s": statistics.median(measured),
        "mean_s": statistics.fmean(measured),
        "min_s": min(measured),
        "max_s": max(measured),
        "scores": scores,
        "ids": ids,
    }


def interleaved_latencies(sharded, index_dir: str, rank: int, args: argparse.Namespace) -> dict:
    r"""
    Latencies under the same load (the machine is shared), in alternating rounds in the sharded layout's processes
    after its memory is measured: the sharded search, the whole index in RAM, and this rank's shard searched alone
    (no collective) for the `W * B` queries the collective gathers, memory-mapped as loaded and copied into RAM.
    """
    from realm_hf.index import RealmIndex

    whole = RealmIndex.from_pretrained(index_dir, mmap=False)
    local = sharded.local
    local_in_ram = RealmIndex.from_embeddings(local.blocks, np.array(local.embeddings), index_type="torch-exact")
    results = {}
    for name, batch, seed in ((f"batch {args.batch}", args.batch, args.seed), ("1 query", 1, args.seed + 1)):
        own = queries_of(rank, batch, args.dim, seed)  # [B, D]
        gathered = torch.cat([queries_of(r, batch, args.dim, seed) for r in range(args.world_size)])  # [W*B, D]
        variants = {
            "sharded search (collective)": lambda: sharded.search(own, args.k),
            "whole index in RAM": lambda: whole.search(own, args.k),
            "shard alone, memory-mapped, W*B queries": lambda: local.search(gathered, args.k),
            "shard alone, copied to RAM, W*B queries": lambda: local_in_ram.search(gathered, args.k),
        }
        times: dict[str, list[float]] = {variant: [] for variant in variants}
        for round_ in range(1 + args.interleaved_rounds):  # round 0 warms up
            for variant, search in variants.items():
                dist.barrier()
                began = time.perf_counter()
                search()
                if round_:
                    times[variant].append(time.perf_counter() - began)
        results[name] = {variant: {"median_s": statistics.median(t), "all_s": t} for variant, t in times.items()}
    return results


def worker(rank: int, layout: str, port: int, index_dir: str, out_dir: str, args: argparse.Namespace) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ["HF_HUB_OFFLINE"] = "1"
    torch.set_num_threads(1)
    logging.getLogger("datasets").setLevel(logging.WARNING)
    from realm_hf.index import RealmIndex, ShardedRealmIndex

    dist.init_process_group("gloo", rank=rank, world_size=args.world_size)
    try:
        batch_queries = queries_of(rank, args.batch, args.dim, args.seed)
        single_query = queries_of(rank, 1, args.dim, args.seed + 1)
        dist.barrier()
        before = memory(index_dir)
        began = time.perf_counter()
        if layout == "whole":
            index = RealmIndex.from_pretrained(index_dir, mmap=False)
            embeddings, rows = index.embeddings, index.num_blocks
            global_arrays = 0
        else:
            index = ShardedRealmIndex.from_pretrained(index_dir, index_type="torch-exact")
            embeddings, rows = index.local.embeddings, index.local.num_blocks
            global_arrays = int(index.store.block_ids.nbytes)  # the whole corpus's ids, on every rank
        load_s = time.perf_counter() - began
        after_load = memory(index_dir)
        base = embeddings
        while getattr(base, "base", None) is not None and not isinstance(base, np.memmap):
            base = base.base
        searches = {
            f"batch {args.batch}": timed_searches(index, batch_queries, args.k, args.warmup, args.repeats),
            "1 query": timed_searches(index, single_query, args.k, args.warmup, args.repeats),
        }
        after_search = memory(index_dir)
        interleaved = interleaved_latencies(index, index_dir, rank, args) if layout == "sharded" else None
        result = {
            "layout": layout,
            "rank": rank,
            "rows_held": int(rows),
            "load_s": load_s,
            "embeddings": {
                "type": type(embeddings).__name__,
                "memory_mapped": isinstance(base, np.memmap),
                "owns_data": bool(embeddings.flags.owndata),
                "nbytes": int(embeddings.nbytes),
            },
            "global_arrays_nbytes": global_arrays,
            "memory": {"before_load": before, "after_load": after_load, "after_searches": after_search},
            "searches": {
                name: {key: value for key, value in timing.items() if key not in ("scores", "ids")}
                for name, timing in searches.items()
            },
            "interleaved": interleaved,
        }
        with open(os.path.join(out_dir, f"{layout}-rank{rank}.json"), "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
        np.savez(
            os.path.join(out_dir, f"{layout}-rank{rank}.npz"),
            **{f"{name}/ids": timing["ids"].numpy() for name, timing in searches.items()},
            **{f"{name}/scores": timing["scores"].numpy() for name, timing in searches.items()},
        )
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---------------------------------------------------------------------------------------------------- parent
def build_index(args: argparse.Namespace, directory: str) -> float:
    """Save a torch-exact index of seeded standard-normal embeddings; returns the seconds it took."""
    import datasets

    from realm_hf.index import RealmIndex

    began = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    embeddings = np.empty((args.num_blocks, args.dim), dtype=np.float32)  # [N, D]
    for start in range(0, args.num_blocks, 262_144):
        stop = min(start + 262_144, args.num_blocks)
        embeddings[start:stop] = rng.standard_normal((stop - start, args.dim), dtype=np.float32)
    blocks = datasets.Dataset.from_dict({"block_id": np.arange(args.num_blocks, dtype=np.int64)})
    RealmIndex.from_embeddings(blocks, embeddings, index_type="torch-exact").save_pretrained(directory)
    return time.perf_counter() - began


def machine() -> dict:
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next(line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.CalledProcessError, StopIteration):
        model = platform.processor() or platform.machine()
    with open("/proc/meminfo", encoding="utf-8") as f:
        total = int(next(line for line in f if line.startswith("MemTotal")).split()[1]) * 1024
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gib": round(total / GIB, 1),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads_per_process": 1,
        "load_average_at_start": list(os.getloadavg()),
    }


def held_bytes(rank: dict) -> dict:
    """What a rank holds (private RAM the load added + resident pages of the index files it maps, after the searches)
    and the rest of its VmRSS growth (search scratch, the allocator's cache, modules imported lazily)."""
    mem = rank["memory"]
    anon = mem["after_load"]["RssAnon"] - mem["before_load"]["RssAnon"]
    mapped = sum(mem["after_searches"]["index_files"].values())
    growth = mem["after_searches"]["VmRSS"] - mem["before_load"]["VmRSS"]
    return {"held": anon + mapped, "anon_added_by_load": anon, "index_files_resident": mapped,
            "scratch": growth - anon - mapped}


def extrapolate(
    ranks: list[dict], layout: str, num_blocks: int, world_size: int, target: int, counts: list[int]
) -> dict:
    """Per-rank bytes at `target` blocks for each rank count: what a rank holds, linear in the measured bytes per
    block, plus the measured search scratch as a constant."""
    held = [held_bytes(r) for r in ranks]
    scratch = max(h["scratch"] for h in held)
    if layout == "whole":
        per_block = max(h["held"] for h in held) / num_blocks
        return {
            "bytes_per_block": per_block,
            "scratch_bytes": scratch,
            "per_rank_bytes": {str(w): per_block * target + scratch for w in counts},
            "model": "held / N per block on every rank (each holds all blocks), + the measured scratch",
        }
    # on every rank: the whole corpus's int64 block ids + the resident pages of the blocks' Arrow file
    corpus = max(
        r["global_arrays_nbytes"]
        + sum(size for name, size in r["memory"]["after_searches"]["index_files"].items() if name.startswith("blocks"))
        for r in ranks
    )
    per_corpus_block = corpus / num_blocks
    per_shard_block = max(h["held"] for h in held) - corpus
    per_shard_block /= num_blocks / world_size
    return {
        "bytes_per_corpus_block": per_corpus_block,
        "bytes_per_shard_block": per_shard_block,
        "scratch_bytes": scratch,
        "per_rank_bytes": {
            str(w): per_corpus_block * target + per_shard_block * target / w + scratch for w in counts
        },
        "model": "held = a * N (whole-corpus block ids + the blocks' Arrow pages, on every rank) + b * N/W (the "
        "shard: its vectors, its ids, ...), + the measured scratch",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--num-blocks", type=int, default=2_000_000, help="N synthetic blocks")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--world-size", type=int, default=2, help="gloo processes")
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64, help="queries per rank in the batched search")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--interleaved-rounds", type=int, default=8,
                        help="rounds of the interleaved latency comparison in the sharded processes (0: skip)")
    parser.add_argument("--target-blocks", type=int, default=PAPER_BLOCKS, help="extrapolate to this many blocks")
    parser.add_argument("--extrapolate-ranks", default="1,2,8")
    parser.add_argument("--tmp-dir", default=None, help="where the index is saved (deleted at the end)")
    parser.add_argument("--output-name", default="sharded-index", help="results/<name>.json and .md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    started = time.perf_counter()
    info = machine()
    tmp = tempfile.mkdtemp(prefix="bench-sharded-", dir=args.tmp_dir)
    try:
        index_dir = os.path.join(os.path.realpath(tmp), "index")
        build_s = build_index(args, index_dir)
        logger.info("Saved %d x %d embeddings in %.1fs", args.num_blocks, args.dim, build_s)
        out_dir = os.path.join(tmp, "out")
        os.makedirs(out_dir)
        layouts = {}
        for layout in ("whole", "sharded"):
            began = time.perf_counter()
            mp.spawn(worker, args=(layout, free_port(), index_dir, out_dir, args), nprocs=args.world_size, join=True)
            ranks = []
            for rank in range(args.world_size):
                with open(os.path.join(out_dir, f"{layout}-rank{rank}.json"), encoding="utf-8") as f:
                    ranks.append(json.load(f))
            for rank in ranks:
                rank["held"] = held_bytes(rank)
            layouts[layout] = ranks
            logger.info("%s layout: %.1fs", layout, time.perf_counter() - began)
        # the sharded top-k vs the whole index's, for the same queries of each rank
        agreement = {}
        for rank in range(args.world_size):
            whole = np.load(os.path.join(out_dir, f"whole-rank{rank}.npz"))
            sharded = np.load(os.path.join(out_dir, f"sharded-rank{rank}.npz"))
            for name in (f"batch {args.batch}", "1 query"):
                same = whole[f"{name}/ids"] == sharded[f"{name}/ids"]
                agreement[f"rank {rank}, {name}"] = {
                    "ids_equal": bool(same.all()),
                    "differing_ids": int((~same).sum()),
                    "max_abs_score_diff": float(np.abs(whole[f"{name}/scores"] - sharded[f"{name}/scores"]).max()),
                }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    counts = [int(w) for w in args.extrapolate_ranks.split(",")]
    results = {
        "command": " ".join(["python", os.path.relpath(sys.argv[0], os.path.dirname(HERE)), *sys.argv[1:]]),
        "machine": info,
        "settings": vars(args),
        "index_build_and_save_s": build_s,
        "layouts": layouts,
        "ids_agreement": agreement,
        "extrapolation": {
            "note": f"Linear extrapolation from the measured bytes per block at N={args.num_blocks:,}, not a "
            "measurement",
            "target_blocks": args.target_blocks,
            **{layout: extrapolate(ranks, layout, args.num_blocks, args.world_size, args.target_blocks, counts)
               for layout, ranks in layouts.items()},
        },
        "total_s": time.perf_counter() - started,
    }
    write(results, args.output_name)


def write(results: dict, name: str) -> None:
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
    settings, info, extra = results["settings"], results["machine"], results["extrapolation"]
    batch = f"batch {settings['batch']}"
    lines = [
        f"# Sharded vs whole index, per rank ({settings['world_size']} gloo processes)", "",
        f"`{results['command']}` ({results['total_s'] / 60:.1f} min): {settings['num_blocks']:,} × {settings['dim']} "
        f"float32 synthetic blocks, torch-exact, k={settings['k']}, median of {settings['repeats']} after "
        f"{settings['warmup']} warm-ups. Machine: {info['cpu']}, {info['cores']} cores (shared: load average "
        f"{info['load_average_at_start'][0]:.1f} at start), {info['memory_gib']} GiB, 1 thread per process, "
        f"torch {info['torch']}.", "",
        f"| layout | rank | rows held | VmRSS MiB before load | after load | after searches | index files mapped "
        f"MiB | held MiB | load s | {batch} ms | 1 query ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for layout, ranks in results["layouts"].items():
        for r in ranks:
            mem = r["memory"]
            lines.append(
                f"| {layout} | {r['rank']} | {r['rows_held']:,} | {mem['before_load']['VmRSS'] / MIB:.0f} | "
                f"{mem['after_load']['VmRSS'] / MIB:.0f} | {mem['after_searches']['VmRSS'] / MIB:.0f} | "
                f"{r['held']['index_files_resident'] / MIB:.0f} | {r['held']['held'] / MIB:.0f} | {r['load_s']:.1f} | "
                f"{1000 * r['searches'][batch]['median_s']:.0f} | {1000 * r['searches']['1 query']['median_s']:.0f} |"
            )
    agreement = results["ids_agreement"]
    equal = all(a["ids_equal"] for a in agreement.values())
    gib = {layout: {w: b / GIB for w, b in extra[layout]["per_rank_bytes"].items()} for layout in ("whole", "sharded")}
    counts = list(gib["whole"])
    sharded0 = results["layouts"]["sharded"][0]
    lines += [
        "",
        f"- The sharded top-{settings['k']} ids {'equal' if equal else 'DIFFER from'} the whole index's for every "
        f"rank's queries ({sum(a['differing_ids'] for a in agreement.values())} differing ids).",
        "- `ShardedRealmIndex.from_pretrained` "
        f"{'memory-maps' if sharded0['embeddings']['memory_mapped'] else 'copies'}"
        " its shard of embeddings.npy: its vectors count in RSS as file-backed page-cache pages once a search has read"
        " them (shared with the page cache, evictable, not private RAM); the whole layout reads them into anonymous "
        "RAM.",
        f"- **Extrapolation, not a measurement** (linear in the measured bytes per block) to "
        f"{extra['target_blocks'] / 1e6:.2f}M × {settings['dim']} blocks, GiB per rank for "
        f"{' / '.join(counts)} ranks: whole {' / '.join(f'{v:.1f}' for v in gib['whole'].values())}; sharded "
        f"{' / '.join(f'{v:.1f}' for v in gib['sharded'].values())} (sharded: "
        f"{extra['sharded']['bytes_per_shard_block']:.0f} B per shard block + "
        f"{extra['sharded']['bytes_per_corpus_block']:.0f} B per corpus block on every rank; whole: "
        f"{extra['whole']['bytes_per_block']:.0f} B per block; each + its measured search scratch, "
        f"{extra['sharded']['scratch_bytes'] / MIB:.0f} / {extra['whole']['scratch_bytes'] / MIB:.0f} MiB). "
        "*Held* = the private RAM the load added + the resident pages of the mapped index files.",
    ]
    interleaved = sharded0.get("interleaved")
    if interleaved:
        def ms(variant: str) -> str:
            return " / ".join(
                f"{1000 * max(r['interleaved'][q][variant]['median_s'] for r in results['layouts']['sharded']):.0f}"
                for q in (batch, "1 query")
            )

        lines.append(
            f"- Same load, {settings['interleaved_rounds']} alternating rounds (median ms of the slower rank, {batch} "
            f"/ 1 query): sharded {ms('sharded search (collective)')}; whole in RAM {ms('whole index in RAM')}; "
            f"the shard alone for the {settings['world_size']}×-gathered queries, no collective: memory-mapped "
            f"{ms('shard alone, memory-mapped, W*B queries')}, copied to RAM "
            f"{ms('shard alone, copied to RAM, W*B queries')}."
        )
    with open(os.path.join(RESULTS, f"{name}.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
