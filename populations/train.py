"""Population training: many members, each its own learner and RAE baselines, and with LoRA its
own adapter on one shared base (else a model of its own); the
population (``populations.population``) decides who plays whom, rates every result and freezes
snapshots; PBT and the league change members between iterations.

One iteration:

1. the matchmaker plans the training matches (each learner's share of ``rollout.matches``) and the
   evaluation scheduler adds ``population.eval_matches`` where the ranking is least certain;
2. all of them are played at once by the batched engine (one model call per member per turn);
3. every result updates payoffs, Elo and OpenSkill;
4. each trainable member learns from its own turns only — a frozen snapshot's or a fixed player's
   turns are never trained on;
5. snapshots (every ``snapshot_every`` iterations, or by the league's checkpoint rule), league
   resets and PBT's exploit/explore, each recorded in the lineage.

On Kuhn poker each member's exact strategy is read every iteration and the population's
meta-strategy mixture is analysed exactly (``kuhn/population_exploitability``): the mixture is
reach-weighted per information set (``games.kuhn_analysis.average``), never a plain mean.

Population state (members, snapshots with their weights, lineage, ratings, payoffs, league clocks,
PBT history) is checkpointed with the learners and resumes exactly; snapshots' weights are written
once each to ``snapshots/``; ``population.json``, ``payoffs.csv`` and ``lineage.graphml`` beside
the events file hold the latest state for analysis.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save

import games
from games import kuhn_analysis
from marl.advantages import ADVANTAGE_ESTIMATORS
from marl.episode import Episode, write_jsonl
from marl.evaluate import kuhn_strategy
from marl.hf import HFPolicy
from marl.learner import Learner, TrainSample, load_weights, trainable_weights
from marl.pools import LocalPool, Members
from marl.rollout import RolloutEngine, SeatSpec
from marl.scripted import ScriptedPolicy
from marl.rundir import write_atomic, write_text
from marl.train import Trainer, _pairs, _unpairs, lora_config, member_model, trained_seat
from populations.config import SAMPLING_HPARAMS, RunConfig
from populations.league import League
from populations.pbt import Exploit, exploit_and_explore
from populations.population import Population, seats_of

LOADED_SNAPSHOTS = 64  # frozen opponents kept in memory at once (least recently used go first)
KUHN_SCRIPTED = {  # exact strategies of Kuhn's scripted players, for the mixture's analysis
    "random": kuhn_analysis.uniform, "nash": kuhn_analysis.nash, "always_bet": kuhn_analysis.always_bet,
    "never_bluff": kuhn_analysis.never_bluff,
}  # fmt: skip


def _optim_settings(hparams: dict[str, float]) -> dict[str, float]:
    """A member's hyper-parameters that belong to its learner (the rest are sampling settings)."""
    return {k: v for k, v in hparams.items() if k not in SAMPLING_HPARAMS}


@dataclass
class Live:
    """A trainable member's model (with LoRA: the shared base, and its adapter), learner and RAE baselines."""

    policy: HFPolicy
    adapter: str | None
    learner: Learner
    baselines: dict[tuple[str, str], float]


class PopulationTrainer(Trainer):
    def __init__(self, config: RunConfig, run_dir: Path):
        if config.population is None:
            raise ValueError("PopulationTrainer needs a [population] table; plain self-play is marl.train.Trainer")
        self.config = config
        self.run_dir = Path(run_dir)
        self.iteration = 0
        self.seats = seats_of(list(config.games))
        hparams = {
            name: float(getattr(config.rollout if name in SAMPLING_HPARAMS else config.optim, name))
            for name in config.population.pbt.ranges
        }
        self.population = Population(config.population, config.model, hparams, config.seed)
        self.bases: dict[tuple[str, int], HFPolicy] = {}  # LoRA: the one base every member's adapter is on
        self.live: dict[str, Live] = {name: self._new_live(name) for name in self.population.learners()}
        self.frozen: dict[str, dict[str, torch.Tensor]] = {}  # snapshot -> weights
        self._loaded: OrderedDict[str, SeatSpec] = OrderedDict()
        self.engine = RolloutEngine(concurrency=config.rollout.concurrency)
        self.pool = LocalPool({}, config.rollout.concurrency)
        first = next(iter(self.live))
        self.policy, self.me = self.live[first].policy, self._seat(first)  # evaluation plays the first member
        self.adapter, self.sampling = self.me.adapter, self.me.sampling
        self.baselines = self.live[first].baselines
        self.past = deque(maxlen=self._past_needed() + 1)
        self._initial: HFPolicy | None = None
        for name in self.live:
            self._snapshot(name, 0, "initial")

    def _new_live(self, name: str) -> Live:
        policy = member_model(self.config, name, self.bases)
        adapter = name if self.config.lora.r else None
        return Live(policy, adapter, self._learner(policy, adapter, self.config.optim), {})

    def _learner(self, policy: HFPolicy, adapter: str | None, optim) -> Learner:
        return Learner(policy, optim, updates=self.config.iterations, adapter=adapter)

    # ---- players -------------------------------------------------------------------------------

    def _config_of(self, hparams: dict[str, float]) -> RunConfig:
        """The run's config as one member has it: its own optim and sampling settings."""
        sampling = {k: v for k, v in hparams.items() if k in SAMPLING_HPARAMS}
        optim = self.config.optim.model_copy(update=_optim_settings(hparams))
        return self.config.model_copy(update={"optim": optim, "rollout": self.config.rollout.model_copy(update=sampling)})

    def _temperature(self, hparams: dict[str, float]) -> float:
        """The temperature forced choice plays (and learns, and is analysed) at; 1 for free text."""
        return self._config_of(hparams).rollout.temperature if self.config.mode == "choose" else 1.0

    def _seat(self, name: str) -> SeatSpec:
        return trained_seat(self._config_of(self.population.members[name].hparams), self.live[name].policy, name)

    def _members(self, names: set[str]) -> Members:
        """Seat specs for everyone in this iteration's matches."""
        out = {}
        for name in names:
            if name in self.live:
                out[name] = self._seat(name)
            elif name in self.population.snapshots and name in self.frozen:
                out[name] = self._frozen_seat(name)
            else:  # a fixed scripted member (the config allows them with one game only)
                player = self.population.members[name].player
                out[name] = SeatSpec(ScriptedPolicy(player, games.scripted_players(next(iter(self.seats)))[player]), name)
        return out

    def _frozen_seat(self, name: str) -> SeatSpec:
        """A snapshot as a player: with LoRA a frozen adapter on its member's base, else a frozen
        copy of its model; the least recently used go first past ``LOADED_SNAPSHOTS``."""
        if name not in self._loaded:
            if len(self._loaded) >= LOADED_SNAPSHOTS:
                self._unload(next(iter(self._loaded)))
            owner = self.live[self.population.snapshots[name].member].policy
            if self.config.lora.r:
                policy = owner
                policy.add_adapter(name, lora_config(self.config), trainable=False)
            else:
                policy = copy.deepcopy(owner)
                policy.model.requires_grad_(False)
            load_weights(policy.model, self.frozen[name], name if self.config.lora.r else None)
            self._loaded[name] = trained_seat(self._config_of(self.population.snapshots[name].hparams), policy, name)
        self._loaded.move_to_end(name)
        return self._loaded[name]

    def _unload(self, name: str) -> None:
        seat = self._loaded.pop(name)
        if seat.adapter is not None:
            seat.policy.remove_adapter(name)

    def _snapshot(self, name: str, iteration: int, change: str) -> str:
        strategy = self._strategy(name)
        snap = self.population.take_snapshot(name, iteration, change, strategy)
        if snap not in self.frozen:
            self.frozen[snap] = trainable_weights(self.live[name].policy.model, self.live[name].adapter)
            self._save_snapshot(snap)
        return snap

    def _save_snapshot(self, name: str) -> None:
        """Each snapshot's weights are written once, atomically, to ``snapshots/`` (checkpoints
        name the snapshots, they do not copy them). A snapshot newer than the checkpoint a run
        resumes from is made again, the same, and overwrites its file."""
        folder = self.run_dir / "snapshots"
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / f"{name}.safetensors", lambda f: f.write(save(self.frozen[name])))

    # ---- one iteration -------------------------------------------------------------------------

    def step(self, iteration: int) -> dict:
        pop, cfg = self.population, self.config
        plans = pop.plans(iteration, cfg.rollout.matches, cfg.games, self.seats)
        extra = pop.evaluation_plans(iteration, cfg.population.eval_matches, cfg.games, self.seats)
        self.pool.members = self._members({n for p in plans + extra for n in p.seats.values()})
        episodes = self.pool.play(plans + extra)
        training = episodes[: len(plans)]
        pop.record(episodes)
        metrics: dict = {"population/eval_matches": len(extra)}
        for name, live in self.live.items():
            metrics.update({f"{name}/{k}": v for k, v in self._train(name, live, training).items()})
        write_jsonl(self.run_dir / "episodes" / f"iter_{iteration:06d}.jsonl", episodes)
        self._evolve(iteration)
        pop.begin_iteration()
        metrics["population/snapshots"] = len(pop.snapshots)
        metrics.update(self._kuhn_metrics())
        metrics.update({f"elo/{n}": pop.elo[n] for n in pop.members})
        self.past.append((iteration, trainable_weights(self.policy.model, self.adapter)))
        return metrics

    def _train(self, name: str, live: Live, episodes: list[Episode]) -> dict:
        samples, turns = self._samples(episodes, name)
        if not samples:
            return {}
        advantages = ADVANTAGE_ESTIMATORS[self.config.advantage.estimator](
            samples, live.baselines, self.config.advantage.ema_decay
        )
        temperature = self._temperature(self.population.members[name].hparams) or 1.0
        batch = [
            TrainSample(t.prompt_ids, t.completion_ids, float(a), live.adapter, t.candidate_ids or None, t.choice, temperature)
            for t, a in zip(turns, advantages)
        ]
        stats = live.learner.update(batch)
        stats.update(self._rollout_metrics(episodes, samples, advantages, name, live.baselines))
        return stats

    def _evolve(self, iteration: int) -> None:
        """Snapshots, league checkpoints and resets, PBT — in that order, each in the lineage."""
        pop, cfg = self.population, self.config.population
        rng = np.random.default_rng([self.config.seed, iteration, 1])
        if isinstance(pop.matchmaker, League):
            for decision in pop.matchmaker.checkpoints(pop, rng):
                self._snapshot(decision.member, iteration, "league checkpoint")
                if decision.reset:
                    self._reset(decision.member, iteration)
        elif iteration % cfg.snapshot_every == 0:
            for name in self.live:
                self._snapshot(name, iteration, "snapshot")
        if cfg.pbt.every and iteration % cfg.pbt.every == 0:
            fitness = {n: pop.elo[n] for n in self.live}
            for exploit in exploit_and_explore(fitness, {n: pop.members[n].hparams for n in self.live}, cfg.pbt, rng):
                self._exploit(exploit, iteration)

    def _reset(self, name: str, iteration: int) -> None:
        """Back to the initial weights (its @0 snapshot) with a fresh optimiser (a main exploiter's
        checkpoint)."""
        live = self.live[name]
        origin = self.population.snapshot_names(member=name)[0]
        load_weights(live.policy.model, self.frozen[origin], live.adapter)
        live.learner = self._learner(live.policy, live.adapter, self._config_of(self.population.members[name].hparams).optim)
        live.baselines.clear()
        self.population.restart(name, origin, iteration, "league reset to initial weights")

    def _exploit(self, exploit: Exploit, iteration: int) -> None:
        self._snapshot(exploit.member, iteration, "snapshot before pbt")
        donor_snapshot = self._snapshot(exploit.donor, iteration, "snapshot")
        me, donor = self.live[exploit.member], self.live[exploit.donor]
        me.learner.load_state_dict(copy.deepcopy(donor.learner.state_dict()))  # torch would share the moments
        me.learner.set_hparams(_optim_settings(exploit.hparams))
        me.baselines.clear()
        me.baselines.update(donor.baselines)
        self.population.restart(exploit.member, donor_snapshot, iteration, exploit.change, exploit.hparams)

    # ---- Kuhn analysis -------------------------------------------------------------------------

    def _strategy(self, name: str) -> dict[str, float] | None:
        if "kuhn_poker" not in self.config.games:
            return None
        if name in self.live:
            temperature = self._temperature(self.population.members[name].hparams)
            return kuhn_strategy(self.live[name].policy, temperature, self.live[name].adapter, self.config.rollout.compact_prompts)
        if name in self.population.snapshots:
            return self.population.snapshots[name].strategy
        maker = KUHN_SCRIPTED.get(self.population.members[name].player)
        return {k: float(v) for k, v in maker().items()} if maker else None

    def _kuhn_metrics(self) -> dict:
        """Each learner's exploitability, and the exact exploitability of the meta-strategy mixture."""
        if "kuhn_poker" not in self.config.games:
            return {}
        strategies = {name: self._strategy(name) for name in self.live}
        out = {f"kuhn/{n}/exploitability": float(kuhn_analysis.exploitability(s)) for n, s in strategies.items()}
        mixture = self.population.meta_strategy()
        for name in mixture:
            if name not in strategies:
                strategies[name] = self._strategy(name)
        known = {n: w for n, w in mixture.items() if w > 0 and strategies[n] is not None}
        if known:
            mixed = kuhn_analysis.average([strategies[n] for n in known], list(known.values()))
            out["kuhn/population_exploitability"] = float(kuhn_analysis.exploitability(mixed))
            out["kuhn/population_strategy"] = mixed
        out["population/meta_strategy"] = {n: round(w, 4) for n, w in mixture.items() if w > 1e-4}
        return out

    # ---- checkpoints ---------------------------------------------------------------------------

    def _checkpoint_state(self) -> tuple[dict, dict]:
        tensors = {
            "learners": {n: live.learner.state_dict() for n, live in self.live.items()},
            "past": list(self.past),
        }  # fmt: skip
        meta = {
            "population": self.population.state_dict(),
            "baselines": {n: _pairs(live.baselines) for n, live in self.live.items()},
        }
        self._write_population(meta["population"])
        return tensors, meta

    def _restore(self, tensors: dict, meta: dict) -> None:
        self.population.load_state_dict(meta["population"])
        for name, state in tensors["learners"].items():
            live = self.live[name]
            live.learner.set_hparams(_optim_settings(self.population.members[name].hparams))
            live.learner.load_state_dict(state)
            live.baselines.clear()
            live.baselines.update(_unpairs(meta["baselines"][name]))
        self.frozen = {name: load_file(self.run_dir / "snapshots" / f"{name}.safetensors") for name in self.population.snapshots}
        for name in list(self._loaded):
            self._unload(name)
        self.past.clear()
        self.past.extend(tensors["past"])

    def _write_population(self, state: dict) -> None:
        """The run directory's ``population.json`` (DESIGN.md), the payoff table as a tidy
        ``payoffs.csv`` (per seat pair: counts, mean, confidence interval) and the lineage as
        GraphML. ``state`` is the population's, as the checkpoint holds it."""
        state = {**state, "ratings": self.population.ratings()}
        write_text(self.run_dir / "population.json", json.dumps(state, indent=1, default=float))
        write_text(self.run_dir / "payoffs.csv", self.population.payoffs.to_frame().to_csv(index=False))
        write_atomic(self.run_dir / "lineage.graphml", self.population.lineage.write_graphml)
