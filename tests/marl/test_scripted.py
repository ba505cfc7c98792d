"""Scripted players and humans keep the Policy interface's promises."""

import math

import pytest

import games
from marl.policy import Request, Sampling, check_policy
from marl.scripted import HumanPolicy, ScriptedPolicy
from roles.seat import SeatRole


def live_request(game, seed=0):
    env = games.make(game)
    env.reset(seed=seed)
    agent = env.agent_selection
    return Request(SeatRole(game).messages(env.observe(agent)["prompt"]), Sampling(), env=env, agent=agent, seed=seed)


@pytest.mark.parametrize("game", list(games.SCRIPTED_PLAYERS))
def test_every_scripted_player_keeps_the_interface(game):
    requests = [live_request(game, seed) for seed in range(3)]
    for name, make in games.scripted_players(game).items():
        policy = ScriptedPolicy(name, make)
        candidates = [[SeatRole(game).format_move(m) for m in r.env.legal_moves(r.agent)] or ["pass"] for r in requests]
        check_policy(policy, requests, candidates)


def test_scripted_scores_are_one_hot_on_the_move_it_plays():
    request = live_request("tictactoe")
    policy = ScriptedPolicy("minimax", games.scripted_players("tictactoe")["minimax"])
    [move] = policy.act([request])
    [scores] = policy.score([request], [[f"\\boxed{{{m}}}" for m in request.env.legal_moves(request.agent)]])
    assert [s.logprob for s in scores].count(0.0) == 1
    assert next(s.text for s in scores if s.logprob == 0.0) == f"\\boxed{{{move.text}}}"
    assert all(s.logprob == -math.inf for s in scores if s.logprob != 0.0)


def test_human_keeps_the_interface_and_may_close_the_input():
    answers = iter(["b2", "a1"])

    def ask(prompt):
        try:
            return next(answers)
        except StopIteration:
            raise EOFError from None

    human = HumanPolicy(ask=ask, show=lambda text: None)
    check_policy(human, [live_request("tictactoe")], [["\\boxed{b2}", "\\boxed{a1}"]])
    assert human.act([live_request("tictactoe")])[0].text == ""  # input closed: an empty answer
