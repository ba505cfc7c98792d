"""What a run measures, per game, from a registry instead of wired into a trainer.

- Every iteration (``measures``): Kuhn poker's exact exploitability of every learner's policy,
  of its average policy (:class:`IterateAverages`) and, with a population, of the meta-strategy
  mixture (reach-weighted per information set, ``games.kuhn_analysis.average``, never a plain
  mean); the same in any small two-player
  zero-sum OpenSpiel game (``openspiel/leduc_poker`` …), by OpenSpiel's own algorithms
  (:class:`OpenSpielExploitability`).
- Every ``eval.every`` iterations (``evaluation``): each learner of a seat game against the
  fixed opponents of ``eval.opponents`` (scripted players, its initial weights, itself K
  iterations ago), half the matches in each seat; task forge's executors on held-out tasks; an
  orchestration graph's accuracy on held-out tasks.
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

import games
from games import kuhn_analysis
from games.play import derive_seed
from games.task_forge.families import FAMILIES, Task, heldout
from games.task_forge.players import SkilledExecutor
from marl.evaluate import kuhn_strategy, results_against, strategy_read
from marl.policy import Request, Sampling
from marl.rollout import MatchSpec, RolloutEngine
from marl.hf import HFPolicy
from marl.learner import load_weights, trainable_weights
from marl.members import Member, load_model, prefix
from marl.scripted import ScriptedPolicy
from coevo.config import RunConfig
from coevo.roster import Roster
from populations.population import Population
from populations.roles import RolePopulations
from roles.seat import SeatRole

MAX_TREE = 10**6  # the largest OpenSpiel game whose exploitability is measured every iteration (exact_exploitability)
EVAL_SEEDS = 10**6  # evaluation matches draw their seeds apart from training matches
KUHN_SCRIPTED = {  # exact strategies of Kuhn's scripted players, for the mixture's analysis
    "random": kuhn_analysis.uniform, "nash": kuhn_analysis.nash, "always_bet": kuhn_analysis.always_bet,
    "never_bluff": kuhn_analysis.never_bluff,
}  # fmt: skip


class Run(Protocol):
    """What an evaluator reads of the run it measures (``coevo.train.Trainer`` is one): the run
    builds its evaluators, so they name its parts rather than import it."""

    config: RunConfig
    engine: RolloutEngine  # plays evaluation matches in the run's own process
    members: dict[str, Member]
    planner: Any  # the run's planner: SelfPlay, PopulationPlan or RolePopulations
    population: Population | None
    roster: Roster

    def players(self, names: Iterable[str]) -> dict[str, Member]: ...


def seat_role(member: Member, game: str) -> SeatRole:
    """How ``member`` is prompted in ``game`` as it plays (compact, or shown an example turn
    first): its strategy is read from the very prompts it answers."""
    return SeatRole(game, member.seat.compact, member.seat.demonstrate)


def strategy_of(member: Member) -> dict[str, float] | None:
    """A Kuhn player's exact strategy: a model's read by scoring, a scripted player's known one."""
    if isinstance(member.policy, HFPolicy):
        return kuhn_strategy(member.policy, member.temperature, member.adapter, seat_role(member, "kuhn_poker"))
    maker = KUHN_SCRIPTED.get(member.scripted.name) if member.scripted is not None else None
    return {k: float(v) for k, v in maker().items()} if maker else None


class IterateAverages:
    """Each learner's average policy: every policy it has held since the start (the initial one
    included), equally weighted and mixed per information state by reach (``mix(average, new,
    n)``: the average of ``n`` policies with one more). Self-play's last iterate can cycle where
    the average converges (fictitious play, CFR; NFSP trains a network to play it), so the
    average is the policy those results are about. Checkpointed: a resumed run averages exactly
    what an unbroken one does."""

    def __init__(self, mix: Callable[[Any, Any, int], Any]):
        self.mix = mix
        self.policies: dict[str, tuple[Any, int]] = {}  # name: (average, how many policies it averages)

    def add(self, name: str, policy: Any) -> Any:
        """``name``'s average once ``policy`` (its newest) is in it."""
        average, n = self.policies.get(name, (None, 0))
        self.policies[name] = (policy if average is None else self.mix(average, policy, n), n + 1)
        return self.policies[name][0]

    def state_dict(self, encode: Callable[[Any], Any]) -> dict:
        return {name: [encode(average), n] for name, (average, n) in self.policies.items()}

    def load_state_dict(self, state: dict, decode: Callable[[Any], Any]) -> None:
        self.policies = {name: (decode(average), n) for name, (average, n) in state.items()}


class KuhnExploitability:
    """Each learner's exact strategy and exploitability, its average policy's, and the
    population mixture's."""

    def __init__(self):
        self.averages = IterateAverages(lambda average, new, n: kuhn_analysis.average([average, new], [n, 1]))

    def __call__(self, trainer: Run) -> dict:
        strategies = {name: strategy_of(trainer.members[name]) for name in trainer.roster.specs}
        out: dict = {}
        for name, strategy in strategies.items():
            out[f"kuhn/{prefix(name)}exploitability"] = float(kuhn_analysis.exploitability(strategy))
            if strategy is not None:
                average = self.averages.add(name, strategy)
                out[f"kuhn/{prefix(name)}average_exploitability"] = float(kuhn_analysis.exploitability(average))
                out[f"kuhn/{prefix(name)}strategy"] = strategy  # P(bet or call) per information set: for plots
        if trainer.population is None:
            return out
        mixed = self.mixture(trainer, strategies)
        if mixed is not None:
            out["kuhn/population_exploitability"] = float(kuhn_analysis.exploitability(mixed))
            out["kuhn/population_strategy"] = mixed
        out["population/meta_strategy"] = {n: round(w, 4) for n, w in trainer.population.meta_strategy().items() if w > 1e-4}
        return out

    def mixture(self, trainer: Run, strategies: dict[str, dict[str, float] | None] | None = None) -> dict[str, float] | None:
        """The population's meta-strategy mixture as one strategy, reach-weighted; None when none
        of its players can be read. ``strategies``: players already read."""
        population, strategies = trainer.population, dict(strategies or {})
        mixture = population.meta_strategy()
        for name in mixture:
            if name not in strategies:
                snapshot = population.snapshots.get(name)
                strategies[name] = snapshot.strategy if snapshot else strategy_of(trainer.members[name])
        known = {n: w for n, w in mixture.items() if w > 0 and strategies[n] is not None}
        return kuhn_analysis.average([strategies[n] for n in known], list(known.values())) if known else None

    def state_dict(self) -> dict:
        return self.averages.state_dict(dict)

    def load_state_dict(self, state: dict) -> None:
        self.averages.load_state_dict(state, dict)


class Opponents:
    """Each learner of a seat game against ``eval.opponents``, in every game that has them. With
    several learners (a population) each one's results go under its name and their mean under
    the plain keys, so a population's curve is all of its members', not its first's."""

    def __init__(self, trainer: Run):
        self.trainer = trainer
        self.names = list(trainer.roster.specs)
        ks = [int(o.split(":")[1]) for o in trainer.config.eval.opponents if o.startswith("past:")]
        # per learner, (iteration, weights), oldest first
        self.past = {n: deque(maxlen=max(ks) + 1) for n in self.names} if ks else None
        self._initial: tuple[HFPolicy, str | None] | None = None  # the initial weights and their adapter's name

    def remember(self, iteration: int) -> None:
        """After each iteration: the learners' weights, for ``past:K``."""
        for name, past in (self.past or {}).items():
            member = self.trainer.members[name]
            past.append((iteration, trainable_weights(member.policy.model, member.adapter)))

    def _opponent(self, name: str, game: str, member: Member):
        if name == "initial":  # a fresh adapter is the base model, whichever member's name it has
            if self._initial is None:
                self._initial = load_model(member.recipe.config, member.name), member.adapter
            return self._initial
        if name.startswith("past:"):  # the oldest kept: K iterations ago once the run is that old; at the start, itself
            past = copy.deepcopy(member.policy)
            if kept := self.past[member.name]:
                load_weights(past.model, kept[0][1], member.adapter)
            return past, member.adapter
        return ScriptedPolicy(name, games.scripted_players(game)[name]), None

    def __call__(self, iteration: int) -> dict[str, float]:
        per_learner = {n: self._against(iteration, self.trainer.members[n]) for n in self.names}
        if len(per_learner) == 1:
            return next(iter(per_learner.values()))
        out = {k: float(np.mean([r[k] for r in per_learner.values()])) for k in next(iter(per_learner.values()))}
        for name, results in per_learner.items():
            out.update({f"eval/{name}/{k.removeprefix('eval/')}": v for k, v in results.items()})
        return out

    def _against(self, iteration: int, member: Member) -> dict[str, float]:
        trainer, me = self.trainer, member.seat
        out = {}
        for game in trainer.config.games:
            seats = games.make(game).possible_agents
            for name in trainer.config.eval.opponents:
                if name != "initial" and not name.startswith("past:") and name not in games.scripted_players(game):
                    continue  # a scripted player of another game
                policy, adapter = self._opponent(name, game, member)
                mode = me.mode if isinstance(policy, HFPolicy) else "generate"
                them = replace(me, policy=policy, member=name, mode=mode, adapter=adapter)
                specs = []
                for m in range(trainer.config.eval.matches):
                    order = seats if m % 2 == 0 else seats[::-1]
                    seed, kwargs = derive_seed(trainer.config.seed, iteration, EVAL_SEEDS + m), trainer.config.game_kwargs(game)
                    specs.append(MatchSpec(game, seed, {order[0]: me, order[1]: them}, game_kwargs=kwargs))
                for k, v in results_against(trainer.engine.play(specs), me.member).items():
                    out[f"eval/{game}/{name}/{k}"] = v
        return out

    def state(self) -> dict[str, list]:
        return {n: list(past) for n, past in (self.past or {}).items()}

    def load_state(self, past: dict[str, list]) -> None:
        for name, kept in (self.past or {}).items():
            kept.clear()
            kept.extend(past.get(name, []))


def heldout_tasks(config: RunConfig) -> list[Task]:
    """The run's held-out tasks: ``forge.heldout`` of each family, apart from training's, spread
    over every difficulty or all at ``forge.heldout_difficulty``."""
    difficulty = config.forge.heldout_difficulty
    knobs = None if difficulty is None else (difficulty, difficulty)
    return [t for family in FAMILIES for t in heldout(family, config.forge.heldout, seed=config.seed + 7919, knobs=knobs)]


class Heldout:
    """Each executor's held-out accuracy per family: its unaided success probability (scripted)
    or its share of right answers before any critique (a model, over the held-out tasks)."""

    def __init__(self, trainer: Run):
        self.trainer = trainer
        self.tasks = heldout_tasks(trainer.config)

    def __call__(self, iteration: int) -> dict[str, float]:
        out = {}
        executors = self.trainer.roster.team("executor")
        for executor in executors:
            player = executor.scripted.player if executor.scripted is not None else None
            if isinstance(player, SkilledExecutor):
                per_family = {f: player.heldout_accuracy([t for t in self.tasks if t.family == f]) for f in FAMILIES}
            else:
                per_family = self._played(iteration, executor)
            out.update({f"eval/{executor.name}/heldout/{f}": v for f, v in per_family.items()})
            out[f"eval/{executor.name}/heldout_accuracy"] = float(np.mean(list(per_family.values())))
        out["eval/executor/heldout_accuracy"] = float(np.mean([out[f"eval/{e.name}/heldout_accuracy"] for e in executors]))
        return out

    def _played(self, iteration: int, executor: Member) -> dict[str, float]:
        trainer = self.trainer
        planner = trainer.planner
        seats = {role: trainer.members[name].seat for role, name in planner.seats(0).items()} | {"executor": executor.seat}
        specs = [
            MatchSpec(planner.game, derive_seed(trainer.config.seed, iteration, EVAL_SEEDS + i), seats, f"eval{iteration}-{i}",
                      {**planner.game_kwargs, "task": (t.statement, t.program, t.label)})
            for i, t in enumerate(self.tasks)
        ]  # fmt: skip
        p_hats = [ep.outcome["p_hat"] for ep in trainer.engine.play(specs)]
        return {f: float(np.mean([p for t, p in zip(self.tasks, p_hats) if t.family == f])) for f in FAMILIES}


class GraphHeldout:
    """An orchestration graph's held-out accuracy: one match per held-out task of every family
    (``forge.heldout`` a family, apart from training's tasks), each seat played by its node's
    first member (a role's, or the one policy), at the run's sampling settings; and the model
    calls a match took, for comparisons at equal calls."""

    def __init__(self, trainer: Run):
        self.trainer = trainer
        config = trainer.config
        self.game = next(iter(config.games))
        self.tasks = heldout_tasks(config)

    def __call__(self, iteration: int) -> dict[str, float]:
        trainer = self.trainer
        planner = trainer.planner
        if isinstance(planner, RolePopulations):
            seats = {seat: trainer.members[name].seat for seat, name in planner.seated(planner.seats(0)).items()}
        else:
            seats = dict.fromkeys(planner.seats[self.game], trainer.members[planner.member].seat)
        kwargs = trainer.config.game_kwargs(self.game)
        specs = [
            MatchSpec(self.game, derive_seed(trainer.config.seed, iteration, EVAL_SEEDS + i), seats, f"eval{iteration}-{i}",
                      {**kwargs, "task": task})
            for i, task in enumerate(self.tasks)
        ]  # fmt: skip
        played = trainer.engine.play(specs)
        right = [ep.outcome["correct_share"] for ep in played]
        out = {
            f"eval/graph/heldout/{f}": float(np.mean([r for t, r in zip(self.tasks, right) if t.family == f]))
            for f in FAMILIES
        }  # fmt: skip
        out["eval/graph/heldout_accuracy"] = float(np.mean(right))
        out["eval/graph/calls_per_match"] = float(np.mean([len(ep.turns) for ep in played]))
        return out


class OpenSpielExploitability:
    """Exact exploitability in a two-player zero-sum OpenSpiel game: each learner's move
    distribution at every information state, read by forced-choice scoring (one batched call per
    member) from the prompts play shows, handed to OpenSpiel's ``exploitability``; and with a
    population, its meta-strategy mixture's (OpenSpiel's reach-weighted aggregate)."""

    def __init__(self, game: str):
        from games import openspiel_analysis

        self.analysis = openspiel_analysis
        self.game = game
        self.env = games.make(game)
        self.states = openspiel_analysis.information_states(self.env)
        self.name = self.env.game.get_type().short_name  # metrics: leduc_poker/exploitability
        game = self.env.game
        self.averages = IterateAverages(lambda average, new, n: openspiel_analysis.mixture(game, [average, new], [n, 1]))

    def distributions(self, member: Member) -> dict[str, list[float]] | None:
        """``member``'s move probabilities at every information state: a model's as forced choice
        plays them, a random player's uniform; None for a player we cannot read."""
        if isinstance(member.policy, HFPolicy):
            sampling = Sampling(member.temperature)
            asked = [(Request(s.prompt, sampling, member.adapter), s.moves) for s in self.states]
            read = strategy_read(member.policy, asked, seat_role(member, self.game), member.temperature)
            probs = [p.astype(float) for p in read]
            return {s.key: (p / p.sum()).tolist() for s, p in zip(self.states, probs)}  # sums to 1 in float64, as analysed
        if member.scripted is not None and member.scripted.name == "random":
            return {s.key: [1 / len(s.moves)] * len(s.moves) for s in self.states}
        return None

    def policy(self, member: Member) -> Any:
        """``member``'s play as an OpenSpiel tabular policy (see :meth:`distributions`); None for a
        player we cannot read."""
        read = self.distributions(member)
        return None if read is None else self.analysis.policy_from(self.env.game, read)

    def __call__(self, trainer: Run) -> dict:
        game = self.env.game
        policies = {name: self.policy(trainer.members[name]) for name in trainer.roster.specs}
        out = {}
        for name, policy in policies.items():
            out[f"{self.name}/{prefix(name)}exploitability"] = self.analysis.exploitability(game, policy)
            average = self.averages.add(name, policy)
            out[f"{self.name}/{prefix(name)}average_exploitability"] = self.analysis.exploitability(game, average)
        mixed = None if trainer.population is None else self.mixture(trainer, policies)
        if mixed is not None:
            out[f"{self.name}/population_exploitability"] = self.analysis.exploitability(game, mixed)
        return out

    def mixture(self, trainer: Run, policies: dict[str, Any] | None = None) -> Any:
        """The population's meta-strategy mixture as one OpenSpiel tabular policy, reach-weighted;
        None when none of its players can be read. ``policies``: players already read."""
        policies = dict(policies or {})
        mixture = {n: w for n, w in trainer.population.meta_strategy().items() if w > 0}
        players = trainer.players(set(mixture) - set(policies))
        policies.update({name: self.policy(player) for name, player in players.items()})
        known = [n for n in mixture if policies.get(n) is not None]
        if not known:
            return None
        return self.analysis.mixture(self.env.game, [policies[n] for n in known], [mixture[n] for n in known])

    def state_dict(self) -> dict:
        return self.averages.state_dict(lambda policy: policy.action_probability_array.tolist())

    def load_state_dict(self, state: dict) -> None:
        self.averages.load_state_dict(state, lambda probabilities: self.analysis.tabular(self.env.game, probabilities))


def measures(names: Iterable[str]) -> list[KuhnExploitability | OpenSpielExploitability]:
    """What is measured every iteration in a run of these games: once at the start, then after
    every iteration (each call adds the learners' policies to their averages)."""
    return [KuhnExploitability() if name == "kuhn_poker" else OpenSpielExploitability(name) for name in names if measured(name)]


def measured(game: str) -> bool:
    """Whether a run of ``game`` measures exact exploitability every iteration (:func:`measures`)."""
    return game == "kuhn_poker" or (game.startswith("openspiel/") and exact_exploitability(game))


def exact_exploitability(game: str) -> bool:
    """Whether ``game``'s exploitability is measured exactly: two-player zero-sum, and small enough
    to enumerate every iteration — actions ** length, a bound on the moves of one deal, at most
    ``MAX_TREE`` (Kuhn 8, Leduc 6,561, 4-card Goofspiel 65,536; not Liar's dice's 13 ** 13)."""
    env = games.make(game)
    spiel = env.game
    return spiel.num_players() == 2 and env.zero_sum and spiel.num_distinct_actions() ** spiel.max_game_length() <= MAX_TREE


def evaluation(game: str) -> type:
    """What ``eval.every`` runs for a run whose first game is ``game``: held-out tasks (task forge,
    a graph), else fixed opponents."""
    return Heldout if game == "task_forge" else GraphHeldout if game.startswith("graph/") else Opponents
