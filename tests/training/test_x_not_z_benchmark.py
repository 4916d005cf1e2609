"""benchmarks/bench_x_not_z.py end to end at a toy size: the four settings run from one warm start per seed, X = Z
runs without a pre-training corpus and X != Z with the news sentences, results land in the JSON and the table, a
rerun resumes, and seeds run apart merge into one table."""

import json
import os
import sys

import pytest

pytest.importorskip("faiss")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import bench_x_not_z  # noqa: E402


@pytest.mark.filterwarnings("ignore")
def test_the_x_not_z_benchmark_runs_every_setting_from_one_warm_start_and_resumes(tmp_path, monkeypatch):
    calls = []
    real_run_setting = bench_x_not_z.run_setting

    def spy(name, recipe, paths, *args, **kwargs):
        calls.append({"name": name, "train": paths["train"], "frozen": kwargs["frozen"],
                      "warmup": args[3], "ict": args[4]})
        return real_run_setting(name, recipe, paths, *args, **kwargs)

    monkeypatch.setattr(bench_x_not_z, "run_setting", spy)
    arguments = [
        "--num-entities", "12", "--seeds", "0", "--eval-sentences", "6", "--eval-every", "1000",
        "--set", "ict_steps=2", "--set", "ict_batch_size=8", "--set", "reading_warmup_steps=2", "--set", "steps=2",
        "--output", str(tmp_path / "x-not-z"), "--work-dir", str(tmp_path / "work"),
    ]
    results = bench_x_not_z.main(arguments)
    assert set(results["rows"]) == set(bench_x_not_z.SETTINGS)
    by_name = {call["name"]: call for call in calls}
    assert set(by_name) == {f"report-{setting}" for setting in bench_x_not_z.SETTINGS}
    # X != Z pre-trains on the news sentences, X = Z on Z itself (no pre-training corpus); the control's retriever is
    # frozen; every run starts from the seed's one warm start
    assert by_name["report-x-not-z"]["train"].endswith("train.jsonl") and by_name["report-x-is-z"]["train"] is None
    assert [by_name[f"report-{s}"]["frozen"] for s in bench_x_not_z.SETTINGS] == [False, True, False, True]
    assert len({(call["warmup"], call["ict"]) for call in calls}) == 1
    for setting, per_seed in results["rows"].items():
        run = per_seed["0"]
        assert 0.0 <= run["after"]["gold_top1"] <= 1.0 and "mlm_accuracy_with_retrieval" in run["before"], setting
    table = (tmp_path / "x-not-z.md").read_text()
    assert "| x-not-z | news sentences | trained | 1 |" in table and "| x-is-z-control | Z | frozen | 1 |" in table
    assert "| X ≠ Z: trained − frozen (seeds 0) |" in table and "'report' half" in table

    # a rerun runs nothing again; another half into the same output is refused
    calls.clear()
    again = bench_x_not_z.main(arguments)
    assert not calls and again["rows"] == results["rows"]
    with pytest.raises(SystemExit, match="half"):
        bench_x_not_z.main([*arguments, "--half", "choose"])

    # seeds run apart merge into one table
    seed_one = {**again, "rows": {s: {"1": runs["0"]} for s, runs in again["rows"].items()}}
    (tmp_path / "seed1.json").write_text(json.dumps(seed_one))
    merged = bench_x_not_z.main(["--merge", str(tmp_path / "x-not-z.json"), str(tmp_path / "seed1.json"),
                                 "--output", str(tmp_path / "merged")])
    assert all(set(runs) == {"0", "1"} for runs in merged["rows"].values())
    assert "| x-not-z | news sentences | trained | 2 |" in (tmp_path / "merged.md").read_text()
