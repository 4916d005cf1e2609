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
DEMO_FINETUNE_STEPS = 345
"""Open-QA fine-tuning steps after the reader warm-up (batch 4, top-5 blocks: about one pass over the ~1,380 training
questions), `--finetune-steps`. On an H200 (the demo's model read 500 TriviaQA dev questions it never trained on,
answer in the corpus), 690 steps answered 155 of them against 163 for 345. With the query tower trained too, 400
answered no more (2/4, 9/20 against 2/4, 11/20 on the ~1,000 questions of then), for 2.5 more minutes. With
`--rehearsal-questions`, give it room: 690 steps for 1,380 rehearsed questions is one pass over both."""
DEMO_REHEARSAL_QUESTIONS = 0
"""Reading questions rehearsed during fine-tuning, `--rehearsal-questions` (a seeded sample of the reading stage's,
`OpenQaArguments.max_rehearsal_questions`; 0: none): mixed into the batches of real questions and read as in the
reading stage (source block and hard negatives), so that fine-tuning keeps which block the reading stage taught the
reader to choose. Off: 1,380 of them (690 steps) moved "what is the largest planet in the solar system" to "Jupiter"
in most runs, but cost 10-25 of 500 TriviaQA dev questions, and the soup of two such runs in the demo's own clean
clone answered "Isaac Newton" to the relativity question instead (3/4, 16/20, 170 against 3/4, 16/20, 192; README)."""
DEMO_FINETUNE_RUNS = 1
"""Fine-tunings of the reading stage's model, `--finetune-runs`: with more than one, each reads the questions in
another order (loop seeds 0, 1, ...) and the demo answers with their uniform weight average, a model soup
([`average_open_qa_models`]). One by default: the soup of two default fine-tunings answered 195 of 500 TriviaQA dev
questions against 180-192 for its runs, and the same default questions, for 7 more minutes."""
DEMO_READING_WEIGHT = 0.5
"""Weight of the reading stage's model in the model the demo answers with, `--reading-weight`: the weight average of
it (0.5) and the fine-tuned model(s) (the rest), WiSE-FT (Wortsman et al. 2022; 0.5 is the paper's usual mix).
Fine-tuning on ~1,400 real questions overwrites part of what the reading stage taught (which of the Neptune and
Jupiter blocks answers "the largest planet"); the average keeps it: 4/4 on every two-pass model measured on 2 CPU
cores (two data seeds, three fine-tuning orders or soups), against 3/4 for each fine-tuned model alone, for about 17
fewer of 500 TriviaQA dev questions (159-173 against 174-189). See the README for the runs."""
DEMO_FOCUS_ARTICLES = 50
"""Articles per question that BM25 adds to the demo corpus (the rest is spread over the whole embedded corpus)."""
DEMO_TRAIN_QUESTIONS = 2000
"""Open-QA training questions taken from the shared QA sets at most, `--train-questions` (1,380 are answerable from
the embedded corpus: 531 of WebQuestions train, 478 of NQ-open dev, 371 of CuratedTrec train; all of them)."""
DEMO_SPAN_NORMALIZATION = "global"
"""How the demo's reader turns span scores into probabilities (`RealmReaderConfig.span_normalization`),
`--span-normalization`: ORQA's one softmax over all spans of the retrieved blocks; see the README for the runs."""
DEMO_READING_STEPS = 2400
"""Reading steps between pre-training and fine-tuning (batch 4, wh-cloze questions made from the demo corpus, each
read [`DEMO_READING_PASSES`] times with its source block and [`DEMO_READING_NEGATIVES`] blocks without its answer),
`--reading-steps`: 4,800 questions from a seeded sample of the corpus's sentences, read twice. 1,200 steps read once
(the default until the reading weight was measured) answered 167-195 of 500 TriviaQA dev questions the demo never
trains on (answer in the corpus) and "Neptune" to "what is the largest planet in the solar system" on every sample
tried. See the README for the runs."""
DEMO_READING_PASSES = 2
"""Passes over the reading questions, `--reading-passes`: the stage makes `reading_steps x 4 / passes` questions and
reads each that many times. Two (the same 4,800 questions read twice) taught the reader "Jupiter" for the planet
question on 4 of 5 data seeds on an H200 and on both tried on 2 CPU cores, where one pass did not; fine-tuning then
takes it back unless [`DEMO_READING_WEIGHT`] keeps part of the reading model. Twice the stage's time (about 30 min on
2 cores)."""
DEMO_READING_NEGATIVES = 1
"""Hard negatives read beside each reading question's source block, `--reading-negatives`: the best-ranked blocks
without its answer among its top 20 (`OpenQaArguments.reader_warmup_negatives`); each costs one more read per
question. With the source block alone the reader learns where in a block the answer is, never which block holds it:
it answered "which river flows through cairo" from the Cairo block ("Egypt"); with one negative, from the Nile
block."""
DEMO_SEED = 0
"""Seed of the demo's data sample, `--seed`: the corpus order (so the pre-training articles, a prefix of it) and the
sentences the reading questions are made from. Which default questions come out right changes with it."""
