"""The role of a player in a competitive game: its prompt, its output format, its parser, and what
an invalid move costs.

A model is asked to reason, then give its move as ``\\boxed{MOVE}`` (SPIRAL's format). Reading the
answer is lenient inside the format where SPIRAL was strict (docs/research/spiral.md §3.3): the
last ``\\boxed{…}`` wins, else the last ``[…]``; ``\\text{}``, case, whitespace and the punctuation
around the move do not matter. It never guesses: output without the format is a move only when
it *is* one ("Bet."), not when it mentions one ("I will check, not bet" is invalid, with the
reason "no \\boxed{} answer"). ``parse = "lenient"`` (opt-in) also reads an answer or output that
names exactly one move, and still refuses one that names two. Output that gives no legal move is
an invalid move with a reason — never an exception — and costs what the config says:

- ``forfeit``: the match ends; the offender gets ``penalty``, every other seat ``opponent_reward``
  (SPIRAL: −1.5 / +0.5 in training, −1 / +1 in evaluation).
- ``retry:N``: the seat is asked again, up to N more times (TextArena allows 1), then forfeits.
- ``random_legal``: a uniformly random legal move is played for it, and it gets ``penalty``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cache
from typing import Literal

from pettingzoo import AECEnv

import games
from games.core import LEGAL_MOVES, Parsed, choosable
from games.formats import OUTPUT_FORMAT, TEXTARENA_FORMAT, extract_answer

FAMILY_BRIEFS = {
    "board": "You are an expert board-game player. Play to win.",
    "poker": "You are an expert poker player. Play to win as many chips as you can.",
    "negotiation": "You are a shrewd trader. Trade to increase the value of your own inventory.",
    "arena": "You are playing a two-player game. Make valid moves to win.",
}
GAME_FAMILIES = {
    "tictactoe": "board",
    "classic/connect_four-v3": "board",
    "classic/rps-v2": "board",
    "kuhn_poker": "poker",
    "leduc_holdem": "poker",
    "classic/leduc_holdem-v4": "poker",
    "simple_negotiation": "negotiation",
}
def family_of(game: str) -> str:
    return "arena" if game.startswith("textarena/") else GAME_FAMILIES.get(game, "board")


@cache
def example_states(game: str) -> dict[tuple[str, ...], str]:
    """One observation for each set of legal moves a turn may face early in ``game``: the first
    mover's opening (seed 0), then each state one move after it, the first seen for each set, so
    that a turn can be shown an example with its own legal moves. Raises ValueError for a game
    whose moves are free text."""
    env = games.make(game)
    env.reset(seed=0)
    agent = env.agent_selection
    if not choosable(env, agent):
        raise ValueError(f"{game}'s moves are free text, with no legal move to show")
    states = {tuple(env.legal_moves(agent)): env.observe(agent)["prompt"]}
    for move in env.legal_moves(agent):
        env.reset(seed=0)
        env.step(env.action_of(move))
        after = env.agent_selection
        if env.agents and not env.terminations[after] and choosable(env, after) and env.legal_moves(after):
            states.setdefault(tuple(env.legal_moves(after)), env.observe(after)["prompt"])
    return states


def demonstrations(game: str, legal: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    """The example turns to show before a turn whose legal moves are ``legal``: a state with those
    moves (``example_states``; the opening when none has them) and each of its moves written in
    the output format, one per move. They show the format, not good play; a turn is shown one of
    them, drawn per turn, so a model that copies its example copies every move equally often
    instead of one, and a move it copies is legal: shown only the opening's check and bet, SmolLM2
    went on writing them facing a bet (docs/training.md). Raises ValueError for free-text games."""
    states = example_states(game)
    legal = legal if legal in states else next(iter(states))
    return tuple((states[legal], demonstrated(move)) for move in legal)


def legal_moves_in(observation: str) -> tuple[str, ...]:
    """The legal moves an observation's last line offers; () when it offers none."""
    last = observation.rsplit("\n", 1)[-1]
    return tuple(last.removeprefix(LEGAL_MOVES).strip().split(", ")) if last.startswith(LEGAL_MOVES) else ()


def demonstrated(move: str) -> str:
    """A move written as the example turn writes it."""
    return f"I play {move}.\n\\boxed{{{move}}}"


@dataclass(frozen=True)
class InvalidMoves:
    """What an invalid move costs; see the module docstring."""

    kind: Literal["forfeit", "retry", "random_legal"] = "forfeit"
    retries: int = 0  # extra attempts for "retry"
    penalty: float = -1.0  # added to the offender's return (forfeit, random_legal)
    opponent_reward: float = 1.0  # added to every other seat's return on a forfeit

    @classmethod
    def parse(cls, spec: str, penalty: float = -1.0, opponent_reward: float = 1.0) -> InvalidMoves:
        """``"forfeit"``, ``"retry:N"`` or ``"random_legal"``."""
        kind, _, count = spec.partition(":")
        if kind == "retry" and count.isdigit() and int(count) >= 1:
            return cls("retry", int(count), penalty, opponent_reward)
        if kind in ("forfeit", "random_legal") and not count:
            return cls(kind, 0, penalty, opponent_reward)
        raise ValueError(f"invalid-move handling must be 'forfeit', 'retry:N' (N >= 1) or 'random_legal', got {spec!r}")


@dataclass(frozen=True)
class SeatRole:
    """A competitive game's seat as an LLM sees it. The role's name is the seat's (first or second
    mover), which is what role-conditioned baselines key on."""

    game: str
    compact: bool = False  # plain-text state only, bare moves: for small models trained from scratch
    demonstrate: bool = False  # one example turn (``demonstrations``) before the seat's own, as a chat exchange
    example: int = 0  # which of them (``drawn``)

    @property
    def family(self) -> str:
        return family_of(self.game)

    def messages(self, observation: str) -> list[dict[str, str]] | str:
        """System prompt (who you are, how to answer) and the seat's observation as the user turn.

        Compact: the state alone as plain text — no system prompt, rules, chat template or list of
        legal moves (forced choice offers them as the candidates) — so it ends with the game's
        last state line (Kuhn poker: the seat's card) and a model trained from scratch decides
        its move right on it, instead of having to learn to find it through attention first.
        """
        if self.compact:  # the observation is rules, a blank line, then the state
            state = observation.split("\n\n", 1)[-1].splitlines()
            return "\n".join(line for line in state if not line.startswith(LEGAL_MOVES))
        fmt = TEXTARENA_FORMAT if self.family == "arena" else OUTPUT_FORMAT
        chat = [{"role": "system", "content": f"{FAMILY_BRIEFS[self.family]} {fmt}"}]
        if self.demonstrate:  # a small pretrained model copies a format it has seen far more often than it follows one
            shown = demonstrations(self.game, legal_moves_in(observation))
            shown, answer = shown[self.example % len(shown)]
            chat += [{"role": "user", "content": shown}, {"role": "assistant", "content": answer}]
        return [*chat, {"role": "user", "content": observation}]

    def drawn(self, seed: int) -> SeatRole:
        """The role as a turn seeded ``seed`` prompts it: showing one example turn of its game,
        drawn by the seed (reproducible, and each shown equally often over many turns)."""
        variants = self.variants
        return variants[seed % len(variants)]

    @property
    def variants(self) -> tuple[SeatRole, ...]:
        """Every way a turn may prompt this role: one per example turn, or itself alone. Play draws
        among them uniformly, so a strategy read is their mean."""
        if not self.demonstrate:
            return (self,)
        count = math.lcm(*map(len, example_states(self.game)))  # each state's examples equally often
        return tuple(replace(self, example=k) for k in range(count))

    def format_move(self, move: str) -> str:
        """A move written as the role's output format asks (as its example turn writes it, when it
        shows one), for forced-choice scoring: the exact strategy read is then what play writes."""
        if self.compact:
            return move
        return demonstrated(move) if self.demonstrate else f"\\boxed{{{move}}}"

    def parse(self, env: AECEnv, agent: str, text: str, lenient: bool = False) -> Parsed:
        """Model output to a move for ``agent`` (see the module docstring); never raises."""
        answer = extract_answer(text)
        if self.family == "arena":  # TextArena judges its own moves; give it the bracketed action
            if answer is None:
                return Parsed(None, "no \\boxed{[ACTION]} or [ACTION] in the output")
            return Parsed(answer if answer.startswith("[") else f"[{answer}]")
        if answer is not None:
            return env.parse_move(agent, answer, lenient)
        parsed = env.parse_move(agent, text, lenient)
        if parsed.valid or parsed.named:
            return parsed
        return Parsed(None, "no \\boxed{} answer; the output is not a bare move either", named=False)
