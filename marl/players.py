"""Players by name, as the CLI and configs name them.

``tiny`` and ``smollm2-135m`` (the embedded models), ``hf:<path or hub id>`` (any local causal
LM), ``human`` (you, at the terminal), or a scripted player of the game (``random``, ``minimax``,
``nash``, ``heuristic``…). Models load once per process and are shared by every seat that names
them, so their turns batch together.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import games
from marl.hf import HFPolicy
from marl.models import load_hf, load_smollm2, load_tiny
from marl.policy import Policy
from marl.scripted import HumanPolicy, ScriptedPolicy

MODELS: dict[str, Callable[[], HFPolicy]] = {"tiny": load_tiny, "smollm2-135m": load_smollm2}


@cache
def model(name: str) -> HFPolicy:
    """An LLM policy by name, loaded once per process."""
    if name in MODELS:
        return MODELS[name]()
    return load_hf(name.removeprefix("hf:"))


def is_model(name: str) -> bool:
    return name in MODELS or name.startswith("hf:")


def player_names(game: str) -> list[str]:
    return [*MODELS, "hf:<path>", "human", *games.scripted_players(game)]


def make_player(name: str, game: str) -> Policy:
    """The policy called ``name`` for ``game``; ValueError listing the choices if there is none."""
    if is_model(name):
        return model(name)
    if name == "human":
        return HumanPolicy()
    scripted = games.scripted_players(game)
    if name in scripted:
        return ScriptedPolicy(name, scripted[name])
    raise ValueError(f"unknown player {name!r} for {game}; choose from: {', '.join(player_names(game))}")
