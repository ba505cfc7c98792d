"""Task forge's four roles as an orchestration graph (``graph/task_forge``) play the same matches
as ``task_forge`` itself: for the same seed and the same moves, the same seat moves at every turn,
the same turns are invalid, the same task is played (with the same options under multiple
choice), and every attempt reads the same answer, verdict, revision, hint and retry. Only the
words of the views differ."""

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import games
from coevo.cli import app
from games.task_forge.families import FAMILIES, answers_match, generate
from games.task_forge.players import submission, wrong_answer
from roles.graph import builtin
from roles.graph_game import graph_env

ANSWERING = ("answer", "wrong", "nothing", "python", "python and answer")
MOVES = {
    "proposer": ("valid", "valid", "valid", "valid", "python", "failing", "empty", "nothing"),  # mostly on to the attempts
    "executor": ANSWERING,
    "verifier": ("accept", "reject", "nothing"),
    "teacher": ("hint", "leak", "empty"),
}


def move(seat: str, kind: str, reference: str | None, rng: np.random.Generator, options: list[str]) -> str:
    """One move of ``kind`` for ``seat``, written from the task's reference answer (or its options)."""
    wrong = wrong_answer(reference, rng) if reference else "7"
    return {
        "valid": lambda: submission(generate(FAMILIES[rng.integers(len(FAMILIES))], tuple(rng.random(2)), rng)),
        "python": lambda: "Let me look.\n```python\nprint(2 + 2)\n```",
        "failing": lambda: "<task>Divide.</task><program>print(1 / 0)</program>",
        "empty": lambda: "" if seat == "teacher" else "<task></task><program>print(1)</program>",
        "nothing": lambda: "I am not sure.",
        "answer": lambda: f"So \\boxed{{{reference}}}",
        "wrong": lambda: f"So \\boxed{{{wrong}}}",
        "python and answer": lambda: f"```python\nprint(1)\n```\n\\boxed{{{reference}}}",
        "accept": lambda: "Looks right. \\boxed{accept}",
        "reject": lambda: "Off by one. \\boxed{reject}",
        "hint": lambda: "Check the last step again.",
        "leak": lambda: f"The answer is {reference}.",
        "option": lambda: f"\\boxed{{{options[rng.integers(len(options))]}}}",
    }[kind]()


def attempts_of_graph(rules) -> list[dict]:
    """Each attempt's reads, in task forge's terms, from the graph's turns."""
    spoken = [t for t in rules.turns if not t.ran and t.node != "proposer"]
    out = []
    for attempt in sorted({t.attempt for t in spoken}):
        said = {t.node: t for t in spoken if t.attempt == attempt}
        teacher = said.get("teacher")
        out.append({
            "answer": said["executor"].read,
            "verdict": said["verifier"].read,
            "revised_answer": said["reviser"].read,
            "hint": teacher.text.strip() if teacher and not teacher.withheld else None,
            "hint_answer": said["retrier"].read if "retrier" in said else None,
        })  # fmt: skip
    return out


@settings(max_examples=int(os.environ.get("FORGE_GRAPH_EXAMPLES", 60)), deadline=None)
@given(seed=st.integers(0, 2**16), seed_tasks=st.booleans(), choices=st.sampled_from([0, 4]), data=st.data())
def test_task_forge_as_a_graph_plays_the_same_matches_as_task_forge(seed, seed_tasks, choices, data):
    forge = games.make("task_forge", teacher=True, seed_tasks=seed_tasks, choices=choices, tool_calls=0 if choices else 2)
    graph = graph_env("task_forge", seed_tasks=seed_tasks, choices=choices)
    forge.reset(seed=seed)
    graph.reset(seed=seed)
    rng = np.random.default_rng(seed)
    while not all(forge.terminations.values()):
        seat = forge.agent_selection
        assert graph.agent_selection == seat and not any(graph.terminations.values())
        assert graph.unwrapped.rules.options == forge.unwrapped.rules.options
        kind = data.draw(st.sampled_from(MOVES[seat] + (("option",) if choices and seat == "executor" else ())), label=seat)
        said = move(seat, kind, forge.unwrapped.rules.reference, rng, forge.unwrapped.rules.options)
        forge.step(said)
        graph.step(said)
        assert graph.infos[seat]["valid"] == forge.infos[seat]["valid"], (seat, kind, forge.infos[seat], graph.infos[seat])
    assert all(graph.terminations.values()), "both matches end at the same turn"

    played, rules = forge.unwrapped.rules.outcome(), graph.unwrapped.rules
    assert played["seeded"] == rules.seeded and bool(played["invalid_reason"]) == bool(rules.invalid_task)
    assert (played["task"], played["reference"]) == ((rules.task.statement, rules.task.answer) if rules.task else ("", None)) or (
        played["invalid_reason"] and not seed_tasks
    )
    fields = ("answer", "verdict", "revised_answer", "hint", "hint_answer")
    assert [{f: a[f] for f in fields} for a in played["attempts"]] == attempts_of_graph(rules)
    right = [answers_match(a["revised_answer"], played["reference"]) for a in played["attempts"]]
    assert right == [a["revised_correct"] for a in played["attempts"]]


def test_the_retrier_sees_its_own_answers_and_the_hint_and_the_next_attempt_starts_afresh():
    env = graph_env("task_forge")
    env.reset(seed=0)
    env.step("<task>What is 6 times 7? Answer with a number.</task><program>print(6 * 7)</program>")
    for said in ("\\boxed{41}", "\\boxed{accept}", "I keep it.", "Multiply again."):
        env.step(said)
    rules = env.unwrapped.rules
    task = "Task: What is 6 times 7? Answer with a number."
    python = "\nTo run Python first, reply with one ```python block; its output comes back. Runs left: 2."
    assert rules.view(1) == (
        f"{task}\nYou said: \\boxed{{41}}\nYou said: I keep it.\nteacher said: Multiply again.\n"
        f"You are the retrier. Try again, using the hint. End with \\boxed{{ANSWER}}.{python}"
    ), "its own answers (the revision's invalid, the first kept), the hint, not the verdict"
    env.step("\\boxed{42}")
    assert [(t.node, t.read) for t in rules.turns[1:]] == [
        ("executor", "41"), ("verifier", "accept"), ("reviser", "41"), ("teacher", None), ("retrier", "42"),
    ]
    assert rules.view(1) == f"{task}\nYou are the executor. Solve the task. End with \\boxed{{ANSWER}}.{python}", "attempt 2 starts afresh"
    outcome = rules.outcome()
    assert outcome["attempts"] == [0, 0, 0, 0, 0, 0] and outcome["correct_share"] == 1.0


def test_a_withheld_hint_is_worth_nothing_though_the_match_went_well():
    spec = builtin("task_forge").model_copy(update={"attempts": 2})
    env = graph_env(spec)
    env.reset(seed=0)
    env.step("<task>What is 6 times 7? Answer with a number.</task><program>print(6 * 7)</program>")
    for said in ("\\boxed{41}", "\\boxed{reject}", "\\boxed{40}", "It is 42.", "\\boxed{42}", "\\boxed{accept}", "\\boxed{42}"):
        env.step(said)
    rules = env.unwrapped.rules
    assert [t.node for t in rules.turns if t.withheld] == ["teacher"] and all(env.terminations.values())
    outcome = rules.outcome()
    assert outcome["correct_share"] == 0.5 and outcome["values"][4] == 0.0


def test_coevo_match_shows_which_node_a_shared_seat_plays():
    result = CliRunner().invoke(app, ["match", "graph/task_forge", "--option", "seed_tasks=true", "--max-new-tokens", "4"])
    assert result.exit_code == 0, result.output
    assert "Turn 2 · executor (tiny" in result.output and "Turn 4 · executor · reviser (tiny" in result.output
