"""Collaborative maze: two seats steer one token to a goal, each seeing only half of what it needs.

| Creation      | ``games.make("maze")``, or ``games.make("maze", size=7, density=0.35, turns=30, split=False)`` |
|---------------|-----------------------------------------------------------------------------|
| Seats         | ``player_0`` (the mapper: sees the walls, not the goal), ``player_1`` (the finder: sees the goal, not the walls) |
| Moves         | free text (``Text`` action space), read as ``up``/``down``/``left``/``right`` (or north/south/west/east) or ``say: <message>`` |
| Observation   | ``prompt``: rules, the seat's own half (the wall map, or the goal), the token, every move and message so far |
| Rewards       | cooperative: both seats get 1 when the token reaches the goal within ``turns`` turns, 0 otherwise |
| Truncation    | the match ends after ``turns`` turns (default 3 × ``size``), which is its natural end |

The seats alternate; a turn either moves the shared token one cell or sends the other seat a
message, and both cost one of the ``turns``. A move into a wall or off the grid is a legal move
that leaves the token where it is (both seats see it was blocked). Neither seat alone knows a
route to the goal: the mapper cannot tell where to go, the finder cannot see what is in the way, so
only messages close the collaboration gap (``benchmarks/collaboration.py`` measures it).

Difficulty is the options: ``size`` (the grid's side), ``density`` (the chance a cell is a wall)
and ``turns`` (the step limit); a run sets them in ``[game_options.maze]``. Every maze is drawn from
the match's seed and redrawn until the goal is reachable from the start. ``split=False`` is the solo
baseline of the collaboration gap: every seat sees the walls and the goal, so either one alone can
solve the maze with the same turns.

Cells are named like a chessboard: column letter, then row number from the top (``b3``).

Version history:
* v1: first version.
"""

from __future__ import annotations

import re
from dataclasses import replace

import networkx as nx
import numpy as np

from games.core import GameInfo, Parsed, Rules, bare, normalize, preview

STEPS = {"up": (0, -1), "down": (0, 1), "left": (-1, 0), "right": (1, 0)}  # (dx, dy); y grows downwards
SYNONYMS = {"north": "up", "south": "down", "west": "left", "east": "right", "u": "up", "d": "down", "l": "left", "r": "right"}
MESSAGE_MAX_CHARS = 300  # a longer message is cut: a wall list for a 12×12 maze fits
SIZE_RANGE = (2, 12)  # columns are letters a..l
MAX_DRAWS = 1000  # redraws before a density is declared too high to give a solvable maze
_SAY = re.compile(r"say\s*[:\-]?\s*(.*)", re.DOTALL)
_DIRECTION = re.compile(r"(?<!\w)(" + "|".join([*STEPS, *(s for s in SYNONYMS if len(s) > 1)]) + r")(?!\w)")

RULES_TEXT = " ".join("""You and a partner steer one token through a grid maze to a goal. Cells are named by column
letter and row number from the top, like b3. You take turns; on your turn either move the token one
cell (up, down, left or right) or send your partner a message ("say: <message>"). Each turn, move or
message, uses one of the shared turns. {halves} A move into a wall or off the grid leaves the token where it is. You both earn
1 when the token reaches the goal before the turns run out, otherwise 0.""".split())  # one paragraph: terminals and chat templates wrap it
HALVES = {True: "One of you sees the walls but not the goal, the other sees the goal but not the walls.",
          False: "You both see the walls and the goal."}  # fmt: skip

Cell = tuple[int, int]  # (x, y): column, row from the top


def cell_name(cell: Cell) -> str:
    return f"{'abcdefghijkl'[cell[0]]}{cell[1] + 1}"


def cell_of(name: str) -> Cell:
    return "abcdefghijkl".index(name[0]), int(name[1:]) - 1


def open_graph(size: int, walls: frozenset[Cell]) -> nx.Graph:
    """The grid's open cells, joined where a move goes from one to the other."""
    grid = nx.grid_2d_graph(size, size)
    grid.remove_nodes_from(walls)
    return grid


def draw_maze(rng: np.random.Generator, size: int, density: float) -> tuple[frozenset[Cell], Cell, Cell]:
    """Walls, start and goal: drawn until the goal is reachable, so every maze is solvable."""
    cells = [(x, y) for y in range(size) for x in range(size)]
    for _ in range(MAX_DRAWS):
        walls = frozenset(c for c, w in zip(cells, rng.random(len(cells)) < density) if w)
        free = [c for c in cells if c not in walls]
        if len(free) < 2:
            continue
        start, goal = (free[i] for i in rng.choice(len(free), 2, replace=False))
        if nx.has_path(open_graph(size, walls), start, goal):
            return walls, start, goal
    raise ValueError(f"density {density} gives no solvable {size}x{size} maze in {MAX_DRAWS} draws; lower it")


def read_move(text: str, lenient: bool = False) -> str | None:
    """The canonical move ``text`` is (a direction, or ``say: <message>``), or None if it is none."""
    flat = " ".join(normalize(text).split())
    said = _SAY.fullmatch(flat.lstrip("*_`\"' "))
    if said and said.group(1).strip():
        return "say: " + said.group(1).strip()[:MESSAGE_MAX_CHARS]
    given = bare(text)
    given = SYNONYMS.get(given, given)
    if given in STEPS:
        return given
    if lenient:
        named = {SYNONYMS.get(m, m) for m in _DIRECTION.findall(flat)}
        if len(named) == 1:
            return named.pop()
    return None


class Maze(Rules):
    info = GameInfo("maze", 1, ("player_0", "player_1"), False, -1.0, 1.0, 15)
    moves = None
    rules_text = RULES_TEXT.format(halves=HALVES[True])

    def __init__(
        self, rng: np.random.Generator, size: int = 5, density: float = 0.3, turns: int | None = None, split: bool = True
    ):
        if not SIZE_RANGE[0] <= size <= SIZE_RANGE[1]:
            raise ValueError(f"size must be in [{SIZE_RANGE[0]}, {SIZE_RANGE[1]}], got {size}")
        if not 0.0 <= density < 1.0:
            raise ValueError(f"density must be in [0, 1), got {density}")
        turns = 3 * size if turns is None else turns
        if turns < 1:
            raise ValueError(f"turns must be at least 1, got {turns}")
        self.info = replace(Maze.info, max_turns=turns)
        self.size, self.turns, self.split = size, turns, split
        self.rules_text = RULES_TEXT.format(halves=HALVES[split])
        self.walls, self.start, self.goal = draw_maze(rng, size, density)
        self.token = self.start
        self.history: list[tuple[int, str, str]] = []  # (seat, move, what happened)
        self._to_move: int | None = 0

    @property
    def to_move(self) -> int | None:
        return self._to_move

    def legal_moves(self) -> list[str]:
        return [*STEPS, "say: <message>"]

    def parse(self, text: str, lenient: bool = False) -> Parsed:
        move = read_move(text, lenient)
        if move is None:
            return Parsed(None, f"not a move; got {preview(text)}; expected up, down, left, right or 'say: <message>'", named=False)
        return Parsed(move)

    def apply(self, move: str) -> list[float]:
        seat = self._to_move
        if move.startswith("say:"):
            happened = "said"
        else:
            dx, dy = STEPS[move]
            nxt = (self.token[0] + dx, self.token[1] + dy)
            blocked = nxt in self.walls or not (0 <= nxt[0] < self.size and 0 <= nxt[1] < self.size)
            if not blocked:
                self.token = nxt
            happened = "blocked" if blocked else f"moved to {cell_name(self.token)}"
        self.history.append((seat, move, happened))
        if self.token == self.goal:
            self._to_move = None
            return [1.0, 1.0]
        self._to_move = None if len(self.history) >= self.turns else 1 - seat
        return [0.0, 0.0]

    def own_half(self, seat: int) -> str:
        """What only this seat sees: the wall map (mapper) or the goal (finder); unsplit, both."""
        goal = f"The goal is at {cell_name(self.goal)}."
        if seat == 1 and self.split:
            return f"You are the finder. {goal} You cannot see the walls."
        who = "You are the mapper. You see the walls (#) but not the goal." if self.split else f"You see the walls (#). {goal}"
        rows = [f"{who} Map:", "   " + " ".join("abcdefghijkl"[: self.size])]
        for y in range(self.size):
            marks = ("@" if (x, y) == self.token else "#" if (x, y) in self.walls else "." for x in range(self.size))
            rows.append(f"{y + 1:>2} " + " ".join(marks))
        return "\n".join(rows)

    def view(self, seat: int) -> str:
        done = "; ".join(f"{'you' if s == seat else 'partner'}: {m} ({h})" for s, m, h in self.history) or "none yet"
        lines = [
            self.own_half(seat),
            f"The grid is {self.size}x{self.size} (a1 top left). The token is at {cell_name(self.token)}.",
            f"Turn {min(len(self.history) + 1, self.turns)} of {self.turns}. So far: {done}.",
        ]
        if self.token == self.goal:
            lines.append("The token reached the goal.")
        return "\n".join(lines)

    def render(self) -> str:
        rows = [f"turn {len(self.history)}/{self.turns}"]
        for y in range(self.size):
            rows.append(" ".join(
                "@" if (x, y) == self.token else "G" if (x, y) == self.goal else "#" if (x, y) in self.walls else "."
                for x in range(self.size)
            ))  # fmt: skip
        return "\n".join(rows)

    def outcome(self) -> dict:
        return {"solved": self.token == self.goal, "turns": len(self.history)}

    def random_move(self, rng: np.random.Generator) -> str:
        """A random direction, or now and then a message."""
        options = [*STEPS, "say: hello"]
        return options[rng.integers(len(options))]


_GOAL_SAID = re.compile(r"goal (?:at |is )?([a-l]\d{1,2})")
_WALLS_SAID = re.compile(r"walls?(?: at)?:?((?:\s*,?\s*[a-l]\d{1,2})*|\s*none)")


def _known_walls(rules: Maze, seat: int) -> frozenset[Cell] | None:
    """The walls this seat knows: its own half, or what its partner said, or None."""
    if seat == 0 or not rules.split:
        return rules.walls
    for s, move, _ in rules.history:
        found = _WALLS_SAID.search(move) if s != seat else None
        if found:
            return frozenset(cell_of(n) for n in re.findall(r"[a-l]\d{1,2}", found.group(1)))
    return None


def _known_goal(rules: Maze, seat: int) -> Cell | None:
    if seat == 1 or not rules.split:
        return rules.goal
    for s, move, _ in rules.history:
        found = _GOAL_SAID.search(move) if s != seat else None
        if found:
            return cell_of(found.group(1))
    return None


def _first_step(graph: nx.Graph, source: Cell, targets: set[Cell]) -> str | None:
    """The direction of the first move on a shortest path from ``source`` to any of ``targets``."""
    reach = nx.single_source_shortest_path(graph, source)
    paths = [reach[t] for t in targets if t in reach and t != source]
    if not paths:
        return None
    path = min(paths, key=lambda p: (len(p), p[-1]))
    step = (path[1][0] - source[0], path[1][1] - source[1])
    return next(name for name, d in STEPS.items() if d == step)


class HeuristicPlayer:
    """Shares its half in one message (``talk``), then walks a shortest route with what it knows.

    With both halves it follows the true shortest path. Knowing only the walls it explores, walking to
    the nearest cell the token has not visited. Knowing only the goal it plans optimistically: through
    every cell not yet seen to block a move. ``talk=False`` is the pair with messaging disabled.
    """

    def __init__(self, talk: bool = True):
        self.talk = talk

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        rules: Maze = env.unwrapped.rules
        seat = env.possible_agents.index(agent)
        if self.talk and rules.split and not any(s == seat and m.startswith("say:") for s, m, _ in rules.history):
            if seat == 1:
                return f"say: goal at {cell_name(rules.goal)}"
            return "say: walls at " + (", ".join(sorted(map(cell_name, rules.walls))) or "none")
        walls, goal = _known_walls(rules, seat), _known_goal(rules, seat)
        if walls is None:
            walls = frozenset(_bumped(rules))
        graph = open_graph(rules.size, walls)
        if goal is not None:
            targets = {goal}
        else:
            visited = {rules.start} | {cell_of(h.removeprefix("moved to ")) for _, _, h in rules.history if h.startswith("moved")}
            targets = set(graph.nodes) - visited
        step = _first_step(graph, rules.token, targets)
        return step or list(STEPS)[rng.integers(len(STEPS))]


def _bumped(rules: Maze) -> set[Cell]:
    """Cells a move was seen to be blocked into: walls the finder has learned by walking."""
    token, found = rules.start, set()
    for _, move, happened in rules.history:
        if move in STEPS:
            nxt = (token[0] + STEPS[move][0], token[1] + STEPS[move][1])
            if happened == "blocked":
                found.add(nxt)
            else:
                token = nxt
    return found
