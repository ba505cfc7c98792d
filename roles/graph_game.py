"""An orchestration graph compiled to a game: each node a seat, turns in the graph's order.

``graph_env("malt")`` (or any :class:`roles.graph.GraphSpec`) is a PettingZoo AEC env served by
:class:`games.core.TextGameEnv`, so it passes the same checkers as every game. One match is one
task, drawn from the task forge families with the env's seed, or written by the graph's task node
(a proposer) as in task forge: its program runs twice in the sandbox and prints the reference
answer, and a task that fails those checks is invalid, with its reason, and ends the match (or,
with ``seed_tasks``, the others play a drawn task instead). Nobody else sees what the writer
wrote but the task's statement; a held-out task given to the env skips the writer.

Turn order, with loops unrolled to their caps:

- Nodes speak in a topological order of the graph without its loop edges. A node with no
  predecessor there starts enabled; another is enabled when an edge into it fires, that is, when
  its source has spoken and the edge's condition (``when``) held.
- A node with ``repeats = k`` speaks as k seats (``debater_0`` … ``debater_2``), one after the
  other; the copies see the same thing: what was said before their node's turn.
- After a node speaks, a loop edge out of it whose condition holds and that is under its cap
  (``rounds``) fires first: the pass goes back to the loop's target, and the node's other edges
  wait until the loop is done (AgentFlow's generator answers only once the verifier stops).
- The match ends when no enabled node is left.

A seat sees the task (and its reference answer when the node has ``reference``), then every turn
so far of the nodes with an edge into its node, of its own node and its own (a seat that plays
several nodes remembers what it said), in the order they were spoken, then its brief. What a
turn fails to say is judged inside the game, as in task forge: an answer without ``\\boxed{}``
or a verdict that is neither accept nor reject is an invalid turn with its reason (a verdict
that cannot be read fires no conditional edge), and the match goes on.

With ``choices = N`` the answering nodes pick among N options instead of writing an answer, as
task forge's executor does under multiple choice: the reference and N − 1 answers of other tasks
of its family, drawn once the task is set (a written task must then name its family, as a
scripted proposer's does), and they run no Python. Forced choice can then play every answering
and verdict node.

A node with ``tools = T`` may run Python before it speaks, as task forge's executor does: a turn
with a ```` ```python ```` block and none of the node's output (no answer or verdict; any such
turn of a text node) runs the block in the sandbox while the seat has runs left in this turn of
its node, and the seat moves again, seeing the code and its output. Whoever sees the node sees
its runs too (AgentFlow's memory keeps each step's command and result).

Every seat earns the share of scored answers that are correct, when the match ends: the joint
outcome MALT and AgentFlow broadcast to every role. How each node's turns are credited from it is
the trainer's choice; the outcome gives each turn its **value**, MALT's value propagation
(``docs/research/roles.md`` §2.2) over the turns as played: a scored seat's last answer is worth
its correctness (1 or 0), any other turn the mean value of the later turns that saw it (its
children in the unrolled graph), and a turn no later turn saw is worth the match's outcome. A
Python run is worth what the seat then said: the run is part of that turn's work. The task's
writer is worth Agent0's uncertainty reward, 1 − 2·|p̂ − ½| with p̂ the match's share of scored
answers right (0 for an invalid task): a task every solver gets right, or none does, teaches
nothing (``docs/research/roles.md`` §1.2). A withheld hint helped nobody: it is worth 0.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import networkx as nx
import numpy as np

from games.core import GameInfo, Parsed, Rules, TextGameEnv
from games.task_forge.families import FAMILIES, Task, answers_match, distractors, generate, normalize_answer
from games.task_forge.players import task_knobs
from games.task_forge.proposals import checked_task
from games.task_forge.sandbox import Limits, players_sandbox, tool_run
from roles.forge import ForgeRole
from games.formats import python_block, read_answer, read_submission, read_verdict
from roles.graph import GraphSpec, builtin

FORMS = {
    "answer": ["\\boxed{ANSWER}"], "verdict": ["\\boxed{accept}", "\\boxed{reject}"], "text": ["free text"],
    "task": ["<task>TASK</task> <program>CODE</program>"],
}  # fmt: skip
RUN_FORM = "```python CODE```"
UNREAD = {
    "answer": "no \\boxed{ANSWER} in the output", "verdict": "no \\boxed{accept} or \\boxed{reject} in the output",
    "task": "no <task>…</task> and <program>…</program> in the output",
}  # fmt: skip
VERDICT_OF = {"accepted": "accept", "rejected": "reject"}
READERS = {"answer": read_answer, "verdict": read_verdict}
SHOWN_CHARS = 1500  # of one earlier turn, in a later seat's view


def node_of_seat(spec: GraphSpec) -> dict[str, str]:
    """Each seat's node, in seat order: a seat is named for its node, or ``node_i`` for each copy;
    a node played by another's seat has none of its own."""
    return {
        name if node.repeats == 1 else f"{name}_{i}": name
        for name, node in spec.nodes.items() if not node.seat for i in range(node.repeats)
    }  # fmt: skip


@dataclass
class Turn:
    node: str
    seat: str
    text: str
    read: str | None  # the answer or verdict read from the text; None for free text or when unread
    began: int  # how many turns were spoken when its node's turn began: it saw those
    ran: str | None = None  # a Python run: its code and output as shown; None for a turn that spoke
    attempt: int = 0  # which of the graph's attempts it belongs to
    withheld: bool = False  # a hint that gave the answer away, or said nothing: nobody sees it


class GraphGame(Rules):
    """The rules of one match of a graph (see the module docstring)."""

    moves = None

    def __init__(
        self, rng: np.random.Generator, spec: GraphSpec, name: str = "custom", families: tuple[str, ...] = FAMILIES,
        task: Task | None = None, sandbox: str = "bwrap", limits: Limits | None = None, seed_tasks: bool = False,
        choices: int = 0,
    ):  # fmt: skip
        """``sandbox`` and ``limits``: where and under what limits players' code runs (task forge's;
        made only when a node has tools or writes the task). ``seed_tasks``: when the written task
        is invalid, play a drawn one (task forge's option). ``choices``: multiple choice (see the
        module docstring); 0 for free answers."""
        if choices == 1 or choices < 0:
            raise ValueError(f"choices is 0 (free answers) or at least 2 options, got {choices}")
        self.spec, self.graph, forward = spec, spec.graph(), spec.forward()
        self.node_of = node_of_seat(spec)
        self.scored = set(spec.scored())
        self.writer = spec.writer()
        seats = tuple(self.node_of)
        index = list(spec.nodes).index
        self.order = list(nx.lexicographical_topological_sort(forward, key=lambda n: -1 if n == self.writer else index(n)))
        caps = sum(e.rounds or 0 for e in spec.edges)
        per_round = sum(node.repeats * (1 + node.tools) for node in spec.nodes.values())
        self.info = GameInfo(f"graph_{name}", 1, seats, False, 0.0, 1.0, per_round * (1 + caps) * spec.attempts)
        self.runs_code = spec.runs_code()
        self.sandbox = players_sandbox(limits, sandbox) if self.runs_code else None
        self.rules_text = (
            f"You are one of the roles of the {name} graph: {', '.join(spec.nodes)}. Each role sees the task and what"
            " the roles before it said, then does its part. The answer of the last role is graded."
        )
        self.rng, self.families, self.seed_tasks, self.choices = rng, families, seed_tasks, choices
        self.invalid_task, self.seeded = "", False
        self.task: Task | None = None
        self.options: list[str] = []  # with choices: what the answering nodes pick among, in the order shown
        if task is not None or self.writer is None:
            self._set_task(task or self._draw())
        self.turns: list[Turn] = []
        self.loops_taken = dict.fromkeys(((e.source, e.target) for e in spec.edges if e.rounds), 0)  # in this attempt
        self.loops_followed = dict(self.loops_taken)  # in the match
        self.enabled = {n for n in spec.nodes if forward.in_degree(n) == 0}
        self.restart = self.enabled - {self.writer}  # who starts each attempt: with a task, the writer's successors
        if self.writer is not None:
            self.restart |= set(forward.successors(self.writer))
        if task is not None:
            self.enabled = set(self.restart)
        self.attempt = 0
        self._queue: list[str] = []  # the seats of the node now speaking, still to speak
        self._flaw = ""
        self._next_node(-1)

    def _set_task(self, task: Task) -> None:
        """The task the match plays, with its options under multiple choice."""
        self.task = task
        if self.choices:  # at the knobs its label states (four decimals), as task forge draws them
            labelled = replace(task, knobs=tuple(task_knobs(task.label)))
            options = [task.answer, *distractors(labelled, self.choices - 1, self.rng)]
            self.options = [options[i] for i in self.rng.permutation(len(options))]

    def _draw(self) -> Task:
        """A task of a random family at random knobs."""
        rng = self.rng
        return generate(self.families[rng.integers(len(self.families))], tuple(rng.random(2)), rng)

    # ---- whose turn ----

    def _next_node(self, after: int) -> None:
        """Queue the seats of the first enabled node after position ``after`` in the order; when
        none is left, start the next attempt, if any."""
        for i in range(after + 1, len(self.order)):
            node = self.order[i]
            if node in self.enabled:
                self.enabled.discard(node)
                owner = self.spec.nodes[node].seat or node
                self._queue = [seat for seat, of in self.node_of.items() if of == owner]
                self._speaking, self._began = node, len(self.turns)
                return
        if self.attempt + 1 < self.spec.attempts:
            self.attempt += 1
            self.enabled, self.loops_taken = set(self.restart), dict.fromkeys(self.loops_taken, 0)
            self._next_node(-1)
            return
        self._queue, self._speaking = [], None

    def playing(self, seat: str) -> str:
        """The node ``seat`` plays now: the speaking node while the seat is queued to speak in it,
        else the seat's own."""
        return self._speaking if seat in self._queue else self.node_of[seat]

    @property
    def to_move(self) -> int | None:
        return self.info.seats.index(self._queue[0]) if self._queue else None

    def legal_moves(self) -> list[str]:
        if not self._queue:
            return []
        node = self.spec.nodes[self._speaking]
        if self.choices and node.output == "answer":
            return [f"\\boxed{{{option}}}" for option in self.options]
        return [*FORMS[node.output], *([RUN_FORM] if self._runs_left() else [])]

    def _runs_left(self) -> int:
        """Python runs the seat to move has left in this turn of its node (none for an answer
        picked among options)."""
        seat, node = self._queue[0], self.spec.nodes[self._speaking]
        if self.choices and node.output == "answer":
            return 0
        return node.tools - sum(t.seat == seat for t in self.turns[self._began :] if t.ran)

    def choosable(self, seat: int) -> bool:
        """Whether forced choice can play ``seat``: every node it plays gives a verdict, or an
        answer among options."""
        owner = self.node_of[self.info.seats[seat]]
        played = [node for name, node in self.spec.nodes.items() if name == owner or node.seat == owner]
        return all(node.output == "verdict" or node.output == "answer" and self.choices > 0 for node in played)

    def parse(self, text: str, lenient: bool = False) -> Parsed:
        """Every text is a turn; what it fails to say is judged in the game (see the module docstring)."""
        return Parsed(text)

    def flaw(self) -> str:
        return self._flaw

    def turn_tag(self) -> str:
        return self._speaking or ""

    # ---- a turn ----

    def apply(self, move: str) -> list[float]:
        node, output = self._speaking, self.spec.nodes[self._speaking].output
        submitted = read_submission(move) if output == "task" else None
        read = READERS[output](move) if output in READERS else submitted and submitted[0]
        code = python_block(move) if read is None else None
        seat = self._queue[0]
        if code is not None and self._runs_left():
            self._flaw = ""
            self.turns.append(Turn(node, seat, move, None, self._began, ran=tool_run(self.sandbox, code), attempt=self.attempt))
            return [0.0] * len(self.info.seats)
        read, self._flaw, withheld = self._judged(move, read, code)
        self.turns.append(Turn(node, self._queue.pop(0), move, read, self._began, attempt=self.attempt, withheld=withheld))
        if output == "task" and not self._take_task(submitted):
            return [0.0] * len(self.info.seats)
        if self._queue:
            return [0.0] * len(self.info.seats)
        self._fire(node)
        if self._speaking is not None:
            return [0.0] * len(self.info.seats)
        share = self.outcome()["correct_share"]
        return [share] * len(self.info.seats)

    def _judged(self, move: str, read: str | None, code: str | None) -> tuple[str | None, str, bool]:
        """A spoken turn's reading, why it is invalid ("" when it is not), and whether it is
        withheld: a hint (text from a node that sees the reference) that is empty or holds the
        answer is withheld, as task forge's teacher's is; an answer that cannot be read, from a
        node that ``keep``s, leaves the seat's last answer of this attempt standing, as task
        forge's revision does."""
        node = self.spec.nodes[self._speaking]
        if node.output == "text":
            if node.reference and not move.strip():
                return None, "the hint is empty", True
            if node.reference and normalize_answer(self.task.answer) in normalize_answer(move):
                return None, "the hint gives the answer away", True
            return None, "", False
        if read is not None:
            return read, "", False
        flaw = UNREAD[node.output] + (f", and no Python runs left ({node.tools} allowed)" if code is not None else "")
        seat = self._queue[0]
        kept = [t.read for t in self.turns if t.seat == seat and t.attempt == self.attempt and t.read is not None]
        if node.keep and kept:
            return kept[-1], f"{flaw}: the answer {kept[-1]} stands", False
        return None, flaw, False

    def _take_task(self, submitted: tuple[str, str, dict[str, str]] | None) -> bool:
        """The written task, checked; whether the match goes on (an invalid one ends it, unless a
        drawn task is played instead)."""
        reason = self._flaw
        if submitted is not None:
            statement, program, label = submitted
            answer, reason = checked_task(self.sandbox, statement, program)
            family = label.get("family") if label.get("family") in FAMILIES else "proposed"
            if answer is not None and self.choices and family == "proposed":
                answer, reason = None, f"multiple choice needs the task's family (one of {', '.join(FAMILIES)}); got {label.get('family')!r}"
            if answer is not None:
                knobs = task_knobs(label)
                self._set_task(Task(family, (0.0, 0.0) if knobs is None else tuple(knobs), statement, program, answer))
                return True
        self.invalid_task = self._flaw = reason
        if self.seed_tasks:
            self._set_task(self._draw())
            self.seeded = True
            return True
        self._queue, self._speaking = [], None
        return False

    def _holds(self, when: str) -> bool:
        """Whether an edge's condition holds for the turn just spoken (its source node's last)."""
        if when == "always":
            return True
        read = self.turns[-1].read
        if when in ("correct", "wrong"):
            return (read is not None and answers_match(read, self.task.answer)) == (when == "correct")
        return read == VERDICT_OF[when]

    def _fire(self, node: str) -> None:
        """After ``node``'s seats have all spoken: a loop back, else its forward edges; none if
        every copy's output was withheld."""
        out = [] if all(t.withheld for t in self.turns[self._began :] if not t.ran) else self.graph.out_edges(node, data=True)
        for _, target, data in out:
            key = (node, target)
            if data["rounds"] and self.loops_taken[key] < data["rounds"] and self._holds(data["when"]):
                self.loops_taken[key] += 1
                self.loops_followed[key] += 1
                self.enabled.add(target)
                self._next_node(self.order.index(target) - 1)
                return
        for _, target, data in out:
            if not data["rounds"] and self._holds(data["when"]):
                self.enabled.add(target)
        self._next_node(self.order.index(node))

    # ---- what a seat sees ----

    def seen(self, seat: int) -> list[Turn]:
        """The turns ``seat`` sees, of this attempt: its node's and its predecessors' (not the
        task's writer's, nor a withheld hint) and its own in any node it plays, those spoken
        before its node's turn began if it is speaking now, and then its own Python runs of this
        turn."""
        name = self.info.seats[seat]
        node = self.playing(name)
        sees = {node, *self.graph.predecessors(node)} - ({self.writer} if node != self.writer else set())
        shown = [t.attempt == self.attempt and (t.node in sees and not t.withheld or t.seat == name) for t in self.turns]
        if node != self._speaking:
            return [t for t, ok in zip(self.turns, shown) if ok]
        before = [t for t, ok in zip(self.turns[: self._began], shown) if ok]
        return before + [t for t in self.turns[self._began :] if t.seat == name]

    def view(self, seat: int) -> str:
        name = self.info.seats[seat]
        node = self.playing(name)
        spec = self.spec.nodes[node]
        lines = [f"Task: {self.task.statement}"] if self.task else []
        if spec.reference and self.task:
            lines.append(f"Reference answer: {self.task.answer}")
        for turn in self.seen(seat):
            who = "You" if turn.seat == name else turn.seat
            lines.append(f"{who} ran Python:\n{turn.ran}" if turn.ran else f"{who} said: {turn.text[:SHOWN_CHARS]}")
        lines.append(f"You are the {node}. {spec.brief}")
        if spec.tools and self._queue and name == self._queue[0]:
            lines.append(f"To run Python first, reply with one ```python block; its output comes back. Runs left: {self._runs_left()}.")
        return "\n".join(lines)

    def render(self) -> str:
        said = "\n".join(f"{t.attempt} {t.node} ({t.seat}): {t.text[:80]!r} -> {t.ran[-80:] if t.ran else t.read!r}" for t in self.turns)
        if self.task is None:
            return f"task: {self.invalid_task or 'not written yet'}\n{said}"
        return f"task ({self.task.family}): {self.task.statement}\nanswer: {self.task.answer}\n{said}"

    def outcome(self) -> dict:
        """The task, each turn, and the scored answers: ``correct_share`` of them right."""
        last = {(t.attempt, t.seat): i for i, t in enumerate(self.turns) if t.node in self.scored and not t.ran}  # the last answers
        right = {i: self._right(self.turns[i]) for i in last.values()}
        share = sum(right.values()) / len(right) if right else 0.0
        return {
            "family": self.task and self.task.family,
            "answer": self.task and self.task.answer,
            "invalid_task": self.invalid_task,
            "seeded": self.seeded,
            "turns": [(t.seat, t.read) for t in self.turns],
            "loops": {f"{u}->{v}": n for (u, v), n in self.loops_followed.items()},
            "python_runs": {n: sum(t.node == n and bool(t.ran) for t in self.turns) for n, v in self.spec.nodes.items() if v.tools},
            "correct_share": share,
            "values": self._values(right, share),
            "began": [t.began for t in self.turns],
            "attempts": [t.attempt for t in self.turns],
        }

    def _right(self, turn: Turn) -> float:
        return float(turn.read is not None and answers_match(turn.read, self.task.answer))

    def _values(self, leaves: dict[int, float], share: float) -> list[float]:
        """Each turn's value (see the module docstring): from the last turn back, so that a turn's
        children are valued before it."""
        from roles.rewards import uncertainty_reward  # here, not above: roles.rewards imports torch, games import without it

        values: list[float] = [0.0] * len(self.turns)
        for i in reversed(range(len(self.turns))):
            if i in leaves:
                values[i] = leaves[i]
                continue
            turn = self.turns[i]
            if turn.withheld:
                continue  # worth 0
            if turn.node == self.writer and not turn.ran:
                values[i] = 0.0 if self.invalid_task else uncertainty_reward(share)
                continue
            if turn.ran:  # worth the turn it was part of: the seat's next that spoke
                said = next((j for j in range(i + 1, len(self.turns)) if self.turns[j].seat == turn.seat and not self.turns[j].ran), None)
                values[i] = share if said is None else values[said]
                continue
            node = turn.node
            children = [
                j for j in range(i + 1, len(self.turns))
                if self.turns[j].began > i and not self.turns[j].ran and self.turns[j].attempt == turn.attempt
                and (self.turns[j].node == node or self.graph.has_edge(node, self.turns[j].node))
            ]  # fmt: skip
            values[i] = float(np.mean([values[j] for j in children])) if children else share
        return values


def graph_metrics(played: list) -> dict[str, float]:
    """An iteration's matches of a run's graph (played ``Episode`` records): its accuracy (the
    scored answers' share right), model calls per match, and per node its invalid rate, response
    length and mean turn value (the credit MALT's propagation gives it), and a node with tools its
    Python runs per match. Named ``graph/…`` whichever graph it is (a run plays one), so that a
    sweep over graphs compares one metric."""
    out = {
        "graph/accuracy": float(np.mean([ep.outcome["correct_share"] for ep in played])),
        "graph/calls_per_match": float(np.mean([len(ep.turns) for ep in played])),
    }
    by_node: dict[str, list] = {}
    for ep in played:
        for turn, value in zip(ep.turns, ep.outcome["values"]):
            by_node.setdefault(turn.tag, []).append((turn, value))
    for node, turns in by_node.items():
        out[f"graph/{node}/invalid_rate"] = float(np.mean([not t.valid for t, _ in turns]))
        out[f"graph/{node}/response_tokens"] = float(np.mean([len(t.completion_ids) for t, _ in turns]))
        out[f"graph/{node}/value"] = float(np.mean([v for _, v in turns]))
    for node in played[0].outcome["python_runs"] if played else ():
        out[f"graph/{node}/python_runs"] = float(np.mean([ep.outcome["python_runs"][node] for ep in played]))
    return out


CUSTOM = "custom"  # the name a run config's own [graph] is played under: graph/custom


def graph_env(graph: str | GraphSpec, render_mode: str | None = None, spec: dict | None = None, **options) -> TextGameEnv:
    """A graph as a PettingZoo AEC env: a built-in's name, or a spec (``graph`` itself, or
    ``spec`` as plain data for ``"custom"``: what travels to a worker with a run's match plans).
    ``options`` go to :class:`GraphGame` (``families``: the task families to draw from; ``task``)."""
    if isinstance(graph, GraphSpec):
        graph, spec = CUSTOM, graph.model_dump()
    if graph == CUSTOM and spec is None:
        raise ValueError("graph/custom is a run config's own [graph]: give its spec (graph_env(GraphSpec(...)))")
    parsed = builtin(graph) if spec is None else GraphSpec.model_validate(spec)
    return TextGameEnv(GraphGame, render_mode=render_mode, spec=parsed, name=graph, **options)


@dataclass(frozen=True)
class GraphRole(ForgeRole):
    """A node's seat as an LLM sees it. Its brief closes the observation (the game knows the
    graph), so the system prompt only frames the turn; the game judges the output, as in task forge."""

    @property
    def brief(self) -> str:
        return "You play one role of a team that solves tasks together. Do your role's part, as the last line says."
