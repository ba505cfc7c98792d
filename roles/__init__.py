"""What a role is: prompt, output format, parser and reward shaping (see DESIGN.md, Roles)."""

from __future__ import annotations

import games
from roles.forge import ForgeRole
from roles.graph import BUILTIN
from roles.graph_game import GraphRole, graph_env
from roles.graph_players import GRAPH_PLAYERS
from roles.seat import SeatRole

# Orchestration graphs are games (graph/<name>) made of roles: registered here, as games cannot import roles.
games.register("graph/", games.Family(graph_env, tuple(BUILTIN), GRAPH_PLAYERS))


def role_for(game: str, seat: str, compact: bool = False, demonstrate: bool = False) -> ForgeRole | SeatRole:
    """How a model is prompted and read in ``seat`` of ``game``: task forge's four roles each
    have their own brief, a graph's nodes theirs in the observation; the seats of competitive
    games share one by game family (``demonstrate``: theirs shows an example turn first)."""
    if game == "task_forge":
        return ForgeRole(seat, compact)
    if game.startswith("graph/"):
        return GraphRole(seat, compact)
    return SeatRole(game, compact, demonstrate)
