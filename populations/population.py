"""A population: its members, their frozen snapshots, lineage, ratings and payoffs, and who plays
whom next. Pure bookkeeping — no model is touched here, so it is the same for scripted players
and LLMs, cheap enough for hundreds of members, and fully checkpointable as JSON.

- A **member** is a live player of one role: a model being trained (``trainable``) with its
  hyper-parameters, or a fixed one (a scripted player named in ``population.opponents``).
- A **snapshot** (``m0@10``) is a member frozen after an iteration; snapshots are the historical
  players fictitious play, PFSP, PSRO and the league sample from. The trainer keeps their weights.
- The **lineage** (``populations.lineage``) records where each came from.
- Every finished match updates the payoff table (per seat pair), online Elo and OpenSkill.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from games.play import derive_seeds
from marl.episode import Episode
from marl.pools import MatchPlan
from populations.config import PopulationConfig
from populations.league import KINDS, League
from populations.lineage import Lineage
from populations.matchmaking import PFSP, PSRO, Fictitious, Matchmaker, SelfPlay, Skill
from populations.metagame import antisymmetric_from_win_rates, meta_strategy, nash_averaging
from populations.payoffs import PayoffTable, uncertain_pairs
from populations.ratings import Elo, OpenSkill, bradley_terry

EVAL_SALT = 7919  # evaluation matches draw their seeds apart from training matches
MEET_SALT = 104729  # and meetings apart from both


@dataclass
class Member:
    name: str
    player: str  # the model (tiny, smollm2-135m, hf:…) or scripted player it is
    kind: str = "main"  # main | main_exploiter | league_exploiter | fixed
    trainable: bool = True
    hparams: dict[str, float] = field(default_factory=dict)  # what PBT tunes: optim settings, temperature, top_p
    matches_since_snapshot: int = 0  # the league's checkpoint clock
    oracle_began: int = 0  # PSRO: the iteration its current oracle began
    win_rates: list[float] = field(default_factory=list)  # PSRO: its win rate against others, each iteration of this oracle


@dataclass
class Snapshot:
    name: str
    member: str
    kind: str
    player: str
    iteration: int
    strategy: dict[str, float] | None = None  # its exact Kuhn strategy, when the game is Kuhn poker
    hparams: dict[str, float] = field(default_factory=dict)  # its member's, frozen with it (sampling included)


def make_matchmaker(config: PopulationConfig) -> Matchmaker | League:
    makers = {
        "self_play": SelfPlay, "fictitious": Fictitious, "skill": Skill, "psro": PSRO,
        "pfsp": lambda: PFSP(config.pfsp_weighting, config.pfsp_self_play), "league": lambda: League(config.league),
    }  # fmt: skip
    return makers[config.matchmaker]()


class Population:
    def __init__(self, config: PopulationConfig, player: str, hparams: dict[str, float], seed: int = 0):
        self.config, self.seed = config, seed
        self.matchmaker = make_matchmaker(config)
        self.members: dict[str, Member] = {}
        self.snapshots: dict[str, Snapshot] = {}
        self.lineage = Lineage()
        self.elo = Elo(k=config.elo_k)
        self.skill = OpenSkill()
        self.payoffs = PayoffTable(decay=config.payoff_decay)
        self._meta: dict[str, float] | None = None  # the meta-game's solution this iteration
        self._plan: _Planning | None = None  # who is who and the win rates, while planning
        for name, kind in self._trainable_names():
            self.add(Member(name, player, kind, True, dict(hparams)))
        for name in config.opponents:
            self.add(Member(name, name, "fixed", False))

    def _trainable_names(self) -> list[tuple[str, str]]:
        if self.config.matchmaker == "league":
            counts = self.config.league.main_agents, self.config.league.main_exploiters, self.config.league.league_exploiters
            return [(f"{kind}_{i}", kind) for kind, n in zip(KINDS, counts) for i in range(n)]
        return [(f"m{i}", "main") for i in range(self.config.size)]

    def add(self, member: Member) -> None:
        if member.name in self.members or member.name in self.snapshots:
            raise ValueError(f"the population already has {member.name!r}")
        self.members[member.name] = member
        self.lineage.add(member.name, kind=member.kind, player=member.player, trainable=member.trainable, hparams=member.hparams)
        self.elo.add(member.name)
        self.skill.add(member.name)

    # ---- who is who ----------------------------------------------------------------------------

    def learners(self) -> list[str]:
        """Members that seek matches: the trainable ones, or every member when none trains (a
        population of fixed players, e.g. to rate scripted players)."""
        trainable = [n for n, m in self.members.items() if m.trainable]
        return trainable or list(self.members)

    def snapshot_names(self, member: str | None = None, kind: str | None = None) -> list[str]:
        """Snapshots, oldest first, optionally of one member or one kind."""
        if member is None and kind is None:
            return list(self.snapshots)
        return [
            s.name for s in self.snapshots.values()
            if (member is None or s.member == member) and (kind is None or s.kind == kind)
        ]  # fmt: skip

    def historical(self) -> list[str]:
        """The frozen players matchmakers draw from: every snapshot, and the fixed members.
        While planning, one list shared by every learner's call (callers must not change it)."""
        if self._plan is not None:
            return self._plan.historical
        return [*self.snapshots, *(n for n, m in self.members.items() if not m.trainable)]

    def take_snapshot(self, member: str, iteration: int, change: str = "snapshot", strategy: dict | None = None) -> str:
        """Freeze ``member`` as it is now; its line continues from the snapshot."""
        m = self.members[member]
        name = f"{member}@{iteration}"
        if name not in self.snapshots:
            self.snapshots[name] = Snapshot(name, member, m.kind, m.player, iteration, strategy, dict(m.hparams))
            parent = self.lineage.parent(member)
            since = self.lineage.change(parent, member) if parent else "continues"  # a PBT copy or reset since
            change = change if since == "continues" else f"{since}; then {change}"
            self.lineage.add(name, parent, change, iteration, member=member, kind=m.kind, hparams=dict(m.hparams))
            self.lineage.reparent(member, name, "continues", iteration)
            self.elo.add(name, self.elo[member])
            self.skill.add(name, self.skill.mu(member), self.skill.sigma(member))
        m.matches_since_snapshot = 0
        return name

    def restart(self, member: str, origin: str, iteration: int, change: str, hparams: dict[str, float] | None = None) -> None:
        """``member`` continues from ``origin`` (a PBT exploit or a league reset): its own line
        was snapshotted just before, and its ratings start again from ``origin``'s."""
        m = self.members[member]
        if hparams is not None:
            m.hparams = dict(hparams)
        self.lineage.reparent(member, origin, change, iteration)
        self.lineage.graph.nodes[member]["hparams"] = dict(m.hparams)
        self.elo.set(member, self.elo[origin])
        self.skill.set(member, self.skill.mu(origin), self.skill.sigma(origin))

    # ---- matchmaking ---------------------------------------------------------------------------

    def begin_iteration(self) -> None:
        """Forget last iteration's meta-game solution: the payoffs or the population changed."""
        self._meta = None

    def _meta_players(self) -> list[str]:
        if self.config.matchmaker in ("psro", "fictitious"):
            return self.historical()  # the policies they add; the learner is the response in progress
        if self.config.matchmaker == "self_play":
            return self.learners()
        return self.snapshot_names() + list(self.members)

    def _solve(self, names: list[str]) -> dict[str, float]:
        if not names:
            return {}
        if self.config.matchmaker == "fictitious":
            return dict.fromkeys(names, 1 / len(names))  # its opponents are uniform: so is its average
        means, games = self.payoffs.matrix(names)
        known = _with_every_pair_played(games) if self.config.meta_solver != "uniform" else list(range(len(names)))
        weights = np.zeros(len(names))
        weights[known] = meta_strategy(self.config.meta_solver, means[np.ix_(known, known)])
        return {n: float(w) for n, w in zip(names, weights)}

    def meta_strategy(self) -> dict[str, float]:
        """The population's mixture: whom PSRO plays against, and what its exploitability measures.
        Solved at most once per iteration, and only when asked for."""
        if self._meta is None:
            self._meta = self._solve(self._meta_players())
        return self._meta

    def win_rate(self, a: str, b: str) -> float:
        return float(self.win_rates(a, [b])[0])

    def win_rates(self, a: str, candidates: Sequence[str]) -> np.ndarray:
        """a's win rates against ``candidates``, ½ where unplayed."""
        return self.win_rate_table([a], candidates)[0]

    def win_rate_table(self, players: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        """(players, candidates) win rates, ½ where unplayed; while planning, read from one matrix
        built in a single pass over the payoff table."""
        plan = self._plan
        if plan is None or not all(p in plan.rows for p in players):
            return self.payoffs.win_rate_matrix(players, candidates)
        rows = plan.rates[[plan.rows[p] for p in players]]
        if candidates is plan.historical:  # the usual question: the first columns, in order
            return rows[:, : len(candidates)]
        return rows[:, [plan.columns[c] for c in candidates]]

    def plans(self, iteration: int, matches: int, games: dict[str, float], seats: dict[str, list[str]]) -> list[MatchPlan]:
        """This iteration's matches, shared out evenly between the learners; each learner takes
        the first seat in half of its matches."""
        rng = np.random.default_rng([self.seed, iteration])
        learners = self.learners()
        k = len(learners)
        historical = self.historical()
        names = [*historical, *(n for n, m in self.members.items() if m.trainable)]
        self._plan = _Planning(
            {n: i for i, n in enumerate(learners)}, {n: i for i, n in enumerate(names)},
            self.payoffs.win_rate_matrix(learners, names), historical,
        )  # fmt: skip
        try:
            counts = [len(range(i, matches, k)) for i in range(k)]
            opponents = [iter(names) for names in self.matchmaker.opponents(self, learners, counts, rng)]
        finally:
            self._plan = None
        ordered = []
        for m in range(matches):
            learner, opponent = learners[m % k], next(opponents[m % k])
            ordered.append((learner, opponent) if (m // k) % 2 == 0 else (opponent, learner))
        ids = [f"it{iteration}-m{m}" for m in range(matches)]
        return _match_plans(ordered, games, seats, rng, derive_seeds(matches, self.seed, iteration), ids)

    def evaluation_plans(self, iteration: int, matches: int, games: dict[str, float], seats: dict[str, list[str]]) -> list[MatchPlan]:
        """Matches the evaluation scheduler spends where the ranking is least certain."""
        if not matches:
            return []
        names = self.snapshot_names() + list(self.members)
        if len(names) < 2:
            return []
        rng = np.random.default_rng([self.seed, iteration, EVAL_SALT])
        pairs = uncertain_pairs(self.payoffs, names, matches, rng)
        ordered = [(a, b) if m % 2 == 0 else (b, a) for m, (a, b) in enumerate(pairs)]
        seeds = derive_seeds(len(pairs), self.seed, iteration, EVAL_SALT)
        return _match_plans(ordered, games, seats, rng, seeds, [f"it{iteration}-e{m}" for m in range(len(pairs))])

    def meeting_plans(self, iteration: int, matches: int, games: dict[str, float], seats: dict[str, list[str]]) -> list[MatchPlan]:
        """``matches`` between each pair of the meta-game's players that has never met, seats
        alternating: played as soon as a snapshot is taken, so that the next solve knows its row
        (OpenSpiel's psro_v2 simulates a new policy against every other before it solves)."""
        names = self._meta_players()
        met = _met(self.payoffs.matrix(names)[1])
        unmet = [(a, b) for i, a in enumerate(names) for j, b in enumerate(names) if i < j and not met[i, j]]
        ordered = [(a, b) if m % 2 == 0 else (b, a) for a, b in unmet for m in range(matches)]
        rng = np.random.default_rng([self.seed, iteration, MEET_SALT])
        seeds = derive_seeds(len(ordered), self.seed, iteration, MEET_SALT)
        return _match_plans(ordered, games, seats, rng, seeds, [f"it{iteration}-meet{m}" for m in range(len(ordered))])

    # ---- results -------------------------------------------------------------------------------

    def record(self, episodes: Iterable[Episode]) -> None:
        """Payoffs per seat pair, Elo and OpenSkill, each member's match clock and, under PSRO, each
        learner's win rate this iteration (its oracle's plateau rule)."""
        members, cells, returns = self.members, [], []
        wins: dict[str, list[float]] = defaultdict(list)
        for ep in episodes:
            (seat_a, a), (seat_b, b) = ep.members.items()
            ret_a, ret_b = ep.rewards[seat_a], ep.rewards[seat_b]
            if a in members:
                members[a].matches_since_snapshot += 1
            if b != a and b in members:
                members[b].matches_since_snapshot += 1
            if a == b:
                continue  # self-play says nothing about relative strength
            cells.append((a, b, seat_a, seat_b))
            returns += (ret_a, ret_b)
            wins[a].append(_win(ret_a, ret_b))
            wins[b].append(_win(ret_b, ret_a))
        record_results(cells, returns, self.payoffs, self.elo, self.skill)
        for name, results in wins.items() if self.config.matchmaker == "psro" else ():
            if name in members and members[name].trainable:
                members[name].win_rates.append(float(np.mean(results)))

    def ratings(self) -> list[dict]:
        """One row per player: online Elo, batch Bradley–Terry Elo (order-independent), OpenSkill
        μ, σ and ordinal, and the Nash-average skill (Balduzzi et al. 2018: 0 inside the
        maximum-entropy Nash of the log-odds game, negative outside; blind to redundant copies)."""
        names = [*self.snapshots, *self.members]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a slowly converging fit still ranks
            batch = bradley_terry(self.payoffs.wins_matrix(names))
        _, nash_skill = nash_averaging(antisymmetric_from_win_rates(self.payoffs.win_rate_matrix(names, names)))
        return [
            {
                "player": n, "elo": self.elo[n], "bradley_terry": float(bt), "mu": self.skill.mu(n),
                "sigma": self.skill.sigma(n), "ordinal": self.skill.ordinal(n), "nash_average": float(skill),
            }
            for n, bt, skill in zip(names, batch, nash_skill)
        ]  # fmt: skip

    # ---- state ---------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        return {
            "members": [_record(m) for m in self.members.values()],
            "snapshots": [_record(s) for s in self.snapshots.values()],
            "lineage": self.lineage.state_dict(),
            "elo": self.elo.state_dict(),
            "openskill": self.skill.state_dict(),
            "payoffs": self.payoffs.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.members = {m["name"]: Member(**m) for m in state["members"]}
        self.snapshots = {s["name"]: Snapshot(**s) for s in state["snapshots"]}
        self.lineage.load_state_dict(state["lineage"])
        self.elo.load_state_dict(state["elo"])
        self.skill.load_state_dict(state["openskill"])
        self.payoffs.load_state_dict(state["payoffs"])
        self._meta = None


def record_results(cells: list[tuple[str, str, str, str]], returns: list[float], payoffs: PayoffTable, elo: Elo, skill: OpenSkill) -> None:
    """Matches as (a, b, seat_a, seat_b) cells with their returns (a's, b's, …) into the payoff
    table, and as results (a beat b: the higher return) into Elo and OpenSkill."""
    payoffs.record_many(cells, returns)
    results = [(a, b, _win(ra, rb)) for (a, b, _, _), ra, rb in zip(cells, returns[::2], returns[1::2])]
    elo.update_many(results)
    skill.update_many(results)


def _with_every_pair_played(games: np.ndarray) -> list[int]:
    """The meta-game's players that have met every other one kept, oldest first: a snapshot
    enters once the evaluation scheduler (unplayed pairs first) has played it against the rest.

    Why: an unplayed pair would count as a draw, and a new snapshot that has met nobody is then
    a row of draws, a Nash strategy of any symmetric zero-sum game; the solvers gave it up to all
    the weight for an iteration. OpenSpiel's psro_v2 plays a new policy against every other
    before it solves, as ``meet_matches`` does; without meetings the solve waits for the
    evaluation scheduler's matches instead."""
    met = _met(games)
    kept: list[int] = []
    for i in range(len(games)):
        if all(met[i, j] for j in kept):
            kept.append(i)
    return kept


def _met(games: np.ndarray) -> np.ndarray:
    """(N, N) games between each pair, either way round, as whether they have met."""
    return (games + games.T) > 0


def _win(mine: float, theirs: float) -> float:
    """1 for the higher return, ½ for a draw."""
    return float(np.sign(mine - theirs) / 2 + 0.5)


def _record(item: Member | Snapshot) -> dict:
    """A member or snapshot as a dict, its dicts (hparams, strategy) and lists copied:
    ``dataclasses.asdict`` deep-copies recursively and took most of a 1,000-snapshot checkpoint's time."""
    return {k: dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v for k, v in vars(item).items()}


@dataclass(slots=True)
class _Planning:
    """What every learner's matchmaking reads while one iteration is planned: built once."""

    rows: dict[str, int]  # learner -> row of rates
    columns: dict[str, int]  # player -> column of rates: the historical players first, in order
    rates: np.ndarray  # (learners, players) win rates, ½ where unplayed
    historical: list[str]


def _match_plans(
    ordered: list[tuple[str, str]], games: dict[str, float], seats: dict[str, list[str]], rng: np.random.Generator,
    seeds: list[int], ids: list[str],
) -> list[MatchPlan]:  # fmt: skip
    """Matches for (first seat, second seat) pairs, each in a game drawn by its weight."""
    names, weights = list(games), np.array(list(games.values()), dtype=float)
    if len(names) == 1:  # nothing to draw: the common case, and the generator is not used after this
        drawn = repeat(0)
    else:
        drawn = rng.choice(len(names), size=len(ordered), p=weights / weights.sum()).tolist()
    out = []
    for (a, b), g, seed, match_id in zip(ordered, drawn, seeds, ids):
        first, second = seats[names[g]]
        out.append(MatchPlan(names[g], seed, {first: a, second: b}, match_id))
    return out


def seats_of(game_names: Sequence[str]) -> dict[str, list[str]]:
    import games

    out = {}
    for name in game_names:
        agents = games.make(name).possible_agents
        if len(agents) != 2:
            raise ValueError(f"populations match two players; {name} seats {len(agents)}")
        out[name] = list(agents)
    return out
