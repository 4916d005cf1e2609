"""Inverse Cloze Task warm start of the REALM retriever.

    accelerate launch examples/ict.py --config examples/configs/ict-cpu-small.yaml

The retriever lands in `<output_dir>/final`; pass it to pre-training with `--ict_warm_start <output_dir>/final`.
The same job as `realm-hf ict ...` (or `accelerate launch -m realm_hf.cli ict ...`): see
`realm_hf.training.entry_points.main_ict`.
"""

import sys

from realm_hf.cli.training import run_example
from realm_hf.training import main_ict
from realm_hf.utils.quiet import configure_logging

if __name__ == "__main__":
    configure_logging()
    sys.exit(run_example("ict", main_ict))  # Ctrl-C: one line, where it stopped and how to resume
