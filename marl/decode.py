"""Decoding into a static KV cache: the fast path of :meth:`marl.hf.HFPolicy.act` on a GPU.

``model.generate`` grows its cache by concatenation (a new allocation per layer per step),
rebuilds the attention mask and the position ids every step, and asks the host whether every
row has finished after every token (a host sync: the host cannot queue step t + 1 while the
device runs step t). This loop instead

- writes each step's keys and values in place, at one cache slot per row that all layers share
  (``SlotCache``: transformers' static layers, minus their per-layer position bookkeeping),
- keeps the attention mask as one boolean (B, 1, 1, C) tensor that each step marks one slot
  of, in place, and hands it to the model ready-made (transformers builds no mask of its own),
- keeps positions and finished flags as device tensors updated in place, and asks the host
  whether all rows have finished only every ``CHECK_EVERY`` steps.

Every tensor keeps its shape and address from step to step, which is what ``torch.compile``
(and CUDA graphs, its ``reduce-overhead`` mode) need to replay a step without the host's
per-operator cost. ``benchmarks/decode_ops.py`` counts what a step dispatches against generate.

The tokens drawn are generate's on the same logits: the caller's ``draw`` picks each row's token
(per-request sampling and log-probs are its business). Rows past their end-of-turn token keep
being computed until the next check finds every row ended; the caller cuts each at its end.
Needs SDPA attention (the mask is SDPA's boolean one) and full attention in every layer.

Shapes: B rows, L prompt length (padded), P shared prefix (already in a cache), T new tokens,
C cache slots (L + T rounded up to ``SLOT_MULTIPLE``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import Cache, PretrainedConfig
from transformers.cache_utils import StaticLayer

CHECK_EVERY = 8  # steps between the host's looks at whether every row has ended
SLOT_MULTIPLE = 64  # cache lengths are rounded up to this: fewer distinct shapes for torch.compile to specialise on


class _SlotLayer(StaticLayer):
    """A static layer that writes at the cache's current slots (``at.index``) instead of counting its own."""

    def __init__(self, max_cache_len: int, at: _Slots):
        super().__init__(max_cache_len)
        self.at = at

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys.index_copy_(2, self.at.index, key_states)
        self.values.index_copy_(2, self.at.index, value_states)
        return self.keys, self.values


class _Slots:
    """The cache slots the next forward pass writes: (S,) for a prompt, the one (1,) slot tensor per step."""

    index: torch.Tensor


class SlotCache(Cache):
    """A KV cache of ``length`` slots per layer, allocated at the first write; ``at(index)`` names
    the slots the next forward pass writes to."""

    def __init__(self, config: PretrainedConfig, length: int):
        self.slots = _Slots()
        super().__init__(layers=[_SlotLayer(length, self.slots) for _ in range(config.num_hidden_layers)])

    def at(self, index: torch.Tensor) -> None:
        self.slots.index = index


def supports(config: PretrainedConfig) -> str | None:
    """Why ``config``'s model cannot decode here, or None when it can."""
    text = config.get_text_config(decoder=True)
    if text._attn_implementation != "sdpa":
        return f"needs SDPA attention, not {text._attn_implementation}"
    if set(getattr(text, "layer_types", None) or ["full_attention"]) != {"full_attention"}:
        return "needs full attention in every layer (no sliding windows)"
    return None


def decode(
    model: Callable[..., object],
    config: PretrainedConfig,
    ids: torch.Tensor,
    mask: torch.Tensor,
    prefix: Cache | None,
    steps: int,
    draw: Callable[[torch.Tensor], torch.Tensor],
    eos_ids: list[int],
    forward_kwargs: dict,
    step_forward: Callable[..., object] | None = None,
) -> torch.Tensor:
    """(B, ≤ T) tokens after the (B, L) left-padded prompts ``ids`` (``mask``: their real tokens),
    whose first P columns are already in ``prefix``'s cache (None: P = 0). ``draw`` maps (B, V)
    logits to the (B, 1) tokens chosen; ``step_forward`` (a compiled ``model``) runs the steps."""
    device = ids.device
    rows, width = ids.shape
    done = prefix.get_seq_length() if prefix is not None else 0  # P
    length = -(-(width + steps) // SLOT_MULTIPLE) * SLOT_MULTIPLE
    cache = SlotCache(config, length)
    if prefix is not None:
        cache.at(torch.arange(done, device=device))
        for layer, source in zip(cache.layers, prefix.layers):
            layer.update(source.keys, source.values)
    slots = torch.cat([mask.bool(), mask.new_zeros((rows, length - width), dtype=torch.bool)], dim=1)  # (B, C): attended slots
    kv = torch.arange(length, device=device)
    query = torch.arange(done, width, device=device)[:, None]  # (S, 1): the prompt's own slots
    causal = (kv <= query) & (slots[:, None, None, :] | (kv == query))  # (B, 1, S, C); a padding query sees itself (no NaN)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # (B, L): real tokens counted, padding holes skipped
    cache.at(query[:, 0])
    out = model(
        input_ids=ids[:, done:], attention_mask=causal, position_ids=positions[:, done:], cache=cache, logits_to_keep=1,
        **forward_kwargs,
    )  # fmt: skip
    logits = out.logits[:, -1]
    step_forward = model if step_forward is None else step_forward
    tokens = ids.new_empty((rows, steps))
    ended = torch.zeros(rows, dtype=torch.bool, device=device)
    eos = torch.tensor(eos_ids, device=device)
    slot = torch.full((1,), width, device=device)  # the next slot, on the device: no host value to wait for
    cache.at(slot)
    attend = slots[:, None, None, :]  # (B, 1, 1, C), a view: marking ``slots`` marks it
    position = mask.sum(-1, keepdim=True)  # (B, 1): each row's next position
    for t in range(steps):
        chosen = draw(logits)  # (B, 1)
        tokens[:, t : t + 1] = chosen
        ended |= torch.isin(chosen[:, 0], eos)
        if t == steps - 1 or (t + 1) % CHECK_EVERY == 0 and bool(ended.all()):
            return tokens[:, : t + 1]
        slots.index_fill_(1, slot, True)
        logits = step_forward(
            input_ids=chosen, attention_mask=attend, position_ids=position, cache=cache, **forward_kwargs
        ).logits[:, -1]
        slot += 1
        position += 1
    return tokens
