"""Pools: a local Ray on the CPU (logical GPUs declared with ``num_gpus``) gives the actors the
declared fractions and bundles, plays the same matches as the in-process pool, and survives a
rollout worker killed mid-iteration."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marl.config import load_config
from marl.learners import LearnerSpec
from marl.members import Recipe, named_players
from marl.dispatch import Queue
from marl.config import PoolConfig, Resources
from marl.pools import Job, LocalPool, MatchPlan, PoolDoesNotFit, RayPool, TeamLearners, _local_cpus
from coevo.train import Trainer

EXAMPLES = Path(__file__).parents[2] / "examples"

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_a_pool_that_cannot_fit_says_what_is_short(local_ray):
    config = PoolConfig(kind="ray", rollout_workers=2, rollout=Resources(cpus=0.5, gpus=1))
    with pytest.raises(PoolDoesNotFit, match="ask for 2 GPU but Ray has 1; lower pool.rollout_workers, pool.rollout.gpus"):
        RayPool(config, 8)


def test_a_local_ray_declares_the_cpus_the_default_pool_asks_for_on_a_two_core_machine(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    bundles = [{"CPU": 1.0}] * 3  # the default: a learner and two rollout workers, a CPU each
    assert _local_cpus(PoolConfig(kind="ray"), bundles) == 3
    assert _local_cpus(PoolConfig(kind="ray"), bundles[:1]) == 2, "never fewer than the machine has"
    assert _local_cpus(PoolConfig(kind="ray", num_cpus=1), bundles) == 1, "a declared number is kept (and checked)"


def kuhn_plans(n: int, members=("tiny", "random")) -> list[MatchPlan]:
    a, b = members
    return [MatchPlan("kuhn_poker", s, {"player_0": a, "player_1": b if s % 3 else a}, f"m{s}") for s in range(n)]


def transcript(episode) -> tuple:
    return episode.match_id, [(t.seat, t.move, t.choice) for t in episode.turns], episode.rewards


def test_actors_get_the_declared_fractions_and_bundles(local_ray):
    config = PoolConfig(
        kind="ray", rollout_workers=2, rollout=Resources(cpus=0.5, gpus=0.25), learner=Resources(cpus=0.5, gpus=0.5)
    )
    run = load_config(EXAMPLES / "kuhn_tiny.toml")
    learners = TeamLearners({"policy": Recipe("policy", run)}, {"policy": LearnerSpec(run.optim, run.iterations)})
    pool = RayPool(config, 8, {"player": learners})
    try:
        placed = pool.placements()
        [group] = placed["groups"]
        assert group["strategy"] == "PACK" and group["state"] == "CREATED"
        assert list(group["bundles"].values()) == [{"CPU": 0.5, "GPU": 0.5}, {"CPU": 0.5, "GPU": 0.25}, {"CPU": 0.5, "GPU": 0.25}]
        actors = placed["actors"]
        assert actors["learner_player"]["resources"] == {"CPU": 0.5, "GPU": 0.5}
        for name in ("rollout_0", "rollout_1"):
            assert actors[name]["resources"] == {"CPU": 0.5, "GPU": 0.25}
        assert {a["placement_group"] for a in actors.values()} == {group["placement_group_id"]}
        assert len({a["pid"] for a in actors.values()}) == 3, "one process per actor"
    finally:
        pool.close()


@pytest.mark.parametrize("names, mode", [(("random", "nash"), "generate"), (("tiny", "random"), "choose")])
def test_two_ray_workers_play_the_same_matches_as_the_local_pool(local_ray, names, mode):
    players = named_players("kuhn_poker", list(names), mode)
    plans = kuhn_plans(60, names)
    pool = RayPool(PoolConfig(kind="ray", rollout_workers=2, rollout=Resources(cpus=0.5)), 16)
    try:
        remote = pool.play(plans, players)
    finally:
        pool.close()
    local = LocalPool(16).play(plans, players)
    assert [transcript(e) for e in remote] == [transcript(e) for e in local]


def test_a_worker_killed_mid_iteration_loses_and_duplicates_nothing(local_ray):
    """Two jobs in the queue at once (an async run's iterations), a worker killed while both play."""
    players = named_players("kuhn_poker", ["tiny", "random"], "choose")
    plans = kuhn_plans(600)
    pool = RayPool(PoolConfig(kind="ray", rollout_workers=2, rollout=Resources(cpus=0.5), batch_matches=50), 8)
    try:
        victim = pool.placements()["actors"]["rollout_0"]["pid"]
        jobs = [Job(part, pool.captured.roster({"tiny", "random"}, players)) for part in (plans[:300], plans[300:])]
        tickets = [pool.submit(job) for job in jobs]
        time.sleep(1.0)  # the first batches are being played
        os.kill(victim, signal.SIGKILL)
        episodes = [e for ticket in tickets for e in pool.collect(ticket)]
        assert [e.match_id for e in episodes] == [p.match_id for p in plans], "every match once, in order"
        assert _pid_once_restarted(pool) != victim, "Ray restarted the worker"
    finally:
        pool.close()
    local = LocalPool(8).play(plans, players)
    assert [transcript(e) for e in episodes] == [transcript(e) for e in local]


class Clock:
    """A stand-in rollout worker that takes ``delay`` seconds a batch and says who played it."""

    def __init__(self, delay: float):
        self.delay = delay

    def play(self, plans, roster):
        time.sleep(self.delay)
        return [{"plan": p, "delay": self.delay} for p in plans]


def test_batches_go_to_whichever_worker_frees_up(local_ray):
    slow, fast = (ray.remote(Clock).options(num_cpus=0.25).remote(d) for d in (0.5, 0.01))
    queue = Queue([slow, fast], max_tries=1)
    try:
        records = queue.wait(queue.put(list(range(40)), {}, batches=40))
    finally:
        queue.close()
    assert [r["plan"] for r in records] == list(range(40)), "in the order of the plans"
    by_slow = sum(r["delay"] == 0.5 for r in records)
    assert 1 <= by_slow <= 8, f"the slow worker played {by_slow} of 40 batches; an even split up front gives it 20"


def _pid_once_restarted(pool) -> int:
    for _ in range(60):
        try:
            return pool.placements()["actors"]["rollout_0"]["pid"]
        except ray.exceptions.ActorUnavailableError:
            time.sleep(1)
    raise TimeoutError("rollout_0 did not come back")


def small_ray_run(*overrides: str):
    """The Kuhn example on a Ray pool, small enough for 2 cores."""
    base = ["rollout.matches=16", "eval.every=0", "pool.kind=ray", "pool.rollout.cpus=0.5", "pool.learner.cpus=0.5"]
    return load_config(EXAMPLES / "kuhn_tiny.toml", [*base, *overrides])


def _ray_processes() -> set[int]:
    found = subprocess.run(["pgrep", "-f", "raylet|gcs_server"], capture_output=True, text=True).stdout
    return {int(pid) for pid in found.split()}


def test_ctrl_c_on_a_ray_run_checkpoints_and_leaves_no_ray_processes(tmp_path):
    before = _ray_processes()
    run = tmp_path / "run"
    command = [sys.executable, "-m", "coevo.cli", "train", str(EXAMPLES / "kuhn_tiny.toml"), "--pool", "ray",
               "--set", "rollout.matches=64", "--set", "iterations=500", "--set", "eval.every=0", "--set", "pool.rollout.cpus=0.5",
               "--set", "pool.learner.cpus=0.5", "--run-dir", str(run), "--quiet"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    events = run / "events.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and '"kind": "iteration"' not in (events.read_text() if events.exists() else ""):
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)  # one Ctrl-C: the run finishes its iteration, checkpoints, shuts down
    output, _ = proc.communicate(timeout=180)
    assert proc.returncode != 0 and (run / "checkpoints" / "latest").exists(), output
    assert "stopping after this iteration" in output
    for _ in range(60):  # Ray's own processes exit shortly after shutdown
        if _ray_processes() <= before:
            break
        time.sleep(1)
    assert _ray_processes() <= before, "the run's Ray processes are gone"


def test_a_lost_learner_rewinds_to_the_last_checkpoint(local_ray, tmp_path):
    config = small_ray_run("iterations=4", "checkpoint_every=2", "pool.rollout_workers=1")
    trainer = Trainer(config, tmp_path / "run")

    killed = []

    def kill_learner_after(iteration: int, metrics: dict) -> None:
        if iteration == 3 and not killed:  # after the checkpoint at 2: iteration 3's update is lost
            killed.append(trainer.pool.placements()["actors"]["learner_player"]["pid"])
            os.kill(killed[0], signal.SIGKILL)

    trainer.run(on_iteration=kill_learner_after)
    records = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in records if r["kind"] == "iteration"] == [1, 2, 3, 4]
    assert [r["iteration"] for r in records if r["kind"] == "learner_lost"] == [2]
    shards = sorted(p.name for p in (tmp_path / "run" / "episodes").iterdir())
    assert shards == [f"iter_{i:06d}.jsonl" for i in range(1, 5)]


class Broken:
    """A stand-in whose handle cannot even send a call: the hand-out thread itself fails."""

    def __getattr__(self, name):
        raise RuntimeError("no such worker")


def test_a_failing_hand_out_fails_the_waiting_jobs_instead_of_hanging(local_ray):
    queue = Queue([Broken()], max_tries=1)
    try:
        with pytest.raises(RuntimeError, match="no such worker"):
            queue.wait(queue.put([1, 2], {}, batches=2))
        with pytest.raises(RuntimeError, match="no such worker"):
            queue.wait(queue.put([3], {}, batches=1))  # put after the thread stopped
    finally:
        queue.close()
