"""Per-token log-probs and entropies from next-token logits, a chunk of tokens at a time.

Why chunks: the learner needs log π(y_t) and the entropy H_t at every completion token, both in
fp32 whatever the model's dtype. Upcasting all (N, K, V) logits and taking their log-softmax
keeps two or three fp32 (N, K, V) tensors alive for the backward pass: at a 152k vocabulary,
64 completion tokens and 16 rows that is 0.6 GB each, more than a 1.5B model's activations.
Here each chunk of ``TOKEN_CHUNK`` tokens is upcast, reduced to its two numbers per token and
dropped; under grad, activation checkpointing recomputes the chunk's log-softmax in the backward
pass instead of keeping it, so only the logits in the model's own dtype are kept.
"""

from __future__ import annotations

import torch
from torch.utils.checkpoint import checkpoint

TOKEN_CHUNK = 1024  # tokens upcast to fp32 at once: (TOKEN_CHUNK, V) fp32 is 0.6 GB at a 152k vocabulary


def _chunk_stats(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(2, M): the log-prob of each target and the entropy, from (M, V) logits."""
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    token = log_probs.gather(1, targets[:, None]).squeeze(1)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    return torch.stack([token, entropy])


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, K) fp32 log-probs of ``targets`` under (N, K, V) ``logits``, and the (N, K) fp32 entropy
    of each next-token distribution; gradients flow to ``logits`` through both."""
    n, k, vocab = logits.shape
    flat, flat_targets = logits.reshape(n * k, vocab), targets.reshape(n * k)
    recompute = torch.is_grad_enabled() and logits.requires_grad
    parts = [
        checkpoint(_chunk_stats, flat[i : i + TOKEN_CHUNK], flat_targets[i : i + TOKEN_CHUNK], use_reentrant=False)
        if recompute else _chunk_stats(flat[i : i + TOKEN_CHUNK], flat_targets[i : i + TOKEN_CHUNK])
        for i in range(0, n * k, TOKEN_CHUNK)
    ]  # fmt: skip
    stats = torch.cat(parts, dim=1) if parts else flat.new_zeros((2, 0), dtype=torch.float32)
    return stats[0].reshape(n, k), stats[1].reshape(n, k)
