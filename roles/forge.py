"""The roles of task forge as a language model plays them: who it is, and how to answer.

Each role's output format and its reader are in :mod:`games.formats` (a ``\\boxed{}`` answer or
verdict, a fenced ```python tool call, ``<task>``/``<program>`` tags); the game applies them and
records what could not be read as an invalid task or answer with a reason, so a role here frames
the prompt. Rewards and each turn's credit are shaped from the match's outcome by :mod:`roles.rewards`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pettingzoo import AECEnv

from games.core import Parsed

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
        return [{"role": "system", "content": self.brief}, {"role": "user", "content": observation}]

    @property
    def brief(self) -> str:
        return BRIEFS[self.seat]

    def format_move(self, move: str) -> str:
        return move

    def parse(self, env: AECEnv, agent: str, text: str, lenient: bool = False) -> Parsed:
        """The whole output goes to the game, which judges it (strictly: ``lenient`` is for the
        seats of competitive games); what it could not read comes back as the turn's flaw."""
        return env.parse_move(agent, text)
