"""Every registered game through PettingZoo's own checkers, full matches of legal moves, a pickle
round-trip and its info record."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
from pettingzoo.test import api_test, max_cycles_test, render_test, seed_test
from pettingzoo.utils.conversions import aec_to_parallel

import games
from games.core import LEGAL_MOVES, TurnTakingEnv
from games.play import RandomPlayer, play_match
from games.textarena_env import TextArenaEnv
from tests.games.helpers import advance, legal_players, random_players

# Ours and TextArena's: a cap in turns, max_turns (a one-turn game, graph/solo, has nothing to cut).
TURN_CAPPED = [g for g in games.list() if isinstance(env := games.make(g), TurnTakingEnv) and env.max_turns > 1]


class CycleCapped:
    """What ``max_cycles_test`` takes: a module whose ``env``/``parallel_env`` factories accept
    ``max_cycles``, handed to the game as it is (PettingZoo's own argument, e.g. rps's).

    Its contract is a parallel one: ``max_cycles`` parallel steps in which every agent acts, and
    in the AEC form ``max_cycles`` moves per agent. Only a game that PettingZoo may convert to
    parallel (``is_parallelizable``) can meet both; a turn-based game cannot (one move per
    parallel step under ``turn_based_aec_to_parallel``, so its steps and its moves per agent
    differ by the number of seats), and PettingZoo's own suite skips the test for its classic
    games. Ours are turn-based with a cap in turns, ``max_turns``, checked by
    ``test_turn_cap_ends_the_match_after_exactly_max_turns`` instead.
    """

    def __init__(self, name: str):
        self.name = name

    def env(self, max_cycles: int):
        return games.make(self.name, max_cycles=max_cycles)

    def parallel_env(self, max_cycles: int):
        return aec_to_parallel(self.env(max_cycles))


@pytest.mark.parametrize("name", games.list())
def test_pettingzoo_checkers(name):
    api_test(games.make(name), num_cycles=300)
    seed_test(lambda: games.make(name), num_cycles=100)
    render_test(lambda render_mode=None: games.make(name, render_mode=render_mode))
    if games.make(name).metadata["is_parallelizable"]:
        max_cycles_test(CycleCapped(name))


@pytest.mark.parametrize("name", games.list())
def test_resets_without_a_seed(name):
    env = games.make(name)
    env.reset()  # a fresh env draws its own seed (gymnasium's rule)
    assert env.agent_selection in env.possible_agents
    env.reset(seed=3)  # and a seed still fixes the match
    fresh = games.make(name)
    fresh.reset(seed=3)
    for agent in env.possible_agents:
        assert env.observe(agent)["prompt"] == fresh.observe(agent)["prompt"]


@pytest.mark.parametrize("name", TURN_CAPPED)
def test_text_games_render_the_state_as_text(name, capsys):
    ansi = games.make(name, render_mode="ansi")
    ansi.reset(seed=0)
    text = ansi.render()
    assert isinstance(text, str) and text
    human = games.make(name, render_mode="human")
    human.reset(seed=0)  # human mode prints the state as it changes, as gymnasium's does
    assert capsys.readouterr().out == text + "\n"
    assert human.render() is None
    assert capsys.readouterr().out == text + "\n"


def assert_moves_match_observations(env, mover: str) -> None:
    """Only the mover has legal moves, and every seat's observation says so: the mover's prompt
    ends by listing exactly them, its mask (if any) marks exactly them, the others' are empty."""
    for agent in env.agents:
        obs = env.observe(agent)
        assert env.observation_space(agent).contains(obs), f"{agent}: observation outside its space"
        if isinstance(env, TextArenaEnv):
            continue  # TextArena lists moves in its own words; its players read them from the prompt
        legal = env.legal_moves(agent)
        if agent == mover:
            assert legal, f"{mover} is to move but has no legal move"
            assert obs["prompt"].splitlines()[-1] == f"{LEGAL_MOVES} {', '.join(legal)}"
        else:
            assert legal == [] and LEGAL_MOVES not in obs["prompt"].splitlines()[-1], f"{agent} may move out of turn"
        if "action_mask" in obs:
            assert np.flatnonzero(obs["action_mask"]).tolist() == sorted(env.action_of(m) for m in legal)


def play_legal_match(env, players: dict, seed: int) -> tuple[dict[str, float], int, bool]:
    """One match through ``env.step``, checking every turn: (returns, moves, whether it ended by
    termination rather than truncation)."""
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    returns, moves, ended_by_termination = dict.fromkeys(env.possible_agents, 0.0), 0, None
    for agent in env.agent_iter():
        _, reward, terminated, truncated, _ = env.last()
        returns[agent] += float(reward)
        if terminated or truncated:
            if ended_by_termination is None:  # the first dead seat says how the match ended
                ended_by_termination = terminated
            env.step(None)
            continue
        assert_moves_match_observations(env, agent)
        env.step(players[agent].act(env, agent, rng))
        moves += 1
        if isinstance(env, TurnTakingEnv):  # PettingZoo's classic envs record no validity; their moves come from the mask
            assert env.infos[agent]["valid"], f"move {moves} by {agent}: {env.infos[agent]}"
    return returns, moves, ended_by_termination


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("name", games.list())
def test_full_matches_of_legal_moves(name, seed):
    env = games.make(name)
    returns, moves, terminated = play_legal_match(env, legal_players(name, env), seed)
    if not terminated:  # the turn cap: ours in turns, PettingZoo's (rps) in cycles of every agent
        cap = env.max_turns if isinstance(env, TurnTakingEnv) else env.unwrapped.max_cycles * len(env.possible_agents)
        assert moves == cap, f"truncated after {moves} moves, cap {cap}"
    if isinstance(env, games.TextGameEnv):
        info = env.info
        assert moves <= info.max_turns
        for seat, ret in returns.items():
            assert info.min_return <= ret <= info.max_return, f"{seat} returned {ret}, outside its bounds"
        if info.zero_sum:
            assert sum(returns.values()) == 0
    else:  # PettingZoo's classic games and TextArena's two-player games are won and lost: zero-sum
        assert sum(returns.values()) == pytest.approx(0)
    if name == "task_forge":
        outcome = env.outcome()
        assert outcome["valid_task"] and len(outcome["attempts"]) == env.rules.k
        assert all(a["invalid_reason"] == a["verdict_invalid_reason"] == "" for a in outcome["attempts"])


@pytest.mark.parametrize("name", TURN_CAPPED)
def test_turn_cap_ends_the_match_after_exactly_max_turns(name):
    # max_cycles_test's AEC half, for a cap in turns and with legal moves (random text would end
    # the match at once): at the cap every seat is truncated and stepped once more, with None.
    cap = 1  # Kuhn's and Leduc's shortest matches (bet, fold) end by themselves in two
    env = games.make(name, max_turns=cap)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    players = legal_players(name, env)
    moves, dead_steps = 0, dict.fromkeys(env.possible_agents, 0)
    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            assert truncated and not terminated, f"{name} ended by itself within {cap} moves"
            dead_steps[agent] += 1
            env.step(None)
            continue
        env.step(players[agent].act(env, agent, rng))
        moves += 1
    assert moves == cap
    assert dead_steps == dict.fromkeys(env.possible_agents, 1)


@pytest.mark.parametrize("name", games.list())
def test_pickle_round_trip(name):
    env = games.make(name)
    env.reset(seed=7)
    copy = pickle.loads(pickle.dumps(env))
    # PettingZoo's classic envs pickle their constructor arguments only (EzPickle), so compare
    # after a fresh reset; our own envs also keep a match in progress (next test).
    env.reset(seed=7)
    copy.reset(seed=7)
    agent = env.agent_selection
    assert copy.agent_selection == agent
    assert copy.observe(agent)["prompt"] == env.observe(agent)["prompt"]


@pytest.mark.parametrize("name", list(games.GAMES))
def test_pickle_keeps_a_match_in_progress(name):
    env = games.make(name)
    env.reset(seed=7)
    env.step(RandomPlayer().act(env, env.agent_selection, np.random.default_rng(0)))
    copy = pickle.loads(pickle.dumps(env))
    for agent in env.possible_agents:
        assert copy.observe(agent)["prompt"] == env.observe(agent)["prompt"]


@pytest.mark.parametrize("name", list(games.GAMES))
@pytest.mark.parametrize("seed", range(40))
def test_matches_respect_the_info_record(name, seed):
    env = games.make(name)
    result = play_match(env, random_players(env), seed)
    info = env.info
    assert result.turns <= info.max_turns, f"{name}: {result.turns} turns, cap {info.max_turns}"
    for seat, ret in result.returns.items():
        assert info.min_return <= ret <= info.max_return, f"{name}: {seat} returned {ret}, outside its bounds"
    if info.zero_sum:
        assert sum(result.returns.values()) == 0


def test_turn_cap_truncates_as_a_draw():
    env = games.make("tictactoe", max_turns=2)
    env.reset(seed=0)
    advance(env, [0, 0])
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert env._cumulative_rewards == {"player_0": 0.0, "player_1": 0.0}


def test_illegal_action_forfeits_and_stays_zero_sum():
    env = games.make("tictactoe")
    env.reset(seed=0)
    env.step(4)  # X takes b2
    env.step(4)  # O plays the occupied b2
    assert env.infos["player_1"]["valid"] is False
    assert "'b2' is not legal now" in env.infos["player_1"]["reason"]
    assert env.rewards == {"player_0": 1.0, "player_1": -1.0}
    assert all(env.terminations.values())


def test_illegal_text_forfeits_in_a_general_sum_game():
    env = games.make("simple_negotiation", illegal_reward=-5.0)
    env.reset(seed=0)
    env.step("I would like some gold please")
    assert env.rewards == {"player_0": -5.0, "player_1": 0.0}
    assert env.infos["player_0"]["reason"].startswith("not a move")


@pytest.mark.parametrize("bad", [{"rounds": 0}, {"max_turns": 0}, {"render_mode": "rgb_array"}])
def test_bad_options_fail_at_construction(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        games.make("kuhn_poker", **bad)


def test_unknown_game_names_the_known_ones():
    with pytest.raises(ValueError, match="tictactoe"):
        games.make("chess")


def test_games_import_without_torch():
    # DESIGN.md: games is pure rules. A finder that refuses torch makes `import torch` fail as it
    # would where torch is not installed (a None in sys.modules would trip scipy's torch probe).
    code = (
        "import sys\n"
        "class NoTorch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'): raise ImportError('no torch here')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "import games; games.make('kuhn_poker').reset(seed=0); games.make('task_forge').reset(seed=0)\n"
        "assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
