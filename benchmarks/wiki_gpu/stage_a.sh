#!/usr/bin/env bash
# Call 1 on the lent GPU machine (see README.md): keep .lease/a (MiniLM weights, transformers wheel) for call 2.
set -u
mkdir -p /root/lease && cp -r .lease/a /root/lease/
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
for package in torch pyarrow tokenizers huggingface_hub accelerate numpy fsspec regex safetensors datasets; do
  python3 -c "import $package; print('$package', $package.__version__)" 2>&1 | tail -1
done
echo "cores $(nproc); $(df -h /root | tail -1); pwd $PWD; $(command -v accelerate)"
