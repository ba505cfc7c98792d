"""OpenSpiel games behind the AEC API: what the adapter adds to OpenSpiel's own rules (chance,
names, prompts, forfeits), on small variants of a range of games."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, render_test, seed_test

pyspiel = pytest.importorskip("pyspiel")

import games  # noqa: E402 - after the skip: the adapter needs open_spiel
from games.core import LEGAL_MOVES, bare, normalize  # noqa: E402
from games.openspiel_env import OpenSpielEnv  # noqa: E402
from games.play import RandomPlayer, play_match  # noqa: E402

SMALL = [
    "openspiel/kuhn_poker",
    "openspiel/leduc_poker",
    "openspiel/liars_dice(numdice=1)",
    "openspiel/goofspiel(num_cards=3,imp_info=True)",  # simultaneous, played in turn
    "openspiel/tic_tac_toe",
    "openspiel/phantom_ttt",
    "openspiel/dark_hex(board_size=3)",
    "openspiel/first_sealed_auction(max_value=3)",  # general-sum
    "openspiel/breakthrough(rows=4,columns=4)",  # no information-state string: observations
    "openspiel/oshi_zumo(coins=4,size=1,horizon=6)",  # simultaneous, deterministic
]


def players(env) -> dict:
    return {a: RandomPlayer() for a in env.possible_agents}


@pytest.mark.parametrize("name", SMALL)
def test_pettingzoo_checkers(name):
    api_test(games.make(name), num_cycles=300)
    seed_test(lambda: games.make(name), num_cycles=100)
    render_test(lambda render_mode=None: games.make(name, render_mode=render_mode))


@pytest.mark.parametrize("name", SMALL)
def test_random_matches_pay_openspiel_returns(name):
    env = games.make(name)
    zero_sum = env.game.get_type().utility == pyspiel.GameType.Utility.ZERO_SUM
    for seed in range(10):
        result = play_match(env, players(env), seed)
        assert not result.truncated and not result.invalid and result.turns <= env.max_turns
        assert env.state.is_terminal()
        assert list(result.returns.values()) == pytest.approx(env.state.returns())
        if zero_sum:
            assert sum(result.returns.values()) == pytest.approx(0)


def _canonical_chars(text: str) -> str:
    return re.sub(r"[\W_]", "", normalize(text))


@pytest.mark.parametrize("name", SMALL)
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_legal_play_names_moves_as_openspiel_does(name, seed):
    """At every turn: the legal moves are OpenSpiel's names up to case and punctuation, distinct,
    parse as themselves and map back to their actions; the prompt lists them last. At the end the
    rewards paid add up to OpenSpiel's returns."""
    env = games.make(name)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    returns = dict.fromkeys(env.possible_agents, 0.0)
    for agent in env.agent_iter():
        _, reward, terminated, truncated, _ = env.last()
        returns[agent] += reward
        if terminated or truncated:
            env.step(None)
            continue
        state, player = env.state, env.possible_agents.index(agent)
        legal = env.legal_moves(agent)
        assert len(set(legal)) == len(legal)
        for action, move in zip(state.legal_actions(), legal):
            assert env.move_names[action] == move and env.action_of(move) == action and bare(move) == move
            assert _canonical_chars(move) == _canonical_chars(state.action_to_string(player, action))
            assert env.parse_move(agent, move.upper()).move == move
        assert env.observe(agent)["prompt"].splitlines()[-1] == f"{LEGAL_MOVES} {', '.join(legal)}"
        env.step(env.action_of(legal[rng.integers(len(legal))]))
        assert env.infos[agent]["valid"]
    assert list(returns.values()) == pytest.approx(env.state.returns())


def test_names_follow_the_seat_to_move():
    env = games.make("openspiel/tic_tac_toe")
    env.reset(seed=0)
    assert env.move_names[2] == "x 0,2" and len(env.move_names) == 9
    env.step(env.action_of("x 1,1"))
    assert env.legal_moves("player_1")[0] == "o 0,0" and env.move_names[2] == "o 0,2"
    assert env.legal_moves("player_0") == []
    assert not env.parse_move("player_1", "o 1,1").valid  # taken: a real move, not legal now
    assert env.parse_move("player_1", "I'll take o 2,2 then", lenient=True).move == "o 2,2"


class TwoNamesState:
    """A stand-in state whose two legal actions OpenSpiel would name alike after folding case."""

    def current_player(self):
        return 0

    def legal_actions(self, player=None):
        return [0, 2]

    def is_terminal(self):
        return False

    def action_to_string(self, player, action):
        return ["Bid!", "Raise", "bid"][action]


def test_legal_moves_that_share_a_name_are_told_apart_by_action():
    env = games.make("openspiel/leduc_poker")  # three actions, as the stand-in has
    assert env.move_names_of(TwoNamesState()) == ["bid #0", "raise", "bid #2"]


def test_a_masked_out_action_forfeits():
    env = games.make("openspiel/tic_tac_toe")
    env.reset(seed=0)
    env.step(4)  # x takes the centre
    env.step(4)  # o plays it again
    info = env.infos["player_1"]
    assert info["valid"] is False and info["move"] is None
    assert info["reason"].startswith("'o 1,1' is not legal now; legal moves: o 0,0")
    assert env.rewards == {"player_0": 1.0, "player_1": -1.0}
    assert all(env.terminations.values())
    env.reset(seed=0)
    env.step(9)
    assert env.infos["player_0"]["reason"] == "action 9 is not a move index in [0, 9)"


def test_a_forfeit_in_a_general_sum_game_costs_the_offender_only():
    env = games.make("openspiel/first_sealed_auction(max_value=3)", illegal_reward=-2.0)
    env.reset(seed=0)
    offender = env.agent_selection
    env.step(3)  # no such bid
    assert env.infos[offender]["valid"] is False
    assert env.rewards == {a: (-2.0 if a == offender else 0.0) for a in env.possible_agents}


def test_chance_and_rewards_run_inside_the_env():
    env = games.make("openspiel/kuhn_poker")
    deals = set()
    for seed in range(30):
        env.reset(seed=seed)
        assert env.agent_selection == "player_0" and not env.state.is_chance_node()
        deals.add(str(env.state))
    assert len(deals) == 6  # every deal of two of the three cards
    env.reset(seed=0)
    env.step(env.action_of("bet"))
    env.step(env.action_of("pass"))  # folds
    assert env.rewards == {"player_0": 1.0, "player_1": -1.0} and all(env.terminations.values())


def test_the_prompt_is_rules_view_and_moves():
    env = games.make("openspiel/kuhn_poker")
    env.reset(seed=0)
    card = "JQK"[int(env.state.information_state_string(0))]
    first, second = env.observe("player_0")["prompt"], env.observe("player_1")["prompt"]
    assert first.startswith(env.rules_text + "\n\n") and "The deck is J, Q, K" in first
    assert first.splitlines()[-3:] == ["Moves so far: none yet.", f"Your card: {card}", f"{LEGAL_MOVES} pass, bet"]
    assert second.splitlines()[-1] == "Waiting for player_0 to move."
    env.step(env.action_of("pass"))
    env.step(env.action_of("bet"))  # Kuhn in words: the moves by who made them, the card last
    said = env.observe("player_0")["prompt"].splitlines()[-3:-1]
    assert said == ["Moves so far: you pass, opponent bet.", f"Your card: {card}"]
    three = games.make("openspiel/kuhn_poker(players=3)")
    three.reset(seed=0)  # no words for a bigger deck: OpenSpiel's own string
    assert three.observe("player_0")["prompt"].splitlines()[-2] == three.state.information_state_string(0)
    tic = games.make("openspiel/tic_tac_toe")
    tic.reset(seed=0)
    tic.step(tic.action_of("x 0,0"))
    assert "x..\n...\n..." in tic.observe("player_1")["prompt"]  # the board, not OpenSpiel's action-id history
    goof = games.make("openspiel/goofspiel(num_cards=3,imp_info=True)")
    assert "players choose in turn" in goof.rules_text and goof.metadata["name"] == "openspiel_goofspiel"


@pytest.mark.parametrize("seat", [0, 1])
def test_a_prompt_shows_only_its_seats_information_state(seat):
    env = games.make("openspiel/leduc_poker")
    prompts: dict[str, str] = {}
    for seed in range(60):
        env.reset(seed=seed)
        key = env.state.information_state_string(seat)
        prompt = env.observe(f"player_{seat}")["prompt"]
        assert prompts.setdefault(key, prompt) == prompt
    assert len(prompts) == 6 and len(set(prompts.values())) == 3  # one per private card; suits never matter


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("nope", "Unknown game 'nope'"),
        ("kuhn_poker(foo=1)", "Unknown parameter 'foo'"),
        ("kuhn_poker(players=", "Missing closing bracket"),
        ("mfg_crowd_modelling", "mean_field games cannot be played turn by turn"),
        ("negotiation", "samples its own chance events"),
    ],
)
def test_a_game_that_cannot_be_played_fails_in_one_line(spec, said):
    with pytest.raises(ValueError, match=re.escape(said)) as err:
        games.make(f"openspiel/{spec}")
    assert "\n" not in str(err.value) and str(err.value).startswith(f"openspiel/{spec}: ")
    assert not games.known(f"openspiel/{spec}")


def test_registry():
    assert {"openspiel/kuhn_poker", "openspiel/leduc_poker", "openspiel/liars_dice"} <= set(games.list())
    assert games.known("openspiel/oshi_zumo(coins=4)") and games.known("kuhn_poker") and not games.known("chess")
    assert isinstance(games.make("openspiel/liars_dice(numdice=1)"), OpenSpielEnv)
    assert set(games.scripted_players("openspiel/leduc_poker")) == {"random"}


def test_turn_cap_truncates():
    env = games.make("openspiel/tic_tac_toe", max_turns=2)
    env.reset(seed=0)
    env.step(0)
    env.step(1)
    assert all(env.truncations.values()) and not any(env.terminations.values())
    assert env.legal_moves("player_0") == [] and env.observe("player_0")["prompt"].endswith("The match is over.")
    with pytest.raises(ValueError, match="max_turns"):
        games.make("openspiel/tic_tac_toe", max_turns=0)
