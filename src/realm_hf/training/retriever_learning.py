"""Whether the retriever learns during REALM pre-training: its start schedule, a status per step, a summary of the
run, a saved record.

The retriever learns only from the masked-LM signal through `p(z|x)`. One schedule, [`RetrieverStartSchedule`],
decides at each step whether it learns and, when not, which setting holds it: a zero learning rate (frozen for the
whole run), the reading warm-up (`reading_warmup_steps`) or the utility gate (`retriever_gate_utility`). A run whose
retriever never learned is a run of the encoder alone, and [`RetrieverLearningTracker`] tells the user so, with the
setting that held it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from ..modeling import RealmRetriever
    from .arguments import PretrainingArguments

LOW_LEARNING_FRACTION = 0.1
"""Below this fraction of its steps, a run whose retriever learned is summed up as a warning."""
COLLAPSE_DIVERSITY = 0.5
"""Retrieval diversity (distinct blocks among a batch's B x (K-1) retrieved ones, as a fraction of the most a corpus of
its size allows) below which, over a window of `DIVERSITY_WINDOW` learning steps, the retrieval is called collapsed:
the query tower maps most queries to the same few blocks. On the hard knowledge task (benchmarks/results/collapse.md)
a retriever that learned fell from 0.99 to 0.25-0.45 as it collapsed (the right document first for no held-out
sentence), while runs that kept finding it stayed above 0.6. Whether it fell there or started there: a retriever
that retrieves the same blocks for every query from its first learning step is collapsed too."""
DIVERSITY_WINDOW = 20

_FIXES = {
    "retriever_gate_utility": "lower the gate (--retriever_gate_utility), train longer (--max_steps), or drop "
    "retriever_gate_utility from the config (no gate)",
    "reading_warmup_steps": "lower --reading_warmup_steps or raise --max_steps",
    "retriever_learning_rate": "set --retriever_learning_rate above 0",
    "learning_rate": "set --learning_rate (or --retriever_learning_rate) above 0",
    "requires_grad": "leave the retriever's parameters trainable (requires_grad=True)",
}
_COLLAPSE_FIX = (
    "A collapsed retriever finds the right block for almost no query; try a lower --retriever_learning_rate, a "
    "longer ICT warm start or another seed, and watch `retrieved_distinct` in the logs."
)
_WARMUP_ONLY = (
    "This run is a reading warm-up only (reading_warmup_steps >= max_steps): the encoder learns to read and the "
    "retriever is frozen by design; REALM pre-training from its final/encoder is where the retriever learns."
)


def retrieval_diversity(retrieved_ids: torch.Tensor, num_blocks: int) -> float:
    """Distinct blocks among a batch's retrieved ones (`retrieved_ids`, [B, K-1]), as a fraction of the most there can
    be: the retrieved blocks, or the corpus's `num_blocks` when it has fewer. About 1/B when every query retrieves the
    same blocks; 1 when none shares one (or a small corpus is retrieved whole)."""
    attainable = min(retrieved_ids.numel(), num_blocks)
    return retrieved_ids.unique().numel() / max(1, attainable)


def retriever_frozen_by(
    retriever: RealmRetriever, learning_rate: float, pretraining_args: PretrainingArguments
) -> str | None:
    """The setting that keeps the retriever from ever learning (a zero learning rate, no trainable parameter), or
    None."""
    rate = pretraining_args.retriever_learning_rate
    if rate == 0:
        return "retriever_learning_rate=0"
    if rate is None and learning_rate == 0:
        return "learning_rate=0"
    if not any(p.requires_grad for p in retriever.parameters()):
        return "requires_grad=False"
    return None


class RetrieverStartSchedule:
    r"""
    When the retriever starts to learn in REALM pre-training: the one schedule behind the reading warm-up, the utility
    gate and a retriever frozen for the whole run.

    The retriever learns at step `t` (0-based) when it can learn at all (`frozen_by` is None), `t` is past the reading
    warm-up (its steps read each sentence's own block alone, no retrieval) and, with a gate, the gate has opened: the
    top retrieved block's reading utility, `log p(y|z,x) - log p(y|null,x)`, averaged over `gate_window` steps after
    the warm-up, reached `gate_utility`. From then on it learns at every step ([`start_step`]). While it does not, the
    index is not refreshed (the document tower does not change).

    Args:
        reading_warmup_steps (`int`, *optional*, defaults to 0):
            `reading_warmup_steps`: the first steps, which read each sentence's own block alone.
        gate_utility (`float`, *optional*):
            `retriever_gate_utility`: the utility (nats) the gate waits for; None: no gate.
        gate_window (`int`, *optional*, defaults to 20):
            `retriever_gate_window`: the steps whose utility the gate averages.
        frozen_by (`str`, *optional*):
            The setting that keeps the retriever from ever learning: `"retriever_learning_rate=0"`, `"learning_rate=0"`
            or `"requires_grad=False"`; None when there is none.
    """

    def __init__(
        self,
        reading_warmup_steps: int = 0,
        gate_utility: float | None = None,
        gate_window: int = 20,
        frozen_by: str | None = None,
    ):
        self.reading_warmup_steps = reading_warmup_steps
        self.gate_utility = gate_utility
        self.gate_window = gate_window
        self.frozen_by = frozen_by
        # the 0-based step from which the retriever learns: known now, or decided by the gate (None until it opens,
        # and for ever when frozen_by)
        self.start_step: int | None = reading_warmup_steps if gate_utility is None and frozen_by is None else None
        self.utility_window: list[float] = []  # per-step mean reading utility of the top block, while the gate waits

    @classmethod
    def for_run(cls, args: PretrainingArguments, frozen_by: str | None = None) -> RetrieverStartSchedule:
        """The schedule of a run's [`PretrainingArguments`]; `frozen_by` as above."""
        return cls(args.reading_warmup_steps, args.retriever_gate_utility, args.retriever_gate_window, frozen_by)

    def learns(self, step: int) -> bool:
        """Whether the retriever learns at `step` (0-based: the step being taken)."""
        return self.start_step is not None and step >= self.start_step

    def holding_knob(self, step: int) -> str | None:
        """The setting that holds the retriever frozen at `step` (0-based); None when it learns."""
        if self.frozen_by is not None:
            return self.frozen_by.split("=")[0]
        if step < self.reading_warmup_steps:
            return "reading_warmup_steps"
        return None if self.learns(step) else "retriever_gate_utility"

    @property
    def gate_waiting(self) -> bool:
        """Whether a gate has yet to open, and so needs each step's reading utility."""
        return self.gate_utility is not None and self.frozen_by is None and self.start_step is None

    def observe_utility(self, step: int, utility: float) -> float | None:
        """After `step` steps (1-based): the step's reading utility of the top block. Returns the gate's mean over
        its window, None when the gate is not waiting or the step was one of the warm-up. The gate opens when a full
        window's mean reaches `gate_utility`: the retriever learns from 0-based step `step` on."""
        if not self.gate_waiting or step <= self.reading_warmup_steps:
            return None
        self.utility_window = (self.utility_window + [utility])[-self.gate_window :]
        mean = sum(self.utility_window) / len(self.utility_window)
        if len(self.utility_window) == self.gate_window and mean >= self.gate_utility:
            self.start_step = step
        return mean

    def state_dict(self) -> dict:
        """`retriever_start_step` and `utility_window` of a checkpoint's extra state."""
        return {"retriever_start_step": self.start_step, "utility_window": list(self.utility_window)}

    def load_state_dict(self, state: dict) -> None:
        """Take back a checkpoint's gate (a schedule without a gate is decided by its settings alone)."""
        if self.gate_utility is not None and self.frozen_by is None:
            self.start_step = state.get("retriever_start_step")
            self.utility_window = list(state.get("utility_window", []))


class RetrieverLearningTracker:
    r"""
    Counts the optimizer steps at which the retriever learns and says what holds it frozen otherwise.

    The trainer calls [`~RetrieverLearningTracker.record_step`] after every step,
    [`~RetrieverLearningTracker.observe_gate`] when the utility gate measures, and
    [`~RetrieverLearningTracker.gate_opened`] when it opens. Steps are counted 1-based, as in the log lines ("step 10"
    is the state after ten steps).

    Args:
        schedule ([`RetrieverStartSchedule`], *optional*):
            The run's retriever-start schedule (default: none, the retriever learning from the first step).
    """

    def __init__(self, schedule: RetrieverStartSchedule | None = None):
        self.schedule = schedule if schedule is not None else RetrieverStartSchedule()
        self.gate_utility = self.schedule.gate_utility
        self.gate_window = self.schedule.gate_window
        self.reading_warmup_steps = self.schedule.reading_warmup_steps
        self.frozen_by = self.schedule.frozen_by
        self.steps_learning = 0
        self.steps_total = 0
        self.gate_opened_at_step: int | None = None
        self.reason_frozen: str | None = None  # the knob that held the retriever at its last frozen step
        self.highest_utility: float | None = None  # highest gate mean over a full window
        self._utility: tuple[float, int] | None = None  # the gate's latest mean and the steps it averages
        self.learning = False  # at the last recorded step
        self._diversity: list[float] = []  # retrieval diversity of the last DIVERSITY_WINDOW learning steps
        self.diversity_start: float | None = None  # its mean over the first full window
        self.diversity_end: float | None = None  # over the latest full window
        self.collapsed_at_step: int | None = None  # the step after which the retrieval was first called collapsed

    # ------------------------------------------------------------------------------------------- per step
    def observe_gate(self, window_mean: float, window_steps: int) -> None:
        """The gate's running mean of reading utility after this step, over `window_steps` steps."""
        self._utility = (window_mean, window_steps)
        if window_steps >= self.gate_window:
            highest = self.highest_utility
            self.highest_utility = window_mean if highest is None else max(highest, window_mean)

    def gate_opened(self, step: int) -> None:
        """The gate opened after `step` steps: the retriever learns from step `step + 1`."""
        self.gate_opened_at_step = step

    def record_step(self, step: int, learning: bool) -> None:
        """Step `step` (1-based) was taken with the retriever learning (`learning`, by the schedule) or frozen."""
        self.steps_total = step
        self.learning = learning and self.frozen_by is None
        if self.learning:
            self.steps_learning += 1
        else:
            self.reason_frozen = self._holding_knob(step)

    def observe_retrieval(self, step: int, diversity: float) -> str | None:
        """The retrieval diversity of step `step` (distinct retrieved blocks / the most there can be: the retrieved
        blocks, or the corpus's blocks when it has fewer; in (0, 1]), recorded while the retriever learns; returns the
        warning line the first time the retrieval looks collapsed."""
        if not self.learning:
            return None
        self._diversity = (self._diversity + [diversity])[-DIVERSITY_WINDOW:]
        if len(self._diversity) < DIVERSITY_WINDOW:
            return None
        self.diversity_end = sum(self._diversity) / DIVERSITY_WINDOW
        if self.diversity_start is None:
            self.diversity_start = self.diversity_end
        if self.collapsed_at_step is None and self._collapsed():
            self.collapsed_at_step = step
            return f"{self._collapse_line()} {_COLLAPSE_FIX}"
        return None

    def _collapsed(self) -> bool:
        return self.diversity_end < COLLAPSE_DIVERSITY

    def _collapse_line(self) -> str:
        if self.diversity_start < COLLAPSE_DIVERSITY:
            began = f"and did from the first {DIVERSITY_WINDOW} steps the retriever learned in"
        else:
            began = f"{self.diversity_start:.0%} when the retriever began to learn"
        return (
            f"The retrieval collapsed after step {self.collapsed_at_step}: a batch's queries retrieve "
            f"{self.diversity_end:.0%} distinct blocks over the last {DIVERSITY_WINDOW} steps ({began}), so the query "
            "tower maps most queries to the same few blocks."
        )

    def _holding_knob(self, step: int) -> str:
        """The setting that holds the retriever frozen at step `step` (1-based)."""
        return self.schedule.holding_knob(step - 1) or "retriever_gate_utility"

    def status(self) -> str:
        """One short line on the last recorded step, e.g. `"retriever: frozen (gate: utility 0.05 < 0.2)"`."""
        if self.learning:
            return "retriever: learning"
        knob = self.reason_frozen
        if knob == "reading_warmup_steps":
            return f"retriever: frozen ({knob}: until step {self.reading_warmup_steps})"
        if knob == "retriever_gate_utility":
            if self.gate_opened_at_step is not None:
                return f"retriever: frozen (gate opened: learns from step {self.gate_opened_at_step + 1})"
            if self._utility is None:
                return "retriever: frozen (gate: utility not measured yet)"
            utility, steps = self._utility
            relation = "<" if utility < self.gate_utility else ">="
            window = f", {steps}/{self.gate_window} steps" if steps < self.gate_window else ""
            return f"retriever: frozen (gate: utility {utility:.3g} {relation} {self.gate_utility:g}{window})"
        return f"retriever: frozen ({self.frozen_by})"

    # ---------------------------------------------------------------------------------------- run messages
    def start_message(self, step: int, max_steps: int) -> tuple[int, str] | None:
        """The log level and line that say, when a run starts at `step` (after a resume, the checkpoint's), that the
        retriever is held frozen; None when it learns from the next step on."""
        if step >= max_steps:
            return None
        if self.frozen_by is not None:
            knob = self.frozen_by.split("=")[0]
            flag = "" if knob == "requires_grad" else f" (--{knob})"
            return logging.WARNING, (
                f"The retriever is frozen for the whole run: {self.frozen_by}{flag}; only the encoder learns."
            )
        scheduled, knob = self.reading_warmup_steps, "reading_warmup_steps"
        if scheduled >= max_steps:
            return logging.INFO, _WARMUP_ONLY
        after = f" after step {scheduled} ({knob})" if scheduled > step else ""
        if self.gate_utility is not None and self.gate_opened_at_step is None:
            return logging.WARNING, (
                f"The retriever is frozen until the gate opens{after}: the top retrieved block's reading utility must "
                f"average retriever_gate_utility={self.gate_utility} nats over {self.gate_window} steps "
                "(--retriever_gate_utility); the progress line shows the utility."
            )
        if scheduled > step:
            return logging.INFO, f"The retriever is frozen until step {scheduled} ({knob}={scheduled})."
        return None

    def summary(self) -> tuple[int, str]:
        """The log level (WARNING when the retriever never learned, or in under `LOW_LEARNING_FRACTION` of the steps,
        or its retrieval collapsed) and the line that sums up the run."""
        level, line = self._schedule_summary()
        if self.collapsed_at_step is None:
            return level, line
        still = "and it still is" if self._collapsed() else f"and recovered to {self.diversity_end:.0%} distinct blocks"
        return logging.WARNING, f"{line} {self._collapse_line()} ({still}). {_COLLAPSE_FIX}"

    def _schedule_summary(self) -> tuple[int, str]:
        total, learned = self.steps_total, self.steps_learning
        opened = (
            f"the gate (retriever_gate_utility={self.gate_utility}) opened after step {self.gate_opened_at_step}"
            if self.gate_opened_at_step is not None
            else None
        )
        if learned == 0 and total > 0 and self.reason_frozen == "reading_warmup_steps" and self.reading_warmup_steps >= total:
            return logging.INFO, _WARMUP_ONLY
        if learned == 0 and total > 0:
            knob = self.reason_frozen or "retriever_gate_utility"
            return logging.WARNING, (
                f"The retriever never learned in {total} steps: {self._cause(knob)}. REALM's retriever learns only "
                f"from the masked-LM signal: {_FIXES[knob]}."
            )
        if total > 0 and learned < LOW_LEARNING_FRACTION * total:
            knob = self.reason_frozen or "retriever_gate_utility"
            held = opened or f"{knob} held it frozen until step {self._frozen_until(knob)}"
            return logging.WARNING, (
                f"The retriever learned in only {learned} of {total} steps ({learned / total:.0%}): {held}. REALM's "
                f"retriever learns only from the masked-LM signal: {_FIXES[knob]}."
            )
        if learned < total and self.reason_frozen is not None:
            held = opened or f"frozen until step {self._frozen_until(self.reason_frozen)} by {self.reason_frozen}"
            return logging.INFO, f"The retriever learned in {learned} of {total} steps; {held}."
        return logging.INFO, f"The retriever learned in {learned} of {total} steps."

    def _frozen_until(self, knob: str) -> int:
        """The last step (1-based) at which `knob` held the retriever frozen."""
        if knob == "reading_warmup_steps":
            return self.reading_warmup_steps
        if self.gate_opened_at_step is not None:
            return self.gate_opened_at_step
        return self.steps_total - self.steps_learning  # frozen from the start

    def _cause(self, knob: str) -> str:
        if knob == "retriever_gate_utility":
            if self.highest_utility is None:
                reached = f"no full window of {self.gate_window} steps was measured"
            else:
                reached = f"highest utility {self.highest_utility:.3g} (mean over {self.gate_window} steps)"
            return f"the gate (retriever_gate_utility={self.gate_utility}) never opened; {reached}"
        if knob == "reading_warmup_steps":
            return f"{knob}={self.reading_warmup_steps} covers all {self.steps_total} steps"
        return f"{self.frozen_by}"

    # ------------------------------------------------------------------------------------------- state
    def state_dict(self) -> dict:
        """The record of `trainer_state.json` (`"retriever_learning"`); [`load_state_dict`] takes it back."""
        return {
            "steps_learning": self.steps_learning,
            "steps_total": self.steps_total,
            "gate_opened_at_step": self.gate_opened_at_step,
            "reason_frozen": self.reason_frozen,
            "highest_gate_utility": self.highest_utility,
            "retrieval_diversity_start": self.diversity_start,
            "retrieval_diversity_end": self.diversity_end,
            "retrieval_collapsed_at_step": self.collapsed_at_step,
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue the counts of a checkpoint's record (a resumed run counts on, it does not restart from 0)."""
        self.steps_learning = int(state.get("steps_learning", 0))
        self.steps_total = int(state.get("steps_total", 0))
        self.gate_opened_at_step = state.get("gate_opened_at_step")
        self.reason_frozen = state.get("reason_frozen")
        self.highest_utility = state.get("highest_gate_utility")
        self.diversity_start = state.get("retrieval_diversity_start")
        self.diversity_end = state.get("retrieval_diversity_end")
        self.collapsed_at_step = state.get("retrieval_collapsed_at_step")
