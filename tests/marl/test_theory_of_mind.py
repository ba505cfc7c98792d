"""The model-backed theory-of-mind player: its hypothesis reader, its ranking of hypotheses by
the moves they predicted, one batched call per stage, and a match with the tiny model end to end."""

import math
import re

from hypothesis import given
from hypothesis import strategies as st

import games
from games.rps import MOVES
from marl.models import load_tiny
from marl.policy import Request, Response, Sampling
from marl.probe import probe
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.scripted import ScriptedPolicy
from marl.theory_of_mind import MAX_HYPOTHESIS_CHARS, ModelTheoryOfMind, read_hypothesis, with_note

GAME = "rock_paper_scissors"


def scripted(name: str) -> SeatSpec:
    return SeatSpec(ScriptedPolicy(name, games.scripted_players(GAME)[name]), name)


@given(st.text())
def test_a_hypothesis_is_one_trimmed_line_with_a_letter_or_none(text):
    read = read_hypothesis(text)
    if read is not None:
        assert read == read.strip() and "\n" not in read and len(read) <= MAX_HYPOTHESIS_CHARS
        assert any(c.isalpha() for c in read)
    else:
        assert not any(c.isalpha() for c in text)


def test_notes_go_at_the_end_of_what_the_player_is_shown():
    chat = Request([{"role": "system", "content": "s"}, {"role": "user", "content": "board"}])
    assert with_note(chat, "hint").messages == [{"role": "system", "content": "s"}, {"role": "user", "content": "board\nhint"}]
    assert with_note(Request("board"), "hint").messages == "board\nhint"


class Literal:
    """A stand-in language model that takes hypotheses at their word: it writes "always <move>"
    hypotheses in turn, predicts the move a hypothesis names, and plays the move a note names.
    Real models are too small here to write sensible hypotheses; this shows what the player does
    with them."""

    name = "literal"

    def __init__(self):
        self.calls: list[tuple[str, int]] = []
        self.written = 0

    def act(self, requests):
        self.calls.append(("act", len(requests)))
        out = []
        for _ in requests:
            out.append(Response(f"The opponent always plays {MOVES[self.written % 3]}.\nmore text"))
            self.written += 1
        return out

    def score(self, requests, candidates):
        self.calls.append(("score", len(requests)))
        rows = []
        for r, options in zip(requests, candidates):
            named = re.findall(r"always plays (\w+)|plays (\w+) next", r.shown)
            move = next((a or b for a, b in reversed(named)), MOVES[0])
            rows.append([Response(c, logprobs=[0.0 if move in c else -math.inf], finish_reason="scored") for c in options])
        return rows


def test_the_hypothesis_that_predicted_the_opponent_is_kept_and_leads():
    model = Literal()
    tom = SeatSpec(ModelTheoryOfMind(model, window=3, keep=2), "tom", mode="choose")
    env = games.make(GAME)
    env.reset(seed=0)
    for _ in range(4):  # four rounds against a player that always plays paper
        env.step(env.action_of("rock"))
        env.step(env.action_of("paper"))
    request = Request("state", env=env, agent="player_0")
    for _ in range(3):  # three turns, each writing one more hypothesis: rock, paper, scissors
        [ranked] = tom.policy.hypotheses([request])
    assert ranked[0].text == "The opponent always plays paper." and (ranked[0].hits, ranked[0].tried) == (3, 3)
    assert ranked[0].next_move == "paper" and all(t.hits == 0 for t in ranked[1:])
    assert tom.policy.kept[env]["player_0"][0] == ranked[0].text  # kept for the match's next turn
    assert tom.policy.predict([request], [list(MOVES)]) == ["paper"]


def test_each_stage_is_one_batched_call_for_every_pending_request():
    model = Literal()
    tom = SeatSpec(ModelTheoryOfMind(model), "tom", mode="choose")
    specs = [MatchSpec(GAME, s, {"player_0": tom, "player_1": scripted("cycle")}, game_kwargs={"rounds": 2}) for s in range(2)]
    RolloutEngine().play(specs)
    # The two matches move together: per turn one write (act), one test (score: every hypothesis
    # at each past and the coming move, of every match) and one move (score). Round 1: one
    # hypothesis a match, the coming move only; round 2: the kept one and a new one, at 2 moves each.
    assert model.calls == [("act", 2), ("score", 2), ("score", 2), ("act", 2), ("score", 2 * 2 * 2), ("score", 2)]


def test_the_tiny_model_plays_through_hypotheses_and_is_probed():
    tom = SeatSpec(ModelTheoryOfMind(load_tiny()), "tom", mode="choose", sampling=Sampling(max_new_tokens=8))
    cycle = scripted("cycle")
    [episode] = RolloutEngine().play([MatchSpec(GAME, 0, {"player_0": tom, "player_1": cycle}, game_kwargs={"rounds": 3})])
    assert len(episode.turns) == 6 and all(t.valid for t in episode.turns)
    metrics = probe([episode], {"tom": tom, "cycle": cycle}, lambda game: {"rounds": 3})
    assert metrics["probe/tom/predictions"] == 3 and 0 <= metrics["probe/tom/accuracy"] <= 1
