"""The policy loss: critic-free PPO-clip on completion tokens, as SPIRAL trains (docs/research/spiral.md §2.4).

Per token t of a completion with advantage A (the same for every token of the turn):

    ρ_t = exp(log π_θ(y_t) − log π_old(y_t))
    ℓ_t = max(−A·ρ_t, −A·clip(ρ_t, 1 − ε, 1 + ε_high))   ε_high = ε unless given per sample
    + β·KL_t(π_θ ‖ π_ref)  (k3 estimator, http://joschu.net/blog/kl-approx.html)
    − c·H_t(π_θ)           (entropy bonus)

summed over tokens and divided by a constant (``token_normalizer``, SPIRAL: the generation limit)
rather than by each completion's length, which would bias towards short answers (Dr. GRPO), then
averaged over samples.

ADPO's dynamic upper clip (Agent0, docs/research/roles.md §1.4; ``marl.credit.adpo_clip_high``) gives
each sample its own ε_high (``clip_high``), widening the trust region upwards on ambiguous tasks;
the lower bound stays 1 − ε.

Shapes: N samples, K completion tokens (padded), mask (N, K) marks real tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LossTerms:
    loss: torch.Tensor  # scalar, to backpropagate
    policy: float
    kl: float
    entropy: float
    clipfrac: float  # fraction of tokens where the clip bound is the active one
    approx_kl: float  # E[(ρ − 1) − log ρ] against the old policy


def ppo_clip_loss(
    logprobs: torch.Tensor,  # (N, K) under π_θ, with grad
    old_logprobs: torch.Tensor,  # (N, K) under π_old, recomputed by the learner before the update
    advantages: torch.Tensor,  # (N,)
    mask: torch.Tensor,  # (N, K) bool
    clip_eps: float = 0.2,
    token_normalizer: float = 1.0,
    ref_logprobs: torch.Tensor | None = None,  # (N, K) under π_ref, for the KL term
    kl_coef: float = 0.0,
    entropy: torch.Tensor | None = None,  # (N, K) per-token entropy of π_θ
    entropy_coef: float = 0.0,
    clip_high: torch.Tensor | None = None,  # (N,) per-sample ε_high; None: ε_high = ε
) -> LossTerms:
    mask = mask.float()
    log_ratio = logprobs - old_logprobs  # (N, K)
    ratio = log_ratio.exp()
    a = advantages[:, None]  # (N, 1)
    pg_unclipped = -a * ratio
    if clip_high is None:
        clipped_ratio = ratio.clamp(1 - clip_eps, 1 + clip_eps)
    else:
        clipped_ratio = ratio.clamp(min=1 - clip_eps).minimum(1 + clip_high.to(ratio.dtype)[:, None])  # (N, K)
    pg_clipped = -a * clipped_ratio
    per_token = torch.maximum(pg_unclipped, pg_clipped)  # (N, K)
    policy = (per_token * mask).sum(-1) / token_normalizer  # (N,)
    loss = policy.mean()
    kl_value = logprobs.new_zeros(())
    if ref_logprobs is not None and kl_coef:
        d = ref_logprobs - logprobs  # (N, K)
        kl_value = ((d.exp() - d - 1) * mask).sum(-1).div(token_normalizer).mean()
        loss = loss + kl_coef * kl_value
    entropy_value = logprobs.new_zeros(())
    if entropy is not None:
        entropy_value = (entropy * mask).sum(-1).div(token_normalizer).mean()
        loss = loss - entropy_coef * entropy_value
    with torch.no_grad():
        n_tokens = mask.sum().clamp(min=1)
        clipped = (pg_clipped > pg_unclipped).float() * mask
        approx_kl = (((ratio - 1) - log_ratio) * mask).sum() / n_tokens
    return LossTerms(
        loss, float(policy.mean().detach()), float(kl_value.detach()), float(entropy_value.detach()),
        float(clipped.sum() / n_tokens), float(approx_kl),
    )  # fmt: skip
