"""Training arguments as dataclasses (parsed by `realm_hf.training.argument_parsing`); each refuses, when made, a value
that cannot be right (`realm_hf.training.argument_limits`).

Why this module is long: it is declarations only, one dataclass per job, and each field's help text is what
`realm-hf JOB --help` prints; REALM pre-training alone has some forty knobs, each saying what it does and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from ..utils.options import UsageError
from .argument_limits import check_limits


@dataclass
class LoopArguments:
    """Settings of the shared Accelerate training loop (ICT, REALM pre-training, Open-QA fine-tuning)."""

    output_dir: str = field(metadata={"help": "Where checkpoints, logs and the final model go."})
    max_steps: int = field(default=1000, metadata={"help": "Optimizer steps to train for."})
    per_device_batch_size: int = field(default=2, metadata={"help": "Examples per process and micro-step."})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "Micro-steps per optimizer step."})
    learning_rate: float = field(default=3e-5, metadata={"help": "Peak learning rate (AdamW)."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay (not on biases / LayerNorms)."})
    warmup_steps: int = field(default=0, metadata={"help": "Linear warm-up steps, then linear decay to 0."})
    max_grad_norm: float = field(default=1.0, metadata={"help": "Gradient clipping norm (0 disables)."})
    mixed_precision: str = field(
        default="no",
        metadata={"help": "'no', 'bf16', 'fp16' (Accelerate) or 'auto': bf16 on a GPU that has it, and on a CPU where a "
                          "short probe (a few seconds, once per process) finds bf16 autocast at least 1.1x faster than "
                          "fp32; else 'no'."},
    )
    seed: int = field(default=0, metadata={"help": "Seed of initialization and data order."})
    logging_steps: int = field(default=10, metadata={"help": "Log every N optimizer steps."})
    save_steps: int = field(default=200, metadata={"help": "Checkpoint (accelerator.save_state) every N steps."})
    save_total_limit: int | None = field(
        default=2,
        metadata={"help": "Checkpoints kept on disk, the newest 2 by default (a checkpoint of a BERT-base REALM run "
                          "weighs gigabytes; `--resume_from_checkpoint latest` needs only the newest); 0 keeps every "
                          "one. Pre-training keeps the index versions they name with them and deletes the others."},
    )
    eval_steps: int = field(default=0, metadata={"help": "Evaluate every N steps (0: only at the end)."})
    eval_on_start: bool = field(
        default=False, metadata={"help": "Evaluate before the first step too (the start's figures, step 0)."}
    )
    early_stopping_metric: str | None = field(
        default=None,
        metadata={"help": "An evaluation metric (e.g. 'answerable_loss' of fine-tuning's held-out questions): "
                          "training stops once it has not improved for early_stopping_patience evaluations (names "
                          "ending in 'loss' are minimized, others maximized); the last step's model is saved."},
    )
    early_stopping_patience: int = field(
        default=3, metadata={"help": "Evaluations without improvement before early stopping stops training."}
    )
    early_stopping_threshold: float = field(
        default=0.0, metadata={"help": "The least change of early_stopping_metric that counts as an improvement."}
    )
    resume_from_checkpoint: str | None = field(
        default=None, metadata={"help": "A checkpoint directory, or 'latest' for the newest in output_dir."}
    )
    overwrite_output_dir: bool = field(
        default=False,
        metadata={"help": "Start afresh in an output_dir that holds another run: its checkpoints, final model, state, "
                          "history, index versions and logs are deleted first. Without it (or --resume_from_checkpoint) "
                          "such a directory is refused, so that two runs never mix their outputs."},
    )
    report_to: str = field(default="tensorboard", metadata={"help": "Accelerate tracker ('tensorboard', 'none', ...)."})
    num_workers: int = field(default=0, metadata={"help": "DataLoader workers."})

    def __post_init__(self) -> None:
        check_limits(self)
        if self.save_total_limit == 0:
            self.save_total_limit = None  # every checkpoint kept
        if self.early_stopping_metric and not self.eval_steps:
            raise ValueError(
                f"--early_stopping_metric {self.early_stopping_metric} needs evaluations during training: set "
                "--eval_steps N (and an evaluation set, e.g. --eval_file for fine-tuning)."
            )
        if self.overwrite_output_dir and self.resume_from_checkpoint:
            raise ValueError(
                f"--overwrite_output_dir deletes the checkpoints that --resume_from_checkpoint "
                f"{self.resume_from_checkpoint} would resume: pass one of them."
            )


@dataclass
class ModelArguments:
    """Where the retriever and the encoder start from."""

    retriever: str = field(default="minilm", metadata={"help": "RealmRetriever dir, a BERT (id or dir), or 'minilm'."})
    encoder: str = field(default="minilm", metadata={"help": "RealmKnowledgeEncoder dir, a BERT, or 'minilm'."})
    projection_size: int | None = field(
        default=128, metadata={"help": "Retriever embedding size (from BERT only; 0 = none: BERT's own space)."}
    )
    pooling: str = field(default="cls", metadata={"help": "Retriever pooling when starting from BERT: cls/pooler/mean."})
    share_towers: bool = field(default=True, metadata={"help": "One network for queries and documents."})
    random_init: bool = field(default=False, metadata={"help": "Tiny random models (tests / smoke runs)."})
    length_buckets: int = field(
        default=1,
        metadata={
            "help": "Run BERT over a batch's candidate blocks and joined sequences (pre-training: encoder and "
            "retriever; Open-QA: reader and retriever) in this many length buckets, each padded only to its own "
            "longest row (same outputs, less work on padding; see the models' configs)."
        },
    )

    def __post_init__(self) -> None:
        check_limits(self)


@dataclass
class CorpusArguments:
    """The knowledge corpus Z, the pre-training corpus X and the index over Z."""

    corpus: str = field(default="embedded", metadata={"help": "Articles of Z (files, dir, or 'embedded')."})
    max_articles: int | None = field(default=None, metadata={"help": "Use only the first N articles of Z."})
    pretraining_corpus: str | None = field(
        default=None, metadata={"help": "Articles of X; empty means X = Z (the trivial candidate is excluded)."}
    )
    max_pretraining_articles: int | None = field(default=None, metadata={"help": "Use only the first N of X."})
    block_length: int = field(default=288, metadata={"help": "Block length in wordpieces, [CLS] title [SEP] body [SEP]."})
    query_max_length: int = field(default=96, metadata={"help": "Masked sentence / question length."})
    joined_max_length: int = field(default=288, metadata={"help": "[CLS] x [SEP] z_body [SEP] length."})
    index_type: str = field(default="Flat", metadata={"help": "faiss factory string or 'torch-exact'."})
    embed_batch_size: int = field(default=64, metadata={"help": "Blocks per forward when (re)building the index."})
    embed_dtype: str = field(
        default="bfloat16",
        metadata={"help": "Autocast dtype for index building: 'bfloat16', 'float16', 'float32', or 'auto' (that of "
                          "training: bfloat16 under bf16, else float32)."},
    )
    cache_dir: str | None = field(default=None, metadata={"help": "Cache of blocks / masked datasets."})
    num_proc: int = field(default=1, metadata={"help": "Processes for preprocessing."})

    def __post_init__(self) -> None:
        check_limits(self)


@dataclass
class PretrainingArguments:
    """REALM pre-training specifics."""

    recipe: str | None = field(
        default=None,
        metadata={
            "help": "A named recipe, the settings a run starts from; --config and the command line override them. "
            "Default: cold-start (the default start, all-MiniLM-L6-v2, cannot read yet)."
        },
    )
    masking: str = field(default="salient_span", metadata={"help": "salient_span / random_token / random_span."})
    masked_sentences: str | None = field(
        default=None,
        metadata={
            "help": "A directory of masked sentences written by `realm-hf mask` (same config): train on them instead "
            "of masking here (no spaCy needed). For `realm-hf mask`, where to write them."
        },
    )
    mask_source_blocks: int | None = field(
        default=None,
        metadata={
            "help": "Mask the sentences of a seeded sample of N blocks of Z (default: all blocks): X's sentences when "
            "X = Z; with another pre-training corpus, the sentences read at the reading steps."
        },
    )
    reading_sentences: str | None = field(
        default=None,
        metadata={
            "help": "With another pre-training corpus (X != Z) and reading steps: a directory written by `realm-hf "
            "mask` without a pre-training corpus (Z's own masked sentences, from the blocks of this run), read at the "
            "reading steps instead of masking Z's sentences when the run starts (no spaCy needed)."
        },
    )
    num_candidates: int = field(default=8, metadata={"help": "Documents per sentence, the null document included."})
    use_null_document: bool = field(default=True, metadata={"help": "Add the null document to every candidate set."})
    null_document_score: str | None = field(
        default=None,
        metadata={
            "help": "How the null document is scored: 'embedding' (the paper: the empty block embedded by the "
            "document tower, so p(∅|x) depends on the query) or 'learned' (a learned prior logit: p(∅|x) = "
            "e^b/(K-1+e^b), the same for every query). Default: the start's own (a new retriever: 'learned')."
        },
    )
    refresh_schedule: str = field(default="500", metadata={"help": "'500' or Atlas-style '0-1000:100,1000-:500'."})
    refresh_mode: str | None = field(
        default=None,
        metadata={
            "help": "Index builder: 'process' (a spawned process), 'thread', or 'paced' (runs on the trainer's thread "
            "only between steps, alone on the cores, for refresh_time_share of the trainer's time). Default: paced "
            "when the builder is on the CPU, process on a GPU."
        },
    )
    refresh_device: str | None = field(
        default=None,
        metadata={
            "help": "Device of the index builder: 'cpu', 'cuda', 'cuda:1' (default: the trainer's device when it is "
            "a GPU, else cpu)."
        },
    )
    refresh_time_share: float | None = field(
        default=None,
        metadata={
            "help": "The paced builder's share of the trainer's time (refresh_mode paced only; default 0.1): the trainer "
            "is that much slower while a build is in flight, and a build takes its CPU time / the share to arrive. "
            "The other builder resources are fixed per mode (docs/index.md)."
        },
    )
    refresh_max_staleness: int | None = field(
        default=None,
        metadata={
            "help": "Steps a refresh may take: the trainer waits for a build not swapped in this many steps after it "
            "was asked for (0: a blocking refresh, swapped in at the step that asks). Every swap then lands at the "
            "same step whatever the builder's speed, so a run and its resume repeat exactly. Default: never wait."
        },
    )
    eval_qa_file: str | None = field(default=None, metadata={"help": "QA JSONL for zero-shot Recall@5."})
    eval_max_questions: int = field(default=200, metadata={"help": "Questions used for Recall@5."})
    eval_answerable_only: bool = field(
        default=False,
        metadata={
            "help": "Recall@5 on the first eval_max_questions questions whose answer occurs somewhere in the "
            "knowledge corpus (on a corpus subset most questions have no answer in it, and only add noise)."
        },
    )
    eval_mlm_examples: int = field(default=64, metadata={"help": "Held-out masked sentences for MLM accuracy."})
    ict_warm_start: str | None = field(default=None, metadata={"help": "A retriever directory trained by ICT."})
    reading_warmup_steps: int = field(
        default=0,
        metadata={
            "help": "Retriever start (1, warm-up): the first N steps read each masked sentence with its own block "
            "(the one REALM excludes) as its only candidate, the retriever frozen: the encoder learns to read before "
            "the retriever learns from it. Use it with an encoder that cannot read yet (cold-start: 100); 0 for a "
            "masked LM such as BERT (paper). With X != Z these steps read sentences of Z."
        },
    )
    retriever_gate_utility: float | None = field(
        default=None,
        metadata={
            "help": "Retriever start (2, gate): after the warm-up, the retriever stays frozen until the encoder reads "
            "what it retrieves: until the top retrieved block's reading utility, log p(y|z,x) - log p(y|null,x), "
            "averages this many nats over retriever_gate_window steps; then it learns at every step. Use it with a "
            "start that cannot read yet (cold-start: 0.2); not with random tiny models, whose utility stays near 0. "
            "Needs the null document. Default: no gate."
        },
    )
    retriever_gate_window: int = field(
        default=20,
        metadata={"help": "Retriever start (gate): the steps whose reading utility retriever_gate_utility averages."},
    )
    retriever_learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "Peak learning rate of the retriever once it starts (default: learning_rate). 0: it never learns "
            "(a frozen-retriever control: no backward pass through it, no index refresh)."
        },
    )
    reading_loss_weight: float = field(
        default=0.0,
        metadata={
            "help": "After the reading warm-up, add this weight times a reading loss (Z's masked sentences, each with its "
            "own block alone) to every REALM step, the retriever learning throughout. Use it when the encoder "
            "forgets how to read while the retriever still finds little (the hard knowledge task: 30). 0: none."
        },
    )
    reading_loss_weight_final: float | None = field(
        default=None,
        metadata={
            "help": "Weight of the reading loss at the last step: it moves linearly from reading_loss_weight (the "
            "first step after the warm-up) to this one, e.g. more reading once the retriever has learned. Default: "
            "reading_loss_weight throughout. Needs reading_loss_weight."
        },
    )
    reading_loss_batch_size: int | None = field(
        default=None,
        metadata={
            "help": "Sentences each process reads for the reading loss at each step, each with its own block alone, "
            "drawn in a seeded order from the training sentences (Z's when X is another corpus): more reading per "
            "step than REALM's batch holds, with the same weight. Default: REALM's batch (its own sentences when X = "
            "Z). Needs reading_loss_weight."
        },
    )
    mlm_head_learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "Peak learning rate of the encoder's MLM head (default: learning_rate). A fresh head "
            "(all-MiniLM-L6-v2 has none) reads sooner at 10x the encoder's rate (cold-start)."
        },
    )
    shard_index: bool = field(
        default=False,
        metadata={
            "help": "On several processes: each rank embeds (at every refresh, on its own device) and holds only its "
            "1/N of the index, and every search merges the ranks' top-k (the same hits as one exact index). Without "
            "it every rank loads the whole index after each refresh, which rank 0 alone builds. On one process it "
            "has no effect (a warning says so)."
        },
    )
    rebuild_final_index: bool = field(
        default=True,
        metadata={
            "help": "Re-embed the corpus with the final document tower before saving final/index (otherwise the "
            "last refreshed index is saved: built by older weights, its fingerprint does not match the model)."
        },
    )

    def __post_init__(self) -> None:
        check_limits(self)
        for option, what in (("reading_loss_batch_size", "sizes"), ("reading_loss_weight_final", "ramps")):
            value = getattr(self, option)
            if value is not None and not self.reading_loss_weight > 0:
                raise ValueError(
                    f"--{option} {value:g} {what} the reading loss, but --reading_loss_weight is "
                    f"{self.reading_loss_weight:g}: set --reading_loss_weight (e.g. 30), or drop --{option}."
                )
        if self.null_document_score not in (None, "embedding", "learned"):
            raise ValueError(
                f"--null_document_score must be 'embedding' (the paper's) or 'learned', got {self.null_document_score!r}."
            )
        if self.retriever_gate_utility is not None and not self.use_null_document:
            raise ValueError(
                f"--retriever_gate_utility {self.retriever_gate_utility:g} measures reading against the null document, "
                "but --use_null_document is False: keep the null document, or drop the gate (--retriever_gate_utility "
                "null)."
            )
        if self.null_document_score is not None and not self.use_null_document:
            raise ValueError(
                f"--null_document_score {self.null_document_score} scores the null document, but --use_null_document "
                "is False: pass --null_document_score null (a recipe sets it) or leave --use_null_document at True."
            )
        if self.refresh_mode not in (None, "process", "thread", "paced"):
            raise ValueError(f"--refresh_mode must be 'process', 'thread' or 'paced', got {self.refresh_mode!r}.")
        if self.refresh_mode is not None:  # the default mode is resolved with the device (`refresh_resources`)
            refuse_ignored_refresh_settings(self.refresh_mode, self.refresh_time_share)


def refuse_ignored_refresh_settings(mode: str, time_share: float | None) -> None:
    r"""
    Refuse `refresh_time_share` where the builder's `mode` would ignore it: it paces a paced builder only.

    Raises:
        [`UsageError`]: naming the value, the mode and the fix.
    """
    if time_share is not None and mode != "paced":
        raise UsageError(
            f"--refresh_time_share {time_share:g} paces the builder: use --refresh_mode paced (got --refresh_mode "
            f"{mode}), or drop --refresh_time_share."
        )


@dataclass
class MlmArguments:
    """Masked-LM training of the encoder's start (`realm-hf mlm`)."""

    mlm_probability: float = field(default=0.15, metadata={"help": "Share of wordpieces (or words) masked (BERT: 0.15)."})
    whole_word_masking: bool = field(default=False, metadata={"help": "Mask whole words (all ## pieces together)."})
    mlm_max_length: int | None = field(
        default=None, metadata={"help": "Wordpieces per example, blocks cut to it (default: block_length)."}
    )
    mlm_head_learning_rate: float | None = field(
        default=None,
        metadata={"help": "Peak learning rate of the MLM head's transform (default: learning_rate); a head created "
                          "fresh (all-MiniLM-L6-v2 has none) learns faster at 10x the body's."},
    )
    from_scratch: bool = field(
        default=False, metadata={"help": "Train the --encoder's architecture from random weights instead of its own."}
    )
    eval_articles: int = field(
        default=100, metadata={"help": "Articles held out of training (a seeded sample); their blocks measure it."}
    )
    eval_max_blocks: int = field(default=512, metadata={"help": "Held-out blocks evaluated (masked once, seeded)."})

    def __post_init__(self) -> None:
        check_limits(self)


@dataclass
class IctArguments:
    """Inverse Cloze Task specifics."""

    remove_probability: float = field(default=0.9, metadata={"help": "Remove the query sentence from its block."})
    temperature: float = field(default=1.0, metadata={"help": "Scores are divided by this before the softmax."})

    def __post_init__(self) -> None:
        check_limits(self)


@dataclass
class OpenQaArguments:
    """Open-QA fine-tuning specifics (with `LoopArguments`, `ModelArguments` and `CorpusArguments`)."""

    train_file: str = field(metadata={"help": "QA JSONL file(s) to fine-tune on (comma-separated or a glob)."})
    eval_file: str | None = field(default=None, metadata={"help": "QA JSONL file(s) for exact match / Recall@k."})
    max_train_questions: int | None = field(default=None, metadata={"help": "Use only the first N training questions."})
    eval_skip_questions: int = field(
        default=0, metadata={"help": "Skip the first N questions of eval_file (e.g. those trained on)."}
    )
    max_eval_questions: int | None = field(default=500, metadata={"help": "Evaluate on at most N questions."})
    eval_batch_size: int = field(default=16, metadata={"help": "Questions per forward pass in evaluation."})
    top_k: int = field(default=5, metadata={"help": "Blocks retrieved and read per question."})
    model: str | None = field(
        default=None,
        metadata={
            "help": "A RealmForOpenQA dir, a pre-training output dir (retriever/ + encoder/), or a BERT / 'minilm' "
            "for both parts. Empty: the retriever from --retriever and the reader's BERT from --encoder."
        },
    )
    index_dir: str | None = field(
        default=None,
        metadata={"help": "An existing index built by the retriever's document tower. Empty: the model's own index "
                  "(a RealmForOpenQA dir), else one built over --corpus into <output_dir>/index."},
    )
    check_index_fingerprint: bool = field(
        default=True, metadata={"help": "Refuse an index built by other document-tower weights."}
    )
    untie_towers: bool = field(
        default=True,
        metadata={"help": "With shared towers, fine-tune a copy as the query tower and keep the original (the one "
                  "that built the index) as the frozen document tower, so the saved model matches its index."},
    )
    normalize_embeddings: bool = field(
        default=False,
        metadata={"help": "L2-normalize embeddings of a retriever built from a plain BERT (all-MiniLM's geometry: "
                  "with --pooling mean --projection_size 0)."},
    )
    similarity_scale: float = field(
        default=1.0,
        metadata={"help": "Relevance = this scale x inner product, for a retriever built from a plain BERT (20 for "
                  "all-MiniLM-L6-v2 with --normalize_embeddings: its training softmax; with 1 the cosines make "
                  "p(z|x) over the top-k nearly uniform). A saved REALM retriever keeps its own."},
    )
    truncate_questions: bool = field(
        default=False,
        metadata={"help": "Cut questions longer than query_max_length (one warning names them) instead of refusing "
                          "them before training starts."},
    )
    freeze_retriever: bool = field(
        default=False,
        metadata={"help": "Train the reader alone; the retriever stays as loaded. With few training questions the "
                  "fine-tuned query tower learns the answer type rather than the question (the demo's 'which river "
                  "flows through cairo' came to retrieve river articles, not Cairo's)."},
    )
    evidence_steps: int = field(
        default=0,
        metadata={"help": "First N steps read each question with its evidence block alone, the best-ranked of its "
                  "top evidence_search_depth blocks that holds an answer, instead of its top_k blocks: the reader "
                  "learns where answers are in a block that has one (about top_k times cheaper per step). 0: none."},
    )
    evidence_search_depth: int = field(
        default=20, metadata={"help": "Retrieved blocks searched for each question's evidence block."}
    )
    evidence_negatives: int = field(
        default=0,
        metadata={"help": "Hard negatives read beside each evidence block: the best-ranked of the top "
                  "evidence_search_depth blocks without an answer, weighted by p(z|x). With span_normalization "
                  "'global' the reader learns to say which block answers, not only where in a given block (each "
                  "costs one more read per question); with 'block' a negative adds no gradient. Unless the retriever is "
                  "frozen, the query tower then learns in the evidence steps too, from p(z|x) over these blocks."},
    )
    rehearsal_file: str | None = field(
        default=None,
        metadata={"help": "QA JSONL of reading questions (e.g. the demo's wh-cloze questions) mixed into the training "
                  "questions after the evidence steps: each is read as in them, with its evidence block and "
                  "evidence_negatives hard negatives, while the training questions are read with their top_k "
                  "retrieved blocks. Rehearsal keeps what a reading stage taught the reader (which block answers) "
                  "while it learns the real questions."},
    )
    max_rehearsal_questions: int | None = field(
        default=None, metadata={"help": "A seeded sample of N questions of rehearsal_file (default: all of them)."}
    )
    span_normalization: str = field(
        default="block",
        metadata={"help": "A new reader's span probabilities: 'block' (a softmax per block, weighted by the "
                  "retriever's p(z|x), the REALM paper) or 'global' (one softmax over all spans of all retrieved "
                  "blocks plus their retrieval scores, ORQA). A loaded RealmReader / RealmForOpenQA keeps its own."},
    )

    def __post_init__(self) -> None:
        check_limits(self)


T = TypeVar("T")


_RECALL_AT_HELP = (
    "Retrieval depths, e.g. 5,20,100: one more pass retrieves (without reading) the top max(k) blocks of each "
    "question for the retriever's retrieval_recall@k metrics, and each prediction gets retrieval_hits {'5': bool}."
)


@dataclass
class OpenQaEvaluationArguments:
    """Arguments of `realm-hf evaluate` and `examples/evaluate_openqa.py`."""

    model: str = field(metadata={"help": "A RealmForOpenQA directory (e.g. <finetune output>/final)."})
    qa_file: str = field(metadata={"help": "QA JSONL file(s) (comma-separated or a glob)."})
    index_dir: str | None = field(default=None, metadata={"help": "Index directory (default: the model's own)."})
    max_questions: int | None = field(default=None, metadata={"help": "Evaluate only the first N questions."})
    skip_questions: int = field(default=0, metadata={"help": "Skip the first N questions (e.g. those trained on)."})
    top_k: int | None = field(default=None, metadata={"help": "Blocks per question (default: config.top_k)."})
    batch_size: int = field(default=16, metadata={"help": "Questions per forward pass."})
    retrieval: str = field(default="dense", metadata={"help": "'dense' or 'bm25' (same reader)."})
    predictions_file: str | None = field(default=None, metadata={"help": "Write per-question predictions (JSONL)."})
    metrics_file: str | None = field(default=None, metadata={"help": "Write the metrics (JSON)."})
    truncate_questions: bool = field(
        default=True,
        metadata={"help": "Cut questions longer than the retriever's query_max_length (one warning names them; the "
                          "metrics count them as truncated_questions)."},
    )
    check_fingerprint: bool = field(default=True, metadata={"help": "Refuse an index built by other doc-tower weights."})
    trust_index_file: bool = field(
        default=False,
        metadata={
            "help": "Read the faiss file of an index this user's realm_hf did not write (from the Hub, a copied "
            "folder) instead of rebuilding it from its embeddings."
        },
    )
    device: str | None = field(default=None, metadata={"help": "Where the model runs (default: cuda when there is one)."})
    recall_at: str | None = field(default=None, metadata={"help": _RECALL_AT_HELP})

    def __post_init__(self) -> None:
        from ..evaluation.open_qa import parse_recall_at

        check_limits(self)

        parse_recall_at(self.recall_at)  # a bad value fails before the model loads
