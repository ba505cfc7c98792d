"""Episode records survive JSONL storage exactly."""

import math

from hypothesis import given
from hypothesis import strategies as st

from marl.episode import Episode, Turn, read_jsonl, write_jsonl
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.policy import Sampling
from roles.seat import InvalidMoves

texts = st.text()
floats = st.floats(allow_nan=False)  # NaN never equals itself; every other float must survive
turns = st.builds(
    Turn,
    index=st.integers(0, 10**6), seat=texts, role=texts, member=texts, observation=texts,
    prompt_ids=st.lists(st.integers(0, 2**31)), completion_ids=st.lists(st.integers(0, 2**31)),
    logprobs=st.lists(floats), text=texts, move=st.none() | texts, valid=st.booleans(), reason=texts,
    attempt=st.integers(0, 5), action=st.none() | texts, penalty=floats,
    mode=st.sampled_from(["generate", "choose"]),
)  # fmt: skip
episodes = st.builds(
    Episode,
    match_id=texts, game=texts, seed=st.integers(0, 2**63), members=st.dictionaries(texts, texts),
    turns=st.lists(turns, max_size=4), rewards=st.dictionaries(texts, floats), truncated=st.booleans(),
    forfeited_by=st.none() | texts,
)  # fmt: skip


@given(st.lists(episodes, max_size=3))
def test_jsonl_round_trip_is_lossless(tmp_path_factory, batch):
    path = tmp_path_factory.mktemp("eps") / "episodes.jsonl"
    write_jsonl(path, batch)
    assert read_jsonl(path) == batch


def test_infinite_logprobs_survive(tmp_path):
    # A scripted player scored in forced choice gives -inf to the moves it would not play.
    turn = Turn(index=0, seat="a", role="a", member="m", observation="", prompt_ids=[], completion_ids=[1],
                logprobs=[-math.inf], text="x", move="x", valid=True)  # fmt: skip
    episode = Episode(match_id="m", game="g", seed=0, members={}, turns=[turn], rewards={"a": math.inf})
    write_jsonl(tmp_path / "e.jsonl", [episode])
    assert read_jsonl(tmp_path / "e.jsonl") == [episode]


def test_real_rollouts_round_trip(tmp_path, tiny):
    seat = SeatSpec(tiny, "tiny", sampling=Sampling(1.0, 0.95, 8), invalid=InvalidMoves.parse("retry:1"))
    played = RolloutEngine().play([MatchSpec(g, 0, {"player_0": seat, "player_1": seat}) for g in ("kuhn_poker", "simple_negotiation")])
    write_jsonl(tmp_path / "e.jsonl", played)
    assert read_jsonl(tmp_path / "e.jsonl") == played
