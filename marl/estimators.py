"""Every advantage estimator a member may learn with, by name, behind one signature.

A member's turns arrive ``Credited``: each with its reward (a seat's episode return, or the part
of a task forge outcome the turn decided), its RAE key and unit, and its GRPO group. The
return-based estimators (``marl.advantages``: rae, reinforce, batch_mean, grpo) read those; ADPO
and MALT read the task forge outcome too (p̂, the attempt tree). Each estimator gives one
advantage per turn and, for ADPO, each turn's upper clip (None: the config's ε).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from marl.advantages import ADVANTAGE_ESTIMATORS, Key, Sample
from marl.credit import Node, adpo_advantages, adpo_clip_high, malt_samples
from marl.episode import Episode, Turn


@dataclass(frozen=True)
class Credited:
    """One turn to learn from, with what the estimators read."""

    episode: Episode
    turn: Turn
    reward: float
    unit: str  # RAE steps a baseline once per unit: an episode (a seat's turns share its return), or one turn
    key: Key  # RAE's baseline: (game, role)
    group: Hashable  # GRPO's group: a game, or a task's k attempts


def graph_credit(episode: Episode, turn: Turn) -> Credited:
    """A turn of an orchestration graph (``roles.graph_game``): its reward is its value (MALT's
    propagation over what saw what), each turn its own RAE unit under its (graph, node) baseline,
    and a node's copies that spoke in one round one GRPO group: they answered the same turns."""
    value, began = episode.outcome["values"][turn.index], episode.outcome["began"][turn.index]
    unit, key = f"{episode.match_id}/{turn.index}", (episode.game, turn.tag)
    return Credited(episode, turn, value, unit, key, (episode.match_id, turn.tag, began))


Advantages = tuple[np.ndarray, list[float | None]]
Estimator = Callable[[Sequence[Credited], dict[Key, float], float, float], Advantages]


def _from_returns(name: str) -> Estimator:
    def estimate(turns: Sequence[Credited], baselines: dict[Key, float], ema_decay: float, clip_eps: float) -> Advantages:
        samples = [Sample(c.unit, c.key, c.reward, c.group) for c in turns]
        return ADVANTAGE_ESTIMATORS[name](samples, baselines, ema_decay), [None] * len(turns)

    estimate.__doc__ = ADVANTAGE_ESTIMATORS[name].__doc__
    return estimate


def adpo(turns: Sequence[Credited], baselines: dict[Key, float], ema_decay: float, clip_eps: float) -> Advantages:
    """Agent0's ADPO over a task's attempts (``marl.credit``): GRPO scaled by the task's p̂, and a
    wider upper clip on ambiguous tasks."""
    p_hats = np.array([c.episode.outcome["p_hat"] for c in turns])
    rewards = np.array([c.reward for c in turns])
    return adpo_advantages(rewards, [c.group for c in turns], p_hats), [adpo_clip_high(p, clip_eps) for p in p_hats]


def malt(turns: Sequence[Credited], baselines: dict[Key, float], ema_decay: float, clip_eps: float) -> Advantages:
    """MALT's credit: a turn is good (+1) when its value, the mean of its children's in the tree
    of what saw what, is above ½, else bad (−1). An orchestration graph's outcome carries every
    turn's value (``roles.graph_game``), which its turns arrive with as their reward. In task
    forge the tree is built here per match: task → attempt (executor) → judgement (verifier) →
    revision (executor, a leaf rewarded by its correctness); turns outside that chain (tool runs,
    hints, retries, the proposal) get their reward's sign."""
    labels: dict[tuple[str, str], float] = {}
    for episode in {c.episode.match_id: c.episode for c in turns if "values" not in c.episode.outcome}.values():
        root = Node("task")
        for i, attempt in enumerate(episode.outcome["attempts"]):
            revise = Node("executor", f"revise:{i}", reward=float(attempt["revised_correct"]))
            root.children.append(Node("executor", f"attempt:{i}", [Node("verifier", f"judge:{i}", [revise])]))
        for node, _, label in malt_samples(root):
            labels[(episode.match_id, node.payload)] = 2.0 * label - 1.0
    advantages = [
        (1.0 if c.reward > 0.5 else -1.0) if "values" in c.episode.outcome
        else labels.get((c.episode.match_id, c.turn.tag), np.sign(c.reward))
        for c in turns
    ]  # fmt: skip
    return np.array(advantages, dtype=np.float64), [None] * len(turns)


ESTIMATORS: dict[str, Estimator] = {name: _from_returns(name) for name in ADVANTAGE_ESTIMATORS} | {"adpo": adpo, "malt": malt}
OUTCOME_ESTIMATORS = {"adpo": ("task_forge",), "malt": ("task_forge", "graph/")}  # they read these games' outcomes
