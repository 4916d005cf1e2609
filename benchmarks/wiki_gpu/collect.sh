#!/usr/bin/env bash
# Sourced at the end of stage_b.sh / wait.sh: the figures into $OUT (what comes back), the progress on stdout.
cd /root/wiki 2>/dev/null || exit 0
cp wiki-gpu.json "$OUT/" 2>/dev/null
tail -c 200000 job.log > "$OUT/job.log" 2>/dev/null
tar -czf "$OUT/wiki-results.tgz" --ignore-failed-read *.json *.txt eval realm/history.json realm/trainer_state.json \
  realm-news/history.json realm-news/trainer_state.json ict/history.json mlm/history.json mlm/trainer_state.json qa-*/history.json 2>/dev/null
cd - > /dev/null
cat /root/wiki/stage_seconds.txt 2>/dev/null
grep -E "FAILED|Error|Traceback|error:" /root/wiki/job.log | tail -8
