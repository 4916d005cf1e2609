"""benchmarks/bench_ablations.py end to end at a toy size: every kind of row runs (a recipe change, the frozen
control, a component swap that only evaluates), results land in the JSON and the table, and a rerun resumes (the
(row, seed) pairs already measured are not run again), and `--remeasure` measures the kept models again without
training."""

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
    rows = "control,no-null-document,k2,no-ict,no-reading-warmup,start-retriever+realm-encoder"
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
    assert "index_staleness" in again["rows"]["random-span-masks"]["0"]

    # another recipe in the same output is refused before anything runs
    with pytest.raises(SystemExit, match="steps"):
        bench_ablations.main([*arguments[:-4], "--set", "steps=3", "--output", str(tmp_path / "ablations"),
                              "--work-dir", str(tmp_path / "other-work"), "--rows", "full"])
    assert not (tmp_path / "other-work" / "seed-0").exists()

    # --remeasure trains nothing: the kept warm start and final models give the runs' own figures again
    remeasured = bench_ablations.main([*arguments, "--rows", rows, "--remeasure",
                                       "--output", str(tmp_path / "remeasured")])
    # ... also of the rows that read other candidates (K = 2, no null document), measured with them, and of the rows
    # that start elsewhere (no ICT: the random retriever; no reading warm-up: the random encoder), measured from there
    for row in ("full", "control", "no-null-document", "k2", "no-ict", "no-reading-warmup"):
        run, again_measured = before["rows"][row]["0"], remeasured["rows"][row]["0"]
        assert again_measured["after"] == {k: run["curve"][-1][k] for k in again_measured["after"]}, row
        assert again_measured["before"] == {k: run["curve"][0][k] for k in again_measured["before"]}, row
    # their own starts (at this toy size no ICT retrieves as little as ICT: its start's figures are equal)
    assert all(remeasured["rows"][row]["0"]["before"] != remeasured["rows"]["full"]["0"]["before"]
               for row in ("no-null-document", "k2", "no-reading-warmup"))
    assert remeasured["remeasured"] is True
    assert "mlm_accuracy_gold_document" in remeasured["rows"]["control"]["0"]["after"]
    # the reading table: start -> end per seed, for the rows that trained
    reading_table = (tmp_path / "remeasured.md").read_text()
    start, end = (remeasured["rows"]["full"]["0"][m]["mlm_accuracy_gold_document"] for m in ("before", "after"))
    assert f"| full | {start:.1f} → {end:.1f} ({end - start:+.1f}) |" in reading_table
    assert "| start-retriever+realm-encoder |" not in reading_table.split("Reading the gold block")[1]
    # more sentences of the half: measured, not copied
    wider = bench_ablations.main([*arguments[:4], "--eval-sentences", "12", *arguments[6:], "--rows", "full",
                                  "--remeasure", "--output", str(tmp_path / "wider")])
    assert "12 held-out sentences" in wider["task"]
    # what it cannot measure is refused in one line before anything is written
    with pytest.raises(SystemExit, match="stale-10x.*run the row"):
        bench_ablations.main([*arguments, "--rows", "stale-10x", "--remeasure", "--output", str(tmp_path / "r2")])
    with pytest.raises(SystemExit, match="no warm start of seed 5"):
        bench_ablations.main([*arguments[:2], "--seeds", "5", *arguments[4:], "--rows", "full", "--remeasure",
                              "--output", str(tmp_path / "r4")])
    assert not (tmp_path / "work" / "seed-5").exists()

    # seeds run side by side merge into one table; a (row, seed) pair twice is refused
    seed_one = {**again, "rows": {row: {"1": runs["0"]} for row, runs in again["rows"].items()}}
    (tmp_path / "seed1.json").write_text(json.dumps(seed_one))
    merged = bench_ablations.main(["--merge", str(tmp_path / "ablations.json"), str(tmp_path / "seed1.json"),
                                   "--output", str(tmp_path / "merged")])
    assert all(set(runs) == {"0", "1"} for runs in merged["rows"].values())
    assert "| full | 2 |" in (tmp_path / "merged.md").read_text()
    with pytest.raises(SystemExit, match="seeds"):
        bench_ablations.main(["--merge", str(tmp_path / "seed1.json"), str(tmp_path / "seed1.json"),
                              "--output", str(tmp_path / "twice")])
    # remeasured figures (other sentences) do not merge with a run's
    with pytest.raises(SystemExit, match="task"):
        bench_ablations.main(["--merge", str(tmp_path / "wider.json"), str(tmp_path / "seed1.json"),
                              "--output", str(tmp_path / "mixed")])


def test_rows_are_compared_with_full_beyond_the_spread_and_against_the_papers_direction():
    def summary(top1, top1_std, mlm, mlm_std):
        return {"gold_top1": {"mean": top1, "std": top1_std}, "mlm_accuracy_with_retrieval": {"mean": mlm, "std": mlm_std}}

    full = summary(0.80, 0.02, 20.0, 0.5)
    assert bench_ablations.direction("stale-10x", summary(0.60, 0.05, 15.0, 1.0), full) == (
        "top-1 lower, MLM lower (as the paper)")
    # within the spread on top-1: about equal, which is the paper's Recall@5 for this swap; its EM fell
    assert bench_ablations.direction("realm-retriever+start-encoder", summary(0.79, 0.0, 12.0, 1.0), full) == (
        "top-1 about equal, MLM lower (as the paper)")
    assert bench_ablations.direction("random-span-masks", summary(0.90, 0.01, 20.2, 0.3), full) == (
        "top-1 higher, MLM about equal (paper: R@5 lower, EM lower)")
    assert bench_ablations.direction("k8", summary(0.5, 0.0, 10.0, 0.0), full) == "top-1 lower, MLM lower"


def test_a_collapse_and_the_index_lag_are_counted_over_the_seeds_that_trained_the_retriever():
    def run(start, end, lag, summary="The retriever learned in 200 of 200 steps."):
        return {"curve": [{"gold_top1": start}, {"gold_top1": end}], "index_staleness": {"mean": lag, "max": 2 * lag},
                "retriever_learning_summary": summary}

    per_seed = {"0": run(0.1, 0.9, 20), "1": run(0.2, 0.0, 30), "2": run(0.1, 0.8, 40)}
    assert bench_ablations.fell(per_seed) == "1 of 3"
    assert bench_ablations.staleness(per_seed) == "30 (80)"
    frozen = {"0": run(0.1, 0.1, 100, "The retriever never learned in 200 steps: ...")}
    assert bench_ablations.fell(frozen) == "" and bench_ablations.staleness(frozen) == ""


def test_rows_and_full_sharing_seeds_are_compared_seed_by_seed():
    """A seed that is bad for every row (the same start) moves both sides alike: paired differences see through it."""
    def summary(values):
        import statistics
        by_seed = {str(seed): value for seed, value in enumerate(values)}
        return {"gold_top1": {"mean": statistics.fmean(values), "std": statistics.stdev(values), "by_seed": by_seed}}

    full = summary([0.88, 0.10, 0.86])
    assert bench_ablations.compare("gold_top1", summary([0.81, 0.05, 0.83]), full) == "lower"
    assert bench_ablations.compare("gold_top1", summary([0.89, 0.10, 0.85]), full) == "about equal"
    # unpaired, the bad seed's spread would hide the difference
    unpaired = {"gold_top1": {k: v for k, v in summary([0.81, 0.05, 0.83])["gold_top1"].items() if k != "by_seed"}}
    assert bench_ablations.compare("gold_top1", unpaired, full) == "about equal"
    # a seed where full REALM collapsed (0.0: nothing to take away) ties every row there: left out when asked
    collapsed = summary([0.88, 0.00, 0.86])
    row = summary([0.81, 0.00, 0.83])
    assert bench_ablations.compare("gold_top1", row, collapsed) == "about equal"
    assert bench_ablations.compare("gold_top1", row, collapsed, seeds={"0", "2"}) == "lower"


def test_the_seeds_with_a_working_full_recipe_are_those_whose_retriever_did_not_fall():
    def run(start, end):
        return {"curve": [{"gold_top1": start}, {"gold_top1": end}]}

    assert bench_ablations.working_seeds({"0": run(0.1, 0.9), "1": run(0.2, 0.0), "2": run(0.1, 0.1)}) == {"0", "2"}
