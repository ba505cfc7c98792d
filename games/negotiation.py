"""Simple negotiation: two traders with private valuations swap wood and gold.

| Creation      | ``games.make("simple_negotiation")``, or ``games.make("simple_negotiation", turns=6)`` |
|---------------|-----------------------------------------------------------------------------|
| Seats         | ``player_0`` (moves first), ``player_1``                                     |
| Moves         | free text (``Text`` action space), parsed into: ``offer 3 wood for 2 gold``, ``accept``, ``deny``, ``pass`` |
| Observation   | ``prompt``: rules, both inventories, own valuations, the trade history, any pending offer |
| Rewards       | at the end, the change in the value of each seat's inventory at its own valuations; general-sum |
| Truncation    | the match ends after ``turns`` turns (default 10, TextArena's), which is its natural end |

Each seat starts with 5–15 units of each resource and values a unit of each at 1–20, privately.
An offer names what the mover gives and what it asks for; the opponent may accept it (the trade
happens at once), deny it, make a counter-offer (which denies it) or pass. Because valuations
differ, a trade can make both sides richer: the game is general-sum.

A move is read from text that *is* one, written loosely: any case, ``offer``/``Offer:``, bundles
like ``3 wood and 1 gold``, ``for``/``->`` between the sides, punctuation around it ignored. Text
that merely contains a move ("I accept, but …") is not read as one, unless parsing is lenient:
then text naming exactly one well-formed move is read as it, and text naming two is refused.

Version history:
* v1: first version.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from games.core import GameInfo, Parsed, Rules, bare, normalize, preview

RESOURCES = ("wood", "gold")
INVENTORY_RANGE = (5, 15)  # units of each resource at the start, inclusive
VALUE_RANGE = (1, 20)  # value of one unit, inclusive
MOVE_TEMPLATES = {"offer": "offer <n> wood|gold for <n> wood|gold", "accept": "accept", "deny": "deny", "pass": "pass"}
_EXTREME = 2 * INVENTORY_RANGE[1] * VALUE_RANGE[1]  # everything both sides hold, at the top value

RULES_TEXT = " ".join(f"""You are trading in a negotiation game with two resources, wood and gold. Each player has an
inventory and values one unit of each resource privately (between {VALUE_RANGE[0]} and {VALUE_RANGE[1]}); the
players' valuations differ. On your turn you may make an offer ("offer 3 wood for 2 gold" means you
give 3 wood and receive 2 gold), accept or deny the opponent's pending offer, or pass. A new offer
replaces (denies) a pending one. Your reward at the end is the change in the value of your own
inventory at your own valuations.""".split())  # one paragraph: terminals and chat templates wrap it

_AMOUNT = r"(?<!\d)(\d{1,6})\s*(wood|gold)"
_BUNDLE = rf"{_AMOUNT}(?:\s*(?:,|and|\+|&)\s*{_AMOUNT})?"
_MOVE = re.compile(  # "offer\s*(?::\s*)?", not "offer\s*:?\s*": two \s* in a row backtrack quadratically over spaces
    rf"(?P<offer>offer\s*(?::\s*)?{_BUNDLE}\s*(?:for|->|→|in exchange for)\s*{_BUNDLE})"
    r"|(?<!\w)(?P<accept>accept)(?!\w)|(?<!\w)(?P<deny>deny|reject|decline)(?!\w)|(?<!\w)(?P<pass>pass)(?!\w)"
)


@dataclass(frozen=True)
class Offer:
    give: tuple[int, int]  # (wood, gold) the offering seat hands over
    get: tuple[int, int]  # (wood, gold) it receives

    def text(self) -> str:
        return f"offer {_listing(self.give, skip_zero=True)} for {_listing(self.get, skip_zero=True)}"


def _listing(bundle: tuple[int, int], skip_zero: bool = False) -> str:
    """(3, 0) -> "3 wood, 0 gold", or "3 wood" when skipping zeros."""
    return " and ".join(f"{n} {r}" for n, r in zip(bundle, RESOURCES) if n or not skip_zero)


def _bundle(groups: tuple[str | None, ...]) -> tuple[int, int]:
    counts: Counter[str] = Counter()
    for amount, resource in zip(groups[::2], groups[1::2]):
        if amount is not None:
            counts[resource] += int(amount)
    return counts["wood"], counts["gold"]


Move = tuple[str, Offer | None]  # (kind, the offer when the kind is "offer")


def _move_of(found: re.Match[str]) -> Move:
    kind = found.lastgroup
    if kind != "offer":
        return kind, None
    groups = found.groups()[1:9]  # the offer's four (amount, resource) pairs
    return kind, Offer(give=_bundle(groups[:4]), get=_bundle(groups[4:]))


def read_move(text: str) -> Move | None:
    """The move ``text`` is (see the module docstring), or None if it is not exactly one."""
    found = _MOVE.fullmatch(bare(text))
    return None if found is None else _move_of(found)


def named_moves(text: str) -> list[Move]:
    """Every distinct well-formed move ``text`` names, in order: what lenient parsing reads."""
    return list(dict.fromkeys(_move_of(found) for found in _MOVE.finditer(normalize(text))))


def worth(inventory: tuple[int, int], values: tuple[int, int]) -> int:
    return inventory[0] * values[0] + inventory[1] * values[1]


class SimpleNegotiation(Rules):
    info = GameInfo("simple_negotiation", 1, ("player_0", "player_1"), False, -_EXTREME, _EXTREME, 10)
    moves = None
    rules_text = RULES_TEXT

    def __init__(self, rng: np.random.Generator, turns: int = 10):
        if turns < 1:
            raise ValueError(f"turns must be at least 1, got {turns}")
        self.info = replace(SimpleNegotiation.info, max_turns=turns)
        self.turns = turns
        lo, hi = INVENTORY_RANGE
        self.inventories = [tuple(int(x) for x in rng.integers(lo, hi + 1, 2)) for _ in range(2)]
        self.start = list(self.inventories)
        lo, hi = VALUE_RANGE
        self.values = [tuple(int(x) for x in rng.integers(lo, hi + 1, 2)) for _ in range(2)]
        self.pending: Offer | None = None  # made by the seat that moved last
        self.history: list[tuple[int, str]] = []
        self._to_move: int | None = 0

    @property
    def to_move(self) -> int | None:
        return self._to_move

    def legal_moves(self) -> list[str]:
        kinds = ["offer", "accept", "deny", "pass"] if self.pending else ["offer", "pass"]
        return [MOVE_TEMPLATES[k] for k in kinds]

    def parse(self, text: str, lenient: bool = False) -> Parsed:
        read = read_move(text)
        if read is None and lenient:
            named = named_moves(text)
            if len(named) > 1:
                return Parsed(None, f"names {len(named)} different moves; give one, e.g. 'offer 3 wood for 2 gold'")
            read = named[0] if named else None
        if read is None:
            return Parsed(
                None, f"not a move; got {preview(text)}; expected e.g. 'offer 3 wood for 2 gold', 'accept', 'deny' or 'pass'",
                named=False,
            )  # fmt: skip
        kind, offer = read
        if kind in ("accept", "deny") and self.pending is None:
            return Parsed(None, f"there is no pending offer to {kind}")
        if offer is None:
            return Parsed(kind)
        return self._check_offer(offer)

    def _check_offer(self, offer: Offer) -> Parsed:
        mine, theirs = self.inventories[self._to_move], self.inventories[1 - self._to_move]
        if not any(offer.give) or not any(offer.get):
            return Parsed(None, "an offer must give something and ask for something")
        if any(g and r for g, r in zip(offer.give, offer.get)):
            return Parsed(None, "an offer cannot give and ask for the same resource")
        for have, asked, res in zip(mine, offer.give, RESOURCES):
            if asked > have:
                return Parsed(None, f"you offered {asked} {res} but have only {have}")
        for have, asked, res in zip(theirs, offer.get, RESOURCES):
            if asked > have:
                return Parsed(None, f"you asked for {asked} {res} but the opponent has only {have}")
        return Parsed(offer.text())

    def apply(self, move: str) -> list[float]:
        seat = self._to_move
        if move == "accept":
            self._trade(giver=1 - seat, offer=self.pending)
        kind, offer = read_move(move)
        self.pending = offer if kind == "offer" else None
        self.history.append((seat, move))
        if len(self.history) < self.turns:
            self._to_move = 1 - seat
            return [0.0, 0.0]
        self._to_move = None
        return [float(worth(self.inventories[s], self.values[s]) - worth(self.start[s], self.values[s])) for s in (0, 1)]

    def _trade(self, giver: int, offer: Offer) -> None:
        taker = 1 - giver
        g, t = self.inventories[giver], self.inventories[taker]
        self.inventories[giver] = tuple(h - out + inc for h, out, inc in zip(g, offer.give, offer.get))
        self.inventories[taker] = tuple(h + out - inc for h, out, inc in zip(t, offer.give, offer.get))

    def view(self, seat: int) -> str:
        mine, values = self.inventories[seat], self.values[seat]
        said = "; ".join(f"{'you' if s == seat else 'opponent'}: {m}" for s, m in self.history) or "none yet"
        lines = [
            f"Your inventory: {_listing(mine)}. Opponent's inventory: {_listing(self.inventories[1 - seat])}.",
            f"Your private values per unit: wood {values[0]}, gold {values[1]}.",
            f"Your inventory is worth {worth(mine, values)} (it started at {worth(self.start[seat], values)}).",
            f"Turn {min(len(self.history) + 1, self.turns)} of {self.turns}. Moves so far: {said}.",
        ]
        if self.pending is not None and self._to_move == seat:
            lines.append(
                f"Pending offer from the opponent: they give {_listing(self.pending.give, skip_zero=True)}"
                f" and ask for {_listing(self.pending.get, skip_zero=True)}."
            )
        return "\n".join(lines)

    def render(self) -> str:
        return (
            f"turn {len(self.history)}/{self.turns} inventories {self.inventories} values {self.values}"
            f" pending {self.pending}"
        )

    def random_move(self, rng: np.random.Generator) -> str:
        """Uniform over move kinds; an offer swaps a random amount of one resource for the other."""
        kinds = ["offer", "pass", "accept", "deny"] if self.pending else ["offer", "pass"]
        kind = kinds[rng.integers(len(kinds))]
        if kind != "offer":
            return kind
        give_res = int(rng.integers(2))
        mine, theirs = self.inventories[self._to_move], self.inventories[1 - self._to_move]
        if mine[give_res] == 0 or theirs[1 - give_res] == 0:
            return "pass"
        give = [0, 0]
        get = [0, 0]
        give[give_res] = int(rng.integers(1, mine[give_res] + 1))
        get[1 - give_res] = int(rng.integers(1, theirs[1 - give_res] + 1))
        return Offer(tuple(give), tuple(get)).text()


class HeuristicPlayer:
    """Accepts any offer that raises its own inventory's value; otherwise offers as many units of the
    resource it values less as are still worth less to it than one unit of the other."""

    def act(self, env, agent: str, rng: np.random.Generator) -> str:
        rules: SimpleNegotiation = env.unwrapped.rules
        me = env.possible_agents.index(agent)
        values, mine, theirs = rules.values[me], rules.inventories[me], rules.inventories[1 - me]
        if rules.pending is not None:
            gain = worth(rules.pending.give, values) - worth(rules.pending.get, values)
            if gain > 0:
                return "accept"
        low, high = (0, 1) if values[0] < values[1] else (1, 0)
        units = (values[high] - 1) // values[low]  # most units of `low` worth less than one `high`
        units = min(units, mine[low])
        if values[low] == values[high] or units < 1 or theirs[high] < 1:
            return "deny" if rules.pending is not None else "pass"
        give, get = [0, 0], [0, 0]
        give[low], get[high] = units, 1
        return Offer(tuple(give), tuple(get)).text()
