"""The collaboration gap on the collaborative maze: a pair that must talk against one that sees all.

``games.maze`` splits what a route needs between two seats: the mapper sees the walls, the finder
the goal. On the same mazes (same seeds) and the same turn budget (equal calls: every turn, move or
message, is one call), the success rate of

- ``solo``: the maze unsplit (``split=False``): one seat's view holds everything, the baseline;
- ``pair``: the split maze, the heuristic pair sharing its halves in one message each;
- ``silent``: the split maze, the same pair with messaging off (each seat acts on its own half);
- ``random``: uniform moves, the floor;

at each difficulty (``size``, wall ``density``, ``turns``). ``gap`` = solo - pair is what
collaborating costs (the turns spent talking); ``talk_gain`` = pair - silent is what talking buys.

    python benchmarks/collaboration.py [--matches 200] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import games
from games.maze import HeuristicPlayer
from games.play import RandomPlayer, play_match

LEVELS = ((4, 0.2, 8), (5, 0.3, 10), (7, 0.35, 10), (7, 0.35, 21))  # (size, density, turns)
PAIRS = {
    "solo": (False, lambda: HeuristicPlayer()),
    "pair": (True, lambda: HeuristicPlayer()),
    "silent": (True, lambda: HeuristicPlayer(talk=False)),
    "random": (True, RandomPlayer),
}


def success(pair: str, size: int, density: float, turns: int, matches: int) -> float:
    split, player = PAIRS[pair]
    won = 0.0
    for seed in range(matches):
        env = games.make("maze", size=size, density=density, turns=turns, split=split)
        won += play_match(env, {"player_0": player(), "player_1": player()}, seed=seed).returns["player_0"]
    return won / matches


def level_row(size: int, density: float, turns: int, matches: int) -> dict:
    row = {name: success(name, size, density, turns, matches) for name in PAIRS}
    return {"size": size, "density": density, "turns": turns, **row,
            "gap": row["solo"] - row["pair"], "talk_gain": row["pair"] - row["silent"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=200, help="seeded mazes per difficulty (the same for every pair)")
    parser.add_argument("--smoke", action="store_true", help="a few mazes per level, for the tests")
    args = parser.parse_args()
    matches = 10 if args.smoke else args.matches
    start = time.perf_counter()
    rows = [level_row(*level, matches) for level in LEVELS]
    print(json.dumps({
        "benchmark": "collaboration", "game": "maze", "matches": matches, "levels": rows,
        "mean_talk_gain": float(np.mean([r["talk_gain"] for r in rows])), "mean_gap": float(np.mean([r["gap"] for r in rows])),
        "ratio_pair_to_silent": float(np.mean([r["pair"] for r in rows]) / max(np.mean([r["silent"] for r in rows]), 1e-9)),
        "seconds": time.perf_counter() - start,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
