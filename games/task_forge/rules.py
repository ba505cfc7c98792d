"""Task forge: a proposer writes a task, an executor solves it, a verifier judges, a teacher hints.

| Creation    | ``games.make("task_forge")``, ``games.make("task_forge", attempts=4, tool_calls=2, teacher=True)`` |
|-------------|------------------------------------------------------------------------------------------|
| Seats       | ``proposer``, ``executor``, ``verifier``, and ``teacher`` when ``teacher=True``            |
| Moves       | free text (``Text`` action space); what a turn may contain depends on the phase below      |
| Observation | ``prompt``: the rules, then what this seat may see now                                    |
| Rewards     | none of its own: the match reports an outcome (:meth:`TaskForge.outcome`) and the roles shape rewards from it (``roles.rewards``), passed in as ``reward_fn`` |

One match is one task:

1. **propose** — the proposer may run Python (a fenced ```python block; its output comes back) up to
   ``proposer_tool_calls`` times, then submits ``<task>STATEMENT</task>`` and
   ``<program>CODE</program>``. The program runs in the sandbox twice, with different hash seeds;
   its output is the reference answer. A program that fails, times out, prints nothing, prints
   too much, or prints different things on the two runs makes an **invalid task**, recorded with
   its reason, and the match ends — unless ``seed_tasks=True``: then the other seats play a task
   drawn from :mod:`games.task_forge.families` instead (``seeded`` in the outcome), so a proposer that
   cannot yet write a valid task does not leave the executor, verifier and teacher without matches.
2. for each of ``attempts`` (k) independent attempts:
   - **attempt** — the executor may run Python up to ``tool_calls`` (T) times, then answers with
     ``\\boxed{ANSWER}``. Output with no answer is an **invalid answer**, recorded with its reason
     (the attempt counts as wrong; the match goes on);
   - **judge** — the verifier sees the task and the answer and replies ``\\boxed{accept}`` or
     ``\\boxed{reject}`` with a short critique;
   - **revise** — the executor sees the verdict and critique and may change its answer once
     (``\\boxed{…}`` again; no answer keeps the old one). A critique can help or mislead: strong
     agents switch correct answers after one persuasive but wrong critique (WAFER-QA);
   - **hint** and **retry** — with a teacher seated, when the final answer is wrong: the teacher
     (who sees the reference answer) writes a hint that must not contain the answer, and the
     executor tries once more with it, tools allowed.
   With ``choices=N`` the executor picks each answer among N options instead of writing it (no
   Python runs): the reference and N − 1 answers of other tasks of its family, so forced choice
   can play the seat.
3. The match ends; the outcome holds every answer, verdict, switch and hint, and p̂, the share of
   attempts right before any critique (the executor's own success rate).

Code written by players runs only in :mod:`games.task_forge.sandbox`, never in this process.

Version history:
* v1: first version.
* v2: ``seed_tasks``: a seed task is played when the proposer's is invalid.
* v2 still: ``choices``: multiple choice, off by default (matches without it are unchanged).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from games.core import GameInfo, Parsed, Rules
from games.task_forge.proposals import checked_task
from games.task_forge.sandbox import Limits, players_sandbox, tool_run
from games.task_forge.families import FAMILIES, Task, answers_match, distractors, generate, normalize_answer
from games.formats import CHOICE_INSTRUCTIONS, INSTRUCTIONS, MOVE_FORMS, python_block, read_answer, read_submission, read_verdict

SEATS = ("proposer", "executor", "verifier")
TEACHER = "teacher"
HINT_MAX_CHARS = 500
CRITIQUE_MAX_CHARS = 400

RULES_TEXT = " ".join("""You are playing task forge, a game of four roles. The proposer writes a task
with a Python program that prints its answer; the executor solves the task, running Python if it
likes, and answers in \\boxed{}; the verifier judges each answer (accept or reject, with a short
critique); the executor may then revise its answer; a teacher may give a hint after a wrong answer.
Python runs in a sandbox: standard library only, no files or network, a few seconds at most.""".split())

MOVER = {"propose": 0, "attempt": 1, "judge": 2, "revise": 1, "hint": 3, "retry": 1}  # seat index per phase
ANSWERING = ("attempt", "revise", "retry")  # the executor's phases: with choices, it picks an option

def _shown(answer: str | None) -> str:
    return "(no answer)" if answer is None else answer


@dataclass
class Attempt:
    """One of the executor's attempts, as the outcome reports it."""

    answer: str | None = None
    invalid_reason: str = ""
    correct: bool = False
    tool_calls: int = 0
    verdict: str | None = None
    verdict_invalid_reason: str = ""
    critique: str = ""
    revised_answer: str | None = None
    revised_correct: bool = False
    hint: str | None = None
    hint_invalid_reason: str = ""
    hint_answer: str | None = None
    hint_correct: bool | None = None
    transcript: list[str] = field(default_factory=list)  # the executor's tool runs in this attempt


class TaskForge(Rules):
    info = GameInfo("task_forge", 1, SEATS, False, -2.0, 2.0, 64)
    moves = None
    runs_code = True
    rules_text = RULES_TEXT

    def __init__(
        self,
        rng: np.random.Generator,
        attempts: int = 4,
        tool_calls: int = 2,
        proposer_tool_calls: int = 4,
        teacher: bool = False,
        limits: Limits | None = None,
        reward_fn: Callable[[dict], dict[str, dict[str, float]]] | None = None,
        task: tuple[str, str] | tuple[str, str, dict[str, str]] | None = None,
        seed_tasks: bool = False,
        sandbox: Literal["bwrap", "rlimit"] = "bwrap",
        choices: int = 0,
    ):
        """``task``: a given (statement, program) instead of a proposer's, for held-out evaluation:
        the match starts at the first attempt; a third item labels it like a scripted proposer's
        tag (``{"family": …, "size": …, "complexity": …}``). ``seed_tasks``: when the proposer's task is invalid,
        play one drawn uniformly from the task families instead of ending the match. ``reward_fn``
        shapes the outcome into each seat's reward components (``roles.rewards.forge_rewards``);
        without it every reward is 0. ``sandbox``: where players' code runs (:mod:`games.task_forge.sandbox`);
        ``"rlimit"`` opts into the fallback for machines without bubblewrap, which is no boundary.
        ``choices``: multiple choice: the executor answers by picking one of this many options, the
        reference among wrong answers of the task's family (:func:`~games.task_forge.families.distractors`),
        so forced choice can play it (a model too small to write an answer still gets a signal);
        the task must name its family (a scripted proposer's, a seed or a held-out task)."""
        if attempts < 1 or tool_calls < 0 or proposer_tool_calls < 0:
            raise ValueError(f"need attempts >= 1 and tool calls >= 0, got {attempts=}, {tool_calls=}, {proposer_tool_calls=}")
        if choices == 1 or choices < 0:
            raise ValueError(f"choices is 0 (free answers) or at least 2 options, got {choices}")
        if choices and tool_calls:
            raise ValueError(f"multiple choice leaves no turn for Python (choices = {choices}); set tool_calls = 0")
        seats = (*SEATS, TEACHER) if teacher else SEATS
        per_attempt = (tool_calls + 1) + 2 + (1 + tool_calls + 1 if teacher else 0)
        self.info = replace(TaskForge.info, seats=seats, max_turns=proposer_tool_calls + 1 + attempts * per_attempt)
        self.k, self.tool_calls, self.proposer_tool_calls, self.teacher = attempts, tool_calls, proposer_tool_calls, teacher
        self.choices = choices
        self.options: list[str] = []  # with choices: what the executor picks among, in the order shown
        self.sandbox = players_sandbox(limits, sandbox)
        self.reward_fn = reward_fn
        self.rng, self.seed_tasks, self.seeded = rng, seed_tasks, False
        self.phase = "propose"
        self.task: str = ""
        self.task_meta: dict[str, str] = {}
        self.program: str = ""
        self.reference: str | None = None
        self.invalid_reason = ""
        self.proposer_transcript: list[str] = []
        self.attempts: list[Attempt] = []
        self._flaw = ""  # what was invalid about the move just applied (see flaw)
        if task is not None:
            self._submit(task[0], task[1], meta=dict(task[2]) if len(task) > 2 else {})

    # ---- whose turn ----------------------------------------------------------------------------

    @property
    def to_move(self) -> int | None:
        return None if self.phase == "over" else MOVER[self.phase]

    @property
    def current(self) -> Attempt:
        return self.attempts[-1]

    def legal_moves(self) -> list[str]:
        if self.phase == "over":
            return []
        if self.choices and self.phase in ANSWERING:
            return [f"\\boxed{{{option}}}" for option in self.options]
        return list(MOVE_FORMS[self.phase])

    def choosable(self, seat: int) -> bool:
        """The verifier's verdicts are always a choice of two; the executor's answers with ``choices``."""
        return self.info.seats[seat] == "verifier" or (self.choices > 0 and self.info.seats[seat] == "executor")

    def turn_tag(self) -> str:
        """``propose``, or the phase and the attempt it belongs to: ``attempt:0``, ``judge:0``, ``retry:3``…"""
        return self.phase if self.phase in ("propose", "over") else f"{self.phase}:{len(self.attempts) - 1}"

    def parse(self, text: str, lenient: bool = False) -> Parsed:
        """Every text is a move: what it fails to say is judged inside the game (an invalid task
        or answer, recorded with its reason, and reported by :meth:`flaw`), not by ending the
        match on the spot."""
        return Parsed(text)

    def flaw(self) -> str:
        """Why the move just applied was invalid: the invalid task, answer, judgement or hint's
        reason the outcome records ("" when it was fine)."""
        return self._flaw

    # ---- moves ---------------------------------------------------------------------------------

    def apply(self, move: str) -> list[float]:
        self._flaw = ""
        getattr(self, f"_{self.phase}")(move)
        if self.phase != "over" or self.reward_fn is None:
            return [0.0] * len(self.info.seats)
        shaped = self.reward_fn(self.outcome())
        return [sum(shaped.get(seat, {}).values()) for seat in self.info.seats]

    def _propose(self, text: str) -> None:
        code = python_block(text)
        submission = read_submission(text)
        if submission is None and code is not None and len(self.proposer_transcript) < self.proposer_tool_calls:
            self.proposer_transcript.append(tool_run(self.sandbox, code))
            return
        if submission is None:
            self._end_invalid("no <task>…</task> and <program>…</program> in the proposal")
            return
        self._submit(*submission)

    def _submit(self, task: str, program: str, meta: dict[str, str]) -> None:
        self.task, self.program, self.task_meta = task, program, meta
        answer, reason = checked_task(self.sandbox, task, program)
        if answer is None:
            self._end_invalid(reason)
        else:
            self.reference = answer
            self._start_attempts()

    def _start_attempts(self) -> None:
        """The executor's turn; with ``choices``, among options drawn from the task's family."""
        if self.choices:
            family = self.task_meta.get("family")
            if family not in FAMILIES:
                self.reference = None
                self._end_invalid(f"multiple choice needs the task's family (one of {', '.join(FAMILIES)}); got {family!r}")
                return
            knobs = (float(self.task_meta.get("size", 0)), float(self.task_meta.get("complexity", 0)))
            task = Task(family, knobs, self.task, self.program, self.reference)
            options = [self.reference, *distractors(task, self.choices - 1, self.rng)]
            self.options = [options[i] for i in self.rng.permutation(len(options))]
        self.attempts.append(Attempt())
        self.phase = "attempt"

    def _end_invalid(self, reason: str) -> None:
        self.invalid_reason, self.phase, self._flaw = reason, "over", reason
        if self.seed_tasks:
            self._play_seed_task()

    def _play_seed_task(self) -> None:
        """The proposer's task stays invalid (its reason recorded); the others get a family task,
        uniform in family and knobs, its answer known without running anything."""
        family = FAMILIES[int(self.rng.integers(len(FAMILIES)))]
        knobs = self.rng.random(2)
        seed = generate(family, knobs, self.rng)
        self.task, self.program, self.reference, self.seeded = seed.statement, seed.program, seed.answer, True
        self.task_meta = seed.label
        self._start_attempts()

    def _tool_or_answer(self, text: str, calls_made: int) -> tuple[str | None, str, bool]:
        """(answer, invalid reason, ran a tool) for an executor turn that may run Python."""
        answer = read_answer(text)
        if answer is not None:
            return answer, "", False
        code = python_block(text)
        if code is not None and calls_made < self.tool_calls:
            self.current.transcript.append(tool_run(self.sandbox, code))
            return None, "", True
        if code is not None:
            return None, f"no tool calls left ({self.tool_calls} allowed) and no \\boxed{{answer}}", False
        return None, "no \\boxed{answer} in the output", False

    def _attempt(self, text: str) -> None:
        a = self.current
        answer, reason, ran = self._tool_or_answer(text, a.tool_calls)
        if ran:
            a.tool_calls += 1
            return
        a.answer, a.invalid_reason, self._flaw = answer, reason, reason
        a.correct = answers_match(answer, self.reference)
        self.phase = "judge"

    def _judge(self, text: str) -> None:
        a = self.current
        a.verdict = read_verdict(text)
        if a.verdict is None:
            a.verdict_invalid_reason = self._flaw = "no \\boxed{accept} or \\boxed{reject} in the judgement"
        critique = re.sub(r"\\boxed\s*\{[^{}]*\}", "", text).strip()
        a.critique = critique[:CRITIQUE_MAX_CHARS]
        self.phase = "revise"

    def _revise(self, text: str) -> None:
        a = self.current
        revised = read_answer(text)
        if revised is None:
            self._flaw = "no \\boxed{answer} in the revision: the first answer stands"
        a.revised_answer = revised if revised is not None else a.answer
        a.revised_correct = answers_match(a.revised_answer, self.reference)
        self.phase = "hint" if self.teacher and not a.revised_correct else self._next_attempt()

    def _hint(self, text: str) -> None:
        a = self.current
        hint = text.strip()[:HINT_MAX_CHARS]
        if not hint:
            a.hint_invalid_reason = "the hint is empty"
        elif normalize_answer(self.reference) in normalize_answer(hint):
            a.hint_invalid_reason = "the hint gives the answer away"
        if a.hint_invalid_reason:
            self._flaw = a.hint_invalid_reason
            self.phase = self._next_attempt()
            return
        a.hint = hint
        a.transcript = []  # the retry's own tool runs
        self.phase = "retry"

    def _retry(self, text: str) -> None:
        a = self.current
        answer, self._flaw, ran = self._tool_or_answer(text, len(a.transcript))
        if ran:
            return
        a.hint_answer = answer
        a.hint_correct = answers_match(answer, self.reference)
        self.phase = self._next_attempt()

    def _next_attempt(self) -> str:
        if len(self.attempts) == self.k:
            return "over"
        self.attempts.append(Attempt())
        return "attempt"

    # ---- what each seat sees -------------------------------------------------------------------

    def view(self, seat: int) -> str:
        name = self.info.seats[seat]
        if self.phase == "over":
            return f"The match is over. {self._summary()}"
        if MOVER[self.phase] != seat:
            return f"You are the {name}. Waiting for the {self.info.seats[MOVER[self.phase]]}."
        lines = [f"You are the {name}."]
        if self.phase == "propose":
            lines += self.proposer_transcript
            left = self.proposer_tool_calls - len(self.proposer_transcript)
            lines.append(f"Python runs left: {left}.")
        else:
            lines.append(f"Task: {self.task}")
            lines += self._view_attempt()
        lines.append(CHOICE_INSTRUCTIONS[self.phase] if self.choices and self.phase in ANSWERING else INSTRUCTIONS[self.phase])
        return "\n".join(lines)

    def _view_attempt(self) -> list[str]:
        a = self.current
        if self.phase == "attempt":
            return [*a.transcript, f"Python runs left: {self.tool_calls - a.tool_calls}."] if not self.choices else []
        if self.phase == "judge":
            return [*a.transcript, f"The executor's answer: {_shown(a.answer)}"]
        if self.phase == "revise":
            verdict = a.verdict or "no verdict"
            return [f"Your answer: {_shown(a.answer)}", f"The verifier's verdict: {verdict}. Critique: {a.critique}"]
        if self.phase == "hint":
            return [f"Reference answer: {self.reference}", f"The executor's final answer: {_shown(a.revised_answer)}"]
        runs = [] if self.choices else [f"Python runs left: {self.tool_calls - len(a.transcript)}."]
        return [f"Your answer was wrong: {_shown(a.revised_answer)}", f"Hint: {a.hint}", *a.transcript, *runs]

    def _summary(self) -> str:
        if self.invalid_reason:
            return f"Invalid task: {self.invalid_reason}."
        right = sum(a.revised_correct for a in self.attempts)
        return f"Reference answer: {self.reference}. Final answers right: {right} of {len(self.attempts)}."

    def render(self) -> str:
        lines = [f"phase: {self.phase}", f"task: {self.task!r}", f"reference: {self.reference!r}"]
        if self.invalid_reason:
            lines.append(f"invalid task: {self.invalid_reason}")
        for i, a in enumerate(self.attempts):
            lines.append(
                f"attempt {i}: answer={a.answer!r} correct={a.correct} tools={a.tool_calls} verdict={a.verdict} "
                f"revised={a.revised_answer!r} ({a.revised_correct}) hint={a.hint!r} retry={a.hint_answer!r} ({a.hint_correct})"
            )
        return "\n".join(lines)

    # ---- the outcome ---------------------------------------------------------------------------

    def outcome(self) -> dict:
        """Everything reward shaping needs (the schema ``roles.rewards.forge_rewards`` reads)."""
        answers = [normalize_answer(a.answer) for a in self.attempts if a.answer is not None]
        majority = Counter(answers).most_common(1)[0][0] if answers else None
        fields = ("answer", "invalid_reason", "correct", "tool_calls", "verdict", "verdict_invalid_reason", "critique",
                  "revised_answer", "revised_correct", "hint", "hint_invalid_reason", "hint_answer", "hint_correct")  # fmt: skip
        return {
            "valid_task": self.reference is not None and not self.seeded,  # the proposer's own task
            "seeded": self.seeded,  # the attempts were on a seed task: the proposer's was invalid
            "invalid_reason": self.invalid_reason,
            "task": self.task,
            "task_meta": dict(self.task_meta),
            "reference": self.reference,
            "options": list(self.options),
            "proposer_tool_calls": len(self.proposer_transcript),
            "attempts": [{f: getattr(a, f) for f in fields} for a in self.attempts],
            "p_hat": float(np.mean([a.correct for a in self.attempts])) if self.attempts else 0.0,
            "majority_answer": majority,
            "majority_agrees": majority is not None and answers_match(majority, self.reference),
        }
