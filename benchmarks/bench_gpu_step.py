"""GPU throughput of the REALM pre-training step, of a bare `BertModel` over the same tokens, and of the index build.

Command (one H100 / H200, about 30-60 s including start-up; prints a table and writes the JSON):

    HF_HUB_OFFLINE=1 python benchmarks/bench_gpu_step.py --batch_size 64 --output out.json

CPU smoke run (tiny random models, a few seconds; what tests/test_bench_gpu_step.py runs):

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_gpu_step.py --device cpu --random_init --batch_size 2 \
        --num_candidates 3 --query_length 8 --block_length 32 --steps 2 --warmup 1 --index_blocks 16 --output x.json

What is measured, at one batch (B masked sentences of `--query_length` Lq wordpieces, K = `--num_candidates`
candidates each, the null document included, blocks of `--block_length` Lz wordpieces, joined reader sequences
`[CLS] x [SEP] z_body [SEP]` of at most Lq + Lz):

1. ``realm_step``: what `RealmPretrainer.training_step` and the loop run per optimizer step, once the batch is
   collated: `RealmPretrainingModel(batch)` (the retriever re-scores the K candidates with gradient, the knowledge
   encoder reads the B*K joined sequences and marginalizes) under bf16 autocast on CUDA (as accelerate's
   mixed_precision=bf16), fp32 on the CPU; `loss.backward()`; gradient clipping at 1.0; the fused AdamW step over
   `decay_parameter_groups`; `zero_grad`. The models come from `training.models.load_models` (the packaged
   all-MiniLM-L6-v2, or `--random_init` tiny models), the batch from the project's `RealmPretrainingCollator`
   with random token ids: B sentences of Lq wordpieces with `NUM_MASKED` masked positions each, K-1 blocks of Lz
   wordpieces (`[CLS] title [SEP] body [SEP]`, a title of `block_title_length(Lz)`) per sentence, and the null
   document the collator adds. Not timed: the search-time query embedding (a no-grad forward of the B queries),
   the index search and the collation itself.
2. ``bert_step``: one bare `transformers.BertModel` (a copy of the encoder's: same config, same attention
   implementation) forward + backward of the mean of its last hidden states, the same clipping and fused AdamW
   step, fed *the very tensors that the BERTs inside the REALM step received*: forward pre-hooks on every
   `BertModel` of `RealmPretrainingModel` record each call of one REALM step (input ids, attention mask, token
   types), and the bare model replays them. With MiniLM and one length bucket that is three calls: the retriever's
   B queries `[B, Lq]`, its B*K candidate blocks `[B*K, Lz]` (all K, the null document included: the step
   re-embeds every candidate with gradient, the null document padded to Lz like the others) and the encoder's
   B*K joined sequences `[B*K, Lq+Lz-t-2]` (t: title length). Same tokens, same padding, same sequence lengths:
   what is left between the two rows is the REALM overhead (the MLM head at the masked positions, the
   marginalization, two BERTs' optimizer and clipping work instead of one).
3. ``index_build``: blocks/s of `realm_hf.index.embedding.embed_blocks` (what an index build / refresh runs:
   host-side padding of length-sorted batches, transfer, the retriever's document tower under `torch.no_grad` and
   bf16 autocast on CUDA, fp32 on the CPU, copies back to host) over `--index_blocks` random blocks of Lz
   wordpieces in batches of `--index_batch_size` (the trainer's `embed_batch_size` default); and ``doc_tower``:
   the document tower alone over the same blocks already on the device (the floor of the build).

Counting. Tokens are real (non-padding) tokens: the sum of the attention masks of every BERT call of the step
(recorded by the hooks, so it counts exactly what the model runs; the JSON also gives the padded positions and
each call's shape). The same count comes out of the collated batch (query + candidate + joined masks), which the
JSON records as ``tokens_in_batch`` and which must equal the REALM step's count. Model FLOPs per step are
``6 * N * T + 12 * layers * hidden * sum(s^2)`` for calls with gradient (forward + backward) and
``2 * N * T + 4 * layers * hidden * sum(s^2)`` for forward-only ones (the index), where N is the number of
non-embedding parameters of one BERT (its transformer layers; embeddings, pooler, projection and MLM head left
out), T the real tokens and s the real length of each sequence. The same formula for both rows, so their MFUs
compare: the REALM step's extra work is not counted as model FLOPs. MFU = model FLOPs / (step time * peak), against
`--peak_tflops` (989: the H100 / H200 SXM dense bf16 peak) and against the ceiling measured on these machines, about
790 TFLOP/s for an 8192^3 bf16 matmul. Times are medians of `--steps` timed steps after `--warmup` untimed ones
(plus the recording step), each synchronized with the GPU. On CUDA an out-of-memory error at the REALM or BERT step
halves the batch and tries again; the JSON records it.
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
from types import SimpleNamespace

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if importlib.util.find_spec("realm_hf") is None:  # a checkout without `pip install -e .`: its source tree
    sys.path.insert(0, os.path.join(HERE, "..", "src"))

from bench_common import cpu_model, device_name, synchronize  # noqa: E402
from bench_models import BERT as MINILM_SIZE_BERT, NUM_MASKED, TITLE_LEN  # noqa: E402

BERT_BASE_SIZE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}
"""`--size bert-base`: the shapes of bert-base-uncased (the paper's encoder and retriever), random weights."""

logger = logging.getLogger("bench_gpu_step")

PEAK_TFLOPS = 989.0
"""H100 / H200 SXM dense bf16 peak, TFLOP/s."""
MEASURED_MATMUL_TFLOPS = 790.0
"""What an 8192^3 bf16 matmul reached on the lent H100 / H200 machines, TFLOP/s: the practical ceiling."""
BERT_IDS = SimpleNamespace(cls_token_id=101, sep_token_id=102, pad_token_id=0, mask_token_id=103, vocab_size=30522)
"""The special ids of BERT's uncased vocabulary (MiniLM's), used when the packaged tokenizer is not installed."""


# ----------------------------------------------------------------------------------------------------- device
def autocast(device: torch.device):
    """bf16 autocast on CUDA (accelerate's mixed_precision=bf16), none (fp32) on the CPU."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")


def is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, torch.OutOfMemoryError) or "out of memory" in str(error).lower()


def free_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# ----------------------------------------------------------------------------------------------------- models
def load_tokenizer(random_init: bool):
    """The trainer's tokenizer (the packaged MiniLM's), or BERT's special ids when it is not installed (only the ids
    matter: the token ids are random)."""
    from transformers import AutoTokenizer

    from realm_hf.training.arguments import ModelArguments
    from realm_hf.training.models import pretraining_tokenizer_path

    try:
        tokenizer = AutoTokenizer.from_pretrained(pretraining_tokenizer_path(ModelArguments(random_init=random_init)))
        return tokenizer, len(tokenizer)
    except (ImportError, OSError, FileNotFoundError) as error:
        logger.warning("no packaged tokenizer (%s): BERT's uncased special ids", error)
        return BERT_IDS, BERT_IDS.vocab_size


def build_model(args: argparse.Namespace, vocab_size: int, mask_token_id: int, work_dir: str):
    """`RealmPretrainingModel` as the trainer builds it (`load_models`); without the packaged MiniLM, from a random
    BERT of MiniLM's size saved to `work_dir` (same shapes, same speed). Returns (model, weights description)."""
    from transformers import BertConfig, BertModel

    from realm_hf.modeling.initial_weights import packaged_minilm_path
    from realm_hf.training.arguments import CorpusArguments, ModelArguments
    from realm_hf.training.models import load_models
    from realm_hf.training.pretraining_model import RealmPretrainingModel

    torch.manual_seed(0)
    model_args = ModelArguments(random_init=args.random_init, length_buckets=args.length_buckets)
    weights = "random tiny (training.models.TINY_BERT)" if args.random_init else "packaged all-MiniLM-L6-v2"
    if args.size == "bert-base" and not args.random_init:  # speed depends on the shapes only: random weights do
        path = os.path.join(work_dir, "bert-base-size")
        BertModel(BertConfig(**{**BERT_BASE_SIZE, "vocab_size": vocab_size})).save_pretrained(path)
        model_args.retriever = model_args.encoder = path
        weights = "random, BERT-base's size (12 layers, 768 hidden)"
    elif not args.random_init:
        try:
            packaged_minilm_path()
        except (ImportError, FileNotFoundError) as error:
            logger.warning("%s: a random BERT of MiniLM's size instead", error)
            path = os.path.join(work_dir, "minilm-size-bert")
            BertModel(BertConfig(**{**MINILM_SIZE_BERT, "vocab_size": vocab_size})).save_pretrained(path)
            model_args.retriever = model_args.encoder = path
            weights = "random, MiniLM's size (the packaged MiniLM is not installed)"
    corpus_args = CorpusArguments(
        block_length=args.block_length, query_max_length=args.query_length,
        joined_max_length=args.query_length + args.block_length,
    )
    retriever, encoder = load_models(model_args, corpus_args, vocab_size, mask_token_id)
    retriever.config.length_buckets = encoder.config.length_buckets = model_args.length_buckets
    return RealmPretrainingModel(retriever, encoder), weights


def make_optimizer(model: torch.nn.Module, device: torch.device) -> torch.optim.Optimizer:
    """The training loop's optimizer: fused AdamW over the weight-decay groups (LoopArguments' defaults)."""
    from realm_hf.training.loop import decay_parameter_groups

    return torch.optim.AdamW(
        decay_parameter_groups(model, 0.01), lr=3e-5, fused=device.type in ("cpu", "cuda") or None
    )


def non_embedding_parameters(bert) -> int:
    """Parameters of a BERT's transformer layers (no embeddings, no pooler)."""
    return sum(parameter.numel() for parameter in bert.encoder.parameters())


# ------------------------------------------------------------------------------------------------------ batch
def block_title_length(block_length: int) -> int:
    """Wordpieces of the synthetic blocks' titles: bench_models' TITLE_LEN, less in tiny blocks."""
    return max(0, min(TITLE_LEN, block_length // 4))


def synthetic_batch(tokenizer, vocab_size: int, batch_size: int, num_candidates: int, query_length: int,
                    block_length: int, seed: int = 0) -> tuple[list[dict], list[list[dict]]]:
    """B masked sentences `[CLS] x [SEP]` of `query_length` wordpieces (`NUM_MASKED` positions masked, their labels
    the original ids) and K-1 blocks `[CLS] title [SEP] body [SEP]` of `block_length` wordpieces each: the rows that
    `RealmPretrainer._collate` hands the collator."""
    g = torch.Generator().manual_seed(seed)
    low, high = min(1000, vocab_size // 2), vocab_size

    def ids(n: int) -> list[int]:
        return torch.randint(low, high, (n,), generator=g).tolist()

    examples = []
    for _ in range(batch_size):
        query = [tokenizer.cls_token_id, *ids(query_length - 2), tokenizer.sep_token_id]
        labels = [-100] * query_length
        num_masked = min(NUM_MASKED, query_length - 2)
        for position in (1 + torch.randperm(query_length - 2, generator=g)[:num_masked]).tolist():
            labels[position], query[position] = query[position], tokenizer.mask_token_id
        examples.append({"input_ids": query, "labels": labels, "source_block_id": -1})
    title = block_title_length(block_length)
    body = block_length - title - 3
    retrieved = [
        [
            {
                "block_id": b * num_candidates + k,
                "input_ids": [tokenizer.cls_token_id, *ids(title), tokenizer.sep_token_id, *ids(body),
                              tokenizer.sep_token_id],
                "token_type_ids": [0] * (title + 2) + [1] * (body + 1),
            }
            for k in range(num_candidates - 1)
        ]
        for b in range(batch_size)
    ]
    return examples, retrieved


def collate(tokenizer, examples, retrieved, args: argparse.Namespace, device: torch.device):
    """The K-candidate batch as `RealmPretrainer._collate` builds it (the null document first), on the device."""
    from realm_hf.data.collators import RealmPretrainingCollator

    collator = RealmPretrainingCollator(
        tokenizer, block_max_length=args.block_length, joined_max_length=args.query_length + args.block_length,
        use_null_document=True,
    )
    batch = collator(examples, retrieved)
    null_index = batch.pop("null_candidate_index", None)
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}, null_index


def tokens_in_batch(batch: dict) -> int:
    """Real tokens of a collated batch: query, candidate and joined masks."""
    masks = ("query_attention_mask", "candidate_attention_mask", "attention_mask")
    return int(sum(batch[name].sum() for name in masks))


# --------------------------------------------------------------------------------------------------- counting
class BertCalls:
    """Forward pre-hooks on every `BertModel` inside `model`: the inputs of each call while active."""

    def __init__(self, model: torch.nn.Module):
        from transformers import BertModel

        self.berts = {name or "bert": module for name, module in model.named_modules() if isinstance(module, BertModel)}
        self.calls: list[dict] = []
        self.handles = []

    def __enter__(self) -> "BertCalls":
        for name, bert in self.berts.items():
            self.handles.append(bert.register_forward_pre_hook(self._hook(name), with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []

    def _hook(self, name: str):
        def hook(module, args, kwargs):
            input_ids = kwargs.get("input_ids", args[0] if args else None)
            attention_mask = kwargs.get("attention_mask")
            if attention_mask is None:
                attention_mask = torch.ones_like(input_ids)
            self.calls.append({"bert": name, "input_ids": input_ids, "attention_mask": attention_mask,
                               "token_type_ids": kwargs.get("token_type_ids"), "grad": torch.is_grad_enabled()})
        return hook


def count(calls: list[dict], layers: int, hidden: int, parameters: int) -> dict:
    """Real tokens, padded positions and model FLOPs (see the module docstring) of recorded BERT calls."""
    total = {"real_tokens": 0, "padded_positions": 0, "sequences": 0, "model_flops": 0, "calls": []}
    for call in calls:
        lengths = call["attention_mask"].sum(-1).long().cpu()  # [N]
        tokens, squares = int(lengths.sum()), int((lengths * lengths).sum())
        if call["grad"]:
            flops = 6 * parameters * tokens + 12 * layers * hidden * squares
        else:
            flops = 2 * parameters * tokens + 4 * layers * hidden * squares
        rows, length = call["input_ids"].shape
        total["real_tokens"] += tokens
        total["padded_positions"] += rows * length
        total["sequences"] += rows
        total["model_flops"] += flops
        total["calls"].append({"bert": call["bert"], "shape": [rows, length], "real_tokens": tokens,
                               "grad": call["grad"], "model_flops": flops})
    return total


def figures(seconds: list[float], counted: dict, peak_tflops: float) -> dict:
    """Throughput, achieved TFLOP/s and MFU of a step from its timed repeats."""
    median = statistics.median(seconds)
    achieved = counted["model_flops"] / median / 1e12
    return {
        "ms_per_step": median * 1e3, "ms_per_step_min": min(seconds) * 1e3,
        "ms_per_step_all": [s * 1e3 for s in seconds],
        "tokens_per_second": counted["real_tokens"] / median, "achieved_tflops": achieved,
        "mfu": achieved / peak_tflops, "mfu_vs_measured_ceiling": achieved / MEASURED_MATMUL_TFLOPS,
    }


def timed(step, warmup: int, steps: int, device: torch.device) -> list[float]:
    for _ in range(warmup):
        step()
    synchronize(device)
    seconds = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return seconds


# ---------------------------------------------------------------------------------------------- measurements
def step_timer(step, args: argparse.Namespace, device: torch.device, recorded_module: torch.nn.Module,
               bert_config, parameters: int) -> tuple[dict, list[dict]]:
    """Run `step` once while recording the BERT calls inside `recorded_module` (untimed), then `--warmup` - 1 untimed
    and `--steps` timed steps. Returns the figures (with the counts) and the recorded calls."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with BertCalls(recorded_module) as recorded:
        step()
    calls = recorded.calls
    counted = count(calls, bert_config.num_hidden_layers, bert_config.hidden_size, parameters)
    seconds = timed(step, max(args.warmup - 1, 0), args.steps, device)
    result = figures(seconds, counted, args.peak_tflops) | counted
    if device.type == "cuda":
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return result, calls


def measure_realm(args: argparse.Namespace, batch_size: int, device: torch.device, tokenizer, vocab_size: int,
                  work_dir: str) -> tuple[dict, dict, list[dict], torch.nn.Module]:
    """The REALM step at `batch_size`. Returns its figures, the settings it found (weights, BERT config, tokens of the
    collated batch), the BERT calls of one step and a copy of the encoder's BERT (for the bare-BERT row)."""
    model, weights = build_model(args, vocab_size, tokenizer.mask_token_id, work_dir)
    model.to(device).train()
    optimizer = make_optimizer(model, device)
    examples, retrieved = synthetic_batch(tokenizer, vocab_size, batch_size, args.num_candidates, args.query_length,
                                          args.block_length)
    batch, null_index = collate(tokenizer, examples, retrieved, args, device)
    bert_config = model.encoder.config.bert_config
    parameters = non_embedding_parameters(model.encoder.bert)
    losses = []

    def realm_step() -> None:
        with autocast(device):
            out = model(batch, null_candidate_index=null_index)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(out.loss.detach())

    realm, calls = step_timer(realm_step, args, device, model, bert_config, parameters)
    realm["loss"] = float(losses[-1])
    logger.info("REALM step: %.1f ms, %.0f tokens/s", realm["ms_per_step"], realm["tokens_per_second"])
    found = {
        "weights": weights,
        "bert": {"layers": bert_config.num_hidden_layers, "hidden": bert_config.hidden_size,
                 "heads": bert_config.num_attention_heads, "intermediate": bert_config.intermediate_size,
                 "vocab": bert_config.vocab_size, "non_embedding_parameters": parameters,
                 "attention": getattr(bert_config, "_attn_implementation", None)},
        "tokens_in_batch": tokens_in_batch(batch),
    }
    replay = [{key: call[key] for key in ("input_ids", "attention_mask", "token_type_ids")} for call in calls]
    return realm, found, replay, copy.deepcopy(model.encoder.bert)


def measure_bert(args: argparse.Namespace, bert: torch.nn.Module, replay: list[dict], device: torch.device) -> dict:
    """The bare BertModel: forward + backward over the recorded inputs of the REALM step, the same clipping and
    AdamW step."""
    bert.train()
    optimizer = make_optimizer(bert, device)

    def bert_step() -> None:
        with autocast(device):
            loss = sum(bert(**inputs).last_hidden_state.float().mean() for inputs in replay)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(bert.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()

    bare, _ = step_timer(bert_step, args, device, bert, bert.config, non_embedding_parameters(bert))
    logger.info("BertModel step: %.1f ms, %.0f tokens/s", bare["ms_per_step"], bare["tokens_per_second"])
    return bare


def measure_steps(args: argparse.Namespace, batch_size: int, device: torch.device, tokenizer, vocab_size: int,
                  work_dir: str) -> dict:
    """The REALM step and the bare BertModel over the same tokens, at `batch_size`."""
    realm, found, replay, bert = measure_realm(args, batch_size, device, tokenizer, vocab_size, work_dir)
    free_memory(device)  # the REALM models, their gradients and optimizer states are gone
    return found | {"realm_step": realm, "bert_step": measure_bert(args, bert, replay, device)}


def measure_steps_halving(args, device, tokenizer, vocab_size, work_dir) -> tuple[dict, list[dict]]:
    """`measure_steps` at `args.batch_size`, halved after each out-of-memory error."""
    batch_size, retries = args.batch_size, []
    while True:
        failed = None
        try:
            return measure_steps(args, batch_size, device, tokenizer, vocab_size, work_dir) | {
                "batch_size": batch_size}, retries
        except (torch.OutOfMemoryError, RuntimeError) as error:
            if not is_out_of_memory(error) or batch_size == 1:
                raise
            failed = str(error).splitlines()[0]
        free_memory(device)  # outside the except block: the traceback's frames (and their tensors) are gone
        logger.warning("out of memory at batch %d (%s): trying %d", batch_size, failed, batch_size // 2)
        retries.append({"batch_size": batch_size, "error": failed})
        batch_size //= 2


def measure_index(args: argparse.Namespace, device: torch.device, tokenizer, vocab_size: int, work_dir: str) -> dict:
    """Blocks/s of `embed_blocks` with the retriever's document tower, and of the tower alone."""
    import datasets

    from realm_hf.index.embedding import embed_blocks

    model, _ = build_model(args, vocab_size, tokenizer.mask_token_id, work_dir)
    retriever = model.retriever.to(device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    n, length = args.index_blocks, args.block_length
    title = block_title_length(length)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(min(1000, vocab_size // 2), vocab_size, (n, length), generator=g)  # [N, Lz]
    ids[:, 0], ids[:, title + 1], ids[:, -1] = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.sep_token_id
    types = torch.zeros_like(ids)
    types[:, title + 2:] = 1
    blocks = datasets.Dataset.from_dict({"input_ids": ids.tolist(), "token_type_ids": types.tolist()})
    bert = retriever.document_embedder.bert
    layers, hidden = bert.config.num_hidden_layers, bert.config.hidden_size
    parameters = non_embedding_parameters(bert)
    flops = 2 * parameters * n * length + 4 * layers * hidden * n * length**2
    pad = tokenizer.pad_token_id or 0

    def run(rows) -> None:
        embed_blocks(rows, retriever, batch_size=args.index_batch_size, device=device, dtype=dtype,
                     pad_token_id=pad)

    run(blocks.select(range(min(n, 2 * args.index_batch_size))))  # warm-up
    synchronize(device)
    start = time.perf_counter()
    run(blocks)
    seconds = time.perf_counter() - start

    on_device = [(ids[i: i + args.index_batch_size].to(device), types[i: i + args.index_batch_size].to(device))
                 for i in range(0, n, args.index_batch_size)]
    retriever.eval()

    def tower() -> None:
        with torch.no_grad(), torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            for input_ids, token_type_ids in on_device:
                retriever.embed_documents(input_ids, torch.ones_like(input_ids), token_type_ids)

    tower_seconds = timed(tower, 1, 1, device)[0]

    def rates(elapsed: float) -> dict:
        achieved = flops / elapsed / 1e12
        return {"seconds": elapsed, "blocks_per_second": n / elapsed, "tokens_per_second": n * length / elapsed,
                "achieved_tflops": achieved, "mfu": achieved / args.peak_tflops,
                "mfu_vs_measured_ceiling": achieved / MEASURED_MATMUL_TFLOPS}

    return {"blocks": n, "block_length": length, "batch_size": args.index_batch_size, "dtype": str(dtype),
            "model_flops": flops, "index_build": rates(seconds), "doc_tower": rates(tower_seconds)}


# --------------------------------------------------------------------------------------------------- the report
def table(result: dict) -> str:
    s = result["settings"]
    lines = [
        f"{result['machine']['device']}; torch {result['machine']['torch']}, transformers "
        f"{result['machine']['transformers']}; {s['precision']}; {s.get('weights', '')}",
        f"B={s.get('batch_size_used', s['batch_size'])} K={s['num_candidates']} Lq={s['query_length']} "
        f"Lz={s['block_length']} (joined <= {s['query_length'] + s['block_length']})"
        + (f"; out of memory at B={[r['batch_size'] for r in s['oom_retries']]}" if s["oom_retries"] else ""),
        f"{'':<28}{'ms/step':>10}{'tokens':>11}{'tokens/s':>12}{'TFLOP/s':>9}"
        f"{'MFU/' + format(s['peak_tflops'], 'g'):>10}{'MFU/' + format(MEASURED_MATMUL_TFLOPS, 'g'):>10}",
    ]
    for key, label in (("realm_step", "REALM step (fwd+bwd+AdamW)"), ("bert_step", "BertModel, same tokens")):
        r = result.get(key)
        if r:
            lines.append(f"{label:<28}{r['ms_per_step']:>10.1f}{r['real_tokens']:>11,}"
                         f"{r['tokens_per_second']:>12,.0f}{r['achieved_tflops']:>9.2f}{r['mfu']:>10.1%}"
                         f"{r['mfu_vs_measured_ceiling']:>10.1%}")
    if result.get("realm_step") and result.get("bert_step"):
        lines.append(f"REALM step / BertModel step time: {result['realm_over_bert_time']:.2f}x")
    index = result.get("index")
    if index:
        lines.append(f"{'':<28}{'blocks/s':>10}{'tokens/s':>23}{'TFLOP/s':>9}"
                     f"{'MFU/' + format(s['peak_tflops'], 'g'):>10}{'MFU/' + format(MEASURED_MATMUL_TFLOPS, 'g'):>10}")
        for key, label in (("index_build", f"embed_blocks (batch {index['batch_size']})"),
                           ("doc_tower", "document tower alone")):
            r = index[key]
            lines.append(f"{label:<28}{r['blocks_per_second']:>10,.0f}{r['tokens_per_second']:>23,.0f}"
                         f"{r['achieved_tflops']:>9.2f}{r['mfu']:>10.1%}{r['mfu_vs_measured_ceiling']:>10.1%}")
    for part, error in result["errors"].items():
        lines.append(f"ERROR in {part}: {error.strip().splitlines()[-1]}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch_size", type=int, default=64, help="masked sentences per step (B)")
    parser.add_argument("--num_candidates", type=int, default=8, help="candidates per sentence, null document included")
    parser.add_argument("--query_length", type=int, default=64, help="masked sentence length Lq")
    parser.add_argument("--block_length", type=int, default=288, help="block length Lz")
    parser.add_argument("--steps", type=int, default=10, help="timed steps")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (the first records the BERT calls)")
    parser.add_argument("--index_blocks", type=int, default=16384, help="random blocks to embed (0: skip)")
    parser.add_argument("--index_batch_size", type=int, default=64, help="blocks per forward (embed_batch_size)")
    parser.add_argument("--length_buckets", type=int, default=1, help="ModelArguments.length_buckets")
    parser.add_argument("--random_init", action="store_true", help="tiny random models (the CPU test)")
    parser.add_argument("--size", choices=("minilm", "bert-base"), default="minilm",
                        help="the packaged all-MiniLM-L6-v2, or random weights of BERT-base's shapes")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when there is one)")
    parser.add_argument("--peak_tflops", type=float, default=PEAK_TFLOPS, help="peak bf16 TFLOP/s for the MFU")
    parser.add_argument("--output", default=None, help="the JSON to write")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1 or args.num_candidates < 2:
        parser.error("--steps and --batch_size must be at least 1, --num_candidates at least 2")
    if args.block_length < 8 or args.query_length < 4:
        parser.error("--block_length must be at least 8 and --query_length at least 4")
    return args


def main(argv: list[str] | None = None) -> dict:
    import transformers

    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s", stream=sys.stderr)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    started = time.perf_counter()
    result = {
        "command": " ".join(["python benchmarks/bench_gpu_step.py", *(sys.argv[1:] if argv is None else argv)]),
        "machine": {"device": device_name(device, threads=True), "device_type": device.type, "torch": torch.__version__,
                    "transformers": transformers.__version__, "python": platform.python_version(),
                    "cpu": cpu_model(), "cpu_count": os.cpu_count()},
        "settings": {"batch_size": args.batch_size, "num_candidates": args.num_candidates,
                     "query_length": args.query_length, "block_length": args.block_length,
                     "joined_max_length": args.query_length + args.block_length,
                     "title_length": block_title_length(args.block_length), "masked_per_sentence": NUM_MASKED,
                     "steps": args.steps, "warmup": args.warmup, "length_buckets": args.length_buckets,
                     "precision": "bf16 autocast" if device.type == "cuda" else "fp32",
                     "random_init": args.random_init, "size": args.size, "peak_tflops": args.peak_tflops,
                     "measured_matmul_tflops": MEASURED_MATMUL_TFLOPS, "oom_retries": []},
        "errors": {},
    }
    tokenizer, vocab_size = load_tokenizer(args.random_init)
    with tempfile.TemporaryDirectory() as work_dir:
        try:
            steps, retries = measure_steps_halving(args, device, tokenizer, vocab_size, work_dir)
            result["settings"] |= {"batch_size_used": steps.pop("batch_size"), "oom_retries": retries,
                                   "weights": steps.pop("weights"), "bert": steps.pop("bert"),
                                   "tokens_in_batch": steps.pop("tokens_in_batch")}
            result |= steps
            result["realm_over_bert_time"] = steps["realm_step"]["ms_per_step"] / steps["bert_step"]["ms_per_step"]
        except Exception:  # noqa: BLE001 - the JSON still gets written, with the error, and the index still runs
            result["errors"]["steps"] = traceback.format_exc()
            logger.error("the step measurement failed:\n%s", result["errors"]["steps"])
        free_memory(device)
        if args.index_blocks > 0:
            try:
                result["index"] = measure_index(args, device, tokenizer, vocab_size, work_dir)
            except Exception:  # noqa: BLE001
                result["errors"]["index"] = traceback.format_exc()
                logger.error("the index measurement failed:\n%s", result["errors"]["index"])
    result["wall_seconds"] = time.perf_counter() - started
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    print(table(result), flush=True)
    return result


if __name__ == "__main__":
    sys.exit(1 if main()["errors"] else 0)
