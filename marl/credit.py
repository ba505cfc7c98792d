"""Role-specific credit: Agent0's task filter and ADPO, MALT's tree values, and kickstarting.

- **Task filter** (Agent0, docs/research/roles.md §1.3): train the executor only on tasks whose
  self-consistency p̂ lies in [0.3, 0.8]: hard enough to teach, easy enough that the majority
  pseudo-label is likely right.
- **ADPO** (Agent0, §1.4, ``verl_tool/trainer/ppo/core_algos.py``): GRPO advantages scaled down on
  ambiguous tasks, whose labels are noisy, and a wider upper clip for them, to explore more:

      s(p̂)      = m + (1 − m)·clip((p̂ − low)/(high − low), 0, 1)
      Â_i       = s(p̂_i)·(r_i − mean_g)/(std_g + 1e-6)
      ε_high(p̂) = ε + extra·clip((high − p̂)/span, 0, 1)     ratio clipped to [1 − ε, 1 + ε_high]

  Symbols: m = ``min_scale`` (0.6 in Agent0's script), ε = ``eps``, extra = ``extra`` (Agent0's
  ``max_epsilon_bonus`` 0.1), span = ``span`` (0.5 = 0.8 − 0.3).
  Deviation: the group statistics are ``marl.advantages.grpo``'s (population std; a group of one
  gets advantage 0), where Agent0's code uses the sample std and passes a lone sample's raw reward.
- **MALT** (§2.2, https://arxiv.org/abs/2412.01928): in a generator → verifier → refiner search
  tree, a leaf's value is its outcome reward and an inner node's value is the mean of its
  children's, so every role is credited by the system's final correctness. Nodes are labelled
  good if their value exceeds 0.5; good/bad siblings (same parent, so the same prompt) make DPO pairs.
- **Kickstarting** (Schmitt et al. 2018, https://arxiv.org/abs/1803.03835): add
  λ·KL(π_teacher ‖ π_student) on the student's own tokens, with λ annealed to 0.

Shapes (kickstarting): N samples, K completion tokens (padded), V vocabulary.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from games.task_forge.families import AGENT0_BAND
from marl.advantages import Sample, grpo

# ---- Agent0: task filter and ADPO ----------------------------------------------------------------


def adpo_scale(
    p_hat: float, low: float = AGENT0_BAND[0], high: float = AGENT0_BAND[1], min_scale: float = 0.6
) -> float:
    """s(p̂) = m + (1 − m)·clip((p̂ − low)/(high − low), 0, 1): 0.6 at p̂ ≤ 0.3, 1 at p̂ ≥ 0.8."""
    if high <= low:
        raise ValueError(f"high ({high}) must exceed low ({low})")
    trust = float(np.clip((p_hat - low) / (high - low), 0.0, 1.0))
    return min_scale + (1.0 - min_scale) * trust


def adpo_clip_high(p_hat: float, eps: float = 0.2, extra: float = 0.1, high: float = 0.8, span: float = 0.5) -> float:
    """ε_high(p̂) = ε + extra·clip((high − p̂)/span, 0, 1): 0.3 at p̂ ≤ 0.3, ε at p̂ ≥ 0.8."""
    return eps + extra * float(np.clip((high - p_hat) / span, 0.0, 1.0))


def adpo_advantages(
    rewards: np.ndarray,
    groups: Sequence[Hashable],
    p_hats: np.ndarray,
    min_scale: float = 0.6,
    low: float = 0.3,
    high: float = 0.8,
) -> np.ndarray:
    """Â_i = s(p̂_i)·GRPO_i: GRPO within each group (a task's k attempts), scaled by the task's ambiguity."""
    rewards, p_hats = np.asarray(rewards, dtype=np.float64), np.asarray(p_hats, dtype=np.float64)
    if not len(rewards) == len(groups) == len(p_hats):
        raise ValueError(f"one group and p̂ per reward: {len(rewards)} rewards, {len(groups)} groups, {len(p_hats)} p̂")
    samples = [Sample(str(i), ("", ""), float(r), group=g) for i, (r, g) in enumerate(zip(rewards, groups))]
    scales = np.array([adpo_scale(p, low, high, min_scale) for p in p_hats])
    return scales * grpo(samples, {})


# ---- MALT: value iteration over the role tree ----------------------------------------------------


@dataclass(eq=False)  # identity, not field equality: values are keyed by id(node)
class Node:
    """A node of MALT's search tree: generator -> verifier -> refiner (any depth and branching)."""

    role: str
    payload: Any = None  # e.g. the turn it stands for
    children: list[Node] = field(default_factory=list)
    reward: float | None = None  # leaves only: the outcome reward R(r) ∈ [0, 1]


def malt_values(root: Node) -> dict[int, float]:
    """id(node) -> V(node): V(leaf) = R(leaf); V(inner) = mean of its children's V (MALT §2.2)."""
    values: dict[int, float] = {}

    def value(node: Node) -> float:
        if not node.children:
            if node.reward is None:
                raise ValueError(f"leaf {node.role!r} ({node.payload!r}) has no reward; every leaf needs one")
            values[id(node)] = float(node.reward)
        else:
            if node.reward is not None:
                raise ValueError(f"inner node {node.role!r} has a reward; only leaves carry rewards, inner values are means")
            values[id(node)] = float(np.mean([value(child) for child in node.children]))
        return values[id(node)]

    value(root)
    return values


def _preorder(root: Node) -> list[Node]:
    nodes, stack = [], [root]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(reversed(node.children))
    return nodes


def malt_samples(root: Node, threshold: float = 0.5) -> list[tuple[Node, float, int]]:
    """Every non-root node, in pre-order, as (node, V, label), label = 1 iff V > ``threshold``.

    Grouped by ``node.role`` these are the per-role datasets: label-1 outputs for SFT.
    """
    values = malt_values(root)
    return [(node, values[id(node)], int(values[id(node)] > threshold)) for node in _preorder(root)[1:]]


def malt_preference_pairs(root: Node, threshold: float = 0.5) -> list[tuple[Node, Node]]:
    """(good, bad) pairs of siblings (same parent, so the same prompt): MALT's DPO data."""
    values = malt_values(root)
    pairs = []
    for parent in _preorder(root):
        good = [c for c in parent.children if values[id(c)] > threshold]
        bad = [c for c in parent.children if values[id(c)] <= threshold]
        pairs += [(g, b) for g in good for b in bad]
    return pairs


# ---- Kickstarting ---------------------------------------------------------------------------------


def kickstart_kl(student_logits: torch.Tensor, teacher_logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over real tokens of KL(π_teacher ‖ π_student) = Σ_v p_t(v)·(log p_t(v) − log p_s(v)).

    ``student_logits`` and ``teacher_logits`` are (N, K, V) over the same vocabulary, ``mask`` (N, K)
    marks real tokens. Only the student gets a gradient. An empty mask gives 0 (still on the graph).
    """
    if student_logits.shape != teacher_logits.shape:
        shapes = tuple(student_logits.shape), tuple(teacher_logits.shape)
        raise ValueError(f"student and teacher logits must have one shape (N, K, V); got {shapes[0]} and {shapes[1]}")
    mask = mask.bool()
    if not mask.any():
        return student_logits.sum() * 0.0
    log_p_s = torch.log_softmax(student_logits[mask].float(), dim=-1)  # (M, V), M real tokens
    log_p_t = torch.log_softmax(teacher_logits[mask].detach().float(), dim=-1)  # (M, V)
    return (log_p_t.exp() * (log_p_t - log_p_s)).sum(-1).mean()


def anneal(start: float, end: float, step: int, steps: int) -> float:
    """Linear schedule from ``start`` at step 0 to ``end`` at ``steps`` and after (kickstarting's λ)."""
    if steps <= 0:
        return end
    done = min(max(step, 0), steps) / steps
    return start + (end - start) * done
