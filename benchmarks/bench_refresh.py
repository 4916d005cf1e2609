"""What the asynchronous index refresh costs the REALM pre-trainer: step time with and without the refresher, staleness.

The full run, the one in benchmarks/results/refresh.md (estimated at 11 minutes on 2 idle cores; the Markdown records
the time it took):

    HF_HUB_OFFLINE=1 nohup .venv/bin/python benchmarks/bench_refresh.py > benchmarks/results/refresh.log 2>&1 &

with the optional thread-mode refresher as a third case (about 3 more minutes):

    HF_HUB_OFFLINE=1 nohup .venv/bin/python benchmarks/bench_refresh.py --cases none process thread \
        > benchmarks/results/refresh.log 2>&1 &

Smoke run (tiny random models, 6 embedded articles: about a minute on 2 idle cores, mostly process start-up; it
writes to /tmp, not to benchmarks/results):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_refresh.py --tiny --rounds 1 --cases none process thread \
        --output-dir /tmp/bench_refresh_smoke

The same pre-training job (`RealmPretrainer`: packaged MiniLM retriever with mean pooling and a 128-d projection and
MiniLM encoder, the first 40 articles of wiki-2015 shard 0 = 2,346 blocks of <= 128 wordpieces, X = Z, salient-span
masking, B=2, 8 candidates incl. the null document, Flat index, bf16, seed 0: every case sees the same batches) runs
`--steps` steps in each case:

- ``none``: the refresher exists but its schedule never fires (`refresh_schedule="0"`): the baseline;
- ``process-all``: a refresh every `--refresh-every` steps by a background `spawn`ed builder process with all cores
  at the trainer's priority (the library's default before the thread budget: torch's default thread count);
- ``process``: the same with a builder process's fixed resources on the CPU (`refresh_mode="process"`: 1 thread at
  niceness +19, the trainer keeps its threads; the library's CPU default before the paced builder);
- ``partition``: the same with the cores split: the builder at max(1, cores // 2) threads, normal priority, the
  trainer reduced to the rest while a build runs (`trainer_threads` of `refresh_resources`, passed to the trainer as
  `resources`: no command-line option sets it);
- ``thread``: the same from a builder thread inside the trainer process (optional, `--cases ... thread`);
- ``paced``: a builder thread paced by the trainer (`refresh_mode="paced"`, the library's CPU default, with
  `refresh_time_share` = `--time-share`, default 0.1): it runs only between steps, alone on the cores, for that
  share of the trainer's time (optional, `--cases ... paced`).

Every run is a fresh worker process (`--worker`), so a builder left over from one case cannot slow the next; the
cases alternate within each of `--rounds` rounds (rotated by one each round). Step time is measured from per-step
timestamps taken by a small subclass of the trainer in this script (the library is not changed): step i lasts from
the end of step i-1 (the end of `on_step_end`, where the trainer requests refreshes and swaps in finished indexes)
to the end of step i, so it holds the retrieval, forward, backward, optimizer step, snapshot and swap; the set-up,
the initial index build, the final evaluation and the final save are outside it (the subclass skips the final save
and the evaluation has nothing to do: no held-out sentences, no QA file). The first `--warmup` steps of every run
are left out of the statistics. Staleness (steps and seconds between a snapshot and its swap) and build seconds come
from `IndexRefresher.stats`. The initial index (identical in every run: same seed, same weights, checked by its
fingerprint) is built by the first run and loaded by the others, to save a build per run.

Estimate of the full run on 2 idle cores: a training step about 2.4 s (cpu-small's 0.42 steps/s), an index build of
the 2,346 blocks about 25 s alone (94 blocks/s in results/index.md) and roughly twice that beside the trainer, a
builder busy from step 10 to the end, so 40 steps take ~100 s without refresh and ~170 s with it, plus ~20 s set-up
per run (+45 s for the first: masking and the initial index): 2 rounds x (120 + 190 s) + 45 s ~ 11 minutes; the
thread case adds ~3 minutes per round.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench_index import add_argument
from bench_common import RESULTS, cpu_model

logger = logging.getLogger("bench_refresh")

CASES = ("none", "process-all", "process", "partition", "thread", "paced")
CASE_LABELS = {
    "none": "no refresh",
    "process-all": "refresh in a background process, all cores (old default)",
    "process": "refresh in a background process, 1 thread at niceness +19",
    "partition": "refresh in a background process, cores split half/half",
    "thread": "refresh in a background thread",
    "paced": "refresh paced between steps (`refresh_mode paced`, the default on CPU)",
}


def builder_settings(
    case: str, cores: int, refresh_threads: int | None, time_share: float
) -> dict[str, str | int | float | None]:
    """The builder of `case` (mode, thread budget) as keyword arguments of
    `realm_hf.training.index_builder.refresh_resources` (`--refresh-threads` overrides the builder's threads)."""
    if case == "paced":
        return {"mode": "paced", "time_share": time_share}
    settings: dict[str, str | int | float | None] = {"mode": "thread" if case == "thread" else "process"}
    if case == "process-all":
        settings.update(num_threads=cores, niceness=0)
    elif case == "partition":
        builder = max(1, cores // 2)
        settings.update(num_threads=builder, niceness=0, trainer_threads=max(1, cores - builder))
    if refresh_threads is not None and case != "none":
        settings["num_threads"] = refresh_threads
    return settings

# The real run: packaged MiniLM on wiki-2015 (examples/configs/cpu-small.yaml's shapes, fewer articles).
REAL = dict(
    model=dict(retriever="minilm", encoder="minilm", pooling="mean", projection_size=128),
    corpus=dict(corpus="../shared/data/wiki-2015/wiki-2015-00000-of-00008.jsonl.gz", max_articles=40, block_length=128,
                query_max_length=64, joined_max_length=192, index_type="Flat", embed_batch_size=64,
                embed_dtype="bfloat16"),
    pretraining=dict(num_candidates=8),
    loop=dict(per_device_batch_size=2, learning_rate=5e-5, mixed_precision="bf16"),
    steps=40, refresh_every=10,
)
# --tiny: random 2-layer models on a few embedded articles (the shapes of tests/training/test_pretrainer.py).
TINY = dict(
    model=dict(random_init=True),
    corpus=dict(corpus="embedded", max_articles=6, block_length=64, query_max_length=32, joined_max_length=96,
                index_type="Flat", embed_batch_size=64, embed_dtype="float32"),
    pretraining=dict(num_candidates=4),
    loop=dict(per_device_batch_size=2, learning_rate=1e-3, mixed_precision="no"),
    steps=40, refresh_every=10,
)


# ----------------------------------------------------------------------------------------------------- worker
def timed_trainer_class():
    """`RealmPretrainer` with per-step timestamps, a shared initial index and no final save."""
    import torch

    from realm_hf.index import RealmIndex
    from realm_hf.index.manifest import fingerprint_module
    from realm_hf.training import RealmPretrainer

    class TimedPretrainer(RealmPretrainer):
        def __init__(self, *args: Any, initial_index_dir: str, **kwargs: Any) -> None:
            self.initial_index_dir = initial_index_dir
            self.first_step_began: float | None = None
            self.steps: list[dict] = []  # one per optimizer step: end time, builder state, refresh events
            super().__init__(*args, **kwargs)

        def _build_index_now(self, step: int) -> RealmIndex:
            # the initial index is the same in every run: build it once, load it in the others
            if step == 0 and os.path.isdir(self.initial_index_dir):
                index = RealmIndex.from_pretrained(self.initial_index_dir)
                if index.fingerprint == fingerprint_module(self.retriever.document_embedder):
                    logger.info("Loaded the initial index from %s", self.initial_index_dir)
                    return index
                logger.warning("%s was built by other weights; building the initial index", self.initial_index_dir)
            index = super()._build_index_now(step)
            if step == 0 and not os.path.isdir(self.initial_index_dir):
                index.save_pretrained(self.initial_index_dir)
            return index

        def training_step(self, examples: list[dict]) -> tuple[torch.Tensor, dict[str, float]]:
            if self.first_step_began is None:
                self.first_step_began = time.perf_counter()
            return super().training_step(examples)

        def on_step_end(self, step: int) -> dict[str, float]:
            swaps_before = len(self.refresher.stats)
            logs = super().on_step_end(step)
            self.steps.append({
                "step": step,
                "end": time.perf_counter(),
                "requested": self.refresher.schedule.should_refresh(step),
                "swapped": len(self.refresher.stats) > swaps_before,
                "busy_after": self.refresher.busy,  # a build running or pending when the next step begins
            })
            return logs

        def save_model(self, directory: str) -> None:
            self.refresher.close()  # stop a build still running; the benchmark keeps no model

    return TimedPretrainer


def run_worker(case: str, job: dict) -> dict:
    """One pre-training run of `case`; returns its per-step times and refresh records."""
    import torch
    import transformers

    from realm_hf.training import CorpusArguments, LoopArguments, ModelArguments, PretrainingArguments
    from realm_hf.training.index_builder import refresh_resources

    torch.set_num_threads(job["threads"])
    load_at_start = os.getloadavg()
    settings = job["settings"]
    loop = LoopArguments(output_dir=job["output_dir"], max_steps=job["steps"], logging_steps=job["refresh_every"],
                         save_steps=0, eval_steps=0, report_to="none", seed=0, **settings["loop"])
    model = ModelArguments(**settings["model"])
    corpus = CorpusArguments(cache_dir=job["cache_dir"], **settings["corpus"])
    pretraining = PretrainingArguments(
        refresh_schedule="0" if case == "none" else str(job["refresh_every"]),
        eval_mlm_examples=0, eval_qa_file=None, **settings["pretraining"],
    )
    resources = refresh_resources(
        "cuda" if torch.cuda.is_available() else "cpu",
        **builder_settings(case, os.cpu_count() or 1, job["refresh_threads"], job["time_share"]),
    )
    began = time.perf_counter()
    trainer = timed_trainer_class()(loop, model, corpus, pretraining, resources=resources,
                                    initial_index_dir=os.path.join(job["cache_dir"], "initial-index"))
    setup_s = time.perf_counter() - began
    trainer.train()
    previous, steps, busy = trainer.first_step_began, [], False
    for record in trainer.steps:
        steps.append({"step": record["step"], "seconds": record["end"] - previous, "during_build": busy,
                      "requested": record["requested"], "swapped": record["swapped"]})
        previous, busy = record["end"], record["busy_after"]
    return {
        "case": case, "round": job["round"], "load_average_at_start": load_at_start, "setup_s": setup_s,
        "wall_s": time.perf_counter() - began, "num_blocks": len(trainer.blocks),
        "num_threads": torch.get_num_threads(), "torch": torch.__version__, "transformers": transformers.__version__,
        "steps": steps, "refreshes": trainer.refresher.stats,
    }


# ----------------------------------------------------------------------------------------------------- driver
def launch(case: str, job: dict) -> dict:
    """Run one case in a fresh worker process (its log goes to our stderr); returns its result."""
    job_path = os.path.join(job["work_dir"], f"job-{job['round']}-{case}.json")
    result_path = os.path.join(job["work_dir"], f"result-{job['round']}-{case}.json")
    with open(job_path, "w", encoding="utf-8") as f:
        json.dump({**job, "result_path": result_path}, f)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    began = time.perf_counter()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", case, "--job", job_path], check=True,
                   env=env)
    with open(result_path, encoding="utf-8") as f:
        result = json.load(f)
    shutil.rmtree(job["output_dir"], ignore_errors=True)
    logger.info("round %d, %s: %d steps, median %.3f s/step, %d swaps; worker took %.0f s", job["round"] + 1, case,
                len(result["steps"]), statistics.median(s["seconds"] for s in result["steps"]),
                len(result["refreshes"]), time.perf_counter() - began)
    return result


def mean_or_none(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def summarize(runs: list[dict], cases: list[str], warmup: int) -> dict:
    """Per case, over all its runs: step-time statistics (after the warm-up steps), swaps, staleness, build time."""
    summary: dict[str, dict] = {}
    for case in cases:
        case_runs = [run for run in runs if run["case"] == case]
        steps = [s for run in case_runs for s in run["steps"] if s["step"] > warmup]
        seconds = [s["seconds"] for s in steps]
        refreshes = [r for run in case_runs for r in run["refreshes"]]
        summary[case] = {
            "runs": len(case_runs),
            "timed_steps": len(seconds),
            "median_step_s": statistics.median(seconds),
            "mean_step_s": statistics.fmean(seconds),
            "min_step_s": min(seconds),
            "median_step_s_per_run": [statistics.median(s["seconds"] for s in run["steps"] if s["step"] > warmup)
                                      for run in case_runs],
            "steps_during_build": sum(s["during_build"] for s in steps),
            "mean_step_s_during_build": mean_or_none([s["seconds"] for s in steps if s["during_build"]]),
            "mean_step_s_no_build": mean_or_none([s["seconds"] for s in steps if not s["during_build"]]),
            "refreshes_requested_per_run": statistics.fmean(sum(s["requested"] for s in run["steps"])
                                                            for run in case_runs),
            "swaps_per_run": statistics.fmean(len(run["refreshes"]) for run in case_runs),
            "staleness_steps_mean": mean_or_none([r["staleness_steps"] for r in refreshes]),
            "staleness_steps_max": max((r["staleness_steps"] for r in refreshes), default=None),
            "staleness_s_mean": mean_or_none([r["staleness_seconds"] for r in refreshes]),
            "staleness_s_max": max((r["staleness_seconds"] for r in refreshes), default=None),
            "build_s_mean": mean_or_none([r["build_seconds"] for r in refreshes]),
            "builder_threads": sorted({r["builder_threads"] for r in refreshes if "builder_threads" in r}),
            "builder_niceness": sorted({r["builder_niceness"] for r in refreshes if "builder_niceness" in r}),
        }
    if "none" in summary:
        base = summary["none"]
        for row in summary.values():
            row["slowdown_median"] = row["median_step_s"] / base["median_step_s"] - 1
            row["slowdown_mean"] = row["mean_step_s"] / base["mean_step_s"] - 1
            during = row["mean_step_s_during_build"]
            row["slowdown_during_build"] = None if during is None else during / base["mean_step_s"] - 1
    return summary


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "–" if value is None else format(value, spec)


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.0f}%"


def markdown(result: dict) -> str:
    machine, settings, summary = result["machine"], result["settings"], result["summary"]
    loads = [run["load_average_at_start"][0] for run in result["runs"]]
    corpus = settings["corpus"]
    data = (f"the first {corpus['max_articles']} articles of `{os.path.basename(corpus['corpus'])}`"
            if corpus["corpus"] != "embedded" else f"{corpus['max_articles']} embedded articles")
    models = ("tiny random 2-layer models" if settings["model"].get("random_init")
              else f"packaged MiniLM retriever ({settings['model']['pooling']} pooling, "
                   f"{settings['model']['projection_size']}-d projection) and encoder")
    rounds = f"{settings['rounds']} round{'s' if settings['rounds'] != 1 else ''}"
    warmup = f"steps 1–{settings['warmup']} of each run left out" if settings["warmup"] else "all steps counted"
    lines = [
        "# Index refresh: trainer step time with and without the background refresher", "",
        f"Command: `{result['command']}` ({result['wall_s'] / 60:.1f} minutes).", "",
        f"Machine: {machine['cpu_model']}, {machine['cores']} cores, torch {machine['torch']}, transformers "
        f"{machine['transformers']}; trainer {machine['trainer_threads']} threads at niceness "
        f"{machine.get('niceness', 0)}, the builder's threads and niceness per case in the table. "
        f"Load average at start {', '.join(f'{x:.2f}' for x in result['load_average_at_start'])}, at the end "
        f"{', '.join(f'{x:.2f}' for x in result.get('load_average_at_end', []))} (1, 5, 15 min); "
        f"1-minute load when the workers started: {min(loads):.2f} to {max(loads):.2f}.", "",
        f"Job: `RealmPretrainer`, {models}, {data} ({result['runs'][0]['num_blocks']:,} blocks of ≤ "
        f"{corpus['block_length']} wordpieces, X = Z), B={settings['loop']['per_device_batch_size']}, "
        f"{settings['pretraining']['num_candidates']} candidates incl. ∅, {corpus['index_type']} index, "
        f"{settings['loop']['mixed_precision'] if settings['loop']['mixed_precision'] != 'no' else 'fp32'}; "
        f"{settings['steps']} steps per run, a refresh every {settings['refresh_every']} steps (none in the baseline); "
        f"{rounds} of fresh worker processes, cases alternating. Step times from per-step timestamps (retrieval + "
        f"forward + backward + optimizer + snapshot / swap), {warmup}; set-up, initial index, evaluation and final "
        "save excluded.", "",
        "| case | timed steps | median step s | mean step s | slowdown (median / mean) | mean step s, no build "
        "running | mean step s while a build runs (steps) | slowdown while a build runs | swaps / run (requested) | "
        "staleness steps mean (max) | staleness s mean (max) | build s mean | builder threads, niceness |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for case, row in summary.items():
        slowdown = ("baseline" if case == "none" else
                    f"{100 * row['slowdown_median']:+.0f}% / {100 * row['slowdown_mean']:+.0f}%")
        lines.append(
            f"| {CASE_LABELS[case]} | {row['timed_steps']} | {row['median_step_s']:.3f} | {row['mean_step_s']:.3f} | "
            f"{slowdown} | {fmt(row['mean_step_s_no_build'], '.3f')} | "
            f"{fmt(row['mean_step_s_during_build'], '.3f')} ({row['steps_during_build']}) | "
            f"{percent(row.get('slowdown_during_build')) if case != 'none' else '–'} | "
            f"{row['swaps_per_run']:.1f} ({row['refreshes_requested_per_run']:.0f}) | "
            f"{fmt(row['staleness_steps_mean'], '.1f')} ({fmt(row['staleness_steps_max'], 'd')}) | "
            f"{fmt(row['staleness_s_mean'], '.1f')} ({fmt(row['staleness_s_max'], '.1f')}) | "
            f"{fmt(row['build_s_mean'], '.1f')} | "
            f"{'/'.join(map(str, row['builder_threads'])) or '–'}, {'/'.join(map(str, row['builder_niceness'])) or '–'} |")
    lines += ["", "Median step seconds per run (in run order): " + "; ".join(
        f"{case} " + ", ".join(f"{x:.3f}" for x in row["median_step_s_per_run"]) for case, row in summary.items()), ""]
    lines += ["## What it means", "", *interpretation(summary, machine["cores"]), ""]
    if settings["model"].get("random_init"):
        lines += ["This was a smoke run with tiny random models: its numbers say only that the benchmark works.", ""]
    lines.append("Raw per-step times and refresh records are in the JSON file next to this one.")
    return "\n".join(lines) + "\n"


def interpretation(summary: dict, cores: int) -> list[str]:
    """One sentence per refresh case, from the numbers."""
    base = summary.get("none")
    sentences = []
    for case, row in summary.items():
        if case == "none" or base is None:
            continue
        sentence = (f"With the refresher {CASE_LABELS[case].removeprefix('refresh ')}, the trainer's mean step time "
                    f"was {100 * row['slowdown_mean']:+.0f}% against no refresh (median "
                    f"{100 * row['slowdown_median']:+.0f}%)")
        if row["mean_step_s_during_build"] is not None:
            sentence += (f"; the {row['steps_during_build']} steps that began while a build was running took "
                         f"{row['mean_step_s_during_build']:.3f} s against {base['mean_step_s']:.3f} s without refresh "
                         f"({percent(row['slowdown_during_build'])})")
        if row["swaps_per_run"]:
            sentence += (f". {row['swaps_per_run']:.1f} indexes per run were swapped in, "
                         f"{row['staleness_steps_mean']:.1f} steps and {row['staleness_s_mean']:.1f} s stale on "
                         f"average (builds took {row['build_s_mean']:.1f} s).")
        else:
            sentence += ". No build finished before the run ended, so no index was swapped in."
        sentences.append("- " + sentence)
    sentences.append(f"- Here the builder and the trainer compete for the same {cores} cores, so the slowdown is "
                     "the CPU time the builds take from the trainer; a builder on a GPU (`refresh_device`, the default "
                     "for a GPU trainer) is not measured here (no GPU on this machine).")
    return sentences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_argument(parser, "--cases", nargs="+", choices=CASES, default=["none", "process-all", "process", "partition"],
                 help="'none' (the baseline, always measured), 'process-all', 'process', 'partition', 'thread'")
    add_argument(parser, "--rounds", type=int, default=2, help="fresh worker processes per case, cases alternating")
    add_argument(parser, "--steps", type=int, help=f"steps per run (default {REAL['steps']}, --tiny {TINY['steps']})")
    add_argument(parser, "--refresh-every", type=int,
                 help=f"refresh period in steps (default {REAL['refresh_every']}, --tiny {TINY['refresh_every']})")
    add_argument(parser, "--warmup", type=int, default=2, help="first steps of each run left out of the statistics")
    add_argument(parser, "--max-articles", type=int, help="articles of the corpus (default 40, --tiny 6)")
    add_argument(parser, "--threads", type=int, default=os.cpu_count(), help="torch threads of the trainer")
    add_argument(parser, "--refresh-threads", type=int, default=None,
                 help="torch threads of the builder process in every refresh case (default: each case's own)")
    add_argument(parser, "--time-share", type=float, default=0.1,
                 help="the paced builder's share of the trainer's time (case 'paced')")
    add_argument(parser, "--tiny", action="store_true", help="tiny random models on embedded articles (smoke run)")
    add_argument(parser, "--output-dir", default=RESULTS)
    add_argument(parser, "--output-name", default="refresh", help="<output-dir>/<name>.json and .md")
    add_argument(parser, "--keep-work", action="store_true", help="keep the temporary work directory")
    parser.add_argument("--worker", choices=CASES, help=argparse.SUPPRESS)
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s[%(process)d] %(message)s", stream=sys.stderr)

    if args.worker:
        with open(args.job, encoding="utf-8") as f:
            job = json.load(f)
        result = run_worker(args.worker, job)
        with open(job["result_path"], "w", encoding="utf-8") as f:
            json.dump(result, f)
        return

    preset = TINY if args.tiny else REAL
    settings = {key: dict(value) if isinstance(value, dict) else value for key, value in preset.items()}
    settings["steps"] = args.steps or preset["steps"]
    settings["refresh_every"] = args.refresh_every or preset["refresh_every"]
    if args.max_articles:
        settings["corpus"]["max_articles"] = args.max_articles
    settings.update(rounds=args.rounds, warmup=args.warmup, threads=args.threads, refresh_threads=args.refresh_threads,
                    time_share=args.time_share, tiny=args.tiny)
    cases = ["none"] + [case for case in dict.fromkeys(args.cases) if case != "none"]
    command = " ".join(["HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_refresh.py", *sys.argv[1:]])
    load_at_start = os.getloadavg()
    work_dir = tempfile.mkdtemp(prefix="bench_refresh-")
    logger.info("cases %s, settings %s, work dir %s", cases, settings, work_dir)
    began = time.perf_counter()
    runs = []
    try:
        for round_index in range(args.rounds):
            shift = round_index % len(cases)
            for case in cases[shift:] + cases[:shift]:
                job = {"round": round_index, "settings": settings, "steps": settings["steps"],
                       "refresh_every": settings["refresh_every"], "threads": args.threads,
                       "refresh_threads": args.refresh_threads, "time_share": args.time_share,
                       "work_dir": work_dir,
                       "cache_dir": os.path.join(work_dir, "cache"),
                       "output_dir": os.path.join(work_dir, f"run-{round_index}-{case}")}
                logger.info("round %d/%d: %s", round_index + 1, args.rounds, case)
                runs.append(launch(case, job))
    finally:
        if not args.keep_work:
            shutil.rmtree(work_dir, ignore_errors=True)
    first = runs[0]
    result = {
        "command": command,
        "machine": {"cpu_model": cpu_model(), "cores": os.cpu_count(), "platform": platform.platform(),
                    "python": platform.python_version(), "torch": first["torch"],
                    "transformers": first["transformers"], "trainer_threads": first["num_threads"],
                    "niceness": os.nice(0)},
        "load_average_at_start": load_at_start,
        "load_average_at_end": os.getloadavg(),
        "settings": settings,
        "wall_s": time.perf_counter() - began,
        "summary": summarize(runs, cases, args.warmup),
        "runs": runs,
    }
    os.makedirs(args.output_dir, exist_ok=True)
    stem = os.path.join(args.output_dir, args.output_name)
    with open(f"{stem}.json", "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    text = markdown(result)
    with open(f"{stem}.md", "w", encoding="utf-8") as f:
        f.write(text)
    logger.info("wrote %s.json and %s.md in %.0f s", stem, stem, result["wall_s"])
    print(text)


if __name__ == "__main__":
    main()
