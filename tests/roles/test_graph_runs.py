"""Graphs in a run config: ``graph = "<built-in>"`` or a ``[graph]`` table, each node a role
with its own members and estimator (``[roles.<node>]``), trained by the one trainer and
evaluated on held-out tasks."""

import json
from pathlib import Path

import pandas as pd
import pytest

import games
from games.task_forge.sandbox import Limits
from marl.config import ConfigError
from marl.episode import read_jsonl
from marl.estimators import ESTIMATORS, graph_credit
from coevo.train import Trainer
from coevo.config import load_run_config
from coevo.sweep import expand, flat, load_sweep, run_sweep
from tests.runs import events

TOP, ROLLOUT = 'seed = 0\niterations = 1\nmodel = "tiny"\n', "[rollout]\nmatches = 4\nconcurrency = 4\nmax_new_tokens = 4\n"
PLANNED = """
[graph.nodes.planner]
brief = "Plan the solution in one sentence."
output = "text"
[graph.nodes.solver]
brief = "Solve the task. End with \\\\boxed{ANSWER}."
repeats = 2
[[graph.edges]]
source = "planner"
target = "solver"
"""


def config(tmp_path, text: str, overrides=()):
    path = tmp_path / "run.toml"
    path.write_text(TOP + text + ROLLOUT)
    return load_run_config(path, overrides)


def test_a_builtin_graph_is_the_runs_game(tmp_path):
    loaded = config(tmp_path, 'graph = "malt"\n')
    assert loaded.games == {"graph/malt": 1.0} and list(loaded.graph_spec.nodes) == ["generator", "verifier", "refiner"]
    assert config(tmp_path, PLANNED).games == {"graph/custom": 1.0}



def test_a_graph_whose_node_runs_python_gets_the_sandbox_forge_sets_and_others_none(tmp_path):
    loaded = config(tmp_path, 'graph = "agentflow"\n[forge]\nsandbox = "rlimit"\ncpu_seconds = 1.0\n')
    assert loaded.game_kwargs("graph/agentflow") == {"sandbox": "rlimit", "limits": Limits(cpu_seconds=1.0, wall_seconds=5.0)}
    env = games.make("graph/agentflow", **loaded.game_kwargs("graph/agentflow"))
    env.reset(seed=0)
    assert env.unwrapped.rules.sandbox.backend == "rlimit" and env.unwrapped.rules.sandbox.limits.cpu_seconds == 1.0
    assert config(tmp_path, 'graph = "malt"\n').game_kwargs("graph/malt") == {}, "no node runs Python: no sandbox"
    assert set(config(tmp_path, PLANNED).game_kwargs("graph/custom")) == {"spec"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('graph = "malt"\n[games]\nkuhn_poker = 1.0\n', "graph: the run plays graph/malt; leave games out (it says kuhn_poker)"),
        ('graph = "chain"\n', "graph: Value error, no built-in graph 'chain' (built-in: solo, malt, agentflow, debate, agent0, task_forge)"),
        ('[games]\n"graph/custom" = 1.0\n', "games: graph/custom is the run's own graph: give it as a [graph] table"),
        ('graph = "solo"\n[population]\nsize = 2\n', "population: a graph's seats share one outcome"),
        ('[games]\n"graph/solo" = 1.0\n"graph/malt" = 1.0\n', "games: a run plays one graph, alone"),
        ('graph = "malt"\n[roles.generator]\nplayer = "tiny"\n', "roles: one per node of the graph with a seat (generator, verifier, refiner); "
         "missing ['verifier', 'refiner'], unknown []"),
        ('graph = "solo"\n[roles.executor]\nplayer = "scripted:noisy"\n', "roles.executor.player: no scripted player 'noisy' for a graph's "
         "nodes; choose from random, skilled, weak"),
        ('graph = "solo"\n[roles.executor]\nplayer = "tiny"\nestimator = "adpo"\n', "roles.executor.estimator: adpo credits task forge's"),
        ('[advantage]\nestimator = "malt"\n', "advantage.estimator: malt credits task forge's attempts or an orchestration "
         "graph's turns; kuhn_poker has none"),
        ('graph = "solo"\n[roles.executor]\nplayer = "tiny"\ntask_filter = true\n', "roles.executor: task_filter and kickstart"),
        ('graph = "agent0"\n[forge]\nchoices = 4\n', "forge.choices: the options come from the task's family, which only a scripted "
         "writer's tasks name; seat one at [roles.proposer], or set [forge] seed_tasks = true"),
    ],
)  # fmt: skip
def test_a_graph_that_does_not_fit_the_run_is_one_line_naming_the_field(tmp_path, text, message):
    with pytest.raises(ConfigError) as err:
        config(tmp_path, text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_each_node_of_a_custom_graph_learns_with_its_own_members_and_estimator(tmp_path):
    roles = (
        '[roles.planner]\nplayer = "tiny"\nestimator = "malt"\n'
        '[roles.solver]\nplayer = "tiny"\nmembers = 2\nlora = { r = 4 }\nestimator = "grpo"\n'
        "[eval]\nevery = 1\n[forge]\nheldout = 1\n"
    )
    run = tmp_path / "run"
    Trainer(config(tmp_path, PLANNED + roles), run).run()
    episodes = read_jsonl(run / "episodes" / "iter_000001.jsonl")
    assert [e.members for e in episodes[:2]] == [
        {"planner": "planner", "solver_0": f"solver_{i}", "solver_1": f"solver_{i}"} for i in (0, 1)
    ], "a node's copies seat the member whose turn it is, members in turn"
    (it,) = [r for r in events(run) if r["kind"] == "iteration"]
    assert it["planner/learner/samples"] == 4 and it["solver_0/learner/samples"] == it["solver_1/learner/samples"] == 4
    assert {f"eval/graph/heldout/{f}" for f in ("arithmetic", "list_ops", "string_ops", "program_output")} <= it.keys()
    assert it["eval/graph/calls_per_match"] == 3

    credited = [graph_credit(e, t) for e in episodes for t in e.turns]
    assert {c.key for c in credited} == {("graph/custom", "planner"), ("graph/custom", "solver")}
    solvers = [c for c in credited if c.turn.tag == "solver"]
    assert all(len({c.group for c in solvers if c.episode is e}) == 1 for e in episodes), "a round's copies: one GRPO group"
    advantages, _ = ESTIMATORS["grpo"](solvers, {}, 0.95, 0.2)
    for e in episodes:  # GRPO over the copies: centred on their mean value
        mine = [a for c, a in zip(solvers, advantages) if c.episode is e]
        assert sum(mine) == pytest.approx(0.0, abs=1e-9)



def test_agent0s_proposer_learns_from_the_uncertainty_of_scripted_executors_and_is_skipped_on_held_out_tasks(tmp_path):
    roles = (
        'graph = "agent0"\n[roles.proposer]\nplayer = "tiny"\n[roles.executor]\nplayer = "scripted:skilled"\n'
        '[eval]\nevery = 1\n[forge]\nheldout = 1\nseed_tasks = true\nsandbox = "rlimit"\n'
    )
    run = tmp_path / "run"
    Trainer(config(tmp_path, roles), run).run()
    episodes = read_jsonl(run / "episodes" / "iter_000001.jsonl")
    assert all(e.outcome["seeded"] and e.outcome["invalid_task"] for e in episodes), "a tiny model writes no valid task"
    assert all(e.turns[0].tag == "proposer" and e.outcome["values"][0] == 0.0 for e in episodes)
    assert all(len(e.turns) >= 5 for e in episodes), "the executors played the drawn tasks"
    (it,) = [r for r in events(run) if r["kind"] == "iteration"]
    assert it["proposer/learner/samples"] == sum(t.tag == "proposer" for e in episodes for t in e.turns)
    assert it["graph/proposer/invalid_rate"] == 1.0 and it["graph/executor/python_runs"] == 0.0
    assert it["eval/graph/calls_per_match"] == 4, "held-out tasks are given: only the four executors speak"



def test_one_member_plays_and_learns_every_node_its_seat_plays_in_task_forge_as_a_graph(tmp_path):
    scripted = "".join(f'[roles.{r}]\nplayer = "scripted:skilled"\n' for r in ("proposer", "verifier", "teacher"))
    roles = f'graph = "task_forge"\n{scripted}[roles.executor]\nplayer = "tiny"\n[eval]\nevery = 0\n'
    run = tmp_path / "run"
    Trainer(config(tmp_path, roles, ["rollout.matches=2"]), run).run()
    episodes = read_jsonl(run / "episodes" / "iter_000001.jsonl")
    played = [t.tag for e in episodes for t in e.turns if t.seat == "executor"]
    assert {"executor", "reviser"} <= set(played) <= {"executor", "reviser", "retrier"}
    assert all(e.members["executor"] == "executor" for e in episodes)
    (it,) = [r for r in events(run) if r["kind"] == "iteration"]
    assert it["executor/learner/samples"] == len(played), "the executor's member learns from every node its seat played"
    assert {f"graph/{node}/value" for node in ("proposer", "executor", "verifier", "reviser")} <= it.keys()



def test_forced_choice_plays_a_graphs_answering_nodes_under_multiple_choice_and_is_refused_where_a_node_writes_text(tmp_path):
    debate = config(tmp_path, 'graph = "debate"\nmode = "choose"\n[forge]\nchoices = 4\n')
    env = games.make("graph/debate", **debate.game_kwargs("graph/debate"))
    env.reset(seed=0)
    rules = env.unwrapped.rules
    assert len(rules.options) == 4 and rules.task.answer in rules.options
    assert env.unwrapped.legal_moves(env.agent_selection) == [f"\\boxed{{{o}}}" for o in rules.options]
    run = tmp_path / "run"
    Trainer(debate, run).run()
    episodes = read_jsonl(run / "episodes" / "iter_000001.jsonl")
    assert all(t.mode == "choose" and t.valid for e in episodes for t in e.turns), "every turn picks one of the options"
    with pytest.raises(ConfigError, match="mode: forced choice cannot play the verifier of graph/malt"):
        config(tmp_path, 'graph = "malt"\nmode = "choose"\n[forge]\nchoices = 4\n')
    with pytest.raises(ConfigError, match="mode: forced choice cannot play the debater_0 of graph/debate"):
        config(tmp_path, 'graph = "debate"\nmode = "choose"\n')
    scripted = config(tmp_path, 'graph = "malt"\nmode = "choose"\n[forge]\nchoices = 4\n[roles.generator]\nplayer = "tiny"\n'
                      '[roles.verifier]\nplayer = "scripted:skilled"\n[roles.refiner]\nplayer = "tiny"\n')
    assert scripted.forge.choices == 4, "the text node seated by a scripted player: the model seats all choose"


EXAMPLES = Path(__file__).parents[2] / "examples"
CALLS = {"solo": 1, "malt": 3, "debate": 7}  # model calls a match


def test_the_topology_sweep_compares_graphs_at_equal_model_calls():
    sweep = load_sweep(EXAMPLES / "sweep_topologies.toml")
    runs = expand(sweep)
    assert len(runs) == 27 and sorted({r["seed"] for r in runs}) == [0, 1, 2]
    for settings in runs:
        config = load_run_config(sweep.config, [*sweep.set, *(f"{k}={json.dumps(v)}" for k, v in flat(settings).items())])
        assert CALLS[config.graph] * config.rollout.matches == 42, settings
        players = {rc.player for rc in (config.roles or {}).values()}
        if config.mode == "choose":  # the tiny model picks every answer; MALT's critique is the scripted verifier's
            assert config.forge.choices == 4 and players <= {"tiny", "scripted:skilled"}
            continue
        assert players in ({"scripted:skilled"}, set()), "scripted players in every node, or the tiny model in every node"


def test_a_sweep_over_graphs_with_role_tables_tabulates_one_column_per_setting(tmp_path):
    spec = tmp_path / "sweep.toml"
    spec.write_text(
        f'config = "{EXAMPLES / "graph_tiny.toml"}"\nparallel = 2\nset = ["iterations=1", "eval.every=1", "forge.heldout=2"]\n'
        '[[runs]]\ngraph = "solo"\n[runs.roles]\nexecutor = { player = "scripted:skilled" }\n'
        '[[runs]]\ngraph = "debate"\n[runs.roles]\ndebater = { player = "scripted:skilled" }\njudge = { player = "scripted:weak" }\n'
    )
    table = run_sweep(spec, tmp_path / "out")
    assert list(table["run"]) == ["000-graph=solo-roles", "001-graph=debate-roles"] and (table.status == "done").all()
    assert list(table["roles.judge.player"].fillna("")) == ["", "scripted:weak"]
    assert list(table["eval/graph/calls_per_match"]) == [1, 7], "one column for every graph"
    pd.testing.assert_frame_equal(table, pd.read_parquet(tmp_path / "out" / "results.parquet"))
