"""Who is in a run, read from its config: every member's recipe, team, estimator and learner.

- Plain self-play: one member, ``policy``, in every seat.
- ``[population]``: the population's members (``m0``…, or the league's ``main_0``…), each with its
  own hyper-parameters (PBT's), and its fixed scripted opponents.
- ``[roles]``: task forge; each role a team of ``members`` (its name, or ``role_0``…), models or
  scripted players, each with its role's estimator (the run's ``[advantage]`` one by default),
  task filter and kickstarting.

Full-weight members of a role differ from the start (a model seed each); LoRA members are
adapters on one base, each initialised from its own name.
"""

from __future__ import annotations

from dataclasses import dataclass

from marl.learners import LearnerSpec
from marl.members import MEMBER, PLAYER, Bases, Member, Recipe, build_seat
from coevo.config import SAMPLING_HPARAMS, RoleConfig, RunConfig
from populations.population import Population



@dataclass
class Roster:
    members: dict[str, Member]
    specs: dict[str, LearnerSpec]  # the members that learn by gradient
    teachers: dict[str, str]  # member -> the member whose model kickstarts it

    def team(self, role: str) -> list[Member]:
        return [m for m in self.members.values() if m.role == role]

    def learning_teams(self) -> dict[str, list[str]]:
        """Each team that learns by gradient, and its learners, in member order."""
        teams: dict[str, list[str]] = {}
        for name in self.specs:
            teams.setdefault(self.members[name].role, []).append(name)
        return teams


def optim_settings(hparams: dict[str, float]) -> dict[str, float]:
    """A member's hyper-parameters that belong to its learner (the rest are sampling settings)."""
    return {k: v for k, v in hparams.items() if k not in SAMPLING_HPARAMS}


def initial_hparams(config: RunConfig) -> dict[str, float]:
    """Every member's starting values of the hyper-parameters PBT tunes: the run's own."""
    ranges = config.population.pbt.ranges
    return {n: float(getattr(config.rollout if n in SAMPLING_HPARAMS else config.optim, n)) for n in ranges}


def config_of(config: RunConfig, hparams: dict[str, float]) -> RunConfig:
    """The run's config as one member has it: its own optim and sampling settings."""
    sampling = {k: v for k, v in hparams.items() if k in SAMPLING_HPARAMS}
    optim = config.optim.model_copy(update=optim_settings(hparams))
    return config.model_copy(update={"optim": optim, "rollout": config.rollout.model_copy(update=sampling)})


def build_roster(config: RunConfig, population: Population | None, bases: Bases) -> Roster:
    if config.roles is not None:
        return _role_roster(config, bases)
    if population is not None:
        return _population_roster(config, population, bases)
    member = Member(Recipe(MEMBER, config), PLAYER, build_seat(Recipe(MEMBER, config), bases), estimator=config.advantage.estimator)
    return Roster({MEMBER: member}, {MEMBER: LearnerSpec(config.optim, config.iterations)}, {})


def _population_roster(config: RunConfig, population: Population, bases: Bases) -> Roster:
    members, specs = {}, {}
    game = next(iter(config.games))
    for name, m in population.members.items():
        if m.trainable:
            recipe = Recipe(name, config_of(config, m.hparams))
            specs[name] = LearnerSpec(recipe.config.optim, config.iterations)
        else:  # a fixed scripted member (the config allows them with one game only)
            recipe = Recipe(name, config, scripted=m.player, game=game)
        members[name] = Member(recipe, PLAYER, build_seat(recipe, bases), estimator=config.advantage.estimator)
    return Roster(members, specs, {})


def _role_roster(config: RunConfig, bases: Bases) -> Roster:
    members, specs, teachers = {}, {}, {}
    for role, rc in config.roles.items():
        for index in range(rc.members):
            name = role if rc.members == 1 else f"{role}_{index}"
            recipe = _role_recipe(config, role, rc, index, name)
            estimator = rc.estimator or config.advantage.estimator
            members[name] = Member(recipe, role, build_seat(recipe, bases), estimator=estimator, settings=rc)
            if rc.scripted is None and rc.trainable:
                specs[name] = LearnerSpec(config.optim, config.iterations)
    teacher_team = [n for n, m in members.items() if m.role == "teacher"]
    for i, name in enumerate(n for n, m in members.items() if m.role == "executor"):
        rc = members[name].settings
        if name in specs and rc.kickstart:  # executor i distils teacher i mod T
            teachers[name] = teacher_team[i % len(teacher_team)]
            specs[name] = LearnerSpec(config.optim, config.iterations, teachers[name], rc.kickstart)
    return Roster(members, specs, teachers)


def _role_recipe(config: RunConfig, role: str, rc: RoleConfig, index: int, name: str) -> Recipe:
    if rc.scripted is not None:
        return Recipe(name, config, scripted=rc.scripted, game=next(iter(config.games)))
    update = {"model": rc.player, "model_seed": rc.model_seed + (0 if rc.lora.r else index), "lora": rc.lora}
    return Recipe(name, config.model_copy(update=update), frozen=not rc.trainable)
