"""Does the curriculum matter? Task forge co-evolution with scripted players, one proposer per
curriculum teacher — uniform (random), ALP-GMM, SEC, the staircase, PAIRED — at an equal budget of matches.

Every run plays the same number of task forge matches (``--iterations`` × ``--matches``) with a
learning executor (``games.task_forge.players.SkilledExecutor``: it improves most on tasks it solves
about half of the time), a noisy verifier and a hinting teacher; the executor learns only from
tasks in Agent0's band (0.3 ≤ p̂ ≤ 0.8). It prints, per curriculum and averaged over seeds, the
executor's held-out accuracy at the end (every family, difficulties spread evenly), the tasks'
difficulty over the first and last fifth of the run, and the share of tasks whose p̂ fell inside
the band — then one JSON line with the ratio of each teacher's final accuracy to the uniform
curriculum's, measured in the same run. The numbers are reported whatever they show.

    python benchmarks/coevolution_curricula.py [--seeds 0 1 2] [--iterations 30] [--matches 32]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np

from marl.config import load_config
from coevo.train import Trainer
from coevo.config import RunConfig

EXAMPLE = Path(__file__).parents[1] / "examples" / "task_forge_scripted.toml"
CURRICULA = ("uniform", "alp_gmm", "sec", "staircase", "paired")


def run(curriculum: str, seed: int, iterations: int, matches: int) -> dict[str, float]:
    overrides = [
        f"seed={seed}", f"iterations={iterations}", f"rollout.matches={matches}", f"rollout.concurrency={matches}",
        f"roles.proposer.player='scripted:{curriculum}'", f"eval.every={iterations}", f"checkpoint_every={iterations}",
    ]  # fmt: skip
    config = load_config(EXAMPLE, overrides, schema=RunConfig)
    log: list[dict] = []
    with tempfile.TemporaryDirectory() as folder:
        Trainer(config, Path(folder)).run(on_iteration=lambda i, m: log.append(m))
    fifth = max(1, iterations // 5)
    return {
        "heldout_accuracy": log[-1]["eval/executor/heldout_accuracy"],
        "difficulty_first": float(np.mean([m["forge/difficulty"] for m in log[:fifth]])),
        "difficulty_last": float(np.mean([m["forge/difficulty"] for m in log[-fifth:]])),
        "p_hat_in_band": float(np.mean([m["forge/p_hat_in_band"] for m in log])),
        "p_hat": float(np.mean([m["forge/p_hat"] for m in log])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--matches", type=int, default=32, help="task forge matches per iteration")
    args = parser.parse_args()
    results = {c: [run(c, s, args.iterations, args.matches) for s in args.seeds] for c in CURRICULA}
    print(f"{'curriculum':>10}{'held-out acc':>14}{'difficulty first→last':>24}{'p̂ in band':>12}{'mean p̂':>9}")
    summary = {}
    for curriculum, rows in results.items():
        mean = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
        spread = float(np.std([r["heldout_accuracy"] for r in rows]))
        summary[curriculum] = {**mean, "heldout_accuracy_std": spread, "per_seed": rows}
        print(
            f"{curriculum:>10}{mean['heldout_accuracy']:>9.3f} ±{spread:.3f}"
            f"{mean['difficulty_first']:>13.3f} → {mean['difficulty_last']:.3f}{mean['p_hat_in_band']:>12.2f}{mean['p_hat']:>9.2f}"
        )
    base = summary["uniform"]["heldout_accuracy"]
    print(json.dumps({
        "benchmark": "coevolution_curricula", "seeds": args.seeds, "matches": args.iterations * args.matches,
        "heldout_accuracy_vs_uniform": {c: summary[c]["heldout_accuracy"] / base for c in CURRICULA}, "runs": summary,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
