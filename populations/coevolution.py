"""Role co-evolution on task forge: a proposer, an executor, a verifier and a teacher, each its own
member with its own learner, improving against each other.

One iteration:

1. ``rollout.matches`` task forge matches are played at once by the batched engine, each role's
   turns in one model call per step (or by its scripted player);
2. the game's outcome is shaped into each role's reward (``roles.rewards``), plus Agent0's batch
   repetition penalty for the proposer; every component is logged under its own name;
3. each trainable role learns from its own turns only, each turn credited by the part of the
   outcome it decided (``roles.forge.turn_reward``: an attempt by its correctness, a judgement by
   its agreement, a hint by the retry's success over p̂), with the role's estimator: RAE per
   (game, role), GRPO or ADPO over a task's k attempts (ADPO: ambiguity-scaled advantages and a
   per-sample upper clip), or MALT's tree values; the executor optionally only on tasks with
   0.3 ≤ p̂ ≤ 0.8, and optionally kickstarted by the teacher model (λ·KL(teacher ‖ executor),
   λ annealed). Scripted players learn through their own ``learn`` (curricula, skill);
4. every ``eval.every`` iterations the executor is scored on held-out tasks of every family.

Runs, checkpoints and resumes like ``marl.train`` (same run directory), with every role's learner,
the RAE baselines and the scripted players' state in the checkpoint.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from games.forge_players import FORGE_PLAYERS, SkilledExecutor, task_label
from games.play import derive_seed
from games.sandbox import Limits
from games.task_families import FAMILIES, heldout
from marl.advantages import ADVANTAGE_ESTIMATORS, Sample
from marl.credit import Node, adpo_advantages, adpo_clip_high, anneal, malt_samples, task_filter
from marl.episode import Episode, write_jsonl
from marl.hf import HFPolicy
from marl.learner import Learner, TrainSample, trainable_weights
from marl.pools import LocalPool
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.scripted import ScriptedPolicy
from marl.train import Trainer, _pairs, _unpairs, load_model, trained_seat
from populations.config import RoleConfig, RunConfig
from roles.forge import turn_reward
from roles.rewards import forge_rewards, repetition_penalties, switch_rates

GAME = "task_forge"


@dataclass
class Role:
    """One role's member: how it plays, and how it learns (a learner for a model, its own
    ``learn`` for a scripted player)."""

    name: str
    config: RoleConfig
    seat: SeatSpec
    learner: Learner | None = None

    @property
    def scripted(self) -> ScriptedPolicy | None:
        return self.seat.policy if isinstance(self.seat.policy, ScriptedPolicy) else None


class CoevolutionTrainer(Trainer):
    def __init__(self, config: RunConfig, run_dir: Path):
        if config.roles is None:
            raise ValueError("CoevolutionTrainer needs a [roles] table")
        self.config = config
        self.run_dir = Path(run_dir)
        self.iteration = 0
        self.reward_config = config.reward_config
        self.roles = {name: self._role(name, rc) for name, rc in config.roles.items()}
        self._kickstart()
        self.baselines: dict[tuple[str, str], float] = {}
        self.engine = RolloutEngine(concurrency=config.rollout.concurrency)
        self.pool = LocalPool({}, config.rollout.concurrency)  # closed by the run loop; matches go through the engine
        forge = config.forge
        self.game_kwargs = {
            "attempts": forge.attempts, "tool_calls": forge.tool_calls, "proposer_tool_calls": forge.proposer_tool_calls,
            "teacher": "teacher" in self.roles, "limits": Limits(cpu_seconds=forge.cpu_seconds, wall_seconds=forge.wall_seconds),
            "reward_fn": partial(forge_rewards, config=self.reward_config),
        }  # fmt: skip
        self.heldout = [t for family in FAMILIES for t in heldout(family, forge.heldout, seed=config.seed + 7919)]

    def _role(self, name: str, rc: RoleConfig) -> Role:
        if rc.scripted is not None:
            return Role(name, rc, SeatSpec(ScriptedPolicy(rc.scripted, FORGE_PLAYERS[rc.scripted]), name))
        cfg = self.config.model_copy(update={"model": rc.player, "model_seed": rc.model_seed, "lora": rc.lora})
        policy = load_model(cfg)
        seat = trained_seat(cfg, policy)
        seat.member = name
        learner = Learner(policy, self.config.optim, updates=self.config.iterations) if rc.trainable else None
        return Role(name, rc, seat, learner)

    def _kickstart(self) -> None:
        """The executor distils the teacher model on its own turns, when configured."""
        executor = self.roles["executor"]
        if not executor.config.kickstart or executor.learner is None:
            return
        teacher = self.roles["teacher"].seat
        executor.learner = Learner(
            executor.seat.policy, self.config.optim, updates=self.config.iterations, teacher=teacher.policy,
            kickstart_coef=executor.config.kickstart, teacher_adapter=teacher.adapter,
        )  # fmt: skip

    # ---- one iteration -------------------------------------------------------------------------

    def _matches(self, iteration: int) -> list[MatchSpec]:
        seats = {name: role.seat for name, role in self.roles.items()}
        return [
            MatchSpec(GAME, derive_seed(self.config.seed, iteration, m), seats, f"it{iteration}-m{m}", self.game_kwargs)
            for m in range(self.config.rollout.matches)
        ]

    def step(self, iteration: int) -> dict:
        episodes = self.engine.play(self._matches(iteration))
        metrics = self._shape(episodes)
        for role in self.roles.values():
            if role.config.trainable:
                metrics.update(self._learn(role, episodes, iteration))
        write_jsonl(self.run_dir / "episodes" / f"iter_{iteration:06d}.jsonl", episodes)
        return metrics

    def _shape(self, episodes: list[Episode]) -> dict:
        """Add the proposer's batch repetition penalty to the episodes' rewards; log every
        reward component, p̂, difficulty, switch rates, and why tasks and answers were invalid."""
        valid = [ep for ep in episodes if ep.outcome["valid_task"]]
        weight = self.reward_config.repetition_weight
        penalties = repetition_penalties([ep.outcome["task"] for ep in valid], self.reward_config.repetition_threshold)
        components: dict[str, list[float]] = {}
        for ep in episodes:
            for seat, parts in forge_rewards(ep.outcome, self.reward_config).items():
                for part, value in parts.items():
                    components.setdefault(f"{GAME}/{seat}/{part}", []).append(value)
        for ep, penalty in zip(valid, penalties):
            ep.rewards["proposer"] -= weight * penalty
            components.setdefault(f"{GAME}/proposer/repetition", []).append(-weight * penalty)
        out = {key: float(np.mean(values)) for key, values in components.items()}
        for seat in self.roles:
            out[f"{GAME}/{seat}/return"] = float(np.mean([ep.rewards[seat] for ep in episodes]))
        outcomes = [ep.outcome for ep in episodes]
        attempts = [a for o in outcomes for a in o["attempts"]]
        out["forge/valid_task_rate"] = len(valid) / len(episodes)
        out["forge/invalid_task_reasons"] = dict(Counter(o["invalid_reason"].split(":")[0] for o in outcomes if not o["valid_task"]).most_common(5))
        if valid:
            p_hats = np.array([ep.outcome["p_hat"] for ep in valid])
            out["forge/p_hat"] = float(p_hats.mean())
            out["forge/p_hat_in_band"] = float(np.mean([task_filter(p) for p in p_hats]))
            out["forge/difficulty"] = float(np.mean([task_label(ep.outcome["task_meta"])[1] for ep in valid]))
            out["forge/invalid_answer_rate"] = float(np.mean([a["answer"] is None for a in attempts]))
            out["forge/tool_calls_per_attempt"] = float(np.mean([a["tool_calls"] for a in attempts]))
            out.update({f"forge/switch_{k}": v for k, v in switch_rates(outcomes).items()})
        return out

    def _learn(self, role: Role, episodes: list[Episode], iteration: int) -> dict:
        """One update of ``role`` on its own turns (or its scripted player's ``learn``)."""
        kept = [ep for ep in episodes if not (role.config.task_filter and not self._in_band(ep))]
        if role.scripted is not None:
            role.scripted.learn([ep.outcome for ep in kept])
            return {f"{role.name}/learned_from": float(len(kept))}
        turns = [(ep, t) for ep in kept for t in ep.turns if t.member == role.name and t.completion_ids]
        if not turns:
            return {}
        advantages, clip_high = self._advantages(role, turns)
        batch = [
            TrainSample(t.prompt_ids, t.completion_ids, float(a), role.seat.adapter, clip_high=c)
            for (_, t), a, c in zip(turns, advantages, clip_high)
        ]
        if role.config.kickstart_final is not None:
            role.learner.set_hparams({"kickstart_coef": anneal(role.config.kickstart, role.config.kickstart_final, iteration - 1, self.config.iterations)})
        stats = role.learner.update(batch)
        stats["adv_mean"], stats["adv_std"] = float(np.mean(advantages)), float(np.std(advantages))
        stats["response_tokens"] = float(np.mean([len(t.completion_ids) for _, t in turns]))
        return {f"{role.name}/{k}": v for k, v in stats.items()}

    @staticmethod
    def _in_band(ep: Episode) -> bool:
        return ep.outcome["valid_task"] and task_filter(ep.outcome["p_hat"])

    def _advantages(self, role: Role, turns: list[tuple[Episode, object]]) -> tuple[np.ndarray, list[float | None]]:
        """Each turn's advantage under the role's estimator, and its ADPO upper clip (None: the config's)."""
        rewards = np.array([turn_reward(ep.outcome, role.name, t.tag, self.reward_config, ep.rewards[role.name]) for ep, t in turns])
        groups = [(ep.match_id, t.tag.split(":")[0]) for ep, t in turns]  # a task's k attempts (or judgements…) form a group
        estimator = role.config.estimator
        if estimator == "adpo":
            p_hats = np.array([ep.outcome["p_hat"] for ep, _ in turns])
            return adpo_advantages(rewards, groups, p_hats), [adpo_clip_high(p, self.config.optim.clip_eps) for p in p_hats]
        if estimator == "malt":
            return self._malt(role, turns), [None] * len(turns)
        samples = [
            Sample(f"{ep.match_id}/{t.tag}", (GAME, role.name), float(r), group)
            for (ep, t), r, group in zip(turns, rewards, groups)
        ]
        return ADVANTAGE_ESTIMATORS[estimator](samples, self.baselines, self.config.advantage.ema_decay), [None] * len(turns)

    def _malt(self, role: Role, turns: list[tuple[Episode, object]]) -> np.ndarray:
        """MALT's credit: per match a tree task → attempt (executor) → judgement (verifier) →
        revision (executor, a leaf rewarded by its correctness); a node is good (+1) when its
        value, the mean of its children's, is above ½, else bad (−1). Turns outside the chain (tool
        runs, hints, retries, the proposal) get their plain turn reward's sign."""
        labels: dict[tuple[str, str], float] = {}
        for ep in {ep.match_id: ep for ep, _ in turns}.values():
            root = Node("task")
            for i, a in enumerate(ep.outcome["attempts"]):
                revise = Node("executor", f"revise:{i}", reward=float(a["revised_correct"]))
                root.children.append(Node("executor", f"attempt:{i}", [Node("verifier", f"judge:{i}", [revise])]))
            for node, _, label in malt_samples(root):
                labels[(ep.match_id, node.payload)] = 2.0 * label - 1.0
        return np.array([
            labels.get((ep.match_id, t.tag), np.sign(turn_reward(ep.outcome, role.name, t.tag, self.reward_config, ep.rewards[role.name])))
            for ep, t in turns
        ])  # fmt: skip

    # ---- evaluation ----------------------------------------------------------------------------

    def evaluate(self, iteration: int) -> dict[str, float]:
        """The executor's held-out accuracy per family: its unaided success probability (scripted)
        or its share of right answers before any critique (a model, over the held-out tasks)."""
        executor = self.roles["executor"]
        if isinstance(executor.scripted.player if executor.scripted else None, SkilledExecutor):
            player = executor.scripted.player
            per_family = {f: player.heldout_accuracy([t for t in self.heldout if t.family == f]) for f in FAMILIES}
        else:
            per_family = self._played_accuracy(iteration)
        out = {f"eval/executor/heldout/{f}": v for f, v in per_family.items()}
        out["eval/executor/heldout_accuracy"] = float(np.mean(list(per_family.values())))
        return out

    def _played_accuracy(self, iteration: int) -> dict[str, float]:
        seats = {name: role.seat for name, role in self.roles.items()}
        specs = [
            MatchSpec(GAME, derive_seed(self.config.seed, iteration, 10**6 + i), seats, f"eval{iteration}-{i}",
                      {**self.game_kwargs, "task": (t.statement, t.program)})
            for i, t in enumerate(self.heldout)
        ]  # fmt: skip
        p_hats = [ep.outcome["p_hat"] for ep in self.engine.play(specs)]
        return {f: float(np.mean([p for t, p in zip(self.heldout, p_hats) if t.family == f])) for f in FAMILIES}

    def _kuhn_metrics(self) -> dict:
        return {}

    def _start_info(self) -> dict:
        return {
            "roles": {name: role.config.player for name, role in self.roles.items()},
            "matches_per_iteration": self.config.rollout.matches,
            "trainable_parameters": {
                name: sum(p.numel() for p in trainable_weights(role.seat.policy.model).values())
                for name, role in self.roles.items() if isinstance(role.seat.policy, HFPolicy)
            },
        }  # fmt: skip

    # ---- checkpoints ---------------------------------------------------------------------------

    def _checkpoint_state(self) -> tuple[dict, dict]:
        learners = {name: role.learner.state_dict() for name, role in self.roles.items() if role.learner is not None}
        scripted = {name: role.scripted.state_dict() for name, role in self.roles.items() if role.scripted is not None}
        return {"learners": learners}, {"baselines": _pairs(self.baselines), "scripted": scripted}

    def _restore(self, tensors: dict, meta: dict) -> None:
        for name, state in tensors["learners"].items():
            self.roles[name].learner.load_state_dict(state)
        for name, state in meta["scripted"].items():
            self.roles[name].scripted.load_state_dict(state)
        self.baselines = _unpairs(meta["baselines"])
