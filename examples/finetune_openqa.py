"""Open-QA fine-tuning of `RealmForOpenQA`: the query tower and the reader are trained, the index is built once from
the document tower and kept fixed (REALM paper, section 3.4).

    accelerate launch examples/finetune_openqa.py --config examples/configs/openqa-cpu-tiny.yaml

From a REALM pre-training run, over a corpus of your choice:

    accelerate launch examples/finetune_openqa.py --model outputs/pretrain/final --corpus ../shared/data/wiki-2015 \
        --train_file ../shared/data/qa/nq-dev.jsonl --output_dir outputs/openqa --max_steps 2000

The model, its tokenizer and its index land in `<output_dir>/final` (`config.index_repo_id = "index"`: the index is
the folder `final/index`); evaluate it with `examples/evaluate_openqa.py --model <output_dir>/final`. Any argument of
`realm_hf.training.arguments` (`OpenQaArguments` included) can be given on the command line, after
or instead of `--config`. The same job as `realm-hf finetune ...` (or `accelerate launch -m realm_hf.cli finetune ...`):
see `realm_hf.training.entry_points.main_finetune`.
"""

import sys

from realm_hf.cli.training import run_example
from realm_hf.training import main_finetune
from realm_hf.utils.quiet import configure_logging

if __name__ == "__main__":
    configure_logging()
    sys.exit(run_example("finetune", main_finetune))  # Ctrl-C: one line, where it stopped and how to resume
