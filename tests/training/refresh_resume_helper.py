"""A tiny REALM pre-training run with a refresh in flight at a checkpoint, runnable as a script so that a test can kill
it (and its builder process) with SIGKILL right after the checkpoint is saved:

    python tests/training/refresh_resume_helper.py OUTPUT_DIR --hold HOLD_FILE --hang-at-save 4

The index builder (`slow_build_index`, a real build) waits while `HOLD_FILE` exists, so the refresh requested at step
4 is still in flight when `checkpoint-4` is saved; the run then writes `OUTPUT_DIR/saved-4` and hangs, to be killed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from realm_hf.index import RealmIndex
from realm_hf.training import CorpusArguments, LoopArguments, ModelArguments, PretrainingArguments, RealmPretrainer
from realm_hf.training.index_builder import build_index_from_snapshot


def slow_build_index(state_dict, step: int, hold_file: str | None = None, **kwargs) -> RealmIndex:
    """`build_index_from_snapshot`, started only once `hold_file` is gone."""
    while hold_file is not None and os.path.exists(hold_file):
        time.sleep(0.05)
    return build_index_from_snapshot(state_dict, step, **kwargs)


def make_pretrainer(output_dir: str, max_steps: int, save_steps: int = 4, resume: str | None = None,
                    cls: type[RealmPretrainer] = RealmPretrainer, **pretraining_kwargs) -> RealmPretrainer:
    """The shapes of tests/training/test_pretrainer.py, a process-mode refresh every 4 steps, a log every step."""
    loop = LoopArguments(
        output_dir=str(output_dir), max_steps=max_steps, per_device_batch_size=8, learning_rate=3e-3,
        logging_steps=1, save_steps=save_steps, report_to="none", resume_from_checkpoint=resume,
    )
    corpus = CorpusArguments(
        corpus="embedded", max_articles=6, block_length=64, query_max_length=32, joined_max_length=96,
        embed_dtype="float32",
    )
    pretraining = PretrainingArguments(
        num_candidates=4, eval_mlm_examples=0, **{"refresh_schedule": "4", "refresh_mode": "process",
                                                 **pretraining_kwargs},
    )
    return cls(loop, ModelArguments(random_init=True), corpus, pretraining)


class HangingPretrainer(RealmPretrainer):
    """Holds its builder with `hold_file` and hangs after saving checkpoint `hang_at_save`."""

    hold_file: str
    hang_at_save: int

    def _prepare_index(self, work: str) -> None:
        super()._prepare_index(work)
        # the builder process imports this module by name (the script's folder is on its sys.path)
        self.refresher.builder = "refresh_resume_helper:slow_build_index"
        self.refresher.builder_kwargs["hold_file"] = self.hold_file

    def save_checkpoint(self) -> str:
        directory = super().save_checkpoint()
        if self.step == self.hang_at_save:
            open(os.path.join(self.args.output_dir, f"saved-{self.step}"), "w").close()
            time.sleep(600)  # killed here, the build still held
        return directory


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("output_dir")
    parser.add_argument("--hold", required=True)
    parser.add_argument("--hang-at-save", type=int, default=4)
    options = parser.parse_args(argv)
    HangingPretrainer.hold_file = options.hold
    HangingPretrainer.hang_at_save = options.hang_at_save
    make_pretrainer(options.output_dir, max_steps=8, cls=HangingPretrainer).train()


if __name__ == "__main__":
    main(sys.argv[1:])
