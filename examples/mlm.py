"""Masked-LM training of the knowledge-augmented encoder's start (continued BERT pre-training on the corpus).

    accelerate launch examples/mlm.py --config examples/configs/wiki-tiny-mlm.yaml

A `BertForMaskedLM` and its tokenizer land in `<output_dir>/final`; pass it to pre-training as `--encoder`. The same
job as `realm-hf mlm ...` (or `accelerate launch -m realm_hf.cli mlm ...`): see
`realm_hf.training.entry_points.main_mlm`.
"""

import sys

from realm_hf.cli.training import run_example
from realm_hf.training import main_mlm
from realm_hf.utils.quiet import configure_logging

if __name__ == "__main__":
    configure_logging()
    sys.exit(run_example("mlm", main_mlm))  # Ctrl-C: one line, where it stopped and how to resume
