"""Run the population sweep (examples/sweep_kuhn_population.toml) and compare what emerged.

    python examples/sweep_kuhn_population.py [--out runs/sweep_kuhn_population] [--sweep SWEEP.toml]

The same runs as ``coevo sweep examples/sweep_kuhn_population.toml`` (finished runs are skipped,
interrupted ones resumed), then the results table as pandas sees it: the final exact
exploitability of each population's meta-strategy mixture, by matchmaker and population size,
as mean and spread over the seeds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from coevo.sweep import run_sweep

HERE = Path(__file__).parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs") / "sweep_kuhn_population")
    parser.add_argument("--sweep", type=Path, default=HERE / "sweep_kuhn_population.toml", help="a sweep of the same settings")
    args = parser.parse_args()
    table = run_sweep(args.sweep, args.out)
    done = table[table.status == "done"]
    summary = done.pivot_table(
        index="population.matchmaker", columns="population.size",
        values="kuhn/population_exploitability", aggfunc=["mean", "std"],
    )  # fmt: skip
    with pd.option_context("display.float_format", "{:.3f}".format):
        print(summary)
    print(f"{len(done)}/{len(table)} runs done; table: {args.out / 'results.parquet'}")


if __name__ == "__main__":
    main()
