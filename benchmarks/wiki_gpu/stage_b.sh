#!/usr/bin/env bash
# Call 2 on the lent GPU machine (see README.md): set up, start the chain in its own session, wait up to WAIT seconds.
WAIT=${WAIT:-540}
began=$SECONDS
source benchmarks/wiki_gpu/setup.sh || { echo "setup failed"; exit 1; }
setsid nohup bash benchmarks/wiki_gpu/job.sh > /root/wiki/job.log 2>&1 < /dev/null &
while (( SECONDS - began < WAIT )); do grep -q "JOB DONE" /root/wiki/job.log 2>/dev/null && break; sleep 5; done
source benchmarks/wiki_gpu/collect.sh
