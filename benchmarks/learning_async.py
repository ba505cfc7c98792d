"""Does async training hurt learning? ``examples/kuhn_tiny.toml`` trained sync and async
(``[train] mode = "async"``, k = ``max_staleness``, decoupled PPO for the stale samples), same seeds,
same budget, in one run, on the local pool (async: the rollouts on a thread of their own, with
their own copy of the model, while the learner trains). The exact exploitability of each run's
final policy is read from its run directory, as ``learning_kuhn.py`` does.

Target (issue 19): async's mean final exploitability within (or below) the sync runs'
seed-to-seed range. Wall-clock seconds per run are reported too: the local pool's speed, sync
against async, on this machine.

    python benchmarks/learning_async.py [--seeds 0 1 2] [--k 2] [--iterations N] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics

from learning_kuhn import CONFIGS, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--k", type=int, default=2, help="train.max_staleness of the async runs")
    parser.add_argument("--iterations", type=int, help="iterations per run (default: the config's)")
    parser.add_argument("--quick", action="store_true", help="2 iterations of 8 matches: a smoke test")
    args = parser.parse_args()
    overrides = ["rollout.matches=8"] if args.quick else []
    iterations = 2 if args.quick else args.iterations
    schedules = {"sync": ["train.mode='sync'"], f"async_k{args.k}": ["train.mode='async'", f"train.max_staleness={args.k}"]}
    report: dict = {"benchmark": "learning_async", "seeds": args.seeds, "iterations": iterations}
    for name, schedule in schedules.items():
        runs = [train(CONFIGS["rae"], seed, iterations, [*overrides, *schedule]) for seed in args.seeds]
        report[name] = {
            "per_seed_final": [r["final"] for r in runs], "mean_final": statistics.mean(r["final"] for r in runs),
            "mean_initial": statistics.mean(r["initial"] for r in runs), "mean_seconds": statistics.mean(r["seconds"] for r in runs),
        }  # fmt: skip
    sync, late = report["sync"], report[f"async_k{args.k}"]
    report["sync_range"] = [min(sync["per_seed_final"]), max(sync["per_seed_final"])]
    report["speed_ratio_async_vs_sync"] = sync["mean_seconds"] / late["mean_seconds"]
    report["met"] = late["mean_final"] <= report["sync_range"][1]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
