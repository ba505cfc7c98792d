"""For tests that train: a run's events, what two runs must share, and a run killed mid-way."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace


def events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "events.jsonl").read_text().splitlines()]


def comparable(records: list[dict]) -> list[dict]:
    """Iteration events without wall-clock fields and the run's own name."""
    return [
        {k: v for k, v in r.items() if k not in ("timestamp", "run_id") and "perf/" not in k}
        for r in records if r["kind"] == "iteration"
    ]  # fmt: skip


def train_killed_after(args: list[str], run_dir: Path, iteration: int) -> None:
    """``coevo train ARGS --run-dir RUN_DIR`` in its own process, SIGKILLed once ``iteration`` is
    logged (before the next one is)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "coevo.cli", "train", *args, "--run-dir", str(run_dir), "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    logged, deadline = f'"iteration": {iteration}, "kind": "iteration"', time.time() + 300
    while time.time() < deadline:
        if (run_dir / "events.jsonl").exists() and logged in (run_dir / "events.jsonl").read_text():
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def two_short_iterations(example: str, run_dir: Path) -> list:
    """Train two short iterations of ``examples/<example>`` (8 matches each) into ``run_dir``;
    the episodes they played."""
    from coevo.config import load_run_config
    from coevo.train import Trainer
    from marl.episode import read_jsonl

    short = ["iterations=2", "rollout.matches=8", "rollout.concurrency=8", "eval.every=2", "eval.matches=4"]
    Trainer(load_run_config(Path(__file__).parents[1] / "examples" / example, short), run_dir).run()
    return [e for i in (1, 2) for e in read_jsonl(Path(run_dir) / f"episodes/iter_{i:06d}.jsonl")]


def scored_member(policy, compact: bool = False, demonstrate: bool = False) -> SimpleNamespace:
    """What a run's Member holds that reading its exact strategy needs: a model, played unscripted
    at temperature 1 without an adapter, prompted as its seat is."""
    return SimpleNamespace(policy=policy, temperature=1.0, adapter=None, scripted=None, seat=SimpleNamespace(compact=compact, demonstrate=demonstrate))
