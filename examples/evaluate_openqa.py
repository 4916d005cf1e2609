"""Open-QA evaluation of a saved `RealmForOpenQA` with its index: exact match, Recall@k, predictions with provenance.

    python examples/evaluate_openqa.py --model outputs/openqa-tiny/final --qa_file ../shared/data/qa/nq-dev.jsonl \
        --skip_questions 200 --max_questions 100 --predictions_file outputs/openqa-tiny/predictions.jsonl

Add `--retrieval bm25` to retrieve with BM25 over the same blocks and read with the same reader (`pip install bm25s`),
`--index_dir DIR` to use another index than the model's own (`<model>/index`). The same job as `realm-hf evaluate ...`:
see `realm_hf.training.entry_points.main_evaluate`.
"""

import sys

from realm_hf.cli.training import run_example
from realm_hf.training import main_evaluate
from realm_hf.utils.quiet import configure_logging

if __name__ == "__main__":
    configure_logging()
    sys.exit(run_example("evaluate", main_evaluate))  # Ctrl-C: one line, where it stopped and how to resume
