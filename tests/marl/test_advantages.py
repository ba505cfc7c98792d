"""Every estimator on hand-computed batches; properties where no number is known."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from marl.advantages import ADVANTAGE_ESTIMATORS, Sample, batch_mean, grpo, rae, reinforce

P0, P1 = ("kuhn_poker", "player_0"), ("kuhn_poker", "player_1")
BATCH = [
    Sample("ep1", P0, 1.0),  # ep1: player_0 won 1 over two turns,
    Sample("ep1", P0, 1.0),
    Sample("ep1", P1, -1.0),  # player_1 lost 1 in one turn
    Sample("ep2", P0, -1.0),  # ep2: player_0 lost 1
]


def test_rae_subtracts_the_pre_update_baseline_and_steps_the_ema_once_per_episode():
    baselines = {P0: 0.5}
    advantages = rae(BATCH, baselines, ema_decay=0.9)
    # A = R − b before the batch: player_0 1 − 0.5 (both turns), player_1 −1 − 0, player_0 −1 − 0.5
    assert advantages.tolist() == pytest.approx([0.5, 0.5, -1.0, -1.5])
    # b ← 0.9 b + 0.1 R, once per (episode, role): player_0 0.5 → 0.55 → 0.395; player_1 0 → −0.1
    assert baselines == pytest.approx({P0: 0.395, P1: -0.1})


def test_reinforce_is_the_return():
    assert reinforce(BATCH, {}).tolist() == [1.0, 1.0, -1.0, -1.0]


def test_batch_mean_centres_each_role_over_episodes():
    # player_0's episodes return 1 and −1 (mean 0, each episode once however many turns); player_1 only −1
    assert batch_mean(BATCH, {}).tolist() == pytest.approx([1.0, 1.0, 0.0, -1.0])


def test_grpo_normalises_within_prompt_group_and_role():
    samples = [Sample("a", P0, 1.0, group="g"), Sample("b", P0, 3.0, group="g"), Sample("c", P0, 5.0, group="h")]
    # group g: mean 2, std 1 -> −1, +1; group h alone: 0
    assert grpo(samples, {}).tolist() == pytest.approx([-1.0, 1.0, 0.0], abs=1e-5)


returns = st.lists(st.floats(-10, 10), min_size=1, max_size=20)


@given(returns, st.lists(st.sampled_from(["g1", "g2", "g3"]), min_size=20, max_size=20))
def test_grpo_advantages_have_zero_mean_per_group(rets, groups):
    samples = [Sample(f"ep{i}", P0, r, group=g) for i, (r, g) in enumerate(zip(rets, groups))]
    advantages = grpo(samples, {})
    for g in set(groups[: len(rets)]):
        assert np.mean([a for a, s in zip(advantages, samples) if s.group == g]) == pytest.approx(0, abs=1e-6)


@given(st.floats(-5, 5), st.integers(0, 2**32 - 1))
def test_rae_baseline_converges_to_the_mean_of_a_stationary_stream(mean, seed):
    rng = np.random.default_rng(seed)
    baselines: dict = {}
    trace = []
    for i, r in enumerate(rng.normal(mean, 1.0, 4000)):
        rae([Sample(f"ep{i}", P0, float(r))], baselines, ema_decay=0.95)
        trace.append(baselines[P0])
    # The EMA's noise has std 1·sqrt(0.05/1.95) ≈ 0.16; averaged over the last 3000 steps
    # (about 75 independent windows of ~40 steps) the bias left is well under 0.1.
    assert np.mean(trace[1000:]) == pytest.approx(mean, abs=0.1)


@given(st.floats(-5, 5))
def test_rae_baseline_reaches_a_constant_return(value):
    baselines: dict = {}
    for i in range(600):
        rae([Sample(f"ep{i}", P1, value)], baselines)
    assert baselines[P1] == pytest.approx(value, abs=1e-9)  # 0.95**600 ≈ 4e-14


@pytest.mark.parametrize("name", list(ADVANTAGE_ESTIMATORS))
@given(returns, st.floats(-100, 100))
def test_centred_estimators_ignore_a_constant_shift(name, rets, shift):
    if name in ("rae", "reinforce"):  # these depend on the absolute return by design
        return
    samples = [Sample(f"ep{i}", P0, r, group="g") for i, r in enumerate(rets)]
    shifted = [Sample(s.episode, s.key, s.ret + shift, s.group) for s in samples]
    fn = ADVANTAGE_ESTIMATORS[name]
    assert fn(shifted, {}) == pytest.approx(fn(samples, {}), abs=1e-4)
