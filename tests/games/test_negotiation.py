"""Simple negotiation: offers parsed from free text, trades, and general-sum rewards."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import games
from games.negotiation import HeuristicPlayer, SimpleNegotiation, read_move, worth
from games.play import RandomPlayer, play_match


def rules_with(inventories, values, turns=10):
    rules = SimpleNegotiation(np.random.default_rng(0), turns=turns)
    rules.inventories, rules.start, rules.values = list(inventories), list(inventories), list(values)
    return rules


@pytest.mark.parametrize(
    "text, kind, give, get",
    [
        ("[Offer: 3 Wood -> 2 Gold]", "offer", (3, 0), (0, 2)),
        ("OFFER 2 wood and 1 gold for 5 wood.", "offer", (2, 1), (5, 0)),
        ("offer 1 gold in exchange for 4 wood", "offer", (0, 1), (4, 0)),
        ("Accept!", "accept", None, None),
        ("  reject ", "deny", None, None),
        ("**pass**", "pass", None, None),
    ],
)
def test_read_move(text, kind, give, get):
    got_kind, offer = read_move(text)
    assert got_kind == kind
    if offer is not None:
        assert (offer.give, offer.get) == (give, get)


@pytest.mark.parametrize(
    "text",
    ["Hmm, offer 1 wood for 1 gold... actually I accept.", "I reject that", "Let me pass this turn",
     "I will not accept", "I OFFER 2 wood and 1 gold for 5 wood"],
)  # fmt: skip
def test_text_that_mentions_a_move_is_not_read_as_one(text):
    assert read_move(text) is None
    assert not rules_with([(5, 5), (8, 8)], [(1, 2), (2, 1)]).parse(text).valid


def test_lenient_parsing_reads_one_named_move_and_refuses_two():
    rules = rules_with([(5, 5), (8, 8)], [(1, 2), (2, 1)])
    assert rules.parse("Let me pass this turn", lenient=True).move == "pass"
    assert rules.parse("I think offer 1 wood for 2 gold is fair", lenient=True).move == "offer 1 wood for 2 gold"
    two = rules.parse("offer 1 wood for 1 gold, or else I pass", lenient=True)
    assert not two.valid and "2 different moves" in two.reason


@pytest.mark.parametrize(
    "text, reason",
    [
        ("I want gold", "not a move"),
        ("accept", "no pending offer"),
        ("offer 20 wood for 1 gold", "have only 5"),
        ("offer 1 wood for 9 gold", "opponent has only 8"),
        ("offer 1 wood for 1 wood", "same resource"),
        ("offer 0 wood for 1 gold", "give something"),
    ],
)
def test_invalid_moves_say_why(text, reason):
    rules = rules_with([(5, 5), (8, 8)], [(1, 2), (2, 1)])
    parsed = rules.parse(text)
    assert not parsed.valid and reason in parsed.reason


def test_accepted_trade_is_general_sum():
    # Seat 0 values gold more, seat 1 values wood more: trading 3 wood for 2 gold helps both.
    rules = rules_with([(10, 10), (10, 10)], [(1, 5), (5, 1)], turns=2)
    assert rules.parse("offer 3 wood for 2 gold").move == "offer 3 wood for 2 gold"
    rules.apply("offer 3 wood for 2 gold")
    earned = rules.apply("accept")
    assert rules.inventories == [(7, 12), (13, 8)]
    assert earned == [-3 + 10, 15 - 2]  # both gain: 7 and 13
    assert rules.to_move is None


def test_counter_offer_replaces_the_pending_one():
    rules = rules_with([(10, 10), (10, 10)], [(1, 5), (5, 1)])
    rules.apply("offer 3 wood for 2 gold")
    rules.apply("offer 1 gold for 5 wood")
    assert rules.pending.give == (0, 1) and rules.pending.get == (5, 0)
    rules.apply("deny")
    assert rules.pending is None


@given(seed=st.integers(0, 2**32 - 1))
def test_heuristic_never_loses_value(seed):
    # It accepts only gains and offers only gains, so whatever the opponent does it ends >= 0.
    env = games.make("simple_negotiation")
    result = play_match(env, {"player_0": HeuristicPlayer(), "player_1": RandomPlayer()}, seed)
    assert result.returns["player_0"] >= 0
    assert not result.invalid


def test_rewards_are_value_changes():
    env = games.make("simple_negotiation")
    result = play_match(env, {"player_0": HeuristicPlayer(), "player_1": HeuristicPlayer()}, 11)
    rules = env.unwrapped.rules
    for seat in (0, 1):
        change = worth(rules.inventories[seat], rules.values[seat]) - worth(rules.start[seat], rules.values[seat])
        assert result.returns[f"player_{seat}"] == change


def test_only_own_valuations_are_shown():
    env = games.make("simple_negotiation")
    env.reset(seed=3)
    rules = env.unwrapped.rules
    assert rules.values[0] != rules.values[1], "seed 3 must deal different valuations"
    prompt = env.observe("player_0")["prompt"]
    assert f"wood {rules.values[0][0]}, gold {rules.values[0][1]}" in prompt
    assert f"wood {rules.values[1][0]}, gold {rules.values[1][1]}" not in prompt
