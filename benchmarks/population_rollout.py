"""A population's rollouts: prefix groups against one prefix for the batch, in the same run.

Four LoRA members on one base play Kuhn poker in free text, each turn shown an example turn
drawn per turn (``rollout.demonstration``), the members paired round-robin, every match in one
batch (as ``examples/kuhn_smollm2_population.toml`` plays them). ``marl.hf.prefix_groups`` runs
each (adapter, example) group's start once; the baseline is the rule it replaced, one prefix for
the whole batch and only when every row has one adapter, so a mixed batch ran every prompt whole.
Both play the same matches, alternating, ``--repeats`` times each; the tokens the model's prefill
passes computed are counted as well (the figure that does not move with the machine's load).

    python benchmarks/population_rollout.py [--model smollm2-135m] [--matches 32] [--repeats 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from peft import LoraConfig

import marl.hf as hf
from marl.models import load_smollm2, load_tiny
from marl.policy import Sampling
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from roles.seat import InvalidMoves

MEMBERS = ["m0", "m1", "m2", "m3"]


def one_prefix(rows: list[list[int]], keep: int, adapters: list[str | None]) -> tuple[int, list[int]]:
    """The rule before prefix groups: the batch's common start, and only under one adapter."""
    if len(set(adapters)) > 1:
        return 0, []
    shared = hf._common_start(rows, min(map(len, rows)) - keep)
    return (shared, [0] * len(rows)) if shared >= hf.PREFIX_MIN else (0, [])


def population(model: str) -> hf.HFPolicy:
    policy = load_smollm2() if model == "smollm2-135m" else load_tiny()
    for name in MEMBERS:
        policy.add_adapter(name, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    return policy


def matches(policy: hf.HFPolicy, count: int) -> list[MatchSpec]:
    def seat(name: str) -> SeatSpec:
        invalid = InvalidMoves.parse("forfeit", -1.5, 0.5)
        return SeatSpec(policy, name, sampling=Sampling(1.0, 1.0, 40), adapter=name, invalid=invalid, demonstrate=True)

    pairs = [(MEMBERS[m % 4], MEMBERS[(m + 1) % 4]) for m in range(count)]
    return [MatchSpec("kuhn_poker", m, {"player_0": seat(a), "player_1": seat(b)}) for m, (a, b) in enumerate(pairs)]


def timed(policy: hf.HFPolicy, specs: list[MatchSpec], rule) -> tuple[float, int, int]:
    """Seconds to play ``specs`` under ``rule``, the tokens prefill passes computed, and the turns."""
    hf.prefix_groups, before = rule, hf.prefix_groups
    counted = [0]

    def count(module, args):
        if args[0].shape[1] > 1:  # a decoding step feeds one token a row; prefill feeds more
            counted[0] += args[0].numel()

    hook = policy.model.get_input_embeddings().register_forward_pre_hook(count)
    try:
        start = time.perf_counter()
        episodes = RolloutEngine(concurrency=len(specs)).play(specs)
        return time.perf_counter() - start, counted[0], sum(len(e.turns) for e in episodes)
    finally:
        hook.remove()
        hf.prefix_groups = before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", choices=["smollm2-135m", "tiny"])
    parser.add_argument("--matches", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="the tiny model, 8 matches, once: a smoke test")
    args = parser.parse_args()
    model, count, repeats = ("tiny", 8, 1) if args.quick else (args.model, args.matches, args.repeats)
    torch.manual_seed(0)
    policy = population(model)
    specs = matches(policy, count)
    rules = {"prefix_groups": hf.prefix_groups, "one_prefix": one_prefix}
    runs: dict[str, list[tuple[float, int, int]]] = {name: [] for name in rules}
    for _ in range(repeats):
        for name, rule in rules.items():
            runs[name].append(timed(policy, specs, rule))
            print(f"{name:14s} {runs[name][-1][0]:6.1f} s  {runs[name][-1][1]:7d} prefill tokens  {runs[name][-1][2]} turns", flush=True)
    best = {name: min(r[0] for r in results) for name, results in runs.items()}
    prefill = {name: results[0][1] for name, results in runs.items()}
    print(json.dumps({
        "model": model, "matches": count, "members": len(MEMBERS), "seconds": best, "prefill_tokens": prefill,
        "turns": {name: results[0][2] for name, results in runs.items()}, "speedup": best["one_prefix"] / best["prefix_groups"],
        "prefill_ratio": prefill["prefix_groups"] / prefill["one_prefix"],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
