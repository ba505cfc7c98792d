"""Any PettingZoo AEC env with ``Discrete`` actions, served as a text game.

``games.make("classic/connect_four-v3")`` wraps ``pettingzoo.make("aec", "classic/connect_four-v3")``:
the agents, rewards, turn order, seeding and illegal-move handling stay the inner env's (classic
envs end the match at an illegal move with -1 for the offender); the observation becomes
``{"prompt": text, "action_mask": int8[K]}`` so an LLM can play, and moves get names.

A :class:`Renderer` per env family gives the rules text, the move names and the state as text;
envs without one get a generic fallback: moves ``action 0`` … ``action K-1`` and the raw
observation printed as an array. Add a renderer to ``RENDERERS`` to make a new env readable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
import pettingzoo
from pettingzoo.utils.wrappers import BaseWrapper

from games.core import PROMPT_MAX_CHARS, FreeText, Parsed, match_move


@dataclass(frozen=True)
class Renderer:
    rules_text: str
    moves: tuple[str, ...]  # names of actions 0, 1, …; the first K are used
    state: Callable[[Any, int], str]  # (inner observation without the mask, number of actions) -> text


def _connect_four_state(obs: np.ndarray, k: int) -> str:
    # (6, 7, 2): plane 0 holds the observing player's pieces, plane 1 the opponent's; row 0 is the top.
    rows = [" ".join("X" if me else "O" if them else "." for me, them in row) for row in obs]
    return "Board (X = you, O = opponent):\n1 2 3 4 5 6 7\n" + "\n".join(rows)


RPS_NAMES = ("rock", "paper", "scissors", "lizard", "spock")


def _rps_state(obs: Any, k: int) -> str:
    last = int(obs)  # Discrete(k + 1): the opponent's previous move, or k before the first round
    return f"Opponent's previous move: {RPS_NAMES[last] if last < k else 'none yet'}."


def _leduc_state(obs: np.ndarray, k: int) -> str:
    # (36,): one-hot own card J/Q/K [0:3], public card [3:6], own chips 0-14 [6:21], opponent's [21:36].
    cards = "JQK"
    card = cards[int(np.argmax(obs[0:3]))]
    public = cards[int(np.argmax(obs[3:6]))] if obs[3:6].any() else "not dealt yet"
    return (
        f"Your card: {card}. Public card: {public}.\n"
        f"Chips in the pot: you {int(np.argmax(obs[6:21]))}, opponent {int(np.argmax(obs[21:36]))}."
    )


RENDERERS: dict[str, Renderer] = {
    "classic/connect_four": Renderer(
        "You are playing Connect Four on a 6-row, 7-column board. Players take turns dropping a piece"
        " into a column (1-7); it falls to the lowest empty cell. Four of your pieces in a row,"
        " column or diagonal wins (+1; the opponent gets -1). A full board is a draw.",
        tuple(f"column {i + 1}" for i in range(7)),
        _connect_four_state,
    ),
    "classic/rps": Renderer(
        "You are playing repeated rock-paper-scissors. Rock beats scissors, scissors beats paper,"
        " paper beats rock. Each round both players choose; the winner gets +1, the loser -1.",
        RPS_NAMES,
        _rps_state,
    ),
    "classic/leduc_holdem": Renderer(
        "You are playing Leduc hold'em: a deck of two each of J, Q, K; one private card each, two"
        " betting rounds (raises of 2, then 4, at most two per round), and one public card after"
        " the first round. A card pairing the public card wins at showdown, else the higher card.",
        ("call", "raise", "fold", "check"),
        _leduc_state,
    ),
}


def _array_state(obs: Any, k: int) -> str:
    return "Observation: " + np.array2string(np.asarray(obs), threshold=10_000)


def _generic_renderer(env_id: str, k: int) -> Renderer:
    return Renderer(
        f"You are playing the PettingZoo environment {env_id}. Choose one of the legal moves.",
        tuple(f"action {i}" for i in range(k)),
        _array_state,
    )


class PettingZooTextEnv(BaseWrapper):
    """Text observations and named moves over a PettingZoo AEC env with ``Discrete`` actions."""

    def __init__(self, env_id: str, **kwargs: Any):
        super().__init__(pettingzoo.make("aec", env_id, **kwargs))
        self.env_id = env_id
        sizes = set()
        for agent in self.env.possible_agents:
            space = self.env.action_space(agent)
            if not isinstance(space, gymnasium.spaces.Discrete):
                raise ValueError(f"{env_id}: text play needs Discrete actions, but {agent} has {space}")
            sizes.add(int(space.n))
        if len(sizes) != 1:
            raise ValueError(f"{env_id}: every agent must have the same number of actions, got {sorted(sizes)}")
        (k,) = sizes
        family = re.sub(r"-v\d+$", "", env_id)
        self.renderer = RENDERERS.get(family) or _generic_renderer(env_id, k)
        if len(self.renderer.moves) < k:
            raise ValueError(f"{env_id}: its renderer names {len(self.renderer.moves)} moves, the env has {k}")
        self.move_names = self.renderer.moves[:k]
        self._move_index = {m: i for i, m in enumerate(self.move_names)}
        obs_space = gymnasium.spaces.Dict(
            {"prompt": FreeText(PROMPT_MAX_CHARS), "action_mask": gymnasium.spaces.Box(0, 1, (k,), np.int8)}
        )
        self._obs_spaces = {a: obs_space for a in self.env.possible_agents}
        self.metadata = {**self.env.metadata, "name": f"text_{self.env.metadata['name']}"}

    def observation_space(self, agent: str) -> gymnasium.Space:
        return self._obs_spaces[agent]

    @property
    def rules_text(self) -> str:
        return self.renderer.rules_text

    def _mask(self, agent: str, raw: Any) -> np.ndarray:
        if agent != self.env.agent_selection or agent not in self.env.agents:
            # Only the agent to move has moves; PettingZoo's rlcard envs (Leduc) hand every agent the mover's mask.
            return np.zeros(len(self.move_names), np.int8)
        if isinstance(raw, dict) and "action_mask" in raw:
            return np.asarray(raw["action_mask"], np.int8)
        if "action_mask" in self.env.infos.get(agent, {}):
            return np.asarray(self.env.infos[agent]["action_mask"], np.int8)
        return np.ones(len(self.move_names), np.int8)  # no mask: every move is legal on one's turn

    def legal_moves(self, agent: str) -> list[str]:
        if agent not in self.env.agents or self.env.terminations[agent] or self.env.truncations[agent]:
            return []
        mask = self._mask(agent, self.env.observe(agent))
        return [self.move_names[i] for i in np.flatnonzero(mask)]

    def parse_move(self, agent: str, text: str, lenient: bool = False) -> Parsed:
        """Read ``agent``'s move from text that is one (``lenient``: or names exactly one)."""
        legal = self.legal_moves(agent)
        if not legal:
            return Parsed(None, f"{agent} has no move to make now")
        return match_move(text, legal, self.move_names, lenient)

    def random_move(self, agent: str, rng: np.random.Generator) -> str | None:
        """A uniformly random legal move for ``agent`` (None when it has none)."""
        legal = self.legal_moves(agent)
        return legal[rng.integers(len(legal))] if legal else None

    def action_of(self, move: str) -> int:
        return self._move_index[move]

    def observe(self, agent: str) -> dict[str, Any]:
        raw = self.env.observe(agent)
        mask = self._mask(agent, raw)
        features = raw["observation"] if isinstance(raw, dict) else raw
        legal = [self.move_names[i] for i in np.flatnonzero(mask)]
        status = "Your legal moves: " + ", ".join(legal) if legal else "No move for you now."
        prompt = f"{self.renderer.rules_text}\n\n{self.renderer.state(features, len(self.move_names))}\n{status}"
        return {"prompt": prompt, "action_mask": mask}
