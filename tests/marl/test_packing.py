"""Packed rows: every token once, each row alone in its attention, and the learner's pass the same
as left padding's (which it replaces)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from marl.models import load_tiny
from marl.packing import first_fit, pack

rows_strategy = st.lists(st.lists(st.integers(0, 255), min_size=3, max_size=30), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    rows=rows_strategy, groups=st.lists(st.sampled_from([None, "a", "b"]), min_size=12, max_size=12),
    start=st.integers(0, 5), tail=st.integers(1, 35),
)  # fmt: skip
def test_every_row_lies_whole_in_one_bin_of_its_own_group(rows, groups, start, tail):
    packed = pack(rows, groups[: len(rows)], tail, start, pad=999)
    width = max(map(len, rows))
    assert all(len(ids) == width for ids in packed.ids)
    flat_ids = [t for ids in packed.ids for t in ids]
    for i, row in enumerate(rows):
        where = [(g, c) for g, segs in enumerate(packed.segments) for c, s in enumerate(segs) if s == i]
        (bin_,) = {g for g, _ in where}
        columns = [c for _, c in where]
        assert columns == list(range(columns[0], columns[0] + len(row)))  # contiguous, in order
        assert [packed.ids[bin_][c] for c in columns] == row
        assert [packed.positions[bin_][c] for c in columns] == list(range(start, start + len(row)))
        assert packed.adapters[bin_] == groups[i]
        # the position before each of the last `tail` tokens predicts it (those the row has, after its first)
        predicted = [flat_ids[p + 1] for p in packed.predicting[i]]
        shown = min(tail, len(row) - 1)
        assert predicted[tail - shown :] == row[len(row) - shown :]
        assert all(bin_ * width + columns[0] <= p <= bin_ * width + columns[-1] for p in packed.predicting[i])
    assert sum(s >= 0 for segs in packed.segments for s in segs) == sum(map(len, rows))


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=30))
def test_first_fit_never_overfills_and_never_leaves_two_bins_that_would_fit_in_one(lengths):
    bins = first_fit(lengths, [None] * len(lengths))
    width = max(lengths)
    loads = [sum(lengths[i] for i in b) for b in bins]
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))
    assert max(loads) <= width
    assert sum(1 for load in loads if load <= width / 2) <= 1  # first fit: two half-empty bins would have merged


def test_an_empty_row_is_refused():
    with pytest.raises(ValueError, match="every row needs a token"):
        pack([[1, 2, 3], []], [None, None], 2, 0, 0)


@pytest.mark.parametrize("shared", [True, False])
def test_the_packed_pass_is_the_padded_pass(shared):
    """Values and gradients of the learner's log-probs, rows of very different lengths, with and
    without a shared start (a system prompt) computed once."""
    policy = load_tiny(3)
    policy.model.requires_grad_(True)
    start = "You are playing Kuhn poker. Answer with one move. " if shared else ""
    prompts = policy.encode([start + "Hi", start + "Your card is K. " * 6, start + "Q", start + "Pass or bet? " * 3])
    completions = [[98, 101, 116, 256], [99], [100, 101], [98, 256]]
    results = []
    for run in (policy._whole_rows, policy._padded_rows):
        policy.model.zero_grad()
        logits, targets, real = run(prompts, completions, [None] * 4, True)
        lp = torch.log_softmax(logits.float(), -1).gather(2, targets[..., None]).squeeze(2)
        lp[real].sum().backward()
        grads = torch.cat([p.grad.flatten() for p in policy.model.parameters()])
        results.append((lp[real].detach(), targets[real], grads))
    (ours, our_targets, our_grads), (theirs, their_targets, their_grads) = results
    assert torch.equal(our_targets, their_targets)
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert torch.allclose(our_grads, their_grads, atol=1e-5)


def test_packing_needs_fewer_tokens_than_padding():
    rows = [[1] * 40, [2] * 8, [3] * 10, [4] * 20, [5] * 12]
    packed = pack(rows, [None] * 5, 2, 0, 0)
    assert [sorted({s for s in segs if s >= 0}) for segs in packed.segments] == [[0], [1, 3, 4], [2]]
    assert len(packed.ids) * len(packed.ids[0]) == 120  # 40 | 20 + 12 + 8 | 10, against padding's 5 × 40 = 200


def test_a_model_without_sdpa_is_left_padded_and_agrees():
    sdpa, eager = load_tiny(3), load_tiny(3)
    eager.model.config._attn_implementation = "eager"  # the packed mask is SDPA's: this model takes the padded path
    prompts = eager.encode(["Hi", "Your card is K. " * 4])
    completions = [[98, 101, 116, 256], [99]]
    padded = []
    eager._padded_rows = lambda *args, run=eager._padded_rows: padded.append(1) or run(*args)
    with torch.no_grad():
        ours, real, _ = eager.completion_logprobs(prompts, completions, [None, None])
        theirs, _, _ = sdpa.completion_logprobs(prompts, completions, [None, None])
    assert padded == [1]
    assert torch.allclose(ours[real], theirs[real], atol=1e-5)
