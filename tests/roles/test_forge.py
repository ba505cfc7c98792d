"""Task forge's roles: prompts per seat, and each turn's credit from the outcome, by hand."""

import pytest

from roles import role_for
from roles.forge import ForgeRole
from roles.rewards import turn_reward
from roles.rewards import RewardConfig
from roles.seat import SeatRole

CONFIG = RewardConfig(executor_correct=1.0, executor_format=0.2, verifier_correct=1.0, verifier_false_accept=0.5)


def attempt(**fields):
    base = {"answer": "5", "invalid_reason": "", "correct": True, "tool_calls": 0, "verdict": "accept", "critique": "",
            "revised_answer": "5", "revised_correct": True, "hint": None, "hint_correct": None}  # fmt: skip
    return {**base, **fields}


OUTCOME = {
    "valid_task": True, "invalid_reason": "", "task": "2 + 3?", "reference": "5", "proposer_tool_calls": 0,
    "attempts": [
        attempt(),  # right, accepted, kept
        attempt(answer="4", correct=False, verdict="accept", revised_answer="4", revised_correct=False,
                hint="count again", hint_correct=True),  # wrong, falsely accepted, then right with the hint
        attempt(answer=None, invalid_reason="no \\boxed{answer}", correct=False, verdict="reject",
                revised_answer="5", revised_correct=True),  # no answer, rightly rejected, fixed on revision
        attempt(verdict="reject", revised_answer="6", revised_correct=False),  # right, talked out of it
    ],
    "p_hat": 0.5, "majority_answer": "5", "majority_agrees": True,
}  # fmt: skip


@pytest.mark.parametrize(
    ("seat", "tag", "expected"),
    [
        ("executor", "attempt:0", 1.0),
        ("executor", "attempt:1", 0.0),
        ("executor", "attempt:2", -0.2),  # no answer: wrong and the format penalty
        ("executor", "revise:2", 1.0),
        ("executor", "revise:3", 0.0),
        ("executor", "retry:1", 1.0),
        ("verifier", "judge:0", 1.0),  # accepted a right answer
        ("verifier", "judge:1", -0.5),  # accepted a wrong one: no agreement, and the false-accept penalty
        ("verifier", "judge:2", 1.0),  # rejected a missing answer
        ("verifier", "judge:3", 0.0),  # rejected a right one
        ("teacher", "hint:1", 0.5),  # the hinted retry succeeded (1) against p̂ = 0.5
        ("proposer", "propose", 0.7),  # the episode's reward, whatever it is
    ],
)
def test_each_turn_is_credited_with_its_own_part_of_the_outcome(seat, tag, expected):
    assert turn_reward(OUTCOME, seat, tag, CONFIG, episode_reward=0.7) == pytest.approx(expected)


def test_an_adversarial_verifier_is_paid_for_switches_away_from_right_answers():
    adversarial = RewardConfig(verifier_intent="adversarial")
    assert turn_reward(OUTCOME, "verifier", "judge:3", adversarial, 0.0) == 1.0
    assert turn_reward(OUTCOME, "verifier", "judge:0", adversarial, 0.0) == 0.0


def test_an_invalid_task_credits_every_turn_with_the_episode_reward():
    invalid = {**OUTCOME, "valid_task": False, "attempts": []}
    assert turn_reward(invalid, "proposer", "propose", CONFIG, -1.0) == -1.0


def test_each_forge_seat_has_its_own_brief_and_other_games_keep_theirs():
    roles = {seat: role_for("task_forge", seat) for seat in ("proposer", "executor", "verifier", "teacher")}
    assert all(isinstance(r, ForgeRole) for r in roles.values())
    briefs = {r.messages("rules\n\nstate")[0]["content"] for r in roles.values()}
    assert len(briefs) == 4
    assert role_for("task_forge", "executor", compact=True).messages("rules\n\nstate") == "state"
    assert isinstance(role_for("kuhn_poker", "player_0"), SeatRole)
