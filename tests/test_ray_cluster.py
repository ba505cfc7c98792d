"""A population trained on a two-node Ray cluster simulated on this machine: with
``strategy = "SPREAD"`` its actors land on both nodes, and the run finishes and resumes."""

from pathlib import Path

import pytest

from coevo.train import Trainer
from coevo.config import load_run_config
from tests.runs import events

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")
pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).parent.parent / "examples"


def test_a_population_spreads_over_two_nodes_finishes_and_resumes(tmp_path):
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=2)
    try:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        overrides = [
            "iterations=2", "checkpoint_every=1", "rollout.matches=16", "population.size=2", "population.matchmaker='pfsp'",
            "population.snapshot_every=1", "population.eval_matches=4", "lora.r=4", "pool.kind='ray'",
            "pool.strategy='SPREAD'", "pool.rollout_workers=2", "pool.rollout.cpus=1", "pool.learner.cpus=1",
        ]  # fmt: skip
        config = load_run_config(EXAMPLES / "kuhn_population.toml", overrides)
        trainer = Trainer(config, tmp_path / "run")
        nodes = {actor["node"] for actor in trainer.pool.placements()["actors"].values()}
        assert nodes == {node["NodeID"] for node in ray.nodes() if node["Alive"]} and len(nodes) == 2
        trainer.run()
        resumed = Trainer(config.model_copy(update={"iterations": 3}), tmp_path / "run")
        resumed.run(resume=True)
        assert [r["iteration"] for r in events(tmp_path / "run") if r["kind"] == "iteration"] == [1, 2, 3]
        assert (tmp_path / "run" / "population.json").exists()
    finally:
        ray.shutdown()
        cluster.shutdown()
