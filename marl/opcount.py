"""Counting what a model call dispatches: torch operators and host syncs, per decoding step.

Why: on a GPU a decoding step of a small model costs what the host spends launching it, and a
host sync (the host waiting for the device to read back a value) stops the host from queueing
the next step while the device works. Both are invisible in CPU timings but countable on the
CPU: the same Python code dispatches the same operators on any device. So the number of
operators per step and the number of syncs per step, measured here on the CPU, predict an
engine's per-step overhead on a GPU (``benchmarks/decode_ops.py``).

A host sync is any of: reading a value (``.item()``, ``float()``, ``bool()`` of a tensor, ``.tolist()``,
``.numpy()``, ``.cpu()``), an operator whose output size depends on values (``nonzero``, boolean
indexing, ``masked_select``, ``unique``, ``repeat_interleave`` without an output size), and a
tensor made from host data (``torch.tensor(list)``, indexing with a Python list), which on a GPU is
a host-to-device copy the host must stage. ``.to(device)`` is not counted: on the CPU a move to
the model's own device cannot be told from a copy to the host.

Steps are told apart by the model's forward passes: a decoding step is a forward pass of one new
token per row, and a step's count runs from the start of its forward pass to the start of the
next one, so it includes the sampling and stopping work between them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_OPS = {
    "aten.item", "aten._local_scalar_dense", "aten.is_nonzero", "aten.nonzero", "aten.masked_select",
    "aten.unique_dim", "aten._unique", "aten._unique2", "aten.unique_consecutive", "aten.equal", "aten.allclose",
}  # fmt: skip
HOST_DATA_OPS = {"aten.lift_fresh"}  # torch.tensor(host data): a host-to-device copy on a GPU
READ_BACK_METHODS = ("tolist", "numpy", "cpu")  # not operators on the CPU: patched to be counted


def _is_sync(func, args: tuple, kwargs: dict) -> bool:
    name = str(func.overloadpacket)
    if name in SYNC_OPS or name in HOST_DATA_OPS:
        return True
    if str(func) in ("aten.repeat_interleave.Tensor", "aten.repeat_interleave.self_Tensor"):
        return kwargs.get("output_size") is None  # repeats given as a tensor: the size comes from its values
    if name in ("aten.index", "aten.index_put", "aten.index_put_"):
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1] if i is not None)
    return False


@dataclass
class Step:
    """What one forward pass and the work after it (up to the next forward pass) dispatched."""

    new_tokens: int  # tokens per row the forward pass took in: 1 for a decoding step
    ops: Counter = field(default_factory=Counter)  # operator name -> count
    syncs: Counter = field(default_factory=Counter)  # operator or method name -> count


@dataclass
class Tally:
    """Every operator and sync of a call, split at the model's forward passes."""


    before: Step = field(default_factory=lambda: Step(0))  # dispatched before the first forward pass
    steps: list[Step] = field(default_factory=list)

    @property
    def current(self) -> Step:
        return self.steps[-1] if self.steps else self.before

    def decoding(self) -> list[Step]:
        """The steady decoding steps: one new token a row, the last one left out (what follows it
        is the call's wrap-up, not a step's work)."""
        return [s for s in self.steps if s.new_tokens == 1][:-1]

    def per_step(self) -> dict[str, float]:
        """Mean operators and syncs per steady decoding step."""
        steps = self.decoding()
        if not steps:
            raise ValueError("no steady decoding steps: generate at least 3 tokens")
        return {"ops": self.op_names().total() / len(steps), "syncs": self.sync_names().total() / len(steps)}

    def op_names(self) -> Counter:
        """Which operators the steady decoding steps dispatch, summed over them."""
        return sum((s.ops for s in self.decoding()), Counter())

    def sync_names(self) -> Counter:
        """Which syncs the steady decoding steps make, summed over them."""
        return sum((s.syncs for s in self.decoding()), Counter())


class _Counting(TorchDispatchMode):
    def __init__(self, tally: Tally):
        super().__init__()
        self.tally = tally

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = str(func.overloadpacket)
        step = self.tally.current
        step.ops[name] += 1
        if _is_sync(func, args, kwargs):
            step.syncs[name] += 1
        return func(*args, **kwargs)


def _language_model(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model under any peft wrapper: its forward pass is one per step."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def count(call: Callable[[], object], model: torch.nn.Module) -> Tally:
    """Run ``call`` (which uses ``model``) and count what it dispatches, split at ``model``'s forward passes."""
    tally = Tally()

    def new_step(module, args, kwargs) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        tally.steps.append(Step(ids.shape[-1] if ids is not None else 0))

    def counted(method: str):
        original = getattr(torch.Tensor, method)

        def wrapper(tensor, *args, **kwargs):
            tally.current.syncs[f"Tensor.{method}"] += 1
            return original(tensor, *args, **kwargs)

        return wrapper

    hook = _language_model(model).register_forward_pre_hook(new_step, with_kwargs=True)
    with ExitStack() as stack:
        stack.callback(hook.remove)
        for method in READ_BACK_METHODS:
            stack.enter_context(mock.patch.object(torch.Tensor, method, counted(method)))
        stack.enter_context(_Counting(tally))
        call()
    return tally
