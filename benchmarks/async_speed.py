"""Samples trained per second, sync vs async training (``[train] mode``, k = ``max_staleness``),
through the one trainer on a Ray pool of 2 rollout workers and a learner, in one run.

Workloads (``--workloads``):
- ``kuhn``: the Kuhn example (tiny model, forced choice, compact prompts), its exact
  exploitability measured every iteration as in training;
- ``tictactoe``: the tiny model writing free text on tic-tac-toe (its moves mostly invalid: an
  untrained model; a random legal move is played instead), 32 new tokens a turn, one PPO epoch
  and no KL (the learner's passes about twice the rollouts' time, where overlap gains most);
- ``smollm2``: SmolLM2-135M with a LoRA adapter (r = 8) in forced choice on Kuhn, the example's
  learner settings (two epochs, the KL magnet).

Each run starts its own local Ray (actors of one CPU each: 3 CPUs declared on this 2-core
machine, so in async mode the learner and the workers share the cores). Timing runs from the end
of the first iteration (actors up, models built) to the last; samples are the learner's trained
turns over those iterations. Ratio: samples/s of async k over sync, in the same run.

    python benchmarks/async_speed.py [--workloads kuhn tictactoe smollm2] [--ks 1 2 4] [--iterations 8] [--quick]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from marl.config import TrainConfig, load_config
from coevo.train import Trainer

EXAMPLES = Path(__file__).parents[1] / "examples"
RAY = ["pool.kind='ray'", "pool.rollout_workers=2"]
SETTINGS = ["eval.every=0", "checkpoint_every=1000"]
WORKLOADS = {  # name -> (example, overrides)
    "kuhn": ("kuhn_tiny.toml", ["rollout.matches=128"]),
    "tictactoe": (
        "kuhn_tiny.toml",
        [
            "mode='generate'", "rollout.compact_prompts=false", "rollout.matches=32", "rollout.max_new_tokens=32",
            "rollout.invalid='random_legal'", "optim.epochs=1", "optim.kl_coef=0", "games:={tictactoe=1.0}",
            "eval.opponents=['random']",
        ],
    ),
    "smollm2": (  # 3 iterations (2 timed): one learner update takes about half a minute on one core
        "kuhn_tiny.toml",
        ["model='smollm2-135m'", "lora.r=8", "rollout.matches=32", "optim.lr=1e-4", "optim.micro_batch=16", "iterations=3"],
    ),
}


def config_for(workload: str, schedule: list[str], iterations: int, matches: int | None, pool: list[str]) -> TrainConfig:
    example, overrides = WORKLOADS[workload]
    extra = [f"rollout.matches={matches}"] if matches else []
    return load_config(EXAMPLES / example, [*pool, *SETTINGS, *schedule, f"iterations={iterations}", *overrides, *extra])


def samples_per_s(config: TrainConfig) -> dict:
    """Trained samples per second after the first iteration, and the last iteration's staleness."""
    marks: list[tuple[float, float]] = []

    def mark(iteration: int, metrics: dict) -> None:
        marks.append((time.perf_counter(), sum(v for k, v in metrics.items() if k.endswith("learner/samples"))))

    with tempfile.TemporaryDirectory() as run_dir:
        metrics = Trainer(config, Path(run_dir) / "run").run(on_iteration=mark)
    seconds = marks[-1][0] - marks[0][0]
    samples = sum(n for _, n in marks[1:])
    return {"samples_per_s": round(samples / seconds, 2), "seconds": round(seconds, 2), "staleness": metrics.get("async/staleness_max", 0.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument(
        "--quick", action="store_true", help="kuhn, k = 2, 3 iterations of 16 matches, local pool: a smoke test of the script"
    )
    args = parser.parse_args()
    workloads, ks, iterations, matches = (["kuhn"], [2], 3, 16) if args.quick else (args.workloads, args.ks, args.iterations, None)
    pool = [] if args.quick else RAY  # Ray's start-up would be most of a smoke test
    rows = []
    for workload in workloads:
        sync = samples_per_s(config_for(workload, ["train.mode='sync'"], iterations, matches, pool))
        row = {"workload": workload, "sync": sync}
        for k in ks:
            run = samples_per_s(config_for(workload, ["train.mode='async'", f"train.max_staleness={k}"], iterations, matches, pool))
            row[f"async_k{k}"] = {**run, "ratio_vs_sync": round(run["samples_per_s"] / sync["samples_per_s"], 3)}
        rows.append(row)
        print(json.dumps({"benchmark": "async_speed", **row}), flush=True)
    best = max((r[f"async_k{k}"]["ratio_vs_sync"], r["workload"]) for r in rows for k in ks if f"async_k{k}" in r)
    at_k2 = {r["workload"]: r["async_k2"]["ratio_vs_sync"] for r in rows if "async_k2" in r}
    print(json.dumps({
        "benchmark": "async_speed", "summary": True, "ratio_at_k2": at_k2, "best_ratio": best[0], "best_workload": best[1],
        "target_at_k2": 1.5, "met": any(v >= 1.5 for v in at_k2.values()),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
