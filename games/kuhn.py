"""Kuhn poker (Kuhn 1950), the standard 3-card game, as a text game.

| Creation      | ``games.make("kuhn_poker")``, or ``games.make("kuhn_poker", rounds=5)``   |
|---------------|---------------------------------------------------------------------------|
| Seats         | ``player_0`` (first to act in hand 1), ``player_1``                         |
| Moves         | ``check``, ``bet``, ``call``, ``fold``; ``Discrete(4)`` in that order         |
| Observation   | ``prompt``: rules, own card, this hand's actions, past hands; ``action_mask`` |
| Rewards       | chips won or lost, paid as each hand ends; zero-sum                       |
| Truncation    | at the turn cap (default 3 per hand, a hand's longest), unfinished hand a draw |

One hand: the deck is J < Q < K; each player antes 1 and gets one card. The first player checks or
bets 1. After a check the second player checks (showdown for the antes, ±1) or bets; a bet is
answered by call (showdown, ±2) or fold (the bettor takes the antes, ±1).

With ``rounds=N`` a match is N hands; the first player alternates and chips carry over, so the
match is scored by total chips, not by who won the last hand (a SPIRAL bug). A seat sees its own
card, never the opponent's, except after a showdown of a finished hand.

Information sets are keyed by the card and this hand's actions as letters (c = check, b = bet):
``"K"``, ``"Kc"``, ``"Kb"``, ``"Kcb"``; ``games.kuhn_analysis`` evaluates strategies over them.

Version history:
* v1: first version.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from games.core import GameInfo, Rules

CARDS = "JQK"
MOVES = ("check", "bet", "call", "fold")
LETTER = {"check": "c", "bet": "b", "call": "c", "fold": "f"}

RULES_TEXT = " ".join("""You are playing Kuhn poker. The deck has three cards: J < Q < K. Each hand, both players ante 1
chip and get one private card. The first player may check or bet 1 chip. After a check, the second
player may check (the higher card wins the 2 antes) or bet 1. Facing a bet, a player may call
(match it; the higher card wins the pot of 4) or fold (the bettor wins the antes). Your reward is
the chips you win or lose.""".split())  # one paragraph: terminals and chat templates wrap it


class KuhnPoker(Rules):
    info = GameInfo("kuhn_poker", 1, ("player_0", "player_1"), True, -2.0, 2.0, 3)
    moves = MOVES

    def __init__(self, rng: np.random.Generator, rounds: int = 1):
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {rounds}")
        self.rng = rng
        self.rounds = rounds
        self.info = replace(KuhnPoker.info, min_return=-2.0 * rounds, max_return=2.0 * rounds, max_turns=3 * rounds)
        self.rules_text = RULES_TEXT
        if rounds > 1:
            self.rules_text += (
                f" The match is {rounds} hands; who acts first alternates each hand, and the match"
                " is scored by total chips."
            )
        self.chips = [0, 0]
        self.past: list[dict] = []  # finished hands, for the history a seat may see
        self.hand = -1
        self._deal()

    def _deal(self) -> None:
        self.hand += 1
        self.cards = [CARDS[i] for i in self.rng.permutation(3)[:2]]
        self.first = self.hand % 2  # seat that acts first this hand
        self.actions: list[str] = []
        self._to_move: int | None = self.first

    @property
    def to_move(self) -> int | None:
        return self._to_move

    def legal_moves(self) -> list[str]:
        return ["fold", "call"] if self.actions and self.actions[-1] == "bet" else ["check", "bet"]

    def history(self) -> str:
        return "".join(LETTER[a] for a in self.actions)

    def information_set(self, seat: int) -> str:
        """Key of ``seat``'s information set: its card and this hand's actions (c/b letters)."""
        return self.cards[seat] + self.history()

    def apply(self, move: str) -> list[float]:
        seat = self._to_move
        self.actions.append(move)
        h = self.history()
        if h in ("cc", "bc", "cbc"):  # showdown: the antes, or antes and bets
            stake = 1 if h == "cc" else 2
            winner = 0 if CARDS.index(self.cards[0]) > CARDS.index(self.cards[1]) else 1
            return self._end_hand(winner, stake, showdown=True)
        if move == "fold":
            return self._end_hand(1 - seat, 1, showdown=False)
        self._to_move = 1 - seat
        return [0.0, 0.0]

    def _end_hand(self, winner: int, stake: int, showdown: bool) -> list[float]:
        won = [float(stake), -float(stake)] if winner == 0 else [-float(stake), float(stake)]
        self.chips = [self.chips[0] + won[0], self.chips[1] + won[1]]
        self.past.append(
            {"cards": list(self.cards), "actions": list(self.actions), "first": self.first,
             "showdown": showdown, "won": won}
        )
        if self.hand + 1 < self.rounds:
            self._deal()
        else:
            self._to_move = None
        return won

    def _describe(self, seat: int, first: int, actions: list[str]) -> str:
        """A hand's actions from ``seat``'s side of the table: "you check, opponent bet"."""
        who = ["you", "opponent"] if first == seat else ["opponent", "you"]
        return ", ".join(f"{who[i % 2]} {a}" for i, a in enumerate(actions)) or "none yet"

    def view(self, seat: int) -> str:
        lines = []
        for n, h in enumerate(self.past):
            shown = f"opponent showed {h['cards'][1 - seat]}" if h["showdown"] else "no showdown"
            lines.append(
                f"Hand {n + 1}: your card {h['cards'][seat]}; {self._describe(seat, h['first'], h['actions'])};"
                f" {shown}; you {'won' if h['won'][seat] > 0 else 'lost'} {abs(h['won'][seat]):g}."
            )
        if self._to_move is not None:
            order = "first" if self.first == seat else "second"
            lines.append(
                f"Hand {self.hand + 1} of {self.rounds}; you act {order}."
                f" Actions this hand: {self._describe(seat, self.first, self.actions)}."
            )
        lines.append(f"Your chips so far: {self.chips[seat]:+g}.")
        if self._to_move is not None:
            # Last, with no full stop: a compact prompt (roles.seat) ends on the card itself.
            lines.append(f"Your card: {self.cards[seat]}")
        return "\n".join(lines)

    def render(self) -> str:
        return (
            f"hand {self.hand + 1}/{self.rounds} cards {self.cards} first player_{self.first}"
            f" actions {self.actions} chips {self.chips}"
        )


class StrategyPlayer:
    """Plays a behaviour strategy: probability of the aggressive move (bet or call) per info set."""

    def __init__(self, strategy: dict[str, float]):
        self.strategy = strategy

    def act(self, env, agent: str, rng: np.random.Generator) -> int:
        rules: KuhnPoker = env.unwrapped.rules
        key = rules.information_set(env.possible_agents.index(agent))
        passive, aggressive = rules.legal_moves()  # (check, bet) or (fold, call)
        move = aggressive if rng.random() < self.strategy[key] else passive
        return MOVES.index(move)
