"""Does a population beat plain self-play on Kuhn poker? Equal match budgets, same seeds, one run.

Three matchmakers train the tiny model (``examples/kuhn_population.toml``) for the same number of
iterations, each playing the same number of training and evaluation matches per iteration:

- ``self_play``: the latest policy against itself; what counts is its last iterate;
- ``fictitious``: against a uniformly drawn past snapshot; what counts is the uniform mixture of
  the snapshots (the average policy fictitious play converges in);
- ``psro``: against the Nash meta-strategy of the snapshots' empirical payoff matrix; what counts
  is that Nash mixture.

Each population's mixture is analysed exactly (``kuhn/population_exploitability``: the mixture
reach-weighted per information set); 0 is a Nash equilibrium, uniform play 0.458. The runs go
through ``coevo sweep`` (two at a time by default). Prints a table, then one JSON line with every
curve's final and best values and each matchmaker's mean final value over the seeds, with its
ratio to self-play's.

    python benchmarks/population_emergence.py [--seeds 0 1] [--iterations 80] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

import tomli_w

from populations.sweep import run_sweep

EXAMPLES = Path(__file__).parent.parent / "examples"
MATCHMAKERS = ("self_play", "fictitious", "psro")


def curve(run_dir: Path) -> list[float]:
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return [r["kuhn/population_exploitability"] for r in records if r["kind"] == "iteration"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--iterations", type=int, help="iterations per run (default: the config's)")
    parser.add_argument("--parallel", type=int, default=2, help="runs at once")
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--quick", action="store_true", help="3 iterations of 16 matches: a smoke test")
    args = parser.parse_args()
    changes = ["rollout.matches=16", "rollout.concurrency=16", "population.eval_matches=4", "population.snapshot_every=1"]
    changes = changes if args.quick else []
    iterations = 3 if args.quick else args.iterations
    if iterations:
        changes.append(f"iterations={iterations}")
    sweep = {
        "config": str(EXAMPLES / "kuhn_population.toml"), "parallel": args.parallel, "set": changes,
        "grid": {"population.matchmaker": list(MATCHMAKERS), "seed": args.seeds, "model_seed": [0]},
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.toml").write_text(tomli_w.dumps(sweep))
        table = run_sweep(out / "sweep.toml", out)
        if (table.status != "done").any():
            raise SystemExit(f"runs failed:\n{table[table.status != 'done'][['run', 'status']].to_string()}")
        runs = {
            (row["population.matchmaker"], int(row.seed)): curve(Path(row.run_dir)) for _, row in table.iterrows()
        }
        budget = int(table["iteration"].iloc[0])
    report: dict = {"benchmark": "population_emergence", "iterations": budget, "seeds": args.seeds, "runs": {}}
    print(f"{'matchmaker':<12}{'seed':>5}{'first':>9}{'best':>9}{'final':>9}")
    for (name, seed), values in sorted(runs.items()):
        print(f"{name:<12}{seed:>5}{values[0]:>9.3f}{min(values):>9.3f}{values[-1]:>9.3f}")
        report["runs"][f"{name}/seed{seed}"] = {"first": values[0], "best": min(values), "final": values[-1]}
    finals = {name: statistics.mean(runs[name, s][-1] for s in args.seeds) for name in MATCHMAKERS}
    report["final_mean"] = finals
    report["ratio_vs_self_play"] = {name: finals[name] / finals["self_play"] for name in MATCHMAKERS}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
