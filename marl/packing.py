"""Padding-free layout of teacher-forced rows: laid end to end in bins as wide as the longest row.

Why: a learner batch left-padded to its longest row computes every padding token through every
layer. Packed, the rows of a bin sit side by side, each attending only to itself (and to the
start its group shares, computed once), so the only tokens computed in vain are the bins' unfilled
tails. First fit, longest row first, needs at most 11/9 of the fewest bins possible, plus one
(Dósa 2007); in a batch of similar rows it is one row per bin, as padding is, minus the padding.

Rows of different LoRA adapters never share a bin (peft routes adapters per bin).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass
class Packed:
    ids: list[list[int]]  # (G, W) tokens; a bin's tail is ``pad``
    positions: list[list[int]]  # (G, W): each token's position in its own row, after the shared start
    segments: list[list[int]]  # (G, W): which row each token belongs to; -1 in a bin's tail
    adapters: list  # (G,): each bin's adapter
    predicting: list[list[int]]  # (N, K): flat index (bin × W + column) of the position predicting each row's last K tokens


def first_fit(lengths: Sequence[int], groups: Sequence) -> list[list[int]]:
    """Bins of row indices, none holding more than the longest row's length, each one group's."""
    width = max(lengths)
    bins: list[list[int]] = []
    room: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        fits = next((b for b, members in enumerate(bins) if groups[members[0]] == groups[i] and room[b] >= lengths[i]), None)
        if fits is None:
            bins.append([i])
            room.append(width - lengths[i])
        else:
            bins[fits].append(i)
            room[fits] -= lengths[i]
    return bins


def pack(rows: Sequence[list[int]], adapters: Sequence, tail: int, start: int, pad: int, groups: Sequence | None = None) -> Packed:
    """``rows`` (each after a start of ``start`` tokens) in bins, with where the logits predicting
    each row's last ``tail`` tokens come from, end-aligned as left padding aligns them: in a row
    shorter than ``tail`` + 1, the slots before its second token hold its first position (they
    predict no token of the row; the caller masks them). ``groups``: rows that may share a bin
    (those after the same start; each group has one adapter); by default, rows of one adapter."""
    if not all(rows):
        raise ValueError("every row needs a token")
    width = max(map(len, rows))
    packed = Packed([], [], [], [], [[] for _ in rows])
    for members in first_fit([len(r) for r in rows], adapters if groups is None else groups):
        g = len(packed.ids)
        ids, positions, segments = [], [], []
        for i in members:
            offset = len(ids)
            first = g * width + offset
            packed.predicting[i] = [max(first, first + len(rows[i]) - tail - 1 + j) for j in range(tail)]
            ids += rows[i]
            positions += range(start, start + len(rows[i]))
            segments += [i] * len(rows[i])
        unfilled = width - len(ids)
        packed.ids.append(ids + [pad] * unfilled)
        packed.positions.append(positions + [start] * unfilled)
        packed.segments.append(segments + [-1] * unfilled)
        packed.adapters.append(adapters[members[0]])
    return packed
