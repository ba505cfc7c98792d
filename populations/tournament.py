"""Round-robin tournaments between fixed players, and their standings.

Every ordered pair of distinct players meets ``matches`` times, so each plays every seat against
every other. Results come back tidy (one row per match) so that standings, head-to-head tables
and later analysis are all group-bys over the same frame.

>>> from populations.tournament import round_robin, standings
>>> results = round_robin("tictactoe", matches=5, seed=0)
>>> int(standings(results).loc["minimax", "losses"])
0
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from itertools import permutations

import numpy as np
import pandas as pd

import games
from games.play import Player, derive_seed


def round_robin(
    game: str,
    players: Mapping[str, Callable[[], Player]] | None = None,
    matches: int = 100,
    seed: int = 0,
    on_match: Callable[[], None] | None = None,
    **game_kwargs,
) -> pd.DataFrame:
    """Play every ordered pair of ``players`` (default: the game's scripted players) ``matches`` times.

    Returns one row per match: the players in seats 0 and 1, their returns, turns, whether the
    match was truncated and how many invalid moves it had. ``on_match`` is called after each
    match (progress bars).
    """
    players = players if players is not None else games.scripted_players(game)
    if len(players) < 2:
        raise ValueError(f"a round robin needs at least two players, got {sorted(players)}")
    env = games.make(game, **game_kwargs)
    if len(env.possible_agents) != 2:
        raise ValueError(f"round_robin plays two-seat games; {game} has seats {env.possible_agents}")
    seat0, seat1 = env.possible_agents
    rows = []
    for pairing, (a, b) in enumerate(permutations(players, 2)):
        for m in range(matches):
            result = games.play_match(env, {seat0: players[a](), seat1: players[b]()}, derive_seed(seed, pairing, m))
            rows.append(
                {"game": game, "player_0": a, "player_1": b, "match": m,
                 "return_0": result.returns[seat0], "return_1": result.returns[seat1],
                 "turns": result.turns, "truncated": result.truncated, "invalid": len(result.invalid)}
            )  # fmt: skip
            if on_match is not None:
                on_match()
    return pd.DataFrame(rows)


def _per_player(results: pd.DataFrame) -> pd.DataFrame:
    """Each match twice, once from each player's side: player, opponent, own and other's return."""
    sides = []
    for me, other in ((0, 1), (1, 0)):
        side = results[[f"player_{me}", f"player_{other}", f"return_{me}", f"return_{other}"]]
        sides.append(side.set_axis(["player", "opponent", "ret", "opp_ret"], axis=1))
    return pd.concat(sides, ignore_index=True)


def standings(results: pd.DataFrame) -> pd.DataFrame:
    """Per player: matches, mean return with a 95% interval half-width, wins, draws, losses.

    A win is a match where the player's return beats its opponent's (in general-sum games too).
    """
    rows = _per_player(results)
    rows["win"] = rows.ret > rows.opp_ret
    rows["draw"] = rows.ret == rows.opp_ret
    grouped = rows.groupby("player")
    table = pd.DataFrame(
        {
            "matches": grouped.size(),
            "mean_return": grouped.ret.mean(),
            "ci95": 1.96 * grouped.ret.std(ddof=1).fillna(0) / np.sqrt(grouped.size()),
            "wins": grouped.win.sum(),
            "draws": grouped.draw.sum(),
        }
    )
    table["losses"] = table.matches - table.wins - table.draws
    return table.sort_values("mean_return", ascending=False)


def head_to_head(results: pd.DataFrame) -> pd.DataFrame:
    """Mean return of the row player against the column player, over both seatings."""
    return _per_player(results).pivot_table(index="player", columns="opponent", values="ret", aggfunc="mean")
