"""How each role writes its output, and how that output is read back.

Every role answers in a format a parser reads leniently but never guesses at: a seat of a
competitive game boxes its move (``\\boxed{MOVE}``, SPIRAL's format), task forge's executor boxes
its answer, the verifier boxes ``accept`` or ``reject``, the proposer tags ``<task>`` and
``<program>``, and a fenced ```python block asks the sandbox to run code. Each reader is one pass
over the text (``tests/test_parsers_are_linear.py``) and returns None for output it cannot read,
so the game records an invalid move with a reason instead of raising. The games decide what a
read answer means (a legal move, a correct answer); this module only says what was written.
"""

from __future__ import annotations

import re

from games.core import bare

# The seats of competitive games: the instruction that ends every system prompt.
OUTPUT_FORMAT = (
    "Think step by step, briefly. Then give your move on the last line as \\boxed{MOVE}, "
    "where MOVE is exactly one of your legal moves."
)
TEXTARENA_FORMAT = "Think step by step, briefly. Then give your action on the last line as \\boxed{[ACTION]}."

# Task forge's roles, per phase: the instruction closing the observation, and what a turn may contain.
INSTRUCTIONS = {
    "propose": "Write a task with one exact answer. To run Python first, reply with one ```python block. "
    "To submit, reply with <task>THE TASK</task> and <program>PYTHON CODE THAT PRINTS THE ANSWER</program>.",
    "attempt": "Solve the task. To run Python, reply with one ```python block. "
    "To answer, end with \\boxed{ANSWER}.",
    "judge": "Is the answer correct? Reply with a one-sentence critique, then \\boxed{accept} or \\boxed{reject}.",
    "revise": "Consider the verdict. Give your final answer as \\boxed{ANSWER} (it may be the same).",
    "hint": "The executor's final answer was wrong. Write one short hint that helps without giving the answer away.",
    "retry": "Try again, using the hint. To run Python, reply with one ```python block. "
    "To answer, end with \\boxed{ANSWER}.",
}
CHOICE_INSTRUCTIONS = {  # the executor's phases under multiple choice: its legal moves are the options
    "attempt": "Solve the task, then choose the right answer among the options.",
    "revise": "Consider the verdict. Choose your final answer among the options (it may be the same).",
    "retry": "Try again, using the hint: choose the right answer among the options.",
}
MOVE_FORMS = {  # what a turn may contain, shown as the legal "moves" of a free-text game
    "propose": ["```python CODE```", "<task>TASK</task> <program>CODE</program>"],
    "attempt": ["```python CODE```", "\\boxed{ANSWER}"],
    "judge": ["\\boxed{accept}", "\\boxed{reject}"],
    "revise": ["\\boxed{ANSWER}"],
    "hint": ["a one-sentence hint"],
    "retry": ["```python CODE```", "\\boxed{ANSWER}"],
}


_BOX_TOKENS = re.compile(r"\\boxed\s*\{|[{}]")


def boxed_contents(text: str) -> list[str]:
    """Contents of every ``\\boxed{…}``, braces balanced (``\\boxed{\\text{bet}}`` gives ``\\text{bet}``),
    in the order the boxes open; an unclosed box gives nothing.

    One pass over the braces, linear in the text: each open box remembers the depth it opened at
    and closes when the depth falls back to it (rescanning from every ``\\boxed{`` was quadratic).
    """
    found, open_boxes, depth = [], [], 0  # open_boxes: (depth it opened at, where its content starts)
    for token in _BOX_TOKENS.finditer(text):
        if token.group() == "}":
            depth -= 1
            if open_boxes and open_boxes[-1][0] == depth:
                found.append((open_boxes[-1][1], token.start()))
                open_boxes.pop()
            continue
        if token.group() != "{":
            open_boxes.append((depth, token.end()))
        depth += 1
    return [text[start:end] for start, end in sorted(found)]


_TEXT_COMMAND = re.compile(r"\\text\s*\{([^{}]*)\}")


def unboxed(content: str) -> str:
    """A box's content as an answer: ``\\text{…}`` unwrapped, surrounding space removed."""
    return _TEXT_COMMAND.sub(r"\1", content).strip()


_PYTHON_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"<(/?)(task|program)\b([^<>]*)>", re.IGNORECASE)  # <task family="…">, </program>
_ATTR = re.compile(r'(?<!\w)(\w+)\s*=\s*"([^"]*)"')  # (?<!\w): one try per word, not one per letter
_VERDICT = re.compile(r"(accept|reject)(?:ed|s)?")


def python_block(text: str) -> str | None:
    """The last fenced Python block in ``text``, or None."""
    blocks = _PYTHON_BLOCK.findall(text)
    return blocks[-1].strip("\n") if blocks else None


def read_answer(text: str) -> str | None:
    """The last ``\\boxed{…}`` answer (``\\text{}`` unwrapped), or None."""
    boxed = boxed_contents(text)
    return unboxed(boxed[-1]) if boxed else None


def _tagged(text: str) -> dict[str, tuple[str, str]]:
    """The last ``<task>`` and ``<program>`` element in ``text``: name -> (attributes, body).

    An element runs from its opening tag to the first closing tag after it, as a lazy regex would
    read it; one pass over the tags instead, since a lazy body rescans to the end of the text from
    every unclosed opening tag (quadratic in the text).
    """
    found: dict[str, tuple[str, str]] = {}
    opened: dict[str, re.Match[str]] = {}
    for tag in _TAG.finditer(text):
        closing, name = tag.group(1), tag.group(2).lower()
        if not closing:
            opened.setdefault(name, tag)
        elif name in opened:
            start = opened.pop(name)
            found[name] = start.group(3), text[start.end() : tag.start()]
    return found


def read_submission(text: str) -> tuple[str, str, dict[str, str]] | None:
    """``<task>`` and ``<program>`` of a proposer's submission (the last of each), and the task
    tag's attributes (scripted proposers label tasks: ``<task family="arithmetic" size="0.3">``)."""
    tagged = _tagged(text)
    if "task" not in tagged or "program" not in tagged:
        return None
    (attrs, statement), (_, program) = tagged["task"], tagged["program"]
    fenced = python_block(program)  # a program may come in a fenced block inside the tag
    return statement.strip(), (fenced if fenced is not None else program).strip("\n"), dict(_ATTR.findall(attrs))


def read_verdict(text: str) -> str | None:
    """``accept`` or ``reject``: the last box that holds one, else the whole text when it *is* one
    (``Accepted.``); never a verdict the text merely mentions ("I would not accept this")."""
    for candidate in [*map(unboxed, reversed(boxed_contents(text))), text]:
        found = _VERDICT.fullmatch(bare(candidate))
        if found:
            return found.group(1)
    return None


def extract_answer(text: str) -> str | None:
    """The answer part of a model's output: the last ``\\boxed{}``, else the last ``[…]``, else None."""
    boxed = read_answer(text)
    if boxed is not None:
        return boxed
    brackets = re.findall(r"\[([^\[\]]*)\]", text)
    return brackets[-1].strip() if brackets else None
