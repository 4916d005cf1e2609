#!/usr/bin/env bash
# The chain on the lent GPU, in its own session (started by stage_b.sh): one run.sh call per stage (a failed stage
# does not stop the independent ones after it), the rows in the order of their value, the report rewritten after
# each row, the throughput benchmark once the four main rows are in.
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export OUT=/root/wiki EXTRA_ARGS="--max_articles 10479 --num_proc 16"
for stage in mask ict realm finetune-realm evaluate-realm report finetune-ict evaluate-ict report \
  finetune-minilm evaluate-minilm report evaluate-bm25 report bench finetune-realm-retriever \
  evaluate-realm-retriever report; do
  if [[ $stage == bench ]]; then
    python3 benchmarks/bench_gpu_step.py --batch_size 64 --output /root/wiki/throughput.json || echo "STAGE bench FAILED"
  else
    examples/wiki/run.sh "$stage" || echo "STAGE $stage FAILED"
  fi
done
echo "JOB DONE"
