"""Hypothesis properties that hold for every game: termination, zero-sum, determinism, no leaks."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import games
from games.play import play_match
from tests.games.helpers import advance, finite_games, random_players

ALL_PLAYABLE = [*games.GAMES, *games.PETTINGZOO_GAMES]


@pytest.mark.parametrize("name", ALL_PLAYABLE)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_play_terminates_and_zero_sum_games_sum_to_zero(name, seed):
    env = games.make(name)
    result = play_match(env, random_players(env), seed)
    cap = getattr(env, "max_turns", None) or 10_000
    assert result.turns <= cap
    assert not env.agents, "every agent must have left after the match"
    zero_sum = env.info.zero_sum if name in games.GAMES else True  # the adapted classics are
    if zero_sum:
        assert sum(result.returns.values()) == pytest.approx(0)


@pytest.mark.parametrize("name", ALL_PLAYABLE)
@given(seed=st.integers(0, 2**32 - 1))
def test_same_seed_same_match(name, seed):
    env = games.make(name)
    first = play_match(env, random_players(env), seed)
    again = play_match(games.make(name), random_players(env), seed)
    assert first.moves == again.moves
    assert first.returns == again.returns


def _prompts_until_showdown(env, seat, choices, revealed):
    prompts = []
    for c in [*choices, None]:
        if revealed(env.unwrapped.rules) or not env.agents:
            break
        prompts.append(env.observe(seat)["prompt"])
        if c is not None:
            advance(env, [c])
    return prompts


def _twin_seed(name, seed, seat, same):
    """A seed whose deal matches ``seed``'s in what ``seat`` may see but differs in the opponent's card."""
    env = games.make(name)
    env.reset(seed=seed)
    want = env.unwrapped.rules
    for other in range(seed + 1, seed + 10_000):
        env.reset(seed=other)
        rules = env.unwrapped.rules
        if same(rules, want, seat) and rules.cards[1 - seat] != want.cards[1 - seat]:
            return other
    raise AssertionError("no twin deal found")


LEAK_CASES = {
    "kuhn_poker": (
        lambda a, b, s: a.cards[s] == b.cards[s],
        lambda rules: bool(rules.past),  # a finished hand may have been shown down
    ),
    "leduc_holdem": (
        lambda a, b, s: a.cards[s] == b.cards[s] and a._public == b._public,
        lambda rules: rules.showdown,
    ),
}


@pytest.mark.parametrize("name", list(LEAK_CASES))
@given(seed=st.integers(0, 10_000), seat=st.integers(0, 1), choices=st.lists(st.integers(0, 4), max_size=8))
def test_prompt_never_depends_on_the_opponents_card_before_showdown(name, seed, seat, choices):
    same, revealed = LEAK_CASES[name]
    twin = _twin_seed(name, seed, seat, same)
    agent = f"player_{seat}"
    env_a, env_b = games.make(name), games.make(name)
    env_a.reset(seed=seed)
    env_b.reset(seed=twin)
    assert _prompts_until_showdown(env_a, agent, choices, revealed) == _prompts_until_showdown(
        env_b, agent, choices, revealed
    )


@pytest.mark.parametrize("name", finite_games())
@given(seed=st.integers(0, 1000), choices=st.lists(st.integers(0, 8), max_size=6), text=st.text())
def test_move_parser_never_raises(name, seed, choices, text):
    env = games.make(name)
    env.reset(seed=seed)
    advance(env, choices)
    agent = env.agent_selection
    parsed = env.parse_move(agent, text)
    if parsed.valid:
        assert parsed.move in env.legal_moves(agent)
    else:
        assert parsed.reason


@given(seed=st.integers(0, 1000), steps=st.integers(0, 9), text=st.text())
def test_negotiation_parser_never_raises_and_its_moves_play(seed, steps, text):
    env = games.make("simple_negotiation")  # 10 turns: still running after 9 steps
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        agent = env.agent_selection
        env.step(env.unwrapped.rules.random_move(rng))
        assert env.infos[agent]["valid"], env.infos[agent]
    agent = env.agent_selection
    parsed = env.parse_move(agent, text)
    if parsed.valid:
        env.step(parsed.move)
        assert env.infos[agent]["valid"]
    else:
        assert parsed.reason
