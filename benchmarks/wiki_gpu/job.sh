#!/usr/bin/env bash
# The chain on the lent GPU, in its own session (started by stage_b.sh): `run.sh all` with PARALLEL=1 (mlm beside
# ICT, the rows' fine-tuning and realm-news, X = news-bbc, beside REALM's stage), the report, then the throughput benchmark alone on the GPU (its
# figures must not share it) at MiniLM's and BERT-base's sizes, each stage's failure named in the log.
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export OUT=/root/wiki EXTRA_ARGS="--max_articles 10479 --num_proc 16" PARALLEL=1
python3 -X importtime -c "import realm_hf.training.entry_points, realm_hf.training.pretrain" 2> /root/wiki/importtime.txt
examples/wiki/run.sh all || echo "STAGE all FAILED"
examples/wiki/run.sh report
echo "CHAIN DONE"
for size in minilm bert-base; do
  python3 benchmarks/bench_gpu_step.py --size $size --batch_size 64 --steps 8 --warmup 2 --index_batch_size 512 \
    --index_blocks 8192 --length_buckets 2 --output /root/wiki/throughput-$size.json || echo "STAGE bench-$size FAILED"
done
cp /root/wiki/throughput-minilm.json /root/wiki/throughput.json 2>/dev/null
examples/wiki/run.sh report > /dev/null
echo "JOB DONE"
