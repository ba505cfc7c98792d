"""Ratings: golden values with their sources, and provable properties."""

import doctest
from functools import partial
import json

import numpy as np
from openskill.models import PlackettLuce
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import populations.ratings
from populations.ratings import Elo, OpenSkill, bradley_terry, elo_expected, elo_update

ratings = st.floats(-3000, 3000)
scores = st.sampled_from([0.0, 0.5, 1.0])


def test_docstring_examples():
    result = doctest.testmod(populations.ratings)
    assert result.attempted > 0 and result.failed == 0


# Elo ------------------------------------------------------------------------------------------


def test_elo_expected_score_golden():
    assert elo_expected(1500, 1500) == 0.5
    assert elo_expected(1400, 1000) == pytest.approx(10 / 11)  # a 400-point gap is 10:1 odds
    assert elo_expected(1000, 1400) == pytest.approx(1 / 11)


def test_elo_update_golden():
    assert elo_update(1000, 1000, 1.0) == (1016.0, 984.0)  # K=32 · (1 − ½)
    assert elo_update(1000, 1000, 0.5) == (1000.0, 1000.0)
    assert elo_update(1000, 1000, 0.0, k=10) == (995.0, 1005.0)
    with pytest.raises(ValueError, match="score_a must lie in"):
        elo_update(1000, 1000, 2.0)


@given(ratings, ratings, scores, st.floats(0, 100))
def test_elo_update_is_zero_sum(rating_a, rating_b, score_a, k):
    new_a, new_b = elo_update(rating_a, rating_b, score_a, k)
    assert new_a + new_b == pytest.approx(rating_a + rating_b, abs=1e-9)
    assert elo_expected(rating_a, rating_b) + elo_expected(rating_b, rating_a) == pytest.approx(1.0)


def test_elo_class_tracks_named_players_and_round_trips():
    elo = Elo(k=16.0, initial=1500.0)
    for name in "abc":
        elo.add(name)
    elo.update("a", "b", 1.0)
    assert elo.ratings == {"a": 1508.0, "b": 1492.0, "c": 1500.0}
    assert elo.expected("a", "b") == pytest.approx(elo_expected(1508.0, 1492.0))
    restored = Elo()
    restored.load_state_dict(json.loads(json.dumps(elo.state_dict())))
    assert restored.ratings == elo.ratings and (restored.k, restored.initial) == (16.0, 1500.0)


def test_elo_rejects_unknown_duplicate_and_self_play():
    elo = Elo()
    elo.add("a")
    with pytest.raises(ValueError, match="already rated"):
        elo.add("a")
    with pytest.raises(KeyError, match=r"call add\('b'\) first"):
        elo.update("a", "b", 1.0)
    with pytest.raises(ValueError, match="against itself"):
        elo.update("a", "a", 1.0)


# Bradley–Terry --------------------------------------------------------------------------------

OPENSPIEL_WINS = np.array([[0, 7, 9], [3, 0, 6], [1, 4, 0]])


def test_bradley_terry_matches_openspiel_golden():
    # OpenSpiel elo.compute_ratings_from_matrices on this table gives [299.2, 108.0, 0.0]
    # (docs/research/population.md §2.6, verified); our smoothing reading reproduces it.
    np.testing.assert_allclose(bradley_terry(OPENSPIEL_WINS), [299.2, 108.0, 0.0], atol=0.05)


def test_bradley_terry_without_smoothing_is_the_maximum_likelihood_estimate():
    ratings = bradley_terry(OPENSPIEL_WINS, smoothing=0.0)
    gamma = 10 ** (ratings / 400)
    games = OPENSPIEL_WINS + OPENSPIEL_WINS.T
    # ∂ log L / ∂ log γ_i = W_i − Σ_j n_ij γ_i / (γ_i + γ_j) vanishes at the MLE
    gradient = OPENSPIEL_WINS.sum(1) - (games * gamma[:, None] / (gamma[:, None] + gamma[None, :])).sum(1)
    np.testing.assert_allclose(gradient, 0.0, atol=1e-8)


def test_bradley_terry_is_on_the_elo_scale():
    # 10 wins to 1 is 10:1 odds, which Elo calls a 400-point gap
    np.testing.assert_allclose(bradley_terry(np.array([[0, 10], [1, 0]]), smoothing=0.0), [400.0, 0.0])
    np.testing.assert_allclose(bradley_terry(np.full((3, 3), 2.5)), 0.0, atol=1e-9)  # all draws: equal


@given(st.integers(0, 2**32 - 1))
def test_bradley_terry_is_order_independent(seed):
    rng = np.random.default_rng(seed)
    wins = rng.integers(0, 6, size=(5, 5)).astype(float)
    order = rng.permutation(5)
    fit = partial(bradley_terry, max_iterations=20_000)  # a player who never lost converges slowly
    np.testing.assert_allclose(fit(wins[np.ix_(order, order)]), fit(wins)[order], atol=1e-6)


def test_a_player_who_never_lost_is_rated_highest_and_needs_smoothing():
    wins = np.array([[0, 5, 5], [0, 0, 3], [0, 2, 0]])
    # MM converges slowly when one player's only losses are pseudo-wins: allow more iterations
    assert np.argmax(bradley_terry(wins, max_iterations=10_000)) == 0
    with pytest.raises(ValueError, match="pass smoothing > 0"):
        bradley_terry(wins, smoothing=0.0)


def test_a_member_without_games_lands_between_the_others():
    ratings = bradley_terry(np.array([[0, 8, 0], [2, 0, 0], [0, 0, 0]]))
    assert ratings[0] > ratings[2] > ratings[1]


def test_bradley_terry_rejects_a_non_square_table():
    with pytest.raises(ValueError, match="square"):
        bradley_terry(np.ones((2, 3)))


# OpenSkill ------------------------------------------------------------------------------------


def test_openskill_one_win_golden():
    # docs/research/population.md §4.3 (verified with openskill 6.2.0 defaults)
    skill = OpenSkill()
    skill.add("a")
    skill.add("b")
    skill.update("a", "b", 1.0)
    assert (skill.mu("a"), skill.sigma("a")) == pytest.approx((27.635, 8.066), abs=1e-3)
    assert (skill.mu("b"), skill.sigma("b")) == pytest.approx((22.365, 8.066), abs=1e-3)
    assert (skill.predict_win("a", "b"), skill.predict_win("b", "a")) == pytest.approx((0.659, 0.341), abs=1e-3)
    assert skill.ordinal("a") == pytest.approx(skill.mu("a") - 3 * skill.sigma("a"))


def test_openskill_draw_keeps_means_and_shrinks_sigma():
    skill = OpenSkill()
    skill.add("a")
    skill.add("b")
    skill.update("a", "b", 0.5)
    assert skill.mu("a") == pytest.approx(25.0) and skill.mu("b") == pytest.approx(25.0)
    assert skill.sigma("a") == pytest.approx(8.066, abs=1e-3)
    assert skill.predict_win("a", "b") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="must be 1, 0.5 or 0"):
        skill.update("a", "b", 0.7)


def test_openskill_passes_model_settings_and_round_trips():
    skill = OpenSkill(mu=30.0, sigma=5.0)
    for name in "abc":
        skill.add(name)
    assert (skill.mu("c"), skill.sigma("c")) == (30.0, 5.0)
    skill.update("a", "b", 1.0)
    skill.update("c", "a", 0.0)
    restored = OpenSkill(mu=30.0, sigma=5.0)
    restored.load_state_dict(json.loads(json.dumps(skill.state_dict())))
    for name in "abc":
        assert (restored.mu(name), restored.sigma(name)) == (skill.mu(name), skill.sigma(name))
    assert restored.predict_win("a", "c") == skill.predict_win("a", "c")


@settings(max_examples=200, deadline=None)
@given(
    mus=st.tuples(st.floats(-50, 80), st.floats(-50, 80)),
    sigmas=st.tuples(st.floats(0.1, 15), st.floats(0.1, 15)),
    score=st.sampled_from([0.0, 0.5, 1.0]),
    limit_sigma=st.booleans(),
    tau=st.sampled_from([25 / 300, 0.0, 1.0]),
)
def test_openskill_update_equals_the_librarys_rate(mus, sigmas, score, limit_sigma, tau):
    """Our in-place update must give exactly what ``PlackettLuce.rate`` gives for a 1-v-1 game."""
    skill = OpenSkill(tau=tau, limit_sigma=limit_sigma)
    skill.add("a", mus[0], sigmas[0])
    skill.add("b", mus[1], sigmas[1])
    model = PlackettLuce(tau=tau, limit_sigma=limit_sigma)
    ra, rb = model.rating(mu=mus[0], sigma=sigmas[0]), model.rating(mu=mus[1], sigma=sigmas[1])
    if score == 0.5:
        [[ra], [rb]] = model.rate([[ra], [rb]], ranks=[1, 1])
    else:
        [[ra], [rb]] = model.rate([[ra], [rb]], ranks=[0, 1] if score == 1 else [1, 0])
    skill.update("a", "b", score)
    assert (skill.mu("a"), skill.sigma("a")) == pytest.approx((ra.mu, ra.sigma), rel=1e-12, abs=1e-12)
    assert (skill.mu("b"), skill.sigma("b")) == pytest.approx((rb.mu, rb.sigma), rel=1e-12, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from("abc"), scores), max_size=30))
def test_a_batch_of_updates_equals_the_updates_one_by_one(results):
    """A population rates its batch of matches in one call; in order, it must equal one call per match."""
    results = [(a, b, s) for a, b, s in results if a != b]
    elo, elo_batch, skill, skill_batch = Elo(), Elo(), OpenSkill(), OpenSkill()
    for rating in (elo, elo_batch, skill, skill_batch):
        for name in "abc":
            rating.add(name)
    for a, b, s in results:
        elo.update(a, b, s)
        skill.update(a, b, s)
    elo_batch.update_many(results)
    skill_batch.update_many(results)
    assert elo_batch.ratings == elo.ratings
    assert skill_batch.state_dict() == skill.state_dict()


def test_a_batch_with_a_bad_match_names_it():
    elo, skill = Elo(), OpenSkill()
    for rating in (elo, skill):
        rating.add("a"), rating.add("b")
    for rating in (elo, skill):
        with pytest.raises(KeyError, match="'zed'"):
            rating.update_many([("a", "b", 1.0), ("a", "zed", 1.0)])
        with pytest.raises(ValueError, match="itself"):
            rating.update_many([("a", "a", 1.0)])
    with pytest.raises(ValueError, match="score_a"):
        skill.update_many([("a", "b", 0.25)])
