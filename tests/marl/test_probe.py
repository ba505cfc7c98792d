"""The theory-of-mind probe: replayed matches ask each member for its opponent's next move; near 1
for a known deterministic opponent, chance for a uniform one; in a training run's metrics."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import games
from coevo.cli import app
from marl.episode import read_jsonl
from marl.models import load_tiny
from marl.probe import predicts, probe, replay
from marl.rollout import MatchSpec, RolloutEngine, SeatSpec
from marl.scripted import ScriptedPolicy
from tests.games.helpers import finite_games

GAME = "rock_paper_scissors"


def seat(name: str, game: str = GAME) -> SeatSpec:
    """A scripted player by name (``random_``: another random player, for random against random)."""
    return SeatSpec(ScriptedPolicy(name, games.scripted_players(game)[name.rstrip("_")]), name)


def played(me: str, them: str, matches: int, game: str = GAME, **options) -> tuple[list, dict[str, SeatSpec]]:
    """``matches`` matches of ``me`` against ``them``, half in each seat, of ``game`` made with ``options``."""
    seats = {me: seat(me, game), them: seat(them, game)}
    specs = []
    for m in range(matches):
        first, second = (me, them) if m % 2 == 0 else (them, me)
        specs.append(MatchSpec(game, 100 + m, {"player_0": seats[first], "player_1": seats[second]}, game_kwargs=options))
    return RolloutEngine().play(specs), seats


def no_options(game: str) -> dict:
    return {}


@pytest.mark.parametrize("opponent", ["cycle", "copycat", "beat_last"])
def test_a_known_deterministic_opponent_is_predicted_almost_always(opponent):
    episodes, seats = played("theory_of_mind", opponent, 4, rounds=40)
    metrics = probe(episodes, seats, lambda game: {"rounds": 40})
    assert metrics["probe/theory_of_mind/predictions"] == 4 * 40
    assert metrics["probe/theory_of_mind/accuracy"] >= 0.9  # wrong only in the rounds before the evidence is in
    assert metrics["probe/theory_of_mind/chance"] == pytest.approx(1 / 3)
    assert f"probe/{opponent}/accuracy" not in metrics  # a fixed strategy predicts nothing


def test_a_uniformly_random_opponent_is_predicted_at_chance():
    episodes, seats = played("theory_of_mind", "random", 80)
    metrics = probe(episodes, seats, no_options)
    n = metrics["probe/theory_of_mind/predictions"]
    assert n == 800
    sigma = np.sqrt(1 / 3 * 2 / 3 / n)  # a binomial share's standard deviation at chance
    assert abs(metrics["probe/theory_of_mind/accuracy"] - 1 / 3) < 4 * sigma


@pytest.mark.parametrize("game", finite_games())
def test_replay_shows_each_seat_what_it_saw_in_play_and_asks_before_each_opponent_move(game):
    episodes, _ = played("random", "random_", 2, game) if game != GAME else played("theory_of_mind", "cycle", 2)
    for episode in episodes:
        asked = list(replay(episode, {}))
        moves = [t for t in episode.turns if t.action is not None]
        assert [a.actual for a in asked] == [t.action for t in moves]
        for a, turn in zip(asked, moves):
            assert a.agent != turn.seat and a.member == episode.members[a.agent]
            assert a.env.observe(turn.seat)["prompt"] == turn.observation  # the very state the opponent moved from


def test_a_model_predicts_by_forced_choice_in_kuhn_poker():
    """A model member is probed in any game with a move list: here the tiny model against never_bluff."""
    model = SeatSpec(load_tiny(), "tiny", mode="choose", compact=True)
    never_bluff = seat("never_bluff", "kuhn_poker")
    specs = [MatchSpec("kuhn_poker", s, {"player_0": model, "player_1": never_bluff}) for s in range(8)]
    episodes = RolloutEngine().play(specs)
    metrics = probe(episodes, {"tiny": model, "never_bluff": never_bluff}, no_options)
    theirs = sum(t.seat == "player_1" and t.action is not None for e in episodes for t in e.turns)
    assert metrics["probe/tiny/predictions"] == theirs
    assert 0 <= metrics["probe/tiny/accuracy"] <= 1 and metrics["probe/tiny/chance"] == 0.5
    assert predicts(model) and not predicts(never_bluff)


def test_games_without_a_move_list_are_not_probed():
    negotiator = seat("heuristic", "simple_negotiation")
    [episode] = RolloutEngine().play([MatchSpec("simple_negotiation", 0, {"player_0": negotiator, "player_1": negotiator})])
    assert probe([episode], {"heuristic": negotiator}, no_options) == {}


def test_coevo_train_logs_the_probe_per_member(tmp_path):
    config = tmp_path / "kuhn.toml"
    config.write_text(
        'iterations = 1\nmodel = "tiny"\nmode = "choose"\n[games]\nkuhn_poker = 1.0\n'
        "[rollout]\nmatches = 4\nconcurrency = 4\ncompact_prompts = true\n[optim]\nmicro_batch = 64\n"
        "[eval]\nevery = 0\n[probe]\nenabled = true\nmatches = 3\n"
    )
    result = CliRunner().invoke(app, ["train", str(config), "--run-dir", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    [iteration] = [e for e in events if e["kind"] == "iteration"]
    shard = read_jsonl(tmp_path / "run" / "episodes" / "iter_000001.jsonl")
    # self-play: every move of the first 3 matches, each predicted by the other seat
    assert iteration["probe/predictions"] == sum(t.action is not None for e in shard[:3] for t in e.turns)
    assert 0 <= iteration["probe/accuracy"] <= 1 and iteration["probe/chance"] == 0.5
