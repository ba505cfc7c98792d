"""Shared test helpers: advance a game with a choice sequence, play random matches."""

from __future__ import annotations

import numpy as np

import games
from games.play import RandomPlayer


def random_players(env) -> dict:
    return {a: RandomPlayer() for a in env.possible_agents}


def advance(env, choices: list[int]) -> None:
    """Step a freshly reset env, picking legal move ``c % len(legal)`` for each choice."""
    for c in choices:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            return
        legal = env.legal_moves(agent)
        env.step(env.action_of(legal[c % len(legal)]))


def finite_games() -> list[str]:
    """Games with a move list (our own finite games and the adapted PettingZoo envs)."""
    return [g for g in games.list() if not g.startswith("textarena/") and games.make(g).move_names is not None]


def seeded_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)
