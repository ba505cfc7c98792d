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
def demonstrations(game: str) -> tuple[tuple[str, str], ...]:
    """The example turns of ``game`` to show before a model's own, one per legal opening move:
    the first mover's opening observation (seed 0) and that move written in the output format.
    They show the format, not good play; a turn is shown one of them, drawn per turn, so a model
    that copies its example copies every opening move equally often instead of one. Raises
    ValueError for a game whose moves are free text."""
    env = games.make(game)
    env.reset(seed=0)
    agent = env.agent_selection
    if not choosable(env, agent):
        raise ValueError(f"{game}'s moves are free text, with no legal move to show")
    shown = env.observe(agent)["prompt"]
    return tuple((shown, demonstrated(move)) for move in env.legal_moves(agent))


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
            shown, answer = demonstrations(self.game)[self.example]
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
        return tuple(replace(self, example=k) for k in range(len(demonstrations(self.game))))

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
