"""Does RAE's per-seat baseline matter where the seats differ? RAE vs REINFORCE vs batch_mean.

SPIRAL's role-conditioned advantage subtracts a running mean of each seat's return; REINFORCE
subtracts nothing, and batch_mean one mean over the whole batch (about 0 in zero-sum self-play,
whatever the seats' values). In Kuhn poker the seat means are near 0 and the three barely differ
(``learning_kuhn.py``). Here the seats differ:

- ``tictactoe`` (``examples/tictactoe_tiny.toml``): X, moving first, wins about twice as often as O
  under weak play, so player_0's return starts near +0.3 and player_1's near −0.3. Measured by
  evaluation matches every other iteration: the win rate against ``random`` (random against random:
  0.44 over both seats), the rate of not losing against ``minimax`` (perfect play: a draw at best)
  and the win rate against the untrained policy (``initial``).
- ``leduc`` (``examples/openspiel_leduc_tiny.toml``, pip install 'coevo[openspiel]'): the policy's
  exact exploitability every iteration (uniform play 2.37, 0 a Nash equilibrium); the seats differ
  by the betting order alone, and little (the first player's value at equilibrium is about −0.09).

Every estimator trains the same config from the same seeds (same initial model, same first matches)
for the same iterations and matches: equal learner samples. ``--games`` picks the games.
Per game and estimator it prints each seed's curve, the final value's mean and range over seeds,
the mean over the run's points (learning speed: higher for a curve that rises sooner), and the
baselines' ratios against RAE's final value.

    python benchmarks/learning_rae.py [--games tictactoe leduc] [--seeds 0 1 2] [--estimators rae reinforce] [--iterations N] [--quick]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from learning_kuhn import learning_arguments, trained_events

EXAMPLES = Path(__file__).parent.parent / "examples"
ESTIMATORS = ("rae", "reinforce", "batch_mean")


def tictactoe_curves(records: list[dict]) -> dict[str, list[float]]:
    """The evaluation points' rates: against random (win), minimax (not losing), the untrained policy (win)."""
    points = [r for r in records if r["kind"] == "iteration" and "eval/tictactoe/random/win" in r]
    return {
        "win_vs_random": [r["eval/tictactoe/random/win"] for r in points],
        "not_lost_vs_minimax": [1 - r["eval/tictactoe/minimax/loss"] for r in points],
        "win_vs_initial": [r["eval/tictactoe/initial/win"] for r in points],
    }


def leduc_curves(records: list[dict]) -> dict[str, list[float]]:
    """The policy's exact exploitability after every iteration, and its average policy's."""
    its = [r for r in records if r["kind"] == "iteration"]
    return {
        "exploitability": [r["leduc_poker/exploitability"] for r in its],
        "average_exploitability": [r["leduc_poker/average_exploitability"] for r in its],
    }


# game: (config, overrides, its curves from a run's events, the headline curve, whether higher is better)
GAMES: dict[str, tuple[Path, list[str], Callable[[list[dict]], dict[str, list[float]]], str, bool]] = {
    "tictactoe": (EXAMPLES / "tictactoe_tiny.toml", ["eval.every=2"], tictactoe_curves, "win_vs_random", True),
    "leduc": (EXAMPLES / "openspiel_leduc_tiny.toml", [], leduc_curves, "exploitability", False),
}


def seat_returns(records: list[dict]) -> list[float]:
    """Player_0's mean return in the first iteration's self-play matches: how far apart the seats start."""
    first = next(r for r in records if r["kind"] == "iteration")
    return [value for key, value in sorted(first.items()) if key.endswith("/player_0/return")]


def summary(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.mean(values), "min": min(values), "max": max(values)}


def compare(game: str, seeds: list[int], iterations: int | None, overrides: list[str], estimators: list[str]) -> dict:
    """Each estimator on ``game`` from every seed: curves, final values and learning speed."""
    config, measure, curves_of, headline, higher_is_better = GAMES[game]
    result: dict = {"headline": headline, "higher_is_better": higher_is_better}
    for estimator in estimators:
        runs = []
        for seed in seeds:
            sets = [*measure, *overrides, f"advantage.estimator={estimator}"]  # --quick's sizes win
            records, seconds = trained_events(config, seed, iterations, sets)
            runs.append({"curves": curves_of(records), "player_0_return": seat_returns(records)[0], "seconds": seconds})
            print(f"{game} {estimator} seed {seed}: {runs[-1]['curves'][headline]}", file=sys.stderr)
        row: dict = {"curves": {name: [r["curves"][name] for r in runs] for name in runs[0]["curves"]}}
        for name, per_seed in row["curves"].items():
            row[name] = {"final": summary([c[-1] for c in per_seed]), "run_mean": summary([statistics.mean(c) for c in per_seed])}
        row["player_0_return_first_iteration"] = summary([r["player_0_return"] for r in runs])
        row["seconds"] = summary([r["seconds"] for r in runs])
        result[estimator] = row
    if "rae" not in result:
        return result
    rae_final = result["rae"][headline]["final"]["mean"]
    for estimator in (e for e in estimators if e != "rae"):
        result[f"final_ratio_{estimator}_over_rae"] = result[estimator][headline]["final"]["mean"] / max(rae_final, 1e-12)
    return result


def main() -> None:
    games = {"nargs": "+", "choices": list(GAMES), "default": list(GAMES)}
    estimators = {"nargs": "+", "choices": ESTIMATORS, "default": list(ESTIMATORS), "help": "a subset: runs split across machines"}
    seeds, iterations, overrides, args = learning_arguments(__doc__, games=games, estimators=estimators)
    report: dict = {"benchmark": "learning_rae", "seeds": seeds, "iterations": iterations}
    for game in args.games:
        report[game] = compare(game, seeds, iterations, overrides, args.estimators)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
