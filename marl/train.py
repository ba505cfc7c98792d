"""Self-play training: one policy plays every seat of a mixture of games; each iteration is
rollouts (the batched engine) -> advantages (RAE by default) -> a PPO-clip update -> the new
weights play the next iteration (one process: the engine holds the very model the learner updates).

The run directory is the contract with analysis (DESIGN.md):

    config.toml         the resolved config, as run
    events.jsonl        structlog JSON lines, each with run_id, iteration and kind
    episodes/           one JSONL shard per iteration, written atomically
    checkpoints/        iter_NNNNNN/ folders written atomically, and ``latest`` naming the newest
    .lock               held while a trainer runs (``marl.rundir``)

Every random choice derives from (seed, iteration), so a run resumed from its last checkpoint
replays exactly what an uninterrupted run would have done. On resume, events and episode shards
newer than the checkpoint are dropped first: nothing is lost, nothing duplicated. A run killed
before its first checkpoint resumes from the start, its partial records dropped the same way.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import shutil
import time
import zlib
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import structlog
import tomli_w
import torch
from peft import LoraConfig

import games
from games import kuhn_analysis
from games.play import derive_seed
from marl.advantages import ADVANTAGE_ESTIMATORS, Sample
from marl.config import TrainConfig
from marl.episode import Episode, write_jsonl
from marl.evaluate import kuhn_strategy, results_against
from marl.hf import HFPolicy
from marl.learner import Learner, TrainSample, load_weights, trainable_weights
from marl.models import load_hf, load_smollm2, load_tiny
from marl.policy import Sampling
from marl.pools import LearnerLost, LocalPool, MatchPlan, Members, RayPool
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.rundir import RunLock, save_tensors, write_text
from marl.scripted import ScriptedPolicy

MEMBER = "policy"  # the trained player's name on every turn it plays


def load_model(config: TrainConfig, member: str = MEMBER) -> HFPolicy:
    """A fresh copy of the configured model (never the process-wide cached one: training mutates
    it); with LoRA, ``member`` names its adapter."""
    if config.model == "tiny":
        policy = load_tiny(config.model_seed)
    elif config.model == "smollm2-135m":
        policy = load_smollm2()
    else:
        policy = load_hf(config.model.removeprefix("hf:"))
    if config.lora.r:
        add_member_adapter(policy, config, member)
    else:
        policy.model.requires_grad_(True)
    return policy


def add_member_adapter(policy: HFPolicy, config: TrainConfig, member: str) -> None:
    """``member``'s LoRA adapter, initialised from its own seed (the model seed and its name):
    the same in whichever process and order it is made, so a resumed run plays as an unbroken one."""
    policy.add_adapter(member, lora_config(config), seed=derive_seed(config.model_seed, zlib.crc32(member.encode())))


def lora_config(config: TrainConfig) -> LoraConfig:
    return LoraConfig(r=config.lora.r, lora_alpha=config.lora.alpha, target_modules=config.lora.target_modules)


def member_model(config: TrainConfig, member: str, bases: dict[tuple[str, int], HFPolicy]) -> HFPolicy:
    """A population member's model. With LoRA, an adapter named ``member`` on the one base that
    every member of that model shares (``bases``, by model and seed): N members cost one base and
    N adapters in memory, and play in one batched call. With full weights, a model of its own."""
    if not config.lora.r:
        return load_model(config, member)
    key = (config.model, config.model_seed)
    if key in bases:
        add_member_adapter(bases[key], config, member)
    else:
        bases[key] = load_model(config, member)
    return bases[key]


def trained_seat(config: TrainConfig, policy: HFPolicy, member: str = MEMBER) -> SeatSpec:
    """How a trained member plays, in training and in evaluation, wherever it runs."""
    rollout = config.rollout
    adapter = member if config.lora.r else None
    sampling = Sampling(rollout.temperature, rollout.top_p, rollout.max_new_tokens)
    return SeatSpec(
        policy, member, config.mode, sampling, adapter, rollout.invalid_moves, rollout.compact_prompts, rollout.parse,
        rollout.max_output_chars,
    )  # fmt: skip


def rollout_members(config: TrainConfig) -> Members:
    """A rollout worker's players: its own copy of the trained model."""
    return {MEMBER: trained_seat(config, load_model(config))}


def remote_learner(config: TrainConfig) -> Learner:
    """The learner an actor holds: its own copy of the model and optimiser."""
    return Learner(load_model(config), config.optim, updates=config.iterations)


def make_pool(config: TrainConfig, me: SeatSpec) -> LocalPool | RayPool:
    """The configured pool; ``local`` shares ``me``'s model between engine and learner."""
    if config.pool.kind == "ray":
        return RayPool(
            config.pool, partial(rollout_members, config), config.rollout.concurrency, MEMBER,
            partial(remote_learner, config),
        )  # fmt: skip
    return LocalPool({MEMBER: me}, config.rollout.concurrency, Learner(me.policy, config.optim, updates=config.iterations))


class Trainer:
    def __init__(self, config: TrainConfig, run_dir: Path):
        self.config = config
        self.run_dir = Path(run_dir)
        self.policy = load_model(config)  # ray pool: the driver's copy, for evaluation and checkpoints
        self.baselines: dict[tuple[str, str], float] = {}
        self.iteration = 0
        self.past: deque[tuple[int, dict[str, torch.Tensor]]] = deque(maxlen=self._past_needed() + 1)
        self.seats = {g: games.make(g).possible_agents for g in config.games}
        self.me = trained_seat(config, self.policy)
        self.adapter, self.sampling = self.me.adapter, self.me.sampling
        self.engine = RolloutEngine(concurrency=config.rollout.concurrency)  # evaluation matches
        self.pool = make_pool(config, self.me)
        self._initial: HFPolicy | None = None

    # ---- run directory -------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        return self.run_dir.name

    def _events(self):
        self.run_dir.mkdir(parents=True, exist_ok=True)
        stream = open(self.run_dir / "events.jsonl", "a", encoding="utf-8", buffering=1)  # line-buffered
        return stream, structlog.wrap_logger(
            structlog.WriteLogger(stream),
            processors=[structlog.processors.TimeStamper(fmt="iso"), structlog.processors.JSONRenderer(sort_keys=True)],
        ).bind(run_id=self.run_id)

    def _past_needed(self) -> int:
        ks = [int(o.split(":")[1]) for o in self.config.eval.opponents if o.startswith("past:")]
        return max(ks, default=0)

    # ---- one iteration -------------------------------------------------------------------------

    def _plans(self, iteration: int) -> list[MatchPlan]:
        rng = np.random.default_rng([self.config.seed, iteration])
        names = list(self.config.games)
        weights = np.array([self.config.games[g] for g in names], dtype=float)
        specs = []
        for m in range(self.config.rollout.matches):
            game = names[rng.choice(len(names), p=weights / weights.sum())]
            specs.append(
                MatchPlan(game, derive_seed(self.config.seed, iteration, m), dict.fromkeys(self.seats[game], MEMBER), f"it{iteration}-m{m}")
            )
        return specs

    @staticmethod
    def _samples(episodes: list[Episode], member: str = MEMBER) -> tuple[list[Sample], list]:
        """``member``'s turns to learn from: never another member's (a frozen opponent's) turns."""
        samples, turns = [], []
        for ep in episodes:
            for t in ep.turns:
                if t.member == member and t.completion_ids:
                    samples.append(Sample(ep.match_id, (ep.game, t.role), ep.rewards[t.seat], group=ep.game))
                    turns.append(t)
        return samples, turns

    def step(self, iteration: int) -> dict:
        start = time.perf_counter()
        episodes = self.pool.play(self._plans(iteration))
        rollout_time = time.perf_counter() - start
        samples, turns = self._samples(episodes)
        advantages = ADVANTAGE_ESTIMATORS[self.config.advantage.estimator](
            samples, self.baselines, self.config.advantage.ema_decay
        )
        temperature = self._strategy_temperature() or 1.0
        batch = [
            TrainSample(
                t.prompt_ids, t.completion_ids, float(a), self.adapter,
                t.candidate_ids or None, t.choice, temperature,
            )  # fmt: skip
            for t, a in zip(turns, advantages)
        ]
        metrics, weights = self.pool.update(batch)
        if weights is not None:  # the learner is elsewhere: bring the driver's copy up to date
            load_weights(self.policy.model, weights)
        completion_tokens = sum(len(t.completion_ids) for t in turns)
        metrics["perf/rollout_tokens_per_s"] = completion_tokens / max(rollout_time, 1e-9)
        metrics.update(self._rollout_metrics(episodes, samples, advantages))
        metrics.update(self._kuhn_metrics())
        write_jsonl(self.run_dir / "episodes" / f"iter_{iteration:06d}.jsonl", episodes)
        self.past.append((iteration, trainable_weights(self.policy.model, self.adapter)))
        return metrics

    def _kuhn_metrics(self) -> dict:
        """The policy's exact Kuhn strategy and exploitability, when it plays Kuhn poker."""
        if "kuhn_poker" not in self.config.games:
            return {}
        strategy = kuhn_strategy(self.policy, self._strategy_temperature(), self.adapter, self.config.rollout.compact_prompts)
        return {
            "kuhn/exploitability": float(kuhn_analysis.exploitability(strategy)),
            "kuhn/strategy": strategy,  # P(bet or call) per information set: for average policies and plots
        }

    def _start_info(self) -> dict:
        """What the run's first event says about it."""
        return {
            "model": self.config.model, "mode": self.config.mode, "matches_per_iteration": self.config.rollout.matches,
            "games": self.config.games, **self._kuhn_metrics(),
            "trainable_parameters": sum(p.numel() for p in trainable_weights(self.policy.model).values()),
        }  # fmt: skip

    def _strategy_temperature(self) -> float:
        return self.config.rollout.temperature if self.config.mode == "choose" else 1.0

    def _rollout_metrics(
        self, episodes: list[Episode], samples: list[Sample], advantages: np.ndarray, member: str = MEMBER,
        baselines: dict | None = None,
    ) -> dict:  # fmt: skip
        """Per game and seat, over the matches ``member`` played that seat in."""
        baselines = self.baselines if baselines is None else baselines
        out: dict[str, float] = {}
        for game in self.config.games:
            for role in self.seats[game]:
                eps = [e for e in episodes if e.game == game and e.members[role] == member]
                prefix = f"{game}/{role}"
                turns = [t for e in eps for t in e.turns if t.role == role and t.member == member]
                rets = [e.rewards[role] for e in eps]
                others = [max(r for s, r in e.rewards.items() if s != role) for e in eps]
                if rets:
                    out[f"{prefix}/return"] = float(np.mean(rets))
                    out[f"{prefix}/win"] = float(np.mean([a > b for a, b in zip(rets, others)]))
                    out[f"{prefix}/draw"] = float(np.mean([a == b for a, b in zip(rets, others)]))
                if turns:
                    out[f"{prefix}/invalid_rate"] = float(np.mean([not t.valid for t in turns]))
                    out[f"{prefix}/response_tokens"] = float(np.mean([len(t.completion_ids) for t in turns]))
                out[f"{prefix}/baseline"] = baselines.get((game, role), 0.0)
                adv = [a for s, a in zip(samples, advantages) if s.key == (game, role)]
                if adv:
                    out[f"{prefix}/adv_mean"], out[f"{prefix}/adv_std"] = float(np.mean(adv)), float(np.std(adv))
        reasons = Counter(t.reason.split(";")[0] for e in episodes for t in e.turns if not t.valid)
        out["rollout/invalid_rate"] = float(np.mean([not t.valid for e in episodes for t in e.turns] or [0.0]))
        out["rollout/invalid_reasons"] = dict(reasons.most_common(5))
        return out

    # ---- evaluation ----------------------------------------------------------------------------

    def _opponent(self, name: str, game: str):
        if name == "initial":
            if self._initial is None:
                self._initial = load_model(self.config)
            return self._initial, None
        if name.startswith("past:"):  # the oldest snapshot kept: K iterations ago once the run is that old
            past = copy.deepcopy(self.policy)
            load_weights(past.model, self.past[0][1], self.adapter)
            return past, self.adapter
        scripted = games.scripted_players(game)
        return ScriptedPolicy(name, scripted[name]), None

    def evaluate(self, iteration: int) -> dict[str, float]:
        out = {}
        for game in self.config.games:
            for name in self.config.eval.opponents:
                if name not in ("initial",) and not name.startswith("past:") and name not in games.scripted_players(game):
                    continue  # a scripted player of another game
                policy, adapter = self._opponent(name, game)
                mode = self.config.mode if isinstance(policy, HFPolicy) else "generate"
                them = replace(self.me, policy=policy, member=name, mode=mode, adapter=adapter)
                specs = []
                for m in range(self.config.eval.matches):
                    seats = self.seats[game]
                    order = seats if m % 2 == 0 else seats[::-1]
                    specs.append(MatchSpec(game, derive_seed(self.config.seed, iteration, 10**6 + m), {order[0]: self.me, order[1]: them}))
                result = results_against(self.engine.play(specs), MEMBER)
                for k, v in result.items():
                    out[f"eval/{game}/{name}/{k}"] = v
        return out

    # ---- checkpoints ---------------------------------------------------------------------------

    def save_checkpoint(self, iteration: int) -> Path:
        folder = self.run_dir / "checkpoints"
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"iter_{iteration:06d}"
        staging = folder / f".staging-{iteration:06d}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        tensors, meta = self._checkpoint_state()
        save_tensors(staging / "state.pt", {**tensors, "torch_rng": torch.get_rng_state()})
        write_text(staging / "state.json", json.dumps({"iteration": iteration, **meta}))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staging, final)
        write_text(folder / "latest", final.name)
        return final

    def _checkpoint_state(self) -> tuple[dict, dict]:
        """What a checkpoint holds: tensors (``state.pt``) and JSON (``state.json``)."""
        tensors = {"learner": self.pool.state(), "past": list(self.past)}  # learner: weights, optimiser, schedule, magnet
        return tensors, {"baselines": _pairs(self.baselines)}

    def load_checkpoint(self) -> int:
        folder = self.run_dir / "checkpoints"
        name = (folder / "latest").read_text().strip()
        state = torch.load(folder / name / "state.pt", weights_only=False)
        meta = json.loads((folder / name / "state.json").read_text())
        torch.set_rng_state(state["torch_rng"])
        self._restore(state, meta)
        self.iteration = meta["iteration"]
        return self.iteration

    def _restore(self, tensors: dict, meta: dict) -> None:
        load_weights(self.policy.model, tensors["learner"]["weights"])
        self.pool.load_state(tensors["learner"])
        self.past.clear()
        self.past.extend(tensors["past"])
        self.baselines = _unpairs(meta["baselines"])

    def _drop_after(self, iteration: int) -> None:
        """Forget events and episode shards newer than the checkpoint we resume from, and the
        ``end`` of a finished run that is being extended."""
        events = self.run_dir / "events.jsonl"
        if events.exists():
            kept = []
            for line in events.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by the kill
                    continue
                if record.get("iteration", 0) <= iteration and record.get("kind") != "end":
                    kept.append(line + "\n")
            write_text(events, "".join(kept))
        for shard in (self.run_dir / "episodes").glob("iter_*.jsonl"):
            if int(shard.stem.split("_")[1]) > iteration:
                shard.unlink()

    # ---- the loop ------------------------------------------------------------------------------

    def run(self, resume: bool = False, on_iteration: Callable[[int, dict], None] | None = None) -> dict:
        # Models, tokenizers and modules live as long as the run: keep them out of the cyclic
        # collector's scans, which otherwise grow with the heap and tax every allocation
        # (measured: payoff bookkeeping 5x slower per match with torch and transformers loaded).
        gc.freeze()
        with RunLock(self.run_dir):
            return self._run(resume, on_iteration)

    def _run(self, resume: bool, on_iteration: Callable[[int, dict], None] | None) -> dict:
        fresh = not (resume and (self.run_dir / "checkpoints" / "latest").exists())
        if fresh:  # a new run, or one killed before its first checkpoint: made again from the start
            self._drop_after(-1)
            write_text(self.run_dir / "config.toml", tomli_w.dumps(self.config.model_dump(mode="json", exclude_none=True)))
        else:
            self._drop_after(self.load_checkpoint())
        stream, log = self._events()
        metrics: dict = {}
        try:
            if fresh:
                log.info("start", kind="start", iteration=0, **self._start_info())
            while self.iteration < self.config.iterations:
                iteration = self.iteration + 1
                try:
                    metrics = self.step(iteration)
                except LearnerLost:  # its actor restarted empty: rewind to the last checkpoint
                    if not (self.run_dir / "checkpoints" / "latest").exists():
                        raise
                    stream.close()  # _drop_after rewrites events.jsonl: log to the new file
                    self._drop_after(self.load_checkpoint())
                    stream, log = self._events()
                    log.warning("learner_lost", kind="learner_lost", iteration=self.iteration)
                    continue
                if self.config.eval.every and iteration % self.config.eval.every == 0:
                    metrics.update(self.evaluate(iteration))
                log.info("iteration", kind="iteration", iteration=iteration, **metrics)
                self.iteration = iteration
                if iteration % self.config.checkpoint_every == 0 or iteration == self.config.iterations:
                    self.save_checkpoint(iteration)
                    log.info("checkpoint", kind="checkpoint", iteration=iteration)
                if on_iteration is not None:
                    on_iteration(iteration, metrics)
            log.info("end", kind="end", iteration=self.iteration)  # what `coevo watch` waits for
        except KeyboardInterrupt:  # at exit: keep every finished iteration
            if self.iteration and not (self.run_dir / "checkpoints" / f"iter_{self.iteration:06d}").exists():
                self.save_checkpoint(self.iteration)
                log.info("checkpoint", kind="checkpoint", iteration=self.iteration)
            raise
        finally:
            stream.close()
            self.pool.close()
        return metrics


def _pairs(baselines: dict[tuple[str, str], float]) -> list:
    """RAE baselines as JSON: [game, role, value] rows."""
    return [[g, r, b] for (g, r), b in baselines.items()]


def _unpairs(rows: list) -> dict[tuple[str, str], float]:
    return {(g, r): b for g, r, b in rows}

