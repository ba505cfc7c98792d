"""Sweeps: one TOML file expands into many training runs, run in parallel, tabulated as one tidy
table (``results.csv`` and ``results.parquet``, one row per run: its settings, status and final
metrics) beside each run's own directory.

A sweep file names the config every run starts from and what varies::

    config = "kuhn_population.toml"      # relative to the sweep file
    parallel = 2                         # runs at once
    set = ["iterations=8"]               # changes for every run (optional)

    [grid]                               # every combination...
    "population.matchmaker" = ["self_play", "fictitious", "psro"]
    seed = [0, 1]

    [[runs]]                             # ...and/or listed runs (each crossed with the grid)
    "population.size" = 1

Each run is ``coevo train CONFIG --set KEY=VALUE…`` in a process of its own — on this machine, or
as a Ray task on the cluster when ``pool = "ray"`` — so a crash stays in its run; its output goes
to ``logs/<run>.log``. Running the same
sweep again skips finished runs and resumes interrupted ones from their last checkpoint.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from marl.config import ConfigError
from coevo.config import load_run_config


class SweepConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    config: Path = Field(description="the config every run starts from, relative to the sweep file")
    parallel: int = Field(2, ge=1, description="runs at once")
    pool: Literal["local", "ray"] = Field("local", description="local: a process per run here; ray: a Ray task per run")
    address: str | None = Field(None, description="Ray cluster to join (pool = 'ray'); unset = start a local Ray")
    set: list[str] = Field([], description="KEY=VALUE changes for every run")
    grid: dict[str, list[Any]] = Field({}, description="KEY -> values: every combination becomes a run")
    runs: list[dict[str, Any]] = Field([], description="listed runs, KEY -> value, each crossed with the grid")


def load_sweep(path: str | Path) -> SweepConfig:
    """The sweep file, validated; ``ConfigError`` (one line) on any problem, including any run's
    config being invalid — found before anything starts."""
    path = Path(path)
    try:
        sweep = SweepConfig.model_validate(tomllib.loads(path.read_text()))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None
    except ValidationError as err:
        first = err.errors()[0]
        raise ConfigError(f"{path}: {'.'.join(str(p) for p in first['loc'])}: {first['msg']}") from None
    sweep.config = (path.parent / sweep.config).resolve()
    for settings in expand(sweep):
        load_run_config(sweep.config, [*sweep.set, *_assignments(settings)])
    return sweep


def expand(sweep: SweepConfig) -> list[dict[str, Any]]:
    """Every run's settings: the grid's product, crossed with each listed run (or alone)."""
    keys = list(sweep.grid)
    grid = [dict(zip(keys, values)) for values in itertools.product(*(sweep.grid[k] for k in keys))]
    return [{**listed, **point} for listed in (sweep.runs or [{}]) for point in grid]


def run_name(index: int, settings: dict[str, Any]) -> str:
    """``003-matchmaker=psro-size=2-seed=1``: readable, unique by its index (a table is named, not spelt out)."""
    parts = [key if isinstance(value, dict) else f"{key.rsplit('.', 1)[-1]}={value}" for key, value in settings.items()]
    return "-".join([f"{index:03d}", *parts]).replace("/", "_").replace(" ", "")


def flat(settings: dict[str, Any]) -> dict[str, Any]:
    """A run's settings with its tables spelt out, one dotted key per value
    (``roles.executor.player``): one ``--set`` each, and one column each in the results table."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            out.update(flat({f"{key}.{k}": v for k, v in value.items()}))
        else:
            out[key] = value
    return out


def _assignments(settings: dict[str, Any]) -> list[str]:
    return [f"{key}={json.dumps(value)}" for key, value in flat(settings).items()]


def train_command(sweep: SweepConfig, settings: dict[str, Any], run_dir: Path) -> list[str]:
    """The ``coevo train`` line of one run: resume when it has a checkpoint, start otherwise."""
    base = [sys.executable, "-m", "coevo.cli", "train"]
    if (run_dir / "checkpoints" / "latest").exists():
        return [*base, "--resume", str(run_dir), "--quiet"]
    changes = [arg for item in (*sweep.set, *_assignments(settings)) for arg in ("--set", item)]
    return [*base, str(sweep.config), *changes, "--run-dir", str(run_dir), "--quiet"]


def run_one(command: list[str], log_path: str, threads: int) -> tuple[int, float]:
    """Run one training process, its output appended to ``log_path``; (exit code, seconds)."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    with open(log_path, "a", encoding="utf-8") as log:
        code = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode
    return code, time.perf_counter() - start


def finished(run_dir: Path, iterations: int) -> bool:
    latest = run_dir / "checkpoints" / "latest"
    return latest.exists() and latest.read_text().strip() == f"iter_{iterations:06d}"


def final_metrics(run_dir: Path) -> dict[str, Any]:
    """The last iteration's scalar metrics (a partial last line, from a kill, is skipped)."""
    last: dict[str, Any] = {}
    events = run_dir / "events.jsonl"
    if events.exists():
        for line in events.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("kind") == "iteration":
                last = record
    return {k: v for k, v in last.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def run_sweep(path: str | Path, out: str | Path, on_done: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Run (or finish) every run of the sweep; returns the results table, also written to ``out``."""
    sweep = load_sweep(path)
    out = Path(out)
    plan = []
    for index, settings in enumerate(expand(sweep)):
        run_dir = out / "runs" / run_name(index, settings)
        iterations = load_run_config(sweep.config, [*sweep.set, *_assignments(settings)]).iterations
        plan.append((run_name(index, settings), settings, run_dir, iterations))
    todo = []
    for name, settings, run_dir, iterations in plan:
        if finished(run_dir, iterations):
            continue
        if not (run_dir / "checkpoints" / "latest").exists():
            shutil.rmtree(run_dir, ignore_errors=True)  # killed before its first checkpoint: start again
        todo.append((name, train_command(sweep, settings, run_dir), out / "logs" / f"{name}.log"))
    outcome = _execute(sweep, todo, on_done)
    rows = []
    for name, settings, run_dir, iterations in plan:
        code, seconds = outcome.get(name, (0, 0.0))
        status = "done" if finished(run_dir, iterations) else f"failed (exit {code}; see {out / 'logs' / name}.log)"
        rows.append({"run": name, **flat(settings), "status": status, "seconds": seconds, "run_dir": str(run_dir), **final_metrics(run_dir)})
    table = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "results.csv", index=False)
    table.to_parquet(out / "results.parquet", index=False)
    return table


def _execute(sweep: SweepConfig, todo: list[tuple[str, list[str], Path]], on_done) -> dict[str, tuple[int, float]]:
    threads = max(1, (os.cpu_count() or 1) // sweep.parallel)
    if sweep.pool == "ray":
        return _execute_on_ray(sweep, todo, threads, on_done)
    outcome = {}
    with ThreadPoolExecutor(max_workers=sweep.parallel) as executor:
        futures = {executor.submit(run_one, command, str(log), threads): name for name, command, log in todo}
        for future in as_completed(futures):
            outcome[futures[future]] = future.result()
            if on_done is not None:
                on_done(futures[future])
    return outcome


def _execute_on_ray(sweep: SweepConfig, todo, threads: int, on_done) -> dict[str, tuple[int, float]]:
    """A Ray task per run, each asking for its share of CPUs: Ray places them on the cluster."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address=sweep.address, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=threads)(run_one)
        refs = {task.remote(command, str(log), threads): name for name, command, log in todo}
        outcome, pending = {}, list(refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            outcome[refs[done[0]]] = ray.get(done[0])
            if on_done is not None:
                on_done(refs[done[0]])
        return outcome
    finally:
        if started:
            ray.shutdown()
