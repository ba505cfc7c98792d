"""Scripted graph players: each node played by what it writes and what it sees."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import games
from roles.graph import GraphSpec
from roles.graph_game import graph_env
from roles.graph_players import SkilledNode

RNG = np.random.default_rng(0)


def boxed(text: str) -> str:
    return f"\\boxed{{{text}}}"


def test_a_solver_alone_is_right_as_often_as_its_accuracy():
    env = graph_env("solo")
    right = 0
    for seed in range(400):
        env.reset(seed=seed)
        env.step(SkilledNode(accuracy=0.3).act(env.unwrapped, "executor", np.random.default_rng(seed)))
        right += env.unwrapped.rules.outcome()["correct_share"]
    assert right / 400 == pytest.approx(0.3, abs=0.07)


@pytest.mark.parametrize("critique_right", [True, False])
def test_a_refiner_keeps_an_answer_judged_right_and_re_solves_one_judged_wrong(critique_right):
    env = graph_env("malt")
    env.reset(seed=1)
    rules, perfect = env.unwrapped.rules, SkilledNode(accuracy=1.0, judgement=1.0 if critique_right else 0.0)
    env.step(boxed(rules.task.answer + "9"))  # a wrong answer
    critique = perfect.act(env.unwrapped, "verifier", RNG)
    assert critique.endswith("looks wrong.") if critique_right else critique.endswith("looks right.")
    env.step(critique)
    refined = perfect.act(env.unwrapped, "refiner", RNG)
    assert refined == (boxed(rules.task.answer) if critique_right else boxed(rules.task.answer + "9"))


def test_a_judge_gives_the_debates_most_common_answer():
    env = graph_env("debate")
    env.reset(seed=2)
    for text in ["7", "8", "8", "7", "8", "9"]:
        env.step(boxed(text))
    assert SkilledNode().act(env.unwrapped, "judge", RNG) == boxed("8")


CHECKED = GraphSpec.model_validate(
    {
        "nodes": {"executor": {"brief": "Solve."}, "verifier": {"brief": "Judge.", "output": "verdict"}, "final": {"brief": "Answer."}},
        "edges": [{"source": "executor", "target": "verifier"}, {"source": "verifier", "target": "final"},
                  {"source": "executor", "target": "final"}],
    }
)  # fmt: skip


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 2**16), right=st.booleans())
def test_a_perfect_verifier_accepts_exactly_the_right_answers(seed, right):
    env = graph_env(CHECKED)
    env.reset(seed=seed)
    answer = env.unwrapped.rules.task.answer
    env.step(boxed(answer if right else answer + "9"))
    assert SkilledNode(judgement=1.0).act(env.unwrapped, "verifier", RNG) == boxed("accept" if right else "reject")


def test_a_verdict_with_no_answer_to_judge_lets_the_graph_go_on():
    env = graph_env("agentflow")
    env.reset(seed=3)
    env.step("plan")
    env.step("result")
    assert SkilledNode(judgement=0.0).act(env.unwrapped, "verifier", RNG) == boxed("accept")


def test_every_graph_offers_the_scripted_players():
    assert {"random", "skilled", "weak"} <= set(games.scripted_players("graph/malt"))
