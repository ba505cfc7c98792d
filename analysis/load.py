"""Run and sweep directories as tidy pandas DataFrames (DESIGN.md, "Run directory").

A run may still be going, or may have been killed mid-write: every JSON-lines file is read line by
line and a line that does not parse (the half-written last one) is skipped with a warning, never
fatal; a file the run has not written yet gives an empty frame with the usual columns. So the same
loader serves ``coevo report``, ``coevo watch`` and the notebooks on live and dead runs alike.

>>> run = load_run("runs/kuhn_tiny-20261130-041527")                     # doctest: +SKIP
>>> run.metrics.query("metric == 'kuhn/exploitability'")[["iteration", "value"]]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import tomllib
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import pandas as pd

from analysis.headline import headline

EVENT_COLUMNS = ["run_id", "iteration", "kind", "event", "timestamp"]
METRIC_COLUMNS = ["run_id", "iteration", "kind", "metric", "value"]
EPISODE_COLUMNS = ["run_id", "iteration", "match_id", "game", "seed", "turns", "invalid_turns", "truncated", "forfeited_by"]
TURN_COLUMNS = [
    "run_id", "iteration", "match_id", "game", "index", "seat", "role", "member", "attempt", "tag", "mode",
    "observation", "text", "move", "valid", "reason", "action", "penalty", "prompt_tokens", "response_tokens",
    "mean_logprob",
]  # fmt: skip
STRATEGY_COLUMNS = ["run_id", "iteration", "player", "infoset", "probability"]
RATING_COLUMNS = ["run_id", "player", "elo", "bradley_terry", "mu", "sigma", "ordinal", "nash_average"]
RATING_HISTORY_COLUMNS = ["run_id", "iteration", "player", "elo"]
PAYOFF_COLUMNS = ["run_id", "role_a", "role_b", "a", "b", "games", "wins", "draws", "losses", "mean", "lo", "hi"]
LINEAGE_COLUMNS = ["run_id", "node", "member", "kind", "iteration", "parent", "change"]

_EPISODE_FILE = re.compile(r"iter_(\d+)\.jsonl$")
_STRATEGY_EVENT = re.compile(r"^kuhn/(?:(?P<player>.+)/)?(?:population_)?strategy$")


@dataclass
class Run:
    """One run directory, read once. Every frame carries ``run_id`` so runs concatenate."""

    path: Path
    run_id: str
    config: dict
    events: pd.DataFrame  # one row per event line, scalar fields as columns
    metrics: pd.DataFrame  # long: one row per (event, numeric field)
    episodes: pd.DataFrame  # one row per match; member.<seat>, reward.<seat>, outcome.<key> columns
    turns: pd.DataFrame  # one row per turn, token ids reduced to counts
    strategies: pd.DataFrame  # Kuhn: P(bet or call) per information set, per iteration and player
    ratings: pd.DataFrame  # the population's latest ratings, one row per player
    rating_history: pd.DataFrame  # online Elo per member per iteration (from the events)
    payoffs: pd.DataFrame  # one row per (role_a, role_b, a, b) cell
    lineage: pd.DataFrame  # one row per lineage node, with its parent and what changed
    lineage_graph: nx.DiGraph = field(default_factory=nx.DiGraph)

    @property
    def finished(self) -> bool:
        """Whether training logged its ``end`` event (a killed or running run has not)."""
        return bool((self.events["kind"] == "end").any())


@dataclass
class Sweep:
    """A sweep directory: the results table (one row per run) and every run that has events."""

    path: Path
    results: pd.DataFrame
    runs: dict[str, Run]
    metrics: pd.DataFrame  # every run's metrics with the run's settings as columns
    settings: list[str]  # the columns of ``results`` that varied between runs


def read_jsonl(path: Path) -> Iterator[dict]:
    """The objects of a JSON-lines file, skipping (with a warning) lines that do not parse: a
    run killed mid-write leaves half a line at the end."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                warnings.warn(f"{path}:{number}: skipped a line that is not complete JSON", stacklevel=2)


def load_run(path: str | Path) -> Run:
    """Everything a run directory holds, as DataFrames. Raises FileNotFoundError only when
    ``path`` is not a run directory at all (neither ``config.toml`` nor ``events.jsonl``)."""
    path = Path(path)
    if not (path / "config.toml").exists() and not (path / "events.jsonl").exists():
        raise FileNotFoundError(f"{path} is not a run directory: it has neither config.toml nor events.jsonl")
    config = tomllib.loads((path / "config.toml").read_text()) if (path / "config.toml").exists() else {}
    raw_events = list(read_jsonl(path / "events.jsonl")) if (path / "events.jsonl").exists() else []
    run_id = next((e["run_id"] for e in raw_events if "run_id" in e), path.name)
    population = _read_json(path / "population.json")
    graph = nx.node_link_graph(population["lineage"], directed=True, edges="edges") if population else nx.DiGraph()
    return Run(
        path=path,
        run_id=run_id,
        config=config,
        events=_events(raw_events, run_id),
        metrics=_metrics(raw_events, run_id),
        episodes=_with_run(_episodes(path), run_id, EPISODE_COLUMNS),
        turns=_with_run(_turns(path), run_id, TURN_COLUMNS),
        strategies=_strategies(raw_events, run_id),
        ratings=_frame([{"run_id": run_id, **r} for r in (population or {}).get("ratings", [])], RATING_COLUMNS),
        rating_history=_rating_history(raw_events, run_id),
        payoffs=_payoffs(path / "payoffs.csv", run_id),
        lineage=_lineage(graph, run_id),
        lineage_graph=graph,
    )


def load_sweep(path: str | Path) -> Sweep:
    """A sweep's results table and its runs. Runs that have not started are in the table (with
    their status) but not in ``runs``; ``metrics`` joins each run's settings onto its metrics so a
    plot can group by matchmaker, population size or seed directly."""
    path = Path(path)
    table = path / "results.parquet"
    if table.exists():
        results = pd.read_parquet(table)
    elif (path / "results.csv").exists():
        results = pd.read_csv(path / "results.csv")
    else:
        raise FileNotFoundError(f"{path} is not a sweep directory: it has no results.parquet or results.csv")
    runs = {}
    for row in results.itertuples(index=False):
        run_dir = _run_dir(path, row._asdict())
        if run_dir is not None and (run_dir / "events.jsonl").exists():
            runs[run_dir.name] = load_run(run_dir)
    settings = varied_settings(results)
    frames = []
    for row in results.to_dict("records"):
        run_dir = _run_dir(path, row)
        if run_dir is not None and run_dir.name in runs:
            frames.append(runs[run_dir.name].metrics.assign(run=run_dir.name, **{s: row[s] for s in settings}))
    metrics = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*METRIC_COLUMNS, "run", *settings])
    return Sweep(path, results, runs, metrics, settings)


# ---- events ------------------------------------------------------------------------------------


def _events(raw: list[dict], run_id: str) -> pd.DataFrame:
    rows = [{k: v for k, v in e.items() if not isinstance(v, (dict, list))} for e in raw]
    frame = _frame(rows, EVENT_COLUMNS)
    frame["run_id"] = frame["run_id"].fillna(run_id)
    return frame


def _metrics(raw: list[dict], run_id: str) -> pd.DataFrame:
    rows = [
        (e.get("run_id", run_id), e.get("iteration"), e.get("kind"), k, float(v))
        for e in raw
        for k, v in e.items()
        if k not in EVENT_COLUMNS and isinstance(v, (int, float)) and not isinstance(v, bool)
    ]
    return pd.DataFrame(rows, columns=METRIC_COLUMNS)


def _strategies(raw: list[dict], run_id: str) -> pd.DataFrame:
    """``kuhn/strategy`` (one policy), ``kuhn/population_strategy`` (the meta-strategy mixture) and
    ``kuhn/<member>/strategy``, long: one row per information set."""
    rows = []
    for e in raw:
        for key, value in e.items():
            match = _STRATEGY_EVENT.match(key)
            if match and isinstance(value, dict):
                player = match["player"] or ("population" if "population_" in key else "policy")
                rows += [(run_id, e.get("iteration"), player, infoset, float(p)) for infoset, p in value.items()]
    return pd.DataFrame(rows, columns=STRATEGY_COLUMNS)


def _rating_history(raw: list[dict], run_id: str) -> pd.DataFrame:
    rows = [
        (run_id, e.get("iteration"), k.removeprefix("elo/"), float(v))
        for e in raw
        for k, v in e.items()
        if k.startswith("elo/") and isinstance(v, (int, float))
    ]
    return pd.DataFrame(rows, columns=RATING_HISTORY_COLUMNS)


# ---- episodes ----------------------------------------------------------------------------------


def _episode_files(path: Path) -> Iterator[tuple[int, Path]]:
    for file in sorted((path / "episodes").glob("iter_*.jsonl")):
        match = _EPISODE_FILE.search(file.name)
        if match:
            yield int(match[1]), file


def _episodes(path: Path) -> list[dict]:
    rows = []
    for iteration, file in _episode_files(path):
        for ep in read_jsonl(file):
            row = {
                "iteration": iteration, "match_id": ep["match_id"], "game": ep["game"], "seed": ep["seed"],
                "turns": len(ep["turns"]), "invalid_turns": sum(not t["valid"] for t in ep["turns"]),
                "truncated": ep.get("truncated", False), "forfeited_by": ep.get("forfeited_by"),
            }  # fmt: skip
            row.update({f"member.{seat}": member for seat, member in ep["members"].items()})
            row.update({f"reward.{seat}": reward for seat, reward in ep["rewards"].items()})
            for key, value in (ep.get("outcome") or {}).items():
                if value is None or isinstance(value, (str, int, float, bool)):
                    row[f"outcome.{key}"] = value
            rows.append(row)
    return rows


def _turns(path: Path) -> list[dict]:
    rows = []
    for iteration, file in _episode_files(path):
        for ep in read_jsonl(file):
            for t in ep["turns"]:
                logprobs = t.get("logprobs") or []
                rows.append({
                    "iteration": iteration, "match_id": ep["match_id"], "game": ep["game"],
                    **{k: t.get(k) for k in TURN_COLUMNS[4:17]},
                    "prompt_tokens": len(t.get("prompt_ids") or []), "response_tokens": len(t.get("completion_ids") or []),
                    "mean_logprob": sum(logprobs) / len(logprobs) if logprobs else float("nan"),
                })  # fmt: skip
    return rows


# ---- population --------------------------------------------------------------------------------


def _payoffs(file: Path, run_id: str) -> pd.DataFrame:
    if not file.exists():
        return pd.DataFrame(columns=PAYOFF_COLUMNS)
    frame = pd.read_csv(file, keep_default_na=False, na_values=[""], dtype={"role_a": str, "role_b": str, "a": str, "b": str})
    return frame.assign(run_id=run_id)[PAYOFF_COLUMNS]


def _lineage(graph: nx.DiGraph, run_id: str) -> pd.DataFrame:
    rows = []
    for node, attrs in graph.nodes(data=True):
        parents = list(graph.predecessors(node))
        parent = parents[0] if parents else None
        rows.append({
            "run_id": run_id, "node": node, "member": attrs.get("member", node.split("@")[0]),
            "kind": attrs.get("kind"), "iteration": attrs.get("iteration"), "parent": parent,
            "change": graph.edges[parent, node].get("change", "") if parent is not None else "",
        })  # fmt: skip
    return _frame(rows, LINEAGE_COLUMNS)


# ---- sweeps ------------------------------------------------------------------------------------


def _run_dir(sweep: Path, row: dict) -> Path | None:
    """Where a results row's run lives: its ``run_dir`` column, relative to the sweep or absolute."""
    value = row.get("run_dir")
    if isinstance(value, str) and value:
        candidate = Path(value) if Path(value).is_absolute() else sweep / value
        if candidate.exists():
            return candidate
    name = row.get("run")
    return sweep / "runs" / name if isinstance(name, str) and name else None  # a sweep moved as a whole


def summary_columns(results: pd.DataFrame, settings: list[str], metrics: int | None = None) -> list[str]:
    """The columns of a results table worth a first look, in order: the run, the ``settings`` that
    varied, its status and last iteration, then the headline metrics (``analysis.headline``'s
    order; ``metrics`` of them at most), those whose final value differs between runs first, so
    the one that tells most is beside the settings."""
    ranked = headline(results.columns)
    moved = [c for c in ranked if results[c].nunique() > 1]
    first = [c for c in ("run", *settings, "status", "iteration") if c in results.columns]
    return first + (moved + [c for c in ranked if c not in moved])[:metrics]


def varied_settings(results: pd.DataFrame) -> list[str]:
    """The settings (``_setting_columns``) that differ between the runs of a results table."""
    return [c for c in _setting_columns(results) if results[c].nunique(dropna=False) > 1]


def _setting_columns(results: pd.DataFrame) -> list[str]:
    """The columns that describe a run rather than measure it (metrics hold a '/')."""
    bookkeeping = ("run", "run_dir", "status", "seconds", "error", "iteration")
    return [c for c in results.columns if "/" not in c and c not in bookkeeping]


# ---- helpers -----------------------------------------------------------------------------------


def _read_json(path: Path) -> dict | None:
    """A JSON file written atomically by the run, or None before the run first writes it."""
    return json.loads(path.read_text()) if path.exists() else None


def _frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    """Rows as a frame that has at least ``columns`` (in that order, first), even when empty."""
    frame = pd.DataFrame(rows)
    for c in columns:
        if c not in frame:
            frame[c] = pd.Series(dtype=object)
    return frame[columns + [c for c in frame.columns if c not in columns]]


def _with_run(rows: list[dict], run_id: str, columns: list[str]) -> pd.DataFrame:
    return _frame([{"run_id": run_id, **r} for r in rows], columns)
