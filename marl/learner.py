"""The learner: PPO-clip updates of one policy from turn samples, TRL-style ergonomics.

One ``update`` call = one training iteration: old log-probs are recomputed here (so the first
step is exactly REINFORCE with the given advantages: ratio 1, nothing clipped; an update of one
step takes them from its own pass instead of a separate one), then ``epochs``
passes over the batch, each one optimiser step accumulated over micro-batches, or ``minibatches``
steps, each on a shuffled share of the batch (PPO's minibatches, as CleanRL's: a small model
learning from scratch needs more steps than one an epoch; only the first share is then on-policy).
Micro-batches are bounded by rows (``micro_batch``) and optionally by padded tokens
(``micro_batch_tokens``); a pass that runs out of device memory starts again with micro-batches of
half the size (one warning), which the learner then keeps, so no iteration is lost.

Full fine-tuning or LoRA is decided by which parameters require grad (peft freezes the base).
A learner given an ``adapter`` trains that LoRA adapter alone: several learners then share one
base in memory, each with its own adapter and optimiser state (population members).
The optional KL term pulls towards a reference: the initial weights (``magnet_rate = 0``) or a
slowly moving average of the policy's own weights — the "magnet" of magnetic mirror descent
(Sokota et al. 2023, https://arxiv.org/abs/2206.05825), which damps the last-iterate cycling of
self-play in zero-sum games.

Kickstarting (Schmitt et al. 2018, https://arxiv.org/abs/1803.03835): with a ``teacher`` and
λ = ``kickstart_coef`` > 0, each free-text sample's loss adds λ·KL(π_teacher ‖ π_student) over the
full vocabulary at each of its completion tokens (``marl.credit.kickstart_kl``); forced-choice
samples are left alone. The teacher is frozen for the update (forward passes under no_grad) and
must share the student's vocabulary. Anneal λ between updates with ``set_hparams`` (or the
``kickstart_coef`` attribute) and ``marl.credit.anneal``.

Shapes: N samples, K completion tokens (padded), V vocabulary.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

import numpy as np
import torch
from peft import PeftModel
from pydantic import BaseModel, ConfigDict, Field
from transformers.modeling_layers import GradientCheckpointingLayer

from marl.credit import kickstart_kl
from marl.device import halving_on_oom, host_copy, on_host
from marl.hf import HFPolicy, adapter_of
from marl.logits import token_logprobs
from marl.losses import ppo_clip_loss
from marl.offline import dpo_loss, sft_loss
from marl.policy import choice_logprobs


class OptimConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    lr: float = Field(3e-4, gt=0, description="AdamW learning rate; SPIRAL uses 1e-6 for a 4B model, tiny needs ~3e-4")
    betas: tuple[float, float] = Field((0.9, 0.95), description="AdamW betas (SPIRAL/OAT)")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay (SPIRAL: 0)")
    max_grad_norm: float = Field(1.0, gt=0, description="gradient-norm clip (SPIRAL: 1.0)")
    epochs: int = Field(2, ge=1, description="inner PPO epochs per iteration (SPIRAL: 2)")
    minibatches: int = Field(
        1, ge=1, description="optimiser steps per epoch, each on a shuffled share of the batch (CleanRL: 4; SPIRAL: 1)"
    )
    clip_eps: float = Field(0.2, gt=0, lt=1, description="PPO clip range ε (SPIRAL: 0.2)")
    micro_batch: int = Field(32, ge=1, description="samples per forward/backward; gradients accumulate over the batch")
    micro_batch_tokens: int = Field(
        0, ge=0, description="padded tokens per forward/backward at most (rows × longest row), a memory bound; 0 = rows only"
    )
    gradient_checkpointing: bool = Field(
        False, description="recompute activations in the backward pass: less memory for about a third more compute"
    )
    autocast: Literal["auto", "bf16", "off"] = Field(
        "auto",
        description="matrix products in bf16, weights kept in their dtype (fp32 full fine-tuning then uses tensor "
        "cores, AdamW still steps fp32 weights); auto: bf16 on a GPU, off on the CPU; losses fp32 either way",
    )
    compile: bool = Field(
        False, description="torch.compile each decoder layer (every forward pass then runs compiled); minutes first"
    )
    token_normalizer: float = Field(
        64.0, gt=0, description="token-sum divisor (SPIRAL: the generation limit); a constant avoids length bias"
    )
    kl_coef: float = Field(0.0, ge=0, description="weight of KL(π ‖ reference); 0 loads no reference (SPIRAL: 0)")
    magnet_rate: float = Field(
        0.0, ge=0, le=1, description="reference ← (1−τ)·reference + τ·policy after each update; 0 = frozen initial model"
    )
    entropy_coef: float = Field(0.0, ge=0, description="entropy bonus weight (SPIRAL: 0)")
    lr_schedule: Literal["constant", "linear"] = Field(
        "constant", description="linear: decay to 0 over the run, so the last iterate settles (SPIRAL: constant)"
    )
    kickstart_coef: float = Field(
        0.0, ge=0, description="λ of λ·KL(teacher ‖ student) on free-text turns (kickstarting); needs a teacher; 0 = off"
    )
    correction: Literal["decoupled", "tis"] = Field(
        "decoupled",
        description="off-policy correction of stale samples (async training): decoupled: PPO's clip around the "
        "learner's weights, weighted by min(π_old/π_behaviour, is_cap) (AReaL); tis: truncated importance sampling, "
        "min(π_θ/π_behaviour, is_cap)·A·∇log π_θ, no clip (IMPALA, Yao et al. 2025); fresh samples keep plain PPO",
    )
    is_cap: float = Field(2.0, gt=0, description="C, where the off-policy importance weight is truncated (Yao et al. 2025: 2)")
    algorithm: Literal["ppo", "sft", "dpo"] = Field(
        "ppo",
        description="ppo: the clipped objective on every turn with its advantage (online); offline, from the "
        "iteration's recorded episodes (marl.offline): sft: NLL of winning turns; dpo: won-vs-lost pairs per member",
    )
    dpo_beta: float = Field(0.1, gt=0, description="β of DPO's −log σ(β·margin); the reference is the start-of-run model")
    offline_window: int = Field(
        1, ge=1, description="sft/dpo learn from the last N iterations' episodes: this one's and the N−1 shards before it on disk"
    )


T = TypeVar("T")
MAGNET = "@magnet"  # suffix of a LoRA learner's reference adapter (snapshots end in @<iteration>)
ANY_ADAPTER = "{adapter}"  # stands for the adapter's name in one adapter's weights: they load into any adapter


def trainable_weights(model: torch.nn.Module, adapter: str | None = None) -> dict[str, torch.Tensor]:
    """The weights training changes (all of them, or the LoRA adapters), as a CPU copy (so that
    checkpoints, snapshots and Ray messages load on any device); with ``adapter``, that adapter's
    alone, its name written as ``ANY_ADAPTER`` so that they load into another adapter (a snapshot,
    a PBT copy) with :func:`load_weights`."""
    if adapter is None:
        return {n: host_copy(p) for n, p in model.named_parameters() if p.requires_grad}
    return {
        n.replace(f".{adapter}.", f".{ANY_ADAPTER}."): host_copy(p)
        for n, p in model.named_parameters() if adapter_of(n) == adapter
    }  # fmt: skip


def load_weights(model: torch.nn.Module, weights: dict[str, torch.Tensor], adapter: str | None = None) -> None:
    """Load what :func:`trainable_weights` gave (into ``adapter`` when given). A name that matches
    no parameter is an error: ``load_state_dict(strict=False)`` would skip it without a word."""
    if adapter is not None:
        weights = {n.replace(f".{ANY_ADAPTER}.", f".{adapter}."): w for n, w in weights.items()}
    unexpected = model.load_state_dict(weights, strict=False).unexpected_keys
    if unexpected:
        raise KeyError(f"{len(unexpected)} weights match no parameter of the model, e.g. {unexpected[0]}")


@dataclass
class TrainSample:
    """One turn to learn from. A forced-choice turn also carries every candidate it chose among:
    its policy is ``marl.policy.choice_logprobs`` (constrained decoding over the candidates), and
    that choice's log-prob is what the loss moves (one decision, so the token normaliser is 1)."""

    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float
    adapter: str | None = None
    candidates: list[list[int]] | None = None  # forced choice: every candidate's token ids
    choice: int | None = None  # forced choice: the index drawn
    temperature: float = 1.0  # forced choice: the softmax temperature it was drawn at
    clip_high: float | None = None  # ε_high of this sample's upper clip (ADPO); None: the config's clip_eps
    behaviour: list[float] | None = None  # stale (async): log-probs at sampling time, per token or the one choice; None: fresh

    @property
    def forced(self) -> bool:
        return self.candidates is not None


def compile_layers(model: torch.nn.Module) -> None:
    """``torch.compile`` each decoder layer in place: one graph serves every layer (their code is
    one), shapes become dynamic at the first new one, and the glue between layers (embedding,
    cache, adapters' routing) stays eager, where peft's per-row adapters would break a graph."""
    for module in model.modules():
        if isinstance(module, GradientCheckpointingLayer):
            module.compile(dynamic=None)


def _footprint(sample: TrainSample) -> tuple[int, int]:
    """Rows a sample takes in a forward pass (one per candidate in forced choice) and the longest."""
    completions = sample.candidates if sample.forced else [sample.completion_ids]
    return len(completions), len(sample.prompt_ids) + max(map(len, completions))


def _padded(by_sample: dict[int, torch.Tensor], chunk: Sequence[TrainSample], live: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The chunk's per-sample log-probs laid out as ``mask`` (N, K) lays out its real tokens, and
    the ``live`` ones (detached) at padding: a ratio of 1 and a KL of 0 there, never exp(-inf)."""
    out = live.detach().clone()
    out[mask] = torch.cat([by_sample[id(s)] for s in chunk])
    return out


def _behaviour(
    chunk: Sequence[TrainSample], old: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The stale samples' behaviour log-probs laid out as ``mask`` (N, K) lays out their tokens
    (``old`` elsewhere), and which rows are stale (N,); (None, None) when every sample is fresh."""
    if all(s.behaviour is None for s in chunk):
        return None, None
    stale = torch.tensor([s.behaviour is not None for s in chunk], device=old.device)  # (N,)
    out = old.detach().clone()
    recorded = [x for s in chunk if s.behaviour is not None for x in s.behaviour]  # stale rows' real tokens, in order
    out[mask & stale[:, None]] = torch.tensor(recorded, dtype=old.dtype, device=old.device)
    return out, stale


def _staleness_stats(samples: Sequence[TrainSample], old: dict[int, torch.Tensor], cap: float) -> dict[str, float]:
    """How far the behaviour policy was from the learner's weights on the stale samples: the share
    of stale samples, the mean π_old/π_b over their tokens, and the share the cap truncates."""
    stale = [s for s in samples if s.behaviour is not None]
    if not stale:
        return {}
    log_rho = torch.cat([old[id(s)].float().cpu() - torch.tensor(s.behaviour) for s in stale])
    rho = log_rho.exp()
    return {
        "offpolicy/stale_frac": len(stale) / len(samples), "offpolicy/is_ratio": float(rho.mean()),
        "offpolicy/truncated_frac": float((rho > cap).float().mean()),
    }  # fmt: skip


def _check_same_vocabulary(student: HFPolicy, teacher: HFPolicy) -> None:
    """Kickstarting compares distributions token by token: both models must index one vocabulary."""
    widths = student.model.config.vocab_size, teacher.model.config.vocab_size
    if widths[0] != widths[1]:
        raise ValueError(
            f"kickstarting needs one vocabulary: student {student.name} has {widths[0]} logits, teacher "
            f"{teacher.name} {widths[1]}; pick a teacher with the student's tokenizer"
        )
    if student.tokenizer.get_vocab() != teacher.tokenizer.get_vocab():
        raise ValueError(
            f"kickstarting needs one vocabulary: {student.name} and {teacher.name} have {widths[0]} logits each "
            f"but their tokenizers map tokens to ids differently; pick a teacher with the student's tokenizer"
        )


class Learner:
    """Updates ``policy`` in place; optionally kickstarted towards a frozen ``teacher``."""

    def __init__(
        self,
        policy: HFPolicy,
        config: OptimConfig,
        updates: int = 1,
        teacher: HFPolicy | None = None,
        kickstart_coef: float | None = None,
        teacher_adapter: str | None = None,
        adapter: str | None = None,
    ):
        """``updates``: how many ``update`` calls the run will make, for the learning-rate schedule.
        ``teacher``: the kickstarting teacher (``teacher_adapter``: which of its LoRA adapters, None
        for its base). ``kickstart_coef``: λ, overriding ``config.kickstart_coef`` when given.
        ``adapter``: train only this LoRA adapter of a base that other learners share."""
        if kickstart_coef is not None:
            config = config.model_copy(update={"kickstart_coef": kickstart_coef})
        self.policy = policy
        self.config = config
        self.teacher, self.teacher_adapter = teacher, teacher_adapter
        if teacher is not None:
            _check_same_vocabulary(policy, teacher)
        self._check_kickstart(config.kickstart_coef)
        self.adapter = adapter
        if adapter is None:
            self.params = [p for p in policy.model.parameters() if p.requires_grad]
        else:
            self.params = [p.requires_grad_(True) for n, p in policy.model.named_parameters() if adapter_of(n) == adapter]
        if not self.params:
            raise ValueError(f"{policy.name} has no trainable parameters")
        if config.gradient_checkpointing and isinstance(policy.model, PeftModel):
            raise ValueError(
                "optim.gradient_checkpointing works with full fine-tuning only: peft routes each row to its adapter "
                "in eval mode, and recomputing in train mode would use one adapter for all; set lora.r = 0 or turn it off"
            )
        if config.gradient_checkpointing:
            policy.model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        if config.compile:
            compile_layers(policy.model)
        self.micro_rows = config.micro_batch  # halved for good after running out of memory
        self.optimizer = torch.optim.AdamW(self.params, lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
        decay = (lambda done: 1 - done / updates) if config.lr_schedule == "linear" else (lambda done: 1.0)
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.optimizer, decay)
        self.reference = None  # the KL's reference, full weights: a frozen copy of the model
        self.reference_adapter = None  # ... LoRA: a frozen adapter beside the trained one, on the same base
        if (config.kl_coef or config.algorithm == "dpo") and adapter is None:
            self.reference = copy.deepcopy(policy.model).eval().requires_grad_(False)
        elif config.kl_coef or config.algorithm == "dpo":
            self.reference_adapter = adapter + MAGNET
            if self.reference_adapter not in policy.adapters:
                policy.add_adapter(self.reference_adapter, copy.deepcopy(policy.model.peft_config[adapter]), trainable=False)
            load_weights(policy.model, self.weights(), self.reference_adapter)

    def _chunks(self, samples: Sequence[TrainSample], rows: int) -> list[list[TrainSample]]:
        """Micro-batches, each all free-text or all forced-choice turns, of at most ``rows``
        samples and, with ``micro_batch_tokens``, at most that many padded tokens (scaled down
        with ``rows`` after running out of memory)."""
        tokens = self.config.micro_batch_tokens * rows // self.config.micro_batch
        chunks: list[list[TrainSample]] = []
        for kind in (False, True):
            chunk, height, width = [], 0, 0
            for s in (s for s in samples if s.forced == kind):
                n, length = _footprint(s)
                if chunk and (len(chunk) == rows or tokens and (height + n) * max(width, length) > tokens):
                    chunks.append(chunk)
                    chunk, height, width = [], 0, 0
                chunk.append(s)
                height, width = height + n, max(width, length)
            if chunk:
                chunks.append(chunk)
        return chunks

    def _fitting(self, samples: Sequence[TrainSample], run: Callable[[list[list[TrainSample]]], T], what: str) -> T:
        """``run`` over ``samples``' micro-batches, again with halved ones after running out of memory."""
        result, self.micro_rows = halving_on_oom(lambda rows: run(self._chunks(samples, rows)), self.micro_rows, what)
        return result

    def _logprobs_by_sample(self, samples: Sequence[TrainSample], reference: bool = False) -> dict[int, torch.Tensor]:
        """Each sample's log-probs (its real tokens, or its one decision), under no grad: the
        old policy's, or the reference's, keyed by ``id`` so that any chunking can read them."""
        def run(chunks: list[list[TrainSample]]) -> dict[int, torch.Tensor]:
            out = {}
            for chunk in chunks:
                logprobs = self._logprobs(chunk, reference)[0]
                k = logprobs.shape[1]  # real tokens end-aligned: a sample's are its last ones
                out.update({id(s): row[k - (1 if s.forced else len(s.completion_ids)) :] for s, row in zip(chunk, logprobs)})
            return out

        with torch.no_grad():
            return self._fitting(samples, run, f"{self.policy.name}: learner log-probs")

    def _logprobs(self, chunk: Sequence[TrainSample], reference: bool = False, entropy: bool = False):
        """(N, K) log-probs, mask and entropy: per token, or per decision for forced choice; under
        the KL's reference when asked (same tokenizer and code path, other weights)."""
        with self._precision():
            return self._logprobs_at_precision(chunk, reference, entropy)

    def _logprobs_at_precision(self, chunk: Sequence[TrainSample], reference: bool, entropy: bool):
        policy = self.policy
        if reference and self.reference is not None:
            policy = copy.copy(self.policy)
            policy.model = self.reference
        use_magnet = reference and self.reference_adapter is not None
        adapter = (lambda s: self.reference_adapter) if use_magnet else (lambda s: s.adapter)
        if not chunk[0].forced:
            return policy.completion_logprobs(
                [s.prompt_ids for s in chunk], [s.completion_ids for s in chunk], [adapter(s) for s in chunk], entropy
            )
        pairs = [(s, c) for s in chunk for c in s.candidates]
        token_lp, real, _ = policy.completion_logprobs(
            [s.prompt_ids for s, _ in pairs], [c for _, c in pairs], [adapter(s) for s, _ in pairs]
        )  # (sum of candidates, K), completions end-aligned
        chosen, ent, start = [], [], 0
        for s in chunk:
            rows = range(start, start + len(s.candidates))
            per_token = [token_lp[r][real[r]] for r in rows]  # each candidate's own tokens, in order
            choice_lp = choice_logprobs(s.candidates, per_token, s.temperature)
            chosen.append(choice_lp[s.choice])
            ent.append(-(choice_lp.exp() * choice_lp).sum())
            start += len(s.candidates)
        ones = torch.ones((len(chunk), 1), dtype=torch.bool, device=policy.device)
        return torch.stack(chosen)[:, None], ones, torch.stack(ent)[:, None] if entropy else None  # (N, 1) each

    def _precision(self) -> torch.autocast:
        """bf16 autocast for the forward passes when ``autocast`` asks for it (auto: on a GPU)."""
        device = self.policy.device.type
        bf16 = self.config.autocast == "bf16" or self.config.autocast == "auto" and device == "cuda"
        return torch.autocast(device, dtype=torch.bfloat16, enabled=bf16)

    def _check_kickstart(self, coef: float) -> None:
        if coef < 0:
            raise ValueError(f"kickstart_coef is a KL weight, so it must be >= 0; got {coef}")
        if coef and self.teacher is None:
            raise ValueError(f"kickstart_coef = {coef} needs a teacher: pass Learner(..., teacher=...) or set it to 0")

    @property
    def kickstart_coef(self) -> float:
        """λ of the kickstarting term; assign to anneal it (same as ``set_hparams({"kickstart_coef": λ})``)."""
        return self.config.kickstart_coef

    @kickstart_coef.setter
    def kickstart_coef(self, value: float) -> None:
        self.set_hparams({"kickstart_coef": value})

    def _kickstart_logprobs(self, chunk: Sequence[TrainSample]):
        """Free-text log-probs, mask and entropy as ``_logprobs`` gives them, plus the kickstarting
        KL, from one student forward pass (the KL needs the full distributions)."""
        prompts, completions = [s.prompt_ids for s in chunk], [s.completion_ids for s in chunk]
        with self._precision():
            logits, targets, real = self.policy.completion_logits(prompts, completions, [s.adapter for s in chunk])
        with torch.no_grad(), self._precision():
            teacher_logits, _, _ = self.teacher.completion_logits(prompts, completions, [self.teacher_adapter] * len(chunk))
        token_lp, entropy = token_logprobs(logits, targets)  # (N, K) each
        return token_lp, real, entropy, kickstart_kl(logits, teacher_logits, real)

    def update(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One iteration of PPO-clip on ``samples``; returns the standard diagnostics."""
        samples = [s for s in samples if s.completion_ids]  # scripted and human turns have no tokens
        if not samples:
            return {}
        if self.config.algorithm != "ppo":
            return self._update_offline(samples)
        cfg, start = self.config, time.perf_counter()
        one_step = self._one_step(samples)
        old = {} if one_step else self._logprobs_by_sample(samples)  # one step: filled by its own pass
        ref = self._logprobs_by_sample(samples, reference=True) if self._has_reference else None
        stats: dict[str, float] = {}
        for epoch in range(cfg.epochs):
            sums, grad_norm = self._epoch(samples, epoch, old, ref, one_step)
            if epoch == 0:
                stats.update({f"{k}/first_epoch" if k.startswith("ppo") else k: v for k, v in sums.items()})
                stats["policy/grad_norm"] = grad_norm
            stats["ppo/clipfrac"], stats["ppo/approx_kl"] = sums["ppo/clipfrac"], sums["ppo/approx_kl"]
        self.optimizer.zero_grad(set_to_none=True)
        stats["optim/lr"] = self.schedule.get_last_lr()[0]
        if self._kickstarting:
            stats["kickstart/coef"] = cfg.kickstart_coef
        self.schedule.step()
        self._pull_reference()
        stats.update(_staleness_stats(samples, old, cfg.is_cap))
        tokens = sum(len(s.prompt_ids) + len(s.completion_ids) for s in samples) * (cfg.epochs + (not one_step))
        stats["perf/learner_tokens_per_s"] = tokens / (time.perf_counter() - start)
        stats["learner/samples"] = float(len(samples))
        return stats

    def _one_step(self, samples: Sequence[TrainSample]) -> bool:
        """Whether the update is a single optimiser step: its one pass then runs under the very
        weights that would score the old log-probs, so those are its own, detached, and the
        separate no-grad pass over the batch (a quarter of the learner's work) is skipped (TRL
        does the same when it iterates once)."""
        return self.config.epochs == 1 and min(self.config.minibatches, len(samples)) == 1

    def _epoch(
        self, samples: list[TrainSample], epoch: int, old: dict, ref: dict | None, one_step: bool
    ) -> tuple[dict[str, float], float]:
        """One pass over ``samples``: an optimiser step per minibatch. Returns the pass's loss
        diagnostics and mean gradient norm, each weighted by the minibatches' shares of the batch.
        ``one_step``: ``old`` is filled by this pass's own log-probs (``_one_step``)."""
        sums: dict[str, float] = {}
        grad_norm = 0.0
        for part in self._minibatches(samples, epoch):
            share = len(part) / len(samples)
            part_sums = self._fitting(
                part, lambda chunks: self._accumulate(chunks, old, ref, one_step), f"{self.policy.name}: learner step"
            )
            grad_norm += share * float(torch.nn.utils.clip_grad_norm_(self.params, self.config.max_grad_norm))
            self.optimizer.step()
            for key, value in part_sums.items():
                sums[key] = sums.get(key, 0.0) + share * value
        return sums, grad_norm

    def _minibatches(self, samples: list[TrainSample], epoch: int) -> list[list[TrainSample]]:
        """The batch in ``minibatches`` shares of near-equal size, shuffled by a generator seeded
        with the update's number and the epoch, so that a resumed run draws the same shares."""
        n = min(self.config.minibatches, len(samples))
        if n == 1:
            return [samples]
        order = np.random.default_rng([self.schedule.last_epoch, epoch]).permutation(len(samples))
        return [[samples[i] for i in part] for part in np.array_split(order, n)]

    @property
    def _kickstarting(self) -> bool:
        return self.teacher is not None and self.config.kickstart_coef > 0

    def _accumulate(self, chunks: list[list[TrainSample]], old: dict, ref: dict | None, one_step: bool = False) -> dict[str, float]:
        """One epoch's gradients, accumulated over ``chunks`` from zero (so a pass cut short by
        running out of memory can simply start again), and the epoch's loss diagnostics."""
        cfg, total = self.config, sum(map(len, chunks))
        free_text = sum(len(c) for c in chunks if not c[0].forced)
        self.optimizer.zero_grad(set_to_none=True)
        sums = dict.fromkeys(("loss/policy", "loss/kl", "policy/entropy", "ppo/clipfrac", "ppo/approx_kl"), 0.0)
        if self._kickstarting:
            sums["loss/kickstart_kl"] = 0.0
        for chunk in chunks:
            kick = self._kickstarting and not chunk[0].forced
            if kick:
                logprobs, mask, entropy, kl_teacher = self._kickstart_logprobs(chunk)
            else:
                logprobs, mask, entropy = self._logprobs(chunk, entropy=True)
            device = logprobs.device
            advantages = torch.tensor([s.advantage for s in chunk], dtype=torch.float32, device=device)
            normalizer = 1.0 if chunk[0].forced else cfg.token_normalizer
            clip_high = None
            if any(s.clip_high is not None for s in chunk):
                clip_high = torch.tensor([cfg.clip_eps if s.clip_high is None else s.clip_high for s in chunk], device=device)  # (N,)
            if one_step:
                old.update({id(s): row[real] for s, row, real in zip(chunk, logprobs.detach(), mask)})
            old_lp = _padded(old, chunk, logprobs, mask)
            behaviour, stale = _behaviour(chunk, old_lp, mask)
            terms = ppo_clip_loss(
                logprobs, old_lp, advantages, mask, cfg.clip_eps, normalizer,
                _padded(ref, chunk, logprobs, mask) if ref is not None else None, cfg.kl_coef, entropy, cfg.entropy_coef, clip_high,
                behaviour, stale, cfg.correction, cfg.is_cap,
            )  # fmt: skip
            loss = terms.loss + cfg.kickstart_coef * kl_teacher if kick else terms.loss
            weight = len(chunk) / total
            (loss * weight).backward()
            for key, value in zip(sums, (terms.policy, terms.kl, terms.entropy, terms.clipfrac, terms.approx_kl)):
                sums[key] += value * weight
            if kick:  # averaged over free-text samples only: forced-choice turns have no teacher term
                sums["loss/kickstart_kl"] += float(kl_teacher.detach()) * len(chunk) / free_text
        return sums

    def _update_offline(self, samples: list[TrainSample]) -> dict[str, float]:
        """SFT or DPO, ``epochs`` full-batch steps. SFT: every sample is a winning turn. DPO: the
        samples come in (chosen, rejected) pairs, in that order (``marl.offline.offline_batch``)."""
        cfg = self.config
        if cfg.algorithm == "dpo":
            with torch.no_grad():
                ref = self._summed_logprobs(samples, reference=True)
        stats: dict[str, float] = {}
        for _ in range(cfg.epochs):
            self.optimizer.zero_grad(set_to_none=True)
            sums = self._summed_logprobs(samples)
            if cfg.algorithm == "sft":
                loss = sft_loss(sums)
            else:
                loss = dpo_loss(sums[0::2], sums[1::2], ref[0::2], ref[1::2], cfg.dpo_beta)
            loss.backward()
            stats.setdefault(f"loss/{cfg.algorithm}/first_epoch", float(loss.detach()))
            stats["policy/grad_norm"] = float(torch.nn.utils.clip_grad_norm_(self.params, cfg.max_grad_norm))
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        stats["optim/lr"] = self.schedule.get_last_lr()[0]
        self.schedule.step()
        stats["learner/samples"] = float(len(samples))
        return stats

    def _summed_logprobs(self, samples: Sequence[TrainSample], reference: bool = False) -> torch.Tensor:
        """(N,) each sample's completion log-prob: its tokens' sum, or its forced choice's."""
        by_sample = {}
        for chunk in self._chunks(samples, len(samples)):
            logprobs, mask, _ = self._logprobs(chunk, reference)
            by_sample.update(zip(map(id, chunk), (logprobs.float() * mask).sum(-1)))
        return torch.stack([by_sample[id(s)] for s in samples])

    @torch.no_grad()
    def _pull_reference(self) -> None:
        """Move the magnet a step towards the policy (magnetic mirror descent's reference update)."""
        if not (self._has_reference and self.config.magnet_rate):
            return
        tau = self.config.magnet_rate
        for ref, live in self._reference_pairs():
            ref.lerp_(live, tau)

    def _reference_pairs(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(reference parameter, the policy's parameter it follows)."""
        if self.reference is not None:
            return list(zip(self.reference.parameters(), self.policy.model.parameters()))
        params = dict(self.policy.model.named_parameters())
        return [
            (params[n.replace(f".{self.adapter}.", f".{self.reference_adapter}.")], p)
            for n, p in params.items() if adapter_of(n) == self.adapter
        ]  # fmt: skip

    def set_hparams(self, values: dict[str, float]) -> None:
        """Change optimisation settings mid-run (PBT's explore); a new ``lr`` keeps the schedule's
        progress: the rate becomes lr × the schedule's current factor. ``kickstart_coef`` anneals
        or perturbs kickstarting's λ."""
        if "kickstart_coef" in values:
            self._check_kickstart(values["kickstart_coef"])
        self.config = self.config.model_copy(update=values)
        if "lr" in values:
            self.schedule.base_lrs = [values["lr"]] * len(self.optimizer.param_groups)
            factors = [fn(self.schedule.last_epoch) for fn in self.schedule.lr_lambdas]
            for group, base, factor in zip(self.optimizer.param_groups, self.schedule.base_lrs, factors):
                group["lr"] = base * factor

    def weights(self) -> dict[str, torch.Tensor]:
        return trainable_weights(self.policy.model, self.adapter)

    def load_weights(self, weights: dict[str, torch.Tensor]) -> None:
        load_weights(self.policy.model, weights, self.adapter)

    def state_dict(self) -> dict:
        """Everything to resume from: the trained weights, optimiser, schedule and magnet, on the CPU
        (a Ray learner's state reaches a driver that may have no GPU; loading moves it back)."""
        state = {
            "weights": self.weights(), "optimizer": on_host(self.optimizer.state_dict()), "schedule": self.schedule.state_dict()
        }
        if self.reference is not None:
            state["reference"] = on_host(self.reference.state_dict())
        elif self.reference_adapter is not None:
            state["reference"] = trainable_weights(self.policy.model, self.reference_adapter)
        return state

    def load_state_dict(self, state: dict) -> None:
        self.load_weights(state["weights"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        if self.reference is not None:
            self.reference.load_state_dict(state["reference"])
        elif self.reference_adapter is not None:
            load_weights(self.policy.model, state["reference"], self.reference_adapter)

    @property
    def _has_reference(self) -> bool:
        return self.reference is not None or self.reference_adapter is not None
