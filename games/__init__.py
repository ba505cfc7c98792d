"""Text games as PettingZoo AEC envs, and the scripted players that play them.

Pure rules: nothing here imports torch or knows about LLMs.

>>> import games
>>> env = games.make("kuhn_poker")
>>> env.reset(seed=3)
>>> env.legal_moves("player_0")
['check', 'bet']
"""

from __future__ import annotations

import builtins
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

from pettingzoo import AECEnv

from games import kuhn_analysis
from games.core import GameInfo, Parsed, Rules, TextGameEnv
from games.task_forge.players import FORGE_PLAYERS
from games.kuhn import KuhnPoker, StrategyPlayer
from games.leduc import HeuristicPlayer as LeducHeuristic
from games.leduc import LeducHoldem
from games.maze import HeuristicPlayer as MazeHeuristic
from games.maze import Maze
from games.negotiation import HeuristicPlayer as NegotiationHeuristic
from games.negotiation import SimpleNegotiation
from games.openspiel_env import OpenSpielEnv, load_game
from games.play import MatchResult, Player, RandomPlayer, play_match
from games.rps import STRATEGIES as RPS_STRATEGIES
from games.rps import FrequencyPlayer, RockPaperScissors
from games.rps import StrategyPlayer as RPSStrategy
from games.theory_of_mind import TheoryOfMindPlayer
from games.pettingzoo_text import PettingZooTextEnv
from games.textarena_env import TextArenaEnv
from games.task_forge.rules import TaskForge
from games.tictactoe import MinimaxPlayer, TicTacToe
from games.taboo import HeuristicPlayer as TabooHeuristic
from games.taboo import Taboo
from games.reference import HeuristicPlayer as ReferenceHeuristic
from games.reference import ReferenceGame

GAMES: dict[str, type[Rules]] = {
    "tictactoe": TicTacToe,
    "kuhn_poker": KuhnPoker,
    "leduc_holdem": LeducHoldem,
    "simple_negotiation": SimpleNegotiation,
    "task_forge": TaskForge,
    "taboo": Taboo,
    "rock_paper_scissors": RockPaperScissors,
    "reference_game": ReferenceGame,
    "maze": Maze,
}
# PettingZoo classic envs with a renderer (any other Discrete-action env works with the fallback).
PETTINGZOO_GAMES = ("classic/connect_four-v3", "classic/rps-v2", "classic/leduc_holdem-v4")
# SPIRAL's training games in TextArena; listed when textarena is installed.
TEXTARENA_GAMES = ("textarena/KuhnPoker-v0", "textarena/SimpleNegotiation-v0", "textarena/TicTacToe-v0")
# A few small OpenSpiel games, listed when open_spiel is installed; any other loads by its name.
OPENSPIEL_GAMES = (
    "openspiel/kuhn_poker", "openspiel/leduc_poker", "openspiel/liars_dice",
    "openspiel/goofspiel(num_cards=4,imp_info=True)",
)  # fmt: skip

SCRIPTED_PLAYERS: dict[str, dict[str, Callable[[], Player]]] = {
    "tictactoe": {"random": RandomPlayer, "minimax": MinimaxPlayer},
    "kuhn_poker": {
        "random": RandomPlayer,
        "nash": lambda: StrategyPlayer(kuhn_analysis.nash()),
        "always_bet": lambda: StrategyPlayer(kuhn_analysis.always_bet()),
        "never_bluff": lambda: StrategyPlayer(kuhn_analysis.never_bluff()),
    },
    "leduc_holdem": {"random": RandomPlayer, "heuristic": LeducHeuristic},
    "simple_negotiation": {"random": RandomPlayer, "heuristic": NegotiationHeuristic},
    "task_forge": {"random": RandomPlayer, **FORGE_PLAYERS},  # each of the others fits one seat (its .seat)
    "taboo": {"random": RandomPlayer, "heuristic": TabooHeuristic},
    "rock_paper_scissors": {
        "random": RandomPlayer, "frequency": FrequencyPlayer, "theory_of_mind": TheoryOfMindPlayer,
        **{name: (lambda name=name: RPSStrategy(name)) for name in RPS_STRATEGIES},
    },
    "reference_game": {"random": RandomPlayer, "heuristic": ReferenceHeuristic},
    "maze": {"random": RandomPlayer, "heuristic": MazeHeuristic, "silent": lambda: MazeHeuristic(talk=False)},
}


@dataclass(frozen=True)
class Family:
    """Games a package above this one makes under a name prefix: ``graph/<name>``, the
    orchestration graphs that ``roles`` composes from roles and registers when imported, so that
    the rules here never import the layer built on them."""

    make: Callable[..., AECEnv]  # the name after the prefix, and the env's options
    names: tuple[str, ...]  # what ``list`` shows
    players: dict[str, Callable[[], Player]]  # scripted players for any of its games, besides random


FAMILIES: dict[str, Family] = {}


def register(prefix: str, family: Family) -> None:
    """Make ``prefix<name>`` a game: ``games.register("graph/", Family(...))`` (roles/__init__.py)."""
    FAMILIES[prefix] = family


def family_of(name: str) -> tuple[str, Family] | None:
    """The registered prefix and family a game name falls under, if any."""
    return next(((prefix, f) for prefix, f in FAMILIES.items() if name.startswith(prefix)), None)


def make(name: str, **kwargs) -> AECEnv:
    """A game by name: one of ours, ``textarena/<id>``, ``openspiel/<game string>`` like
    ``openspiel/liars_dice(numdice=1)``, ``graph/<built-in graph>`` like ``graph/malt`` (once
    ``roles`` is imported: see :class:`Family`), or any PettingZoo id like ``classic/rps-v2``."""
    if name in GAMES:
        return TextGameEnv(GAMES[name], **kwargs)
    if name.startswith("textarena/"):
        return TextArenaEnv(name.removeprefix("textarena/"), **kwargs)
    if name.startswith("openspiel/"):
        return OpenSpielEnv(name.removeprefix("openspiel/"), **kwargs)
    if found := family_of(name):
        prefix, family = found
        return family.make(name.removeprefix(prefix), **kwargs)
    if name.startswith("graph/"):
        raise ValueError(f"{name!r} is an orchestration graph: `import roles` first, which registers them")
    if "/" in name:
        return PettingZooTextEnv(name, **kwargs)
    raise ValueError(f"unknown game {name!r}; choose one of {', '.join(list())}, openspiel/<game> or a PettingZoo id")


def list() -> builtins.list[str]:  # noqa: A001 - the registry's public name, games.list()
    """Every game ``make`` knows by name."""
    names = [*GAMES, *PETTINGZOO_GAMES, *(prefix + g for prefix, f in FAMILIES.items() for g in f.names)]
    if importlib.util.find_spec("textarena") is not None:
        names += TEXTARENA_GAMES
    if importlib.util.find_spec("pyspiel") is not None:
        names += OPENSPIEL_GAMES
    return names


def known(name: str) -> bool:
    """Whether ``name`` is a listed game or an OpenSpiel game that loads (with its parameters),
    so that a config can be checked before any match is made."""
    if name in list():
        return True
    if not name.startswith("openspiel/"):
        return False
    try:
        load_game(name.removeprefix("openspiel/"))
    except (ImportError, ValueError):
        return False
    return True


def scripted_players(game: str) -> dict[str, Callable[[], Player]]:
    """Scripted players for ``game`` by name: random-legal for every game (OpenSpiel's included) but
    TextArena's, whose moves are free text with no list to draw from."""
    if game.startswith("textarena/"):
        return {}
    if found := family_of(game):
        return {"random": RandomPlayer, **found[1].players}
    return SCRIPTED_PLAYERS.get(game, {"random": RandomPlayer})


__all__ = [
    "FAMILIES", "GAMES", "Family", "GameInfo", "MatchResult", "OpenSpielEnv", "Parsed", "Player", "RandomPlayer", "Rules",
    "TextGameEnv", "known", "make", "list", "play_match", "register", "scripted_players",
]  # fmt: skip
