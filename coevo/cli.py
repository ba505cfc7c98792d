"""``coevo``: the command line. Thin by design: every command calls into the packages."""

from __future__ import annotations

import json
import signal
import tempfile
import threading
import time
import tomllib
from pathlib import Path
from typing import Annotated, Literal, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Column, Table

import games
from games.core import choosable
from games.task_forge.sandbox import SandboxUnavailable
from analysis.headline import summary_line
from analysis.printable import printable
from analysis.run_state import RUN_FILES, checkpoint_iteration, is_run_dir
from coevo.errors import OneLineErrors, write_failure
from coevo.transcript import TranscriptPrinter
from marl.config import ConfigError, to_toml
from marl.episode import Turn
from marl.players import is_model, make_player
from marl.policy import Policy, Sampling
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.pools import PoolDoesNotFit
from marl.rundir import OldCheckpoint, RunDirBusy
from marl.scripted import HumanPolicy
from coevo.train import Trainer
from coevo.config import RunConfig, load_run_config
from coevo.sweep import expand, load_sweep, run_sweep
from populations.tournament import round_robin, standings
from roles.rewards import forge_rewards
from roles.seat import InvalidMoves

app = typer.Typer(
    cls=OneLineErrors, help="coevo: role-specialised LLM agents co-evolving in PettingZoo games.", no_args_is_help=True
)
console = Console()

DEMO_GAMES = ("tictactoe", "kuhn_poker", "leduc_holdem", "simple_negotiation")


def _fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr (coevo.errors), then exit with ``code``."""
    typer.echo(message, err=True)
    raise typer.Exit(code)


def _writable_dir(folder: Path, option: str) -> None:
    """Refuse, before any work, a folder the run could not write: a file, under a file, read-only."""
    if folder.exists() and not folder.is_dir():
        raise typer.BadParameter(f"{folder} is a file; give a folder for the run", param_hint=option)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        where = err.filename or folder
        raise typer.BadParameter(f"cannot write {where}: {err.strerror}; give a folder you can write", param_hint=option) from None


def _writable_file(path: Path, option: str) -> None:
    """Refuse, before any work, a file that could not be written: a folder, in a missing or read-only folder."""
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a directory; give a file name, e.g. {path / 'episode.json'}", param_hint=option)
    if not path.parent.is_dir():
        raise typer.BadParameter(f"no folder {path.parent} to write {path.name} in; create it first", param_hint=option)
    try:
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as err:
        raise typer.BadParameter(f"cannot write in {path.parent}: {err.strerror}", param_hint=option) from None


def _check_game(name: str) -> str:
    if name not in games.SCRIPTED_PLAYERS:
        raise typer.BadParameter(f"{name!r} has no scripted players; choose from {', '.join(games.SCRIPTED_PLAYERS)}")
    return name


@app.command("games")
def list_games() -> None:
    """List the games `coevo` can make by name (and any OpenSpiel game as openspiel/<game(params)>)."""
    for name in games.list():
        console.print(name)


@app.command()
def tournament(
    game: Annotated[
        list[str] | None,
        typer.Option("--game", "-g", help="Game to play (repeatable); default: all four built-in games.",
                     callback=lambda names: [_check_game(n) for n in names or ()]),
    ] = None,
    matches: Annotated[int, typer.Option(min=1, help="Matches per ordered pair of players.")] = 100,
    seed: Annotated[int, typer.Option(help="Root seed; the same seed replays the same matches.")] = 0,
) -> None:
    """Round-robin of the scripted players in each game, with a standings table per game."""
    names = game or list(DEMO_GAMES)
    total = sum(
        matches * len(p) * (len(p) - 1) for p in (games.scripted_players(g) for g in names)
    )
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("matches", total=total)
        results = {
            g: round_robin(g, matches=matches, seed=seed, on_match=lambda: progress.advance(task)) for g in names
        }
    for g, frame in results.items():
        table = Table(title=f"{g}: {matches} matches per ordered pair, seed {seed}")
        for column in ("player", "matches", "mean return", "±95%", "wins", "draws", "losses"):
            table.add_column(column, justify="left" if column == "player" else "right")
        for row in standings(frame).itertuples():
            table.add_row(
                str(row.Index), str(row.matches), f"{row.mean_return:+.3f}", f"{row.ci95:.3f}",
                str(row.wins), str(row.draws), str(row.losses),
            )  # fmt: skip
        console.print(table)


def _check_player(name: str, game: str, option: str) -> str:
    try:
        make_player(name, game)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint=option) from None
    return name


def _player(name: str, game: str, rule: InvalidMoves) -> Policy:
    """The seat's player; a person at this terminal is told what an invalid move costs under ``rule``."""
    if name == "human":
        return HumanPolicy(show=lambda text: console.print(escape(printable(text))), invalid=rule)
    return make_player(name, game)


FORGE_DEFAULTS = {"proposer": "sec", "executor": "skilled", "verifier": "noisy", "teacher": "hinter"}


def _pairs_of(items: list[str], option: str) -> dict[str, str]:
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        pairs[key.strip()] = value.strip()
    return pairs


def _game_options(game: str, items: list[str]) -> dict:
    """--option KEY=VALUE pairs, values read as TOML; task forge's rewards shaped by its roles."""
    options = {}
    for key, raw in _pairs_of(items, "--option").items():
        try:
            options[key] = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            options[key] = raw
    if game == "task_forge":
        options["reward_fn"] = forge_rewards
    try:
        games.make(game, **options)
    except (TypeError, ValueError, SandboxUnavailable) as err:
        raise typer.BadParameter(str(err), param_hint="--option") from None
    return options


def _default_players(game: str, p0: str, p1: str, options: dict) -> dict[str, str]:
    if game == "task_forge":
        return {s: FORGE_DEFAULTS[s] for s in games.make(game, **options).possible_agents}
    if game.startswith("graph/"):  # one team: every node's seat the first player unless --seat says otherwise
        return dict.fromkeys(games.make(game, **options).possible_agents, p0)
    return {"player_0": p0, "player_1": p1}


@app.command()
def match(
    game: Annotated[str, typer.Argument(help="Game to play; `coevo games` lists them.")],
    p0: Annotated[str, typer.Option("--p0", help="Player in the first seat (every seat of a graph): a model, `human`, or a scripted player.")] = "tiny",
    p1: Annotated[str, typer.Option("--p1", help="Player in the second seat.")] = "random",
    seed: Annotated[int, typer.Option(help="Seeds the deal, the players and sampling.")] = 0,
    mode: Annotated[str, typer.Option(help="How models move: `generate` (free text, parsed) or `choose` (forced choice over legal moves).")] = "generate",
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature for models; 0 = greedy.")] = 0.7,
    max_new_tokens: Annotated[int, typer.Option(min=1, help="Most tokens a model may write per turn.")] = 256,
    invalid: Annotated[str, typer.Option(help="Invalid model output: `forfeit`, `retry:N` or `random_legal`.")] = "retry:1",
    show_prompt: Annotated[bool, typer.Option("--show-prompt", help="Print each full prompt (system and user).")] = False,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the Episode record here as JSON.")] = None,
    seat: Annotated[
        list[str] | None, typer.Option("--seat", help="SEAT=PLAYER for a named seat, e.g. --seat executor=tiny (task_forge).")
    ] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", help="KEY=VALUE game option, e.g. --option teacher=true --option attempts=2.")
    ] = None,
) -> None:
    """Play one match turn by turn: what each seat saw, the raw output, the parsed move, rewards.

    task_forge seats its scripted role players unless told otherwise: ``coevo match task_forge
    --option teacher=true --seat executor=tiny``."""
    if not games.known(game):
        raise typer.BadParameter(f"unknown game {game!r}; choose from: {', '.join(games.list())} or openspiel/<game(params)>", param_hint="GAME")
    if mode not in ("generate", "choose"):
        raise typer.BadParameter(f"must be generate or choose, got {mode!r}", param_hint="--mode")
    try:
        rule = InvalidMoves.parse(invalid)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--invalid") from None
    if json_path is not None:  # before any work: loading a model takes seconds, a match minutes
        _writable_file(json_path, "--json")
    game_kwargs = _game_options(game, option or [])
    env = games.make(game, **game_kwargs)
    seated = _pairs_of(seat or [], "--seat")
    names = {**_default_players(game, p0, p1, game_kwargs), **seated}
    unknown = set(names) - set(env.possible_agents)
    if unknown:
        raise typer.BadParameter(f"{game} has no seats {sorted(unknown)}", param_hint="--seat")
    free = [who for who, name in names.items() if is_model(name) and not choosable(env, who)]
    if mode == "choose" and free:
        raise typer.BadParameter(
            f"forced choice needs a game with a move list; {game} takes free text from {', '.join(free)} (use --mode generate)",
            param_hint="--mode",
        )
    options = {"player_0": "--p0", "player_1": "--p1"}
    for who, name in names.items():  # loads the models named
        _check_player(name, game, "--seat" if who in seated else options.get(who, "--seat"))
    sampling = Sampling(temperature, 1.0, max_new_tokens)
    seats = {
        who: SeatSpec(_player(name, game, rule), name, mode if is_model(name) else "generate", sampling, invalid=rule)
        for who, name in names.items()
    }
    spec = MatchSpec(game, seed, seats, game_kwargs=game_kwargs)
    printer = TranscriptPrinter(console, show_prompt)

    def on_turn(spec: MatchSpec, turn: Turn) -> None:
        printer.turn(spec, turn)
        player = spec.seats[turn.seat].policy
        if isinstance(player, HumanPolicy):
            player.heard(turn)  # so it can say how many tries are left

    printer.start(spec, env.rules_text)
    [episode] = RolloutEngine(concurrency=1, on_turn=on_turn).play([spec])
    printer.end(episode)
    if json_path is not None:
        try:
            json_path.write_text(episode.model_dump_json(indent=2), encoding="utf-8")
        except OSError as err:
            _fail(f"error: could not write {json_path}: {err.strerror}; the match was played but not saved", 1)
        console.print(f"episode written to {escape(str(json_path))}")


@app.command()
def train(
    config: Annotated[Path | None, typer.Argument(help="TOML config, e.g. examples/kuhn_tiny.toml.")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the run in this directory from its last checkpoint.")] = None,
    run_dir: Annotated[Path | None, typer.Option(help="Where the run goes (default runs/<config name>-<time>).")] = None,
    iterations: Annotated[int | None, typer.Option(min=1, help="Override the config's iteration count.")] = None,
    overrides: Annotated[
        list[str] | None, typer.Option("--set", help="Override a config value: KEY=VALUE, e.g. --set optim.lr=1e-3.")
    ] = None,
    pool: Annotated[str | None, typer.Option(help="Override the config's pool: local or ray.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress bar.")] = False,
) -> None:
    """Self-play training with role-conditioned advantages, of one policy or (with \\[population])
    of a population; writes a run directory."""
    if (config is None) == (resume is None):
        raise typer.BadParameter(
            "give a CONFIG to start a run, or --resume RUN_DIR to continue one (not both)", param_hint="CONFIG / --resume"
        )
    if resume is not None and not is_run_dir(resume):
        raise typer.BadParameter(
            f"{resume} is not a run directory (it holds no {' or '.join(RUN_FILES)}); give the one coevo train printed",
            param_hint="--resume",
        )
    try:
        cfg = load_run_config(
            config if config is not None else resume / "config.toml",
            [
                *(overrides or []),
                *([f"iterations={iterations}"] if iterations is not None else []),
                *([f"pool.kind={pool}"] if pool is not None else []),
            ],
        )
    except ConfigError as err:
        _fail(f"config error: {err}")
    start = 0
    if resume is not None:
        folder, start = resume, checkpoint_iteration(resume) or 0
        if start >= cfg.iterations:
            console.print(
                f"{escape(str(folder))} already finished at iteration {start} of {cfg.iterations}; to extend it: "
                f"coevo train --resume {escape(str(folder))} --iterations {2 * start}  (any number above {start})",
                soft_wrap=True,
            )
            return
        _writable_dir(folder, "--resume")
    else:
        folder = run_dir or Path("runs") / f"{config.stem}-{time.strftime('%Y%m%d-%H%M%S')}"
        if folder.is_dir() and any(folder.iterdir()):
            raise typer.BadParameter(
                f"{folder} already holds a run; use --resume {folder} or another --run-dir", param_hint="--run-dir"
            )
        _writable_dir(folder, "--run-dir")
    try:
        final = _run(cfg, folder, resume is not None, start, quiet)
    except (RunDirBusy, OldCheckpoint) as err:
        _fail(f"error: {err}")
    except (PoolDoesNotFit, SandboxUnavailable) as err:  # found once the trainer builds its pool and games
        _fail(f"config error: {err}")
    except OSError as err:
        message = write_failure(err, folder, resumable=(folder / "checkpoints" / "latest").exists())
        if message is None:
            raise
        _fail(message, 1)
    console.print(f"done: {escape(summary_line(final)) or 'no metrics logged'}", soft_wrap=True)
    console.print(f"run directory: {escape(str(folder))}   metrics: {escape(str(folder / 'events.jsonl'))}", soft_wrap=True)


def _run(cfg, folder: Path, resume: bool, start: int, quiet: bool) -> dict:
    """The trainer's run, with a progress line of the run's headline metrics; its last metrics."""
    trainer = Trainer(cfg, folder)
    console.print(f"run directory: {escape(str(folder))}   metrics: {escape(str(folder / 'events.jsonl'))}", soft_wrap=True)
    # what the metrics have of the line: on a narrow terminal they give way, never the iteration count
    room = max(console.width - len(f"iteration {cfg.iterations}/{cfg.iterations}") - 20 - len("-:--:--") - 3, 10)
    with Progress(
        TextColumn("[bold]iteration {task.completed}/{task.total}"), BarColumn(bar_width=20), TimeRemainingColumn(),
        TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", max_width=room)),
        console=console, disable=quiet,
    ) as progress:  # fmt: skip
        task = progress.add_task("", total=cfg.iterations, completed=start)

        stop = threading.Event()

        def request_stop(signum, frame) -> None:
            """First Ctrl-C: finish the iteration, checkpoint, shut down. A second one stops at once."""
            stop.set()
            signal.signal(signal.SIGINT, signal.default_int_handler)
            console.print("stopping after this iteration (Ctrl-C again to stop now)")

        def show(iteration: int, metrics: dict) -> None:
            progress.update(task, completed=iteration, description=escape(summary_line(metrics)))
            if stop.is_set():
                raise KeyboardInterrupt  # here, between iterations, never inside a Ray or torch call

        signal.signal(signal.SIGINT, request_stop)
        return trainer.run(resume=resume, on_iteration=show)


@app.command()
def sweep(
    spec: Annotated[Path, typer.Argument(help="Sweep TOML, e.g. examples/sweep_kuhn_population.toml.")],
    out: Annotated[Path | None, typer.Option(help="Where the runs and results go (default runs/<sweep name>).")] = None,
) -> None:
    """Expand a grid or list of settings into training runs, run them in parallel, and write one
    results table (results.csv and results.parquet). Run it again to finish an interrupted sweep."""
    folder = out or Path("runs") / spec.stem
    try:
        total = len(expand(load_sweep(spec)))
    except ConfigError as err:
        _fail(f"config error: {err}")
    with Progress(TextColumn("[bold]runs {task.completed}/{task.total}"), BarColumn(), TimeRemainingColumn(), console=console) as bar:
        task = bar.add_task("", total=total)
        table = run_sweep(spec, folder, on_done=lambda name: bar.advance(task))
        bar.update(task, completed=total)
    failed = table[table.status != "done"]
    console.print(_results_table(table))
    console.print(f"{len(table) - len(failed)}/{len(table)} runs done; results: {folder / 'results.csv'} and results.parquet")
    for _, row in failed.iterrows():
        console.print(f"[red]{row.run}[/red]: {row.status}")
    if len(failed):
        raise typer.Exit(1)


SWEEP_COLUMNS = 3  # headline metrics in the terminal's results table (all of them are in results.csv)
SETTING_COLUMNS = 2  # varied settings given a column each; more share one column, a line each


def _results_table(results) -> Table:
    """Each run's settings, status and the few headline metrics that tell most, those that
    differ between runs first: the sweep's answer, on screen when it ends. Many varied settings
    (a sweep over role tables has one per key) share one column, so that no header shrinks to a
    letter on a narrow terminal."""
    from analysis.load import summary_columns, varied_settings

    settings = varied_settings(results)
    apart = settings if len(settings) <= SETTING_COLUMNS else []
    shown = summary_columns(results, apart, SWEEP_COLUMNS)
    together = [c for c in settings if c not in apart]
    lines = ["\n".join(f"{c}={row[c]}" for c in together) for _, row in results.iterrows()]
    widest = max((len(line) for text in lines for line in text.splitlines()), default=0)
    columns = [Column(h, overflow="fold") for h in shown]  # folded, never cut
    if together:
        columns.insert(1, Column("settings", overflow="fold", min_width=min(widest, 40)))
    table = Table(*columns, title="results")
    for text, (_, row) in zip(lines, results.iterrows()):
        cells = [f"{row[c]:.4g}" if isinstance(row[c], float) else escape(str(row[c])) for c in shown]
        table.add_row(*cells[:1], *([escape(text)] if together else []), *cells[1:])
    return table


@app.command()
def report(
    folder: Annotated[Path, typer.Argument(help="A run directory (runs/<run>) or a sweep directory (with results.csv).")],
    transcripts: Annotated[int, typer.Option(min=0, help="Matches shown turn by turn.")] = 3,
    metric: Annotated[
        str | None, typer.Option(help="The metric of the learning curves (default: the headline metric whose value moved).")
    ] = None,
) -> None:
    """Write FOLDER/report/index.html: plots of what emerged, a metrics summary and sampled
    transcripts, in one file that opens from disk (no network)."""
    from analysis.plots import UnknownMetric
    from analysis.report import write_report

    try:
        index = write_report(folder, transcripts=transcripts, metric=metric)
    except FileNotFoundError as err:
        _fail(f"error: {err}")
    except UnknownMetric as err:
        _fail(f"error: --metric: {err}")
    console.print(f"report: {index}")


@app.command()
def distill(
    run_dir: Annotated[Path, typer.Argument(help="A run of Kuhn poker or a small OpenSpiel game in forced choice (coevo train printed it).")],
    out: Annotated[Path, typer.Option(help="The folder the distilled model is saved in (a Hugging Face model folder).")],
    target: Annotated[
        Literal["mixture", "average"] | None,
        typer.Option(help="The population's meta-strategy mixture, or the learner's average policy (default: the mixture when the run has a population)."),
    ] = None,
    steps: Annotated[int, typer.Option(min=1, help="Optimiser steps.")] = 300,
    batch: Annotated[int, typer.Option(min=1, help="Information states a step (all of them, when the game has fewer).")] = 64,
    lr: Annotated[float, typer.Option(min=0, help="Adam's learning rate.")] = 3e-3,
) -> None:
    """Distil the run's answer into one model, as NFSP's average network: a population's
    meta-strategy mixture, or a learner's average policy (every policy it held, reach-weighted:
    what converges when the last one cycles); print the exploitability of that target, the
    learner's last policy and the distilled model as one JSON line."""
    from coevo.distill import CannotDistill, distill_run

    if not is_run_dir(run_dir) or checkpoint_iteration(run_dir) is None:
        raise typer.BadParameter(f"{run_dir} is not a run directory with a checkpoint; give one coevo train wrote", param_hint="RUN_DIR")
    _writable_dir(out, "--out")
    with Progress(TextColumn("[bold]distilling"), BarColumn(bar_width=30), TimeRemainingColumn(), console=console) as bar:
        task = bar.add_task("", total=steps)
        try:
            result = distill_run(run_dir, out, target=target, steps=steps, batch=batch, lr=lr, progress=lambda step: bar.update(task, completed=step))
        except CannotDistill as err:
            _fail(f"error: {err}")
    typer.echo(json.dumps(result))


@app.command()
def watch(
    run_dir: Annotated[Path, typer.Argument(help="The run directory to follow (coevo train prints it).")],
    interval: Annotated[float, typer.Option(min=0.05, help="Seconds between looks at the run.")] = 1.0,
    timeout: Annotated[float | None, typer.Option(min=0, help="Stop following after this many seconds.")] = None,
) -> None:
    """Follow a run in the terminal: whether it is running, stopped or finished, its progress,
    latest metrics and last match; until it finishes (exit 0) or is found stopped (exit 1)."""
    from analysis.watch import watch as follow

    if not run_dir.is_dir():
        raise typer.BadParameter(f"{run_dir} is not a directory; give the run directory coevo train printed", param_hint="RUN_DIR")
    if not is_run_dir(run_dir):
        raise typer.BadParameter(
            f"{run_dir} is not a run directory (a run directory holds {' and '.join(RUN_FILES)}, written by coevo train); "
            "give the one coevo train printed",
            param_hint="RUN_DIR",
        )
    finished = follow(run_dir, console, interval=interval, timeout=timeout)
    if not finished:
        raise typer.Exit(1)


config_app = typer.Typer(cls=OneLineErrors, help="The run config's own description.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("schema")
def config_schema() -> None:
    """Print the JSON schema of a run config (every table, field, default and description), for
    editors and for configs written by programs."""
    typer.echo(json.dumps(RunConfig.model_json_schema(), indent=2))


@config_app.command("show")
def config_show(
    config: Annotated[Path, typer.Argument(help="TOML config, e.g. examples/kuhn_tiny_async.toml.")],
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a value: KEY=VALUE (KEY:=VALUE replaces a table), as coevo train takes it."),
    ] = None,
) -> None:
    """Print the config as a run would use it: what it ``extends`` merged in, ``--set`` applied,
    every default filled in, as TOML."""
    try:
        resolved = load_run_config(config, overrides or [])
    except ConfigError as err:
        _fail(f"config error: {err}")
    typer.echo(to_toml(resolved), nl=False)


if __name__ == "__main__":
    app()
