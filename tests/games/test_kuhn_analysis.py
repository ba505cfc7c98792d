"""Golden values for the exact Kuhn analysis, each with its source."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from games import kuhn_analysis as ka


@pytest.mark.parametrize("alpha", [Fraction(0), Fraction(1, 12), Fraction(1, 6), Fraction(1, 3)])
def test_equilibrium_family_value_and_zero_exploitability(alpha):
    # -1/18 is the game value for the first player under every equilibrium:
    # https://en.wikipedia.org/wiki/Kuhn_poker
    strategy = ka.nash(alpha)
    assert ka.first_player_value(strategy) == Fraction(-1, 18)
    assert ka.exploitability(strategy) == 0


def test_uniform_random_nash_conv():
    # 11/12, as in OpenSpiel's exploitability_test.py for uniform play in Kuhn poker.
    assert ka.nash_conv(ka.uniform()) == Fraction(11, 12)
    assert float(ka.exploitability(ka.uniform())) == pytest.approx(0.4583, abs=1e-4)


def test_always_fold_nash_conv():
    # 2: a best response bets everything into a player who always folds (OpenSpiel's tests).
    assert ka.nash_conv(ka.always_fold()) == 2


def test_best_response_table():
    # Against always-bet, worked by hand over the 6 deals, from the second player's side:
    #   K: calls, +2 in both deals                                  -> +4
    #   Q: cannot tell J (+2 on a call) from K (-2): calling nets 0, folding -2 -> calls, 0
    #   J: folds, -1 in both deals                                   -> -2
    # (4 + 0 - 2) / 6 = 1/3. A best response that could see the card would get 1/2: the
    # information-set constraint is what this checks.
    assert ka.best_response_value(ka.always_bet(), seat=1) == Fraction(1, 3)


def test_missing_information_sets_are_named():
    with pytest.raises(ValueError, match="Kcb"):
        ka.first_player_value({k: 0 for k in ka.INFOSETS if k != "Kcb"})


def test_alpha_outside_the_family_is_refused():
    with pytest.raises(ValueError, match=r"\[0, 1/3\]"):
        ka.nash(Fraction(1, 2))


probabilities = st.fractions(min_value=0, max_value=1, max_denominator=12)


@given(st.fixed_dictionaries({k: probabilities for k in ka.INFOSETS}))
def test_properties_of_any_strategy(strategy):
    value = ka.first_player_value(strategy)
    # A best response does at least as well as the strategy's own play, in each seat...
    assert ka.best_response_value(strategy, 0) >= value
    assert ka.best_response_value(strategy, 1) >= -value
    # ...so NashConv is non-negative, and nobody can do better than the equilibrium's guarantee.
    assert ka.nash_conv(strategy) >= 0
    assert ka.best_response_value(strategy, 0) >= Fraction(-1, 18)
    assert ka.best_response_value(strategy, 1) >= Fraction(1, 18)


strategies = st.fixed_dictionaries({k: probabilities for k in ka.INFOSETS})


@given(st.lists(strategies, min_size=1, max_size=4), strategies)
def test_the_average_policy_is_worth_the_mean_of_its_members(members, opponent):
    """Against any opponent, in either seat: the average policy mixes whole strategies."""
    avg = ka.average(members)
    n = len(members)
    assert ka.first_player_value(ka.combine(avg, opponent)) == sum(
        ka.first_player_value(ka.combine(s, opponent)) for s in members
    ) / n
    assert ka.first_player_value(ka.combine(opponent, avg)) == sum(
        ka.first_player_value(ka.combine(opponent, s)) for s in members
    ) / n


@given(st.lists(st.tuples(strategies, st.fractions(0, 5)), min_size=1, max_size=4), strategies)
def test_a_weighted_mixture_is_worth_the_weighted_mean_of_its_members(weighted, opponent):
    """A meta-strategy mixture (PSRO's Nash over the population) is exact too."""
    members, weights = [s for s, _ in weighted], [w for _, w in weighted]
    if not sum(weights):
        with pytest.raises(ValueError, match="weight"):
            ka.average(members, weights)
        return
    mix, total = ka.average(members, weights), sum(weights)
    for seat_value in (lambda s: ka.combine(s, opponent), lambda s: ka.combine(opponent, s)):
        expected = sum(w * ka.first_player_value(seat_value(s)) for s, w in weighted) / total
        assert ka.first_player_value(seat_value(mix)) == expected


def test_averaging_equilibria_stays_an_equilibrium():
    assert ka.exploitability(ka.average([ka.nash(Fraction(0)), ka.nash(Fraction(1, 3))])) == 0
    assert ka.average([ka.uniform()]) == ka.uniform()


def test_reach_of_the_equilibrium():
    """With α = 1/6 the first player bets J 1/6 of the time, K 1/2, Q never: 1/3 of hands open
    each card; facing a bet (only J or K bets) a Q sees (1/6 · 1/6 + 1/6 · 1/2) = 1/9 of hands."""
    reached = ka.reach(ka.nash(Fraction(1, 6)))
    assert all(reached[card] == Fraction(1, 3) for card in "JQK")
    assert reached["Qb"] == Fraction(1, 9)
    assert reached["Jb"] == Fraction(1, 6) * (Fraction(0) + Fraction(1, 2))  # Q never bets, K half the time
    # After check-bet: J checks 5/6, and the second seat bets its Q never, its K always.
    assert reached["Jcb"] == Fraction(5, 6) * Fraction(1, 6) * (0 + 1)


@given(strategy=st.fixed_dictionaries({k: st.fractions(0, 1) for k in ka.INFOSETS}))
def test_reach_sums_to_the_chance_of_each_turn(strategy):
    """Every hand opens at a first-player set, then meets the second player's (after c or b), and
    only check-bet hands return to the first player."""
    reached = ka.reach(strategy)
    assert sum(reached[k] for k in ka.FIRST_INFOSETS[:3]) == 1
    assert sum(reached[k] for k in ka.SECOND_INFOSETS) == 1
    check_bet = sum(Fraction(1, 6) * (1 - strategy[a]) * strategy[b + "c"] for a in "JQK" for b in "JQK" if a != b)
    assert sum(reached[k] for k in ka.FIRST_INFOSETS[3:]) == check_bet
