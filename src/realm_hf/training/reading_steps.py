"""The reading steps of REALM pre-training: which steps read each sentence's own block alone, and what they read.

A reading step gives each masked sentence the block it came from as its only candidate (no null document, no
retrieval) and leaves the retriever idle: the encoder learns, or keeps, reading a block that holds the masked fact.
The first `reading_warmup_steps` are reading steps (the warm-up). With `reading_loss_weight` every step after the
warm-up also reads (a reading loss added to REALM's, the retriever learning: without it, REALM's first steps with a
poor retriever teach the encoder to lean on the null document, and it forgets how to read,
benchmarks/results/collapse.md): `reads_beside(step)`.

With X = Z a reading step reads the step's own batch. With another pre-training corpus X's sentences have no block
in Z, so the reading steps read sentences of Z instead, in a seeded order that depends on the step alone (a resumed
run reads on where it stopped), a different slice on each process. With `reading_loss_batch_size` the reading loss
reads that many sentences of the seeded order at each step instead (X's own training sentences when X = Z): more
reading per step than REALM's batch holds. With `reading_loss_weight_final` the loss's weight moves linearly from
`reading_loss_weight` to it over the steps after the warm-up (`loss_weight_at(step)`).
"""

from __future__ import annotations

import datasets
import numpy as np

from .arguments import PretrainingArguments


class ReadingSchedule:
    r"""
    Which steps are reading steps, and the sentences of Z they read when X is another corpus.

    Args:
        warmup_steps (`int`): `reading_warmup_steps`.
        sentences_of_z (`datasets.Dataset`, *optional*): Masked sentences of Z with `source_block_id`, read at the
            reading steps when X is another corpus; None when X = Z (the step's own batch is read).
        seed (`int`, *optional*, defaults to 0): Seed of the order in which `sentences_of_z` are read.
        num_processes (`int`, *optional*, defaults to 1), process_index (`int`, *optional*, defaults to 0):
            Each process reads its own slice.
        loss_weight (`float`, *optional*, defaults to 0): `reading_loss_weight`: every step that is not a reading
            step reads as well, beside REALM's batch.
        loss_batch_size (`int`, *optional*): `reading_loss_batch_size`: the sentences each process reads for the
            reading loss at each step, from the seeded order; None: as many as REALM's batch (the batch itself when
            X = Z).
        own_sentences (`datasets.Dataset`, *optional*): When X = Z, the training sentences (with `source_block_id`)
            the reading loss reads from with `loss_batch_size`.
        loss_weight_final (`float`, *optional*): `reading_loss_weight_final`: the reading loss's weight at the last
            step, reached linearly from `loss_weight` at the first step after the warm-up; None: `loss_weight`
            throughout.
        max_steps (`int`, *optional*): The run's steps, needed with `loss_weight_final`.

    Raises:
        `ValueError`: when `loss_batch_size` is given with X = Z but no `own_sentences`, or
            `loss_weight_final` without `max_steps`.
    """

    def __init__(
        self,
        warmup_steps: int,
        sentences_of_z: datasets.Dataset | None = None,
        seed: int = 0,
        num_processes: int = 1,
        process_index: int = 0,
        loss_weight: float = 0.0,
        loss_batch_size: int | None = None,
        own_sentences: datasets.Dataset | None = None,
        loss_weight_final: float | None = None,
        max_steps: int | None = None,
    ):
        if loss_batch_size is not None and sentences_of_z is None and own_sentences is None:
            raise ValueError("X = Z with reading_loss_batch_size: pass the training sentences as own_sentences.")
        if loss_weight_final is not None and max_steps is None:
            raise ValueError("reading_loss_weight_final ramps the weight up to the last step: pass max_steps.")
        self.warmup_steps = warmup_steps
        self.sentences_of_z = sentences_of_z
        self.loss_batch_size = loss_batch_size
        # what the reading loss reads in the seeded order: Z's sentences, or X's own when X = Z with a batch size
        self.pool = sentences_of_z if sentences_of_z is not None or loss_batch_size is None else own_sentences
        self.order = None if self.pool is None else np.random.default_rng(seed).permutation(len(self.pool))
        self.num_processes, self.process_index = num_processes, process_index
        self.loss_weight = loss_weight
        self.loss_weight_final, self.max_steps = loss_weight_final, max_steps

    @classmethod
    def for_run(
        cls, pretraining_args: PretrainingArguments, max_steps: int, seed: int,
        sentences_of_z: datasets.Dataset | None, own_sentences: datasets.Dataset, num_processes: int = 1,
        process_index: int = 0,
    ) -> ReadingSchedule:
        """The schedule of a pre-training run's [`PretrainingArguments`]: `sentences_of_z` when X is another corpus
        (None when X = Z), `own_sentences` X's training sentences (read by the reading loss when X = Z with
        `reading_loss_batch_size`)."""
        return cls(
            pretraining_args.reading_warmup_steps, sentences_of_z, seed,
            num_processes, process_index, pretraining_args.reading_loss_weight,
            pretraining_args.reading_loss_batch_size, own_sentences,
            pretraining_args.reading_loss_weight_final, max_steps,
        )

    @staticmethod
    def reads(warmup_steps: int, loss_weight: float) -> bool:
        """Whether a run with these settings reads sentences with their own block at all (a warm-up or a reading
        loss): with another pre-training corpus it then needs sentences of Z."""
        return warmup_steps > 0 or loss_weight > 0

    @property
    def any(self) -> bool:
        """Whether the run has reading steps or a reading loss at all."""
        return self.reads(self.warmup_steps, self.loss_weight)

    def reads_beside(self, step: int) -> bool:
        """Whether REALM's step `step` (0-based, not a reading step) also reads, for the reading loss."""
        return self.loss_weight > 0 and not self.is_reading_step(step)

    def loss_weight_at(self, step: int) -> float:
        """The reading loss's weight at step `step` (0-based): `loss_weight`, or on the line from it (the first step
        after the warm-up) to `loss_weight_final` (the last step)."""
        if self.loss_weight_final is None:
            return self.loss_weight
        span = max(self.max_steps - 1 - self.warmup_steps, 1)
        fraction = min(max((step - self.warmup_steps) / span, 0.0), 1.0)
        return self.loss_weight + (self.loss_weight_final - self.loss_weight) * fraction

    def is_reading_step(self, step: int) -> bool:
        """Whether `step` (0-based) is a reading step: one of the warm-up."""
        return step < self.warmup_steps

    def examples(self, step: int, batch: list[dict]) -> list[dict]:
        """What step `step` (0-based) reads, at a reading step or for the reading loss: its own `batch` when X = Z,
        else the next `len(batch)` sentences of Z in the seeded order (the steps that read counted from the first);
        for the reading loss with `loss_batch_size`, the next `loss_batch_size` sentences of that order (of X's own
        training sentences when X = Z), step `step` reading slice `step`."""
        sized = self.loss_batch_size is not None and self.reads_beside(step)
        if self.sentences_of_z is None and not sized:
            return batch
        number = step  # every step that reads reads once
        size = self.loss_batch_size if sized else len(batch)
        start = (number * self.num_processes + self.process_index) * size
        rows = self.order[np.arange(start, start + size) % len(self.order)]
        return [self.pool[int(row)] for row in rows]
