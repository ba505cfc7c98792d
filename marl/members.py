"""Who plays and who learns: a run's members, each built from a ``Recipe`` that any process can follow.

A member is one player: a model that learns (its learner, its own RAE baselines, its LoRA adapter
or whole weights), a model or scripted player that does not, or a frozen snapshot. Its recipe says
how to build its seat — model, seeds, LoRA settings, sampling, or the scripted player's name — as
plain data, so a Ray worker builds the very player the driver holds, and only its state travels
(trainable weights, or a scripted player's ``state_dict``), tagged with the member's ``version``.

With LoRA every model member is an adapter on the one base its (model, seed) shares, in the
``bases`` of whichever process builds it: N members and their snapshots cost one base in memory
plus N adapters, and play in one batched call.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from peft import LoraConfig

import games
from games.play import derive_seed
from games.task_forge.players import FORGE_PLAYERS
from marl.config import RolloutConfig, TrainConfig
from marl.device import host_copy, resolve_device, resolve_dtype
from marl.hf import HFPolicy
from marl.learner import load_weights, trainable_weights
from marl.models import load_hf, load_smollm2, load_tiny
from marl.policy import Sampling
from marl.rollout import SeatSpec
from marl.scripted import ScriptedPolicy

MEMBER = "policy"  # the one trained player of a plain self-play run, on every turn it plays
PLAYER = "player"  # the role of a seat game's members: they play every seat
Bases = dict[tuple[str, int], HFPolicy]  # (model, seed) -> the base its LoRA members are adapters on


def prefix(name: str) -> str:
    """Where a member's metrics go: plain self-play's one member at the top, the others under their names."""
    return "" if name == MEMBER else f"{name}/"


def load_model(config: TrainConfig, member: str = MEMBER) -> HFPolicy:
    """A fresh copy of the configured model (never the process-wide cached one: training mutates
    it); with LoRA, ``member`` names its adapter."""
    policy = _load_base(config)
    if config.lora.r:
        add_member_adapter(policy, config, member)
    else:
        policy.model.requires_grad_(True)
    return policy


def _load_base(config: TrainConfig) -> HFPolicy:
    """The configured model on its device, in its dtype (``marl.device``), before any adapter."""
    if config.model == "tiny":
        policy = load_tiny(config.model_seed)
    elif config.model == "smollm2-135m":
        policy = load_smollm2()
    else:
        policy = load_hf(config.model.removeprefix("hf:"))
    device = resolve_device(config.device)
    policy.score_tokens = config.rollout.score_batch_tokens
    policy.decode, policy.compile = config.rollout.decode, config.rollout.compile
    return policy.to(device, resolve_dtype(config.dtype, device, full_training=not config.lora.r))


def add_member_adapter(policy: HFPolicy, config: TrainConfig, member: str, trainable: bool = True) -> None:
    """``member``'s LoRA adapter, initialised from its own seed (the model seed and its name):
    the same in whichever process and order it is made, so a resumed run plays as an unbroken one."""
    seed = derive_seed(config.model_seed, zlib.crc32(member.encode()))
    policy.add_adapter(member, lora_config(config), trainable=trainable, seed=seed)


def lora_config(config: TrainConfig) -> LoraConfig:
    return LoraConfig(r=config.lora.r, lora_alpha=config.lora.alpha, target_modules=config.lora.target_modules)


def trained_seat(config: TrainConfig, policy: HFPolicy, member: str = MEMBER) -> SeatSpec:
    """How a model member plays, in training and in evaluation, wherever it runs."""
    rollout = config.rollout
    adapter = member if config.lora.r else None
    sampling = Sampling(rollout.temperature, rollout.top_p, rollout.max_new_tokens)
    return SeatSpec(
        policy, member, config.mode, sampling, adapter, rollout.invalid_moves, rollout.compact_prompts,
        rollout.demonstration, rollout.parse, rollout.max_output_chars,
    )  # fmt: skip


@dataclass(frozen=True)
class Recipe:
    """How to build one player, as data: a model member's own config (model, seeds, LoRA,
    sampling, mode), or a scripted player of ``game`` by name."""

    name: str
    config: TrainConfig
    scripted: str | None = None
    game: str = ""  # the scripted player's game
    frozen: bool = False  # a snapshot (or a fixed model): its weights are loaded, never trained


def build_seat(recipe: Recipe, bases: Bases) -> SeatSpec:
    """The recipe's player, built in this process."""
    if recipe.scripted is not None:
        players = FORGE_PLAYERS if recipe.game == "task_forge" else games.scripted_players(recipe.game)
        return SeatSpec(ScriptedPolicy(recipe.scripted, players[recipe.scripted]), recipe.name)
    config = recipe.config
    if not config.lora.r:
        policy = load_model(config, recipe.name)
        policy.model.requires_grad_(not recipe.frozen)
        return trained_seat(config, policy, recipe.name)
    key = (config.model, config.model_seed)
    if key not in bases:
        bases[key] = _load_base(config)
    add_member_adapter(bases[key], config, recipe.name, trainable=not recipe.frozen)
    return trained_seat(config, bases[key], recipe.name)


def drop_seat(seat: SeatSpec) -> None:
    """Free what a seat holds: its adapter on a shared base (a whole model goes with its last reference)."""
    if seat.adapter is not None:
        seat.policy.remove_adapter(seat.adapter)


def player_state(seat: SeatSpec) -> Any:
    """What a player's copy elsewhere needs to play as this one: a model's weights (its
    adapter's alone with LoRA), a scripted player's state (a curriculum's, a skill)."""
    if isinstance(seat.policy, HFPolicy) and seat.adapter is None:  # a frozen model trains none of them
        return {n: host_copy(p) for n, p in seat.policy.model.named_parameters()}
    if isinstance(seat.policy, HFPolicy):
        return trainable_weights(seat.policy.model, seat.adapter)
    return seat.policy.state_dict()


def load_player_state(seat: SeatSpec, state: Any) -> None:
    if isinstance(seat.policy, HFPolicy):
        load_weights(seat.policy.model, state, seat.adapter)
    else:
        seat.policy.load_state_dict(state)


def named_players(game: str, names: list[str], mode: str = "generate") -> dict[str, Member]:
    """Players by name (``marl.players``: embedded models at their defaults, scripted players) as
    fixed members of any pool; a model plays with compact prompts when it chooses."""
    players = {}
    for name in names:
        if name in games.scripted_players(game):
            recipe = Recipe(name, TrainConfig(games={game: 1.0}), scripted=name, game=game)
        else:
            rollout = RolloutConfig(compact_prompts=mode == "choose")
            recipe = Recipe(name, TrainConfig(model=name, mode=mode, games={game: 1.0}, rollout=rollout), frozen=True)
        players[name] = Member(recipe, PLAYER, build_seat(recipe, {}))
    return players


@dataclass
class Member:
    """One player of a run: how it plays (``seat``, rebuilt from ``recipe`` anywhere), which team
    it plays for, and — when it learns (its learner is its team's, ``marl.learners``) — its
    estimator and RAE baselines. ``version`` counts the changes to its state, so pools ship it
    again only when it changed."""

    recipe: Recipe
    role: str  # PLAYER for a seat game's members, else the task forge role it plays
    seat: SeatSpec
    estimator: str = "rae"
    baselines: dict[tuple[str, str], float] = field(default_factory=dict)
    settings: Any = None  # a task forge role's RoleConfig (task filter, kickstarting)
    version: int = 0

    @property
    def name(self) -> str:
        return self.recipe.name

    @property
    def policy(self):
        return self.seat.policy

    @property
    def adapter(self) -> str | None:
        return self.seat.adapter

    @property
    def scripted(self) -> ScriptedPolicy | None:
        return self.seat.policy if isinstance(self.seat.policy, ScriptedPolicy) else None

    @property
    def temperature(self) -> float:
        """The temperature forced choice plays, learns and is analysed at; 1 for free text."""
        return self.seat.sampling.temperature if self.seat.mode == "choose" else 1.0

    def retune(self, config: TrainConfig) -> None:
        """Play with new settings (PBT's sampling hyper-parameters) on the same model."""
        self.recipe = Recipe(self.name, config, self.recipe.scripted, self.recipe.game, self.recipe.frozen)
        if self.recipe.scripted is None:
            version, self.seat = self.seat.version, trained_seat(config, self.seat.policy, self.name)
            self.seat.version = version
