"""The payoff table and the evaluation scheduler: hand-computed cases and provable properties."""

import doctest
import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import t as student_t

import populations.payoffs
from populations.payoffs import PayoffTable, _apportioned_pairs, _unplayed_pairs, uncertain_pairs


def test_docstring_examples():
    result = doctest.testmod(populations.payoffs)
    assert result.attempted > 0 and result.failed == 0


# Payoff table ---------------------------------------------------------------------------------


def test_counts_means_and_interval_hand_computed():
    table = PayoffTable()
    for result in (2.0, -1.0, 0.0):
        table.record("a", "b", result)
    assert table.games("a", "b") == 3
    assert table.mean("a", "b") == pytest.approx(1 / 3) and table.mean("b", "a") == pytest.approx(-1 / 3)
    assert table.win_rate("a", "b") == 0.5  # one win, one draw, one loss
    # returns 2, −1, 0: sample variance 7/3, so the standard error is √(7/9);
    # t quantile 4.302653 for 2 degrees of freedom at 97.5 % (any Student-t table)
    half = 4.302652729749462 * math.sqrt(7 / 9)
    assert table.interval("a", "b") == pytest.approx((1 / 3 - half, 1 / 3 + half))
    row = table.to_frame().set_index(["a", "b"]).loc[("b", "a")]
    assert (row.games, row.wins, row.draws, row.losses) == (3, 1, 1, 1)
    assert (row["mean"], row.lo, row.hi) == pytest.approx((-1 / 3, -1 / 3 - half, -1 / 3 + half))


def test_unplayed_and_single_game_cells():
    table = PayoffTable()
    assert table.games("a", "b") == 0 and math.isnan(table.mean("a", "b"))
    assert table.win_rate("a", "b") == 0.5  # AlphaStar's prior
    assert table.win_rate_interval("a", "b") == (0.0, 1.0)
    assert table.interval("a", "b") == (-math.inf, math.inf)
    table.record("a", "b", 1.0)
    assert table.interval("a", "b") == (-math.inf, math.inf)  # one game says nothing about the spread


def test_wilson_interval_golden():
    table = PayoffTable()
    for result in [1.0] * 8 + [-1.0] * 2:
        table.record("a", "b", result)
    # Wilson (1927) for 8/10 at z = 1.959964: centre 0.71674, half-width 0.22658
    lo, hi = table.win_rate_interval("a", "b")
    assert (lo, hi) == pytest.approx((0.490162, 0.943318), abs=1e-6)
    # The score interval inverts the score test: at each end (p̂ − p)² = z² p (1 − p) / n
    for p in (lo, hi):
        assert (0.8 - p) ** 2 == pytest.approx(1.959964**2 * p * (1 - p) / 10, rel=1e-5)


def test_general_sum_records_take_an_explicit_return_for_b():
    table = PayoffTable()
    table.record("a", "b", 1.0, return_b=1.0)  # both cooperate: equal returns, a draw
    table.record("a", "b", 3.0, return_b=0.0)
    assert table.mean("b", "a") == 0.5 and table.mean("a", "b") == 2.0
    assert table.win_rate("a", "b") == 0.75 and table.win_rate("b", "a") == 0.25


def test_role_pairs_are_kept_apart_and_aggregated_on_request():
    table = PayoffTable()
    table.record("a", "b", 1.0, roles=("proposer", "solver"))
    table.record("a", "b", 1.0, roles=("proposer", "solver"))
    table.record("b", "a", 1.0, roles=("proposer", "solver"))
    assert table.role_pairs() == [("proposer", "solver"), ("solver", "proposer")]
    assert table.win_rate("a", "b", roles=("proposer", "solver")) == 1.0
    assert table.win_rate("a", "b", roles=("solver", "proposer")) == 0.0
    assert table.games("a", "b") == 3 and table.win_rate("a", "b") == pytest.approx(2 / 3)
    assert table.games("a", "b", roles=("solver", "solver")) == 0


def test_matrix_and_wins_matrix():
    table = PayoffTable()
    table.record("a", "b", 1.0, roles=("p0", "p1"))
    table.record("b", "a", 0.0, roles=("p0", "p1"))
    table.record("c", "c", 2.0, roles=("p0", "p1"))
    means, games = table.matrix(["a", "b", "c"])
    np.testing.assert_array_equal(games, [[0, 2, 0], [2, 0, 0], [0, 0, 2]])
    np.testing.assert_array_equal(means, [[np.nan, 0.5, np.nan], [-0.5, np.nan, np.nan], [np.nan, np.nan, 0.0]])
    means, games = table.matrix(["b", "a"], roles=("p0", "p1"))
    np.testing.assert_array_equal(means, [[np.nan, 0.0], [1.0, np.nan]])
    np.testing.assert_array_equal(table.wins_matrix(["a", "b"]), [[0, 1.5], [0.5, 0]])
    with pytest.raises(ValueError, match="distinct"):
        table.matrix(["a", "a"])


def test_decay_ages_a_cell_before_each_of_its_updates():
    table = PayoffTable(decay=0.5)
    table.record("a", "b", 1.0)  # a win, weight 1
    table.record("a", "c", 1.0)  # another cell: does not age (a, b)
    table.record("a", "b", -1.0)  # the win now weighs ½, the loss 1
    assert table.games("a", "b") == 1.5
    assert table.win_rate("a", "b") == pytest.approx(0.5 / 1.5)
    assert table.mean("a", "b") == pytest.approx((0.5 - 1.0) / 1.5)
    assert table.win_rate("b", "a") == pytest.approx(1.0 / 1.5)
    assert table.games("a", "c") == 1.0
    # returns +1 (weight ½) and −1 (weight 1): Σw = 3/2, Σw² = 5/4, Σwx = −1/2, Σwx² = 3/2, so the
    # reliability-weighted variance (Σwx² − (Σwx)²/Σw) / (Σw − Σw²/Σw) = (4/3) / (2/3) = 2 and the
    # effective size (Σw)² / Σw² = 1.8, with 0.8 degrees of freedom
    half = student_t.ppf(0.975, 0.8) * math.sqrt(2 / 1.8)
    assert table.interval("a", "b") == pytest.approx((-1 / 3 - half, -1 / 3 + half))


def test_self_play_in_one_role_stores_both_sides_and_ages_once():
    table = PayoffTable(decay=0.5)
    table.record("x", "x", 1.0)
    table.record("x", "x", 1.0)
    assert table.games("x", "x") == 0.5 * 2 + 2  # aged once, by ½, before the second match
    assert table.win_rate("x", "x") == 0.5 and table.mean("x", "x") == 0.0


def test_state_round_trip_then_recording_continues_identically():
    table = PayoffTable(decay=0.99)
    table.record("a", "b", 1.0, roles=("p0", "p1"))
    table.record("b", "a", 0.0, roles=("p0", "p1"))
    table.record("a", "c", -2.0, return_b=5.0)
    restored = PayoffTable()
    restored.load_state_dict(json.loads(json.dumps(table.state_dict())))
    assert restored.decay == 0.99
    for t in (table, restored):
        t.record("a", "b", -1.0, roles=("p0", "p1"))
    assert restored.state_dict() == table.state_dict()
    assert restored.to_frame().equals(table.to_frame())


def test_to_frame_has_one_tidy_row_per_cell():
    table = PayoffTable()
    table.record("a", "b", 1.0, roles=("p0", "p1"))
    frame = table.to_frame()
    assert list(frame.columns) == ["role_a", "role_b", "a", "b", "games", "wins", "draws", "losses", "mean", "lo", "hi"]
    assert frame[["role_a", "role_b", "a", "b"]].values.tolist() == [["p0", "p1", "a", "b"], ["p1", "p0", "b", "a"]]
    assert frame.wins.tolist() == [1, 0] and frame.losses.tolist() == [0, 1]


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="decay must lie in"):
        PayoffTable(decay=0.0)
    with pytest.raises(ValueError, match="finite"):
        PayoffTable().record("a", "b", math.nan)
    with pytest.raises(ValueError, match="confidence"):
        PayoffTable().interval("a", "b", confidence=1.0)


records = st.lists(
    st.tuples(
        st.sampled_from("abc"), st.sampled_from("abc"), st.sampled_from([-1.0, 0.0, 0.5, 2.0]), st.sampled_from("xy")
    ),
    max_size=30,
)


@given(records, st.sampled_from([1.0, 0.99, 0.5]))
def test_zero_sum_win_rates_are_complementary(matches, decay):
    table = PayoffTable(decay=decay)
    for a, b, result, role in matches:
        table.record(a, b, result, roles=(role, "x"))
    for a in "abc":
        for b in "abc":
            assert table.win_rate(a, b) + table.win_rate(b, a) == pytest.approx(1.0)
            assert table.games(a, b) == pytest.approx(table.games(b, a))
            for roles in table.role_pairs():
                assert table.win_rate(a, b, roles) + table.win_rate(b, a, roles[::-1]) == pytest.approx(1.0)


# Evaluation scheduling ------------------------------------------------------------------------


def _play(table, a, b, wins, losses):
    for result in [1.0] * wins + [-1.0] * losses:
        table.record(a, b, result)


def test_unplayed_pairs_are_chosen_first():
    table = PayoffTable()
    _play(table, "a", "b", 1, 1)  # played, and as uncertain as two games can be
    chosen = uncertain_pairs(table, ["a", "b", "c", "d"], budget=5, rng=np.random.default_rng(0))
    assert sorted(chosen) == [("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")]


def test_a_settled_pair_gives_way_to_a_close_one():
    table = PayoffTable()
    _play(table, "a", "b", 100, 0)  # Wilson interval (0.963, 1): resolved
    _play(table, "a", "c", 100, 0)
    _play(table, "b", "c", 2, 2)  # Wilson interval (0.150, 0.850): straddles 0.5
    rng = np.random.default_rng(0)
    assert uncertain_pairs(table, ["a", "b", "c"], budget=1, rng=rng) == [("b", "c")]
    assert uncertain_pairs(table, ["a", "b", "c"], budget=3, rng=rng) == [("b", "c")] * 3


def test_when_every_pair_is_settled_the_widest_interval_gets_the_budget():
    table = PayoffTable()
    _play(table, "a", "b", 100, 0)
    _play(table, "a", "c", 10, 0)  # (0.722, 1): resolved, but the widest
    _play(table, "b", "c", 100, 0)
    assert uncertain_pairs(table, ["a", "b", "c"], budget=2, rng=np.random.default_rng(0)) == [("a", "c")] * 2


def test_budget_is_shared_in_proportion_and_ties_broken_by_rng():
    names = ["a", "b", "c"]
    chosen = uncertain_pairs(PayoffTable(), names, budget=7, rng=np.random.default_rng(0))
    assert len(chosen) == 7 and sorted(chosen.count(p) for p in set(chosen)) == [2, 2, 3]
    firsts = {uncertain_pairs(PayoffTable(), names, budget=1, rng=np.random.default_rng(s))[0] for s in range(20)}
    assert firsts == {("a", "b"), ("a", "c"), ("b", "c")}
    same = [uncertain_pairs(PayoffTable(), names, budget=4, rng=np.random.default_rng(3)) for _ in range(2)]
    assert same[0] == same[1]


def test_uncertain_pairs_edge_cases():
    assert uncertain_pairs(PayoffTable(), ["a", "b"], budget=0, rng=np.random.default_rng(0)) == []
    with pytest.raises(ValueError, match="budget"):
        uncertain_pairs(PayoffTable(), ["a", "b"], budget=-1, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="at least two"):
        uncertain_pairs(PayoffTable(), ["a"], budget=1, rng=np.random.default_rng(0))


@given(
    st.lists(
        st.tuples(st.sampled_from("abcd"), st.sampled_from("abcd"), st.sampled_from([-1.0, 0.0, 1.0]), st.booleans()),
        max_size=30,
    ),
    st.sampled_from([1.0, 0.9]),
)
def test_win_rate_matrix_agrees_with_win_rate(matches, decay):
    table = PayoffTable(decay=decay)
    for a, b, ret, swap in matches:
        table.record(a, b, ret, ("player_1", "player_0") if swap else ("player_0", "player_1"))
    rows, columns = ["a", "b"], ["a", "c", "d", "e"]
    expected = [[table.win_rate(r, c) for c in columns] for r in rows]
    np.testing.assert_allclose(table.win_rate_matrix(rows, columns), expected)
    reloaded = PayoffTable()
    reloaded.load_state_dict(json.loads(json.dumps(table.state_dict())))
    np.testing.assert_allclose(reloaded.win_rate_matrix(rows, columns), expected)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(2, 30),
    results=st.lists(st.tuples(st.integers(0, 29), st.integers(0, 29), st.sampled_from([-1.0, 0.0, 1.0])), max_size=80),
    budget=st.integers(0, 40),
    seed=st.integers(0, 2**16),
)
def test_every_pair_gets_the_floor_or_ceiling_of_its_quota(n, results, budget, seed):
    """The budget is split over *all* N(N−1)/2 pairs in proportion to their scores, even though
    only a sample of the unplayed ones is looked at: each pair's count is ⌊quota⌋ or ⌈quota⌉."""
    names = [f"p{i}" for i in range(n)]
    table = PayoffTable()
    for a, b, result in results:
        if a < n and b < n and a != b:
            table.record(names[a], names[b], result)
    chosen = uncertain_pairs(table, names, budget, np.random.default_rng(seed))
    assert len(chosen) == budget
    pairs = [(names[i], names[j]) for i in range(n) for j in range(i + 1, n)]
    intervals = [table.win_rate_interval(a, b) for a, b in pairs]
    straddle = np.array([min(hi - 0.5, 0.5 - lo) for lo, hi in intervals])
    scores = np.maximum(straddle, 0.0) if (straddle > 0).any() else np.array([hi - lo for lo, hi in intervals])
    quota = budget * scores / scores.sum()
    counts = np.array([chosen.count(p) for p in pairs])
    assert np.all(counts >= np.floor(quota - 1e-9)) and np.all(counts <= np.ceil(quota + 1e-9))


@settings(max_examples=60, deadline=None)
@given(
    matches=st.lists(
        st.tuples(st.sampled_from("abc"), st.sampled_from("abc"), st.sampled_from([-1.0, 0.0, 0.5, 2.0]), st.booleans()),
        max_size=40,
    ),
    decay=st.sampled_from([1.0, 0.9]),
)
def test_matches_added_in_one_batch_equal_matches_added_one_by_one(matches, decay):
    """Recorded matches wait until the table is read; a batch must add up as the matches one at a time."""
    batched, one_by_one = PayoffTable(decay), PayoffTable(decay)
    for a, b, ret, swap in matches:
        roles = ("player_1", "player_0") if swap else ("player_0", "player_1")
        batched.record(a, b, ret, roles)
        one_by_one.record(a, b, ret, roles)
        one_by_one.games(a, b)  # a read adds what is waiting
    assert batched.to_frame().equals(one_by_one.to_frame())
    names = ["a", "b", "c"]
    np.testing.assert_array_equal(batched.win_rate_matrix(names, names), one_by_one.win_rate_matrix(names, names))


def test_record_many_equals_record_one_by_one_and_checks_the_batch():
    cells = [("a", "b", "player_0", "player_1"), ("b", "a", "player_0", "player_1"), ("a", "a", "player_0", "player_1")]
    returns = [1.0, -1.0, 0.5, 0.25, 0.0, 0.0]
    batched, one_by_one = PayoffTable(), PayoffTable()
    batched.record_many(cells, returns)
    for (a, b, role_a, role_b), (x, y) in zip(cells, zip(returns[::2], returns[1::2])):
        one_by_one.record(a, b, x, (role_a, role_b), return_b=y)
    assert batched.to_frame().equals(one_by_one.to_frame())
    with pytest.raises(ValueError, match="two returns per match"):
        batched.record_many(cells, returns[:-1])
    with pytest.raises(ValueError, match="finite"):
        batched.record_many(cells[:1], [1.0, float("nan")])
    assert batched.to_frame().equals(one_by_one.to_frame())  # a refused batch adds nothing


@settings(max_examples=80, deadline=None)
@given(
    st.integers(3, 9),
    st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8), st.sampled_from([-1.0, 0.0, 1.0])), max_size=40),
    st.integers(0, 12),
    st.integers(0, 2**32 - 1),
)
def test_the_unplayed_first_shortcut_chooses_what_apportioning_chooses(n, results, budget, seed):
    """With more unplayed pairs than the budget, skipping the scores must not change one choice."""
    names = [f"p{i}" for i in range(n)]
    table = PayoffTable()
    for a, b, result in results:
        if a < n and b < n and a != b:
            table.record(names[a], names[b], result)
    row, col, played = table._played_pairs(names)
    n_unplayed = n * (n - 1) // 2 - len(row)
    assume(n_unplayed > budget)
    general = _apportioned_pairs(names, row, col, played, n_unplayed, budget, np.random.default_rng(seed), 0.95)
    assert _unplayed_pairs(names, row, col, budget, np.random.default_rng(seed)) == general
    assert uncertain_pairs(table, names, budget, np.random.default_rng(seed)) == general
