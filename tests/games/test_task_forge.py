"""Task forge: full matches with scripted players, invalid tasks and answers with their reasons,
tool calls, critiques and hints, and the parsers under arbitrary text."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import games
from games.task_forge.players import CurriculumProposer, HintTeacher, NoisyVerifier, SkilledExecutor
from games.play import play_match
from games.formats import python_block, read_answer, read_submission, read_verdict

ADD = ("What is 2 + 3? Answer with the integer.", "print(2 + 3)")


def submission(task: str, program: str) -> str:
    return f"<task>{task}</task>\n<program>\n{program}\n</program>"


class Script:
    """A player that says the given texts in order."""

    def __init__(self, *texts: str):
        self.texts = list(texts)

    def act(self, env, agent, rng):
        return self.texts.pop(0)


def play(players: dict, **options):
    env = games.make("task_forge", **options)
    seats = {seat: players.get(seat, Script()) for seat in env.possible_agents}
    result = play_match(env, seats, seed=0)
    return env, env.outcome(), result


# ---- whole matches -----------------------------------------------------------------------------


def test_a_scripted_match_plays_every_seat_and_reports_the_outcome():
    players = {
        "proposer": CurriculumProposer.named("uniform"), "executor": SkilledExecutor(skill=0.5),
        "verifier": NoisyVerifier(), "teacher": HintTeacher(),
    }  # fmt: skip
    env, outcome, result = play(players, attempts=3, teacher=True)
    assert env.possible_agents == ["proposer", "executor", "verifier", "teacher"]
    assert outcome["valid_task"], outcome["invalid_reason"]
    assert outcome["task_meta"]["family"] in ("arithmetic", "list_ops", "string_ops", "program_output")
    assert len(outcome["attempts"]) == 3
    for a in outcome["attempts"]:
        assert a["verdict"] in ("accept", "reject") and a["revised_answer"] is not None
        assert (a["hint"] is not None) == (not a["revised_correct"])  # a hint after every wrong final answer
    assert outcome["p_hat"] == np.mean([a["correct"] for a in outcome["attempts"]])
    seats_moved = {seat for seat, _ in result.moves}
    assert {"proposer", "executor", "verifier"} <= seats_moved


def test_a_hand_played_match_follows_the_phases_and_tags():
    players = {
        "proposer": Script(submission(*ADD)),
        "executor": Script("```python\nprint(2 + 3)\n```", "It is \\boxed{5}", "\\boxed{6}",  # attempt 0, then a bad revision
                           "\\boxed{4}", "\\boxed{4}"),  # attempt 1: wrong, kept
        "verifier": Script("Looks wrong. \\boxed{reject}", "Fine. \\boxed{accept}"),
    }  # fmt: skip
    env, outcome, _ = play(players, attempts=2, tool_calls=1)
    first, second = outcome["attempts"]
    assert outcome["reference"] == "5" and first["tool_calls"] == 1
    assert first["answer"] == "5" and first["correct"] and first["verdict"] == "reject"
    assert first["revised_answer"] == "6" and not first["revised_correct"]  # talked out of a right answer
    assert second["answer"] == "4" and not second["correct"] and second["verdict"] == "accept"
    assert outcome["p_hat"] == 0.5 and outcome["majority_answer"] in ("5", "4")


def test_the_executor_sees_its_tool_output_and_the_critique():
    env = games.make("task_forge", attempts=1, tool_calls=1)
    env.reset(seed=0)
    env.step(submission(*ADD))
    assert env.turn_tag() == "attempt:0"
    env.step("```python\nprint(40 + 2)\n```")
    assert "42" in env.observe("executor")["prompt"] and "Python runs left: 0" in env.observe("executor")["prompt"]
    env.step("\\boxed{5}")
    assert env.turn_tag() == "judge:0" and "The executor's answer: 5" in env.observe("verifier")["prompt"]
    env.step("Too small, surely. \\boxed{reject}")
    assert "Too small" in env.observe("executor")["prompt"] and env.turn_tag() == "revise:0"


@pytest.mark.parametrize(
    ("program", "reason"),
    [
        ("print(1/0)", "the program failed"),
        ("while True: pass", "the program failed"),
        ("print(hash('abc'))", "not deterministic"),
        ("x = 1", "printed nothing"),
        ("print('7' * 500)", "longer than"),
    ],
)
def test_invalid_tasks_are_recorded_with_their_reason(program, reason):
    players = {"proposer": Script(submission("Say something.", program))}
    _, outcome, result = play(players, limits=games.task_forge.rules.Limits(cpu_seconds=1, wall_seconds=2))
    assert not outcome["valid_task"] and reason in outcome["invalid_reason"]
    assert outcome["attempts"] == [] and result.turns == 1


def test_a_proposal_without_tags_is_an_invalid_task():
    _, outcome, _ = play({"proposer": Script("Here is a task: what is 2 + 2?")})
    assert not outcome["valid_task"] and "<task>" in outcome["invalid_reason"]


@pytest.mark.parametrize("proposal", ["Here is a task: what is 2 + 2?", submission("Say something.", "import sys; sys.exit(3)")])
def test_with_seed_tasks_an_invalid_proposal_is_recorded_and_a_family_task_is_played(proposal):
    from roles.rewards import forge_rewards

    players = {"proposer": Script(proposal), "executor": SkilledExecutor(skill=0.5), "verifier": NoisyVerifier()}
    _, outcome, result = play(players, attempts=3, seed_tasks=True)
    assert not outcome["valid_task"] and outcome["seeded"] and outcome["invalid_reason"]
    assert outcome["task_meta"]["family"] in games.task_forge.families.FAMILIES
    assert len(outcome["attempts"]) == 3 and outcome["reference"]
    assert {seat for seat, _ in result.moves} == {"proposer", "executor", "verifier"}
    rewards = forge_rewards(outcome)
    assert rewards["proposer"]["invalid_task"] == -1.0 and rewards["proposer"]["uncertainty"] == 0.0
    assert rewards["executor"]["correct"] == pytest.approx(np.mean([a["revised_correct"] for a in outcome["attempts"]]))
    # the same proposal without seed tasks ends the match
    _, plain, result = play({"proposer": Script(proposal)}, attempts=3)
    assert not plain["valid_task"] and not plain["seeded"] and plain["attempts"] == [] and result.turns == 1


def test_the_proposer_may_run_python_before_submitting():
    tool_run = "```python\nprint(6 * 7)\n```"
    env = games.make("task_forge", attempts=1)
    env.reset(seed=0)
    env.step(tool_run)
    assert "42" in env.observe("proposer")["prompt"] and env.turn_tag() == "propose"
    players = {
        "proposer": Script(tool_run, submission("What is 6 * 7?", "print(6 * 7)")),
        "executor": Script("\\boxed{42}", "\\boxed{42}"),
        "verifier": Script("\\boxed{accept}"),
    }
    outcome = play(players, attempts=1)[1]
    assert outcome["valid_task"] and outcome["proposer_tool_calls"] == 1


def test_invalid_answers_are_recorded_and_the_match_goes_on():
    players = {
        "proposer": Script(submission(*ADD)),
        "executor": Script("I think it is five.", "no idea", "```python\nprint(5)\n```", "```python\nprint(5)\n```", "\\boxed{5}"),
        "verifier": Script("\\boxed{reject}", "hmm"),
    }
    _, outcome, _ = play(players, attempts=2, tool_calls=1)
    first, second = outcome["attempts"]
    assert first["answer"] is None and "no \\boxed{answer}" in first["invalid_reason"] and not first["correct"]
    assert first["revised_answer"] is None  # "no idea" keeps the (missing) answer
    assert second["answer"] is None and "no tool calls left" in second["invalid_reason"]
    assert second["verdict"] is None and second["verdict_invalid_reason"]
    assert second["revised_correct"]  # the revision still counts


def test_a_hint_that_gives_the_answer_away_is_refused():
    players = {
        "proposer": Script(submission(*ADD)),
        "executor": Script("\\boxed{4}", "\\boxed{4}"),
        "verifier": Script("\\boxed{accept}"),
        "teacher": Script("The answer is 5."),
    }
    _, outcome, _ = play(players, attempts=1, teacher=True)
    [a] = outcome["attempts"]
    assert a["hint"] is None and "gives the answer away" in a["hint_invalid_reason"] and a["hint_correct"] is None


def test_a_hinted_retry_is_scored():
    players = {
        "proposer": Script(submission(*ADD)),
        "executor": Script("\\boxed{4}", "\\boxed{4}", "\\boxed{5}"),
        "verifier": Script("\\boxed{accept}"),
        "teacher": Script("Count on your fingers."),
    }
    env, outcome, _ = play(players, attempts=1, teacher=True)
    [a] = outcome["attempts"]
    assert a["hint"] == "Count on your fingers." and a["hint_answer"] == "5" and a["hint_correct"]


def test_a_given_task_skips_the_proposer():
    env = games.make("task_forge", attempts=1, task=ADD)
    env.reset(seed=0)
    assert env.agent_selection == "executor" and env.turn_tag() == "attempt:0"
    assert env.outcome()["reference"] == "5"


# ---- multiple choice ---------------------------------------------------------------------------


def test_multiple_choice_offers_the_reference_among_answers_of_its_family():
    task = games.task_forge.families.heldout("arithmetic", 1, seed=0)[0]
    env = games.make("task_forge", attempts=1, tool_calls=0, choices=4, task=(task.statement, task.program, task.label))
    env.reset(seed=0)
    options = env.legal_moves("executor")
    right = f"\\boxed{{{task.answer}}}"
    assert len(options) == len(set(options)) == 4 and right in options
    assert [env.choosable(s) for s in env.possible_agents] == [False, True, True]
    prompt = env.observe("executor")["prompt"]
    assert ", ".join(options) in prompt and "choose the right answer" in prompt and "Python runs left" not in prompt
    wrong = next(o for o in options if o != right)
    for move in (right, "\\boxed{reject}", wrong):  # a right answer, talked out of it
        env.step(move)
    [a] = env.outcome()["attempts"]
    assert a["correct"] and a["verdict"] == "reject" and not a["revised_correct"]
    assert [f"\\boxed{{{o}}}" for o in env.outcome()["options"]] == options


def test_multiple_choice_needs_the_tasks_family_and_no_python():
    with pytest.raises(ValueError, match="tool_calls = 0"):
        games.make("task_forge", choices=4, tool_calls=1)
    with pytest.raises(ValueError, match="at least 2"):
        games.make("task_forge", choices=1, tool_calls=0)
    unlabelled = play({"proposer": Script(submission(*ADD))}, choices=4, tool_calls=0)[1]
    assert not unlabelled["valid_task"] and "the task's family" in unlabelled["invalid_reason"]
    players = {"proposer": Script(submission(*ADD)), "executor": SkilledExecutor(skill=0.5), "verifier": NoisyVerifier()}
    seeded = play(players, choices=3, tool_calls=0, seed_tasks=True, attempts=2)[1]
    assert seeded["seeded"] and seeded["reference"] in seeded["options"] and len(seeded["options"]) == 3
    labelled = play({**players, "proposer": CurriculumProposer.named("uniform")}, choices=3, tool_calls=0, attempts=2)[1]
    assert labelled["valid_task"] and labelled["reference"] in labelled["options"]


def test_rewards_come_from_the_reward_function_at_the_end():
    shaped = {"proposer": {"a": 1.0}, "executor": {"b": 0.25, "c": 0.25}, "verifier": {}}
    players = {"proposer": Script(submission(*ADD)), "executor": Script("\\boxed{5}", "\\boxed{5}"), "verifier": Script("\\boxed{accept}")}
    _, _, result = play(players, attempts=1, reward_fn=lambda outcome: shaped)
    assert result.returns == {"proposer": 1.0, "executor": 0.5, "verifier": 0.0}


# ---- parsers -----------------------------------------------------------------------------------


@settings(max_examples=300)
@given(st.text())
def test_parsers_never_raise(text):
    python_block(text), read_answer(text), read_submission(text), read_verdict(text)


@given(st.text(alphabet=st.characters(blacklist_characters="{}\\"), min_size=1).filter(lambda s: s.strip()))
def test_the_last_boxed_answer_wins(answer):
    assert read_answer(f"first \\boxed{{nope}} then \\boxed{{{answer}}}") == answer.strip()


@pytest.mark.parametrize(
    ("text", "verdict"),
    [("\\boxed{accept}", "accept"), ("I reject this. \\boxed{Accept}", "accept"), ("Rejected.", "reject"),
     ("\\boxed{\\text{Reject}} since 2 + 2 = 4, see \\boxed{4}", "reject"),
     ("I would accept it, but no: reject", None), ("I would not accept this", None), ("unsure", None)],
)  # fmt: skip
def test_read_verdict(text, verdict):
    assert read_verdict(text) == verdict


def test_read_submission_takes_tags_attributes_and_fenced_programs():
    text = '<task family="arithmetic" size="0.5">Add.</task><program>```python\nprint(1)\n```</program>'
    assert read_submission(text) == ("Add.", "print(1)", {"family": "arithmetic", "size": "0.5"})
    assert read_submission("<task>x</task>") is None


def test_without_bubblewrap_task_forge_refuses_to_start_unless_the_fallback_is_chosen(monkeypatch):
    from games.task_forge import sandbox

    monkeypatch.setattr(sandbox, "_bwrap_problem", lambda: "bwrap is not installed")
    with pytest.raises(sandbox.SandboxUnavailable, match="make system-deps"):
        games.make("task_forge")
    env = games.make("task_forge", sandbox="rlimit")
    env.reset(seed=0)
    with warnings.catch_warnings():  # the fallback's one warning per process: tests/games/test_sandbox.py
        warnings.simplefilter("ignore", sandbox.SandboxFallbackWarning)
        env.step("<task>Two?</task><program>print(2)</program>")
    assert env.outcome()["reference"] == "2" and env.unwrapped.rules.sandbox.backend == "rlimit"
