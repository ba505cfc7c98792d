"""Device and precision: every tensor a model path builds lives on the model's device, bf16 agrees
with fp32 within bf16's precision, micro-batches respect a token budget, and running out of device
memory halves a batch instead of losing it.

Without a GPU, "on the model's device" is checked by making torch's default device ``meta`` while
the model stays on the CPU: a tensor built without naming the model's device lands on ``meta``
and the pass fails or returns nothing; one built right computes exactly as before.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from peft import LoraConfig

from marl.config import ConfigError, TrainConfig, load_config
from marl.device import OutOfMemoryRetry, resolve_device, resolve_dtype
from marl.hf import HFPolicy
from marl.learner import Learner, OptimConfig, TrainSample, _footprint, trainable_weights
from marl.members import load_model
from marl.models import load_tiny
from marl.policy import Request, Sampling

SHARED = "You are playing Kuhn poker. Each player antes 1; the higher card wins the pot. "  # a shared prefix


def requests(n: int = 4) -> list[Request]:
    temps = [0.0, 1.0, 0.7, 1.0]
    top_ps = [1.0, 1.0, 0.9, 0.8]
    return [Request(SHARED + f"Your card is {'JQK'[i % 3]}.", Sampling(temps[i % 4], top_ps[i % 4], 6), seed=i) for i in range(n)]


CANDIDATES = [["check", "bet"], ["fold", "call", "raise"], ["bet"], ["check", "bet"]]


def samples(policy: HFPolicy, adapter: str | None = None) -> list[TrainSample]:
    prompts = policy.encode([r.messages for r in requests()])
    move = lambda text: policy.tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    free = [TrainSample(p, move(["\\boxed{bet}", "check", "\\boxed{fold}", "raise it"][i]), [1.0, -0.5, 0.3, -1.0][i], adapter) for i, p in enumerate(prompts)]
    forced = [
        TrainSample(prompts[0], move("bet"), 0.8, adapter, candidates=[move("check"), move("bet")], choice=1),
        TrainSample(prompts[1], move("fold"), -0.4, adapter, candidates=[move("fold"), move("call"), move("raise")], choice=0, clip_high=0.3),
    ]
    return free + forced


def lora_tiny() -> HFPolicy:
    policy = load_tiny(3)
    policy.add_adapter("a", LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]), seed=1)
    with torch.no_grad():  # B starts at zero; give the adapter a nonzero effect so a wrong one would show
        for name, param in policy.model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(name)))
    return policy


def run_all(policy: HFPolicy, adapter: str | None, config: OptimConfig, default_device: str = "cpu"):
    """act, score and one learner update with torch's default device set to ``default_device``
    (the learner is built before: peft makes a KL reference adapter's layers on the default
    device, then moves them to their base's, which a meta tensor cannot be); what each returned
    and the weights it left."""
    learner = Learner(policy, config, adapter=adapter)
    reqs = [Request(r.messages, r.sampling, adapter, r.seed) for r in requests()]
    torch.set_default_device(default_device)
    try:
        acted = [(r.completion_ids, r.logprobs) for r in policy.act(reqs)]
        scored = [[s.logprobs for s in group] for group in policy.score(reqs, CANDIDATES)]
        stats = learner.update(samples(policy, adapter))
        return acted, scored, stats, trainable_weights(policy.model, adapter)
    finally:
        torch.set_default_device(None)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_every_tensor_a_model_path_builds_is_on_the_models_device(lora):
    config = OptimConfig(epochs=2, lr=1e-3, kl_coef=0.1, entropy_coef=0.01, micro_batch=3)
    policy = lora_tiny() if lora else load_tiny(3).to(torch.device("cpu"), torch.float32)
    twin = copy.deepcopy(policy)
    expected = run_all(twin, "a" if lora else None, config)
    got = run_all(policy, "a" if lora else None, config, default_device="meta")
    assert got[0] == expected[0] and got[1] == expected[1]
    assert got[2].keys() == expected[2].keys()
    assert all(got[2][k] == pytest.approx(v) for k, v in expected[2].items() if not k.startswith("perf/"))
    assert all(torch.equal(got[3][n], w) and got[3][n].device.type == "cpu" for n, w in expected[3].items())


def bf16(policy: HFPolicy) -> HFPolicy:
    return copy.deepcopy(policy).to(torch.device("cpu"), torch.bfloat16)


def test_bf16_on_the_cpu_agrees_with_fp32_within_bf16_precision():
    fp32 = load_tiny(4)
    half = bf16(fp32)
    assert half.model.dtype == torch.bfloat16
    reqs = requests()
    scored32, scored16 = fp32.score(reqs, CANDIDATES), half.score(reqs, CANDIDATES)
    for group32, group16 in zip(scored32, scored16):
        for a, b in zip(group32, group16):
            assert b.logprobs == pytest.approx(a.logprobs, abs=0.05)  # bf16 keeps ~3 significant digits
    greedy = [Request(r.messages, Sampling(0, 1, 6), seed=r.seed) for r in reqs]
    for a, b in zip(fp32.act(greedy), half.act(greedy)):
        n = next((i for i, (x, y) in enumerate(zip(a.completion_ids, b.completion_ids)) if x != y), len(a.completion_ids))
        assert n >= 1 or max(a.logprobs[0], b.logprobs[0]) < -1, "the first greedy token agrees unless near a tie"
        assert b.logprobs[:n] == pytest.approx(a.logprobs[:n], abs=0.05)
    config = OptimConfig(epochs=1, lr=1e-3)
    stats32 = Learner(fp32, config).update(samples(fp32))
    stats16 = Learner(half, config).update(samples(half))
    assert stats16["loss/policy"] == pytest.approx(stats32["loss/policy"], abs=0.02)
    assert stats16["policy/grad_norm"] == pytest.approx(stats32["policy/grad_norm"], rel=0.05)


def test_a_bf16_base_keeps_its_lora_adapters_and_losses_in_fp32():
    policy = load_model(TrainConfig(dtype="bfloat16", lora={"r": 4}))
    kinds = {p.dtype for n, p in policy.model.named_parameters() if "lora_" in n}
    base = {p.dtype for n, p in policy.model.named_parameters() if "lora_" not in n}
    assert kinds == {torch.float32} and base == {torch.bfloat16}
    lp, _, _ = policy.completion_logprobs(policy.encode(["Your card is K."]), [[1, 2, 3]], ["policy"])
    assert lp.dtype == torch.float32


def test_the_models_attend_with_sdpa():
    assert load_tiny().model.config._attn_implementation == "sdpa"  # flash attention where the backend has it


def test_device_and_dtype_selection(tmp_path):
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_dtype("auto", torch.device("cpu")) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype("float32", torch.device("cuda")) == torch.float32
    assert resolve_dtype("auto", torch.device("cuda"), full_training=True) == torch.float32  # bf16 would round steps away
    with pytest.raises(ValueError, match="choose auto, cpu, cuda or cuda:N"):
        resolve_device("tpu")
    with pytest.raises(ValueError, match="CUDA device"):
        resolve_device(f"cuda:{torch.cuda.device_count() if torch.cuda.is_available() else 0}")
    path = tmp_path / "run.toml"
    path.write_text('device = "cuda:7"\n')
    if torch.cuda.device_count() < 8:
        with pytest.raises(ConfigError, match=r"run.toml: device: .*cuda:7"):
            load_config(path)
    path.write_text('dtype = "float16"\n')
    with pytest.raises(ConfigError, match=r"run.toml: dtype: "):
        load_config(path)


class FlakyMemory:
    """Stands in for a device allocator: a forward pass over more than ``rows`` rows (or with
    more than ``tokens`` tokens) raises the out-of-memory error CUDA would."""

    def __init__(self, policy: HFPolicy, rows: int, tokens: int = 10**9):
        self.forward, self.rows, self.tokens, self.failures = policy.model.forward, rows, tokens, 0
        policy.model.forward = self

    def __call__(self, *args, **kwargs):
        ids = kwargs["input_ids"]
        if ids.shape[0] > self.rows or ids.numel() > self.tokens:
            self.failures += 1
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return self.forward(*args, **kwargs)


def test_running_out_of_memory_halves_generation_and_scoring_and_changes_no_result():
    policy = load_tiny(5)
    reqs = requests(4)
    acted, scored = policy.act(reqs), policy.score(reqs, CANDIDATES)
    flaky = FlakyMemory(policy, rows=2)
    with pytest.warns(OutOfMemoryRetry, match="half size") as caught:
        assert [r.completion_ids for r in policy.act(reqs)] == [r.completion_ids for r in acted]
    assert len(caught) == 1 and flaky.failures == 1  # 4 rows fail once; halves of 2 fit
    with pytest.warns(OutOfMemoryRetry) as caught:
        again = policy.score(reqs, CANDIDATES)  # 8 candidates: 8 -> 4 -> 2 rows
    assert len(caught) == 2
    assert flat(again) == pytest.approx(flat(scored))
    failures = flaky.failures
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutOfMemoryRetry)  # the sizes that fitted are kept: no second failure
        policy.act(reqs), policy.score(reqs, CANDIDATES)
    assert flaky.failures == failures and policy.fits == {"generate": 2, "score": 2}


def test_running_out_of_memory_halves_the_learners_micro_batches_for_good_and_loses_no_update():
    policy = load_tiny(6)
    twin = copy.deepcopy(policy)
    config = OptimConfig(epochs=2, lr=1e-3, micro_batch=4)
    batch = samples(policy)
    flaky = FlakyMemory(policy, rows=3)  # 4 free-text rows fail, then 2 forced samples' 5 candidate rows
    learner = Learner(policy, config)
    with pytest.warns(OutOfMemoryRetry) as caught:
        stats = learner.update(batch)
    assert learner.micro_rows == 1 and len(caught) == 2 and flaky.failures == 2  # 4 -> 2 -> 1 sample a pass
    expected = Learner(twin, config.model_copy(update={"micro_batch": 1})).update(samples(twin))
    assert stats["loss/policy"] == pytest.approx(expected["loss/policy"], abs=1e-6)
    for (n, a), b in zip(policy.model.named_parameters(), twin.model.parameters()):
        assert torch.allclose(a, b, atol=1e-6), n
    with warnings.catch_warnings():
        warnings.simplefilter("error", OutOfMemoryRetry)
        learner.update(batch)  # the halved size is kept: no more failures
    assert flaky.failures == 2


def test_a_single_sample_that_does_not_fit_is_an_error_not_a_loop():
    policy = load_tiny(6)
    FlakyMemory(policy, rows=0)
    with pytest.warns(OutOfMemoryRetry), pytest.raises(torch.OutOfMemoryError):
        Learner(policy, OptimConfig(micro_batch=2)).update(samples(policy)[:2])


lengths = st.lists(st.tuples(st.integers(1, 40), st.integers(1, 12), st.integers(0, 3)), min_size=1, max_size=30)


@settings(max_examples=60, deadline=None)
@given(lengths, st.integers(1, 8), st.sampled_from([0, 30, 100, 400]))
def test_micro_batches_hold_every_sample_once_in_order_within_rows_and_tokens(shapes, rows, tokens):
    learner = Learner.__new__(Learner)
    learner.config = OptimConfig(micro_batch=8, micro_batch_tokens=tokens * 8 // rows if tokens else 0)
    batch = [
        TrainSample([0] * p, [1] * c, 0.0, candidates=[[1] * c] * (k + 1) if k else None, choice=0 if k else None)
        for p, c, k in shapes
    ]
    chunks = learner._chunks(batch, rows)
    assert sorted(id(s) for c in chunks for s in c) == sorted(map(id, batch))
    for kind in (False, True):
        assert [s for c in chunks for s in c if s.forced == kind] == [s for s in batch if s.forced == kind]
    for chunk in chunks:
        assert len({s.forced for s in chunk}) == 1 and len(chunk) <= rows
        if tokens and len(chunk) > 1:
            footprints = [_footprint(s) for s in chunk]
            assert sum(n for n, _ in footprints) * max(w for _, w in footprints) <= tokens


def flat(groups) -> list[float]:
    return [lp for group in groups for response in group for lp in response.logprobs]


def test_scoring_passes_respect_the_token_budget():
    policy = load_tiny(2)
    reqs, seen = requests(4), []
    score_chunk = policy._score_chunk
    policy._score_chunk = lambda chunk, requests: seen.append(chunk) or score_chunk(chunk, requests)
    expected = policy.score(reqs, CANDIDATES)
    assert len(seen) == 1  # 9 candidates: one pass
    seen.clear()
    policy.score_tokens = 200
    budgeted = policy.score(reqs, CANDIDATES)
    assert len(seen) > 1 and all(len(c) * max(len(p) + len(k) for _, p, k, _ in c) <= 200 for c in seen)
    assert flat(budgeted) == pytest.approx(flat(expected), abs=1e-5)


def test_gradient_checkpointing_with_lora_is_refused_not_silently_wrong(tmp_path):
    with pytest.raises(ValueError, match="full fine-tuning only"):
        Learner(lora_tiny(), OptimConfig(gradient_checkpointing=True), adapter="a")
    path = tmp_path / "run.toml"
    path.write_text("[optim]\ngradient_checkpointing = true\n[lora]\nr = 4\n")
    with pytest.raises(ConfigError, match=r"run.toml: \(top level\): .*gradient_checkpointing works with full fine-tuning only"):
        load_config(path)


def test_gradient_checkpointing_trains_exactly_as_without():
    plain, checkpointed = load_tiny(8), load_tiny(8)
    config = OptimConfig(epochs=2, lr=1e-3, micro_batch=3)
    a = Learner(plain, config).update(samples(plain))
    b = Learner(checkpointed, config.model_copy(update={"gradient_checkpointing": True})).update(samples(checkpointed))
    assert checkpointed.model.is_activation_checkpointing and not checkpointed.model.training
    assert b["loss/policy"] == pytest.approx(a["loss/policy"], abs=1e-6)
    for x, y in zip(plain.model.parameters(), checkpointed.model.parameters()):
        assert torch.allclose(x, y, atol=1e-4)  # the same up to rounding: without a shared prefix, sums run in another order
