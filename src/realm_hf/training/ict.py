"""Inverse Cloze Task warm start of the retriever (ORQA / REALM): a sentence must retrieve its own block (with the
sentence removed 90% of the time) against the other blocks of the batch."""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoTokenizer

from ..corpus import load_corpus_articles, split_into_blocks
from ..data.ict import IctCollator, build_ict_dataset
from ..modeling.initial_weights import resolve_bert_path
from ..modeling import RealmRetriever
from .arguments import CorpusArguments, IctArguments, LoopArguments, ModelArguments
from .loop import TrainingLoop, make_accelerator
from .models import load_models
from .trained_corpus import corpus_record

logger = logging.getLogger(__name__)


class IctModel(nn.Module):
    """The retriever with the in-batch ICT loss: scores `[B, B]` = queries · blocksᵀ, targets on the diagonal."""

    def __init__(self, retriever: RealmRetriever, temperature: float = 1.0):
        super().__init__()
        self.retriever = retriever
        self.temperature = temperature

    def forward(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        queries = self.retriever.embed_queries(
            batch["query_input_ids"], batch["query_attention_mask"], batch["query_token_type_ids"]
        )  # [B, D]
        blocks = self.retriever.embed_documents(
            batch["block_input_ids"], batch["block_attention_mask"], batch["block_token_type_ids"]
        )  # [B, D]
        scores = queries @ blocks.T / self.temperature  # [B, B]
        targets = torch.arange(scores.shape[0], device=scores.device)
        return F.cross_entropy(scores, targets), scores

    def save_pretrained(self, directory: str) -> None:
        self.retriever.save_pretrained(directory)


class IctTrainer(TrainingLoop):
    r"""
    ICT on the shared Accelerate loop; saves a `RealmRetriever` that `examples/pretrain.py --ict_warm_start DIR`
    starts from.
    """

    def __init__(self, loop_args: LoopArguments, model_args: ModelArguments, corpus_args: CorpusArguments, ict_args: IctArguments):
        accelerator = make_accelerator(loop_args)
        self.tokenizer = AutoTokenizer.from_pretrained(resolve_bert_path("minilm" if model_args.random_init else model_args.retriever))
        retriever, _ = load_models(model_args, corpus_args, len(self.tokenizer), self.tokenizer.mask_token_id)
        retriever.freeze_null_document_prior()  # ICT scores no null document
        with accelerator.main_process_first():
            articles = load_corpus_articles(corpus_args.corpus, corpus_args.max_articles)
            blocks = split_into_blocks(articles, self.tokenizer, max_length=corpus_args.block_length, num_proc=corpus_args.num_proc, cache_dir=corpus_args.cache_dir)
            examples = build_ict_dataset(
                blocks, self.tokenizer, query_max_length=corpus_args.query_max_length,
                block_max_length=corpus_args.block_length, remove_probability=ict_args.remove_probability,
                seed=loop_args.seed, num_proc=corpus_args.num_proc, cache_dir=corpus_args.cache_dir,
            )
        logger.info("%d ICT examples from %d blocks", len(examples), len(blocks))
        self.corpus_args, self.num_blocks = corpus_args, len(blocks)
        dataloader = torch.utils.data.DataLoader(
            examples, batch_size=loop_args.per_device_batch_size, shuffle=True, drop_last=True,
            collate_fn=IctCollator(self.tokenizer), num_workers=loop_args.num_workers,
        )
        super().__init__(
            loop_args, IctModel(retriever, ict_args.temperature), dataloader, accelerator=accelerator,
            config={**vars(model_args), **vars(corpus_args), **vars(ict_args), **vars(loop_args)},
        )

    def training_step(self, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        loss, scores = self.model(batch)
        accuracy = (scores.argmax(-1) == torch.arange(scores.shape[0], device=scores.device)).float().mean()
        return loss, {"in_batch_accuracy": accuracy.detach()}  # read by the loop at its logging steps

    def save_model(self, directory: str) -> None:
        """Save the retriever with the tokenizer, its config recording the corpus it learned from: a fine-tuning
        started from it (`--model` or `--retriever`) without `--corpus` takes that corpus, or refuses in one line."""
        self.unwrapped_model().retriever.config.corpus = corpus_record(
            self.corpus_args.corpus, self.corpus_args.max_articles, self.num_blocks
        )
        super().save_model(directory)
        self.tokenizer.save_pretrained(directory)
