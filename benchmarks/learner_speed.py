"""Learner tokens per second against a bare forward + backward + step of the same model on the same
batch, in one run.

The batch is real: the turns of 64 Kuhn poker matches played by the model in both seats (free
text, 32 new tokens a turn). The learner's iteration (old log-probs recomputed, then ``epochs``
PPO-clip passes) is timed against ``epochs`` bare passes — left-padded forward, token log-probs,
backward, AdamW step — and both are credited the same tokens: prompt and completion, per epoch.

Target (issue 4): learner >= 0.85x bare.

First, one line on packing (issue 41): rows of very different lengths (prompts of 16-256 random
tokens, completions of 4-32), one forward pass of the learner's log-probs and its backward pass,
packed end to end (``marl.packing``, the learner's layout) against left-padded to the longest
row, same rows: tokens computed and seconds for each.

    python benchmarks/learner_speed.py [--model tiny] [--epochs 2] [--quick]
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch

from marl.learner import Learner, OptimConfig, TrainSample
from marl.packing import first_fit
from marl.players import model
from marl.policy import Sampling
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from roles.seat import InvalidMoves


def batch_of_turns(name: str, matches: int) -> list[TrainSample]:
    policy = model(name)
    seat = SeatSpec(policy, name, sampling=Sampling(1.0, 1.0, 32), invalid=InvalidMoves("random_legal"))
    episodes = RolloutEngine(concurrency=matches).play(
        [MatchSpec("kuhn_poker", seed, {"player_0": seat, "player_1": seat}) for seed in range(matches)]
    )
    return [TrainSample(t.prompt_ids, t.completion_ids, 1.0 if i % 2 else -1.0) for i, t in enumerate(
        t for ep in episodes for t in ep.turns if t.completion_ids)]  # fmt: skip


def bare_passes(policy, samples: list[TrainSample], epochs: int, micro_batch: int, lr: float) -> float:
    """Seconds for ``epochs`` plain passes: forward, mean token log-prob loss, backward, step."""
    optimizer = torch.optim.AdamW([p for p in policy.model.parameters() if p.requires_grad], lr=lr)
    start = time.perf_counter()
    for _ in range(epochs):
        optimizer.zero_grad()
        for i in range(0, len(samples), micro_batch):
            chunk = samples[i : i + micro_batch]
            ids, mask = policy._left_pad([s.prompt_ids + s.completion_ids for s in chunk])
            logits = policy.model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()  # (N, S-1, V)
            token_lp = torch.log_softmax(logits, -1).gather(2, ids[:, 1:, None]).squeeze(2)
            loss = -(token_lp * mask[:, 1:]).sum() / mask.sum()
            loss.backward()
        optimizer.step()
    return time.perf_counter() - start


def packing_figure(policy, rows: int, repeats: int) -> dict:
    """Packed against left-padded, one learner pass (forward, token log-probs, backward) each."""
    rng = random.Random(0)
    prompts = [[rng.randrange(256) for _ in range(rng.randint(16, 256))] for _ in range(rows)]
    completions = [[rng.randrange(256) for _ in range(rng.randint(4, 32))] for _ in range(rows)]
    seconds = {}
    for name, run in (("packed", policy._whole_rows), ("padded", policy._padded_rows)) * 2:  # the second round is timed
        start = time.perf_counter()
        for _ in range(repeats):
            logits, targets, real = run(prompts, completions, [None] * rows, True)
            torch.log_softmax(logits.float(), -1).gather(2, targets[..., None])[real].sum().backward()
        seconds[name] = (time.perf_counter() - start) / repeats
    lengths = [len(p) + len(c) for p, c in zip(prompts, completions)]
    bins = len(first_fit(lengths, [None] * rows))
    return {
        "benchmark": "learner_speed", "figure": "packing", "rows": rows,
        "tokens_computed": {"real": sum(lengths), "packed": bins * max(lengths), "padded": rows * max(lengths)},
        "seconds": {k: round(v, 4) for k, v in seconds.items()}, "speedup": round(seconds["padded"] / seconds["packed"], 3),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="a tiny batch, to check the script runs")
    args = parser.parse_args()
    samples = batch_of_turns(args.model, 4 if args.quick else 64)
    policy = model(args.model)
    policy.model.requires_grad_(True)
    print(json.dumps(packing_figure(policy, 4 if args.quick else 32, 1 if args.quick else 3)), flush=True)
    policy.model.zero_grad(set_to_none=True)
    config = OptimConfig(epochs=args.epochs, micro_batch=32, lr=1e-4)
    learner = Learner(policy, config)
    initial = learner.weights()
    tokens = sum(len(s.prompt_ids) + len(s.completion_ids) for s in samples) * args.epochs
    bare = bare_passes(policy, samples, args.epochs, config.micro_batch, config.lr)
    learner.load_weights(initial)
    start = time.perf_counter()
    learner.update(samples)
    learner_time = time.perf_counter() - start
    print(json.dumps({
        "benchmark": "learner_speed", "model": args.model, "samples": len(samples), "epochs": args.epochs,
        "tokens_per_s": {"learner": round(tokens / learner_time, 1), "bare": round(tokens / bare, 1)},
        "ratio_vs_bare": round(bare / learner_time, 3), "target": 0.85, "met": bare / learner_time >= 0.85,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
