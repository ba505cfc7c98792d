"""``coevo watch RUN_DIR``: follow a training run from another terminal until it ends.

It only reads the run directory (``events.jsonl``, the latest episode shard, the trainer's lock:
``analysis.run_state``), so it works on a run started anywhere, costs the run nothing, and can be
stopped and started at will. It says whether the run is running, stopped or finished and when it
last wrote, and returns once it is finished or stopped: a stopped run writes nothing more. Lines
are read as they are completed; a half-written line waits for its end. A resumed run rewrites its
events file (dropping what came after the checkpoint): the file shrinking is noticed and read again.
What players wrote is shown through ``analysis.printable``: the screen shows their control
characters as escapes instead of obeying them.
"""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from analysis.headline import headline, scalars
from analysis.printable import printable
from analysis.run_state import RunState, is_run_dir, is_running, run_state

SHOWN_METRICS = 14
SHOWN_TURNS = 12  # of the last match: its end (a task forge match runs to ~40 turns)


class EventTail:
    """The events of a run as they arrive: complete lines only, from where the last read stopped."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.events: list[dict] = []

    def poll(self) -> list[dict]:
        """Events completed since the last call (all of them again if the file was rewritten)."""
        if not self.path.exists():
            return []
        size = self.path.stat().st_size
        if size < self.offset:  # rewritten by a resume: start over
            self.offset, self.events = 0, []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            chunk = f.read(size - self.offset)
        complete = chunk[: chunk.rfind(b"\n") + 1]  # a line without its newline is still being written
        self.offset += len(complete)
        new = []
        for line in complete.splitlines():
            try:
                new.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line cut short by a kill, followed by a resumed run's lines
        self.events += new
        return new


def watch(run_dir: Path, console: Console, interval: float = 1.0, timeout: float | None = None) -> bool:
    """Show the run's state, progress, latest metrics and last match, refreshed every ``interval``
    seconds, until it is finished (True), stopped (False: not running and no end logged) or
    ``timeout`` seconds pass (False). A path that holds no run yet is waited for: watch may start
    before the trainer writes anything (``coevo watch`` refuses a folder that is not a run dir)."""
    tail = EventTail(run_dir / "events.jsonl")
    planned, start = None, time.monotonic()
    with Live(console=console, auto_refresh=False, transient=False) as live:
        while True:
            planned = planned or _planned_iterations(run_dir)  # watch may start before the run writes it
            running = is_running(run_dir)  # before the events: an end logged just before the lock's release is seen
            tail.poll()
            state = run_state(run_dir, tail.events, planned, running)
            live.update(render(state, tail.events), refresh=True)
            if state.ended:
                return True
            if state.stopped and is_run_dir(run_dir):  # nothing more will come
                return False
            if timeout is not None and time.monotonic() - start >= timeout:
                return False
            time.sleep(interval)


STATE_STYLES = {"finished": "green", "running": "yellow", "stopped": "red"}


def render(state: RunState, events: list[dict]) -> Group:
    """One screen: where the run is, its latest metrics, and the last match it played."""
    iterations = [e for e in events if e.get("kind") == "iteration"]
    done, planned = state.iteration, state.planned
    said = state.describe()
    header = Table.grid(padding=(0, 2))
    header.add_row(
        Text(printable(str(events[0].get("run_id", state.run_dir.name)) if events else state.run_dir.name), style="bold"),
        Text(f"iteration {done}/{planned if planned is not None else '?'}"),
        ProgressBar(total=planned or max(done, 1), completed=done, width=40),
        Text(said, style=STATE_STYLES[said.split()[0]]),
    )
    parts = [header, _metrics_table(iterations[-1] if iterations else {}), _last_match(state.run_dir, done)]
    return Group(*[p for p in parts if p is not None])


def _metrics_table(latest: dict) -> Table | None:
    numbers = scalars(latest)
    if not numbers:
        return None
    first = headline(numbers)
    ordered = first + sorted(set(numbers) - set(first))
    table = Table(title=f"iteration {latest['iteration']}", title_justify="left", show_header=False, box=None)
    for key in ordered[:SHOWN_METRICS]:
        table.add_row(_shown(key), f"{numbers[key]:.4g}")
    if len(ordered) > SHOWN_METRICS:
        table.add_row(f"… {len(ordered) - SHOWN_METRICS} more in events.jsonl", "")
    return table


def _last_match(run_dir: Path, iteration: int) -> Panel | None:
    """The last match of the newest complete episode shard (shards are written atomically)."""
    shard = run_dir / "episodes" / f"iter_{iteration:06d}.jsonl"
    if not iteration or not shard.exists():
        return None
    lines = shard.read_text(encoding="utf-8").splitlines()
    if not lines:
        return None
    episode = json.loads(lines[-1])
    rows = Table(show_header=True, box=None, padding=(0, 1))
    for column in ("seat", "member", "move", ""):
        rows.add_column(column)
    turns = episode["turns"]
    if len(turns) > SHOWN_TURNS:
        rows.add_row("…", "", f"{len(turns) - SHOWN_TURNS} earlier turns", "")
    for turn in turns[-SHOWN_TURNS:]:
        verdict = "" if turn["valid"] else f"[red]invalid: {_shown(turn.get('reason', ''))}[/red]"
        move = turn.get("move") or turn["text"][:60]
        rows.add_row(_shown(turn["seat"]), _shown(turn["member"]), _shown(" ".join(str(move).split())[:80]), verdict)
    rewards = "  ".join(f"{_shown(seat)} {reward:+g}" for seat, reward in episode["rewards"].items())
    title = f"last match {_shown(episode['match_id'])} ({_shown(episode['game'])}): {rewards}"
    return Panel(rows, title=title, title_align="left")


def _shown(text: str) -> str:
    """Text from the run, as rich markup that prints it literally and harmlessly."""
    return escape(printable(str(text)))


def _planned_iterations(run_dir: Path) -> int | None:
    config = run_dir / "config.toml"
    return tomllib.loads(config.read_text()).get("iterations") if config.exists() else None
