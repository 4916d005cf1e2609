"""REALM pre-training: salient-span MLM through retrieval, with the index refreshed asynchronously.

Each step: embed the masked sentences with the current query tower; retrieve the top k-1 blocks from the (possibly
stale) index, excluding the block a sentence came from when X = Z; add the null document; re-score the k candidates
with the fresh retriever (differentiable); run the knowledge-augmented encoder on the k joined sequences; minimize
`-log Σ_z p(y|z,x) p(z|x)`. Between steps the trainer swaps in a refreshed index when the background builder has
finished one.

This module is the trainer: its step, the retriever's start schedule (reading warm-up, utility gate:
`training.retriever_learning`) and its checkpoint state. The index over the run is `training.pretrain_index`, the held-out figures
`training.pretrain_evaluation`, the models it starts from `training.models`.
"""

from __future__ import annotations

import functools
import logging
import os

import datasets
import torch
from accelerate import Accelerator
from transformers import AutoTokenizer

from ..data.collators import RealmPretrainingCollator, pad_sequences
from ..index import RealmIndex
from ..evaluation.answer_match import CorpusAnswerFinder
from ..modeling import RealmKnowledgeEncoder, RealmRetriever
from .arguments import CorpusArguments, LoopArguments, ModelArguments, PretrainingArguments
from .index_builder import RefreshResources, refresh_resources
from .loop import TrainingLoop, as_examples, decay_parameter_groups, make_accelerator
from .models import load_models, pretraining_tokenizer_path
from ..utils.precision import resolve_embed_dtype
from .pretrain_evaluation import (
    held_out_sentence_figures, scoring_with_index_embeddings, step_retrieval_logs, zero_shot_recall,
)
from .pretrain_index import PretrainingIndexMixin
from .pretraining_data import prepare_pretraining_data
from .pretraining_model import RealmPretrainingModel
from .pretraining_record import pretraining_record
from .trained_corpus import corpus_record
from .reading_steps import ReadingSchedule
from .retriever_learning import (
    RetrieverLearningTracker, RetrieverStartSchedule, retrieval_diversity, retriever_frozen_by,
)
from .zero3 import whole_copy

logger = logging.getLogger(__name__)


class RealmPretrainer(PretrainingIndexMixin, TrainingLoop):
    r"""
    REALM pre-training on Accelerate with asynchronous index refresh.

    Args:
        loop_args ([`LoopArguments`]), model_args ([`ModelArguments`]), corpus_args ([`CorpusArguments`]),
        pretraining_args ([`PretrainingArguments`]): see `realm_hf.training.arguments`.
        tagger (`Callable[[list[str]], list[list[tuple[int, int]]]]`, *optional*):
            The salient-span tagger of [`build_masked_dataset`] (default: spaCy), e.g. a
            [`realm_hf.data.knowledge_task.KnowledgeValueTagger`].
        eval_examples (`datasets.Dataset`, *optional*):
            Held-out masked sentences (columns of [`build_masked_dataset`]) to evaluate on instead of
            `eval_mlm_examples` sentences split off the training data. With a `gold_block_id` column (the block that
            holds the fact), evaluation also reports how well the retriever finds it (see [`evaluate_sentences`]).
        resources ([`RefreshResources`], *optional*):
            The index builder's device, mode and resources, e.g. a partition of the CPU cores
            (`refresh_resources("cpu", num_threads=1, niceness=0, trainer_threads=1, mode="process")`); default: those
            of `refresh_device`, `refresh_mode` and `refresh_time_share`, the rest fixed per mode.
    """

    def __init__(
        self,
        loop_args: LoopArguments,
        model_args: ModelArguments,
        corpus_args: CorpusArguments,
        pretraining_args: PretrainingArguments,
        tagger=None,
        eval_examples: datasets.Dataset | None = None,
        resources: RefreshResources | None = None,
    ):
        accelerator = self._make_accelerator(loop_args, pretraining_args, resources)
        corpus_args.embed_dtype = resolve_embed_dtype(corpus_args.embed_dtype, accelerator.mixed_precision)
        self.corpus_args, self.pretraining_args = corpus_args, pretraining_args
        self._step_utilities: list[float] = []  # this step's micro-batches
        self._step_diversity: list[float] = []  # retrieval diversity of this step's micro-batches
        self.last_retrieved_ids: torch.Tensor | None = None  # [B, k-1] of the latest search
        self._answer_finder: CorpusAnswerFinder | None = None  # built at the first evaluation that needs it
        retriever, encoder = self._load_models(model_args)
        self._prepare_data(loop_args, model_args, tagger, eval_examples, accelerator)
        self._build_collators()
        # whether the retriever learns at each step (reading warm-up, utility gate, a retriever that never learns);
        # made before the optimizer, whose retriever group asks it for its start step
        self.retriever_schedule = RetrieverStartSchedule.for_run(
            pretraining_args, retriever_frozen_by(retriever, loop_args.learning_rate, pretraining_args)
        )
        # once the data is read: a refused input ends in its one line alone
        logger.info("Recipe: %s", pretraining_args.recipe or "none (the settings given)")
        generator = torch.Generator().manual_seed(loop_args.seed)
        dataloader = torch.utils.data.DataLoader(
            self.train_examples, batch_size=loop_args.per_device_batch_size, shuffle=True, generator=generator,
            collate_fn=as_examples, num_workers=loop_args.num_workers,
        )
        super().__init__(
            loop_args, RealmPretrainingModel(retriever, encoder), dataloader, accelerator=accelerator,
            config={**vars(model_args), **vars(corpus_args), **vars(pretraining_args), **vars(loop_args)},
        )
        self.retriever_learning = RetrieverLearningTracker(self.retriever_schedule)
        self._prepare_index(os.path.join(loop_args.output_dir, "corpus"))

    def _make_accelerator(
        self, loop_args: LoopArguments, pretraining_args: PretrainingArguments, resources: RefreshResources | None
    ) -> Accelerator:
        """The run's accelerator and the index builder's resources (`self.refresh_resources`), before any work: a
        builder setting its mode would ignore is refused here."""
        accelerator = make_accelerator(
            loop_args,
            find_unused_parameters=pretraining_args.reading_warmup_steps > 0
            or pretraining_args.retriever_gate_utility is not None,
        )
        self.refresh_resources = resources or refresh_resources(
            accelerator.device, pretraining_args.refresh_device, mode=pretraining_args.refresh_mode,
            time_share=pretraining_args.refresh_time_share,
        )
        if pretraining_args.shard_index and accelerator.num_processes == 1:
            logger.warning(
                "--shard_index has no effect on one process: the whole index is built and searched here; launch "
                "several processes (accelerate launch --num_processes N) to shard it."
            )
        return accelerator

    def _load_models(self, model_args: ModelArguments) -> tuple[RealmRetriever, RealmKnowledgeEncoder]:
        """The tokenizer (`self.tokenizer`), the retriever and the knowledge-augmented encoder the run starts from."""
        corpus_args, pretraining_args = self.corpus_args, self.pretraining_args
        self.tokenizer = AutoTokenizer.from_pretrained(pretraining_tokenizer_path(model_args))
        retriever, encoder = load_models(model_args, corpus_args, len(self.tokenizer), self.tokenizer.mask_token_id,
                                         ict_warm_start=pretraining_args.ict_warm_start,
                                         null_document_score=pretraining_args.null_document_score)
        if not pretraining_args.use_null_document:
            retriever.freeze_null_document_prior()
        retriever.config.length_buckets = encoder.config.length_buckets = model_args.length_buckets
        return retriever, encoder

    def _prepare_data(
        self, loop_args: LoopArguments, model_args: ModelArguments, tagger, eval_examples: datasets.Dataset | None,
        accelerator: Accelerator,
    ) -> None:
        """The blocks (`self.blocks`, `self.x_is_z`), the training and held-out sentences, the reading schedule and
        the record of the data for the model card."""
        corpus_args, pretraining_args = self.corpus_args, self.pretraining_args
        with accelerator.main_process_first():
            data = prepare_pretraining_data(self.tokenizer, corpus_args, pretraining_args, loop_args.seed, tagger)
        self.blocks, self.x_is_z, masked = data.blocks, data.x_is_z, data.masked
        held_out = 0 if eval_examples is not None else min(pretraining_args.eval_mlm_examples, len(masked) // 10)
        split = masked.train_test_split(test_size=held_out, seed=loop_args.seed, shuffle=True) if held_out else None
        self.train_examples = split["train"] if split else masked
        self.eval_examples = split["test"] if split else eval_examples
        self.reading = ReadingSchedule.for_run(pretraining_args, loop_args.max_steps, loop_args.seed, data.reading,
                                               self.train_examples, accelerator.num_processes, accelerator.process_index)
        given = eval_examples is not None  # evaluation sentences handed to the trainer: none of X is held out
        self.data_record = data.record(corpus_args, len(self.train_examples), None if given else held_out)
        self._arguments = (loop_args, model_args, corpus_args, pretraining_args)
        self._reproducible = tagger is None and not given  # no command line passes these
        logger.info("%d blocks, %d masked training sentences", len(self.blocks), len(self.train_examples))

    def _build_collators(self) -> None:
        """The K-candidate collator (with ∅ when `use_null_document`) and the reading one (the own block alone)."""
        corpus_args, pretraining_args = self.corpus_args, self.pretraining_args
        self.collator, self.reading_collator = (
            RealmPretrainingCollator(
                self.tokenizer, block_max_length=corpus_args.block_length,
                joined_max_length=corpus_args.joined_max_length, use_null_document=use_null_document,
            )
            for use_null_document in (pretraining_args.use_null_document, False)
        )
        self.num_retrieved = pretraining_args.num_candidates - int(pretraining_args.use_null_document)

    def parameter_groups(self, model: RealmPretrainingModel) -> list[dict]:
        """The encoder's BERT, its MLM head (at `mlm_head_learning_rate` when given) and the retriever (from
        `retriever_start_step`, at `retriever_learning_rate` when given)."""
        weight_decay, args = self.args.weight_decay, self.pretraining_args

        def options(learning_rate: float | None, **extra) -> dict:
            return {**extra, **({"lr": learning_rate} if learning_rate is not None else {})}

        def is_head(name: str) -> bool:
            return name.startswith("encoder.mlm_head.")

        return [
            *decay_parameter_groups(model, weight_decay, lambda n: n.startswith("encoder.") and not is_head(n)),
            *decay_parameter_groups(model, weight_decay, is_head, **options(args.mlm_head_learning_rate)),
            *decay_parameter_groups(
                model, weight_decay, lambda n: n.startswith("retriever."),
                # asked at every step: the utility gate decides the retriever's start during training
                **options(args.retriever_learning_rate, start_step=lambda: self.retriever_start_step),
            ),
        ]

    @property
    def retriever_start_step(self) -> int | None:
        """The step (0-based) from which the retriever learns; None before the gate opens, or when it never learns."""
        return self.retriever_schedule.start_step

    def retriever_learns(self, step: int) -> bool:
        """Whether the retriever learns at `step` (0-based: the step being taken), by [`RetrieverStartSchedule`]: not
        during the reading warm-up, nor, with `retriever_gate_utility`, before the gate opens, nor ever with a zero
        learning rate."""
        return self.retriever_schedule.learns(step)

    def is_reading_step(self, step: int) -> bool:
        """Whether `step` (0-based) reads each sentence's own block alone ([`ReadingSchedule`])."""
        return self.reading.is_reading_step(step)

    def _update_utility_gate(self, step: int) -> dict[str, float]:
        """After `step` steps: record the step's reading utility of the top block (averaged over processes) and open
        the gate when its mean over the window reaches `retriever_gate_utility`."""
        schedule = self.retriever_schedule
        utilities, self._step_utilities = self._step_utilities, []
        if not schedule.gate_waiting or not utilities or step <= schedule.reading_warmup_steps:
            return {}
        utility = torch.tensor(sum(utilities) / len(utilities), device=self.accelerator.device)
        utility = self.accelerator.reduce(utility, reduction="mean").item()  # the same decision on every rank
        window_mean = schedule.observe_utility(step, utility)
        window = len(schedule.utility_window)
        self.retriever_learning.observe_gate(window_mean, window)
        if schedule.start_step is not None:
            self.retriever_learning.gate_opened(step)
            logger.info(
                "The encoder reads the retrieved blocks (reading utility of the top block %.3f >= %.3f over %d steps): "
                "the gate opens after step %d, the retriever learns from step %d", window_mean,
                schedule.gate_utility, window, step, step + 1,
            )
        return {"ru_gate_window_mean": window_mean}

    # ------------------------------------------------------------------------------------------------ index
    @property
    def retriever(self) -> RealmRetriever:
        return self.unwrapped_model().retriever

    def on_step_end(self, step: int) -> dict[str, float]:
        """Request a refresh when the schedule says so and swap in a finished index (the same on every rank)."""
        gate_logs = self._update_utility_gate(step)
        self.retriever_learning.record_step(step, self.retriever_learns(step - 1))
        diversity, self._step_diversity = self._step_diversity, []
        collapse = self.retriever_learning.observe_retrieval(step, sum(diversity) / len(diversity)) if diversity else None
        if collapse is not None and self.accelerator.is_main_process:
            logger.warning(collapse)
        # no refresh while the retriever is frozen (reading warm-up, the utility gate, a zero learning rate); none
        # is requested at the last step (the final rebuild replaces it), where a finished one is still swapped in
        last = step >= self.args.max_steps
        started = self.retriever_learns(step - 1)
        swapped = self._swap_refreshed_index(step, refresh=started, request=not last)
        logs: dict[str, float] = {"index_step": float(self.index.step or 0), **gate_logs}
        logs["retriever_learning"] = float(self.retriever_learning.learning)  # at the step just taken
        if swapped is not None and self.refresher is not None and self.refresher.stats:
            last = self.refresher.stats[-1]
            logs.update({f"refresh/{k}": float(v) for k, v in last.items()})
        return logs

    def status(self) -> str:
        """Whether the retriever learned at the step just taken, and what holds it otherwise (the gate's utility)."""
        return self.retriever_learning.status()

    def train(self) -> list[dict]:
        """[`TrainingLoop.train`], with the index refresher stopped however training ends: a build thread left
        running inside CUDA work when the process exits aborts it ("terminate called without an active exception")."""
        try:
            return super().train()
        finally:
            if self.refresher is not None:
                self.refresher.close()

    def on_train_begin(self) -> None:
        """Say loudly when the retriever starts frozen: for the whole run, or until the utility gate opens."""
        message = self.retriever_learning.start_message(self.step, self.args.max_steps)
        if message is not None and self.accelerator.is_main_process:
            logger.log(*message)

    def on_train_end(self) -> dict:
        """Sum up how long the retriever learned (a warning when it never did, or hardly); the record goes into
        `<output_dir>/trainer_state.json` with what a model card shows ([`pretraining_record`])."""
        level, summary, record = pretraining_record(
            self.retriever_learning, self.data_record, self._arguments, self._reproducible
        )
        if self.accelerator.is_main_process:
            logger.log(level, summary)
        return record

    # ------------------------------------------------------------------------------------------------- step
    def embed_sentences(self, examples: list[dict]) -> torch.Tensor:
        """Query embeddings `[B, D]` of masked sentences for search: without gradient and in eval mode (the top-k
        must not depend on dropout noise), in float32."""
        queries = [list(example["input_ids"]) for example in examples]
        query_ids = pad_sequences(queries, self.tokenizer.pad_token_id)  # [B, Lq]
        attention = (torch.arange(query_ids.shape[1])[None] < torch.tensor([len(q) for q in queries])[:, None]).long()
        device = self.accelerator.device
        retriever = self.retriever
        was_training = retriever.training
        retriever.eval()
        try:
            with torch.no_grad():
                return retriever.embed_queries(query_ids.to(device), attention.to(device)).float().cpu()  # [B, D]
        finally:
            retriever.train(was_training)

    def retrieve_and_collate(self, examples: list[dict], index: RealmIndex | None = None) -> tuple[dict, int | None]:
        """Search the index (`self.index` unless another is given) with the current query tower and build REALM's
        K-candidate batch (∅ and the top k-1 blocks). With X = Z the block each sentence came from (the trivial
        candidate) is excluded from the search."""
        index = self.index if index is None else index
        trivial = self._source_block_ids(examples) if self.x_is_z else None
        query_embeds = self.embed_sentences(examples)  # [B, D]
        _, block_ids = index.search(query_embeds, self.num_retrieved, exclude=trivial)  # [B, k-1]
        self.last_retrieved_ids = block_ids
        return self._collate(examples, block_ids, index, self.collator)

    def collate_source_blocks(self, examples: list[dict], index: RealmIndex | None = None) -> tuple[dict, int | None]:
        """The reading batch: each sentence (of Z) with the block it came from as its only candidate (no ∅, no
        search), so that the encoder's whole gradient goes to reading it (the reading warm-up and reading loss)."""
        index = self.index if index is None else index
        sources = self._source_block_ids(examples)
        if not all(sources):
            raise ValueError("A reading step needs the source block of every sentence (sentences of Z).")
        block_ids = torch.tensor(sources, dtype=torch.long)  # [B, 1]
        return self._collate(examples, block_ids, index, self.reading_collator)

    @staticmethod
    def _source_block_ids(examples: list[dict]) -> list[list[int]]:
        """The block each sentence came from, as a one-element list (empty for a sentence not taken from Z)."""
        return [[int(e["source_block_id"])] if int(e.get("source_block_id", -1)) >= 0 else [] for e in examples]

    def _collate(
        self, examples: list[dict], block_ids: torch.Tensor, index: RealmIndex, collator: RealmPretrainingCollator
    ) -> tuple[dict, int | None]:
        """The candidate batch of `examples` with the blocks `block_ids` `[B, k]` of `index`, on the device."""
        device = self.accelerator.device
        columns = ["block_id", "input_ids", "token_type_ids"]
        if hasattr(index, "get_block_arrays"):
            # the candidates' columns as arrays, read from Arrow in one call: no Python object per wordpiece
            retrieved = index.get_block_arrays(block_ids, columns)
        else:  # an index without it (e.g. a sharded one): block rows as dicts
            rows = index.get_blocks(block_ids, columns=columns)
            retrieved = [
                [{name: rows[name][b][j] for name in rows} for j in range(block_ids.shape[1])]
                for b in range(len(examples))
            ]
        batch = collator(examples, retrieved)
        null_index = batch.pop("null_candidate_index", None)
        batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
        return batch, null_index

    def frozen_parameters(self) -> list[torch.nn.Parameter]:
        """The retriever's parameters while it does not learn (reading warm-up, a closed gate, a zero learning rate):
        on several processes DDP computes their gradients, which are dropped here."""
        if self.retriever_learns(self.step):
            return []
        return list(self.retriever.parameters())

    def training_step(self, examples: list[dict]) -> tuple[torch.Tensor, dict[str, torch.Tensor | float]]:
        reading_warmup = self.is_reading_step(self.step)
        if reading_warmup:  # X != Z: Z's own sentences instead of X's
            examples = self.reading.examples(self.step, examples)
        collate = self.collate_source_blocks if reading_warmup else self.retrieve_and_collate
        batch, null_index = collate(examples)
        # while the retriever is frozen its backward pass is work for nothing; several processes run it anyway (DDP
        # expects every rank to reduce the same gradients) and `frozen_parameters` drops the result
        frozen = not self.retriever_learns(self.step) and self.accelerator.num_processes == 1
        reading_batch = None
        if self.reading.reads_beside(self.step):  # the reading loss: the own blocks alone, in the same forward call
            reading = self.reading.examples(self.step, examples)
            reading_batch, _ = self.collate_source_blocks(reading)
        reading_weight = self.reading.loss_weight_at(self.step)
        out = self.model(
            batch, null_candidate_index=null_index, train_retriever=not frozen, score_candidates=not reading_warmup,
            reading_batch=reading_batch, reading_loss_weight=reading_weight,
        )
        logs = self.retrieval_logs(out, null_index)
        if reading_batch is not None:
            logs["reading_loss"] = out.reading_loss
            if self.reading.loss_weight_final is not None:
                logs["reading_loss_weight"] = reading_weight
        if not reading_warmup:  # ~1/B when every query retrieves the same blocks
            diversity = retrieval_diversity(self.last_retrieved_ids, len(self.blocks))
            self._step_diversity.append(diversity)
            logs["retrieved_distinct"] = diversity
        if "ru_top" in logs and self.retriever_schedule.gate_waiting:
            self._step_utilities.append(float(logs["ru_top"]))  # the gate decides between steps: read it now
        return out.loss, logs

    retrieval_logs = staticmethod(step_retrieval_logs)  # an attribute: benchmarks/bench_step_overhead.py times it

    # ------------------------------------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self, step: int) -> dict[str, float]:
        results: dict[str, float] = {}
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training
        model.eval()
        args = self.pretraining_args
        # every rank searches a sharded index (the same questions); under ZeRO-3 every rank gathers the copy searched
        retriever = whole_copy(self.accelerator, self.retriever) if args.eval_qa_file else None
        if args.eval_qa_file and (self.accelerator.is_main_process or self.shards_index):
            if args.eval_answerable_only and self._answer_finder is None:
                self._answer_finder = CorpusAnswerFinder(
                    f"{title} {text}" for title, text in zip(self.blocks["title"], self.blocks["text"])
                )
            results["zero_shot_recall@5"] = zero_shot_recall(
                retriever, self.tokenizer, self.index, args.eval_qa_file, args.eval_max_questions,
                self.corpus_args.query_max_length, self.accelerator.device, answer_finder=self._answer_finder,
            )
        if self.eval_examples is not None and len(self.eval_examples):
            results.update(self.evaluate_sentences(self.eval_examples))
        model.train(was_training)
        return results

    @torch.no_grad()
    def evaluate_sentences(self, examples: datasets.Dataset, fresh_index: bool | None = None) -> dict[str, float]:
        r"""
        Masked-token accuracy of held-out sentences with retrieval (the marginal over the K candidates) and with the
        null document only; with a `gold_block_id` column, also how the retriever ranks the gold block.

        Args:
            examples (`datasets.Dataset`): Masked sentences (columns of [`build_masked_dataset`]), optionally with
                `gold_block_id` and `gold_block_ids` (other blocks counted as gold, e.g. a second document).
            fresh_index (`bool`, *optional*): Search an exact index of the *current* document tower instead of the
                (possibly stale) training index, so the figures measure the retriever and not the refresh lag.
                Defaults to True for corpora of at most 50,000 blocks. Its candidates are scored with its embeddings.

        Returns:
            `dict` with `mlm_accuracy_with_retrieval` and `mlm_accuracy_null_document` (percent), and with gold
            blocks: `gold_top1`, `gold_top{K-1}` (fraction of sentences whose (a) gold block is ranked first / among the
            K-1 retrieved; over the whole corpus), `gold_prior_mass` (mean `p(gold | x)` among the K candidates,
            0 when not retrieved), `gold_posterior_mass` (mean `p(gold | x, y)`) and `mlm_accuracy_gold_document`
            (percent, with the gold block as the only candidate: how well the encoder reads, whatever the retriever
            finds). Without gold blocks, when the sentences come from the knowledge corpus itself (X = Z),
            `mlm_accuracy_source_block` (percent, each sentence's own block as the only candidate: the reading
            warm-up's task on held-out sentences).
        """
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training
        model.eval()
        if fresh_index is None:
            fresh_index = len(self.blocks) <= 50_000
        index = self._build_index_now(step=self.step, index_type="torch-exact") if fresh_index else self.index
        retrieve = functools.partial(self.retrieve_and_collate, index=index)
        if fresh_index:  # the index holds the current document tower's embeddings: no need to embed them again
            retrieve = scoring_with_index_embeddings(retrieve, model.retriever, index)
        results = held_out_sentence_figures(
            model, examples, self.args.per_device_batch_size, self.x_is_z, self.num_retrieved,
            retrieve=retrieve,
            read_alone=lambda chunk, block_ids: self._collate(chunk, block_ids, index, self.reading_collator)[0],
        )
        model.train(was_training)
        return results

    # --------------------------------------------------------------------------------------- checkpoint state
    def extra_state(self) -> dict:
        stats = self.refresher.stats if self.refresher is not None else []
        return {
            "index_step": self.index.step, "index_fingerprint": self.index.fingerprint, "refresh_stats": stats,
            # refreshes requested but not swapped in: a resumed run takes them up at once (resume_in_flight)
            "refresh_in_flight": self.refresher.in_flight() if self.refresher is not None else [],
            **self.retriever_schedule.state_dict(),  # retriever_start_step, utility_window
            "retriever_learning": self.retriever_learning.state_dict(),
        }

    def load_extra_state(self, state: dict) -> None:
        self.retriever_schedule.load_state_dict(state)
        if "retriever_learning" in state:
            self.retriever_learning.load_state_dict(state["retriever_learning"])
        else:  # a checkpoint of an older realm_hf: the retriever has learned since its start step
            start = self.retriever_start_step
            learned = 0 if start is None or self.retriever_learning.frozen_by else max(0, self.step - start)
            gated = self.pretraining_args.retriever_gate_utility is not None
            self.retriever_learning.load_state_dict(
                {"steps_total": self.step, "steps_learning": learned, "gate_opened_at_step": start if gated else None}
            )
        self._restore_index(state)

    def save_model(self, directory: str) -> None:
        """Save `retriever/`, `encoder/` (each with the tokenizer) and `index/`, an index of the final doc tower.

        Main process only. In a multi-process run the final index is rebuilt beforehand on every rank
        (`before_final_save`, called by `train`); called alone, a rebuild here embeds the corpus in this process."""
        model = self.accelerator.unwrap_model(self.model)
        # the corpus of the index saved beside: a fine-tuning of this model without --corpus takes it
        model.retriever.config.corpus = corpus_record(
            self.corpus_args.corpus, self.corpus_args.max_articles, self.index.num_blocks
        )
        model.save_pretrained(directory)
        self.tokenizer.save_pretrained(os.path.join(directory, "retriever"))
        self.tokenizer.save_pretrained(os.path.join(directory, "encoder"))
        # the encoder's config and the tokenizer at the top: transformers.pipeline(task, model=directory) reads them
        # before realm_hf's loaders see the sub-directories
        model.encoder.config.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        if self.refresher is not None:
            self.refresher.close()  # a build still running embeds older weights: stop it, it would only compete
        self._finalize_index(directory)
        self.index.save_pretrained(os.path.join(directory, "index"))
