"""benchmarks/bench_ablations.py end to end at a toy size: every kind of row runs (a recipe change, the frozen
control, a component swap that only evaluates), results land in the JSON and the table, and a rerun resumes (the
(row, seed) pairs already measured are not run again)."""

import json
import os
import sys

import pytest

pytest.importorskip("faiss")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import bench_ablations  # noqa: E402


@pytest.mark.filterwarnings("ignore")
def test_the_ablation_benchmark_runs_every_kind_of_row_and_resumes(tmp_path):
    arguments = [
        "--num-entities", "12", "--seeds", "0", "--eval-sentences", "6", "--eval-every", "1000",
        "--set", "ict_steps=2", "--set", "ict_batch_size=8", "--set", "reading_warmup_steps=2", "--set", "steps=2",
        "--output", str(tmp_path / "ablations"), "--work-dir", str(tmp_path / "work"),
    ]
    rows = "control,no-null-document,k2,start-retriever+realm-encoder"
    results = bench_ablations.main([*arguments, "--rows", rows])
    # the swap needs the full recipe's models: it was run first
    assert set(results["rows"]) == {"full", *rows.split(",")}
    for row, per_seed in results["rows"].items():
        after = per_seed["0"]["after"]
        assert 0.0 <= after["gold_top1"] <= 1.0 and "mlm_accuracy_with_retrieval" in after, (row, after)
    # K = 2 with the null document retrieves one block (top-1 = top-(K-1)); without ∅ all K are retrieved
    assert "gold_top1" in results["rows"]["k2"]["0"]["after"]
    assert "gold_top4" in results["rows"]["no-null-document"]["0"]["after"]
    table = (tmp_path / "ablations.md").read_text()
    assert "| full | 1 |" in table and "| start-retriever+realm-encoder | 1 |" in table
    assert (tmp_path / "ablations.png").is_file()

    # a rerun with one more row runs only that row
    before = json.loads((tmp_path / "ablations.json").read_text())
    again = bench_ablations.main([*arguments, "--rows", rows + ",random-span-masks"])
    assert set(again["rows"]) == set(before["rows"]) | {"random-span-masks"}
    assert again["rows"]["control"] == before["rows"]["control"]
