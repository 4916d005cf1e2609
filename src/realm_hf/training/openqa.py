"""Open-QA fine-tuning of `RealmForOpenQA` on the shared Accelerate loop (REALM paper, section 3.4 / ORQA).

The index is built once from the (pre-trained) document tower and never refreshed. Each step embeds the questions
with the current query tower (no gradient), retrieves the top-k blocks, takes their *stored* embeddings from the
index, and runs `RealmForOpenQA` with them as `candidate_embeds`: the relevance scores `q·e_z` are recomputed with
gradient, so the span-marginal loss `-log Σ_z p(z|x) Σ_{s∈S(z,y)} p(s|z,x)` trains the query tower and the reader;
the document tower is frozen (untied first when the towers are shared, see `OpenQaArguments.untie_towers`).
"""

from __future__ import annotations

import logging
import os
import random

import torch
from accelerate.utils import broadcast_object_list

from ..corpus import load_corpus_articles, split_into_blocks
from ..data.openqa import OpenQaCollator, load_qa_examples, model_inputs
from ..evaluation.loading import resolve_index_directory
from ..evaluation.open_qa import evaluate_open_qa, write_metrics_file
from ..evaluation.retrieval import retrieve_and_collate
from ..index import RealmIndex
from ..index.manifest import DAMAGED_INDEX_HINT, MANIFEST_NAME, fingerprint_module
from ..modeling.initial_weights import resolve_bert_path
from ..modeling import RealmForOpenQA, RealmRetriever
from ..utils.files import read_json_file
from .arguments import CorpusArguments, LoopArguments, ModelArguments, OpenQaArguments
from .loop import TrainingLoop, as_examples, make_accelerator
from .models import (
    fit_lengths_to_models, is_realm_dir, length_limits, load_open_qa_model, load_open_qa_tokenizer,
    untie_retriever_towers,
)
from ..utils.precision import autocast_dtype, resolve_embed_dtype
from .trained_corpus import corpus_record, describe_corpus, recorded_corpus_path, refuse_missing_corpus
from .zero3 import whole_copy

logger = logging.getLogger(__name__)

__all__ = ["EVAL_RESULTS_NAME", "INDEX_SUBDIR", "OpenQaArguments", "OpenQaTrainer"]

EVAL_RESULTS_NAME = "eval_results.json"
"""The trainer's latest evaluation (`realm_hf.evaluation.write_metrics_file` format), for model cards."""

INDEX_SUBDIR = "index"
"""Folder of a saved `RealmForOpenQA` that holds its index; `config.index_repo_id` is set to it (relative path)."""

REHEARSAL_KEY = "rehearsal"
"""Key that marks a rehearsed reading question among the training examples (see `OpenQaArguments.rehearsal_file`)."""


def load_rehearsal_examples(path: str | None, max_questions: int | None, seed: int) -> list[dict]:
    r"""
    The reading questions of `path` to rehearse in fine-tuning, marked with [`REHEARSAL_KEY`]: all of them, or a
    sample of `max_questions` drawn with `seed` (none without a path).
    """
    if not path:
        return []
    if max_questions is not None and max_questions < 1:
        raise ValueError(
            f"max_rehearsal_questions must be positive or unset, got {max_questions}; leave rehearsal_file empty to "
            "rehearse nothing."
        )
    examples = load_qa_examples(path)
    if max_questions is not None and max_questions < len(examples):
        examples = random.Random(seed).sample(examples, max_questions)
    return [{**example, REHEARSAL_KEY: True} for example in examples]


# ---------------------------------------------------------------------------------------------- trainer
class OpenQaTrainer(TrainingLoop):
    r"""
    Open-QA fine-tuning of `RealmForOpenQA` on the shared Accelerate loop.

    The index is fixed for the whole run: `openqa_args.index_dir`; else the index of a `RealmForOpenQA` being
    fine-tuned further; else `<output_dir>/index`, reused when it exists and was built by the same document tower,
    otherwise built over `corpus_args.corpus` with the model's document tower and saved there. An index built by other
    weights is refused (`check_index_fingerprint`).

    Without a corpus given (`corpus_given`), a start that records the corpus it was trained on
    (`RealmRetrieverConfig.corpus`, see `realm_hf.training.trained_corpus`) is fine-tuned over that corpus: the index
    a pre-training output holds when its document tower built it, else the recorded corpus when it is still there
    (one line logs which); otherwise the run is refused in one line naming the model, its corpus and `--corpus PATH`.
    Only a start with no record (a BERT, MiniLM, a random init) takes `corpus_args.corpus` (`"embedded"` by default).
    The saved model records the corpus its index was built over.

    Logged per step (besides `loss`, `learning_rate`, `steps_per_second`): `answerable`, the fraction of questions
    with a gold span in the retrieved blocks (the rest contribute no loss; a batch with none has loss 0, which
    `loss` averages in), `answerable_loss`, the loss averaged over batches with some answerable question only, and
    `gold_retrieval_mass`, the `p(z|x)` put on blocks holding the answer (averaged over answerable questions; it rises
    as the query tower learns). During the `evidence_steps` each question is read with its evidence block only (and
    `evidence_negatives` hard negatives, see [`evidence_batch`]): `answerable` is then the fraction with an answer in
    the top `evidence_search_depth`. Rehearsed reading questions (`rehearsal_file`) are read that way after the
    evidence steps too, beside the training questions of the same batch; `rehearsal_loss` is their loss, and the other
    figures are the training questions'.
    With an eval file, `evaluate` reports exact match, Recall@k and the reader's ceiling (`answerable`).

    `save_model(dir)` writes the `RealmForOpenQA` and its tokenizer to `dir`, the index into `dir/index`, and sets
    `config.index_repo_id = "index"` (and `config.index_fingerprint`) before saving: a *relative* `index_repo_id`
    names a folder inside the model directory (see `realm_hf.evaluation.resolve_index_directory` and `load_open_qa`), so the directory is a
    self-contained model + index bundle.

    Args:
        loop_args ([`LoopArguments`]), model_args ([`ModelArguments`]), corpus_args ([`CorpusArguments`]),
        openqa_args ([`OpenQaArguments`]): see `realm_hf.training.arguments` and [`OpenQaArguments`].
        corpus_given (`bool`, *optional*): Whether `corpus_args.corpus` was chosen (`--corpus`) rather than left at
            its default; None (default): chosen unless it is the default `"embedded"`.
    """

    def __init__(
        self,
        loop_args: LoopArguments,
        model_args: ModelArguments,
        corpus_args: CorpusArguments,
        openqa_args: OpenQaArguments,
        corpus_given: bool | None = None,
    ):
        accelerator = make_accelerator(loop_args)
        corpus_args.embed_dtype = resolve_embed_dtype(corpus_args.embed_dtype, accelerator.mixed_precision)
        self.corpus_args, self.openqa_args = corpus_args, openqa_args
        self._corpus_given = corpus_args.corpus != CorpusArguments.corpus if corpus_given is None else corpus_given
        self.tokenizer = load_open_qa_tokenizer(openqa_args, model_args)
        model = load_open_qa_model(openqa_args, model_args, corpus_args, len(self.tokenizer))
        if model.retriever.doc_embedder is None and openqa_args.untie_towers:
            model = untie_retriever_towers(model)
        # a start converted from google/realm-* (or any saved model) may take shorter inputs than the defaults
        fit_lengths_to_models(corpus_args, length_limits(
            model.retriever, openqa_args.model or model_args.retriever, model.reader,
            f"the reader ({openqa_args.model or model_args.encoder})",
        ))
        # the saved model asks for questions as long as those it was fine-tuned on (its evaluation, `realm-hf ask`)
        model.config.retriever_config.query_max_length = corpus_args.query_max_length
        model.retriever.config.query_max_length = corpus_args.query_max_length
        model.retriever.freeze_null_document_prior()  # Open-QA retrieves no null document
        if openqa_args.freeze_retriever:
            model.retriever.requires_grad_(False)
        model.retriever.config.length_buckets = model.reader.config.length_buckets = model_args.length_buckets
        if model.retriever.doc_embedder is not None:
            model.retriever.doc_embedder.requires_grad_(False)  # the index's embeddings came from it
        else:
            logger.info("Shared retriever towers: the index stays fixed while the shared tower is fine-tuned")
        self.top_k = openqa_args.top_k
        self.collator = OpenQaCollator(
            self.tokenizer,
            query_max_length=min(corpus_args.query_max_length, model.config.retriever_config.query_max_length),
            reader_max_length=min(corpus_args.joined_max_length, model.config.reader_config.max_length),
            max_span_width=model.config.reader_config.max_span_width,
            truncate_questions=openqa_args.truncate_questions,
            char_offsets=False,  # training maps no span back to text (evaluation builds its own collator)
        )
        self.train_examples = load_qa_examples(openqa_args.train_file, max_questions=openqa_args.max_train_questions)
        self.rehearsal_examples = load_rehearsal_examples(
            openqa_args.rehearsal_file, openqa_args.max_rehearsal_questions, seed=loop_args.seed
        )
        self.eval_examples = None
        if openqa_args.eval_file:
            limit = openqa_args.max_eval_questions
            limit = None if limit is None else openqa_args.eval_skip_questions + limit
            self.eval_examples = load_qa_examples(openqa_args.eval_file, max_questions=limit)[
                openqa_args.eval_skip_questions :
            ] or None
        # fail now, not hours in, on a question longer than query_max_length (truncating: name the ones cut)
        for examples, source in (
            (self.train_examples, openqa_args.train_file), (self.rehearsal_examples, openqa_args.rehearsal_file),
            (self.eval_examples, openqa_args.eval_file),
        ):
            if examples:
                self.collator.check_question_lengths(examples, source)
        logger.info(
            "%d training questions%s, %d evaluation questions", len(self.train_examples),
            f" and {len(self.rehearsal_examples)} rehearsed reading questions" if self.rehearsal_examples else "",
            len(self.eval_examples or []),
        )
        generator = torch.Generator().manual_seed(loop_args.seed)
        dataloader = torch.utils.data.DataLoader(
            self.train_examples + self.rehearsal_examples, batch_size=loop_args.per_device_batch_size, shuffle=True,
            generator=generator, collate_fn=as_examples, num_workers=loop_args.num_workers,
        )
        self._source_model_dir = (
            resolve_bert_path(openqa_args.model)
            if openqa_args.model and is_realm_dir(resolve_bert_path(openqa_args.model), "realm_open_qa")
            else None
        )
        # the fingerprint of the tower that must have built the index, taken before any training step
        self._doc_fingerprint = fingerprint_module(model.retriever.document_embedder)
        self._trained_corpus = model.retriever.config.corpus  # what the start was trained on (None: not recorded)
        self._start = openqa_args.model or model_args.retriever
        self._index_corpus = None  # the record of the corpus under the index, saved with the model
        super().__init__(
            loop_args, model, dataloader, accelerator=accelerator,
            config={**vars(model_args), **vars(corpus_args), **vars(openqa_args), **vars(loop_args)},
        )
        self.index = self._prepare_index()
        if self.top_k > self.index.num_blocks:
            raise ValueError(f"top_k={self.top_k} is larger than the index ({self.index.num_blocks} blocks); lower it.")

    @property
    def open_qa_model(self) -> RealmForOpenQA:
        return self.unwrapped_model()

    # ------------------------------------------------------------------------------------------------ index
    def _load_index(self, directory: str) -> RealmIndex:
        index = RealmIndex.from_pretrained(
            directory, expected_dim=self.open_qa_model.config.retriever_config.embedding_size,
            device=self.accelerator.device,  # searched where the trainer runs (torch-exact: the GPU's matmul)
        )
        # the current document tower, or the one an Open-QA checkpoint recorded (shared towers that moved)
        accepted = {self._doc_fingerprint, getattr(self.open_qa_model.config, "index_fingerprint", None)}
        if self.openqa_args.check_index_fingerprint and index.fingerprint not in accepted:
            index.manifest.check_compatible(expected_fingerprint=self._doc_fingerprint, source=directory)  # raises
        return index

    def _prepare_index(self) -> RealmIndex:
        if self.openqa_args.index_dir:
            logger.info("Using the index at %s", self.openqa_args.index_dir)
            return self._load_index(self.openqa_args.index_dir)
        if self._source_model_dir is not None and self.open_qa_model.config.index_repo_id:
            directory = resolve_index_directory(self._source_model_dir, self.open_qa_model.config.index_repo_id)
            logger.info("Using the index of %s at %s", self._source_model_dir, directory)
            self._index_corpus = self._trained_corpus
            return self._load_index(directory)
        if not self._corpus_given and self._trained_corpus is not None:
            trained_index = self._take_trained_corpus()
            if trained_index is not None:
                return self._load_index(trained_index)
        directory = os.path.join(self.args.output_dir, INDEX_SUBDIR)
        rebuild = [self.accelerator.is_main_process and not self._reusable(directory)]
        if self.accelerator.num_processes > 1:
            broadcast_object_list(rebuild)  # under ZeRO-3 every rank takes part in the copy the main one embeds with
        if rebuild[0]:
            retriever = whole_copy(self.accelerator, self.open_qa_model.retriever)
            if self.accelerator.is_main_process:
                self._build_index(retriever).save_pretrained(directory)
        self.accelerator.wait_for_everyone()
        index = self._load_index(directory)
        self._index_corpus = corpus_record(self.corpus_args.corpus, self.corpus_args.max_articles, index.num_blocks)
        return index

    def _take_trained_corpus(self) -> str | None:
        r"""
        Without `--corpus`, the corpus the start was trained on: the directory of its own index when its document
        tower built it (a pre-training output's `index/`), else None with `corpus_args` set to the recorded corpus
        (still here) for the index built next.

        Raises:
            [`UsageError`]: when the recorded corpus is not here, naming the model, the corpus and `--corpus PATH`.
        """
        record, model = self._trained_corpus, self._start
        source = resolve_bert_path(self.openqa_args.model) if self.openqa_args.model else None
        own = os.path.join(source, INDEX_SUBDIR) if source and os.path.isdir(source) else None
        if own and os.path.isfile(os.path.join(own, MANIFEST_NAME)) and (
            read_json_file(os.path.join(own, MANIFEST_NAME), DAMAGED_INDEX_HINT).get("fingerprint") == self._doc_fingerprint
        ):
            logger.info("No --corpus: fine-tuning over %s, the corpus %s was trained on (its index %s)",
                        describe_corpus(record), model, own)
            self._index_corpus = record
            return own
        path = recorded_corpus_path(record)
        if path is None:
            raise refuse_missing_corpus(model, record)
        self.corpus_args.corpus, self.corpus_args.max_articles = path, record.get("max_articles")
        logger.info("No --corpus: indexing %s, the corpus %s was trained on", describe_corpus(record), model)
        return None

    def _reusable(self, directory: str) -> bool:
        manifest = os.path.join(directory, MANIFEST_NAME)
        if not os.path.isfile(manifest):
            return False
        fingerprint = read_json_file(manifest, DAMAGED_INDEX_HINT).get("fingerprint")
        if fingerprint != self._doc_fingerprint:
            logger.info("The index at %s was built by other weights; rebuilding it", directory)
            return False
        logger.info("Reusing the index at %s (built by the same document tower)", directory)
        return True

    def _build_index(self, retriever: RealmRetriever) -> RealmIndex:
        corpus_args = self.corpus_args
        articles = load_corpus_articles(corpus_args.corpus, corpus_args.max_articles)
        blocks = split_into_blocks(
            articles, self.tokenizer, max_length=min(corpus_args.block_length, retriever.config.block_max_length),
            num_proc=corpus_args.num_proc, cache_dir=corpus_args.cache_dir,
        )
        logger.info("Building the fixed index over %d blocks of %s", len(blocks), corpus_args.corpus)
        return RealmIndex.build(
            blocks, retriever, tokenizer=self.tokenizer, index_type=corpus_args.index_type,
            batch_size=corpus_args.embed_batch_size, device=self.accelerator.device,
            dtype=autocast_dtype(corpus_args.embed_dtype),
        )

    # ------------------------------------------------------------------------------------------------- step
    def retrieve_and_collate(self, examples: list[dict]) -> dict:
        """Retrieve with the current query tower (no gradient) and collate; tensors stay on CPU."""
        return retrieve_and_collate(
            self.open_qa_model, self.index, self.collator, examples, self.top_k, device=self.accelerator.device
        )

    def evidence_batch(self, examples: list[dict]) -> dict:
        r"""
        The batch of an evidence step: for each question, the best-ranked of its top `evidence_search_depth` blocks
        that holds an answer span, followed by `evidence_negatives` hard negatives: the best-ranked of those blocks
        that hold none (blocks with another answer span only where too few hold none). With no negatives the evidence
        block is the only candidate (`K = 1`, so `p(z|x) = 1` and the query tower gets no gradient); with them
        `p(z|x)` is the retriever's softmax over these `1 + negatives` blocks. A question with no evidence keeps its
        top block in its place, which holds no gold span and adds no loss.
        """
        depth = self.openqa_args.evidence_search_depth
        batch = retrieve_and_collate(
            self.open_qa_model, self.index, self.collator, examples, depth, device=self.accelerator.device,
        )
        has_gold = (batch["start_positions"] >= 0).any(-1)  # [B, depth]
        evidence = has_gold.float().argmax(-1)  # [B] the first block with a gold span (0 when none)
        rows = torch.arange(len(evidence))
        # negatives: blocks without an answer first, each group in retrieval order; never the evidence block itself
        order = has_gold.long() * depth + torch.arange(has_gold.shape[1])  # [B, depth]
        order[rows, evidence] = 2 * depth
        negatives = order.argsort(-1)[:, : min(self.openqa_args.evidence_negatives, has_gold.shape[1] - 1)]
        chosen = torch.cat([evidence.unsqueeze(1), negatives], dim=1)  # [B, 1 + negatives]
        for name in ("reader_input_ids", "reader_attention_mask", "reader_token_type_ids", "candidate_embeds",
                     "start_positions", "end_positions", "candidate_block_ids"):
            batch[name] = batch[name][rows.unsqueeze(1), chosen]  # [B, 1 + negatives, ...]
        batch["candidates"] = [[cs[j] for j in picks] for cs, picks in zip(batch["candidates"], chosen.tolist())]
        batch["answerable"] = has_gold.any(-1)  # [B]
        return batch

    def training_step(self, examples: list[dict]) -> tuple[torch.Tensor, dict[str, float | torch.Tensor]]:
        if self.step < self.openqa_args.evidence_steps:
            return self.read(examples, evidence=True)
        questions = [e for e in examples if not e.get(REHEARSAL_KEY)]
        rehearsed = [e for e in examples if e.get(REHEARSAL_KEY)]
        if not rehearsed:
            return self.read(questions, evidence=False)
        # the batch's loss: the mean over its examples, whichever way each was read
        rehearsal_loss, rehearsal_logs = self.read(rehearsed, evidence=True)
        loss = rehearsal_loss * (len(rehearsed) / len(examples))
        logs = {"rehearsal_loss": rehearsal_logs["answerable_loss"]} if "answerable_loss" in rehearsal_logs else {}
        if questions:
            question_loss, logs_of_questions = self.read(questions, evidence=False)
            loss = loss + question_loss * (len(questions) / len(examples))
            logs.update(logs_of_questions)
        return loss, logs

    def read(self, examples: list[dict], evidence: bool) -> tuple[torch.Tensor, dict[str, float | torch.Tensor]]:
        r"""
        The loss of reading `examples` (the mean over them) and its logs: with their evidence block and hard
        negatives ([`evidence_batch`], the warm-up's and rehearsal's way) or with their `top_k` retrieved blocks.
        """
        batch = self.evidence_batch(examples) if evidence else self.retrieve_and_collate(examples)
        device = self.accelerator.device
        out = self.model(**{name: tensor.to(device) for name, tensor in model_inputs(batch).items()})
        # figures of the device's results stay 0-d tensors, read by the loop at its logging steps (no wait here);
        # `answerable` is known on the host
        answerable = batch["answerable"]  # [B], on the CPU
        logs = {"answerable": answerable.float().mean().item()}
        if answerable.any():
            # `loss` averages in the zeros of batches with nothing answerable; this one does not
            logs["answerable_loss"] = out.loss.detach()
            if not evidence:  # (evidence candidates are chosen by their gold spans: their p(z|x) says nothing)
                has_gold = (batch["start_positions"] >= 0).any(-1).to(device)  # [B, K]
                mass = (out.retrieval_log_probs.detach().exp() * has_gold).sum(-1)  # [B]
                rows = answerable.nonzero()[:, 0].to(device)  # the answerable questions, chosen on the host
                logs["gold_retrieval_mass"] = mass.index_select(0, rows).mean()
        return out.loss, logs

    # ------------------------------------------------------------------------------------------- evaluation
    def evaluate(self, step: int) -> dict[str, float]:
        r"""
        On the eval questions (main process): exact match, Recall@k and `answerable` of [`evaluate_open_qa`], and
        `answerable_loss`, the training loss on them (the mean over the questions with an answer span in their
        top-k blocks: what `--early_stopping_metric answerable_loss` watches for the reader's convergence).
        """
        if not self.eval_examples:
            return {}
        model = whole_copy(self.accelerator, self.open_qa_model)  # every rank under ZeRO-3; the main one evaluates
        if not self.accelerator.is_main_process:
            return {}
        held_out_loss = self.held_out_loss(self.eval_examples, model)
        metrics, _ = evaluate_open_qa(
            model, self.tokenizer, self.index, self.eval_examples, top_k=self.top_k,
            batch_size=self.openqa_args.eval_batch_size, device=self.accelerator.device,
            predictions_file=os.path.join(self.args.output_dir, "eval_predictions.jsonl"),
            truncate_questions=self.openqa_args.truncate_questions, progress=False,
        )
        write_metrics_file(
            os.path.join(self.args.output_dir, EVAL_RESULTS_NAME), metrics, model=os.path.join(self.args.output_dir, "final"),
            qa_file=self.openqa_args.eval_file,
        )
        if held_out_loss is not None:
            metrics["answerable_loss"] = held_out_loss
        return metrics

    @torch.no_grad()
    def held_out_loss(self, examples: list[dict], model: RealmForOpenQA | None = None) -> float | None:
        """The reading loss of `examples` with their top-k blocks, averaged over the answerable ones (None: none is),
        read by `model` (default: the model being trained; a process that evaluates alone under ZeRO-3 passes a
        [`whole_copy`])."""
        model = self.open_qa_model if model is None else model
        was_training = model.training
        model.eval()
        total = count = 0.0
        batch_size = self.openqa_args.eval_batch_size
        for start in range(0, len(examples), batch_size):
            batch = retrieve_and_collate(
                model, self.index, self.collator, examples[start : start + batch_size], self.top_k,
                device=self.accelerator.device,
            )
            answerable = int(batch["answerable"].sum())
            if not answerable:
                continue
            inputs = {name: tensor.to(self.accelerator.device) for name, tensor in model_inputs(batch).items()}
            with self.accelerator.autocast():
                out = model(**inputs)
            total += out.loss.float().item() * answerable  # the loss is the mean over the answerable questions
            count += answerable
        model.train(was_training)
        return total / count if count else None

    def extra_state(self) -> dict:
        return {"index_fingerprint": self.index.fingerprint, "index_blocks": self.index.num_blocks}

    def save_model(self, directory: str) -> None:
        r"""
        Save the model + tokenizer to `directory` and the index to `directory/index`, with
        `config.index_repo_id = "index"` (a path relative to the model directory), `config.index_fingerprint` (the
        index manifest's fingerprint) and `config.top_k` set.
        """
        model = self.open_qa_model
        model.config.index_repo_id = INDEX_SUBDIR
        model.config.index_revision = None
        # pairs the model with its index even when shared towers moved (see realm_hf.hub.expected_index_fingerprint)
        model.config.index_fingerprint = self.index.fingerprint
        model.config.top_k = self.top_k
        # the corpus under the index (None: an index given by --index_dir, built over what is not known here)
        model.config.retriever_config.corpus = model.retriever.config.corpus = self._index_corpus
        model.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        self.index.save_pretrained(os.path.join(directory, INDEX_SUBDIR))
