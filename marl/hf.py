"""A Hugging Face causal LM as a batched :class:`~marl.policy.Policy`.

``act`` is one ``model.generate`` call for the whole batch: prompts left-padded, sampling settings
per request (a logits processor applies each row's temperature and top-p), and the log-prob of
every sampled token recorded on the fly, so no (B, T, V) tensor is ever kept. ``score`` is one
teacher-forced forward pass per chunk of (prompt, candidate) pairs, left-padded so that only the
last K positions need logits.

LoRA members share one base in memory: ``add_adapter`` wraps the model with peft, and requests name
their adapter; a batch mixing adapters is one call (peft's ``adapter_names``).

Shapes: B requests, L prompt length (padded), T new tokens, V vocabulary, K candidate length.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import LogitsProcessor, LogitsProcessorList, PreTrainedModel, PreTrainedTokenizerBase

from marl.policy import Request, Response

BASE = "__base__"  # peft's name for "no adapter" in a mixed batch
SCORE_CHUNK = 64  # (prompt, candidate) pairs per forward pass in score()


class _RecordLogprobs(LogitsProcessor):
    """Runs first, on raw logits: keeps log_softmax(logits / T) of each step only until the next
    step reveals which token was drawn, then keeps that token's log-prob alone."""

    def __init__(self, temperatures: torch.Tensor):
        self.temperatures = temperatures[:, None]  # (B, 1); greedy rows use 1
        self.steps: list[torch.Tensor] = []  # T × (B,)
        self._last: torch.Tensor | None = None  # (B, V)

    def _keep(self, tokens: torch.Tensor) -> None:
        if self._last is not None:
            self.steps.append(self._last.gather(1, tokens[:, None]).squeeze(1))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._keep(input_ids[:, -1])
        self._last = torch.log_softmax(scores.float() / self.temperatures, dim=-1)
        return scores

    def finish(self, last_tokens: torch.Tensor) -> torch.Tensor:
        self._keep(last_tokens)
        return torch.stack(self.steps, dim=1)  # (B, T)


class _PerRowSampling(LogitsProcessor):
    """Each row's own temperature and top-p; temperature 0 rows keep only their argmax."""

    def __init__(self, temperatures: torch.Tensor, top_ps: torch.Tensor):
        self.greedy = temperatures == 0  # (B,)
        self.temperatures = torch.where(self.greedy, 1.0, temperatures)[:, None]
        self.top_ps = top_ps[:, None]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = scores / self.temperatures  # (B, V)
        sorted_scores, order = scores.sort(dim=-1, descending=True)
        mass_before = sorted_scores.softmax(dim=-1).cumsum(dim=-1) - sorted_scores.softmax(dim=-1)
        drop_sorted = mass_before >= self.top_ps  # keeps the smallest prefix reaching top_p
        drop_sorted[:, 0] = False
        drop_sorted[self.greedy, 1:] = True
        drop = drop_sorted.scatter(1, order, drop_sorted)
        return scores.masked_fill(drop, float("-inf"))


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

    def add_adapter(self, name: str, config: LoraConfig) -> None:
        """A new LoRA member on the shared base (its B matrices start at zero: it plays as the base)."""
        if not self.adapters:
            self.model = get_peft_model(self.model, config, adapter_name=name).eval()
        else:
            self.model.add_adapter(name, config)
        self.adapters.add(name)

    def encode(self, messages: list[dict[str, str]]) -> list[int]:
        encoded = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True)
        return list(encoded["input_ids"])

    def _adapter_kwargs(self, requests: Sequence[Request]) -> dict:
        names = [r.adapter or BASE for r in requests]
        unknown = set(names) - self.adapters - {BASE}
        if unknown:
            raise ValueError(f"{self.name} has no adapters {sorted(unknown)}; it has {sorted(self.adapters) or 'none'}")
        return {"adapter_names": names} if isinstance(self.model, PeftModel) else {}

    def _left_pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)  # (B, L)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, width - len(row) :] = torch.tensor(row)
            mask[i, width - len(row) :] = 1
        return ids, mask

    @torch.inference_mode()
    def act(self, requests: Sequence[Request]) -> list[Response]:
        prompts = [self.encode(r.messages) for r in requests]
        ids, mask = self._left_pad(prompts)
        temperatures = torch.tensor([r.sampling.temperature for r in requests], dtype=torch.float32)
        top_ps = torch.tensor([r.sampling.top_p for r in requests], dtype=torch.float32)
        record = _RecordLogprobs(torch.where(temperatures == 0, 1.0, temperatures))
        greedy = bool((temperatures == 0).all())
        processors = LogitsProcessorList([record] if greedy else [record, _PerRowSampling(temperatures, top_ps)])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(hash(tuple(r.seed for r in requests)) % 2**63)
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max(r.sampling.max_new_tokens for r in requests),
                do_sample=not greedy,
                top_k=None,
                top_p=None,
                temperature=None,
                logits_processor=processors,
                pad_token_id=self.pad_id,
                eos_token_id=sorted(self.eos_ids),
                **self._adapter_kwargs(requests),
            )
        new = out[:, ids.shape[1] :]  # (B, T)
        logprobs = record.finish(new[:, -1])  # (B, T)
        return [self._response(p, new[i], logprobs[i], r.sampling.max_new_tokens) for i, (p, r) in enumerate(zip(prompts, requests))]

    def _response(self, prompt: list[int], tokens: torch.Tensor, logprobs: torch.Tensor, limit: int) -> Response:
        tokens, logprobs = tokens[:limit].tolist(), logprobs[:limit].tolist()
        end = next((i + 1 for i, t in enumerate(tokens) if t in self.eos_ids), None)
        if end is not None:
            tokens, logprobs = tokens[:end], logprobs[:end]  # the end-of-turn token belongs to the completion
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        return Response(text, prompt, tokens, logprobs, "stop" if end is not None else "length")

    @torch.inference_mode()
    def score(self, requests: Sequence[Request], candidates: Sequence[Sequence[str]]) -> list[list[Response]]:
        prompts = [self.encode(r.messages) for r in requests]
        pairs = [
            (i, prompts[i], self.tokenizer.encode(c, add_special_tokens=False), c)
            for i, options in enumerate(candidates)
            for c in options
        ]
        scored: list[Response] = []
        for start in range(0, len(pairs), SCORE_CHUNK):
            chunk = pairs[start : start + SCORE_CHUNK]
            scored += self._score_chunk(chunk, [requests[i] for i, *_ in chunk])
        grouped: list[list[Response]] = [[] for _ in requests]
        for (i, *_), response in zip(pairs, scored):
            grouped[i].append(response)
        return grouped

    def _score_chunk(self, chunk: list[tuple], requests: list[Request]) -> list[Response]:
        ids, mask = self._left_pad([prompt + cand for _, prompt, cand, _ in chunk])  # (N, S)
        k = max(len(cand) for _, _, cand, _ in chunk)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)  # left padding: count real tokens only
        logits = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=k + 1,
            **self._adapter_kwargs(requests),
        ).logits  # (N, K+1, V): positions S-K-1 … S-1
        logprobs = torch.log_softmax(logits[:, :-1].float(), dim=-1)  # (N, K, V), predicting the last K tokens
        targets = ids[:, -k:]  # (N, K)
        token_lp = logprobs.gather(2, targets[..., None]).squeeze(2)  # (N, K)
        out = []
        for row, (_, prompt, cand, text) in enumerate(chunk):
            lps = token_lp[row, k - len(cand) :].tolist() if cand else []
            out.append(Response(text, prompt, cand, lps, "scored"))
        return out
