"""A scripted player with a theory of mind (Hypothetical Minds, Cross et al. 2024), in repeated
rock-paper-scissors.

It holds hypotheses about the opponent's strategy — every fixed strategy of
``games.rps.STRATEGIES``, seen from the opponent's side, and ``random`` — and scores each by how
many of the opponent's last ``window`` moves it predicted, each from the history the opponent
had when it chose. It keeps the best and plays the move that beats the best one's prediction.
Against a strategy in its family it loses only the rounds before the evidence singles it out;
against uniform play nothing can score above 0, and neither can it. The model-backed twin,
whose hypotheses are written by a language model, is ``marl.theory_of_mind``.

``predict`` is what the probe (``marl.probe``) asks it: the opponent's coming move.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from games.rps import BEATS, MOVES, STRATEGIES

RANDOM = "random"  # the hypothesis that the opponent plays uniformly: it predicts a third of any moves
WINDOW = 5  # the opponent's last moves a hypothesis is scored on: recent enough to follow a change of strategy


def score_hypotheses(mine: Sequence[str], theirs: Sequence[str], window: int = WINDOW) -> list[tuple[str, float]]:
    """Every hypothesis with how many of the opponent's last ``window`` moves it predicted
    (``random`` is credited with the third it would get by chance), best first. Ties keep the
    family's order, ``random`` first: with no evidence yet, or none better than chance, the
    player assumes nothing."""
    start = max(len(theirs) - window, 0)
    scores = {RANDOM: (len(theirs) - start) / len(MOVES)}
    for name, strategy in STRATEGIES.items():  # the opponent's strategy sees its own moves first
        scores[name] = float(sum(strategy(theirs[:t], mine[:t]) == theirs[t] for t in range(start, len(theirs))))
    return sorted(scores.items(), key=lambda item: -item[1])


def prediction(hypothesis: str, mine: Sequence[str], theirs: Sequence[str], rng: np.random.Generator) -> str:
    """The opponent's coming move under ``hypothesis``: a uniform draw under ``random``."""
    if hypothesis == RANDOM:
        return MOVES[rng.integers(len(MOVES))]
    return STRATEGIES[hypothesis](theirs, mine)


class TheoryOfMindPlayer:
    """Best-responds to the best-scoring hypothesis about its opponent (see the module docstring)."""

    def __init__(self, window: int = WINDOW):
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window

    def best_hypothesis(self, env, agent: str) -> str:
        mine, theirs = env.unwrapped.rules.history(env.possible_agents.index(agent))
        return score_hypotheses(mine, theirs, self.window)[0][0]

    def predict(self, env, agent: str, rng: np.random.Generator) -> str:
        """The opponent's coming move, as the best hypothesis has it."""
        mine, theirs = env.unwrapped.rules.history(env.possible_agents.index(agent))
        return prediction(self.best_hypothesis(env, agent), mine, theirs, rng)

    def act(self, env, agent: str, rng: np.random.Generator) -> int:
        return MOVES.index(BEATS[self.predict(env, agent, rng)])
