"""Forced choice as constrained decoding: probabilities renormalised where candidates branch."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from marl.policy import choice_logprobs


def lp(*probs):
    return torch.log(torch.tensor(probs))


def test_two_moves_are_decided_by_the_branching_token_alone():
    # "b…" against "c…": odds 0.2 : 0.6 at the branch; the shared first token and the letters
    # that merely finish each word do not count.
    got = choice_logprobs([[7, 1, 9], [7, 2, 8, 8]], [lp(0.9, 0.2, 0.05), lp(0.9, 0.6, 0.1, 0.1)])
    assert got.exp().tolist() == pytest.approx([0.25, 0.75])


def test_nested_branches_multiply():
    # depth 1: {1: 0.5, 2: 0.25} -> 2/3, 1/3; depth 2 under 1: {1: 0.1, 2: 0.3} -> 1/4, 3/4
    cands = [[5, 1, 1], [5, 1, 2], [5, 2]]
    token_lps = [lp(1.0, 0.5, 0.1), lp(1.0, 0.5, 0.3), lp(1.0, 0.25)]
    assert choice_logprobs(cands, token_lps).exp().tolist() == pytest.approx([1 / 6, 1 / 2, 1 / 3])


def test_temperature_sharpens_each_branch():
    got = choice_logprobs([[1], [2]], [lp(0.2), lp(0.6)], temperature=0.5)
    assert got.exp().tolist() == pytest.approx([0.04 / 0.4, 0.36 / 0.4])


@given(st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=4), min_size=2, max_size=6, unique_by=tuple), st.data())
def test_a_distribution_over_prefix_free_candidates(cands, data):
    cands = [c + [9] for c in cands]  # an end token makes the set prefix-free, as "}" does for moves
    # One context per prefix: siblings share it, so a token's log-prob depends on (prefix, token).
    table = {}
    token_lps = []
    for c in cands:
        values = []
        for d in range(len(c)):
            key = (tuple(c[:d]), c[d])
            table.setdefault(key, data.draw(st.floats(-5, 0)))
            values.append(table[key])
        token_lps.append(torch.tensor(values))
    assert math.fsum(choice_logprobs(cands, token_lps).exp().tolist()) == pytest.approx(1.0)
