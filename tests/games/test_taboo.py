"""Taboo: its parser, its rules (violations, a correct guess, the round limit) and its scripted pair."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import games
from games.play import RandomPlayer, play_match
from games.taboo import VOCABULARY, WORDS, HeuristicPlayer, said_taboo
from tests.runs import two_short_iterations


def _env(seed: int, **options):
    env = games.make("taboo", **options)
    env.reset(seed=seed)
    return env


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), guesser=st.booleans(), text=st.text(max_size=60))
def test_parser_never_raises_and_reads_its_own_output(seed, guesser, text):
    env = _env(seed)
    if guesser:
        env.step("clue: orchard")
    agent = env.agent_selection
    parsed = env.parse_move(agent, text)
    assert parsed.valid or parsed.reason
    if parsed.valid:
        assert env.parse_move(agent, parsed.move).move == parsed.move


@settings(max_examples=30, deadline=None)
@given(word=st.sampled_from(VOCABULARY), guesser=st.booleans())
def test_valid_moves_round_trip(word, guesser):
    env = _env(0)
    if guesser:
        env.step("clue: orchard")
    move = f"{'guess' if guesser else 'clue'}: {word}"
    assert env.parse_move(env.agent_selection, f"  **{move.upper()}**!").move == move


def test_a_clue_with_the_target_or_a_taboo_stem_ends_the_match_with_zero():
    env = _env(0)
    target, (taboo, _) = env.unwrapped.rules.target, WORDS[env.unwrapped.rules.target]
    env.step(f"It is like {taboo[0].upper()}s in a way")
    assert all(env.terminations.values()) and set(env.rewards.values()) == {0.0}
    assert env.infos["player_0"]["valid"] is False and taboo[0] in env.infos["player_0"]["reason"]
    assert said_taboo(f"{target}ing", (target,)) == target and said_taboo("a fine day", (target,)) == ""


def test_a_correct_guess_ends_the_match_with_one_for_both():
    env = _env(3)
    target = env.unwrapped.rules.target
    env.step("clue: something")
    env.step(f"Guess: {target.title()}!")
    assert all(env.terminations.values()) and env.rewards == {"player_0": 1.0, "player_1": 1.0}


def test_wrong_guesses_end_the_match_after_the_last_round():
    env = _env(5, rounds=2)
    wrong = next(w for w in WORDS if w != env.unwrapped.rules.target)
    for _ in range(2):
        assert not any(env.terminations.values())
        env.step("clue: something")
        env.step(f"guess: {wrong}")
    assert all(env.terminations.values()) and set(env.rewards.values()) == {0.0}


def _solved(players, matches: int = 100) -> float:
    wins = 0
    for seed in range(matches):
        result = play_match(games.make("taboo"), players, seed=seed)
        wins += result.returns["player_0"] == 1.0
    return wins / matches


def test_the_scripted_pair_solves_most_episodes_and_random_play_rarely_does():
    assert _solved({"player_0": HeuristicPlayer(), "player_1": HeuristicPlayer()}) >= 0.9
    assert _solved({"player_0": RandomPlayer(), "player_1": RandomPlayer()}) <= 0.2


def test_the_tiny_example_trains_cooperatively(tmp_path):
    """Two iterations of examples/taboo_tiny.toml: both seats earn the same unless one forfeits."""
    episodes = two_short_iterations("taboo_tiny.toml", tmp_path)
    assert len(episodes) == 16 and all(e.game == "taboo" for e in episodes)
    for e in episodes:  # a forfeit costs the offender its penalty and earns its partner nothing
        if e.forfeited_by:
            assert e.rewards == {s: -1.0 if s == e.forfeited_by else 0.0 for s in e.rewards}
        else:
            assert e.rewards["player_0"] == e.rewards["player_1"] in (0.0, 1.0)
