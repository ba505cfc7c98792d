"""Taboo: a clue giver describes a secret word without saying it; a guesser names it (Playpen/clembench).

| Creation      | ``games.make("taboo")``, or ``games.make("taboo", rounds=2)``                 |
|---------------|-----------------------------------------------------------------------------|
| Seats         | ``player_0`` the clue giver (moves first), ``player_1`` the guesser           |
| Moves         | free text (``Text`` action space), parsed into ``clue: <words>`` or ``guess: <word>`` |
| Observation   | ``prompt``: rules, the clues and guesses so far; the clue giver also sees the target and its taboo words |
| Rewards       | cooperative: both seats 1 when the guesser names the target, else 0           |
| Truncation    | ``rounds`` clue/guess rounds (default 3); the last wrong guess ends the match |

A clue that contains the target or one of its taboo words (any case, or a simple stem of one:
"running" for "run") is a violation: the move is played and the match ends with 0 for both, as in
clembench, where a broken rule aborts the episode. Text that is no move at all is an invalid move.
A guess is read as its first word, so "guess: Apple!" names "apple".

Version history:
* v1: first version.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np

from games.core import GameInfo, Parsed, Rules, bare, preview

# target -> (taboo words, hints the scripted clue giver uses in order); every hint is free of taboo.
WORDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "apple": (("fruit", "red", "tree"), ("orchard", "cider", "pie")),
    "piano": (("keys", "music", "instrument"), ("pedals", "grand", "concert")),
    "river": (("water", "flow", "stream"), ("banks", "delta", "fishing")),
    "candle": (("wax", "flame", "light"), ("wick", "birthday", "melt")),
    "winter": (("cold", "snow", "season"), ("december", "frost", "scarf")),
    "doctor": (("hospital", "medicine", "sick"), ("stethoscope", "patient", "clinic")),
    "bridge": (("river", "cross", "span"), ("suspension", "toll", "arch")),
    "rocket": (("space", "launch", "fly"), ("countdown", "astronaut", "fuel")),
    "pillow": (("bed", "sleep", "soft"), ("feathers", "cushion", "nap")),
    "coffee": (("drink", "cup", "caffeine"), ("espresso", "beans", "barista")),
    "garden": (("plants", "flowers", "grow"), ("shovel", "hedge", "greenhouse")),
    "camera": (("photo", "picture", "lens"), ("shutter", "tripod", "selfie")),
    "castle": (("king", "queen", "tower"), ("moat", "drawbridge", "fortress")),
    "guitar": (("strings", "music", "play"), ("chords", "strum", "acoustic")),
    "island": (("sea", "ocean", "land"), ("tropical", "castaway", "archipelago")),
    "ladder": (("climb", "steps", "up"), ("rungs", "firefighter", "rooftop")),
}
VOCABULARY = tuple(sorted({w for t, (taboo, hints) in WORDS.items() for w in (t, *taboo, *hints)}))
RULES_TEXT = " ".join("""You are playing Taboo as a team of two. The clue giver (player_0) knows a secret target
word and gives one clue per round ("clue: <words>") without using the target word, its taboo words or
any form of them; doing so ends the game with no reward. The guesser (player_1) answers each clue with
one word ("guess: <word>"). Both players earn 1 if the guesser names the target within the rounds,
otherwise 0.""".split())
_MOVE = re.compile(r"(?P<kind>clue|guess)\s*:?\s*(?P<text>.*)", re.DOTALL)
_WORD = re.compile(r"[^\W\d_]+")


def stem(word: str) -> str:
    """A crude stem, so that "apples" or "climbing" count as saying "apple" or "climb"."""
    for suffix in ("ing", "ed", "es", "s", "er"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def said_taboo(clue: str, forbidden: tuple[str, ...]) -> str:
    """The first forbidden word ``clue`` uses (or a stem of), "" when it uses none."""
    for word in _WORD.findall(clue.casefold()):
        for taboo in forbidden:  # both stemmed: "waters" is "water", whose own stem is "wat"
            if word == taboo or stem(word) in (taboo, stem(taboo)):
                return taboo
    return ""


class Taboo(Rules):
    info = GameInfo("taboo", 1, ("player_0", "player_1"), False, 0.0, 1.0, 6)
    moves = None
    rules_text = RULES_TEXT

    def __init__(self, rng: np.random.Generator, rounds: int = 3):
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {rounds}")
        self.info = replace(Taboo.info, max_turns=2 * rounds)
        self.rounds = rounds
        self.target = sorted(WORDS)[int(rng.integers(len(WORDS)))]
        self.taboo = WORDS[self.target][0]
        self.history: list[tuple[int, str]] = []
        self.violation = ""
        self.solved = False
        self._to_move: int | None = 0

    @property
    def to_move(self) -> int | None:
        return self._to_move

    def legal_moves(self) -> list[str]:
        return ["clue: <words>"] if self._to_move == 0 else ["guess: <word>"]

    def parse(self, text: str, lenient: bool = False) -> Parsed:
        """The clue giver's text is its clue, "clue:" optional; the guesser's first word is its guess.
        ``lenient`` changes nothing: any text with a word in it reads as one move."""
        kind = "clue" if self._to_move == 0 else "guess"
        found = _MOVE.fullmatch(bare(text))
        body = found["text"] if found and found["kind"] == kind else bare(text)
        words = _WORD.findall(body)
        if not words:
            return Parsed(None, f"not a {kind}; got {preview(text)}; expected '{self.legal_moves()[0]}'", named=False)
        return Parsed(f"{kind}: {' '.join(words) if kind == 'clue' else words[0]}")

    def apply(self, move: str) -> list[float]:
        seat = self._to_move
        kind, _, body = move.partition(": ")
        self.history.append((seat, move))
        if kind == "clue":
            self.violation = said_taboo(body, (self.target, *self.taboo))
            self._to_move = None if self.violation else 1
            return [0.0, 0.0]
        self.solved = body == self.target
        if self.solved or len(self.history) >= 2 * self.rounds:
            self._to_move = None
            return [float(self.solved)] * 2
        self._to_move = 0
        return [0.0, 0.0]

    def flaw(self) -> str:
        return f"the clue uses the taboo word '{self.violation}'" if self.violation else ""

    def outcome(self) -> dict:
        return {"solved": self.solved, "violation": bool(self.violation), "rounds": (len(self.history) + 1) // 2}

    def view(self, seat: int) -> str:
        said = "; ".join(m for _, m in self.history) or "none yet"
        lines = [f"Round {min(len(self.history) // 2 + 1, self.rounds)} of {self.rounds}. Moves so far: {said}."]
        if seat == 0:
            lines.insert(0, f"The target word is '{self.target}'. Taboo words: {', '.join(self.taboo)}.")
        return "\n".join(lines)

    def render(self) -> str:
        return f"target {self.target} taboo {self.taboo} history {self.history} solved {self.solved} violation {self.violation!r}"

    def random_move(self, rng: np.random.Generator) -> str:
        """A clue of one random vocabulary word (sometimes a taboo one), or a random guess."""
        word = VOCABULARY[int(rng.integers(len(VOCABULARY)))]
        return f"clue: {word}" if self._to_move == 0 else f"guess: {sorted(WORDS)[int(rng.integers(len(WORDS)))]}"


class HeuristicPlayer:
    """Clue giver: the target's next hint. Guesser: the untried target whose hints the clues share most."""

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        rules: Taboo = env.unwrapped.rules
        if rules.to_move == 0:
            hints = WORDS[rules.target][1]
            return f"clue: {hints[min(len(rules.history) // 2, len(hints) - 1)]}"
        clues = {w for s, m in rules.history if s == 0 for w in m.split()[1:]}
        tried = {m.split()[1] for s, m in rules.history if s == 1}
        untried = [t for t in sorted(WORDS) if t not in tried]
        return f"guess: {max(untried, key=lambda t: len(clues & set(WORDS[t][1])))}"
