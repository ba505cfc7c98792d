"""What makes a proposed task valid: the checks task forge and a graph's task writer share.

A player's task is only as good as its program: the program's output is the reference answer
every other role is judged against, so it must run, print something short, and print the same
thing whatever order a set or dict iterates in.
"""

from __future__ import annotations

from games.task_forge.sandbox import Sandbox

ANSWER_MAX_CHARS = 200  # a reference answer longer than this makes an invalid task


def checked_task(sandbox: Sandbox, statement: str, program: str) -> tuple[str | None, str]:
    """A proposed task's reference answer: what its program prints, the same on two runs with
    different hash seeds (so no answer rests on set or dict order); or None, and why the task is
    invalid."""
    if not statement:
        return None, "the task is empty"
    first, second = (sandbox.run(program, hash_seed=seed) for seed in (0, 1))
    for result in (first, second):
        if not result.ok:
            return None, f"the program failed: {result.reason}"
    answer = first.stdout.strip()
    if answer != second.stdout.strip():
        return None, "the program is not deterministic: two runs printed different answers"
    if not answer:
        return None, "the program printed nothing"
    if len(answer) > ANSWER_MAX_CHARS:
        return None, f"the answer is longer than {ANSWER_MAX_CHARS} characters"
    return answer, ""
