"""PettingZoo classic envs and TextArena games served as text games."""

import gymnasium
import numpy as np
import pettingzoo
import pytest
from pettingzoo import AECEnv

import games
from games.play import RandomPlayer, play_match


def test_connect_four_renders_the_board_from_the_observers_side():
    env = games.make("classic/connect_four-v3")
    env.reset(seed=0)
    assert env.legal_moves("player_0")[0] == "column 1"
    env.step(env.action_of("column 4"))
    prompt = env.observe("player_1")["prompt"]
    assert prompt.splitlines()[-2] == ". . . O . . ."  # the opponent's piece, bottom row
    env.step(env.action_of("column 4"))
    assert env.observe("player_0")["prompt"].splitlines()[-3] == ". . . O . . ."


def test_connect_four_parses_named_columns():
    env = games.make("classic/connect_four-v3")
    env.reset(seed=0)
    parsed = env.parse_move("player_0", " COLUMN  4.")
    assert parsed.move == "column 4" and env.action_of(parsed.move) == 3
    assert env.parse_move("player_0", "I drop into COLUMN  4.", lenient=True).move == "column 4"
    assert "not a move" in env.parse_move("player_0", "I drop into COLUMN  4.").reason
    assert "not a move" in env.parse_move("player_0", "column 9").reason


def test_rps_names_moves_and_shows_the_opponents_last_move():
    env = games.make("classic/rps-v2")
    env.reset(seed=0)
    assert "none yet" in env.observe("player_0")["prompt"]
    assert env.legal_moves("player_0") == ["rock", "paper", "scissors"]
    env.step(env.action_of("paper"))
    env.step(env.action_of("rock"))
    assert "Opponent's previous move: rock." in env.observe("player_0")["prompt"]


def test_pettingzoo_leduc_shows_only_own_card():
    env = games.make("classic/leduc_holdem-v4")
    env.reset(seed=0)
    prompt = env.observe("player_0")["prompt"]
    assert "Your card:" in prompt and "Public card: not dealt yet" in prompt
    assert set(env.legal_moves("player_0")) <= {"call", "raise", "fold", "check"}


def test_generic_fallback_for_envs_without_a_renderer():
    env = games.make("classic/texas_holdem-v4")
    env.reset(seed=0)
    prompt = env.observe(env.agent_selection)["prompt"]
    assert "Observation: [" in prompt and "action 0" in prompt
    result = play_match(env, {a: RandomPlayer() for a in env.possible_agents}, 0)
    assert sum(result.returns.values()) == pytest.approx(0)


class BoxActionEnv(AECEnv):
    """The least AEC env with a continuous action space."""

    metadata = {"name": "box_action_v0"}
    possible_agents = ["player_0"]

    def action_space(self, agent):
        return gymnasium.spaces.Box(-1, 1, (2,))


def test_adapter_refuses_non_discrete_actions():
    pettingzoo.register("aec", "coevo_test/box_action-v0", BoxActionEnv)
    with pytest.raises(ValueError, match="text play needs Discrete actions"):
        games.make("coevo_test/box_action-v0")


class ScriptedText:
    """Says the same text every turn (a stand-in for a model that always checks)."""

    def __init__(self, text):
        self.text = text

    def act(self, env, agent, rng):
        return self.text


def test_textarena_kuhn_plays_to_the_end_with_zero_sum_rewards():
    env = games.make("textarena/KuhnPoker-v0")
    result = play_match(env, {a: ScriptedText("I check. [check]") for a in env.possible_agents}, seed=4)
    assert sum(result.returns.values()) == 0
    assert result.turns == 6  # 3 hands of check-check
    env.reset(seed=4)
    assert "Your card is" in env.observe("player_0")["prompt"]


def test_textarena_invalid_text_gets_one_retry_then_loses():
    env = games.make("textarena/TicTacToe-v0")
    result = play_match(env, {a: ScriptedText("no idea") for a in env.possible_agents}, seed=0)
    first = env.possible_agents[0]
    assert result.turns == 2 and result.returns[first] == -1


def test_textarena_games_are_isolated_from_each_others_randomness():
    a, b = games.make("textarena/KuhnPoker-v0"), games.make("textarena/KuhnPoker-v0")
    a.reset(seed=1)
    b.reset(seed=1)
    a.step("[bet]")
    np.random.seed(0)  # neither the global numpy nor Python random state may leak in
    b.step("[bet]")
    assert a.observe("player_0")["prompt"] == b.observe("player_0")["prompt"]
