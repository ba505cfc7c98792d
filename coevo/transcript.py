"""A match, turn by turn, for a person at a terminal (colour) or a pipe (plain text, via rich)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from marl.episode import Episode, Turn
from marl.rollout import MatchSpec
from roles import role_for

SEEN_LINES = 12  # of the observation, after the rules, unless --show-prompt


def _seen(observation: str) -> str:
    """The observation without the rules paragraph, at most SEEN_LINES lines from its end."""
    state = observation.split("\n\n", 1)[-1]
    return "\n".join(state.splitlines()[-SEEN_LINES:])


class TranscriptPrinter:
    def __init__(self, console: Console, show_prompt: bool = False):
        self.console = console
        self.show_prompt = show_prompt

    def start(self, spec: MatchSpec, rules: str) -> None:
        seats = "  vs  ".join(f"{seat}: {who.member}" for seat, who in spec.seats.items())
        self.console.print(Rule(f"{spec.game} · seed {spec.seed} · {seats}"))
        if not self.show_prompt:
            self.console.print(f"[dim]{escape(rules)}[/dim]")

    def turn(self, spec: MatchSpec, turn: Turn) -> None:
        retry = f" · retry {turn.attempt}" if turn.attempt else ""
        self.console.print(f"\n[bold]Turn {turn.index + 1} · {turn.seat}[/bold] ({escape(turn.member)}, {turn.mode}){retry}")
        if self.show_prompt:
            for message in role_for(spec.game, turn.seat).messages(turn.observation):
                self.console.print(f"[cyan]{message['role']}:[/cyan]\n{escape(message['content'])}")
        else:
            self.console.print(f"[cyan]sees:[/cyan]\n{escape(_seen(turn.observation))}")
        self.console.print(f"[cyan]output:[/cyan] [dim]{escape(turn.text.strip()) or '(empty)'}[/dim]")
        if turn.valid:
            self.console.print(f"[green]move: {escape(str(turn.move))} ✓[/green]")
        else:
            self.console.print(f"[red]invalid ✗ {escape(turn.reason)}[/red]")
            if turn.action is not None:
                self.console.print(f"[yellow]played a random legal move instead: {escape(turn.action)}[/yellow]")
            if turn.penalty:
                self.console.print(f"[yellow]penalty {turn.penalty:+g}[/yellow]")

    def end(self, episode: Episode) -> None:
        self.console.print(Rule("result"))
        how = f"{episode.forfeited_by} forfeited" if episode.forfeited_by else "truncated (draw)" if episode.truncated else "played out"
        rewards = ", ".join(f"{seat} ({episode.members[seat]}) {r:+g}" for seat, r in episode.rewards.items())
        self.console.print(f"{how}: {rewards}")
