"""Inverse Cloze Task warm start of the REALM retriever.

    accelerate launch examples/ict.py --config examples/configs/ict-cpu-small.yaml

The retriever lands in `<output_dir>/final`; pass it to pre-training with `--ict_warm_start <output_dir>/final`.
"""

import logging

from realm_hf.training import CorpusArguments, IctArguments, LoopArguments, ModelArguments, parse_arguments
from realm_hf.training.ict import IctTrainer

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    loop, model, corpus, ict = parse_arguments((LoopArguments, ModelArguments, CorpusArguments, IctArguments))
    IctTrainer(loop, model, corpus, ict).train()
