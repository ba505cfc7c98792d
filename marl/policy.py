"""The one interface every player implements, batched: language models, scripted players, humans.

- ``act(requests) -> responses``: one completion per request (text, token ids, the log-prob of
  each sampled token, why it stopped).
- ``score(requests, candidates) -> responses``: for each request, each candidate completion
  scored by teacher forcing (its tokens and their log-probs; ``Response.logprob`` sums them).
  This serves forced-choice play and exact strategy extraction.

Log-probs are those of the distribution the token was drawn from before top-p truncation:
``log_softmax(logits / T)``, with T = 1 for greedy decoding, so a forward pass can recompute them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch


@dataclass(frozen=True)
class Sampling:
    temperature: float = 1.0  # 0 = greedy
    top_p: float = 1.0  # nucleus sampling; 1 = the whole distribution
    max_new_tokens: int = 256

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")


@dataclass
class Request:
    """One turn to play. Language models read ``messages``; scripted players and humans read the env.

    ``messages`` is a chat (``{"role": "system" | "user", "content": …}`` dicts, rendered with the
    model's chat template) or a plain string, fed to the model as is: a completion-style prompt for
    models that have no use for a chat template, such as small ones trained from scratch.
    """

    messages: list[dict[str, str]] | str
    sampling: Sampling = Sampling()
    adapter: str | None = None  # LoRA member on a shared base; None = the base model
    seed: int = 0  # sampling seed for this turn
    env: Any = None  # the live game, for players that read it directly
    agent: str | None = None  # the seat to move in ``env``

    @property
    def shown(self) -> str:
        """What the player is shown this turn: the last message, or the plain prompt."""
        return self.messages if isinstance(self.messages, str) else self.messages[-1]["content"]


@dataclass
class Response:
    text: str
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # one per completion token; tokenless players score with one
    finish_reason: str = "stop"  # "stop" (end of turn), "length" (hit max_new_tokens), "scripted", "scored"

    @property
    def logprob(self) -> float:
        return math.fsum(self.logprobs)



def choice_logprobs(
    candidates: Sequence[Sequence[int]], token_logprobs: Sequence[torch.Tensor], temperature: float = 1.0
) -> torch.Tensor:
    """log π(a) of forced choice among ``candidates``, as constrained decoding would draw them.

    Wherever the candidates branch, the model's probabilities of the branching tokens are
    renormalised (at ``temperature``); tokens where only one candidate goes on count for nothing.
    So "\\boxed{bet}" against "\\boxed{check}" is decided by the model's odds of "b" against "c"
    alone: no preference for short moves, and no way to shift the choice through the letters that
    merely finish a word. ``token_logprobs[a]`` holds the log-prob of each token of candidate a
    after the prompt; differentiable.
    """
    total = []
    for cand, lps in zip(candidates, token_logprobs):
        terms = []
        for d in range(len(cand)):
            siblings: dict[int, int] = {}  # branching token -> a candidate that takes it (same context, same log-prob)
            for b, other in enumerate(candidates):
                if len(other) > d and list(other[:d]) == list(cand[:d]):
                    siblings.setdefault(other[d], b)
            if len(siblings) > 1:
                branch = torch.stack([token_logprobs[b][d] for b in siblings.values()]) / temperature
                terms.append(lps[d] / temperature - torch.logsumexp(branch, dim=0))
        total.append(torch.stack(terms).sum() if terms else lps.new_zeros(()))
    return torch.stack(total)


class Policy(Protocol):
    name: str

    def act(self, requests: Sequence[Request]) -> list[Response]: ...

    def score(self, requests: Sequence[Request], candidates: Sequence[Sequence[str]]) -> list[list[Response]]: ...


def check_policy(policy: Policy, requests: Sequence[Request], candidates: Sequence[Sequence[str]]) -> None:
    """Check ``policy`` keeps the interface's promises on these requests; raises AssertionError naming the rule."""
    responses = policy.act(requests)
    assert len(responses) == len(requests), f"act returned {len(responses)} responses for {len(requests)} requests"
    for r, req in zip(responses, requests):
        assert isinstance(r.text, str), f"response text must be str, got {type(r.text).__name__}"
        assert len(r.logprobs) == len(r.completion_ids), (
            f"one log-prob per completion token: {len(r.logprobs)} log-probs, {len(r.completion_ids)} tokens"
        )
        assert len(r.completion_ids) <= req.sampling.max_new_tokens, (
            f"{len(r.completion_ids)} tokens exceed max_new_tokens={req.sampling.max_new_tokens}"
        )
        assert all(lp <= 1e-6 for lp in r.logprobs), f"log-probs must be <= 0, got {max(r.logprobs)}"
    scored = policy.score(requests, candidates)
    assert [len(s) for s in scored] == [len(c) for c in candidates], "score returns one response per candidate"
    for row in scored:
        for s in row:
            assert len(s.logprobs) == len(s.completion_ids) or (not s.completion_ids and len(s.logprobs) == 1), (
                f"one log-prob per scored token (or one for a tokenless player): {len(s.logprobs)} for {len(s.completion_ids)}"
            )
