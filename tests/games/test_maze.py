"""The collaborative maze: its parser, its rules, its halves, and what talking buys."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import games
from games.maze import STEPS, HeuristicPlayer, cell_name, open_graph, read_move
from games.play import RandomPlayer, play_match
from tests.runs import two_short_iterations

KNOBS = {"size": st.integers(2, 8), "density": st.floats(0.0, 0.4), "seed": st.integers(0, 2**16)}


def _rules(seed: int, **options):
    env = games.make("maze", **options)
    env.reset(seed=seed)
    return env, env.unwrapped.rules


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=80), lenient=st.booleans())
def test_the_parser_never_raises_and_reads_its_own_output(text, lenient):
    move = read_move(text, lenient)
    assert move is None or move in STEPS or move.startswith("say: ")
    if move is not None:
        assert read_move(move) == move


@settings(max_examples=30, deadline=None)
@given(direction=st.sampled_from([*STEPS, "north", "south", "west", "east"]), message=st.text("ab c1,", min_size=1, max_size=20))
def test_moves_and_messages_round_trip(direction, message):
    assert read_move(f"**{direction.upper()}**") in STEPS
    if message.strip():
        assert read_move(f"Say: {message}") == "say: " + " ".join(message.split())
    assert read_move(f"I would go {direction} now", lenient=True) in STEPS
    assert read_move(f"I would go {direction} now") is None  # strict: the move alone


@settings(max_examples=40, deadline=None)
@given(**KNOBS)
def test_every_maze_is_solvable_and_each_seat_sees_only_its_half(size, density, seed):
    _, rules = _rules(seed, size=size, density=density)
    assert nx.has_path(open_graph(size, rules.walls), rules.start, rules.goal)
    mapper, finder = rules.view(0), rules.view(1)
    assert "#" in mapper or not rules.walls
    assert cell_name(rules.goal) in finder and "goal is at" not in mapper
    assert "#" not in finder
    _, solo = _rules(seed, size=size, density=density, split=False)
    assert solo.walls == rules.walls and all(cell_name(solo.goal) in solo.view(s) for s in (0, 1))


@settings(max_examples=30, deadline=None)
@given(**KNOBS, moves=st.lists(st.sampled_from(list(STEPS)), max_size=30))
def test_moves_keep_the_token_on_open_cells_and_reward_only_the_goal(size, density, seed, moves):
    env, rules = _rules(seed, size=size, density=density)
    for move in moves:
        if rules.to_move is None:
            break
        before = rules.token
        env.step(move)
        assert rules.token not in rules.walls and abs(rules.token[0] - before[0]) + abs(rules.token[1] - before[1]) <= 1
        solved = rules.token == rules.goal
        assert env.rewards == dict.fromkeys(env.possible_agents, float(solved))
        assert all(env.terminations.values()) == (solved or len(rules.history) >= rules.turns)


def test_a_message_costs_a_turn_and_reaches_the_partner():
    env, rules = _rules(0, turns=2)
    env.step("say: walls at b2")
    assert "partner: say: walls at b2 (said)" in rules.view(1)
    env.step("say: goal at a1")
    assert all(env.terminations.values()) or rules.token == rules.goal


def test_bad_knobs_are_refused_with_their_name():
    for options, field in (({"size": 13}, "size"), ({"density": 1.0}, "density"), ({"turns": 0}, "turns")):
        with pytest.raises(ValueError, match=field):
            games.make("maze", **options).reset(seed=0)


def _success(player, matches: int = 100, **options) -> float:
    pair = {"player_0": player(), "player_1": player()}
    return sum(play_match(games.make("maze", **options), pair, seed=s).returns["player_0"] for s in range(matches)) / matches


def test_talking_closes_the_gap_silence_leaves_open():
    """At a tight budget the solo view beats the pair (talking costs turns), which beats silence."""
    tight = {"size": 7, "density": 0.35, "turns": 10}
    solo, pair = _success(HeuristicPlayer, split=False, **tight), _success(HeuristicPlayer, **tight)
    silent, random = _success(lambda: HeuristicPlayer(talk=False), **tight), _success(RandomPlayer, **tight)
    assert solo >= pair > silent + 0.1 > random + 0.1


def test_the_tiny_example_trains_with_its_difficulty(tmp_path):
    """Two iterations of examples/maze_tiny.toml: its [game_options.maze] reach every match."""
    episodes = two_short_iterations("maze_tiny.toml", tmp_path)
    assert len(episodes) == 16 and all(e.game == "maze" for e in episodes)
    assert all("The grid is 4x4" in e.turns[0].observation and "of 12." in e.turns[0].observation for e in episodes)
    for e in episodes:
        if not e.forfeited_by:
            assert e.rewards["player_0"] == e.rewards["player_1"] in (0.0, 1.0)
