"""Population training end to end with the tiny model: the league with PBT, frozen players never
trained, exact resume after SIGKILL, config errors, and a 12-run sweep."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import networkx as nx
import pandas as pd
import pytest
import tomli_w
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from coevo.cli import app
from marl.config import ConfigError
from marl.episode import read_jsonl
from marl.hf import adapter_of
from marl.learner import MAGNET, trainable_weights
from marl.members import load_model
from coevo.config import load_run_config
from coevo.evolution import oracle_done
from populations.population import Member as PopulationMember
from coevo.train import Trainer
from tests.runs import comparable, events, train_killed_after

runner = CliRunner()
EXAMPLES = Path(__file__).parents[2] / "examples"
SHRINK = ["rollout.matches=32", "rollout.concurrency=32", "population.eval_matches=8", "checkpoint_every=2"]


@pytest.mark.slow
def test_a_league_with_pbt_trains_only_its_learners_and_records_its_lineage(tmp_path):
    overrides = [
        *SHRINK, "iterations=4", "population.league.min_matches=8", "population.league.max_matches=16",
        "population.pbt.every=2", "population.pbt.ranges={lr=[1e-4, 3e-3], temperature=[0.5, 2.0]}",
    ]  # fmt: skip
    config = load_run_config(EXAMPLES / "kuhn_league.toml", overrides)
    trainer = Trainer(config, tmp_path / "run")
    trainer.run()
    run = tmp_path / "run"
    records = [r for r in events(run) if r["kind"] == "iteration"]
    assert [r["iteration"] for r in records] == [1, 2, 3, 4]
    last = records[-1]
    for key in ("kuhn/population_exploitability", "kuhn/main_0/exploitability", "elo/main_0",
                "main_0/policy/grad_norm", "league_exploiter_1/kuhn_poker/player_0/return"):  # fmt: skip
        assert key in last, key
    assert 0 <= last["kuhn/population_exploitability"] <= 0.5
    # every learner learned from exactly its own turns: never a snapshot's turns
    for it, record in enumerate(records, start=1):
        episodes = read_jsonl(run / "episodes" / f"iter_{it:06d}.jsonl")
        training = [e for e in episodes if "-m" in e.match_id]
        for name in trainer.roster.specs:
            own = sum(1 for e in training for t in e.turns if t.member == name and t.completion_ids)
            assert record.get(f"{name}/learner/samples", 0.0) == own
    # each member plays at its own temperature, which PBT tuned for the copies
    temperatures = {n: m.hparams["temperature"] for n, m in trainer.population.members.items()}
    assert len(set(temperatures.values())) > 1, temperatures
    assert all(trainer.members[n].seat.sampling.temperature == t for n, t in temperatures.items())
    # a PBT copy owns its optimiser state: no Adam moment is shared between two members
    storage = {}
    learners = trainer.learners["player"]
    for name in trainer.roster.specs:
        for state in learners[name].optimizer.state.values():
            for value in state.values():
                if torch.is_tensor(value) and value.dim():
                    assert storage.setdefault(value.data_ptr(), name) == name, "shared optimiser state"
    # snapshots stay frozen: the initial ones still hold the initial model's weights, in memory and
    # in their one file each (checkpoints name them, they do not copy them)
    initial = trainable_weights(load_model(config).model)
    for name in ("main_0@0", "league_exploiter_1@0"):
        saved = load_file(run / "snapshots" / f"{name}.safetensors")
        assert all(torch.equal(trainer.snapshots.frozen[name][k], initial[k]) and torch.equal(saved[k], initial[k]) for k in initial)
    assert sorted(p.stem for p in (run / "snapshots").glob("*.safetensors")) == sorted(trainer.population.snapshots)
    assert "frozen" not in torch.load(run / "checkpoints" / "iter_000004" / "state.pt", weights_only=False)
    # the lineage: league checkpoints, the main exploiter's resets, PBT copies
    state = json.loads((run / "population.json").read_text())
    changes = [e["change"] for e in state["lineage"]["edges"]]
    assert any(c.startswith("pbt: copied") for c in changes), changes
    assert any("league reset" in c for c in changes), changes
    assert {r["player"] for r in state["ratings"]} >= {"main_0", "main_0@0"}
    assert {"elo", "bradley_terry", "mu", "sigma", "ordinal", "nash_average"} <= set(state["ratings"][0])
    payoffs = pd.read_csv(run / "payoffs.csv")
    assert list(payoffs.columns) == ["role_a", "role_b", "a", "b", "games", "wins", "draws", "losses", "mean", "lo", "hi"]
    assert set(payoffs.role_a) == {"player_0", "player_1"} and (payoffs.games > 0).all()
    graph = nx.read_graphml(run / "lineage.graphml")
    assert set(graph.nodes) == {n["id"] for n in state["lineage"]["nodes"]}


@pytest.mark.slow
def test_lora_members_are_adapters_on_one_base_each_learning_only_its_own(tmp_path):
    overrides = [
        *SHRINK, "iterations=4", "lora.r=4", "population.league.min_matches=8", "population.league.max_matches=16",
        "population.pbt.every=2", "population.pbt.ranges={lr=[1e-4, 3e-3]}",
    ]  # fmt: skip
    trainer = Trainer(load_run_config(EXAMPLES / "kuhn_league.toml", overrides), tmp_path / "run")
    trainer.run()
    [base] = trainer.bases.values()  # one model in memory for every member and snapshot
    learners = trainer.roster.specs
    assert all(trainer.members[name].policy is base for name in learners)
    magnets = {name + MAGNET for name in learners}  # each learner's KL reference: a frozen adapter too
    assert base.adapters == set(learners) | set(trainer.snapshots.loaded) | magnets
    assert not any(p.requires_grad for n, p in base.model.named_parameters() if adapter_of(n) in magnets)
    for name in learners:  # each learner holds its own adapter, and only it
        own = [p for n, p in base.model.named_parameters() if adapter_of(n) == name]
        assert [id(p) for p in trainer.learners["player"][name].params] == [id(p) for p in own] and all(p.requires_grad for p in own)
    for record in (r for r in events(tmp_path / "run") if r["kind"] == "iteration"):
        for name in learners:  # learning from its turns moved its own adapter: the gradient reached it
            if record.get(f"{name}/learner/samples"):
                assert record[f"{name}/policy/grad_norm"] > 0, (record["iteration"], name)
    for snapshot in trainer.snapshots.loaded:  # frozen adapters played and never moved
        assert not any(p.requires_grad for n, p in base.model.named_parameters() if adapter_of(n) == snapshot)
        now = trainable_weights(base.model, snapshot)
        assert now.keys() == trainer.snapshots.frozen[snapshot].keys()
        assert all(torch.equal(now[k], trainer.snapshots.frozen[snapshot][k]) for k in now)


@pytest.mark.slow
def test_psro_oracles_start_from_the_initial_weights_and_end_when_they_plateau(tmp_path):
    """Each oracle ends with a snapshot in the meta-game, at its budget or, with a plateau rule
    that always holds (any win rate counts as no rise), after 2 iterations; the next oracle starts
    from the initial weights with a fresh optimiser, and a killed run resumes exactly."""
    overrides = [
        *SHRINK, "iterations=4", "checkpoint_every=1", "population.matchmaker='psro'", "population.snapshot_every=3",
        "population.oracle={start='initial', plateau=1, plateau_tolerance=1.0}",
    ]  # fmt: skip
    trainer = Trainer(load_run_config(EXAMPLES / "kuhn_population.toml", overrides), tmp_path / "whole")
    trainer.run()
    pop = trainer.population
    assert list(pop.snapshots) == ["m0@0", "m0@2", "m0@4"]  # a plateau after 2 iterations, not the budget of 3
    assert pop.members["m0"].oracle_began == 4 and pop.members["m0"].win_rates == []
    assert set(pop.meta_strategy()) == {"m0@0", "m0@2", "m0@4"}
    initial, first = (trainer.snapshots.frozen[s] for s in ("m0@0", "m0@2"))
    now = trainable_weights(trainer.members["m0"].policy.model)
    assert all(torch.equal(now[k], initial[k]) for k in initial), "the new oracle starts from the initial weights"
    assert not all(torch.equal(first[k], initial[k]) for k in initial), "the oracle before it learned"
    changes = nx.get_edge_attributes(pop.lineage.graph, "change")
    assert sum("a new oracle from the initial weights" in c for c in changes.values()) == 2, changes
    killed = tmp_path / "killed"
    train_killed_after([str(EXAMPLES / "kuhn_population.toml"), *(a for o in overrides for a in ("--set", o))], killed, iteration=3)
    assert runner.invoke(app, ["train", "--resume", str(killed), "--quiet"]).exit_code == 0
    assert comparable(events(killed)) == comparable(events(tmp_path / "whole"))


@pytest.mark.slow
def test_a_new_psro_snapshot_meets_every_other_before_the_next_solve(tmp_path):
    """With ``meet_matches`` and no evaluation matches, each snapshot plays every older one as soon
    as it is taken (its matches in that iteration's shard), so every pair of the meta-game has
    been played when it is solved; a killed run resumes exactly."""
    overrides = [
        "rollout.matches=16", "rollout.concurrency=16", "checkpoint_every=1", "iterations=3", "population.matchmaker='psro'",
        "population.snapshot_every=1", "population.eval_matches=0", "population.meet_matches=4",
    ]  # fmt: skip
    trainer = Trainer(load_run_config(EXAMPLES / "kuhn_population.toml", overrides), tmp_path / "whole")
    trainer.run()
    pop = trainer.population
    names = list(pop.snapshots)
    assert names == ["m0@0", "m0@1", "m0@2", "m0@3"]
    assert all(pop.payoffs.games(a, b) == 4 for i, a in enumerate(names) for b in names[i + 1 :])
    for iteration, meetings in ((1, 4), (2, 8), (3, 12)):  # the new snapshot against each older one, 4 matches each
        shard = read_jsonl(tmp_path / "whole" / "episodes" / f"iter_{iteration:06d}.jsonl")
        assert sum("-meet" in e.match_id for e in shard) == meetings
    killed = tmp_path / "killed"
    train_killed_after([str(EXAMPLES / "kuhn_population.toml"), *(a for o in overrides for a in ("--set", o))], killed, iteration=2)
    assert runner.invoke(app, ["train", "--resume", str(killed), "--quiet"]).exit_code == 0
    assert comparable(events(killed)) == comparable(events(tmp_path / "whole"))


def test_meetings_between_iterations_need_sync_training():
    with pytest.raises(ConfigError, match="population.meet_matches: .*train.mode = 'sync'"):
        load_run_config(EXAMPLES / "kuhn_population.toml", ["population={matchmaker='psro', meet_matches=4}", "train.mode='async'"])


def test_an_oracle_ends_at_its_budget_or_on_a_plateau():
    config = load_run_config(EXAMPLES / "kuhn_population.toml", [
        "population.matchmaker='psro'", "population.snapshot_every=10", "population.oracle={plateau=2, plateau_tolerance=0.05}"
    ])  # fmt: skip
    member = PopulationMember("m0", "tiny", oracle_began=20)
    assert not oracle_done(member, 29, config.population) and oracle_done(member, 30, config.population)
    for rates, done in [([0.1, 0.2, 0.3], False), ([0.1, 0.2, 0.3, 0.4], False), ([0.4, 0.4, 0.42, 0.44], True), ([0.5, 0.5, 0.4, 0.4], True)]:
        member.win_rates = rates
        assert oracle_done(member, 25, config.population) is done, rates


@pytest.mark.slow
@pytest.mark.parametrize("weights", [[], ["--set", "lora.r=4"]], ids=["full", "lora"])
def test_a_killed_population_run_resumes_exactly(tmp_path, weights):
    base = [
        "--set", "population.size=2", "--set", "population.pbt.every=2", "--set", "population.matchmaker=pfsp",
        "--set", "population.snapshot_every=1", "--set", "eval.every=2", "--set", "eval.matches=4",
        "--set", "eval.opponents=['random', 'past:1']", *weights,
    ]  # fmt: skip  (past:1: each member's own weights one iteration ago, kept in the checkpoint)
    shrink = [arg for item in SHRINK for arg in ("--set", item)]
    config = [str(EXAMPLES / "kuhn_population.toml"), "--iterations", "5", *base, *shrink]
    whole = tmp_path / "whole"
    result = runner.invoke(app, ["train", *config, "--run-dir", str(whole), "--quiet"])
    assert result.exit_code == 0, result.output
    killed = tmp_path / "killed"
    train_killed_after(config, killed, iteration=3)  # after the checkpoint at 2
    result = runner.invoke(app, ["train", "--resume", str(killed), "--quiet"])
    assert result.exit_code == 0, result.output
    assert comparable(events(killed)) == comparable(events(whole))
    assert [r["iteration"] for r in events(killed) if r["kind"] == "iteration"] == [1, 2, 3, 4, 5]
    for i in range(1, 6):
        shard = f"episodes/iter_{i:06d}.jsonl"
        assert (killed / shard).read_text() == (whole / shard).read_text()
    assert (killed / "population.json").read_text() == (whole / "population.json").read_text()


def test_every_member_of_a_population_is_evaluated_and_the_plain_keys_are_their_mean(tmp_path):
    overrides = [
        "iterations=1", "rollout.matches=8", "population.size=3", "population.eval_matches=0", "eval.every=1",
        "eval.matches=4", "eval.opponents=['random', 'initial', 'past:1']",
    ]  # fmt: skip
    Trainer(load_run_config(EXAMPLES / "kuhn_population.toml", overrides), tmp_path / "run").run()
    [record] = [r for r in events(tmp_path / "run") if r["kind"] == "iteration"]
    names = ["m0", "m1", "m2"]
    for opponent in ("random", "initial", "past:1"):
        for result in ("return", "win", "draw", "loss"):
            each = [record[f"eval/{name}/kuhn_poker/{opponent}/{result}"] for name in names]
            assert record[f"eval/kuhn_poker/{opponent}/{result}"] == pytest.approx(sum(each) / 3), (opponent, result)


@pytest.mark.parametrize(
    "override, field",
    [
        ("population.matchmaker=elo_hell", "population.matchmaker"),
        ("population.pbt.ranges={momentum=[0.1, 0.9]}", "population.pbt.ranges"),
        ("population.pbt.ranges={top_p=[0.5, 1.5]}", "population.pbt.ranges"),
        ("population.opponents=['minimax']", "population.opponents"),
        ("population.league.main_agents=0", "population.league.main_agents"),
        ("advantage.estimator='malt'", "advantage.estimator"),  # task forge's credit: Kuhn has no attempts
        ("population.oracle={start='initial'}", "population.oracle"),  # PSRO's: the example is fictitious play
        ("population={matchmaker='psro', eval_matches=0}", "population.eval_matches"),  # nothing would fill its meta-game
        ("population.meet_matches=4", "population.meet_matches"),  # PSRO's: the example is fictitious play
    ],
)
def test_bad_population_settings_are_one_line_naming_the_field(override, field):
    result = runner.invoke(app, ["train", str(EXAMPLES / "kuhn_population.toml"), "--set", override])
    assert result.exit_code == 2
    assert field in result.output and len(result.output.strip().splitlines()) == 1, result.output


@pytest.mark.slow
def test_the_example_sweep_runs_twelve_runs_into_one_table(tmp_path):
    """The example's twelve runs, two iterations each instead of six (a third of CI's time)."""
    example = tomllib.loads((EXAMPLES / "sweep_kuhn_population.toml").read_text())
    short = {**example, "config": str(EXAMPLES / example["config"]), "set": [*example["set"], "iterations=2", "checkpoint_every=1"]}
    spec, out = tmp_path / "sweep.toml", tmp_path / "sweep"
    spec.write_text(tomli_w.dumps(short))
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pd.read_parquet(out / "results.parquet")
    assert len(table) == 12 and (table.status == "done").all()
    assert sorted(table.groupby(["population.matchmaker", "population.size"]).size()) == [2] * 6
    assert table["kuhn/population_exploitability"].between(0, 0.5).all()
    assert (table.iteration == 2).all()
    pd.testing.assert_frame_equal(table, pd.read_csv(out / "results.csv"), check_dtype=False)
    # a second run of the same sweep finds every run finished and only rewrites the table
    again = runner.invoke(app, ["sweep", str(spec), "--out", str(out)])
    assert again.exit_code == 0
    assert pd.read_parquet(out / "results.parquet").drop(columns="seconds").equals(table.drop(columns="seconds"))
    # and so does the example script, which then compares the matchmakers
    script = subprocess.run(
        [sys.executable, str(EXAMPLES / "sweep_kuhn_population.py"), "--out", str(out), "--sweep", str(spec)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "12/12 runs done" in script.stdout
    assert all(name in script.stdout for name in ("fictitious", "psro", "self_play"))


@pytest.mark.slow
def test_a_sweep_runs_its_runs_as_ray_tasks(tmp_path):
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'config = "{EXAMPLES / "kuhn_population.toml"}"\npool = "ray"\nparallel = 2\n'
        'set = ["iterations=1", "rollout.matches=8", "population.eval_matches=2"]\n'
        '[grid]\n"population.matchmaker" = ["self_play", "psro"]\n'
    )
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    table = pd.read_csv(tmp_path / "out" / "results.csv")
    assert list(table["population.matchmaker"]) == ["self_play", "psro"] and (table.status == "done").all()
    assert all((Path(d) / "population.json").exists() for d in table.run_dir)


@pytest.mark.parametrize(
    "text, field",
    [
        ('config = "kuhn_population.toml"\nparallel = 0', "parallel"),
        ('config = "kuhn_population.toml"\n[grid]\n"population.matchmaker" = ["self_play", "chess_club"]', "population.matchmaker"),
        ('config = "missing.toml"', "no such file"),
        ('config = "kuhn_population.toml"\nshuffle = true', "shuffle"),
    ],
)
def test_bad_sweep_files_are_one_line_naming_the_field(tmp_path, text, field):
    spec = tmp_path / "sweep.toml"
    spec.write_text(text.replace("kuhn_population.toml", str(EXAMPLES / "kuhn_population.toml")))
    result = runner.invoke(app, ["sweep", str(spec), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert field in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "out").exists()


def test_scripted_opponents_join_the_population_and_its_mixture(tmp_path):
    config = load_run_config(
        EXAMPLES / "kuhn_population.toml",
        ["iterations=1", "rollout.matches=12", "population.eval_matches=0", "population.opponents=['nash']"],
    )
    Trainer(config, tmp_path / "run").run()
    (record,) = [r for r in events(tmp_path / "run") if r["kind"] == "iteration"]
    episodes = read_jsonl(tmp_path / "run" / "episodes" / "iter_000001.jsonl")
    assert any("nash" in e.members.values() for e in episodes)
    assert not any(t.member == "nash" and t.completion_ids for e in episodes for t in e.turns)  # scripted: no tokens
    assert set(record["population/meta_strategy"]) <= {"m0@0", "m0@1", "nash"}
    assert record["m0/learner/samples"] == sum(t.member == "m0" for e in episodes for t in e.turns)
