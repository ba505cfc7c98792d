"""Tic-tac-toe, 3×3, as a text game.

| Creation      | ``games.make("tictactoe")``                                   |
|---------------|---------------------------------------------------------------|
| Seats         | ``player_0`` (X, moves first), ``player_1`` (O)               |
| Moves         | cells ``a1`` … ``c3``: column a–c, row 1 (top) – 3; ``Discrete(9)`` in that order |
| Observation   | ``prompt``: rules, the board, the moves so far, legal moves; ``action_mask`` |
| Rewards       | +1 win, −1 loss, 0 draw (full board); zero-sum                |
| Truncation    | none needed: a match lasts at most 9 turns                    |

Version history:
* v1: first version.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from games.core import GameInfo, Rules

MOVES = tuple(f"{col}{row}" for row in "123" for col in "abc")  # index = 3 * row + col
LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
MARKS = "XO"

RULES_TEXT = " ".join("""You are playing tic-tac-toe on a 3x3 board. Columns are a, b, c (left to right) and rows are
1, 2, 3 (top to bottom), so a cell is named like b2 (the centre). X moves first, then the players
alternate, each marking one empty cell. Three of your marks in a row, column or diagonal wins (+1,
the opponent gets -1). A full board with no line is a draw (0).""".split())  # one paragraph: terminals and chat templates wrap it


def winner(board: tuple[str, ...]) -> str | None:
    """'X' or 'O' if that mark completes a line, else None."""
    for a, b, c in LINES:
        if board[a] and board[a] == board[b] == board[c]:
            return board[a]
    return None


def board_text(board: tuple[str, ...]) -> str:
    rows = ["   a b c"]
    for r in range(3):
        rows.append(f"{r + 1}  " + " ".join(board[3 * r + c] or "." for c in range(3)))
    return "\n".join(rows)


class TicTacToe(Rules):
    info = GameInfo("tictactoe", 1, ("player_0", "player_1"), True, -1.0, 1.0, 9)
    moves = MOVES
    rules_text = RULES_TEXT

    def __init__(self, rng: np.random.Generator):
        self.board: tuple[str, ...] = ("",) * 9
        self.history: list[str] = []
        self._to_move: int | None = 0

    @property
    def to_move(self) -> int | None:
        return self._to_move

    def legal_moves(self) -> list[str]:
        return [MOVES[i] for i, cell in enumerate(self.board) if not cell]

    def apply(self, move: str) -> list[float]:
        seat = self._to_move
        i = MOVES.index(move)
        self.board = self.board[:i] + (MARKS[seat],) + self.board[i + 1 :]
        self.history.append(move)
        if winner(self.board):
            self._to_move = None
            return [1.0, -1.0] if seat == 0 else [-1.0, 1.0]
        if all(self.board):
            self._to_move = None
        else:
            self._to_move = 1 - seat
        return [0.0, 0.0]

    def view(self, seat: int) -> str:
        played = ", ".join(f"{MARKS[i % 2]} {m}" for i, m in enumerate(self.history)) or "none"
        lines = [f"You play {MARKS[seat]}.", board_text(self.board), f"Moves so far: {played}."]
        mark = winner(self.board)
        if mark:
            lines.append(f"{mark} has three in a row and wins.")
        elif all(self.board):
            lines.append("The board is full: a draw.")
        return "\n".join(lines)

    def render(self) -> str:
        return board_text(self.board)


@cache
def _negamax(board: tuple[str, ...], mark: str) -> int:
    """Value for the side to move (``mark``) under perfect play: 0 for a draw, ±(1 + empty cells
    left) for a win or loss, so the player takes the quickest win and the slowest loss.
    """
    if winner(board):
        return -(1 + board.count(""))  # the previous mover just won
    if all(board):
        return 0
    other = MARKS[1 - MARKS.index(mark)]
    return max(-_negamax(board[:i] + (mark,) + board[i + 1 :], other) for i in range(9) if not board[i])


class MinimaxPlayer:
    """Perfect play by exhaustive negamax (5,478 positions, memoised); ties broken at random."""

    def act(self, env, agent: str, rng: np.random.Generator) -> int:
        rules: TicTacToe = env.unwrapped.rules
        mark = MARKS[env.possible_agents.index(agent)]
        other = MARKS[1 - MARKS.index(mark)]
        b = rules.board
        scores = {i: -_negamax(b[:i] + (mark,) + b[i + 1 :], other) for i in range(9) if not b[i]}
        best = max(scores.values())
        choices = [i for i, s in scores.items() if s == best]
        return int(choices[rng.integers(len(choices))])
