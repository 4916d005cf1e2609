"""Default sizes of `realm-hf demo`, shared by the argument parser (`cli.py`) and the demo itself (`commands.py`).

A module of constants with no imports, so that `realm-hf --help` stays light and `cli` -> `commands` is the only arrow
between the two.
"""

DEMO_INDEX_ARTICLES = 1500
"""Articles of the demo's knowledge corpus (the Open-QA index, ~1,900 blocks), `--max-articles`."""
DEMO_BLOCK_LENGTH = 128
"""Wordpieces per block of the demo corpus, in the full demo and `--retrieval-only` alike (most embedded lead sections
are one block). 48 put the evidence sentence of "which river flows through cairo" (Giza's) second instead of 15th
with MiniLM, but the demo answered worse: 1/4 and 11-12/20 with 240 or 480 fine-tuning steps."""
DEMO_PRETRAIN_ARTICLES = 200
"""Articles pre-trained on (X = Z, a sample of the demo corpus), `--pretrain-articles`."""
DEMO_PRETRAIN_STEPS = 10
"""REALM pre-training steps (batch 2, 4 candidates with the null document; no index refresh, so runs repeat)."""
DEMO_READER_WARMUP_STEPS = 0
"""Open-QA reader warm-up steps before fine-tuning (batch 4, each question read with its evidence block only),
`--reader-warmup-steps`. Off: 150 of them answered 2/4 and 7/20 (without: 2/4, 8/20), for 50 % more fine-tuning time."""
DEMO_FINETUNE_STEPS = 240
"""Open-QA fine-tuning steps after the reader warm-up (batch 4, top-5 blocks: about one pass over the ~1,000 training
questions), `--finetune-steps`. With the query tower trained too, 400 answered no more (2/4, 9/20 against 2/4,
11/20), for 2.5 more minutes."""
DEMO_FOCUS_ARTICLES = 50
"""Articles per question that BM25 adds to the demo corpus (the rest is spread over the whole embedded corpus)."""
DEMO_TRAIN_QUESTIONS = 2000
"""Open-QA training questions taken from the shared QA sets at most, `--train-questions` (1,009 are answerable from
the embedded corpus: all of them; 600 with 120 steps answered 2/4, 8/20)."""
DEMO_SPAN_NORMALIZATION = "global"
"""How the demo's reader turns span scores into probabilities (`RealmReaderConfig.span_normalization`),
`--span-normalization`: ORQA's one softmax over all spans of the retrieved blocks; see the README for the runs."""
DEMO_READING_STEPS = 600
"""Reading steps between pre-training and fine-tuning (batch 4, wh-cloze questions made from the demo corpus, each read
with its source block), `--reading-steps`: about half of the ~4,300 questions once. On TriviaQA dev (never trained on)
the fine-tuned reader then answered 49 instead of 37 of the 263 questions whose answer it was given (seed 0)."""
