"""Role-specific credit: Agent0's filter and ADPO, MALT tree values, kickstarting (function and learner)."""

import itertools
import math

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import marl.learner
from games.task_forge.families import task_filter
from marl.credit import (
    Node,
    adpo_advantages,
    adpo_clip_high,
    adpo_scale,
    anneal,
    kickstart_kl,
    malt_preference_pairs,
    malt_samples,
    malt_values,
)
from marl.hf import HFPolicy
from marl.learner import Learner, OptimConfig, TrainSample
from marl.losses import ppo_clip_loss
from marl.models import TINY_CONFIG, byte_tokenizer, load_tiny

# ---- Agent0 ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("p_hat, kept", [(0.0, False), (0.29, False), (0.3, True), (0.55, True), (0.8, True), (0.81, False)])
def test_task_filter_keeps_the_agent0_band(p_hat, kept):
    assert task_filter(p_hat) is kept  # upload.py --min_score 0.3 --max_score 0.8, bounds inclusive


@pytest.mark.parametrize(
    "p_hat, scale, eps_high",
    [
        (0.3, 0.6, 0.3),  # most ambiguous kept task: advantages × m, upper clip ε + 0.1
        (0.55, 0.8, 0.25),  # half way: 0.6 + 0.4·0.5; 0.2 + 0.1·0.5
        (0.8, 1.0, 0.2),  # confident: plain GRPO, plain ε
        (1.0, 1.0, 0.2),  # beyond the band: clipped
    ],
)
def test_adpo_scale_and_upper_clip(p_hat, scale, eps_high):
    # core_algos.py with Agent0's script settings: min_advantage_scale 0.6, clip_ratio 0.2, max_epsilon_bonus 0.1
    assert adpo_scale(p_hat) == pytest.approx(scale)
    assert adpo_clip_high(p_hat) == pytest.approx(eps_high)


def test_adpo_advantages_by_hand():
    rewards = np.array([1.0, 0.0, 0.0, 1.0, 1.0])
    groups = ["a", "a", "b", "b", "b"]
    p_hats = np.array([0.3, 0.3, 0.55, 0.55, 0.55])
    # group a: mean ½, std ½ -> ±1, × s(0.3) = 0.6
    # group b: mean ⅔, std √2/3 -> −√2 and +√2/2, × s(0.55) = 0.8
    expected = [0.6, -0.6, -math.sqrt(2) * 0.8, math.sqrt(2) / 2 * 0.8, math.sqrt(2) / 2 * 0.8]
    assert adpo_advantages(rewards, groups, p_hats).tolist() == pytest.approx(expected, abs=1e-5)
    with pytest.raises(ValueError, match="one group and p̂ per reward"):
        adpo_advantages(rewards, groups[:2], p_hats)


# ---- MALT ------------------------------------------------------------------------------------------


def malt_tree():
    """2 generators × 2 verifiers × 2 refiners; the refiners' outcome rewards under each verifier."""
    leaves = {"v11": (1, 1), "v12": (1, 0), "v21": (0, 0), "v22": (1, 0)}

    def verifier(name):
        return Node("verifier", name, [Node("refiner", f"r{name[1:]}{i + 1}", reward=r) for i, r in enumerate(leaves[name])])

    generators = [Node("generator", f"g{g}", [verifier(f"v{g}1"), verifier(f"v{g}2")]) for g in (1, 2)]
    return Node("question", "q", generators)


def test_malt_values_labels_and_pairs():
    root = malt_tree()
    values = {node.payload: v for node, v, _ in malt_samples(root)}
    # V(refiner) = R; V(verifier) = mean of its refiners; V(generator) = mean of its verifiers (MALT §2.2)
    assert values == pytest.approx({
        "g1": 0.75, "v11": 1.0, "r111": 1, "r112": 1, "v12": 0.5, "r121": 1, "r122": 0,
        "g2": 0.25, "v21": 0.0, "r211": 0, "r212": 0, "v22": 0.5, "r221": 1, "r222": 0,
    })  # fmt: skip
    assert malt_values(root)[id(root)] == pytest.approx(0.5)
    labels = {node.payload: label for node, _, label in malt_samples(root)}
    # label = V > 0.5, so the 50-50 verifiers v12 and v22 are bad
    assert [p for p, label in labels.items() if label] == ["g1", "v11", "r111", "r112", "r121", "r221"]
    assert [node.payload for node, _, _ in malt_samples(root)][:3] == ["g1", "v11", "r111"]  # pre-order
    pairs = [(good.payload, bad.payload) for good, bad in malt_preference_pairs(root)]
    # siblings only: root's generators, g1's verifiers, and the split refiner pairs; v11, g2, v21 have no bad/good mix
    assert pairs == [("g1", "g2"), ("v11", "v12"), ("r121", "r122"), ("r221", "r222")]
    # threshold 0.4: the 50-50 verifiers become good, so g1's verifiers no longer pair and g2's do
    assert [(g.payload, b.payload) for g, b in malt_preference_pairs(root, threshold=0.4)] == [
        ("g1", "g2"), ("r121", "r122"), ("v22", "v21"), ("r221", "r222"),
    ]  # fmt: skip


def test_malt_needs_rewards_on_leaves_only():
    with pytest.raises(ValueError, match="has no reward"):
        malt_values(Node("q", children=[Node("generator")]))
    with pytest.raises(ValueError, match="only leaves carry rewards"):
        malt_values(Node("q", children=[Node("generator", reward=1.0, children=[Node("verifier", reward=1.0)])]))


# ---- kickstarting: the function ----------------------------------------------------------------------


def test_kickstart_kl_on_known_distributions():
    teacher = torch.log(torch.tensor([[[0.5, 0.5], [0.9, 0.1]]]))  # (1, 2, 2)
    student = torch.log(torch.tensor([[[0.25, 0.75], [0.1, 0.9]]])).requires_grad_(True)
    mask = torch.tensor([[True, False]])  # the second position is padding
    by_hand = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    reference = torch.distributions.kl_divergence(
        torch.distributions.Categorical(probs=torch.tensor([0.5, 0.5])),
        torch.distributions.Categorical(probs=torch.tensor([0.25, 0.75])),
    )
    assert kickstart_kl(student, teacher, mask).item() == pytest.approx(by_hand)
    assert kickstart_kl(student, teacher, mask).item() == pytest.approx(reference.item())
    both = kickstart_kl(student, teacher, torch.tensor([[True, True]]))  # mean of the two positions' KLs
    second = 0.9 * math.log(0.9 / 0.1) + 0.1 * math.log(0.1 / 0.9)
    assert both.item() == pytest.approx((by_hand + second) / 2)


def test_kickstart_kl_is_zero_when_equal_and_only_the_student_gets_a_gradient():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    assert kickstart_kl(logits, logits + 7.0, torch.ones(2, 3, dtype=torch.bool)).item() == pytest.approx(0.0, abs=1e-6)
    student = torch.randn(2, 3, 5, requires_grad=True)
    teacher = torch.randn(2, 3, 5, requires_grad=True)
    kickstart_kl(student, teacher, torch.ones(2, 3, dtype=torch.bool)).backward()
    assert teacher.grad is None
    assert student.grad is not None and student.grad.abs().sum() > 0
    empty = kickstart_kl(student, teacher, torch.zeros(2, 3, dtype=torch.bool))
    assert empty.item() == 0.0 and empty.requires_grad


@pytest.mark.parametrize("step, value", [(0, 1.0), (5, 0.5), (10, 0.0), (20, 0.0), (-1, 1.0)])
def test_anneal_is_linear_then_flat(step, value):
    assert anneal(1.0, 0.0, step, 10) == pytest.approx(value)


# ---- the PPO loss with ADPO's upper clip ---------------------------------------------------------------


def test_clip_high_widens_the_upper_clip_per_sample():
    logprobs = torch.log(torch.tensor([[1.25], [1.4]]))  # ratios 1.25 and 1.4 against old log-prob 0
    old, mask, adv = torch.zeros(2, 1), torch.ones(2, 1, dtype=torch.bool), torch.ones(2)
    plain = ppo_clip_loss(logprobs, old, adv, mask, clip_eps=0.2)
    # ε = 0.2 clips both ratios to 1.2: loss −1.2 per sample
    assert plain.loss.item() == pytest.approx(-1.2) and plain.clipfrac == 1.0
    wide = ppo_clip_loss(logprobs, old, adv, mask, clip_eps=0.2, clip_high=torch.tensor([0.3, 0.3]))
    # sample 0: 1.25 < 1.3 is not clipped (−1.25); sample 1: 1.4 clipped to 1.3 (−1.3)
    assert wide.loss.item() == pytest.approx((-1.25 - 1.3) / 2) and wide.clipfrac == 0.5
    same = ppo_clip_loss(logprobs, old, adv, mask, clip_eps=0.2, clip_high=torch.tensor([0.2, 0.2]))
    assert same.loss.item() == plain.loss.item()  # ε_high = ε is today's loss
    low = ppo_clip_loss(
        torch.log(torch.tensor([[0.5]])), torch.zeros(1, 1), -torch.ones(1), mask[:1], 0.2, clip_high=torch.tensor([0.3])
    )
    assert low.loss.item() == pytest.approx(0.8)  # the lower bound stays 1 − ε


def samples_for(policy, moves, advantages, clip_high=None):
    prompt = policy.encode([[{"role": "user", "content": "Your card is K. Bet or check?"}]])[0]
    return [
        TrainSample(prompt, policy.tokenizer(f"\\boxed{{{m}}}", add_special_tokens=False)["input_ids"], a, clip_high=clip_high)
        for m, a in zip(moves, advantages)
    ]


def test_learner_passes_each_samples_clip_high(monkeypatch):
    seen = []

    def spy(*args, **kwargs):
        seen.append(args[10] if len(args) > 10 else kwargs.get("clip_high"))
        return ppo_clip_loss(*args, **kwargs)

    monkeypatch.setattr(marl.learner, "ppo_clip_loss", spy)
    policy = load_tiny(3)
    batch = samples_for(policy, ["bet"], [1.0], clip_high=0.3) + samples_for(policy, ["check"], [-1.0])
    Learner(policy, OptimConfig(epochs=1)).update(batch)
    assert seen[0].tolist() == pytest.approx([0.3, 0.2])  # no clip_high: the config's ε
    Learner(policy, OptimConfig(epochs=1)).update(samples_for(policy, ["bet"], [1.0]))
    assert seen[1] is None  # no sample asks: today's loss, unchanged


# ---- kickstarting in the learner -------------------------------------------------------------------------


def student_kl(learner, batch):
    with torch.no_grad():
        _, _, _, kl = learner._kickstart_logprobs(batch)
    return kl.item()


def test_kickstarting_moves_the_student_towards_the_teacher():
    student, teacher = load_tiny(1), load_tiny(2)
    teacher_weights = {n: p.clone() for n, p in teacher.model.named_parameters()}
    learner = Learner(student, OptimConfig(epochs=1, lr=1e-3), teacher=teacher, kickstart_coef=1.0)
    batch = samples_for(student, ["bet", "check", "fold"], [0.0, 0.0, 0.0])  # no policy gradient: only the KL pulls
    before = student_kl(learner, batch)
    kls = [learner.update(batch)["loss/kickstart_kl"] for _ in range(4)]
    assert kls[0] == pytest.approx(before, rel=1e-5)  # reported before the step
    assert all(b < a for a, b in itertools.pairwise(kls)), f"KL(teacher ‖ student) should fall step by step: {kls}"
    assert student_kl(learner, batch) < 0.6 * before  # measured here: 0.024 -> 0.011 after 4 steps
    changed = [n for n, p in teacher.model.named_parameters() if not torch.equal(p, teacher_weights[n])]
    assert not changed, f"the teacher must stay frozen: {changed}"


def test_kickstart_forward_matches_the_policy_forward_exactly():
    student, teacher = load_tiny(1), load_tiny(2)
    learner = Learner(student, OptimConfig(epochs=2, lr=1e-3), teacher=teacher, kickstart_coef=0.5)
    batch = samples_for(student, ["bet", "check"], [1.0, -1.0])
    with torch.no_grad():
        token_lp, mask, entropy, _ = learner._kickstart_logprobs(batch)
        slow_lp, slow_mask, slow_entropy = learner._logprobs(batch, entropy=True)
    assert torch.equal(token_lp, slow_lp) and torch.equal(mask, slow_mask) and torch.equal(entropy, slow_entropy)
    stats = learner.update(batch)
    assert stats["ppo/approx_kl/first_epoch"] == pytest.approx(0.0, abs=1e-7)  # old log-probs come from the same numbers
    assert stats["kickstart/coef"] == 0.5


def test_kickstart_coef_anneals_and_turns_off():
    student, teacher = load_tiny(1), load_tiny(2)
    learner = Learner(student, OptimConfig(epochs=1, kickstart_coef=0.5), teacher=teacher)
    assert learner.kickstart_coef == 0.5
    learner.set_hparams({"kickstart_coef": anneal(0.5, 0.0, 1, 2)})
    assert learner.kickstart_coef == pytest.approx(0.25)
    learner.kickstart_coef = 0.0
    assert "loss/kickstart_kl" not in learner.update(samples_for(student, ["bet"], [1.0]))
    with pytest.raises(ValueError, match=">= 0"):
        learner.kickstart_coef = -1.0


def test_kickstarting_skips_forced_choice_samples():
    student, teacher = load_tiny(1), load_tiny(2)
    learner = Learner(student, OptimConfig(epochs=1), teacher=teacher, kickstart_coef=1.0)
    free = samples_for(student, ["bet"], [0.0])
    options = [student.tokenizer(m, add_special_tokens=False)["input_ids"] for m in ("bet", "check")]
    forced = TrainSample(free[0].prompt_ids, options[1], 1.0, candidates=options, choice=1)
    with_forced = learner.update(free + [forced])["loss/kickstart_kl"]
    assert with_forced == pytest.approx(student_kl(Learner(load_tiny(1), OptimConfig(), teacher=teacher), free), rel=1e-5)


def test_kickstarting_needs_a_teacher_with_the_same_vocabulary():
    student = load_tiny(1)
    with pytest.raises(ValueError, match="needs a teacher"):
        Learner(student, OptimConfig(kickstart_coef=0.1))
    config = LlamaConfig.from_json_file(TINY_CONFIG)
    config.vocab_size += 8
    wider = HFPolicy(LlamaForCausalLM(config), byte_tokenizer(), "wider")
    with pytest.raises(ValueError, match="one vocabulary: student tiny has 259 logits, teacher wider 267"):
        Learner(student, OptimConfig(), teacher=wider, kickstart_coef=0.1)


def test_completion_logits_shapes():
    policy = load_tiny(1)
    batch = samples_for(policy, ["bet", "check"], [0.0, 0.0])
    with torch.no_grad():
        prompts, completions = [s.prompt_ids for s in batch], [s.completion_ids for s in batch]
        logits, targets, real = policy.completion_logits(prompts, completions, [None, None])
    k = max(len(s.completion_ids) for s in batch)
    assert logits.shape == (2, k, policy.model.config.vocab_size) and targets.shape == real.shape == (2, k)
    assert real.sum(-1).tolist() == [len(s.completion_ids) for s in batch]
