"""The shell every coevo text game shares.

A game is two parts, as in PettingZoo's own classic games (``board.py`` beside ``tictactoe.py``):

- a **rules object** (:class:`Rules`): pure Python, no gym and no torch. It deals, applies named
  moves, says whose turn it is, what each seat may see, and what each seat earned;
- :class:`TextGameEnv`: one thin PettingZoo AEC env that serves any rules object. Observations are
  ``{"prompt": text, "action_mask": int8[K]}`` with ``Discrete(K)`` actions over the game's
  canonical move list, or ``{"prompt": text}`` with free-text actions for games whose moves are
  unbounded (negotiation offers). It adds the turn cap (truncation is a draw), the cost of an
  illegal move, and rendering as text (``render_mode="ansi"`` returns it, ``"human"`` prints it).

The observation layout is what ``pettingzoo.test.api_test`` accepts (docs/research/population.md
§1.10): the text key is ``"prompt"``, never ``"observation"``, and a text action space is never
paired with a mask.
"""

from __future__ import annotations

import re
import string
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, ClassVar

import gymnasium
import numpy as np
from gymnasium.utils import seeding
from pettingzoo import AECEnv

PROMPT_MAX_CHARS = 2**16  # the transcript window; Shimmy's text observations use the same bound
ACTION_MAX_CHARS = 2**14  # a free-text move; the rollout engine cuts longer model output before parsing

LEGAL_MOVES = "Your legal moves:"  # opens the last line of every observation that offers moves


@dataclass(frozen=True)
class GameInfo:
    """Facts about a game that tests and trainers check every episode against."""

    name: str  # registry id, e.g. "kuhn_poker"
    version: int  # bumped on any change to rules, observation text or rewards
    seats: tuple[str, ...]
    zero_sum: bool
    min_return: float  # bounds on one seat's total return over a whole match
    max_return: float
    max_turns: int  # default turn cap; reaching it truncates the match as a draw


class FreeText(gymnasium.spaces.Text):
    """A text space that contains any string up to ``max_length`` characters.

    gymnasium's ``Text`` rejects every character outside its charset, and model output is full of
    curly quotes and emoji (docs/research/population.md §1.10). Sampling still draws printable ASCII.
    """

    def __init__(self, max_length: int):
        super().__init__(max_length, min_length=0, charset=string.printable)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length


@dataclass(frozen=True)
class Parsed:
    """A move read from free text: the canonical move, or None and the reason it is invalid.

    ``named`` says whether the text named a move of the game at all (legal now or not), so that a
    role can tell output that is no move from a move that is not legal now.
    """

    move: str | None
    reason: str = ""
    named: bool = field(default=True, repr=False)

    @property
    def valid(self) -> bool:
        return self.move is not None


@cache
def _vocabulary(moves: tuple[str, ...]) -> re.Pattern[str]:
    """One regex matching any move name as a whole word, longest names first."""
    alternatives = (r"\s+".join(map(re.escape, m.split())) for m in sorted(moves, key=len, reverse=True))
    return re.compile(r"(?<!\w)(?:" + "|".join(alternatives) + r")(?!\w)")


def normalize(text: str) -> str:
    """Fold case and compatibility forms (fullwidth letters, ligatures) so parsing is lenient."""
    return unicodedata.normalize("NFKC", text).casefold()


def bare(text: str) -> str:
    """``text`` as a move is compared: folded (:func:`normalize`), whitespace collapsed, and
    whatever is not a letter or digit trimmed from both ends (``" **Bet!** "`` gives ``"bet"``)."""
    folded = " ".join(normalize(text).split())
    start, end = 0, len(folded)
    # Loops, not a regex: a pattern anchored at the end backtracks over every run of punctuation.
    while start < end and not folded[start].isalnum():
        start += 1
    while end > start and not folded[end - 1].isalnum():
        end -= 1
    return folded[start:end]


def preview(text: str, limit: int = 40) -> str:
    """The start of ``text`` on one line, for a reason: never the whole of a long output."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "…")


def match_move(text: str, legal: Sequence[str], moves: tuple[str, ...], lenient: bool = False) -> Parsed:
    """Read a named move: the text must *be* one, after :func:`bare` (case, whitespace and the
    punctuation around it do not matter), never merely mention one — "I will check, not bet"
    is no move. ``lenient`` also reads a text that names exactly one move as a whole word, and
    still refuses one that names two different moves.

    ``moves`` is the game's whole vocabulary, so that a real but illegal move gets its own reason.
    """
    given = bare(text)
    move = given if given in moves else None
    if move is None and lenient:
        named = {" ".join(m.group(0).split()) for m in _vocabulary(moves).finditer(normalize(text))}
        if len(named) > 1:
            return Parsed(None, f"names more than one move ({', '.join(sorted(named))}); legal moves: {', '.join(legal)}")
        move = named.pop() if named else None
    if move is None:
        return Parsed(None, f"not a move; got {preview(text)}; legal moves: {', '.join(legal)}", named=False)
    if move not in legal:
        return Parsed(None, f"'{move}' is not legal now; legal moves: {', '.join(legal)}")
    return Parsed(move)


def forfeit(seats: int, offender: int, illegal_reward: float, zero_sum: bool) -> list[float]:
    """What each seat earns when ``offender`` plays an illegal move and the match ends: it earns
    ``illegal_reward``; in a zero-sum game the others share the opposite, so returns still sum to zero."""
    others = -illegal_reward / (seats - 1) if zero_sum and seats > 1 else 0.0
    return [illegal_reward if s == offender else others for s in range(seats)]


def choosable(env: AECEnv, seat: str) -> bool:
    """Whether forced choice can play ``seat`` of any of our envs: a game with a move list, or free
    text whose rules offer the seat options (task forge's verdicts, its multiple choice)."""
    return env.move_names is not None or (hasattr(env, "choosable") and env.choosable(seat))


class Rules(ABC):
    """The pure rules of one match: subclass it, then serve it with :class:`TextGameEnv`.

    Seats are indices here (0, 1, …); the env maps them to ``info.seats`` names.
    """

    info: GameInfo  # a class attribute, or set per match where options change it (Kuhn's rounds)
    moves: ClassVar[tuple[str, ...] | None] = None  # canonical finite move list; None = free text
    runs_code: ClassVar[bool] = False  # a move may run a program in the sandbox: its step waits on a subprocess
    rules_text: str  # shown once at the top of every prompt

    @property
    @abstractmethod
    def to_move(self) -> int | None:
        """The seat to move, or None once the match is over."""

    @abstractmethod
    def legal_moves(self) -> list[str]:
        """Moves open to the seat to move (for free-text games: move templates, for the prompt)."""

    @abstractmethod
    def apply(self, move: str) -> list[float]:
        """Play a legal move for the seat to move; return the reward each seat earned by it."""

    @abstractmethod
    def view(self, seat: int) -> str:
        """The state and history this seat is entitled to see, as text."""

    @abstractmethod
    def render(self) -> str:
        """The full state, hidden information included, for a human debugging a match."""

    def parse(self, text: str, lenient: bool = False) -> Parsed:
        """Text that is a move to that move, if legal; never raises (see :func:`match_move`)."""
        assert self.moves is not None, "free-text games override parse"
        return match_move(text, self.legal_moves(), self.moves, lenient)

    def outcome(self) -> dict | None:
        """What happened in the match beyond the rewards, for reward shaping and analysis (games
        whose roles are rewarded by more than who won report it; the others have none)."""
        return None

    def choosable(self, seat: int) -> bool:
        """Whether ``seat``'s legal moves are all it may play, so forced choice can score them:
        always in a game with a move list; a free-text game may offer options to some seats."""
        return self.moves is not None

    def turn_tag(self) -> str:
        """Which step of the game the coming move is (task forge: ``attempt:2``), so a trainer can
        credit each turn by its own part of the outcome; "" for games where every turn is alike."""
        return ""

    def flaw(self) -> str:
        """Why the move just applied was invalid, in a game that judges moves inside the match and
        goes on (task forge: an answer without ``\\boxed{}``); "" when it was fine. Elsewhere an
        invalid move never gets applied: it ends the match first."""
        return ""

    def random_move(self, rng: np.random.Generator) -> str:
        """A uniformly random legal move (free-text games override this)."""
        legal = self.legal_moves()
        return legal[rng.integers(len(legal))]


class TurnTakingEnv(AECEnv):
    """AEC bookkeeping for games where one seat moves at a time and the match ends for all at once.

    Subclasses call ``super().__init__(render_mode)``, set ``possible_agents`` and ``max_turns``,
    call :meth:`_seed` and :meth:`_start` from ``reset`` and :meth:`_end_turn` at the end of every
    live ``step``, and say what the state reads as (:meth:`_render_text`).

    Not parallelizable: a seat sees the moves made before its own in the same round, which a
    parallel step (every agent choosing at once) cannot show.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"], "is_parallelizable": False}
    max_turns: int

    def __init__(self, render_mode: str | None = None):
        super().__init__()
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode
        self.np_random: np.random.Generator | None = None  # made by the first reset (see _seed)

    def _seed(self, seed: int | None) -> None:
        """Seed the match's randomness: from ``seed`` when given, from fresh entropy at a first
        reset without one (gymnasium's rule); a later unseeded reset goes on with the same stream."""
        if seed is not None or self.np_random is None:
            self.np_random, self.np_random_seed = seeding.np_random(seed)

    def _render_text(self) -> str:
        """The full state as text, hidden information included, for a human following a match."""
        raise NotImplementedError

    def render(self) -> str | None:
        """``"ansi"``: the state as text; ``"human"``: the same, printed (it is also printed after
        every reset and move, as gymnasium's human mode renders continuously); None: nothing."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() was called without a render_mode; make the env with render_mode='ansi' or 'human'.")
            return None
        text = self._render_text()
        if self.render_mode == "ansi":
            return text
        print(text)
        return None

    def close(self) -> None:
        """Nothing to release: rendering is text."""

    def _start(self, first: str) -> None:
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.num_turns = 0
        self.agent_selection = first
        if self.render_mode == "human":
            self.render()

    def _is_over(self) -> bool:
        return any(self.terminations.values()) or any(self.truncations.values())

    def _end_turn(
        self, mover: str, rewards: dict[str, float], info: dict, over: bool, next_agent: str | None
    ) -> None:
        """Record one move's rewards and info; end the match if ``over`` or at the turn cap.

        ``next_agent`` is who moves next when the match goes on (None when ``over``).
        """
        self.rewards = rewards
        self.infos = {a: {} for a in self.agents}
        self.infos[mover] = info
        self.num_turns += 1
        if over:
            self.terminations = dict.fromkeys(self.agents, True)
        elif self.num_turns >= self.max_turns:
            self.truncations = dict.fromkeys(self.agents, True)
        if self._is_over():
            # Every seat is now dead and must be stepped once with None, starting after the mover.
            i = self.possible_agents.index(mover)
            self.agent_selection = self.possible_agents[(i + 1) % len(self.possible_agents)]
        else:
            self.agent_selection = next_agent
        self._accumulate_rewards()
        if self.render_mode == "human":
            self.render()


class TextGameEnv(TurnTakingEnv):
    """PettingZoo AEC env around a :class:`Rules` class.

    Args:
        rules_cls: the game's rules.
        max_turns: turn cap (default ``info.max_turns``); reaching it truncates the match as a draw.
        illegal_reward: what a seat earns for an illegal action (a masked-out index, or free text
            that does not parse). The match ends; in zero-sum games the others share the opposite,
            so returns still sum to zero. PettingZoo's classic games use -1.
        render_mode: ``"ansi"`` (``render()`` returns the full state as text), ``"human"`` (prints
            it, also after every reset and move) or None.
        **options: passed to ``rules_cls`` (e.g. ``rounds=3`` for Kuhn poker).
    """

    def __init__(
        self,
        rules_cls: type[Rules],
        *,
        max_turns: int | None = None,
        illegal_reward: float = -1.0,
        render_mode: str | None = None,
        **options: Any,
    ):
        super().__init__(render_mode)
        # Built now so that bad options fail here, not at the first reset.
        self.rules = rules_cls(np.random.default_rng(0), **options)
        info = self.rules.info
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.rules_cls = rules_cls
        self.options = options
        self.info = info
        self.max_turns = max_turns or info.max_turns
        self.illegal_reward = illegal_reward
        self.metadata = {**TurnTakingEnv.metadata, "name": f"{info.name}_v{info.version}"}
        self.possible_agents = list(info.seats)
        self._seat_of = {agent: i for i, agent in enumerate(self.possible_agents)}
        self._move_index = {m: i for i, m in enumerate(rules_cls.moves or ())}
        prompt = FreeText(PROMPT_MAX_CHARS)
        if rules_cls.moves is None:
            obs_space = gymnasium.spaces.Dict({"prompt": prompt})
            act_space: gymnasium.Space = FreeText(ACTION_MAX_CHARS)
        else:
            k = len(rules_cls.moves)
            mask = gymnasium.spaces.Box(0, 1, (k,), np.int8)
            obs_space = gymnasium.spaces.Dict({"prompt": prompt, "action_mask": mask})
            act_space = gymnasium.spaces.Discrete(k)
        self._obs_spaces = {a: obs_space for a in self.possible_agents}
        self._act_spaces = {a: act_space for a in self.possible_agents}

    def observation_space(self, agent: str) -> gymnasium.Space:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.Space:
        return self._act_spaces[agent]

    @property
    def rules_text(self) -> str:
        return self.rules.rules_text

    @property
    def runs_code(self) -> bool:
        return self.rules.runs_code

    @property
    def move_names(self) -> tuple[str, ...] | None:
        """The canonical move list; ``Discrete`` action i is ``move_names[i]``."""
        return self.rules_cls.moves

    def choosable(self, agent: str) -> bool:
        """Whether forced choice can play ``agent`` (:meth:`Rules.choosable`)."""
        return self.rules.choosable(self._seat_of[agent])

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._seed(seed)
        self.rules = self.rules_cls(self.np_random, **self.options)
        self._start(self.possible_agents[self.rules.to_move])

    def legal_moves(self, agent: str) -> list[str]:
        """Named moves open to ``agent`` now: empty unless it is that seat's turn."""
        if self._is_over() or self.rules.to_move != self._seat_of[agent]:
            return []
        return self.rules.legal_moves()

    def parse_move(self, agent: str, text: str, lenient: bool = False) -> Parsed:
        """Read ``agent``'s move from text that is one (``lenient``: or names exactly one);
        invalid, with a reason, when it is not its turn."""
        if self._is_over() or self.rules.to_move != self._seat_of[agent]:
            return Parsed(None, f"it is not {agent}'s turn")
        return self.rules.parse(text, lenient)

    def random_move(self, agent: str, rng: np.random.Generator) -> str | None:
        """A uniformly random legal move for ``agent`` (None when it is not its turn)."""
        return self.rules.random_move(rng) if self.legal_moves(agent) else None

    def action_of(self, move: str) -> int | str:
        """The env action for a named move: its index in a finite game, the text otherwise."""
        return move if self.rules_cls.moves is None else self._move_index[move]

    def observe(self, agent: str) -> dict[str, Any]:
        seat = self._seat_of[agent]
        legal = self.legal_moves(agent)
        if legal:
            status = f"{LEGAL_MOVES} " + ", ".join(legal)
        elif self._is_over():
            status = "The match is over."
        else:
            status = "Waiting for the other player."
        prompt = f"{self.rules.rules_text}\n\n{self.rules.view(seat)}\n{status}"
        if self.rules_cls.moves is None:
            return {"prompt": prompt}
        mask = np.zeros(len(self.rules_cls.moves), np.int8)
        for move in legal:
            mask[self._move_index[move]] = 1
        return {"prompt": prompt, "action_mask": mask}

    def step(self, action: int | str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        parsed = self._decode(action)
        if parsed.valid:
            earned = self.rules.apply(parsed.move)
            flaw = self.rules.flaw()
            info = {"move": parsed.move, "valid": not flaw, "reason": flaw}
        else:
            earned = forfeit(len(self.possible_agents), self._seat_of[agent], self.illegal_reward, self.info.zero_sum)
            info = {"move": None, "valid": False, "reason": parsed.reason}
        rewards = {a: float(earned[self._seat_of[a]]) for a in self.agents}
        over = not parsed.valid or self.rules.to_move is None
        next_agent = None if over else self.possible_agents[self.rules.to_move]
        self._end_turn(agent, rewards, info, over, next_agent)

    def _decode(self, action: int | str | None) -> Parsed:
        if self.rules_cls.moves is None:
            if not isinstance(action, str):
                return Parsed(None, f"expected a text move, got {type(action).__name__}")
            return self.rules.parse(action)
        legal = self.rules.legal_moves()
        if not isinstance(action, (int, np.integer)) or not 0 <= action < len(self.rules_cls.moves):
            return Parsed(None, f"action {action!r} is not a move index in [0, {len(self.rules_cls.moves)})")
        move = self.rules_cls.moves[int(action)]
        if move not in legal:
            return Parsed(None, f"'{move}' is not legal now; legal moves: {', '.join(legal)}")
        return Parsed(move)

    def _render_text(self) -> str:
        return self.rules.render()

    def outcome(self) -> dict | None:
        """The rules' account of the match (see :meth:`Rules.outcome`)."""
        return self.rules.outcome()

    def turn_tag(self) -> str:
        """The step of the game the coming move is (see :meth:`Rules.turn_tag`)."""
        return self.rules.turn_tag()
