"""Writing a run directory (DESIGN.md): every file appears whole or not at all, a failed write
names its file, and one trainer at a time holds the directory.

Atomic: a file is written beside its target under a dot-name, then renamed over it, so a run
killed mid-write leaves the old file or the new one, never half of one. A full disk or a
read-only directory raises ``OSError`` with the target's path as ``filename`` — PyTorch's own
writer, given a path, reports a full disk as "unexpected pos …"; given our file object, it lets
the ``OSError`` through.

The lock: a trainer holds an exclusive ``flock`` on ``RUN_DIR/.lock`` for as long as it runs. The
kernel drops it when the process ends, however it ends, so ``coevo watch`` can tell a running run
from a stopped one, and a second trainer on the same directory is refused instead of
interleaving its records with the first's.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch

LOCK_FILE = ".lock"


class OldCheckpoint(RuntimeError):
    """A checkpoint this version cannot resume from: written before the one trainer."""


class RunDirBusy(RuntimeError):
    """Another process is training into this run directory."""


def write_atomic(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write ``path`` through ``write(file)`` atomically; an ``OSError`` names ``path``."""
    path = Path(path)
    staging = path.with_name(f".{path.name}.tmp")
    try:
        with open(staging, "wb") as f:
            write(f)
        os.replace(staging, path)
    except OSError as err:
        try:
            staging.unlink(missing_ok=True)
        except OSError:
            pass  # a read-only directory: nothing was written to remove
        raise OSError(err.errno, err.strerror, str(path)) from err


def write_text(path: Path, text: str) -> None:
    write_atomic(path, lambda f: f.write(text.encode("utf-8")))


def save_tensors(path: Path, obj: Any) -> None:
    """``torch.save`` of ``obj`` to ``path``, atomically."""
    write_atomic(path, lambda f: torch.save(obj, f))


def _lock(file: IO[str], tries: int = 10) -> bool:
    """Take the exclusive lock; a few tries, since ``coevo watch`` holds a shared one for an instant
    to see whether a trainer runs."""
    for attempt in range(tries):
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            time.sleep(0.05 * (attempt < tries - 1))
    return False


class RunLock:
    """Held while a trainer writes ``run_dir``: ``with RunLock(run_dir): ...``."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / LOCK_FILE
        self.file: IO[str] | None = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "a+", encoding="utf-8")
        if not _lock(self.file):
            self.file.seek(0)
            holder = self.file.read().strip() or "?"
            self.file.close()
            raise RunDirBusy(
                f"{self.path.parent} is being trained by another process (pid {holder}); "
                "wait for it to end, or stop it, before resuming"
            ) from None
        self.file.truncate(0)
        self.file.write(str(os.getpid()))
        self.file.flush()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.file is not None
        self.file.close()  # closing the file releases the lock
