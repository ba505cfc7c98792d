"""A Hugging Face causal LM as a batched :class:`~marl.policy.Policy`.

Prompts in a batch mostly start alike (system prompt, the game's rules, an example turn): rows
that share their adapter and their first P tokens form a group (:func:`prefix_groups`), each
group's start is computed once and its KV cache shared by its rows, then the rest of each row is
left-padded after it (position ids count real tokens only, so the padding hole changes nothing).

``act`` is one ``model.generate`` call for the whole batch: sampling settings
per request (a logits processor draws each row's token with its own temperature and top-p), and
the log-prob of every sampled token recorded on the fly, so no (B, T, V) tensor is ever kept. ``score`` runs each
chunk of (prompt, candidate) pairs teacher-forced: each distinct prompt once, then all of its
candidates from its KV cache, so that only the candidates' K positions need logits (the learner's
forced-choice pass does the same, with grad).

LoRA members share one base in memory: ``add_adapter`` wraps the model with peft, and requests name
their adapter; a batch mixing adapters is one call (peft's ``adapter_names``).

Every tensor lives on the model's device (:mod:`marl.device`): inputs are padded as lists and
moved in one copy, the sampler's per-request draws are made on the CPU from each request's seed
(so a match plays the same alone or in any batch) and moved once per call, and results come back
in one copy per batch; nothing inside the per-token loop waits on the host. A batch that runs
out of device memory is played again as two halves, with one warning.

Shapes: B requests, L prompt length (padded), T new tokens, V vocabulary, K candidate length.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Literal

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import Cache, LogitsProcessor, LogitsProcessorList, PreTrainedModel, PreTrainedTokenizerBase

from marl.decode import decode, supports
from marl.device import in_parts_on_oom
from marl.logits import token_logprobs
from marl.packing import pack
from marl.policy import Request, Response

BASE = "__base__"  # peft's name for "no adapter" in a mixed batch
SCORE_CHUNK = 64  # (prompt, candidate) pairs per forward pass in score(), at most
PREFIX_MIN = 16  # shared leading tokens worth computing once per batch
Decode = Literal["auto", "generate", "static"]


def adapter_of(parameter: str) -> str | None:
    """The LoRA adapter a parameter belongs to (peft names it right after ``lora_A``, ``lora_B``…)."""
    parts = parameter.split(".")
    return next((parts[i + 1] for i, part in enumerate(parts[:-1]) if part.startswith("lora_")), None)


@dataclass
class _Batch:
    ids: torch.Tensor  # (B, P + S): the shared prefix, then each row's left-padded rest
    mask: torch.Tensor  # (B, P + S)
    prefix: int  # P, tokens already in ``cache``; 0 = no cache
    cache: Cache | None


class _Sampler(LogitsProcessor):
    """Draws each row's next token itself — its own temperature and top-p, argmax at temperature 0 —
    records that token's log-prob, and hands generate scores where only that token is on top, so
    generate runs greedy and never calls ``torch.multinomial``.

    Why: multinomial over a 49k vocabulary costs about 1 ms a row on a CPU, more than the tiny
    model's whole forward pass. Inverse-CDF sampling needs one pass to exponentiate, one cumulative
    sum (whose last entry is also the normaliser for the log-prob), and one uniform number a row.

    The recorded log-prob is log_softmax(logits / T) at the drawn token, before top-p truncation
    (T = 1 for greedy rows), which a forward pass can recompute.

    Each row draws its uniforms from its own seed, so a request's tokens do not depend on which
    other requests share its batch (given the same logits): a match plays the same wherever and
    with whatever company it is played.
    """

    def __init__(self, requests: Sequence[Request], steps: int, device: torch.device):
        temperatures = [r.sampling.temperature for r in requests]
        self.any_greedy = 0 in temperatures
        self.greedy = torch.tensor([t == 0 for t in temperatures], device=device)  # (B,)
        scales = [t if t else 1.0 for t in temperatures]
        self.scale = None if set(scales) == {1.0} else torch.tensor(scales, device=device)[:, None]  # (B, 1)
        nucleus = [i for i, r in enumerate(requests) if r.sampling.top_p < 1 and r.sampling.temperature]
        self.nucleus_rows = torch.tensor(nucleus, dtype=torch.long, device=device)  # (R,)
        self.top_ps = torch.tensor([requests[i].sampling.top_p for i in nucleus], device=device)[:, None]  # (R, 1)
        draws = [torch.rand(steps, generator=torch.Generator().manual_seed(r.seed % 2**63), device="cpu") for r in requests]
        self.uniforms = torch.stack(draws).to(device)  # (B, T), drawn on the CPU: the same numbers on any device
        self.steps: list[torch.Tensor] = []  # T × (B,) log-probs of the drawn tokens

    def _truncate_to_nucleus(self, weights: torch.Tensor) -> None:
        """Zero, in place, the weights outside the smallest top set whose mass reaches top_p."""
        rows = weights[self.nucleus_rows]  # (R, V), unnormalised
        sorted_rows, order = rows.sort(dim=-1, descending=True)
        mass_before = (sorted_rows.cumsum(dim=-1) - sorted_rows) / sorted_rows.sum(dim=-1, keepdim=True)
        drop_sorted = mass_before >= self.top_ps
        weights[self.nucleus_rows] = rows.masked_fill(drop_sorted.scatter(1, order, drop_sorted), 0.0)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        """Generate's hook: scores where only the drawn token is on top, so greedy picks it."""
        chosen = self.draw(scores)
        return torch.zeros_like(scores).scatter_(1, chosen, 1.0)

    def draw(self, scores: torch.Tensor) -> torch.Tensor:
        """(B, 1) tokens drawn from (B, V) next-token logits, each row's log-prob recorded."""
        scores = scores.float()  # generate hands fp32 logits; a bf16 model's would be upcast here
        scaled = scores if self.scale is None else scores / self.scale  # (B, V)
        top = scaled.amax(dim=-1, keepdim=True)  # (B, 1)
        weights = (scaled - top).exp_()  # (B, V), unnormalised probabilities, a new tensor
        log_norm = None
        if len(self.nucleus_rows):
            log_norm = top + weights.sum(dim=-1, keepdim=True).log()  # before truncation
            self._truncate_to_nucleus(weights)
        cdf = weights.cumsum_(dim=-1)  # (B, V), in place
        if log_norm is None:
            log_norm = top + cdf[:, -1:].log()  # the cumulative sum ends at the normaliser
        t = len(self.steps)
        u = self.uniforms[:, t : t + 1].clamp(min=1e-12) * cdf[:, -1:]  # (B, 1)
        chosen = torch.searchsorted(cdf, u).clamp_(max=cdf.shape[1] - 1)  # (B, 1): first index with cdf >= u
        if self.any_greedy:
            chosen = torch.where(self.greedy[:, None], scaled.argmax(dim=-1, keepdim=True), chosen)
        self.steps.append((scaled.gather(1, chosen) - log_norm).squeeze(1))
        return chosen

    def logprobs(self) -> torch.Tensor:
        return torch.stack(self.steps, dim=1)  # (B, T)


class HFPolicy:
    """A causal LM from transformers, with its tokenizer's chat template.

    >>> from marl.models import load_tiny
    >>> from marl.policy import Request, Sampling
    >>> policy = load_tiny()
    >>> [r] = policy.act([Request([{"role": "user", "content": "Hi"}], Sampling(0, 1, 4))])
    >>> len(r.completion_ids), r.finish_reason
    (4, 'length')
    """

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, name: str):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        eos = model.generation_config.eos_token_id or tokenizer.eos_token_id
        self.eos_ids = set(eos) if isinstance(eos, list) else {eos}
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(self.eos_ids)
        self.adapters: set[str] = set()
        self.score_tokens = 0  # padded tokens per forward pass in score(); 0: SCORE_CHUNK pairs bound it alone
        self.fits: dict[str, int] = {}  # pass -> the batch size that fitted after running out of memory, kept
        self.decode: Decode = "auto"  # act's decoding loop: generate's, or a static cache's (marl.decode); auto: static on a GPU
        self.compile = False  # compile the static loop's one-token step (CUDA graphs on a GPU)
        self._compiled_step = None

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def to(self, device: torch.device, dtype: torch.dtype) -> HFPolicy:
        """Move the model (and any adapters) to ``device`` with weights in ``dtype``; LoRA adapters
        added later follow their base layer's device and stay fp32 (peft's default)."""
        self.model.to(device=device, dtype=dtype)
        return self

    def add_adapter(self, name: str, config: LoraConfig, trainable: bool = True, seed: int = 0) -> None:
        """A new LoRA member on the shared base (its B matrices start at zero: it plays as the base);
        ``trainable = False`` for a frozen one (a snapshot). Its A matrices are drawn from ``seed``,
        leaving torch's global generator as it was: adding an adapter mid-run (a snapshot loaded
        lazily) changes nothing else a run draws. Every other parameter keeps whether it requires
        grad: peft would leave only its active adapter trainable, silently stopping the other
        members' learners."""
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            if not self.adapters:
                self.model = get_peft_model(self.model, config, adapter_name=name).eval()
            else:
                with self._keeping_grad_flags():
                    self.model.add_adapter(name, config)
        for param_name, param in self.model.named_parameters():
            if adapter_of(param_name) == name:
                param.requires_grad_(trainable)
        self.adapters.add(name)

    def remove_adapter(self, name: str) -> None:
        """Free an adapter (an evicted snapshot); the others keep their weights and grad flags."""
        with self._keeping_grad_flags():
            self.model.delete_adapter(name)
        self.adapters.discard(name)

    @contextmanager
    def _keeping_grad_flags(self):
        flags = {n: p.requires_grad for n, p in self.model.named_parameters()}
        yield
        for param_name, param in self.model.named_parameters():
            if param_name in flags:
                param.requires_grad_(flags[param_name])

    def encode(self, conversations: Sequence[list[dict[str, str]] | str]) -> list[list[int]]:
        """Token ids of each conversation under the chat template (a plain string as is), ready
        for the model's reply."""
        texts = [
            m if isinstance(m, str) else self.tokenizer.apply_chat_template(m, add_generation_prompt=True, tokenize=False)
            for m in conversations
        ]
        return self.tokenizer(texts, add_special_tokens=False)["input_ids"]  # one batched call to the fast tokenizer

    def _adapter_kwargs(self, requests: Sequence[Request]) -> dict:
        return self._adapters_for([r.adapter for r in requests])

    def _adapters_for(self, adapters: Sequence[str | None]) -> dict:
        names = [a or BASE for a in adapters]
        unknown = set(names) - self.adapters - {BASE}
        if unknown:
            raise ValueError(f"{self.name} has no adapters {sorted(unknown)}; it has {sorted(self.adapters) or 'none'}")
        return {"adapter_names": names} if isinstance(self.model, PeftModel) else {}

    def _left_pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) ids and mask, padded on the host and moved to the model's device in one copy each."""
        width = max(map(len, rows))
        ids = [[self.pad_id] * (width - len(row)) + row for row in rows]
        mask = [[0] * (width - len(row)) + [1] * len(row) for row in rows]
        return torch.tensor(ids, device=self.device), torch.tensor(mask, device=self.device)

    def _right_pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) ids and mask, padded at the end: rows that continue a cached prompt."""
        width = max(map(len, rows))
        ids = [row + [self.pad_id] * (width - len(row)) for row in rows]
        mask = [[1] * len(row) + [0] * (width - len(row)) for row in rows]
        return torch.tensor(ids, device=self.device), torch.tensor(mask, device=self.device)

    def _cache_kwargs(self, batch: _Batch, share: bool) -> dict:
        """The shared prefix's cache for the forward pass; under gradient checkpointing, no cache at all."""
        return {"cache": batch.cache} if batch.cache is not None else {} if share else {"use_cache": False}

    def _prefix_cache(self, prefixes: list[list[int]], adapters: Sequence[str | None]) -> Cache:
        """The KV cache of each prefix (all of one length) under its adapter: one forward pass."""
        ids = torch.tensor(prefixes, device=self.device)  # (G, P)
        return self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **self._adapters_for(adapters)).cache

    def _prepare(self, rows: list[list[int]], keep: int, adapters: Sequence[str | None], share: bool = True) -> _Batch:
        """Inputs for a batch whose rows often start alike (system prompt, rules, an example turn):
        each group's start run once (:func:`prefix_groups`: one per adapter and per way the rows'
        first P tokens differ, e.g. the example's move) and its KV cache copied to the group's
        rows, the rest of each row left-padded after it. One call still decodes every row."""
        shared, owner = prefix_groups(rows, keep, adapters) if share else (0, [])
        if not shared:
            ids, mask = self._left_pad(rows)
            return _Batch(ids, mask, 0, None)
        firsts = [owner.index(g) for g in range(max(owner) + 1)]  # each group's first row
        cache = self._prefix_cache([rows[i][:shared] for i in firsts], [adapters[i] for i in firsts])
        cache.batch_select_indices(torch.tensor(owner, device=self.device))
        suffix_ids, suffix_mask = self._left_pad([row[shared:] for row in rows])  # (B, S)
        ids = torch.cat([torch.tensor([row[:shared] for row in rows], device=self.device), suffix_ids], dim=1)  # (B, P + S)
        mask = torch.cat([suffix_mask.new_ones((len(rows), shared)), suffix_mask], dim=1)
        return _Batch(ids, mask, shared, cache)

    @torch.inference_mode()
    def act(self, requests: Sequence[Request]) -> list[Response]:
        """One ``generate`` call for the batch; on an out-of-memory error, its halves, each alone
        (every request samples from its own seed, so the halves play as the whole would)."""
        prompts = self.encode([r.messages for r in requests])
        return self._fitting("generate", list(zip(prompts, requests)), self._generate)

    def _fitting(self, kind: str, items: list, run) -> list[Response]:
        """``run`` over ``items`` in batches that fit: smaller for good after running out of memory."""
        size = self.fits.get(kind, len(items))
        out, fitted = in_parts_on_oom(items, run, f"{self.name}: {kind} ({len(items)} rows)", size)
        if fitted < size:
            self.fits[kind] = fitted
        return out

    def _generate(self, rows: Sequence[tuple[list[int], Request]]) -> list[Response]:
        prompts, requests = [p for p, _ in rows], [r for _, r in rows]
        batch = self._prepare(prompts, 1, [r.adapter for r in requests])
        steps = max(r.sampling.max_new_tokens for r in requests)
        sampler = _Sampler(requests, steps, self.device)
        if self.decoding() == "static":
            new = self._decode_static(batch, sampler, steps, requests).tolist()  # (B, ≤ T), one copy to the host
        else:
            new = self._decode_generate(batch, sampler, steps, requests).tolist()
        logprobs = sampler.logprobs().tolist()  # (B, T)
        return [self._response(p, new[i], logprobs[i], r.sampling.max_new_tokens) for i, (p, r) in enumerate(zip(prompts, requests))]

    def decoding(self) -> Literal["generate", "static"]:
        """Which loop ``act`` decodes with: ``decode``, with auto resolved for the model's device."""
        if self.decode == "auto":
            return "static" if self.device.type == "cuda" else "generate"
        return self.decode

    def _decode_generate(self, batch: _Batch, sampler: _Sampler, steps: int, requests: Sequence[Request]) -> torch.Tensor:
        """(B, T) new tokens from ``model.generate``, greedy on the scores the sampler leaves."""
        out = self.model.generate(
            input_ids=batch.ids,
            attention_mask=batch.mask,
            **({"cache": batch.cache} if batch.cache is not None else {}),
            max_new_tokens=steps,
            do_sample=False,  # the _Sampler has already drawn each token
            top_k=None,
            top_p=None,
            temperature=None,
            logits_processor=LogitsProcessorList([sampler]),
            pad_token_id=self.pad_id,
            eos_token_id=sorted(self.eos_ids),
            **self._adapter_kwargs(requests),
        )
        return out[:, batch.ids.shape[1] :]

    def _decode_static(self, batch: _Batch, sampler: _Sampler, steps: int, requests: Sequence[Request]) -> torch.Tensor:
        """(B, ≤ T) new tokens from :func:`marl.decode.decode`, its steps compiled if asked."""
        unsupported = supports(self.model.config)
        if unsupported:
            raise ValueError(f"{self.name}: static decoding {unsupported}; set rollout.decode = \"generate\"")
        if self.compile and self._compiled_step is None:
            mode = "reduce-overhead" if self.device.type == "cuda" else None  # CUDA graphs replay a step's launches
            self._compiled_step = torch.compile(self.model, mode=mode)
        return decode(
            self.model, self.model.config, batch.ids, batch.mask, batch.cache, steps, sampler.draw, sorted(self.eos_ids),
            self._adapter_kwargs(requests), self._compiled_step if self.compile else None,
        )  # fmt: skip

    def _response(self, prompt: list[int], tokens: list[int], logprobs: list[float], limit: int) -> Response:
        tokens, logprobs = tokens[:limit], logprobs[:limit]
        end = next((i + 1 for i, t in enumerate(tokens) if t in self.eos_ids), None)
        if end is not None:
            tokens, logprobs = tokens[:end], logprobs[:end]  # the end-of-turn token belongs to the completion
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return Response(text, prompt, tokens, logprobs, "stop" if end is not None else "length")

    def completion_logits(
        self, prompts: list[list[int]], completions: list[list[int]], adapters: Sequence[str | None]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Next-token logits at each completion token, with grad: the learner's forward pass (and
        kickstarting's, which needs whole distributions). Gradients flow back through the shared
        prompt passes of :meth:`_completion_pass`.

        Returns (N, K, V) logits in the model's dtype (upcast a chunk at a time where fp32 is
        needed: :mod:`marl.logits`), the (N, K) completion token ids and the (N, K) mask of real tokens.
        """
        checkpointing = torch.is_grad_enabled() and self.model.is_activation_checkpointing
        with _training(self.model) if checkpointing else nullcontext():
            return self._completion_pass(prompts, completions, adapters, share=not checkpointing)

    def _completion_pass(
        self, prompts: list[list[int]], completions: list[list[int]], adapters: Sequence[str | None], share: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(N, K, V) logits predicting each completion's tokens, end-aligned, its (N, K) ids and
        mask of real tokens. Forced choice asks for every candidate after the same prompt: with
        ``share``, each distinct (prompt, adapter) runs once and its KV cache serves all of its
        completions, which roughly halves the tokens a two-move decision costs. Without ``share``
        (gradient checkpointing drops caches), each row runs whole."""
        k = max(map(len, completions))
        group: dict[tuple, int] = {}
        owner = [group.setdefault((tuple(p), a), len(group)) for p, a in zip(prompts, adapters)]
        if not share or k == 0 or len(group) == len(prompts):
            return self._whole_rows(prompts, completions, adapters, share)
        return self._from_each_prompt(prompts, completions, adapters, owner)

    def _whole_rows(
        self, prompts: list[list[int]], completions: list[list[int]], adapters: Sequence[str | None], share: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`_completion_pass` with each row run whole: packed end to end after the batch's
        start of its group (:mod:`marl.packing`: a bin holds one group), or left-padded for a model whose attention the packed
        mask does not fit (not SDPA, or sliding windows)."""
        if supports(self.model.config) is not None:
            return self._padded_rows(prompts, completions, adapters, share)
        k = max(map(len, completions))
        rows = [p + c for p, c in zip(prompts, completions)]
        shared, owner = prefix_groups(rows, k + 1, adapters) if share else (0, [])
        packed = pack([row[shared:] for row in rows], adapters, k, shared, self.pad_id, owner or None)  # a bin holds one group
        segments = torch.tensor(packed.segments, device=self.device)  # (G, W)
        width = segments.shape[1]
        own_row = (segments[:, :, None] == segments[:, None, :]) & torch.ones(width, width, dtype=torch.bool, device=self.device).tril()
        mask = torch.cat([own_row.new_ones((len(segments), width, shared)), own_row], dim=-1)[:, None]  # (G, 1, W, P + W)
        cache = None
        if shared:
            firsts = [owner.index(g) for g in range(max(owner) + 1)]
            cache = self._prefix_cache([rows[i][:shared] for i in firsts], [adapters[i] for i in firsts])
            cache.batch_select_indices(torch.tensor([owner[bin_[0]] for bin_ in packed.segments], device=self.device))
        predicting = torch.tensor(packed.predicting, device=self.device)  # (N, K)
        with _output_layer_only_at(self.model, predicting.flatten()):
            logits = self.model(
                input_ids=torch.tensor(packed.ids, device=self.device), attention_mask=mask,
                position_ids=torch.tensor(packed.positions, device=self.device),
                **({"cache": cache} if cache is not None else {"use_cache": False}), **self._adapters_for(packed.adapters),
            ).logits.view(len(rows), k, -1)  # (N, K, V): predicting each row's last K tokens
        lengths = torch.tensor([len(c) for c in completions], device=self.device)
        targets = torch.tensor([([self.pad_id] * k + row)[-k:] for row in rows], device=self.device)  # end-aligned
        return logits, targets, torch.arange(k, device=self.device)[None, :] >= (k - lengths)[:, None]

    def _padded_rows(
        self, prompts: list[list[int]], completions: list[list[int]], adapters: Sequence[str | None], share: bool
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`_whole_rows` left-padded (after each group's start)."""
        k = max(map(len, completions))
        batch = self._prepare([p + c for p, c in zip(prompts, completions)], k + 1, adapters, share)  # (N, P + S)
        positions = (batch.mask.cumsum(-1) - 1).clamp(min=0)  # padding holes: count real tokens only
        logits = self.model(
            input_ids=batch.ids[:, batch.prefix :], attention_mask=batch.mask, position_ids=positions[:, batch.prefix :],
            logits_to_keep=k + 1, **self._cache_kwargs(batch, share), **self._adapters_for(adapters),
        ).logits[:, :-1]  # (N, K, V) in the model's dtype: predicting the last K tokens
        lengths = torch.tensor([len(c) for c in completions], device=self.device)
        return logits, batch.ids[:, -k:], torch.arange(k, device=self.device)[None, :] >= (k - lengths)[:, None]

    def _from_each_prompt(
        self, prompts: list[list[int]], completions: list[list[int]], adapters: Sequence[str | None], owner: list[int]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`_completion_pass` with each distinct prompt run once (``owner``: each row's), its
        cache copied to its rows, and the completions run from it, right-padded; then end-aligned."""
        k = max(map(len, completions))
        firsts = {g: i for i, g in reversed(list(enumerate(owner)))}  # each group's first row
        rows = [firsts[g] for g in range(max(owner) + 1)]
        batch = self._prepare([prompts[i] for i in rows], 1, [adapters[i] for i in rows])  # (G, P + S)
        positions = (batch.mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=batch.ids[:, batch.prefix :], attention_mask=batch.mask, position_ids=positions[:, batch.prefix :],
            use_cache=True, logits_to_keep=1, **self._cache_kwargs(batch, True), **self._adapters_for([adapters[i] for i in rows]),
        )
        index = torch.tensor(owner, device=self.device)
        out.cache.batch_select_indices(index)
        ids, mask = self._right_pad(completions)  # (N, K): each completion starts right after its prompt
        lengths = mask.sum(-1)
        start = batch.mask.sum(-1)[index]  # each row's next position: its prompt's real length
        after = self.model(
            input_ids=ids, attention_mask=torch.cat([batch.mask[index], mask], dim=1),
            position_ids=start[:, None] + torch.arange(k, device=self.device)[None, :], cache=out.cache,
            **self._adapters_for(adapters),
        ).logits  # (N, K, V): predicting each completion's next tokens
        ahead = torch.cat([out.logits[index, -1:], after[:, :-1]], dim=1)  # (N, K, V): predicting its tokens
        real = torch.arange(k, device=self.device)[None, :] >= (k - lengths)[:, None]
        source = (torch.arange(k, device=self.device)[None, :] - (k - lengths)[:, None]).clamp(min=0)  # end-aligned
        logits = ahead.gather(1, source[..., None].expand(-1, -1, ahead.shape[-1]))
        return logits, ids.gather(1, source), real

    def completion_logprobs(
        self, prompts: list[list[int]], completions: list[list[int]], adapters: Sequence[str | None], entropy: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """Log-prob of each completion token after its prompt, with grad (see :meth:`completion_logits`).

        Returns (N, K) log-probs, the (N, K) mask of real completion tokens, and if asked the (N, K)
        entropy of the next-token distribution at each of them.
        """
        logits, targets, real = self.completion_logits(prompts, completions, adapters)
        token_lp, ent = token_logprobs(logits, targets)  # (N, K) each, fp32; no (N, K, V) fp32 tensor kept
        return token_lp, real, ent if entropy else None

    @torch.inference_mode()
    def score(self, requests: Sequence[Request], candidates: Sequence[Sequence[str]]) -> list[list[Response]]:
        prompts = self.encode([r.messages for r in requests])
        pairs = [
            (i, prompts[i], self.tokenizer.encode(c, add_special_tokens=False), c)
            for i, options in enumerate(candidates)
            for c in options
        ]
        scored: list[Response] = []
        for chunk in self._score_chunks(pairs):
            scored += self._fitting("score", chunk, lambda part: self._score_chunk(part, [requests[i] for i, *_ in part]))
        grouped: list[list[Response]] = [[] for _ in requests]
        for (i, *_), response in zip(pairs, scored):
            grouped[i].append(response)
        return grouped

    def _score_chunks(self, pairs: list[tuple]) -> list[list[tuple]]:
        """Consecutive runs of at most SCORE_CHUNK pairs and, with ``score_tokens``, at most that
        many padded tokens (rows × the longest row): a memory bound instead of a row count."""
        chunks: list[list[tuple]] = []
        width = 0
        for pair in pairs:
            length = len(pair[1]) + len(pair[2])
            if chunks and len(chunks[-1]) < SCORE_CHUNK:
                wider = max(width, length)
                if not self.score_tokens or wider * (len(chunks[-1]) + 1) <= self.score_tokens:
                    chunks[-1].append(pair)
                    width = wider
                    continue
            chunks.append([pair])
            width = length
        return chunks

    def _score_chunk(self, chunk: list[tuple], requests: list[Request]) -> list[Response]:
        logits, targets, _ = self._completion_pass(
            [prompt for _, prompt, _, _ in chunk], [cand for _, _, cand, _ in chunk], [r.adapter for r in requests], share=True
        )  # (N, K, V)
        token_lp = token_logprobs(logits, targets)[0].tolist()  # (N, K), one copy to the host
        k = targets.shape[1]
        return [
            Response(text, prompt, cand, token_lp[row][k - len(cand) :] if cand else [], "scored")
            for row, (_, prompt, cand, text) in enumerate(chunk)
        ]


def _common_start(rows: Sequence[Sequence[int]], limit: int) -> int:
    """How many leading tokens (at most ``limit``) every row shares."""
    shared = 0
    while shared < limit and len({row[shared] for row in rows}) == 1:
        shared += 1
    return shared


def prefix_groups(rows: Sequence[Sequence[int]], keep: int, adapters: Sequence[str | None]) -> tuple[int, list[int]]:
    """A prefix length P and each row's group (numbered in order of first appearance): rows of a
    group share their adapter and their first P tokens, so each group's prefix runs once. P saves
    the most tokens, P × (rows − groups); 0 when nothing is worth it (under PREFIX_MIN tokens, or
    every row in a group of its own). ``keep`` tokens at each row's end stay out of every prefix.

    Why groups and not one prefix for the batch: a population's rows carry several adapters, and
    a drawn example turn splits the rows where its move is written; one prefix would end there
    (or not exist), and every row would run the rules after it again.
    """
    limit = min(map(len, rows)) - keep
    order = sorted(range(len(rows)), key=lambda i: (adapters[i] or BASE, rows[i]))
    common = [  # neighbours in sorted order share the most: a group is a run of them
        _common_start((rows[a], rows[b]), limit) if adapters[a] == adapters[b] else 0 for a, b in zip(order, order[1:])
    ]
    best, saved = 0, 0
    for length in sorted({*common, limit}):
        groups = 1 + sum(c < length for c in common)
        if length >= PREFIX_MIN and length * (len(rows) - groups) > saved:
            best, saved = length, length * (len(rows) - groups)
    if not best:
        return 0, []
    ids: dict[tuple, int] = {}
    return best, [ids.setdefault((adapters[i] or BASE, tuple(row[:best])), len(ids)) for i, row in enumerate(rows)]


@contextmanager
def _output_layer_only_at(model: torch.nn.Module, index: torch.Tensor):
    """The model's output layer sees only the hidden states at ``index`` (flat over batch and
    sequence), so that logits are computed at the positions that predict completion tokens and
    nowhere else, whatever their layout: (1, len(index), V) logits come out."""
    def select(module, args):
        hidden = args[0]
        return (hidden.reshape(-1, hidden.shape[-1])[index][None],)

    hook = model.get_output_embeddings().register_forward_pre_hook(select)
    try:
        yield
    finally:
        hook.remove()


@contextmanager
def _training(model: torch.nn.Module):
    """Train mode for one pass: transformers checkpoints layers' activations only in train mode.
    Our models have no dropout, so nothing else changes."""
    model.train()
    try:
        yield
    finally:
        model.eval()
