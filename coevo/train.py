"""The one trainer: every run — plain self-play, a population, task forge's roles, each a team of
members — is the same loop, on the local pool or on Ray. One iteration, top to bottom:

1. **plan** the matches (``coevo.planners``: self-play, the population's matchmaker, or the roles'
   rotation), each seat naming a member;
2. **play** them through the pool, every member's turns batched into one model call per step;
3. **observe** the results: payoffs and ratings (a population), reward shaping (task forge);
4. each trainable member **learns** from its own turns only — never a frozen snapshot's or a
   fixed player's — with its estimator (``marl.estimators``: RAE by default), its own baselines
   and its own learner (with LoRA its own adapter on a shared base); scripted players that adapt
   learn through their own ``learn``;
5. the population **evolves** (``coevo.evolution``: snapshots, the league, PBT);
6. what the games measure is **evaluated** (``coevo.evaluators``: Kuhn's exact exploitability
   every iteration; opponents or held-out tasks every ``eval.every``).

    >>> import tempfile
    >>> from marl.config import load_config
    >>> from coevo.train import Trainer
    >>> config = load_config("examples/kuhn_tiny.toml", ["iterations=1", "rollout.matches=8", "eval.every=0"])
    >>> metrics = Trainer(config, tempfile.mkdtemp()).run()
    >>> 0 <= metrics["kuhn/exploitability"] <= 0.5
    True

The run directory is the contract with analysis (DESIGN.md):

    config.toml         the resolved config, as run
    events.jsonl        structlog JSON lines, each with run_id, iteration and kind
    episodes/           one JSONL shard per iteration, written atomically
    checkpoints/        iter_NNNNNN/ folders written atomically, and ``latest`` naming the newest
    snapshots/          a population's frozen members, one file each
    tensorboard/ wandb/ mlflow.db mlartifacts/ trackers.json
                        what ``[log] report_to`` trackers write (``marl.trackers``)
    .lock               held while a trainer runs (``marl.rundir``)

Every random choice derives from (seed, iteration), so a run resumed from its last checkpoint
replays exactly what an uninterrupted run would have done. On resume, events and episode shards
newer than the checkpoint are dropped first: nothing is lost, nothing duplicated. A run killed
before its first checkpoint resumes from the start, its partial records dropped the same way.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import structlog
import torch

from marl.config import TrainConfig, to_toml
from marl.episode import Episode, Turn, read_jsonl, write_jsonl
from marl.estimators import ESTIMATORS, Credited, graph_credit
from marl.offline import offline_batch
from coevo.evaluators import Opponents, evaluation, measures, prefix, strategy_of
from marl.learner import TrainSample, load_weights, trainable_weights
from marl.learners import Learners
from marl.members import Member
from coevo.planners import PopulationPlan, SelfPlay
from marl.probe import Probe
from marl.pools import Job, LearnerLost, LocalPool, RayPool, TeamLearners
from games.task_forge.families import task_filter
from marl.credit import anneal
from coevo.roster import build_roster, initial_hparams, optim_settings
from marl.rundir import OldCheckpoint, RunLock, save_tensors, write_text
from marl.trackers import Trackers
from coevo.config import RunConfig
from coevo.evolution import Evolution, write_population
from populations.population import Population
from populations.roles import RolePopulations
from populations.snapshots import Snapshots, snapshot_recipe
from roles import rewards
from roles.forge import GAME as FORGE
from roles.graph_game import graph_metrics, node_of_seat


class Trainer:
    def __init__(self, config: TrainConfig, run_dir: Path):
        self.given = config  # what config.toml records: the config as the caller gave it
        self.config = config = config if isinstance(config, RunConfig) else RunConfig.model_validate(config.model_dump())
        self.run_dir = Path(run_dir)
        self.iteration = 0
        self.population = None
        if config.population is not None:
            self.population = Population(config.population, config.model, initial_hparams(config), config.seed)
        self.bases = {}  # LoRA: one base per (model, seed) in this process, every member an adapter on it
        self.roster = build_roster(config, self.population, self.bases)
        self.members: dict[str, Member] = self.roster.members
        self.planner = self._planner()
        self.pool, self.learners = self._pool()
        self.inflight: dict[int, tuple[Job, int, Any]] = {}  # async: iteration -> its job, training matches, pool ticket
        self.engine = self.pool.engine if isinstance(self.pool, LocalPool) else LocalPool(config.rollout.concurrency).engine
        self.snapshots = Snapshots(self.run_dir, self.bases)
        self.evolution = None
        if self.population is not None:
            [team] = self.learners.values() or [None]
            self.evolution = Evolution(config, self.population, self.members, team, self.snapshots, self.run_dir, self._strategy)
            for name in self.roster.specs:
                self.evolution.snapshot(name, 0, "initial")
        self.evaluation = evaluation(next(iter(config.games)))(self)
        self.measures = measures(config.games)
        self.probe = Probe(config.probe.matches) if config.probe.enabled else None

    def _planner(self):
        config = self.config
        if config.roles is not None:
            teams = {role: [m.name for m in self.roster.team(role)] for role in config.roles}
            populations = {role: rc.population for role, rc in config.roles.items() if rc.population is not None}
            learners = [n for n, m in self.members.items() if self._learns(m)]
            game, spec = next(iter(config.games)), config.graph_spec
            kwargs = rewards.game_kwargs(config) if spec is None else config.game_kwargs(game)
            return RolePopulations(
                populations, teams, learners, config.seed, config.rollout.matches, game, kwargs, spec and node_of_seat(spec)
            )
        kwargs = {game: config.game_kwargs(game) for game in config.games}
        if self.population is not None:
            return PopulationPlan(self.population, config.rollout.matches, config.population.eval_matches, config.games, kwargs)
        return SelfPlay(config.seed, config.rollout.matches, config.games, next(iter(self.members)), kwargs)

    def _pool(self) -> tuple[LocalPool | RayPool, dict]:
        """The configured pool, and each learning team's learners (in this process, on the very
        models the engine plays; or in the team's Ray actor, which builds its own)."""
        config, roster = self.config, self.roster
        teams = roster.learning_teams()
        if config.pool.kind == "ray":
            specs = {
                team: TeamLearners(
                    {n: roster.members[n].recipe for n in names}, {n: roster.specs[n] for n in names},
                    {t: replace(roster.members[t].recipe, frozen=True) for t in map(roster.teachers.get, names) if t},
                )
                for team, names in teams.items()
            }  # fmt: skip
            pool = RayPool(config.pool, config.rollout.concurrency, specs)
            return pool, pool.learners
        learners = {}
        for team, names in teams.items():
            seats = {n: roster.members[n].seat for n in names}
            teachers = {t: roster.members[t].seat for t in (roster.teachers.get(n) for n in names) if t}
            learners[team] = Learners(seats, {n: roster.specs[n] for n in names}, teachers)
        return LocalPool(config.rollout.concurrency), learners

    def _strategy(self, member: Member) -> dict | None:
        return strategy_of(member) if "kuhn_poker" in self.config.games else None

    # ---- run directory -------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def _events(self):
        self.run_dir.mkdir(parents=True, exist_ok=True)
        stream = open(self.run_dir / "events.jsonl", "a", encoding="utf-8", buffering=1)  # line-buffered
        return stream, structlog.wrap_logger(
            structlog.WriteLogger(stream),
            processors=[structlog.processors.TimeStamper(fmt="iso"), structlog.processors.JSONRenderer(sort_keys=True)],
        ).bind(run_id=self.run_id)

    # ---- one iteration -------------------------------------------------------------------------

    def players(self, names) -> dict[str, Member]:
        """Everyone in this iteration's matches: live members, and snapshots loaded as players."""
        return {n: self.members[n] if n in self.members else self.snapshots.player(n, names) for n in names}

    def play(self, iteration: int) -> tuple[list[Episode], int]:
        """The iteration's episodes, and how many of them (the first) are training matches (the
        rest only rate). Sync: played now. Async: played ahead (``_submit``) and collected now."""
        if self.config.train.mode == "sync":
            plans, extra = self.planner.plan(iteration)
            return self.pool.play(plans + extra, self.players({n for p in plans + extra for n in p.seats.values()})), len(plans)
        for ahead in range(iteration, min(iteration + self.config.train.max_staleness, self.config.iterations) + 1):
            if ahead not in self.inflight:
                self._submit(ahead)
        _, training, ticket = self.inflight.pop(iteration)
        return self.pool.collect(ticket), training

    def _submit(self, iteration: int) -> None:
        """Plan ``iteration`` and hand its matches to the pool with every player's weights as they
        are now: the newest, at most ``max_staleness`` updates behind the ones that will learn from them."""
        plans, extra = self.planner.plan(iteration)
        names = {n for p in plans + extra for n in p.seats.values()}
        job = Job(plans + extra, self.pool.captured.roster(names, self.players(names)))
        self.inflight[iteration] = (job, len(plans), self.pool.submit(job))

    def step(self, iteration: int) -> dict:
        start = time.perf_counter()
        episodes, n_training = self.play(iteration)
        rollout_time = time.perf_counter() - start
        training = episodes[:n_training]
        metrics = self.observe(episodes, training)
        for member in self.members.values():
            if self._learns(member):
                metrics.update(self.learn(member, training, iteration))
        trained = sum(len(t.completion_ids) for e in training for t in e.turns if t.member in self.roster.specs)
        if self.config.train.mode == "sync":
            metrics["perf/rollout_tokens_per_s"] = trained / max(rollout_time, 1e-9)
        else:  # the rollouts ran while the last update did: what is left is the time the learners waited
            metrics["perf/rollout_wait_s"] = rollout_time
        if isinstance(self.planner, RolePopulations):
            for name in self.planner.due(iteration):
                self.snapshots.freeze(self.planner.take_snapshot(name, iteration), self.members[name], self.members[name].recipe.config)
            metrics["population/snapshots"] = len(self.planner.snapshots)
        if self.evolution is not None:
            self.evolution.evolve(iteration)
            episodes += self.meet(iteration)
            self.population.begin_iteration()
            metrics["population/snapshots"] = len(self.population.snapshots)
            metrics.update({f"elo/{n}": self.population.elo[n] for n in self.population.members})
        write_jsonl(self.run_dir / "episodes" / f"iter_{iteration:06d}.jsonl", episodes)
        for measure in self.measures:
            metrics.update(measure(self))
        if self.probe is not None:
            metrics.update(self.probe(episodes, self.players, self.config.game_kwargs))
        if isinstance(self.evaluation, Opponents):
            self.evaluation.remember(iteration)
        return metrics

    def meet(self, iteration: int) -> list[Episode]:
        """A new PSRO snapshot's matches against the rest of the meta-game, played and recorded
        before the next solve reads it (``population.meet_matches``)."""
        matches = self.config.population.meet_matches
        plans = self.planner.meetings(iteration, matches) if matches else []
        if not plans:
            return []
        met = self.pool.play(plans, self.players({n for p in plans for n in p.seats.values()}))
        self.population.record(met)
        return met

    def observe(self, episodes: list[Episode], training: list[Episode]) -> dict:
        """What the results change before anyone learns: ratings and payoffs, shaped rewards."""
        if self.config.roles is not None and self.config.graph_spec is None:
            metrics = rewards.observe(episodes, self.config.reward_config, list(self.config.roles))
        else:
            metrics = {"rollout/invalid_rate": float(np.mean([not t.valid for e in training for t in e.turns] or [0.0]))}
            reasons = Counter(t.reason.split(";")[0] for e in training for t in e.turns if not t.valid)
            metrics["rollout/invalid_reasons"] = dict(reasons.most_common(5))
            if self.config.graph_spec is not None:
                metrics.update(graph_metrics(training))
        if self.config.roles is not None:
            if self.planner.configs:  # role populations: rated on the shaped rewards, what each role learns from
                self.planner.record(episodes)
                metrics.update({f"elo/{n}": self.planner.elo[n] for n in self.members})
            return metrics
        if self.population is not None:
            self.population.record(episodes)
            metrics["population/eval_matches"] = len(episodes) - len(training)
        return metrics

    def _learns(self, member: Member) -> bool:
        """A model member with a learner, or a scripted role player that learns from its matches
        (curricula, a skilled executor)."""
        scripted = member.scripted is not None and member.settings is not None and member.settings.trainable
        return member.name in self.roster.specs or scripted

    def learn(self, member: Member, episodes: list[Episode], iteration: int) -> dict:
        """One update of ``member`` on its own turns (or its scripted player's ``learn``)."""
        rc = member.settings
        kept = [ep for ep in episodes if member.name in ep.members.values()]
        if rc is not None and rc.task_filter:
            kept = [ep for ep in kept if ep.outcome["attempts"] and task_filter(ep.outcome["p_hat"])]  # a seed task counts
        if member.scripted is not None:
            member.scripted.learn([ep.outcome for ep in kept])
            member.version += 1
            return {f"{member.name}/learned_from": float(len(kept))}
        if self.config.optim.algorithm != "ppo":
            return self._learn_offline(member, self._shards_before(iteration, member) + kept)
        turns = [self._credit(member, ep, t) for ep in kept for t in ep.turns if t.member == member.name and t.completion_ids]
        if not turns:
            return {}
        staleness = [member.seat.version - c.turn.version for c in turns]  # learner updates since each turn was played
        bound = self.config.train.max_staleness if self.config.train.mode == "async" else 0
        if max(staleness) > bound:  # our invariant: the schedule never lets this happen
            raise RuntimeError(f"{member.name}: a turn {max(staleness)} updates stale reached its learner (bound: {bound})")
        advantages, clip_high = ESTIMATORS[member.estimator](
            turns, member.baselines, self.config.advantage.ema_decay, self.config.optim.clip_eps
        )
        batch = [
            TrainSample(
                c.turn.prompt_ids, c.turn.completion_ids, float(a), member.adapter, c.turn.candidate_ids or None,
                c.turn.choice, member.temperature or 1.0, high, _behaviour(c.turn) if stale else None,
            )  # fmt: skip
            for c, a, high, stale in zip(turns, advantages, clip_high, staleness)
        ]
        learners = self.learners[member.role]
        if rc is not None and rc.kickstart_final is not None:
            learners.set_hparams(member.name, {"kickstart_coef": anneal(rc.kickstart, rc.kickstart_final, iteration - 1, self.config.iterations)})
        remote = isinstance(self.pool, RayPool)
        if remote and member.name in self.roster.teachers:  # its teacher learns in another actor
            teacher = self.members[self.roster.teachers[member.name]]
            learners.teach(teacher.name, trainable_weights(teacher.policy.model, teacher.adapter))
        stats = learners.update(member.name, batch)
        if remote:  # the learner is elsewhere: bring this process's copy up to date
            load_weights(member.policy.model, learners.weights(member.name), member.adapter)
        member.version += 1
        member.seat.version += 1
        stats.update(self._turn_metrics(member, kept, turns, advantages))
        if self.config.train.mode == "async":
            stats.update({"async/staleness_mean": float(np.mean(staleness)), "async/staleness_max": float(max(staleness))})
        return {f"{prefix(member.name)}{k}": v for k, v in stats.items()}

    def _shards_before(self, iteration: int, member: Member) -> list[Episode]:
        """``member``'s episodes from the run's shards of the ``offline_window`` − 1 iterations before
        this one. Read from disk, so a resumed run reads exactly what the killed one would have."""
        first = max(0, iteration - self.config.optim.offline_window + 1)
        shards = [self.run_dir / "episodes" / f"iter_{i:06d}.jsonl" for i in range(first, iteration)]
        return [ep for shard in shards if shard.exists() for ep in read_jsonl(shard) if member.name in ep.members.values()]

    def _learn_offline(self, member: Member, episodes: list[Episode]) -> dict:
        """SFT or DPO of ``member`` on recorded episodes: this iteration's and its window's shards (``marl.offline``)."""
        turns = offline_batch(episodes, member.name, self.config.optim.algorithm)
        if not turns:
            return {}
        batch = [
            TrainSample(t.prompt_ids, t.completion_ids, sign, member.adapter, t.candidate_ids or None, t.choice, member.temperature or 1.0)
            for t, sign in turns
        ]  # fmt: skip
        stats = self.learners[member.role].update(member.name, batch)
        if isinstance(self.pool, RayPool):
            load_weights(member.policy.model, self.learners[member.role].weights(member.name), member.adapter)
        member.version += 1
        member.seat.version += 1
        stats["offline/turns"] = float(len(turns))
        return {f"{prefix(member.name)}{k}": v for k, v in stats.items()}

    def _credit(self, member: Member, ep: Episode, t) -> Credited:
        """A turn with its reward: the seat's return in a seat game; in task forge the part of the
        outcome the turn decided, each turn its own RAE unit, a task's k attempts one GRPO group."""
        if ep.game == FORGE:
            reward = rewards.turn_reward(ep.outcome, member.role, t.tag, self.config.reward_config, ep.rewards[member.role])
            return Credited(ep, t, reward, f"{ep.match_id}/{t.tag}", (ep.game, t.role), (ep.match_id, t.tag.split(":")[0]))
        if ep.game.startswith("graph/"):
            return graph_credit(ep, t)
        return Credited(ep, t, ep.rewards[t.seat], ep.match_id, (ep.game, t.role), ep.game)

    def _turn_metrics(self, member: Member, episodes: list[Episode], turns: list[Credited], advantages: np.ndarray) -> dict:
        """Per game and seat, over the matches ``member`` played that seat in."""
        if self.config.roles is not None:
            return {
                "adv_mean": float(np.mean(advantages)), "adv_std": float(np.std(advantages)),
                "response_tokens": float(np.mean([len(c.turn.completion_ids) for c in turns])),
            }  # fmt: skip
        out: dict = {}
        for key in dict.fromkeys(c.key for c in turns if c.episode.game.startswith("graph/")):  # a graph's nodes
            adv = [a for c, a in zip(turns, advantages) if c.key == key]
            out[f"graph/{key[1]}/baseline"] = member.baselines.get(key, 0.0)
            out[f"graph/{key[1]}/adv_mean"], out[f"graph/{key[1]}/adv_std"] = float(np.mean(adv)), float(np.std(adv))
        for game, seats in self.planner.seats.items():
            if game.startswith("graph/"):
                continue  # cooperative: no seat wins; per node above and in roles.graph_game.graph_metrics
            for role in seats:
                eps = [e for e in episodes if e.game == game and e.members[role] == member.name]
                key = f"{game}/{role}"
                mine = [c.turn for c in turns if c.key == (game, role)]
                rets = [e.rewards[role] for e in eps]
                others = [max(r for s, r in e.rewards.items() if s != role) for e in eps]
                if rets:
                    out[f"{key}/return"] = float(np.mean(rets))
                    out[f"{key}/win"] = float(np.mean([a > b for a, b in zip(rets, others)]))
                    out[f"{key}/draw"] = float(np.mean([a == b for a, b in zip(rets, others)]))
                if mine:
                    out[f"{key}/invalid_rate"] = float(np.mean([not t.valid for t in mine]))
                    out[f"{key}/response_tokens"] = float(np.mean([len(t.completion_ids) for t in mine]))
                out[f"{key}/baseline"] = member.baselines.get((game, role), 0.0)
                adv = [a for c, a in zip(turns, advantages) if c.key == (game, role)]
                if adv:
                    out[f"{key}/adv_mean"], out[f"{key}/adv_std"] = float(np.mean(adv)), float(np.std(adv))
        return out

    def evaluate(self, iteration: int) -> dict[str, float]:
        return self.evaluation(iteration)

    def _start_info(self) -> dict:
        """What the run's first event says about it."""
        info = {
            "model": self.config.model, "mode": self.config.mode, "matches_per_iteration": self.config.rollout.matches,
            "schedule": self.config.train.mode, "max_staleness": self.config.train.max_staleness,
            "games": self.config.games, "members": {n: m.recipe.scripted or m.recipe.config.model for n, m in self.members.items()},
            "trainable_parameters": {
                n: sum(p.numel() for p in trainable_weights(self.members[n].policy.model, self.members[n].adapter).values())
                for n in self.roster.specs
            },
        }  # fmt: skip
        for measure in self.measures:
            info.update(measure(self))
        return info

    # ---- checkpoints ---------------------------------------------------------------------------

    def save_checkpoint(self, iteration: int) -> Path:
        folder = self.run_dir / "checkpoints"
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"iter_{iteration:06d}"
        staging = folder / f".staging-{iteration:06d}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        tensors, meta = self._checkpoint_state()
        save_tensors(staging / "state.pt", {**tensors, "torch_rng": torch.get_rng_state()})
        write_text(staging / "state.json", json.dumps({"iteration": iteration, **meta}))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
        write_text(folder / "latest", final.name)
        return final

    def _checkpoint_state(self) -> tuple[dict, dict]:
        """What a checkpoint holds: tensors (``state.pt``) and JSON (``state.json``)."""
        learners = {team: group.state() for team, group in self.learners.items()}  # weights, optimiser, schedule, magnet
        tensors = {
            "learners": learners, "past": self.evaluation.state() if isinstance(self.evaluation, Opponents) else {},
            "inflight": {i: (job, training) for i, (job, training, _) in self.inflight.items()},  # async: replayed on resume
        }  # fmt: skip
        meta = {
            "baselines": {n: _pairs(m.baselines) for n, m in self.members.items()},
            "weight_versions": {n: m.seat.version for n, m in self.members.items()},
            "scripted": {n: m.scripted.state_dict() for n, m in self.members.items() if m.scripted is not None},
            "measures": [measure.state_dict() for measure in self.measures],  # the learners' average policies
        }  # fmt: skip
        if self.evolution is not None:
            meta["population"] = self.evolution.state()
        if isinstance(self.planner, RolePopulations):
            meta["roles"] = self.planner.state_dict()
            if self.planner.configs:
                write_population(self.run_dir, meta["roles"], self.planner)
        return tensors, meta

    def load_checkpoint(self) -> int:
        folder = self.run_dir / "checkpoints"
        name = (folder / "latest").read_text().strip()
        state = torch.load(folder / name / "state.pt", weights_only=False, map_location="cpu")  # loads into any device's models
        meta = json.loads((folder / name / "state.json").read_text())
        if "learners" not in state:
            raise OldCheckpoint(f"{folder / name} was written by an older coevo, before the one trainer; start the run again")
        torch.set_rng_state(state["torch_rng"])
        self._restore(state, meta)
        self.iteration = meta["iteration"]
        return self.iteration

    def _restore(self, tensors: dict, meta: dict) -> None:
        hparams = {}
        shipped: dict[str, int] = {}  # each player's newest state version in the checkpoint's jobs (another process's)
        for job, _ in tensors.get("inflight", {}).values():  # none before async training
            for name, (_, version, _, _) in job.roster.items():
                shipped[name] = max(shipped.get(name, -1), version)
        if self.evolution is not None:
            self.evolution.load_state(meta["population"])
            hparams = {n: optim_settings(m.hparams) for n, m in self.population.members.items()}
        if isinstance(self.planner, RolePopulations):
            self.planner.load_state_dict(meta["roles"])
            owners = self.planner.snapshots.items()
            self.snapshots.reload({s: (snapshot_recipe(s, self.members[m], self.members[m].recipe.config), self.members[m].role) for s, m in owners})
        for team, states in tensors["learners"].items():
            self.learners[team].load_state(states, {n: hparams.get(n, {}) for n in states})
            if isinstance(self.pool, RayPool):  # this process's copies of the models, too
                for name, state in states.items():
                    load_weights(self.members[name].policy.model, state["weights"], self.members[name].adapter)
        for name, member in self.members.items():
            member.baselines.clear()
            member.baselines.update(_unpairs(meta["baselines"][name]))
            if name in meta["scripted"]:
                member.scripted.load_state_dict(meta["scripted"][name])
            member.version = max(member.version, shipped.get(name, -1)) + 1  # a state version no worker has seen
        if isinstance(self.evaluation, Opponents):
            self.evaluation.load_state(tensors["past"])
        for measure, state in zip(self.measures, meta.get("measures", [])):  # older checkpoints: averages start here
            measure.load_state_dict(state)
        for name, member in self.members.items():
            member.seat.version = meta.get("weight_versions", {}).get(name, 0)
        self.pool.forget()  # a snapshot made again after a rewind is shipped again
        for _, _, ticket in self.inflight.values():  # rewound: what was played ahead is played again from the checkpoint
            self.pool.drop(ticket)
        jobs = sorted(tensors.get("inflight", {}).items())
        self.inflight = {i: (job, training, self.pool.submit(job)) for i, (job, training) in jobs}

    def _drop_after(self, iteration: int) -> None:
        """Forget events and episode shards newer than the checkpoint we resume from, and the
        ``end`` of a finished run that is being extended."""
        events = self.run_dir / "events.jsonl"
        if events.exists():
            kept = []
            for line in events.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by the kill
                    continue
                if record.get("iteration", 0) <= iteration and record.get("kind") != "end":
                    kept.append(line + "\n")
            write_text(events, "".join(kept))
        for shard in (self.run_dir / "episodes").glob("iter_*.jsonl"):
            if int(shard.stem.split("_")[1]) > iteration:
                shard.unlink()

    # ---- the loop ------------------------------------------------------------------------------

    def run(self, resume: bool = False, on_iteration: Callable[[int, dict], None] | None = None) -> dict:
        # Models, tokenizers and modules live as long as the run: keep them out of the cyclic
        # collector's scans, which otherwise grow with the heap and tax every allocation
        # (measured: payoff bookkeeping 5x slower per match with torch and transformers loaded).
        gc.freeze()
        with RunLock(self.run_dir):
            return self._run(resume, on_iteration)

    def _run(self, resume: bool, on_iteration: Callable[[int, dict], None] | None) -> dict:
        fresh = not (resume and (self.run_dir / "checkpoints" / "latest").exists())
        if fresh:  # a new run, or one killed before its first checkpoint: made again from the start
            self._drop_after(-1)
            write_text(self.run_dir / "config.toml", to_toml(self.given))
        else:
            self._drop_after(self.load_checkpoint())
        stream, log = self._events()
        hparams = self.given.model_dump(mode="json", exclude_none=True)
        trackers = Trackers(self.config.log.report_to, self.run_dir, hparams, self.config.log.transcripts, self.iteration)
        metrics: dict = {}
        try:
            if fresh:
                start = self._start_info()
                if self.config.eval.every and self.config.eval.on_start:
                    start.update(self.evaluate(0))
                log.info("start", kind="start", iteration=0, **start)
            while self.iteration < self.config.iterations:
                iteration = self.iteration + 1
                try:
                    metrics = self.step(iteration)
                except LearnerLost:  # its actor restarted empty: rewind to the last checkpoint
                    if not (self.run_dir / "checkpoints" / "latest").exists():
                        raise
                    stream.close()  # _drop_after rewrites events.jsonl: log to the new file
                    self._drop_after(self.load_checkpoint())
                    stream, log = self._events()
                    log.warning("learner_lost", kind="learner_lost", iteration=self.iteration)
                    continue
                if self.config.eval.every and iteration % self.config.eval.every == 0:
                    metrics.update(self.evaluate(iteration))
                log.info("iteration", kind="iteration", iteration=iteration, **metrics)
                trackers.log(iteration, metrics)
                self.iteration = iteration
                if iteration % self.config.checkpoint_every == 0 or iteration == self.config.iterations:
                    self.save_checkpoint(iteration)
                    log.info("checkpoint", kind="checkpoint", iteration=iteration)
                if on_iteration is not None:
                    on_iteration(iteration, metrics)
            log.info("end", kind="end", iteration=self.iteration)  # what `coevo watch` waits for
        except KeyboardInterrupt:  # at exit: keep every finished iteration
            if self.iteration and not (self.run_dir / "checkpoints" / f"iter_{self.iteration:06d}").exists():
                self.save_checkpoint(self.iteration)
                log.info("checkpoint", kind="checkpoint", iteration=self.iteration)
            raise
        finally:
            stream.close()
            trackers.close()
            self.pool.close()
        return metrics


def _behaviour(turn: Turn) -> list[float]:
    """What a stale turn's correction divides by: the log-probs it was drawn with, per token, or
    of its one forced choice."""
    return [turn.choice_logprob] if turn.choice is not None else turn.logprobs


def _pairs(baselines: dict[tuple[str, str], float]) -> list:
    """RAE baselines as JSON: [game, role, value] rows."""
    return [[g, r, b] for (g, r), b in baselines.items()]


def _unpairs(rows: list) -> dict[tuple[str, str], float]:
    return {(g, r): b for g, r, b in rows}

