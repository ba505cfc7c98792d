"""Exact analysis of one hand of Kuhn poker: expected value, best response, exploitability.

A behaviour strategy is a mapping from each of the 12 information sets to the probability of the
aggressive move there (bet at ``"X"`` and ``"Xc"``, call at ``"Xb"`` and ``"Xcb"``, X the card).
The first player acts at ``"J" "Q" "K" "Jcb" "Qcb" "Kcb"``, the second at ``"Jc" … "Kb"``; one
mapping over all 12 is a strategy profile.

With 6 equally likely deals and 2 moves at each of a seat's 6 information sets, everything is
exact enumeration:

- ``first_player_value(s)`` = (1/6) Σ_deals E[chips won by the first player];
- a best response is the best of the responding seat's 2⁶ = 64 pure strategies (a pure
  strategy is a behaviour strategy, and some pure strategy is always a best response);
- NashConv(s) = Σ_i [BR_i(s_{-i}) − u_i(s)] = BR_0 + BR_1 since u_0 + u_1 = 0; exploitability is
  NashConv / 2. See https://arxiv.org/pdf/1711.00832.pdf for the definition.

Give Fractions to get exact Fractions back (the golden tests do): the game value under every
equilibrium is −1/18 for the first player (https://en.wikipedia.org/wiki/Kuhn_poker).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from itertools import permutations, product
from numbers import Real

from games.kuhn import CARDS

FIRST_INFOSETS = tuple(card + h for h in ("", "cb") for card in CARDS)
SECOND_INFOSETS = tuple(card + h for h in ("c", "b") for card in CARDS)
INFOSETS = FIRST_INFOSETS + SECOND_INFOSETS

Strategy = Mapping[str, Real]


def _deal_value(c0: str, c1: str, s: Strategy) -> Real:
    """First player's expected chips for one deal: the game tree written out."""
    showdown = 1 if CARDS.index(c0) > CARDS.index(c1) else -1
    bet, call_bet = s[c0], s[c1 + "b"]
    after_bet = call_bet * 2 * showdown + (1 - call_bet) * 1
    bet_after_check, call_check_bet = s[c1 + "c"], s[c0 + "cb"]
    after_check_bet = call_check_bet * 2 * showdown + (1 - call_check_bet) * -1
    after_check = bet_after_check * after_check_bet + (1 - bet_after_check) * showdown
    return bet * after_bet + (1 - bet) * after_check


def first_player_value(strategy: Strategy) -> Real:
    """Expected chips won per hand by the first player when both seats follow ``strategy``."""
    missing = set(INFOSETS) - set(strategy)
    if missing:
        raise ValueError(f"strategy lacks information sets {sorted(missing)}; it needs all of {INFOSETS}")
    return sum(_deal_value(c0, c1, strategy) for c0, c1 in permutations(CARDS, 2)) * Fraction(1, 6)


def combine(first: Strategy, second: Strategy) -> dict[str, Real]:
    """A profile where ``first`` plays the first seat and ``second`` the second."""
    return {**{k: first[k] for k in FIRST_INFOSETS}, **{k: second[k] for k in SECOND_INFOSETS}}


def best_response_value(strategy: Strategy, seat: int) -> Real:
    """The most ``seat`` (0 = first to act) can win per hand against the other seat's part."""
    own, sign = (FIRST_INFOSETS, 1) if seat == 0 else (SECOND_INFOSETS, -1)
    return max(
        sign * first_player_value({**strategy, **dict(zip(own, pure))})
        for pure in product((0, 1), repeat=len(own))
    )


def nash_conv(strategy: Strategy) -> Real:
    return best_response_value(strategy, 0) + best_response_value(strategy, 1)


def exploitability(strategy: Strategy) -> Real:
    """Mean over seats of what a best response gains: 0 exactly at an equilibrium."""
    return nash_conv(strategy) / 2


def average(strategies: Sequence[Strategy], weights: Sequence[Real] | None = None) -> dict[str, Real]:
    """The mixture of several strategies: play as one of them, drawn with ``weights`` (uniform when
    omitted) for the whole hand. Per information set that is each strategy's move probability
    weighted by its mixture weight times how often the seat's own earlier moves reach it (only the
    first seat's check-then-call sets depend on an earlier move), so its value against any opponent
    is the weighted mean of theirs — the average that self-play's convergence results and PSRO's
    meta-strategies are about, unlike the plain mean of behaviour probabilities.
    """
    if not strategies:
        raise ValueError("average of no strategies")
    if weights is None:
        weights = [1] * len(strategies)
    if len(weights) != len(strategies) or any(w < 0 for w in weights) or not sum(weights):
        raise ValueError(f"need one non-negative weight per strategy, not all zero; got {list(weights)}")
    out: dict[str, Real] = {}
    for key in INFOSETS:
        reach = [w * (1 - s[key[0]]) if key.endswith("cb") else w for w, s in zip(weights, strategies)]
        total = sum(reach, Fraction(0))  # exact unless the strategies or weights hold floats
        out[key] = sum(r * s[key] for r, s in zip(reach, strategies)) / total if total else strategies[-1][key]
    return out


def reach(strategy: Strategy) -> dict[str, Real]:
    """How often play reaches each information set when ``strategy`` plays both seats, chance
    included (each of the 6 deals 1/6): the weights a distilled model's fit is judged by, since
    a set play seldom reaches matters little to the game's value."""
    out: dict[str, Real] = {}
    for key in INFOSETS:
        card, history = key[0], key[1:]
        total: Real = Fraction(0)
        for other in CARDS:
            if other == card:
                continue
            cards = (card, other) if len(history) % 2 == 0 else (other, card)
            p: Real = Fraction(1, 6)
            for i, letter in enumerate(history):  # the move made at each earlier set on the way
                aggressive = strategy[cards[i % 2] + history[:i]]
                p *= aggressive if letter == "b" else 1 - aggressive
            total += p
        out[key] = total
    return out


THIRD = Fraction(1, 3)


def nash(alpha: Real = Fraction(1, 6)) -> dict[str, Real]:
    """Kuhn's equilibrium family, α ∈ [0, 1/3] (https://en.wikipedia.org/wiki/Kuhn_poker).

    First player: bet J with α, K with 3α, never Q; after check-bet call Q with α + 1/3, always K,
    never J. Second player: after a check bet K always and bluff J with 1/3; facing a bet call K
    always, Q with 1/3, J never.
    """
    if not 0 <= alpha <= THIRD:
        raise ValueError(f"alpha must be in [0, 1/3] for Kuhn's equilibrium family, got {alpha}")
    return {
        "J": alpha, "Q": 0, "K": 3 * alpha, "Jcb": 0, "Qcb": alpha + THIRD, "Kcb": 1,
        "Jc": THIRD, "Qc": 0, "Kc": 1, "Jb": 0, "Qb": THIRD, "Kb": 1,
    }  # fmt: skip


def uniform() -> dict[str, Real]:
    return dict.fromkeys(INFOSETS, Fraction(1, 2))


def always_bet() -> dict[str, Real]:
    """Bet or call at every information set."""
    return dict.fromkeys(INFOSETS, 1)


def always_fold() -> dict[str, Real]:
    """Check or fold at every information set."""
    return dict.fromkeys(INFOSETS, 0)


def never_bluff() -> dict[str, Real]:
    """Bet and call with Q or K, never with J.

    Never bluffing alone costs nothing against the equilibrium (its value-only variants break even
    against every ``nash(α)``); what the equilibrium punishes is betting the middling Q, which
    only worse hands fold to and only better hands call.
    """
    return {k: int(k[0] in "QK") for k in INFOSETS}
