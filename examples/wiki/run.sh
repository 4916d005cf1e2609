#!/usr/bin/env bash
# REALM on Wikipedia: the paper's Table 1 comparison (MiniLM as it comes, ICT only, ICT -> REALM, BM25), one command
# per stage and `all` to chain them. Each stage skips itself when its output is complete and resumes a training job
# from its last checkpoint, so a stopped run goes on where it was.
#
#   examples/wiki/run.sh all                 # mask, ict, realm, finetune-*, evaluate-*, report
#   examples/wiki/run.sh realm               # one stage
#   ACCELERATE_CONFIG=examples/configs/accelerate-ddp.yaml examples/wiki/run.sh all      # N GPUs (or -zero2.yaml)
#
# Stages: mask (CPU: salient spans with spaCy, written once for the GPU stages), ict, realm, finetune-ROW and
# evaluate-ROW for ROW in minilm ict realm realm-retriever, evaluate-bm25 (BM25 + the minilm row's reader), report
# (OUT/wiki-gpu.json: every row's EM with a bootstrap 95% interval, Recall@5/20/100, the RU curve of pre-training).
# Environment: OUT (outputs/wiki), CONFIGS (examples/configs/wiki-gpu: -ict.yaml, -realm.yaml, -openqa.yaml),
# ACCELERATE_CONFIG (examples/configs/accelerate-1gpu.yaml), QA (../shared/data/qa), EXTRA_ARGS (added to every
# job that reads the corpus, e.g. "--max_articles 10479"), EVAL_QUESTIONS (1000).
set -euo pipefail

OUT=${OUT:-outputs/wiki}
CONFIGS=${CONFIGS:-examples/configs/wiki-gpu}
ACCELERATE_CONFIG=${ACCELERATE_CONFIG:-examples/configs/accelerate-1gpu.yaml}
QA=${QA:-../shared/data/qa}
EXTRA_ARGS=${EXTRA_ARGS:-}
EVAL_QUESTIONS=${EVAL_QUESTIONS:-1000}
ROWS="minilm ict realm realm-retriever"
read -r -a EXTRA <<< "$EXTRA_ARGS"

launch() {  # launch JOB ARGS...: a training job through accelerate (one process per GPU of ACCELERATE_CONFIG)
  accelerate launch --config_file "$ACCELERATE_CONFIG" -m realm_hf.cli "$@"
}

train() {  # train JOB CONFIG OUTPUT_DIR ARGS...: skipped when OUTPUT_DIR/final is complete, resumed when checkpointed
  local job=$1 config=$2 output=$3
  shift 3
  if [[ -f "$output/final/DONE" ]]; then echo "[$job] $output/final is complete: skipped"; return; fi
  local resume=()
  if compgen -G "$output/checkpoint-*" > /dev/null; then resume=(--resume_from_checkpoint latest); fi
  launch "$job" --config "$config" --output_dir "$output" "${EXTRA[@]}" "$@" "${resume[@]}"
  touch "$output/final/DONE"
}

starting_model() {  # the arguments that give fine-tuning ROW's starting retriever and reader
  case $1 in
    minilm) echo "--retriever minilm --encoder minilm --pooling mean --projection_size 0 --normalize_embeddings" ;;
    ict) echo "--retriever $OUT/ict/final --encoder minilm" ;;
    realm) echo "--model $OUT/realm/final" ;;  # the paper's: retriever and a reader from REALM's encoder
    realm-retriever) echo "--retriever $OUT/realm/final/retriever --encoder minilm" ;;  # the same reader as ict's
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
    --metrics_file "$OUT/eval/$name.json.partial" "$@" > /dev/null
  mv "$OUT/eval/$name.json.partial" "$OUT/eval/$name.json"
}

stage() {
  local name=$1
  echo "== $name ($(date -u +%H:%M:%S))"
  local began=$SECONDS
  case $name in
    mask)
      realm-hf mask --config "$CONFIGS-realm.yaml" --output_dir "$OUT/realm" --masked_sentences "$OUT/masked" \
        "${EXTRA[@]}" ;;
    ict) train ict "$CONFIGS-ict.yaml" "$OUT/ict" ;;
    realm)
      train pretrain "$CONFIGS-realm.yaml" "$OUT/realm" --ict_warm_start "$OUT/ict/final" \
        --masked_sentences "$OUT/masked" --eval_qa_file "$QA/nq-dev.jsonl[1000:1500]" ;;
    finetune-*)
      local row=${name#finetune-} model
      model=$(starting_model "$row")
      # shellcheck disable=SC2086  # the starting model's arguments are words
      train finetune "$CONFIGS-openqa.yaml" "$OUT/qa-$row" $model \
        --train_file "$QA/nq-dev.jsonl[1000:],$QA/webquestions-train.jsonl,$QA/curatedtrec-train.jsonl" ;;
    evaluate-bm25) evaluate bm25 "$OUT/qa-minilm/final" --retrieval bm25 ;;
    evaluate-*) evaluate "${name#evaluate-}" "$OUT/qa-${name#evaluate-}/final" ;;
    report) python examples/wiki/report.py "$OUT" ;;
    all)
      for next in mask ict realm; do stage "$next"; done
      for row in $ROWS; do stage "finetune-$row"; stage "evaluate-$row"; done
      stage evaluate-bm25
      stage report ;;
    *) echo "unknown stage '$name'; stages: mask ict realm finetune-ROW evaluate-ROW evaluate-bm25 report all" \
         "(ROW: $ROWS)" >&2; return 2 ;;
  esac
  echo "$name $((SECONDS - began))" >> "$OUT/stage_seconds.txt"
}

mkdir -p "$OUT"
if [[ ! -f "$OUT/machine.json" ]]; then  # what the stages run on, named next to their figures
  python -c "import json, platform, torch; print(json.dumps({'gpu': torch.cuda.get_device_name() if \
torch.cuda.is_available() else None, 'gpus': torch.cuda.device_count(), 'cpu': platform.processor() or \
platform.machine(), 'torch': torch.__version__}))" > "$OUT/machine.json"
fi
for name in "${@:-all}"; do stage "$name"; done
