"""The roles of task forge as a language model plays them: who it is, and how to answer.

The game itself reads every answer (a ``\\boxed{}`` answer or verdict, a fenced ```python tool
call, ``<task>``/``<program>`` tags) and records what it could not read as an invalid task or
answer with a reason, so a role here only frames the prompt. Rewards are shaped from the match's
outcome by :mod:`roles.rewards`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
from pettingzoo import AECEnv

from games.core import Parsed
from games.task_forge.players import task_label
from games.task_forge.sandbox import Limits
from marl.credit import task_filter
from roles.rewards import RewardConfig, add_repetition, forge_rewards, switch_rates, teacher_components, verifier_components

GAME = "task_forge"

BRIEFS = {
    "proposer": "You are the proposer. Write tasks the executor gets right about half of the time: "
    "not trivial, not impossible, always with one exact answer that your program prints.",
    "executor": "You are the executor. Solve each task exactly. Check your work; use Python when it helps.",
    "verifier": "You are the verifier. Judge whether the executor's answer is correct, and say why in one sentence.",
    "teacher": "You are the teacher. You know the answer; help the executor find it without giving it away.",
}


@dataclass(frozen=True)
class ForgeRole:
    """A task forge seat as an LLM sees it; the role's name is the seat's (what RAE keys on)."""

    seat: str
    compact: bool = False  # the observation alone as plain text: for small models trained from scratch

    def messages(self, observation: str) -> list[dict[str, str]] | str:
        if self.compact:
            return observation.split("\n\n", 1)[-1]
        return [{"role": "system", "content": BRIEFS[self.seat]}, {"role": "user", "content": observation}]

    def format_move(self, move: str) -> str:
        return move

    def parse(self, env: AECEnv, agent: str, text: str, lenient: bool = False) -> Parsed:
        """The whole output goes to the game, which judges it (strictly: ``lenient`` is for the
        seats of competitive games); what it could not read comes back as the turn's flaw."""
        return env.parse_move(agent, text)


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
        "teacher": "teacher" in config.roles, "limits": Limits(cpu_seconds=forge.cpu_seconds, wall_seconds=forge.wall_seconds),
        "reward_fn": partial(forge_rewards, config=config.reward_config), "seed_tasks": forge.seed_tasks,
        "sandbox": forge.sandbox,
    }  # fmt: skip
