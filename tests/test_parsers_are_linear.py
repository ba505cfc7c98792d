"""Every parser of model output costs time linear in its input, up to 1 MiB.

A model can write anything, and a parser that backtracks or rescans is quadratic: 16 KB of
output once took seconds to parse. Wall-clock limits would be flaky, so this checks how the cost
*grows*: the same adversarial shape (a prefix, a unit repeated, a suffix) is parsed at doubling
sizes, and the CPU time's growth exponent over the sizes measured must stay near 1 (linear),
far from 2 (quadratic). Sizes stop early once one parse takes seconds: by then a quadratic
parser has shown its exponent, and the test fails instead of hanging. Load elsewhere on the
machine can still bend one measurement's curve (CI once measured 1.68 for a parser that passes
alone), so a curve over the limit is measured again, up to ``ATTEMPTS`` times: a quadratic
parser is quadratic every time.
"""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import games
from games.core import bare
from games.negotiation import named_moves, read_move
from games.task_forge.families import answers_match, normalize_answer
from marl.rollout import as_written
from games.formats import boxed_contents, extract_answer, python_block, read_answer, read_submission, read_verdict
from roles.seat import SeatRole

SIZES = [2**k for k in range(12, 21)]  # 4 KiB … 1 MiB
FLOOR_S = 0.02  # parses cheaper than this are mostly noise on a shared machine, not a point on the curve
STOP_S = 1.5  # one parse this slow is enough evidence: a linear parser takes milliseconds
ROUNDS = 3
MAX_EXPONENT = 1.6  # linear is 1.0, quadratic 2.0
ATTEMPTS = 3

# The pieces parsers look for, in pieces: what adversarial output is built from.
TOKENS = [
    "\\boxed{", "\\boxed", "{", "}", "[", "]", "\\text{", "offer", "offer:", " ", "\t", "\n", ":", "wood", "gold",
    "1", "for", "and", "->", "<task", "<task>", "</task>", "<program>", "</program>", "```", "```python\n", "accept",
    "bet", "check", "a", "=", '"', "'", "`", ".", "*", "!", "\ud800", "\x1b",
]  # fmt: skip
pieces = st.lists(st.sampled_from(TOKENS), min_size=0, max_size=3).map("".join)


def _env(game: str):
    env = games.make(game)
    env.reset(seed=0)
    return env


KUHN, NEGOTIATION, CONNECT_FOUR = _env("kuhn_poker"), _env("simple_negotiation"), _env("classic/connect_four-v3")
PARSERS = {
    "boxed_contents": boxed_contents,
    "bare": bare,
    "extract_answer": extract_answer,
    "kuhn strict": lambda t: SeatRole("kuhn_poker").parse(KUHN, "player_0", t),
    "kuhn lenient": lambda t: SeatRole("kuhn_poker").parse(KUHN, "player_0", t, lenient=True),
    "connect four lenient": lambda t: SeatRole("classic/connect_four-v3").parse(CONNECT_FOUR, "player_0", t, True),
    "negotiation strict": lambda t: SeatRole("simple_negotiation").parse(NEGOTIATION, "player_0", t),
    "negotiation lenient": lambda t: SeatRole("simple_negotiation").parse(NEGOTIATION, "player_0", t, lenient=True),
    "read_move": read_move,
    "named_moves": named_moves,
    "python_block": python_block,
    "read_answer": read_answer,
    "read_submission": read_submission,
    "read_verdict": read_verdict,
    "normalize_answer": normalize_answer,
    "answers_match": lambda t: answers_match(t, "42"),
    "as_written": lambda t: as_written(t, 2**14),
}


def _cpu_seconds(parse, text: str) -> float:
    start = time.process_time()
    parse(text)
    return time.process_time() - start


def growth_exponent(parse, prefix: str, unit: str, suffix: str) -> float | None:
    """The least-squares slope of log(cost) against log(size) over the sizes that cost more than
    the floor; None when fewer than two do (nothing grows measurably up to 1 MiB).

    Each size's cost is the least of ``ROUNDS`` parses taken in turns across the sizes, so that a
    burst of load from elsewhere on the machine inflates one sample, not one size."""
    texts, best = [], []
    for size in SIZES:  # the first round, which also stops where one parse takes seconds
        texts.append(prefix + unit * (size // len(unit)) + suffix)
        best.append(_cpu_seconds(parse, texts[-1]))
        if best[-1] >= STOP_S:
            break
    for _ in range(ROUNDS - 1):
        best = [min(cost, _cpu_seconds(parse, text)) for text, cost in zip(texts, best)]
    points = [(math.log(len(text)), math.log(cost)) for text, cost in zip(texts, best) if cost >= FLOOR_S]
    if len(points) < 2:
        return None
    mx, my = sum(x for x, _ in points) / len(points), sum(y for _, y in points) / len(points)
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def least_exponent(parse, prefix: str, unit: str, suffix: str) -> float | None:
    """``growth_exponent``, measured again while it is over the limit, up to ``ATTEMPTS`` times:
    the least measured (None as soon as one finds nothing growing measurably)."""
    exponents = []
    for _ in range(ATTEMPTS):
        exponent = growth_exponent(parse, prefix, unit, suffix)
        if exponent is None:
            return None
        exponents.append(exponent)
        if exponent < MAX_EXPONENT:
            break
    return min(exponents)


def test_a_quadratic_parser_is_caught_on_every_attempt():
    rescanning = lambda t: [t.find("}", i) for i in range(0, len(t), 16)]  # noqa: E731 (each start rescans to the end)
    assert least_exponent(rescanning, "", "\\boxed{", "") > 1.8


@pytest.mark.slow
@pytest.mark.parametrize("name", PARSERS)
@settings(max_examples=4, deadline=None, derandomize=True)
@given(prefix=pieces, unit=pieces.filter(bool), suffix=pieces)
@example(prefix="", unit="\\boxed{", suffix="")  # every unclosed box rescanned to the end
@example(prefix="offer", unit=" ", suffix="")  # "offer\s*:?\s*" backtracking over spaces
@example(prefix="<program>1</program><task ", unit="a", suffix=">t</task>")  # an attribute that never meets "="
@example(prefix="", unit="<task>", suffix="</program>")  # unclosed tags, each read to the end
@example(prefix="", unit="```", suffix="")  # nested code fences around an answer
@example(prefix="", unit="'", suffix="")  # nested quotes around an answer
@example(prefix="a", unit=" ", suffix="a")  # punctuation trimmed from both ends of a move
def test_parsing_time_grows_linearly(name, prefix, unit, suffix):
    exponent = least_exponent(PARSERS[name], prefix, unit, suffix)
    assert exponent is None or exponent < MAX_EXPONENT, (
        f"{name}: parse time grows as size^{exponent:.2f} on {prefix!r} + {unit!r} * n + {suffix!r}"
    )
