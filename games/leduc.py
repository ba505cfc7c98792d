"""Leduc hold'em (Southey et al. 2005), a harder poker, as a text game.

| Creation      | ``games.make("leduc_holdem")``                                              |
|---------------|-----------------------------------------------------------------------------|
| Seats         | ``player_0`` (acts first in both rounds), ``player_1``                      |
| Moves         | ``fold``, ``check``, ``call``, ``bet``, ``raise``; ``Discrete(5)`` in that order |
| Observation   | ``prompt``: rules, own card, public card once dealt, betting so far; ``action_mask`` |
| Rewards       | chips won or lost at the end of the hand; zero-sum, within ±13              |
| Truncation    | none needed: a hand lasts at most 8 turns                                   |

The deck is two each of J < Q < K. Both players ante 1 and get one private card. Two betting
rounds, each allowing a bet and one raise: bets and raises are 2 chips in the first round and 4 in
the second. After the first round one public card is dealt. At showdown a card pairing the public
card wins; otherwise the higher card wins; equal cards split the pot. A seat never sees the
opponent's card before the showdown.

Version history:
* v1: first version.
"""

from __future__ import annotations

import numpy as np

from games.core import GameInfo, Rules

DECK = "JJQQKK"
RANKS = "JQK"
MOVES = ("fold", "check", "call", "bet", "raise")
BET_SIZE = (2, 4)  # per round
MAX_RAISES = 2  # a bet and one raise per round

RULES_TEXT = " ".join("""You are playing Leduc hold'em. The deck has two each of J < Q < K. Both players ante 1 chip and
get one private card. There are two betting rounds; in each, a player may check or bet when nothing
is owed, and fold, call or raise when facing a bet, with at most one bet and one raise per round.
Bets and raises are 2 chips in round 1 and 4 chips in round 2. After round 1 a public card is
dealt. At showdown, a private card that pairs the public card wins; otherwise the higher card wins;
equal cards split the pot. Your reward is the chips you win or lose.""".split())  # one paragraph: terminals and chat templates wrap it


def hand_strength(card: str, public: str) -> int:
    """Higher is better: a pair beats any high card."""
    return 10 + RANKS.index(card) if card == public else RANKS.index(card)


class LeducHoldem(Rules):
    info = GameInfo("leduc_holdem", 1, ("player_0", "player_1"), True, -13.0, 13.0, 8)
    moves = MOVES
    rules_text = RULES_TEXT

    def __init__(self, rng: np.random.Generator):
        order = rng.permutation(len(DECK))
        self.cards = [DECK[order[0]], DECK[order[1]]]
        self._public = DECK[order[2]]
        self.contributions = [1, 1]
        self.round = 0
        self.actions: list[list[str]] = [[]]  # per round
        self.raises = 0
        self.showdown = False
        self._to_move: int | None = 0

    @property
    def to_move(self) -> int | None:
        return self._to_move

    @property
    def public_card(self) -> str | None:
        return self._public if self.round == 1 else None

    def legal_moves(self) -> list[str]:
        if self.contributions[0] != self.contributions[1]:
            return ["fold", "call", "raise"] if self.raises < MAX_RAISES else ["fold", "call"]
        return ["check", "bet"]

    def apply(self, move: str) -> list[float]:
        seat, other = self._to_move, 1 - self._to_move
        self.actions[self.round].append(move)
        if move == "fold":
            self._to_move = None
            won = float(self.contributions[seat])
            return [-won, won] if seat == 0 else [won, -won]
        if move == "bet" or move == "raise":
            self.contributions[seat] = self.contributions[other] + BET_SIZE[self.round]
            self.raises += 1
        elif move == "call":
            self.contributions[seat] = self.contributions[other]
        round_over = move == "call" or self.actions[self.round] == ["check", "check"]
        if not round_over:
            self._to_move = other
            return [0.0, 0.0]
        if self.round == 0:
            self.round, self.raises, self._to_move = 1, 0, 0
            self.actions.append([])
            return [0.0, 0.0]
        return self._showdown()

    def _showdown(self) -> list[float]:
        self.showdown = True
        self._to_move = None
        s0, s1 = (hand_strength(c, self._public) for c in self.cards)
        stake = float(self.contributions[0])  # equal after a call or two checks
        return [0.0, 0.0] if s0 == s1 else ([stake, -stake] if s0 > s1 else [-stake, stake])

    def view(self, seat: int) -> str:
        who = ["you", "opponent"] if seat == 0 else ["opponent", "you"]
        lines = [f"Your card: {self.cards[seat]}. Public card: {self.public_card or 'not dealt yet'}."]
        for r, actions in enumerate(self.actions):
            said = ", ".join(f"{who[i % 2]} {a}" for i, a in enumerate(actions)) or "none yet"
            lines.append(f"Round {r + 1} betting: {said}.")
        mine, theirs = self.contributions[seat], self.contributions[1 - seat]
        lines.append(f"Chips in the pot: you {mine}, opponent {theirs}.")
        if self.showdown:
            lines.append(f"Showdown: the opponent had {self.cards[1 - seat]}.")
        return "\n".join(lines)

    def render(self) -> str:
        return (
            f"cards {self.cards} public {self._public} round {self.round + 1}"
            f" actions {self.actions} pot {self.contributions}"
        )


PREFERENCES = {  # first legal move in the list is played
    "strong": ("raise", "bet", "call"),
    "medium": ("check", "call"),
    "weak": ("check", "fold"),
}


def hand_class(card: str, public: str | None) -> str:
    """Round 1: K strong, Q medium, J weak. Round 2: a pair strong, K medium, the rest weak."""
    if public is None:
        return {"K": "strong", "Q": "medium", "J": "weak"}[card]
    if card == public:
        return "strong"
    return "medium" if card == "K" else "weak"


class HeuristicPlayer:
    """Bets or raises strong hands, checks or calls medium ones, checks or folds weak ones."""

    def act(self, env, agent: str, rng: np.random.Generator) -> int:
        rules: LeducHoldem = env.unwrapped.rules
        card = rules.cards[env.possible_agents.index(agent)]
        legal = rules.legal_moves()
        move = next(m for m in PREFERENCES[hand_class(card, rules.public_card)] if m in legal)
        return MOVES.index(move)
