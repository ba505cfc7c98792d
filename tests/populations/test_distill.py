"""Distilling a tabular policy into one model (NFSP's average network, fitted exactly)."""

import json
from fractions import Fraction
from pathlib import Path

import pytest

pyspiel = pytest.importorskip("pyspiel")

import games  # noqa: E402
from games import kuhn_analysis, openspiel_analysis  # noqa: E402
from coevo.evaluators import OpenSpielExploitability  # noqa: E402
from marl.models import load_tiny  # noqa: E402
from coevo.distill import Target, distill, targets_from, weighted_kl  # noqa: E402
from roles.seat import SeatRole  # noqa: E402
from tests.runs import scored_member  # noqa: E402

KUHN = "openspiel/kuhn_poker"
EXAMPLES = Path(__file__).parents[2] / "examples"


def test_reach_is_the_chance_and_both_seats_probability_of_an_information_state():
    """Uniform play in Kuhn: a card is dealt with 1/3; "0pb" (J, check, bet) is reached by a
    check and a bet, 1/2 each, after the two cards' deal (1/3 for the first seat's card)."""
    game = pyspiel.load_game("kuhn_poker")
    reached = openspiel_analysis.reach(game, openspiel_analysis.os_policy.UniformRandomPolicy(game))
    assert reached["0"] == pytest.approx(1 / 3) and reached["1p"] == pytest.approx(1 / 6)
    assert reached["0pb"] == pytest.approx(1 / 12)
    always_check = openspiel_analysis.kuhn_policy({k: Fraction(0) for k in kuhn_analysis.INFOSETS})
    assert "0pb" not in openspiel_analysis.reach(game, always_check), "a bet nobody makes reaches nothing"


def test_a_model_distilled_from_the_nash_equilibrium_is_nearly_unexploitable():
    """Kuhn's equilibrium (α = 1/3) as a table, fitted into the untrained tiny model (all 12
    states a step): the reach-weighted KL falls by 95% (measured: 0.60 -> 0.0006) and the
    model's exploitability, read by forced-choice scoring as the trainer reads it, from the
    untrained model's 0.33 to near the target's 0 (measured: 0.004)."""
    env = games.make(KUHN)
    target = openspiel_analysis.kuhn_policy(kuhn_analysis.nash(Fraction(1, 3)))
    targets = targets_from(env, target)
    assert len(targets) == 12 and all(isinstance(t, Target) and sum(t.probs) == pytest.approx(1) for t in targets)
    dealt = [t.weight for t in targets if "Moves so far: none yet." in t.prompt]  # the first mover holding a card
    assert dealt == pytest.approx([1 / 3] * 3)
    policy, role, measure = load_tiny(), SeatRole(KUHN, compact=True), OpenSpielExploitability(KUHN)
    member = scored_member(policy, compact=True)

    def exploitability() -> float:
        read = measure.distributions(member)
        return measure.analysis.exploitability(env.game, measure.analysis.policy_from(env.game, read))

    before = exploitability()
    curve = distill(policy, targets, role, steps=150, lr=3e-3)
    assert len(curve) == 11 and curve[-1] == pytest.approx(weighted_kl(policy, targets, role))
    assert curve[-1] < 0.05 * curve[0], curve
    assert before > 0.3 and exploitability() < 0.02, (before, exploitability())


RUNS = {  # the run, and the metric its target's exploitability is logged as
    "self-play": ([], "kuhn_poker/average_exploitability"),
    "psro": (
        ["population={matchmaker='psro', snapshot_every=1, eval_matches=4}", "rollout.concurrency=16"],
        "kuhn_poker/population_exploitability",
    ),
}


@pytest.mark.parametrize("kind", RUNS)
def test_coevo_distill_saves_a_model_that_plays_the_runs_answer(tmp_path, kind):
    """A 2-iteration run of OpenSpiel's Kuhn, distilled: self-play's average policy, or PSRO's
    meta-strategy mixture. The KL to it falls, the printed exploitabilities are the run's and the
    saved model's own (loaded again from the folder, as ``model = "<out>"`` would), and a bad run
    is one line, exit 2."""
    from typer.testing import CliRunner

    from coevo.cli import app
    from marl.models import load_hf
    from tests.runs import events

    runner = CliRunner()
    run, out = tmp_path / "run", tmp_path / "distilled"
    extra, logged = RUNS[kind]
    overrides = ["iterations=2", 'games:={"openspiel/kuhn_poker"=1.0}', 'eval.opponents=["random"]', "rollout.matches=16", "eval.every=0", *extra]
    args = ["train", str(EXAMPLES / "kuhn_tiny.toml"), "--run-dir", str(run), "--quiet", *(a for o in overrides for a in ("--set", o))]
    assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, ["distill", str(run), "--out", str(out), "--steps", "20"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    last = [r for r in events(run) if r["kind"] == "iteration"][-1]
    name = report["learner"]
    prefix = "" if kind == "self-play" else f"{name}/"
    assert report["iteration"] == 2 and report["target_exploitability"] == pytest.approx(last[logged], abs=1e-9)
    assert report["last_exploitability"] == pytest.approx(last[f"kuhn_poker/{prefix}exploitability"], abs=1e-6)
    assert len(report["kl"]) == 11 and report["kl"][-1] < report["kl"][0]
    measure, env = OpenSpielExploitability(KUHN), games.make(KUHN)
    saved = scored_member(load_hf(str(out)), compact=True)
    read = measure.distributions(saved)
    assert measure.analysis.exploitability(env.game, measure.analysis.policy_from(env.game, read)) == pytest.approx(
        report["distilled_exploitability"], abs=1e-6
    )
    refused = runner.invoke(app, ["distill", str(tmp_path), "--out", str(out)])
    assert refused.exit_code == 2 and "not a run directory" in refused.output


def test_kuhn_targets_are_our_kuhn_poker_as_play_shows_it():
    """Our Kuhn poker (not OpenSpiel's): one target per information set, its prompt the one the
    trainer's exact analysis scores, P(bet or call) on the aggressive move, weighted by reach."""
    from marl.evaluate import kuhn_infoset
    from coevo.distill import kuhn_targets

    strategy = kuhn_analysis.nash(Fraction(1, 6))
    targets, reached = kuhn_targets(strategy), kuhn_analysis.reach(strategy)
    assert len(targets) == 12
    for key, target in zip(kuhn_analysis.INFOSETS, targets):
        env, agent = kuhn_infoset(key)
        assert target.prompt == env.observe(agent)["prompt"] and target.moves == tuple(env.legal_moves(agent))
        aggressive = target.moves.index("bet" if "bet" in target.moves else "call")
        assert target.probs[aggressive] == pytest.approx(float(strategy[key])) and sum(target.probs) == pytest.approx(1)
        assert target.weight == pytest.approx(float(reached[key]))


@pytest.mark.parametrize("target", ["mixture", "average"])
def test_coevo_distill_takes_a_population_run_of_our_kuhn_poker(tmp_path, target):
    """A 2-iteration PSRO run of our Kuhn poker, distilled into one model: its meta-strategy
    mixture, or (``--target average``) its learner's average policy. The printed
    exploitabilities are the ones the run logged and the saved model's own; a plain self-play
    run has no mixture to distil, said in one line."""
    from typer.testing import CliRunner

    from coevo.cli import app
    from marl.evaluate import kuhn_strategy
    from marl.models import load_hf
    from tests.runs import events

    runner = CliRunner()
    run, out, plain = tmp_path / "run", tmp_path / "distilled", tmp_path / "plain"
    overrides = ["iterations=2", "rollout.matches=16", "rollout.concurrency=16", "eval.every=0"]
    population = ["population={matchmaker='psro', snapshot_every=1, meet_matches=8}"]
    for where, extra in ((run, population), (plain, [])):
        args = ["train", str(EXAMPLES / "kuhn_tiny.toml"), "--run-dir", str(where), "--quiet", *(a for o in overrides + extra for a in ("--set", o))]
        assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, ["distill", str(run), "--out", str(out), "--steps", "20", "--target", target])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output.strip().splitlines()[-1])
    last = [r for r in events(run) if r["kind"] == "iteration"][-1]
    logged = "kuhn/population_exploitability" if target == "mixture" else "kuhn/m0/average_exploitability"
    assert report["game"] == "kuhn_poker" and report["target_exploitability"] == pytest.approx(last[logged], abs=1e-9)
    assert report["last_exploitability"] == pytest.approx(last["kuhn/m0/exploitability"], abs=1e-6)
    assert report["kl"][-1] < report["kl"][0]
    saved = kuhn_strategy(load_hf(str(out)), role=SeatRole("kuhn_poker", compact=True))
    assert kuhn_analysis.exploitability(saved) == pytest.approx(report["distilled_exploitability"], abs=1e-6)
    refused = runner.invoke(app, ["distill", str(plain), "--out", str(tmp_path / "x"), "--target", "mixture"])
    assert refused.exit_code == 2 and "no population" in refused.output, refused.output
