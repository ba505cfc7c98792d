"""Scripted players and humans keep the Policy interface's promises."""

import math

import pytest

import games
from marl.episode import Turn
from marl.policy import Request, Sampling, check_policy
from marl.scripted import HumanPolicy, ScriptedPolicy, invalid_move_costs
from roles.seat import InvalidMoves, SeatRole


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


def answered(seat, valid, attempt=0, action=None):
    """The Turn a rollout records for one answer (only what HumanPolicy.heard reads matters)."""
    return Turn(
        index=0, seat=seat, role=seat, member="human", observation="", prompt_ids=[], completion_ids=[], logprobs=[],
        text="", move=None, valid=valid, attempt=attempt, action=action,
    )  # fmt: skip


def test_a_human_sees_the_state_not_the_rules_and_the_tries_left():
    shown = []
    human = HumanPolicy(ask=lambda prompt: "zz", show=shown.append, invalid=InvalidMoves.parse("retry:2"))
    request = live_request("kuhn_poker")
    human.act([request])
    state, stakes = shown
    assert request.env.rules_text not in state and "Your legal moves: check, bet" in state
    assert stakes == "(an invalid move gets 2 more tries, then forfeits the match)"
    human.heard(answered(request.agent, valid=False, attempt=0))
    shown.clear()
    human.act([request])
    assert shown == ["(an invalid move gets 1 more try, then forfeits the match)"]  # a retry: the state was just shown
    human.heard(answered(request.agent, valid=False, attempt=1))
    human.act([request])
    assert shown[-1] == "(last try: an invalid move forfeits the match)"
    human.heard(answered(request.agent, valid=False, attempt=2))  # that forfeited: a next match starts afresh
    human.heard(answered(request.agent, valid=True))
    assert human.attempt[request.agent] == 0


@pytest.mark.parametrize(
    "rule, attempt, said",
    [
        ("forfeit", 0, "an invalid move forfeits the match"),
        ("retry:1", 0, "an invalid move gets 1 more try, then forfeits the match"),
        ("retry:1", 1, "last try: an invalid move forfeits the match"),
        ("random_legal", 0, "an invalid move is replaced by a random legal move, at a penalty of -1"),
    ],
)
def test_what_an_invalid_move_costs_reads(rule, attempt, said):
    assert invalid_move_costs(InvalidMoves.parse(rule), attempt) == said
