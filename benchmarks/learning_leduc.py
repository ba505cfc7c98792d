"""Does self-play lower the exact exploitability of a tiny model on OpenSpiel's Leduc poker?

``examples/openspiel_leduc_tiny.toml`` (pip install 'coevo[openspiel]') is trained from each seed;
OpenSpiel computes the exact exploitability of the model's move distribution at all 936
information states every iteration (``leduc_poker/exploitability``, read back from the run's
events), and of its average policy (``leduc_poker/average_exploitability``: every policy the
run held, reach-weighted). The baseline is the same run's untrained policy: ``final_over_initial`` < 1 means
training lowered it. Uniform play is 2.37; always calling 1.47; 0 is a Nash equilibrium.

    python benchmarks/learning_leduc.py [--iterations N] [--seeds 0 1] [--quick]
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from learning_kuhn import learning_arguments, trained_events

CONFIG = Path(__file__).parent.parent / "examples" / "openspiel_leduc_tiny.toml"
METRIC = "leduc_poker/exploitability"
AVERAGE = "leduc_poker/average_exploitability"  # the run's average policy: every policy it held, reach-weighted


def train(seed: int, iterations: int | None, overrides: list[str]) -> dict:
    """One run's exploitability: untrained, best and last iteration, and the last five's mean."""
    records, seconds = trained_events(CONFIG, seed, iterations, overrides)
    initial = next(r for r in records if r["kind"] == "start")[METRIC]
    curve = [r[METRIC] for r in records if r["kind"] == "iteration"]
    average = [r[AVERAGE] for r in records if r["kind"] == "iteration"]
    return {
        "initial": initial,
        "best": min(curve),
        "final": curve[-1],
        "average": average[-1],
        "average_best": min(average),
        "last5": statistics.mean(curve[-5:]),
        "final_over_initial": curve[-1] / initial,
        "seconds": seconds,
        "curve": curve,
        "average_curve": average,
    }


def main() -> None:
    seeds, iterations, overrides, _ = learning_arguments(__doc__)
    runs = [train(seed, iterations, overrides) for seed in seeds]
    report: dict = {"benchmark": "learning_leduc", "seeds": seeds, "iterations": len(runs[0]["curve"])}
    for key in ("initial", "best", "final", "average", "average_best", "last5", "final_over_initial", "seconds"):
        values = [r[key] for r in runs]
        report[key] = {"mean": statistics.mean(values), "min": min(values), "max": max(values)}
    report["curves"] = [r["curve"] for r in runs]
    report["average_curves"] = [r["average_curve"] for r in runs]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
