"""What a population costs in memory and learner time: N LoRA members (plus one frozen snapshot
each) as adapters on one shared base, against the same members as separate models (each its own
copy of the base with its adapter, a snapshot a copy of that: how populations were held before).

Each (layout, N) is measured in a process of its own: the memory it holds once the members, their
snapshots and learners are built and each learner has run one update (so its optimiser state
exists), minus what the process held before loading any model (``memory_mb``, resident after
freed memory is returned to the system); ``peak_mb`` adds loading's passing copies. The learner time is
that one iteration's updates, every member on its own batch of the same size.

Target (issue 17): 8 adapter members take at most 1.5x the memory of one member (a population of
one, on its base, with its snapshot).

    python benchmarks/population_memory.py [--model smollm2-135m] [--sizes 1 2 4 8] [--quick]
"""

from __future__ import annotations

import argparse
import copy
import ctypes
import gc
import json
import resource
import subprocess
import sys
import time

LAYOUTS = ("adapters", "models")
PROMPT, COMPLETION, SAMPLES = 64, 16, 16  # tokens per sample, samples per member's update


def _resident_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def measure(layout: str, size: int, model: str) -> dict:
    """Build the population in this process and report its memory and one iteration's learner time."""
    import torch

    from marl.config import TrainConfig
    from marl.learner import Learner, TrainSample, load_weights, trainable_weights
    from marl.members import Recipe, build_seat, load_model, lora_config

    torch.manual_seed(0)
    before = _resident_mb()
    config = TrainConfig(model=model, lora={"r": 16})
    bases: dict = {}
    learners, snapshots = [], []
    for i in range(size):
        name = f"m{i}"
        policy = build_seat(Recipe(name, config), bases).policy if layout == "adapters" else load_model(config, name)
        if layout == "adapters":  # the snapshot: a frozen adapter beside the member's
            policy.add_adapter(f"{name}@0", lora_config(config), trainable=False)
            load_weights(policy.model, trainable_weights(policy.model, name), f"{name}@0")
        else:  # the snapshot: a frozen copy of the member's model
            snapshots.append(copy.deepcopy(policy).model.requires_grad_(False))
        learners.append(Learner(policy, config.optim, adapter=name))
    vocab = learners[0].policy.model.config.vocab_size
    start = time.perf_counter()
    for i, learner in enumerate(learners):
        rng = torch.Generator().manual_seed(i)
        batch = [
            TrainSample(
                torch.randint(vocab, (PROMPT,), generator=rng).tolist(),
                torch.randint(vocab, (COMPLETION,), generator=rng).tolist(),
                1.0 if s % 2 else -1.0, f"m{i}",
            )  # fmt: skip
            for s in range(SAMPLES)
        ]
        learner.update(batch)
    learner_s = time.perf_counter() - start
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    held, peak = _resident_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "layout": layout, "members": size, "memory_mb": round(held - before, 1), "peak_mb": round(peak - before, 1),
        "learner_s": round(learner_s, 3),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="tiny | smollm2-135m | hf:<path>")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--quick", action="store_true", help="the tiny model, 1 and 2 members (for the tests)")
    parser.add_argument("--child", nargs=2, metavar=("LAYOUT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child[0], int(args.child[1]), args.model)))
        return
    model, sizes = ("tiny", [1, 2]) if args.quick else (args.model, args.sizes)
    rows = []
    for size in sizes:
        for layout in LAYOUTS:
            done = subprocess.run(
                [sys.executable, __file__, "--model", model, "--child", layout, str(size)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(f"{layout:>8} x{size}: {rows[-1]['memory_mb']:8.1f} MB, learner {rows[-1]['learner_s']:.2f} s", file=sys.stderr)
    by = {(r["layout"], r["members"]): r for r in rows}
    one, most = by["adapters", sizes[0]], by["adapters", sizes[-1]]
    print(json.dumps({
        "model": model, "rows": rows,
        "memory_ratio_models_over_adapters": {n: round(by["models", n]["memory_mb"] / by["adapters", n]["memory_mb"], 2) for n in sizes},
        "learner_ratio_models_over_adapters": {n: round(by["models", n]["learner_s"] / by["adapters", n]["learner_s"], 2) for n in sizes},
        f"adapters_{sizes[-1]}_over_{sizes[0]}": round(most["memory_mb"] / one["memory_mb"], 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
