"""REALM pre-training with asynchronous index refresh.

    accelerate launch examples/pretrain.py --config examples/configs/cpu-small.yaml
    ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 examples/pretrain.py --config examples/configs/cpu-tiny.yaml

Any argument of `realm_hf.training.arguments` can be given on the command line, after or instead of `--config`.
The same job as `realm-hf pretrain ...` (or `accelerate launch -m realm_hf.cli pretrain ...`): see
`realm_hf.training.entry_points.main_pretrain`.
"""

import sys

from realm_hf.cli.training import run_example
from realm_hf.training import main_pretrain
from realm_hf.utils.quiet import configure_logging

if __name__ == "__main__":
    configure_logging()
    sys.exit(run_example("pretrain", main_pretrain))  # Ctrl-C: one line, where it stopped and how to resume
