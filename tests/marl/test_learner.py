"""PPO-clip loss and the learner: exact first epoch, and learning moves log-probs the right way."""

import pytest
import torch

from marl.learner import Learner, OptimConfig, TrainSample
from marl.losses import ppo_clip_loss
from marl.models import load_tiny


def samples_for(policy, moves, advantages):
    prompt = policy.encode([[{"role": "user", "content": "Your card is K. Bet or check?"}]])[0]
    return [
        TrainSample(prompt, policy.tokenizer(f"\\boxed{{{m}}}", add_special_tokens=False)["input_ids"], a)
        for m, a in zip(moves, advantages)
    ]


def test_loss_by_hand():
    logprobs = torch.log(torch.tensor([[0.5, 0.5], [0.2, 1.0]]))
    old = torch.log(torch.tensor([[0.25, 0.5], [0.2, 1.0]]))  # token 0 of sample 0: ratio 2
    mask = torch.tensor([[True, True], [True, False]])
    terms = ppo_clip_loss(logprobs, old, torch.tensor([1.0, -1.0]), mask, clip_eps=0.2, token_normalizer=2.0)
    # sample 0 (A=1): max(−2, −1.2) + max(−1, −1) = −2.2; sample 1 (A=−1): ratio 1 -> +1; /2 then mean
    assert terms.loss.item() == pytest.approx(((-2.2) / 2 + 1 / 2) / 2)
    assert terms.clipfrac == pytest.approx(1 / 3)  # one of three real tokens hits the clip bound


def test_first_epoch_is_exactly_on_policy():
    policy = load_tiny(5)
    learner = Learner(policy, OptimConfig(epochs=2, lr=1e-3))
    stats = learner.update(samples_for(policy, ["bet", "check", "bet", "check"], [1.0, -1.0, 0.5, -0.5]))
    assert stats["ppo/clipfrac/first_epoch"] == 0.0
    assert stats["ppo/approx_kl/first_epoch"] == pytest.approx(0.0, abs=1e-7)  # ratio exactly 1
    assert stats["policy/grad_norm"] > 0


@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_a_step_moves_the_log_prob_with_the_advantage(advantage):
    policy = load_tiny(6)
    learner = Learner(policy, OptimConfig(epochs=1, lr=1e-3))
    batch = samples_for(policy, ["bet", "bet"], [advantage, advantage])

    def logprob():
        with torch.no_grad():
            lp, mask, _ = learner._logprobs(batch[:1])
        return lp[mask].sum().item()

    weights = {n: p.clone() for n, p in policy.model.named_parameters()}
    before = logprob()
    learner.update(batch)
    assert (logprob() - before) * advantage > 0, "log-prob should move in the advantage's direction"
    unchanged = [n for n, p in policy.model.named_parameters() if torch.equal(p, weights[n])]
    assert not unchanged, f"parameters not updated: {unchanged}"


def test_kl_to_the_reference_is_zero_before_any_update_and_the_magnet_moves():
    policy = load_tiny(7)
    learner = Learner(policy, OptimConfig(kl_coef=0.1, magnet_rate=0.5, epochs=1, lr=1e-2))
    ref_before = [p.clone() for p in learner.reference.parameters()]
    stats = learner.update(samples_for(policy, ["bet"], [1.0]))
    assert stats["loss/kl"] == pytest.approx(0.0, abs=1e-7)  # first epoch: policy == reference
    moved = [not torch.equal(a, b) for a, b in zip(ref_before, learner.reference.parameters())]
    assert any(moved), "the magnet should move towards the updated policy"


def test_linear_schedule_decays_to_zero_and_resumes():
    policy = load_tiny(5)
    policy.model.requires_grad_(True)
    samples = samples_for(policy, ["bet", "check"], [1.0, -1.0])
    learner = Learner(policy, OptimConfig(lr=1e-3, lr_schedule="linear", epochs=1), updates=4)
    lrs = [learner.update(samples)["optim/lr"] for _ in range(2)]
    resumed = Learner(policy, OptimConfig(lr=1e-3, lr_schedule="linear", epochs=1), updates=4)
    resumed.load_state_dict(learner.state_dict())
    lrs += [resumed.update(samples)["optim/lr"] for _ in range(2)]
    assert lrs == pytest.approx([1e-3, 7.5e-4, 5e-4, 2.5e-4])


def test_minibatches_step_once_each_on_shares_that_cover_the_batch_and_a_resumed_learner_draws_the_same():
    def learner_of(config):
        policy = load_tiny(5)
        return Learner(policy, config), samples_for(policy, ["bet", "check", "bet", "check", "bet"], [1.0, -1.0, 0.5, -0.5, 0.25])

    config = OptimConfig(epochs=2, minibatches=2, lr=1e-3)
    learner, samples = learner_of(config)
    shares = learner._minibatches(samples, 0)
    assert sorted(map(len, shares)) == [2, 3]
    assert sorted(id(s) for share in shares for s in share) == sorted(map(id, samples))
    assert [[id(s) for s in share] for share in shares] != [[id(s) for s in share] for share in learner._minibatches(samples, 1)]
    learner.update(samples)
    assert {int(state["step"]) for state in learner.optimizer.state.values()} == {4}  # 2 epochs × 2 minibatches
    resumed, resumed_samples = learner_of(config)
    resumed.load_state_dict(learner.state_dict())
    learner.update(samples)
    resumed.update(resumed_samples)
    for a, b in zip(learner.policy.model.parameters(), resumed.policy.model.parameters()):
        assert torch.equal(a, b)
    one, one_samples = learner_of(OptimConfig(epochs=2, lr=1e-3))
    one.update(one_samples)
    assert {int(state["step"]) for state in one.optimizer.state.values()} == {2}


def test_a_one_step_update_takes_its_old_log_probs_from_its_own_pass_and_steps_as_a_separate_pass_would(monkeypatch):
    def updated(skip: bool) -> tuple[torch.Tensor, dict, int]:
        policy = load_tiny(6)
        learner = Learner(policy, OptimConfig(epochs=1, lr=1e-2))
        if not skip:
            monkeypatch.setattr(learner, "_one_step", lambda samples: False)
        passes = 0
        score = policy.completion_logprobs

        def counted(*args, **kwargs):
            nonlocal passes
            passes += 1
            return score(*args, **kwargs)

        monkeypatch.setattr(policy, "completion_logprobs", counted)
        stats = learner.update(samples_for(policy, ["bet", "check", "bet"], [1.0, -1.0, 0.5]))
        return torch.cat([p.detach().flatten() for p in policy.model.parameters()]), stats, passes

    skipped, skipped_stats, skipped_passes = updated(skip=True)
    separate, separate_stats, separate_passes = updated(skip=False)
    assert (skipped_passes, separate_passes) == (1, 2)  # one micro-batch: the step's pass, and the old pass before it
    assert torch.allclose(skipped, separate, atol=1e-6)  # the same step: ratio 1, the advantage's gradient
    assert not torch.allclose(skipped, torch.cat([p.detach().flatten() for p in load_tiny(6).model.parameters()]))
    assert skipped_stats["ppo/approx_kl/first_epoch"] == pytest.approx(0.0, abs=1e-7)
    assert skipped_stats["loss/policy"] == pytest.approx(separate_stats["loss/policy"])
    assert not Learner(load_tiny(6), OptimConfig(epochs=2))._one_step([None] * 3)
    assert not Learner(load_tiny(6), OptimConfig(epochs=1, minibatches=2))._one_step([None] * 3)


def _trained(config: OptimConfig) -> tuple[torch.Tensor, list[torch.dtype]]:
    """The tiny model's weights after two updates under ``config``, and the dtypes its logits came in."""
    policy = load_tiny(6)
    policy.model.requires_grad_(True)
    seen = []
    policy.model.lm_head.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    learner = Learner(policy, config)
    batch = samples_for(policy, ["bet", "check", "bet"], [1.0, -1.0, 0.5])
    for _ in range(2):
        learner.update(batch)
    assert all(p.dtype == torch.float32 for p in policy.model.parameters())  # autocast never touches the weights
    return torch.cat([p.detach().flatten() for p in policy.model.parameters()]), seen


def test_bf16_autocast_computes_in_bf16_and_steps_fp32_weights_as_fp32_does():
    fp32, fp32_logits = _trained(OptimConfig(epochs=2, lr=1e-3))
    bf16, bf16_logits = _trained(OptimConfig(epochs=2, lr=1e-3, autocast="bf16"))
    assert set(fp32_logits) == {torch.float32} and set(bf16_logits) == {torch.bfloat16}
    initial = torch.cat([p.detach().flatten() for p in load_tiny(6).model.parameters()])
    agreement = torch.nn.functional.cosine_similarity(bf16 - initial, fp32 - initial, dim=0)
    assert agreement > 0.9  # the same steps, up to bf16's rounding of the gradients


def test_autocast_auto_is_off_on_the_cpu():
    assert set(_trained(OptimConfig(epochs=1, lr=1e-3))[1]) == {torch.float32}


def test_compiled_layers_learn_as_eager_ones():
    eager, _ = _trained(OptimConfig(epochs=2, lr=1e-3))
    compiled, _ = _trained(OptimConfig(epochs=2, lr=1e-3, compile=True))
    assert torch.allclose(compiled, eager, atol=1e-4)
