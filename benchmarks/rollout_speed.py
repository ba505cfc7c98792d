"""Generated tokens per second: the rollout engine against a bare ``model.generate`` and against
playing the same matches one at a time, all in one run on the same model.

For each model: 3N tic-tac-toe matches played N at a time (finished matches are replaced at
once, so the batch stays full but for the last few), the model in both seats (sampling at
temperature 1, a fixed ``max_new_tokens``; invalid output plays a random legal move so matches run
their length). Then a bare ``model.generate`` on batches of N of the very prompts the engine saw
(so the same lengths), and the engine again with one match at a time on the first few matches.

Targets (issue 3): engine >= 0.8x bare generate, and >= 5x one at a time.

    python benchmarks/rollout_speed.py [--models tiny,smollm2-135m] [--quick]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from marl.hf import HFPolicy
from marl.players import model
from marl.policy import Sampling
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from roles.seat import InvalidMoves

# 64 new tokens a turn: the size DESIGN.md measured SmolLM2 at (16 x 64), short of real reasoning.
SETTINGS = {"tiny": {"n": 64, "max_new_tokens": 64}, "smollm2-135m": {"n": 16, "max_new_tokens": 64}}


def specs(policy: HFPolicy, name: str, count: int, max_new_tokens: int) -> list[MatchSpec]:
    seat = SeatSpec(policy, name, sampling=Sampling(1.0, 1.0, max_new_tokens), invalid=InvalidMoves("random_legal"))
    return [MatchSpec("tictactoe", seed, {"player_0": seat, "player_1": seat}) for seed in range(count)]


def engine_rate(matches: list[MatchSpec], concurrency: int) -> tuple[float, list[list[int]]]:
    start = time.perf_counter()
    episodes = RolloutEngine(concurrency=concurrency).play(matches)
    elapsed = time.perf_counter() - start
    turns = [t for ep in episodes for t in ep.turns]
    return sum(len(t.completion_ids) for t in turns) / elapsed, [t.prompt_ids for t in turns]


def bare_generate_rate(
    policy: HFPolicy, prompts: list[list[int]], n: int, max_new_tokens: int, batches: int, sample: bool = True
) -> float:
    """``model.generate`` alone on batches of n recorded prompts: no parsing, no games, no records.

    ``sample=False`` decodes greedily: no sampling cost at all, the floor of what generate can do.
    """
    tokens, elapsed = 0, 0.0
    for b in range(batches):
        ids, mask = policy._left_pad(prompts[b * n : (b + 1) * n])
        start = time.perf_counter()
        with torch.inference_mode():
            out = policy.model.generate(
                input_ids=ids, attention_mask=mask, max_new_tokens=max_new_tokens, do_sample=sample,
                top_k=None, top_p=None, temperature=None, pad_token_id=policy.pad_id,
                eos_token_id=sorted(policy.eos_ids),
            )  # fmt: skip
        elapsed += time.perf_counter() - start
        new = out[:, ids.shape[1] :]
        for row in new.tolist():  # count up to and including the end-of-turn token, as the engine does
            end = next((i + 1 for i, t in enumerate(row) if t in policy.eos_ids), len(row))
            tokens += end
    return tokens / elapsed


def measure(name: str, n: int, max_new_tokens: int, one_at_a_time: int, bare_batches: int) -> dict:
    policy = model(name)
    engine, prompts = engine_rate(specs(policy, name, 3 * n, max_new_tokens), concurrency=n)
    bare = bare_generate_rate(policy, prompts, n, max_new_tokens, bare_batches)
    greedy = bare_generate_rate(policy, prompts, n, max_new_tokens, bare_batches, sample=False)
    serial, _ = engine_rate(specs(policy, name, one_at_a_time, max_new_tokens), concurrency=1)
    return {
        "n": n,
        "max_new_tokens": max_new_tokens,
        "tokens_per_s": {
            "engine": round(engine, 1),
            "bare_generate": round(bare, 1),  # sampling with multinomial, as generate does
            "bare_generate_greedy": round(greedy, 1),  # no sampling cost: the engine's overhead shows against this
            "one_at_a_time": round(serial, 1),
        },
        "ratio_vs_bare_generate_greedy": round(engine / greedy, 3),
        "ratio_vs_bare_generate": round(engine / bare, 3),
        "ratio_vs_one_at_a_time": round(engine / serial, 3),
        "met": engine / bare >= 0.8 and engine / serial >= 5,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="tiny,smollm2-135m", help="comma-separated model names")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to check the script runs")
    args = parser.parse_args()
    torch.manual_seed(0)
    results = {}
    for name in args.models.split(","):
        if args.quick:
            results[name] = measure(name, n=4, max_new_tokens=4, one_at_a_time=1, bare_batches=1)
        else:
            size = SETTINGS[name]
            results[name] = measure(name, size["n"], size["max_new_tokens"], one_at_a_time=2, bare_batches=3)
    print(json.dumps({"benchmark": "rollout_speed", "targets": {"vs_bare_generate": 0.8, "vs_one_at_a_time": 5.0}, **results}))


if __name__ == "__main__":
    main()
