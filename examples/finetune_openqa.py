"""Open-QA fine-tuning of `RealmForOpenQA`: the query tower and the reader are trained, the index is built once from
the document tower and kept fixed (REALM paper, section 3.4).

    accelerate launch examples/finetune_openqa.py --config examples/configs/openqa-cpu-tiny.yaml

From a REALM pre-training run, over a corpus of your choice:

    accelerate launch examples/finetune_openqa.py --model outputs/pretrain/final --corpus ../shared/data/wiki-2015 \
        --train_file ../shared/data/qa/nq-dev.jsonl --output_dir outputs/openqa --max_steps 2000

The model, its tokenizer and its index land in `<output_dir>/final` (`config.index_repo_id = "index"`: the index is
the folder `final/index`); evaluate it with `examples/evaluate_openqa.py --model <output_dir>/final`. Any argument of
`realm_hf.training.arguments` or `realm_hf.training.openqa.OpenQaArguments` can be given on the command line, after
or instead of `--config`.
"""

import logging

from realm_hf.training import CorpusArguments, LoopArguments, ModelArguments, parse_arguments
from realm_hf.training.openqa import OpenQaArguments, OpenQaTrainer

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    loop, model, corpus, openqa = parse_arguments((LoopArguments, ModelArguments, CorpusArguments, OpenQaArguments))
    OpenQaTrainer(loop, model, corpus, openqa).train()
