"""Shared test helpers: advance a game with a choice sequence, play random or legal-only matches."""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

import games
from games.maze import HeuristicPlayer as MazeHeuristic
from games.play import Player, RandomPlayer
from games.task_forge.families import FAMILIES, generate, normalize_answer
from games.task_forge.players import submission
from roles.graph import BUILTIN


def random_players(env) -> dict:
    return {a: RandomPlayer() for a in env.possible_agents}


def advance(env, choices: list[int]) -> None:
    """Step a freshly reset env, picking legal move ``c % len(legal)`` for each choice."""
    for c in choices:
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            return
        legal = env.legal_moves(agent)
        env.step(env.action_of(legal[c % len(legal)]))


def finite_games() -> list[str]:
    """Games with a move list (our own finite games and the adapted PettingZoo envs)."""
    return [g for g in games.list() if not g.startswith("textarena/") and games.make(g).move_names is not None]


def seeded_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---- players that make only legal moves, as exact move text, for full-game conformance tests --------


class LegalMoves:
    """A uniformly random move from ``env.legal_moves`` (not the game's own sampler), as its action."""

    def act(self, env, agent: str, rng: np.random.Generator):
        legal = env.legal_moves(agent)
        return env.action_of(legal[rng.integers(len(legal))])


_INVENTORIES = re.compile(r"Your inventory: (\d+) wood and (\d+) gold\. Opponent's inventory: (\d+) wood and (\d+) gold\.")


class NegotiationMoves:
    """A move of a kind the move forms allow now, written exactly (``offer 3 wood for 2 gold``,
    ``accept``, ``deny``, ``pass``); an offer is sized from the inventories the prompt shows."""

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        kinds = [form.split()[0] for form in env.legal_moves(agent)]
        kind = kinds[rng.integers(len(kinds))]
        if kind != "offer":
            return kind
        wood, gold, their_wood, their_gold = map(int, _INVENTORIES.search(env.observe(agent)["prompt"]).groups())
        sides = (("wood", wood, "gold", their_gold), ("gold", gold, "wood", their_wood))
        trades = [side for side in sides if side[1] and side[3]]  # something to give, something to ask for
        if not trades:
            return "pass"
        give, have, ask, there = trades[rng.integers(len(trades))]
        return f"offer {rng.integers(1, have + 1)} {give} for {rng.integers(1, there + 1)} {ask}"


class OfferedMoves:
    """One of the bracketed moves TextArena last offered this player in its transcript, on the
    line that holds ``marker`` (Kuhn: ``Your available actions are: '[check]', '[bet]'``)."""

    def __init__(self, marker: str):
        self.marker = marker

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        line = [ln for ln in env.observe(agent)["prompt"].splitlines() if self.marker in ln][-1]
        offered = re.findall(r"'(\[[^\]]+\])'", line)
        return offered[rng.integers(len(offered))]


class TextArenaTrades:
    """TextArena negotiation: accepts a pending offer it can pay for half the time, else offers
    1–3 units of a resource it holds for 1–3 of another the opponent holds."""

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        state = env.game.state.game_state
        me = env.possible_agents.index(agent)
        mine, theirs = state["player_resources"][me], state["player_resources"][1 - me]
        offer = state["current_offer"]
        if offer and all(mine[r] >= q for r, q in offer["requested_resources"].items()) and rng.random() < 0.5:
            return "[Accept]"
        gives = [r for r, q in mine.items() if q > 0]
        give = gives[rng.integers(len(gives))]
        asks = [r for r, q in theirs.items() if q > 0 and r != give]
        ask = asks[rng.integers(len(asks))]
        return f"[Offer: {rng.integers(1, min(3, mine[give]) + 1)} {give} -> {rng.integers(1, min(3, theirs[ask]) + 1)} {ask}]"


class GraphTurns:
    """A turn of an orchestration graph's node, well formed: a family task, the task's answer
    boxed, a random verdict, or a sentence of text that does not give the answer away, as the
    node's output asks."""

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        rules = env.unwrapped.rules
        output = rules.spec.nodes[rules.playing(agent)].output
        if output == "task":
            return submission(generate(FAMILIES[rng.integers(len(FAMILIES))], tuple(rng.random(2)), rng))
        if output == "answer":
            return f"\\boxed{{{rules.task.answer}}}"
        if output == "verdict":
            return ["\\boxed{accept}", "\\boxed{reject}"][rng.integers(2)]
        text = "Check every step once more."
        return text if normalize_answer(rules.task.answer) not in normalize_answer(text) else "#"


FREE_TEXT_PLAYERS: dict[str, Callable[[], Player]] = {
    **{f"graph/{name}": GraphTurns for name in BUILTIN},
    "simple_negotiation": NegotiationMoves,
    "taboo": RandomPlayer,  # its sampler writes moves exactly
    "reference_game": RandomPlayer,
    "maze": MazeHeuristic,  # its moves and messages are all exactly written
    "textarena/KuhnPoker-v0": lambda: OfferedMoves("Your available actions are:"),
    "textarena/TicTacToe-v0": lambda: OfferedMoves("Available Moves:"),
    "textarena/SimpleNegotiation-v0": TextArenaTrades,
}
FORGE_CAST = {"proposer": "uniform", "executor": "skilled", "verifier": "noisy", "teacher": "hinter"}


def legal_players(name: str, env) -> dict[str, Player]:
    """A player per seat that makes only legal, exactly written moves: task forge's scripted role
    players, a text player for each free-text game, a random legal move for finite games."""
    if name == "task_forge":
        scripted = games.scripted_players(name)
        return {seat: scripted[FORGE_CAST[seat]]() for seat in env.possible_agents}
    make = LegalMoves if env.move_names is not None else FREE_TEXT_PLAYERS[name]
    return {agent: make() for agent in env.possible_agents}
