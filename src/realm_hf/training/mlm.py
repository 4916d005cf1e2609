"""Masked-LM training of the encoder's start: continued BERT pre-training on the knowledge corpus (or a BERT from
scratch), so that the knowledge-augmented encoder starts as a reader of text, as REALM's starts from BERT.

The output, `<output_dir>/final`, is a plain `BertForMaskedLM` directory with its tokenizer: what `--encoder` (and
`--retriever`) of every other job takes, as they take `bert-base-uncased` from the Hub.
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

from ..corpus import load_corpus_articles, split_into_blocks
from ..data.mlm import MlmCollator, split_held_out_articles
from ..modeling.initial_weights import resolve_bert_path
from ..modeling.common import load_bert_for_masked_lm
from ..modeling.knowledge_encoder import IGNORE_INDEX
from ..utils.quiet import quiet_checkpoint_io
from .arguments import CorpusArguments, LoopArguments, MlmArguments, ModelArguments
from .loop import TrainingLoop, decay_parameter_groups, make_accelerator
from .models import TINY_BERT, is_realm_dir
from .zero3 import is_partitioned

logger = logging.getLogger(__name__)

__all__ = ["MaskedLmModel", "MlmTrainer", "check_start", "load_start_masked_lm"]


class MaskedLmModel(nn.Module):
    """A `BertForMaskedLM` whose loss and accuracy are computed at the labelled positions only (vocabulary logits
    `[M, V]`, never `[B, L, V]`)."""

    def __init__(self, masked_lm: BertForMaskedLM):
        super().__init__()
        self.masked_lm = masked_lm

    def forward(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Returns `(loss, correct, count)`: mean cross-entropy over the labelled positions, how many of them the
        argmax predicts right, and how many there are (0-d tensors)."""
        hidden = self.masked_lm.bert(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
            token_type_ids=batch["token_type_ids"],
        ).last_hidden_state  # [B, L, H]
        labelled = batch["labels"] != IGNORE_INDEX  # [B, L]
        logits = self.masked_lm.cls(hidden[labelled])  # [M, V]
        targets = batch["labels"][labelled]  # [M]
        loss = F.cross_entropy(logits.float(), targets)
        correct = (logits.argmax(-1) == targets).sum()
        return loss, correct, targets.new_tensor(targets.numel())


def check_start(model_args: ModelArguments) -> str:
    """The path of `--encoder`, refused when it is a REALM encoder (already a masked LM, and no BERT directory)."""
    start = resolve_bert_path(model_args.encoder)
    if is_realm_dir(start, "realm_knowledge_encoder"):
        raise ValueError(
            f"--encoder {model_args.encoder!r} is a RealmKnowledgeEncoder, already trained as a masked LM: pass it "
            "to `realm-hf pretrain --encoder` directly, or give `realm-hf mlm` a BERT (directory, Hub id or 'minilm')."
        )
    return start


def load_start_masked_lm(model_args: ModelArguments, mlm_args: MlmArguments, vocab_size: int) -> BertForMaskedLM:
    """The masked LM to train: `--encoder`'s BERT (its MLM head when it has one, else a fresh head tied to the word
    embeddings), its architecture at random with `--from_scratch`, or a tiny random BERT with `--random_init`."""
    if model_args.random_init:
        return BertForMaskedLM(BertConfig(**TINY_BERT, vocab_size=vocab_size))
    start = check_start(model_args)
    if mlm_args.from_scratch:
        return BertForMaskedLM(BertConfig.from_pretrained(start))
    return load_bert_for_masked_lm(start)


class MlmTrainer(TrainingLoop):
    r"""
    Masked-LM training ([`MlmArguments`]) of a BERT on the blocks of the knowledge corpus, on the shared Accelerate
    loop (checkpoints, resume, mixed precision, several processes). The held-out articles' blocks, masked once with a
    fixed seed, give `eval/mlm_accuracy` (percent of masked wordpieces predicted right) at every evaluation.
    """

    def __init__(
        self, loop_args: LoopArguments, model_args: ModelArguments, corpus_args: CorpusArguments, mlm_args: MlmArguments
    ):
        accelerator = make_accelerator(loop_args)
        self.mlm_args = mlm_args
        self.tokenizer = AutoTokenizer.from_pretrained(
            resolve_bert_path("minilm") if model_args.random_init else check_start(model_args)
        )
        masked_lm = load_start_masked_lm(model_args, mlm_args, len(self.tokenizer))
        max_length = mlm_args.mlm_max_length or corpus_args.block_length
        with accelerator.main_process_first():
            articles = load_corpus_articles(corpus_args.corpus, corpus_args.max_articles)
            blocks = split_into_blocks(
                articles, self.tokenizer, max_length=corpus_args.block_length, num_proc=corpus_args.num_proc,
                cache_dir=corpus_args.cache_dir,
            )
        train_blocks, held_out = split_held_out_articles(blocks, mlm_args.eval_articles, loop_args.seed)
        held_out = held_out.select(range(min(len(held_out), mlm_args.eval_max_blocks)))
        logger.info(
            "Masked LM on %d blocks (%d held-out blocks of %d articles for evaluation), %s", len(train_blocks),
            len(held_out), mlm_args.eval_articles, "from scratch" if mlm_args.from_scratch else "continued",
        )
        columns = ["input_ids", "token_type_ids"]
        collator = MlmCollator(
            self.tokenizer, max_length, mlm_args.mlm_probability, whole_word=mlm_args.whole_word_masking
        )
        eval_collator = MlmCollator(
            self.tokenizer, max_length, mlm_args.mlm_probability, whole_word=mlm_args.whole_word_masking,
            seed=loop_args.seed,
        )
        rows = list(held_out.select_columns(columns))
        batch_size = loop_args.per_device_batch_size
        self.eval_batches = [eval_collator(rows[i : i + batch_size]) for i in range(0, len(rows), batch_size)]
        dataloader = torch.utils.data.DataLoader(
            train_blocks.select_columns(columns), batch_size=batch_size, shuffle=True, drop_last=True,
            collate_fn=collator, num_workers=loop_args.num_workers,
        )
        super().__init__(
            loop_args, MaskedLmModel(masked_lm), dataloader, accelerator=accelerator,
            config={**vars(model_args), **vars(corpus_args), **vars(mlm_args), **vars(loop_args)},
        )

    def parameter_groups(self, model: nn.Module) -> list[dict]:
        """The head's transform and bias at `mlm_head_learning_rate` (a fresh head learns faster than the body it
        reads; the decoder is the word embeddings, tied); the rest at `learning_rate`."""
        head_lr = self.mlm_args.mlm_head_learning_rate
        if head_lr is None:
            return super().parameter_groups(model)

        def in_head(name: str) -> bool:
            return name.startswith("masked_lm.cls.")

        return decay_parameter_groups(
            model, self.args.weight_decay, select=lambda name: not in_head(name)
        ) + decay_parameter_groups(model, self.args.weight_decay, select=in_head, lr=head_lr)

    def training_step(self, batch: dict) -> tuple[torch.Tensor, dict]:
        loss, correct, count = self.model(batch)
        return loss, {
            "masked_accuracy": 100.0 * correct.detach() / count.clamp(min=1),
            "tokens_per_step": batch["attention_mask"].sum(),  # non-padding tokens of this process's batch
        }

    @torch.no_grad()
    def evaluate(self, step: int) -> dict[str, float]:
        # the same held-out batches on every rank: the main one evaluates and reports, or under ZeRO-3 (whose forward
        # passes gather the parameters with collectives) every rank evaluates in step and the main one reports
        if not self.accelerator.is_main_process and not is_partitioned(self.accelerator):
            return {}
        model = self.unwrapped_model()
        was_training = model.training
        model.eval()
        loss_sum = correct = count = 0.0
        device = self.accelerator.device
        for batch in self.eval_batches:
            with self.accelerator.autocast():
                loss, hits, labelled = model({name: tensor.to(device) for name, tensor in batch.items()})
            loss_sum += loss.item() * labelled.item()
            correct += hits.item()
            count += labelled.item()
        model.train(was_training)
        if not self.accelerator.is_main_process:
            return {}
        return {"mlm_accuracy": 100.0 * correct / max(count, 1), "mlm_loss": loss_sum / max(count, 1)}

    def save_model(self, directory: str) -> None:
        with quiet_checkpoint_io():
            self.unwrapped_model().masked_lm.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
