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

Off-policy correction (asynchronous training, ``[train] mode = "async"``): a stale sample was
drawn by an older policy π_b (the behaviour policy; its log-probs recorded at sampling time), not
by π_old, the learner's weights when the update starts (the proximal policy). Per stale token:

    decoupled PPO (Hilton et al. 2022, https://arxiv.org/abs/2110.00641; AReaL, Fu et al. 2025,
    https://arxiv.org/abs/2505.24298): the clip stays around π_old and the loss is weighted by
        w_t = min(π_old(y_t) / π_b(y_t), C)                 (detached)
        ℓ_t = w_t · max(−A·ρ_t, −A·clip(ρ_t, 1 − ε, 1 + ε_high))
    truncated importance sampling (IMPALA's truncated ρ, Espeholt et al. 2018,
    https://arxiv.org/abs/1802.01561; "TIS", Yao et al. 2025): no proximal policy, no clip:
        ℓ_t = −A · min(π_θ(y_t) / π_b(y_t), C) · log π_θ(y_t)  (the weight detached)

A fresh sample (drawn by π_old itself) keeps the plain PPO term: the correction's weight is 1
there by definition, so with no stale sample the loss is exactly PPO's.

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
    behaviour_logprobs: torch.Tensor | None = None,  # (N, K) under π_b at sampling time; fresh rows: anything
    stale: torch.Tensor | None = None,  # (N,) bool: drawn by an older policy than π_old, so corrected
    correction: str = "decoupled",  # "decoupled" | "tis"
    is_cap: float = 2.0,  # C, the importance weight's truncation
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
    if stale is not None:
        per_token = _off_policy(
            per_token, logprobs, old_logprobs, behaviour_logprobs, a, stale[:, None] & (mask > 0), correction, is_cap
        )
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


def _off_policy(
    per_token: torch.Tensor,  # (N, K) the PPO term
    logprobs: torch.Tensor,  # (N, K) under π_θ
    old_logprobs: torch.Tensor,  # (N, K) under π_old, the proximal policy
    behaviour_logprobs: torch.Tensor,  # (N, K) under π_b
    a: torch.Tensor,  # (N, 1) advantages
    stale: torch.Tensor,  # (N, K) bool, the stale samples' real tokens
    correction: str,
    is_cap: float,
) -> torch.Tensor:
    """``per_token`` with the stale tokens' terms corrected (the module docstring's equations)."""
    source = old_logprobs if correction == "decoupled" else logprobs.detach()  # π_old (decoupled) or π_θ (TIS)
    rho = (source - behaviour_logprobs).detach().exp()  # (N, K): a weight, not a path for gradients
    weight = rho.clamp(max=is_cap)
    corrected = weight * per_token if correction == "decoupled" else -a * weight * logprobs
    return torch.where(stale, corrected, per_token)
