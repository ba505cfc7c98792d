"""Where a model computes and in what precision, and what to do when its device runs out of memory.

One setting for every model path (``device`` and ``dtype`` in a run config): ``auto`` is the GPU
when torch sees one and the CPU otherwise, bf16 on a GPU and fp32 on the CPU. Inside a Ray actor
``auto`` is the GPU Ray assigned it: Ray sets ``CUDA_VISIBLE_DEVICES`` to the actor's devices, so
``cuda`` there is the actor's own, and an actor given no GPU sees none and computes on its CPUs.

Log-softmax, losses, KL and advantages are computed in fp32 whatever the weights' dtype; LoRA
adapters stay fp32 on a bf16 base (peft upcasts them), so an adapter's updates are not rounded
away.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
T = TypeVar("T")
Item = TypeVar("Item")


class OutOfMemoryRetry(UserWarning):
    """A batch did not fit on its device and is being run again at half its size."""


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` | ``cpu`` | ``cuda`` | ``cuda:N`` as a device torch can use; ValueError naming the
    choices when it names one this machine lacks."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ValueError(f"unknown device {name!r}; choose auto, cpu, cuda or cuda:N") from None
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {name!r}; choose auto, cpu, cuda or cuda:N")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            seen = f"{count} CUDA device(s)" if count else "no CUDA device"
            raise ValueError(f"device {name!r}: torch sees {seen} here; use auto or cpu")
    return device


def resolve_dtype(name: str, device: torch.device, full_training: bool = False) -> torch.dtype:
    """``auto`` (bf16 on CUDA, fp32 elsewhere), ``float32`` or ``bfloat16``. ``auto`` stays fp32
    for a model whose every weight trains: with no fp32 master copy, bf16 rounds AdamW steps
    below ~1/256 of a weight to nothing (LoRA adapters are fp32 on a bf16 base, so they are safe)."""
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" and not full_training else torch.float32
    return DTYPES[name]


def host_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A detached CPU copy: what leaves a model (checkpoints, snapshots, Ray messages) loads on any device."""
    return tensor.detach().to("cpu", copy=True)


def on_host(state):
    """``state`` (nested dicts and lists, as a ``state_dict`` is) with every tensor a CPU copy."""
    if isinstance(state, torch.Tensor):
        return host_copy(state)
    if isinstance(state, dict):
        return {key: on_host(value) for key, value in state.items()}
    if isinstance(state, list | tuple):
        return type(state)(map(on_host, state))
    return state


def halving_on_oom(run: Callable[[int], T], size: int, what: str) -> tuple[T, int]:
    """``run(size)``, and on an out-of-memory error ``run(size // 2)`` after one warning, down to
    size 1 (then the error stands). Returns the result and the size that fitted, for the caller
    to keep: a batch that did not fit once will not fit next iteration either. ``run`` must start
    from scratch each call (no half-accumulated gradients carried over)."""
    while True:
        try:
            return run(size), size
        except torch.OutOfMemoryError:
            if size <= 1:
                raise
        size //= 2  # out of the except block: the failed pass's tensors are free now
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        warnings.warn(f"{what}: out of device memory; running it again at half size ({size})", OutOfMemoryRetry, stacklevel=2)


def in_parts_on_oom(items: Sequence[Item], run: Callable[[Sequence[Item]], list[T]], what: str, size: int) -> tuple[list[T], int]:
    """``run`` over ``items`` in parts of ``size``; after an out-of-memory error, in parts of half
    that (then a quarter…), the results in order: for passes without state to undo (generation,
    scoring). Returns the results and the part size that fitted."""
    def in_parts(part: int) -> list[T]:
        return [out for start in range(0, len(items), part) for out in run(items[start : start + part])]

    return halving_on_oom(in_parts, max(1, min(size, len(items))), what)
