"""Task families: every program prints its answer (run in a child process), knobs steer difficulty,
generation is reproducible, and answers compare leniently but keep case."""

import ast
import doctest
import itertools
import json
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from games.task_forge import families as task_families
from games.task_forge.families import (
    FAMILIES,
    KNOBS,
    MAX_ANSWER_CHARS,
    Task,
    answers_match,
    distractors,
    generate,
    heldout,
    normalize_answer,
)

knob = st.floats(0.0, 1.0)
seed = st.integers(0, 2**32 - 1)
GRID = np.linspace(0.0, 1.0, 11)

# The child runs each program in its own namespace with stdout captured, so one process checks many.
CHILD = r"""
import contextlib, io, json, sys
printed = []
for program in json.load(sys.stdin):
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer):
            exec(program, {"__name__": "__main__"})
        printed.append(buffer.getvalue())
    except Exception as error:
        printed.append(f"raised {error!r}")
sys.stdout.write(json.dumps(printed))
"""


def run_programs(tasks: list[Task]) -> list[str]:
    """What each task's program prints, run in one isolated child interpreter, never in this process."""
    result = subprocess.run(
        [sys.executable, "-I", "-c", CHILD],
        input=json.dumps([t.program for t in tasks]),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(result.stdout)


def assert_programs_print_answers(tasks: list[Task]) -> None:
    for task, printed in zip(tasks, run_programs(tasks), strict=True):
        # exactly the answer and one newline: no other output, nothing for .strip() to hide
        assert printed == task.answer + "\n", f"{task.family} {task.knobs}: printed {printed!r}\n{task.program}"


def task_at(family, size, complexity, s=0):
    return generate(family, (size, complexity), np.random.default_rng(s))


# --- the reference program prints the answer ----------------------------------------------------


def test_programs_print_their_answers_over_a_knob_grid():
    tasks = [
        task_at(f, size, complexity, s)
        for f in FAMILIES
        for size in np.linspace(0, 1, 6)
        for complexity in np.linspace(0, 1, 6)
        for s in range(3)
    ]
    assert_programs_print_answers(tasks)


@settings(max_examples=10)
@given(st.lists(st.tuples(st.sampled_from(FAMILIES), knob, knob, seed), min_size=1, max_size=50))
def test_programs_print_their_answers(draws):
    assert_programs_print_answers([task_at(*draw) for draw in draws])


@pytest.mark.parametrize("family", FAMILIES)
def test_program_runs_alone_as_the_sandbox_runs_it(family):
    task = task_at(family, 1.0, 1.0, s=5)
    result = subprocess.run(
        [sys.executable, "-I", "-c", task.program], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == task.answer + "\n"
    assert result.stderr == ""


@pytest.mark.parametrize("family", FAMILIES)
@given(size=knob, complexity=knob, s=seed)
def test_tasks_are_well_formed(family, size, complexity, s):
    task = task_at(family, size, complexity, s)
    assert task.family == family and task.knobs == (size, complexity)
    assert task.answer and task.answer == task.answer.strip() and "\n" not in task.answer
    assert len(task.answer) <= MAX_ANSWER_CHARS, task.answer
    assert " Answer with " in " " + task.statement.splitlines()[-1], "the statement must end by saying how to answer"
    assert "np." not in task.program, "numpy scalars leaked into the program text"
    ast.parse(task.program)  # valid Python; it is run in the tests above
    # only stdlib builtins: no imports at all
    assert not re.search(r"\bimport\b", task.program)


@pytest.mark.parametrize("family", FAMILIES)
@given(size=knob, complexity=knob, s=seed, n=st.integers(1, 5))
def test_distractors_are_wrong_distinct_answers_of_the_same_kind(family, size, complexity, s, n):
    task = task_at(family, size, complexity, s)
    wrong = distractors(task, n, np.random.default_rng(s))
    assert wrong == distractors(task, n, np.random.default_rng(s))
    normalized = {normalize_answer(w) for w in wrong}
    assert len(normalized) == len(wrong) <= n and normalize_answer(task.answer) not in normalized
    # each is the answer of a task of the same family and knobs
    rng = np.random.default_rng(s)
    siblings = {generate(family, task.knobs, rng).answer for _ in range(task_families.DISTRACTOR_DRAWS * n)}
    assert set(wrong) <= siblings


def test_distractors_fill_the_options_where_answers_vary():
    for family in FAMILIES:
        task = task_at(family, 0.5, 0.5)
        assert len(distractors(task, 3, np.random.default_rng(0))) == 3, family


def test_program_output_statement_shows_the_program():
    task = task_at("program_output", 0.5, 0.5)
    assert task.program in task.statement


# --- determinism -------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
@given(size=knob, complexity=knob, s=seed)
def test_same_seed_same_task(family, size, complexity, s):
    assert task_at(family, size, complexity, s) == task_at(family, size, complexity, s)


@pytest.mark.parametrize("family", FAMILIES)
def test_heldout_is_reproducible_and_sized(family):
    first = heldout(family, 20, seed=3)
    assert first == heldout(family, 20, seed=3)
    assert len(first) == 20 and all(t.family == family for t in first)
    assert first != heldout(family, 20, seed=4)
    assert heldout(family, 0, seed=3) == []


def test_heldout_with_fixed_knobs_grows_by_prefix():
    small = heldout("list_ops", 5, seed=1, knobs=(0.3, 0.6))
    assert small == heldout("list_ops", 12, seed=1, knobs=(0.3, 0.6))[:5]
    assert {t.knobs for t in small} == {(0.3, 0.6)}
    assert len({t.program for t in small}) == 5, "each task draws from its own stream"


def test_heldout_streams_differ_from_training_streams():
    # default_rng([s, 0]) equals default_rng(s), so an unsalted held-out task 0 would repeat a training task
    task = heldout("string_ops", 1, seed=11, knobs=(0.5, 0.5))[0]
    assert task != generate("string_ops", (0.5, 0.5), np.random.default_rng(11))


def test_heldout_spreads_knobs_evenly():
    tasks = heldout("arithmetic", 16, seed=0)
    for axis in range(KNOBS):
        # Hammersley points: each quarter of each knob's range holds exactly a quarter of the set
        quarters = np.bincount([min(3, int(t.knobs[axis] * 4)) for t in tasks], minlength=4)
        assert quarters.tolist() == [4, 4, 4, 4], (axis, quarters)


# Golden tasks pin the generators: a change here changes every held-out set, so bump the version
# history in the module docstring and say why in the commit message.
GOLDEN = {  # task_at(family, 0.0, 0.0, s=0), v1
    "arithmetic": ("print(8 - 5)", "3"),
    "list_ops": ("xs = [34, 26, 20]\nxs = [3 * x + 2 for x in xs]\nprint(xs)", "[104, 80, 62]"),
    "string_ops": ('s = "Snld"\ns = s[1:4]\nprint(s)', "nld"),
    "program_output": ("data = [18, 13, 11]\ntotal = 0\nfor x in data:\n    total += x + 3\nprint(total)", "51"),
}


@pytest.mark.parametrize("family", GOLDEN)
def test_golden_tasks(family):
    task = task_at(family, 0.0, 0.0)
    assert (task.program, task.answer) == GOLDEN[family]


# --- difficulty knobs --------------------------------------------------------------------------


def literals(task):  # arithmetic: integer literals in the expression
    return len(re.findall(r"[0-9]+", task.program))


def first_literal(task):  # list_ops and string_ops: the start value; program_output: data
    return ast.literal_eval(task.program.splitlines()[0].split(" = ", 1)[1])


def steps(task):
    return len(re.findall(r"^\d+\. ", task.statement, re.MULTILINE))


def program_lines(task):
    return len(task.program.splitlines())


def nesting(task):
    return max((len(line) - len(line.lstrip())) // 4 for line in task.program.splitlines())


SIZE_MEASURES = {
    "arithmetic": literals,
    "list_ops": lambda t: len(first_literal(t)),
    "string_ops": lambda t: len(first_literal(t)),
    "program_output": lambda t: len(first_literal(t)),
}
COMPLEXITY_MEASURES = {
    "arithmetic": None,  # random per task; checked over many seeds below
    "list_ops": steps,
    "string_ops": steps,
    "program_output": program_lines,
}


def assert_grows(values, what):
    assert all(a <= b for a, b in itertools.pairwise(values)), f"{what} is not monotone: {values}"
    assert values[0] < values[-1], f"{what} does not grow: {values}"


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("other", [0.0, 0.5, 1.0])
def test_size_knob_grows_size(family, other):
    for s in range(3):
        assert_grows([SIZE_MEASURES[family](task_at(family, k, other, s)) for k in GRID], f"{family} size")


@pytest.mark.parametrize("family", ["list_ops", "string_ops", "program_output"])
@pytest.mark.parametrize("other", [0.0, 0.5, 1.0])
def test_complexity_knob_grows_complexity(family, other):
    for s in range(3):
        assert_grows([COMPLEXITY_MEASURES[family](task_at(family, other, k, s)) for k in GRID], f"{family} complexity")


def test_list_and_string_chains_span_one_to_five_steps():
    for family in ("list_ops", "string_ops"):
        assert steps(task_at(family, 0.5, 0.0)) == 1 and steps(task_at(family, 0.5, 1.0)) == 5


def test_program_nesting_grows_with_complexity():
    assert_grows([nesting(task_at("program_output", 0.5, k)) for k in GRID], "program nesting")


def test_arithmetic_complexity_widens_numbers_and_operators():
    largest, operators = [], []
    for k in np.linspace(0, 1, 5):
        tasks = [task_at("arithmetic", 1.0, k, s) for s in range(40)]
        largest.append(max(int(n) for t in tasks for n in re.findall(r"[0-9]+", t.program)))
        operators.append(set().union(*(re.findall(r"//|[-+*%(]", t.program.removeprefix("print(")) for t in tasks)))
    assert_grows(largest, "largest literal")
    assert all(a <= b for a, b in itertools.pairwise(operators)), f"operator sets shrink: {operators}"
    # each level adds an operator or a digit: +- → * → // → % and ( ) → three-digit numbers
    widths = [(len(ops), len(str(n))) for ops, n in zip(operators, largest)]
    assert all(a < b for a, b in itertools.pairwise(widths)), f"complexity levels do not differ: {widths}"
    assert operators[0] == {"+", "-"} and "(" in operators[-1]


@given(a=knob, b=knob, other=knob)
def test_difficulty_is_in_unit_interval_and_grows_with_each_knob(a, b, other):
    lo, hi = sorted((a, b))
    for place in range(KNOBS):
        easy = [other] * KNOBS
        hard = [other] * KNOBS
        easy[place], hard[place] = lo, hi
        d_easy = Task("arithmetic", tuple(easy), "", "", "").difficulty
        d_hard = Task("arithmetic", tuple(hard), "", "", "").difficulty
        assert 0.0 <= d_easy <= d_hard <= 1.0
        if hi - lo > 1e-12:  # closer knobs can round to the same mean
            assert d_easy < d_hard


def test_difficulty_of_generated_tasks_spans_zero_to_one():
    assert task_at("list_ops", 0.0, 0.0).difficulty == 0.0
    assert task_at("list_ops", 1.0, 1.0).difficulty == 1.0


# --- answers -----------------------------------------------------------------------------------

NORMALIZED = [  # (given, canonical form), from the rules in normalize_answer's docstring
    ("  42 ", "42"),
    ('"abc"', "abc"),
    ("'abc'", "abc"),
    ("`[1, 2]`", "[1,2]"),
    ("```\n42\n```", "42"),
    ("```python\n[3, 4]\n```", "[3,4]"),
    ("7.", "7"),
    ("`7`.", "7"),
    ("+3", "3"),
    ("3.0", "3"),
    ("03", "3"),
    ("-0", "0"),
    ("-5", "-5"),
    ("3.5", "3.5"),
    ("a  b\n c", "a b c"),
    ("[ +3 , 03 ]", "[3,3]"),
    ("12 [(0, 4), (1, 5)]", "12 [(0,4),(1,5)]"),
    ("ab-03", "ab-03"),  # integers are canonical only as whole tokens, never inside a string
    ("HeLLo", "HeLLo"),
    ("it's", "it's"),
]


@pytest.mark.parametrize(("given", "expected"), NORMALIZED)
def test_normalize_answer_golden(given, expected):
    assert normalize_answer(given) == expected


MATCHES = [  # (given, reference, match?)
    ("[1,2]", "[1, 2]", True),
    ("  [1, 2] ", "[1, 2]", True),
    ("+3", "3", True),
    ("3.0", "3", True),
    ("-0", "0", True),
    ("'ab-cd'", "ab-cd", True),
    ("-10 34 [16,20,18]", "-10 34 [16, 20, 18]", True),
    ("hello", "HELLO", False),  # string_ops results may differ only in case
    ("[2, 1]", "[1, 2]", False),
    ("3", "-3", False),
    ("", "3", False),
    (None, "3", False),
    (None, "", False),
]


@pytest.mark.parametrize(("given", "reference", "expected"), MATCHES)
def test_answers_match_golden(given, reference, expected):
    assert answers_match(given, reference) is expected


@pytest.mark.parametrize("family", FAMILIES)
@given(size=knob, complexity=knob, s=seed)
def test_generated_answers_match_themselves_and_are_already_canonical_up_to_spacing(family, size, complexity, s):
    answer = task_at(family, size, complexity, s).answer
    assert answers_match(answer, answer)
    assert answers_match(f" `{answer}`. ", answer)
    assert normalize_answer(normalize_answer(answer)) == normalize_answer(answer)


@given(st.text())
def test_normalize_is_idempotent(text):
    once = normalize_answer(text)
    assert normalize_answer(once) == once


@given(st.text(alphabet=" \n[](),.`'\"+-0123456789abc", max_size=30))
def test_normalize_is_idempotent_on_answer_like_text(text):
    once = normalize_answer(text)
    assert normalize_answer(once) == once


# --- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda: generate("chess", (0.5, 0.5), np.random.default_rng(0)),
        lambda: heldout("chess", 3, seed=0),
    ],
)
def test_unknown_family_is_a_value_error(call):
    with pytest.raises(ValueError, match=r"unknown task family 'chess'; choose one of arithmetic, list_ops"):
        call()


@pytest.mark.parametrize(
    "knobs", [(1.5, 0.0), (0.5, -0.1), (0.5,), (0.1, 0.2, 0.3), (float("nan"), 0.5), ("easy", 0.5), 0.5]
)
def test_knobs_outside_the_unit_square_are_a_value_error(knobs):
    with pytest.raises(ValueError, match=r"knobs must be 2 numbers \(size, complexity\), each in \[0, 1\]"):
        generate("arithmetic", knobs, np.random.default_rng(0))
    with pytest.raises(ValueError, match="knobs must be"):
        heldout("arithmetic", 2, seed=0, knobs=knobs)


def test_negative_heldout_size_is_a_value_error():
    with pytest.raises(ValueError, match="non-negative number of tasks"):
        heldout("arithmetic", -1, seed=0)


def test_docstring_examples():
    result = doctest.testmod(task_families)
    assert result.attempted > 0 and result.failed == 0
