"""``coevo report``: one HTML page for a run or a sweep, readable from disk with no network.

The page is a single file a person can mail or open on an offline cluster node, and it shows model
text, which is untrusted. So: figures are base64 PNG data URIs (their PNG and SVG are also written
beside the page, for papers), styling is one inline ``<style>``, there is no script, and every
string read from the run goes through ``html.escape``. Transcripts are sampled deterministically
from the last iteration, a match with an invalid move first, so two reports of one run agree.

>>> write_report(Path("runs/kuhn_tiny-20261130-041527"))  # doctest: +SKIP
PosixPath('runs/kuhn_tiny-20261130-041527/report/index.html')
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from html import escape
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from analysis.headline import is_headline
from analysis.load import Run, Sweep, load_run, load_sweep, summary_columns
from analysis.plots import run_figures, save_figure, sweep_figures

SAMPLE_SEED = 0  # fixed, so the same run always shows the same transcripts
POPULATION_FACTS = ("size", "matchmaker", "meta_solver", "snapshot_every")  # the rest is in config.toml
WIDE_ASPECT = 2.0  # a figure more than twice as wide as tall gets a whole row of the page

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1d2329; margin: 0 auto;
       max-width: 1200px; padding: 0 24px 48px; }
.kind { margin: 24px 0 0; color: #57606a; } h1 { margin: 0 0 4px; font-size: 26px; }
h2 { margin-top: 36px; border-bottom: 1px solid #d0d7de; }
nav a { margin-right: 16px; } a { color: #0b62c4; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 12px 0; }
dl.facts dt { color: #57606a; } dl.facts dd { margin: 0; white-space: pre-wrap; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(540px, 1fr)); gap: 16px; }
figure { margin: 0; } figure.wide { grid-column: 1 / -1; }
figure img { max-width: 100%; height: auto; border: 1px solid #eaeef2; }
table { border-collapse: collapse; margin: 8px 0; font-size: 14px; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; } table.data th, table.data td { white-space: nowrap; }
pre { margin: 0; white-space: pre-wrap; word-break: break-word; max-height: 16em; overflow: auto;
      font: 13px/1.35 ui-monospace, Menlo, Consolas, monospace; }
.match { border: 1px solid #d0d7de; border-radius: 6px; padding: 4px 16px 12px; margin: 16px 0; }
table.turns { width: 100%; table-layout: fixed; }
table.turns col.index { width: 40px; } table.turns col.who { width: 150px; }
table.turns col.move { width: 130px; } table.turns col.valid { width: 150px; }
tr.invalid { background: #fdecea; } .ok { color: #1a7f37; } .bad { color: #c0392b; font-weight: 600; }
details summary { cursor: pointer; color: #57606a; }
.muted { color: #57606a; }
"""


def write_report(folder: Path, transcripts: int = 3, metric: str | None = None) -> Path:
    """Write ``FOLDER/report/index.html`` (and each figure's PNG and SVG beside it); return its path.

    ``folder`` is a run directory or a sweep directory; ``transcripts`` matches are shown turn by
    turn for a run (a sweep's page links no transcripts: each run has its own report); the
    learning curves show ``metric`` (default: the headline metric that moved). Raises
    FileNotFoundError when ``folder`` is neither, and ``UnknownMetric`` for a metric never
    logged, so the CLI can say so in one line."""
    folder = Path(folder)
    out = folder / "report"
    loaded = _load(folder)
    if isinstance(loaded, Sweep):
        title, sections = loaded.path.name, _sweep_sections(loaded, out, metric)
    else:
        title, sections = loaded.run_id, _run_sections(loaded, out, transcripts, metric)
    out.mkdir(parents=True, exist_ok=True)
    index = out / "index.html"
    partial = out / "index.html.partial"  # write-then-rename: a reader never sees half a page
    partial.write_text(_page(title, sections), encoding="utf-8")
    partial.replace(index)
    return index


def sample_matches(episodes: pd.DataFrame, n: int, seed: int = SAMPLE_SEED) -> pd.DataFrame:
    """``n`` matches of the last iteration, in a fixed order for a given seed: one with an invalid
    move first (the failure a reader most needs to see), then one per game, then the rest shuffled."""
    if episodes.empty or n <= 0:
        return episodes.head(0)
    last = episodes[episodes["iteration"] == episodes["iteration"].max()]
    shuffled = last.sample(frac=1, random_state=seed)
    first_invalid = shuffled[shuffled["invalid_turns"] > 0].head(1)
    one_per_game = shuffled.drop_duplicates("game")
    ordered = pd.concat([first_invalid, one_per_game, shuffled])
    return ordered[~ordered.index.duplicated()].head(n)


def _load(folder: Path) -> Run | Sweep:
    """The sweep or run in ``folder``; a sweep is recognised first because it also holds runs."""
    try:
        return load_sweep(folder)
    except FileNotFoundError:
        pass
    try:
        return load_run(folder)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{folder} is neither a run directory (config.toml, events.jsonl) nor a sweep directory "
            "(results.csv); give the folder coevo train or coevo sweep wrote"
        ) from None


# ---- a run -------------------------------------------------------------------------------------


def _run_sections(run: Run, out: Path, transcripts: int, metric: str | None) -> list[str]:
    matches = sample_matches(run.episodes, transcripts)
    return [
        _header("run", run.run_id, _run_facts(run)),
        _nav(["plots", "metrics"] + (["transcripts"] if transcripts else [])),
        _figures_section(run_figures(run, metric), out),
        _run_metrics_section(run.metrics),
        _transcripts_section(run, matches) if transcripts else "",
    ]


def _run_facts(run: Run) -> list[tuple[str, str]]:
    """The header: what was trained, on what, how far it got and whether it is over."""
    config = run.config
    iterations = pd.to_numeric(run.events.loc[run.events["kind"] == "iteration", "iteration"])
    done = int(iterations.max()) if len(iterations) else 0
    if run.finished:
        status = "finished"
    else:
        status = "not finished: still running, or stopped (killed) before its end event"
    facts = [
        ("games", _games(config)),
        ("model", f"{config.get('model', '?')} ({config.get('mode', '?')} mode)"),
        ("iterations", f"{done} done of {config.get('iterations', '?')} planned"),
        ("status", status),
        ("last event", str(run.events["timestamp"].iloc[-1]) if len(run.events) else "none yet"),
        ("seed", str(config.get("seed", "?"))),
        ("matches per iteration", str(config.get("rollout", {}).get("matches", "?"))),
        ("advantage", str(config.get("advantage", {}).get("estimator", "?"))),
    ]
    if "population" in config:
        population = config["population"]
        shown = [f"{key} {population[key]}" for key in POPULATION_FACTS if key in population]
        facts.append(("population", ", ".join(shown)))
    if "roles" in config:
        players = {role: spec.get("player", config.get("model", "?")) for role, spec in config["roles"].items()}
        facts.append(("roles", ", ".join(f"{role}: {player}" for role, player in players.items())))
    return facts


def _run_metrics_section(metrics: pd.DataFrame) -> str:
    if metrics.empty:
        return '<section id="metrics"><h2>Metrics</h2><p class="muted">No metrics logged yet.</p></section>'
    summary = (
        metrics.groupby("metric", sort=True)
        .agg(first=("value", "first"), final=("value", "last"), iteration=("iteration", "last"))
        .reset_index()
    )
    headline = summary[summary["metric"].map(is_headline)]  # the rest is one click away, under "all metrics"
    return (
        '<section id="metrics"><h2>Metrics</h2>'
        '<p class="muted">First and final logged value of each metric; "iteration" is where the final one was '
        "logged.</p>"
        f"{_table(headline)}"
        f"<details><summary>all metrics ({len(summary)})</summary>{_table(summary)}</details></section>"
    )


# ---- transcripts -------------------------------------------------------------------------------


def _transcripts_section(run: Run, matches: pd.DataFrame) -> str:
    if matches.empty:
        return '<section id="transcripts"><h2>Transcripts</h2><p class="muted">No matches recorded yet.</p></section>'
    iteration = matches["iteration"].iloc[0]
    intro = (
        f'<p class="muted">{len(matches)} of the {int((run.episodes["iteration"] == iteration).sum())} matches of '
        f"iteration {int(iteration)}, sampled with seed {SAMPLE_SEED} (a match with an invalid move first, when "
        "there is one).</p>"
    )
    rendered = [_match(row, _turns_of(run.turns, row)) for _, row in matches.iterrows()]
    return f'<section id="transcripts"><h2>Transcripts</h2>{intro}{"".join(rendered)}</section>'


def _turns_of(turns: pd.DataFrame, match: pd.Series) -> pd.DataFrame:
    return turns[(turns["iteration"] == match["iteration"]) & (turns["match_id"] == match["match_id"])]


def _match(match: pd.Series, turns: pd.DataFrame) -> str:
    """One match: who sat where, every turn as the seat saw and played it, then rewards and outcome."""
    if _given(match["forfeited_by"]):
        ending = f"forfeited by {match['forfeited_by']}"
    else:
        ending = "truncated (draw)" if match["truncated"] else "played out"
    title = f"{match['match_id']} · {match['game']} · iteration {int(match['iteration'])} · seed {match['seed']}"
    facts = [("turns", f"{match['turns']} ({match['invalid_turns']} invalid)"), ("ending", ending)]
    rows = "".join(_turn(turn) for _, turn in turns.iterrows())
    return (
        f'<article class="match" id="match-{escape(str(match["match_id"]))}"><h3>{escape(title)}</h3>{_facts(facts)}'
        '<div class="scroll"><table class="turns"><colgroup><col class="index"><col class="who">'
        '<col><col><col class="move"><col class="valid"></colgroup>'
        "<tr><th>#</th><th>who</th><th>what the seat saw</th><th>what it wrote</th><th>move</th>"
        f"<th>valid</th></tr>{rows}</table></div>"
        f"<h4>Rewards</h4>{_table(_rewards(match))}{_outcome(match)}</article>"
    )


def _turn(turn: pd.Series) -> str:
    if turn["valid"]:
        verdict = '<span class="ok">valid</span>'
    else:
        verdict = f'<span class="bad">invalid</span> {escape(str(turn["reason"]))}'
        if _given(turn["action"]):
            verdict += f"<br>played a random legal move instead: <code>{escape(str(turn['action']))}</code>"
    if _given(turn["penalty"]) and turn["penalty"]:
        verdict += f"<br>penalty {turn['penalty']:+g}"
    move = _pre(turn["move"]) if _given(turn["move"]) else "—"
    return (
        f'<tr class="turn{"" if turn["valid"] else " invalid"}"><td class="num">{int(turn["index"]) + 1}</td>'
        f"<td>{_who(turn)}</td><td>{_observation(turn['observation'])}</td>"
        f"<td>{_pre(turn['text'])}</td><td>{move}</td><td>{verdict}</td></tr>"
    )


def _who(turn: pd.Series) -> str:
    """The seat, then what else tells turns apart: role (when not the seat's name), member, step, retry."""
    labelled = {
        "role": turn["role"] if turn["role"] != turn["seat"] else None, "member": turn["member"],
        "step": turn["tag"], "retry": turn["attempt"] or None,
    }  # fmt: skip
    lines = [f'<span class="muted">{label}</span> {escape(str(v))}' for label, v in labelled.items() if _given(v)]
    return "<br>".join([f"<b>{escape(str(turn['seat']))}</b>", *lines])


def _observation(observation: str) -> str:
    """The game state in view; a rules paragraph before it (the same every turn) folds away."""
    rules, paragraph, state = observation.partition("\n\n")
    if not paragraph:  # one paragraph: all of it is state
        rules, state = "", observation
    folded = f"<details><summary>rules</summary>{_pre(rules)}</details>" if rules else ""
    return f"{folded}{_pre(state)}"


def _pre(text: object) -> str:
    # HTML drops one newline right after <pre>; giving it one to drop keeps the text's own leading newline.
    return f"<pre>\n{escape(str(text))}</pre>"


def _rewards(match: pd.Series) -> pd.DataFrame:
    seats = [c.removeprefix("reward.") for c in match.index if c.startswith("reward.") and pd.notna(match[c])]
    members = [match.get(f"member.{s}") for s in seats]
    return pd.DataFrame({"seat": seats, "member": members, "reward": [match[f"reward.{s}"] for s in seats]})


def _outcome(match: pd.Series) -> str:
    """Task forge's outcome fields (task, reference answer, p̂, majority…), where the game has one."""
    fields = [
        (c.removeprefix("outcome."), str(match[c]))
        for c in match.index
        if c.startswith("outcome.") and pd.notna(match[c])
    ]
    return f"<h4>Outcome</h4>{_facts(fields)}" if fields else ""


# ---- a sweep -----------------------------------------------------------------------------------


def _sweep_sections(sweep: Sweep, out: Path, metric: str | None) -> list[str]:
    return [
        _header("sweep", sweep.path.name, _sweep_facts(sweep)),
        _nav(["plots", "results"]),
        _figures_section(sweep_figures(sweep, metric), out),
        _results_section(sweep),
    ]


def _sweep_facts(sweep: Sweep) -> list[tuple[str, str]]:
    configs = [run.config for run in sweep.runs.values()]
    status = sweep.results["status"].value_counts()
    return [
        ("runs", f"{len(sweep.results)} ({', '.join(f'{n} {s}' for s, n in status.items())})"),
        ("varied", ", ".join(sweep.settings) or "nothing"),
        ("games", _distinct(_games(c) for c in configs)),
        ("model", _distinct(str(c.get("model", "?")) for c in configs)),
        ("iterations planned", _distinct(str(c.get("iterations", "?")) for c in configs)),
        ("finished", f"{sum(run.finished for run in sweep.runs.values())} of {len(sweep.results)} runs"),
    ]


def _results_section(sweep: Sweep) -> str:
    """The results table: each run's settings and final headline metrics; the full table folds away."""
    results = sweep.results
    return (
        '<section id="results"><h2>Results</h2><p class="muted">One row per run: the settings that varied and '
        "each run's final headline metrics, those that differ between runs first.</p>"
        f'<div class="scroll">{_table(results[summary_columns(results, sweep.settings)])}</div>'
        f'<details><summary>every column ({len(results.columns)})</summary><div class="scroll">{_table(results)}</div>'
        "</details></section>"
    )


# ---- shared pieces -----------------------------------------------------------------------------


def _page(title: str, sections: list[str]) -> str:
    # The data-URI icon stops a browser from asking for /favicon.ico, a failed load when the folder is
    # served over HTTP (python -m http.server) rather than opened from disk.
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><title>coevo report: {escape(title)}</title><style>{STYLE}</style></head>'
        f"<body>{''.join(sections)}</body></html>\n"
    )


def _header(kind: str, name: str, facts: list[tuple[str, str]]) -> str:
    return f'<header><p class="kind">coevo {kind} report</p><h1>{escape(name)}</h1>{_facts(facts)}</header>'


def _nav(anchors: list[str]) -> str:
    links = "".join(f'<a href="#{a}">{a}</a>' for a in anchors)
    return f"<nav>{links}</nav>"


def _figures_section(figures: dict[str, Figure], out: Path) -> str:
    """Each figure saved as PNG and SVG under ``out`` and embedded as a PNG data URI; a wide one
    (panels side by side) takes a whole row, or its panels would be too small to read."""
    if not figures:
        return '<section id="plots"><h2>Plots</h2><p class="muted">Nothing to plot yet.</p></section>'
    rendered = []
    for slug, fig in figures.items():
        png = next(p for p in save_figure(fig, out / slug) if p.suffix == ".png")
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        rendered.append(
            f'<figure id="fig-{escape(slug)}"{_wide(fig)}><img src="data:image/png;base64,{data}" '
            f'alt="{escape(slug)}"></figure>'
        )
    return f'<section id="plots"><h2>Plots</h2><div class="figures">{"".join(rendered)}</div></section>'


def _wide(fig: Figure) -> str:
    width, height = fig.get_size_inches()
    return ' class="wide"' if width > WIDE_ASPECT * height else ""


def _facts(facts: list[tuple[str, str]]) -> str:
    items = "".join(f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>" for label, value in facts)
    return f'<dl class="facts">{items}</dl>'


def _table(frame: pd.DataFrame) -> str:
    """A frame as an HTML table; pandas escapes every cell and header."""
    return frame.to_html(
        index=False, escape=True, na_rep="—", float_format=lambda v: f"{v:.4g}", border=0, classes="data"
    )


def _games(config: dict) -> str:
    games = config.get("games", {})
    if len(games) == 1:
        return next(iter(games))
    return ", ".join(f"{game} (weight {weight:g})" for game, weight in games.items()) or "?"


def _given(value) -> bool:
    """Whether a cell holds something to show: not None, NaN or an empty string."""
    return bool(pd.notna(value)) and value != ""


def _distinct(values: Iterable[str]) -> str:
    return ", ".join(dict.fromkeys(values)) or "?"
