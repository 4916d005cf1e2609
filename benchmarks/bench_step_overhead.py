"""Host (CPU / Python) time of one REALM pre-training step and one Open-QA fine-tuning step, phase by phase.

On a GPU the training loops run far below what the model's compute allows (an H200 ran the REALM step at ~1.2-1.5
steps/s for ~0.1 s of GPU work): the rest of each step is host work. This benchmark measures that host work on the
CPU with the model made negligible (the tiny random models of `random_init`, smaller still by default: see
`--hidden`), through the real trainers and their real data path:

- pre-training: `RealmPretrainer` over the first `--articles` articles of wiki-2015 cut into 288-wordpiece blocks
  (the packaged MiniLM tokenizer), salient-span masked sentences of the blocks (X = Z), a torch-exact index, batch
  64, 8 candidates (7 retrieved + the null document), query 64, joined 352, 2 length buckets; `--warmup_steps`
  steps of reading warm-up (each sentence's own block as its only candidate) then steps with retrieval. The loop is
  the trainer's own `train()`; each phase is timed by wrapping the method that does it (the DataLoader's `next`,
  `embed_sentences`, `index.search`, `index.get_blocks` / `get_block_arrays`, the rest of `_collate` (rows ->
  per-candidate dicts, moving to the device), the collator, the model's forward, the step's logs, backward,
  clipping, optimizer + scheduler + zero_grad, `on_step_end`, `_log`); the rest of the iteration is "loop other"
  (the loss `.item()`, the running averages, the progress bar, freeing the step's tensors).
- Open-QA: `OpenQaTrainer` over the same articles (an index built by the tiny document tower), the training
  questions of `examples/configs/wiki-gpu-openqa.yaml` (NQ-open dev 1000+, WebQuestions and CuratedTrec train; the
  last with regular-expression answers), batch 32, top-5 blocks, query 48, joined 336: question tokenization +
  query embedding, search, block fetch + stored embeddings, the collator (with the answer-span search), forward,
  logs, backward, optimizer.

Times are per step, medians (and means in the JSON) over the steps after the first `--skip` of each kind, in
milliseconds, with `time.perf_counter`. "host" is a step less its forward and backward: what a GPU does not take
off the CPU (the forward and backward of even these tiny models are the bulk of a step on the CPU, and vary with the
machine's load; on a GPU they are milliseconds). "gc pauses" is the garbage collector's time inside the phases. A
second pass runs `--profile_steps` steps of each kind under cProfile and prints the top functions by cumulative and
by own time. `--search_blocks` also times the step's search over a torch-exact index of wiki-2015's size on the CPU
(where the trainers keep it).

Before / after in one invocation: `--baseline_src DIR` runs this same script in a child process with `DIR` (a `src`
directory of another revision, e.g. `git archive <rev> src | tar -x -C /tmp/base`) first on the import path,
`--rounds N` alternates the two trees N times and pools their steps, and both tables are printed side by side:

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_step_overhead.py --baseline_src /tmp/base/src --rounds 3 \
        --output /tmp/step-overhead.json

The first run masks the sentences with spaCy and caches blocks and sentences under `--cache_dir` (a few minutes on
2 cores); later runs read them.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import gc
import io
import json
import logging
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.join(REPO, "..", "shared", "data", "wiki-2015")
QA_DIR = os.path.join(REPO, "..", "shared", "data", "qa")
# the training questions of examples/configs/wiki-gpu-openqa.yaml (CuratedTrec's answers are regular expressions)
DEFAULT_QA = ",".join(
    os.path.join(QA_DIR, name) for name in ("nq-dev.jsonl[1000:]", "webquestions-train.jsonl", "curatedtrec-train.jsonl")
)

logger = logging.getLogger("bench_step_overhead")

PRETRAIN_PHASES = (
    "data (DataLoader next)", "query embedding", "index search", "block fetch (get_blocks)",
    "rows -> dicts, to device", "collation", "forward", "step logs (.item)", "backward", "clip grad",
    "optimizer+sched+zero_grad", "on_step_end", "logging (_log)", "loop other",
)
OPENQA_PHASES = (
    "data (DataLoader next)", "retrieve: tokenize+embed", "index search", "block fetch (get_blocks)",
    "stored embeddings", "collation", "forward", "step logs (.item)", "backward", "clip grad",
    "optimizer+sched+zero_grad", "on_step_end", "logging (_log)", "loop other",
)


# ----------------------------------------------------------------------------------------------------- timing
class PhaseTimer:
    """Wall time per phase, accumulated over one loop iteration; `next_iteration` closes the iteration. The garbage
    collector's pauses are recorded too ("gc pauses", inside whichever phase they interrupt)."""

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self.steps: list[dict[str, float]] = []
        self.kinds: list[str] = []
        self.iteration_start: float | None = None
        self.kind = ""
        self._gc_began: float | None = None
        self.gc_pauses = 0.0  # of the current iteration
        gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_began = time.perf_counter()
        elif self._gc_began is not None:
            self.gc_pauses += time.perf_counter() - self._gc_began
            self._gc_began = None

    def close(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def wrap(self, name: str, function, subtract: tuple[str, ...] = ()):
        """`function` timed as `name`; time spent meanwhile in the phases `subtract` is not counted twice."""

        @functools.wraps(function)
        def timed(*args, **kwargs):
            before = {phase: self.current[phase] for phase in subtract}
            began = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                spent = time.perf_counter() - began
                spent -= sum(self.current[phase] - before[phase] for phase in subtract)
                self.current[name] += spent

        return timed

    def next_iteration(self) -> None:
        now = time.perf_counter()
        if self.iteration_start is not None and self.current:
            total = now - self.iteration_start
            self.current["total"] = total
            self.current["loop other"] = total - sum(v for k, v in self.current.items() if k != "total")
            self.steps.append({**self.current, "gc pauses": self.gc_pauses})
            self.kinds.append(self.kind)
        self.current = defaultdict(float)
        self.gc_pauses = 0.0
        self.iteration_start = now


class TimedLoader:
    """The trainer's DataLoader with `next()` timed; the timer's iteration starts when a batch is asked for."""

    def __init__(self, loader, timer: PhaseTimer) -> None:
        self._loader, self._timer = loader, timer

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self):
        iterator = iter(self._loader)
        while True:
            self._timer.next_iteration()
            began = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                self._timer.current.clear()
                self._timer.iteration_start = None
                return
            self._timer.current["data (DataLoader next)"] += time.perf_counter() - began
            yield batch


class TimedCollator:
    def __init__(self, collator, timer: PhaseTimer, name: str = "collation") -> None:
        self._collator, self._call = collator, timer.wrap(name, collator.__call__)

    def __getattr__(self, name):
        return getattr(self._collator, name)

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)


def instrument_loop(trainer, timer: PhaseTimer) -> None:
    """Wrap what the shared `TrainingLoop.train` calls (the same for both trainers)."""
    trainer.dataloader = TimedLoader(trainer.dataloader, timer)
    model = trainer.model
    model.forward = timer.wrap("forward", model.forward)
    accelerator = trainer.accelerator
    accelerator.backward = timer.wrap("backward", accelerator.backward)
    accelerator.clip_grad_norm_ = timer.wrap("clip grad", accelerator.clip_grad_norm_)
    trainer.optimizer.step = timer.wrap("optimizer+sched+zero_grad", trainer.optimizer.step)
    trainer.optimizer.zero_grad = timer.wrap("optimizer+sched+zero_grad", trainer.optimizer.zero_grad)
    trainer.scheduler.step = timer.wrap("optimizer+sched+zero_grad", trainer.scheduler.step)
    trainer.on_step_end = timer.wrap("on_step_end", trainer.on_step_end)
    trainer._log = timer.wrap("logging (_log)", trainer._log)


MODEL_PHASES = ("forward", "backward")
"""The model's compute (and the host work inside the model's forward and backward): on this CPU it is the bulk of a
step even for the tiny models, on a GPU it is milliseconds. The "host" row of the tables is the rest of the step."""


def samples(timer: PhaseTimer, skip: int) -> dict[str, list[dict[str, float]]]:
    """The timed steps of each kind (ms per phase), without the first `skip` of each kind."""
    out: dict[str, list[dict[str, float]]] = {}
    for kind in dict.fromkeys(timer.kinds):
        steps = [s for s, k in zip(timer.steps, timer.kinds) if k == kind][skip:]
        if steps:
            out[kind] = [
                {**{phase: 1000 * value for phase, value in step.items()},
                 "host": 1000 * (step["total"] - sum(step.get(phase, 0.0) for phase in MODEL_PHASES))}
                for step in steps
            ]
    return out


def summarize(steps: list[dict[str, float]], phases: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Median and mean ms of each phase, of the host work and of the whole step."""
    return {
        phase: {
            "median_ms": statistics.median(step.get(phase, 0.0) for step in steps),
            "mean_ms": statistics.fmean(step.get(phase, 0.0) for step in steps),
        }
        for phase in (*phases, "host", "total", "gc pauses")
    }


def profile_report(profiler: cProfile.Profile, steps: int, top: int) -> dict[str, str]:
    out = {}
    for key in ("cumulative", "tottime"):
        stream = io.StringIO()
        stats = pstats.Stats(profiler, stream=stream)
        stats.strip_dirs().sort_stats(key).print_stats(top)
        out[key] = f"({steps} steps)\n" + stream.getvalue()
    return out


# ----------------------------------------------------------------------------------------------- the trainers
@contextlib.contextmanager
def small_models(hidden: int):
    """Tinier random models than `TINY_BERT` (1 layer, 1 head) while in the block: the model's compute is then
    nearly nothing and the step is its host work. `TINY_BERT` is put back afterwards."""
    from realm_hf.training import models

    saved = dict(models.TINY_BERT)
    if hidden:
        models.TINY_BERT.update(
            hidden_size=hidden, num_hidden_layers=1, num_attention_heads=1, intermediate_size=2 * hidden
        )
    try:
        yield
    finally:
        models.TINY_BERT.clear()
        models.TINY_BERT.update(saved)


def make_pretrainer(args, output_dir: str, max_steps: int, warmup_steps: int | None = None):
    from realm_hf.training import CorpusArguments, LoopArguments, ModelArguments, PretrainingArguments, RealmPretrainer

    loop = LoopArguments(
        output_dir=output_dir, max_steps=max_steps, per_device_batch_size=args.batch_size, learning_rate=1e-4,
        warmup_steps=5, logging_steps=10, save_steps=0, report_to="none", mixed_precision="no", seed=0,
    )
    model = ModelArguments(random_init=True, pooling="mean", projection_size=128, length_buckets=2)
    corpus = CorpusArguments(
        corpus=args.corpus, max_articles=args.articles, block_length=288, query_max_length=64, joined_max_length=352,
        index_type="torch-exact", embed_dtype="float32", embed_batch_size=256, cache_dir=args.cache_dir,
    )
    pretraining = PretrainingArguments(
        masking=args.masking, mask_source_blocks=args.mask_source_blocks, num_candidates=8,
        reading_warmup_steps=args.warmup_steps if warmup_steps is None else warmup_steps, refresh_schedule="1000000", refresh_mode="thread",
        eval_mlm_examples=0, mlm_head_learning_rate=1e-3, retriever_learning_rate=3e-5, rebuild_final_index=False,
    )
    return RealmPretrainer(loop, model, corpus, pretraining)


def instrument_pretrainer(trainer, timer: PhaseTimer) -> None:
    instrument_loop(trainer, timer)
    trainer.embed_sentences = timer.wrap("query embedding", trainer.embed_sentences)
    trainer.index.search = timer.wrap("index search", trainer.index.search)
    trainer.index.get_blocks = timer.wrap("block fetch (get_blocks)", trainer.index.get_blocks)
    if hasattr(trainer.index, "get_block_arrays"):  # the Arrow-columns fetch (the rows above before it)
        trainer.index.get_block_arrays = timer.wrap("block fetch (get_blocks)", trainer.index.get_block_arrays)
    trainer.collator = TimedCollator(trainer.collator, timer)
    trainer.reading_collator = TimedCollator(trainer.reading_collator, timer)
    trainer._collate = timer.wrap(
        "rows -> dicts, to device", trainer._collate, subtract=("block fetch (get_blocks)", "collation")
    )
    trainer.retrieval_logs = timer.wrap("step logs (.item)", trainer.retrieval_logs)
    training_step = trainer.training_step

    def step(examples):
        timer.kind = "reading warm-up" if trainer.step < trainer.pretraining_args.reading_warmup_steps else "retrieval"
        return training_step(examples)

    trainer.training_step = step


def make_openqa_trainer(args, output_dir: str, max_steps: int):
    from realm_hf.training import CorpusArguments, LoopArguments, ModelArguments
    from realm_hf.training.openqa import OpenQaArguments, OpenQaTrainer

    loop = LoopArguments(
        output_dir=output_dir, max_steps=max_steps, per_device_batch_size=32, learning_rate=5e-5, warmup_steps=5,
        logging_steps=25, save_steps=0, report_to="none", mixed_precision="no", seed=0,
    )
    model = ModelArguments(random_init=True, pooling="mean", projection_size=128, length_buckets=2)
    corpus = CorpusArguments(
        corpus=args.corpus, max_articles=args.articles, block_length=288, query_max_length=48, joined_max_length=336,
        index_type="torch-exact", embed_dtype="float32", embed_batch_size=256, cache_dir=args.cache_dir,
    )
    openqa = OpenQaArguments(train_file=args.qa_file, top_k=5, truncate_questions=True)
    return OpenQaTrainer(loop, model, corpus, openqa)


def instrument_openqa(trainer, timer: PhaseTimer):
    import realm_hf.evaluation.retrieval as evaluation

    instrument_loop(trainer, timer)
    trainer.index.search = timer.wrap("index search", trainer.index.search)
    trainer.index.get_blocks = timer.wrap("block fetch (get_blocks)", trainer.index.get_blocks)
    trainer.index.get_embeddings = timer.wrap("stored embeddings", trainer.index.get_embeddings)
    trainer.collator = TimedCollator(trainer.collator, timer)
    original_retrieve_blocks = evaluation.retrieve_blocks
    evaluation.retrieve_blocks = timer.wrap(
        "retrieve: tokenize+embed", original_retrieve_blocks, subtract=("index search",)
    )
    read = trainer.read
    # what `read` spends outside the model, the collation and retrieval: the `.item()` logs
    trainer.read = timer.wrap(
        "step logs (.item)", read,
        subtract=("retrieve: tokenize+embed", "index search", "block fetch (get_blocks)", "stored embeddings",
                  "collation", "forward"),
    )
    training_step = trainer.training_step

    def step(examples):
        timer.kind = "top-5 retrieval"
        return training_step(examples)

    trainer.training_step = step

    def restore() -> None:  # `evaluation.retrieve_blocks` is the module's: put it back
        evaluation.retrieve_blocks = original_retrieve_blocks

    return restore


# ------------------------------------------------------------------------------------------------------- runs
def run_timed(args, which: str) -> dict:
    import torch

    torch.manual_seed(0)
    result: dict = {}
    with tempfile.TemporaryDirectory(prefix=f"step-overhead-{which}-") as work:
        steps = (args.warmup_steps + args.steps) if which == "pretrain" else args.steps
        began = time.perf_counter()
        trainer = (make_pretrainer if which == "pretrain" else make_openqa_trainer)(args, work, steps)
        result["setup_seconds"] = time.perf_counter() - began
        if which == "pretrain":
            result["blocks"] = len(trainer.blocks)
            result["sentences"] = len(trainer.train_examples)
        else:
            result["blocks"] = trainer.index.num_blocks
            result["questions"] = len(trainer.train_examples)
        timer = PhaseTimer()
        restore = (instrument_pretrainer if which == "pretrain" else instrument_openqa)(trainer, timer)
        trainer.evaluate = lambda step: {}
        trainer.save_model = lambda directory: None
        began = time.perf_counter()
        try:
            trainer.train()
        finally:
            timer.close()
            if restore is not None:
                restore()
        timer.next_iteration()
        result["train_seconds"] = time.perf_counter() - began
        result["samples"] = samples(timer, args.skip)

        if args.profile_steps and not args.no_profile:
            profiled = os.path.join(work, "profiled")
            if which == "pretrain":  # half reading warm-up, half retrieval
                trainer2 = make_pretrainer(args, profiled, 2 * args.profile_steps, warmup_steps=args.profile_steps)
            else:
                trainer2 = make_openqa_trainer(args, profiled, args.profile_steps)
            trainer2.evaluate = lambda step: {}
            trainer2.save_model = lambda directory: None
            profiler = cProfile.Profile()
            profiler.enable()
            trainer2.train()
            profiler.disable()
            result["profile"] = profile_report(profiler, trainer2.step, args.profile_top)
    return result


def search_at_scale(num_blocks: int, batch_size: int, k: int, repeats: int = 5) -> dict:
    """`RealmIndex.search` of a batch of queries with one excluded block each (what the pre-training step runs) over
    a torch-exact index of `num_blocks` random 128-d float32 embeddings held on the CPU, as the trainer's index is
    (`PretrainingIndexMixin._build_index_now` and the refresher load it without a device): ms per search."""
    import numpy as np
    import torch

    import datasets
    from realm_hf.index import RealmIndex

    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((num_blocks, 128), dtype=np.float32)
    blocks = datasets.Dataset.from_dict({"block_id": np.arange(num_blocks)})
    index = RealmIndex.from_embeddings(blocks, embeddings, index_type="torch-exact")
    queries = torch.from_numpy(rng.standard_normal((batch_size, 128), dtype=np.float32))
    exclude = [[int(i)] for i in rng.integers(0, num_blocks, batch_size)]
    index.search(queries, k, exclude=exclude)
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        index.search(queries, k, exclude=exclude)
        times.append(1000 * (time.perf_counter() - began))
    return {"blocks": num_blocks, "queries": batch_size, "k": k, "median_ms": statistics.median(times)}


def device_description() -> str:
    import torch

    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    return f"{model}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, torch {torch.__version__}"


def measure(args) -> dict:
    import torch

    import realm_hf

    threads = torch.get_num_threads()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        out = {"realm_hf": os.path.dirname(realm_hf.__file__), "device": device_description(), "runs": {}}
        with small_models(args.hidden):
            for which in args.which.split(","):
                logger.warning("measuring %s (%s)", which, out["realm_hf"])
                out["runs"][which] = run_timed(args, which)
        if args.search_blocks and not args.json_only and not args.no_profile:
            out["search_at_scale"] = search_at_scale(args.search_blocks, args.batch_size, 7)
    finally:
        torch.set_num_threads(threads)
    return out


def merge(results: list[dict]) -> dict:
    """The rounds of one source tree as one result: their steps together (the profile of the first round)."""
    merged = {key: value for key, value in results[0].items() if key != "runs"}
    merged["rounds"] = len(results)
    merged["runs"] = {}
    for which, run in results[0]["runs"].items():
        phases = PRETRAIN_PHASES if which == "pretrain" else OPENQA_PHASES
        out = {key: value for key, value in run.items() if key != "samples"}
        steps = {kind: [step for result in results for step in result["runs"][which]["samples"].get(kind, [])]
                 for kind in run["samples"]}
        out["timings"] = {kind: {"steps": len(s), "phases": summarize(s, phases)} for kind, s in steps.items()}
        out["samples"] = steps
        merged["runs"][which] = out
    return merged


def print_table(results: dict[str, dict], stream=sys.stdout) -> None:
    """Per-phase medians (ms/step); one column per source tree."""
    labels = list(results)
    kinds = []
    for label in labels:
        for which, run in results[label]["runs"].items():
            for kind in run["timings"]:
                if (which, kind) not in kinds:
                    kinds.append((which, kind))
    for which, kind in kinds:
        phases = PRETRAIN_PHASES if which == "pretrain" else OPENQA_PHASES
        counts = ", ".join(
            f"{label} {results[label]['runs'][which]['timings'][kind]['steps']}" for label in labels
            if kind in results[label]["runs"].get(which, {}).get("timings", {})
        )
        print(f"\n{which} / {kind}: median ms per step (steps: {counts})", file=stream)
        print(f"  {'phase':28s}" + "".join(f"{label:>14s}" for label in labels), file=stream)
        for phase in (*phases, "host", "total", "gc pauses"):
            if phase == "host":
                print(f"  {'-' * 28}" + "-" * 14 * len(labels), file=stream)
            cells = []
            for label in labels:
                timing = results[label]["runs"].get(which, {}).get("timings", {}).get(kind)
                cells.append(f"{timing['phases'][phase]['median_ms']:14.1f}" if timing else f"{'-':>14s}")
            name = {"host": "host (all but fwd/bwd)", "gc pauses": "(gc pauses, inside the above)"}.get(phase, phase)
            print(f"  {name:28s}" + "".join(cells), file=stream)


def run_baseline(args, argv: list[str] | None, first: bool) -> dict:
    """This script in a child process with `--baseline_src` first on the import path: its result (one round)."""
    given = list(argv if argv is not None else sys.argv[1:])
    child_args, skip_next = [], False
    for arg in given:
        if skip_next:
            skip_next = False
            continue
        if arg in ("--baseline_src", "--output", "--label", "--rounds"):
            skip_next = True
            continue
        if not arg.startswith(("--baseline_src=", "--output=", "--label=", "--rounds=")):
            child_args.append(arg)
    if not first:
        child_args += ["--profile_steps", "0"]
    env = dict(
        os.environ, PYTHONPATH=os.path.abspath(args.baseline_src) + os.pathsep + os.environ.get("PYTHONPATH", "")
    )
    logger.warning("measuring the baseline %s in a child process", args.baseline_src)
    child = subprocess.run(
        [sys.executable, os.path.abspath(__file__), *child_args, "--json_only", "--search_blocks", "0"], env=env,
        check=True, stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir(),
    )
    return json.loads(child.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--which", default="pretrain,openqa", help="pretrain, openqa, or both (comma-separated)")
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--qa_file", default=DEFAULT_QA)
    parser.add_argument("--articles", type=int, default=300)
    parser.add_argument("--masking", default="salient_span")
    parser.add_argument("--mask_source_blocks", type=int, default=1500)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--warmup_steps", type=int, default=15, help="pre-training steps of reading warm-up")
    parser.add_argument("--steps", type=int, default=15, help="timed steps (pre-training: after the warm-up)")
    parser.add_argument("--skip", type=int, default=3, help="first steps of each kind left out of the statistics")
    parser.add_argument("--hidden", type=int, default=8, help="hidden size of the 1-layer random models (0: TINY_BERT)")
    parser.add_argument(
        "--threads", type=int, default=1,
        help="torch threads (default 1: the host work is one Python thread, and one torch thread keeps the model's "
        "small ops from waiting on a second core that another process holds; 0: torch's default)",
    )
    parser.add_argument("--profile_steps", type=int, default=10, help="steps of each kind under cProfile (0: none)")
    parser.add_argument("--profile_top", type=int, default=35)
    parser.add_argument(
        "--search_blocks", type=int, default=151_561,
        help="also time one search of the step's queries over an index of this many random blocks on the CPU "
        "(wiki-2015's count; 0: skip)",
    )
    parser.add_argument("--cache_dir", default=os.path.join(tempfile.gettempdir(), "realm-step-overhead-cache"))
    parser.add_argument("--baseline_src", default=None, help="a src/ directory of another revision, measured too")
    parser.add_argument(
        "--rounds", type=int, default=1,
        help="measure each tree this many times, alternating with the baseline; the steps of all rounds are pooled",
    )
    parser.add_argument("--label", default="this tree")
    parser.add_argument("--json_only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--output", default=None, help="write the results (JSON) here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    for name in ("realm_hf", "accelerate", "datasets", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")

    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    rounds: dict[str, list[dict]] = {"baseline": [], args.label: []} if args.baseline_src else {args.label: []}
    for round_index in range(args.rounds):
        if args.baseline_src:  # alternate the trees, so that a slower stretch of the machine falls on both
            rounds["baseline"].append(run_baseline(args, argv, first=round_index == 0))
        args.no_profile = round_index > 0
        rounds[args.label].append(measure(args))
    results = {label: merge(runs) for label, runs in rounds.items()}
    if args.json_only:
        print(json.dumps(rounds[args.label][0]))
        return
    for label, result in results.items():
        print(f"[{label}] realm_hf from {result['realm_hf']}; {result['device']}")
    print_table(results)
    scale = results[args.label].get("search_at_scale")
    if scale:
        print(
            f"\nindex search over {scale['blocks']:,} blocks (torch-exact on the CPU, {scale['queries']} queries, "
            f"k={scale['k']}, 1 excluded each): {scale['median_ms']:.1f} ms"
        )
    for label, result in results.items():
        for which, run in result["runs"].items():
            for key, text in run.get("profile", {}).items():
                print(f"\n===== [{label}] {which}: cProfile sorted by {key} =====\n{text}")
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
