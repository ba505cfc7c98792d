"""Random-legal tic-tac-toe steps per second: coevo's text env against PettingZoo and TextArena.

All three are measured in the same run, in the same loop shape: observe the seat to move (the
text prompt for coevo and TextArena, the array observation for PettingZoo), pick a uniformly random
legal move, step. Prints one JSON line with steps/s and the two ratios.

Targets (issue 2): coevo >= 0.5x PettingZoo's array env, >= 5x TextArena.

    python benchmarks/env_speed.py [--seconds 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from collections.abc import Callable

import numpy as np
import pettingzoo
import textarena

import games


def aec_steps(env, rng: np.random.Generator, budget: float) -> int:
    """Random-legal play through the AEC loop for ``budget`` seconds; returns steps taken."""
    steps, seed, deadline = 0, 0, time.perf_counter() + budget
    while time.perf_counter() < deadline:
        env.reset(seed=seed)
        seed += 1
        for agent in env.agent_iter():
            obs, _, terminated, truncated, _ = env.last()
            if terminated or truncated:
                env.step(None)
                continue
            legal = np.flatnonzero(obs["action_mask"])
            env.step(int(legal[rng.integers(len(legal))]))
            steps += 1
    return steps


def textarena_steps(rng: np.random.Generator, budget: float) -> int:
    """The same for TextArena's TicTacToe-v0 with its default wrappers (what its users run)."""
    env = textarena.make("TicTacToe-v0")
    steps, seed, deadline = 0, 0, time.perf_counter() + budget
    while time.perf_counter() < deadline:
        env.reset(num_players=2, seed=seed)
        seed += 1
        done = False
        while not done:
            env.get_observation()
            board = env.state.game_state["board"]  # wrappers pass attribute lookups through
            empty = [3 * r + c for r in range(3) for c in range(3) if not board[r][c]]
            done, _ = env.step(f"[{empty[rng.integers(len(empty))]}]")
            steps += 1
        env.close()
    return steps


def measure(run: Callable[[float], int], seconds: float, repeats: int) -> float:
    """Best steps/s over ``repeats`` runs: the least disturbed by the rest of the machine."""
    return max(run(seconds) / seconds for _ in range(repeats))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="measurements per env; the best is kept")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(0)
    ours = games.make("tictactoe")
    theirs = pettingzoo.make("aec", "classic/tictactoe-v3")
    rates = {
        "coevo_tictactoe": measure(lambda s: aec_steps(ours, rng, s), args.seconds, args.repeats),
        "pettingzoo_tictactoe_v3": measure(lambda s: aec_steps(theirs, rng, s), args.seconds, args.repeats),
        "textarena_TicTacToe_v0": measure(lambda s: textarena_steps(rng, s), args.seconds, args.repeats),
    }
    vs_pz = rates["coevo_tictactoe"] / rates["pettingzoo_tictactoe_v3"]
    vs_ta = rates["coevo_tictactoe"] / rates["textarena_TicTacToe_v0"]
    print(
        json.dumps(
            {
                "benchmark": "env_speed",
                "steps_per_s": {k: round(v) for k, v in rates.items()},
                "ratio_vs_pettingzoo": round(vs_pz, 3),
                "ratio_vs_textarena": round(vs_ta, 3),
                "targets": {"ratio_vs_pettingzoo": 0.5, "ratio_vs_textarena": 5.0},
                "met": vs_pz >= 0.5 and vs_ta >= 5.0,
            }
        )
    )


if __name__ == "__main__":
    main()
