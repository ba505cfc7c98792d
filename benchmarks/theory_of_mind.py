"""Does modelling the opponent pay? The theory-of-mind player against players without one, on
the same opponents and seeds, in one run; and the probe's accuracy at predicting each opponent.

Repeated rock-paper-scissors (``games.rps``), ``--rounds`` rounds a match, ``--matches`` matches
per pairing, half in each seat. Against each fixed strategy of ``games.rps.STRATEGIES`` (every one
exploitable) and uniform random play, the mean return per match of:

- ``theory_of_mind`` (``games.theory_of_mind``): hypotheses scored on the opponent's last moves,
  the best one best-responded to;
- ``frequency``, the baseline: beats the opponent's most frequent move (it models move counts,
  not a strategy);
- ``random``: uniform play, the equilibrium, 0 against anything in expectation;

and the probe's accuracy (``marl.probe``) for the theory-of-mind player's predictions of each
opponent's moves (chance 1/3). With ``--model``, the model-backed player (``marl.theory_of_mind``)
against ``--model-opponent``, beside the same model playing without hypotheses: their returns and
their probe accuracies.

    python benchmarks/theory_of_mind.py [--matches 100] [--rounds 10] [--model tiny] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import games
from games.rps import STRATEGIES
from marl.evaluate import results_against
from marl.players import model
from marl.probe import probe
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.scripted import ScriptedPolicy
from marl.theory_of_mind import ModelTheoryOfMind

GAME = "rock_paper_scissors"
PLAYERS = ("theory_of_mind", "frequency", "random")
OPPONENTS = (*STRATEGIES, "random")


def scripted(name: str) -> SeatSpec:
    return SeatSpec(ScriptedPolicy(name, games.scripted_players(GAME)[name]), name)


def play(me: SeatSpec, them: SeatSpec, matches: int, rounds: int) -> list:
    """``matches`` seeded matches, ``me`` in either seat by turns; the same seeds for every pairing."""
    specs = []
    for m in range(matches):
        order = (me, them) if m % 2 == 0 else (them, me)
        specs.append(MatchSpec(GAME, m, {"player_0": order[0], "player_1": order[1]}, game_kwargs={"rounds": rounds}))
    return RolloutEngine().play(specs)


def scripted_part(matches: int, rounds: int) -> dict:
    returns: dict[str, dict[str, float]] = {o: {} for o in OPPONENTS}
    accuracy = {}
    for opponent in OPPONENTS:
        them = scripted(opponent)
        for player in PLAYERS:
            me = scripted(player)
            if player == opponent:  # random against itself: a distinct member name for the records
                me.member = f"{player}_"
            episodes = play(me, them, matches, rounds)
            returns[opponent][player] = results_against(episodes, me.member)["return"]
            if player == "theory_of_mind":
                metrics = probe(episodes, {me.member: me, them.member: them}, lambda game: {"rounds": rounds})
                accuracy[opponent] = metrics[f"probe/{me.member}/accuracy"]
    exploitable = {p: float(np.mean([returns[o][p] for o in STRATEGIES])) for p in PLAYERS}
    return {
        "return": returns,
        "mean_return_vs_exploitable": exploitable,
        "tom_minus_best_baseline": exploitable["theory_of_mind"] - max(exploitable["frequency"], exploitable["random"]),
        "probe_accuracy": accuracy,
        "probe_chance": 1 / 3,
    }


def model_part(name: str, opponent: str, matches: int, rounds: int) -> dict:
    """The model with hypotheses and without, in forced choice, against one fixed strategy."""
    base = model(name)
    them = scripted(opponent)
    out = {"model": name, "opponent": opponent, "matches": matches}
    for label, policy in (("with_hypotheses", ModelTheoryOfMind(base)), ("plain", base)):
        me = SeatSpec(policy, label, mode="choose")
        episodes = play(me, them, matches, rounds)
        metrics = probe(episodes, {label: me, opponent: them}, lambda game: {"rounds": rounds})
        out[label] = {"return": results_against(episodes, label)["return"], "probe_accuracy": metrics[f"probe/{label}/accuracy"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--matches", type=int, default=100, help="matches per pairing, half in each seat")
    parser.add_argument("--rounds", type=int, default=10, help="rounds a match")
    parser.add_argument("--model", help="also the model-backed player with this model (tiny, smollm2-135m, hf:…)")
    parser.add_argument("--model-opponent", default="cycle", choices=list(STRATEGIES))
    parser.add_argument("--model-matches", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="a few short matches, the tiny model included")
    args = parser.parse_args()
    if args.smoke:
        args.matches, args.rounds, args.model, args.model_matches = 4, 3, args.model or "tiny", 1
    start = time.perf_counter()
    report = {"game": GAME, "rounds": args.rounds, "matches": args.matches, **scripted_part(args.matches, args.rounds)}
    if args.model:
        report["model_backed"] = model_part(args.model, args.model_opponent, args.model_matches, args.rounds)
    report["seconds"] = time.perf_counter() - start
    print(json.dumps(report))


if __name__ == "__main__":
    main()
