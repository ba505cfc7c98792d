"""Scripted players and the reference loop that plays one match with them.

A scripted player is anything with ``act(env, agent, rng) -> action``: it reads what its seat may
know from the env (the rules object's public state or its seat's information set) and returns an
env action (a move index, or text in a free-text game). The batched rollout engine in ``marl``
serves LLM policies; this loop is the slow, obvious twin used for evaluation and sanity checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from pettingzoo import AECEnv


def derive_seed(*parts: int) -> int:
    """An independent, reproducible seed for any tuple of ints (root seed, iteration, match…)."""
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])


def derive_seeds(count: int, *parts: int) -> list[int]:
    """``count`` independent, reproducible seeds for a tuple of ints, in one call: for planning
    thousands of matches at once (``derive_seed`` per match costs microseconds each)."""
    return [int(x) for x in np.random.SeedSequence(list(parts)).generate_state(count)]


class Player(Protocol):
    def act(self, env: AECEnv, agent: str, rng: np.random.Generator) -> Any: ...


class RandomPlayer:
    """Uniform over legal moves (for free-text games, over the game's own move sampler)."""

    def act(self, env: AECEnv, agent: str, rng: np.random.Generator) -> Any:
        return env.action_of(env.random_move(agent, rng))


@dataclass
class MatchResult:
    returns: dict[str, float]  # total reward per seat
    turns: int
    truncated: bool
    moves: list[tuple[str, Any]] = field(default_factory=list)  # (seat, env action) in order
    invalid: list[tuple[str, str]] = field(default_factory=list)  # (seat, reason)


def play_match(env: AECEnv, players: Mapping[str, Player], seed: int) -> MatchResult:
    """Play one match to the end; ``players`` maps every seat to a player.

    The same seed gives the same match: it seeds both the deal (``env.reset``) and the players.
    """
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    returns = dict.fromkeys(env.possible_agents, 0.0)
    result = MatchResult(returns=returns, turns=0, truncated=False)
    for agent in env.agent_iter():
        _, reward, terminated, truncated, info = env.last(observe=False)
        returns[agent] += float(reward)
        if terminated or truncated:
            result.truncated |= truncated
            env.step(None)
            continue
        action = players[agent].act(env, agent, rng)
        result.moves.append((agent, action))
        env.step(action)
        result.turns += 1
        if env.infos.get(agent, {}).get("valid") is False:
            result.invalid.append((agent, env.infos[agent]["reason"]))
    return result
