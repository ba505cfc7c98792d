"""Episode records: every turn of a match as played, and JSONL storage that loads back identically.

A turn holds what training and analysis need: who played (seat, role, member), what it saw, the
prompt and completion token ids, the log-prob of each sampled token, the raw text, the parsed move,
whether it was valid and why not, and the action actually sent to the game. Retries are separate
turns with rising ``attempt``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from marl.rundir import write_atomic


class Turn(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    index: int  # position in the match, retries included
    seat: str
    role: str
    member: str  # who played: a model, an adapter, a scripted player, a human
    observation: str  # the text the seat saw
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]  # one per completion token, at sampling time
    text: str  # raw output
    move: str | None  # parsed move, None when invalid
    valid: bool
    reason: str = ""  # why invalid
    attempt: int = 0  # 0 first try; retries count up
    action: str | None = None  # what was sent to the game (the move, or a random legal one), None if nothing
    penalty: float = 0.0  # added to this seat's return for this turn (invalid-move costs)
    mode: str = "generate"  # "generate" (free text, parsed) or "choose" (forced choice by score)
    candidate_ids: list[list[int]] = []  # choose mode: token ids of every legal move as written
    choice: int | None = None  # choose mode: which candidate was drawn (its ids are completion_ids)
    tag: str = ""  # the step of the game this turn played (task forge: "attempt:2"), for per-turn credit
    cut_chars: int = 0  # characters of the output past rollout.max_output_chars, cut before parsing
    version: int = 0  # the weight version that played it: its member's learner updates so far (async training's staleness)
    choice_logprob: float | None = None  # choose mode: log-prob of the drawn choice at sampling time (the behaviour policy's)


class Episode(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    match_id: str
    game: str
    seed: int
    members: dict[str, str]  # seat -> member
    turns: list[Turn]
    rewards: dict[str, float]  # final return per seat, invalid-move costs included
    truncated: bool = False
    forfeited_by: str | None = None
    outcome: dict | None = None  # the game's account beyond rewards (task forge: tasks, answers, verdicts)


def write_jsonl(path: str | Path, episodes: Iterable[Episode]) -> None:
    """Write episodes, one JSON object per line, atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda f: f.writelines(episode.model_dump_json().encode("utf-8") + b"\n" for episode in episodes))


def read_jsonl(path: str | Path) -> list[Episode]:
    with open(path, encoding="utf-8") as f:
        return [Episode.model_validate_json(line) for line in f if line.strip()]
