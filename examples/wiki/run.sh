#!/usr/bin/env bash
# REALM on Wikipedia: the paper's Table 1 comparison (MiniLM as it comes, ICT only, ICT -> REALM, BM25), and REALM
# pre-trained on news against the same Wikipedia blocks (X != Z, the paper's CC-News row), one command per stage and
# `all` to chain them. The knowledge-augmented encoder and the readers start from a masked LM trained
# by the `mlm` stage (all-MiniLM-L6-v2 is a sentence embedder, not a masked LM; the paper starts from BERT). Each stage skips itself when its output is complete and resumes a training job
# from its last checkpoint, so a stopped run goes on where it was.
#
#   examples/wiki/run.sh all                 # mask, mask-news, mlm, ict, realm, realm-news, finetune-*, evaluate-*, report
#   examples/wiki/run.sh realm               # one stage
#   ACCELERATE_CONFIG=examples/configs/accelerate-ddp.yaml examples/wiki/run.sh all      # N GPUs (or -zero2.yaml)
#
# Stages: mask (CPU: salient spans with spaCy, written once for the GPU stages), mask-news (the same for the news
# sentences X of realm-news), mlm (masked-LM training of MiniLM on the corpus: the encoder's and readers' start), ict,
# realm, realm-news (realm's config, start and steps with X = NEWS: its reading steps read the sentences of `mask`),
# finetune-ROW and evaluate-ROW for ROW in minilm (as it comes, untouched), mlm (MiniLM retriever + the mlm reader),
# ict, realm, realm-news, realm-retriever, evaluate-bm25 (BM25 + the mlm row's reader), report
# (OUT/wiki-gpu.json: every row's EM with a bootstrap 95% interval, Recall@5/20/100, the RU curve of pre-training).
# Environment: OUT (outputs/wiki), CONFIGS (examples/configs/wiki-gpu: -mlm, -ict, -realm, -openqa .yaml),
# ACCELERATE_CONFIG (examples/configs/accelerate-1gpu.yaml), QA (../shared/data/qa: the folder of nq-dev.jsonl,
# webquestions-train.jsonl, curatedtrec-train.jsonl and triviaqa-dev.jsonl; docs/data.md says where they and the
# corpus of the configs come from; EXTRA_ARGS="--corpus DIR" points at another copy of wiki-2015), EXTRA_ARGS (added to every
# job that reads the corpus, e.g. "--max_articles 10479"), EVAL_QUESTIONS (1000), PARALLEL (0; 1: `all` runs the
# rows' fine-tuning beside ICT's and REALM's stages, and realm-news beside realm, on the same GPU, which a host-bound
# step leaves mostly idle), NEWS (../shared/data/news-bbc/bbc-news.jsonl.gz: realm-news's pre-training corpus X, any
# article file or folder), NEWS_ARTICLES (all: the first N articles of NEWS).
set -euo pipefail

OUT=${OUT:-outputs/wiki}
CONFIGS=${CONFIGS:-examples/configs/wiki-gpu}
ACCELERATE_CONFIG=${ACCELERATE_CONFIG:-examples/configs/accelerate-1gpu.yaml}
QA=${QA:-../shared/data/qa}
EXTRA_ARGS=${EXTRA_ARGS:-}
EVAL_QUESTIONS=${EVAL_QUESTIONS:-1000}
PARALLEL=${PARALLEL:-0}
NEWS=${NEWS:-../shared/data/news-bbc/bbc-news.jsonl.gz}
NEWS_ARTICLES=${NEWS_ARTICLES:-}
ROWS="minilm mlm ict realm realm-news realm-retriever"
read -r -a EXTRA <<< "$EXTRA_ARGS"
X_NEWS=(--pretraining_corpus "$NEWS" ${NEWS_ARTICLES:+--max_pretraining_articles "$NEWS_ARTICLES"})  # realm-news's X
PRETRAINING_QA=(--eval_qa_file "$QA/nq-dev.jsonl[1000:1500]")  # zero-shot Recall@5 during pre-training

launch() {  # launch JOB ARGS...: a training job through accelerate (one process per GPU of ACCELERATE_CONFIG)
  accelerate launch --config_file "$ACCELERATE_CONFIG" -m realm_hf.cli "$@"
}

train() {  # train JOB CONFIG OUTPUT_DIR ARGS...: skipped when OUTPUT_DIR/final is complete, resumed when checkpointed
  local job=$1 config=$2 output=$3
  shift 3
  if [[ -f "$output/final/DONE" ]]; then echo "[$job] $output/final is complete: skipped"; return; fi
  local resume=()
  if compgen -G "$output/checkpoint-*" > /dev/null; then resume=(--resume_from_checkpoint latest); fi
  launch "$job" --config "$config" --output_dir "$output" "${EXTRA[@]}" "$@" "${resume[@]}" || return 1
  touch "$output/final/DONE"
}

starting_model() {  # the arguments that give fine-tuning ROW's starting retriever and reader
  case $1 in
    minilm) echo "--retriever minilm --encoder minilm --pooling mean --projection_size 0 --normalize_embeddings" ;;
    mlm) echo "--retriever minilm --encoder $OUT/mlm/final --pooling mean --projection_size 0 --normalize_embeddings" ;;
    ict) echo "--retriever $OUT/ict/final --encoder $OUT/mlm/final" ;;
    realm) echo "--model $OUT/realm/final" ;;  # the paper's: retriever and a reader from REALM's encoder
    realm-news) echo "--model $OUT/realm-news/final" ;;  # the same, pre-trained on news (X != Z)
    realm-retriever) echo "--retriever $OUT/realm/final/retriever --encoder $OUT/mlm/final" ;;  # ict's reader start
    *) echo "unknown row '$1'; rows: $ROWS" >&2; return 2 ;;
  esac
}

evaluate() {  # evaluate NAME MODEL_DIR ARGS...: nq-dev[:EVAL_QUESTIONS], never used for a choice
  local name=$1 model=$2
  shift 2
  if [[ -f "$OUT/eval/$name.json" ]]; then echo "[evaluate-$name] $OUT/eval/$name.json exists: skipped"; return; fi
  mkdir -p "$OUT/eval"
  realm-hf evaluate --model "$model" --qa_file "$QA/nq-dev.jsonl[:$EVAL_QUESTIONS]" --recall_at 5,20,100 \
    --truncate_questions --batch_size 64 --predictions_file "$OUT/eval/$name.jsonl" \
    --metrics_file "$OUT/eval/$name.json.partial" "$@" > /dev/null || return 1
  mv "$OUT/eval/$name.json.partial" "$OUT/eval/$name.json"
}

branch() {  # branch STAGE...: the stages in order, in the background; the first failure stops the branch
  ( for next in "$@"; do stage "$next" || exit 1; done ) &
  branches+=($!)
}

all_in_parallel() {  # PARALLEL=1: the stages that do not depend on each other run at the same time (one GPU shared)
  stage mask || return 1
  branches=()
  branch mlm  # beside ICT: both cut the corpus into the same cached blocks (identical files, renamed into place)
  local mlm_branch=${branches[0]} failed=0
  branches=()
  stage ict || return 1
  branch finetune-minilm evaluate-minilm
  wait "$mlm_branch" || return 1
  branch finetune-mlm evaluate-mlm evaluate-bm25
  branch finetune-ict evaluate-ict
  branch mask-news realm-news finetune-realm-news evaluate-realm-news  # beside realm: the same start, another X
  if stage realm; then
    branch finetune-realm evaluate-realm
    branch finetune-realm-retriever evaluate-realm-retriever
  else
    failed=1
  fi
  for pid in "${branches[@]}"; do wait "$pid" || failed=1; done
  return $failed
}

run_stage() {  # the work of one stage; returns non-zero on failure (every step checks: it may run with errexit off)
  local name=$1
  case $name in
    mask)  # the config of the realm stage, with its arguments (every given path is checked)
      realm-hf mask --config "$CONFIGS-realm.yaml" --output_dir "$OUT/realm" --masked_sentences "$OUT/masked" \
        "${EXTRA[@]}" "${PRETRAINING_QA[@]}" ;;
    mask-news)  # X = NEWS: its sentences only (realm-news reads Z's own, for its reading steps, from mask's)
      realm-hf mask --config "$CONFIGS-realm.yaml" --output_dir "$OUT/realm-news" --masked_sentences \
        "$OUT/masked-news" "${X_NEWS[@]}" "${EXTRA[@]}" "${PRETRAINING_QA[@]}" ;;
    mlm) train mlm "$CONFIGS-mlm.yaml" "$OUT/mlm" ;;
    ict) train ict "$CONFIGS-ict.yaml" "$OUT/ict" ;;
    realm)
      train pretrain "$CONFIGS-realm.yaml" "$OUT/realm" --ict_warm_start "$OUT/ict/final" --encoder "$OUT/mlm/final" \
        --masked_sentences "$OUT/masked" "${PRETRAINING_QA[@]}" ;;
    realm-news)  # realm's config, start and steps; X = NEWS, Z = the corpus
      train pretrain "$CONFIGS-realm.yaml" "$OUT/realm-news" --ict_warm_start "$OUT/ict/final" \
        --encoder "$OUT/mlm/final" --masked_sentences "$OUT/masked-news" --reading_sentences "$OUT/masked" \
        "${X_NEWS[@]}" "${PRETRAINING_QA[@]}" ;;
    finetune-*)
      local row=${name#finetune-} model
      model=$(starting_model "$row") || return 2
      # shellcheck disable=SC2086  # the starting model's arguments are words
      train finetune "$CONFIGS-openqa.yaml" "$OUT/qa-$row" $model \
        --train_file "$QA/nq-dev.jsonl[1200:],$QA/webquestions-train.jsonl,$QA/curatedtrec-train.jsonl,$QA/triviaqa-dev.jsonl" \
        --eval_file "$QA/nq-dev.jsonl[1000:1200]" ;;  # the watch slice of early stopping
    evaluate-bm25) evaluate bm25 "$OUT/qa-mlm/final" --retrieval bm25 ;;
    evaluate-*) evaluate "${name#evaluate-}" "$OUT/qa-${name#evaluate-}/final" ;;
    report) python examples/wiki/report.py "$OUT" ;;
    all)
      if [[ $PARALLEL == 1 ]]; then
        all_in_parallel || return 1
      else
        for next in mask mask-news mlm ict realm realm-news; do stage "$next" || return 1; done
        for row in $ROWS; do stage "finetune-$row" || return 1; stage "evaluate-$row" || return 1; done
        stage evaluate-bm25 || return 1
      fi
      stage report ;;
    *) echo "unknown stage '$name'; stages: mask mask-news mlm ict realm realm-news finetune-ROW evaluate-ROW" \
         "evaluate-bm25 report all" \
         "(ROW: $ROWS)" >&2; return 2 ;;
  esac
}

stage() {  # stage NAME: run it and record its wall-clock seconds in OUT/stage_seconds.txt (when it succeeded)
  local name=$1 began=$SECONDS status=0
  echo "== $name ($(date -u +%H:%M:%S))"
  run_stage "$name" || status=$?
  if (( status == 0 )); then echo "$name $((SECONDS - began))" >> "$OUT/stage_seconds.txt"; fi
  return $status
}

missing_data() {  # missing_data STAGE...: one line naming what is missing, where it comes from, which variable points at it
  local corpus
  corpus=$(sed -n 's/^corpus: *//p' "$CONFIGS-ict.yaml")
  if [[ ! -d "$QA" ]]; then
    echo "run.sh: no QA sets at QA=$QA (nq-dev.jsonl, webquestions-train.jsonl, curatedtrec-train.jsonl," \
      "triviaqa-dev.jsonl): docs/data.md says where they come from; set QA=<their folder>." >&2
    return 0
  fi
  if [[ "$EXTRA_ARGS" != *--corpus* && "$corpus" != embedded && ! -e "$corpus" ]]; then
    echo "run.sh: no corpus at $corpus (the corpus of $CONFIGS-ict.yaml): docs/data.md says where wiki-2015 comes" \
      "from; point at your copy with EXTRA_ARGS=\"--corpus DIR\"." >&2
    return 0
  fi
  local wanted=" ${*:-all} " needs_news=0 name
  for name in all mask-news realm-news finetune-realm-news evaluate-realm-news; do
    [[ "$wanted" == *" $name "* ]] && needs_news=1
  done
  if (( needs_news )) && [[ ! -e "$NEWS" ]]; then  # only the stages that read X = NEWS need it
    echo "run.sh: no news corpus at NEWS=$NEWS (news-bbc, the pre-training corpus X of the realm-news stage):" \
      "docs/data.md says where it comes from; set NEWS=<its JSONL.gz, or any article file or folder>." >&2
    return 0
  fi
  return 1
}

if missing_data "$@"; then exit 2; fi
mkdir -p "$OUT"
if [[ ! -f "$OUT/machine.json" ]]; then  # what the stages run on, named next to their figures
  python -c "import json, platform, torch; print(json.dumps({'gpu': torch.cuda.get_device_name() if \
torch.cuda.is_available() else None, 'gpus': torch.cuda.device_count(), 'cpu': platform.processor() or \
platform.machine(), 'torch': torch.__version__}))" > "$OUT/machine.json"
fi
for name in "${@:-all}"; do stage "$name"; done
