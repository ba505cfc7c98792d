"""The `coevo` command line, through typer's runner and as the installed console script."""

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import games
from coevo.cli import app

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
