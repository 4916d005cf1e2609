"""REALM pre-training with asynchronous index refresh.

    accelerate launch examples/pretrain.py --config examples/configs/cpu-small.yaml
    ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 examples/pretrain.py --config examples/configs/cpu-tiny.yaml

Any argument of `realm_hf.training.arguments` can be given on the command line, after or instead of `--config`.
"""

import logging

from realm_hf.training import (
    CorpusArguments,
    LoopArguments,
    ModelArguments,
    PretrainingArguments,
    RealmPretrainer,
    parse_arguments,
)

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    loop, model, corpus, pretraining = parse_arguments((LoopArguments, ModelArguments, CorpusArguments, PretrainingArguments))
    RealmPretrainer(loop, model, corpus, pretraining).train()
