"""The theory-of-mind probe: how well each member predicts its opponent's next move.

A recorded match is replayed from its seed (a match is its seed and its moves: the engine's
``env.reset(seed)`` then each turn's action). At every opponent turn, before the move is made,
each other seat's member is asked which move the opponent will make, from what its own seat sees
then and nothing more; its accuracy is the share it got right, logged beside the chance rate
(one over the opponent's legal moves, averaged over the same turns) that a blind guess would get.
Replaying instead of asking during play keeps training's matches exactly as they are, and puts
every prediction of a policy in one batched call.

How a member predicts:

- a model: forced choice among the opponent's legal moves, the likeliest taken, its seat's
  prompt ending on :data:`QUESTION` (one ``score`` call per model for all its predictions);
- a policy with its own ``predict(requests, legal)`` (``marl.theory_of_mind``'s model-backed
  player): that, batched as it likes;
- a scripted player with ``predict(env, agent, rng)`` (``games.theory_of_mind``): its best
  hypothesis;
- any other scripted player (random, minimax…) makes no prediction, and gets no metric.

Games without a move list (task forge, free text) are not probed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

import games
from games.play import derive_seed
from marl.episode import Episode
from marl.evaluate import move_probabilities
from marl.hf import HFPolicy
from marl.members import prefix
from marl.policy import Request
from marl.rollout import SeatSpec
from marl.scripted import ScriptedPolicy
from roles import role_for

PROBE_SEEDS = 7 * 10**6  # a prediction's draws are apart from play's: the opponent's own seed would foretell its draw
QUESTION = "Your opponent moves next; its legal moves: {moves}. Which move will your opponent make?"


@dataclass
class Asked:
    """One prediction asked of a member: the match as it stood at the opponent's turn."""

    member: str
    game: str
    env: Any  # the match just before the opponent's move
    agent: str  # the predicting seat
    legal: list[str]  # the opponent's legal moves
    actual: str  # the move the opponent made
    seed: int  # for a prediction that draws (a uniform hypothesis)


@cache
def probed(game: str) -> bool:
    """Whether ``game`` is probed: one with a move list to predict from (never a graph's seats,
    which write free text)."""
    return not game.startswith("graph/") and games.make(game).move_names is not None


def _skip_dead(env) -> None:
    while env.agents and (env.terminations[env.agent_selection] or env.truncations[env.agent_selection]):
        env.step(None)


def _check(episode: Episode, env, seat: str, action: str) -> None:
    if env.agent_selection != seat or action not in env.legal_moves(seat):
        raise RuntimeError(f"{episode.match_id}: the replay diverged from the match as played ({seat} {action})")


def replayed(episode: Episode, game_kwargs: dict, moves: Sequence[tuple[str, str]]) -> Any:
    """A fresh env of ``episode``'s match after its first ``moves`` (seat, move): each prediction
    gets a match of its own, since PettingZoo's classic envs cannot be copied in the middle of one."""
    env = games.make(episode.game, **game_kwargs)
    env.reset(seed=episode.seed)
    _skip_dead(env)
    for seat, move in moves:
        _check(episode, env, seat, move)
        env.step(env.action_of(move))
        _skip_dead(env)
    return env


def replay(episode: Episode, game_kwargs: dict) -> Iterator[Asked]:
    """Every prediction ``episode`` asks of its members: each seat's, at each turn of another seat
    that sent a move to the game (a retry sends none; a forfeit ends the match)."""
    moves = [(t.seat, t.action, t.index) for t in episode.turns if t.action is not None]
    for k, (mover, move, index) in enumerate(moves):
        env = replayed(episode, game_kwargs, [m[:2] for m in moves[:k]])
        _check(episode, env, mover, move)
        legal = env.legal_moves(mover)
        seed = derive_seed(episode.seed, index, PROBE_SEEDS)
        for seat in env.agents:
            if seat != mover:
                yield Asked(episode.members[seat], episode.game, env, seat, legal, move, seed)


def predicts(seat: SeatSpec) -> bool:
    """Whether the player of ``seat`` can be asked for a prediction (see the module docstring)."""
    policy = seat.policy
    scripted = isinstance(policy, ScriptedPolicy) and hasattr(policy.player, "predict")
    return scripted or hasattr(policy, "predict") or isinstance(policy, HFPolicy)


def question(asked: Asked, seat: SeatSpec) -> Request:
    """The predicting seat's prompt at the opponent's turn, asking for the opponent's move."""
    observation = asked.env.observe(asked.agent)["prompt"]
    text = f"{observation}\n{QUESTION.format(moves=', '.join(asked.legal))}"
    role = role_for(asked.game, asked.agent, seat.compact)
    return Request(role.messages(text), seat.sampling, seat.adapter, asked.seed, asked.env, asked.agent)


def predictions(asked: Sequence[Asked], seats: dict[str, SeatSpec]) -> list[str]:
    """What the members predict at each of ``asked``, all played by one policy (its LoRA
    members included) with one move format, in one batched call."""
    seat = seats[asked[0].member]
    policy = seat.policy
    if isinstance(policy, ScriptedPolicy):
        return [seats[a.member].policy.player.predict(a.env, a.agent, np.random.default_rng(a.seed)) for a in asked]
    requests = [question(a, seats[a.member]) for a in asked]
    if hasattr(policy, "predict"):
        return policy.predict(requests, [a.legal for a in asked])
    role = role_for(asked[0].game, asked[0].agent, seat.compact)  # moves are written alike in every seat
    probs = move_probabilities(policy, [(r, a.legal) for r, a in zip(requests, asked)], role, 1.0)
    return [a.legal[int(np.argmax(p))] for a, p in zip(asked, probs)]


def probe(episodes: Sequence[Episode], seats: dict[str, SeatSpec], game_kwargs: Callable[[str], dict]) -> dict[str, float]:
    """Each predicting member's accuracy at its opponents' moves over ``episodes`` (with the
    chance rate and the number of predictions), as ``probe/<member>/…`` metrics; ``seats``
    names every member's player, ``game_kwargs(game)`` what makes the games as they were played."""
    groups: dict[tuple[int, bool], list[Asked]] = defaultdict(list)  # (policy, compact) -> its predictions
    for episode in episodes:
        if probed(episode.game):
            for a in replay(episode, game_kwargs(episode.game)):
                seat = seats[a.member]
                if predicts(seat):
                    groups[id(seat.policy), seat.compact].append(a)
    hits: dict[str, list[bool]] = defaultdict(list)
    chance: dict[str, list[float]] = defaultdict(list)
    for group in groups.values():
        for a, predicted in zip(group, predictions(group, seats)):
            hits[a.member].append(predicted == a.actual)
            chance[a.member].append(1 / len(a.legal))
    out = {}
    for member in hits:
        out[f"probe/{prefix(member)}accuracy"] = float(np.mean(hits[member]))
        out[f"probe/{prefix(member)}chance"] = float(np.mean(chance[member]))
        out[f"probe/{prefix(member)}predictions"] = float(len(hits[member]))
    return out


class Probe:
    """The probe as the trainer runs it, every iteration: on the first ``matches`` probed matches
    of the iteration (``[probe]``)."""

    def __init__(self, matches: int):
        self.matches = matches

    def __call__(
        self, episodes: Sequence[Episode], players: Callable[[set[str]], dict[str, Any]], game_kwargs: Callable[[str], dict]
    ) -> dict[str, float]:
        """``players(names)``: the run's members by name (each with its ``seat``); ``game_kwargs(game)``:
        what the run makes ``game`` with."""
        chosen = [ep for ep in episodes if probed(ep.game)][: self.matches]
        members = players({name for ep in chosen for name in ep.members.values()})
        return probe(chosen, {name: member.seat for name, member in members.items()}, game_kwargs)
