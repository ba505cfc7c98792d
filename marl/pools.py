"""Where rollouts and learning run: in this process (``local``) or on Ray actors (``ray``), behind
one interface, so a run moves from a laptop to a GPU box or a cluster by changing ``[pool]``.

A pool plays ``MatchPlan``s — matches whose seats name members, not models — so a plan travels to
any worker, and each worker resolves the names against players it built itself (models are never
pickled; episodes come back as records). The learner of the trained member lives in the driver
(``local``) or in its own actor (``ray``); after each update its new trainable weights (the whole
model, or just the LoRA adapter) go to the rollout workers through Ray's object store, tagged with
a version, and a worker loads them before it starts a batch of matches, so no match ever mixes
weight versions.

Ray layout: one placement group per trained role (verl/MARTI), bundle 0 for the learner and one
bundle per rollout worker, each asking for the CPUs and (fractional) GPUs the config declares;
``PACK`` colocates them on as few nodes as possible, ``SPREAD`` spreads them. A worker that dies
mid-iteration is restarted by Ray (``max_restarts``) and its unfinished share of the matches is
played again by another worker: every match's randomness derives from its seed, so the replay is
the same match and the iteration completes with no lost and no duplicated episodes.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple

import torch
from pydantic import BaseModel, ConfigDict, Field

from marl.episode import Episode
from marl.learner import Learner, TrainSample
from marl.players import is_model, make_player
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec

RESTART_WAIT_S = 120  # how long to wait for Ray to restart a lost actor
Members = dict[str, SeatSpec]
Weights = dict[str, torch.Tensor]  # a member's trainable weights (the whole model, or its adapter)


class Resources(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cpus: float = Field(1.0, gt=0, description="CPUs per actor")
    gpus: float = Field(0.0, ge=0, description="GPUs per actor; fractions in (0, 1) share a device")


class PoolConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["local", "ray"] = Field("local", description="local: this process; ray: Ray actors")
    address: str | None = Field(
        None, description="join this Ray cluster ('auto', 'host:6379', 'ray://host:10001'); unset = start a local Ray"
    )
    num_cpus: int | None = Field(
        None, ge=1,
        description="CPUs of a local Ray (default: the machine's, or as many as the pool's actors ask for if more: "
        "in sync training the learner and the rollout workers take turns, so they never compete for the cores)",
    )  # fmt: skip
    num_gpus: float | None = Field(
        None, ge=0, description="GPUs of a local Ray (default: the machine's); logical ones schedule on a CPU box"
    )
    rollout_workers: int = Field(2, ge=1, description="rollout actors sharing each iteration's matches")
    rollout: Resources = Field(Resources(), description="per rollout worker")
    learner: Resources = Field(Resources(), description="per learner (one per trained role)")
    strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = Field(
        "PACK", description="placement of the role's bundles: PACK colocates, SPREAD spreads over nodes"
    )
    max_restarts: int = Field(3, ge=0, description="times Ray restarts a dead actor")


class MatchPlan(NamedTuple):
    """A match to play, its seats naming members of the pool. A named tuple: populations plan
    thousands a second, and a frozen dataclass costs three times as much to build."""

    game: str
    seed: int
    seats: dict[str, str]
    match_id: str = ""


def resolve(plans: Sequence[MatchPlan], members: Members) -> list[MatchSpec]:
    unknown = {name for p in plans for name in p.seats.values()} - set(members)
    if unknown:
        raise ValueError(f"the pool has no members {sorted(unknown)}; it has {sorted(members)}")
    return [MatchSpec(p.game, p.seed, {s: members[n] for s, n in p.seats.items()}, p.match_id) for p in plans]


def named_members(game: str, names: Sequence[str], mode: Literal["generate", "choose"] = "generate") -> Members:
    """Players by name (``marl.players``: models, scripted players) as members; models play in
    ``mode`` with compact prompts when choosing, scripted players as they are."""
    members = {}
    for name in names:
        model = is_model(name)
        members[name] = SeatSpec(make_player(name, game), name, mode if model else "generate", compact=model and mode == "choose")
    return members


class RolloutWorker:
    """Plays plans with players it builds itself. A plain class: a Ray actor in ``RayPool``."""

    def __init__(self, build: Callable[[], Members], concurrency: int):
        self.members = build()
        self.engine = RolloutEngine(concurrency=concurrency)
        self.version = -1

    def play(
        self, plans: Sequence[MatchPlan], version: int = -1, member: str | None = None, weights: Weights | None = None
    ) -> list[dict]:
        """Episodes as records; ``member``'s weights are loaded first unless ``version`` is loaded."""
        if weights is not None and version != self.version:
            self.members[member].policy.model.load_state_dict(weights, strict=False)
            self.version = version
        return [e.model_dump() for e in self.engine.play(resolve(plans, self.members))]

    def placement(self) -> dict[str, Any]:
        return {**_placement(), "weights_version": self.version}


class LearnerWorker:
    """The learner of one trained member, in an actor of its own."""

    def __init__(self, build: Callable[[], Learner]):
        self.learner = build()

    def update(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        return self.learner.update(samples)

    def weights(self) -> Weights:
        return self.learner.weights()

    def state(self) -> dict:
        return self.learner.state_dict()

    def load_state(self, state: dict) -> None:
        self.learner.load_state_dict(state)

    def placement(self) -> dict[str, Any]:
        return _placement()


class LocalPool:
    """Everything in this process: the learner updates the very model the engine plays with."""

    def __init__(self, members: Members, concurrency: int, learner: Learner | None = None):
        self.members = members
        self.learner = learner
        self.engine = RolloutEngine(concurrency=concurrency)

    def play(self, plans: Sequence[MatchPlan]) -> list[Episode]:
        return self.engine.play(resolve(plans, self.members))

    def update(self, samples: Sequence[TrainSample]) -> tuple[dict[str, float], Weights | None]:
        """One learner update; the new weights when they live elsewhere than the caller's model."""
        return self.learner.update(samples), None

    def state(self) -> dict:
        return self.learner.state_dict()

    def load_state(self, state: dict) -> None:
        self.learner.load_state_dict(state)

    def close(self) -> None:
        pass


class LearnerLost(RuntimeError):
    """The learner's actor died: its state is gone, resume from the last checkpoint."""


class RayPool:
    """Rollout workers and the trained member's learner on Ray actors, in one placement group."""

    def __init__(
        self,
        config: PoolConfig,
        build_members: Callable[[], Members],
        concurrency: int,
        member: str | None = None,
        build_learner: Callable[[], Learner] | None = None,
    ):
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.config, self.member = config, member
        self.started_ray = not ray.is_initialized()
        learner_bundles = [_bundle(config.learner)] if build_learner is not None else []
        bundles = learner_bundles + [_bundle(config.rollout)] * config.rollout_workers
        if self.started_ray:
            ray.init(
                address=config.address, num_cpus=None if config.address else _local_cpus(config, bundles),
                num_gpus=None if config.address else config.num_gpus, include_dashboard=False,
                log_to_driver=False,
            )  # fmt: skip
        _check_fits(bundles, ray.cluster_resources())
        self.group = placement_group(bundles, strategy=config.strategy)
        ray.get(self.group.ready(), timeout=120)

        def place(resources: Resources, index: int) -> dict:
            return {
                "num_cpus": resources.cpus, "num_gpus": resources.gpus, "max_restarts": config.max_restarts,
                "scheduling_strategy": PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=index),
            }  # fmt: skip

        offset = len(learner_bundles)
        self.workers = [
            ray.remote(RolloutWorker).options(**place(config.rollout, offset + i)).remote(build_members, concurrency)
            for i in range(config.rollout_workers)
        ]
        self.learner = None
        if build_learner is not None:
            self.learner = ray.remote(LearnerWorker).options(**place(config.learner, 0)).remote(build_learner)
        self.version, self.weights = 0, None  # the rollout weights: version and object ref

    def play(self, plans: Sequence[MatchPlan]) -> list[Episode]:
        """Split the plans over the workers; a share whose worker dies is played again by the next."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        n = len(self.workers)
        shares = [list(plans[i::n]) for i in range(n)]  # interleaved: long and short matches mix
        args = (self.version, self.member, self.weights)  # a top-level ref: Ray hands workers the object
        pending = {self.workers[i].play.remote(share, *args): (i, 0) for i, share in enumerate(shares) if share}
        done: dict[int, list[dict]] = {}
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            share, tries = pending.pop(ref)
            try:
                done[share] = ray.get(ref)
            except (RayActorError, ActorUnavailableError):  # died, or restarting: the share is lost either way
                if tries >= n * (self.config.max_restarts + 1):
                    raise
                worker = self.workers[(share + tries + 1) % n]
                pending[worker.play.remote(shares[share], *args)] = (share, tries + 1)
        records: list[dict] = [None] * len(plans)  # type: ignore[list-item]
        for share, episodes in done.items():
            records[share::n] = episodes
        return [Episode.model_validate(r) for r in records]

    def update(self, samples: Sequence[TrainSample]) -> tuple[dict[str, float], Weights]:
        """One learner update; publishes the new weights to the rollout workers and returns them."""
        import ray
        from ray.exceptions import RayActorError

        try:
            stats = ray.get(self.learner.update.remote(list(samples)))
        except RayActorError as err:
            raise LearnerLost(str(err)) from err
        self.weights = self.learner.weights.remote()
        self.version += 1
        return stats, ray.get(self.weights)

    def state(self) -> dict:
        import ray

        return ray.get(self.learner.state.remote())

    def load_state(self, state: dict) -> None:
        """Into the learner, waiting for it if Ray is still restarting it."""
        import ray
        from ray.exceptions import RayActorError

        for _ in range(RESTART_WAIT_S):
            try:
                ray.get(self.learner.load_state.remote(state))
                break
            except RayActorError:  # a call can still reach the dead instance, or meet the restart
                time.sleep(1)
        else:
            raise LearnerLost(f"the learner did not come back within {RESTART_WAIT_S} s")
        self.weights = ray.put(state["weights"])
        self.version += 1

    def placements(self) -> dict[str, Any]:
        """Each actor's process, resources and placement group, and the group's bundles, as Ray reports them."""
        import ray
        from ray.util.placement_group import placement_group_table

        actors = {f"rollout_{i}": w for i, w in enumerate(self.workers)}
        if self.learner is not None:
            actors["learner"] = self.learner
        return {
            "group": placement_group_table(self.group),
            "actors": dict(zip(actors, ray.get([a.placement.remote() for a in actors.values()]))),
        }

    def close(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        for actor in [*self.workers, *([self.learner] if self.learner is not None else [])]:
            ray.kill(actor, no_restart=True)
        remove_placement_group(self.group)
        if self.started_ray:
            ray.shutdown()


def _placement() -> dict[str, Any]:
    """Where Ray put the calling actor: its process, resources and placement group."""
    import ray

    context = ray.get_runtime_context()
    return {
        "pid": os.getpid(),
        "resources": context.get_assigned_resources(),
        "placement_group": context.get_placement_group_id(),
    }


class PoolDoesNotFit(ValueError):
    """The pool's actors ask for more than the Ray cluster has: a config error, found at start."""


def _local_cpus(config: PoolConfig, bundles: list[dict[str, float]]) -> int:
    """The CPUs a local Ray declares: the configured number, else the machine's, raised to what the
    bundles ask for, so the default pool (a learner and two workers) starts on a 2-core machine."""
    if config.num_cpus is not None:
        return config.num_cpus
    return max(os.cpu_count() or 1, math.ceil(sum(b.get("CPU", 0) for b in bundles)))


def _check_fits(bundles: list[dict[str, float]], cluster: dict[str, float]) -> None:
    """Fail now, naming the shortfall, rather than wait on a placement group that cannot be placed."""
    for kind in ("CPU", "GPU"):
        wanted, have = sum(b.get(kind, 0) for b in bundles), cluster.get(kind, 0)
        if wanted > have:
            hint = " (on a machine without GPUs, pool.num_gpus declares logical ones)" if kind == "GPU" else ""
            raise PoolDoesNotFit(
                f"pool: the learner and rollout workers ask for {wanted:g} {kind} but Ray has {have:g}; lower "
                f"pool.rollout_workers, pool.rollout.{kind.lower()}s or pool.learner.{kind.lower()}s{hint}"
            )


def _bundle(resources: Resources) -> dict[str, float]:
    """A placement-group bundle; zero amounts are left out (Ray refuses them)."""
    return {k: v for k, v in (("CPU", resources.cpus), ("GPU", resources.gpus)) if v}
