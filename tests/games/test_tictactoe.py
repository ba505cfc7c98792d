"""Tic-tac-toe rules by scripted games, and perfect play by minimax."""

import numpy as np
import pytest

import games
from games.play import RandomPlayer, play_match
from games.tictactoe import MOVES, MinimaxPlayer, TicTacToe


def play(moves):
    rules = TicTacToe(np.random.default_rng(0))
    earned = [0.0, 0.0]
    for move in moves:
        earned = rules.apply(move)
    return rules, earned


@pytest.mark.parametrize(
    "moves, returns, over",
    [
        (["a1", "a2", "b1", "b2", "c1"], [1, -1], True),  # X takes the top row
        (["a1", "b1", "a2", "b2", "c3", "b3"], [-1, 1], True),  # O takes the middle column
        (["a1", "b1", "b2", "c1", "c3"], [1, -1], True),  # X takes the main diagonal
        (["c1", "a1", "b2", "a2", "a3"], [1, -1], True),  # X takes the anti-diagonal
        (["b2", "a1", "c1", "a3", "a2", "c2", "b1", "b3", "c3"], [0, 0], True),  # full board, no line
        (["b2", "a1"], [0, 0], False),
    ],
)
def test_scripted_games(moves, returns, over):
    rules, earned = play(moves)
    assert earned == returns
    assert (rules.to_move is None) == over


def test_moves_are_named_by_cell():
    assert MOVES == ("a1", "b1", "c1", "a2", "b2", "c2", "a3", "b3", "c3")
    rules, _ = play(["b2"])
    assert rules.board[MOVES.index("b2")] == "X"
    assert "b2" not in rules.legal_moves()


@pytest.mark.parametrize(
    "text, move",
    [
        ("B2.", "b2"),
        ("Ｂ２", "b2"),  # fullwidth, folded by NFKC
        ("[a3]", "a3"),
        ("  **c1**\n", "c1"),
    ],
)
def test_a_text_that_is_a_move_is_read_whatever_its_case_and_punctuation(text, move):
    env = games.make("tictactoe")
    env.reset(seed=0)
    assert env.parse_move("player_0", text).move == move


@pytest.mark.parametrize(
    "text, lenient",
    [("I'll take B2.", "b2"), ("a1? no: c3", None), ("the centre", None)],  # lenient: one named move only
)
def test_a_text_that_mentions_a_move_is_read_only_when_lenient_and_unambiguous(text, lenient):
    env = games.make("tictactoe")
    env.reset(seed=0)
    assert env.parse_move("player_0", text).move is None
    assert env.parse_move("player_0", text, lenient=True).move == lenient


def test_parsing_explains_what_is_wrong():
    env = games.make("tictactoe")
    env.reset(seed=0)
    env.step(4)
    assert "not legal now" in env.parse_move("player_1", "b2").reason
    assert "not a move; got 'the centre'" in env.parse_move("player_1", "the centre").reason
    assert "not player_0's turn" in env.parse_move("player_0", "a1").reason


@pytest.mark.slow
def test_minimax_never_loses_to_random_in_1000_matches():
    env = games.make("tictactoe")
    losses = 0
    for seed in range(1000):
        minimax_seat = seed % 2
        players = {f"player_{minimax_seat}": MinimaxPlayer(), f"player_{1 - minimax_seat}": RandomPlayer()}
        losses += play_match(env, players, seed).returns[f"player_{minimax_seat}"] < 0
    assert losses == 0


def test_minimax_draws_itself():
    env = games.make("tictactoe")
    for seed in range(20):
        result = play_match(env, {"player_0": MinimaxPlayer(), "player_1": MinimaxPlayer()}, seed)
        assert result.returns == {"player_0": 0.0, "player_1": 0.0}
