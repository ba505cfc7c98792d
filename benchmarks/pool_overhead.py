"""The cost of Ray: the same rollout work through a ``ray`` pool and the in-process ``local`` pool,
in one run, at growing batch sizes; and the batch size from which Ray keeps up.

The work is the Kuhn poker example's: the tiny model in forced choice in both seats (compact
prompts). ``local`` plays all matches in this process (torch using every core); ``ray`` splits
them over rollout workers of one CPU each on a local Ray started here (start-up reported apart,
not counted). Both play the identical matches (tests/marl/test_pools.py checks the transcripts).

Target (issue 5): ray >= 0.9x local on a batch large enough to matter; the report names the
smallest batch where that holds ("break_even_matches", null if none does).

    python benchmarks/pool_overhead.py [--workers 2] [--matches 32 128 512] [--repeats 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time

import ray
import torch

from marl.members import named_players
from marl.config import PoolConfig, Resources
from marl.pools import LocalPool, MatchPlan, RayPool


def plans(n: int) -> list[MatchPlan]:
    return [MatchPlan("kuhn_poker", seed, {"player_0": "tiny", "player_1": "tiny"}, f"m{seed}") for seed in range(n)]


def best_time(play, work: list[MatchPlan], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        play(work)
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--matches", type=int, nargs="+", default=[4, 16, 64, 256, 1024])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="one small batch: a smoke test")
    args = parser.parse_args()
    sizes = [16] if args.quick else args.matches
    players = named_players("kuhn_poker", ["tiny"], "choose")
    concurrency = 128
    local = LocalPool(concurrency)
    start = time.perf_counter()
    ray.init(address="local", num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    pool = RayPool(PoolConfig(kind="ray", rollout_workers=args.workers, rollout=Resources(cpus=1)), concurrency)
    pool.play(plans(args.workers), players)  # the workers are up and have built their models
    startup = time.perf_counter() - start
    rows = []
    try:
        for n in sizes:
            work = plans(n)
            t_local = best_time(lambda w: local.play(w, players), work, args.repeats)
            t_ray = best_time(lambda w: pool.play(w, players), work, args.repeats)
            rows.append({
                "matches": n, "local_matches_per_s": round(n / t_local, 1), "ray_matches_per_s": round(n / t_ray, 1),
                "ratio_ray_vs_local": round(t_local / t_ray, 3),
            })  # fmt: skip
    finally:
        pool.close()
        ray.shutdown()
    even = next((r["matches"] for r in rows if r["ratio_ray_vs_local"] >= 0.9), None)
    print(json.dumps({
        "benchmark": "pool_overhead", "workers": args.workers, "torch_threads_local": torch.get_num_threads(),
        "ray_startup_s": round(startup, 2), "sizes": rows, "break_even_matches": even, "target": 0.9,
        "met": even is not None,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
