"""What changes a population between iterations, each change recorded in its lineage:

- **snapshots** every ``snapshot_every`` iterations (or by the league's checkpoint rule): a
  member frozen as it is (``populations.snapshots``);
- the league's **resets** (a main exploiter back to its initial weights, with a fresh optimiser);
- PSRO's **oracles**: each learner's training against the meta-strategy ends after
  ``snapshot_every`` iterations, or once its win rate plateaus (``[population.oracle]``), with a
  snapshot that joins the meta-game; the next oracle continues, or starts again from the initial
  weights;
- **PBT**'s exploit and explore: a weak member continues from a strong one's snapshot, with its
  whole learner state and perturbed hyper-parameters.

``population.json``, ``payoffs.csv`` and ``lineage.graphml`` beside the events file hold the
latest state for analysis.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from marl.learner import load_weights, trainable_weights
from marl.members import PLAYER, Member
from coevo.roster import config_of, optim_settings
from marl.rundir import write_atomic, write_text
from coevo.config import RunConfig
from populations.config import PopulationConfig
from populations.league import League
from populations.pbt import Exploit, exploit_and_explore
from populations.population import Member as PopulationMember
from populations.population import Population
from populations.snapshots import Snapshots, snapshot_recipe


class Evolution:
    def __init__(
        self, config: RunConfig, population: Population, members: dict[str, Member], learners, snapshots: Snapshots,
        run_dir: Path, strategy: Callable[[Member], dict | None],
    ):  # fmt: skip
        """``learners``: the population's learners (``marl.learners.Learners`` or a remote copy);
        ``strategy``: a member's exact Kuhn strategy, kept with its snapshots (None for other games)."""
        self.config, self.population, self.members, self.learners = config, population, members, learners
        self.snapshots, self.run_dir, self.strategy = snapshots, Path(run_dir), strategy

    def snapshot(self, name: str, iteration: int, change: str) -> str:
        member = self.members[name]
        snap = self.population.take_snapshot(name, iteration, change, self.strategy(member))
        self.snapshots.freeze(snap, member, config_of(self.config, self.population.snapshots[snap].hparams))
        return snap

    def evolve(self, iteration: int) -> None:
        """Snapshots, league checkpoints and resets, PBT — in that order."""
        pop, cfg = self.population, self.config.population
        rng = np.random.default_rng([self.config.seed, iteration, 1])
        learners = [n for n, m in pop.members.items() if m.trainable]
        if isinstance(pop.matchmaker, League):
            for decision in pop.matchmaker.checkpoints(pop, rng):
                self.snapshot(decision.member, iteration, "league checkpoint")
                if decision.reset:
                    self._reset(decision.member, iteration, "league reset to initial weights")
        elif cfg.matchmaker == "psro":
            for name in (n for n in learners if oracle_done(pop.members[n], iteration, cfg)):
                self.snapshot(name, iteration, "oracle")
                if cfg.oracle.start == "initial":
                    self._reset(name, iteration, "a new oracle from the initial weights")
                pop.members[name].oracle_began, pop.members[name].win_rates = iteration, []
        elif iteration % cfg.snapshot_every == 0:
            for name in learners:
                self.snapshot(name, iteration, "snapshot")
        if cfg.pbt.every and iteration % cfg.pbt.every == 0:
            fitness = {n: pop.elo[n] for n in learners}
            for exploit in exploit_and_explore(fitness, {n: pop.members[n].hparams for n in learners}, cfg.pbt, rng):
                self._exploit(exploit, iteration)

    def _reset(self, name: str, iteration: int, change: str) -> None:
        """Back to the initial weights (its @0 snapshot) with a fresh optimiser (a main exploiter's
        checkpoint, a fresh PSRO oracle)."""
        member = self.members[name]
        origin = self.population.snapshot_names(member=name)[0]
        origin_weights = self.snapshots.frozen[origin]
        load_weights(member.policy.model, origin_weights, member.adapter)
        self.learners.reset(name, origin_weights, optim_settings(self.population.members[name].hparams))
        member.baselines.clear()
        member.version += 1
        self.population.restart(name, origin, iteration, change)

    def _exploit(self, exploit: Exploit, iteration: int) -> None:
        self.snapshot(exploit.member, iteration, "snapshot before pbt")
        donor_snapshot = self.snapshot(exploit.donor, iteration, "snapshot")
        me, donor = self.members[exploit.member], self.members[exploit.donor]
        self.learners.copy(exploit.member, exploit.donor, optim_settings(exploit.hparams))
        load_weights(me.policy.model, trainable_weights(donor.policy.model, donor.adapter), me.adapter)
        me.baselines.clear()
        me.baselines.update(donor.baselines)
        self.population.restart(exploit.member, donor_snapshot, iteration, exploit.change, exploit.hparams)
        me.retune(config_of(self.config, exploit.hparams))
        me.version += 1

    # ---- state ---------------------------------------------------------------------------------

    def state(self) -> dict:
        """The population's state for the checkpoint; its files for analysis are written beside it."""
        state = self.population.state_dict()
        write_population(self.run_dir, state, self.population)
        return state

    def load_state(self, state: dict) -> None:
        self.population.load_state_dict(state)
        snapshots = self.population.snapshots.items()
        self.snapshots.reload({n: (snapshot_recipe(n, self.members[s.member], config_of(self.config, s.hparams)), PLAYER) for n, s in snapshots})
        for name, member in self.members.items():
            if name in self.population.members and self.population.members[name].trainable:
                member.retune(config_of(self.config, self.population.members[name].hparams))


def oracle_done(member: PopulationMember, iteration: int, config: PopulationConfig) -> bool:
    """Whether ``member``'s PSRO oracle ends after ``iteration``: its budget is spent, or over its
    last ``plateau`` iterations its mean win rate rose by no more than the tolerance on the
    ``plateau`` before (a best response that has stopped improving)."""
    if iteration - member.oracle_began >= config.snapshot_every:
        return True
    window, rates = config.oracle.plateau, member.win_rates
    if not window or len(rates) < 2 * window:
        return False
    return float(np.mean(rates[-window:])) <= float(np.mean(rates[-2 * window : -window])) + config.oracle.plateau_tolerance


def write_population(run_dir: Path, state: dict, population) -> None:
    """The run directory's ``population.json`` (DESIGN.md: ``state`` and the ratings), the payoff
    table as a tidy ``payoffs.csv`` (per seat pair: counts, mean, confidence interval) and the
    lineage as GraphML, for analysis. ``population``: a ``Population`` or ``RolePopulations``."""
    write_text(run_dir / "population.json", json.dumps({**state, "ratings": population.ratings()}, indent=1, default=float))
    write_text(run_dir / "payoffs.csv", population.payoffs.to_frame().to_csv(index=False))
    write_atomic(run_dir / "lineage.graphml", population.lineage.write_graphml)
