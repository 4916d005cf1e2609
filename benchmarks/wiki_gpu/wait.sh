#!/usr/bin/env bash
# Call 3 (see README.md): wait for the chain started by stage_b.sh, up to WAIT seconds, then collect.
WAIT=${WAIT:-120}
for ((i = 0; i < WAIT; i += 5)); do grep -q "JOB DONE" /root/wiki/job.log 2>/dev/null && break; sleep 5; done
source benchmarks/wiki_gpu/collect.sh
