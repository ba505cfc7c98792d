"""Plots: every figure draws on the runs it applies to, and the maths behind them gives known values."""

import io
import xml.etree.ElementTree as ET
from fractions import Fraction

import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

from analysis import plots
from analysis.load import METRIC_COLUMNS, PAYOFF_COLUMNS, load_run, load_sweep
from games.kuhn_analysis import INFOSETS, THIRD, nash
from roles.graph import builtin
from tests.runs import events

KUHN = {"learning_curves", "outcomes", "kuhn_strategy", "collapse"}
POPULATION = {"learning_curves", "ratings", "payoffs", "kuhn_strategy", "collapse", "lineage"}


def drawn(fig: Figure) -> Figure:
    """Render the figure for real (some errors only show when drawing) and return it."""
    fig.savefig(io.BytesIO(), format="png", dpi=40)
    return fig


def metrics(rows: list[tuple]) -> pd.DataFrame:
    """A metrics frame from (run_id, iteration, metric, value) rows."""
    return pd.DataFrame([(r, i, "iteration", m, v) for r, i, m, v in rows], columns=METRIC_COLUMNS)


def payoffs(cells: dict[tuple[str, str], tuple[int, int, int]], roles=("player_0", "player_1")) -> pd.DataFrame:
    """A payoff table from {(a, b): (wins, draws, losses)}, with both sides of every match as payoffs.csv has."""
    rows = []
    for (a, b), (w, d, l) in cells.items():
        rows.append(("run", *roles, a, b, w + d + l, w, d, l, np.nan, np.nan, np.nan))
        rows.append(("run", *roles[::-1], b, a, w + d + l, l, d, w, np.nan, np.nan, np.nan))
    return pd.DataFrame(rows, columns=PAYOFF_COLUMNS)


# ---- run_figures, sweep_figures and save_figure on real runs -----------------------------------


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("kuhn_run", KUHN),
        ("killed_run", {"learning_curves", "kuhn_strategy", "collapse"}),  # no evaluation before the kill
        ("tictactoe_run", {"learning_curves", "collapse", "opening_moves"}),
        ("population_run", POPULATION),
        ("forge_run", {"learning_curves", "curriculum"}),  # scripted roles log no tokens or gradients
        ("graph_run", {"learning_curves", "collapse", "graph"}),
    ],
)
@pytest.mark.filterwarnings("ignore:.*not complete JSON")  # the killed run's half-written line
def test_run_figures_draws_exactly_the_plots_a_run_has_data_for(fixture, expected, request):
    figures = plots.run_figures(load_run(request.getfixturevalue(fixture)))
    assert set(figures) == expected
    for slug, fig in figures.items():
        assert isinstance(fig, Figure) and fig.get_suptitle(), slug
        drawn(fig)
    assert plt.get_fignums() == []  # built without pyplot: nothing left open


def test_an_empty_run_directory_has_no_figures(tmp_path):
    (tmp_path / "config.toml").write_text("iterations = 3\n")
    assert plots.run_figures(load_run(tmp_path)) == {}


def test_sweep_figures_compare_the_matchmakers(sweep_dir):
    sweep = load_sweep(sweep_dir)
    figures = plots.sweep_figures(sweep)
    assert set(figures) == {"learning_curves", "comparison"}
    for fig in figures.values():
        drawn(fig)
    (curves,) = figures["learning_curves"].axes
    assert sorted(line.get_label() for line in curves.get_lines()) == ["matchmaker=fictitious", "matchmaker=self_play"]
    assert "mean ± 1 std over the seeds" in figures["comparison"].axes[0].get_title(), "error bars say what they are"
    assert len(curves.collections) == 2  # a seed band per matchmaker


def test_save_figure_writes_a_valid_png_and_svg(kuhn_run, tmp_path):
    fig = plots.run_figures(load_run(kuhn_run))["kuhn_strategy"]
    paths = plots.save_figure(fig, tmp_path / "figures" / "kuhn_strategy")
    assert paths == [tmp_path / "figures" / "kuhn_strategy.png", tmp_path / "figures" / "kuhn_strategy.svg"]
    png, svg = paths
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(png)
    assert pixels.ndim == 3 and pixels.shape[2] in (3, 4) and min(pixels.shape[:2]) > 100
    assert pixels.std() > 0  # not a blank canvas
    assert ET.parse(svg).getroot().tag == "{http://www.w3.org/2000/svg}svg"


@pytest.mark.parametrize(
    "plot",
    [
        lambda run: plots.learning_curves(run.metrics, "kuhn/exploitability"),
        lambda run: plots.outcomes_vs_opponents(run.metrics),
        lambda run: plots.rating_trajectories(run.rating_history),
        lambda run: plots.payoff_heatmap(run.payoffs),
        lambda run: plots.kuhn_strategy(run.strategies),
        lambda run: plots.opening_moves(run.turns),
        lambda run: plots.collapse_signals(run.metrics),
        lambda run: plots.curriculum(run.metrics, run.episodes),
        lambda run: plots.lineage(run.lineage_graph),
        lambda run: plots.graph_nodes(plots.graph_of(run.config), run.metrics),
    ],
)
def test_every_plot_refuses_a_run_without_its_data(plot, tmp_path):
    (tmp_path / "config.toml").write_text("")
    with pytest.raises(plots.NoData):
        plot(load_run(tmp_path))


# ---- learning curves and sweep comparison ------------------------------------------------------


def test_bands_average_runs_per_iteration_and_span_their_min_and_max():
    frame = metrics(
        [("a", 1, "x", 1.0), ("a", 1, "x", 3.0), ("b", 1, "x", 4.0), ("a", 2, "x", 5.0), ("a", 2, "y", 9.0)]
    )
    bands = plots.metric_bands(frame, "x")
    # run a logged x twice at iteration 1: its mean (2) counts once, next to run b's 4
    assert bands.to_dict("records") == [
        {"group": "all", "iteration": 1, "mean": 3.0, "lo": 2.0, "hi": 4.0, "runs": 2},
        {"group": "all", "iteration": 2, "mean": 5.0, "lo": 5.0, "hi": 5.0, "runs": 1},
    ]


def test_bands_group_by_settings():
    frame = metrics([("a", 1, "x", 1.0), ("b", 1, "x", 3.0), ("c", 1, "x", 10.0)])
    frame["population.matchmaker"] = ["psro", "psro", "pfsp"]
    frame["seed"] = [0, 1, 0]
    bands = plots.metric_bands(frame, "x", "population.matchmaker").set_index("group")
    assert bands.loc["matchmaker=psro", ["mean", "lo", "hi", "runs"]].tolist() == [2.0, 1.0, 3.0, 2]
    assert bands.loc["matchmaker=pfsp", "mean"] == 10.0
    both = plots.metric_bands(frame, "x", ["population.matchmaker", "seed"])
    assert set(both["group"]) == {"matchmaker=psro, seed=0", "matchmaker=psro, seed=1", "matchmaker=pfsp, seed=0"}


def test_a_single_run_learning_curve_has_one_line_and_no_band(kuhn_run):
    (ax,) = plots.learning_curves(load_run(kuhn_run).metrics, "kuhn/exploitability").axes
    (line,) = ax.get_lines()
    assert list(line.get_xdata()) == [0, 1, 2, 3] and not ax.collections


def test_final_values_are_the_last_iteration_of_each_run():
    frame = metrics([("a", 3, "x", 30.0), ("a", 1, "x", 10.0), ("b", 2, "x", 2.0), ("b", 1, "y", 7.0)])
    frame["size"] = [1, 1, 2, 2]
    final = plots.final_by_setting(frame, "x", ["size"])
    assert final.to_dict("records") == [
        {"run_id": "b", "size": 2, "iteration": 2, "value": 2.0},
        {"run_id": "a", "size": 1, "iteration": 3, "value": 30.0},
    ]


def test_final_values_agree_with_the_sweep_results_table(sweep_dir):
    sweep = load_sweep(sweep_dir)
    metric = "kuhn/population_exploitability"
    final = plots.final_by_setting(sweep.metrics, metric, ["run", "population.matchmaker"]).set_index("run")
    results = sweep.results.set_index("run")
    assert len(final) == 4
    np.testing.assert_allclose(final["value"], results.loc[final.index, metric])
    assert (final["population.matchmaker"] == results.loc[final.index, "population.matchmaker"]).all()


def test_the_sweep_comparison_puts_a_point_per_seed_and_the_mean(sweep_dir):
    sweep = load_sweep(sweep_dir)
    metric = "kuhn/population_exploitability"
    (ax,) = drawn(plots.sweep_comparison(sweep.metrics, metric, "seed", "population.matchmaker")).axes
    points = np.concatenate([c.get_offsets()[:, 1] for c in ax.collections if isinstance(c, PathCollection)])
    final = plots.final_by_setting(sweep.metrics, metric, [])
    np.testing.assert_allclose(sorted(points), sorted(final["value"]))


# ---- outcomes, ratings, collapse signals -------------------------------------------------------


def test_outcomes_against_each_opponent_sum_to_one(kuhn_run):
    outcomes = plots.opponent_outcomes(load_run(kuhn_run).metrics)
    assert set(outcomes["game"]) == {"kuhn_poker"} and {"random", "nash"} <= set(outcomes["opponent"])
    assert sorted(outcomes["iteration"].unique()) == [1, 2, 3]
    np.testing.assert_allclose(outcomes[["win", "draw", "loss"]].sum(axis=1), 1.0)


def test_outcome_and_collapse_metric_names_are_parsed():
    names = [
        "eval/kuhn_poker/past:10/win", "eval/kuhn_poker/past:10/loss", "eval/executor/heldout_accuracy",
        "kuhn_poker/player_0/response_tokens", "m0/kuhn_poker/player_1/invalid_rate", "policy/grad_norm",
        "m0/policy/grad_norm", "executor/response_tokens", "forge/invalid_answer_rate", "kuhn_poker/player_0/win",
    ]  # fmt: skip
    frame = metrics([("r", 1, name, 0.5) for name in names])
    outcomes = plots.opponent_outcomes(frame)
    assert outcomes[["game", "opponent", "win", "draw", "loss"]].values.tolist() == [
        ["kuhn_poker", "past:10", 0.5, 0.0, 0.5]
    ]
    series = plots.collapse_series(frame)
    assert sorted(zip(series["signal"], series["series"], strict=True)) == [
        ("grad_norm", "m0/policy"), ("grad_norm", "policy"), ("invalid_rate", "m0/kuhn_poker/player_1"),
        ("response_tokens", "executor"), ("response_tokens", "kuhn_poker/player_0"),
    ]  # fmt: skip


def test_rating_trajectories_draw_a_line_per_member(population_run):
    (ax,) = plots.rating_trajectories(load_run(population_run).rating_history).axes
    assert [line.get_label() for line in ax.get_lines()] == ["m0", "m1"]


# ---- payoffs and the Nash mixture --------------------------------------------------------------


def test_win_rates_sum_both_seatings_and_count_draws_half():
    table = pd.concat([
        payoffs({("a", "b"): (3, 0, 1)}),  # a wins 3 of 4 as the first player
        payoffs({("b", "a"): (1, 2, 1)}),  # as the second player a wins 1, draws 2, loses 1
    ])  # fmt: skip
    rates = plots.win_rate_matrix(table)
    assert list(rates.index) == list(rates.columns) == ["a", "b"]
    assert rates.loc["a", "b"] == pytest.approx((3 + 1 + 0.5 * 2) / 8)
    assert rates.loc["b", "a"] == pytest.approx(1 - rates.loc["a", "b"])
    assert np.isnan(rates.loc["a", "a"])  # never met itself


def test_players_are_ordered_members_then_their_snapshots_live_last():
    table = payoffs({("m1", "m0@10"): (1, 0, 0), ("m0@2", "m0"): (1, 0, 0), ("m0@10", "m0@2"): (0, 0, 1)})
    assert list(plots.win_rate_matrix(table).index) == ["m0@2", "m0@10", "m0", "m1"]


def test_the_nash_mixture_of_rock_paper_scissors_is_uniform():
    rps = payoffs({("rock", "scissors"): (10, 0, 0), ("scissors", "paper"): (10, 0, 0), ("paper", "rock"): (10, 0, 0)})
    rates = plots.win_rate_matrix(rps)
    assert rates.loc["rock", "scissors"] == 1 and rates.loc["scissors", "rock"] == 0
    np.testing.assert_allclose(plots.nash_mixture(rates), [1 / 3] * 3, atol=1e-6)


def test_the_nash_mixture_puts_everything_on_a_dominant_player():
    table = payoffs({("ace", "b"): (9, 0, 1), ("ace", "c"): (8, 0, 2), ("b", "c"): (5, 0, 5)})
    mixture = plots.nash_mixture(plots.win_rate_matrix(table))
    np.testing.assert_allclose(mixture.loc[["ace", "b", "c"]], [1, 0, 0], atol=1e-6)


def test_the_payoff_heatmap_shows_the_mixture_beside_it(population_run):
    run = load_run(population_run)
    fig = drawn(plots.payoff_heatmap(run.payoffs))
    bars = fig.axes[1]  # beside the heatmap
    mixture = plots.nash_mixture(plots.win_rate_matrix(run.payoffs))
    np.testing.assert_allclose([p.get_width() for p in bars.patches], mixture)
    assert mixture.sum() == pytest.approx(1)


# ---- Kuhn strategy -----------------------------------------------------------------------------

# nash(α) for α ∈ [0, 1/3] (https://en.wikipedia.org/wiki/Kuhn_poker): (low, high) and why
EQUILIBRIUM_RANGE = {
    "J": (0, 1 / 3),  # first player bluffs J with α
    "Q": (0, 0),  # never bets Q
    "K": (0, 1),  # bets K with 3α
    "Jcb": (0, 0),  # never calls with J after check-bet
    "Qcb": (1 / 3, 2 / 3),  # calls with Q with α + 1/3
    "Kcb": (1, 1),  # always calls with K
    "Jc": (1 / 3, 1 / 3),  # second player bluffs J after a check with 1/3, whatever α
    "Qc": (0, 0),  # checks Q behind
    "Kc": (1, 1),  # always bets K
    "Jb": (0, 0),  # folds J to a bet
    "Qb": (1 / 3, 1 / 3),  # calls with Q exactly 1/3, whatever α
    "Kb": (1, 1),  # always calls with K
}


def test_the_equilibrium_range_matches_kuhns_family():
    table = plots.kuhn_equilibrium_range()
    assert sorted(table.index) == sorted(INFOSETS)
    for infoset, (low, high) in EQUILIBRIUM_RANGE.items():
        assert table.loc[infoset].tolist() == pytest.approx([low, high]), infoset


def test_every_equilibrium_lies_in_the_range_and_its_ends_are_reached():
    table = plots.kuhn_equilibrium_range()
    family = [nash(Fraction(k, 30) * THIRD) for k in range(31)]
    for infoset in INFOSETS:
        values = [float(s[infoset]) for s in family]
        assert [min(values), max(values)] == pytest.approx(table.loc[infoset].tolist()), infoset


def test_the_kuhn_plot_marks_the_latest_learned_probabilities(kuhn_run):
    strategies = load_run(kuhn_run).strategies
    fig = drawn(plots.kuhn_strategy(strategies, trajectory=False))
    latest = strategies[strategies["iteration"] == strategies["iteration"].max()].set_index("infoset")["probability"]
    opening = fig.axes[0]  # J, Q, K
    (points,) = [c for c in opening.collections if isinstance(c, PathCollection)]
    np.testing.assert_allclose(points.get_offsets()[:, 1], latest.loc[["J", "Q", "K"]])
    assert [t.get_text() for t in opening.get_xticklabels()] == ["J", "Q", "K"]


# ---- tic-tac-toe openings ----------------------------------------------------------------------


def test_opening_shares_count_the_first_valid_move_of_each_match():
    turns = pd.DataFrame(
        [
            (1, "m0", 0, "b2", True), (1, "m0", 1, "a1", True),
            (1, "m1", 0, None, False), (1, "m1", 1, "a1", True), (1, "m1", 2, "b2", True),  # a1: the retry
            (2, "m0", 1, "c3", True), (2, "m0", 0, "b2", True),  # out of order: index decides
        ],
        columns=["iteration", "match_id", "index", "move", "valid"],
    ).assign(game="tictactoe")  # fmt: skip
    shares = plots.opening_move_shares(turns)
    assert shares.to_dict("index") == {1: {"a1": 0.5, "b2": 0.5}, 2: {"a1": 0.0, "b2": 1.0}}


def test_opening_shares_of_a_real_run_sum_to_one(tictactoe_run):
    run = load_run(tictactoe_run)
    shares = plots.opening_move_shares(run.turns)
    np.testing.assert_allclose(shares.sum(axis=1), 1.0)
    assert list(shares.index) == sorted(run.episodes.query("game == 'tictactoe'")["iteration"].unique())
    valid = run.turns[(run.turns["game"] == "tictactoe") & run.turns["valid"].astype(bool)]
    opened = valid.groupby("iteration")["match_id"].nunique()  # a match forfeited at once has no opening
    counts = shares.mul(opened, axis=0).to_numpy()
    np.testing.assert_allclose(counts, np.round(counts), atol=1e-9)  # whole matches per cell
    assert set(shares.columns) <= {f"{c}{r}" for c in "abc" for r in "123"}


# ---- curriculum and lineage --------------------------------------------------------------------


def test_the_curriculum_shades_the_learning_band_and_shows_every_task(forge_run):
    run = load_run(forge_run)
    (ax,) = drawn(plots.curriculum(run.metrics, run.episodes)).axes
    band = next(p for p in ax.patches if p.get_label().startswith("learning band"))
    assert band.get_y() == pytest.approx(0.3) and band.get_y() + band.get_height() == pytest.approx(0.8)
    (tasks,) = [c for c in ax.collections if c.get_label() == "p̂ per task"]
    assert len(tasks.get_offsets()) == run.episodes["outcome.p_hat"].notna().sum()
    assert {line.get_label() for line in ax.get_lines()} >= {"proposed difficulty", "executor success p̂ (mean)"}


def test_the_lineage_lays_snapshots_out_by_iteration_and_members_by_row(population_run):
    graph = load_run(population_run).lineage_graph
    positions = plots.lineage_layout(graph)
    assert set(positions) == set(graph.nodes)
    rows = {"m0": 0.0, "m1": 1.0}
    for node, (x, y) in positions.items():
        member = graph.nodes[node].get("member", node)
        assert y == rows[member]
        assert x == (graph.nodes[node]["iteration"] if "@" in node else 4)  # live heads right of iteration 3


GAME_RUNS = {  # a run's metrics as the trainer names them, per game; the curve must show the one that moved
    "tictactoe, forced choice, with evaluation": (
        {"rollout/invalid_rate": [0.0, 0.0, 0.0], "eval/tictactoe/minimax/win": [0.0, 0.1, 0.2],
         "eval/tictactoe/random/win": [0.5, 0.6, 0.8], "tictactoe/player_0/return": [0.1, 0.3, 0.2]},
        "eval/tictactoe/minimax/win",
    ),
    "leduc, no evaluation": (
        {"rollout/invalid_rate": [0.0, 0.0, 0.0], "leduc_holdem/player_0/return": [0.2, -0.1, 0.4]},
        "leduc_holdem/player_0/return",
    ),
    "negotiation, free text": (
        {"rollout/invalid_rate": [1.0, 1.0, 1.0], "simple_negotiation/player_0/return": [-1.0, -0.5, 0.0]},
        "simple_negotiation/player_0/return",
    ),
    "task forge, held-out accuracy still 0": (
        {"eval/executor/heldout_accuracy": [0.0, 0.0, 0.0], "forge/p_hat": [0.1, 0.3, 0.4], "forge/difficulty": [1, 1, 2]},
        "forge/p_hat",
    ),
}  # fmt: skip


@pytest.mark.parametrize("game", list(GAME_RUNS))
def test_the_curves_show_the_most_telling_metric_that_moved(game):
    logged, expected = GAME_RUNS[game]
    frame = metrics([("run", i + 1, name, v) for name, values in logged.items() for i, v in enumerate(values)])
    assert plots.headline_metric(frame) == expected
    still = metrics([("run", i, "rollout/invalid_rate", 0.0) for i in (1, 2)])
    assert plots.headline_metric(still) == "rollout/invalid_rate", "when nothing moved: the most telling"


def test_real_runs_curves_show_a_metric_that_moved_and_any_metric_on_request(tictactoe_run, forge_run):
    for folder in (tictactoe_run, forge_run):
        run = load_run(folder)
        chosen = plots.headline_metric(run.metrics)
        assert run.metrics.query("metric == @chosen")["value"].nunique() > 1, chosen
    run = load_run(tictactoe_run)
    assert plots.headline_metric(run.metrics, "policy/entropy") == "policy/entropy"
    with pytest.raises(plots.UnknownMetric, match="no metric 'kuhn/exploitability' was logged; its headline metrics are"):
        plots.headline_metric(run.metrics, "kuhn/exploitability")


def test_curves_say_what_their_bands_are_and_one_point_is_not_a_sliver_of_an_axis():
    two_seeds = metrics([(run, i, "kuhn/exploitability", v) for run, i, v in [("a", 1, 0.3), ("b", 1, 0.2), ("a", 2, 0.1), ("b", 2, 0.15)]])
    [ax] = drawn(plots.learning_curves(two_seeds, "kuhn/exploitability")).axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["mean", "min–max over 2 runs (seeds)"]
    one = metrics([("a", 10, "kuhn/exploitability", 0.3)])
    [ax] = drawn(plots.learning_curves(one, "kuhn/exploitability")).axes
    assert ax.get_xlim() == (0, 11), "iteration 10 alone, on an axis from 0"
    outcomes = metrics([("a", 10, f"eval/kuhn_poker/random/{r}", v) for r, v in (("win", 0.5), ("draw", 0.0), ("loss", 0.5))])
    [ax] = drawn(plots.outcomes_vs_opponents(outcomes)).axes
    assert ax.get_xlim() == (0, 11)


def test_heatmap_cells_show_the_games_behind_each_rate():
    table = payoffs({("m0", "m1"): (3, 0, 1), ("m0", "m0@1"): (20, 0, 0)})
    heat = drawn(plots.payoff_heatmap(table)).axes[0]
    cells = {t.get_text() for t in heat.texts}
    assert {"0.75\n4", "1.00\n20", "0.25\n4", "0.00\n20"} <= cells


# ---- orchestration graphs ----------------------------------------------------------------------


def test_each_node_shows_its_last_iterations_value_invalid_rate_and_length(graph_run):
    run = load_run(graph_run)
    game, spec = plots.graph_of(run.config)
    assert game == "graph/agentflow" and list(spec.nodes) == ["planner", "executor", "verifier", "generator"]
    table = plots.node_metrics(run.metrics, list(spec.nodes))
    last = [e for e in events(graph_run) if e["kind"] == "iteration"][-1]
    for node in spec.nodes:
        assert table.loc[node].tolist()[:3] == [last[f"graph/{node}/{m}"] for m in ("value", "invalid_rate", "response_tokens")]
    assert table["runs"].loc["executor"] == last["graph/executor/python_runs"] and table["runs"].drop("executor").isna().all()
    labels = [t.get_text() for t in plots.graph_nodes((game, spec), run.metrics).axes[0].texts]
    assert f"planner\nvalue {last['graph/planner/value']:.2f}" in "\n".join(labels)
    assert "rejected ≤2 rounds" in labels, "a conditional loop says when and how often"
    forge = [t.get_text() for t in plots.graph_nodes(("graph/task_forge", builtin("task_forge")), run.metrics).axes[0].texts]
    assert "reviser\nby executor" in forge and "retrier\nby executor" in forge


def test_a_custom_graph_is_read_from_the_config_and_a_seat_game_has_none():
    game, spec = plots.graph_of({"graph": {"nodes": {"solver": {"brief": "Solve."}}}, "games": {"graph/custom": 1.0}})
    assert game == "graph/custom" and list(spec.nodes) == ["solver"]
    assert plots.graph_of({"games": {"graph/debate": 1.0}})[0] == "graph/debate"
    with pytest.raises(plots.NoData):
        plots.graph_of({"games": {"kuhn_poker": 1.0}})
