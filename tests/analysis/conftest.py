"""Small real runs and a small real sweep, made once per test session, for the analysis tests.

Each is what a user's command writes: ``coevo train`` with the tiny model (Kuhn poker with
evaluation, tic-tac-toe, a Kuhn population), task forge and an orchestration graph with scripted
role players, ``coevo sweep``
(2 matchmakers × 2 seeds) and a run killed by SIGKILL with a half-written line at the end.
"""

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from coevo.cli import app
from tests.runs import train_killed_after

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SMALL = ["--set", "rollout.matches=16", "--set", "rollout.concurrency=16", "--quiet"]


def train(out: Path, config: str | Path, iterations: int, *sets: str) -> Path:
    args = ["train", str(EXAMPLES / config), "--iterations", str(iterations), "--run-dir", str(out), *SMALL]
    for s in sets:
        args += ["--set", s]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="session")
def kuhn_run(tmp_path_factory) -> Path:
    """Single-policy self-play with evaluation against the fixed opponents every iteration."""
    return train(tmp_path_factory.mktemp("kuhn") / "run", "kuhn_tiny.toml", 3, "eval.every=1", "eval.matches=8")


@pytest.fixture(scope="session")
def tictactoe_run(tmp_path_factory) -> Path:
    """kuhn_tiny.toml's training on tic-tac-toe alone (``games:=`` replaces Kuhn; ``=`` would add a
    game), without Kuhn's scripted opponents (the config refuses opponents none of its games has)."""
    folder = tmp_path_factory.mktemp("ttt")
    opponents = "eval.opponents=['random', 'initial', 'past:10']"
    return train(folder / "run", "kuhn_tiny.toml", 2, "games:={tictactoe=1.0}", opponents, "eval.every=0")


@pytest.fixture(scope="session")
def population_run(tmp_path_factory) -> Path:
    """Two members, PFSP over snapshots taken every iteration: ratings, payoffs and a lineage."""
    return train(
        tmp_path_factory.mktemp("population") / "run", "kuhn_population.toml", 3, "population.size=2",
        "population.matchmaker=pfsp", "population.snapshot_every=1", "population.eval_matches=8",
    )  # fmt: skip


@pytest.fixture(scope="session")
def forge_run(tmp_path_factory) -> Path:
    """Task forge with scripted proposer (SEC), executor, verifier and teacher."""
    return train(tmp_path_factory.mktemp("forge") / "run", "task_forge_scripted.toml", 3, "eval.every=1")


@pytest.fixture(scope="session")
def graph_run(tmp_path_factory) -> Path:
    """AgentFlow's graph with a scripted player in every node, evaluated on held-out tasks."""
    nodes = ("planner", "executor", "verifier", "generator")
    return train(tmp_path_factory.mktemp("graph") / "run", "graph_tiny.toml", 2, 'graph="agentflow"', "eval.every=1",
                 "forge.heldout=4", *(f'roles.{n}.player="scripted:skilled"' for n in nodes))  # fmt: skip


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweep")
    spec = out / "sweep.toml"
    spec.write_text(
        f'config = "{EXAMPLES / "kuhn_population.toml"}"\nparallel = 2\n'
        'set = ["iterations=2", "rollout.matches=16", "rollout.concurrency=16", "population.snapshot_every=1", '
        '"population.eval_matches=4"]\n'
        '[grid]\n"population.matchmaker" = ["self_play", "fictitious"]\nseed = [0, 1]\n'
    )
    result = CliRunner().invoke(app, ["sweep", str(spec), "--out", str(out / "sweep")])
    assert result.exit_code == 0, result.output
    return out / "sweep"


@pytest.fixture(scope="session")
def killed_run(tmp_path_factory) -> Path:
    """SIGKILLed after its second iteration, then a half-written event line, as a kill mid-write leaves."""
    run = tmp_path_factory.mktemp("killed") / "run"
    train_killed_after([str(EXAMPLES / "kuhn_tiny.toml"), "--iterations", "50", *SMALL[:-1]], run, 2)
    with open(run / "events.jsonl", "a", encoding="utf-8") as f:
        f.write('{"event": "iteration", "iteration": 3, "kind": "iter')
    return run


@pytest.fixture
def copy_of(tmp_path):
    """A private copy of a session run, for tests that damage it."""

    def copy(run: Path) -> Path:
        return Path(shutil.copytree(run, tmp_path / run.name))

    return copy
