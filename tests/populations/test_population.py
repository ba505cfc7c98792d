"""Population bookkeeping without models: PFSP's weightings, matchmakers, the lineage, the AlphaStar
league's rules on a scripted schedule, PBT, and the population's state round trip."""

import json
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from marl.episode import Episode
from populations.config import PopulationConfig
from populations.league import Checkpoint, LeagueConfig, remove_monotonic_suffix
from populations.lineage import Lineage
from populations.matchmaking import PFSP, draw, pfsp_weights
from populations.pbt import PBTConfig, exploit_and_explore
from populations.population import Population

SEATS = {"kuhn_poker": ["player_0", "player_1"]}
GAMES = {"kuhn_poker": 1.0}


def population(**settings) -> Population:
    return Population(PopulationConfig(**settings), "tiny", {"lr": 1e-3, "entropy_coef": 0.1}, seed=0)


def result(a: str, b: str, return_a: float, seats=("player_0", "player_1")) -> Episode:
    return Episode(
        match_id="x", game="kuhn_poker", seed=0, members={seats[0]: a, seats[1]: b},
        rewards={seats[0]: return_a, seats[1]: -return_a}, turns=[],
    )  # fmt: skip


def play(pop: Population, a: str, b: str, wins: int, losses: int) -> None:
    pop.record([result(a, b, 1.0)] * wins + [result(a, b, -1.0)] * losses)


# ---- PFSP ----------------------------------------------------------------------------------------

FORMULAS = {
    "hard": lambda x: (1 - x) ** 2,
    "squared": lambda x: (1 - x) ** 2,
    "variance": lambda x: x * (1 - x),
    "linear": lambda x: 1 - x,
    "linear_capped": lambda x: min(0.5, 1 - x),
}


@pytest.mark.parametrize("weighting", FORMULAS)
def test_pfsp_weights_are_alphastars_formulas(weighting):
    x = [0.1, 0.3, 0.5, 0.8]
    raw = np.array([FORMULAS[weighting](v) for v in x])
    np.testing.assert_allclose(pfsp_weights(x, weighting), raw / raw.sum())


def test_pfsp_golden_values_and_uniform_fallback():
    np.testing.assert_allclose(pfsp_weights([0.0, 0.5], "squared"), [0.8, 0.2])  # 1 : 1/4
    np.testing.assert_allclose(pfsp_weights([0.5, 0.9], "variance"), [0.25 / 0.34, 0.09 / 0.34])
    np.testing.assert_allclose(pfsp_weights([0.2, 0.9], "linear_capped"), [0.5 / 0.6, 0.1 / 0.6])
    np.testing.assert_allclose(pfsp_weights([1.0, 1.0, 1.0], "hard"), [1 / 3] * 3)  # all beaten: uniform
    with pytest.raises(ValueError, match="unknown PFSP weighting 'cubic'"):
        pfsp_weights([0.5], "cubic")


@given(st.lists(st.floats(0, 1), min_size=1, max_size=20), st.sampled_from(list(FORMULAS)))
def test_pfsp_weights_are_a_distribution_that_prefers_stronger_opponents(rates, weighting):
    p = pfsp_weights(rates, weighting)
    assert p.sum() == pytest.approx(1) and (p >= 0).all()
    if weighting in ("hard", "squared", "linear") and p.max() < 1:  # monotone: lower win rate, more often
        order = np.argsort(rates)
        assert all(p[order[i]] >= p[order[i + 1]] - 1e-12 for i in range(len(rates) - 1))


# ---- matchmakers ---------------------------------------------------------------------------------


@given(st.lists(st.floats(0, 1), min_size=1, max_size=6), st.sampled_from(sorted(FORMULAS)))
def test_pfsp_weights_of_a_table_are_each_rows_weights(rates, weighting):
    """Matchmaking weighs every learner's row at once: row by row, the same as one learner at a time."""
    table = np.array([rates, rates[::-1], [1.0] * len(rates)])
    expected = [pfsp_weights(row, weighting) for row in table]
    np.testing.assert_allclose(pfsp_weights(table, weighting), expected)


@given(
    st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 10)), min_size=1, max_size=8).filter(any),
    st.integers(0, 50), st.integers(0, 2**32 - 1),
)  # fmt: skip
def test_draw_never_picks_a_zero_weight_candidate(weights, count, seed):
    names = [f"c{i}" for i in range(len(weights))]
    picked = draw(names, np.array(weights), count, np.random.default_rng(seed))
    assert len(picked) == count
    assert all(weights[names.index(n)] > 0 for n in picked)


@given(st.lists(st.one_of(st.just(0.0), st.floats(1e-3, 10)), min_size=1, max_size=8).filter(any), st.integers(0, 2**32 - 1))
def test_draw_makes_the_picks_rng_choice_makes(weights, seed):
    """Same uniforms, same inverse CDF: runs seeded before the faster sampler draw the same opponents."""
    weights = np.array(weights)
    expected = np.random.default_rng(seed).choice(len(weights), size=20, p=weights / weights.sum())
    assert draw(list(range(len(weights))), weights, 20, np.random.default_rng(seed)) == expected.tolist()


def test_draw_frequencies_follow_the_weights():
    """Inverse-CDF sampling has the distribution rng.choice(p=...) has: a χ² test at a fixed seed."""
    weights = np.array([0.0, 1.0, 2.0, 0.0, 5.0, 2.0])
    picked = draw(list(range(6)), weights, 20_000, np.random.default_rng(0))
    observed = np.bincount(picked, minlength=6)
    expected = 20_000 * weights / weights.sum()
    assert observed[weights == 0].sum() == 0
    chi2 = (((observed - expected) ** 2)[weights > 0] / expected[weights > 0]).sum()
    assert chi2 < 11.3  # χ²(3 dof) at p = 0.01


def test_a_uniform_that_rounds_up_to_the_total_still_lands_on_the_last_candidate():
    class Top:  # a generator whose uniforms are the largest double below 1
        def random(self, n):
            return np.full(n, np.nextafter(1.0, 0.0))

    assert draw(["a", "b", "c"], np.array([0.1, 0.2, 0.3]), 3, Top()) == ["c"] * 3


def test_win_rate_table_reads_the_payoffs_while_planning_and_not():
    pop = population(matchmaker="pfsp", size=2)
    for it in (0, 5):
        pop.take_snapshot("m0", it)
    play(pop, "m0", "m0@0", wins=3, losses=1)
    play(pop, "m1", "m0@5", wins=1, losses=4)
    candidates = ["m0@5", "m0@0", "m1"]
    expected = [[pop.payoffs.win_rate(a, c) for c in candidates] for a in ("m0", "m1")]
    np.testing.assert_allclose(pop.win_rate_table(["m0", "m1"], candidates), expected)
    seen = []
    pop.matchmaker.opponents = lambda p, learners, counts, rng: seen.append(
        (p.win_rate_table(learners, candidates), p.win_rate_table(learners, p.historical()))
    ) or [[p.historical()[0]] * c for c in counts]  # fmt: skip
    pop.plans(1, 4, GAMES, SEATS)
    np.testing.assert_allclose(seen[0][0], expected)
    np.testing.assert_allclose(seen[0][1], [[pop.payoffs.win_rate(a, h) for h in pop.historical()] for a in ("m0", "m1")])


def test_self_play_plays_the_latest_against_itself_in_both_seats():
    pop = population(matchmaker="self_play")
    plans = pop.plans(1, 8, GAMES, SEATS)
    assert all(set(p.seats.values()) == {"m0"} for p in plans)
    assert len({p.seed for p in plans}) == 8


def test_fictitious_draws_uniformly_from_past_snapshots_and_seats_alternate():
    pop = population(matchmaker="fictitious")
    for it in (0, 5, 10):
        pop.take_snapshot("m0", it)
    plans = pop.plans(1, 600, GAMES, SEATS)
    opponents = [next(n for n in p.seats.values() if n != "m0") for p in plans]
    counts = {s: opponents.count(s) for s in pop.snapshot_names()}
    assert set(counts) == {"m0@0", "m0@5", "m0@10"} and min(counts.values()) > 150
    assert sum(p.seats["player_0"] == "m0" for p in plans) == 300  # the learner in each seat half the time


def test_pfsp_meets_the_opponents_the_learner_loses_to_more_often():
    pop = population(matchmaker="pfsp", pfsp_weighting="squared")
    for it in (0, 5):
        pop.take_snapshot("m0", it)
    play(pop, "m0", "m0@0", wins=9, losses=1)  # x = 0.9 -> 0.01
    play(pop, "m0", "m0@5", wins=1, losses=9)  # x = 0.1 -> 0.81
    plans = pop.plans(1, 400, GAMES, SEATS)
    hard = sum("m0@5" in p.seats.values() for p in plans) / 400
    assert hard == pytest.approx(0.81 / 0.82, abs=0.03)


def test_pfsp_plays_its_self_play_share_against_the_learner_itself_and_the_rest_by_pfsp():
    pop = population(matchmaker="pfsp", pfsp_weighting="squared", pfsp_self_play=0.35)
    for it in (0, 5):
        pop.take_snapshot("m0", it)
    play(pop, "m0", "m0@0", wins=9, losses=1)
    play(pop, "m0", "m0@5", wins=1, losses=9)
    plans = pop.plans(1, 2000, GAMES, SEATS)
    mirrored = [p for p in plans if set(p.seats.values()) == {"m0"}]  # both seats the learner: both learn
    assert len(mirrored) / 2000 == pytest.approx(0.35, abs=0.03)
    rest = [p for p in plans if p not in mirrored]
    assert sum("m0@5" in p.seats.values() for p in rest) / len(rest) == pytest.approx(0.81 / 0.82, abs=0.03)
    assert population(matchmaker="pfsp").config.pfsp_self_play == 0  # PFSP alone unless asked


@dataclass
class StandIn:
    """The part of a ``PopulationView`` that PFSP reads: the historical players and win rates."""

    rates: dict[str, float]  # the learner's win rate against each historical player
    members: dict = field(default_factory=lambda: {"m0": SimpleNamespace(kind="main", matches_since_snapshot=0)})

    def historical(self) -> list[str]:
        return list(self.rates)

    def win_rate_table(self, players, candidates) -> np.ndarray:
        return np.array([[self.rates[c] for c in candidates] for _ in players])


def test_a_matchmaker_needs_only_the_population_view():
    opponents = PFSP("squared").opponents(StandIn({"easy": 0.9, "hard": 0.1}), ["m0"], [400], np.random.default_rng(0))
    assert opponents[0].count("hard") / 400 == pytest.approx(0.81 / 0.82, abs=0.03)


def test_skill_matching_prefers_an_even_opponent():
    pop = population(matchmaker="skill")
    for it in (0, 5):
        pop.take_snapshot("m0", it)
    play(pop, "m0", "m0@0", wins=30, losses=0)  # far weaker now
    play(pop, "m0", "m0@5", wins=5, losses=5)
    plans = pop.plans(1, 200, GAMES, SEATS)
    assert sum("m0@5" in p.seats.values() for p in plans) > 150


def transitive_snapshots(pop: Population) -> None:
    """Snapshots @0, @5 and @10, each pair played: @10 beats @5 beats @0."""
    for it in (0, 5, 10):
        pop.take_snapshot("m0", it)
    play(pop, "m0@10", "m0@5", wins=8, losses=2)
    play(pop, "m0@10", "m0@0", wins=9, losses=1)
    play(pop, "m0@5", "m0@0", wins=8, losses=2)


def test_psro_draws_opponents_from_the_nash_of_the_payoff_matrix():
    pop = population(matchmaker="psro", meta_solver="nash")
    transitive_snapshots(pop)  # a transitive meta-game, so the Nash is all on @10
    pop.begin_iteration()
    assert pop.meta_strategy()["m0@10"] == pytest.approx(1)
    assert all("m0@10" in p.seats.values() for p in pop.plans(1, 20, GAMES, SEATS))


def test_evaluation_plans_go_to_unplayed_pairs_first():
    pop = population(matchmaker="fictitious")
    for it in (0, 5):
        pop.take_snapshot("m0", it)
    play(pop, "m0@0", "m0@5", wins=50, losses=0)
    pairs = {frozenset(p.seats.values()) for p in pop.evaluation_plans(1, 2, GAMES, SEATS)}
    assert pairs == {frozenset({"m0", "m0@0"}), frozenset({"m0", "m0@5"})}


# ---- results and state ---------------------------------------------------------------------------


def test_results_update_payoffs_per_seat_pair_elo_and_openskill():
    pop = population(matchmaker="fictitious")
    pop.take_snapshot("m0", 0)
    pop.record([result("m0", "m0@0", 1.0), result("m0@0", "m0", 2.0)])
    assert pop.payoffs.games("m0", "m0@0") == 2
    assert pop.payoffs.mean("m0", "m0@0", ("player_0", "player_1")) == 1.0
    assert pop.payoffs.mean("m0", "m0@0", ("player_1", "player_0")) == -2.0
    assert pop.elo["m0"] == pytest.approx(1000.0, abs=1.5)  # one win, one loss against an equal
    assert pop.members["m0"].matches_since_snapshot == 2
    pop.record([result("m0", "m0", 1.0)])  # self-play: the clock runs, ratings do not move
    assert pop.members["m0"].matches_since_snapshot == 3 and pop.payoffs.games("m0", "m0@0") == 2


def test_ratings_rank_a_transitive_population_every_way():
    pop = population(matchmaker="fictitious")
    for it in (0, 5):
        pop.take_snapshot("m0", it)
    play(pop, "m0", "m0@5", wins=7, losses=3)  # m0 > m0@5 > m0@0
    play(pop, "m0", "m0@0", wins=9, losses=1)
    play(pop, "m0@5", "m0@0", wins=7, losses=3)
    rows = {r["player"]: r for r in pop.ratings()}
    for column in ("elo", "bradley_terry", "mu", "ordinal"):
        assert rows["m0"][column] > rows["m0@5"][column] > rows["m0@0"][column], column
    # the Nash of a transitive game is its top player: it scores 0, the others below
    assert rows["m0"]["nash_average"] == pytest.approx(0, abs=1e-6)
    assert rows["m0@0"]["nash_average"] < rows["m0@5"]["nash_average"] < 0


def test_population_state_round_trips_through_json():
    pop = population(matchmaker="pfsp", size=2, opponents=[])
    pop.take_snapshot("m0", 0)
    pop.take_snapshot("m1", 0)
    play(pop, "m0", "m1@0", wins=3, losses=1)
    pop.begin_iteration()
    state = json.loads(json.dumps(pop.state_dict()))
    other = population(matchmaker="pfsp", size=2)
    other.load_state_dict(state)
    assert other.state_dict() == pop.state_dict()
    assert other.plans(3, 16, GAMES, SEATS) == pop.plans(3, 16, GAMES, SEATS)
    # members and snapshots as dataclasses.asdict has them, their dicts copies, not the live ones
    saved = pop.state_dict()
    assert saved["members"] == [asdict(m) for m in pop.members.values()]
    assert saved["snapshots"] == [asdict(s) for s in pop.snapshots.values()]
    saved["members"][0]["hparams"]["lr"] = -1.0
    assert pop.members["m0"].hparams.get("lr") != -1.0


# ---- lineage -------------------------------------------------------------------------------------


def test_lineage_records_snapshots_and_a_pbt_copy_and_exports_graphml(tmp_path):
    pop = population(matchmaker="fictitious", size=2)
    for it in (0, 5):
        pop.take_snapshot("m0", it)
        pop.take_snapshot("m1", it)
    pop.restart("m1", "m0@5", 5, "pbt: copied m0; lr ×1.2", {"lr": 1.2e-3, "entropy_coef": 0.1})
    pop.take_snapshot("m1", 10)
    lineage = pop.lineage
    assert lineage.ancestors("m1") == ["m1@10", "m0@5", "m0@0"]
    assert lineage.change("m0@5", "m1@10") == "pbt: copied m0; lr ×1.2; then snapshot"
    assert lineage.graph.nodes["m1"]["hparams"]["lr"] == 1.2e-3
    lineage.write_graphml(tmp_path / "lineage.graphml")
    read = nx.read_graphml(tmp_path / "lineage.graphml")
    assert set(read.nodes) == set(lineage.graph.nodes) and read.edges["m0@5", "m1@10"]["iteration"] == 10
    again = Lineage()
    again.load_state_dict(json.loads(json.dumps(lineage.state_dict())))
    assert nx.utils.graphs_equal(again.graph, lineage.graph)


# ---- the AlphaStar league --------------------------------------------------------------------------


def test_remove_monotonic_suffix_keeps_up_to_the_last_rise():
    assert remove_monotonic_suffix([0.5, 0.9, 0.6, 0.4], list("abcd")) == ([0.5, 0.9], ["a", "b"])
    assert remove_monotonic_suffix([0.9, 0.8, 0.7], list("abc")) == ([], [])
    assert remove_monotonic_suffix([0.2, 0.4], list("ab")) == ([0.2, 0.4], ["a", "b"])
    assert remove_monotonic_suffix([], []) == ([], [])


def league(**rules) -> Population:
    config = LeagueConfig(main_agents=1, main_exploiters=1, league_exploiters=1, min_matches=10, max_matches=40, **rules)
    pop = population(matchmaker="league", league=config)
    for name in list(pop.members):
        pop.take_snapshot(name, 0)
    return pop


def test_league_members_and_their_opponents():
    pop = league()
    assert {n: m.kind for n, m in pop.members.items()} == {
        "main_0": "main", "main_exploiter_0": "main_exploiter", "league_exploiter_0": "league_exploiter"
    }  # fmt: skip
    rng = np.random.default_rng(0)
    # a main exploiter plays the main agent while it can beat it more than 10% of the time...
    assert {pop.matchmaker.opponent(pop, "main_exploiter_0", rng) for _ in range(20)} == {"main_0"}
    # ...and otherwise a snapshot of the main agent, as a curriculum
    play(pop, "main_exploiter_0", "main_0", wins=0, losses=20)
    assert {pop.matchmaker.opponent(pop, "main_exploiter_0", rng) for _ in range(20)} == {"main_0@0"}
    # league exploiters play historical snapshots only
    picks = {pop.matchmaker.opponent(pop, "league_exploiter_0", rng) for _ in range(50)}
    assert picks <= set(pop.snapshot_names())


def test_main_agent_branches_have_alphastars_proportions():
    pop = league()
    rng = np.random.default_rng(1)
    picks = [pop.matchmaker.opponent(pop, "main_0", rng) for _ in range(4000)]
    # 50% PFSP over the historical snapshots, the rest self-play against the (only) main agent;
    # verification finds nothing yet: no exploiter beats it, its history shows no forgetting
    assert picks.count("main_0") / 4000 == pytest.approx(0.5, abs=0.03)
    # an exploiter snapshot that still beats it is verified in 15% of matches (plus its PFSP share)
    play(pop, "main_0", "main_exploiter_0@0", wins=1, losses=9)
    picks = [pop.matchmaker.opponent(pop, "main_0", rng) for _ in range(4000)]
    assert picks.count("main_0") / 4000 == pytest.approx(0.35, abs=0.03)


def test_league_checkpoint_and_reset_rules_on_a_scripted_schedule():
    pop = league()
    rng = np.random.default_rng(0)
    schedule = []
    for iteration in range(1, 9):
        # the main agent beats everything; the main exploiter beats the main agent;
        # the league exploiter wins nothing
        for snap in pop.snapshot_names():
            play(pop, "main_0", snap, wins=4, losses=0)
            play(pop, "league_exploiter_0", snap, wins=0, losses=1)
        play(pop, "main_exploiter_0", "main_0", wins=6, losses=0)
        decisions = pop.matchmaker.checkpoints(pop, rng)
        for d in decisions:
            pop.take_snapshot(d.member, iteration)
        schedule.append((iteration, sorted(d.member for d in decisions), [d for d in decisions if d.reset]))
    by_iteration = {it: names for it, names, _ in schedule}
    # min_matches = 10: main_0 plays >= 4 per snapshot (3 at first) -> ready from iteration 1 on, each time
    # its win rate against all historical players exceeds 0.7
    assert "main_0" in by_iteration[1]
    # the main exploiter reaches 10 matches every second iteration, beating the main agent > 70%
    assert [it for it, names in by_iteration.items() if "main_exploiter_0" in names] == [2, 4, 6, 8]
    # the league exploiter never wins: it checkpoints only once past max_matches (40)
    first = next(it for it, names in by_iteration.items() if "league_exploiter_0" in names)
    assert pop.snapshots[f"league_exploiter_0@{first}"].iteration == first
    assert all(Checkpoint("main_exploiter_0", True) in resets for it, names, resets in schedule if it in (2, 4, 6, 8))
    assert not any(d.member == "main_0" for _, _, resets in schedule for d in resets)  # mains never reset


def test_league_exploiters_reset_a_quarter_of_the_time():
    pop = league()
    rng = np.random.default_rng(0)
    pop.members["league_exploiter_0"].matches_since_snapshot = 100  # past max_matches: always ready
    resets = [
        d.reset for _ in range(2000) for d in pop.matchmaker.checkpoints(pop, rng) if d.member == "league_exploiter_0"
    ]
    assert len(resets) == 2000 and np.mean(resets) == pytest.approx(0.25, abs=0.03)


# ---- PBT -----------------------------------------------------------------------------------------


def test_pbt_bottom_quantile_copies_the_top_and_perturbs():
    config = PBTConfig(every=1, resample_probability=0.0, ranges={"lr": (1e-5, 1.0)})
    fitness = {f"m{i}": float(i) for i in range(8)}  # m0 worst ... m7 best
    hparams = {name: {"lr": 0.01 * (i + 1)} for i, name in enumerate(fitness)}
    decisions = exploit_and_explore(fitness, hparams, config, np.random.default_rng(0))
    assert sorted(d.member for d in decisions) == ["m0", "m1"]  # 0.25 of 8
    for d in decisions:
        assert d.donor in ("m6", "m7")
        ratio = d.hparams["lr"] / hparams[d.donor]["lr"]
        assert ratio == pytest.approx(0.8) or ratio == pytest.approx(1.2)
        assert d.change.startswith(f"pbt: copied {d.donor}; lr ×")


def test_pbt_resamples_within_range_and_needs_two_members():
    config = PBTConfig(every=1, resample_probability=1.0, ranges={"lr": (1e-4, 1e-3)})
    decisions = exploit_and_explore({"a": 0.0, "b": 1.0}, {"a": {"lr": 5e-4}, "b": {"lr": 5e-4}}, config, np.random.default_rng(3))
    assert [d.member for d in decisions] == ["a"] and 1e-4 <= decisions[0].hparams["lr"] <= 1e-3
    assert "lr resampled" in decisions[0].change
    assert exploit_and_explore({"a": 0.0}, {"a": {"lr": 5e-4}}, config, np.random.default_rng(3)) == []
    with pytest.raises(ValueError, match="ranges.lr"):
        PBTConfig(ranges={"lr": (0.0, 1.0)})


def test_fixed_members_are_historical_players_and_never_learners():
    pop = population(matchmaker="fictitious", opponents=["nash", "random"])
    assert pop.learners() == ["m0"] and pop.historical() == ["nash", "random"]
    pop.take_snapshot("m0", 0)
    opponents = {n for p in pop.plans(1, 60, GAMES, SEATS) for n in p.seats.values()} - {"m0"}
    assert opponents == {"m0@0", "nash", "random"}


@pytest.mark.parametrize("solver", ["nash", "prd", "alpharank"])
def test_a_snapshot_enters_the_meta_game_once_it_has_met_every_other(solver):
    pop = population(matchmaker="psro", meta_solver=solver)
    transitive_snapshots(pop)
    pop.begin_iteration()
    before = pop.meta_strategy()
    pop.take_snapshot("m0", 15)  # has met nobody: its pairs are not draws, they are unknown
    pop.begin_iteration()
    assert pop.meta_strategy() == {**before, "m0@15": 0.0}
    play(pop, "m0@15", "m0@10", wins=9, losses=1)
    pop.begin_iteration()
    assert pop.meta_strategy()["m0@15"] == 0.0  # still unplayed against @0 and @5
    play(pop, "m0@15", "m0@5", wins=9, losses=1)
    play(pop, "m0@15", "m0@0", wins=9, losses=1)
    pop.begin_iteration()
    assert pop.meta_strategy()["m0@15"] > 0.5
