"""The reference game: its parser, its rules and its scripted pair against random play."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import games
from games.play import RandomPlayer, play_match
from games.reference import CELLS, HeuristicPlayer


def _env(seed: int, guesser: bool = False):
    env = games.make("reference_game")
    env.reset(seed=seed)
    if guesser:
        env.step("clue: filled a1")
    return env


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), guesser=st.booleans(), text=st.text(max_size=60))
def test_parser_never_raises_and_reads_its_own_output(seed, guesser, text):
    env = _env(seed, guesser)
    parsed = env.parse_move(env.agent_selection, text)
    assert parsed.valid or parsed.reason
    if parsed.valid:
        assert env.parse_move(env.agent_selection, parsed.move).move == parsed.move


@settings(max_examples=30, deadline=None)
@given(number=st.integers(1, 3), cell=st.sampled_from(CELLS))
def test_valid_moves_round_trip(number, cell):
    assert _env(0).parse_move("player_0", f"Clue: {cell.upper()} is filled.").move == f"clue: {cell} is filled"
    assert _env(0, True).parse_move("player_1", f"**Grid {number}.**").move == f"guess: {number}"


def test_a_guess_naming_no_grid_or_two_grids_is_invalid():
    env = _env(0, True)
    for text in ("grid 12", "a2", "2.5", "1 or 3", "none"):
        assert not env.parse_move("player_1", text).valid, text


def test_the_guess_ends_the_match_rewarding_both_only_for_the_target():
    for seed in range(6):
        env = _env(seed, True)
        rules = env.unwrapped.rules
        pick = rules.order.index(rules.target) + 1 if seed % 2 else rules.order.index((rules.target + 1) % 3) + 1
        env.step(f"guess: {pick}")
        assert all(env.terminations.values())
        assert env.rewards == dict.fromkeys(("player_0", "player_1"), float(seed % 2))


def test_the_guesser_sees_the_grids_in_its_own_order():
    views = {seed: games.make("reference_game") for seed in range(20)}
    differ = 0
    for seed, env in views.items():
        env.reset(seed=seed)
        differ += env.unwrapped.rules.view(0).split("The target")[0] != env.unwrapped.rules.view(1).split("No clue")[0]
    assert differ >= 10


def _solved(players, matches: int = 300) -> float:
    return sum(play_match(games.make("reference_game"), players, seed=s).returns["player_0"] for s in range(matches)) / matches


def test_the_scripted_pair_solves_every_episode_and_random_play_about_a_third():
    assert _solved({"player_0": HeuristicPlayer(), "player_1": HeuristicPlayer()}) == 1.0
    assert 0.2 <= _solved({"player_0": RandomPlayer(), "player_1": RandomPlayer()}) <= 0.45
