"""One headline list for the progress line, coevo watch and the report, with a fallback for any run."""

import doctest

import pytest

import analysis.headline
from analysis.headline import headline, is_headline, label, summary_line

# Metric names as runs write them (tests/runs.py fixtures, a Leduc population, task forge).
NAMES = [
    "kuhn/exploitability", "kuhn/population_exploitability", "kuhn/m0/exploitability", "eval/kuhn_poker/random/win",
    "eval/kuhn_poker/random/loss", "eval/executor/heldout_accuracy", "eval/e0/heldout_accuracy", "forge/p_hat",
    "forge/difficulty", "forge/valid_task_rate", "elo/m0", "kuhn_poker/player_0/return", "kuhn_poker/player_1/win",
    "kuhn_poker/player_0/baseline", "m0/kuhn_poker/player_0/return", "rollout/invalid_rate", "m1/rollout/invalid_rate",
    "policy/grad_norm", "policy/entropy", "loss/policy", "perf/rollout_tokens_per_s", "optim/lr",
]  # fmt: skip


def test_the_docstring_examples():
    assert doctest.testmod(analysis.headline).failed == 0


def test_the_headline_is_ordered_most_telling_first():
    assert headline(NAMES) == [
        "kuhn/population_exploitability", "kuhn/exploitability", "kuhn/m0/exploitability", "eval/executor/heldout_accuracy",
        "eval/e0/heldout_accuracy", "forge/p_hat", "forge/difficulty", "forge/valid_task_rate", "eval/kuhn_poker/random/win",
        "elo/m0", "kuhn_poker/player_0/return", "kuhn_poker/player_1/win", "rollout/invalid_rate", "m1/rollout/invalid_rate",
        "policy/grad_norm",
    ]  # fmt: skip
    assert not any(is_headline(n) for n in ("loss/policy", "optim/lr", "m0/kuhn_poker/player_0/return", "seed"))


@pytest.mark.parametrize(
    "name, short",
    [("elo/m0", "elo m0"), ("eval/kuhn_poker/nash/win", "kuhn_poker win vs nash"), ("m1/rollout/invalid_rate", "m1 invalid"),
     ("loss/policy", "loss/policy")],
)  # fmt: skip
def test_labels_are_short(name, short):
    assert label(name) == short


def test_a_run_without_any_headline_metric_still_has_a_line():
    assert summary_line({"loss/policy": 0.5, "perf/rollout_tokens_per_s": 900.0, "iteration": 3}) == "loss/policy 0.5"
    assert summary_line({"iteration": 3, "rollout/invalid_reasons": {"no move": 2}}) == ""  # no numbers at all


def test_a_line_about_two_games_names_them():
    line = summary_line({"tictactoe/player_0/return": 0.5, "kuhn_poker/player_0/return": -0.25})
    assert line == "kuhn_poker player_0 return -0.25  tictactoe player_0 return 0.5"
