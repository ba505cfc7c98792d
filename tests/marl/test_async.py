"""Asynchronous training: the off-policy correction by hand, fresh samples keeping exactly PPO's
loss, async with staleness 0 playing and learning exactly as sync, the staleness bound under any
timing of rollouts and learning, and a SIGKILLed async run resuming to exactly the unbroken one
(its in-flight iterations replayed from the checkpoint's jobs)."""

import math
import random
import time

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from marl.config import ConfigError, load_config
from marl.episode import read_jsonl
from marl.learner import Learner, OptimConfig, TrainSample
from marl.losses import ppo_clip_loss
from marl.models import load_tiny
from marl.pools import RolloutWorker
from coevo.train import Trainer
from coevo.config import load_run_config
from tests.marl.test_learner import samples_for
from tests.marl.test_train import SHORT_KUHN, write
from tests.runs import comparable, events, train_killed_after

ASYNC = "\n[train]\nmode = 'async'\nmax_staleness = {k}\n"


def test_decoupled_ppo_by_hand():
    logprobs = torch.log(torch.tensor([[0.5, 0.5]]))  # π_θ
    old = torch.log(torch.tensor([[0.25, 0.5]]))  # π_old, the proximal policy: ratios 2 and 1
    behaviour = torch.log(torch.tensor([[0.125, 0.4]]))  # π_b: π_old/π_b = 2 (capped to 1.5) and 1.25
    mask, a = torch.tensor([[True, True]]), torch.tensor([1.0])
    terms = ppo_clip_loss(logprobs, old, a, mask, 0.2, 2.0, behaviour_logprobs=behaviour, stale=torch.tensor([True]), is_cap=1.5)
    # PPO terms max(−2, −1.2) = −1.2 (clipped) and −1, weighted 1.5 and 1.25, summed, / 2
    assert terms.loss.item() == pytest.approx((1.5 * -1.2 + 1.25 * -1) / 2)


def test_truncated_importance_sampling_by_hand():
    logprobs = torch.log(torch.tensor([[0.5, 0.5]])).requires_grad_()
    old = torch.log(torch.tensor([[0.5, 0.5]]))
    behaviour = torch.log(torch.tensor([[0.1, 0.4]]))  # π_θ/π_b = 5 (capped to 2) and 1.25
    mask, a = torch.tensor([[True, True]]), torch.tensor([-1.0])
    terms = ppo_clip_loss(
        logprobs, old, a, mask, 0.2, 1.0, behaviour_logprobs=behaviour, stale=torch.tensor([True]), correction="tis", is_cap=2.0
    )
    terms.loss.backward()
    # ∂ℓ/∂log π_θ = −A · min(ρ, C), with no clip however far ρ is from 1
    assert logprobs.grad[0].tolist() == pytest.approx([2.0, 1.25])


@settings(max_examples=50)
@given(
    n=st.integers(1, 4), k=st.integers(1, 5), seed=st.integers(0, 2**16), correction=st.sampled_from(["decoupled", "tis"])
)
def test_fresh_samples_keep_exactly_the_ppo_loss(n, k, seed, correction):
    """Staleness 0: every sample fresh, or a stale one whose behaviour is π_old itself (decoupled)."""
    g = torch.Generator().manual_seed(seed)
    logprobs, old = -torch.rand(n, k, generator=g), -torch.rand(n, k, generator=g)
    a, mask = torch.randn(n, generator=g), torch.rand(n, k, generator=g) > 0.3
    plain = ppo_clip_loss(logprobs, old, a, mask, 0.2, 4.0)
    fresh = ppo_clip_loss(
        logprobs, old, a, mask, 0.2, 4.0, behaviour_logprobs=-torch.rand(n, k), stale=torch.zeros(n, dtype=torch.bool), correction=correction
    )
    assert fresh.loss.item() == plain.loss.item()
    if correction == "decoupled":
        same = ppo_clip_loss(logprobs, old, a, mask, 0.2, 4.0, behaviour_logprobs=old.clone(), stale=torch.ones(n, dtype=torch.bool))
        assert same.loss.item() == plain.loss.item()


def _grads(learner: Learner, samples: list[TrainSample]) -> list[torch.Tensor]:
    old = learner._logprobs_by_sample(samples)
    learner._accumulate(learner._chunks(samples, 64), old, None)
    return [p.grad.clone() for p in learner.params]


def test_the_learner_weighs_stale_samples_by_their_recorded_behaviour():
    policy = load_tiny(7)
    learner = Learner(policy, OptimConfig(epochs=1, lr=1e-3))
    fresh = samples_for(policy, ["bet", "check"], [1.0, -0.5])
    old = learner._logprobs_by_sample(fresh)
    as_drawn = [TrainSample(**{**vars(s), "behaviour": old[id(s)].tolist()}) for s in fresh]  # drawn by π_old itself
    twice_as_likely = [TrainSample(**{**vars(s), "behaviour": (old[id(s)] - math.log(2)).tolist()}) for s in fresh]
    plain = _grads(learner, fresh)
    assert all(torch.equal(a, b) for a, b in zip(plain, _grads(learner, as_drawn))), "weight 1: exactly PPO"
    learner.config = learner.config.model_copy(update={"is_cap": 10.0})
    doubled = _grads(learner, twice_as_likely)  # first epoch, every token weighted π_old/π_b = 2
    assert all(torch.allclose(2 * a, b, atol=1e-7) for a, b in zip(plain, doubled))
    stats = learner.update(twice_as_likely)
    assert stats["offpolicy/stale_frac"] == 1.0 and stats["offpolicy/is_ratio"] == pytest.approx(2.0, rel=1e-5)


def test_async_free_text_at_another_temperature_is_a_config_error(tmp_path):
    path = short_kuhn(tmp_path, 2, 1)
    with pytest.raises(ConfigError, match="rollout.temperature is 0.7: set it to 1"):
        load_config(path, ["mode='generate'", "rollout.temperature=0.7"])


def short_kuhn(tmp_path, iterations: int, k: int | None, name: str = "c.toml"):
    text = SHORT_KUHN.format(iterations=iterations) + ("" if k is None else ASYNC.format(k=k))
    return write(tmp_path, text, name)


def without_schedule(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("async/")} for r in comparable(records)]


def shards(run) -> list[str]:
    return [p.read_text() for p in sorted((run / "episodes").iterdir())]


@pytest.mark.slow
def test_async_with_staleness_0_plays_and_learns_exactly_as_sync(tmp_path):
    sync, asynchronous = tmp_path / "sync", tmp_path / "async"
    Trainer(load_config(short_kuhn(tmp_path, 3, None)), sync).run()
    Trainer(load_config(short_kuhn(tmp_path, 3, 0, name="a.toml")), asynchronous).run()
    assert without_schedule(events(asynchronous)) == without_schedule(events(sync))
    assert shards(asynchronous) == shards(sync)
    assert [r["async/staleness_max"] for r in comparable(events(asynchronous))] == [0, 0, 0]


def delayed(monkeypatch, rng: random.Random, where: str) -> None:
    """Random delays in the rollout thread or the learner: another timing of the same run."""
    target = (RolloutWorker, "episodes") if where == "rollouts" else (Trainer, "learn")
    original = getattr(*target)

    def slow(*args, **kwargs):
        time.sleep(rng.uniform(0, 0.2))
        return original(*args, **kwargs)

    monkeypatch.setattr(*target, slow)


@pytest.mark.slow
@settings(max_examples=6)
@given(k=st.integers(0, 3), iterations=st.integers(1, 5), where=st.sampled_from(["rollouts", "learner"]), seed=st.integers(0, 99))
def test_the_staleness_bound_holds_whatever_the_timing(tmp_path_factory, k, iterations, where, seed):
    """Iteration i plays with the weights after update max(0, i−1−k), whichever side is slower."""
    tmp_path = tmp_path_factory.mktemp("run")
    with pytest.MonkeyPatch.context() as monkeypatch:
        delayed(monkeypatch, random.Random(seed), where)
        Trainer(load_config(short_kuhn(tmp_path, iterations, k), ["rollout.matches=4", "eval.every=0"]), tmp_path / "run").run()
    for record in comparable(events(tmp_path / "run")):
        i = record["iteration"]
        assert record["async/staleness_max"] == min(k, i - 1) <= k
        played = {t.version for e in read_jsonl(tmp_path / "run" / "episodes" / f"iter_{i:06d}.jsonl") for t in e.turns}
        assert played == {max(0, i - 1 - k)}


@pytest.mark.slow
def test_an_async_run_is_the_same_whatever_the_timing(tmp_path, monkeypatch):
    runs = []
    for where in ("rollouts", "learner"):
        with monkeypatch.context() as patch:
            delayed(patch, random.Random(0), where)
            Trainer(load_config(short_kuhn(tmp_path, 4, 2)), tmp_path / where).run()
        runs.append(tmp_path / where)
    assert comparable(events(runs[0])) == comparable(events(runs[1]))
    assert shards(runs[0]) == shards(runs[1])


@pytest.mark.slow
def test_a_killed_async_run_resumes_exactly(tmp_path):
    """Finished episodes not yet trained on, and matches still playing, are lost with the process:
    the checkpoint keeps their jobs (plans and the weights they were handed), and the resumed run
    plays them again — the same matches — so it trains on each exactly once, as the unbroken run.
    Killed after iteration 3 (two iterations in flight at the checkpoint, every 2) and after 1
    (before it)."""
    config = short_kuhn(tmp_path, 5, 2)
    whole = tmp_path / "whole"
    Trainer(load_config(config), whole).run()
    for killed_after in (3, 1):
        killed = tmp_path / f"killed_after_{killed_after}"
        train_killed_after([str(config)], killed, iteration=killed_after)
        Trainer(load_run_config(killed / "config.toml"), killed).run(resume=True)
        assert comparable(events(killed)) == comparable(events(whole)), killed_after
        assert [r["iteration"] for r in comparable(events(killed))] == [1, 2, 3, 4, 5]
        assert shards(killed) == shards(whole)
