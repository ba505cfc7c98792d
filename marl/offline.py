"""Learning from a run's own transcripts offline: SFT on winning turns, DPO on won-vs-lost pairs.

Both read recorded ``Episode`` s (the run's shards), not fresh rollouts, so they need no reward
model and no sampling: the game's outcome labels each seat's turns as won or lost.

    SFT:  ℓ = mean over winning completions of −Σ_t log π_θ(y_t)          (per-completion NLL)
    DPO (Rafailov et al. 2023, https://arxiv.org/abs/2305.18290):
          ℓ = mean over pairs of −log σ(β·[(log π_θ(c) − log π_ref(c)) − (log π_θ(r) − log π_ref(r))])

with log π(y) the completion's summed token log-probs, c the winner's completion, r the loser's.
Pairs never cross members: each member learns from its own won and lost turns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from marl.episode import Episode, Turn


def sft_loss(logprobs: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood per completion; ``logprobs`` (N,) are summed over its tokens."""
    return -logprobs.mean()


def dpo_loss(
    chosen: torch.Tensor, rejected: torch.Tensor, ref_chosen: torch.Tensor, ref_rejected: torch.Tensor, beta: float
) -> torch.Tensor:
    """DPO over P pairs; each argument is (P,) summed completion log-probs."""
    margin = (chosen - ref_chosen) - (rejected - ref_rejected)
    return -F.logsigmoid(beta * margin).mean()


def _won(episode: Episode, seat: str) -> bool:
    """A seat won when its return is the episode's strict best (a draw is no one's win)."""
    best = max(episode.rewards.values())
    return episode.rewards[seat] == best and sum(r == best for r in episode.rewards.values()) == 1


def _lost(episode: Episode, seat: str) -> bool:
    return episode.rewards[seat] < max(episode.rewards.values())


def _learnable(turn: Turn) -> bool:
    return bool(turn.completion_ids)  # scripted and human turns carry no tokens


def winning_turns(episodes: Iterable[Episode]) -> dict[str, list[Turn]]:
    """Each member's turns from the seats it won, for SFT."""
    out: dict[str, list[Turn]] = {}
    for episode in episodes:
        for turn in episode.turns:
            if _learnable(turn) and _won(episode, turn.seat):
                out.setdefault(turn.member, []).append(turn)
    return out


@dataclass(frozen=True)
class Pair:
    member: str
    chosen: Turn
    rejected: Turn


def dpo_pairs(episodes: Iterable[Episode]) -> list[Pair]:
    """Won-vs-lost pairs, one member's turns only: a won turn pairs with a lost turn that saw the
    same prompt where one exists, else the same role at the same turn index; each lost turn is
    used at most once."""
    won: dict[str, list[Turn]] = {}
    lost: dict[str, list[Turn]] = {}
    for episode in episodes:
        for turn in filter(_learnable, episode.turns):
            if _won(episode, turn.seat):
                won.setdefault(turn.member, []).append(turn)
            elif _lost(episode, turn.seat):
                lost.setdefault(turn.member, []).append(turn)
    pairs = []
    for member, chosen_turns in won.items():
        pool = list(lost.get(member, []))
        for chosen in chosen_turns:
            match = next((t for t in pool if t.prompt_ids == chosen.prompt_ids and t.completion_ids != chosen.completion_ids), None)
            match = match or next((t for t in pool if (t.role, t.index) == (chosen.role, chosen.index)), None)
            if match is not None:
                pool.remove(match)
                pairs.append(Pair(member, chosen, match))
    return pairs


def offline_batch(episodes: Iterable[Episode], member: str, algorithm: str) -> list[tuple[Turn, float]]:
    """``member``'s turns for the learner, each with its sign: SFT's winning turns (+1), or DPO's
    pairs flattened as (chosen, +1), (rejected, −1), the order ``Learner`` reads them in."""
    if algorithm == "sft":
        return [(t, 1.0) for t in winning_turns(episodes).get(member, [])]
    return [x for p in dpo_pairs(episodes) if p.member == member for x in ((p.chosen, 1.0), (p.rejected, -1.0))]
