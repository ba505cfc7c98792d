"""Scripted players and a human at the terminal, behind the batched :class:`~marl.policy.Policy`.

Both read the live game from the request (``env``, ``agent``) rather than the prompt. A scripted
player answers with its move's name, which the seat's role parses like any model output; scoring
gives its chosen move log-prob 0 and every other candidate -inf (it is deterministic given its
seed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from games.play import Player
from marl.policy import Request, Response
from roles.seat import extract_answer


def move_text(env, action) -> str:
    """An env action as the move's name (finite games) or its text (free-text games)."""
    return action if isinstance(action, str) else env.move_names[int(action)]


def _one_hot(move: str, candidates: Sequence[str]) -> list[Response]:
    """Log-prob 0 for the candidate that writes ``move``, -inf for the rest."""
    return [
        Response(c, logprobs=[0.0 if (extract_answer(c) or c).strip() == move else -math.inf], finish_reason="scored")
        for c in candidates
    ]


class ScriptedPolicy:
    """A scripted player from ``games`` (random, minimax, Kuhn strategies, heuristics)."""

    def __init__(self, name: str, make_player: Callable[[], Player]):
        self.name = name
        self.player = make_player()

    def _move(self, request: Request) -> str:
        rng = np.random.default_rng(request.seed)
        return move_text(request.env, self.player.act(request.env, request.agent, rng))

    def act(self, requests: Sequence[Request]) -> list[Response]:
        return [Response(self._move(r), finish_reason="scripted") for r in requests]

    def score(self, requests: Sequence[Request], candidates: Sequence[Sequence[str]]) -> list[list[Response]]:
        return [_one_hot(self._move(r), options) for r, options in zip(requests, candidates)]

    def learn(self, outcomes: list[dict]) -> None:
        """Players that adapt (task forge's curricula and executors) learn from their matches' outcomes."""
        if hasattr(self.player, "learn"):
            self.player.learn(outcomes)

    def state_dict(self) -> dict:
        return self.player.state_dict() if hasattr(self.player, "state_dict") else {}

    def load_state_dict(self, state: dict) -> None:
        if hasattr(self.player, "load_state_dict"):
            self.player.load_state_dict(state)


class HumanPolicy:
    """A person at the terminal: shown the observation and legal moves, asked for a move."""

    name = "human"

    def __init__(self, ask: Callable[[str], str] = input, show: Callable[[str], None] = print):
        self.ask, self.show = ask, show

    def act(self, requests: Sequence[Request]) -> list[Response]:
        responses = []
        for r in requests:
            self.show(r.shown)
            try:
                answer = self.ask(f"{r.agent}, your move: ")
            except EOFError:  # input closed: an empty answer, handled like any invalid move
                answer = ""
            responses.append(Response(answer, finish_reason="human"))
        return responses

    def score(self, requests: Sequence[Request], candidates: Sequence[Sequence[str]]) -> list[list[Response]]:
        return [_one_hot(r.text.strip(), options) for r, options in zip(self.act(requests), candidates)]
