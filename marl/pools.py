"""Where rollouts and learning run: in this process (``local``) or on Ray actors (``ray``), behind
one interface, so a run of any kind moves from a laptop to a GPU box or a cluster by changing ``[pool]``.

A pool plays ``MatchPlan``s — matches whose seats name members, not models — so a plan travels to
any worker. Each worker builds the members it is asked for from their recipes
(``marl.members``: models are never pickled; episodes come back as records) and loads each
member's state (trainable weights, a LoRA adapter's alone, or a scripted player's state) when
its version changed since that worker last had it: weights are synced per member and versioned,
through Ray's object store, before a batch of matches starts, so no match ever mixes versions.

Learners: each team (a seat game's players, or a task forge role) that learns has one learner
actor holding every learner of the team (``marl.learners.Learners``, with LoRA all on one base).
Ray layout: one placement group per learning team (verl/MARTI), bundle 0 its learner, and the
rollout workers' bundles in the first team's group; each bundle asks for the CPUs and (fractional)
GPUs the config declares; ``PACK`` colocates a group on as few nodes as possible, ``SPREAD``
spreads it. Matches go to the workers in batches, each to whichever worker frees up first
(``marl.dispatch``); a worker that dies mid-iteration is restarted by Ray (``max_restarts``) and
its unfinished batch is played again by another worker: every match's randomness derives from
its seed, so the replay is the same match and the iteration completes with no lost and no
duplicated episodes. A learner actor that dies loses its state: the trainer rewinds to its last
checkpoint (``LearnerLost``).

Async training submits ``Job``s — plans with every player's state as it was when they were made
— and collects their episodes later; the local pool then plays them on a thread of its own.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NamedTuple, Protocol

from marl.config import PoolConfig, Resources
from marl.dispatch import Queue, Ticket
from marl.episode import Episode
from marl.learner import TrainSample
from marl.learners import Learners, LearnerSpec, Weights
from marl.members import Bases, Recipe, build_seat, drop_seat, load_player_state, player_state
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec

RESTART_WAIT_S = 120  # how long to wait for Ray to restart a lost actor


class MatchPlan(NamedTuple):
    """A match to play, its seats naming members of the pool. A named tuple: populations plan
    thousands a second, and a frozen dataclass costs three times as much to build."""

    game: str
    seed: int
    seats: dict[str, str]
    match_id: str = ""
    game_kwargs: dict[str, Any] | None = None  # the game's settings (task forge's attempts, rewards...)


class Player(Protocol):
    """What a pool needs of a member: how to build it anywhere, its seat here, and its state's version."""

    recipe: Recipe
    seat: SeatSpec
    version: int


def resolve(plans: Sequence[MatchPlan], seats: Mapping[str, SeatSpec]) -> list[MatchSpec]:
    unknown = {name for p in plans for name in p.seats.values()} - set(seats)
    if unknown:
        raise ValueError(f"the pool has no members {sorted(unknown)}; it has {sorted(seats)}")
    return [MatchSpec(p.game, p.seed, {s: seats[n] for s, n in p.seats.items()}, p.match_id, p.game_kwargs or {}) for p in plans]


def _names(plans: Sequence[MatchPlan]) -> set[str]:
    return {name for p in plans for name in p.seats.values()}


Roster = dict[str, tuple[Recipe, int, Any, int]]  # player -> recipe, state version, state, weight version


class Job(NamedTuple):
    """Matches to play with the players as they were when the job was made: what a job needs to be
    played anywhere, later, or again after a crash (an async run's checkpoint keeps its jobs)."""

    plans: list[MatchPlan]
    roster: Roster


class RolloutWorker:
    """Plays plans with players it builds itself from their recipes: in a Ray actor
    (``RayPool``), or on a thread of this process (``LocalPool`` in async training)."""

    def __init__(self, concurrency: int):
        self.engine = RolloutEngine(concurrency=concurrency)
        self.bases: Bases = {}
        self.seats: dict[str, SeatSpec] = {}
        self.recipes: dict[str, Recipe] = {}
        self.versions: dict[str, int] = {}

    def _fetch(self, state: Any) -> Any:
        return state

    def episodes(self, plans: Sequence[MatchPlan], roster: Roster) -> list[Episode]:
        """``plans`` played. ``roster``: each player's recipe, state version, state (or an object
        ref to it) and weight version; the state is loaded where this worker holds another."""
        for name in [n for n in self.seats if n not in roster and self.recipes[n].frozen]:
            self._drop(name)  # a snapshot nobody plays now: its memory goes
        for name, (recipe, version, state, weights) in roster.items():
            if self.recipes.get(name) != recipe:  # new, or retuned (PBT): built again from its recipe
                self._drop(name)
                self.seats[name], self.recipes[name] = build_seat(recipe, self.bases), recipe
            if self.versions.get(name) != version:
                load_player_state(self.seats[name], self._fetch(state))
                self.versions[name] = version
            self.seats[name].version = weights
        return self.engine.play(resolve(plans, self.seats))

    def play(self, plans: Sequence[MatchPlan], roster: Roster) -> list[dict]:
        """``episodes`` as records, to leave a Ray actor."""
        return [e.model_dump() for e in self.episodes(plans, roster)]

    def _drop(self, name: str) -> None:
        if name in self.seats:
            drop_seat(self.seats.pop(name))
            del self.recipes[name]
            self.versions.pop(name, None)

    def placement(self) -> dict[str, Any]:
        return {**_placement(), "weights_version": dict(self.versions)}


class RayRolloutWorker(RolloutWorker):
    """A rollout worker in a Ray actor: states arrive as object refs, fetched only when new."""

    def _fetch(self, state: Any) -> Any:
        import ray

        return ray.get(state)


class BuiltLearners(Learners):
    """A team's learners in an actor of their own: the members' models built there from their
    recipes (with LoRA one base, an adapter each), a kickstarting teacher's too."""

    def __init__(self, recipes: Mapping[str, Recipe], specs: Mapping[str, LearnerSpec], teachers: Mapping[str, Recipe] = {}):
        bases: Bases = {}
        seats = {name: build_seat(recipe, bases) for name, recipe in recipes.items()}
        super().__init__(seats, specs, {name: build_seat(r, bases) for name, r in teachers.items()})

    def placement(self) -> dict[str, Any]:
        return _placement()


class TeamLearners(NamedTuple):
    """What a team's learner actor is built from: its members' recipes and learners, and the
    recipes of the teachers that kickstart them."""

    recipes: dict[str, Recipe]
    specs: dict[str, LearnerSpec]
    teachers: dict[str, Recipe] = {}


class Captured:
    """Each player's state as a job takes it, copied once per version (a snapshot that every
    iteration plays is copied once, not every iteration)."""

    def __init__(self) -> None:
        self.states: dict[str, tuple[int, Any]] = {}  # player -> the version copied, and its state

    def roster(self, names: set[str], players: Mapping[str, Player]) -> Roster:
        self.states = {n: s for n, s in self.states.items() if n in names}
        for name in names:
            player = players[name]
            if self.states.get(name, (None,))[0] != player.version:
                self.states[name] = (player.version, player_state(player.seat))
        return {name: (players[name].recipe, *self.states[name], players[name].seat.version) for name in sorted(names)}

    def clear(self) -> None:
        self.states.clear()


class LocalPool:
    """Everything in this process: in sync training the learners update the very models the
    engine plays with. Submitted jobs (async training) are played on a thread of their own, by a
    worker holding its own copies of the players, so the learners train meanwhile; torch's
    kernels release the GIL, so the two overlap."""

    def __init__(self, concurrency: int):
        self.engine = RolloutEngine(concurrency=concurrency)
        self.concurrency = concurrency
        self.captured = Captured()
        self.thread: ThreadPoolExecutor | None = None  # one thread: jobs are played in the order given
        self.worker: RolloutWorker | None = None

    def play(self, plans: Sequence[MatchPlan], players: Mapping[str, Player]) -> list[Episode]:
        return self.engine.play(resolve(plans, {name: players[name].seat for name in _names(plans)}))

    def submit(self, job: Job) -> Future:
        if self.thread is None:
            self.thread, self.worker = ThreadPoolExecutor(1, thread_name_prefix="coevo-rollout"), RolloutWorker(self.concurrency)
        return self.thread.submit(self.worker.episodes, job.plans, job.roster)

    def collect(self, ticket: Future) -> list[Episode]:
        return ticket.result()

    def drop(self, ticket: Future) -> None:
        ticket.cancel()  # one already playing finishes, unread

    def forget(self) -> None:
        """Copy every player's state again (after a rewind, versions may repeat with other weights)."""
        self.captured.clear()

    def close(self) -> None:
        if self.thread is not None:
            self.thread.shutdown(wait=True, cancel_futures=True)


class LearnerLost(RuntimeError):
    """A learner's actor died: its state is gone, resume from the last checkpoint."""


class RemoteLearners:
    """A team's learners in a Ray actor, driven like ``Learners`` in this process."""

    def __init__(self, actor):
        self.actor = actor

    def _call(self, method: str, *args):
        import ray
        from ray.exceptions import RayActorError

        try:
            return ray.get(getattr(self.actor, method).remote(*args))
        except RayActorError as err:
            raise LearnerLost(str(err)) from err

    def update(self, name: str, samples: Sequence[TrainSample]) -> dict[str, float]:
        return self._call("update", name, list(samples))

    def set_hparams(self, name: str, values: dict[str, float]) -> None:
        self._call("set_hparams", name, values)

    def weights(self, name: str) -> Weights:
        return self._call("weights", name)

    def teach(self, teacher: str, weights: Weights) -> None:
        self._call("teach", teacher, weights)

    def state(self) -> dict[str, dict]:
        return self._call("state")

    def load_state(self, states: Mapping[str, dict], hparams: Mapping[str, dict[str, float]] = {}) -> None:
        """Into the actor, waiting for it if Ray is still restarting it."""
        for _ in range(RESTART_WAIT_S):
            try:
                return self._call("load_state", dict(states), dict(hparams))
            except LearnerLost:  # a call can still reach the dead instance, or meet the restart
                time.sleep(1)
        raise LearnerLost(f"the learner did not come back within {RESTART_WAIT_S} s")

    def reset(self, name: str, weights: Weights, hparams: dict[str, float]) -> None:
        self._call("reset", name, weights, hparams)

    def copy(self, name: str, donor: str, hparams: dict[str, float]) -> None:
        self._call("copy", name, donor, hparams)


class RayPool:
    """Rollout workers, and each learning team's learners, on Ray actors in placement groups."""

    def __init__(self, config: PoolConfig, concurrency: int, learners: Mapping[str, TeamLearners] = {}):
        """``learners``: per team that learns, what its actor builds its learners from."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.config = config
        self.started_ray = not ray.is_initialized()
        teams = list(learners)
        layouts = [[_bundle(config.learner)] for _ in teams] or [[]]
        first = len(layouts[0])
        layouts[0] += [_bundle(config.rollout)] * config.rollout_workers
        bundles = [b for layout in layouts for b in layout]
        if self.started_ray:
            ray.init(  # no address: a Ray of its own, not whichever cluster this machine started last
                address=config.address or "local", num_cpus=None if config.address else _local_cpus(config, bundles),
                num_gpus=None if config.address else config.num_gpus, include_dashboard=False,
                log_to_driver=False,
            )  # fmt: skip
        _check_fits(bundles, ray.cluster_resources())
        self.groups = [placement_group(layout, strategy=config.strategy) for layout in layouts]
        ray.get([g.ready() for g in self.groups], timeout=120)

        def place(resources: Resources, group: int, index: int) -> dict:
            strategy = PlacementGroupSchedulingStrategy(self.groups[group], placement_group_bundle_index=index)
            return {
                "num_cpus": resources.cpus, "num_gpus": resources.gpus, "max_restarts": config.max_restarts,
                "scheduling_strategy": strategy,
            }  # fmt: skip

        self.workers = [
            ray.remote(RayRolloutWorker).options(**place(config.rollout, 0, first + i)).remote(concurrency)
            for i in range(config.rollout_workers)
        ]
        self.actors = {
            team: ray.remote(BuiltLearners).options(**place(config.learner, g, 0)).remote(*learners[team])
            for g, team in enumerate(teams)
        }
        self.learners = {team: RemoteLearners(actor) for team, actor in self.actors.items()}
        self.captured = Captured()
        self.refs: dict[tuple[str, int], Any] = {}  # (player, state version) -> its state in the object store
        self.queue = Queue(self.workers, config.rollout_workers * (config.max_restarts + 1))

    def _shipped(self, roster: Roster) -> Roster:
        """The roster with each state in the object store, put there once per version."""
        import ray

        for name, (_, version, state, _) in roster.items():
            if (name, version) not in self.refs:
                self.refs[name, version] = ray.put(state)
        live = {(n, v) for r in [roster, *(t.roster for t in self.queue.pending())] for n, (_, v, _, _) in r.items()}
        self.refs = {key: ref for key, ref in self.refs.items() if key in live}  # the object store frees the rest
        return {n: (recipe, v, self.refs[n, v], weights) for n, (recipe, v, _, weights) in roster.items()}

    def submit(self, job: Job) -> Ticket:
        """Queue the job's matches in batches (``batch_matches``); workers take them as they free up."""
        n = len(job.plans)
        size = self.config.batch_matches or math.ceil(n / (2 * len(self.workers)))
        return self.queue.put(job.plans, self._shipped(job.roster), math.ceil(n / max(size, 1)))

    def collect(self, ticket: Ticket) -> list[Episode]:
        return [Episode.model_validate(r) for r in self.queue.wait(ticket)]

    def drop(self, ticket: Ticket) -> None:
        self.queue.drop(ticket)

    def forget(self) -> None:
        """Copy and ship every player's state again (after a rewind, versions may repeat with other weights)."""
        self.captured.clear()
        self.refs.clear()

    def play(self, plans: Sequence[MatchPlan], players: Mapping[str, Player]) -> list[Episode]:
        """Play the plans now, with the players as they are."""
        return self.collect(self.submit(Job(list(plans), self.captured.roster(_names(plans), players))))

    def placements(self) -> dict[str, Any]:
        """Each actor's process, resources and placement group, and the groups' bundles, as Ray reports them."""
        import ray
        from ray.util.placement_group import placement_group_table

        actors = {f"rollout_{i}": w for i, w in enumerate(self.workers)}
        actors.update({f"learner_{team}": actor for team, actor in self.actors.items()})
        return {
            "groups": [placement_group_table(g) for g in self.groups],
            "actors": dict(zip(actors, ray.get([a.placement.remote() for a in actors.values()]))),
        }

    def close(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        self.queue.close()
        for actor in [*self.workers, *self.actors.values()]:
            ray.kill(actor, no_restart=True)
        for group in self.groups:
            remove_placement_group(group)
        if self.started_ray:
            ray.shutdown()


def _placement() -> dict[str, Any]:
    """Where Ray put the calling actor: its process, resources and placement group."""
    import ray

    context = ray.get_runtime_context()
    return {
        "pid": os.getpid(),
        "node": context.get_node_id(),
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
