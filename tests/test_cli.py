"""The `coevo` command line, through typer's runner and as the installed console script."""

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import games
from coevo.cli import app
from marl.episode import Episode

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
    lines = (Path(__file__).parent.parent / "README.md").read_text().splitlines()
    return [line.split()[1:] for line in lines if line.startswith(".venv/bin/coevo match ")]


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
