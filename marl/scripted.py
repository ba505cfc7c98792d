"""Scripted players and a human at the terminal, behind the batched :class:`~marl.policy.Policy`.

Both read the live game from the request (``env``, ``agent``) rather than the prompt. A scripted
player answers with its move's name, which the seat's role parses like any model output; scoring
gives its chosen move log-prob 0 and every other candidate -inf (it is deterministic given its
seed). A human is shown what a person needs: the state (the rules are printed once, by whoever
seats them, and a model's answer-format instructions not at all), what an invalid move costs,
and how many tries are left.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from games.play import Player
from marl.episode import Turn
from marl.policy import Request, Response
from games.formats import extract_answer
from roles.seat import InvalidMoves


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


def invalid_move_costs(rule: InvalidMoves, attempt: int) -> str:
    """What an invalid move does to a seat answering for the ``attempt``-th time (0 = the first),
    in words for the person or log reading it."""
    if rule.kind == "retry" and attempt < rule.retries:
        left = rule.retries - attempt
        return f"an invalid move gets {left} more {'try' if left == 1 else 'tries'}, then forfeits the match"
    if rule.kind == "random_legal":
        return f"an invalid move is replaced by a random legal move, at a penalty of {rule.penalty:+g}"
    return f"{'last try: ' if rule.kind == 'retry' else ''}an invalid move forfeits the match"


class HumanPolicy:
    """A person at the terminal: shown the state and legal moves, told what an invalid move costs
    now, asked for a move.

    ``invalid`` must be the seat's rule (``SeatSpec.invalid``), and :meth:`heard` must hear each of
    the seat's turns (``RolloutEngine(on_turn=...)``), for it to count the tries left: the
    engine's requests do not say which try a turn is."""

    name = "human"

    def __init__(
        self, ask: Callable[[str], str] = input, show: Callable[[str], None] = print, invalid: InvalidMoves = InvalidMoves()
    ):
        self.ask, self.show, self.invalid = ask, show, invalid
        self.attempt: dict[str, int] = {}  # seat -> which try its next answer is (0 = the first)

    def act(self, requests: Sequence[Request]) -> list[Response]:
        responses = []
        for r in requests:
            attempt = self.attempt.get(r.agent, 0)
            if attempt == 0:  # a retry asks about the state just shown
                self.show(f"\n{_state(r)}")
            self.show(f"({invalid_move_costs(self.invalid, attempt)})")
            try:
                answer = self.ask(f"{r.agent}, your move: ")
            except EOFError:  # input closed: an empty answer, handled like any invalid move
                answer = ""
            responses.append(Response(answer, finish_reason="human"))
        return responses

    def heard(self, turn: Turn) -> None:
        """How one of its answers went: an invalid one that the rule retries makes the next a retry."""
        retried = not turn.valid and turn.action is None and self.invalid.kind == "retry" and turn.attempt < self.invalid.retries
        self.attempt[turn.seat] = turn.attempt + 1 if retried else 0

    def score(self, requests: Sequence[Request], candidates: Sequence[Sequence[str]]) -> list[list[Response]]:
        return [_one_hot(r.text.strip(), options) for r, options in zip(self.act(requests), candidates)]


def _state(request: Request) -> str:
    """What a person is shown of a turn: the seat's observation without the rules paragraph that
    opens it (printed once, at the start of the match)."""
    if request.env is None:
        return request.shown
    return request.shown.removeprefix(f"{request.env.rules_text}\n\n")
