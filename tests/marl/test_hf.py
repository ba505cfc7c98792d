"""The Hugging Face policy: batching is exact, recorded log-probs are recomputable, LoRA members mix."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from peft import LoraConfig

from marl.hf import PREFIX_MIN, HFPolicy, _Sampler, prefix_groups
from marl.models import load_tiny
from marl.policy import Request, Sampling, check_policy

PROMPTS = [
    "Your card is K. Legal moves: check, bet",
    "Board:\n. X .\n. O .\n. . .\nYour legal moves: a1, c1",
    "Hi",
    "Offer 3 wood for 2 gold? Legal: accept, deny, pass, offer",
]


@pytest.fixture(params=["generate", "static"])
def tiny(request, tiny):
    """The session's tiny model with each decoding loop: every promise below holds for both."""
    tiny.decode = request.param
    yield tiny
    tiny.decode = "auto"


def request(text, sampling=Sampling(0, 1, 12), **kw):
    return Request([{"role": "system", "content": "Answer in \\boxed{}."}, {"role": "user", "content": text}], sampling, **kw)


def forward_logprobs(policy, prompt_ids, completion_ids, temperature=1.0, adapter=None):
    """Log-probs of ``completion_ids`` after ``prompt_ids``: one unpadded forward pass."""
    ids = torch.tensor([prompt_ids + completion_ids])
    kwargs = {"adapter_names": [adapter or "__base__"]} if policy.adapters else {}
    with torch.no_grad():
        logits = policy.model(input_ids=ids, **kwargs).logits[0]  # (S, V)
    logprobs = torch.log_softmax(logits.float() / temperature, dim=-1)
    start = len(prompt_ids)
    return [logprobs[start - 1 + i, t].item() for i, t in enumerate(completion_ids)]


def test_interface_promises_hold(tiny):
    check_policy(tiny, [request(p) for p in PROMPTS], [["\\boxed{a}", "\\boxed{bb}"]] * len(PROMPTS))


def test_greedy_batched_equals_one_at_a_time(tiny):
    batched = tiny.act([request(p) for p in PROMPTS])
    alone = [tiny.act([request(p)])[0] for p in PROMPTS]
    assert [r.completion_ids for r in batched] == [r.completion_ids for r in alone]
    for b, a in zip(batched, alone):
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-4)


@pytest.mark.parametrize("sampling", [Sampling(0, 1, 10), Sampling(0.7, 0.9, 10), Sampling(1.3, 1.0, 10)])
def test_recorded_logprobs_match_a_forward_pass(tiny, sampling):
    # Tolerance 1e-4 (fp32): left padding in the batch changes the summation order, not the maths.
    responses = tiny.act([request(p, sampling, seed=i) for i, p in enumerate(PROMPTS)])
    temperature = sampling.temperature or 1.0
    for r in responses:
        assert r.logprobs == pytest.approx(forward_logprobs(tiny, r.prompt_ids, r.completion_ids, temperature), abs=1e-4)


def test_sampling_is_reproducible_per_seed(tiny):
    a = tiny.act([request(p, Sampling(1.0, 1.0, 8), seed=7) for p in PROMPTS])
    b = tiny.act([request(p, Sampling(1.0, 1.0, 8), seed=7) for p in PROMPTS])
    assert [r.completion_ids for r in a] == [r.completion_ids for r in b]


def test_a_sampled_turn_does_not_depend_on_its_batch(tiny):
    """Each request draws from its own seed: alone or among others, the same completion."""
    alone = tiny.act([request(PROMPTS[1], Sampling(1.0, 1.0, 12), seed=3)])[0]
    together = tiny.act([request(p, Sampling(1.0, 1.0, 12), seed=s) for s, p in zip([9, 3, 5], PROMPTS)])[1]
    assert together.completion_ids == alone.completion_ids
    assert together.logprobs == pytest.approx(alone.logprobs, abs=1e-4)


def test_per_request_sampling_settings(tiny):
    short, long = tiny.act([request("Hi", Sampling(0, 1, 3)), request("Hi", Sampling(0, 1, 9))])
    assert (len(short.completion_ids), short.finish_reason) == (3, "length")
    assert len(long.completion_ids) == 9
    assert long.completion_ids[:3] == short.completion_ids  # greedy: the same start


def test_top_p_keeps_only_the_nucleus(tiny):
    # With top_p tiny, only the most likely token may be drawn: sampling equals greedy.
    greedy = tiny.act([request(p, Sampling(0, 1, 6)) for p in PROMPTS])
    nucleus = tiny.act([request(p, Sampling(1.0, 1e-6, 6), seed=3) for p in PROMPTS])
    assert [r.completion_ids for r in nucleus] == [r.completion_ids for r in greedy]


def test_score_matches_an_unpadded_forward_pass(tiny):
    candidates = [["\\boxed{check}", "\\boxed{bet}"], ["\\boxed{a1}", "\\boxed{c1}", "x"], ["\\boxed{hello there}"], ["y"]]
    scored = tiny.score([request(p) for p in PROMPTS], candidates)
    for row, options in zip(scored, candidates):
        assert [s.text for s in row] == options
        for s in row:
            expected = forward_logprobs(tiny, s.prompt_ids, s.completion_ids)
            assert s.logprobs == pytest.approx(expected, abs=1e-4)
            assert s.logprob == pytest.approx(math.fsum(expected), abs=1e-3)


@pytest.mark.parametrize("decode", ["generate", "static"])
def test_lora_members_mix_in_one_batch(decode):
    policy = load_tiny()
    policy.decode = decode
    base_alone = policy.act([request(p) for p in PROMPTS])
    for name, scale in (("alice", 0.5), ("bob", -0.5)):
        policy.add_adapter(name, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
        with torch.no_grad():  # make each member play differently from the base
            for n, p in policy.model.named_parameters():
                if f"lora_B.{name}" in n:
                    p.copy_(torch.randn_like(p) * scale)
    adapters = ["alice", None, "bob", "alice"]
    mixed = policy.act([request(p, adapter=a) for p, a in zip(PROMPTS, adapters)])
    alone = [policy.act([request(p, adapter=a)])[0] for p, a in zip(PROMPTS, adapters)]
    assert [r.completion_ids for r in mixed] == [r.completion_ids for r in alone]
    assert mixed[1].completion_ids == base_alone[1].completion_ids  # no adapter: the base model
    bet = [["\\boxed{bet}"]]
    as_base = policy.score([request(PROMPTS[0])], bet)[0][0].logprob
    as_alice = policy.score([request(PROMPTS[0], adapter="alice")], bet)[0][0].logprob
    assert abs(as_alice - as_base) > 1e-3, "the alice adapter should change the model's distribution"
    for r, a in zip(mixed, adapters):
        assert r.logprobs == pytest.approx(forward_logprobs(policy, r.prompt_ids, r.completion_ids, adapter=a), abs=1e-4)


def test_unknown_adapter_is_named(tiny):
    with pytest.raises(ValueError, match="no adapters \\['carol'\\]"):
        tiny.act([request("Hi", adapter="carol")])


def test_smollm2_plays_a_turn(smollm2):
    [r] = smollm2.act([request("Kuhn poker. Your card is K. Legal moves: check, bet", Sampling(0, 1, 16))])
    assert isinstance(smollm2, HFPolicy) and r.text.strip()
    assert r.logprobs == pytest.approx(forward_logprobs(smollm2, r.prompt_ids, r.completion_ids), abs=1e-3)


def test_sampler_draws_from_the_tempered_nucleus():
    # 4000 rows with the same logits, one step: token frequencies must match softmax(logits / T)
    # restricted to the top-p nucleus, within 5 standard errors.
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0]).repeat(4000, 1)  # (B, V)
    temperature, top_p = 0.5, 0.95  # keeps tokens 0-2: 0.83, 0.11, 0.04 before renormalising
    requests = [Request("", Sampling(temperature, top_p, 1), seed=i) for i in range(4000)]
    sampler = _Sampler(requests, steps=1, device=torch.device("cpu"))
    chosen = sampler(torch.zeros((4000, 1), dtype=torch.long), logits).argmax(dim=-1)  # (B,)
    probs = torch.softmax(logits[0] / temperature, dim=-1)
    keep = (probs.cumsum(0) - probs) < top_p  # the smallest prefix (sorted already) reaching top_p
    expected = torch.where(keep, probs, 0.0) / probs[keep].sum()
    counts = torch.bincount(chosen, minlength=5).float() / 4000
    stderr = (expected * (1 - expected) / 4000).sqrt()
    assert (counts - expected).abs().le(5 * stderr + 1e-9).all(), (counts, expected)
    assert counts[~keep].sum() == 0, "tokens outside the nucleus are never drawn"


def test_sampler_greedy_rows_take_the_argmax():
    logits = torch.randn(6, 50)
    temperatures = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    requests = [Request("", Sampling(float(t), 1, 1), seed=i) for i, t in enumerate(temperatures)]
    out = _Sampler(requests, steps=1, device=torch.device("cpu"))(torch.zeros((6, 1), dtype=torch.long), logits)
    assert (out == out.amax(dim=-1, keepdim=True)).sum(dim=-1).eq(1).all(), "exactly one token on top per row"
    assert out.argmax(-1)[temperatures == 0].tolist() == logits.argmax(-1)[temperatures == 0].tolist()


def test_a_plain_string_prompt_is_encoded_as_is(tiny):
    chat = tiny.encode([[{"role": "user", "content": "Your card: K"}]])[0]
    plain = tiny.encode(["Your card: K"])[0]
    assert tiny.tokenizer.decode(plain) == "Your card: K" and len(plain) < len(chat)
    (scored,) = tiny.score([Request("Your card: K")], [["bet"]])
    assert scored[0].prompt_ids == plain


def test_a_prompt_shared_by_its_candidates_runs_once_and_changes_nothing():
    """Forced choice scores every candidate after one prompt: each (prompt, adapter) runs once and
    its cache serves its candidates. Log-probs and gradients equal whole rows' (the checkpointing
    path), and the same prompt under two adapters is two prompts."""
    policy = load_tiny()
    policy.add_adapter("alice", LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    prompts = [policy.encode([request(p).messages])[0] for p in PROMPTS]
    rows = [(0, "\\boxed{check}", None), (0, "\\boxed{bet}", None), (0, "\\boxed{bet}", "alice"), (1, "a1", None),
            (1, "\\boxed{c1}", None), (1, "x", None), (2, "hello there", "alice"), (3, "y", None)]  # fmt: skip
    args = (
        [prompts[i] for i, _, _ in rows],
        [policy.tokenizer.encode(c, add_special_tokens=False) for _, c, _ in rows],
        [a for _, _, a in rows],
    )
    forwards = []
    for share in (True, False):
        policy.model.zero_grad()
        prompt_passes = []
        hook = policy.model.register_forward_pre_hook(lambda m, a, kw: prompt_passes.append(kw["input_ids"].shape), with_kwargs=True)
        logits, targets, real = policy._completion_pass(*args, share=share)
        hook.remove()
        logprobs = torch.log_softmax(logits, -1).gather(2, targets[..., None]).squeeze(2)[real]
        logprobs.sum().backward()
        grads = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
        forwards.append((logprobs.detach(), targets[real], grads, prompt_passes))
    (shared, ids, grads, passes), (whole, whole_ids, whole_grads, whole_passes) = forwards
    # the start the prompts share, once per adapter; then 5 distinct (prompt, adapter); then 8 candidates
    assert [p[0] for p in passes] == [2, 5, len(rows)]
    assert len(whole_passes) == 1 and whole_passes[0][0] == len(rows)
    assert torch.equal(ids, whole_ids)
    assert torch.allclose(shared, whole, atol=1e-5)
    assert grads.keys() == whole_grads.keys() and any("lora_B.alice" in n for n in grads)
    for name, grad in grads.items():
        assert torch.allclose(grad, whole_grads[name], atol=1e-5), name


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.lists(st.integers(0, 2), min_size=1, max_size=40), st.sampled_from([None, "a", "b"])), min_size=1, max_size=8),
    st.integers(0, 3),
)
def test_prefix_groups_share_what_they_claim_and_save_the_most(rows_adapters, keep):
    """Each group's rows share their adapter and first P tokens, P leaves ``keep`` tokens to every
    row, and no other length saves more prefill tokens (brute force over every length)."""
    rows, adapters = [r for r, _ in rows_adapters], [a for _, a in rows_adapters]
    shared, owner = prefix_groups(rows, keep, adapters)
    limit = min(map(len, rows)) - keep

    def saved(length):
        return length * (len(rows) - len({(a, tuple(r[:length])) for r, a in zip(rows, adapters)}))

    best = max([0] + [saved(n) for n in range(PREFIX_MIN, limit + 1)])
    assert (saved(shared) if shared else 0) == best
    if shared:
        assert PREFIX_MIN <= shared <= limit and len(owner) == len(rows)
        for g in set(owner):
            members = [i for i, o in enumerate(owner) if o == g]
            assert len({(adapters[i], tuple(rows[i][:shared])) for i in members}) == 1
        assert len(set(owner)) == len({(a, tuple(r[:shared])) for r, a in zip(rows, adapters)})  # none split
    else:
        assert owner == []


RULES = "Kuhn poker: J < Q < K, ante 1, check or bet, then call or fold. " * 3


def population_of_two():
    """The tiny model with two LoRA members, alice and bob, each playing unlike the base."""
    policy = load_tiny()
    for name, scale in (("alice", 0.5), ("bob", -0.5)):
        policy.add_adapter(name, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
        with torch.no_grad():
            for n, p in policy.model.named_parameters():
                if f"lora_B.{name}" in n:
                    p.copy_(torch.randn_like(p) * scale)
    return policy


def population_turns():
    """24 turns in 6 groups, interleaved: alice, bob and the base, each shown an example check or bet."""
    def turn(example, card, adapter, seed):
        chat = [{"role": "system", "content": "Answer in \\boxed{}."}, {"role": "user", "content": RULES + "Your card: Q"},
                {"role": "assistant", "content": f"\\boxed{{{example}}}"}, {"role": "user", "content": RULES + f"Your card: {card}"}]  # fmt: skip
        return Request(chat, Sampling(1.0, 1.0, 8), seed=seed, adapter=adapter)

    cases = [(e, c, a) for a in ("alice", "bob", None) for e in ("check", "bet") for c in ("J", "Q", "K", "A")]
    requests = [turn(example, card, adapter, seed) for seed, (example, card, adapter) in enumerate(cases)]
    return requests[1::2] + requests[::2]


@pytest.mark.parametrize("decode", ["generate", "static"])
def test_rows_of_several_adapters_and_examples_share_each_groups_start(decode):
    """A population's turn: members' adapters mixed in one batch, each prompt showing one of two
    example moves. Each (adapter, example) start runs once, in one pass, and every row plays and
    records log-probs exactly as it would alone."""
    policy = population_of_two()
    policy.decode = decode
    requests = population_turns()
    passes = []
    hook = policy.model.get_input_embeddings().register_forward_pre_hook(lambda m, args: passes.append(args[0].shape))
    mixed = policy.act(requests)
    hook.remove()
    groups = {(r.adapter, r.messages[2]["content"]) for r in requests}
    prompt_len = len(mixed[0].prompt_ids)
    assert passes[0][0] == len(groups) == 6 and passes[0][1] > prompt_len // 2  # the starts, through the rules
    assert passes[1][0] == len(requests) and passes[1][1] < prompt_len - passes[0][1] + 2  # each row's rest
    alone = [policy.act([r])[0] for r in requests]
    assert [r.completion_ids for r in mixed] == [r.completion_ids for r in alone]
    for r, q in zip(mixed, requests):
        assert r.logprobs == pytest.approx(forward_logprobs(policy, r.prompt_ids, r.completion_ids, adapter=q.adapter), abs=1e-4)


def test_the_learner_pass_runs_each_groups_start_once_and_changes_nothing():
    """Teacher-forced (the learner's pass, packed): each (adapter, example) start runs once and its
    cache serves its group's bins; log-probs and gradients equal whole rows' (no sharing)."""
    policy = population_of_two()
    requests = population_turns()
    prompts = policy.encode([r.messages for r in requests])
    completions = [policy.tokenizer.encode(f"\\boxed{{{m}}}", add_special_tokens=False) for m in ["bet", "check", "fold"] * 8]
    adapters = [r.adapter for r in requests]
    results = []
    for share in (True, False):
        policy.model.zero_grad()
        passes = []
        hook = policy.model.get_input_embeddings().register_forward_pre_hook(lambda m, args: passes.append(args[0].shape))
        logits, targets, real = policy._completion_pass(prompts, completions, adapters, share=share)
        hook.remove()
        logprobs = torch.log_softmax(logits, -1).gather(2, targets[..., None]).squeeze(2)[real]
        logprobs.sum().backward()
        grads = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
        results.append((logprobs.detach(), grads, passes))
    (shared, grads, passes), (whole, whole_grads, whole_passes) = results
    assert len({(tuple(p), a) for p, a in zip(prompts, adapters)}) == len(prompts)  # distinct prompts: the packed path, not forced choice's
    assert passes[0][0] == 6 and len(whole_passes) == 1  # the six starts in one pass; then the packed rests
    assert passes[1][1] < whole_passes[0][1] // 3  # the bins hold the rows' rests only
    assert torch.allclose(shared, whole, atol=1e-5)
    assert grads.keys() == whole_grads.keys() and any("lora_B.bob" in n for n in grads)
    for name, grad in grads.items():
        assert torch.allclose(grad, whole_grads[name], atol=1e-5), name
