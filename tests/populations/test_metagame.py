"""Meta-game solvers: golden equilibria of small games, and the properties each solver must keep."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.optimize import linprog

from populations.metagame import (
    META_SOLVERS,
    _fixation_probability,
    _payoff_per_strategy,
    _project_onto_floored_simplex,
    alpha_rank,
    antisymmetric_from_win_rates,
    lp_nash,
    max_entropy_nash,
    meta_strategy,
    nash_averaging,
    projected_replicator_dynamics,
    symmetric_alpha_rank,
    symmetric_prd,
)

# Fixation probabilities at α = 100 reach e^{-5000}: any overflow or division warning is a bug.
pytestmark = pytest.mark.filterwarnings("error")

RPS = np.array([[0, -1, 1], [1, 0, -1], [-1, 1, 0]], dtype=float)  # rock, paper, scissors
BIASED_RPS = np.array([[0, -1, 2], [1, 0, -1], [-2, 1, 0]], dtype=float)  # docs/research/population.md §2.3
TRANSITIVE = np.array([[0, 1, 1], [-1, 0, 1], [-1, -1, 0]], dtype=float)  # 0 beats all, 1 beats 2
UNIFORM = np.full(3, 1 / 3)


def _entropy(p: np.ndarray) -> float:
    q = p[p > 0]
    return float(-(q * np.log(q)).sum())


def _antisymmetric(lower: np.ndarray) -> np.ndarray:
    """The antisymmetric matrix with ``lower``'s strict lower triangle."""
    lower = np.tril(lower, -1)
    return lower - lower.T


def _random_antisymmetric(seed: int, n: int) -> np.ndarray:
    """Gaussian entries: almost surely a unique equilibrium (a generic zero-sum game)."""
    return _antisymmetric(np.random.default_rng(seed).normal(size=(n, n)))


# --- Nash by linear programming ---------------------------------------------------------------------


def test_lp_nash_of_rps_is_uniform_with_value_zero():
    row, column, value = lp_nash(RPS)
    np.testing.assert_allclose(row, UNIFORM, atol=1e-9)
    np.testing.assert_allclose(column, UNIFORM, atol=1e-9)
    assert value == pytest.approx(0, abs=1e-9)


def test_lp_nash_of_biased_rps():
    # B p = 0 with Σp = 1: −p2 + 2·p3 = 0 and p1 − p3 = 0, so p = (1/4, 1/2, 1/4) (docs/research/population.md §2.3).
    row, column, value = lp_nash(BIASED_RPS)
    np.testing.assert_allclose(row, [0.25, 0.5, 0.25], atol=1e-6)
    np.testing.assert_allclose(column, [0.25, 0.5, 0.25], atol=1e-6)
    assert value == pytest.approx(0, abs=1e-6)


def test_lp_nash_of_a_hand_solved_asymmetric_game():
    # A is non-singular and has a completely mixed equilibrium, so it is the only one
    # (Kaplansky 1945). Solved by hand from the indifference conditions:
    #   xᵀA = v·1ᵀ:  x1 − x2 + x3 = −2x1 − x2 + 2x3 = x1 + 2x2 − x3 = v,  Σx = 1
    #     → x = (1/6, 1/3, 1/2), v = 1/3
    #   A y = v·1:   y1 − 2y2 + y3 = −y1 − y2 + 2y3 = y1 + 2y2 − y3 = v,  Σy = 1
    #     → y = (1/3, 2/9, 4/9)
    a = np.array([[1, -2, 1], [-1, -1, 2], [1, 2, -1]], dtype=float)
    row, column, value = lp_nash(a)
    np.testing.assert_allclose(row, [1 / 6, 1 / 3, 1 / 2], atol=1e-7)
    np.testing.assert_allclose(column, [1 / 3, 2 / 9, 4 / 9], atol=1e-7)
    assert value == pytest.approx(1 / 3, abs=1e-7)
    # The equilibrium property: no pure deviation helps either player.
    assert (row @ a >= value - 1e-7).all() and (a @ column <= value + 1e-7).all()


@given(arrays(np.float64, st.tuples(st.integers(1, 6), st.integers(1, 6)), elements=st.floats(-10, 10)))
def test_lp_nash_is_an_equilibrium_of_any_matrix(a):
    row, column, value = lp_nash(a)
    tol = 1e-6 * (1 + np.abs(a).max())
    for strategy in (row, column):
        assert (strategy >= 0).all() and strategy.sum() == pytest.approx(1)
    assert (row @ a).min() >= value - tol  # the row player guarantees v
    assert (a @ column).max() <= value + tol  # the column player concedes no more than v


def test_lp_nash_rejects_nan():
    with pytest.raises(ValueError, match="finite 2-D payoff matrix"):
        lp_nash(np.array([[0.0, np.nan], [1.0, 0.0]]))


# --- Projected replicator dynamics ------------------------------------------------------------------


def test_prd_stays_at_the_uniform_equilibrium_of_rps():
    np.testing.assert_allclose(symmetric_prd(RPS, iterations=1000), UNIFORM, atol=1e-12)
    for x in projected_replicator_dynamics([RPS, -RPS], iterations=1000):
        np.testing.assert_allclose(x, UNIFORM, atol=1e-12)


def test_prd_trajectory_average_approaches_the_biased_rps_nash():
    # OpenSpiel's 1e5 iterations give (0.258, 0.497, 0.245) (docs/research/population.md §2.3).
    np.testing.assert_allclose(symmetric_prd(BIASED_RPS), [0.25, 0.5, 0.25], atol=0.015)


def test_prd_converges_to_a_strictly_dominant_strategy():
    # Prisoner's dilemma: defecting (1) pays more whatever the other does; only the floor γ stays.
    dilemma = np.array([[3, 0], [5, 1]], dtype=float)
    gamma = 1e-6
    for x in projected_replicator_dynamics([dilemma, dilemma.T], iterations=2000, dt=1e-2, average_last=100):
        np.testing.assert_allclose(x, [gamma, 1 - gamma], atol=1e-9)


def test_prd_trajectory_average_approaches_an_interior_equilibrium():
    # A = [[a, b], [c, d]] = [[4, −1], [−2, 1]] has no saddle point; the indifference conditions give
    # x* = (d − c)/(a − b − c + d) = 3/8, y* = (d − b)/(a − b − c + d) = 1/4, v = 4·3/8 − 2·5/8 = 1/4.
    # Replicator orbits cycle around (x*, y*), and their time average converges to it.
    a = np.array([[4, -1], [-2, 1]], dtype=float)
    row, column, value = lp_nash(a)
    np.testing.assert_allclose(row, [3 / 8, 5 / 8], atol=1e-7)
    np.testing.assert_allclose(column, [1 / 4, 3 / 4], atol=1e-7)
    assert value == pytest.approx(1 / 4)
    x, y = projected_replicator_dynamics([a, -a], iterations=5000, dt=2e-2)
    np.testing.assert_allclose(x, [3 / 8, 5 / 8], atol=0.01)
    np.testing.assert_allclose(y, [1 / 4, 3 / 4], atol=0.01)


def test_payoff_per_strategy_contracts_every_other_player():
    rng = np.random.default_rng(0)
    payoff = rng.normal(size=(2, 3, 4))
    x = [rng.dirichlet(np.ones(n)) for n in payoff.shape]
    expected = [
        np.einsum("abc,b,c->a", payoff, x[1], x[2]),
        np.einsum("abc,a,c->b", payoff, x[0], x[2]),
        np.einsum("abc,a,b->c", payoff, x[0], x[1]),
    ]
    for player in range(3):
        np.testing.assert_allclose(_payoff_per_strategy(payoff, x, player), expected[player], rtol=1e-12)


@given(
    arrays(np.float64, st.integers(1, 8), elements=st.floats(-5, 5)),
    st.floats(0, 1),
)
def test_floored_simplex_projection_is_the_nearest_feasible_point(x, gamma_fraction):
    gamma = gamma_fraction / (2 * x.size)
    y = _project_onto_floored_simplex(x, gamma)
    assert (y >= gamma - 1e-12).all() and y.sum() == pytest.approx(1)
    # y is the projection iff (x − y)·(z − y) ≤ 0 for every feasible z; the feasible set is the hull
    # of its vertices γ + (1 − nγ)·e_k, so checking those suffices.
    vertices = gamma + (1 - x.size * gamma) * np.eye(x.size)
    assert ((vertices - y) @ (x - y) <= 1e-9).all()


def test_prd_rejects_bad_arguments():
    with pytest.raises(ValueError, match="one payoff tensor per player"):
        projected_replicator_dynamics([RPS])
    with pytest.raises(ValueError, match="average_last"):
        projected_replicator_dynamics([RPS, -RPS], iterations=10, average_last=11)
    with pytest.raises(ValueError, match="gamma"):
        projected_replicator_dynamics([RPS, -RPS], gamma=0.5)


# --- α-Rank -----------------------------------------------------------------------------------------


def test_alpha_rank_of_rps_is_uniform():
    np.testing.assert_allclose(symmetric_alpha_rank(RPS), UNIFORM, atol=1e-12)
    pi, marginals = alpha_rank([RPS, -RPS])
    np.testing.assert_allclose(pi, np.full(9, 1 / 9), atol=1e-12)  # computed; the game's symmetries
    for marginal in marginals:
        np.testing.assert_allclose(marginal, UNIFORM, atol=1e-12)


def test_alpha_rank_puts_all_mass_on_the_strategy_that_beats_everyone():
    np.testing.assert_allclose(symmetric_alpha_rank(TRANSITIVE), [1, 0, 0], atol=1e-12)
    pi, marginals = alpha_rank([TRANSITIVE, -TRANSITIVE])
    assert pi[0] == pytest.approx(1)  # profile (0, 0)
    for marginal in marginals:
        np.testing.assert_allclose(marginal, [1, 0, 0], atol=1e-12)


def test_infinite_alpha_rank_finds_the_sink():
    # η = 1/2. Balance of flow at state 0: π0·2ε = (1 − ε)(π1 + π2), so π0 = (1 − ε)/(1 + ε);
    # at state 2: π2·2(1 − ε) = ε(π0 + π1), so π2 = ε/(2 − ε).
    eps = 0.01
    pi = symmetric_alpha_rank(TRANSITIVE, inf_alpha=True, inf_alpha_eps=eps)
    pi0, pi2 = (1 - eps) / (1 + eps), eps / (2 - eps)
    np.testing.assert_allclose(pi, [pi0, 1 - pi0 - pi2, pi2])
    assert np.argmax(pi) == 0


def test_two_population_marginals_when_one_profile_is_the_unique_sink():
    # Row strategy 1 and column strategy 2 strictly dominate, so every deviation path ends at (1, 2).
    row_payoff = np.array([[3, 1, 0], [4, 2, 2]], dtype=float)
    column_payoff = np.array([[0, 1, 2], [0, 1, 3]], dtype=float)
    pi, (row, column) = alpha_rank([row_payoff, column_payoff])
    assert np.argmax(pi) == np.ravel_multi_index((1, 2), (2, 3))
    np.testing.assert_allclose(row, [0, 1], atol=1e-12)
    np.testing.assert_allclose(column, [0, 0, 1], atol=1e-12)
    _, (row, column) = alpha_rank([row_payoff, column_payoff], inf_alpha=True, inf_alpha_eps=1e-3)
    np.testing.assert_allclose(row, [0, 1], atol=0.01)
    np.testing.assert_allclose(column, [0, 0, 1], atol=0.01)


def test_fixation_probability_matches_the_closed_form_and_never_overflows():
    alpha, m = 1.0, 50
    for gap in (0.01, -0.01, 0.3):
        closed_form = (1 - np.exp(-alpha * gap)) / (1 - np.exp(-m * alpha * gap))
        assert _fixation_probability(np.full(m - 1, gap), alpha) == pytest.approx(closed_form, rel=1e-12)
    assert _fixation_probability(np.zeros(m - 1), alpha) == pytest.approx(1 / m)  # neutral drift
    extremes = _fixation_probability(np.array([[1e3] * (m - 1), [-1e3] * (m - 1)]), alpha=100.0)
    np.testing.assert_allclose(extremes, [1, 0])


def test_alpha_rank_refuses_a_chain_with_two_sinks():
    # Coordination game: at α = 100 neither convention can be invaded, so π is not unique.
    coordination = np.eye(2)
    with pytest.raises(ValueError, match="not unique.*inf_alpha=True"):
        symmetric_alpha_rank(coordination)
    np.testing.assert_allclose(symmetric_alpha_rank(coordination, inf_alpha=True), [0.5, 0.5])


# --- Maximum-entropy Nash and Nash averaging --------------------------------------------------------


def test_nash_averaging_of_rps():
    p, skills = nash_averaging(RPS)
    np.testing.assert_allclose(p, UNIFORM, atol=1e-9)
    np.testing.assert_allclose(skills, 0, atol=1e-9)


def test_nash_averaging_ignores_a_copy_of_rock():
    # docs/research/population.md §2.6: the copies split rock's third; skills stay 0.
    with_copy = RPS[[0, 0, 1, 2]][:, [0, 0, 1, 2]]
    p, skills = nash_averaging(with_copy)
    np.testing.assert_allclose(p, [1 / 6, 1 / 6, 1 / 3, 1 / 3], atol=1e-6)
    np.testing.assert_allclose(skills, 0, atol=1e-9)


def test_nash_averaging_of_a_transitive_game():
    # OpenSpiel's nash_averaging_test: all mass on the top strategy, skills (0, −1, −1).
    p, skills = nash_averaging(TRANSITIVE)
    np.testing.assert_allclose(p, [1, 0, 0], atol=1e-9)
    np.testing.assert_allclose(skills, [0, -1, -1], atol=1e-9)


@given(st.integers(0, 2**32 - 1), st.integers(1, 7), st.data())
def test_nash_averaging_is_invariant_to_a_redundant_copy(seed, n, data):
    a = _random_antisymmetric(seed, n)
    copied = data.draw(st.integers(0, n - 1), label="copied member")
    members = [*range(n), copied]
    p, skills = nash_averaging(a)
    p_with_copy, skills_with_copy = nash_averaging(a[np.ix_(members, members)])
    np.testing.assert_allclose(skills_with_copy[:n], skills, atol=1e-6)
    assert skills_with_copy[n] == pytest.approx(skills[copied], abs=1e-6)
    assert p_with_copy[copied] == pytest.approx(p_with_copy[n], abs=1e-6)  # the copies split the mass
    assert p_with_copy[copied] + p_with_copy[n] == pytest.approx(p[copied], abs=1e-6)
    assert (a @ p <= 1e-9).all()


@given(arrays(np.float64, st.tuples(st.integers(1, 7), st.integers(1, 7)), elements=st.integers(-2, 2)), st.data())
def test_max_entropy_nash_beats_every_other_equilibrium(lower, data):
    # Small integer entries make degenerate games with a continuum of equilibria: the hard case.
    n = min(lower.shape)
    a = _antisymmetric(lower[:n, :n])
    p = max_entropy_nash(a)
    assert (p >= 0).all() and p.sum() == pytest.approx(1)
    assert (a @ p <= 1e-9).all()
    # Other equilibria: vertices of {q ≥ 0, Σq = 1, A q ≤ 0} from random objectives, and midpoints.
    objective = data.draw(arrays(np.float64, n, elements=st.floats(-1, 1)), label="objective")
    vertex = linprog(objective, A_ub=a, b_ub=np.zeros(n), A_eq=np.ones((1, n)), b_eq=[1], method="highs").x
    vertex = np.clip(vertex, 0, None) / np.clip(vertex, 0, None).sum()
    for q in (vertex, (vertex + p) / 2):
        assert _entropy(q) <= _entropy(p) + 1e-7


def test_copies_can_move_skills_outside_the_support_when_equilibria_are_not_unique():
    # Worked case for the Caveat in nash_averaging. Members 0-3 have the equilibria
    # t·(1/3, 1/3, 1/3, 0) + (1 − t)·(0, 0, 1/3, 2/3), t ∈ [0, 1]; member 4 loses to everyone and
    # scores −7/3 + 4t/3. Maximum entropy: t = 2/3, so p = (2/9, 2/9, 1/3, 2/9, 0) and skill −13/9.
    # With member 0 copied the entropy gains t/3·log 2, and d/dt = 0 gives t = 2√2/(1 + 2√2).
    a = np.array(
        [[0, -2, 2, -1, 1], [2, 0, -2, 1, 1], [-2, 2, 0, 0, 1], [1, -1, 0, 0, 3], [-1, -1, -1, -3, 0]], dtype=float
    )
    p, skills = nash_averaging(a)
    np.testing.assert_allclose(p, [2 / 9, 2 / 9, 1 / 3, 2 / 9, 0], atol=1e-6)
    np.testing.assert_allclose(skills, [0, 0, 0, 0, -13 / 9], atol=1e-6)
    members = [0, 0, 1, 2, 3, 4]
    _, skills_with_copy = nash_averaging(a[np.ix_(members, members)])
    t = 2 * np.sqrt(2) / (1 + 2 * np.sqrt(2))
    np.testing.assert_allclose(skills_with_copy, [0, 0, 0, 0, 0, -7 / 3 + 4 * t / 3], atol=1e-6)


def test_nash_averaging_rejects_a_matrix_that_is_not_antisymmetric():
    with pytest.raises(ValueError, match=r"antisymmetric.*\(A - A.T\) / 2"):
        nash_averaging(RPS + 0.1)


def test_log_odds_matrix_from_win_rates():
    win_rates = np.array([[0.5, 0.75, 1.0], [0.25, 0.5, 0.5], [0.0, 0.5, 0.5]])
    a = antisymmetric_from_win_rates(win_rates)
    expected_top = np.log(0.999 / 0.001)  # a perfect record is clipped to 1 − eps
    np.testing.assert_allclose(a, [[0, np.log(3), expected_top], [-np.log(3), 0, 0], [-expected_top, 0, 0]])
    assert nash_averaging(a)[0][0] == pytest.approx(1)


# --- Meta-solvers for a symmetric meta-game ---------------------------------------------------------


@pytest.mark.parametrize("name", sorted(META_SOLVERS))
def test_every_meta_solver_plays_rps_uniformly(name):
    np.testing.assert_allclose(meta_strategy(name, RPS), UNIFORM, atol=1e-6)


@pytest.mark.parametrize("name", sorted(META_SOLVERS))
def test_unplayed_pairs_count_as_draws(name):
    unplayed = BIASED_RPS.copy()
    unplayed[0, 2] = unplayed[1, 1] = np.nan
    drawn = np.nan_to_num(unplayed, nan=0.0)
    strategy = meta_strategy(name, unplayed)
    assert (strategy >= 0).all() and strategy.sum() == pytest.approx(1)
    np.testing.assert_allclose(strategy, meta_strategy(name, drawn), atol=1e-9)


def test_nash_meta_solver_reads_a_constant_sum_table_as_its_zero_sum_game():
    win_rates = (BIASED_RPS + 1) / 2  # M + Mᵀ = 1: the same game, shifted by 1/2
    np.testing.assert_allclose(meta_strategy("nash", win_rates), [0.25, 0.5, 0.25], atol=1e-6)


def test_unknown_meta_solver_lists_the_known_ones():
    known = r"\['alpharank', 'nash', 'prd', 'uniform'\]"
    with pytest.raises(ValueError, match=rf"unknown meta-solver 'elo'; known: {known}"):
        meta_strategy("elo", RPS)
