"""Task forge played by each kind of player in each seat, through the batched engine: scripted
players, the tiny model and SmolLM2 — what a model cannot write is recorded as an invalid task or
answer with its reason, and the match goes on."""

import pytest

from games.task_forge.players import FORGE_PLAYERS
from marl.policy import Sampling
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.scripted import ScriptedPolicy

SEATS = ("proposer", "executor", "verifier", "teacher")
GIVEN = ("What is 7 * 6? Answer with the integer.", "print(7 * 6)")
SCRIPTED = {"proposer": "sec", "executor": "skilled", "verifier": "noisy", "teacher": "hinter"}


def play_everywhere(policy, tokens: int):
    """Two matches with ``policy`` in every seat: one where it proposes, one on a given task (so
    the executor, verifier and teacher seats surely play)."""
    seats = {s: SeatSpec(policy, s, sampling=Sampling(1.0, 1.0, tokens)) for s in SEATS}
    options = {"attempts": 2, "tool_calls": 1, "teacher": True}
    specs = [MatchSpec("task_forge", 1, seats, "proposes", options), MatchSpec("task_forge", 2, seats, "given", {**options, "task": GIVEN})]
    return RolloutEngine().play(specs)


def check(episodes):
    proposes, given = episodes
    assert proposes.turns[0].seat == "proposer" and proposes.outcome is not None
    if not proposes.outcome["valid_task"]:
        assert proposes.outcome["invalid_reason"]  # recorded with its reason
    played = {t.seat for t in given.turns}
    assert {"executor", "verifier"} <= played and given.outcome["valid_task"] and given.outcome["reference"] == "42"
    for a in given.outcome["attempts"]:
        assert (a["answer"] is None) == bool(a["invalid_reason"])  # an invalid answer always has a reason
        assert a["verdict"] is not None or a["verdict_invalid_reason"]
        if not a["revised_correct"]:
            assert a["hint"] is not None or a["hint_invalid_reason"]  # the teacher had its turn
    assert all(t.tag for t in given.turns)


def test_scripted_players_in_every_seat():
    for seat, name in SCRIPTED.items():
        assert FORGE_PLAYERS[name]().seat == seat
    seats = {s: SeatSpec(ScriptedPolicy(n, FORGE_PLAYERS[n]), s) for s, n in SCRIPTED.items()}
    [ep] = RolloutEngine().play([MatchSpec("task_forge", 3, seats, "", {"attempts": 3, "teacher": True})])
    assert ep.outcome["valid_task"] and len(ep.outcome["attempts"]) == 3


def test_forced_choice_plays_the_executor_and_verifier_under_multiple_choice(tiny):
    chooser = SeatSpec(tiny, "tiny", mode="choose")
    seats = {"proposer": SeatSpec(ScriptedPolicy("sec", FORGE_PLAYERS["sec"]), "sec"), "executor": chooser, "verifier": chooser}
    options = {"attempts": 2, "tool_calls": 0, "choices": 4}
    [ep] = RolloutEngine().play([MatchSpec("task_forge", 5, seats, "", options)])
    assert ep.outcome["valid_task"] and len(ep.outcome["options"]) == 4
    chosen = [t for t in ep.turns if t.seat != "proposer"]
    assert [t.tag.split(":")[0] for t in chosen] == ["attempt", "judge", "revise"] * 2
    for t in chosen:
        assert t.mode == "choose" and len(t.candidate_ids) == (2 if t.seat == "verifier" else 4) and t.valid
    with pytest.raises(ValueError, match="forced choice needs"):
        RolloutEngine().play([MatchSpec("task_forge", 5, seats, "", {**options, "choices": 0})])


def test_the_tiny_model_in_every_seat(tiny):
    check(play_everywhere(tiny, tokens=16))


@pytest.mark.slow
def test_smollm2_in_every_seat(smollm2):
    check(play_everywhere(smollm2, tokens=32))


def test_matches_that_run_code_step_at_once_and_play_as_they_would_in_turn(monkeypatch):
    """Task forge's sandboxed programs run at once across matches (more than one in flight), and
    the matches play exactly as they do one step after another."""
    import threading

    import marl.rollout
    from games.task_forge.sandbox import Sandbox

    seats = {s: SeatSpec(ScriptedPolicy(n, FORGE_PLAYERS[n]), s) for s, n in SCRIPTED.items()}
    specs = [MatchSpec("task_forge", seed, seats, f"m{seed}", {"attempts": 2, "teacher": True}) for seed in range(8)]
    lock, flight = threading.Lock(), {"now": 0, "peak": 0}
    run = Sandbox.run

    def counted(self, *args, **kwargs):
        with lock:
            flight["now"] += 1
            flight["peak"] = max(flight["peak"], flight["now"])
        try:
            return run(self, *args, **kwargs)
        finally:
            with lock:
                flight["now"] -= 1

    monkeypatch.setattr(Sandbox, "run", counted)
    at_once = RolloutEngine().play(specs)
    assert flight["peak"] > 1
    monkeypatch.setattr(marl.rollout, "STEP_THREADS", 1)
    flight["peak"] = 0
    in_turn = RolloutEngine().play(specs)
    assert flight["peak"] == 1
    assert at_once == in_turn
