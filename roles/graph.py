"""Orchestration graphs: which roles speak, in what order, who sees whose output, what is scored.

The systems this simulator compares each hard-code one topology (``docs/research/roles.md`` §2–§4):
MALT a generator → verifier → refiner chain, AgentFlow a planner → executor → verifier loop
closed by a generator, MARTI debates of N agents over R rounds before a judge. Here a topology is
data: a :class:`GraphSpec`, written as ``[graph]`` TOML or built in Python, validated, and handed
to networkx as a ``DiGraph`` whose nodes are roles and whose edge ``u → v`` means that ``v`` sees
``u``'s output.

- A **node** is a role: its brief, what it writes (an ``answer`` in ``\\boxed{}``, a ``verdict``
  ``\\boxed{accept}``/``\\boxed{reject}`` with a critique, free ``text``: a plan, a hint, an
  argument, or the match's ``task``: a proposer's ``<task>`` and the ``<program>`` that prints its
  answer, as in task forge; a graph has at most one such node, it speaks first and nothing comes
  into it), whether it sees the task's reference answer (a teacher does), how many independent
  copies speak at each of its turns (``repeats``: k attempts, N debaters), and whether its answer
  is the graph's outcome (``scored``; by default the answering nodes nobody follows), and how many
  Python runs it may make in a turn before it speaks (``tools``: AgentFlow's executor runs its
  tool command, Agent0's executor loops over a Python tool), each run in the sandbox with its
  output shown back. A node may be played by another node's seat (``seat``: task forge's
  executor also revises its answer and retries after a hint; a generator that refines its own
  answer): one member plays both, and learns from both. An answering node with ``keep`` leaves
  its seat's last answer standing when its own cannot be read (task forge's revision).
- An **edge** may be conditional: ``when = "wrong"`` (the source's answer was wrong: a teacher
  only after a wrong answer), ``"correct"``, ``"rejected"`` or ``"accepted"`` (the verdict the
  source gave). An edge that closes a loop carries ``rounds = N``, the most times it is followed:
  "revise until the verifier accepts, at most N rounds". A loop without a cap, an edge to an
  unknown node and a node whose output never reaches a scored node are each refused in one line
  naming the culprit.
- ``attempts = k`` plays the graph k times on the match's one task, each attempt afresh (no node
  sees another attempt's turns; the task's writer speaks once, before them): task forge's k
  independent attempts, over which p̂ is measured.

Which built-in graph reproduces which anchor is in :data:`BUILTIN`.
"""

from __future__ import annotations

from typing import Literal

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from games.formats import INSTRUCTIONS

Output = Literal["answer", "verdict", "text", "task"]
Condition = Literal["always", "correct", "wrong", "accepted", "rejected"]
NEEDS = {"correct": "answer", "wrong": "answer", "accepted": "verdict", "rejected": "verdict"}  # what the source writes


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid")

    brief: str = Field(description="the role's instruction: who it is and what to do")
    output: Output = Field(
        "answer", description="answer: \\boxed{ANSWER}; verdict: \\boxed{accept|reject}; text; task: <task>…</task> <program>…</program>"
    )
    reference: bool = Field(False, description="sees the task's reference answer (a teacher)")
    repeats: int = Field(1, ge=1, description="copies that speak at each of its turns (k attempts, N debaters)")
    scored: bool = Field(False, description="its answer is the graph's outcome (default: answering nodes nobody follows)")
    tools: int = Field(
        0, ge=0, description="Python runs it may make in a turn before it speaks: a ```python block runs in the sandbox"
    )
    seat: str | None = Field(
        None, description="played by this other node's seat (its copy i by copy i), which then learns from both nodes' turns"
    )
    keep: bool = Field(
        False, description="an answer it cannot read leaves its seat's last answer of the attempt standing (a revision)"
    )


class Edge(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    target: str = Field(description="the node that sees the source's output")
    when: Condition = Field("always", description="correct/wrong: the source's answer; accepted/rejected: its verdict")
    rounds: int | None = Field(None, ge=1, description="this edge closes a loop, followed at most this many times")


class GraphSpec(BaseModel):
    """A topology of roles; ``graph()`` is its networkx form."""

    model_config = ConfigDict(extra="forbid")

    nodes: dict[str, Node] = Field(min_length=1, description="the roles, by name")
    edges: list[Edge] = Field(default_factory=list, description="u -> v: v sees u's output")
    attempts: int = Field(1, ge=1, description="times the graph is played on the one task, each attempt afresh")

    @model_validator(mode="after")
    def _well_formed(self) -> GraphSpec:
        seen = set()
        for i, edge in enumerate(self.edges):
            if (edge.source, edge.target) in seen:
                raise ValueError(f"edges[{i}]: {edge.source} -> {edge.target} is listed twice")
            seen.add((edge.source, edge.target))
            for end in (edge.source, edge.target):
                if end not in self.nodes:
                    known = ", ".join(self.nodes)
                    raise ValueError(f"edges[{i}]: {edge.source} -> {edge.target}: no node {end!r} (nodes: {known})")
            needed = NEEDS.get(edge.when)
            if needed and self.nodes[edge.source].output != needed:
                raise ValueError(f"edges[{i}]: when = {edge.when!r} needs {edge.source!r} to have output = {needed!r}")
        self._one_writer_first()
        self._seats_owned()
        forward = self.forward()
        try:
            cycle = nx.find_cycle(forward)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            loop = " -> ".join([*(u for u, _ in cycle), cycle[0][0]])
            raise ValueError(f"the loop {loop} has no cap: give one of its edges rounds = N")
        for i, edge in enumerate(self.edges):
            if edge.rounds is not None and not nx.has_path(forward, edge.target, edge.source):
                raise ValueError(f"edges[{i}]: {edge.source} -> {edge.target} closes no loop, so rounds caps nothing")
        scored = self.scored()
        for name in scored:
            if self.nodes[name].output != "answer":
                raise ValueError(f"node {name!r} is scored but writes {self.nodes[name].output}, not an answer")
        if not scored:
            raise ValueError("no node is scored: mark one scored = true, or end the graph on an answering node")
        for name in self.nodes:
            if not any(name == end or nx.has_path(forward, name, end) for end in scored):
                raise ValueError(f"node {name!r} leads to no scored node ({', '.join(scored)}): nothing it writes is used")
        return self

    def _one_writer_first(self) -> None:
        """At most one node writes the task, as one copy, and nothing comes into it: it speaks first."""
        writers = [name for name, node in self.nodes.items() if node.output == "task"]
        if len(writers) > 1:
            raise ValueError(f"nodes {', '.join(writers)} all write the task: a match has one")
        for i, edge in enumerate(self.edges):
            if edge.target in writers:
                raise ValueError(f"edges[{i}]: {edge.source} -> {edge.target}: the task's writer speaks first; nothing comes into it")
        for name in writers:
            if self.nodes[name].repeats > 1:
                raise ValueError(f"node {name!r} writes the task: one copy, not repeats = {self.nodes[name].repeats}")

    def _seats_owned(self) -> None:
        """A node played by another's seat names a node with a seat of its own (not the task's
        writer), with as many copies; only an answering node keeps an answer."""
        writer = self.writer()
        for name, node in self.nodes.items():
            if node.keep and node.output != "answer":
                raise ValueError(f"nodes.{name}.keep: only an answering node keeps an answer; it writes {node.output}")
            if not node.seat:
                continue
            owner = self.nodes.get(node.seat)
            if owner is None or owner.seat:
                raise ValueError(f"nodes.{name}.seat: {node.seat!r} is not a node with a seat of its own (nodes: {', '.join(self.nodes)})")
            if writer in (name, node.seat):
                raise ValueError(f"nodes.{name}.seat: the task's writer {writer!r} plays only itself")
            if owner.repeats != node.repeats:
                raise ValueError(f"nodes.{name}.seat: {node.seat!r} has {owner.repeats} copies and {name!r} {node.repeats}; copy i plays copy i")

    def graph(self) -> nx.DiGraph:
        """Every node with its attributes, every edge with ``when`` and ``rounds``."""
        graph = nx.DiGraph()
        graph.add_nodes_from((name, node.model_dump()) for name, node in self.nodes.items())
        graph.add_edges_from((e.source, e.target, {"when": e.when, "rounds": e.rounds}) for e in self.edges)
        return graph

    def forward(self) -> nx.DiGraph:
        """The graph without the edges that close loops: acyclic in a valid spec, it fixes the
        order of first turns (a topological order) and who starts."""
        forward = self.graph()
        forward.remove_edges_from([(e.source, e.target) for e in self.edges if e.rounds is not None])
        return forward

    def scored(self) -> list[str]:
        """The nodes whose answer is the outcome: those marked, else the answering sinks."""
        marked = [name for name, node in self.nodes.items() if node.scored]
        if marked:
            return marked
        forward = self.forward()
        return [n for n in forward if forward.out_degree(n) == 0 and self.nodes[n].output == "answer"]

    def runs_code(self) -> bool:
        """Whether a match runs players' code in the sandbox: a node's Python, or a task's program."""
        return any(node.tools or node.output == "task" for node in self.nodes.values())

    def writer(self) -> str | None:
        """The node that writes the match's task, if one does (else the task is drawn)."""
        return next((name for name, node in self.nodes.items() if node.output == "task"), None)


def _chain(*names: str) -> list[dict]:
    return [{"source": a, "target": b} for a, b in zip(names, names[1:])]


SOLVE = "Solve the task exactly. End with \\boxed{ANSWER}."
PROPOSE = (
    "Write a task with one exact answer: reply with <task>THE TASK, SAYING IN WHAT FORM TO ANSWER</task> and "
    "<program>PYTHON CODE THAT PRINTS THE ANSWER</program>."
)

# Each anchor's turn structure (docs/research/roles.md), as a graph spec.
BUILTIN: dict[str, dict] = {
    # The baseline: one executor answers alone.
    "solo": {"nodes": {"executor": {"brief": SOLVE}}},
    # MALT (§2): g ~ G(q), v ~ V(q, g), r ~ R(q, g, v); the refiner's answer is graded.
    "malt": {
        "nodes": {
            "generator": {"brief": SOLVE},
            "verifier": {"brief": "Critique the generator's answer: find its mistakes, if any.", "output": "text"},
            "refiner": {"brief": "Give the final answer, using the critique where it is right. End with \\boxed{ANSWER}."},
        },
        "edges": [*_chain("generator", "verifier", "refiner"), {"source": "generator", "target": "refiner"}],
    },
    # AgentFlow (§3.1): the planner sets the next sub-goal, the executor carries it out (one tool
    # command run, here Python, then its result), the verifier says stop or continue (at most 3
    # steps, training's TOOL_STEPS: 2 more after the first), then the generator answers.
    "agentflow": {
        "nodes": {
            "planner": {"brief": "Plan the next step towards solving the task, in one or two sentences.", "output": "text"},
            "executor": {"brief": "Carry out the planner's step and report its result.", "output": "text", "tools": 1},
            "verifier": {"brief": "Is the task solved by the steps so far? Accept to stop, reject to continue. "
                                  "One sentence, then \\boxed{accept} or \\boxed{reject}.", "output": "verdict"},
            "generator": {"brief": "Give the task's answer from the steps so far. End with \\boxed{ANSWER}."},
        },
        "edges": [
            *_chain("planner", "executor", "verifier"),
            {"source": "verifier", "target": "planner", "when": "rejected", "rounds": 2},
            {"source": "verifier", "target": "generator"},
            {"source": "executor", "target": "generator"},  # the memory of steps the generator answers from
        ],
    },
    # MARTI's multi-agent debate (MAD, §4.1): 3 debaters answer, then see each other's answers
    # and answer again: 2 rounds in all, so the loop is followed once; a judge gives the final answer.
    "debate": {
        "nodes": {
            "debater": {"brief": "Answer the task; weigh the other debaters' answers if you see them. "
                                 "End with \\boxed{ANSWER}.", "repeats": 3},
            "judge": {"brief": "Read the debate and give the final answer. End with \\boxed{ANSWER}."},
        },
        "edges": [{"source": "debater", "target": "debater", "rounds": 1}, {"source": "debater", "target": "judge"}],
    },
    # Agent0 (§1): the curriculum agent writes a task (here its program prints the answer), the
    # executor answers it k = 4 times independently, each with a tool loop of up to 4 turns (3
    # Python runs, then the answer); every answer is graded, and the writer is worth the
    # uncertainty reward of their share right.
    "agent0": {
        "nodes": {
            "proposer": {"brief": PROPOSE, "output": "task", "tools": 4},
            "executor": {"brief": SOLVE, "repeats": 4, "tools": 3},
        },
        "edges": _chain("proposer", "executor"),
    },
    # Task forge's four roles (games/task_forge/rules.py, teacher seated) as a graph, playing the
    # same matches: the proposer writes the task (up to 4 Python runs first), then k = 4
    # independent attempts, each: the executor answers (up to 2 runs first), the verifier judges
    # it, the executor revises (no answer keeps its first), and after a wrong final answer the
    # teacher hints (one that gives the answer away is withheld) and the executor tries again
    # (2 runs). Each attempt's last answer is graded.
    "task_forge": {
        "nodes": {
            "proposer": {"brief": PROPOSE, "output": "task", "tools": 4},
            "executor": {"brief": "Solve the task. End with \\boxed{ANSWER}.", "tools": 2},
            "verifier": {"brief": INSTRUCTIONS["judge"], "output": "verdict"},
            "reviser": {"brief": INSTRUCTIONS["revise"], "seat": "executor", "keep": True, "scored": True},
            "teacher": {"brief": INSTRUCTIONS["hint"], "output": "text", "reference": True},
            "retrier": {"brief": "Try again, using the hint. End with \\boxed{ANSWER}.", "seat": "executor", "tools": 2, "scored": True},
        },
        "edges": [
            *_chain("proposer", "executor", "verifier", "reviser"),
            {"source": "executor", "target": "reviser"},
            {"source": "reviser", "target": "teacher", "when": "wrong"},
            {"source": "teacher", "target": "retrier"},  # the retrier is the executor's seat: it sees its own answers too
        ],
        "attempts": 4,
    },
}  # fmt: skip


def builtin(name: str) -> GraphSpec:
    """A built-in graph by name; ValueError listing the names for any other."""
    if name not in BUILTIN:
        raise ValueError(f"no built-in graph {name!r} (built-in: {', '.join(BUILTIN)})")
    return GraphSpec.model_validate(BUILTIN[name])
