"""Repeated rock-paper-scissors as a text game: the smallest arena where modelling the opponent
pays. Its one equilibrium (uniform play) scores 0 against anything, so every point won above 0
is won by predicting the opponent (``games.theory_of_mind``).

| Creation      | ``games.make("rock_paper_scissors")``, or ``games.make("rock_paper_scissors", rounds=20)`` |
|---------------|---------------------------------------------------------------------------------|
| Seats         | ``player_0`` (chooses first each round), ``player_1``                             |
| Moves         | ``rock``, ``paper``, ``scissors``; ``Discrete(3)`` in that order                   |
| Observation   | ``prompt``: rules, every finished round (both moves), the score, legal moves; ``action_mask`` |
| Rewards       | +1 / −1 per round won / lost, 0 for a tie, paid as each round ends; zero-sum     |
| Truncation    | none needed: a match is exactly 2 × rounds turns (default 10 rounds)            |

The two choices of a round are simultaneous: ``player_1`` moves after ``player_0`` but is never
shown ``player_0``'s choice before the round ends (the leak test in tests/games/test_rps.py).
Unlike PettingZoo's ``classic/rps``, whose observation is the opponent's last move alone, a seat
sees the whole history, which is what a player (or a model) needs to form hypotheses about the
opponent's strategy.

The fixed strategies in ``STRATEGIES`` are functions of the history from the mover's side
(its own moves, the opponent's): scripted opponents to exploit, and the hypothesis family of
``games.theory_of_mind``'s player.

Version history:
* v1: first version.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from games.core import GameInfo, Rules

MOVES = ("rock", "paper", "scissors")
BEATS = {"rock": "paper", "paper": "scissors", "scissors": "rock"}  # move -> the move that beats it
OPENING = "rock"  # what a history-based strategy plays before there is any history

RULES_TEXT = " ".join("""You are playing repeated rock-paper-scissors against the same opponent. Each round both players
choose rock, paper or scissors at the same time: rock beats scissors, scissors beats paper, paper
beats rock. The winner of a round gets +1 and the loser -1; a tie gives 0. Your reward is the total
over all rounds, so it pays to work out how your opponent plays.""".split())  # one paragraph


def payoff(mine: str, theirs: str) -> int:
    """+1 if ``mine`` beats ``theirs``, −1 if it loses, 0 for a tie."""
    return 1 if BEATS[theirs] == mine else -1 if BEATS[mine] == theirs else 0


def describe_rounds(mine: Sequence[str], theirs: Sequence[str]) -> str:
    """Finished rounds from one seat's side, a line each: what a seat's view and a model's
    hypothesis prompts (``marl.theory_of_mind``) show of the history."""
    outcome = {1: "you won", -1: "you lost", 0: "a tie"}
    return "\n".join(
        f"Round {i + 1}: you {m}, opponent {t}: {outcome[payoff(m, t)]}." for i, (m, t) in enumerate(zip(mine, theirs))
    )


class RockPaperScissors(Rules):
    info = GameInfo("rock_paper_scissors", 1, ("player_0", "player_1"), True, -10.0, 10.0, 20)
    moves = MOVES
    rules_text = RULES_TEXT

    def __init__(self, rng: np.random.Generator, rounds: int = 10):
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {rounds}")
        self.total = rounds
        self.info = replace(RockPaperScissors.info, min_return=-float(rounds), max_return=float(rounds), max_turns=2 * rounds)
        self.played: list[tuple[str, str]] = []  # finished rounds: (player_0's move, player_1's)
        self.pending: str | None = None  # player_0's choice this round, unseen by player_1 until it ends

    @property
    def to_move(self) -> int | None:
        if len(self.played) == self.total:
            return None
        return 0 if self.pending is None else 1

    def legal_moves(self) -> list[str]:
        return list(MOVES)

    def apply(self, move: str) -> list[float]:
        if self.pending is None:
            self.pending = move
            return [0.0, 0.0]
        self.played.append((self.pending, move))
        self.pending = None
        won = payoff(*self.played[-1])
        return [float(won), -float(won)]

    def history(self, seat: int) -> tuple[list[str], list[str]]:
        """The finished rounds as ``seat`` saw them: its own moves, and the opponent's."""
        mine = [r[seat] for r in self.played]
        theirs = [r[1 - seat] for r in self.played]
        return mine, theirs

    def view(self, seat: int) -> str:
        mine, theirs = self.history(seat)
        lines = [describe_rounds(mine, theirs)] if self.played else []
        lines.append(f"Your score so far: {sum(map(payoff, mine, theirs)):+d}.")
        if self.to_move is not None:
            lines.append(f"Round {len(self.played) + 1} of {self.total}.")
            if seat == 0 and self.pending is not None:
                lines.append(f"You chose {self.pending}; waiting for the opponent's choice.")
        return "\n".join(lines)

    def render(self) -> str:
        return f"round {len(self.played) + 1}/{self.total} played {self.played} pending {self.pending}"


Strategy = Callable[[Sequence[str], Sequence[str]], str]  # (own moves, opponent's moves) -> the next move


def _last_or_opening(moves: Sequence[str]) -> str:
    return moves[-1] if moves else OPENING


STRATEGIES: dict[str, Strategy] = {
    **{f"always_{m}": (lambda mine, theirs, m=m: m) for m in MOVES},
    "copycat": lambda mine, theirs: _last_or_opening(theirs),  # plays what the opponent just played
    "beat_last": lambda mine, theirs: BEATS[_last_or_opening(theirs)],  # beats the opponent's last move
    "cycle": lambda mine, theirs: BEATS[mine[-1]] if mine else OPENING,  # rock, paper, scissors, rock, …
}  # fmt: skip


class StrategyPlayer:
    """A fixed strategy of ``STRATEGIES``: deterministic, and exploitable by whoever models it."""

    def __init__(self, name: str):
        self.strategy = STRATEGIES[name]

    def act(self, env, agent: str, rng: np.random.Generator) -> int:
        mine, theirs = env.unwrapped.rules.history(env.possible_agents.index(agent))
        return MOVES.index(self.strategy(mine, theirs))


class FrequencyPlayer:
    """Beats the opponent's most frequent move so far (ties to the earliest in ``MOVES``; at
    random before any history): the usual adaptive baseline, which models the opponent's move
    counts but no strategy, so only an opponent that favours one move loses to it."""

    def act(self, env, agent: str, rng: np.random.Generator) -> int:
        _, theirs = env.unwrapped.rules.history(env.possible_agents.index(agent))
        if not theirs:
            return int(rng.integers(len(MOVES)))
        counts = Counter(theirs)
        favourite = max(MOVES, key=lambda m: counts[m])  # max keeps the first of equals
        return MOVES.index(BEATS[favourite])
