"""Verifiable task families with two difficulty knobs: seed tasks for the proposer, and held-out sets.

| Family             | Statement shows             | Answer                    | size knob    | complexity knob |
|--------------------|-----------------------------|---------------------------|--------------|-----------------|
| ``arithmetic``     | an integer expression       | an integer                | literals 2-8 | see below       |
| ``list_ops``       | integers and numbered steps | an integer or ``[1, 2]``  | length 3-15  | steps 1-5       |
| ``string_ops``     | a string and numbered steps | the string, or an integer | length 4-24  | steps 1-5       |
| ``program_output`` | a short Python program      | the one line it prints    | data 3-12    | see below       |

Complexity levels of ``arithmetic`` (``ARITHMETIC_LEVELS``): ``+ -`` on 1..9; then ``*`` on 1..20;
``//`` on 1..50; ``%`` and ``( )`` on 1..99; the same on 1..999. Levels of ``program_output``: a loop
summing into ``total`` (5 lines); an ``if``/``else`` in it (8); a helper function (12); an inner loop
counting into ``count`` (15); a dict or list filled in the loop (17).

A :class:`Task` carries its reference solution as a *program*: stdlib-only Python that prints the
answer and nothing else, so a game can recompute the answer in a sandbox. For ``program_output``
the program is the one the statement shows. Every answer is computed twice: directly by the
generator, and by the program text it renders. The tests run the programs in a child process and
check that the two agree (STYLE §11).

Knobs are (size, complexity), each in [0, 1]. Each maps onto an integer level in equal-width bins
(:func:`_level`), so every level gets the same share of the knob square and 1.0 reaches the top
level. ``Task.difficulty`` is the mean of the two knobs.

Answers are unambiguous by construction: ``//`` and ``%`` only divide a non-negative number by a
positive one, there is no float division, a string never starts or ends with a space, and every
answer fits in ``MAX_ANSWER_CHARS``. :func:`answers_match` compares answers leniently, after
:func:`normalize_answer`, but keeps case.

>>> import numpy as np
>>> task = generate("arithmetic", (0.0, 0.0), np.random.default_rng(0))
>>> task.program, task.answer
('print(8 - 5)', '3')
>>> answers_match(" `3`. ", task.answer)
True

Version history (held-out sets are only comparable within one version):
* v1: first version.
* v1 still: :func:`distractors` (multiple choice) draws from a task's own family; tasks are unchanged.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

AGENT0_BAND = (0.3, 0.8)  # p̂ of the tasks an executor learns from (Agent0): hard enough to teach, solvable
KNOBS = 2  # (size, complexity), each in [0, 1]
MAX_ANSWER_CHARS = 60  # short enough to read, compare and print on one line
DISTRACTOR_DRAWS = 20  # sibling tasks drawn per wrong option wanted, at most (see distractors)

ARITHMETIC_TERMS = (2, 8)  # integer literals in the expression (the size knob)
ARITHMETIC_MAX_VALUE = 10**6  # a product that would pass this in magnitude becomes a sum instead
LIST_LENGTH = (3, 15)  # the size knob of list_ops
LIST_VALUES = (0, 40)  # two digits at most, so 15 of them print in 60 characters
STRING_LENGTH = (4, 24)  # the size knob of string_ops
STRING_LETTERS = "abcdeilmnorst"  # a small alphabet, so letters repeat and dedupe/count have work to do
STRING_SYMBOLS = "*#@=+~"  # replacements: not letters, digits, quotes, spaces or periods
CHAIN_LENGTH = (1, 5)  # steps in list_ops and string_ops (the complexity knob)
DATA_LENGTH = (3, 12)  # program_output's data list (the size knob)
DATA_VALUES = (1, 20)
PROGRAM_LEVELS = 5  # program_output's complexity levels, listed in _program_output
# Salts held-out streams. SeedSequence pads entropy with zeros, so default_rng([seed, 0]) is
# default_rng(seed); a non-zero last word keeps every held-out stream apart from a training one.
HELDOUT_SALT = 0x7A5C


def task_filter(p_hat: float, low: float = AGENT0_BAND[0], high: float = AGENT0_BAND[1]) -> bool:
    """Keep a task for executor training iff low ≤ p̂ ≤ high (Agent0's upload.py, README bounds)."""
    return low <= p_hat <= high


@dataclass(frozen=True)
class Task:
    """One verifiable task: what the executor sees, a program that prints the answer, and the answer."""

    family: str  # one of FAMILIES
    knobs: tuple[float, float]  # (size, complexity) in [0, 1], as asked for
    statement: str  # self-contained English; its last sentence says in what form to answer
    program: str  # stdlib-only Python source that prints `answer` and nothing else
    answer: str  # exactly what `program` prints, stripped

    @property
    def label(self) -> dict[str, str]:
        """Its family and knobs as a scripted proposer tags a task (``<task family=… size=… complexity=…>``)."""
        return {"family": self.family, "size": f"{self.knobs[0]:.4f}", "complexity": f"{self.knobs[1]:.4f}"}

    @property
    def difficulty(self) -> float:
        """The mean of the knobs, in [0, 1]: one number for curricula and plots."""
        return sum(self.knobs) / KNOBS


def _level(knob: float, lo: int, hi: int) -> int:
    """A knob in [0, 1] as an integer in lo..hi, in equal-width bins (1.0 lands in the top one)."""
    return lo + min(hi - lo, int(knob * (hi - lo + 1)))


def _int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A Python int in lo..hi inclusive (never a numpy scalar, whose repr would leak into lists)."""
    return int(rng.integers(lo, hi, endpoint=True))


def _pick(rng: np.random.Generator, options: Sequence[Any]) -> Any:
    return options[int(rng.integers(len(options)))]


def _numbered(steps: Sequence[str]) -> str:
    return "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))


# Family: arithmetic


@dataclass(frozen=True)
class _ArithmeticLevel:
    max_number: int  # literals after + and - are drawn from 1..max_number
    max_factor: int  # right operands of *, // and % are drawn from 2..max_factor
    ops: tuple[str, ...]
    groups: bool  # whether an operand may be a parenthesised (a + b) or (a - b), two literals


ARITHMETIC_LEVELS = (
    _ArithmeticLevel(9, 0, ("+", "-"), False),
    _ArithmeticLevel(20, 9, ("+", "-", "*"), False),
    _ArithmeticLevel(50, 9, ("+", "-", "*", "//"), False),
    _ArithmeticLevel(99, 12, ("+", "-", "*", "//", "%"), True),
    _ArithmeticLevel(999, 12, ("+", "-", "*", "//", "%"), True),
)
_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod}
_ARITHMETIC_RULES = {
    "//": "`a // b` is integer division rounded down.",
    "%": "`a % b` is the remainder of a divided by b.",
}


def _arithmetic(size: float, complexity: float, rng: np.random.Generator) -> tuple[str, str, str]:
    """A sum of signed terms, each a left-to-right chain of *, // and %, evaluated without eval()."""
    n_terms = _level(size, *ARITHMETIC_TERMS)
    level = ARITHMETIC_LEVELS[_level(complexity, 0, len(ARITHMETIC_LEVELS) - 1)]
    left = n_terms  # literals still to place

    def operand(lo: int, hi: int, group_ok: bool = True) -> tuple[str, int, int]:
        """(text, value, literals used): a literal, or a parenthesised pair where allowed."""
        if group_ok and level.groups and left >= 2 and rng.random() < 0.3:
            a, op, b = _int(rng, lo, hi), _pick(rng, ("+", "-")), _int(rng, lo, hi)
            return f"({a} {op} {b})", _ARITH[op](a, b), 2
        k = _int(rng, lo, hi)
        return str(k), k, 1

    text, chain, used = operand(1, level.max_number)  # chain: the running value of the current term
    pieces, total, sign, left = [text], 0, 1, left - used
    while left > 0:
        op = _pick(rng, level.ops)
        if op in ("*", "//", "%"):
            text, value, used = operand(2, level.max_factor, group_ok=op == "*")
            # // and % only divide a non-negative number, so floor and truncation agree
            fits = abs(chain * value) <= ARITHMETIC_MAX_VALUE if op == "*" else chain >= 0
            if fits:
                chain = _ARITH[op](chain, value)
                pieces += [op, text]
                left -= used
                continue
            op = _pick(rng, ("+", "-"))
        total += sign * chain
        text, chain, used = operand(1, level.max_number)
        sign = 1 if op == "+" else -1
        pieces += [op, text]
        left -= used
    total += sign * chain

    expression = " ".join(pieces)
    tight = [f"`{op}`" for op in ("*", "//", "%") if op in pieces]
    rules = ["Operators of equal precedence apply left to right."]
    if tight:
        named = tight[0] if len(tight) == 1 else f"{', '.join(tight[:-1])} and {tight[-1]}"
        rules.append(f"{named} bind{'s' if len(tight) == 1 else ''} tighter than `+` and `-`.")
    rules += [rule for op, rule in _ARITHMETIC_RULES.items() if op in pieces]
    if "(" in expression:
        rules.append("Parentheses are evaluated first.")
    statement = f"Evaluate the integer expression `{expression}`. {' '.join(rules)} Answer with the integer."
    return statement, f"print({expression})", str(total)


# Families: list_ops and string_ops, a start value and a chain of steps


@dataclass(frozen=True)
class _Step:
    text: str  # the numbered instruction the executor reads
    code: str  # the program line that does it (a print() line for a final step)
    value: Any  # the data after this step (the answer, for a final step)


_StepBuilder = Callable[[np.random.Generator, Any], "_Step | None"]  # None: not applicable here


def _chain(
    rng: np.random.Generator,
    start: Any,
    n_steps: int,
    steps: dict[str, _StepBuilder],
    finals: dict[str, _StepBuilder],
    valid: Callable[[Any], bool],
) -> list[_Step]:
    """n_steps steps from ``steps``, never the same one twice running; the last may be one of ``finals``.

    A builder answers None where its step cannot apply; a step that would leave the data invalid
    (an empty list, a string with a space at an end) is never taken, and one that changes nothing
    is taken only when no other applies (a palindrome of symbols has little left to do).
    """
    builders = steps | finals
    chain: list[_Step] = []
    value, last = start, None
    for i in range(n_steps):
        names = [name for name in steps if name != last] + (list(finals) if i == n_steps - 1 else [])
        fallback = None
        for j in rng.permutation(len(names)):
            name = names[j]
            step = builders[name](rng, value)
            if step is None or not (name in finals or valid(step.value)):
                continue
            if name in finals or step.value != value:
                break
            fallback = fallback or (name, step)
        else:
            if fallback is None:  # reverse always applies to valid data, so this is our bug
                raise AssertionError(f"no step applies to {value!r}")
            name, step = fallback
        chain.append(step)
        value, last = step.value, name
    return chain


def _sort(rng, xs):
    descending = bool(rng.integers(2))
    order, flag = ("descending", ", reverse=True") if descending else ("ascending", "")
    return _Step(f"Sort the list in {order} order.", f"xs = sorted(xs{flag})", sorted(xs, reverse=descending))


def _reverse_list(rng, xs):
    return _Step("Reverse the order of the list.", "xs = xs[::-1]", xs[::-1])


def _keep_parity(rng, xs):
    parity = _int(rng, 0, 1)
    kept = [x for x in xs if x % 2 == parity]
    if len(kept) == len(xs):  # a no-op; the other parity would empty the list
        return None
    name = ("even", "odd")[parity]
    return _Step(f"Keep only the {name} numbers.", f"xs = [x for x in xs if x % 2 == {parity}]", kept)


def _take(rng, xs):
    if len(xs) < 2:
        return None
    k = _int(rng, 1, len(xs) - 1)
    return _Step(f"Keep only the first {k} numbers.", f"xs = xs[:{k}]", xs[:k])


def _map(rng, xs):
    k, c = _int(rng, 2, 3), _int(rng, -9, 9)
    formula = f"{k} * x" + (f" + {c}" if c > 0 else f" - {-c}" if c < 0 else "")
    return _Step(f"Replace each number x with {formula}.", f"xs = [{formula} for x in xs]", [k * x + c for x in xs])


_LIST_STEPS: dict[str, _StepBuilder] = {
    "sort": _sort,
    "reverse": _reverse_list,
    "keep_parity": _keep_parity,
    "take": _take,
    "map": _map,
}
_LIST_FINALS: dict[str, _StepBuilder] = {
    "sum": lambda rng, xs: _Step("Take the sum of the numbers.", "print(sum(xs))", sum(xs)),
    "max": lambda rng, xs: _Step("Take the largest number.", "print(max(xs))", max(xs)),
    "len": lambda rng, xs: _Step("Count how many numbers there are.", "print(len(xs))", len(xs)),
}


def _list_ops(size: float, complexity: float, rng: np.random.Generator) -> tuple[str, str, str]:
    xs = [_int(rng, *LIST_VALUES) for _ in range(_level(size, *LIST_LENGTH))]
    steps = _chain(rng, xs, _level(complexity, *CHAIN_LENGTH), _LIST_STEPS, _LIST_FINALS, valid=bool)
    if isinstance(steps[-1].value, list) and len(str(steps[-1].value)) > MAX_ANSWER_CHARS:
        steps[-1] = _LIST_FINALS["sum"](rng, steps[-2].value if len(steps) > 1 else xs)
    final = steps[-1]
    is_list = isinstance(final.value, list)  # else a final step printed an integer
    code = [f"xs = {xs}", *(step.code for step in steps)] + (["print(xs)"] if is_list else [])
    form = "the resulting list as a Python list, like [1, 2, 3]" if is_list else "the integer"
    statement = (
        f"Start with the list {xs}. Apply these steps in order:\n{_numbered([s.text for s in steps])}\n"
        f"Answer with {form}."
    )
    return statement, "\n".join(code), str(final.value)


def _clean(s: str) -> bool:
    """A string whose printed, stripped form is itself: non-empty, no space at an end, no double space."""
    return bool(s) and s == s.strip() and "  " not in s


def _letters(s: str) -> list[str]:
    return sorted({c for c in s if c.isalpha()})


def _replace(rng, s):
    if not _letters(s):
        return None
    old, new = _pick(rng, _letters(s)), _pick(rng, STRING_SYMBOLS)
    return _Step(
        f'Replace every "{old}" with "{new}" (case-sensitive).', f's = s.replace("{old}", "{new}")', s.replace(old, new)
    )


def _slice(rng, s):
    spans = [(i, j) for i in range(len(s)) for j in range(i + 2, len(s) + 1) if j - i < len(s) and _clean(s[i:j])]
    if not spans:
        return None
    i, j = _pick(rng, spans)
    text = f"Keep only the characters at 0-based positions {i} to {j - 1} inclusive (the Python slice s[{i}:{j}])."
    return _Step(text, f"s = s[{i}:{j}]", s[i:j])


def _dedupe(rng, s):
    kept = "".join(c for i, c in enumerate(s) if not c.isalpha() or c not in s[:i])
    if kept == s:
        return None
    return _Step(
        "Remove every letter that already appeared earlier in the string, keeping its first occurrence "
        "(case-sensitive; spaces and symbols stay).",
        's = "".join(c for i, c in enumerate(s) if not c.isalpha() or c not in s[:i])',
        kept,
    )


def _join(rng, s):
    if " " not in s:
        return None
    text = 'Split the string into words at the spaces and join the words with "-".'
    return _Step(text, 's = "-".join(s.split())', "-".join(s.split()))


def _count(rng, s):
    if not _letters(s):
        return None
    c = _pick(rng, _letters(s))
    text = f'Count how many times "{c}" occurs in the string (case-sensitive).'
    return _Step(text, f'print(s.count("{c}"))', s.count(c))


_STRING_STEPS: dict[str, _StepBuilder] = {
    "reverse": lambda rng, s: _Step("Reverse the string.", "s = s[::-1]", s[::-1]),
    "upper": lambda rng, s: _Step("Convert every letter to uppercase.", "s = s.upper()", s.upper()),
    "lower": lambda rng, s: _Step("Convert every letter to lowercase.", "s = s.lower()", s.lower()),
    "replace": _replace,
    "slice": _slice,
    "join": _join,
    "dedupe": _dedupe,
}
_STRING_FINALS: dict[str, _StepBuilder] = {"count": _count}


def _phrase(rng: np.random.Generator, length: int) -> str:
    """Pseudo-words of at least two letters, single spaces between them, some capitalised."""
    chars: list[str] = []
    for i in range(length):
        # a space needs two letters before it and leaves room for two after it
        space_ok = 2 <= i <= length - 3 and " " not in chars[-2:]
        chars.append(" " if space_ok and rng.random() < 0.25 else _pick(rng, STRING_LETTERS))
    return " ".join(w.capitalize() if rng.random() < 0.3 else w for w in "".join(chars).split(" "))


def _string_ops(size: float, complexity: float, rng: np.random.Generator) -> tuple[str, str, str]:
    s = _phrase(rng, _level(size, *STRING_LENGTH))
    steps = _chain(rng, s, _level(complexity, *CHAIN_LENGTH), _STRING_STEPS, _STRING_FINALS, valid=_clean)
    final = steps[-1]
    is_count = isinstance(final.value, int)
    code = [f's = "{s}"', *(step.code for step in steps)] + ([] if is_count else ["print(s)"])
    form = "the integer" if is_count else "the resulting string exactly, without quotes"
    statement = (
        f'Start with the string "{s}" (the text between the quotes). Apply these steps in order:\n'
        f"{_numbered([step.text for step in steps])}\nAnswer with {form}."
    )
    return statement, "\n".join(code), str(final.value)


# Family: program_output, a tiny statement tree that renders as Python and runs as its own twin


@dataclass(frozen=True)
class _Expr:
    text: str  # Python source
    eval: Callable[[dict[str, Any]], Any]  # its value in an environment of names
    precedence: int = 4  # an atom (name, number, call) never needs parentheses


_PRECEDENCE = {"==": 1, ">": 1, "<": 1, "+": 2, "-": 2, "*": 3, "//": 3, "%": 3}
_OPS = {**_ARITH, "==": operator.eq, ">": operator.gt, "<": operator.lt}


def _name(name: str) -> _Expr:
    return _Expr(name, lambda env: env[name])


def _num(k: int) -> _Expr:
    return _Expr(str(k), lambda env: k)


def _bin(a: _Expr, op: str, b: _Expr) -> _Expr:
    p, fn = _PRECEDENCE[op], _OPS[op]
    # Left-associative, except that comparisons chain in Python, so a comparison operand is wrapped.
    left = a.text if a.precedence > p or (a.precedence == p and p > 1) else f"({a.text})"
    right = b.text if b.precedence > p else f"({b.text})"
    return _Expr(f"{left} {op} {right}", lambda env: fn(a.eval(env), b.eval(env)), p)


def _call(name: str, arg: _Expr, fn: Callable[[Any], Any] | None = None) -> _Expr:
    """``name(arg)``: a builtin passed as ``fn``, or a function the program defines (looked up when run)."""
    return _Expr(f"{name}({arg.text})", lambda env: (fn or env[name])(arg.eval(env)))


@dataclass(frozen=True)
class _Stmt:
    lines: tuple[str, ...]  # Python source, indented relative to the statement
    run: Callable[[dict[str, Any]], None]  # its effect on an environment of names


class _Returned(Exception):
    def __init__(self, value: Any):
        self.value = value


def _run(stmts: Sequence[_Stmt], env: dict[str, Any]) -> None:
    for stmt in stmts:
        stmt.run(env)


def _block(header: str, stmts: Sequence[_Stmt]) -> tuple[str, ...]:
    return (header, *("    " + line for stmt in stmts for line in stmt.lines))


def _set(target: str, op: str, value: _Expr, key: _Expr | None = None) -> _Stmt:
    """``target op value`` with op one of =, +=, -=; or ``target[key] = value``."""

    def run(env: dict[str, Any]) -> None:
        new = value.eval(env)
        if key is not None:
            env[target][key.eval(env)] = new
        else:
            env[target] = new if op == "=" else _ARITH[op[0]](env[target], new)

    return _Stmt((f"{target if key is None else f'{target}[{key.text}]'} {op} {value.text}",), run)


def _do(call: _Expr) -> _Stmt:  # an expression run for its effect, like kept.append(x)
    return _Stmt((call.text,), call.eval)


def _if(cond: _Expr, body: Sequence[_Stmt], orelse: Sequence[_Stmt] = ()) -> _Stmt:
    body, orelse = tuple(body), tuple(orelse)  # frozen: the lines are rendered now
    lines = _block(f"if {cond.text}:", body) + (_block("else:", orelse) if orelse else ())
    return _Stmt(lines, lambda env: _run(body if cond.eval(env) else orelse, env))


def _for(var: str, iterable: _Expr, body: Sequence[_Stmt]) -> _Stmt:
    body = tuple(body)

    def run(env: dict[str, Any]) -> None:
        for item in iterable.eval(env):
            env[var] = item
            _run(body, env)

    return _Stmt(_block(f"for {var} in {iterable.text}:", body), run)


def _return(value: _Expr) -> _Stmt:
    def run(env: dict[str, Any]) -> None:
        raise _Returned(value.eval(env))

    return _Stmt((f"return {value.text}",), run)


def _def(name: str, param: str, body: Sequence[_Stmt]) -> _Stmt:
    body = tuple(body)

    def run(env: dict[str, Any]) -> None:
        def function(arg: Any) -> Any:
            try:
                _run(body, {**env, param: arg})  # locals: the globals plus the parameter
            except _Returned as returned:
                return returned.value
            return None

        env[name] = function

    return _Stmt(_block(f"def {name}({param}):", body), run)


def _print(values: Sequence[_Expr]) -> _Stmt:
    def run(env: dict[str, Any]) -> None:
        env["__printed__"].append(" ".join(str(v.eval(env)) for v in values))

    return _Stmt((f"print({', '.join(v.text for v in values)})",), run)


def _program_output(size: float, complexity: float, rng: np.random.Generator) -> tuple[str, str, str]:
    """Levels add, in order: 0) a loop accumulating into ``total``; 1) an if/else in the loop;
    2) a helper function ``f`` with its own if; 3) an inner loop counting into ``count``;
    4) a dict or list filled in the loop. Each level adds lines, and levels 1 and 3 add nesting."""
    n = _level(size, *DATA_LENGTH)
    level = _level(complexity, 0, PROGRAM_LEVELS - 1)
    data = [_int(rng, *DATA_VALUES) for _ in range(n)]
    x, total = _name("x"), _name("total")

    def small(var: _Expr) -> _Expr:  # divisors are positive and data positive, so // and % are plain
        return _bin(var, _pick(rng, ("*", "+", "%", "//")), _num(_int(rng, 2, 5)))

    def condition(var: _Expr) -> _Expr:
        if rng.random() < 0.5:
            m = _int(rng, 2, 4)
            return _bin(_bin(var, "%", _num(m)), "==", _num(_int(rng, 0, m - 1)))
        return _bin(var, _pick(rng, (">", "<")), _num(_int(rng, 5, 15)))

    head: list[_Stmt] = [_set("data", "=", _Expr(str(data), lambda env: list(data)))]
    if level >= 2:
        v = _name("v")
        head.append(_def("f", "v", [_if(condition(v), [_return(small(v))]), _return(small(v))]))
    gain = _call("f", x) if level >= 2 else small(x)
    setup: list[_Stmt] = [_set("total", "=", _num(0))]
    then: list[_Stmt] = [_set("total", "+=", gain)]
    orelse: list[_Stmt] = [_set("total", "-=", _num(_int(rng, 1, 9)) if rng.random() < 0.5 else small(x))]
    after: list[_Stmt] = []  # loop-body statements after the if
    printed = [total]
    if level >= 3:
        setup.append(_set("count", "=", _num(0)))
        bound = _call("range", _bin(x, "%", _num(_level(size, 2, 5))), range)
        tally = _bin(_name("j"), "+", _num(1)) if rng.random() < 0.5 else _name("j")
        orelse.append(_for("j", bound, [_set("count", "+=", tally)]))
        printed.append(_name("count"))
    if level >= 4 and rng.random() < 0.5:
        setup.append(_set("seen", "=", _Expr("{}", lambda env: {})))
        key = _bin(x, "%", _num(_int(rng, 2, 3)))
        old = _Expr(f"seen.get({key.text}, 0)", lambda env: env["seen"].get(key.eval(env), 0))
        after.append(_set("seen", "=", _bin(old, "+", _num(1) if rng.random() < 0.5 else x), key=key))
        printed.append(_Expr("sorted(seen.items())", lambda env: sorted(env["seen"].items())))
    elif level >= 4:
        setup.append(_set("kept", "=", _Expr("[]", lambda env: [])))
        then.append(_do(_Expr("kept.append(x)", lambda env: env["kept"].append(env["x"]))))
        printed.append(_Expr("kept[-3:]", lambda env: env["kept"][-3:]))
    body = [_set("total", "+=", gain)] if level == 0 else [_if(condition(x), then, orelse), *after]
    program = [*head, *setup, _for("x", _name("data"), body), _print(printed)]

    env: dict[str, Any] = {"__printed__": []}
    _run(program, env)
    (answer,) = env["__printed__"]
    source = "\n".join(line for stmt in program for line in stmt.lines)
    form = "the integer it prints" if len(printed) == 1 else "that line exactly as printed"
    shown = f"```python\n{source}\n```"
    statement = f"What does this Python program print? It prints one line.\n\n{shown}\n\nAnswer with {form}."
    return statement, source, answer


# The registry and the public API

_GENERATORS: dict[str, Callable[[float, float, np.random.Generator], tuple[str, str, str]]] = {
    "arithmetic": _arithmetic,
    "list_ops": _list_ops,
    "string_ops": _string_ops,
    "program_output": _program_output,
}
FAMILIES: tuple[str, ...] = tuple(_GENERATORS)


def _check_family(family: str) -> Callable[[float, float, np.random.Generator], tuple[str, str, str]]:
    if family not in _GENERATORS:
        raise ValueError(f"unknown task family {family!r}; choose one of {', '.join(FAMILIES)}")
    return _GENERATORS[family]


def _check_knobs(knobs: Sequence[float]) -> tuple[float, float]:
    try:
        values = tuple(float(k) for k in knobs)
    except (TypeError, ValueError):
        values = ()  # not numbers: reported below
    if len(values) != KNOBS or not all(0.0 <= k <= 1.0 for k in values):  # NaN fails both comparisons
        raise ValueError(
            f"knobs must be {KNOBS} numbers (size, complexity), each in [0, 1]; got {knobs!r}. Clip them into [0, 1]."
        )
    return values  # type: ignore[return-value]  # length checked above


def generate(family: str, knobs: Sequence[float], rng: np.random.Generator) -> Task:
    """One task of ``family`` at ``knobs`` = (size, complexity) in [0, 1]; the same rng state gives the same task."""
    make = _check_family(family)
    size, complexity = _check_knobs(knobs)
    statement, program, answer = make(size, complexity, rng)
    return Task(family, (size, complexity), statement, program, answer)


def distractors(task: Task, n: int, rng: np.random.Generator) -> list[str]:
    """Up to ``n`` wrong answers for a multiple-choice version of ``task``: the answers of other
    tasks of its family at its knobs, each different from the answer and from one another (after
    normalisation). Every option is then the right answer to some task of this kind, so an
    executor does better than chance only by reading the task (its last sentence says the
    answer's form, which rules out options of another form; the rest takes solving). A family
    with few answers at these knobs may give fewer (at most ``DISTRACTOR_DRAWS`` tasks per option
    are drawn)."""
    seen, found = {normalize_answer(task.answer)}, []
    for _ in range(DISTRACTOR_DRAWS * n):
        if len(found) == n:
            break
        answer = generate(task.family, task.knobs, rng).answer
        if normalize_answer(answer) not in seen:
            seen.add(normalize_answer(answer))
            found.append(answer)
    return found


def _van_der_corput(i: int) -> float:
    """The base-2 radical inverse of i: 0, 1/2, 1/4, 3/4, 1/8, ... in [0, 1)."""
    x, scale = 0.0, 0.5
    while i:
        x += (i & 1) * scale
        i, scale = i >> 1, scale / 2
    return x


def heldout(family: str, n: int, seed: int, knobs: Sequence[float] | None = None) -> list[Task]:
    """A reproducible evaluation set of ``n`` tasks of ``family``.

    ``knobs`` None spreads the tasks evenly over the knob square with the Hammersley set
    ((i + ½)/n, radical inverse of i), https://en.wikipedia.org/wiki/Low-discrepancy_sequence.
    Task i draws from its own stream, ``default_rng([seed, i, HELDOUT_SALT])``, so with fixed knobs
    a smaller set is a prefix of a larger one, and no stream is a training ``default_rng(seed)``.
    """
    _check_family(family)
    if n < 0:
        raise ValueError(f"n must be a non-negative number of tasks; got {n}")
    points = [_check_knobs(knobs)] * n if knobs is not None else [((i + 0.5) / n, _van_der_corput(i)) for i in range(n)]
    return [generate(family, point, np.random.default_rng([seed, i, HELDOUT_SALT])) for i, point in enumerate(points)]


# Answer comparison

_QUOTES = ('"', "'", "`")
_FENCE_TAG = re.compile(r"[\w+-]*\n")  # the language line opening a fenced block: "python\n"
_INTEGER = re.compile(r"([+-]?[0-9]+)(?:\.0*)?")
_DELIMITER_SPACE = re.compile(r" ?([,:\[\](){}]) ?")
_OPENERS, _CLOSERS = "[({", "])}"


def _canonical_int(token: str) -> str:
    """``+3``, ``3.0``, ``03`` → ``3``; ``-0`` → ``0``; anything else unchanged."""
    match = _INTEGER.fullmatch(token)
    if match is None or len(match.group(1)) > 1000:  # int() refuses over 4300 digits; no answer is that long
        return token
    return str(int(match.group(1)))


def _canonical_span(span: str, bracketed: bool) -> str:
    if bracketed:  # inside brackets: no spaces around delimiters, integers split at them
        span = _DELIMITER_SPACE.sub(r"\1", span)
        return re.sub(r"[^,:\[\](){} ]+", lambda m: _canonical_int(m.group()), span)
    return re.sub(r"[^ ]+", lambda m: _canonical_int(m.group()), span)


def _stripped(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _peeled(text: str) -> str:
    """``text`` without the wrappers around an answer — surrounding space, a code fence (and its
    language line), a trailing period, matching quotes or backticks — peeled until none is left
    (``"`7`."`` → ``"`7`"`` → ``"7"``). The two ends move inward instead of slicing per layer, so
    a text of many nested wrappers costs linear time, not quadratic."""
    start, end = _stripped(text, 0, len(text))
    while True:
        before = start, end
        if end - start >= 6 and text.startswith("```", start, end) and text.endswith("```", start, end):
            start, end = start + 3, end - 3
            tag = _FENCE_TAG.match(text, start, end)
            start = tag.end() if tag else start
            end -= end > start and text[end - 1] == "\n"
            start, end = _stripped(text, start, end)
        if end > start and text[end - 1] == ".":
            start, end = _stripped(text, start, end - 1)
        if end - start >= 2 and text[start] == text[end - 1] and text[start] in _QUOTES:
            start, end = _stripped(text, start + 1, end - 1)
        if (start, end) == before:
            return text[start:end]


def normalize_answer(text: str) -> str:
    """A canonical form for comparing answers: surrounding space, quotes, backticks, code fences and
    trailing periods removed; whitespace collapsed; no spaces around commas inside brackets
    (``[1, 2]`` → ``[1,2]``); integers canonical (``+3``, ``3.0``, ``03`` → ``3``; ``-0`` → ``0``).
    Case is kept: string answers may differ only in case."""
    text = " ".join(_peeled(text).split())
    # Split into top-level bracketed spans and the text between them; an unclosed bracket is plain text.
    spans, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in _OPENERS:
            if depth == 0:
                spans.append((text[start:i], False))
                start = i
            depth += 1
        elif ch in _CLOSERS and depth:
            depth -= 1
            if depth == 0:
                spans.append((text[start : i + 1], True))
                start = i + 1
    spans.append((text[start:], False))
    return "".join(_canonical_span(span, bracketed) for span, bracketed in spans)


def answers_match(given: str | None, reference: str) -> bool:
    """Whether ``given`` (None when the executor gave no answer) equals ``reference`` after normalisation."""
    return given is not None and normalize_answer(given) == normalize_answer(reference)
