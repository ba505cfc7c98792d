"""Orchestration graphs played as PettingZoo games: the checkers, and golden turn orders and views."""

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pettingzoo.test import api_test, render_test, seed_test
from typer.testing import CliRunner

import games
from coevo.cli import app
from games.task_forge.families import FAMILIES, generate
from marl.config import load_config
from marl.episode import Episode, read_jsonl
from coevo.train import Trainer
from roles.graph import BUILTIN, GraphSpec, builtin
from roles.graph_game import graph_env
from roles.graph_players import SkilledNode
from tests.runs import events

DEBATE_ORDER = ["debater_0", "debater_1", "debater_2"] * 2


def play(env, say) -> list[str]:
    """A whole match, each seat saying ``say(seat, rules)``; the seats in the order they spoke."""
    order = []
    while not any(env.terminations.values()) and not any(env.truncations.values()):
        seat = env.agent_selection
        order.append(seat)
        env.step(say(seat, env.unwrapped.rules))
    return order


def boxed(text: str) -> str:
    return f"\\boxed{{{text}}}"


@pytest.mark.parametrize("name", BUILTIN)
def test_pettingzoo_checkers(name):
    api_test(graph_env(name), num_cycles=100)
    seed_test(lambda: graph_env(name), num_cycles=50)
    render_test(lambda render_mode=None: graph_env(name, render_mode=render_mode))


@pytest.mark.parametrize(
    ("name", "order"),
    [
        ("solo", ["executor"]),
        ("malt", ["generator", "verifier", "refiner"]),
        ("debate", [*DEBATE_ORDER, "judge"]),
    ],
)
def test_turn_order_of_each_builtin(name, order):
    env = graph_env(name)
    env.reset(seed=0)
    assert play(env, lambda seat, rules: boxed(rules.task.answer)) == order
    assert set(env.rewards.values()) == {1.0}, "a right final answer pays every seat"


def agentflow_script(verdicts: list[str]):
    said = iter(verdicts)

    def say(seat: str, rules) -> str:
        return {"planner": "plan", "executor": "result", "generator": boxed("0")}.get(seat) or boxed(next(said))

    return say


@pytest.mark.parametrize(
    ("verdicts", "rounds"), [(["accept"], 1), (["reject", "accept"], 2), (["reject", "reject", "reject"], 3)]
)
def test_agentflow_loops_until_the_verifier_accepts_at_most_three_steps(verdicts, rounds):
    env = graph_env("agentflow")
    env.reset(seed=1)
    order = play(env, agentflow_script(verdicts))
    assert order == ["planner", "executor", "verifier"] * rounds + ["generator"]
    assert env.unwrapped.rules.outcome()["loops"] == {"verifier->planner": rounds - 1}


def views_while_playing(env, say) -> dict[str, list[str]]:
    """Each seat's view at each of its turns, in a whole match."""
    seen: dict[str, list[str]] = {}

    def look_then_say(seat, rules):
        seen.setdefault(seat, []).append(rules.view(rules.info.seats.index(seat)))
        return say(seat, rules)

    play(env, look_then_say)
    return seen


def test_malts_refiner_sees_the_task_the_answer_and_the_critique_and_nothing_else():
    env = graph_env("malt")
    env.reset(seed=2)
    said = {"generator": "I think \\boxed{41}", "verifier": "The sum is off by one.", "refiner": boxed("42")}
    seen = views_while_playing(env, lambda seat, rules: said[seat])
    task = f"Task: {env.unwrapped.rules.task.statement}"
    assert seen["verifier"] == [
        f"{task}\ngenerator said: I think \\boxed{{41}}\n"
        "You are the verifier. Critique the generator's answer: find its mistakes, if any."
    ]
    assert seen["refiner"] == [
        f"{task}\ngenerator said: I think \\boxed{{41}}\nverifier said: The sum is off by one.\n"
        "You are the refiner. Give the final answer, using the critique where it is right. End with \\boxed{ANSWER}."
    ]


def test_debaters_see_each_others_answers_from_the_round_before():
    env = graph_env("debate")
    env.reset(seed=3)
    seen = views_while_playing(env, lambda seat, rules: boxed(seat))
    first, second = seen["debater_1"]
    assert "said" not in first  # round 1: the task only
    assert "debater_0 said: \\boxed{debater_0}\nYou said: \\boxed{debater_1}\ndebater_2 said: \\boxed{debater_2}\n" in second
    assert seen["debater_0"][1].count(" said: ") == 3, "round 2 sees round 1 only, not round 2's earlier speakers"
    (judge,) = seen["judge"]
    assert judge.count(" said: ") == 6


TEACHER = GraphSpec.model_validate(
    {
        "nodes": {
            "executor": {"brief": "Solve it."},
            "teacher": {"brief": "Hint.", "output": "text", "reference": True},
            "retry": {"brief": "Try again.", "scored": True},
        },
        "edges": [
            {"source": "executor", "target": "teacher", "when": "wrong"},
            {"source": "teacher", "target": "retry"},
            {"source": "executor", "target": "retry", "when": "correct"},
        ],
    }
)


@pytest.mark.parametrize("right", [True, False])
def test_a_conditional_edge_brings_the_teacher_only_after_a_wrong_answer(right):
    env = graph_env(TEACHER)
    env.reset(seed=4)
    answer = env.unwrapped.rules.task.answer
    said = {"executor": boxed(answer if right else "nope"), "teacher": "Check the last step.", "retry": boxed(answer)}
    order = play(env, lambda seat, rules: said[seat])
    assert order == (["executor", "retry"] if right else ["executor", "teacher", "retry"])
    if not right:
        assert f"Reference answer: {answer}" in env.unwrapped.rules.view(1)


@pytest.mark.parametrize(("hint", "reason"), [("It is {answer}.", "the hint gives the answer away"), ("  ", "the hint is empty")])
def test_a_hint_that_gives_the_answer_away_or_says_nothing_is_withheld_and_leads_nowhere(hint, reason):
    env = graph_env(TEACHER)
    env.reset(seed=4)
    answer = env.unwrapped.rules.task.answer
    env.step(boxed("nope"))
    env.step(hint.format(answer=answer))
    assert env.infos["teacher"]["reason"] == reason and all(env.terminations.values()), "no retry"
    assert "teacher said" not in env.unwrapped.rules.view(0)


def test_output_that_cannot_be_read_is_an_invalid_turn_and_the_match_goes_on():
    env = graph_env("agentflow")
    env.reset(seed=5)
    env.step("plan")
    env.step("result")
    env.step("I am not sure.")  # neither accept nor reject: no loop, the generator answers
    assert env.infos["verifier"] == {"move": "I am not sure.", "valid": False, "reason": "no \\boxed{accept} or \\boxed{reject} in the output"}
    assert env.agent_selection == "generator"
    env.step("forty-two")
    assert env.infos["generator"]["reason"] == "no \\boxed{ANSWER} in the output" and set(env.rewards.values()) == {0.0}


@settings(max_examples=30)
@given(seed=st.integers(0, 2**16), texts=st.lists(st.text(max_size=30), min_size=30, max_size=30))
def test_any_text_plays_every_builtin_to_its_end_within_the_turn_cap(seed, texts):
    for name in BUILTIN:
        env = graph_env(name)
        env.reset(seed=seed)
        said = iter(texts)
        play(env, lambda seat, rules: next(said))
        assert all(env.terminations.values()) and not any(env.truncations.values())
        assert set(env.rewards.values()) <= {0.0}


PLANNED = GraphSpec.model_validate(
    {
        "nodes": {
            "hint": {"brief": "A hint.", "output": "text"},
            "planner": {"brief": "Plan.", "output": "text"},
            "solver": {"brief": "Solve it.", "repeats": 3},
        },
        "edges": [*({"source": a, "target": b} for a, b in [("hint", "planner"), ("planner", "solver"), ("hint", "solver")])],
    }
)


def test_turn_values_are_malts_propagation_on_a_hand_computed_tree():
    """hint -> planner -> solver x3 (hint also seen by the solvers), the solvers scored: right,
    wrong, right. Leaves: 1, 0, 1. The planner's children are the three solvers: 2/3. The hint's
    children are the planner and the three solvers: (2/3 + 1 + 0 + 1) / 4 = 2/3."""
    env = graph_env(PLANNED)
    env.reset(seed=6)
    answer = env.unwrapped.rules.task.answer
    said = {"hint": "think", "planner": "add", "solver_0": boxed(answer), "solver_1": boxed("no"), "solver_2": boxed(answer)}
    play(env, lambda seat, rules: said[seat])
    outcome = env.unwrapped.rules.outcome()
    assert outcome["values"] == pytest.approx([2 / 3, 2 / 3, 1.0, 0.0, 1.0])
    assert outcome["began"] == [0, 1, 2, 2, 2] and outcome["correct_share"] == pytest.approx(2 / 3)


def test_a_turn_that_nothing_later_saw_is_worth_the_outcome():
    env = graph_env("agentflow")
    env.reset(seed=1)
    play(env, agentflow_script(["reject", "reject", "reject"]))  # the generator answers 0: wrong for this task
    rules = env.unwrapped.rules
    assert rules.task.answer != "0"
    assert rules.outcome()["values"] == [0.0] * 10


@settings(max_examples=30)
@given(seed=st.integers(0, 2**16), right=st.lists(st.booleans(), min_size=30, max_size=30))
def test_with_one_scored_seat_every_turn_is_worth_the_outcome(seed, right):
    """MALT's propagation in a graph without branching: every turn leads to the one scored answer."""
    for name in ("malt", "agentflow", "debate"):
        env = graph_env(name)
        env.reset(seed=seed)
        said = iter(right)
        answer, verdicts = env.unwrapped.rules.task.answer, iter(["accept", "reject"] * 15)
        texts = {"answer": lambda: boxed(answer if next(said) else "x"), "verdict": lambda: boxed(next(verdicts)), "text": lambda: "so"}
        play(env, lambda seat, rules: texts[rules.spec.nodes[rules.node_of[seat]].output]())
        outcome = env.unwrapped.rules.outcome()
        assert outcome["values"] == [outcome["correct_share"]] * len(outcome["turns"])


def test_games_make_serves_the_builtins_by_name():
    env = games.make("graph/malt", max_turns=2)
    assert env.possible_agents == ["generator", "verifier", "refiner"] and env.max_turns == 2
    assert "graph/debate" in games.list() and games.known("graph/agentflow")


def test_coevo_match_plays_a_graph_turn_by_turn(tmp_path):
    path = tmp_path / "episode.json"
    result = CliRunner().invoke(app, ["match", "graph/debate", "--seat", "judge=random", "--max-new-tokens", "4", "--json", str(path)])
    assert result.exit_code == 0, result.output
    assert "Turn 7 · judge (random" in result.output and "Turn 8" not in result.output
    episode = Episode.model_validate_json(path.read_text())
    assert [t.seat for t in episode.turns] == [*DEBATE_ORDER, "judge"]


def test_the_trainer_plays_and_trains_every_node_of_a_graph(tmp_path):
    config = tmp_path / "debate.toml"
    config.write_text(
        'seed = 0\niterations = 1\nmodel = "tiny"\n[games]\n"graph/debate" = 1.0\n'
        "[rollout]\nmatches = 2\nconcurrency = 2\nmax_new_tokens = 4\n[eval]\nevery = 0\n"
    )
    Trainer(load_config(config), tmp_path / "run").run()
    (it,) = [r for r in events(tmp_path / "run") if r["kind"] == "iteration"]
    assert it["learner/samples"] == 2 * 7, "every turn of every seat trains the one policy"
    assert {f"graph/{node}/{m}" for node in ("debater", "judge") for m in ("invalid_rate", "value", "baseline")} <= it.keys()
    assert it["graph/calls_per_match"] == 7 and 0 <= it["graph/accuracy"] <= 1
    episodes = read_jsonl(tmp_path / "run" / "episodes" / "iter_000001.jsonl")
    assert all([t.seat for t in e.turns] == [*DEBATE_ORDER, "judge"] for e in episodes)


def python(code: str) -> str:
    return f"Let me check.\n```python\n{code}\n```"


def test_agentflows_executor_runs_its_step_in_python_and_everyone_after_sees_the_run():
    env = graph_env("agentflow")
    env.reset(seed=1)
    said = iter(["plan: multiply", python("print(6 * 7)"), python("print(1)"), "\\boxed{accept}", "\\boxed{42}"])
    seen = views_while_playing(env, lambda seat, rules: next(said))
    rules = env.unwrapped.rules
    run = "```python\nprint(6 * 7)\n```\nOutput:\n42"
    assert [t.seat for t in rules.turns] == ["planner", "executor", "executor", "verifier", "generator"]
    first, second = seen["executor"]
    assert first.endswith("Runs left: 1.") and "ran Python" not in first
    assert f"You ran Python:\n{run}" in second and second.endswith("Runs left: 0.")
    assert f"executor ran Python:\n{run}" in seen["verifier"][0] and f"executor ran Python:\n{run}" in seen["generator"][0]
    assert "executor said: Let me check.\n```python\nprint(1)" in seen["generator"][0], "no runs left: the block is the report"
    assert rules.outcome()["python_runs"] == {"executor": 1}


TOOLED = GraphSpec.model_validate({"nodes": {"solver": {"brief": "Solve it.", "tools": 2}}})


def test_an_answering_node_runs_python_until_its_runs_are_spent_and_then_must_answer():
    env = graph_env(TOOLED)
    env.reset(seed=4)
    rules = env.unwrapped.rules
    assert rules.legal_moves() == ["\\boxed{ANSWER}", "```python CODE```"]
    env.step(python("print(sum(range(5)))"))
    env.step(python("import os\nprint(os.getpid())"))
    assert rules.turns[-1].ran.split("Output:\n")[1].strip() != str(os.getpid()), "the code ran in the sandbox, not here"
    assert rules.turns[0].ran.endswith("Output:\n10\n")
    assert rules.legal_moves() == ["\\boxed{ANSWER}"] and env.agent_selection == "solver"
    env.step(python("print(3)"))
    assert env.infos["solver"]["reason"] == "no \\boxed{ANSWER} in the output, and no Python runs left (2 allowed)"
    assert all(env.terminations.values()) and rules.outcome()["python_runs"] == {"solver": 2}


def test_a_python_run_is_worth_the_turn_it_led_to():
    """malt with a generator that runs Python once: its run is worth what the generator then
    said, which the refiner's right answer values at 1."""
    spec = BUILTIN["malt"] | {"nodes": BUILTIN["malt"]["nodes"] | {"generator": {"brief": "Solve.", "tools": 1}}}
    env = graph_env(GraphSpec.model_validate(spec))
    env.reset(seed=2)
    answer = env.unwrapped.rules.task.answer
    said = iter([python("print(1)"), boxed("0"), "Off.", boxed(answer)])
    play(env, lambda seat, rules: next(said))
    assert env.unwrapped.rules.outcome()["values"] == [1.0, 1.0, 1.0, 1.0]
    assert env.unwrapped.rules.outcome()["began"] == [0, 0, 2, 3]


WRITTEN = "<task>What is 6 times 7? Answer with a number.</task>\n<program>\nprint(6 * 7)\n</program>"


def test_agent0s_proposer_writes_the_task_and_k_executors_answer_it_apart():
    """The proposer's program prints the reference; the four executors see its statement only,
    not each other; the writer is worth 1 − 2|p̂ − ½| with p̂ = 2/4 right: 1."""
    env = graph_env("agent0")
    env.reset(seed=0)
    said = iter([WRITTEN, python("print(6 * 7)"), boxed("42"), boxed("42"), boxed("41"), "no idea"])
    seen = views_while_playing(env, lambda seat, rules: next(said))
    rules = env.unwrapped.rules
    assert [t.seat for t in rules.turns] == ["proposer", "executor_0", "executor_0", "executor_1", "executor_2", "executor_3"]
    assert rules.task.answer == "42" and rules.task.family == "proposed"
    assert seen["proposer"] == ["You are the proposer. " + builtin("agent0").nodes["proposer"].brief
                                + "\nTo run Python first, reply with one ```python block; its output comes back. Runs left: 4."]
    assert seen["executor_1"] == [
        "Task: What is 6 times 7? Answer with a number.\nYou are the executor. Solve the task exactly. End with \\boxed{ANSWER}."
        "\nTo run Python first, reply with one ```python block; its output comes back. Runs left: 3."
    ], "the statement, not the program; no other executor's run or answer"
    outcome = rules.outcome()
    assert outcome["correct_share"] == 0.5 and outcome["values"] == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert set(env.rewards.values()) == {0.5} and outcome["invalid_task"] == "" and not outcome["seeded"]


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ("<task>Say hi.</task><program>print(1/0)</program>", "the program failed: exit code 1: ZeroDivisionError: division by zero"),
        ("<task>Pick one.</task><program>print(hash('abc'))</program>", "the program is not deterministic"),
        ("I cannot think of one.", "no <task>…</task> and <program>…</program> in the output"),
    ],
)
def test_an_invalid_written_task_ends_the_match_or_with_seed_tasks_a_drawn_one_is_played(written, reason):
    env = graph_env("agent0")
    env.reset(seed=0)
    env.step(written)
    assert reason in env.infos["proposer"]["reason"] and all(env.terminations.values())
    assert env.unwrapped.rules.outcome()["values"] == [0.0] and set(env.rewards.values()) == {0.0}
    seeded = graph_env("agent0", seed_tasks=True)
    seeded.reset(seed=0)
    seeded.step(written)
    rules = seeded.unwrapped.rules
    answer = rules.task.answer
    play(seeded, lambda seat, rules: boxed(answer))
    outcome = rules.outcome()
    assert outcome["seeded"] and reason in outcome["invalid_task"] and outcome["correct_share"] == 1.0
    assert outcome["values"][0] == 0.0, "the writer of an invalid task earns nothing, whoever solves the drawn one"


def test_a_given_task_skips_its_writer_as_held_out_evaluation_needs():
    task = generate("arithmetic", (0.0, 0.0), np.random.default_rng(0))
    env = graph_env("agent0", task=task)
    env.reset(seed=0)
    assert play(env, lambda seat, rules: boxed(task.answer)) == [f"executor_{i}" for i in range(4)]
    assert env.unwrapped.rules.outcome()["values"] == [1.0] * 4


def test_skilled_players_write_valid_family_tasks_for_any_graph_with_a_writer():
    env = graph_env("agent0")
    player = SkilledNode(accuracy=0.5)
    rng = np.random.default_rng(0)
    shares = []
    for seed in range(20):
        env.reset(seed=seed)
        play(env, lambda seat, rules: player.act(env.unwrapped, seat, rng))
        outcome = env.unwrapped.rules.outcome()
        assert outcome["invalid_task"] == "" and outcome["family"] in FAMILIES
        shares.append(outcome["correct_share"])
    assert 0.3 < np.mean(shares) < 0.7
