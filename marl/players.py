"""Players by name, as the CLI and configs name them.

``tiny`` and ``smollm2-135m`` (the embedded models), ``hf:<path or hub id>`` (any local causal
LM), ``human`` (you, at the terminal), or a scripted player of the game (``random``, ``minimax``,
``nash``, ``heuristic``…). Models load once per process and are shared by every seat that names
them, so their turns batch together.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

from huggingface_hub import try_to_load_from_cache
from huggingface_hub.errors import HFValidationError

import games
from marl.device import resolve_device, resolve_dtype
from marl.hf import HFPolicy
from marl.models import load_hf, load_smollm2, load_tiny
from marl.policy import Policy
from marl.scripted import HumanPolicy, ScriptedPolicy

MODELS: dict[str, Callable[[], HFPolicy]] = {"tiny": load_tiny, "smollm2-135m": load_smollm2}


def check_hf_model(path_or_id: str) -> None:
    """ValueError unless ``path_or_id`` is a model folder (with its ``config.json``) or a hub id
    already in the local Hugging Face cache: ``hf:`` models load offline, so nothing else can load."""
    if (Path(path_or_id) / "config.json").is_file():
        return
    try:
        cached = try_to_load_from_cache(path_or_id, "config.json")
    except HFValidationError:  # not a hub id either, e.g. an absolute path
        cached = None
    if not isinstance(cached, str):
        raise ValueError(
            f"no model at {path_or_id}: give a folder holding a model's config.json and weights, "
            "or the id of a model already in the local Hugging Face cache (hf:<path or id>)"
        )


@cache
def model(name: str) -> HFPolicy:
    """An LLM policy by name, loaded once per process, on the device ``auto`` picks (``marl.device``)."""
    if name in MODELS:
        policy = MODELS[name]()
    else:
        check_hf_model(name.removeprefix("hf:"))
        policy = load_hf(name.removeprefix("hf:"))
    device = resolve_device("auto")
    return policy.to(device, resolve_dtype("auto", device))


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
