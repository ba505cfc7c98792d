"""``coevo``: the command line. Thin by design: every command calls into the packages."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

import games
from populations.tournament import round_robin, standings

app = typer.Typer(help="coevo: role-specialised LLM agents co-evolving in PettingZoo games.", no_args_is_help=True)
console = Console()

DEMO_GAMES = ("tictactoe", "kuhn_poker", "leduc_holdem", "simple_negotiation")


def _check_game(name: str) -> str:
    if name not in games.SCRIPTED_PLAYERS:
        raise typer.BadParameter(f"{name!r} has no scripted players; choose from {', '.join(games.SCRIPTED_PLAYERS)}")
    return name


@app.command("games")
def list_games() -> None:
    """List the games `coevo` can make by name."""
    for name in games.list():
        console.print(name)


@app.command()
def tournament(
    game: Annotated[
        list[str] | None,
        typer.Option("--game", "-g", help="Game to play (repeatable); default: all four built-in games.",
                     callback=lambda names: [_check_game(n) for n in names or ()]),
    ] = None,
    matches: Annotated[int, typer.Option(min=1, help="Matches per ordered pair of players.")] = 100,
    seed: Annotated[int, typer.Option(help="Root seed; the same seed replays the same matches.")] = 0,
) -> None:
    """Round-robin of the scripted players in each game, with a standings table per game."""
    names = game or list(DEMO_GAMES)
    total = sum(
        matches * len(p) * (len(p) - 1) for p in (games.scripted_players(g) for g in names)
    )
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("matches", total=total)
        results = {
            g: round_robin(g, matches=matches, seed=seed, on_match=lambda: progress.advance(task)) for g in names
        }
    for g, frame in results.items():
        table = Table(title=f"{g}: {matches} matches per ordered pair, seed {seed}")
        for column in ("player", "matches", "mean return", "±95%", "wins", "draws", "losses"):
            table.add_column(column, justify="left" if column == "player" else "right")
        for row in standings(frame).itertuples():
            table.add_row(
                str(row.Index), str(row.matches), f"{row.mean_return:+.3f}", f"{row.ci95:.3f}",
                str(row.wins), str(row.draws), str(row.losses),
            )  # fmt: skip
        console.print(table)


if __name__ == "__main__":
    app()
