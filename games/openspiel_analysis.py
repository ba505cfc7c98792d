"""Exact exploitability, in OpenSpiel games, of policies given as move distributions.

A policy that plays from prompts (an LLM) is pinned down by its move distribution at every
information state. :func:`information_states` lists them, each with the prompt the env shows
there and its legal moves in the env's ``legal_moves`` order; a caller scores those moves, and
:func:`policy_from` turns ``{key: probabilities}`` into an OpenSpiel ``TabularPolicy``.
Exploitability, NashConv and the mixture of a meta-strategy are then OpenSpiel's own
(``algorithms.exploitability``, ``algorithms.policy_aggregator``), not derived again here;
``games.kuhn_analysis`` stays the independent hand-written check (:func:`kuhn_policy` bridges them).

Enumeration is exhaustive: fine for Kuhn (12 information states) and Leduc (936), slow for
``liars_dice`` (24,576), out of reach for board games.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyspiel
from open_spiel.python import policy as os_policy
from open_spiel.python.algorithms import exploitability as os_exploitability
from open_spiel.python.algorithms import policy_aggregator

from games.kuhn import CARDS
from games.kuhn_analysis import INFOSETS, Strategy
from games.openspiel_env import OpenSpielEnv


@dataclass(frozen=True)
class InfoState:
    """One information state of one seat, as that seat's player meets it in the env."""

    key: str  # OpenSpiel's key for it (TabularPolicy's), what policy_from's mapping is keyed by
    player: int
    prompt: str  # the env's prompt there, legal moves listed
    moves: tuple[str, ...]  # legal moves, in the order policy_from's probabilities follow
    actions: tuple[int, ...]  # their OpenSpiel actions


def information_states(env: OpenSpielEnv) -> list[InfoState]:
    """Every information state of every seat in ``env``'s game, player by player.

    Each is shown through a representative state (OpenSpiel's), whose prompt stands for all of
    them: the env's prompt depends on the information state alone.
    """
    table = os_policy.TabularPolicy(env.game)
    out = []
    for player, keys in enumerate(table.states_per_player):
        for key in keys:
            state = table.states[table.state_lookup[key]]
            names, actions = env.move_names_of(state), tuple(state.legal_actions(player))
            out.append(InfoState(key, player, env.prompt_of(state, player), tuple(names[a] for a in actions), actions))
    return out


def policy_from(game: pyspiel.Game, distributions: Mapping[str, Sequence[float]]) -> os_policy.TabularPolicy:
    """A tabular policy from probabilities over each information state's legal actions, in
    OpenSpiel's legal-action order (the env's ``legal_moves`` order). Every information state of
    the game needs one: a best response exploits whatever is left out."""
    table = os_policy.TabularPolicy(game)
    missing = table.state_lookup.keys() - distributions.keys()
    unknown = distributions.keys() - table.state_lookup.keys()
    if missing or unknown:
        raise ValueError(
            f"{game}: {len(missing)} information states lack a distribution {sorted(missing)[:3]}, "
            f"{len(unknown)} keys are none of its information states {sorted(unknown)[:3]}"
        )
    for key, probs in distributions.items():
        index = table.state_lookup[key]
        legal = np.flatnonzero(table.legal_actions_mask[index])
        p = np.asarray(probs, dtype=float)
        if p.shape != legal.shape or (p < 0).any() or not np.isclose(p.sum(), 1.0, atol=1e-6):
            raise ValueError(f"{key!r}: need {len(legal)} non-negative probabilities summing to 1, got {list(probs)}")
        table.action_probability_array[index] = 0.0
        table.action_probability_array[index, legal] = p / p.sum()
    return table


def tabular(game: pyspiel.Game, probabilities: Sequence[Sequence[float]]) -> os_policy.TabularPolicy:
    """A tabular policy from its whole probability table (``action_probability_array``, as a
    checkpoint keeps it)."""
    table = os_policy.TabularPolicy(game)
    table.action_probability_array[:] = np.asarray(probabilities, dtype=float)
    return table


def reach(game: pyspiel.Game, policy: os_policy.Policy) -> dict[str, float]:
    """How often play reaches each information state when ``policy`` plays every seat, chance
    included: the sum of its histories' probabilities (absent: never reached)."""
    out: dict[str, float] = {}

    def walk(state: pyspiel.State, p: float) -> None:
        if state.is_terminal():
            return
        if state.is_chance_node():
            for action, q in state.chance_outcomes():
                walk(state.child(action), p * q)
            return
        key = state.information_state_string(state.current_player())
        out[key] = out.get(key, 0.0) + p
        for action, q in policy.action_probabilities(state).items():
            if q > 0:
                walk(state.child(action), p * float(q))

    walk(game.new_initial_state(), 1.0)
    return out


def exploitability(game: pyspiel.Game, policy: os_policy.Policy) -> float:
    """NashConv / 2 in a two-player zero-sum game: 0 exactly at an equilibrium (OpenSpiel's)."""
    return float(os_exploitability.exploitability(game, policy))


def nash_conv(game: pyspiel.Game, policy: os_policy.Policy) -> float:
    """Σ over seats of what a best response gains against the others' parts (OpenSpiel's); for
    any number of seats and general-sum games."""
    return float(os_exploitability.nash_conv(game, policy))


def mixture(
    game: pyspiel.Game, policies: Sequence[os_policy.Policy], weights: Sequence[float]
) -> os_policy.TabularPolicy:
    """The policy that plays like one of ``policies``, drawn with ``weights`` for the whole match.

    Per information state each policy counts with its weight times how often the seat's own
    earlier moves under it reach that state (OpenSpiel's ``PolicyAggregator``), so the mixture's
    value against any opponent is the weighted mean of theirs: the average that PSRO's
    meta-strategies and self-play's convergence results are about, not the plain mean of move
    probabilities. Where no policy reaches a state it plays uniformly, which no value depends on.
    """
    if not policies or len(weights) != len(policies) or min(weights) < 0 or not sum(weights):
        raise ValueError(f"need one non-negative weight per policy, not all zero; got {list(weights)}")
    seats = range(game.num_players())
    aggregated = policy_aggregator.PolicyAggregator(game).aggregate(
        list(seats), [list(policies) for _ in seats], [list(weights) for _ in seats]
    )
    return os_policy.tabular_policy_from_callable(game, aggregated)


def kuhn_policy(strategy: Strategy) -> os_policy.TabularPolicy:
    """Our Kuhn strategy profile (``games.kuhn_analysis``) as a policy of OpenSpiel's
    ``kuhn_poker``: its cards 0, 1, 2 are J, Q, K, its history letters p (pass: check or fold) and
    b (bet or call) follow the card, and action 1 is the aggressive one."""
    game = pyspiel.load_game("kuhn_poker")
    distributions = {}
    for infoset in INFOSETS:
        card, history = infoset[0], infoset[1:]
        aggressive = float(strategy[infoset])
        distributions[str(CARDS.index(card)) + history.replace("c", "p")] = [1 - aggressive, aggressive]
    return policy_from(game, distributions)
