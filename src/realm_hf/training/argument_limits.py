"""The values an argument of a job can take: a value that cannot be right (a negative learning rate, a utility gate
of 100 nats, a batch of 0) is refused when its dataclass is made, in one line naming the value and a working one.

One table serves every job (pretrain, mask, ict, mlm, finetune, evaluate): a field is checked by its name, in every
argument dataclass that has it ([`check_limits`], called by their `__post_init__`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

from ..utils.options import UsageError

__all__ = ["LIMITS", "Limit", "check_limits"]


@dataclasses.dataclass(frozen=True)
class Limit:
    r"""
    The values one argument can take.

    Args:
        minimum (`float`, *optional*): The least value (allowed unless `above` is set).
        maximum (`float`, *optional*): The largest value (allowed).
        above (`bool`, defaults to `False`): The value must be strictly above `minimum`.
        why (`str`, *optional*): What the bound stands for, shown in the message.
    """

    minimum: float | None = None
    maximum: float | None = None
    above: bool = False
    why: str = ""

    def refuses(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return True
        if self.minimum is not None and (value <= self.minimum if self.above else value < self.minimum):
            return True
        return self.maximum is not None and value > self.maximum

    def rule(self) -> str:
        if self.minimum is not None and self.maximum is not None and not self.above:
            return f"between {self.minimum:g} and {self.maximum:g}"
        low = None if self.minimum is None else f"{'above' if self.above else 'at least'} {self.minimum:g}"
        high = None if self.maximum is None else f"at most {self.maximum:g}"
        return " and ".join(part for part in (low, high) if part)


_COUNT = Limit(1)
_STEPS = Limit(0)
_RATE = Limit(0, 1, above=True, why="a peak learning rate; above 1 training diverges")
_PART_RATE = Limit(0, 1, why="a peak learning rate; 0 freezes the part, above 1 training diverges")
_LENGTH = Limit(4, why="wordpieces: [CLS], [SEP] and at least one of the text")
_PROBABILITY = Limit(0, 1)

LIMITS: dict[str, Limit] = {
    # the loop
    "max_steps": _COUNT, "per_device_batch_size": _COUNT, "gradient_accumulation_steps": _COUNT,
    "learning_rate": _RATE, "weight_decay": Limit(0, 1, why="AdamW's decoupled decay per unit of learning rate"),
    "warmup_steps": _STEPS, "max_grad_norm": Limit(0, why="0 disables clipping"), "logging_steps": _COUNT,
    "save_steps": Limit(0, why="0: no checkpoints"), "save_total_limit": Limit(0, why="0 keeps every checkpoint"),
    "eval_steps": _STEPS, "early_stopping_patience": _COUNT, "early_stopping_threshold": Limit(0),
    "num_workers": _STEPS,
    # models and corpus
    "projection_size": Limit(0, why="0: BERT's own space"), "length_buckets": _COUNT, "max_articles": _COUNT,
    "max_pretraining_articles": _COUNT, "block_length": _LENGTH, "query_max_length": _LENGTH,
    "joined_max_length": _LENGTH, "mlm_max_length": _LENGTH, "embed_batch_size": _COUNT, "num_proc": _COUNT,
    # pre-training
    "mask_source_blocks": _COUNT, "num_candidates": _COUNT,
    "refresh_time_share": Limit(0, 1, above=True, why="the builder's share of the trainer's time, e.g. 0.1"),
    "refresh_max_staleness": Limit(0, why="steps; 0: a blocking refresh, leave it out never to wait"),
    "eval_max_questions": _COUNT, "eval_mlm_examples": _STEPS, "reading_warmup_steps": _STEPS,
    "reading_loss_weight": Limit(0, why="a multiple of the reading masked-LM loss added to REALM's; 0: none"),
    "reading_loss_batch_size": _COUNT,
    "reading_loss_weight_final": Limit(0, why="the reading loss's weight at the last step"),
    "retriever_gate_utility": Limit(
        -10, 10, why="nats of reading utility per masked span, such as 0.2: a gate beyond 10 never opens (the "
        "encoder would have to make the answer e^10 = 22,000 times likelier with the block than without), one below "
        "-10 never holds"
    ),
    "retriever_gate_window": _COUNT, "mlm_head_learning_rate": _PART_RATE, "retriever_learning_rate": _PART_RATE,
    # masked LM, ICT
    "mlm_probability": Limit(0, 1, above=True, why="a share of the wordpieces; BERT masks 0.15"),
    "eval_articles": _STEPS, "eval_max_blocks": _COUNT, "remove_probability": _PROBABILITY,
    "temperature": Limit(0, above=True, why="the scores are divided by it"),
    # Open-QA fine-tuning and evaluation
    "max_train_questions": _COUNT, "eval_skip_questions": _STEPS, "max_eval_questions": _COUNT,
    "eval_batch_size": _COUNT, "top_k": _COUNT, "similarity_scale": Limit(0, above=True),
    "evidence_steps": _STEPS, "evidence_search_depth": _COUNT, "evidence_negatives": _STEPS,
    "max_rehearsal_questions": _COUNT, "max_questions": _COUNT, "skip_questions": _STEPS, "batch_size": _COUNT,
}
"""Numeric arguments by field name -> the values they can take."""


@functools.cache
def _choices() -> dict[str, tuple[str, ...]]:
    """String arguments by field name -> the values they take (the constants of the modules that use them)."""
    from ..configuration import POOLINGS, SPAN_NORMALIZATIONS
    from ..data.masking import STRATEGIES
    from ..evaluation.retrieval import RETRIEVALS
    from ..utils.precision import EMBED_DTYPES, MIXED_PRECISIONS

    return {
        "mixed_precision": MIXED_PRECISIONS, "embed_dtype": EMBED_DTYPES, "pooling": POOLINGS,
        "masking": STRATEGIES, "span_normalization": SPAN_NORMALIZATIONS, "retrieval": RETRIEVALS,
    }


def check_limits(arguments: Any) -> None:
    r"""
    Refuse a field of the argument dataclass `arguments` whose value cannot be right ([`LIMITS`], and the choices of
    string fields). `None` (an optional argument left out) is not checked.

    Raises:
        [`UsageError`]: one line naming the option, its value, what it must be and a value that works (the default).
    """
    for field in dataclasses.fields(arguments):
        value = getattr(arguments, field.name)
        if value is None or isinstance(value, bool):
            continue
        example = field.default if field.default not in (None, dataclasses.MISSING) else None
        limit = LIMITS.get(field.name)
        if limit is not None and isinstance(value, (int, float)) and limit.refuses(value):
            why = f" ({limit.why})" if limit.why else ""
            fix = f"; e.g. --{field.name} {example}" if example is not None and not limit.refuses(example) else ""
            raise UsageError(f"--{field.name} {value} cannot be right: it must be {limit.rule()}{why}{fix}.")
        choices = _choices().get(field.name)
        if choices is not None and value not in choices:
            raise UsageError(
                f"--{field.name} {value!r} is not one of {', '.join(choices)}; e.g. --{field.name} {example}."
            )
