"""Round-robin tournaments: every pairing in both seatings, reproducible, with correct standings."""

import pandas as pd
import pytest

from games.play import RandomPlayer
from games.tictactoe import MinimaxPlayer
from populations.tournament import head_to_head, round_robin, standings


def test_every_ordered_pair_plays_the_given_number_of_matches():
    results = round_robin("kuhn_poker", matches=3, seed=0)
    assert len(results) == 4 * 3 * 3  # 4 players, 12 ordered pairs
    assert results.groupby(["player_0", "player_1"]).size().eq(3).all()
    assert (results.return_0 + results.return_1 == 0).all()


def test_same_seed_same_results():
    a = round_robin("leduc_holdem", matches=20, seed=9)
    b = round_robin("leduc_holdem", matches=20, seed=9)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(round_robin("leduc_holdem", matches=20, seed=10))


def test_standings_count_wins_draws_and_losses_from_both_seats():
    results = pd.DataFrame(
        {"player_0": ["a", "b", "a"], "player_1": ["b", "a", "b"],
         "return_0": [1.0, 0.0, -2.0], "return_1": [-1.0, 0.0, 2.0]}
    )  # fmt: skip
    table = standings(results)
    assert table.loc["a"].tolist()[:2] == [3, pytest.approx(-1 / 3)]
    assert (table.loc["a", "wins"], table.loc["a", "draws"], table.loc["a", "losses"]) == (1, 1, 1)
    assert head_to_head(results).loc["b", "a"] == pytest.approx(1 / 3)


def test_minimax_tops_the_tictactoe_table_undefeated():
    results = round_robin("tictactoe", {"random": RandomPlayer, "minimax": MinimaxPlayer}, matches=30, seed=1)
    table = standings(results)
    assert table.index[0] == "minimax" and table.loc["minimax", "losses"] == 0


def test_one_player_is_not_a_tournament():
    with pytest.raises(ValueError, match="at least two players"):
        round_robin("tictactoe", {"random": RandomPlayer})
