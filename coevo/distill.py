"""A population's answer as one model: distil a policy given per information state (a meta-strategy
mixture, a learner's average policy) into a model that plays forced choice.

A mixture is not something one can deploy: it is "draw a member, then play it for the whole
match", and the average of a learner's iterates exists only as a table. NFSP's answer
(Heinrich & Silver 2016) is an average network trained by supervised learning on the mixture's
own moves; here, where the mixture is known exactly at every information state, the model is
fitted to its move distributions directly: the loss is KL(target ‖ model) at each information
state, weighted by how often play reaches it (the target playing both seats, chance included),
so that the states which decide the game's value are fitted first and unreachable ones count for
nothing. The model's distribution is forced choice's, exactly as play draws from it
(:func:`marl.policy.choice_logprobs`), so the distilled model's exploitability is measured like
any policy's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from coevo.config import load_run_config
from coevo.evaluators import KuhnExploitability, measured, seat_role, strategy_of
from coevo.train import Trainer
from games import kuhn_analysis
from marl.evaluate import kuhn_infoset
from marl.hf import HFPolicy, adapter_of
from marl.policy import choice_logprobs
from roles.seat import SeatRole

if TYPE_CHECKING:
    from open_spiel.python.policy import TabularPolicy

    from games.openspiel_env import OpenSpielEnv


@dataclass(frozen=True)
class Target:
    """The policy to distil at one information state."""

    prompt: str  # what the env shows the seat there
    moves: tuple[str, ...]  # its legal moves
    probs: tuple[float, ...]  # the target's probability of each
    weight: float  # how often play reaches it


def targets_from(env: OpenSpielEnv, policy: TabularPolicy) -> list[Target]:
    """A tabular policy of an OpenSpiel game (a mixture, an average) at every information state,
    each with the prompt the env shows there and its reach when the policy plays itself."""
    from games import openspiel_analysis

    reached = openspiel_analysis.reach(env.game, policy)
    table = policy.action_probability_array
    return [
        Target(s.prompt, s.moves, tuple(float(q) for q in table[policy.state_lookup[s.key], list(s.actions)]), reached.get(s.key, 0.0))
        for s in openspiel_analysis.information_states(env)
    ]


def kl_per_state(policy: HFPolicy, targets: Sequence[Target], role: SeatRole, temperature: float = 1.0,
                 adapter: str | None = None) -> torch.Tensor:  # fmt: skip
    """(N,) KL(target ‖ model) at each information state, with grad: every move of every state
    scored in one forward pass, each state's prompt once."""
    prompts = policy.encode([role.messages(t.prompt) for t in targets])
    moves = [[policy.tokenizer.encode(role.format_move(m), add_special_tokens=False) for m in t.moves] for t in targets]
    rows = [(prompt, move) for prompt, options in zip(prompts, moves) for move in options]
    token_lp, real, _ = policy.completion_logprobs([p for p, _ in rows], [m for _, m in rows], [adapter] * len(rows))
    kls, row = [], 0
    for t, options in zip(targets, moves):
        per_token = [token_lp[r][real[r]] for r in range(row, row + len(options))]
        log_model = choice_logprobs(options, per_token, temperature)
        target = torch.tensor(t.probs, dtype=log_model.dtype, device=log_model.device)
        kls.append((target * (torch.log(target.clamp_min(1e-12)) - log_model)).sum())
        row += len(options)
    return torch.stack(kls)


def distill(
    policy: HFPolicy,
    targets: Sequence[Target],
    role: SeatRole,
    *,
    steps: int = 300,
    batch: int = 64,
    lr: float = 3e-3,
    temperature: float = 1.0,
    adapter: str | None = None,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> list[float]:
    """Fit ``policy`` (its ``adapter``'s weights, or the whole model) to ``targets`` with Adam:
    each step a batch of information states drawn in proportion to their weight, its mean KL the
    loss; a game with at most ``batch`` information states (Kuhn's 12) fits all of them, their KL
    weighted exactly. ``progress(step)`` after each step. Returns the curve a user watches: the
    reach-weighted KL over all states before training and every ``steps // 10`` steps after."""
    params = [p for n, p in policy.model.named_parameters() if (adapter_of(n) == adapter if adapter else p.requires_grad)]
    if not params:
        raise ValueError(f"{policy.name}: nothing to train (adapter {adapter!r} has no trainable weights)")
    weights = np.array([t.weight for t in targets], dtype=float)
    if len(targets) == 0 or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError("distill needs targets with non-negative weights, not all zero")
    weights /= weights.sum()
    optimizer = torch.optim.Adam(params, lr=lr)
    rng = np.random.default_rng(seed)
    curve = [weighted_kl(policy, targets, role, temperature, adapter)]
    everything = torch.tensor(weights, dtype=torch.float32, device=policy.device)
    for step in range(1, steps + 1):
        if batch >= len(targets):  # every state each step, weighted exactly
            loss = (kl_per_state(policy, targets, role, temperature, adapter) * everything).sum()
        else:  # states drawn by weight: the same loss in expectation
            chosen = rng.choice(len(targets), size=batch, p=weights)
            loss = kl_per_state(policy, [targets[i] for i in chosen], role, temperature, adapter).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % max(steps // 10, 1) == 0 or step == steps:
            curve.append(weighted_kl(policy, targets, role, temperature, adapter))
        if progress is not None:
            progress(step)
    return curve


@torch.no_grad()
def weighted_kl(policy: HFPolicy, targets: Sequence[Target], role: SeatRole, temperature: float = 1.0,
                adapter: str | None = None, chunk: int = 256) -> float:  # fmt: skip
    """The reach-weighted mean KL(target ‖ model) over every information state."""
    total = 0.0
    for start in range(0, len(targets), chunk):
        part = targets[start : start + chunk]
        kls = kl_per_state(policy, part, role, temperature, adapter).double().cpu().numpy()
        total += float(np.dot(kls, [t.weight for t in part]))
    return total / sum(t.weight for t in targets)


class CannotDistill(ValueError):
    """A run whose policy this module cannot distil; the message says why, in one line."""


def kuhn_targets(strategy: Mapping[str, float]) -> list[Target]:
    """A strategy of our Kuhn poker (``games.kuhn_analysis``) at each of its 12 information sets,
    each with the prompt play shows there and its reach when the strategy plays itself."""
    reached, out = kuhn_analysis.reach(strategy), []
    for key in kuhn_analysis.INFOSETS:
        env, agent = kuhn_infoset(key)
        moves, aggressive = tuple(env.legal_moves(agent)), float(strategy[key])
        probs = tuple(aggressive if move in ("bet", "call") else 1 - aggressive for move in moves)
        out.append(Target(env.observe(agent)["prompt"], moves, probs, float(reached[key])))
    return out


@dataclass(frozen=True)
class Answer:
    """A run's answer ready to distil, and how its game measures a policy."""

    game: str  # the game whose prompts the model plays
    kind: str  # "population mixture" or "average policy"
    targets: list[Target]
    target_exploitability: float
    exploitability: Callable[[], float]  # of the learner's policy as it is now


def answer_of(trainer: Trainer, name: str, target: str | None) -> Answer:
    """``name``'s answer in a loaded run: a population's meta-strategy mixture or the learner's
    average policy (``target``; by default the mixture when the run has a population)."""
    measure = trainer.measures[0]
    member = trainer.members[name]
    target = target or ("mixture" if trainer.config.population is not None else "average")
    if target == "mixture":
        policy = measure.mixture(trainer) if trainer.config.population is not None else None
        if policy is None:
            raise CannotDistill(f"{trainer.run_dir}: no population, or no player of its meta-strategy can be read; try --target average")
    elif name in measure.averages.policies:
        policy = measure.averages.policies[name][0]
    else:
        raise CannotDistill(f"{trainer.run_dir}'s checkpoint holds no average policy (an older coevo wrote it); train the run again")
    kind = "population mixture" if target == "mixture" else "average policy"
    if isinstance(measure, KuhnExploitability):
        return Answer(
            "kuhn_poker", kind, kuhn_targets(policy), float(kuhn_analysis.exploitability(policy)),
            lambda: float(kuhn_analysis.exploitability(strategy_of(member))),
        )  # fmt: skip
    game = measure.env.game
    return Answer(
        measure.game, kind, targets_from(measure.env, policy), measure.analysis.exploitability(game, policy),
        lambda: measure.analysis.exploitability(game, measure.policy(member)),
    )  # fmt: skip


def distill_run(run_dir: Path, out: Path, *, target: str | None = None, steps: int = 300, batch: int = 64, lr: float = 3e-3,
                progress: Callable[[int], None] | None = None) -> dict:  # fmt: skip
    """Distil a finished (or checkpointed) run's answer into one model, saved in ``out`` as a
    Hugging Face model folder (``model = "<out>"`` in a run config plays it): a population's
    meta-strategy mixture (PSRO's answer as one policy), or a learner's average policy (NFSP's
    average network); ``target`` ``"mixture"`` or ``"average"`` picks, by default the mixture
    when the run has a population.

    The student starts from the (first) learner's last checkpointed weights: the nearest model to
    the target it has. Returns what a user compares: the target's exploitability, the learner's
    last policy's, the distilled model's, and the KL curve.
    """
    config = load_run_config(run_dir / "config.toml", ["pool.kind='local'"])
    if not any(measured(game) for game in config.games):
        raise CannotDistill(f"{run_dir} plays {', '.join(config.games)}: distill needs Kuhn poker or a small two-player zero-sum OpenSpiel game")
    if config.mode != "choose" or config.lora.r:
        raise CannotDistill(f"{run_dir}: distill takes a run of whole models in forced choice (mode = 'choose', lora.r = 0)")
    trainer = Trainer(config, run_dir)
    trainer.load_checkpoint()
    name = next(iter(trainer.roster.specs))
    member = trainer.members[name]
    answer = answer_of(trainer, name, target)
    last = answer.exploitability()
    role = seat_role(member, answer.game)
    curve = distill(member.policy, answer.targets, role, steps=steps, batch=batch, lr=lr,
                    temperature=member.temperature, progress=progress)  # fmt: skip
    member.policy.model.save_pretrained(out)
    member.policy.tokenizer.save_pretrained(out)
    return {
        "run": str(run_dir), "iteration": trainer.iteration, "game": answer.game, "target": answer.kind,
        "target_exploitability": answer.target_exploitability, "learner": name, "last_exploitability": last,
        "distilled_exploitability": answer.exploitability(), "kl": curve, "out": str(out),
    }  # fmt: skip
