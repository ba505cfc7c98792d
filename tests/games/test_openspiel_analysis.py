"""Exploitability of move distributions through OpenSpiel, checked against our own exact Kuhn
analysis and OpenSpiel's published values."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyspiel")

import games  # noqa: E402 - after the skip: the analysis needs open_spiel
from games import kuhn_analysis as ka  # noqa: E402
from games import openspiel_analysis as oa  # noqa: E402
from games.core import LEGAL_MOVES  # noqa: E402
from open_spiel.python import policy as os_policy  # noqa: E402
from open_spiel.python.algorithms import cfr  # noqa: E402

KUHN = games.make("openspiel/kuhn_poker")
LEDUC = games.make("openspiel/leduc_poker")

probability = st.floats(0, 1)
kuhn_strategies = st.fixed_dictionaries({key: probability for key in ka.INFOSETS})
# Probabilities on a grid: reach probabilities are then 0 exactly or far from it (OpenSpiel's
# aggregator adds 1e-40 to every action, which only a reach near 1e-40 would notice).
grid_strategies = st.fixed_dictionaries({key: st.integers(0, 8).map(lambda k: k / 8) for key in ka.INFOSETS})


def test_kuhn_golden_values():
    assert oa.exploitability(KUHN.game, oa.kuhn_policy(ka.uniform())) == pytest.approx(11 / 24, abs=1e-12)
    assert oa.nash_conv(KUHN.game, oa.kuhn_policy(ka.uniform())) == pytest.approx(11 / 12, abs=1e-12)
    for alpha in (Fraction(0), Fraction(1, 6), Fraction(1, 3)):
        assert oa.exploitability(KUHN.game, oa.kuhn_policy(ka.nash(alpha))) == pytest.approx(0, abs=1e-12)


@settings(deadline=None)
@given(strategy=kuhn_strategies)
def test_kuhn_exploitability_matches_our_exact_analysis(strategy):
    ours = ka.exploitability(strategy)
    theirs = oa.exploitability(KUHN.game, oa.kuhn_policy(strategy))
    assert abs(ours - theirs) < 1e-9


@settings(deadline=None)
@given(strategy=kuhn_strategies)
def test_kuhn_reach_matches_openspiels(strategy):
    theirs = oa.reach(KUHN.game, oa.kuhn_policy(strategy))
    for infoset, ours in ka.reach(strategy).items():
        key = str("JQK".index(infoset[0])) + infoset[1:].replace("c", "p")
        assert abs(float(ours) - theirs.get(key, 0.0)) < 1e-9


def _reached(strategies, weights, infoset: str) -> bool:
    """Whether the first seat's own moves reach ``infoset`` under some strategy of the mixture."""
    return not infoset.endswith("cb") or sum(w * (1 - s[infoset[0]]) for s, w in zip(strategies, weights)) > 0


@settings(deadline=None)
@given(first=grid_strategies, second=grid_strategies, weight=st.integers(1, 9))
def test_kuhn_mixture_is_our_reach_weighted_average(first, second, weight):
    weights = [weight / 10, 1 - weight / 10]
    mixed = oa.mixture(KUHN.game, [oa.kuhn_policy(first), oa.kuhn_policy(second)], weights)
    average = ka.average([first, second], weights)
    expected = oa.kuhn_policy(average)
    for infoset in ka.INFOSETS:
        if _reached([first, second], weights, infoset):  # elsewhere each side picks its own filler
            key = str("JQK".index(infoset[0])) + infoset[1:].replace("c", "p")
            np.testing.assert_allclose(mixed.policy_for_key(key), expected.policy_for_key(key), atol=1e-9)
    assert abs(oa.exploitability(KUHN.game, mixed) - ka.exploitability(average)) < 1e-9


def test_a_mixture_is_not_the_plain_mean():
    # Betting K always or checking it always, half and half: after checking K the mixture has
    # only the second strategy to go by, so it calls with certainty, not one half.
    always, never = ka.always_bet(), ka.always_fold()
    mixed = oa.mixture(KUHN.game, [oa.kuhn_policy(always), oa.kuhn_policy(never)], [0.5, 0.5])
    assert mixed.policy_for_key("2")[1] == pytest.approx(0.5)
    assert mixed.policy_for_key("2pb")[1] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="one non-negative weight per policy"):
        oa.mixture(KUHN.game, [oa.kuhn_policy(always)], [0.5, 0.5])


def test_information_states_are_what_the_env_shows_in_play():
    states = oa.information_states(KUHN)
    assert len(states) == 12 and {s.player for s in states} == {0, 1}
    prompts = {s.key: s.prompt for s in states}
    assert all(s.moves == ("pass", "bet") and s.prompt.endswith(f"{LEGAL_MOVES} pass, bet") for s in states)
    rng = np.random.default_rng(0)
    for seed in range(40):
        KUHN.reset(seed=seed)
        while not KUHN.state.is_terminal():
            agent = KUHN.agent_selection
            seat = KUHN.possible_agents.index(agent)
            assert KUHN.observe(agent)["prompt"] == prompts[KUHN.state.information_state_string(seat)]
            legal = KUHN.legal_moves(agent)
            KUHN.step(KUHN.action_of(legal[rng.integers(len(legal))]))


def test_scoring_the_envs_moves_gives_our_exploitability():
    """The path an LLM evaluation takes: a probability per listed move at every information
    state, read from the prompt's own move names (here by a Kuhn strategy)."""
    strategy = ka.never_bluff()
    distributions = {}
    for info in oa.information_states(KUHN):
        card = "JQK"[int(info.key[0])]
        aggressive = float(strategy[card + info.key[1:].replace("p", "c")])
        distributions[info.key] = [aggressive if move == "bet" else 1 - aggressive for move in info.moves]
    policy = oa.policy_from(KUHN.game, distributions)
    assert oa.exploitability(KUHN.game, policy) == pytest.approx(float(ka.exploitability(strategy)), abs=1e-12)


def test_policy_from_refuses_incomplete_or_malformed_distributions():
    full = {s.key: [0.5, 0.5] for s in oa.information_states(KUHN)}
    with pytest.raises(ValueError, match="1 information states lack a distribution"):
        oa.policy_from(KUHN.game, {k: v for k, v in full.items() if k != "0"})
    with pytest.raises(ValueError, match="keys are none of its information states"):
        oa.policy_from(KUHN.game, {**full, "3": [1, 0]})
    with pytest.raises(ValueError, match="need 2 non-negative probabilities"):
        oa.policy_from(KUHN.game, {**full, "0": [0.5, 0.6]})


def test_leduc_uniform_and_a_few_cfr_iterations():
    states = oa.information_states(LEDUC)
    assert len(states) == 936
    uniform = oa.policy_from(LEDUC.game, {s.key: [1 / len(s.moves)] * len(s.moves) for s in states})
    # OpenSpiel's exploitability_test.py: NashConv 4.7472 for uniform play in Leduc.
    assert oa.nash_conv(LEDUC.game, uniform) == pytest.approx(4.747222222222222, abs=1e-9)
    value = oa.exploitability(LEDUC.game, uniform)
    assert value == pytest.approx(oa.exploitability(LEDUC.game, os_policy.TabularPolicy(LEDUC.game)), abs=1e-12)
    solver = cfr.CFRSolver(LEDUC.game)
    for _ in range(3):
        solver.evaluate_and_update_policy()
    average = solver.average_policy()
    # Read back as move distributions in the env's legal-move order, it is the same policy.
    distributions = {s.key: [average.policy_for_key(s.key)[a] for a in s.actions] for s in states}
    relearned = oa.exploitability(LEDUC.game, oa.policy_from(LEDUC.game, distributions))
    assert relearned == pytest.approx(oa.exploitability(LEDUC.game, average), abs=1e-12) and relearned < value
