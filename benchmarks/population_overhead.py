"""What does running a population cost on top of playing its matches?

Populations of 8, 64 and 256 scripted players (the game's scripted players, repeated under
distinct names) go through what population training does each iteration, minus learning:
PFSP matchmaking over every historical player (the members, fixed here, and their snapshots,
taken every 2 iterations: 4×N by the end), the evaluation scheduler's matches, payoff, Elo and OpenSkill
updates for every match, snapshots with their lineage, and the population's state serialised as
for a checkpoint every ``--checkpoint-every`` iterations. Overhead is the time in all of that over
the time playing the matches (the batched engine, the same in every run): the baseline is measured
in the same run. As in ``coevo train``, long-lived objects are frozen out of the cyclic garbage
collector (``gc.freeze``) once everything is set up.

Target (issue 6): overhead under 5% of the match time at each size. Kuhn poker's matches are the
shortest there are (two or three turns, well under a millisecond), so its ratio is the worst
case; tic-tac-toe's (five to nine turns) is the more typical. Each size runs ``--repeats`` times
from scratch and reports the run with the median ratio, with every repeat's ratio beside it: on a
shared 2-core VM one run's ratio moves by ±0.5 points (the match time alone by ±30%). Prints a
table per game, then one JSON line with each game's and size's ratio.

    python benchmarks/population_overhead.py [--games kuhn_poker tictactoe] [--sizes 8 64 256] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import time

import numpy as np

import games
from marl.pools import resolve
from marl.rollout import RolloutEngine, SeatSpec
from marl.scripted import ScriptedPolicy
from populations.config import PopulationConfig
from populations.population import Member, Population, seats_of

def run(game: str, size: int, iterations: int, matches_per_member: int, eval_fraction: float, checkpoint_every: int) -> dict[str, float]:
    config = PopulationConfig(size=0, matchmaker="pfsp", pfsp_weighting="squared")
    pop = Population(config, "scripted", {}, seed=size)
    players = {name: ScriptedPolicy(name, make) for name, make in games.scripted_players(game).items()}
    scripted, seats = list(players), seats_of([game])
    engine, enrolled = RolloutEngine(concurrency=256), {}
    spent = {"matchmaking": 0.0, "ratings": 0.0, "snapshots": 0.0, "checkpoint": 0.0, "matches": 0.0}

    def timed(part: str, work, *args):
        start = time.perf_counter()
        out = work(*args)
        spent[part] += time.perf_counter() - start
        return out

    def enrol(name: str, player: str) -> None:
        enrolled[name] = SeatSpec(players[player], name)

    def snapshot_all(iteration: int) -> None:
        for name in list(pop.members):
            enrol(pop.take_snapshot(name, iteration), pop.members[name].player)

    for i in range(size):
        name = f"s{i:03d}"
        pop.add(Member(name, scripted[i % len(scripted)], "fixed", trainable=False))
        enrol(name, pop.members[name].player)
    gc.freeze()
    played = 0
    for iteration in range(1, iterations + 1):
        matches = size * matches_per_member
        plans = timed("matchmaking", pop.plans, iteration, matches, {game: 1.0}, seats)
        plans += timed("matchmaking", pop.evaluation_plans, iteration, int(matches * eval_fraction), {game: 1.0}, seats)
        episodes = timed("matches", lambda: engine.play(resolve(plans, enrolled)))
        played += len(episodes)
        timed("ratings", pop.record, episodes)
        if iteration % 2 == 0:
            timed("snapshots", snapshot_all, iteration)
        if iteration % checkpoint_every == 0:
            timed("checkpoint", lambda: json.dumps(pop.state_dict()))
        pop.begin_iteration()
    overhead = sum(v for k, v in spent.items() if k != "matches")
    return {
        "game": game, "members": size, "snapshots": len(pop.snapshots), "matches": played, "match_s": spent["matches"],
        "overhead_s": overhead, "ratio": overhead / spent["matches"],
        **{f"{k}_s": v for k, v in spent.items() if k != "matches"},
    }


def median_run(repeats: int, *args) -> dict[str, float]:
    """The repeat with the median ratio, and every repeat's ratio."""
    runs = sorted((run(*args) for _ in range(repeats)), key=lambda r: r["ratio"])
    return {**runs[len(runs) // 2], "ratios": [r["ratio"] for r in runs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", nargs="+", default=["kuhn_poker", "tictactoe"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--matches-per-member", type=int, default=16, help="training matches per member per iteration")
    parser.add_argument("--eval-fraction", type=float, default=0.125, help="evaluation matches, as a share of training ones")
    parser.add_argument(
        "--checkpoint-every", type=int, default=3, help="serialise the population state every N iterations (examples: 10)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per size; the median is reported")
    parser.add_argument("--quick", action="store_true", help="sizes 8 and 16, 2 iterations, one repeat: a smoke test")
    args = parser.parse_args()
    sizes, iterations, repeats = ([8, 16], 2, 1) if args.quick else (args.sizes, args.iterations, args.repeats)
    report: dict = {"benchmark": "population_overhead", "ratio_vs_match_time": {}, "per_size": []}
    for game in args.games:
        settings = iterations, args.matches_per_member, args.eval_fraction, args.checkpoint_every
        rows = [median_run(repeats, game, n, *settings) for n in sizes]
        print(f"{game}\n{'members':>8}{'snapshots':>10}{'matches':>9}{'match s':>9}{'overhead s':>11}{'ratio':>8}  repeats")
        for r in rows:
            each = " ".join(f"{x:.2%}" for x in r["ratios"])
            print(f"{r['members']:>8}{r['snapshots']:>10}{r['matches']:>9}{r['match_s']:>9.2f}{r['overhead_s']:>11.3f}{r['ratio']:>8.2%}  {each}")
        report["ratio_vs_match_time"][game] = {str(r["members"]): r["ratio"] for r in rows}
        report["per_size"] += rows
        per_match = [r["overhead_s"] / r["matches"] for r in rows]
        # ~0: constant cost per match whatever the population's size; 1: linear in its size
        report.setdefault("overhead_per_match_growth_exponent", {})[game] = float(
            np.polyfit(np.log([r["members"] for r in rows]), np.log(per_match), 1)[0]
        )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
