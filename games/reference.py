"""A reference game: the clue giver describes one of three grids; the guesser picks it (Playpen/clembench).

| Creation      | ``games.make("reference_game")``                                             |
|---------------|-----------------------------------------------------------------------------|
| Seats         | ``player_0`` the clue giver (moves first), ``player_1`` the guesser           |
| Moves         | free text (``Text`` action space), parsed into ``clue: <words>`` or ``guess: 1|2|3`` |
| Observation   | ``prompt``: rules and three 3x3 grids of ``X`` and ``.``; the clue giver is told which is the target, the guesser sees the grids in its own shuffled order and the clue |
| Rewards       | cooperative: both seats 1 when the guesser picks the target, else 0           |
| Truncation    | one clue and one guess: the guess ends the match                              |

Cells are named by row letter and column number (``a1`` top left, ``c3`` bottom right). The
guesser's order differs from the clue giver's, so "the first grid" says nothing: the clue must
describe the grid itself. A guess is the one grid number 1-3 its text names ("Grid 2." reads as
2); a text naming none, or two, is an invalid move.

Version history:
* v1: first version.
"""

from __future__ import annotations

import re

import numpy as np

from games.core import GameInfo, Parsed, Rules, bare, preview

SIZE = 3
CELLS = tuple(f"{r}{c}" for r in "abc" for c in "123")
RULES_TEXT = " ".join("""You are playing a reference game as a team of two. Both players see three 3x3 grids of X
and . (cells a1 top left to c3 bottom right), each in its own order. The clue giver (player_0) knows which
grid is the target and describes it in one clue ("clue: <words>"). The guesser (player_1) answers with
the number of the grid it means ("guess: 2"). Both players earn 1 if the guess is the target, otherwise 0.""".split())
_CLUE = re.compile(r"clue\s*:?\s*(?P<text>.*)", re.DOTALL)
_TOKEN = re.compile(r"\w+")
_NUMBER = re.compile(r"(?<![\w.])([1-3])(?!\w|\.\d)")  # not in "12", "a2" or "2.5"
_CELL = re.compile(r"(?<!\w)([abc][123])(?!\w)")


def draw_grids(rng: np.random.Generator, count: int = 3) -> list[frozenset[str]]:
    """``count`` different grids, each the set of its filled cells (2 to 6 of the 9)."""
    grids: list[frozenset[str]] = []
    while len(grids) < count:
        filled = rng.choice(len(CELLS), size=int(rng.integers(2, 7)), replace=False)
        grid = frozenset(CELLS[i] for i in filled)
        if grid not in grids:
            grids.append(grid)
    return grids


def picture(grid: frozenset[str]) -> str:
    return "\n".join("".join("X" if f"{r}{c}" in grid else "." for c in "123") for r in "abc")


class ReferenceGame(Rules):
    info = GameInfo("reference_game", 1, ("player_0", "player_1"), False, 0.0, 1.0, 2)
    moves = None
    rules_text = RULES_TEXT

    def __init__(self, rng: np.random.Generator):
        self.grids = draw_grids(rng)
        self.target = int(rng.integers(3))
        self.order = [int(i) for i in rng.permutation(3)]  # the guesser's grid k is grids[order[k]]
        self.clue = ""
        self.guess: int | None = None  # the guesser's number, 1-3
        self._to_move: int | None = 0

    @property
    def to_move(self) -> int | None:
        return self._to_move

    def legal_moves(self) -> list[str]:
        return ["clue: <words>"] if self._to_move == 0 else ["guess: 1", "guess: 2", "guess: 3"]

    def parse(self, text: str, lenient: bool = False) -> Parsed:
        """A clue is any text with a word in it ("clue:" optional); a guess names one grid number.
        ``lenient`` changes nothing: both are read from whatever text holds them."""
        if self._to_move == 0:
            found = _CLUE.fullmatch(bare(text))
            words = _TOKEN.findall(found["text"] if found else bare(text))
            if not words:
                return Parsed(None, f"not a clue; got {preview(text)}; expected 'clue: <words>'", named=False)
            return Parsed(f"clue: {' '.join(words)}")
        numbers = set(_NUMBER.findall(bare(text)))
        if len(numbers) != 1:
            named = "no grid number" if not numbers else f"grids {', '.join(sorted(numbers))}"
            return Parsed(None, f"names {named}; got {preview(text)}; expected 'guess: 1', 'guess: 2' or 'guess: 3'",
                          named=bool(numbers))  # fmt: skip
        return Parsed(f"guess: {numbers.pop()}")

    def apply(self, move: str) -> list[float]:
        body = move.partition(": ")[2]
        if self._to_move == 0:
            self.clue, self._to_move = body, 1
            return [0.0, 0.0]
        self.guess, self._to_move = int(body), None
        return [float(self.solved())] * 2

    def solved(self) -> bool:
        return self.guess is not None and self.order[self.guess - 1] == self.target

    def outcome(self) -> dict:
        return {"solved": self.solved()}

    def view(self, seat: int) -> str:
        order = range(3) if seat == 0 else self.order
        lines = [f"Grid {k + 1}:\n{picture(self.grids[i])}" for k, i in enumerate(order)]
        if seat == 0:
            lines.append(f"The target is grid {self.target + 1}.")
        lines.append(f"Clue: {self.clue}" if self.clue else "No clue yet.")
        return "\n".join(lines)

    def render(self) -> str:
        return f"grids {[sorted(g) for g in self.grids]} target {self.target} order {self.order} clue {self.clue!r} guess {self.guess}"

    def random_move(self, rng: np.random.Generator) -> str:
        """A clue naming one random cell, or a random grid number."""
        if self._to_move == 0:
            return f"clue: {CELLS[int(rng.integers(len(CELLS)))]}"
        return f"guess: {int(rng.integers(1, 4))}"


class HeuristicPlayer:
    """Clue giver: the target's filled cells. Guesser: the grid agreeing with the clue on most cells."""

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        rules: ReferenceGame = env.unwrapped.rules
        if rules.to_move == 0:
            return "clue: filled " + " ".join(sorted(rules.grids[rules.target]))
        said = set(_CELL.findall(rules.clue))
        agree = [len(set(CELLS) - (said ^ rules.grids[i])) for i in rules.order]
        return f"guess: {int(np.argmax(agree)) + 1}"
