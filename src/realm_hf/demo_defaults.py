"""Default sizes of `realm-hf demo`, shared by the argument parser (`cli.py`) and the demo itself (`commands.py`).

A module of constants with no imports, so that `realm-hf --help` stays light and `cli` -> `commands` is the only arrow
between the two.
"""

DEMO_INDEX_ARTICLES = 10_033
"""Articles of the demo's knowledge corpus (the Open-QA index), `--max-articles`: the whole embedded corpus (12,911
blocks; embedded in about a minute in bf16 on 2 cores). A smaller number takes BM25's best articles for the questions
and an even spread; 1,500 of them (the default until this was measured) left out the Nile article, and the demo
answered 2/4 and 16/20 against 3/4 and 16/20 with them all."""
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
DEMO_READING_STEPS = 1200
"""Reading steps between pre-training and fine-tuning (batch 4, wh-cloze questions made from the demo corpus, each read
once with its source block), `--reading-steps`: 4,800 questions from a seeded sample of the corpus's sentences. With
600 the demo answered "Jupiter" by a hair (0.24 against "Neptune" 0.21) and 16/20; with 1,200, 0.36 against 0.22 and
17/20, for 2.5 more minutes. On TriviaQA dev (never trained on) 600 steps had raised the questions answered, of the
263 whose answer the reader was given, from 37 to 49 (1,500 articles, seed 0)."""
