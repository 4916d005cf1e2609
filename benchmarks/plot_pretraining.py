"""Plot the loss and retrieval-utility curves of a pre-training run and tabulate its evaluations and refreshes.

    python benchmarks/plot_pretraining.py outputs/pretrain-cpu-small --name pretrain_cpu_small

Reads `<run>/history.json` (or the newest `checkpoint-*/trainer_state.json` of a run still going) and writes
benchmarks/results/<name>.png and <name>.md.
"""

from __future__ import annotations

import argparse
import json
import os

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def load_history(run: str) -> tuple[list[dict], list[dict]]:
    path = os.path.join(run, "history.json")
    if not os.path.isfile(path):
        checkpoints = sorted(
            (d for d in os.listdir(run) if d.startswith("checkpoint-")), key=lambda d: int(d.split("-")[1])
        )
        path = os.path.join(run, checkpoints[-1], "trainer_state.json")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    history = data if isinstance(data, list) else data["history"]
    refreshes = [] if isinstance(data, list) else data.get("refresh_stats", [])
    if not refreshes:  # history.json: the swaps are in the logged records
        refreshes = [
            {key.split("/", 1)[1]: value for key, value in r.items() if key.startswith("refresh/")}
            for r in history if "refresh/snapshot_step" in r
        ]
    return history, refreshes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run")
    parser.add_argument("--name", default="pretraining")
    args = parser.parse_args()
    history, refreshes = load_history(args.run)
    train = [r for r in history if "loss" in r]
    evals = [r for r in history if any(k.startswith("eval/") for k in r)]
    swaps = [r for r in history if "refresh/staleness_steps" in r]

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    steps = [r["step"] for r in train]
    left.plot(steps, [r["loss"] for r in train], label="loss = -log p(y|x)")
    left.set_xlabel("step")
    left.set_ylabel("loss (nats per masked span)")
    for r in swaps:
        left.axvline(r["step"], color="grey", alpha=0.3, lw=1)
    left.set_title("loss (grey: index swaps)")
    right.plot(steps, [r.get("ru_top", float("nan")) for r in train], label="RU of the top retrieved block")
    right.plot(steps, [r.get("ru_mean", float("nan")) for r in train], label="mean RU of retrieved blocks")
    right.axhline(0, color="black", lw=0.5)
    right.set_xlabel("step")
    right.set_ylabel("log p(y|z,x) - log p(y|∅,x)")
    right.legend(fontsize=8)
    right.set_title("retrieval utility")
    figure.tight_layout()
    os.makedirs(RESULTS, exist_ok=True)
    figure.savefig(os.path.join(RESULTS, f"{args.name}.png"), dpi=120)

    lines = [f"# Pre-training run `{args.run}`", "", f"Command: `python benchmarks/plot_pretraining.py {args.run} --name {args.name}`", "",
             "## Evaluations", "", "| step | zero-shot Recall@5 (NQ dev) | MLM acc. with retrieval | MLM acc. ∅ only |", "|---:|---:|---:|---:|"]
    for r in evals:
        lines.append(f"| {r['step']} | {r.get('eval/zero_shot_recall@5', float('nan')):.1f} | "
                     f"{r.get('eval/mlm_accuracy_with_retrieval', float('nan')):.1f} | {r.get('eval/mlm_accuracy_null_document', float('nan')):.1f} |")
    lines += ["", "## Index refreshes", "", "| snapshot step | swapped at step | staleness (steps) | staleness (s) | build (s) |", "|---:|---:|---:|---:|---:|"]
    for r in refreshes:
        lines.append(f"| {r['snapshot_step']:.0f} | {r['swap_step']:.0f} | {r['staleness_steps']:.0f} | {r['staleness_seconds']:.0f} | {r['build_seconds']:.0f} |")
    lines += ["", "## Training log (every logged window)", "", "| step | loss | RU top | RU mean | p(∅) prior | steps/s |", "|---:|---:|---:|---:|---:|---:|"]
    for r in train:
        lines.append(f"| {r['step']} | {r['loss']:.2f} | {r.get('ru_top', float('nan')):.3f} | {r.get('ru_mean', float('nan')):.3f} | "
                     f"{r.get('null_prior_mass', float('nan')):.2g} | {r.get('steps_per_second', float('nan')):.3f} |")
    with open(os.path.join(RESULTS, f"{args.name}.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
