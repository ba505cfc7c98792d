"""Repeated rock-paper-scissors: rules, the simultaneous round's secrecy, its fixed strategies,
and the scripted theory-of-mind player that models them."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import games
from games.play import play_match
from games.rps import BEATS, MOVES, STRATEGIES, RockPaperScissors, payoff
from games.theory_of_mind import RANDOM, WINDOW, TheoryOfMindPlayer, score_hypotheses

GAME = "rock_paper_scissors"
moves = st.sampled_from(MOVES)


def test_payoff_is_the_cycle_of_beats():
    assert [payoff("paper", "rock"), payoff("rock", "paper"), payoff("scissors", "scissors")] == [1, -1, 0]
    assert all(payoff(BEATS[m], m) == 1 and payoff(m, BEATS[m]) == -1 for m in MOVES)


def test_a_round_pays_when_the_second_choice_is_made():
    rules = RockPaperScissors(np.random.default_rng(0), rounds=2)
    assert rules.apply("rock") == [0.0, 0.0] and rules.to_move == 1
    assert rules.apply("paper") == [-1.0, 1.0] and rules.to_move == 0
    rules.apply("scissors")
    assert rules.apply("paper") == [1.0, -1.0] and rules.to_move is None
    assert rules.history(1) == (["paper", "paper"], ["rock", "scissors"])


@given(before=st.lists(moves, max_size=6).map(lambda m: m[: len(m) // 2 * 2]), first=moves, other=moves)
def test_the_second_seat_never_sees_the_first_seats_choice_of_the_round(before, first, other):
    prompts = []
    for choice in (first, other):
        env = games.make(GAME)
        env.reset(seed=0)
        for move in [*before, choice]:
            env.step(env.action_of(move))
        prompts.append(env.observe("player_1")["prompt"])
    assert prompts[0] == prompts[1]


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_theory_of_mind_beats_every_fixed_strategy_it_models(name):
    """It loses at most the rounds before the evidence singles the strategy out, in either seat."""
    env = games.make(GAME, rounds=20)
    scripted = games.scripted_players(GAME)
    for seat, other in (("player_0", "player_1"), ("player_1", "player_0")):
        result = play_match(env, {seat: TheoryOfMindPlayer(), other: scripted[name]()}, seed=1)
        assert result.returns[seat] >= 16


def test_the_frequency_baseline_loses_to_a_strategy_that_models_it_back():
    env = games.make(GAME, rounds=20)
    scripted = games.scripted_players(GAME)
    result = play_match(env, {"player_0": scripted["frequency"](), "player_1": scripted["beat_last"]()}, seed=0)
    assert result.returns["player_0"] < 0


@settings(max_examples=50)
@given(name=st.sampled_from(list(STRATEGIES)), mine=st.lists(moves, max_size=12))
def test_the_true_strategy_scores_the_whole_window(name, mine):
    """An opponent that plays ``name`` against any sequence of ours is predicted on every move by
    ``name``; the scores are sorted and bounded by the window."""
    theirs: list[str] = []
    for t in range(len(mine)):
        theirs.append(STRATEGIES[name](theirs, mine[:t]))
    scores = score_hypotheses(mine, theirs)
    shown = min(len(theirs), WINDOW)
    assert dict(scores)[name] == shown
    assert [s for _, s in scores] == sorted((s for _, s in scores), reverse=True)
    assert all(0 <= s <= shown for _, s in scores)


def test_with_no_history_it_assumes_nothing():
    assert score_hypotheses([], [])[0][0] == RANDOM
    rng = np.random.default_rng(0)
    env = games.make(GAME)
    env.reset(seed=0)
    picks = {TheoryOfMindPlayer().act(env, "player_0", rng) for _ in range(60)}
    assert picks == {0, 1, 2}  # uniform play, the equilibrium, until the opponent shows a pattern
