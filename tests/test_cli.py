"""The `coevo` command line, through typer's runner and as the installed console script."""

import errno
import io
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
from typer.testing import CliRunner

import games
from coevo.cli import app
from marl.config import _read
from marl.episode import Episode
from marl.rundir import RunDirBusy
from coevo.config import RunConfig, load_run_config

runner = CliRunner()


def test_tournament_prints_a_standings_table():
    result = runner.invoke(app, ["tournament", "-g", "tictactoe", "-g", "kuhn_poker", "--matches", "3"])
    assert result.exit_code == 0, result.output
    assert "tictactoe: 3 matches per ordered pair" in result.output
    assert "minimax" in result.output and "never_bluff" in result.output


@pytest.mark.parametrize("args", [["-g", "chess"], ["--matches", "0"], ["--bogus"]])
def test_bad_arguments_exit_2_naming_the_problem(args):
    result = runner.invoke(app, ["tournament", *args])
    assert result.exit_code == 2
    assert ("chess" in result.output) or ("matches" in result.output) or ("bogus" in result.output)


def test_games_lists_the_registry():
    result = runner.invoke(app, ["games"])
    assert result.exit_code == 0
    assert result.output.split() == games.list()


def test_console_script_is_installed():
    script = Path(sys.executable).parent / "coevo"  # installed beside the interpreter running the tests
    assert script.exists(), f"no console script at {script}: install with pip install -e ."
    done = subprocess.run([str(script), "tournament", "-g", "tictactoe", "--matches", "2"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "minimax" in done.stdout


def test_match_prints_each_turn_and_the_result():
    result = runner.invoke(app, ["match", "kuhn_poker", "--p0", "always_bet", "--p1", "nash", "--seed", "3"])
    assert result.exit_code == 0, result.output
    assert "Turn 1 · player_0" in result.output and "move: bet ✓" in result.output
    assert "player_0 (always_bet)" in result.output and "\x1b[" not in result.output  # plain when piped


def test_match_with_the_tiny_model_writes_the_episode(tmp_path):
    path = tmp_path / "episode.json"
    args = ["match", "tictactoe", "--p0", "tiny", "--p1", "minimax", "--max-new-tokens", "8", "--json", str(path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    episode = Episode.model_validate_json(path.read_text())
    assert episode.members == {"player_0": "tiny", "player_1": "minimax"}
    assert "invalid ✗" in result.output or "move:" in result.output


def test_a_task_forge_match_seats_every_role_and_takes_options(tmp_path):
    path = tmp_path / "episode.json"
    args = ["match", "task_forge", "--seat", "executor=tiny", "--option", "teacher=true", "--option", "attempts=1",
            "--max-new-tokens", "8", "--json", str(path)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    episode = Episode.model_validate_json(path.read_text())
    assert episode.members == {"proposer": "sec", "executor": "tiny", "verifier": "noisy", "teacher": "hinter"}
    assert episode.outcome["valid_task"] and len(episode.outcome["attempts"]) == 1
    assert "Turn 1 · proposer" in result.output and "Turn 2 · executor" in result.output
    bad = runner.invoke(app, ["match", "task_forge", "--seat", "judge=tiny"])
    assert bad.exit_code == 2 and "no seats ['judge']" in bad.output


def test_a_task_forge_executor_picks_among_options_by_forced_choice():
    options = ["--option", "choices=4", "--option", "tool_calls=0", "--option", "attempts=1"]
    result = runner.invoke(app, ["match", "task_forge", "--seat", "executor=tiny", "--mode", "choose", *options])
    assert result.exit_code == 0, result.output
    assert "Turn 2 · executor · attempt:0 (tiny, choose)" in result.output and "choose the right answer among the options" in result.output
    free = runner.invoke(app, ["match", "task_forge", "--seat", "executor=tiny", "--mode", "choose"])
    assert free.exit_code == 2 and "takes free text from executor" in " ".join(free.output.replace("│", " ").split())


def test_match_forced_choice_and_full_prompts():
    args = ["match", "kuhn_poker", "--p0", "tiny", "--mode", "choose", "--show-prompt", "--temperature", "0"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "system:" in result.output and "\\boxed{MOVE}" in result.output
    assert "(tiny, choose)" in result.output


def test_match_against_a_human():
    result = runner.invoke(app, ["match", "tictactoe", "--p0", "human", "--p1", "minimax"], input="b2\na1\nc1\na3\nc3\n")
    assert result.exit_code == 0, result.output
    assert "player_0, your move:" in result.output and "move: b2 ✓" in result.output


@pytest.mark.parametrize(
    "args, listed",
    [
        (["match", "chess"], "kuhn_poker"),
        (["match", "kuhn_poker", "--p1", "gto"], "never_bluff"),
        (["match", "kuhn_poker", "--invalid", "sometimes"], "retry:N"),
        (["match", "kuhn_poker", "--mode", "guess"], "generate or choose"),
        (["match", "simple_negotiation", "--mode", "choose"], "forced choice needs a game with a move list"),
    ],
)
def test_match_bad_arguments_list_the_choices(args, listed):
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    flat = " ".join(result.output.replace("│", " ").split())  # rich boxes and wraps error text
    assert listed in flat


def readme_match_commands():
    root = Path(__file__).parent.parent
    lines = [line for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))] for line in page.read_text().splitlines()]
    return [line.split()[1:] for line in dict.fromkeys(lines) if line.startswith(".venv/bin/coevo match ")]


@pytest.mark.slow
@pytest.mark.parametrize("args", readme_match_commands(), ids=" ".join)
def test_readme_match_examples_work_as_shown(args, tmp_path, monkeypatch):
    # As written, capped at 16 new tokens a turn to keep CI short (the README uses the default 256).
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, [*args, "--max-new-tokens", "16"], input="b2\na1\nc1\na3\nc3\nb1\nb3\na2\nc2\n")
    assert result.exit_code == 0, result.output
    seats = ["player_0", "player_1"]
    if args[1] == "task_forge":
        seats = ["proposer", "executor", "verifier", *(["teacher"] if "teacher=true" in args else [])]
    assert "result" in result.output and all(f"{seat} (" in result.output for seat in seats), result.output
    if "--json" in args:
        assert Episode.model_validate_json((tmp_path / args[args.index("--json") + 1]).read_text()).turns


# ---- one line per mistake ------------------------------------------------------------------------

EXAMPLES = Path(__file__).parent.parent / "examples"
KUHN = str(EXAMPLES / "kuhn_tiny.toml")

BAD_CALLS = [  # (arguments, what the one line must name)
    (["bogus"], "bogus"),  # unknown command
    (["tournament", "--bogus"], "--bogus"),  # unknown option
    (["match"], "GAME"),  # missing argument
    (["match", "kuhn_poker", "--p1"], "--p1"),  # an option without its value
    (["tournament", "--matches", "x"], "--matches"),  # not an int
    (["tournament", "--matches", "0"], "--matches"),  # below the minimum
    (["match", "kuhn_poker", "--temperature", "-1"], "--temperature"),
    (["tournament", "-g", "chess"], "--game"),  # unknown game, in a callback
    (["match", "chess"], "GAME"),  # unknown game, in the command
    (["match", "kuhn_poker", "--mode", "x"], "--mode"),
    (["match", "simple_negotiation", "--mode", "choose"], "--mode"),  # forced choice in a free-text game
    (["match", "kuhn_poker", "--invalid", "sometimes"], "--invalid"),
    (["match", "task_forge", "--seat", "judge=tiny"], "--seat"),
    (["match", "task_forge", "--seat", "executor"], "--seat"),
    (["match", "task_forge", "--seat", "executor=gto"], "--seat"),
    (["match", "kuhn_poker", "--option", "cards"], "--option"),
    (["match", "kuhn_poker", "--option", "bogus=1"], "--option"),
    (["match", "kuhn_poker", "--p0", "gto"], "--p0"),
    (["match", "kuhn_poker", "--p1", "minimax"], "--p1"),  # tic-tac-toe's player, not Kuhn's
    (["train"], "CONFIG"),  # neither a config nor --resume
    (["train", KUHN, "--resume", "runs/x"], "--resume"),  # both
    (["train", "--resume", "/nowhere/run"], "--resume"),
    (["train", "nowhere.toml"], "nowhere.toml"),
    (["train", KUHN, "--iterations", "0"], "--iterations"),
    (["train", KUHN, "--set", "optim.lr"], "optim.lr"),
    (["watch"], "RUN_DIR"),
    (["watch", ".", "--interval", "0"], "--interval"),
    (["report", "/nowhere/run"], "/nowhere/run"),
]


@pytest.mark.parametrize("args, named", BAD_CALLS, ids=[" ".join(a) for a, _ in BAD_CALLS])
def test_a_bad_call_is_one_line_naming_the_argument_and_exit_code_2(args, named):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and named in lines[0], result.output


def test_the_console_script_prints_bad_calls_as_one_line_too():
    script = Path(sys.executable).parent / "coevo"
    done = subprocess.run([str(script), "match", "kuhn_poker", "--mode", "x"], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == ["error: --mode: must be generate or choose, got 'x'; see coevo match --help"]


def one_line(result, code=2) -> str:
    assert result.exit_code == code, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


def test_a_missing_hf_model_is_a_config_error_at_load(tmp_path):
    line = one_line(runner.invoke(app, ["train", KUHN, "--set", f"model=hf:{tmp_path / 'nope'}", "--run-dir", str(tmp_path / "run")]))
    assert line.startswith("config error:") and "model" in line and f"no model at {tmp_path / 'nope'}" in line
    assert not (tmp_path / "run").exists()


def test_a_non_utf8_or_directory_config_is_one_line(tmp_path):
    latin = tmp_path / "latin1.toml"
    latin.write_bytes(b'model = "tiny" # caf\xe9\n')
    assert "not UTF-8" in one_line(runner.invoke(app, ["train", str(latin)]))
    assert "a directory, not a config file" in one_line(runner.invoke(app, ["train", str(tmp_path)]))


def test_an_unknown_eval_opponent_is_a_config_error(tmp_path):
    line = one_line(runner.invoke(app, ["train", KUHN, "--set", 'eval.opponents=["gto"]', "--run-dir", str(tmp_path / "run")]))
    assert "eval.opponents" in line and "'gto'" in line and "never_bluff" in line and "past:K" in line


def test_match_json_into_a_missing_folder_is_refused_before_the_match(tmp_path):
    path = tmp_path / "missing" / "episode.json"
    line = one_line(runner.invoke(app, ["match", "kuhn_poker", "--p0", "random", "--json", str(path)]))
    assert "--json" in line and str(path.parent) in line
    line = one_line(runner.invoke(app, ["match", "kuhn_poker", "--p0", "random", "--json", str(tmp_path)]))
    assert "--json" in line and "directory" in line


class NoTrainer:
    """Stands in for coevo.cli's trainer: constructing one is a test failure."""

    def __init__(self, *args, **kwargs):
        raise AssertionError("the trainer was started")


@pytest.fixture
def no_trainer(monkeypatch):
    monkeypatch.setattr("coevo.cli.Trainer", NoTrainer)


def test_train_into_a_file_or_under_one_is_refused_before_work(tmp_path, no_trainer):
    file = tmp_path / "file"
    file.write_text("")
    for run_dir in (file, file / "run"):
        line = one_line(runner.invoke(app, ["train", KUHN, "--run-dir", str(run_dir)]))
        assert "--run-dir" in line and str(file) in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_train_into_a_folder_it_cannot_write_is_refused_before_work(tmp_path, no_trainer):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    line = one_line(runner.invoke(app, ["train", KUHN, "--run-dir", str(locked / "run")]))
    assert "--run-dir" in line and str(locked) in line


class FailingTrainer:
    """A trainer whose run fails with ``error`` once it has started."""

    error: OSError

    def __init__(self, config, run_dir):
        self.run_dir = run_dir

    def run(self, resume=False, on_iteration=None):
        raise self.error


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM])
@pytest.mark.parametrize("filename", ["checkpoints/.staging-000010/state.pt", None])
def test_a_write_that_fails_mid_run_is_one_line_saying_what_to_do(code, filename, tmp_path, monkeypatch):
    run = finished_run(tmp_path / "run", 10)  # resumed to 20, and failing on the way
    FailingTrainer.error = OSError(code, os.strerror(code), None if filename is None else str(run / filename))
    monkeypatch.setattr("coevo.cli.Trainer", FailingTrainer)
    line = last_line(runner.invoke(app, ["train", "--resume", str(run), "--iterations", "20", "--quiet"]), code=1)
    assert f"could not write {run / filename if filename else run}: {os.strerror(code)}" in line
    assert line.endswith(f"then coevo train --resume {run} (it resumes exactly from the last checkpoint)")
    assert ("free" in line) if code in (errno.ENOSPC, errno.EDQUOT) else ("permissions" in line or "read-only" in line)


def test_a_write_that_fails_before_the_first_checkpoint_says_resuming_starts_again(tmp_path, monkeypatch):
    FailingTrainer.error = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "run" / "events.jsonl"))
    monkeypatch.setattr("coevo.cli.Trainer", FailingTrainer)
    line = last_line(runner.invoke(app, ["train", KUHN, "--run-dir", str(tmp_path / "run"), "--quiet"]), code=1)
    assert "free some disk space" in line
    assert line.endswith(f"then coevo train --resume {tmp_path / 'run'} (it starts the run again: no checkpoint was written yet)")


def last_line(result, code) -> str:
    """The one line a failure printed (after the run directory's)."""
    assert result.exit_code == code, result.output
    lines = [line for line in result.output.strip().splitlines() if not line.startswith("run directory:")]
    assert len(lines) == 1, result.output
    return lines[0]


def test_a_second_trainer_on_a_run_is_one_line(tmp_path, monkeypatch):
    FailingTrainer.error = RunDirBusy(f"{tmp_path / 'run'} is being trained by another process (pid 42); wait for it")
    monkeypatch.setattr("coevo.cli.Trainer", FailingTrainer)
    line = last_line(runner.invoke(app, ["train", KUHN, "--run-dir", str(tmp_path / "run"), "--quiet"]), code=2)
    assert line.startswith("error: ") and "another process (pid 42)" in line


def test_other_errors_of_a_run_are_not_hidden(tmp_path, monkeypatch):
    FailingTrainer.error = OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr("coevo.cli.Trainer", FailingTrainer)
    result = runner.invoke(app, ["train", KUHN, "--run-dir", str(tmp_path / "run"), "--quiet"])
    assert result.exit_code == 1 and isinstance(result.exception, OSError)


# ---- resuming, and what the progress line shows --------------------------------------------------


def finished_run(folder: Path, iterations: int) -> Path:
    """A run directory as a finished run leaves it, as far as resuming reads it."""
    (folder / "checkpoints" / f"iter_{iterations:06d}").mkdir(parents=True)
    (folder / "checkpoints" / f"iter_{iterations:06d}" / "state.json").write_text(json.dumps({"iteration": iterations}))
    (folder / "checkpoints" / "latest").write_text(f"iter_{iterations:06d}")
    (folder / "config.toml").write_text(Path(KUHN).read_text().replace("iterations = 80", f"iterations = {iterations}"))
    return folder


def test_resuming_a_finished_run_says_so_and_starts_nothing(tmp_path, no_trainer):
    run = finished_run(tmp_path / "run", 10)
    result = runner.invoke(app, ["train", "--resume", str(run)])
    assert result.exit_code == 0, result.output
    assert f"already finished at iteration 10 of 10; to extend it: coevo train --resume {run} --iterations" in result.output
    assert "done:" not in result.output


def test_resuming_a_run_killed_before_its_first_checkpoint_starts_it_again(tmp_path, monkeypatch):
    run = finished_run(tmp_path / "run", 10)
    for path in sorted((run / "checkpoints").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    ScriptedTrainer.metrics = LEDUC
    monkeypatch.setattr("coevo.cli.Trainer", ScriptedTrainer)
    result = runner.invoke(app, ["train", "--resume", str(run), "--quiet"])
    assert result.exit_code == 0, result.output
    assert ScriptedTrainer.resumed is True and "done: player_0 return" in result.output


class ScriptedTrainer:
    """A trainer that reports ``metrics`` for each of its iterations, as a real one would."""

    metrics: dict

    def __init__(self, config, run_dir):
        self.iterations = config.iterations

    def run(self, resume=False, on_iteration=None):
        ScriptedTrainer.resumed = resume
        for iteration in range(1, self.iterations + 1):
            on_iteration(iteration, self.metrics)
        return self.metrics


# The scalar metrics of a real iteration (the values do not matter): a two-member Leduc population,
# and Leduc self-play without evaluation.
LEDUC_POPULATION = {
    **{f"{m}/leduc_holdem/{seat}/{k}": 0.5 for m in ("m0", "m1") for seat in ("player_0", "player_1")
       for k in ("return", "win", "draw", "invalid_rate", "baseline", "adv_mean", "response_tokens")},
    **{f"{m}/{k}": 0.1 for m in ("m0", "m1") for k in ("loss/policy", "policy/grad_norm", "optim/lr")},
    "rollout/invalid_rate": 0.1, "elo/m0": 1504.0, "elo/m1": 1496.0, "population/eval_matches": 2, "population/snapshots": 4,
}  # fmt: skip
LEDUC = {
    **{f"leduc_holdem/{seat}/{k}": 0.25 for seat in ("player_0", "player_1") for k in ("return", "win", "draw", "baseline")},
    "loss/policy": 0.1, "policy/grad_norm": 0.2, "rollout/invalid_rate": 0.0, "perf/rollout_tokens_per_s": 900.0,
}  # fmt: skip


@pytest.mark.parametrize("metrics", [LEDUC_POPULATION, LEDUC], ids=["leduc population", "leduc"])
def test_the_progress_and_done_lines_show_the_metrics_the_run_has(metrics, tmp_path, monkeypatch):
    ScriptedTrainer.metrics = metrics
    monkeypatch.setattr("coevo.cli.Trainer", ScriptedTrainer)
    config = tmp_path / "leduc.toml"
    config.write_text(Path(KUHN).read_text().replace("kuhn_poker = 1.0", "leduc_holdem = 1.0").replace('"nash", "always_bet", ', ""))
    population = ["--set", "population.size=2"] if metrics is LEDUC_POPULATION else []
    result = runner.invoke(app, ["train", str(config), "--iterations", "2", "--run-dir", str(tmp_path / "run"), *population])
    assert result.exit_code == 0, result.output
    progress = next(line for line in result.output.splitlines() if line.startswith("iteration 2/2"))
    done = next(line for line in result.output.splitlines() if line.startswith("done:"))
    first = "elo m0 1504" if metrics is LEDUC_POPULATION else "player_0 return 0.25"  # the headline's first metric
    assert first in progress and done.startswith(f"done: {first}  "), result.output
    assert "invalid" in done, result.output


@pytest.mark.slow
def test_a_real_leduc_population_run_shows_a_headline(tmp_path):
    leduc = tmp_path / "leduc_tiny.toml"
    leduc.write_text(Path(KUHN).read_text().replace("kuhn_poker = 1.0", "leduc_holdem = 1.0").replace('"nash", "always_bet", ', ""))
    population = tmp_path / "leduc_population.toml"
    population.write_text((EXAMPLES / "kuhn_population.toml").read_text().replace("kuhn_tiny.toml", "leduc_tiny.toml"))
    sets = ["rollout.matches=8", "rollout.concurrency=8", "population.size=2", "population.eval_matches=2"]
    args = ["train", str(population), "--iterations", "1", "--run-dir", str(tmp_path / "run"), *[a for s in sets for a in ("--set", s)]]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    done = next(line for line in result.output.splitlines() if line.startswith("done:"))
    assert "elo m0" in done and "invalid" in done, result.output


# ---- a person in a seat ----------------------------------------------------------------------------

KUHN_RULES_START = games.make("kuhn_poker").rules_text.split(".")[0]


def test_a_human_is_told_what_a_bad_move_costs_before_and_after_it():
    result = runner.invoke(app, ["match", "kuhn_poker", "--p0", "human", "--p1", "random"], input="zz\nbet\n")
    assert result.exit_code == 0, result.output
    out = result.output
    first, second = out.index("player_0, your move:"), out.index("player_0, your move:", out.index("player_0, your move:") + 1)
    assert "(an invalid move gets 1 more try, then forfeits the match)" in out[:first]  # before they type
    after = out[first:second]
    assert "invalid ✗" in after and "last try: an invalid move forfeits the match" in after  # after the bad move
    assert "move: bet ✓" in out and "forfeit" not in out[second:]
    assert out.count(KUHN_RULES_START) == 1  # the rules, once


def test_a_second_bad_move_forfeits_with_warning():
    result = runner.invoke(app, ["match", "kuhn_poker", "--p0", "human", "--p1", "random"], input="zz\nzz\n")
    assert result.exit_code == 0, result.output
    out = result.output
    last_prompt = out.rindex("player_0, your move:")
    assert "(last try: an invalid move forfeits the match)" in out[:last_prompt]
    assert "player_0 forfeits the match" in out[last_prompt:] and "player_0 forfeited" in out


@pytest.mark.parametrize(
    "invalid, told",
    [
        ("forfeit", "(an invalid move forfeits the match)"),
        ("retry:3", "(an invalid move gets 3 more tries, then forfeits the match)"),
        ("random_legal", "(an invalid move is replaced by a random legal move, at a penalty of -1)"),
    ],
)
def test_a_human_is_told_the_rule_of_invalid_moves_in_force(invalid, told):
    result = runner.invoke(app, ["match", "kuhn_poker", "--p0", "human", "--p1", "random", "--invalid", invalid], input="bet\n")
    assert result.exit_code == 0, result.output
    assert told in result.output


def test_show_prompt_shows_a_human_what_a_person_needs_not_a_models_prompt():
    args = ["match", "kuhn_poker", "--p0", "human", "--p1", "random", "--show-prompt"]
    result = runner.invoke(app, args, input="zz\nzz\n")  # the human forfeits: no other seat plays
    assert result.exit_code == 0, result.output
    out = result.output
    assert "\\boxed" not in out and "system:" not in out and "Think step by step" not in out
    assert out.count(KUHN_RULES_START) == 1 and "Your legal moves: check, bet" in out


def test_task_forge_without_bubblewrap_is_one_line_saying_how_to_install_it_or_opt_out(monkeypatch):
    from games.task_forge import sandbox

    monkeypatch.setattr(sandbox, "_bwrap_problem", lambda: "bwrap is not installed")
    result = runner.invoke(app, ["match", "task_forge"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "make system-deps" in result.output and "--option sandbox=rlimit" in result.output


@pytest.mark.slow
def test_a_ray_pool_that_cannot_fit_is_one_line_naming_the_fields(tmp_path):
    # A process of its own, as a user runs it: Ray's loggers outlive a CliRunner's captured streams.
    done = subprocess.run(
        [sys.executable, "-m", "coevo.cli", "train", "examples/kuhn_tiny.toml", "--pool", "ray", "--set",
         "pool.num_cpus=1", "--iterations", "1", "--run-dir", str(tmp_path / "run"), "--quiet"],
        capture_output=True, text=True, cwd=Path(__file__).parents[1], timeout=300,
    )  # fmt: skip
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "pool" in line and "Ray has" in line]
    assert done.returncode == 2 and len(lines) == 1, done.stdout + done.stderr
    assert "ask for 3 CPU but Ray has 1" in lines[0] and "pool.rollout_workers" in lines[0]
    assert "Traceback" not in done.stdout + done.stderr


def test_a_task_forge_answer_without_a_box_shows_as_invalid_and_the_match_goes_on():
    result = runner.invoke(
        app, ["match", "task_forge", "--option", "attempts=1", "--option", "tool_calls=0", "--seat", "executor=human"],
        input="It is 42\n\\boxed{42}\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "invalid ✗ no \\boxed{answer} in the output" in result.output
    assert "the game took it as written; the match goes on" in result.output
    assert "forfeit" not in result.output.split("result")[-1]


def test_a_run_dir_on_a_filesystem_that_refuses_writes_is_one_line_before_work():
    target = Path("/sys/coevo-run")  # sysfs: no new folders, even for root
    result = runner.invoke(app, ["train", "examples/kuhn_tiny.toml", "--run-dir", str(target), "--quiet"])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert f"cannot write {target}" in result.output and "--run-dir" in result.output and not target.exists()


def test_config_schema_describes_every_example_and_refuses_an_unknown_field():
    result = runner.invoke(app, ["config", "schema"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    runs = [p for p in sorted(EXAMPLES.glob("*.toml")) if not p.name.startswith("sweep_")]
    assert len(runs) >= 6
    for path in runs:  # as the trainer reads it: extends resolved
        jsonschema.validate(_read(path), schema)
    assert schema["properties"]["roles"]["anyOf"][0]["additionalProperties"]["$ref"].endswith("RoleConfig")
    with pytest.raises(jsonschema.ValidationError, match="lora_rank"):
        jsonschema.validate({**_read(EXAMPLES / "kuhn_tiny.toml"), "lora_rank": 8}, schema)
    raw = tomllib.loads((EXAMPLES / "kuhn_tiny_async.toml").read_text())  # as written: extends, and replace documented
    jsonschema.validate({**raw, "replace": ["games"]}, schema)
    assert "whole" in schema["properties"]["replace"]["description"]
    assert "extends" in schema["description"] and "replace" in schema["description"]


def test_config_show_prints_the_resolved_config_that_loads_back():
    result = runner.invoke(app, ["config", "show", str(EXAMPLES / "kuhn_tiny_async.toml"), "--set", "games:={tictactoe=1.0}",
                                 "--set", "eval.opponents=['random']"])  # fmt: skip
    assert result.exit_code == 0, result.output
    shown = tomllib.loads(result.output)
    assert shown["train"] == {"mode": "async", "max_staleness": 2} and shown["games"] == {"tictactoe": 1.0}
    assert shown["optim"]["kl_coef"] == 0.5, "the extended example's values, merged in"
    assert RunConfig.model_validate(shown) == load_run_config(EXAMPLES / "kuhn_tiny_async.toml", ["games:={tictactoe=1.0}", "eval.opponents=['random']"])
    bad = runner.invoke(app, ["config", "show", str(EXAMPLES / "kuhn_tiny.toml"), "--set", "optim.lr=fast"])
    assert bad.exit_code == 2 and len(bad.output.strip().splitlines()) == 1 and "optim.lr" in bad.output


def test_a_sweep_ends_with_its_results_table_the_headline_that_moved_beside_the_settings():
    from rich.console import Console

    from coevo.cli import _results_table

    results = pd.DataFrame({
        "run": ["a", "b"], "population.matchmaker": ["pfsp", "psro"], "seed": [0, 0], "status": ["done", "done"],
        "seconds": [3.0, 4.0], "iteration": [6, 6], "rollout/invalid_rate": [0.0, 0.0], "elo/m0": [1000.0, 1010.0],
        "kuhn/population_exploitability": [0.12, 0.081234], "loss/policy": [0.1, 0.2],
    })  # fmt: skip
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(_results_table(results))
    header = [c.header for c in _results_table(results).columns]
    assert header == ["run", "population.matchmaker", "status", "iteration", "kuhn/population_exploitability", "elo/m0", "rollout/invalid_rate"]
    text = console.export_text()
    assert "0.08123" in text and "psro" in text


def test_many_varied_settings_share_one_column_and_every_header_stays_readable():
    """A sweep over role tables varies a setting per key: on an 80-column terminal each would
    shrink to a letter, so they share one column, a line each."""
    from rich.console import Console

    from coevo.cli import _results_table

    keys = ["graph", "roles.judge.player", "roles.debater.player", "roles.debater.estimator"]
    results = pd.DataFrame({
        "run": ["000", "001"], **{k: [f"{k[-4:]}-a", f"{k[-4:]}-b"] for k in keys}, "status": ["done", "done"],
        "iteration": [4, 4], "eval/graph/heldout_accuracy": [0.45, 0.64], "graph/accuracy": [0.4, 0.6],
    })  # fmt: skip
    table = _results_table(results)
    assert [c.header for c in table.columns] == ["run", "settings", "status", "iteration", "eval/graph/heldout_accuracy", "graph/accuracy"]
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(table)
    text = console.export_text()
    assert all(f"{k}={k[-4:]}-b" in text for k in keys), text
    assert "…" not in text, text
