"""A match, turn by turn, for a person at a terminal (colour) or a pipe (plain text, via rich).

Everything a player wrote (and the observations, which quote other players) goes through
``analysis.printable`` first: control characters, ANSI sequences, bidi overrides and lone
surrogates show as escapes instead of acting on the terminal. ``--json`` keeps the exact text.
A human seat is shown what a person needs: the rules once, the state before each move (by
``HumanPolicy``), and no model prompt with its answer-format instructions.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.rule import Rule

from analysis.printable import printable
from marl.episode import Episode, Turn
from marl.rollout import MatchSpec, SeatSpec, prompted_role
from marl.scripted import HumanPolicy, invalid_move_costs

SEEN_LINES = 12  # of the observation, after the rules, unless --show-prompt


def shown(text: str) -> str:
    """Text from a player or the game, as rich markup that prints it literally and harmlessly."""
    return escape(printable(text))


def _seen(observation: str) -> str:
    """The observation without the rules paragraph, at most SEEN_LINES lines from its end."""
    state = observation.split("\n\n", 1)[-1]
    return "\n".join(state.splitlines()[-SEEN_LINES:])


def _human(seat: SeatSpec) -> bool:
    return isinstance(seat.policy, HumanPolicy)


class TranscriptPrinter:
    def __init__(self, console: Console, show_prompt: bool = False):
        self.console = console
        self.show_prompt = show_prompt

    def start(self, spec: MatchSpec, rules: str) -> None:
        seats = "  vs  ".join(f"{seat}: {who.member}" for seat, who in spec.seats.items())
        self.console.print(Rule(printable(f"{spec.game} · seed {spec.seed} · {seats}")))
        if not self.show_prompt or any(_human(who) for who in spec.seats.values()):  # a person needs them, once
            self.console.print(f"[dim]{shown(rules)}[/dim]")

    def turn(self, spec: MatchSpec, turn: Turn) -> None:
        seat = spec.seats[turn.seat]
        retry = f" · retry {turn.attempt}" if turn.attempt else ""
        step = f" · {shown(turn.tag)}" if turn.tag and turn.tag not in turn.seat else ""  # a phase, or the node a seat plays
        self.console.print(f"\n[bold]Turn {turn.index + 1} · {shown(turn.seat)}{step}[/bold] ({shown(turn.member)}, {turn.mode}){retry}")
        if _human(seat):
            pass  # they were shown the state as they were asked, and no model prompt
        elif self.show_prompt:
            messages = prompted_role(spec, turn.seat, turn.index).messages(turn.observation)
            for message in [{"role": "prompt", "content": messages}] if isinstance(messages, str) else messages:
                self.console.print(f"[cyan]{message['role']}:[/cyan]\n{shown(message['content'])}")
        else:
            self.console.print(f"[cyan]sees:[/cyan]\n{escape(_seen(printable(turn.observation)))}")  # lines split after: \r is no line
        self.console.print(f"[cyan]output:[/cyan] [dim]{shown(turn.text.strip()) or '(empty)'}[/dim]")
        if turn.valid:
            self.console.print(f"[green]move: {shown(str(turn.move))} ✓[/green]")
            return
        reason = turn.reason
        if _human(seat) and reason.startswith("no \\boxed{} answer"):  # a seat's parser speaks to models of their format
            reason = "not one of your legal moves; type one as listed"
        self.console.print(f"[red]invalid ✗ {shown(reason)}[/red]")
        rule = seat.invalid
        if turn.action == turn.text:  # a game that judges turns inside the match (task forge) took it
            self.console.print("[yellow]the game took it as written; the match goes on[/yellow]")
        elif turn.action is not None:
            self.console.print(f"[yellow]played a random legal move instead: {shown(turn.action)}[/yellow]")
        elif rule.kind == "retry" and turn.attempt < rule.retries:
            self.console.print(f"[yellow]asked again; {invalid_move_costs(rule, turn.attempt + 1)}[/yellow]")
        else:
            self.console.print(f"[red]{shown(turn.seat)} forfeits the match[/red]")
        if turn.penalty:
            self.console.print(f"[yellow]penalty {turn.penalty:+g}[/yellow]")

    def end(self, episode: Episode) -> None:
        self.console.print(Rule("result"))
        how = f"{episode.forfeited_by} forfeited" if episode.forfeited_by else "truncated (draw)" if episode.truncated else "played out"
        rewards = ", ".join(f"{seat} ({episode.members[seat]}) {r:+g}" for seat, r in episode.rewards.items())
        self.console.print(shown(f"{how}: {rewards}"))
