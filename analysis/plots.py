"""Figures of a run or a sweep, drawn from the tidy frames of ``analysis.load``.

Every plot is a function that returns a ``matplotlib.figure.Figure`` built without pyplot, so no
global figure state leaks between calls and nothing needs closing. Where a plot rests on some
maths (bands across seeds, win rates summed over seatings, the Nash mixture of the meta-game, the
range of Kuhn's equilibrium family, opening-move shares, final values per setting), a separate
function computes it as a DataFrame, so the tests can check the numbers rather than the pixels.

A plot given no data for it raises :class:`NoData`; ``run_figures`` and ``sweep_figures`` collect
every plot that has data (the HTML report uses them) and ``save_figure`` writes PNG and SVG.

>>> figures = run_figures(load_run("runs/kuhn_tiny-20261130-041527"))   # doctest: +SKIP
>>> save_figure(figures["kuhn_strategy"], Path("report/kuhn_strategy"))  # doctest: +SKIP
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from analysis.headline import headline
from analysis.load import Run, Sweep
from games.kuhn import CARDS
from games.kuhn_analysis import INFOSETS, THIRD, nash
from games.task_forge.families import AGENT0_BAND
from populations.metagame import meta_strategy
from roles.graph import GraphSpec, builtin

# The metric a learning curve shows by default: the first of these that the run or sweep logged.
OUTCOME_COLORS = {"win": "tab:green", "draw": "tab:gray", "loss": "tab:red"}
COLLAPSE_SIGNALS = {
    "response_tokens": "response length (tokens)",
    "invalid_rate": "invalid-move rate",
    "grad_norm": "gradient norm",
}
# Kuhn's 12 information sets, grouped by the decision they are: (history after the card, title)
KUHN_DECISIONS = (
    ("", "first player bets (J: bluff, K: value)"),
    ("c", "second player bets after a check"),
    ("b", "second player calls a bet"),
    ("cb", "first player calls after check-bet"),
)
CURRICULUM_METRICS = {
    "forge/difficulty": "proposed difficulty",
    "forge/p_hat": "executor success p̂ (mean)",
    "eval/executor/heldout_accuracy": "held-out accuracy",
}

_OUTCOME_METRIC = re.compile(r"^eval/(?P<game>[^/]+)/(?P<opponent>[^/]+)/(?P<result>win|draw|loss)$")
_COLLAPSE_METRIC = re.compile(rf"^(?P<series>.+)/(?P<signal>{'|'.join(COLLAPSE_SIGNALS)})$")
_SNAPSHOT = re.compile(r"^(?P<member>.+)@(?P<iteration>\d+)$")


class NoData(ValueError):
    """The frame a plot needs is empty for this run: the plot is left out, not drawn empty."""


# ---- output ------------------------------------------------------------------------------------


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """Write ``<stem>.png`` (for the HTML report) and ``<stem>.svg`` (for papers); return both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_name(stem.name + ".png"), stem.with_name(stem.name + ".svg")]
    for path in paths:
        fig.savefig(path, dpi=120)
    return paths


def run_figures(run: Run, metric: str | None = None) -> dict[str, Figure]:
    """Every plot that has data for ``run``, keyed by a short slug; plots without data are left
    out. The learning curves show ``metric``, or the headline metric that moved (``headline_metric``)."""
    plots: dict[str, Callable[[], Figure]] = {
        "learning_curves": lambda: learning_curves(run.metrics, headline_metric(run.metrics, metric)),
        "outcomes": lambda: outcomes_vs_opponents(run.metrics),
        "ratings": lambda: rating_trajectories(run.rating_history),
        "payoffs": lambda: payoff_heatmap(run.payoffs),
        "kuhn_strategy": lambda: kuhn_strategy(run.strategies),
        "opening_moves": lambda: opening_moves(run.turns),
        "collapse": lambda: collapse_signals(run.metrics),
        "curriculum": lambda: curriculum(run.metrics, run.episodes),
        "lineage": lambda: lineage(run.lineage_graph),
        "graph": lambda: graph_nodes(graph_of(run.config), run.metrics),
    }
    return _drawn(plots)


def sweep_figures(sweep: Sweep, metric: str | None = None) -> dict[str, Figure]:
    """The sweep's learning curves grouped by its settings, and its final values per setting, of
    ``metric`` or the headline metric that moved."""
    groups = [s for s in sweep.settings if s != "seed"]
    plots: dict[str, Callable[[], Figure]] = {
        "learning_curves": lambda: learning_curves(sweep.metrics, headline_metric(sweep.metrics, metric), groups or None),
        "comparison": lambda: sweep_comparison(
            sweep.metrics, headline_metric(sweep.metrics, metric), *_comparison_axes(groups)
        ),
    }
    return _drawn(plots)


def _drawn(plots: dict[str, Callable[[], Figure]]) -> dict[str, Figure]:
    figures = {}
    for slug, plot in plots.items():
        try:
            figures[slug] = plot()
        except NoData:
            continue
    return figures


def _comparison_axes(groups: list[str]) -> tuple[str, str | None]:
    """x axis and colour for the sweep comparison: the first two settings that vary besides the seed."""
    if not groups:
        raise NoData("the sweep varies no setting but the seed: nothing to compare")
    return groups[0], (groups[1] if len(groups) > 1 else None)


# ---- learning curves ---------------------------------------------------------------------------


def headline_metric(metrics: pd.DataFrame, metric: str | None = None) -> str:
    """The metric the learning curves show: ``metric`` when given, else the most telling headline
    metric (``analysis.headline``'s order) whose value moved — a forced-choice game's invalid rate
    is 0 throughout and says nothing — or, if none moved, the most telling one."""
    spread = metrics.groupby("metric")["value"].nunique()  # (metrics,): distinct values logged
    if metric is not None:
        if metric not in spread.index:
            raise UnknownMetric(f"no metric {metric!r} was logged; its headline metrics are {', '.join(headline(spread.index))}")
        return metric
    ranked = headline(spread.index)
    if not ranked:
        raise NoData("no headline metric was logged")
    return next((name for name in ranked if spread[name] > 1), ranked[0])


class UnknownMetric(ValueError):
    """A metric asked for by name that the run or sweep never logged."""


def metric_bands(metrics: pd.DataFrame, metric: str, by: str | Sequence[str] | None = None) -> pd.DataFrame:
    """Per group and iteration: the mean of ``metric`` over runs, its min and max, and the number of runs.

    Each run is first reduced to one value per iteration (its mean, should it log the metric twice
    in one iteration), so a run counts once. Min-max rather than ±std: with the two or three seeds a
    sweep usually has, the band then shows every seed rather than an estimate of their spread.
    """
    by = [by] if isinstance(by, str) else list(by or [])
    rows = metrics[metrics["metric"] == metric].dropna(subset=["iteration", "value"])
    if rows.empty:
        raise NoData(f"no values of {metric!r}")
    per_run = rows.groupby([*by, "run_id", "iteration"], dropna=False)["value"].mean().reset_index()
    bands = per_run.groupby([*by, "iteration"], dropna=False)["value"].agg(
        mean="mean", lo="min", hi="max", runs="count"
    )
    bands = bands.reset_index()
    bands["group"] = [_group_label(by, values) for values in bands[by].itertuples(index=False)] if by else "all"
    return bands[["group", "iteration", "mean", "lo", "hi", "runs"]]


def _group_label(settings: list[str], values: tuple) -> str:
    """``matchmaker=psro, size=2``: each setting by the last part of its dotted name."""
    return ", ".join(f"{s.rsplit('.', 1)[-1]}={v}" for s, v in zip(settings, values, strict=True))


def learning_curves(metrics: pd.DataFrame, metric: str, by: str | Sequence[str] | None = None) -> Figure:
    """``metric`` over iterations: one line per group (of a sweep's settings ``by``), the mean over its
    runs, with a min-max band where a group has more than one run (seeds), its legend saying so."""
    bands = metric_bands(metrics, metric, by)
    fig, ax = _single(f"learning curve: {metric}")
    banded = False
    for group, curve in bands.groupby("group", sort=False):
        (line,) = ax.plot(curve["iteration"], curve["mean"], marker=".", label=group if by else "mean")
        if (curve["runs"] > 1).any():
            band = f"{group + ': ' if by else ''}min–max over {curve['runs'].max()} runs (seeds)"
            ax.fill_between(curve["iteration"], curve["lo"], curve["hi"], color=line.get_color(), alpha=0.2, label=band)
            banded = True
    ax.set(xlabel="iteration", ylabel=metric)
    _iteration_range(ax, bands["iteration"])
    if banded or bands["group"].nunique() > 1:
        ax.legend(fontsize="small")
    return fig


# ---- outcomes against fixed opponents ----------------------------------------------------------


def opponent_outcomes(metrics: pd.DataFrame) -> pd.DataFrame:
    """Win, draw and loss rates against each fixed evaluation opponent, per game and iteration,
    from ``eval/<game>/<opponent>/{win,draw,loss}``."""
    parts = metrics["metric"].str.extract(_OUTCOME_METRIC)
    rows = pd.concat([metrics[["iteration", "value"]], parts], axis=1).dropna(subset=["result"])
    if rows.empty:
        raise NoData("no eval/<game>/<opponent>/{win,draw,loss} metrics")
    table = rows.pivot_table(index=["game", "opponent", "iteration"], columns="result", values="value")
    return table.reindex(columns=list(OUTCOME_COLORS), fill_value=0.0).reset_index().rename_axis(columns=None)


def outcomes_vs_opponents(metrics: pd.DataFrame) -> Figure:
    """One panel per (game, opponent): win, draw and loss shares at each evaluation, as stacked bars
    (bars rather than areas: evaluations may be few and far between)."""
    outcomes = opponent_outcomes(metrics)
    panels = list(outcomes.groupby(["game", "opponent"], sort=True))
    fig, axes = _grid("outcomes against fixed opponents", len(panels), sharey=True)
    for ax, ((game, opponent), rows) in zip(axes, panels, strict=True):
        width = 0.8 * (np.diff(rows["iteration"]).min() if len(rows) > 1 else 1)
        bottom = np.zeros(len(rows))
        for result, color in OUTCOME_COLORS.items():
            ax.bar(rows["iteration"], rows[result], width, bottom=bottom, color=color, label=result)
            bottom += rows[result].to_numpy()
        ax.set(title=f"{game} vs {opponent}", xlabel="iteration", ylim=(0, 1))
        _iteration_range(ax, rows["iteration"])
    axes[0].set_ylabel("share of matches")
    axes[0].legend(loc="lower left", fontsize="small")
    return fig


# ---- ratings -----------------------------------------------------------------------------------


def rating_trajectories(rating_history: pd.DataFrame) -> Figure:
    """Each member's online Elo over iterations."""
    if rating_history.empty:
        raise NoData("no rating history: not a population run")
    fig, ax = _single("Elo rating per member")
    for player in sorted(rating_history["player"].unique(), key=_player_order):
        rows = rating_history[rating_history["player"] == player].sort_values("iteration")
        ax.plot(rows["iteration"], rows["elo"], marker=".", label=player)
    ax.set(xlabel="iteration", ylabel="Elo")
    ax.legend(fontsize="small")
    return fig


def _player_order(name: str) -> tuple[str, float]:
    """Members with their snapshots in iteration order, the live member (no ``@``) last."""
    match = _SNAPSHOT.match(name)
    return (match["member"], int(match["iteration"])) if match else (name, float("inf"))


# ---- payoffs and the meta-game's Nash mixture --------------------------------------------------


def win_rate_matrix(payoffs: pd.DataFrame) -> pd.DataFrame:
    """Win rate (draws count ½) of the row player against the column player, summed over every
    pair of seats they met in; NaN where they never met. Rows and columns are the same players:
    each member's snapshots in iteration order, then the member itself.

    ``payoffs.csv`` holds every match twice, once from each side ((a, b, role_a, role_b) and
    (b, a, role_b, role_a)), so the cells where ``a`` is the row already count all of its games.
    """
    if payoffs.empty:
        raise NoData("no payoff table: not a population run")
    scored = payoffs.assign(score=payoffs["wins"] + 0.5 * payoffs["draws"])
    score = scored.groupby(["a", "b"])[["score", "games"]].sum()
    rates = (score["score"] / score["games"].where(score["games"] > 0)).unstack("b")
    players = sorted(set(rates.index) | set(rates.columns), key=_player_order)
    return rates.reindex(index=players, columns=players).rename_axis(index="player", columns="opponent")


def nash_mixture(win_rates: pd.DataFrame) -> pd.Series:
    """A Nash equilibrium of the meta-game, from the project's LP solver on the antisymmetrised win
    rates ``(W - Wᵀ)/2`` (``populations.metagame.meta_strategy("nash", ...)``; unplayed pairs are draws)."""
    mixture = meta_strategy("nash", win_rates.to_numpy(dtype=float))
    return pd.Series(mixture, index=win_rates.index, name="nash")


def payoff_heatmap(payoffs: pd.DataFrame) -> Figure:
    """Win rate of row against column player as a heatmap, with the Nash mixture over the rows beside it."""
    rates = win_rate_matrix(payoffs)
    mixture = nash_mixture(rates)
    n = len(rates)
    fig = Figure(figsize=(4 + 0.45 * n, 2 + 0.4 * n), layout="constrained")
    heat, bars = fig.subplots(1, 2, gridspec_kw={"width_ratios": [4, 1]}, sharey=True)
    values = rates.to_numpy(dtype=float)
    image = heat.imshow(values, cmap="RdBu", vmin=0, vmax=1)
    heat.set(xticks=range(n), yticks=range(n), xlabel="opponent", ylabel="player")
    heat.set_xticklabels(rates.columns, rotation=90)
    heat.set_yticklabels(rates.index)
    if n <= 12:  # beyond that the numbers no longer fit in their cells
        games = payoffs.groupby(["a", "b"])["games"].sum().unstack("b").reindex(index=rates.index, columns=rates.columns)
        _annotate(heat, values, games.to_numpy(dtype=float))
    fig.colorbar(image, ax=heat, label="win rate", location="bottom", shrink=0.6)
    bars.barh(range(n), mixture.to_numpy(), color="tab:purple")
    bars.set(xlim=(0, 1), xlabel="Nash mixture", title="meta-game Nash")
    fig.suptitle("payoffs: win rate of player vs opponent (in each cell: the rate, and games played)")
    return fig


def _annotate(ax: Axes, values: np.ndarray, games: np.ndarray) -> None:
    """Write each finite cell's value and the games behind it in the cell, white on the dark ends
    of the colour map: a rate of 1.00 from 2 games and one from 200 look alike otherwise."""
    for (i, j), value in np.ndenumerate(values):
        if np.isfinite(value):
            ink = "white" if abs(value - 0.5) > 0.3 else "black"
            ax.text(j, i, f"{value:.2f}\n{games[i, j]:.0f}", ha="center", va="center", fontsize="xx-small", color=ink)


# ---- Kuhn strategy against the equilibrium family ----------------------------------------------


def kuhn_equilibrium_range() -> pd.DataFrame:
    """For each information set, the lowest and highest probability of betting or calling there
    over Kuhn's equilibrium family nash(α), α ∈ [0, 1/3].

    Every probability in nash(α) is affine in α (α, 3α, α + 1/3 or a constant), so its range over
    the interval is spanned exactly by the two ends.
    """
    ends = (nash(Fraction(0)), nash(THIRD))
    rows = [(k, float(min(e[k] for e in ends)), float(max(e[k] for e in ends))) for k in INFOSETS]
    return pd.DataFrame(rows, columns=["infoset", "low", "high"]).set_index("infoset")


def kuhn_strategy(strategies: pd.DataFrame, trajectory: bool = True) -> Figure:
    """One panel per kind of decision, one column per card: the equilibrium family's range (grey),
    each player's learned probability at the latest iteration (large dot) and, with ``trajectory``,
    at the earlier ones (small dots, fainter the older)."""
    if strategies.empty:
        raise NoData("no Kuhn strategies were logged")
    equilibrium = kuhn_equilibrium_range()
    players = sorted(strategies["player"].unique())
    fig, axes = _grid("Kuhn strategy vs the equilibrium family nash(α), α ∈ [0, 1/3]", len(KUHN_DECISIONS),
                      sharey=True)  # fmt: skip
    for ax, (history, title) in zip(axes, KUHN_DECISIONS, strict=True):
        infosets = [card + history for card in CARDS]
        _equilibrium_bars(ax, equilibrium.loc[infosets])
        for p, player in enumerate(players):
            _learned_points(ax, strategies, player, infosets, offset=0.15 * (p - (len(players) - 1) / 2),
                            color=f"C{p}", trajectory=trajectory)  # fmt: skip
        ax.set(title=title, xticks=range(len(CARDS)), xticklabels=infosets, ylim=(-0.05, 1.05))
    axes[0].set_ylabel("P(bet or call)")
    axes[0].legend(fontsize="small")
    return fig


def _equilibrium_bars(ax: Axes, equilibrium: pd.DataFrame) -> None:
    """The family's range as a grey bar, and its ends as lines so a single value stays visible."""
    x = np.arange(len(equilibrium))
    ax.bar(x, equilibrium["high"] - equilibrium["low"], bottom=equilibrium["low"], width=0.6, color="0.85",
           label="equilibria")  # fmt: skip
    ax.hlines([*equilibrium["low"], *equilibrium["high"]], [*x - 0.3] * 2, [*x + 0.3] * 2, colors="0.4", lw=1)


def _learned_points(ax: Axes, strategies: pd.DataFrame, player: str, infosets: list[str], offset: float,
                    color: str, trajectory: bool) -> None:  # fmt: skip
    rows = strategies[(strategies["player"] == player) & strategies["infoset"].isin(infosets)]
    table = rows.pivot_table(index="iteration", columns="infoset", values="probability").reindex(columns=infosets)
    x = np.arange(len(infosets)) + offset
    if trajectory and len(table) > 1:
        for age, (_, past) in enumerate(table.iloc[:-1].iterrows(), 1):
            ax.scatter(x, past, s=8, color=color, alpha=0.15 + 0.45 * age / len(table), lw=0)
    ax.scatter(x, table.iloc[-1], s=40, color=color, zorder=3, label=f"{player} (iteration {table.index[-1]})")


# ---- tic-tac-toe openings ----------------------------------------------------------------------


def opening_move_shares(turns: pd.DataFrame, game: str = "tictactoe") -> pd.DataFrame:
    """Share of each first move per iteration (rows iterations, columns moves, rows sum to 1): the
    first valid move of each match of ``game``, retries of invalid moves skipped. A match forfeited
    before any valid move has no opening and is left out (the invalid-move rate shows it)."""
    valid = turns[(turns["game"] == game) & turns["valid"].fillna(False).astype(bool)]
    if valid.empty:
        raise NoData(f"no valid {game} moves")
    first = valid.sort_values("index").groupby(["iteration", "match_id"], sort=False).head(1)
    counts = pd.crosstab(first["iteration"], first["move"])
    return counts.div(counts.sum(axis=1), axis=0).rename_axis(index="iteration", columns="move")


def opening_moves(turns: pd.DataFrame, game: str = "tictactoe") -> Figure:
    """Heatmap of the opening-move shares: which cells the first player opens with, over training."""
    shares = opening_move_shares(turns, game)
    fig, ax = _single(f"{game}: opening move over training")
    image = ax.imshow(shares.T.to_numpy(), aspect="auto", cmap="viridis", vmin=0, interpolation="nearest")
    ticks = range(0, len(shares), max(1, len(shares) // 15))  # at most ~15 iteration labels
    ax.set(xticks=ticks, yticks=range(len(shares.columns)), xlabel="iteration", ylabel="opening move")
    ax.set_xticklabels(shares.index[list(ticks)])
    ax.set_yticklabels(shares.columns)
    fig.colorbar(image, ax=ax, label="share of matches")
    return fig


# ---- collapse signals --------------------------------------------------------------------------


def collapse_series(metrics: pd.DataFrame) -> pd.DataFrame:
    """The signals of a collapsing policy, long: signal (a key of ``COLLAPSE_SIGNALS``), series (what
    the metric is of: ``kuhn_poker/player_0``, ``m0/policy``, ``executor``), iteration, value."""
    parts = metrics["metric"].str.extract(_COLLAPSE_METRIC)
    rows = pd.concat([metrics[["iteration", "value"]], parts], axis=1).dropna(subset=["signal", "iteration"])
    if rows.empty:
        raise NoData("no response_tokens, invalid_rate or grad_norm metrics")
    return rows.groupby(["signal", "series", "iteration"])["value"].mean().reset_index()


def collapse_signals(metrics: pd.DataFrame) -> Figure:
    """Response length, invalid-move rate and gradient norm over iterations, a line per seat or member."""
    series = collapse_series(metrics)
    signals = [s for s in COLLAPSE_SIGNALS if s in set(series["signal"])]
    fig, axes = _grid("collapse signals", len(signals))
    for ax, signal in zip(axes, signals, strict=False):
        for name, rows in series[series["signal"] == signal].groupby("series"):
            ax.plot(rows["iteration"], rows["value"], marker=".", label=name)
        ax.set(title=COLLAPSE_SIGNALS[signal], xlabel="iteration")
        ax.legend(fontsize="x-small")
    return fig


# ---- curriculum --------------------------------------------------------------------------------


def curriculum(metrics: pd.DataFrame, episodes: pd.DataFrame) -> Figure:
    """Task difficulty against the executor's success over iterations, the band of p̂ it learns from
    shaded, and each task's p̂ as a (jittered) point."""
    shown = metrics[metrics["metric"].isin(CURRICULUM_METRICS)]
    if shown.empty:
        raise NoData(f"none of {list(CURRICULUM_METRICS)} was logged: not a task-forge run")
    fig, ax = _single("curriculum: difficulty against executor success")
    ax.axhspan(*AGENT0_BAND, color="tab:green", alpha=0.1, label=f"learning band {AGENT0_BAND}")
    if "outcome.p_hat" in episodes:
        tasks = episodes.dropna(subset=["outcome.p_hat"])
        jitter = np.random.default_rng(0).uniform(-0.2, 0.2, len(tasks))
        ax.scatter(tasks["iteration"] + jitter, tasks["outcome.p_hat"], s=6, color="0.5", alpha=0.3, lw=0,
                   label="p̂ per task")  # fmt: skip
    for metric, label in CURRICULUM_METRICS.items():
        rows = shown[shown["metric"] == metric].sort_values("iteration")
        if not rows.empty:
            ax.plot(rows["iteration"], rows["value"], marker="o", label=label)
    ax.set(xlabel="iteration", ylim=(-0.05, 1.05))
    ax.legend(fontsize="small")
    return fig


# ---- lineage -----------------------------------------------------------------------------------


def lineage_layout(graph: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """(x, y) per node: x the snapshot's iteration, y its member's row (``lineage_members`` order).
    A live member's head (a node without a ``member`` attribute, named as the member) sits one step
    right of the last iteration in the graph: it is the member as it is now."""
    members = lineage_members(graph)
    now = _now(graph)
    return {
        node: (float(attrs["iteration"] if "member" in attrs else now), float(members.index(_node_member(graph, node))))
        for node, attrs in graph.nodes(data=True)
    }


def lineage_members(graph: nx.DiGraph) -> list[str]:
    """The members of the lineage, one row each, in natural order."""
    if graph.number_of_nodes() == 0:
        raise NoData("no lineage: not a population run")
    return sorted({_node_member(graph, n) for n in graph}, key=_player_order)


def _now(graph: nx.DiGraph) -> int:
    """The x of live heads: one after the last iteration any node or edge records."""
    nodes = [a.get("iteration", 0) for _, a in graph.nodes(data=True)]
    edges = [a.get("iteration", 0) for _, _, a in graph.edges(data=True)]
    return max(nodes + edges) + 1


def _node_member(graph: nx.DiGraph, node: str) -> str:
    return graph.nodes[node].get("member", node)


def _change_kind(change: str) -> str:
    """``pbt: copied m0, lr ×1.2`` → ``pbt``: what colours an edge."""
    return change.split(":", 1)[0].strip() or "?"


def lineage(graph: nx.DiGraph) -> Figure:
    """The population's family tree by iteration, a row per member, edges coloured by the kind of
    change; changes other than plain snapshots are also written on their edge."""
    positions = lineage_layout(graph)
    members = lineage_members(graph)
    kind = {(u, v): _change_kind(a.get("change", "")) for u, v, a in graph.edges(data=True)}
    colors = {k: f"C{i}" for i, k in enumerate(sorted(set(kind.values())))}
    fig, ax = _single("population lineage", size=(8, 1.5 + 0.6 * len(members)))
    nx.draw_networkx_edges(graph, positions, edgelist=list(kind), edge_color=[colors[k] for k in kind.values()],
                           ax=ax, node_size=700)  # fmt: skip
    nx.draw_networkx_nodes(graph, positions, ax=ax, node_size=700, node_color="white", edgecolors="0.3")
    nx.draw_networkx_labels(graph, positions, ax=ax, font_size=6)
    notes = {e: graph.edges[e]["change"] for e, k in kind.items() if k not in ("snapshot", "continues")}
    nx.draw_networkx_edge_labels(graph, positions, edge_labels=notes, ax=ax, font_size=6)
    now = _now(graph)
    ticks = sorted({x for x, _ in positions.values()})
    ax.set(xlabel="iteration", xticks=ticks, yticks=range(len(members)), ylim=(-0.5, len(members) - 0.5))
    ax.set_xticklabels(["now" if t == now else f"{t:g}" for t in ticks])
    ax.set_yticklabels(members)
    ax.tick_params(left=True, bottom=True, labelleft=True, labelbottom=True)
    ax.legend(handles=[Line2D([], [], color=c, label=k) for k, c in colors.items()], fontsize="small", loc="upper left",
              bbox_to_anchor=(1, 1))  # fmt: skip
    return fig


# ---- orchestration graphs ----------------------------------------------------------------------

NODE_METRICS = {"value": "value", "invalid_rate": "invalid", "response_tokens": "tokens", "python_runs": "runs"}  # graph_metrics' names
NODE_SIZE = 3600  # room for a node's name and its metrics


def graph_of(config: dict) -> tuple[str, GraphSpec]:
    """The game and spec of the graph a run played (its config's ``graph``, or a ``graph/<built-in>`` game)."""
    graph = config.get("graph")
    if isinstance(graph, dict):
        return "graph/custom", GraphSpec.model_validate(graph)
    name = graph or next((g.removeprefix("graph/") for g in config.get("games", {}) if g.startswith("graph/")), None)
    if name is None:
        raise NoData("not a run of an orchestration graph")
    return f"graph/{name}", builtin(name)


def node_metrics(metrics: pd.DataFrame, nodes: Sequence[str]) -> pd.DataFrame:
    """Per node (rows), the last iteration's value, invalid rate, response tokens and Python runs
    per match (columns), as ``roles.graph_game.graph_metrics`` logged them; NaN where a node has none."""
    rows = metrics[metrics["kind"] == "iteration"]
    if rows.empty:
        raise NoData("no iteration logged yet")
    last = rows[rows["iteration"] == rows["iteration"].max()].set_index("metric")["value"]
    return pd.DataFrame(
        {label: [last.get(f"graph/{node}/{name}", np.nan) for node in nodes] for name, label in NODE_METRICS.items()},
        index=pd.Index(nodes, name="node"),
    )


def graph_nodes(played: tuple[str, GraphSpec], metrics: pd.DataFrame) -> Figure:
    """The graph as played: nodes in layers of the turn order (loops drawn as arcs back), each
    with its last iteration's mean turn value (MALT's credit), invalid rate, response length and
    Python runs, and the seat that plays it when it is another node's ("by executor"); conditional edges and loop
    caps written on their edge."""
    game, spec = played
    table = node_metrics(metrics, list(spec.nodes))
    graph, forward = spec.graph(), spec.forward()
    for layer, nodes in enumerate(nx.topological_generations(forward)):
        for node in nodes:
            graph.nodes[node]["layer"] = layer
    positions = nx.multipartite_layout(graph, subset_key="layer")
    attempts = f", {spec.attempts} attempts a match" if spec.attempts > 1 else ""
    fig, ax = _single(f"{game}: per node, iteration {int(metrics['iteration'].max())}{attempts}", size=(8, 4.5))
    xs, ys = zip(*positions.values())  # limits first: a self-loop's arc is drawn to the axes' scale
    ax.set(xlim=(min(xs) - 0.3, max(xs) + 0.3), ylim=(min(ys) - 0.6, max(ys) + 0.6))
    layer = nx.get_node_attributes(graph, "layer")
    curved = {(u, v): "arc3,rad=0.4" if a["rounds"] else "arc3,rad=0.3" if layer[v] - layer[u] > 1 else "arc3"
              for u, v, a in graph.edges(data=True) if u != v}  # a self-loop is written in its node  # fmt: skip
    notes = {(u, v): _edge_note(a["when"], a["rounds"]) for u, v, a in graph.edges(data=True)}
    for style in set(curved.values()):
        edges = [e for e, c in curved.items() if c == style]
        dashed = "dashed" if style.endswith("0.4") else "solid"
        nx.draw_networkx_edges(graph, positions, edgelist=edges, ax=ax, node_size=NODE_SIZE, style=dashed, connectionstyle=style)
        nx.draw_networkx_edge_labels(graph, positions, edge_labels={e: notes[e] for e in edges if notes[e]}, ax=ax,
                                     font_size=7, connectionstyle=style, node_size=NODE_SIZE)  # fmt: skip
    nx.draw_networkx_nodes(graph, positions, ax=ax, node_size=NODE_SIZE, node_color="white", edgecolors="0.3")
    labels = {
        node: "\n".join([f"{node}" + (f" ×{spec.nodes[node].repeats}" if spec.nodes[node].repeats > 1 else ""),
                         *([f"by {spec.nodes[node].seat}"] if spec.nodes[node].seat else []),
                         *([f"↻ {notes[node, node]}"] if graph.has_edge(node, node) else []),
                         *(f"{k} {v:.2f}" for k, v in row.items() if not np.isnan(v))])
        for node, row in table.iterrows()
    }  # fmt: skip
    nx.draw_networkx_labels(graph, positions, labels=labels, ax=ax, font_size=7)
    ax.axis("off")
    return fig


def _edge_note(when: str, rounds: int | None) -> str:
    """What an edge's label says: its condition, and a loop's cap."""
    return " ".join(filter(None, [when if when != "always" else "", f"≤{rounds} rounds" if rounds else ""]))


# ---- sweeps ------------------------------------------------------------------------------------


def final_by_setting(metrics: pd.DataFrame, metric: str, settings: Sequence[str]) -> pd.DataFrame:
    """One row per run: its ``settings`` and the last logged value of ``metric`` (at its last iteration)."""
    rows = metrics[metrics["metric"] == metric].dropna(subset=["iteration", "value"])
    if rows.empty:
        raise NoData(f"no values of {metric!r}")
    last = rows.sort_values("iteration", kind="stable").groupby("run_id").tail(1)
    return last[["run_id", *settings, "iteration", "value"]].reset_index(drop=True)


def sweep_comparison(metrics: pd.DataFrame, metric: str, x: str, hue: str | None = None) -> Figure:
    """The final ``metric`` per value of setting ``x`` (and colour per value of ``hue``): a point per
    run (seed), and the mean over them with a ±1 std error bar."""
    final = final_by_setting(metrics, metric, [x] + ([hue] if hue else []))
    xs = sorted(final[x].unique(), key=str)
    hues = sorted(final[hue].unique(), key=str) if hue else [None]
    fig, ax = _single(f"final {metric} by {x}" + (f" and {hue}" if hue else ""))
    width = 0.6 / len(hues)
    for h, value in enumerate(hues):
        group = final if hue is None else final[final[hue] == value]
        position = group[x].map({v: i for i, v in enumerate(xs)}) + (h - (len(hues) - 1) / 2) * width
        ax.scatter(position, group["value"], s=14, color=f"C{h}", alpha=0.5, lw=0)
        summary = group.assign(position=position).groupby("position")["value"].agg(["mean", "std"])
        ax.errorbar(summary.index, summary["mean"], yerr=summary["std"].fillna(0), fmt="_", markersize=14,
                    capsize=4, color=f"C{h}", label=None if hue is None else _group_label([hue], (value,)))  # fmt: skip
    ax.set(xticks=range(len(xs)), xlabel=x, ylabel=f"final {metric}")
    ax.set_title("points: one run each (seeds); bars: mean ± 1 std over the seeds", fontsize="small")
    ax.set_xticklabels([str(v) for v in xs])
    if hue:
        ax.legend(fontsize="small")
    return fig


# ---- figure helpers ----------------------------------------------------------------------------


def _iteration_range(ax: Axes, iterations: pd.Series) -> None:
    """One iteration alone is shown from iteration 0, not on an axis a fraction of an iteration wide."""
    if iterations.nunique() == 1:
        ax.set_xlim(0, iterations.iloc[0] + 1)


def _single(title: str, size: tuple[float, float] = (7, 4)) -> tuple[Figure, Axes]:
    fig, (ax,) = _grid(title, 1, size=size)
    return fig, ax


def _grid(
    title: str, panels: int, sharey: bool = False, columns: int = 4, size: tuple[float, float] | None = None
) -> tuple[Figure, list[Axes]]:
    """``panels`` axes in rows of at most ``columns`` (unused trailing axes removed), whose x axes
    tick whole numbers: most are iterations, and plots with their own ticks set them explicitly."""
    columns = min(columns, panels)
    rows = -(-panels // columns)
    fig = Figure(figsize=size or (3.6 * columns, 3.2 * rows), layout="constrained")
    axes = list(fig.subplots(rows, columns, squeeze=False, sharey=sharey).flat)
    for ax in axes[panels:]:
        ax.remove()
    for ax in axes[:panels]:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title)
    return fig, axes[:panels]
