"""Scripted players for orchestration graphs: stand-ins of known skill for any node, so that
topologies can be compared on a CPU in seconds — what a verifier, a refiner or a debate adds over
one solver, and at what cost in calls.

Like task forge's scripted players they read the reference answer from the game: they simulate
players of a given accuracy, they do not solve. A :class:`SkilledNode` plays whatever node it
sits in by what the node writes and what it sees:

- **an answer**, having seen none: right with probability ``accuracy``, else a plausible wrong
  answer (off by a little);
- **an answer**, having seen answers: it re-solves (at ``accuracy``) when the last critique or
  verdict it saw judged the last answer wrong; otherwise it gives the most common answer it saw
  (a debater's second round, a judge, a refiner told the answer is right), ties going to the
  latest;
- **a verdict or a critique** on the last answer it saw: a right judgement with probability
  ``judgement`` (``\\boxed{accept}``/``\\boxed{reject}``, or "looks right"/"looks wrong");
- **free text** with no answer to judge (a plan, a step): a line that helps nobody;
- **the task**: one of the task families' at random knobs, labelled as a scripted proposer's.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from games.task_forge.families import answers_match, generate
from games.task_forge.players import submission, wrong_answer

RIGHT, WRONG = "looks right", "looks wrong"  # how a scripted critique judges, for a scripted refiner to read


class SkilledNode:
    """Any node of any graph, at a given skill (see the module docstring)."""

    def __init__(self, accuracy: float = 0.5, judgement: float = 0.8):
        self.accuracy, self.judgement = accuracy, judgement

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        rules = env.rules
        seat = rules.info.seats.index(agent)
        output = rules.spec.nodes[rules.playing(agent)].output
        if output == "task":
            return submission(generate(rules.families[rng.integers(len(rules.families))], tuple(rng.random(2)), rng))
        seen = rules.seen(seat)
        answers = [t.read for t in seen if rules.spec.nodes[t.node].output == "answer" and t.read is not None]
        if output == "answer":
            return f"\\boxed{{{self._answer(rules.task.answer, answers, seen, rng)}}}"
        if not answers:  # nothing to judge: a verdict lets the graph go on, a text says nothing useful
            return "\\boxed{accept}" if output == "verdict" else "Work through the task step by step."
        right = answers_match(answers[-1], rules.task.answer)
        judged_right = right if rng.random() < self.judgement else not right
        if output == "verdict":
            return f"\\boxed{{{'accept' if judged_right else 'reject'}}}"
        return f"The answer {answers[-1]} {RIGHT if judged_right else WRONG}."

    def _answer(self, reference: str, answers: list[str], seen: list, rng: np.random.Generator) -> str:
        judged = [t for t in seen if t.read in ("accept", "reject") or RIGHT in t.text or WRONG in t.text]
        doubts = [t.read == "reject" or WRONG in t.text for t in judged]
        if answers and not (doubts and doubts[-1]):
            counts = Counter(answers)
            return max(reversed(answers), key=counts.__getitem__)  # the most common; a tie to the latest
        return reference if rng.random() < self.accuracy else wrong_answer(reference, rng)


GRAPH_PLAYERS = {
    "skilled": SkilledNode,  # half its answers right, four judgements in five
    "weak": lambda: SkilledNode(accuracy=0.25, judgement=0.6),
}
