"""Per-token log-probs and entropies a chunk at a time: the plain maths' values and gradients,
and no fp32 (N, K, V) tensor kept for the backward pass."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from marl import logits as chunked
from marl.logits import token_logprobs
from marl.models import load_tiny


def plain(logits, targets):
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    return log_probs.gather(2, targets[..., None]).squeeze(2), -(log_probs.exp() * log_probs).sum(-1)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 4), k=st.integers(1, 9), vocab=st.integers(2, 40), chunk=st.integers(1, 12), seed=st.integers(0, 99))
def test_values_and_gradients_are_the_plain_maths(n, k, vocab, chunk, seed):
    rng = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, k, vocab, generator=rng, dtype=torch.float64) * 3
    targets = torch.randint(0, vocab, (n, k), generator=rng)
    weights = torch.randn(2, n, k, generator=rng, dtype=torch.float64)
    results = []
    for fn in (plain, token_logprobs):
        x = logits.clone().float().requires_grad_(True)
        original, chunked.TOKEN_CHUNK = chunked.TOKEN_CHUNK, chunk
        try:
            lp, ent = fn(x, targets)
        finally:
            chunked.TOKEN_CHUNK = original
        ((lp * weights[0].float()).sum() + (ent * weights[1].float()).sum()).backward()
        results.append((lp.detach(), ent.detach(), x.grad))
    for ours, theirs in zip(results[1], results[0]):
        assert torch.allclose(ours, theirs, atol=1e-5)


def test_a_bf16_models_learner_pass_keeps_no_fp32_logits():
    policy = load_tiny().to(torch.device("cpu"), torch.bfloat16)
    policy.model.requires_grad_(True)
    prompts = [policy.encode([f"Your card is {c}. Bet or check?"])[0] for c in "JQK"]
    completions = [[98, 101, 116, 256], [99, 104], [98, 101, 116]]
    n, k, vocab = 3, 4, policy.model.config.vocab_size
    saved = []

    def pack(tensor):
        saved.append((tensor.dtype, tuple(tensor.shape)))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        lp, real, ent = policy.completion_logprobs(prompts, completions, [None] * 3, entropy=True)
    assert lp.dtype == ent.dtype == torch.float32 and lp.shape == (n, k)
    assert saved, "the hooks should see the model's saved activations"
    fp32_logits = [shape for dtype, shape in saved if dtype == torch.float32 and shape[-1] == vocab and len(shape) > 1]
    assert not fp32_logits, f"fp32 logits kept for backward: {fp32_logits}"
    assert any(dtype == torch.bfloat16 and shape[-1] == vocab for dtype, shape in saved)  # the hooks do see logits
    ((lp * real).sum() + ent.sum()).backward()
    assert all(p.grad is not None for p in policy.model.parameters() if p.requires_grad)


def test_without_grad_nothing_is_recomputed():
    logits = torch.randn(2, 3, 5)
    with torch.no_grad():
        lp, ent = token_logprobs(logits, torch.zeros(2, 3, dtype=torch.long))
    assert not lp.requires_grad and lp.shape == ent.shape == (2, 3)
    assert torch.allclose(lp, torch.log_softmax(logits, -1)[..., 0], atol=1e-6)
