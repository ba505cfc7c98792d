"""Loaders: the frames a run and a sweep give, on finished, killed and empty runs."""

import json

import networkx as nx
import pytest

from analysis.load import (
    EPISODE_COLUMNS, EVENT_COLUMNS, LINEAGE_COLUMNS, METRIC_COLUMNS, PAYOFF_COLUMNS, RATING_COLUMNS,
    STRATEGY_COLUMNS, TURN_COLUMNS, load_run, load_sweep,
)  # fmt: skip


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_kuhn_run_loads_every_frame_with_its_rows(kuhn_run):
    run = load_run(kuhn_run)
    raw = lines(kuhn_run / "events.jsonl")
    assert list(run.events.columns[:5]) == EVENT_COLUMNS and len(run.events) == len(raw)
    assert list(run.events["kind"]) == ["start", "iteration", "iteration", "iteration", "checkpoint", "end"]
    assert run.finished and run.config["iterations"] == 3
    assert list(run.metrics.columns) == METRIC_COLUMNS
    numeric = sum(isinstance(v, (int, float)) and not isinstance(v, bool) for e in raw for k, v in e.items() if k != "iteration")
    assert len(run.metrics) == numeric
    exploit = run.metrics.query("metric == 'kuhn/exploitability'")
    assert list(exploit["iteration"]) == [0, 1, 2, 3] and exploit["value"].between(0, 1).all()
    assert run.metrics.query("metric == 'eval/kuhn_poker/random/win'")["iteration"].tolist() == [1, 2, 3]
    episodes = [json.loads(l) for f in sorted((kuhn_run / "episodes").glob("iter_*.jsonl")) for l in f.read_text().splitlines()]
    assert list(run.episodes.columns[: len(EPISODE_COLUMNS)]) == EPISODE_COLUMNS
    assert len(run.episodes) == len(episodes) == 3 * 16
    assert sorted(run.episodes["iteration"].unique()) == [1, 2, 3]
    assert {"member.player_0", "reward.player_0", "reward.player_1"} <= set(run.episodes.columns)
    assert (run.episodes["reward.player_0"] + run.episodes["reward.player_1"]).abs().max() < 1e-9  # zero-sum
    assert list(run.turns.columns[: len(TURN_COLUMNS)]) == TURN_COLUMNS
    assert len(run.turns) == sum(len(e["turns"]) for e in episodes) == run.episodes["turns"].sum()
    assert (run.turns["response_tokens"] > 0).all()
    # Kuhn strategies: 12 information sets per logged iteration (start + 3)
    assert list(run.strategies.columns) == STRATEGY_COLUMNS and len(run.strategies) == 12 * 4
    assert run.strategies["probability"].between(0, 1).all()
    for frame, columns in ((run.ratings, RATING_COLUMNS), (run.payoffs, PAYOFF_COLUMNS), (run.lineage, LINEAGE_COLUMNS)):
        assert frame.empty and list(frame.columns) == columns  # a single policy has no population


def test_a_population_run_loads_ratings_payoffs_and_lineage(population_run):
    run = load_run(population_run)
    state = json.loads((population_run / "population.json").read_text())
    assert list(run.ratings.columns) == RATING_COLUMNS and len(run.ratings) == len(state["ratings"])
    assert set(run.ratings["player"]) == {"m0", "m1"} | {s["name"] for s in state["snapshots"]}
    assert sorted(run.rating_history["iteration"].unique()) == [1, 2, 3]
    assert set(run.rating_history["player"]) == {"m0", "m1"}
    assert list(run.payoffs.columns) == PAYOFF_COLUMNS and len(run.payoffs) > 0
    assert (run.payoffs["wins"] + run.payoffs["draws"] + run.payoffs["losses"] == run.payoffs["games"]).all()
    graph = nx.node_link_graph(state["lineage"], directed=True, edges="edges")
    assert nx.utils.graphs_equal(run.lineage_graph, graph)
    assert len(run.lineage) == graph.number_of_nodes()
    assert set(run.lineage.dropna(subset=["parent"]).apply(lambda r: (r.parent, r.node), axis=1)) == set(graph.edges)
    assert set(run.strategies["player"]) >= {"population"}


def test_a_forge_run_has_its_outcomes_per_episode(forge_run):
    run = load_run(forge_run)
    assert {"member.proposer", "member.executor", "member.verifier", "member.teacher"} <= set(run.episodes.columns)
    assert run.episodes["outcome.p_hat"].dropna().between(0, 1).all()
    assert {"proposer", "executor", "verifier", "teacher"} <= set(run.turns["role"])
    assert not run.metrics.query("metric == 'forge/difficulty'").empty


def test_a_killed_run_with_a_half_written_line_still_loads(killed_run):
    with pytest.warns(UserWarning, match="not complete JSON"):
        run = load_run(killed_run)
    assert not run.finished
    assert run.events["iteration"].max() >= 2 and "iter" not in set(run.events["kind"])
    assert set(run.metrics.query("metric == 'kuhn/exploitability'")["iteration"]) >= {0, 1, 2}


def test_a_run_that_has_only_begun_loads_empty_frames(tmp_path):
    (tmp_path / "config.toml").write_text("iterations = 5\n")
    run = load_run(tmp_path)
    assert run.events.empty and run.metrics.empty and run.episodes.empty and run.turns.empty
    assert list(run.turns.columns) == TURN_COLUMNS and not run.finished


def test_a_folder_that_is_no_run_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        load_run(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a sweep directory"):
        load_sweep(tmp_path)


def test_a_sweep_loads_its_table_runs_and_metrics_with_settings(sweep_dir):
    sweep = load_sweep(sweep_dir)
    assert len(sweep.results) == 4 and (sweep.results["status"] == "done").all()
    assert sweep.settings == ["population.matchmaker", "seed"]
    assert len(sweep.runs) == 4
    assert set(sweep.metrics["run"]) == set(sweep.runs)
    assert len(sweep.metrics) == sum(len(r.metrics) for r in sweep.runs.values())
    final = sweep.metrics.query("metric == 'kuhn/population_exploitability' and iteration == 2")
    assert sorted(final.groupby("population.matchmaker").size()) == [2, 2]
