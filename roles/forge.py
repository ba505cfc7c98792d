"""The roles of task forge as a language model plays them: who it is, and how to answer.

The game itself reads every answer (a ``\\boxed{}`` answer or verdict, a fenced ```python tool
call, ``<task>``/``<program>`` tags) and records what it could not read as an invalid task or
answer with a reason, so a role here only frames the prompt. Rewards are shaped from the match's
outcome by :mod:`roles.rewards`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pettingzoo import AECEnv

from games.core import Parsed
from roles.rewards import RewardConfig, teacher_components, verifier_components

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
