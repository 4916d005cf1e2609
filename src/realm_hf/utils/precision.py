"""The training and embedding precision, and `"auto"`: bf16 only where it is faster than fp32.

bf16 autocast is not faster on every CPU, and neither the CPU flags nor a single matmul tells where it is, so
`"auto"` measures: a MiniLM-size BERT forward and backward, fp32 and bf16 autocast interleaved, a few seconds, once
per process. The figures: docs/experiments.md (Speed) and benchmarks/results/models-padded-step.md.
"""

from __future__ import annotations

import functools
import logging
import statistics
import time

import torch

logger = logging.getLogger(__name__)

__all__ = ["EMBED_DTYPES", "MIXED_PRECISIONS", "autocast_dtype", "cpu_bf16_speedup", "resolve_embed_dtype", "resolve_mixed_precision"]

MIXED_PRECISIONS = ("no", "bf16", "fp16", "auto")
EMBED_DTYPES = ("bfloat16", "float16", "float32", "auto")
"""The names `embed_dtype` takes: an autocast dtype of index building, or `"auto"` (that of training)."""
BF16_MIN_SPEEDUP = 1.1
"""`"auto"` takes bf16 on a CPU only when the probe runs at least this much faster under it (bf16 costs accuracy)."""


@functools.cache
def cpu_bf16_speedup(batch_size: int = 8, length: int = 128, repeats: int = 5) -> float:
    """fp32 time over bf16-autocast time of a forward and backward of a 2-layer MiniLM-size BERT on this CPU.

    Args:
        batch_size (`int`, *optional*, defaults to 8): Sequences per probe step.
        length (`int`, *optional*, defaults to 128): Tokens per sequence.
        repeats (`int`, *optional*, defaults to 5): Timed steps per precision (after 2 warm-up steps each), run
            interleaved so that a change in the machine's load hits both.

    Returns:
        `float`: above 1 where bf16 autocast is faster. Cached: measured once per process.
    """
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=1000, hidden_size=384, num_hidden_layers=2, num_attention_heads=12,
                        intermediate_size=1536, max_position_embeddings=length)
    with torch.random.fork_rng():  # initialization and dropout leave the caller's random state as it was
        torch.manual_seed(0)
        model = BertModel(config, add_pooling_layer=False)  # training mode: dropout on, as in a training step
        input_ids = torch.randint(0, config.vocab_size, (batch_size, length))  # (B, L)
        return _time_fp32_over_bf16(model, input_ids, repeats)


def _time_fp32_over_bf16(model: torch.nn.Module, input_ids: torch.Tensor, repeats: int) -> float:
    """Median fp32 step time over median bf16-autocast step time, the two interleaved after 2 warm-up steps each."""

    def step(bf16: bool) -> float:
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            hidden = model(input_ids=input_ids).last_hidden_state  # (B, L, H)
        hidden.float().sum().backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    timings: dict[bool, list[float]] = {False: [], True: []}
    for repeat in range(2 + repeats):
        for bf16 in (False, True):
            elapsed = step(bf16)
            if repeat >= 2:
                timings[bf16].append(elapsed)
    return statistics.median(timings[False]) / statistics.median(timings[True])


def resolve_mixed_precision(mixed_precision: str, device_type: str) -> str:
    """The Accelerate `mixed_precision` to train with.

    Args:
        mixed_precision (`str`): `"no"`, `"bf16"` or `"fp16"` (returned as given), or `"auto"`: bf16 on a CUDA GPU
            that supports it, and on a CPU where [`cpu_bf16_speedup`] is at least 1.1; else `"no"` (fp16 needs loss
            scaling: ask for it by name).
        device_type (`str`): `"cpu"`, `"cuda"`, ... the device the model trains on.

    Returns:
        `str`: `"no"`, `"bf16"` or `"fp16"`.
    """
    if mixed_precision not in MIXED_PRECISIONS:
        raise ValueError(f"mixed_precision={mixed_precision!r}: use one of {', '.join(MIXED_PRECISIONS)}")
    if mixed_precision != "auto":
        return mixed_precision
    if device_type == "cuda":
        chosen = "bf16" if torch.cuda.is_bf16_supported() else "no"
        logger.info("mixed_precision auto: %s on this GPU", chosen)
        return chosen
    if device_type != "cpu":
        return "no"
    speedup = cpu_bf16_speedup()
    chosen = "bf16" if speedup >= BF16_MIN_SPEEDUP else "no"
    logger.info("mixed_precision auto: %s (bf16 autocast runs %.2fx the speed of fp32 on this CPU)", chosen, speedup)
    return chosen


def resolve_embed_dtype(embed_dtype: str, mixed_precision: str) -> str:
    """The dtype name of index building: `embed_dtype` as given, or for `"auto"` the one of training (`"bfloat16"`
    under bf16, `"float16"` under fp16, else `"float32"`); `mixed_precision` must already be resolved."""
    if embed_dtype != "auto":
        return embed_dtype
    return {"bf16": "bfloat16", "fp16": "float16"}.get(mixed_precision, "float32")


def autocast_dtype(embed_dtype: str | None) -> torch.dtype | None:
    """The autocast dtype of a (resolved) dtype name; `None` for fp32 (no autocast)."""
    if not embed_dtype or embed_dtype == "float32":
        return None
    dtype = getattr(torch, embed_dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"embed_dtype={embed_dtype!r}: use 'float32', 'bfloat16', 'float16' or 'auto'")
    return dtype
