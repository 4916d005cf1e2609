"""Converting an old transformers-REALM Open-QA checkpoint at the paper's corpus size (13,353,718 blocks) on a laptop-
class machine (2 cores, 24 GB), then searching and answering from it.

Stages (each rerunnable on its own; every figure is written to benchmarks/results/convert-13m.json as it comes, and
convert-13m.md is rewritten from the JSON at the end of every stage). Big data lives under --workdir (default
/work/bench13m), never in the repository; logs under <workdir>/logs. The library runs from a clean clone,
<workdir>/clone (`git clone /work/main <workdir>/clone`, `python3 -m venv .venv`,
`pip install torch==2.13.0 -e ".[faiss-cpu,bench]"`); `generate` needs `realm_hf.convert.block_records` and the
transformers-4.57 venv (--old-python) for the old classes. What was run for convert-13m.json (2026-12-01):

    # 1. synthetic old-format checkpoint: block_records.npy (np.save of an object array of bytes, streamed by
    #    realm_hf.convert.block_records.write_block_records), and an OLD RealmForOpenQA (BERT-base towers, random
    #    weights) whose block_emb buffer holds clustered synthetic embeddings, saved by the old classes
    python benchmarks/bench_convert_13m.py --stage generate --num-blocks 13353718 \
        --old-python /work/oldrealm-venv/bin/python
    # 2. realm-hf convert --src <workdir>/old --output <workdir>/converted under /usr/bin/time -v. The default index
    #    type at this size ("compressed") was extrapolated to take 1.5-3 h on 2 cores, so the full size ran with
    #    torch-exact (drop --index-type to measure the default where there is time)
    clone/.venv/bin/python benchmarks/bench_convert_13m.py --stage convert --index-type torch-exact
    # 3. index types over <workdir>/converted/index/embeddings.npy: exact and IVF4096,SQ8 at full size, the
    #    compressed preset and HNSW32 on the first rows (extrapolated, marked)
    clone/.venv/bin/python benchmarks/bench_convert_13m.py --stage indexes --only torch-exact,compressed,HNSW32 \
        --compressed-sizes 500000,1000000 --hnsw-sizes 100000,250000
    clone/.venv/bin/python benchmarks/bench_convert_13m.py --stage indexes --only IVF
    clone/.venv/bin/python benchmarks/bench_convert_13m.py --stage indexes --only HNSW32 --hnsw-sizes 100000,250000,1000000
    # 4. realm-hf ask and pipeline("realm-open-qa", batch_size=8) over the converted folder (RSS, seconds/question)
    clone/.venv/bin/python benchmarks/bench_convert_13m.py --stage ask
    # 5. the old classes (RealmForOpenQA + RealmRetriever, np.load(allow_pickle=True)) at sizes that fit
    clone/.venv/bin/python benchmarks/bench_convert_13m.py --stage old --old-sizes 500000,1000000 \
        --old-python /work/oldrealm-venv/bin/python
    # not run for lack of time: the 1M isotropic worst case (--stage indexes --only isotropic)

A dry run elsewhere: --workdir /tmp/dry --num-blocks 300000 --name dry (results/dry.json; delete it after).

Synthetic data (documented in the JSON's "generator" section):
- record lengths: sampled (seeded) from the UTF-8 byte lengths of the block bodies that
  `realm_hf.corpus.split_into_blocks` (288 wordpieces, [CLS] title [SEP] body [SEP]) cuts from 2,000 wiki-2015
  articles (250 from the start of each of the 8 shards) with the packaged MiniLM BERT-uncased tokenizer;
- record text: a slice of that many bytes (one to three fewer where that would cut a UTF-8 character), starting at
  a word boundary, of a seeded pool of words drawn from
  the tokenizer's whole-word vocabulary (no '##' pieces, no special tokens), each word weighted by its count in those
  wiki blocks + 1;
- block_emb: a mixture of 16,384 Gaussian clusters in 128 dims: centers N(0, I), cluster weights lognormal(0, 1),
  each cluster's noise scale uniform in [0.3, 0.6] per dimension; written 1M rows at a time, row chunk c seeded
  by (seed, c), so the first n rows of every size are the same;
- queries: 2,000 vectors from the same mixture (same centers, weights and scales), with their own noise seed: near
  the document vectors of their cluster, equal to none;
- worst case: 1M isotropic N(0, I) vectors, queries N(0, I).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import logging
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
NAME = "convert-13m"
PAPER_BLOCKS = 13_353_718
DIM = 128
NUM_CENTERS = 16_384
EMB_CHUNK = 1_000_000
SEED = 13
WIKI = Path("/work/shared/data/wiki-2015")

logger = logging.getLogger("bench_convert_13m")


# ----------------------------------------------------------------------------------------------------------- results

def results_path() -> Path:
    return RESULTS / f"{NAME}.json"


def load_results() -> dict[str, Any]:
    path = results_path()
    if path.exists():
        return json.loads(path.read_text())
    return {}


def update_results(section: str, values: dict[str, Any]) -> dict[str, Any]:
    """Merge `values` into `results[section]` and write the JSON at once (figures land as they come)."""
    results = load_results()
    results.setdefault(section, {}).update(values)
    results["updated"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    RESULTS.mkdir(parents=True, exist_ok=True)
    tmp = results_path().with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n")
    tmp.replace(results_path())
    return results


def machine_info() -> dict[str, Any]:
    model = platform.processor()
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    return {"cpu": model, "cores": os.cpu_count(), "ram_gib": round(mem / 2**30, 1),
            "python": platform.python_version(), "date": datetime.date.today().isoformat()}


def du_bytes(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


class RssPoller:
    """Peak RSS of this process (and of its children, summed) sampled every `interval` seconds in a thread."""

    def __init__(self, interval: float = 0.2, pid: int | None = None) -> None:
        import psutil

        self.process = psutil.Process(pid or os.getpid())
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> int:
        import psutil

        total = 0
        try:
            total = self.process.memory_info().rss
            for child in self.process.children(recursive=True):
                try:
                    total += child.memory_info().rss
                except psutil.Error:
                    pass
        except psutil.Error:
            pass
        self.peak = max(self.peak, total)
        return total

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> RssPoller:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def current_rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_self() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


GB = 1e9


# --------------------------------------------------------------------------------------------------------- generator

def minilm_dir() -> str:
    from realm_hf.modeling.initial_weights import packaged_minilm_path

    return packaged_minilm_path()


def wiki_articles(per_shard: int = 250) -> list[dict[str, str]]:
    articles = []
    for shard in sorted(WIKI.glob("*.jsonl.gz")):
        with gzip.open(shard, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f):
                if i >= per_shard:
                    break
                row = json.loads(line)
                articles.append({"id": str(row["id"]), "title": row["title"], "text": row["text"]})
    return articles


def measure_lengths(workdir: Path) -> dict[str, Any]:
    """Byte lengths of real 288-wordpiece block bodies, and the word weights of the synthetic text."""
    from transformers import AutoTokenizer

    from realm_hf.corpus import split_into_blocks

    out = workdir / "lengths.npz"
    if out.exists():
        data = np.load(out)
        return {"lengths": data["lengths"], "word_ids": data["word_ids"], "word_weights": data["word_weights"],
                "tokens": data["tokens"], "title_lengths": data["title_lengths"]}
    began = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir(), use_fast=True)
    articles = wiki_articles()
    blocks = split_into_blocks(articles, tokenizer, max_length=288, cache_dir=str(workdir / "cache"))
    texts = blocks["text"]
    titles = blocks["title"]
    lengths = np.array([len(t.encode("utf-8")) for t in texts], dtype=np.int64)
    title_lengths = np.array([len(t.encode("utf-8")) for t in titles], dtype=np.int64)
    tokens = np.array([len(ids) for ids in blocks["input_ids"]], dtype=np.int64)
    vocab = tokenizer.get_vocab()
    inv = {i: w for w, i in vocab.items()}
    counts = np.zeros(len(inv), dtype=np.float64)
    for ids in blocks["input_ids"]:
        np.add.at(counts, np.asarray(ids), 1)
    word_ids = np.array(sorted(i for i, w in inv.items()
                               if not w.startswith("##") and not (w.startswith("[") and w.endswith("]"))))
    word_weights = counts[word_ids] + 1.0
    np.savez(out, lengths=lengths, word_ids=word_ids, word_weights=word_weights, tokens=tokens,
             title_lengths=title_lengths)
    logger.info("measured %d blocks of %d articles in %.1fs", len(lengths), len(articles), time.perf_counter() - began)
    return {"lengths": lengths, "word_ids": word_ids, "word_weights": word_weights, "tokens": tokens,
            "title_lengths": title_lengths, "articles": len(articles)}


class RecordSource:
    """Seeded synthetic block records: lengths from the empirical distribution, text from a pool of vocab words."""

    def __init__(self, lengths: np.ndarray, word_ids: np.ndarray, word_weights: np.ndarray, vocab: list[str],
                 seed: int = SEED, pool_words: int = 12_000_000) -> None:
        rng = np.random.default_rng(seed)
        self.lengths = lengths
        p = word_weights / word_weights.sum()
        words = rng.choice(word_ids, size=pool_words, p=p)
        encoded = [vocab[i].encode("utf-8") + b" " for i in range(len(vocab))]
        pieces = [encoded[i] for i in words.tolist()]
        self.pool = b"".join(pieces)
        sizes = np.fromiter((len(x) for x in pieces), dtype=np.int64, count=len(pieces))
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.starts = starts[starts < len(self.pool) - int(lengths.max()) - 1]
        self.seed = seed

    def iter_records(self, num_records: int, chunk: int = 1_000_000):
        """Record i is the same for every `num_records` (chunk c seeded by (seed, c))."""
        pool = self.pool
        for c, begin in enumerate(range(0, num_records, chunk)):
            n = min(chunk, num_records - begin)
            rng = np.random.default_rng((self.seed, 1, c))
            lens = rng.choice(self.lengths, size=n).tolist()
            offs = self.starts[rng.integers(0, len(self.starts), size=n)].tolist()
            for off, ln in zip(offs, lens):
                end = off + ln
                while pool[end] & 0xC0 == 0x80:  # never cut a UTF-8 character (real records are valid UTF-8)
                    end -= 1
                yield pool[off:end]


def mixture(seed: int = SEED):
    rng = np.random.default_rng((seed, 2))
    centers = rng.standard_normal((NUM_CENTERS, DIM)).astype(np.float32)
    weights = rng.lognormal(0.0, 1.0, NUM_CENTERS)
    weights /= weights.sum()
    scales = rng.uniform(0.3, 0.6, NUM_CENTERS).astype(np.float32)
    return centers, weights, scales


def mixture_rows(n: int, rng: np.random.Generator, centers, weights, scales) -> np.ndarray:
    assign = rng.choice(NUM_CENTERS, size=n, p=weights)
    noise = rng.standard_normal((n, DIM), dtype=np.float32)
    noise *= scales[assign, None]
    noise += centers[assign]
    return noise


def embedding_chunks(num_rows: int, seed: int = SEED):
    """(start, rows [C, 128] float32) chunks of the synthetic block embeddings."""
    centers, weights, scales = mixture(seed)
    for c, start in enumerate(range(0, num_rows, EMB_CHUNK)):
        n = min(EMB_CHUNK, num_rows - start)
        yield start, mixture_rows(n, np.random.default_rng((seed, 3, c)), centers, weights, scales)


def query_vectors(num: int = 2000, seed: int = SEED) -> np.ndarray:
    centers, weights, scales = mixture(seed)
    return mixture_rows(num, np.random.default_rng((seed, 4)), centers, weights, scales)


def isotropic(n: int, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng((seed, 5))
    return rng.standard_normal((n, DIM), dtype=np.float32), rng.standard_normal((2000, DIM), dtype=np.float32)


def vocab_list(tokenizer_dir: str) -> list[str]:
    with open(os.path.join(tokenizer_dir, "vocab.txt"), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def stage_generate(args: argparse.Namespace) -> None:
    from realm_hf.convert.block_records_writer import write_block_records

    workdir = Path(args.workdir)
    old = workdir / "old"
    old.mkdir(parents=True, exist_ok=True)
    n = args.num_blocks
    update_results("machine", machine_info())
    began = time.perf_counter()
    m = measure_lengths(workdir)
    lengths = m["lengths"]
    measure_s = time.perf_counter() - began
    tok_dir = minilm_dir()
    source = RecordSource(lengths, m["word_ids"], m["word_weights"], vocab_list(tok_dir))
    update_results("generator", {
        "num_blocks": n,
        "length_sample": {"articles": 2000, "blocks": int(len(lengths)), "seconds": round(measure_s, 1),
                          "body_bytes_mean": float(lengths.mean()),
                          "body_bytes_percentiles_1_5_50_95_99": np.percentile(lengths, [1, 5, 50, 95, 99]).tolist(),
                          "title_bytes_mean": float(m["title_lengths"].mean()),
                          "wordpieces_per_block_mean": float(m["tokens"].mean())},
        "records": "body lengths sampled from the wiki-2015 288-wordpiece blocks; text = slices of a seeded pool of "
                   "12M whole-word vocab entries weighted by their wiki count + 1 (module docstring)",
        "embeddings": f"mixture of {NUM_CENTERS} Gaussians in {DIM} dims: centers N(0,I), weights lognormal(0,1), "
                      "noise scale U[0.3,0.6] per cluster; chunk c of 1M rows seeded (13, 3, c)",
        "queries": "2000 from the same mixture, own seed (13, 4)",
    })
    # how the synthetic records tokenize
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tok_dir, use_fast=True)
    sample = [r.decode("utf-8", "replace") for _, r in zip(range(2000), source.iter_records(2000))]
    wp = [len(x) for x in tokenizer(sample, add_special_tokens=False)["input_ids"]]
    update_results("generator", {"synthetic_wordpieces_per_record_mean": float(np.mean(wp)),
                                 "synthetic_record_example": sample[0][:200]})

    records = old / "block_records.npy"
    if not records.exists() or args.force:
        tmp = old / "block_records.npy.tmp"
        began = time.perf_counter()
        total_bytes = 0

        def counted():
            nonlocal total_bytes
            for r in source.iter_records(n):
                total_bytes += len(r)
                yield r

        write_block_records(tmp, counted(), n)
        tmp.replace(records)
        seconds = time.perf_counter() - began
        update_results("generator", {
            "block_records_seconds": round(seconds, 1), "block_records_file_bytes": records.stat().st_size,
            "record_text_bytes_total": total_bytes, "record_bytes_mean": total_bytes / n,
            "block_records_peak_rss_bytes": peak_rss_self()})
        logger.info("wrote %s (%d records, %.1f GB) in %.1fs", records, n, records.stat().st_size / GB, seconds)
    np.save(workdir / "queries.npy", query_vectors())
    if not (old / "pytorch_model.bin").exists() or args.force:
        began = time.perf_counter()
        subprocess.run([args.old_python, __file__, "--stage", "generate-model", "--workdir", str(workdir),
                        "--num-blocks", str(n), "--tokenizer-dir", tok_dir, "--name", NAME], check=True)
        update_results("generator", {"old_model_subprocess_seconds": round(time.perf_counter() - began, 1)})
    update_results("generator", {"old_dir_bytes": du_bytes(old)})


def bert_base_old_config(num_blocks: int):
    from transformers.models.deprecated.realm import RealmConfig

    return RealmConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                       intermediate_size=3072, retriever_proj_size=128, num_block_records=num_blocks,
                       searcher_beam_size=5000, reader_beam_size=5)


def save_old_openqa(num_blocks: int, out: Path, tokenizer_dir: str, log_section: str) -> dict[str, float]:
    """An OLD RealmForOpenQA (BERT-base towers, random weights) with the synthetic block_emb, saved by the old
    classes (`save_pretrained(safe_serialization=False)`, one pytorch_model.bin) with its RealmTokenizer."""
    import torch
    from transformers.models.deprecated.realm import RealmForOpenQA, RealmTokenizer

    torch.manual_seed(SEED)
    times = {}
    began = time.perf_counter()
    model = RealmForOpenQA(bert_base_old_config(num_blocks)).eval()
    times["init_seconds"] = time.perf_counter() - began
    began = time.perf_counter()
    with torch.no_grad():
        for start, rows in embedding_chunks(num_blocks):
            model.block_emb[start:start + len(rows)] = torch.from_numpy(rows)
    times["embeddings_seconds"] = time.perf_counter() - began
    began = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=False, max_shard_size="1000GB")
    RealmTokenizer(vocab_file=os.path.join(tokenizer_dir, "vocab.txt"), do_lower_case=True).save_pretrained(out)
    times["save_seconds"] = time.perf_counter() - began
    times["peak_rss_bytes"] = peak_rss_self()
    times["pytorch_model_bin_bytes"] = (out / "pytorch_model.bin").stat().st_size
    times["parameters"] = sum(p.numel() for p in model.parameters())
    update_results(log_section, {f"old_model_{k}": (round(v, 1) if isinstance(v, float) else v)
                                 for k, v in times.items()})
    return times


def stage_generate_model(args: argparse.Namespace) -> None:
    save_old_openqa(args.num_blocks, Path(args.workdir) / "old", args.tokenizer_dir, "generator")


# ---------------------------------------------------------------------------------------------------------- convert

def clone_python(workdir: Path) -> str:
    return str(workdir / "clone" / ".venv" / "bin" / "python")


def git_commit(repo: Path) -> str:
    return subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%H %s"], capture_output=True, text=True,
                          check=True).stdout.strip()[:120]


def timed_command(command: list[str], log_path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `command` under /usr/bin/time -v, its output timestamped (seconds since start) line by line (tqdm's \\r
    updates too) into `log_path`; returns wall seconds, peak RSS, file system output and the rc."""
    began = time.perf_counter()
    stats_file = log_path.with_suffix(".time")
    proc = subprocess.Popen(["/usr/bin/time", "-v", "-o", str(stats_file), *command], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + " ".join(command) + "\n")
        buffer = b""
        while True:
            chunk = proc.stdout.read1(65536) if hasattr(proc.stdout, "read1") else proc.stdout.read(65536)
            if not chunk:
                break
            buffer += chunk
            parts = re.split(rb"[\r\n]", buffer)
            buffer = parts.pop()
            stamp = time.perf_counter() - began
            for part in parts:
                if part.strip():
                    log.write(f"[{stamp:8.1f}s] {part.decode('utf-8', 'replace')}\n")
            log.flush()
        if buffer.strip():
            log.write(f"[{time.perf_counter() - began:8.1f}s] {buffer.decode('utf-8', 'replace')}\n")
    rc = proc.wait()
    seconds = time.perf_counter() - began
    stats = stats_file.read_text() if stats_file.exists() else ""

    def field(name: str) -> int | None:
        match = re.search(rf"{re.escape(name)}: (\d+)", stats)
        return int(match.group(1)) if match else None

    kb = field("Maximum resident set size (kbytes)")
    outputs = field("File system outputs")
    return {"rc": rc, "wall_seconds": round(seconds, 1), "peak_rss_bytes": kb * 1024 if kb else None,
            "fs_output_bytes": outputs * 512 if outputs is not None else None,
            "user_seconds": float(re.search(r"User time \(seconds\): ([\d.]+)", stats).group(1)) if stats else None,
            "system_seconds": float(re.search(r"System time \(seconds\): ([\d.]+)", stats).group(1)) if stats else None}


def log_phases(log_path: Path) -> dict[str, float]:
    """When each part of the conversion started, from the timestamped log (first line mentioning it)."""
    marks = {"block_records": "Block records", "embeddings": "Block embeddings", "wrote_blocks_and_embeddings": "Wrote ",
             "faiss_training": "Training faiss", "faiss_add": "faiss add", "converted_corpus": "Converted the corpus",
             "saving_index": "index.faiss", "model": "RealmForOpenQA"}
    found: dict[str, float] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        match = re.match(r"\[\s*([\d.]+)s\] (.*)", line)
        if not match:
            continue
        for key, text in marks.items():
            if key not in found and text in match.group(2):
                found[key] = float(match.group(1))
    last = None
    for line in log_path.read_text(errors="replace").splitlines():
        match = re.match(r"\[\s*([\d.]+)s\]", line)
        if match:
            last = float(match.group(1))
    if last is not None:
        found["end"] = last
    return found


def stage_convert(args: argparse.Namespace) -> None:
    workdir = Path(args.workdir)
    out = workdir / "converted"
    if out.exists():
        if not args.force:
            raise SystemExit(f"{out} exists (--force replaces it)")
        shutil.rmtree(out)
    clone = workdir / "clone"
    realm_hf_cli = str(clone / ".venv" / "bin" / "realm-hf")
    free_before = shutil.disk_usage(workdir).free
    update_results("convert", {"clone_commit": git_commit(clone), "command": f"realm-hf convert --src {workdir}/old "
                               f"--output {out}", "started": datetime.datetime.now().isoformat(timespec="seconds")})
    extra = ["--index-type", args.index_type] if args.index_type else []
    result = timed_command([realm_hf_cli, "convert", "--src", str(workdir / "old"), "--output", str(out), *extra],
                           workdir / "logs" / "convert.log", env={"HF_HUB_OFFLINE": "1"})
    result["disk_free_delta_bytes"] = free_before - shutil.disk_usage(workdir).free
    if out.exists():
        result["output_bytes"] = du_bytes(out)
        result["output_files"] = {str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*"))
                                  if p.is_file() and p.stat().st_size > 1_000_000}
        manifest = out / "index" / "manifest.json"
        if manifest.exists():
            data = json.loads(manifest.read_text())
            result["index_type"] = data.get("index_type")
            result["search_params"] = data.get("search_params")
            result["num_blocks"] = data.get("num_blocks")
    result["phases_started_at_seconds"] = log_phases(workdir / "logs" / "convert.log")
    update_results("convert", result)


# ---------------------------------------------------------------------------------------------------------- indexes

def recall_at(found: np.ndarray, exact: np.ndarray, k: int) -> float:
    hits = [len(set(f[:k].tolist()) & set(e[:k].tolist())) for f, e in zip(found, exact)]
    return float(np.mean(hits) / k)


def throughput(fn, queries, batch: int, max_queries: int, min_seconds: float = 2.0, max_seconds: float = 60.0):
    """Queries/s of `fn(queries[i:i+batch])` over up to `max_queries` queries (after one warm-up batch), stopping
    early after `max_seconds`; at least `min_seconds` of work unless the queries run out."""
    fn(queries[:batch])
    done, began = 0, time.perf_counter()
    while done < max_queries:
        fn(queries[done % len(queries):done % len(queries) + batch])
        done += batch
        elapsed = time.perf_counter() - began
        if elapsed > max_seconds or (elapsed > min_seconds and done >= 4 * batch and done >= max_queries // 4):
            break
    return done / (time.perf_counter() - began), done


def ids_of(search, queries, k: int, batch: int = 64) -> np.ndarray:
    out = []
    for start in range(0, len(queries), batch):
        out.append(np.asarray(search(queries[start:start + batch], k)))
    return np.concatenate(out)


def exact_truth(embeddings: np.ndarray, queries, k: int, cache: Path) -> tuple[np.ndarray, float]:
    """Exact top-k ids by chunked torch matmul + topk (the torch-exact backend's way), cached."""
    import torch

    from realm_hf.index.backends import TorchExactBackend

    if cache.exists():
        data = np.load(cache)
        return data["ids"], float(data["seconds"])
    backend = TorchExactBackend(embeddings, np.arange(len(embeddings)), chunk_size=262_144)
    began = time.perf_counter()
    ids = []
    for start in range(0, len(queries), 500):
        ids.append(backend.search(queries[start:start + 500], k)[1].numpy())
    seconds = time.perf_counter() - began
    ids = np.concatenate(ids)
    np.savez(cache, ids=ids, seconds=seconds)
    return ids, seconds


def faiss_bytes(index: Any, path: Path) -> int:
    import faiss

    faiss.write_index(index, str(path))
    size = path.stat().st_size
    path.unlink()
    return size


def measure_index(name: str, index, bare, queries, truth: np.ndarray, num_blocks: int, row: dict[str, Any],
                  batch1_queries: int = 200) -> dict[str, Any]:
    """recall@5/20/100 vs exact, queries/s at batch 1 and 64 (k=5), RealmIndex.search vs the bare call."""
    search_ids = lambda q, k: index.search(q, k)[1].numpy()  # noqa: E731
    began = time.perf_counter()
    found = ids_of(search_ids, queries, 100)
    row["recall_search_seconds_batch64_k100"] = round(time.perf_counter() - began, 2)
    for k in (5, 20, 100):
        row[f"recall@{k}"] = round(recall_at(found, truth, k), 4)
    for batch, limit in ((1, batch1_queries), (64, len(queries))):
        qps, n = throughput(lambda q: index.search(q, 5), queries, batch, limit)
        row[f"qps_batch{batch}"] = round(qps, 2)
        if bare is not None:
            bare_qps, _ = throughput(bare, queries, batch, limit)
            row[f"bare_qps_batch{batch}"] = round(bare_qps, 2)
            row[f"search_over_bare_batch{batch}"] = round(bare_qps / qps, 3)
        row[f"timed_queries_batch{batch}"] = n
    row["num_blocks"] = num_blocks
    logger.info("%s: %s", name, row)
    return row


class LogTimes(logging.Handler):
    """Seconds (perf_counter) at which log messages containing given words were first emitted."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        for word in ("Training faiss", "Built "):
            if word in message and word not in self.seen:
                self.seen[word] = time.perf_counter()


def timed_build(build) -> tuple[Any, dict[str, float]]:
    """Run `build()`; returns its result and the seconds before faiss training, of training (the preset's
    `train` call, timed by wrapping it), and the rest (adding the vectors)."""
    import realm_hf.index.backends as backends

    times: dict[str, float] = {}
    original = backends.compressed_faiss_index

    def wrapped(dim: int, num_vectors: int) -> Any:
        index = original(dim, num_vectors)
        train = index.train

        def timed_train(x: Any) -> None:
            began = time.perf_counter()
            train(x)
            times["train_seconds"] = time.perf_counter() - began

        index.train = timed_train
        return index

    handler = LogTimes()
    logging.getLogger("realm_hf").addHandler(handler)
    backends.compressed_faiss_index = wrapped
    began = time.perf_counter()
    try:
        result = build()
    finally:
        backends.compressed_faiss_index = original
        logging.getLogger("realm_hf").removeHandler(handler)
    total = time.perf_counter() - began
    times["build_seconds"] = total
    if "Training faiss" in handler.seen:
        times["before_training_seconds"] = handler.seen["Training faiss"] - began
        if "train_seconds" in times:
            times["add_seconds"] = total - times["before_training_seconds"] - times["train_seconds"]
    return result, {k: round(v, 1) for k, v in times.items()}


def stage_indexes(args: argparse.Namespace) -> None:
    import faiss
    import torch

    from realm_hf import RealmIndex

    workdir = Path(args.workdir)
    conv = workdir / "converted" / "index"
    (workdir / "indexes").mkdir(exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    want = lambda name: only is None or name in only  # noqa: E731
    update_results("indexes", {"clone_commit": git_commit(workdir / "clone"), "torch_threads": torch.get_num_threads(),
                               "faiss_threads": faiss.omp_get_max_threads(), "k_for_qps": 5,
                               "num_queries": args.num_queries, "load_average_at_start": os.getloadavg()})
    began = time.perf_counter()
    converted = RealmIndex.from_pretrained(conv, verify_checksums=False)
    load_s = time.perf_counter() - began
    embeddings = converted.embeddings  # [N, D] memory-mapped
    n = len(embeddings)
    queries = torch.from_numpy(np.load(workdir / "queries.npy")[:args.num_queries])
    truth, truth_s = exact_truth(embeddings, queries, 100, workdir / f"truth-{n}.npz")
    update_results("indexes", {"num_blocks": n, "exact_truth_seconds_for_queries": round(truth_s, 1),
                               "converted_index_type": converted.index_type,
                               "converted_load_seconds_no_checksums": round(load_s, 1)})
    rows = load_results().get("indexes", {}).get("rows", {})

    def save_row(name: str, row: dict[str, Any]) -> None:
        rows[name] = row
        update_results("indexes", {"rows": rows})

    if want("torch-exact"):
        exact = RealmIndex.from_embeddings(converted.blocks, embeddings, "torch-exact")
        matrix = torch.from_numpy(np.asarray(embeddings))  # the memory-mapped rows, not copied

        def bare_exact(q):
            return torch.topk(q @ matrix.T, 5, dim=1)

        save_row("torch-exact", measure_index("torch-exact", exact, bare_exact, queries, truth, n, {
            "build_seconds": 0.0, "bytes_per_block_in_ram": 0.0,
            "bytes_per_block_on_disk": round(embeddings.nbytes / n, 1), "search_params": {},
            "bare": "torch.topk(q @ E.T) over the memory-mapped embeddings (one matmul, as the old classes did)"},
            batch1_queries=10))
        del exact
    for factory in (args.ivf_factory,):
        if not want("IVF"):
            continue
        ivf, times = timed_build(lambda: RealmIndex.from_embeddings(converted.blocks, embeddings, factory,
                                                                    fingerprint=converted.fingerprint))
        size = faiss_bytes(ivf.backend.index, workdir / "indexes" / "ivf.faiss")
        fidx = ivf.backend.index
        default = dict(ivf.search_params)
        for nprobe in sorted({default.get("nprobe", 256), 32, 64}):
            ivf.set_search_params(nprobe=nprobe)
            save_row(f"{factory} nprobe={nprobe}", measure_index(factory, ivf, lambda q: fidx.search(q.numpy(), 5),
                     queries, truth, n, {**times, "bytes_per_block": round(size / n, 1),
                                         "search_params": ivf.search_params, "default_params": default,
                                         "bare": "faiss IndexIVFScalarQuantizer.search"}, batch1_queries=100))
        ivf.set_search_params(**default)
        target = workdir / "idx-ivfsq8"
        if not target.exists():
            began = time.perf_counter()
            ivf.save_pretrained(target)  # blocks and embeddings hard-linked; for `realm-hf ask --index`
            update_results("indexes", {"ivfsq8_save_seconds": round(time.perf_counter() - began, 1)})
        del ivf, fidx
    compressed_sizes = [int(x) for x in args.compressed_sizes.split(",") if x]
    if want("compressed"):
        for size_n in compressed_sizes:
            sub = embeddings[:size_n]
            sub_truth, _ = exact_truth(sub, queries, 100, workdir / f"truth-{size_n}.npz")
            blocks = converted.blocks.select(range(size_n))
            index, times = timed_build(lambda: RealmIndex.from_embeddings(blocks, sub, "compressed",
                                                                          fingerprint=converted.fingerprint))
            backend = index.backend
            fidx, transform = backend.index, backend.transform
            size = faiss_bytes(fidx, workdir / "indexes" / "compressed.faiss")
            default = dict(index.search_params)
            for nprobe in sorted({default.get("nprobe", 8), 32}):
                index.set_search_params(nprobe=nprobe)
                rerank = index.search_params.get("rerank", 0)

                def bare_compressed(q, rerank=rerank):
                    return fidx.search(transform.queries(q.numpy()), max(5, rerank))

                save_row(f"compressed nprobe={nprobe} @{size_n}", measure_index(
                    "compressed", index, bare_compressed, queries, sub_truth, size_n,
                    {**times, "bytes_per_block": round(size / size_n, 1), "search_params": index.search_params,
                     "default_params": default, "measured_at_num_blocks": size_n,
                     "bare": f"faiss IndexPreTransform(IVFPQ).search of max(5, rerank={rerank}) candidates, "
                             "without the exact re-scoring"}, batch1_queries=200))
            index.set_search_params(**default)
            del index, backend, fidx
        big = max(compressed_sizes)
        key = f"compressed nprobe=8 @{big}"
        if key in rows and "train_seconds" in rows[key]:
            r = rows[key]
            ratio = n / big
            train = r["train_seconds"] * ratio  # nlist = N/256 centroids, same 262,144 training rows
            add = r["add_seconds"] * ratio ** 2  # N vectors, each against N/256 centroids
            update_results("indexes", {"compressed_extrapolated": {
                "num_blocks": n, "from_num_blocks": big, "extrapolated": True,
                "train_seconds": round(train), "add_seconds": round(add),
                "build_seconds": round(r.get("before_training_seconds", 0) * ratio + train + add),
                "rule": "training ∝ nlist = N/256 (same 262,144 training rows); adding ∝ N·nlist (flat coarse "
                        "quantizer); the rest ∝ N",
                "bytes_per_block": r["bytes_per_block"]}})
    hnsw_sizes = [int(x) for x in args.hnsw_sizes.split(",") if x]
    if want("HNSW32"):
        for size_n in hnsw_sizes:
            sub = embeddings[:size_n]
            sub_truth, _ = exact_truth(sub, queries, 100, workdir / f"truth-{size_n}.npz")
            blocks = converted.blocks.select(range(size_n))
            hnsw, times = timed_build(lambda: RealmIndex.from_embeddings(blocks, sub, "HNSW32"))
            size = faiss_bytes(hnsw.backend.index, workdir / "indexes" / "hnsw.faiss")
            fidx = hnsw.backend.index
            for ef in (128, 512):
                hnsw.set_search_params(efSearch=ef)
                save_row(f"HNSW32 efSearch={ef} @{size_n}", measure_index(
                    "HNSW32", hnsw, lambda q: fidx.search(q.numpy(), 5), queries, sub_truth, size_n,
                    {**times, "bytes_per_block": round(size / size_n, 1), "search_params": hnsw.search_params,
                     "measured_at_num_blocks": size_n, "bare": "faiss IndexHNSWFlat.search (inside its IDMap2)"},
                    batch1_queries=200))
            del hnsw, fidx
        big = max(hnsw_sizes)
        key = f"HNSW32 efSearch=128 @{big}"
        if key in rows:
            t = rows[key]["build_seconds"]
            est = t * (n / big) * (np.log(n) / np.log(big))
            update_results("indexes", {"hnsw32_extrapolated": {
                "build_seconds_at_num_blocks": round(float(est)), "from_num_blocks": big, "rule": "t * N/n * log N/log n",
                "bytes_per_block": rows[key]["bytes_per_block"], "ram_bytes": round(rows[key]["bytes_per_block"] * n),
                "extrapolated": True}})
    if want("isotropic"):
        iso, iso_q = isotropic(min(1_000_000, n))
        iso_q = torch.from_numpy(iso_q[:args.num_queries])
        iso_truth, _ = exact_truth(iso, iso_q, 100, workdir / "truth-iso-1m.npz")
        blocks = converted.blocks.select(range(len(iso)))
        for factory in ("compressed", "IVF4096,SQ8"):
            idx, times = timed_build(lambda: RealmIndex.from_embeddings(blocks, iso, factory))
            save_row(f"isotropic-1M {factory}", measure_index(
                f"iso {factory}", idx, None, iso_q, iso_truth, len(iso),
                {**times, "search_params": idx.search_params,
                 "data": "1M isotropic N(0, I) vectors, queries N(0, I): the worst case"}, batch1_queries=100))
            del idx


# -------------------------------------------------------------------------------------------------------------- ask

def questions(num: int) -> list[str]:
    path = Path("/work/shared/data/qa/nq-dev.jsonl")
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            out.append(json.loads(line)["question"])
            if len(out) >= num:
                break
    return out


class ProcMemory:
    """Peaks of VmRSS, RssAnon and RssFile of this process, sampled in a thread."""

    FIELDS = ("VmRSS", "RssAnon", "RssFile")

    def __init__(self, interval: float = 0.1) -> None:
        self.peaks = {f: 0 for f in self.FIELDS}
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> dict[str, int]:
        now = {}
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in self.FIELDS:
                    now[key] = int(line.split()[1]) * 1024
        for key, value in now.items():
            self.peaks[key] = max(self.peaks[key], value)
        return now

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def reset(self) -> None:
        self.sample()
        self.peaks = {f: 0 for f in self.FIELDS}
        self.sample()

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join()
        self.sample()
        return dict(self.peaks)


def stage_ask_worker(args: argparse.Namespace) -> None:
    """In-process: index load with and without checksums, the pipeline's load, per-question seconds, batch 8."""
    memory = ProcMemory()
    import torch
    from transformers import pipeline

    import realm_hf  # noqa: F401  (registers the task)
    from realm_hf import RealmIndex

    workdir = Path(args.workdir)
    model_dir = workdir / "converted"
    out: dict[str, Any] = {"torch_threads": torch.get_num_threads()}
    began = time.perf_counter()
    index = RealmIndex.from_pretrained(model_dir / "index", verify_checksums=True)
    out["index_load_with_checksums_seconds"] = round(time.perf_counter() - began, 1)
    del index
    began = time.perf_counter()
    index = RealmIndex.from_pretrained(model_dir / "index", verify_checksums=False)
    out["index_load_without_checksums_seconds"] = round(time.perf_counter() - began, 1)
    del index
    memory.reset()
    began = time.perf_counter()
    qa = pipeline("realm-open-qa", model=str(model_dir), device="cpu")
    out["pipeline_load_seconds"] = round(time.perf_counter() - began, 1)
    out["after_load_memory"] = memory.sample()
    qs = questions(args.batch_questions)
    times = []
    for q in qs[:args.single_questions]:
        began = time.perf_counter()
        answer = qa(q)
        times.append(time.perf_counter() - began)
    out["single_question_seconds"] = [round(t, 3) for t in times]
    out["single_question_seconds_median_after_first"] = round(float(np.median(times[1:])), 3)
    out["example_answer"] = {"question": qs[-1], "answer": {k: v for k, v in dict(answer).items()
                                                           if isinstance(v, (str, float, int))}}
    out["single_question_peak_memory"] = dict(memory.peaks)
    memory.reset()
    qa8 = pipeline("realm-open-qa", model=str(model_dir), device="cpu", batch_size=8)
    began = time.perf_counter()
    qa8(qs)
    seconds = time.perf_counter() - began
    out["batch8_questions"] = len(qs)
    out["batch8_seconds_per_question"] = round(seconds / len(qs), 3)
    out["batch8_peak_memory"] = dict(memory.peaks)
    out["process_peak_memory"] = memory.stop()
    out["VmHWM"] = peak_rss_self()
    update_results("ask", {"in_process": out})


def stage_ask(args: argparse.Namespace) -> None:
    workdir = Path(args.workdir)
    clone = workdir / "clone"
    cli = str(clone / ".venv" / "bin" / "realm-hf")
    model = str(workdir / "converted")
    qs = questions(2)
    update_results("ask", {"clone_commit": git_commit(clone), "questions": qs})
    env = {"HF_HUB_OFFLINE": "1"}
    one = timed_command([cli, "ask", "--model", model, "--device", "cpu", qs[0]], workdir / "logs" / "ask-1.log", env)
    update_results("ask", {"cli_1_question": one})
    four = timed_command([cli, "ask", "--model", model, "--device", "cpu", *qs], workdir / "logs" / "ask-2.log", env)
    per_q = (four["wall_seconds"] - one["wall_seconds"]) / (len(qs) - 1)
    update_results("ask", {"cli_2_questions": four, "cli_seconds_per_question_from_difference": round(per_q, 2),
                           "cli_load_seconds_estimate": round(one["wall_seconds"] - per_q, 1)})
    worker = timed_command([sys.executable, __file__, "--stage", "ask-worker", "--workdir", str(workdir), "--name", NAME],
                           workdir / "logs" / "ask-worker.log", env)
    update_results("ask", {"in_process_command": worker})


# -------------------------------------------------------------------------------------------------------------- old

def stage_old_make(args: argparse.Namespace) -> None:
    """(old venv) An old folder of the first `--num-blocks` records and embeddings, written by np.save itself."""
    n = args.num_blocks
    out = Path(args.workdir) / f"old-{n}"
    out.mkdir(parents=True, exist_ok=True)
    data = np.load(Path(args.workdir) / "lengths.npz")
    source = RecordSource(data["lengths"], data["word_ids"], data["word_weights"], vocab_list(args.tokenizer_dir))
    began = time.perf_counter()
    records = np.empty(n, dtype=object)
    for i, r in enumerate(source.iter_records(n)):
        records[i] = r
    np.save(out / "block_records.npy", records)
    del records
    seconds = time.perf_counter() - began
    save_old_openqa(n, out, args.tokenizer_dir, f"old-make-{n}")
    update_results(f"old-make-{n}", {"np_save_records_seconds": round(seconds, 1),
                                     "block_records_bytes": (out / "block_records.npy").stat().st_size})


def stage_old_worker(args: argparse.Namespace) -> None:
    """(old venv) The old classes answering: RealmRetriever (np.load allow_pickle) + RealmForOpenQA."""
    memory = ProcMemory()
    os.environ["TRUST_REMOTE_CODE"] = "True"
    import torch
    from transformers.models.deprecated.realm import RealmForOpenQA, RealmRetriever, RealmTokenizer

    n = args.num_blocks
    d = Path(args.workdir) / f"old-{n}"
    out: dict[str, Any] = {"torch_threads": torch.get_num_threads()}
    began = time.perf_counter()
    tokenizer = RealmTokenizer.from_pretrained(d)
    retriever = RealmRetriever.from_pretrained(d)
    out["retriever_load_seconds"] = round(time.perf_counter() - began, 1)
    out["after_retriever_memory"] = memory.sample()
    began = time.perf_counter()
    model = RealmForOpenQA.from_pretrained(d, retriever=retriever).eval()
    out["model_load_seconds"] = round(time.perf_counter() - began, 1)
    out["after_load_memory"] = memory.sample()
    times = []
    with torch.no_grad():
        for q in questions(args.single_questions):
            began = time.perf_counter()
            inputs = tokenizer([q], return_tensors="pt")
            model(**inputs, return_dict=False)
            times.append(time.perf_counter() - began)
    out["single_question_seconds"] = [round(t, 3) for t in times]
    out["single_question_seconds_median_after_first"] = round(float(np.median(times[1:])), 3)
    out["process_peak_memory"] = memory.stop()
    out["VmHWM"] = peak_rss_self()
    update_results(f"old-{n}", out)


def stage_old(args: argparse.Namespace) -> None:
    workdir = Path(args.workdir)
    sizes = [int(s) for s in args.old_sizes.split(",") if s]
    tok = minilm_dir()
    points = []
    for n in sizes:
        if not (workdir / f"old-{n}" / "pytorch_model.bin").exists():
            subprocess.run([args.old_python, __file__, "--stage", "old-make", "--workdir", str(workdir),
                            "--num-blocks", str(n), "--tokenizer-dir", tok, "--name", NAME], check=True)
        run = timed_command([args.old_python, __file__, "--stage", "old-worker", "--workdir", str(workdir),
                             "--num-blocks", str(n), "--name", NAME], workdir / "logs" / f"old-worker-{n}.log")
        update_results(f"old-{n}", {"command": run})
        r = load_results()[f"old-{n}"]
        points.append((n, r["command"]["peak_rss_bytes"], r["single_question_seconds_median_after_first"],
                       r["retriever_load_seconds"] + r["model_load_seconds"]))
    if len(points) >= 2:
        (n1, m1, s1, l1), (n2, m2, s2, l2) = points[0], points[-1]
        at = lambda a, b: a + (b - a) * (PAPER_BLOCKS - n1) / (n2 - n1)  # noqa: E731
        update_results("old-extrapolated", {
            "num_blocks": PAPER_BLOCKS, "extrapolated": True, "rule": f"linear in N through {n1} and {n2} blocks",
            "peak_rss_bytes": round(at(m1, m2)), "seconds_per_question": round(at(s1, s2), 3),
            "load_seconds": round(at(l1, l2), 1)})


# -------------------------------------------------------------------------------------------------------------- main

def main() -> None:
    global NAME
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", required=True)
    parser.add_argument("--workdir", default="/work/bench13m")
    parser.add_argument("--num-blocks", type=int, default=PAPER_BLOCKS)
    parser.add_argument("--old-python", default="/work/oldrealm-venv/bin/python")
    parser.add_argument("--tokenizer-dir", default=None)
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--hnsw-sizes", default="250000,1000000")
    parser.add_argument("--compressed-sizes", default="1000000,2000000")
    parser.add_argument("--ivf-factory", default="IVF4096,SQ8")
    parser.add_argument("--single-questions", type=int, default=3)
    parser.add_argument("--batch-questions", type=int, default=16)
    parser.add_argument("--old-sizes", default="1000000,2000000")
    parser.add_argument("--num-queries", type=int, default=1000)
    parser.add_argument("--only", default=None, help="indexes: comma-separated subset of the index rows")
    parser.add_argument("--index-type", default=None, help="convert: passed on (default: the converter's own choice)")
    parser.add_argument("--name", default=NAME, help="results file name (a dry run writes elsewhere)")
    args, rest = parser.parse_known_args()
    NAME = args.name
    args.rest = rest
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stages = {"generate": stage_generate, "generate-model": stage_generate_model, "convert": stage_convert,
              "indexes": stage_indexes, "ask": stage_ask, "ask-worker": stage_ask_worker, "old": stage_old,
              "old-make": stage_old_make, "old-worker": stage_old_worker}
    began = time.perf_counter()
    stages[args.stage](args)
    logger.info("stage %s done in %.1fs", args.stage, time.perf_counter() - began)
    if args.stage in ("generate", "convert", "indexes", "ask", "old"):
        try:
            write_markdown()
        except Exception as err:  # the JSON is what counts; the table is rewritten by the next stage
            logger.warning("markdown not written: %s", err)


def _gb(value: Any) -> str:
    return "–" if value is None else f"{value / GB:.2f} GB"


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, (int, float)):
        return f"{value:,.{digits}f}"
    return str(value)


def write_markdown() -> None:
    """benchmarks/results/convert-13m.md from the JSON: the tables, and the notes kept in the JSON's "notes"."""
    r = load_results()
    m, g, c = r.get("machine", {}), r.get("generator", {}), r.get("convert", {})
    lines = [f"# Converting a REALM checkpoint at the paper's corpus size ({g.get('num_blocks', PAPER_BLOCKS):,} blocks)",
             "", f"Machine: {m.get('cpu')}, {m.get('cores')} cores, {m.get('ram_gib')} GiB RAM, no GPU. Date: "
             f"{m.get('date')}. Clean clone: `{c.get('clone_commit', r.get('indexes', {}).get('clone_commit'))}`. "
             "Produced by `benchmarks/bench_convert_13m.py` (commands in its docstring); every figure is in "
             "[convert-13m.json](convert-13m.json). Synthetic data (see the JSON's `generator`): BERT-base towers "
             "with random weights, record lengths of real 288-wordpiece wiki-2015 blocks, clustered synthetic "
             "embeddings. *Extrapolated* figures are marked.", ""]
    if g:
        lines += ["## The old checkpoint", "",
                  "| | value |", "|---|---:|",
                  f"| records | {g.get('num_blocks', 0):,} |",
                  f"| mean record bytes (real blocks: {_num(g.get('length_sample', {}).get('body_bytes_mean'))}) | "
                  f"{_num(g.get('record_bytes_mean'))} |",
                  f"| block_records.npy | {_gb(g.get('block_records_file_bytes'))} in "
                  f"{_num(g.get('block_records_seconds'))} s |",
                  f"| pytorch_model.bin (block_emb + 2 BERT-base towers) | {_gb(g.get('old_model_pytorch_model_bin_bytes'))} |",
                  ""]
    if c.get("wall_seconds") is not None:
        lines += ["## realm-hf convert", "", "| wall | peak RSS | written (du of the output) | index type |",
                  "|---:|---:|---:|---|",
                  f"| {_num(c.get('wall_seconds'))} s | {_gb(c.get('peak_rss_bytes'))} | {_gb(c.get('output_bytes'))} | "
                  f"{c.get('index_type')} {c.get('search_params')} |", "",
                  "Phases (seconds, from the timestamped log): " + "; ".join(
                      f"{k}: {v}" for k, v in (c.get("phases") or c.get("phases_started_at_seconds", {})).items()), ""]
    rows = r.get("indexes", {}).get("rows", {})
    if rows:
        lines += ["## Index types", "",
                  f"{r['indexes'].get('num_queries')} queries, k=5 for queries/s, recall against exact search "
                  "(torch matmul + topk). `search/bare` = bare queries/s ÷ RealmIndex.search queries/s (1 = no "
                  "overhead).", "",
                  "| index | blocks | build s | bytes/block | recall@5 | @20 | @100 | q/s b=1 | q/s b=64 | "
                  "search/bare b=1 | b=64 |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for name, row in rows.items():
            bpb = row.get("bytes_per_block", row.get("bytes_per_block_in_ram"))
            lines.append(f"| {name} | {row.get('num_blocks', 0):,} | {_num(row.get('build_seconds'))} | {_num(bpb)} | "
                         f"{_num(row.get('recall@5'), 3)} | {_num(row.get('recall@20'), 3)} | "
                         f"{_num(row.get('recall@100'), 3)} | {_num(row.get('qps_batch1'))} | "
                         f"{_num(row.get('qps_batch64'))} | {_num(row.get('search_over_bare_batch1'), 2)} | "
                         f"{_num(row.get('search_over_bare_batch64'), 2)} |")
        cb = r["indexes"].get("compressed_build_at_13m")
        if cb:
            lines += ["", f"`compressed` at {r['indexes'].get('num_blocks', 0):,} blocks, *extrapolated*: build "
                      f"{cb['estimate']} ({cb['direct_op_measurement']}); "
                      f"{_gb(cb['compressed_ram_bytes_at_13m'])} in RAM."]
        ext = r["indexes"].get("hnsw32_extrapolated")
        if ext:
            lines += ["", f"HNSW32 at {r['indexes'].get('num_blocks', 0):,} blocks, *extrapolated* from "
                      f"{ext['from_num_blocks']:,} ({ext['rule']}): build ≈ {ext['build_seconds_at_num_blocks'] / 3600:.1f} h, "
                      f"≈ {_gb(ext['ram_bytes'])} in RAM."]
        lines.append("")
    a = r.get("ask", {})
    if a:
        ip = a.get("in_process", {})
        lines += ["## Answering", "", "| | peak RSS | of it file-backed (mmap) | load s | s/question |",
                  "|---|---:|---:|---:|---:|"]
        if "cli_1_question" in a:
            c1 = a["cli_1_question"]
            lines.append(f"| `realm-hf ask` (torch-exact, 13.35M), 1 question, whole process | "
                         f"{_gb(c1.get('peak_rss_bytes'))} | – | – | {_num(c1.get('wall_seconds'))} s in all |")
        if "cli_1_question_ivfsq8_index" in a:
            c1 = a["cli_1_question_ivfsq8_index"]
            lines.append(f"| `realm-hf ask --index` IVF4096,SQ8 (13.35M), 1 question, whole process | "
                         f"{_gb(c1.get('peak_rss_bytes'))} | – | – | {_num(c1.get('wall_seconds'))} s in all |")
        if ip:
            pm = ip.get("single_question_peak_memory", {})
            bm = ip.get("batch8_peak_memory", {})
            lines.append(f"| pipeline, one question at a time (torch-exact, 13.35M) | {_gb(pm.get('VmRSS'))} | {_gb(pm.get('RssFile'))} | "
                         f"{_num(ip.get('pipeline_load_seconds'))} | {_num(ip.get('single_question_seconds_median_after_first'), 2)} |")
            lines.append(f"| pipeline, batch_size=8, {ip.get('batch8_questions')} questions (torch-exact, 13.35M) | {_gb(bm.get('VmRSS'))} | "
                         f"{_gb(bm.get('RssFile'))} | – | {_num(ip.get('batch8_seconds_per_question'), 2)} |")
        for key in sorted(k for k in r if k.startswith("old-") and k[4:].isdigit()):
            o = r[key]
            lines.append(f"| old RealmForOpenQA + RealmRetriever, {int(key[4:]):,} blocks | "
                         f"{_gb(o.get('command', {}).get('peak_rss_bytes'))} | – | "
                         f"{_num((o.get('retriever_load_seconds') or 0) + (o.get('model_load_seconds') or 0))} | "
                         f"{_num(o.get('single_question_seconds_median_after_first'), 2)} |")
        ce = a.get("compressed_extrapolated")
        if ce:
            lines.append(f"| pipeline with `compressed` at 13.35M, *extrapolated* (anonymous memory; one / batch 8) | "
                         f"{_gb(ce['anon_rss_single_bytes'])} / {_gb(ce['anon_rss_batch8_bytes'])} | small | – | "
                         f"{_num(ce['seconds_per_question_single'])} |")
        e = r.get("old-extrapolated")
        if e:
            lines.append(f"| old classes, {e['num_blocks']:,} blocks, *extrapolated* ({e['rule']}; s/question: "
                         f"the scan added to the 1M figure) | {_gb(e['peak_rss_bytes'])} | – | "
                         f"{_num(e['load_seconds'])} | {_num(e.get('seconds_per_question_analytic'), 1)} |")
        if ip:
            lines += ["", f"Index load: {ip.get('index_load_with_checksums_seconds')} s with checksum verification, "
                      f"{ip.get('index_load_without_checksums_seconds')} s without."]
        lines.append("")
    notes = r.get("notes")
    if notes:
        lines += ["## What disappointed, and notes", ""] + [f"- {n}" for n in notes] + [""]
    (RESULTS / f"{NAME}.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
