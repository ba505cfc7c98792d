"""Leduc hold'em rules by scripted hands, and the heuristic player."""

import numpy as np
import pytest

import games
from games.leduc import HeuristicPlayer, LeducHoldem, hand_class
from games.play import RandomPlayer, play_match


def hand(cards, public, moves):
    rules = LeducHoldem(np.random.default_rng(0))
    rules.cards, rules._public = list(cards), public
    earned = [0.0, 0.0]
    for move in moves:
        earned = rules.apply(move)
    return rules, earned


@pytest.mark.parametrize(
    "cards, public, moves, earned",
    [
        ("KQ", "J", ["check", "check", "check", "check"], [1, -1]),  # high card, antes only
        ("JK", "J", ["check", "check", "check", "check"], [1, -1]),  # a pair beats a K
        ("QQ", "K", ["check", "check", "check", "check"], [0, 0]),  # equal cards split
        ("KQ", "J", ["bet", "fold"], [1, -1]),  # the folder loses what it put in
        ("KQ", "J", ["bet", "raise", "fold"], [-3, 3]),  # the bettor folds to the raise
        ("QK", "J", ["bet", "call", "bet", "call"], [-7, 7]),  # 1 + 2 + 4 each, to showdown
        ("QK", "Q", ["bet", "raise", "call", "bet", "raise", "call"], [13, -13]),  # the most at stake
    ],
)
def test_scripted_hands(cards, public, moves, earned):
    rules, got = hand(cards, public, moves)
    assert got == earned
    assert rules.to_move is None


def test_a_bet_and_one_raise_per_round():
    rules, _ = hand("KQ", "J", ["bet", "raise"])
    assert rules.legal_moves() == ["fold", "call"]
    rules.apply("call")
    assert rules.round == 1 and rules.to_move == 0
    assert rules.legal_moves() == ["check", "bet"]


def test_public_card_is_shown_after_the_first_round_only():
    rules, _ = hand("KQ", "J", ["check"])
    assert rules.public_card is None and "not dealt yet" in rules.view(0)
    rules.apply("check")
    assert rules.public_card == "J" and "Public card: J" in rules.view(1)


@pytest.mark.parametrize(
    "card, public, cls",
    [("K", None, "strong"), ("Q", None, "medium"), ("J", None, "weak"),
     ("J", "J", "strong"), ("K", "Q", "medium"), ("Q", "K", "weak")],
)  # fmt: skip
def test_heuristic_hand_classes(card, public, cls):
    assert hand_class(card, public) == cls


@pytest.mark.slow
def test_heuristic_beats_random():
    env = games.make("leduc_holdem")
    returns = []
    for seed in range(3000):
        seat = seed % 2
        players = {f"player_{seat}": HeuristicPlayer(), f"player_{1 - seat}": RandomPlayer()}
        returns.append(play_match(env, players, seed).returns[f"player_{seat}"])
    returns = np.array(returns)
    assert returns.mean() - 4 * returns.std(ddof=1) / np.sqrt(len(returns)) > 0
