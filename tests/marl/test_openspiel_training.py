"""Training on OpenSpiel's games: the exact exploitability the trainer logs for a model's policy and
a population's mixture, checked against our own hand-written Kuhn analysis."""

from pathlib import Path

import pytest

pytest.importorskip("pyspiel")

from games import kuhn_analysis  # noqa: E402
from games.kuhn import CARDS  # noqa: E402
from coevo.evaluators import OpenSpielExploitability, exact_exploitability  # noqa: E402
from coevo.train import Trainer  # noqa: E402
from coevo.config import load_run_config  # noqa: E402

EXAMPLES = Path(__file__).parents[2] / "examples"
OPENSPIEL_KUHN = ["games:={\"openspiel/kuhn_poker\"=1.0}", "eval.opponents=[\"random\"]", "rollout.matches=16", "eval.every=0"]


def as_our_strategy(distributions: dict[str, list[float]]) -> dict[str, float]:
    """OpenSpiel Kuhn keys ("0pb": card J, pass, bet) as ours ("Jcb"), P(bet or call) each."""
    return {CARDS[int(key[0])] + key[1:].replace("p", "c"): probs[1] for key, probs in distributions.items()}


def test_a_self_play_run_logs_the_models_exact_exploitability_as_our_kuhn_analysis_finds_it(tmp_path):
    config = load_run_config(EXAMPLES / "kuhn_tiny.toml", ["iterations=2", *OPENSPIEL_KUHN])
    trainer = Trainer(config, tmp_path)
    metrics = trainer.run()
    measure = next(m for m in trainer.measures if isinstance(m, OpenSpielExploitability))
    read = measure.distributions(trainer.members["policy"])
    assert len(read) == 12
    ours = float(kuhn_analysis.exploitability(as_our_strategy(read)))
    theirs = measure.analysis.exploitability(measure.env.game, measure.analysis.policy_from(measure.env.game, read))
    assert theirs == pytest.approx(ours, abs=1e-9)
    assert metrics["kuhn_poker/exploitability"] == pytest.approx(ours, abs=1e-6)  # scored again: float32 noise
    assert 0 < metrics["kuhn_poker/exploitability"] < 1


def test_the_average_policy_is_every_iterate_reach_weighted_as_our_kuhn_analysis_averages_them(tmp_path, monkeypatch):
    """The logged average is OpenSpiel's mixture of the policy after every iteration so far and
    the initial one (added one at a time), equal to our exact average of all of them at once."""
    config = load_run_config(EXAMPLES / "kuhn_tiny.toml", ["iterations=2", *OPENSPIEL_KUHN])
    trainer = Trainer(config, tmp_path)
    measure = next(m for m in trainer.measures if isinstance(m, OpenSpielExploitability))
    read, iterates = measure.distributions, []
    monkeypatch.setattr(measure, "distributions", lambda *args: iterates.append(read(*args)) or iterates[-1])
    metrics = trainer.run()
    assert len(iterates) == 3  # the start, then 2 iterations
    ours = kuhn_analysis.exploitability(kuhn_analysis.average([as_our_strategy(d) for d in iterates]))
    assert metrics["kuhn_poker/average_exploitability"] == pytest.approx(float(ours), abs=1e-9)
    assert metrics["kuhn_poker/average_exploitability"] != metrics["kuhn_poker/exploitability"]


def test_a_populations_mixture_is_reach_weighted_as_our_kuhn_analysis_averages_it(tmp_path):
    overrides = ["iterations=2", "population.snapshot_every=1", "population.meta_solver=\"uniform\"", *OPENSPIEL_KUHN]
    config = load_run_config(EXAMPLES / "kuhn_population.toml", overrides)
    trainer = Trainer(config, tmp_path)
    metrics = trainer.run()
    mixture = {n: w for n, w in trainer.population.meta_strategy().items() if w > 0}
    assert len(mixture) >= 2  # the member and its snapshots
    measure = next(m for m in trainer.measures if isinstance(m, OpenSpielExploitability))
    players = trainer.players(set(mixture))
    strategies = [as_our_strategy(measure.distributions(players[n])) for n in mixture]
    ours = kuhn_analysis.exploitability(kuhn_analysis.average(strategies, list(mixture.values())))
    assert metrics["kuhn_poker/population_exploitability"] == pytest.approx(float(ours), abs=1e-6)


@pytest.mark.parametrize(
    "game, measured",
    [("openspiel/kuhn_poker", True), ("openspiel/leduc_poker", True), ("openspiel/goofspiel(num_cards=4,imp_info=True)", True),
     ("openspiel/liars_dice", False), ("openspiel/tic_tac_toe", False), ("openspiel/first_sealed_auction", False)],
)  # fmt: skip
def test_exploitability_is_measured_in_small_two_player_zero_sum_games_only(game, measured):
    assert exact_exploitability(game) == measured
