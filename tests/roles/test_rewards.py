"""task_forge role rewards on hand-computed outcomes; properties where no number is known."""

import copy
import doctest
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import roles.rewards
from roles.rewards import (
    RewardConfig,
    add_repetition,
    bleu_distances,
    forge_rewards,
    repetition_penalties,
    switch_rates,
    tool_bonus,
    uncertainty_reward,
)


def attempt(answer, correct, verdict, revised, revised_correct, hint=None, hint_correct=None):
    return {
        "answer": answer, "invalid_reason": "" if answer is not None else "no \\boxed{} answer",
        "correct": correct, "tool_calls": 1, "verdict": verdict, "critique": "",
        "revised_answer": revised, "revised_correct": revised_correct, "hint": hint, "hint_correct": hint_correct,
    }  # fmt: skip


def outcome(attempts, p_hat, majority, agrees, tools, task="What is 2 + 2 ?", valid=True):
    return {
        "valid_task": valid, "invalid_reason": "" if valid else "the reference program raised",
        "task": task, "reference": "4" if valid else None, "proposer_tool_calls": tools,
        "attempts": attempts, "p_hat": p_hat, "majority_answer": majority, "majority_agrees": agrees,
    }  # fmt: skip


# A: reference "4", k = 4, p̂ = 2/4, the majority ("4", 2 votes) agrees, 6 proposer tool calls
A = outcome(
    [
        attempt("4", True, "accept", "4", True),  # right, accepted, kept
        attempt("4", True, "reject", "5", False),  # right, rejected, switched away to a wrong answer
        attempt("5", False, "accept", "5", False, "check the carry", True),  # false accept; the hint works
        attempt(None, False, "reject", None, False, "box your answer", True),  # invalid answer; the hint works
    ],
    p_hat=0.5, majority="4", agrees=True, tools=6,
)  # fmt: skip
# B: reference "7", k = 3, p̂ = 1/3, the majority ("8", 2 votes) disagrees, 2 tool calls
B = outcome(
    [
        attempt("7", True, None, "7", True),  # right, but no valid verdict
        attempt("8", False, "reject", "7", True),  # wrong, rejected, fixed after the critique
        attempt("8", False, "reject", "8", False, "recount", False),  # wrong, rejected, the hint fails
    ],
    p_hat=1 / 3, majority="8", agrees=False, tools=2, task="What is 3 + 4 ?",
)  # fmt: skip
# C: an invalid task, after 3 tool calls
C = outcome([], p_hat=0.0, majority=None, agrees=False, tools=3, task="", valid=False)


@pytest.mark.parametrize(
    "p_hat, linear, minimum",
    [
        (0.0, 0.0, 0.0),  # always wrong: no uncertainty
        (0.3, 0.6, 0.3),  # 1 − 2·|0.3 − 0.5| = 0.6; min(0.3, 0.7) = 0.3
        (0.5, 1.0, 0.5),  # the peak: the executor is split evenly
        (1.0, 0.0, 0.0),  # always right: no uncertainty
    ],
)
def test_uncertainty_forms(p_hat, linear, minimum):
    assert uncertainty_reward(p_hat, "linear") == pytest.approx(linear)
    assert uncertainty_reward(p_hat, "min") == pytest.approx(minimum)


@given(st.floats(0, 1))
def test_agent0_code_form_is_half_the_paper_form(p_hat):
    # docs/research/roles.md §1.2: min(p, 1 − p) = ½·(1 − 2|p − ½|)
    assert uncertainty_reward(p_hat, "min") == pytest.approx(uncertainty_reward(p_hat, "linear") / 2)


def test_uncertainty_rejects_bad_input():
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):
        uncertainty_reward(1.5)
    with pytest.raises(ValueError, match="form must be one of"):
        uncertainty_reward(0.5, "max")
    with pytest.raises(ValueError, match="uncertainty must be one of"):
        RewardConfig(uncertainty="max")
    with pytest.raises(ValueError, match="verifier_intent must be one of"):
        RewardConfig(verifier_intent="neutral")


@pytest.mark.parametrize("calls, bonus", [(0, 0.0), (3, 0.15), (4, 0.2), (10, 0.2)])  # Agent0: 0.05 each, cap 4
def test_tool_bonus_is_capped(calls, bonus):
    assert tool_bonus(calls) == pytest.approx(bonus)


def test_tool_bonus_custom_cap_and_negative_calls():
    assert tool_bonus(10, per_call=0.1, cap=2) == pytest.approx(0.2)
    with pytest.raises(ValueError, match=">= 0"):
        tool_bonus(-1)


def test_outcome_a_every_component():
    r = forge_rewards(A)
    assert r["proposer"] == pytest.approx({"invalid_task": 0.0, "uncertainty": 1.0, "tool_bonus": 0.2})  # 6 calls -> cap 4
    # revised answers right: 1 of 4; invalid answers: 1 of 4 -> −0.2/4
    assert r["executor"] == pytest.approx({"correct": 0.25, "format": -0.05})
    # agreement: accept-right ✓, reject-right ✗, accept-wrong ✗, reject-wrong ✓ -> 2/4; one false accept -> −0.5/4
    assert r["verifier"] == pytest.approx({"agreement": 0.5, "false_accept": -0.125})
    # both hinted retries right: 1 − p̂ = 0.5
    assert r["teacher"] == pytest.approx({"progress": 0.5})


def test_outcome_b_every_component():
    r = forge_rewards(B)
    assert r["proposer"] == pytest.approx({"invalid_task": 0.0, "uncertainty": 2 / 3, "tool_bonus": 0.1})  # 1 − 2·|⅓ − ½|
    assert r["executor"] == pytest.approx({"correct": 2 / 3, "format": 0.0})
    # no verdict counts as disagreement; the two rejections of wrong answers agree -> 2/3
    assert r["verifier"] == pytest.approx({"agreement": 2 / 3, "false_accept": 0.0})
    assert r["teacher"] == pytest.approx({"progress": -1 / 3})  # the one hinted retry failed: 0 − ⅓


def test_invalid_task_pays_only_the_proposer():
    r = forge_rewards(C)
    # Agent0 code adds the tool bonus to the −1 base even when the question does not parse
    assert r["proposer"] == pytest.approx({"invalid_task": -1.0, "uncertainty": 0.0, "tool_bonus": 0.15})
    for seat in ("executor", "verifier", "teacher"):
        assert all(v == 0 for v in r[seat].values()), seat
    assert sum(forge_rewards(C, RewardConfig(proposer_invalid=-2.0))["proposer"].values()) == pytest.approx(-1.85)


def test_majority_gate_and_the_min_form():
    gated = RewardConfig(majority_gate=True)
    assert forge_rewards(A, gated)["proposer"]["uncertainty"] == pytest.approx(1.0)  # majority "4" = reference
    assert forge_rewards(B, gated)["proposer"]["uncertainty"] == 0.0  # majority "8" ≠ reference "7"
    assert forge_rewards(B, RewardConfig(uncertainty="min"))["proposer"]["uncertainty"] == pytest.approx(1 / 3)


def test_weights_scale_their_components():
    config = RewardConfig(executor_correct=2.0, executor_format=1.0, verifier_correct=3.0, verifier_false_accept=1.0,
                          teacher_progress=0.5, tool_bonus=0.1, tool_cap=1)  # fmt: skip
    r = forge_rewards(A, config)
    assert r["executor"] == pytest.approx({"correct": 0.5, "format": -0.25})
    assert r["verifier"] == pytest.approx({"agreement": 1.5, "false_accept": -0.25})
    assert r["teacher"] == pytest.approx({"progress": 0.25})
    assert r["proposer"]["tool_bonus"] == pytest.approx(0.1)


def test_adversarial_verifier_is_paid_for_switching_the_executor_away():
    adversarial = RewardConfig(verifier_intent="adversarial")
    assert forge_rewards(A, adversarial)["verifier"] == pytest.approx({"switch_away": 0.25})  # attempt 2 of 4
    assert forge_rewards(B, adversarial)["verifier"] == {"switch_away": 0.0}  # B's one switch went wrong -> right


def test_teacher_without_hints_gets_zero():
    no_hints = copy.deepcopy(B)
    for a in no_hints["attempts"]:
        a["hint"], a["hint_correct"] = None, None
    assert forge_rewards(no_hints)["teacher"] == {"progress": 0.0}


def test_no_verdict_is_disagreement_even_on_a_wrong_answer():
    unjudged = outcome([attempt("5", False, None, "5", False)], 0.0, "5", False, 0)  # silence is not a rejection
    assert forge_rewards(unjudged)["verifier"] == {"agreement": 0.0, "false_accept": 0.0}


def test_switch_rates():
    # right before the critique: A1, A2, B1 -> A2 went wrong (1/3); wrong before: A3, A4, B2, B3 -> B2 fixed (1/4)
    assert switch_rates([A, B, C]) == pytest.approx({"correct_to_wrong": 1 / 3, "wrong_to_correct": 0.25})
    assert switch_rates([]) == {"correct_to_wrong": 0.0, "wrong_to_correct": 0.0}  # no NaN
    only_right = outcome([attempt("4", True, "accept", "4", True)], 1.0, "4", True, 0)
    assert switch_rates([only_right]) == {"correct_to_wrong": 0.0, "wrong_to_correct": 0.0}


# ---- repetition ------------------------------------------------------------------------------------

H = "a b c d e f g h"
H_ONE_OFF = "a b c d e f g x"  # last token differs: n-gram precisions 7/8, 6/7, 5/6, 4/5 -> BLEU (4/8)^(1/4)
OTHER = "the quick brown fox jumps over the lazy dog"  # no shared token with H


def test_bleu_distance_by_hand():
    d = bleu_distances([H, H_ONE_OFF, OTHER])
    assert d[0, 1] == pytest.approx(1 - 0.5**0.25)  # 0.159, same both ways (equal lengths, no brevity penalty)
    assert d[0, 2] == d[1, 2] == 1.0  # no matching unigram: BLEU 0
    assert (d == d.T).all() and (d.diagonal() == 0).all()


def test_bleu_is_symmetrised():
    # "a b c d" against H: as hypothesis, precisions 1 and brevity penalty e^(1 − 8/4); as reference,
    # precisions 4/8, 3/7, 2/6, 1/5 -> (1/70)^(1/4); the distance uses their mean
    d = bleu_distances([H, "a b c d"])
    assert d[0, 1] == d[1, 0] == pytest.approx(1 - (math.exp(-1) + 70**-0.25) / 2)


TEXTS = st.lists(st.lists(st.sampled_from("a b c d".split()), max_size=12).map(" ".join), min_size=2, max_size=6)


@given(TEXTS)
def test_bleu_distances_are_nltks_sentence_bleu_averaged_over_both_directions(texts):
    """The pairwise BLEU is nltk's, to the last bits: few tokens make every n-gram order match,
    miss and smooth, and brevity penalise in both directions."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    smooth = SmoothingFunction().method1
    tokens = [t.split() for t in texts]

    def nltk(h, r):
        if h == r:
            return 1.0  # the module docstring's exception: identical texts are at distance 0
        return float(sentence_bleu([r], h, smoothing_function=smooth)) if h and r else 0.0

    d = bleu_distances(texts)
    for i, j in ((i, j) for i in range(len(texts)) for j in range(len(texts)) if i != j):
        assert d[i, j] == pytest.approx(1 - (nltk(tokens[i], tokens[j]) + nltk(tokens[j], tokens[i])) / 2, rel=1e-12, abs=1e-12)


def test_identical_texts_cluster_together():
    assert repetition_penalties([H, H, H, OTHER]) == pytest.approx([0.75, 0.75, 0.75, 0.25])
    assert repetition_penalties(["x y", "x y", OTHER]) == pytest.approx([2 / 3, 2 / 3, 1 / 3])  # short texts too


def test_unrelated_texts_are_singletons():
    texts = [H, OTHER, "completely different words here", "zz yy"]
    assert repetition_penalties(texts) == pytest.approx([0.25] * 4)


def test_threshold_decides_whether_near_duplicates_merge():
    # their distance is 0.159: a threshold above merges them, below keeps them apart
    assert repetition_penalties([H, H_ONE_OFF, OTHER], threshold=0.2) == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert repetition_penalties([H, H_ONE_OFF, OTHER], threshold=0.15) == pytest.approx([1 / 3] * 3)


def test_one_text_is_its_whole_cluster():
    assert repetition_penalties([H]) == [1.0]
    assert repetition_penalties([]) == []


@given(st.lists(st.sampled_from([H, H_ONE_OFF, OTHER, "p q r", "p q s", ""]), min_size=2, max_size=8))
def test_penalties_are_cluster_shares(texts):
    penalties = repetition_penalties(texts)
    n = len(texts)
    sizes = [round(p * n) for p in penalties]
    assert all(abs(p * n - s) < 1e-9 and 1 <= s <= n for p, s in zip(penalties, sizes))
    for s in set(sizes):  # texts in clusters of size s come s at a time
        assert sizes.count(s) % s == 0
    for i, j in ((i, j) for i in range(n) for j in range(n) if texts[i] == texts[j]):
        assert penalties[i] == penalties[j]  # identical texts share a cluster


def test_add_repetition_uses_the_valid_tasks_of_the_batch():
    twin = copy.deepcopy(A)
    twin["task"] = B["task"]  # A's twin and B repeat one task; C is invalid
    batch = [twin, B, C]
    rewards = [forge_rewards(o) for o in batch]
    add_repetition(rewards, batch, RewardConfig(repetition_weight=0.5))
    assert [r["proposer"]["repetition"] for r in rewards] == pytest.approx([-0.5, -0.5, 0.0])  # −0.5 × 2/2
    with pytest.raises(ValueError, match="one rewards dict per outcome"):
        add_repetition(rewards[:1], batch)


def test_docstring_example():
    result = doctest.testmod(roles.rewards)
    assert result.attempted > 0 and result.failed == 0
