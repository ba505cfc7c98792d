"""Role co-evolution on task forge: a proposer, an executor, a verifier and a teacher, each role a
population of members (``[roles.<role>] members``, one by default) with their own learners,
improving against each other.

One iteration:

1. ``rollout.matches`` task forge matches are played at once by the batched engine, each member's
   turns in one model call per step (or by its scripted player); in match m each role is played by
   its member m mod the role's size, so every member meets every other role's members alike;
2. the game's outcome is shaped into each role's reward (``roles.rewards``), plus Agent0's batch
   repetition penalty for the proposer; every component is logged under its own name;
3. each trainable member learns from its own turns only, each turn credited by the part of the
   outcome it decided (``roles.forge.turn_reward``: an attempt by its correctness, a judgement by
   its agreement, a hint by the retry's success over p̂), with the role's estimator: RAE per
   (game, role), GRPO or ADPO over a task's k attempts (ADPO: ambiguity-scaled advantages and a
   per-sample upper clip), or MALT's tree values; the executor optionally only on tasks with
   0.3 ≤ p̂ ≤ 0.8, and optionally kickstarted by the teacher model (λ·KL(teacher ‖ executor),
   λ annealed). Scripted players learn through their own ``learn`` (curricula, skill);
4. every ``eval.every`` iterations each executor is scored on held-out tasks of every family.

Runs, checkpoints and resumes like ``marl.train`` (same run directory), with every member's learner,
the RAE baselines and the scripted players' state in the checkpoint.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from games.task_forge.players import FORGE_PLAYERS, SkilledExecutor, task_label
from games.play import derive_seed
from games.task_forge.sandbox import Limits
from games.task_forge.families import FAMILIES, heldout
from marl.advantages import ADVANTAGE_ESTIMATORS, Sample
from marl.credit import Node, adpo_advantages, adpo_clip_high, anneal, malt_samples, task_filter
from marl.episode import Episode, Turn, write_jsonl
from marl.hf import HFPolicy
from marl.learner import Learner, TrainSample, trainable_weights
from marl.pools import LocalPool
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.scripted import ScriptedPolicy
from marl.train import Trainer, _pairs, _unpairs, member_model, trained_seat
from populations.config import RoleConfig, RunConfig
from roles.forge import turn_reward
from roles.rewards import add_repetition, forge_rewards, switch_rates

GAME = "task_forge"


@dataclass
class Member:
    """One member of a role's population: how it plays, and how it learns (a learner for a
    model, its own ``learn`` for a scripted player)."""

    name: str  # the role's name with one member, else role_0, role_1, ...
    role: str  # the seat it plays
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
        self.bases: dict[tuple[str, int], HFPolicy] = {}  # LoRA: one base per model, every member an adapter on it
        self.populations = {
            role: [self._member(role, i, rc) for i in range(rc.members)] for role, rc in config.roles.items()
        }  # role -> its members
        self.members = {m.name: m for team in self.populations.values() for m in team}
        self._kickstart()
        self.baselines: dict[tuple[str, str], float] = {}
        self.engine = RolloutEngine(concurrency=config.rollout.concurrency)
        self.pool = LocalPool({}, config.rollout.concurrency)  # closed by the run loop; matches go through the engine
        forge = config.forge
        self.game_kwargs = {
            "attempts": forge.attempts, "tool_calls": forge.tool_calls, "proposer_tool_calls": forge.proposer_tool_calls,
            "teacher": "teacher" in self.populations, "limits": Limits(cpu_seconds=forge.cpu_seconds, wall_seconds=forge.wall_seconds),
            "reward_fn": partial(forge_rewards, config=self.reward_config), "seed_tasks": forge.seed_tasks,
            "sandbox": forge.sandbox,
        }  # fmt: skip
        self.heldout = [t for family in FAMILIES for t in heldout(family, forge.heldout, seed=config.seed + 7919)]

    def _member(self, role: str, index: int, rc: RoleConfig) -> Member:
        name = role if rc.members == 1 else f"{role}_{index}"
        if rc.scripted is not None:
            return Member(name, role, rc, SeatSpec(ScriptedPolicy(rc.scripted, FORGE_PLAYERS[rc.scripted]), name))
        # full-weight members differ from the start (a seed each); LoRA members are adapters on one base
        update = {"model": rc.player, "model_seed": rc.model_seed + (0 if rc.lora.r else index), "lora": rc.lora}
        cfg = self.config.model_copy(update=update)
        seat = trained_seat(cfg, member_model(cfg, name, self.bases), name)
        # a kickstarted executor gets its learner once the teachers exist (_kickstart)
        learner = None
        if rc.trainable and not rc.kickstart:
            learner = Learner(seat.policy, self.config.optim, updates=self.config.iterations, adapter=seat.adapter)
        return Member(name, role, rc, seat, learner)

    def _kickstart(self) -> None:
        """Each executor distils a teacher model (executor i the teacher i mod T) on its own turns, when configured."""
        teachers = self.populations.get("teacher", [])
        for i, executor in enumerate(self.populations["executor"]):
            if not executor.config.kickstart or not executor.config.trainable:
                continue
            teacher = teachers[i % len(teachers)].seat
            executor.learner = Learner(
                executor.seat.policy, self.config.optim, updates=self.config.iterations, teacher=teacher.policy,
                kickstart_coef=executor.config.kickstart, teacher_adapter=teacher.adapter, adapter=executor.seat.adapter,
            )  # fmt: skip

    # ---- one iteration -------------------------------------------------------------------------

    def _seats(self, m: int) -> dict[str, SeatSpec]:
        """Match m's players: each role's members take turns (m mod the role's size), so every
        member of every role meets every other role's members equally often."""
        return {role: team[m % len(team)].seat for role, team in self.populations.items()}

    def _matches(self, iteration: int) -> list[MatchSpec]:
        return [
            MatchSpec(GAME, derive_seed(self.config.seed, iteration, m), self._seats(m), f"it{iteration}-m{m}", self.game_kwargs)
            for m in range(self.config.rollout.matches)
        ]

    def step(self, iteration: int) -> dict:
        episodes = self.engine.play(self._matches(iteration))
        metrics = self._shape(episodes)
        for member in self.members.values():
            if member.config.trainable:
                metrics.update(self._learn(member, episodes, iteration))
        write_jsonl(self.run_dir / "episodes" / f"iter_{iteration:06d}.jsonl", episodes)
        return metrics

    def _shape(self, episodes: list[Episode]) -> dict:
        """Add the proposer's batch repetition penalty to the episodes' rewards; log every
        reward component, p̂, difficulty, switch rates, and why tasks and answers were invalid."""
        outcomes = [ep.outcome for ep in episodes]
        shaped = [forge_rewards(o, self.reward_config) for o in outcomes]
        add_repetition(shaped, outcomes, self.reward_config)  # a batch term: the game could not add it
        components: dict[str, list[float]] = {}
        for ep, seats in zip(episodes, shaped):
            ep.rewards["proposer"] += seats["proposer"]["repetition"]
            for seat, parts in seats.items():
                for part, value in parts.items():
                    components.setdefault(f"{GAME}/{seat}/{part}", []).append(value)
        out = {key: float(np.mean(values)) for key, values in components.items()}
        valid = [ep for ep in episodes if ep.outcome["valid_task"]]
        for seat in self.populations:
            out[f"{GAME}/{seat}/return"] = float(np.mean([ep.rewards[seat] for ep in episodes]))
        attempts = [a for o in outcomes for a in o["attempts"]]
        out["forge/valid_task_rate"] = len(valid) / len(episodes)
        out["forge/seeded_task_rate"] = float(np.mean([o["seeded"] for o in outcomes]))
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

    def _learn(self, member: Member, episodes: list[Episode], iteration: int) -> dict:
        """One update of ``member`` on its own turns (or its scripted player's ``learn``)."""
        kept = [
            ep for ep in episodes
            if ep.members[member.role] == member.name and not (member.config.task_filter and not self._in_band(ep))
        ]  # fmt: skip
        if member.scripted is not None:
            member.scripted.learn([ep.outcome for ep in kept])
            return {f"{member.name}/learned_from": float(len(kept))}
        turns = [(ep, t) for ep in kept for t in ep.turns if t.member == member.name and t.completion_ids]
        if not turns:
            return {}
        advantages, clip_high = self._advantages(member, turns)
        batch = [
            TrainSample(t.prompt_ids, t.completion_ids, float(a), member.seat.adapter, clip_high=c)
            for (_, t), a, c in zip(turns, advantages, clip_high)
        ]
        rc = member.config
        if rc.kickstart_final is not None:
            member.learner.set_hparams({"kickstart_coef": anneal(rc.kickstart, rc.kickstart_final, iteration - 1, self.config.iterations)})
        stats = member.learner.update(batch)
        stats["adv_mean"], stats["adv_std"] = float(np.mean(advantages)), float(np.std(advantages))
        stats["response_tokens"] = float(np.mean([len(t.completion_ids) for _, t in turns]))
        return {f"{member.name}/{k}": v for k, v in stats.items()}

    @staticmethod
    def _in_band(ep: Episode) -> bool:
        return bool(ep.outcome["attempts"]) and task_filter(ep.outcome["p_hat"])  # a seed task counts

    def _turn_reward(self, member: Member, ep: Episode, tag: str) -> float:
        return turn_reward(ep.outcome, member.role, tag, self.reward_config, ep.rewards[member.role])

    def _advantages(self, member: Member, turns: list[tuple[Episode, Turn]]) -> tuple[np.ndarray, list[float | None]]:
        """Each turn's advantage under the role's estimator, and its ADPO upper clip (None: the
        config's). RAE's baseline is the member's own: keyed by (game, member)."""
        rewards = np.array([self._turn_reward(member, ep, t.tag) for ep, t in turns])
        groups = [(ep.match_id, t.tag.split(":")[0]) for ep, t in turns]  # a task's k attempts (or judgements…) form a group
        estimator = member.config.estimator or self.config.advantage.estimator
        if estimator == "adpo":
            p_hats = np.array([ep.outcome["p_hat"] for ep, _ in turns])
            return adpo_advantages(rewards, groups, p_hats), [adpo_clip_high(p, self.config.optim.clip_eps) for p in p_hats]
        if estimator == "malt":
            return self._malt(member, turns), [None] * len(turns)
        samples = [
            Sample(f"{ep.match_id}/{t.tag}", (GAME, member.name), float(r), group)
            for (ep, t), r, group in zip(turns, rewards, groups)
        ]
        return ADVANTAGE_ESTIMATORS[estimator](samples, self.baselines, self.config.advantage.ema_decay), [None] * len(turns)

    def _malt(self, member: Member, turns: list[tuple[Episode, Turn]]) -> np.ndarray:
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
        return np.array([labels.get((ep.match_id, t.tag), np.sign(self._turn_reward(member, ep, t.tag))) for ep, t in turns])

    # ---- evaluation ----------------------------------------------------------------------------

    def evaluate(self, iteration: int) -> dict[str, float]:
        """Each executor's held-out accuracy per family: its unaided success probability (scripted)
        or its share of right answers before any critique (a model, over the held-out tasks)."""
        out = {}
        for index, executor in enumerate(self.populations["executor"]):
            player = executor.scripted.player if executor.scripted is not None else None
            if isinstance(player, SkilledExecutor):
                per_family = {f: player.heldout_accuracy([t for t in self.heldout if t.family == f]) for f in FAMILIES}
            else:
                per_family = self._played_accuracy(iteration, index)
            out.update({f"eval/{executor.name}/heldout/{f}": v for f, v in per_family.items()})
            out[f"eval/{executor.name}/heldout_accuracy"] = float(np.mean(list(per_family.values())))
        accuracies = [out[f"eval/{e.name}/heldout_accuracy"] for e in self.populations["executor"]]
        out["eval/executor/heldout_accuracy"] = float(np.mean(accuracies))  # the role's mean over its members
        return out

    def _played_accuracy(self, iteration: int, executor: int) -> dict[str, float]:
        seats = self._seats(0) | {"executor": self.populations["executor"][executor].seat}
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
            "members": {name: member.config.player for name, member in self.members.items()},
            "matches_per_iteration": self.config.rollout.matches,
            "trainable_parameters": {
                name: sum(p.numel() for p in trainable_weights(member.seat.policy.model, member.seat.adapter).values())
                for name, member in self.members.items() if isinstance(member.seat.policy, HFPolicy)
            },
        }  # fmt: skip

    # ---- checkpoints ---------------------------------------------------------------------------

    def _checkpoint_state(self) -> tuple[dict, dict]:
        learners = {name: m.learner.state_dict() for name, m in self.members.items() if m.learner is not None}
        scripted = {name: m.scripted.state_dict() for name, m in self.members.items() if m.scripted is not None}
        return {"learners": learners}, {"baselines": _pairs(self.baselines), "scripted": scripted}

    def _restore(self, tensors: dict, meta: dict) -> None:
        for name, state in tensors["learners"].items():
            self.members[name].learner.load_state_dict(state)
        for name, state in meta["scripted"].items():
            self.members[name].scripted.load_state_dict(state)
        self.baselines = _unpairs(meta["baselines"])
