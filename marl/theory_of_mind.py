"""A model-backed player with a theory of mind (Hypothetical Minds, Cross et al. 2024), in
repeated rock-paper-scissors: the language model writes hypotheses about its opponent's strategy,
each is tested by the moves the model predicts under it, the best are kept, and the model moves
with the best one and its prediction in its prompt.

Each turn, for every pending request at once (each stage one batched call of the model):

1. **write** (``act``): one new hypothesis per request, a sentence, from the match so far;
2. **test** (``score``): under every hypothesis held (those kept from the match's last turn and
   the new one), the model's forced choice of the opponent's move at each of its last ``window``
   moves, from the history before it, and of its coming move; a hypothesis scores the moves it
   got right;
3. **keep**: the ``keep`` best stay for the match's next turn, the rest are dropped;
4. **move**: the wrapped model's ``act`` (or ``score``, in forced choice) on the request with a
   note added: the best hypothesis, how many moves it predicted, and what it says comes next.

``predict`` (the probe's question, ``marl.probe``) runs 1–3 and answers the best hypothesis's
prediction. The scripted twin, whose hypotheses are a fixed family, is ``games.theory_of_mind``.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from games.rps import MOVES, RULES_TEXT, describe_rounds
from games.theory_of_mind import WINDOW
from marl.evaluate import move_probabilities
from marl.hf import HFPolicy
from marl.policy import Request, Response, Sampling
from roles.seat import SeatRole

GAME = "rock_paper_scissors"
ROLE = SeatRole(GAME)  # how a predicted move is written: \boxed{rock}
KEEP = 2  # hypotheses a match keeps between turns
WRITE = Sampling(temperature=1.0, max_new_tokens=48)
MAX_HYPOTHESIS_CHARS = 300
SYSTEM = "You model your opponent in repeated rock-paper-scissors: how it chooses its moves."


def read_hypothesis(text: str) -> str | None:
    """A written hypothesis: the output's first line that holds a letter, trimmed and cut to
    ``MAX_HYPOTHESIS_CHARS``; None when there is none. Never raises."""
    for line in text.splitlines():
        line = " ".join(line.split())[:MAX_HYPOTHESIS_CHARS]
        if any(c.isalpha() for c in line):
            return line
    return None


@dataclass(frozen=True)
class Tested:
    """A hypothesis with its evidence: how many of the opponent's last moves the model predicted
    under it, out of how many, and the move it predicts next."""

    text: str
    hits: int
    tried: int
    next_move: str


def _history(rounds: str) -> str:
    return rounds or "No rounds have been played yet."


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": text}]


def writing_prompt(mine: Sequence[str], theirs: Sequence[str]) -> list[dict[str, str]]:
    history = _history(describe_rounds(mine, theirs))
    return _chat(f"{RULES_TEXT}\n\n{history}\nIn one sentence, state a hypothesis about your opponent's strategy.")


def prediction_prompt(hypothesis: str, mine: Sequence[str], theirs: Sequence[str]) -> list[dict[str, str]]:
    history = _history(describe_rounds(mine, theirs))
    return _chat(
        f"{RULES_TEXT}\n\n{history}\nA hypothesis about your opponent's strategy: {hypothesis}\n"
        "If it is right, which move will your opponent play next? Answer as \\boxed{MOVE}."
    )


def note(best: Tested) -> str:
    """What the move's prompt is told of the best hypothesis."""
    return (
        f"Your best hypothesis about your opponent: {best.text} (it predicted {best.hits} of their last {best.tried} "
        f"moves). Under it, your opponent plays {best.next_move} next."
    )


def with_note(request: Request, text: str) -> Request:
    """``request`` with ``text`` added to the end of what the player is shown."""
    if isinstance(request.messages, str):
        return replace(request, messages=f"{request.messages}\n{text}")
    last = request.messages[-1]
    return replace(request, messages=[*request.messages[:-1], {**last, "content": f"{last['content']}\n{text}"}])


class ModelTheoryOfMind:
    """A model that plays through hypotheses about its opponent (see the module docstring)."""

    def __init__(self, model: HFPolicy, window: int = WINDOW, keep: int = KEEP):
        self.model, self.window, self.keep = model, window, keep
        self.name = f"tom:{model.name}"
        self.kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # env -> seat -> hypotheses kept

    def _histories(self, requests: Sequence[Request]) -> list[tuple[list[str], list[str]]]:
        return [r.env.unwrapped.rules.history(r.env.possible_agents.index(r.agent)) for r in requests]

    def hypotheses(self, requests: Sequence[Request]) -> list[list[Tested]]:
        """Stages 1–3 for every request: its match's hypotheses, tested and ranked, best first
        (empty while the model has written nothing readable)."""
        histories = self._histories(requests)
        written = self.model.act(
            [Request(writing_prompt(*h), WRITE, r.adapter, r.seed) for r, h in zip(requests, histories)]
        )
        held = []
        for r, response in zip(requests, written):
            kept = self.kept.get(r.env, {}).get(r.agent, [])
            new = read_hypothesis(response.text)
            held.append(list(dict.fromkeys([*kept, *([new] if new else [])])))
        asked, where = [], []  # every prediction to score, and (request, hypothesis, round or None = next)
        for i, ((mine, theirs), texts, r) in enumerate(zip(histories, held, requests)):
            rounds = [*range(max(len(theirs) - self.window, 0), len(theirs)), None]
            for h, text in enumerate(texts):
                for t in rounds:
                    upto = len(theirs) if t is None else t
                    asked.append((Request(prediction_prompt(text, mine[:upto], theirs[:upto]), adapter=r.adapter), MOVES))
                    where.append((i, h, t))
        predicted = [MOVES[int(np.argmax(p))] for p in move_probabilities(self.model, asked, ROLE, 1.0)] if asked else []
        hits = [[0] * len(texts) for texts in held]
        nexts = [[MOVES[0]] * len(texts) for texts in held]
        for (i, h, t), move in zip(where, predicted):
            if t is None:
                nexts[i][h] = move
            else:
                hits[i][h] += move == histories[i][1][t]
        ranked = []
        for i, (texts, r) in enumerate(zip(held, requests)):
            tried = min(len(histories[i][1]), self.window)
            tested = sorted((Tested(x, hits[i][h], tried, nexts[i][h]) for h, x in enumerate(texts)), key=lambda x: -x.hits)
            self.kept.setdefault(r.env, {})[r.agent] = [x.text for x in tested[: self.keep]]
            ranked.append(tested)
        return ranked

    def _noted(self, requests: Sequence[Request]) -> list[Request]:
        return [with_note(r, note(tested[0])) if tested else r for r, tested in zip(requests, self.hypotheses(requests))]

    def act(self, requests: Sequence[Request]) -> list[Response]:
        return self.model.act(self._noted(requests))

    def score(self, requests: Sequence[Request], candidates: Sequence[Sequence[str]]) -> list[list[Response]]:
        return self.model.score(self._noted(requests), candidates)

    def predict(self, requests: Sequence[Request], legal: Sequence[Sequence[str]]) -> list[str]:
        """The opponent's coming move at each request, as the best hypothesis has it (the first
        legal move while there is no hypothesis)."""
        return [
            tested[0].next_move if tested and tested[0].next_move in moves else moves[0]
            for tested, moves in zip(self.hypotheses(requests), legal)
        ]
