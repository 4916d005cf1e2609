#!/usr/bin/env bash
# The X = Z and X != Z REALM rows of examples/wiki/run.sh side by side on a CPU, at a slice (issue 45): Z = the first
# WIKI_ARTICLES (30) articles of wiki-2015 in 64-wordpiece blocks, X = wiki-2015's own sentences (realm) or the first
# NEWS_ARTICLES (100) of news-bbc (realm-news), the tiny chain's configs (all-MiniLM-L6-v2, wiki-tiny-*.yaml) with STEPS
# (20) steps per training job, each row fine-tuned alike and evaluated on nq-dev[:EVAL_QUESTIONS] (100) with the
# answer-in-slice ceiling. Writes RESULT (benchmarks/results/x-not-z-wiki-cpu.json): the slice and run.sh's report.
#   benchmarks/wiki_x_not_z_cpu.sh       # CPU, tens of minutes on 2 busy cores; needs ../shared/data and spaCy
set -euo pipefail
SHARED=${SHARED:-../shared/data}
WIKI_ARTICLES=${WIKI_ARTICLES:-30}
STEPS=${STEPS:-20}
RESULT=${RESULT:-benchmarks/results/x-not-z-wiki-cpu.json}
export OUT=${OUT:-outputs/x-not-z-wiki-cpu} NEWS_ARTICLES=${NEWS_ARTICLES:-100} EVAL_QUESTIONS=${EVAL_QUESTIONS:-100}
export CONFIGS=examples/configs/wiki-tiny ACCELERATE_CONFIG=examples/configs/accelerate-cpu.yaml QA=$SHARED/qa
export NEWS=$SHARED/news-bbc/bbc-news.jsonl.gz
export EXTRA_ARGS="--corpus $SHARED/wiki-2015 --max_articles $WIKI_ARTICLES --max_steps $STEPS"
began=$SECONDS
examples/wiki/run.sh mask mask-news mlm ict realm realm-news
# the recipe stops fine-tuning on the watch slice's answerable_loss, which needs a watch question whose answer is in
# the blocks read: on a slice this small none is, and `realm-hf finetune` stops in one line; both rows stop on EM
EXTRA_ARGS="$EXTRA_ARGS --early_stopping_metric exact_match" examples/wiki/run.sh finetune-realm evaluate-realm \
  finetune-realm-news evaluate-realm-news
python examples/wiki/report.py "$OUT" --ceiling --qa_file "$QA/nq-dev.jsonl[:$EVAL_QUESTIONS]" > /dev/null
examples/wiki/run.sh report
python - "$OUT/wiki-gpu.json" "$RESULT" $((SECONDS - began)) <<'PY'
import json, os, sys
with open(sys.argv[1], encoding="utf-8") as f:
    report = json.load(f)
with open(os.path.join(os.path.dirname(sys.argv[1]), "masked-news", "masked_sentences.json"), encoding="utf-8") as f:
    news_settings = json.load(f)["settings"]
masked = report["pretraining_news"]["data"]
result = {
    "slice": {"z": report["corpus"], "z_blocks": report["corpus"]["blocks"], "x_news": masked["pretraining_corpus"],
              "x_news_articles": news_settings["max_pretraining_articles"],
              "x_news_sentences": masked["masked_sentences"], "x_equals_z_sentences": report["pretraining_sentences"]},
    "wall_seconds": int(sys.argv[3]),
    **report,
}
with open(sys.argv[2], "w", encoding="utf-8") as f:
    json.dump(result, f, indent=2)
PY
echo "wrote $RESULT"
