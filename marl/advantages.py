"""Advantage estimators over played turns, chosen by name (``ADVANTAGE_ESTIMATORS``).

Every estimator maps a batch of turn samples to one advantage per sample. A sample carries the
return R of its seat's episode, its key (game, role) and its group (the prompt group, for GRPO).
Rewards are episode returns: every turn a role took in an episode gets the same advantage (γ = 1).

Symbols: R = ``returns``, b = ``baselines[(game, role)]``, α = ``ema_decay``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

Key = tuple[str, str]  # (game, role)


@dataclass(frozen=True)
class Sample:
    """What an estimator needs to know about one turn."""

    episode: str  # episode id: a role's turns in one episode share its return
    key: Key  # (game, role)
    ret: float  # R, the role's return in the episode
    group: Hashable = None  # GRPO's prompt group


def rae(samples: Sequence[Sample], baselines: dict[Key, float], ema_decay: float = 0.95) -> np.ndarray:
    """Role-conditioned advantage estimation (SPIRAL, https://arxiv.org/abs/2506.24119, Eqs. 8-9).

        A = R − b[(game, role)]            with b read before this batch's update
        b ← α·b + (1 − α)·R                once per (episode, role), in order

    Updates ``baselines`` in place (start at 0). No whitening.
    Deviation: Algorithm 1 updates b before computing A; SPIRAL's code (and this) subtracts the
    pre-update baseline, which keeps A unbiased (docs/research/spiral.md §1.2).
    """
    before = {key: baselines.get(key, 0.0) for key in {s.key for s in samples}}
    advantages = np.array([s.ret - before[s.key] for s in samples], dtype=np.float64)
    seen: set[tuple[str, Key]] = set()
    for s in samples:  # one EMA step per (episode, role), not per turn
        if (s.episode, s.key) not in seen:
            seen.add((s.episode, s.key))
            baselines[s.key] = ema_decay * baselines.get(s.key, 0.0) + (1 - ema_decay) * s.ret
    return advantages


def reinforce(samples: Sequence[Sample], baselines: dict[Key, float], ema_decay: float = 0.95) -> np.ndarray:
    """Vanilla REINFORCE: A = R (SPIRAL's "without RAE" ablation)."""
    return np.array([s.ret for s in samples], dtype=np.float64)


def batch_mean(samples: Sequence[Sample], baselines: dict[Key, float], ema_decay: float = 0.95) -> np.ndarray:
    """A = R − mean(R over the batch's episodes of the same (game, role))."""
    returns = np.array([s.ret for s in samples], dtype=np.float64)
    return returns - _group_mean(samples, returns, key=_role)


def _role(s: Sample) -> Hashable:
    return s.key


def grpo(samples: Sequence[Sample], baselines: dict[Key, float], ema_decay: float = 0.95) -> np.ndarray:
    """GRPO (https://arxiv.org/abs/2402.03300): A = (R − mean_g) / (std_g + 1e-6) within each
    (prompt group, role). Deviation: groups are keyed by role too, so seats never share a mean."""
    returns = np.array([s.ret for s in samples], dtype=np.float64)
    centred = returns - _group_mean(samples, returns, _prompt_group)
    spread = np.sqrt(_group_mean(samples, centred**2, _prompt_group))
    return centred / (spread + 1e-6)


def _prompt_group(s: Sample) -> Hashable:
    return s.group, s.key


def _group_mean(samples: Sequence[Sample], values: np.ndarray, key: Callable[[Sample], Hashable]) -> np.ndarray:
    """Each sample's group mean of ``values``, weighting every episode once (not every turn)."""
    per_episode: dict = {}
    for s, v in zip(samples, values):
        per_episode.setdefault(key(s), {})[s.episode] = v
    means = {k: float(np.mean(list(eps.values()))) for k, eps in per_episode.items()}
    return np.array([means[key(s)] for s in samples], dtype=np.float64)


ADVANTAGE_ESTIMATORS = {"rae": rae, "reinforce": reinforce, "batch_mean": batch_mean, "grpo": grpo}
