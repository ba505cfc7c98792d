"""Evaluation of a policy: its exact Kuhn poker strategy and exploitability, and its results
against fixed opponents.

The Kuhn strategy is read with ``score``: at each of the 12 information sets the seat's prompt is
built exactly as in play (the prompt never depends on the opponent's card, which the games' leak
tests check), both legal moves are scored, and the move probabilities are the softmax of their
log-probs at the policy's sampling temperature — the forced-choice policy itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

import games
from games import kuhn_analysis
from games.kuhn import CARDS
from marl.episode import Episode
from marl.policy import Policy, Request, Sampling
from marl.rollout import choice_probabilities
from roles.seat import SeatRole

LETTER_MOVES = {"c": "check", "b": "bet"}


def kuhn_infoset(key: str) -> tuple[Any, str]:
    """A Kuhn env at information set ``key`` (``games.kuhn_analysis``'s names), and the seat to
    move there: its prompt and legal moves are what play shows at that set."""
    card, history = key[0], key[1:]
    seat = len(history) % 2  # the first player acts at "" and "cb", the second at "c" and "b"
    env = games.make("kuhn_poker")
    env.reset(seed=0)
    rules = env.unwrapped.rules
    rules.cards[seat] = card
    rules.cards[1 - seat] = next(c for c in CARDS if c != card)  # unseen by this seat
    for letter in history:
        env.step(env.action_of(LETTER_MOVES[letter]))
    return env, env.possible_agents[seat]


def kuhn_strategy(
    policy: Policy, temperature: float = 1.0, adapter: str | None = None, role: SeatRole = SeatRole("kuhn_poker")
) -> dict[str, float]:
    """Probability of the aggressive move (bet or call) at each information set, ``role`` prompting
    the policy as it plays."""
    states = [kuhn_infoset(key) for key in kuhn_analysis.INFOSETS]
    sampling = Sampling(temperature)
    asked = [
        (Request(env.observe(agent)["prompt"], sampling, adapter, env=env, agent=agent), env.legal_moves(agent))
        for env, agent in states
    ]
    read = strategy_read(policy, asked, role, temperature)
    return {key: float(probs[legal.index("bet" if "bet" in legal else "call")])
            for key, (_, legal), probs in zip(kuhn_analysis.INFOSETS, asked, read)}  # fmt: skip


def strategy_read(
    policy: Policy, asked: Sequence[tuple[Request, Sequence[str]]], role: SeatRole, temperature: float
) -> list[np.ndarray]:
    """The move distribution play draws from at each (request, legal moves) of ``asked``, each
    request's messages the observation ``role`` prompts from: the mean over the role's variants
    (its example turns, drawn uniformly per turn in play), every variant scored in one batched call."""
    variants = role.variants
    prompted = [(replace(r, messages=v.messages(r.messages)), legal) for v in variants for r, legal in asked]
    probs = move_probabilities(policy, prompted, role, temperature)
    n = len(asked)
    return [np.mean([probs[k * n + i] for k in range(len(variants))], axis=0) for i in range(n)]


def move_probabilities(
    policy: Policy, asked: Sequence[tuple[Request, Sequence[str]]], role: SeatRole, temperature: float
) -> list[np.ndarray]:
    """Forced choice's distribution over each request's legal moves, exactly as play draws from it:
    every move scored in one batched call, the softmax of their log-probs at ``temperature``."""
    scored = policy.score([r for r, _ in asked], [[role.format_move(m) for m in legal] for _, legal in asked])
    return [choice_probabilities(row, temperature) for row in scored]


def results_against(episodes: list[Episode], member: str) -> dict[str, float]:
    """Mean return, win, draw and loss rates of ``member`` over matches it played one seat of."""
    rets, wins, draws = [], 0, 0
    for ep in episodes:
        seat = next(s for s, m in ep.members.items() if m == member)
        mine = ep.rewards[seat]
        theirs = max(r for s, r in ep.rewards.items() if s != seat)
        rets.append(mine)
        wins += mine > theirs
        draws += mine == theirs
    n = max(len(rets), 1)
    return {"return": float(np.mean(rets)) if rets else 0.0, "win": wins / n, "draw": draws / n, "loss": 1 - (wins + draws) / n}
