"""What a role is: prompt, output format, parser and reward shaping (see DESIGN.md, Roles)."""

from __future__ import annotations

from roles.forge import ForgeRole
from roles.graph_game import GraphRole
from roles.seat import SeatRole


def role_for(game: str, seat: str, compact: bool = False) -> ForgeRole | SeatRole:
    """How a model is prompted and read in ``seat`` of ``game``: task forge's four roles each
    have their own brief, a graph's nodes theirs in the observation; the seats of competitive
    games share one by game family."""
    if game == "task_forge":
        return ForgeRole(seat, compact)
    if game.startswith("graph/"):
        return GraphRole(seat, compact)
    return SeatRole(game, compact)
