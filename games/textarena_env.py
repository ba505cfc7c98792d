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
from typing import Any

import gymnasium

from games.core import ACTION_MAX_CHARS, PROMPT_MAX_CHARS, FreeText, TurnTakingEnv

GAME_SENDER = -1  # TextArena's id for messages from the game itself


class TextArenaEnv(TurnTakingEnv):
    """A TextArena game behind the PettingZoo AEC API.

    Args:
        env_id: a TextArena id such as ``"KuhnPoker-v0"``.
        num_players: seats to fill (TextArena's two-player games need 2).
        max_turns: turn cap; reaching it truncates the match with no further reward.
        **kwargs: passed to ``textarena.make``.
    """

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
        with self._own_random():
            self.game.reset(num_players=self.num_players, seed=int(self.np_random.integers(2**31)))
        self.transcripts: dict[str, list[str]] = {a: [] for a in self.possible_agents}
        self._collect_messages()
        self._start(self._current_agent())

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
        rewards = dict.fromkeys(self.agents, 0.0)
        if done:
            final, _game_info = self.game.close()
            rewards = {a: float(final[i]) for i, a in enumerate(self.possible_agents)}
        info = {k: str(v) for k, v in step_info.items()}
        self._end_turn(agent, rewards, info, done, None if done else self._current_agent())

    def render(self) -> str:
        return "\n".join(f"{a}:\n" + "\n".join(t) for a, t in self.transcripts.items())

    def close(self) -> None:
        pass
