"""Role rewards for the ``task_forge`` game: proposer (curriculum), executor, verifier and teacher.

A seat's reward is the sum of named components, so every term can be logged and ablated
(``forge_rewards`` returns seat -> {component: value}). The terms and where they come from
(docs/research/roles.md):

| seat     | component      | value                                                                  | source             |
|----------|----------------|------------------------------------------------------------------------|--------------------|
| proposer | invalid_task   | ``proposer_invalid`` (−1) if the task is invalid, else 0               | Agent0 code, §1.2  |
| proposer | uncertainty    | R_unc(p̂), 0 if invalid; × [majority = reference] if ``majority_gate``  | Agent0, §1.2       |
| proposer | tool_bonus     | γ·min(N_tool, C), γ = 0.05, C = 4                                      | Agent0, §1.2       |
| proposer | repetition     | −λ_rep·(cluster size / batch size), a batch term: ``add_repetition``   | Agent0, §1.2       |
| executor | correct        | mean over attempts of [final answer correct]                           | Agent0 torl reward |
| executor | format         | −0.2 × share of invalid answers                                        | format penalty     |
| verifier | agreement      | mean over attempts of [accepted] == [correct]  (constructive)          | MARTI, §4.3 item 5 |
| verifier | false_accept   | −0.5 × share of attempts accepted while wrong  (constructive)          | ours               |
| verifier | switch_away    | share of attempts right before the critique, wrong after (adversarial) | ours               |
| teacher  | progress       | mean over hinted attempts of [retry correct] − p̂                       | learning progress  |

R_unc has two forms: the paper's ``linear`` 1 − 2|p̂ − ½| and Agent0's code's ``min`` min(p̂, 1 − p̂),
which is exactly half of it (same peak at p̂ = ½, maximum ½).

Symbols: p̂ = ``outcome["p_hat"]`` (share of attempts correct before any critique), γ =
``tool_bonus``, C = ``tool_cap``, λ_rep = ``repetition_weight``.

Deviations from Agent0's code:
- p̂ is measured against the proposer's reference program's output, not against the majority
  answer; ``majority_gate = True`` restores Agent0's rule that pays the uncertainty term only when
  the executor's majority answer agrees with the proposer's (its hidden "score > 0.1" condition is
  not reproduced).
- BLEU is made symmetric (the mean of both directions) so that the matrix is a distance; Agent0
  scores one direction only. Token-identical texts are at distance 0 (smoothed sentence BLEU gives
  identical texts under four tokens a distance above ½, so they would never cluster).
- Only valid tasks form the repetition batch; invalid ones already pay ``proposer_invalid``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Literal

import numpy as np

from games.task_forge.players import task_label
from games.task_forge.families import task_filter
from roles.forge import GAME

UNCERTAINTY_FORMS = {
    "linear": lambda p: 1.0 - 2.0 * abs(p - 0.5),  # Agent0 paper: R_unc = 1 − 2|p̂ − ½|
    "min": lambda p: min(p, 1.0 - p),  # Agent0 code (curriculum_reward.py): min(p̂, 1 − p̂)
}
VERIFIER_INTENTS = ("constructive", "adversarial")
SEATS = ("proposer", "executor", "verifier", "teacher")


@dataclass(frozen=True)
class RewardConfig:
    """Weights of every reward component; defaults from docs/research/roles.md."""

    executor_correct: float = 1.0
    """weight of the executor's share of correct final answers (Agent0's torl: +1 per correct answer)"""
    executor_format: float = 0.2
    """penalty per invalid answer, as a fraction of attempts"""
    uncertainty: Literal["linear", "min"] = "linear"
    """R_unc's form. linear: 1 − 2|p̂ − ½| (Agent0 paper); min: min(p̂, 1 − p̂) (Agent0 code, half as large)"""
    majority_gate: bool = False
    """Agent0 code: pay the uncertainty term only if the majority answer agrees with the reference"""
    proposer_invalid: float = -1.0
    """the proposer's reward for an invalid task (Agent0 code: −1 when the question cannot be parsed)"""
    repetition_weight: float = 1.0
    """λ_rep: weight of the cluster-share penalty (Agent0 code: 1)"""
    repetition_threshold: float = 0.5
    """BLEU-distance threshold at which clusters stop merging (Agent0 code: 0.5)"""
    tool_bonus: float = 0.05
    """γ: reward per proposer tool call (Agent0 code: 0.05)"""
    tool_cap: int = 4
    """C: tool calls counted at most (Agent0 code: 4)"""
    verifier_correct: float = 1.0
    """weight of the verifier's agreement with the ground truth (MARTI's chain verifier: 1)"""
    verifier_false_accept: float = 0.5
    """extra penalty for accepting a wrong answer, per attempt share"""
    verifier_intent: Literal["constructive", "adversarial"] = "constructive"
    """constructive: paid for judging correctly; adversarial: paid when its critique makes the
    executor abandon a correct answer (a red-team verifier)"""
    teacher_progress: float = 1.0
    """weight of the teacher's learning progress (hinted retries' success rate minus p̂)"""

    def __post_init__(self) -> None:
        if self.uncertainty not in UNCERTAINTY_FORMS:
            raise ValueError(f"uncertainty must be one of {sorted(UNCERTAINTY_FORMS)}, not {self.uncertainty!r}")
        if self.verifier_intent not in VERIFIER_INTENTS:
            raise ValueError(f"verifier_intent must be one of {VERIFIER_INTENTS}, not {self.verifier_intent!r}")
        if self.tool_cap < 0:
            raise ValueError(f"tool_cap must be >= 0, not {self.tool_cap}")
        if self.repetition_threshold <= 0:
            raise ValueError(f"repetition_threshold must be > 0 (a BLEU distance), not {self.repetition_threshold}")


def uncertainty_reward(p_hat: float, form: str = "linear") -> float:
    """R_unc(p̂), peaking at p̂ = ½ where the executor is most uncertain (Agent0 §1.2)."""
    if not 0.0 <= p_hat <= 1.0:
        raise ValueError(f"p_hat is a share of attempts, in [0, 1]; got {p_hat}")
    if form not in UNCERTAINTY_FORMS:
        raise ValueError(f"form must be one of {sorted(UNCERTAINTY_FORMS)}, not {form!r}")
    return float(UNCERTAINTY_FORMS[form](p_hat))


def tool_bonus(calls: int, per_call: float = 0.05, cap: int = 4) -> float:
    """R_tool = γ·min(N_tool, C) (Agent0: γ = 0.05, C = 4, so at most 0.2)."""
    if calls < 0:
        raise ValueError(f"calls counts tool calls, so it must be >= 0; got {calls}")
    return per_call * min(calls, cap)


def _ngram_counts(tokens: list[str]) -> list[Counter]:
    """The text's 1- to 4-gram counts: computed once per text, not once per pair and direction."""
    return [Counter(zip(*(tokens[k:] for k in range(n)))) for n in range(1, 5)]


def _bleu(clipped: list[int], hyp_len: int, ref_len: int) -> float:
    """nltk's ``sentence_bleu`` with one reference, weights ¼ and ``SmoothingFunction().method1``
    (ε = 0.1), from the clipped 1- to 4-gram counts (tests/roles/test_rewards.py checks it against
    nltk). The clipped counts are symmetric, so one intersection serves both directions of a pair,
    and a batch of n texts costs n(n−1)/2 intersections where nltk recounts every n-gram of both
    texts 2n(n−1) times (it took 40% of a scripted task-forge run)."""
    if clipped[0] == 0:
        return 0.0
    brevity = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    logs = (0.25 * math.log((c or 0.1) / max(1, hyp_len - n)) for n, c in enumerate(clipped))
    return brevity * math.exp(math.fsum(logs))


def bleu_distances(texts: Sequence[str]) -> np.ndarray:
    """(n, n) distances 1 − BLEU, BLEU averaged over both directions; tokens are ``str.split()``."""
    tokens = [t.split() for t in texts]
    counts = [_ngram_counts(t) for t in tokens]
    n = len(tokens)
    distances = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            if tokens[i] == tokens[j]:
                continue  # see the module docstring: smoothed BLEU of short identical texts is below 1
            if not tokens[i] or not tokens[j]:
                distances[i, j] = distances[j, i] = 1.0
                continue
            clipped = [(a & b).total() for a, b in zip(counts[i], counts[j])]
            li, lj = len(tokens[i]), len(tokens[j])
            bleu = (_bleu(clipped, li, lj) + _bleu(clipped, lj, li)) / 2
            distances[i, j] = distances[j, i] = 1.0 - bleu
    return distances


def repetition_penalties(texts: Sequence[str], threshold: float = 0.5) -> list[float]:
    """Agent0's R_rep (docs/research/roles.md §1.2, curriculum_reward.py ``cluster_share_per_problem``):

    1. distance = 1 − sentence BLEU between every pair of texts (symmetric here);
    2. agglomerative clustering, average linkage, merging while the distance is below ``threshold``;
    3. penalty_i = |cluster of i| / n.

    A text alone in the batch is its own whole cluster: [1.0] (the formula's 1/1; sklearn itself
    refuses to cluster one sample). Returned as positive shares; the reward subtracts them.
    """
    if len(texts) < 2:
        return [1.0] * len(texts)
    from sklearn.cluster import AgglomerativeClustering  # here: importing sklearn takes 1.4 s, in every process

    labels = AgglomerativeClustering(
        n_clusters=None, distance_threshold=threshold, metric="precomputed", linkage="average"
    ).fit_predict(bleu_distances(texts))
    sizes = Counter(labels.tolist())
    return [sizes[label] / len(texts) for label in labels.tolist()]


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def proposer_components(outcome: dict, config: RewardConfig) -> dict[str, float]:
    tools = tool_bonus(outcome.get("proposer_tool_calls", 0), config.tool_bonus, config.tool_cap)
    if not outcome["valid_task"]:
        # Agent0 code adds the tool bonus to the −1 base as well: the tools did run
        return {"invalid_task": config.proposer_invalid, "uncertainty": 0.0, "tool_bonus": tools}
    gate = outcome["majority_agrees"] if config.majority_gate else True
    uncertainty = uncertainty_reward(outcome["p_hat"], config.uncertainty) if gate else 0.0
    return {"invalid_task": 0.0, "uncertainty": uncertainty, "tool_bonus": tools}


def executor_components(attempts: list[dict], config: RewardConfig) -> dict[str, float]:
    return {
        "correct": config.executor_correct * _mean([float(a["revised_correct"]) for a in attempts]),
        "format": -config.executor_format * _mean([float(a["answer"] is None) for a in attempts]),
    }


def verifier_components(attempts: list[dict], config: RewardConfig) -> dict[str, float]:
    if config.verifier_intent == "adversarial":
        return {"switch_away": _mean([float(a["correct"] and not a["revised_correct"]) for a in attempts])}
    # MARTI's chain verifier: 1 iff its judgement equals the attempt's correctness; no verdict = wrong
    agree = [float(a["verdict"] is not None and (a["verdict"] == "accept") == a["correct"]) for a in attempts]
    false_accepts = [float(a["verdict"] == "accept" and not a["correct"]) for a in attempts]
    return {
        "agreement": config.verifier_correct * _mean(agree),
        "false_accept": -config.verifier_false_accept * _mean(false_accepts),
    }


def teacher_components(attempts: list[dict], p_hat: float, config: RewardConfig) -> dict[str, float]:
    hinted = [float(a["hint_correct"]) for a in attempts if a.get("hint") is not None and a.get("hint_correct") is not None]
    if not hinted:
        return {"progress": 0.0}
    return {"progress": config.teacher_progress * (_mean(hinted) - p_hat)}


def forge_rewards(outcome: dict, config: RewardConfig = RewardConfig()) -> dict[str, dict[str, float]]:
    """Every seat's reward components for one ``task_forge`` match; a seat's reward is their sum.

    Every seat always gets all of its component keys (zeros where nothing happened), so that logged
    components line up across matches. An invalid task pays only the proposer's components (unless
    a seed task was played in its place: then the others are paid for it as usual).

    >>> outcome = {"valid_task": False, "invalid_reason": "no task", "task": "", "reference": None,
    ...            "proposer_tool_calls": 0, "attempts": [], "p_hat": 0.0, "majority_answer": None,
    ...            "majority_agrees": False}
    >>> forge_rewards(outcome)["proposer"]
    {'invalid_task': -1.0, 'uncertainty': 0.0, 'tool_bonus': 0.0}
    """
    attempts = outcome["attempts"]  # none when no task was played
    return {
        "proposer": proposer_components(outcome, config),
        "executor": executor_components(attempts, config),
        "verifier": verifier_components(attempts, config),
        "teacher": teacher_components(attempts, outcome["p_hat"], config),
    }


def add_repetition(
    rewards: Sequence[dict[str, dict[str, float]]], outcomes: Sequence[dict], config: RewardConfig = RewardConfig()
) -> None:
    """Add the proposer's batch term ``repetition`` = −λ_rep·penalty to each match's rewards, in place.

    The batch is the valid tasks among ``outcomes``; an invalid task's term is 0.
    """
    if len(rewards) != len(outcomes):
        raise ValueError(f"one rewards dict per outcome: got {len(rewards)} rewards for {len(outcomes)} outcomes")
    valid = [i for i, o in enumerate(outcomes) if o["valid_task"]]
    penalties = dict(zip(valid, repetition_penalties([outcomes[i]["task"] for i in valid], config.repetition_threshold)))
    for i, seat_rewards in enumerate(rewards):
        seat_rewards["proposer"]["repetition"] = -config.repetition_weight * penalties.get(i, 0.0)


def switch_rates(outcomes: Sequence[dict]) -> dict[str, float]:
    """How critiques move answers, over every attempt of every match that played a task:

    - ``correct_to_wrong``: of the attempts correct before the critique, the share wrong after;
    - ``wrong_to_correct``: of the attempts wrong before the critique, the share correct after.

    0 where there is no such attempt (never NaN).
    """
    attempts = [a for o in outcomes for a in o["attempts"]]
    right = [a for a in attempts if a["correct"]]
    wrong = [a for a in attempts if not a["correct"]]
    return {
        "correct_to_wrong": _mean([float(not a["revised_correct"]) for a in right]),
        "wrong_to_correct": _mean([float(a["revised_correct"]) for a in wrong]),
    }


def turn_reward(outcome: dict, seat: str, tag: str, config: RewardConfig, episode_reward: float) -> float:
    """Credit for one turn of task forge: the part of the outcome that turn decided.

    An executor's answer in attempt i earns that answer's correctness (less the format penalty if
    it gave none), its revision the revision's, its hinted retry the retry's; a judgement earns
    the verifier's reward on that attempt alone, a hint the teacher's. Finer than giving every
    turn the seat's mean over all attempts: an attempt is not credited with another's luck. The
    proposer's turns get the episode's reward.
    """
    phase, _, index = tag.partition(":")
    if not index:
        return episode_reward
    a = outcome["attempts"][int(index)]
    if seat == "executor":
        right = {"attempt": a["correct"], "revise": a["revised_correct"], "retry": bool(a["hint_correct"])}[phase]
        missing = phase == "attempt" and a["answer"] is None
        return config.executor_correct * float(right) - config.executor_format * float(missing)
    if seat == "verifier":
        return sum(verifier_components([a], config).values())
    if seat == "teacher":
        return sum(teacher_components([a], outcome["p_hat"], config).values())
    return episode_reward


def observe(episodes: list, config: RewardConfig, roles: Sequence[str]) -> dict:
    """Add the proposer's batch repetition penalty (Agent0's: a batch term the game could not
    add) to the episodes' rewards; log every reward component, p̂, difficulty, switch rates, and
    why tasks and answers were invalid."""
    outcomes = [ep.outcome for ep in episodes]
    shaped = [forge_rewards(o, config) for o in outcomes]
    add_repetition(shaped, outcomes, config)
    components: dict[str, list[float]] = {}
    for ep, seats in zip(episodes, shaped):
        ep.rewards["proposer"] += seats["proposer"]["repetition"]
        for seat, parts in seats.items():
            for part, value in parts.items():
                components.setdefault(f"{GAME}/{seat}/{part}", []).append(value)
    out: dict = {key: float(np.mean(values)) for key, values in components.items()}
    for seat in roles:
        out[f"{GAME}/{seat}/return"] = float(np.mean([ep.rewards[seat] for ep in episodes]))
    valid = [ep for ep in episodes if ep.outcome["valid_task"]]
    attempts = [a for o in outcomes for a in o["attempts"]]
    out["forge/valid_task_rate"] = len(valid) / len(episodes)
    out["forge/seeded_task_rate"] = float(np.mean([o["seeded"] for o in outcomes]))
    reasons = Counter(o["invalid_reason"].split(":")[0] for o in outcomes if not o["valid_task"])
    out["forge/invalid_task_reasons"] = dict(reasons.most_common(5))
    if valid:
        p_hats = np.array([ep.outcome["p_hat"] for ep in valid])
        out["forge/p_hat"] = float(p_hats.mean())
        out["forge/p_hat_in_band"] = float(np.mean([task_filter(p) for p in p_hats]))
        out["forge/difficulty"] = float(np.mean([task_label(ep.outcome["task_meta"])[1] for ep in valid]))
        out["forge/invalid_answer_rate"] = float(np.mean([a["answer"] is None for a in attempts]))
        out["forge/tool_calls_per_attempt"] = float(np.mean([a["tool_calls"] for a in attempts]))
        out.update({f"forge/switch_{k}": v for k, v in switch_rates(outcomes).items()})
    return out


def game_kwargs(config) -> dict:
    """Task forge's settings for a run's matches (``RunConfig``'s ``[forge]``, ``[roles]`` and
    ``[rewards]``), as plain data that travels with the match plans to any worker."""
    forge = config.forge
    return {
        "attempts": forge.attempts, "tool_calls": forge.tool_calls, "proposer_tool_calls": forge.proposer_tool_calls,
        "teacher": "teacher" in config.roles, "limits": forge.limits(),
        "reward_fn": partial(forge_rewards, config=config.reward_config), "seed_tasks": forge.seed_tasks,
        "sandbox": forge.sandbox, "choices": forge.choices,
    }  # fmt: skip
