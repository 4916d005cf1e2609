"""Defaults of `realm-hf demo`, shared by its argument parser (`realm_hf.cli.demo`) and the demo itself.

A module of constants that imports nothing heavy, so that `realm-hf --help` stays light.
"""

from pathlib import Path

# ------------------------------------------------------------------------------ --recipe knowledge (the default)

KNOWLEDGE_INITS = ("minilm-cls", "minilm", "tiny")
"""The initializations of the knowledge demo; each has its recipe in `knowledge_runs.KNOWLEDGE_RECIPES`."""
DEMO_INIT = "minilm-cls"
"""all-MiniLM-L6-v2 with REALM's own pooling ([CLS] and a fresh 128-d projection)."""
DEMO_ENTITIES = 100
"""Fictional people, hence documents; two held-out sentences each."""
DEMO_STEPS = 45
"""REALM pre-training steps of each run (the recipe's 60 do not fit five minutes on 2 cores)."""
DEMO_EVAL_EVERY = 15
"""Held-out evaluation every this many REALM steps (and before the first): the points of the curves in
`retrieval.png` (each evaluation costs about as much as ten steps)."""
DEMO_SHOWN_ANSWERS = 4
"""Held-out sentences answered in full, with the document read and the evidence."""


# ------------------------------------------------------------------------------------- --recipe wikipedia-qa
DEMO_INDEX_ARTICLES = 10_033
"""Articles of the demo's knowledge corpus (the Open-QA index), `--max-articles`: the whole embedded corpus (12,911
blocks). A smaller number takes BM25's best articles for the questions and an even spread, which can leave out the
evidence of a question; the whole corpus answered more (benchmarks/results/demo-history.md)."""
DEMO_BLOCK_LENGTH = 128
"""Wordpieces per block of the demo corpus, in the full demo and `--retrieval-only` alike (most embedded lead sections
are one block). Shorter blocks let the retriever find single evidence sentences but cut evidence off from its
subject, and the demo answered worse with them (docs/experiments.md)."""
DEMO_PRETRAIN_ARTICLES = 200
"""Articles pre-trained on (X = Z, a sample of the demo corpus), `--pretrain-articles`."""
DEMO_PRETRAIN_STEPS = 10
"""REALM pre-training steps (batch 2, 4 candidates with the null document; no index refresh, so runs repeat)."""
DEMO_EVIDENCE_STEPS = 0
"""Open-QA evidence steps at the start of fine-tuning (batch 4, each question read with its evidence block only),
`--evidence-steps`. Off: it gained nothing for its time (docs/experiments.md)."""
DEMO_FINETUNE_STEPS = 345
"""Open-QA fine-tuning steps after the reader warm-up (batch 4, top-5 blocks: about one pass over the ~1,380 training
questions), `--finetune-steps`; a second pass answered fewer questions the demo never trains on
(benchmarks/results/demo-history.md). With `--rehearsal-questions`, give it room: 690 steps for 1,380 rehearsed
questions is one pass over both."""
DEMO_REHEARSAL_QUESTIONS = 0
"""Reading questions rehearsed during fine-tuning, `--rehearsal-questions` (a seeded sample of the reading stage's,
`OpenQaArguments.max_rehearsal_questions`; 0: none): mixed into the batches of real questions and read as in the
reading stage (source block and hard negatives), so that fine-tuning keeps which block the reading stage taught the
reader to choose. Off: it cost questions the demo never trains on and did not keep the default questions right
(benchmarks/results/demo-history.md)."""
DEMO_FINETUNE_RUNS = 1
"""Fine-tunings of the reading stage's model, `--finetune-runs`: with more than one, each reads the questions in
another order (loop seeds 0, 1, ...) and the demo answers with their uniform weight average, a model soup
([`average_open_qa_models`]). One by default: a soup costs a fine-tuning per run and answered the same default
questions (benchmarks/results/demo-history.md)."""
DEMO_READING_WEIGHT = 0.5
"""Weight of the reading stage's model in the model the demo answers with, `--reading-weight`: the weight average of
it (0.5) and the fine-tuned model(s) (the rest), WiSE-FT (Wortsman et al. 2022; 0.5 is the paper's usual mix).
Fine-tuning on the real questions overwrites part of what the reading stage taught (such as which block answers
"the largest planet"); the average keeps part of it, at some cost in questions the demo never trains on
(docs/experiments.md)."""
DEMO_FOCUS_ARTICLES = 50
"""Articles per question that BM25 adds to the demo corpus (the rest is spread over the whole embedded corpus)."""
DEMO_TRAIN_QUESTIONS = 2000
"""Open-QA training questions taken from the QA sets of `--train-qa` at most, `--train-questions` (1,380 are answerable from
the embedded corpus: 531 of WebQuestions train, 478 of NQ-open dev, 371 of CuratedTrec train; all of them)."""
DEMO_SPAN_NORMALIZATION = "global"
"""How the demo's reader turns span scores into probabilities (`RealmReaderConfig.span_normalization`),
`--span-normalization`: ORQA's one softmax over all spans of the retrieved blocks (docs/experiments.md)."""
DEMO_READING_STEPS = 2400
"""Reading steps between pre-training and fine-tuning (batch 4, wh-cloze questions made from the demo corpus, each
read [`DEMO_READING_PASSES`] times with its source block and [`DEMO_READING_NEGATIVES`] blocks without its answer),
`--reading-steps`: 4,800 questions from a seeded sample of the corpus's sentences, read twice (docs/experiments.md)."""
DEMO_READING_PASSES = 2
"""Passes over the reading questions, `--reading-passes`: the stage makes `reading_steps x 4 / passes` questions and
reads each that many times. Two, so that the reader learns the reading questions better (docs/experiments.md), for
twice the stage's time; fine-tuning takes part of that back unless [`DEMO_READING_WEIGHT`] keeps part of the reading
model."""
DEMO_READING_NEGATIVES = 1
"""Hard negatives read beside each reading question's source block, `--reading-negatives`: the best-ranked blocks
without its answer among its top 20 (`OpenQaArguments.evidence_negatives`); each costs one more read per
question. With the source block alone the reader learns where in a block the answer is, never which block holds it
(benchmarks/results/demo-history.md)."""
DEMO_SEED = 0
"""Seed of the demo's data sample, `--seed`: the corpus order (so the pre-training articles, a prefix of it) and the
sentences the reading questions are made from. Which default questions come out right changes with it."""
DEMO_QUESTIONS_FILE = Path(__file__).resolve().parents[3] / "examples" / "demo_questions.jsonl"
"""The demo's evaluation questions in a source checkout (`pip install -e`); `--questions-file` names another."""
