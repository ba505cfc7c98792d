"""Torch operators and host syncs per decoding step: the engine's two loops against bare greedy
``generate`` on the same batch, counted on the CPU (``marl.opcount``).

Why count instead of time: on a GPU, a small model's decoding step costs what the host spends
dispatching it, and a host sync stops the host from queueing the next step while the device
runs this one. Neither shows in CPU timings; both are the same count on any device. Targets
(issue 41), for the loop the engine uses on a GPU (``static``): syncs per step no more than bare
generate's, operators per step at most 1.1x bare generate's.

For ``tiny`` and a SmolLM2-135M-shaped model (random weights, ``benchmarks/configs/``), batch 8,
sampled at temperature 1 with per-request seeds, 24 new tokens. One JSON line per model.

    python benchmarks/decode_ops.py [--models tiny smollm2-135m]
"""

from __future__ import annotations

import argparse
import json

import torch
from gpu import sampled_requests, shaped_model

from marl.hf import HFPolicy
from marl.models import load_tiny
from marl.opcount import Tally, count

BATCH, NEW_TOKENS, PROMPT = 8, 24, 64


def bare_greedy(policy: HFPolicy, prompts: list[list[int]], new_tokens: int) -> None:
    """Bare ``generate``, greedy: its per-step work with no sampling at all."""
    ids, mask = policy._left_pad(prompts)
    with torch.inference_mode():
        policy.model.generate(
            input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
            top_k=None, top_p=None, temperature=None, pad_token_id=policy.pad_id, eos_token_id=sorted(policy.eos_ids),
        )  # fmt: skip


def tallies(policy: HFPolicy, batch: int = BATCH, new_tokens: int = NEW_TOKENS) -> dict[str, Tally]:
    """What each path dispatches on the same requests: the engine with each loop, and bare generate."""
    requests = sampled_requests(batch, new_tokens, PROMPT)
    prompts = policy.encode([r.messages for r in requests])
    out = {}
    for loop in ("generate", "static"):
        policy.decode = loop
        out[f"engine_{loop}"] = count(lambda: policy.act(requests), policy.model)
    out["bare_generate_greedy"] = count(lambda: bare_greedy(policy, prompts, new_tokens), policy.model)
    policy.decode = "auto"
    return out


def report(name: str, counted: dict[str, Tally]) -> dict:
    per_step = {path: tally.per_step() for path, tally in counted.items()}
    bare = per_step["bare_generate_greedy"]
    fast = per_step["engine_static"]
    return {
        "benchmark": "decode_ops", "model": name, "batch": BATCH, "new_tokens": NEW_TOKENS,
        "per_step": {path: {k: round(v, 2) for k, v in counts.items()} for path, counts in per_step.items()},
        "ops_ratio_vs_bare": {path: round(counts["ops"] / bare["ops"], 3) for path, counts in per_step.items()},
        "syncs_by_name": {path: dict(tally.sync_names()) for path, tally in counted.items()},
        "targets_met": {"syncs": fast["syncs"] <= bare["syncs"], "ops_within_10pct": fast["ops"] <= 1.1 * bare["ops"]},
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["tiny", "smollm2-135m"])
    args = parser.parse_args()
    for name in args.models:
        policy = load_tiny() if name == "tiny" else shaped_model(name, torch.device("cpu"), torch.float32)
        print(json.dumps(report(name, tallies(policy))), flush=True)


if __name__ == "__main__":
    main()
