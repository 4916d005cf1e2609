#!/usr/bin/env bash
# The chain on the lent GPU, in its own session (started by stage_b.sh): the throughput benchmark first, alone on the
# GPU (its figures must not share it), then `run.sh all` with PARALLEL=1 (the rows' fine-tuning beside ICT's and
# REALM's stages), the report rewritten at the end, and whatever stage failed named in the log.
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export OUT=/root/wiki EXTRA_ARGS="--max_articles 10479 --num_proc 16" PARALLEL=1
python3 -X importtime -c "import realm_hf.training.entry_points, realm_hf.training.pretrain" 2> /root/wiki/importtime.txt
python3 benchmarks/bench_gpu_step.py --batch_size 64 --steps 8 --warmup 2 --index_batch_size 512 --length_buckets 2 \
  --output /root/wiki/throughput.json \
  || echo "STAGE bench FAILED"
examples/wiki/run.sh all || echo "STAGE all FAILED"
examples/wiki/run.sh report
echo "JOB DONE"
