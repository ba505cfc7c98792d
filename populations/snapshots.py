"""Frozen members: a snapshot's state (a model's trainable weights, a scripted player's state) is
kept in memory and written once, atomically, to ``snapshots/`` (checkpoints name the snapshots,
they do not copy them; one newer than a resumed checkpoint is made again, the same, and
overwrites its file). As a player, a snapshot is a frozen LoRA adapter on its member's base, a
frozen copy of its model, or a scripted player frozen in its state; the least recently used are
unloaded past ``LOADED_SNAPSHOTS``.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Collection
from pathlib import Path
from typing import Any

from safetensors.torch import load_file, save

from marl.config import TrainConfig
from marl.members import Bases, Member, Recipe, build_seat, drop_seat, load_player_state, player_state
from marl.rundir import write_atomic, write_text

LOADED_SNAPSHOTS = 64  # frozen opponents kept in memory at once (least recently used go first)


class Snapshots:
    def __init__(self, run_dir: Path, bases: Bases):
        self.folder, self.bases = Path(run_dir) / "snapshots", bases
        self.frozen: dict[str, Any] = {}  # snapshot -> its state
        self.recipes: dict[str, tuple[Recipe, str]] = {}  # snapshot -> how it plays, and its role
        self.loaded: OrderedDict[str, Member] = OrderedDict()  # snapshots in memory, as players

    def freeze(self, name: str, member: Member, config: TrainConfig) -> None:
        """``member`` as it is now, as snapshot ``name`` playing with ``config``'s settings."""
        self.recipes[name] = (snapshot_recipe(name, member, config), member.role)
        if name not in self.frozen:
            self.frozen[name] = state = player_state(member.seat)
            self.folder.mkdir(parents=True, exist_ok=True)
            if member.scripted is not None:
                write_text(self.folder / f"{name}.json", json.dumps(state))
            else:
                write_atomic(self.folder / f"{name}.safetensors", lambda f: f.write(save(state)))

    def player(self, name: str, needed: Collection[str] = ()) -> Member:
        """Snapshot ``name`` as a player, loaded if it is not in memory; past ``LOADED_SNAPSHOTS``
        the least recently used goes first, never one of the ``needed`` (this iteration's)."""
        if name not in self.loaded:
            spare = next((s for s in self.loaded if s not in needed), None)
            if len(self.loaded) >= LOADED_SNAPSHOTS and spare is not None:
                drop_seat(self.loaded.pop(spare).seat)
            recipe, role = self.recipes[name]
            seat = build_seat(recipe, self.bases)
            load_player_state(seat, self.frozen[name])
            self.loaded[name] = Member(recipe, role, seat)
        self.loaded.move_to_end(name)
        return self.loaded[name]

    def reload(self, recipes: dict[str, tuple[Recipe, str]]) -> None:
        """After a checkpoint is restored: exactly its snapshots, read back from their files."""
        self.recipes = dict(recipes)
        self.frozen = {
            name: json.loads((self.folder / f"{name}.json").read_text()) if recipe.scripted is not None
            else load_file(self.folder / f"{name}.safetensors")
            for name, (recipe, _) in recipes.items()
        }  # fmt: skip
        while self.loaded:
            drop_seat(self.loaded.popitem()[1].seat)


def snapshot_recipe(name: str, member: Member, config: TrainConfig) -> Recipe:
    """How snapshot ``name`` of ``member`` plays: as its member, with ``config``'s settings, frozen."""
    return Recipe(name, config, member.recipe.scripted, member.recipe.game, frozen=True)
