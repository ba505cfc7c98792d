"""Kuhn poker rules by scripted hands, multi-hand scoring, and the scripted strategies in play."""

import numpy as np
import pytest

import games
from games import kuhn_analysis as ka
from games.kuhn import KuhnPoker, StrategyPlayer
from games.play import play_match


def hand(cards, moves, rounds=1):
    rules = KuhnPoker(np.random.default_rng(0), rounds=rounds)
    rules.cards = list(cards)
    earned = [0.0, 0.0]
    for move in moves:
        earned = rules.apply(move)
    return rules, earned


@pytest.mark.parametrize(
    "cards, moves, earned",
    [
        ("KJ", ["check", "check"], [1, -1]),  # showdown for the antes
        ("JK", ["check", "check"], [-1, 1]),
        ("QK", ["bet", "fold"], [1, -1]),  # the bettor takes the antes
        ("QK", ["bet", "call"], [-2, 2]),  # showdown for antes and bets
        ("KQ", ["check", "bet", "call"], [2, -2]),
        ("KQ", ["check", "bet", "fold"], [-1, 1]),
    ],
)
def test_scripted_hands(cards, moves, earned):
    rules, got = hand(cards, moves)
    assert got == earned
    assert rules.to_move is None


def test_legal_moves_and_information_sets():
    rules, _ = hand("QK", [])
    assert rules.legal_moves() == ["check", "bet"]
    assert rules.information_set(0) == "Q"
    rules.apply("check")
    assert rules.information_set(1) == "Kc"
    rules.apply("bet")
    assert rules.legal_moves() == ["fold", "call"]
    assert rules.information_set(0) == "Qcb"


def test_multi_hand_match_alternates_first_player_and_scores_total_chips():
    env = games.make("kuhn_poker", rounds=3)
    env.reset(seed=5)
    rules = env.unwrapped.rules
    firsts, total = [], {"player_0": 0.0, "player_1": 0.0}
    while env.agents:
        agent = env.agent_selection
        total[agent] += env._cumulative_rewards[agent]
        if env.terminations[agent]:
            env.step(None)
            continue
        if not rules.actions:
            firsts.append(agent)
        env.step(env.action_of("check"))  # check-check: every hand goes to showdown for 1
    assert firsts == ["player_0", "player_1", "player_0"]
    assert total["player_0"] == sum(h["won"][0] for h in rules.past) == rules.chips[0]
    assert total["player_0"] + total["player_1"] == 0


def test_showdown_cards_are_shown_in_later_hands_only():
    env = games.make("kuhn_poker", rounds=2)
    env.reset(seed=1)
    rules = env.unwrapped.rules
    theirs = rules.cards[1]
    assert "opponent showed" not in env.observe("player_0")["prompt"]
    env.step(env.action_of("check"))
    env.step(env.action_of("check"))
    assert f"opponent showed {theirs}" in env.observe("player_0")["prompt"]


@pytest.mark.slow
@pytest.mark.parametrize("style", ["always_bet", "never_bluff"])
def test_nash_beats_exploitable_styles_as_the_exact_analysis_says(style):
    nash, other = ka.nash(), getattr(ka, style)()
    # Per hand, averaged over both seats: (u(nash first, style second) - u(style first, nash second)) / 2.
    exact = (ka.first_player_value(ka.combine(nash, other)) - ka.first_player_value(ka.combine(other, nash))) / 2
    assert exact > 0
    # A 2-hand match deals the Nash player one hand in each seat: its expected return is 2 * exact.
    env = games.make("kuhn_poker", rounds=2)
    players = {"player_0": StrategyPlayer(nash), "player_1": StrategyPlayer(other)}
    returns = np.array([play_match(env, players, seed).returns["player_0"] for seed in range(6000)])
    stderr = returns.std(ddof=1) / np.sqrt(len(returns))
    assert abs(returns.mean() - 2 * float(exact)) < 4 * stderr, (returns.mean(), 2 * float(exact), stderr)


def test_strategy_player_follows_pure_strategies():
    env = games.make("kuhn_poker")
    players = {"player_0": StrategyPlayer(ka.always_bet()), "player_1": StrategyPlayer(ka.always_fold())}
    for seed in range(10):
        result = play_match(env, players, seed)
        assert [env.unwrapped.move_names[a] for _, a in result.moves] == ["bet", "fold"]
        assert result.returns == {"player_0": 1.0, "player_1": -1.0}
