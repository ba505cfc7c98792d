"""The model paths on an accelerator, one prepared script: generation, learning and a short
training run, each against a bare baseline measured in the same run, with peak device memory.

(a) the rollout engine's model call (``HFPolicy.act``: per-request sampling and log-probs, the
    shared prompt prefix computed once) with each decoding loop (``generate``: transformers'
    generate; ``static``: ``marl.decode``, a static cache and no per-token host sync;
    ``static_compiled``: its step under ``torch.compile``, CUDA graphs on a GPU) against a bare
    batched ``model.generate`` that samples on the very same prompts, tokens/s, for a
    SmolLM2-135M-shaped and a Qwen2-1.5B-shaped model (random weights from
    ``benchmarks/configs/``: nothing is downloaded, and random weights cost the same FLOPs),
    batches 64 and 256, a fixed generation length; each path also as a fraction of the
    memory-bandwidth bound: a decoding step must read every weight and the batch's KV cache
    once, so tokens/s <= B × bandwidth / (weight bytes + KV bytes read per step), with the
    bandwidth measured here (a device-to-device copy of 1 GiB);
(b) the learner (old log-probs, then PPO epochs) against bare forward + backward + AdamW passes on
    the same batch, tokens/s, and model FLOP utilisation, MFU = (2 + 6 × epochs) × parameters ×
    tokens / seconds / peak (2 × parameters a token for the old log-probs' forward pass, 6 × for
    each epoch's forward and backward; the bare step's 6 × epochs), against the bf16 matrix rate
    measured here;
(c) ``examples/kuhn_tiny.toml`` for 20 iterations on the device: its exact exploitability should
    fall as it does on the CPU;
(d) each figure's peak device memory.

Targets (issue 41): engine >= 1.0x bare generate at batches 64 and 256 on both shapes; learner
>= 0.9x bare step and MFU >= 35% on the 1.5B shape.

Needs only torch, transformers and peft besides this project's pure-Python dependencies (the
local pool; no Ray, no vLLM). ``--smoke`` runs every part CPU-sized in seconds, which the tests
do; on an H200 the default sizes took 3 minutes. One JSON line per figure, a table last.
``--profile`` only profiles, for the first shape: one engine call with each loop and one bare
``generate`` (the first batch, 32 tokens), one learner update and the bare passes: the operators
with the most host and device time in each.

    python benchmarks/gpu.py [--device cuda] [--smoke] [--profile]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity
from learner_speed import bare_passes
from rollout_speed import bare_generate_rate
from transformers import AutoConfig, AutoModelForCausalLM

from marl.config import load_config
from marl.device import resolve_device, resolve_dtype
from marl.hf import HFPolicy
from marl.learner import Learner, OptimConfig, TrainSample
from marl.models import TINY_CONFIG, byte_tokenizer
from marl.policy import Request, Sampling
from coevo.train import Trainer

ROOT = Path(__file__).parent
SHAPES = {"smollm2-135m": ROOT / "configs" / "smollm2_135m.json", "qwen2-1.5b": ROOT / "configs" / "qwen2_1_5b.json"}
FULL = {"shapes": list(SHAPES), "batches": [64, 256], "new_tokens": 128, "prompt": 192, "samples": 64, "completion": 64,
        "micro_batch": 16, "kuhn_iterations": 20}  # fmt: skip
SMOKE = {"shapes": ["tiny"], "batches": [4], "new_tokens": 4, "prompt": 24, "samples": 4, "completion": 4,
         "micro_batch": 2, "kuhn_iterations": 2}  # fmt: skip


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_mb(device: torch.device) -> float | None:
    return round(torch.cuda.max_memory_allocated(device) / 2**20, 1) if device.type == "cuda" else None


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def matmul_rate(device: torch.device, dtype: torch.dtype, size: int) -> float:
    """FLOP/s of a square matrix product at the run's dtype: the ceiling MFU is measured against."""
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):
        a @ b
    synchronize(device)
    start, repeats = time.perf_counter(), 20
    for _ in range(repeats):
        a @ b
    synchronize(device)
    return 2 * size**3 * repeats / (time.perf_counter() - start)


def copy_rate(device: torch.device, size: int) -> float:
    """Bytes/s of a device-to-device copy of ``size`` bytes (each byte read once and written once):
    the memory bandwidth a decoding step's reads are bounded by."""
    source = torch.empty(size // 2, dtype=torch.bfloat16, device=device)
    target = torch.empty_like(source)
    target.copy_(source)
    synchronize(device)
    start, repeats = time.perf_counter(), 10
    for _ in range(repeats):
        target.copy_(source)
    synchronize(device)
    return 2 * size * repeats / (time.perf_counter() - start)


def bound_rate(policy: HFPolicy, batch: int, context: int, bandwidth: float) -> float:
    """Tokens/s no decoder can beat at ``batch`` rows of mean ``context`` tokens: each step reads
    every weight and each row's keys and values once."""
    config = policy.model.config
    weights = sum(p.numel() * p.element_size() for p in policy.model.parameters())
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    element = next(policy.model.parameters()).element_size()
    kv = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * element * context * batch
    return batch * bandwidth / (weights + kv)


def shaped_model(shape: str, device: torch.device, dtype: torch.dtype) -> HFPolicy:
    """A model of ``shape`` with random weights (seeded), SDPA attention, the byte tokenizer for
    prompts (the ids it writes need no tokenizer of their own: random weights write noise)."""
    config = AutoConfig.from_pretrained(TINY_CONFIG if shape == "tiny" else SHAPES[shape])
    torch.manual_seed(0)
    with device:
        model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    return HFPolicy(model, byte_tokenizer(), shape)


def prompts(count: int, length: int) -> list[str]:
    """Prompts sharing a system-like start, as a batch of one game's turns does, each ``length`` bytes."""
    shared = "You are playing Kuhn poker against another player. Play to win. " * 8
    return [(shared[: length // 2] + f" Match {i}: your card is {'JQK'[i % 3]}. " * 40)[:length] for i in range(count)]


def sampled_requests(batch: int, new_tokens: int, prompt: int) -> list[Request]:
    """``batch`` requests at temperature 1, each seeded by its index, on :func:`prompts`."""
    return [Request(p, Sampling(1.0, 1.0, new_tokens), seed=i) for i, p in enumerate(prompts(batch, prompt))]


LOOPS = {"generate": ("generate", False), "static": ("static", False), "static_compiled": ("static", True)}


def generation(policy: HFPolicy, batch: int, sizes: dict, device: torch.device, bandwidth: float, loops: list[str]) -> dict:
    """(a): tokens/s of ``act`` with each decoding loop against bare sampling ``generate`` on the
    same prompts, and each as a fraction of the memory-bandwidth bound."""
    new_tokens, prompt = sizes["new_tokens"], sizes["prompt"]
    requests = sampled_requests(batch, new_tokens, prompt)
    rates, peaks = {}, {}
    for loop in loops:
        policy.decode, policy.compile = LOOPS[loop]
        warm_up(policy, requests, compiled=policy.compile)
        reset_peak(device)
        synchronize(device)
        start = time.perf_counter()
        responses = policy.act(requests)
        synchronize(device)
        rates[loop] = sum(len(r.completion_ids) for r in responses) / (time.perf_counter() - start)
        peaks[loop] = peak_mb(device)
    policy.decode, policy.compile = "auto", False
    reset_peak(device)
    rates["bare_generate"] = bare_generate_rate(policy, [r.prompt_ids for r in responses], batch, new_tokens, batches=1)
    peaks["bare_generate"] = peak_mb(device)
    bound = bound_rate(policy, batch, prompt + new_tokens // 2, bandwidth)
    return {
        "figure": "generation", "model": policy.name, "batch": batch, "new_tokens": new_tokens,
        "tokens_per_s": {path: round(rate, 1) for path, rate in rates.items()},
        "ratio_vs_bare": {loop: round(rates[loop] / rates["bare_generate"], 3) for loop in loops}, "target": 1.0,
        "bandwidth_bound_tokens_per_s": round(bound, 1),
        "fraction_of_bound": {path: round(rate / bound, 4) for path, rate in rates.items()},
        "peak_mb": peaks,
    }  # fmt: skip


def warm_up(policy: HFPolicy, requests: list[Request], compiled: bool) -> None:
    """Both paths once at the timed batch size, a few tokens long: kernels load lazily on a GPU,
    and a path timed cold would pay for loading what the other then finds loaded. A compiled loop
    runs at the timed length too: its cache's shape is what it compiles (and records graphs) for."""
    short = [Request(r.messages, Sampling(1.0, 1.0, 8), seed=r.seed) for r in requests]
    bare_generate_rate(policy, policy.encode([r.messages for r in short]), len(short), 8, batches=1)
    policy.act(requests if compiled else short)


def profile(paths: dict[str, Callable[[], object]], device: torch.device) -> str:
    """Where each path's time goes: the operators with the most host time (and device time on a
    GPU), each path run once to warm up, then once profiled. The engine's and the learner's gaps
    to their bare baselines on a GPU are costs that the CPU does not show; this names them."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sections = []
    for name, run in paths.items():
        run()
        synchronize(device)
        with torch.profiler.profile(activities=activities) as prof:
            run()
            synchronize(device)
        ops = prof.key_averages()
        sections.append(f"## {name}: by host time\n{ops.table(sort_by='self_cpu_time_total', row_limit=15)}")
        if device.type == "cuda":
            sections.append(f"## {name}: by device time\n{ops.table(sort_by='self_cuda_time_total', row_limit=10)}")
    return "\n".join(sections)


def profiled_paths(policy: HFPolicy, sizes: dict) -> dict[str, Callable[[], object]]:
    """The engine and bare generate (the first batch size, a quarter of the tokens), then the
    learner and bare passes, on the inputs their figures time."""
    batch, tokens = sizes["batches"][0], max(1, sizes["new_tokens"] // 4)
    requests = sampled_requests(batch, tokens, sizes["prompt"])
    ids = policy.encode([r.messages for r in requests])
    samples, config = train_batch(policy, sizes), optim_config(sizes)
    learner = Learner(policy, config)
    def engine(loop: str) -> Callable[[], object]:
        def run() -> object:
            policy.decode = loop
            return policy.act(requests)

        return run

    return {
        f"engine (generate loop), batch {batch}, {tokens} tokens": engine("generate"),
        f"engine (static loop), batch {batch}, {tokens} tokens": engine("static"),
        f"bare generate, batch {batch}, {tokens} tokens": lambda: bare_generate_rate(policy, ids, batch, tokens, 1),
        f"learner, {len(samples)} samples": lambda: learner.update(samples),
        f"bare passes, {len(samples)} samples": lambda: bare_passes(policy, samples, config.epochs, config.micro_batch, config.lr),
    }


def train_batch(policy: HFPolicy, sizes: dict) -> list[TrainSample]:
    """Random prompts and completions, half of them rewarded: what the learner's figure times."""
    rng = torch.Generator().manual_seed(0)
    vocab = policy.model.config.vocab_size
    return [
        TrainSample(
            torch.randint(0, 256, (sizes["prompt"],), generator=rng).tolist(),
            torch.randint(0, vocab, (sizes["completion"],), generator=rng).tolist(),
            1.0 if i % 2 else -1.0,
        )
        for i in range(sizes["samples"])
    ]


def optim_config(sizes: dict) -> OptimConfig:
    return OptimConfig(epochs=2, micro_batch=sizes["micro_batch"], lr=1e-5)


def learning(policy: HFPolicy, sizes: dict, device: torch.device, peak_flops: float) -> dict:
    """(b): the learner's iteration against bare passes on the same batch, tokens/s and MFU."""
    policy.model.requires_grad_(True)
    batch, config = train_batch(policy, sizes), optim_config(sizes)
    epochs = config.epochs
    learner = Learner(policy, config)
    initial = learner.weights()
    tokens = sum(len(s.prompt_ids) + len(s.completion_ids) for s in batch)
    reset_peak(device)
    bare_passes(policy, batch[:2], 1, 2, config.lr)  # warm-up
    synchronize(device)
    bare = bare_passes(policy, batch, epochs, config.micro_batch, config.lr)
    synchronize(device)
    bare_peak = peak_mb(device)
    learner.load_weights(initial)
    reset_peak(device)
    synchronize(device)
    start = time.perf_counter()
    learner.update(batch)
    synchronize(device)
    seconds = time.perf_counter() - start
    params = sum(p.numel() for p in policy.model.parameters())
    learner_flops = (2 + 6 * epochs) * params * tokens  # old log-probs (forward), then epochs × (forward + backward)
    bare_flops = 6 * epochs * params * tokens
    return {
        "figure": "learning", "model": policy.name, "samples": len(batch), "tokens_per_sample": sizes["prompt"] + sizes["completion"],
        "tokens_per_s": {"learner": round(tokens * epochs / seconds, 1), "bare_step": round(tokens * epochs / bare, 1)},
        "ratio_vs_bare": round(bare / seconds, 3), "target": 0.9,
        "mfu": {"learner": round(learner_flops / seconds / peak_flops, 4), "bare_step": round(bare_flops / bare / peak_flops, 4)},
        "mfu_formula": f"(2 + 6 x {epochs} epochs) x {params} parameters x {tokens} tokens / seconds / {peak_flops:.3g} FLOP/s "
                       f"(bare: 6 x {epochs} x parameters x tokens / seconds / peak)",
        "peak_mb": {"learner": peak_mb(device), "bare_step": bare_peak},
    }  # fmt: skip


def kuhn(iterations: int, device: torch.device, smoke: bool) -> dict:
    """(c): examples/kuhn_tiny.toml on ``device``; its exploitability at every iteration."""
    overrides = [f"iterations={iterations}", f"device={device}", "eval.every=0", f"checkpoint_every={iterations}"]
    if smoke:
        overrides += ["rollout.matches=8"]
    config = load_config(ROOT.parent / "examples" / "kuhn_tiny.toml", overrides)
    curve: list[float] = []
    reset_peak(device)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as run_dir:
        Trainer(config, Path(run_dir)).run(on_iteration=lambda _, metrics: curve.append(round(metrics["kuhn/exploitability"], 4)))
    return {
        "figure": "kuhn_tiny", "device": str(device), "iterations": iterations, "exploitability": curve,
        "fell": curve[-1] < curve[0], "seconds": round(time.perf_counter() - start, 1), "peak_mb": peak_mb(device),
    }  # fmt: skip


def table(rows: list[dict]) -> str:
    lines = ["| figure | model | size | ours | bare | ratio | MFU ours / bare | bandwidth bound ours / bare | peak MB ours / bare |",
             "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        if r["figure"] == "kuhn_tiny":
            lines.append(f"| kuhn_tiny | tiny | {r['iterations']} it | {r['exploitability'][0]} → {r['exploitability'][-1]} | | | | | {r['peak_mb']} |")
            continue
        if r["figure"] == "generation":
            rates, bare = r["tokens_per_s"], r["tokens_per_s"]["bare_generate"]
            for loop, ratio in r["ratio_vs_bare"].items():
                lines.append(f"| generation ({loop}) | {r['model']} | batch {r['batch']} | {rates[loop]} tok/s | {bare} tok/s | "
                             f"{ratio} | | {r['fraction_of_bound'][loop]} / {r['fraction_of_bound']['bare_generate']} | "
                             f"{r['peak_mb'][loop]} / {r['peak_mb']['bare_generate']} |")  # fmt: skip
            continue
        ours, bare = r["tokens_per_s"].values()
        mfu = " / ".join(map(str, r["mfu"].values()))
        lines.append(f"| learning | {r['model']} | {r['samples']} × {r['tokens_per_sample']} | {ours} tok/s | {bare} tok/s | "
                     f"{r['ratio_vs_bare']} | {mfu} | | {' / '.join(map(str, r['peak_mb'].values()))} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--smoke", action="store_true", help="every part CPU-sized, to check the script runs")
    parser.add_argument("--profile", action="store_true", help="only profile the engine, bare generate, the learner and bare passes (first shape)")
    args = parser.parse_args()
    device = resolve_device(args.device)
    dtype = resolve_dtype("auto", device)
    sizes = SMOKE if args.smoke else FULL
    if args.profile:
        policy = shaped_model(sizes["shapes"][0], device, dtype)
        policy.model.requires_grad_(True)
        print(profile(profiled_paths(policy, sizes), device))
        return
    peak_flops = matmul_rate(device, dtype, 256 if args.smoke else 8192)
    bandwidth = copy_rate(device, 2**20 if args.smoke else 2**30)
    loops = ["generate", "static"] + ([] if args.smoke else ["static_compiled"])  # compiling on a CPU takes minutes
    rows = []

    def emit(row: dict) -> None:
        rows.append(row)
        print(json.dumps({"benchmark": "gpu", **row}), flush=True)

    print(json.dumps({"benchmark": "gpu", "figure": "matmul", "device": str(device), "dtype": str(dtype), "flops": peak_flops,
                      "copy_bytes_per_s": bandwidth}), flush=True)  # fmt: skip
    for shape in sizes["shapes"]:
        policy = shaped_model(shape, device, dtype)
        for batch in sizes["batches"]:
            emit(generation(policy, batch, sizes, device, bandwidth, loops))
        emit(learning(policy, sizes, device, peak_flops))
        del policy
    emit(kuhn(sizes["kuhn_iterations"], device, args.smoke))
    print(table(rows))


if __name__ == "__main__":
    main()
