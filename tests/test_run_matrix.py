"""Every kind of run on every pool, through the one trainer: {self-play, a PFSP population, the
league} × {Kuhn poker, task forge's four roles (a population per role), an orchestration graph
with a role per node} × {local, ray} ×
{sync, async (every member's learner one update behind the rollouts that feed it)}, two
iterations each on the CPU (the league plays two-player zero-sum games only; task forge's PFSP
is its roles' populations'). Each cell is killed (SIGKILL) after its first iteration and resumed,
and must log and play exactly what an unbroken run does.

One comparison shows both: the Ray run, killed and resumed, against the unbroken local run, event
for event and token for token. With one torch thread on either side (the test workers' and the
actors' default) and one rollout worker, both pools compute the same batches to the last bit, so
even free text sampled from nearly uniform untrained models draws the same tokens. Task forge's
role populations are also killed on the local pool (a killed local run of the other kinds is
tested in tests/marl and tests/populations).

Cells that CI leaves out, since others cross the same machinery: self-play task forge (the role
populations' cell plays task forge on both pools and checkpoints all that self-play's does, and
Kuhn's self-play cell the self-play planner on Ray), task forge's role populations with the
self-play matchmaker (PFSP's runs the same teams, snapshots and ratings), every cell but Kuhn's
PFSP population in async (each passed when the matrix was written; task forge's role populations
took twice as long), and async runs killed on the local pool (tests/marl/test_async.py's).
"""

from pathlib import Path

import pytest

from marl.episode import read_jsonl
from coevo.train import Trainer
from coevo.config import load_run_config
from tests.runs import comparable, events, train_killed_after

ray = pytest.importorskip("ray")
EXAMPLES = Path(__file__).parent.parent / "examples"
pytestmark = pytest.mark.slow

SHORT = ["iterations=2", "checkpoint_every=1"]
KUHN = [*SHORT, "rollout.matches=16", "rollout.concurrency=16", "eval.every=2", "eval.matches=4"]
FORGE = [  # a tiny model learns to execute; the proposer's curriculum, the verifier and the teacher are scripted players that adapt
    *SHORT, "rollout.matches=4", "rollout.concurrency=4", "forge.attempts=2", "rollout.max_new_tokens=8", "eval.every=2",
    "forge.heldout=1", "roles.executor.player='tiny'", "roles.executor.task_filter=false", "pool.rollout_workers=1",
]  # fmt: skip
ROLES = ("proposer", "executor", "verifier", "teacher")
GRAPH = [  # a custom orchestration graph (its spec travels with the match plans), each node a role: LoRA solvers under GRPO
    *SHORT, "rollout.matches=4", "rollout.concurrency=4", "rollout.max_new_tokens=8", "eval.every=2", "forge.heldout=1",
    "pool.rollout_workers=1",
    "graph={nodes={planner={brief='Plan in one sentence.', output='text'}, solver={brief='Solve. End with \\boxed{ANSWER}.', "
    "repeats=2}}, edges=[{source='planner', target='solver'}]}",
    "roles={planner={player='tiny', estimator='malt'}, solver={player='tiny', members=2, lora={r=4}, estimator='grpo'}}",
]  # fmt: skip


def every_role(matchmaker: str) -> list[str]:
    """Each role a population; two proposers and two executors (LoRA adapters on one base)."""
    teams = ["roles.proposer.members=2", "roles.executor.members=2", "roles.executor.lora={r=4}"]
    return [*teams, *(f"roles.{r}.population={{matchmaker='{matchmaker}', snapshot_every=1}}" for r in ROLES)]


CELLS = {
    "self_play-kuhn": ("kuhn_tiny.toml", KUHN),
    "pfsp-kuhn": (
        "kuhn_population.toml",
        [*KUHN, "population.matchmaker='pfsp'", "population.size=2", "population.snapshot_every=1",
         "population.eval_matches=4"],  # full weights: the @1 snapshots reach the workers whole
    ),  # fmt: skip
    "league-kuhn": (
        "kuhn_league.toml", [*KUHN, "population.league.min_matches=4", "population.league.max_matches=8", "population.eval_matches=4"]
    ),
    "pfsp-role_populations": ("task_forge_scripted.toml", [*FORGE, *every_role("pfsp")]),
    "self_play-graph": ("graph_tiny.toml", GRAPH),
}
RAY = ["pool.kind='ray'", "pool.rollout.cpus=0.5", "pool.learner.cpus=0.5"]


@pytest.fixture(scope="module")
def cluster():
    """One Ray for the module's runs: killed runs join it from their own process by its address."""
    context = ray.init(address="local", num_cpus=8, include_dashboard=False, log_to_driver=False)
    yield context.address_info["gcs_address"]
    ray.shutdown()


def transcript(episode) -> tuple:
    turns = [(t.seat, t.member, t.move, t.choice, t.valid, tuple(t.completion_ids)) for t in episode.turns]
    return episode.match_id, episode.members, turns, episode.rewards


def killed_and_resumed(example: str, overrides: list[str], run_dir) -> None:
    """The run killed after its first iteration, then resumed in this process."""
    args = [str(EXAMPLES / example), *(a for o in overrides for a in ("--set", o))]
    train_killed_after(args, run_dir, iteration=1)
    Trainer(load_run_config(run_dir / "config.toml"), run_dir).run(resume=True)


def whole_run(example: str, overrides: list[str], run_dir):
    Trainer(load_run_config(EXAMPLES / example, overrides), run_dir).run()
    assert [r["iteration"] for r in comparable(events(run_dir))] == [1, 2]
    return run_dir


def assert_same_run(run, reference) -> None:
    """The same events, and the same matches turn for turn."""
    assert comparable(events(run)) == comparable(events(reference))
    for i in (1, 2):
        shard = f"episodes/iter_{i:06d}.jsonl"
        assert [transcript(e) for e in read_jsonl(run / shard)] == [transcript(e) for e in read_jsonl(reference / shard)]


LOCALLY = "pfsp-role_populations"  # also killed and resumed on the local pool
ASYNC = ["train.mode='async'", "train.max_staleness=1"]  # killed after iteration 1: iteration 2 was in flight
# Async for a population (snapshots and ratings travel with the jobs in flight): every cell passed
# in async once (90 s each on 2 cores); CI runs this one.
RUNS = [(cell, "sync") for cell in CELLS] + [("pfsp-kuhn", "async")]


@pytest.mark.parametrize("cell, schedule", RUNS)
def test_every_run_kind_resumes_exactly_on_every_pool(cell, schedule, cluster, tmp_path):
    example, overrides = CELLS[cell]
    overrides = [*overrides, *(ASYNC if schedule == "async" else [])]
    local = whole_run(example, overrides, tmp_path / "local")
    killed_and_resumed(example, [*overrides, *RAY, f"pool.address='{cluster}'"], tmp_path / "ray-killed")
    assert_same_run(tmp_path / "ray-killed", local)
    if cell == LOCALLY:
        killed_and_resumed(example, overrides, tmp_path / "local-killed")
        assert_same_run(tmp_path / "local-killed", local)
