"""Where a run stands, read from its directory alone: running, stopped or finished, and when it
last wrote.

A trainer holds an exclusive ``fcntl.flock`` on ``RUN_DIR/.lock`` for as long as it runs; the
kernel releases it when the process ends, however it ends (SIGKILL included), so a stale lock
cannot outlive its trainer. A reader tries the lock without waiting: refused means a trainer
holds it; obtained means none does (and it is released at once); a missing file means no trainer
has run there since runs took the lock. The reader asks for a shared lock, so two readers never
see each other as a trainer.

A run that is neither running nor ended (no ``end`` event) is stopped: killed, crashed or
interrupted, and ``coevo train --resume`` carries it on from its last checkpoint.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

LOCK = ".lock"  # held by the trainer while it runs
RUN_FILES = ("config.toml", "events.jsonl")  # what every run directory holds from its first moments


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` holds a run: a directory with a run's config or events."""
    return path.is_dir() and any((path / name).is_file() for name in RUN_FILES)


def is_running(run_dir: Path) -> bool:
    """Whether a trainer holds the run's lock now (module docstring)."""
    try:
        fd = os.open(run_dir / LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def last_write(run_dir: Path) -> float | None:
    """When the run last wrote anything (seconds since the epoch): the newest modification time
    of its files and folders (a folder's changes when a shard or checkpoint is renamed into it)."""
    times = [entry.stat().st_mtime for entry in run_dir.iterdir() if entry.name != LOCK] if run_dir.is_dir() else []
    return max(times, default=None)


def checkpoint_iteration(run_dir: Path) -> int | None:
    """The iteration of the run's last checkpoint (``checkpoints/latest`` names its folder), or None."""
    latest = run_dir / "checkpoints" / "latest"
    if not latest.is_file():
        return None
    state = latest.parent / latest.read_text(encoding="utf-8").strip() / "state.json"
    return json.loads(state.read_text(encoding="utf-8"))["iteration"] if state.is_file() else None


def ago(seconds: float) -> str:
    """``12 s ago``, ``3 min ago``, ``2 h ago``, ``4 days ago``."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.0f} h ago"
    return f"{seconds / 86400:.0f} days ago"


@dataclass(frozen=True)
class RunState:
    run_dir: Path
    running: bool  # a trainer holds the lock
    ended: bool  # the run logged its end
    iteration: int  # the last iteration logged
    planned: int | None  # iterations the config asks for
    checkpoint: int | None  # the last checkpoint's iteration
    last_write: float | None  # seconds since the epoch

    @property
    def stopped(self) -> bool:
        return not self.running and not self.ended

    def describe(self, now: float | None = None) -> str:
        """``running · last write 12 s ago``, ``finished · …``, or ``stopped at iteration 7 of 10 · …
        — resume with coevo train --resume DIR``."""
        wrote = "" if self.last_write is None else f" · last write {ago((now or time.time()) - self.last_write)}"
        if self.ended:
            return f"finished{wrote}"
        if self.running:
            return f"running{wrote}"
        of = f" of {self.planned}" if self.planned is not None else ""
        if self.checkpoint is None:
            since = " (no checkpoint yet: it starts again)"
        else:
            since = f" (from its checkpoint at iteration {self.checkpoint})" if self.checkpoint != self.iteration else ""
        then = f"resume with coevo train --resume {self.run_dir}{since}"
        return f"stopped at iteration {self.iteration}{of}{wrote} — {then}"


def run_state(run_dir: Path, events: list[dict], planned: int | None, running: bool) -> RunState:
    """The run's state from its events (as read so far) and whether its lock was held; read the
    lock before the events, so that an ``end`` logged just before the lock's release is seen."""
    iterations = [e["iteration"] for e in events if e.get("kind") == "iteration"]
    checkpoint = checkpoint_iteration(run_dir)
    # ended: it logged its end, or stopped right before that with its last iteration checkpointed
    # (resuming it has nothing left to do: coevo train says it is finished)
    saved = not running and checkpoint is not None and planned is not None and checkpoint >= planned
    ended = saved or any(e.get("kind") == "end" for e in events)
    return RunState(
        run_dir, running, ended, iterations[-1] if iterations else 0, planned, checkpoint, last_write(run_dir)
    )  # fmt: skip
