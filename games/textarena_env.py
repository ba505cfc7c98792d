"""TextArena games (SPIRAL's suite) as PettingZoo AEC envs.

``games.make("textarena/KuhnPoker-v0")`` wraps ``textarena.make("KuhnPoker-v0-raw")`` (the game
without TextArena's observation wrappers). Agents are ``player_0`` …; the observation is
``{"prompt": text}``, the transcript of every message TextArena addressed to that player, one per
line as ``[GAME] …`` or ``[Player 1] …``; actions are free text (TextArena parses them, e.g.
``[bet]`` or ``[4]``, and handles invalid moves: one retry, then the offender loses).

Rewards are TextArena's, paid when its game ends. ``textarena`` is an optional dependency:
``pip install coevo[textarena]``.

TextArena draws its cards and boards from Python's global ``random`` and seeds it on reset. Each
env here keeps its own ``random`` state and swaps it in around every call, so two envs stepped in
turn (as ``seed_test`` does) stay independent and reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import gymnasium
from gymnasium.utils import seeding
from pettingzoo import AECEnv

from games.core import ACTION_MAX_CHARS, PROMPT_MAX_CHARS, FreeText

GAME_SENDER = -1  # TextArena's id for messages from the game itself


class TextArenaEnv(AECEnv):
    """A TextArena game behind the PettingZoo AEC API.

    Args:
        env_id: a TextArena id such as ``"KuhnPoker-v0"``.
        num_players: seats to fill (TextArena's two-player games need 2).
        max_turns: turn cap; reaching it truncates the match with no further reward.
        **kwargs: passed to ``textarena.make``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "is_parallelizable": False}

    def __init__(self, env_id: str, num_players: int = 2, max_turns: int = 200, **kwargs: Any):
        try:
            import textarena
        except ImportError as err:
            raise ImportError(f"{env_id} needs TextArena: pip install 'coevo[textarena]'") from err
        super().__init__()
        self.env_id = env_id
        self.game = textarena.make(f"{env_id}-raw", **kwargs)
        self.num_players = num_players
        self.max_turns = max_turns
        self.metadata = {**TextArenaEnv.metadata, "name": f"textarena_{env_id}"}
        self.possible_agents = [f"player_{i}" for i in range(num_players)]
        self._obs_space = gymnasium.spaces.Dict({"prompt": FreeText(PROMPT_MAX_CHARS)})
        self._act_space = FreeText(ACTION_MAX_CHARS)
        self._random_state = random.Random(0).getstate()

    def observation_space(self, agent: str) -> gymnasium.Space:
        return self._obs_space

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
        if seed is not None or self.np_random is None:
            self.np_random, self.np_random_seed = seeding.np_random(seed)
        with self._own_random():
            self.game.reset(num_players=self.num_players, seed=int(self.np_random.integers(2**31)))
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = {a: 0.0 for a in self.agents}
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.transcripts: dict[str, list[str]] = {a: [] for a in self.agents}
        self.num_turns = 0
        self._collect_messages()
        self.agent_selection = self._current_agent()

    def _current_agent(self) -> str:
        return self.possible_agents[self.game.state.current_player_id]

    def _collect_messages(self) -> None:
        """Move what TextArena queued for each player into that player's transcript."""
        names = self.game.state.role_mapping
        for pid, queued in self.game.state.observations.items():
            for sender, message, _kind in queued:
                who = "GAME" if sender == GAME_SENDER else names.get(sender, f"Player {sender}")
                self.transcripts[self.possible_agents[pid]].append(f"[{who}] {message}")
            queued.clear()

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
        self._collect_messages()
        self.num_turns += 1
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self.infos = {a: {} for a in self.agents}
        self.infos[agent] = {k: str(v) for k, v in step_info.items()}
        if done:
            rewards, _game_info = self.game.close()
            self.rewards = {a: float(rewards[i]) for i, a in enumerate(self.possible_agents)}
            self.terminations = dict.fromkeys(self.agents, True)
        elif self.num_turns >= self.max_turns:
            self.truncations = dict.fromkeys(self.agents, True)
        if done or self.num_turns >= self.max_turns:
            self.agent_selection = self.possible_agents[(self.possible_agents.index(agent) + 1) % self.num_players]
        else:
            self.agent_selection = self._current_agent()
        self._accumulate_rewards()

    def render(self) -> str:
        return "\n".join(f"{a}:\n" + "\n".join(t) for a, t in self.transcripts.items())

    def close(self) -> None:
        pass
