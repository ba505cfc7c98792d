"""TextArena games (SPIRAL's suite) as PettingZoo AEC envs.

``games.make("textarena/KuhnPoker-v0")`` wraps ``textarena.make("KuhnPoker-v0-raw")`` (the game
without TextArena's observation wrappers). Agents are ``player_0`` …; the observation is
``{"prompt": text}``, the transcript of every message TextArena addressed to that player, one per
line as ``[GAME] …`` or ``[Player 1] …``; actions are free text (TextArena parses them, e.g.
``[bet]`` or ``[4]``, and handles invalid moves: one retry, then the offender loses). The mover's
info says whether TextArena took the move (``valid``) and, if not, TextArena's ``reason``.

Rewards are TextArena's, paid when its game ends. ``render_mode`` is ours (``"ansi"`` returns
every transcript, ``"human"`` prints them), never passed to TextArena. ``textarena`` is an
optional dependency: ``pip install coevo[textarena]``.

TextArena draws its cards and boards from Python's global ``random`` and seeds it on reset. Each
env here keeps its own ``random`` state and swaps it in around every call, so two envs stepped in
turn (as ``seed_test`` does) stay independent and reproducible.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium

from games.core import ACTION_MAX_CHARS, PROMPT_MAX_CHARS, FreeText, TurnTakingEnv

GAME_SENDER = -1  # TextArena's id for messages from the game itself
INVALID_NOTICE = "GAME_ADMIN"  # the kind of message TextArena sends a player whose move it refused


class TextArenaEnv(TurnTakingEnv):
    """A TextArena game behind the PettingZoo AEC API.

    Args:
        env_id: a TextArena id such as ``"KuhnPoker-v0"``.
        num_players: seats to fill (TextArena's two-player games need 2).
        max_turns: turn cap; reaching it truncates the match with no further reward.
        render_mode: ``"ansi"``, ``"human"`` or None (see the module docstring).
        **kwargs: passed to ``textarena.make``.
    """

    def __init__(
        self, env_id: str, num_players: int = 2, max_turns: int = 200, render_mode: str | None = None, **kwargs: Any
    ):
        try:
            import textarena
        except ImportError as err:
            raise ImportError(f"{env_id} needs TextArena: pip install 'coevo[textarena]'") from err
        super().__init__(render_mode)
        self.env_id = env_id
        self._new_game = functools.partial(textarena.make, f"{env_id}-raw", **kwargs)
        self.game = self._new_game()  # made now so that bad arguments fail here
        self.num_players = num_players
        self.max_turns = max_turns
        self.metadata = {**TurnTakingEnv.metadata, "name": f"textarena_{env_id}"}
        self.possible_agents = [f"player_{i}" for i in range(num_players)]
        self._obs_space = gymnasium.spaces.Dict({"prompt": FreeText(PROMPT_MAX_CHARS)})
        self._act_space = FreeText(ACTION_MAX_CHARS)
        self._random_state = random.Random(0).getstate()

    move_names = None  # moves are free text, judged by TextArena itself
    rules_text = "TextArena states its rules in the first message of each player's transcript."

    def observation_space(self, agent: str) -> gymnasium.Space:
        return self._obs_space

    def legal_moves(self, agent: str) -> list[str]:
        """Unknown here: TextArena decides what is legal when the move is played."""
        return []

    def random_move(self, agent: str, rng) -> None:
        """None: TextArena's moves are free text with no list to draw from."""
        return None

    def action_of(self, move: str) -> str:
        return move

    def action_space(self, agent: str) -> gymnasium.Space:
        return self._act_space

    @contextmanager
    def _own_random(self) -> Iterator[None]:
        outside = random.getstate()
        random.setstate(self._random_state)
        try:
            yield
        finally:
            self._random_state = random.getstate()
            random.setstate(outside)

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self._seed(seed)
        # A fresh game every match: TextArena's games keep state across their own resets (Kuhn's
        # deck order), so the same seed would deal differently after earlier matches.
        self.game = self._new_game()
        with self._own_random():
            self.game.reset(num_players=self.num_players, seed=int(self.np_random.integers(2**31)))
        self.transcripts: dict[str, list[str]] = {a: [] for a in self.possible_agents}
        self._collect_messages()
        self._start(self._current_agent())

    def _current_agent(self) -> str:
        return self.possible_agents[self.game.state.current_player_id]

    def _collect_messages(self) -> dict[str, list[str]]:
        """Move what TextArena queued for each player into that player's transcript; return the
        notices of refused moves among them, per player."""
        names = self.game.state.role_mapping
        notices: dict[str, list[str]] = {a: [] for a in self.possible_agents}
        for pid, queued in self.game.state.observations.items():
            agent = self.possible_agents[pid]
            for sender, message, kind in queued:
                who = "GAME" if sender == GAME_SENDER else names.get(sender, f"Player {sender}")
                self.transcripts[agent].append(f"[{who}] {message}")
                if kind.name == INVALID_NOTICE:
                    notices[agent].append(message)
            queued.clear()
        return notices

    def observe(self, agent: str) -> dict[str, str]:
        return {"prompt": "\n".join(self.transcripts[agent])[-PROMPT_MAX_CHARS:]}

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0
        with self._own_random():
            done, step_info = self.game.step(str(action))
        refused = self._collect_messages()[agent]  # a first invalid move: TextArena asks again
        rewards = dict.fromkeys(self.agents, 0.0)
        if done:
            final, game_info = self.game.close()
            rewards = {a: float(final[i]) for i, a in enumerate(self.possible_agents)}
            mine = game_info[self.possible_agents.index(agent)]
            if mine["invalid_move"]:  # a second: the mover lost by it
                refused.append(mine["reason"])
        info = {k: str(v) for k, v in step_info.items()}
        info |= {"valid": False, "reason": refused[-1]} if refused else {"valid": True}
        self._end_turn(agent, rewards, info, done, None if done else self._current_agent())

    def _render_text(self) -> str:
        return "\n".join(f"{a}:\n" + "\n".join(t) for a, t in self.transcripts.items())
