"""Pre-training with `--shard_index` on 2 real gloo processes (`accelerate launch`): each rank embeds, refreshes and
searches only its half of the index, and training is the same as with the whole index on every rank."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import datasets
import numpy as np
import pytest
from fault_helpers import two_process_launch

pytest.importorskip("faiss")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = str(REPO / "examples" / "pretrain.py")


def launch(output: Path, *extra: str) -> None:
    command, env = two_process_launch(
        SCRIPT, "--config", str(REPO / "examples" / "configs" / "cpu-tiny.yaml"), "--output_dir", str(output),
        "--max_articles", "8", "--reading_warmup_steps", "0", "--logging_steps", "1", "--report_to", "none", *extra,
    )
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-4000:]


def losses(output: Path) -> list[float]:
    return [record["loss"] for record in json.loads((output / "history.json").read_text()) if "loss" in record]


def test_a_sharded_index_trains_as_the_whole_one_refreshes_per_rank_and_resumes(tmp_path):
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    # the whole index, refreshed by a paced build at step 4 (the CPU default: it ran on rank 0's main thread and
    # waited for a collective rank 1 never joined, until builds stopped issuing them)
    launch(whole, "--max_steps", "6", "--refresh_schedule", "4", "--refresh_mode", "paced", "--refresh_time_share",
           "1.0", "--save_steps", "0")
    # refreshes asked at steps 2 and 4 are swapped in by the next step (refresh_max_staleness 1: the ranks wait for
    # them rather than race them), so checkpoint-3 names index-2 and checkpoint-6 index-4 on every run
    sharded_args = ("--max_steps", "6", "--refresh_schedule", "2", "--refresh_max_staleness", "1", "--save_steps", "3",
                    "--shard_index", "true")
    launch(sharded, *sharded_args)
    # steps 1-2 search index-0 in both runs (the first swap, at the end of step 2 or 3, reaches step 3 at the earliest)
    np.testing.assert_allclose(losses(sharded)[:2], losses(whole)[:2], rtol=1e-5)

    # each rank's versions hold its half of the blocks (ids and vectors only); the ranks swapped the same versions
    for rank, rows in ((0, range(0, 8)), (1, range(8, 17))):
        versions = sorted((sharded / "index" / f"shard-{rank}-of-2").glob("index-*"))
        assert [v.name for v in versions] == ["index-2", "index-4"]
        shard_blocks = datasets.load_from_disk(versions[-1] / "blocks")
        assert shard_blocks.column_names == ["block_id"] and shard_blocks["block_id"][:] == list(rows)
    state = json.loads((sharded / "checkpoint-6" / "trainer_state.json").read_text())
    assert [s["snapshot_step"] for s in state["refresh_stats"]] == [2, 4] and state["index_step"] == 4

    # the final index is whole, of the final document tower
    from realm_hf import RealmRetriever
    from realm_hf.index import RealmIndex, fingerprint_module

    final = RealmIndex.from_pretrained(sharded / "final" / "index")
    retriever = RealmRetriever.from_pretrained(sharded / "final" / "retriever")
    assert len(final) == 17 and final.fingerprint == fingerprint_module(retriever.document_embedder)
    assert "text" in final.blocks.column_names

    # resumed from checkpoint-3, each rank loads its own shard of the version that checkpoint names
    launch(sharded, *sharded_args, "--resume_from_checkpoint", str(sharded / "checkpoint-3"))
    resumed = json.loads((sharded / "checkpoint-6" / "trainer_state.json").read_text())
    assert resumed["step"] == 6 and resumed["index_step"] == 4
    assert os.path.isdir(sharded / "index" / "shard-1-of-2" / "index-4")
