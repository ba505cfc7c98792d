"""Scripted players for task forge: fast stand-ins for each role, to simulate co-evolution on a CPU.

- :class:`CurriculumProposer` writes tasks from :mod:`games.task_forge.families`, choosing the family and
  difficulty knobs with a curriculum teacher (:mod:`games.task_forge.curricula`: uniform, ALP-GMM, SEC, a staircase or
  PAIRED) that learns from how the executor did. Its tasks are labelled (``<task family=… size=… complexity=…>``),
  so analysis and the executor's skill model can read what was asked.
- :class:`SkilledExecutor` answers right with probability ``sigmoid(slope · (skill − difficulty))``
  per family, and *learns*: practising a task it solves with probability p raises its skill by
  ``rate · p(1 − p)`` — most at the edge of its ability, nothing on tasks far too easy or too hard,
  which is what makes the choice of curriculum matter. It reads the reference answer from the game
  (it simulates a solver of a given skill; it is not one). A rejection sways it: it abandons a
  right answer with probability ``persuadability`` and rethinks a wrong one at its skill.
- :class:`NoisyVerifier` judges right with probability ``accuracy``; ``adversarial`` rejects
  every answer with a confident critique.
- :class:`HintTeacher` writes a hint that never contains the answer; a hinted retry is easier by
  the executor's ``hint_boost``.

Players learn between iterations through ``learn(outcomes)``, with the outcomes of the matches
they took part in (``TaskForge.outcome``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from games.task_forge.curricula import ALPGMM, PAIRED, SEC, Curriculum, RandomCurriculum, Staircase
from games.task_forge.families import FAMILIES, Task, answers_match, generate

DEFAULT_DIFFICULTY = 0.5  # for an unlabelled task (a model's): the executor's skill model needs a number


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def task_label(meta: dict[str, str]) -> tuple[str | None, float]:
    """(family, difficulty) of a labelled task; (None, DEFAULT_DIFFICULTY) when it has no label."""
    try:
        return meta["family"], (float(meta["size"]) + float(meta["complexity"])) / 2
    except (KeyError, ValueError):
        return None, DEFAULT_DIFFICULTY


def task_knobs(meta: dict[str, str]) -> np.ndarray | None:
    try:
        return np.array([float(meta["size"]), float(meta["complexity"])])
    except (KeyError, ValueError):
        return None


def wrong_answer(reference: str, rng: np.random.Generator) -> str:
    """A plausible wrong answer: an integer off by a little, else the text changed."""
    if re.fullmatch(r"-?\d+", reference.strip()):
        return str(int(reference) + int(rng.choice([-3, -2, -1, 1, 2, 3])))
    changed = reference[::-1]
    return changed if not answers_match(changed, reference) else reference + "x"


def submission(task: Task) -> str:
    """A family task as a scripted proposer submits it, labelled with its family and knobs."""
    attributes = " ".join(f'{k}="{v}"' for k, v in task.label.items())
    return f"<task {attributes}>{task.statement}</task>\n<program>\n{task.program}\n</program>"


class RolePlayer:
    """A scripted player made for one seat. Seated elsewhere it says so, and the game records
    that as an invalid task or answer (with the game's reason) rather than crashing."""

    seat: str

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        if agent != self.seat:
            return f"(a scripted {self.seat} cannot play the {agent})"
        return self.play(env.rules, rng)

    def play(self, rules, rng: np.random.Generator) -> str:
        raise NotImplementedError


class CurriculumProposer(RolePlayer):
    seat = "proposer"

    def __init__(self, curriculum: Curriculum):
        self.curriculum = curriculum

    @classmethod
    def named(cls, name: str, families: tuple[str, ...] = FAMILIES) -> CurriculumProposer:
        """``uniform``, ``alp_gmm`` (refitted every 100 tasks, not the paper's 250: our runs see a few
        thousand tasks, not millions), ``sec`` (Boltzmann temperature 0.1) or ``staircase``
        (holds each family at p̂ ≈ 0.55, the middle of Agent0's band) or ``paired`` (regret against a
        :class:`SkilledAntagonist` with the default protagonist's skill plus 0.3)."""
        if name == "paired":
            return cls(PAIRED(list(families), SkilledAntagonist(families=families)))
        if name == "staircase":
            return cls(Staircase(list(families)))
        if name == "alp_gmm":
            return cls(ALPGMM(list(families), fit_rate=100, window=100))
        if name == "sec":  # rewards 2p(1−p) lie in [0, ½]: at τ = 1 the best arm is barely preferred
            return cls(SEC(list(families), temperature=0.1))
        return cls(RandomCurriculum(list(families)))

    def play(self, rules, rng: np.random.Generator) -> str:
        family, knobs = self.curriculum.propose(rng)
        return submission(generate(family, knobs, rng))

    def learn(self, outcomes: list[dict]) -> None:
        """The executor's success rate p̂ on each valid task is the teacher's reward signal."""
        for outcome in outcomes:
            family, _ = task_label(outcome.get("task_meta", {}))
            knobs = task_knobs(outcome.get("task_meta", {}))
            if outcome["valid_task"] and family is not None and knobs is not None:
                self.curriculum.update(family, knobs, outcome["p_hat"])

    def state_dict(self) -> dict:
        return self.curriculum.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.curriculum.load_state_dict(state)


class SkilledExecutor(RolePlayer):
    seat = "executor"

    def __init__(
        self, skill: float = 0.1, slope: float = 8.0, rate: float = 0.005, persuadability: float = 0.3,
        hint_boost: float = 0.15, families: tuple[str, ...] = FAMILIES,
    ):  # fmt: skip
        self.skills = dict.fromkeys(families, float(skill))
        self.slope, self.rate, self.persuadability, self.hint_boost = slope, rate, persuadability, hint_boost

    def p_correct(self, family: str | None, difficulty: float, boost: float = 0.0) -> float:
        skill = self.skills.get(family, float(np.mean(list(self.skills.values()))))
        return sigmoid(self.slope * (skill + boost - difficulty))

    def play(self, rules, rng: np.random.Generator) -> str:
        family, difficulty = task_label(rules.task_meta)
        reference = rules.reference
        if rules.phase == "revise":
            a = rules.current
            keep = a.answer if a.answer is not None else wrong_answer(reference, rng)
            if a.verdict != "reject":
                return f"\\boxed{{{keep}}}"
            if a.correct:
                switch = rng.random() < self.persuadability
                return f"\\boxed{{{wrong_answer(reference, rng) if switch else keep}}}"
            fixed = rng.random() < self.p_correct(family, difficulty)
            return f"\\boxed{{{reference if fixed else keep}}}"
        boost = self.hint_boost if rules.phase == "retry" else 0.0
        right = rng.random() < self.p_correct(family, difficulty, boost)
        return f"\\boxed{{{reference if right else wrong_answer(reference, rng)}}}"

    def learn(self, outcomes: list[dict]) -> None:
        """Practice raises skill by ``rate · p(1 − p)`` per attempt: most where p is near ½."""
        for outcome in outcomes:
            family, difficulty = task_label(outcome.get("task_meta", {}))
            if family not in self.skills:
                continue
            self.practise(family, difficulty, len(outcome["attempts"]))  # none when no task was played

    def practise(self, family: str, difficulty: float, attempts: int) -> None:
        """``attempts`` tries at a task of ``family`` and ``difficulty``, each raising skill by ``rate · p(1 − p)``."""
        for _ in range(attempts):
            p = self.p_correct(family, difficulty)
            self.skills[family] += self.rate * p * (1 - p)

    def heldout_accuracy(self, tasks) -> float:
        """Mean probability of solving ``tasks`` (``task_families.Task``) unaided: the executor's held-out accuracy."""
        return float(np.mean([self.p_correct(t.family, t.difficulty) for t in tasks]))

    def state_dict(self) -> dict:
        return {"skills": dict(self.skills)}

    def load_state_dict(self, state: dict) -> None:
        self.skills = {k: float(v) for k, v in state["skills"].items()}


class SkilledAntagonist:
    """PAIRED's antagonist (``curricula.PAIRED``): a second :class:`SkilledExecutor` that attempts every
    task the protagonist played, ``attempts`` times, and learns from them as the protagonist learns.

    Why this antagonist: PAIRED's regret needs an executor that solves what the protagonist cannot
    yet. A scripted executor ahead of the protagonist (``skill`` 0.4 against the default
    protagonist's 0.1) marks the tasks just past the protagonist's reach; a second model trained
    beside it would cost a second learner and match per task. It learns too, as the paper's
    antagonist trains on the designer's tasks: at the regret-maximising difficulty, midway between
    the two skills, p(1 − p) is the same for both (the sigmoid is symmetric), so it keeps its lead.
    Its attempts are drawn from a generator seeded by (``seed``, tasks played), so a run repeats
    and a resumed antagonist continues exactly.
    """

    def __init__(self, skill: float = 0.4, attempts: int = 8, seed: int = 0, families: tuple[str, ...] = FAMILIES):
        self.executor = SkilledExecutor(skill=skill, families=families)
        self.attempts, self.seed, self.played = attempts, seed, 0

    def success(self, family: str, knobs: np.ndarray) -> float:
        difficulty = float(np.mean(knobs))
        solved = np.random.default_rng([self.seed, self.played]).binomial(self.attempts, self.executor.p_correct(family, difficulty))
        self.played += 1
        if family in self.executor.skills:
            self.executor.practise(family, difficulty, self.attempts)
        return solved / self.attempts

    def state_dict(self) -> dict:
        return {"executor": self.executor.state_dict(), "played": self.played}

    def load_state_dict(self, state: dict) -> None:
        self.executor.load_state_dict(state["executor"])
        self.played = int(state["played"])


class NoisyVerifier(RolePlayer):
    seat = "verifier"

    def __init__(self, accuracy: float = 0.8, adversarial: bool = False):
        self.accuracy, self.adversarial = accuracy, adversarial

    def play(self, rules, rng: np.random.Generator) -> str:
        if self.adversarial:
            return "This is wrong: the last step does not follow. Recheck it. \\boxed{reject}"
        right = answers_match(rules.current.answer, rules.reference)
        judged_right = right if rng.random() < self.accuracy else not right
        if judged_right:
            return "The answer follows from the task. \\boxed{accept}"
        return "The answer does not match what the task asks. \\boxed{reject}"


class HintTeacher(RolePlayer):
    seat = "teacher"

    def play(self, rules, rng: np.random.Generator) -> str:
        return "Work through the task one step at a time and check each intermediate value before answering."


FORGE_PLAYERS = {
    "uniform": lambda: CurriculumProposer.named("uniform"),
    "alp_gmm": lambda: CurriculumProposer.named("alp_gmm"),
    "sec": lambda: CurriculumProposer.named("sec"),
    "staircase": lambda: CurriculumProposer.named("staircase"),
    "paired": lambda: CurriculumProposer.named("paired"),
    "skilled": SkilledExecutor,
    "noisy": NoisyVerifier,
    "adversarial": lambda: NoisyVerifier(adversarial=True),
    "hinter": HintTeacher,
}
