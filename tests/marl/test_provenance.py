"""Provenance: every turn a member learns from was drawn by that member's own adapter at the weight
version the turn records, on the local and the Ray pool, sync and async.

Nothing here trusts the labels the pools write: the check recomputes each turn's log-probs under the
weights its member had at the recorded version (kept as the run goes) and compares them with the
log-probs the sampler recorded token by token. A worker that sampled the base model, another
member's adapter, or stale weights records other numbers; the negative controls break sampling so
on purpose and require the check to see it.
"""

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from marl import rollout
from marl.episode import read_jsonl
from marl.learner import load_weights, trainable_weights
from coevo.train import Trainer
from coevo.config import load_run_config

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
TOLERANCE = 1e-4  # the engine's recorded log-probs match a training forward pass to ~2e-6 (tests/marl/test_decode.py)
POPULATION = [  # two LoRA members on one base in free text, each meeting the other and its snapshots (PFSP)
    "iterations=3", "checkpoint_every=1", "rollout.matches=8", "rollout.concurrency=8", "mode='generate'",
    "rollout.max_new_tokens=6", "lora={r=4}", "population.size=2", "population.matchmaker='pfsp'",
    "population.snapshot_every=1", "population.eval_matches=2",
]  # fmt: skip
ASYNC = ["train.mode='async'", "train.max_staleness=1"]
RAY = ["pool.kind='ray'", "pool.rollout.cpus=0.5", "pool.learner.cpus=0.5", "pool.rollout_workers=2"]


def train_keeping_versions(run_dir: Path, overrides: list[str]) -> tuple[Trainer, dict[tuple[str, int], dict]]:
    """Run the population, keeping each learning member's adapter weights at every version it
    reaches (the driver's copy, which every pool brings up to date after each update)."""
    trainer = Trainer(load_run_config(EXAMPLES / "kuhn_population.toml", [*POPULATION, *overrides]), run_dir)
    learning = {name: m for name, m in trainer.members.items() if name in trainer.roster.specs}
    kept: dict[tuple[str, int], dict] = {}

    def keep(*_) -> None:
        for name, m in learning.items():
            kept[name, m.seat.version] = trainable_weights(m.policy.model, m.adapter)

    keep()
    trainer.run(on_iteration=keep)
    return trainer, kept


def provenance_gaps(trainer: Trainer, kept: dict[tuple[str, int], dict], run_dir: Path) -> dict[str, float]:
    """Per learning member, the largest |recorded − recomputed| log-prob over every token it drew;
    recomputed under its own adapter loaded with its weights at the turn's version."""
    turns = [t for path in sorted((run_dir / "episodes").glob("*.jsonl")) for ep in read_jsonl(path) for t in ep.turns]
    gaps: dict[str, float] = {}
    for name in {name for name, _ in kept}:
        member = trainer.members[name]
        mine = [t for t in turns if t.member == name and t.completion_ids]
        assert {t.version for t in mine} - {0}, f"{name}: no turn after an update, where adapters differ from the base"
        for version in sorted({t.version for t in mine}):
            batch = [t for t in mine if t.version == version]
            load_weights(member.policy.model, kept[name, version], member.adapter)
            with torch.no_grad():
                logprobs, real, _ = member.policy.completion_logprobs(
                    [t.prompt_ids for t in batch], [t.completion_ids for t in batch], [member.adapter] * len(batch)
                )
            recorded = torch.tensor([x for t in batch for x in t.logprobs])
            gap = float((logprobs[real].float().cpu() - recorded).abs().max())
            gaps[name] = max(gaps.get(name, 0.0), gap)
    return gaps


@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_members_train_on_their_own_samples_local(tmp_path, schedule):
    run_dir = tmp_path / "run"
    trainer, kept = train_keeping_versions(run_dir, ASYNC if schedule == "async" else [])
    gaps = provenance_gaps(trainer, kept, run_dir)
    assert set(gaps) == {"m0", "m1"}
    assert max(gaps.values()) < TOLERANCE, gaps


def _sampling_with(monkeypatch, adapter_of) -> None:
    """Break the engine on purpose: every request asks for ``adapter_of(its member's adapter)``."""
    request = rollout._Live.request
    monkeypatch.setattr(rollout._Live, "request", lambda self: replace(request(self), adapter=adapter_of(request(self).adapter)))


@pytest.mark.parametrize(
    "wrong", {"base": lambda a: None, "other member": lambda a: {"m0": "m1", "m1": "m0"}.get(a, a)}.items(), ids=lambda w: w[0]
)
def test_the_check_sees_a_worker_sampling_the_wrong_weights(tmp_path, monkeypatch, wrong):
    _sampling_with(monkeypatch, wrong[1])
    run_dir = tmp_path / "run"
    trainer, kept = train_keeping_versions(run_dir, [])
    gaps = provenance_gaps(trainer, kept, run_dir)
    assert min(gaps.values()) > 100 * TOLERANCE, gaps


@pytest.mark.slow
@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_members_train_on_their_own_samples_ray(tmp_path, schedule):
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        run_dir = tmp_path / "run"
        trainer, kept = train_keeping_versions(run_dir, [*RAY, *(ASYNC if schedule == "async" else [])])
        gaps = provenance_gaps(trainer, kept, run_dir)
    finally:
        ray.shutdown()
    assert set(gaps) == {"m0", "m1"}
    assert max(gaps.values()) < TOLERANCE, gaps
