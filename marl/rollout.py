"""The batched rollout engine: many matches in flight, one model call per policy per step.

Each step gathers the pending turn of every live match, groups the turns by policy (a model with
all its LoRA members counts as one: peft mixes adapters in one batch) and by action mode, and makes
one ``act`` (free text, parsed by the seat's role) or ``score`` (forced choice over the legal
moves) call per group. Matches end independently; new ones start at once so the batch stays full.
Playing one match at a time is the slow path SPIRAL's batch-size-1 generation got stuck on.

>>> from games.play import RandomPlayer
>>> from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
>>> from marl.scripted import ScriptedPolicy
>>> seat = SeatSpec(ScriptedPolicy("random", RandomPlayer), "random")
>>> [ep] = RolloutEngine().play([MatchSpec("tictactoe", seed=1, seats={"player_0": seat, "player_1": seat})])
>>> sum(ep.rewards.values())
0.0
"""

from __future__ import annotations

import os
import re
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import torch

import games
from games.core import ACTION_MAX_CHARS, choosable
from games.play import derive_seed
from marl.episode import Episode, Turn
from marl.policy import Policy, Request, Response, Sampling, choice_logprobs
from roles import role_for
from roles.forge import ForgeRole
from roles.seat import InvalidMoves, SeatRole


@dataclass
class SeatSpec:
    """Who plays a seat, and how."""

    policy: Policy
    member: str  # recorded on every turn: model, adapter or scripted player name
    mode: Literal["generate", "choose"] = "generate"
    sampling: Sampling = Sampling()
    adapter: str | None = None
    invalid: InvalidMoves = InvalidMoves()
    compact: bool = False  # compact prompts (roles.seat.SeatRole): plain-text state, bare moves
    demonstrate: bool = False  # free text: an example turn first (roles.seat.demonstrations), drawn per turn
    parse: Literal["strict", "lenient"] = "strict"  # lenient: output naming exactly one move is read as it
    max_output_chars: int = ACTION_MAX_CHARS  # longer output is cut to this before it is parsed
    version: int = 0  # the learner updates its weights have had, recorded on every turn it plays


@dataclass
class MatchSpec:
    game: str
    seed: int
    seats: dict[str, SeatSpec]
    match_id: str = ""  # default "<game>-<seed>"
    game_kwargs: dict[str, Any] = field(default_factory=dict)


_SURROGATE = re.compile("[\ud800-\udfff]")


def as_written(text: str, max_chars: int) -> tuple[str, int]:
    """A player's output as the match takes it: cut to ``max_chars`` (and how many characters that
    cut), lone surrogates replaced by U+FFFD. The cut bounds what parsers, the game and the records
    see; a lone surrogate (typed at a terminal as invalid bytes) could not be written to a UTF-8 file."""
    cut = max(len(text) - max_chars, 0)
    return _SURROGATE.sub("\ufffd", text[:max_chars]), cut


def choice_probabilities(scored: list[Response], temperature: float) -> np.ndarray:
    """Forced choice's distribution over the scored candidates (see ``marl.policy.choice_logprobs``);
    temperature 0 puts all mass on the most likely."""
    cands = [s.completion_ids for s in scored]
    if not all(cands):  # tokenless players: their candidates' log-probs are already the choice
        logps = np.array([s.logprob for s in scored])
    else:
        logps = choice_logprobs(cands, [torch.tensor(s.logprobs) for s in scored]).numpy()
    if temperature == 0:
        best = (logps == logps.max()).astype(float)
        return best / best.sum()
    weights = np.exp((logps - logps.max()) / temperature)
    return weights / weights.sum()


def choose(scored: list[Response], temperature: float, rng: np.random.Generator) -> tuple[int, float]:
    """The candidate drawn, and its log-prob under the distribution it was drawn from (what an
    off-policy correction divides by)."""
    probs = choice_probabilities(scored, temperature)
    pick = int(np.argmax(probs)) if temperature == 0 else int(rng.choice(len(probs), p=probs))
    return pick, float(np.log(probs[pick]))


def prompted_role(spec: MatchSpec, seat: str, turn: int) -> SeatRole | ForgeRole:
    """The role ``seat``'s player is prompted as at turn ``turn`` of match ``spec``: shown an example
    turn (``demonstrate``), the example drawn by the match's seed and the turn's index, apart from
    the sampling seed, so a replay or a transcript shows the same one."""
    who = spec.seats[seat]
    role = role_for(spec.game, seat, who.compact, who.demonstrate)
    return role.drawn(derive_seed(spec.seed, turn, 1)) if who.demonstrate else role


class _Live:
    """One match in flight: its env, the turns so far, and the running returns."""

    def __init__(self, spec: MatchSpec):
        self.spec = spec
        self.env = games.make(spec.game, **spec.game_kwargs)
        missing = set(self.env.possible_agents) - set(spec.seats)
        if missing:
            raise ValueError(f"{spec.game} needs players for seats {sorted(missing)}; got {sorted(spec.seats)}")
        for seat, who in spec.seats.items():
            if who.mode == "choose" and not choosable(self.env, seat):
                raise ValueError(f"{seat}: forced choice needs a game with a move list; {spec.game} takes free text from it")
        self.rng = np.random.default_rng(spec.seed)
        self.returns = dict.fromkeys(self.env.possible_agents, 0.0)
        self.turns: list[Turn] = []
        self.attempt = 0
        self.truncated = False
        self.forfeited_by: str | None = None
        self.env.reset(seed=spec.seed)
        self._skip_dead()

    @property
    def over(self) -> bool:
        return self.forfeited_by is not None or not self.env.agents

    @property
    def agent(self) -> str:
        return self.env.agent_selection

    @property
    def seat(self) -> SeatSpec:
        return self.spec.seats[self.agent]

    def _step(self, action: Any) -> None:
        """Bank the reward the seat to move has accumulated, then step (PettingZoo's AEC contract)."""
        _, reward, _, truncated, _ = self.env.last(observe=False)
        self.returns[self.agent] += float(reward)
        self.truncated |= truncated
        self.env.step(action)

    def _skip_dead(self) -> None:
        while self.env.agents and (self.env.terminations[self.agent] or self.env.truncations[self.agent]):
            self._step(None)

    @property
    def role(self) -> SeatRole | ForgeRole:
        """The role of the seat to move, as its player is prompted this turn."""
        return prompted_role(self.spec, self.agent, len(self.turns))

    def request(self) -> Request:
        observation = self.env.observe(self.agent)["prompt"]
        return Request(
            self.role.messages(observation), self.seat.sampling, self.seat.adapter,
            derive_seed(self.spec.seed, len(self.turns)), self.env, self.agent,
        )  # fmt: skip

    def candidates(self) -> list[str]:
        return [self.role.format_move(m) for m in self.env.legal_moves(self.agent)]

    def _record(self, request: Request, response: Response, **outcome: Any) -> Turn:
        turn = Turn(
            index=len(self.turns), seat=self.agent, role=self.agent, member=self.seat.member,
            observation=request.shown, prompt_ids=response.prompt_ids,
            completion_ids=response.completion_ids, logprobs=response.logprobs, text=response.text,
            attempt=self.attempt, mode=self.seat.mode, version=self.seat.version,
            tag=self.env.turn_tag() if hasattr(self.env, "turn_tag") else "",
            **outcome,
        )  # fmt: skip
        self.turns.append(turn)
        return turn

    def play_text(self, request: Request, response: Response) -> Turn:
        text, cut = as_written(response.text, self.seat.max_output_chars)
        response = replace(response, text=text)
        parsed = self.role.parse(self.env, self.agent, text, self.seat.parse == "lenient")
        if parsed.valid:
            return self._play(request, response, parsed.move, cut_chars=cut)
        return self._invalid(request, response, parsed.reason, cut_chars=cut)

    def play_choice(self, request: Request, scored: list[Response]) -> Turn:
        legal = self.env.legal_moves(self.agent)
        pick, logprob = choose(scored, self.seat.sampling.temperature, self.rng)
        choice = {"candidate_ids": [s.completion_ids for s in scored], "choice": pick, "choice_logprob": logprob}
        return self._play(request, scored[pick], legal[pick], **choice)

    def _play(self, request: Request, response: Response, move: str, **outcome: Any) -> Turn:
        """Play a move the role read; a game that judges moves inside the match (task forge) may
        still find it invalid (its flaw), which the turn records while the match goes on."""
        turn = self._record(request, response, move=move, valid=True, action=move, **outcome)
        self.attempt = 0
        self._step(self.env.action_of(move))
        info = self.env.infos.get(turn.seat, {})
        if info.get("valid") is False:
            turn.move, turn.valid, turn.reason = None, False, info.get("reason", "")
        self._skip_dead()
        return turn

    def _invalid(self, request: Request, response: Response, reason: str, cut_chars: int = 0) -> Turn:
        rule = self.seat.invalid
        outcome = {"move": None, "valid": False, "reason": reason, "cut_chars": cut_chars}
        if rule.kind == "retry" and self.attempt < rule.retries:
            turn = self._record(request, response, **outcome)
            self.attempt += 1
            return turn
        move = self.env.random_move(self.agent, self.rng) if rule.kind == "random_legal" else None
        if move is not None:  # TextArena has no move list to draw from: it forfeits instead
            turn = self._record(request, response, action=move, penalty=rule.penalty, **outcome)
            self.attempt = 0
            self._step(self.env.action_of(move))
            self._skip_dead()
            return turn
        turn = self._record(request, response, penalty=rule.penalty, **outcome)
        self.forfeited_by = self.agent
        for seat in self.returns:
            self.returns[seat] += rule.opponent_reward if seat != self.agent else 0.0
        return turn

    def episode(self) -> Episode:
        rewards = dict(self.returns)
        for turn in self.turns:
            rewards[turn.seat] += turn.penalty
        return Episode(
            match_id=self.spec.match_id or f"{self.spec.game}-{self.spec.seed}", game=self.spec.game,
            seed=self.spec.seed, members={s: who.member for s, who in self.spec.seats.items()},
            turns=self.turns, rewards=rewards, truncated=self.truncated, forfeited_by=self.forfeited_by,
            outcome=self.env.outcome() if hasattr(self.env, "outcome") else None,
        )  # fmt: skip


STEP_THREADS = 2 * (os.cpu_count() or 1)  # sandboxed programs in flight at once: each mostly starts a process


def _play_texts(group: list[_Live], requests: list[Request], responses: list[Response]) -> list[Turn]:
    """Each match's text move applied. Where a move may run a program in the sandbox (task forge),
    every match waits on its own subprocess, so the matches step at once on threads: in turn, the
    programs ran one after another, and a scripted task-forge run of 20 iterations took 46 s on 2
    cores, 35 s at once (tests/marl/test_forge_rollout.py shows the same matches either way)."""
    if len(group) > 1 and any(getattr(m.env, "runs_code", False) for m in group):
        with ThreadPoolExecutor(max_workers=min(len(group), STEP_THREADS)) as pool:
            return list(pool.map(_Live.play_text, group, requests, responses))
    return [m.play_text(r, s) for m, r, s in zip(group, requests, responses)]


class RolloutEngine:
    """Plays matches ``concurrency`` at a time, batching every model call.

    Args:
        concurrency: matches in flight at once (the batch size a model sees, at most).
        on_turn: called with (match spec, turn) after every turn, e.g. to print a transcript live.
    """

    def __init__(self, concurrency: int = 64, on_turn: Callable[[MatchSpec, Turn], None] | None = None):
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.concurrency = concurrency
        self.on_turn = on_turn

    def play(self, matches: Iterable[MatchSpec]) -> list[Episode]:
        """Play every match to its end; episodes come back in the order the matches were given."""
        queue = deque(enumerate(matches))
        live: list[tuple[int, _Live]] = []
        episodes: dict[int, Episode] = {}
        while queue or live:
            for index, match in [x for x in live if x[1].over]:
                episodes[index] = match.episode()
            live = [x for x in live if not x[1].over]
            while queue and len(live) < self.concurrency:  # refill before stepping: the batch stays full
                index, spec = queue.popleft()
                live.append((index, _Live(spec)))
            self._step_all([m for _, m in live])
        return [episodes[i] for i in range(len(episodes))]

    def _step_all(self, matches: list[_Live]) -> None:
        """One turn for every match: one batched call per (policy, mode)."""
        groups: dict[tuple[int, str], list[_Live]] = defaultdict(list)
        for match in matches:
            groups[id(match.seat.policy), match.seat.mode].append(match)
        for (_, mode), group in groups.items():
            policy = group[0].seat.policy
            requests = [m.request() for m in group]
            if mode == "choose":
                results = policy.score(requests, [m.candidates() for m in group])
                turns = [m.play_choice(r, s) for m, r, s in zip(group, requests, results)]
            else:
                turns = _play_texts(group, requests, policy.act(requests))
            if self.on_turn is not None:
                for match, turn in zip(group, turns):
                    self.on_turn(match.spec, turn)
