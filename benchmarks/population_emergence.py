"""Does a population beat plain self-play on Kuhn poker (or Leduc)? Equal learner samples, same seeds, one run.

Three matchmakers train the tiny model (``examples/kuhn_population.toml``) for the same number of
iterations and the same number of **learner samples** (trained turns): a self-play match trains
both seats and a match against a frozen snapshot one, so the populations play twice the training
matches a iteration (each run's samples are summed from its events and printed, to show it):

- ``self_play``: the latest policy against itself; what counts is its last iterate, and beside it
  its average policy (every policy it held, reach-weighted: ``kuhn/m0/average_exploitability``);
- ``fictitious``: against a uniformly drawn past snapshot; what counts is the uniform mixture of
  the snapshots (the average policy fictitious play converges in);
- ``psro``: against the Nash meta-strategy of the snapshots' empirical payoff matrix; what counts
  is that Nash mixture. Its oracle is one line of training, a snapshot every 5 iterations;
- ``psro_meet``: ``psro`` whose every new snapshot first plays 256 matches against each other
  snapshot (``population.meet_matches``, psro_v2's simulations per entry), so that the next solve
  knows its row; without meetings a snapshot joins once the evaluation scheduler has played it;
- ``psro_prd``: ``psro_meet`` with projected replicator dynamics as the meta-solver (psro_v2's
  default) instead of the LP's Nash: it keeps a floor of mass on every snapshot;
- ``psro_oracles``: PSRO with fresh best-response oracles (``[population.oracle]``): each starts
  from the initial weights with a fresh optimiser and trains against the meta-strategy for at
  most 5 iterations, ending early once its win rate plateaus (2 iterations against the 2 before).

Each population's mixture is analysed exactly (``kuhn/population_exploitability``: the mixture
reach-weighted per information set); 0 is a Nash equilibrium, uniform play 0.458. ``--game leduc``
plays OpenSpiel's Leduc poker instead (pip install 'coevo[openspiel]'): the same config with Leduc's
game, ``examples/openspiel_leduc_tiny.toml``'s matches, epochs and iterations (512, 8 and 8) and a
snapshot every iteration, analysed by OpenSpiel
(``leduc_poker/population_exploitability``; uniform play 2.37). The runs go
through ``coevo sweep`` (two at a time by default).

Each answer is then distilled into one model, as ``coevo distill`` does (a population's mixture,
self-play's average policy; ``--distill-steps``, 0 to skip): a mixture cannot be deployed, the
model can, and its exploitability is measured like any policy's (the ``*_distilled`` answers).

Prints a table, then one JSON line with every curve's final and best values and each answer's
mean final value over the seeds, with its ratio to self-play's last iterate. ``--set`` changes
every run's config (``optim.kl_coef=0 optim.entropy_coef=0 optim.lr_schedule=constant``: SPIRAL's
unregularised recipe).

    python benchmarks/population_emergence.py [--game leduc] [--seeds 0 1] [--iterations 80] [--answers psro_meet]
        [--set optim.kl_coef=0 ...] [--distill-steps 300] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import tomli_w

from coevo.config import load_run_config
from coevo.distill import distill_run
from coevo.sweep import run_sweep

EXAMPLES = Path(__file__).parent.parent / "examples"
ORACLES = {"population.oracle.start": "initial", "population.oracle.plateau": 2}
RUNS = {  # each run's settings, and its training matches a iteration as a multiple of self-play's: equal learner samples
    "self_play": ({"population.matchmaker": "self_play"}, 1),
    "fictitious": ({"population.matchmaker": "fictitious"}, 2),
    "psro": ({"population.matchmaker": "psro"}, 2),
    "psro_oracles": ({"population.matchmaker": "psro", **ORACLES}, 2),
    "psro_meet": ({"population.matchmaker": "psro", "population.meet_matches": 256}, 2),
    "psro_prd": ({"population.matchmaker": "psro", "population.meet_matches": 256, "population.meta_solver": "prd"}, 2),
}


def leduc_changes() -> list[str]:
    """Leduc's game, and the Leduc example's matches, epochs and iterations (the recipe whose
    self-play exploitability falls and stays down), with a snapshot every iteration."""
    leduc = load_run_config(EXAMPLES / "openspiel_leduc_tiny.toml")
    recipe = {"rollout.matches": leduc.rollout.matches, "optim.epochs": leduc.optim.epochs, "iterations": leduc.iterations}
    game = ['games:={"openspiel/leduc_poker" = 1.0}', 'eval.opponents=["random"]', "population.snapshot_every=1"]
    return [*game, *(f"{key}={value}" for key, value in recipe.items())]


GAMES = {  # the metrics' prefix, and the changes to kuhn_population.toml that play the game
    "kuhn": ("kuhn", list),
    "leduc": ("leduc_poker", leduc_changes),
}


def answer_of(row) -> str:
    """The run a results row is: PSRO's two kinds share the matchmaker."""
    if row["population.matchmaker"] == "psro" and row.get("population.oracle.start") == "initial":
        return "psro_oracles"
    if row["population.matchmaker"] == "psro" and row.get("population.meta_solver") == "prd":
        return "psro_prd"
    if row["population.matchmaker"] == "psro" and row.get("population.meet_matches", 0) > 0:
        return "psro_meet"
    return row["population.matchmaker"]


def curves(run_dir: Path, game: str) -> tuple[list[float], list[float], float]:
    """A run's population exploitability and its learner's average policy's, per iteration, and
    the learner samples it trained on."""
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    its = [r for r in records if r["kind"] == "iteration"]
    samples = sum(r.get("m0/learner/samples", 0.0) for r in its)
    return [r[f"{game}/population_exploitability"] for r in its], [r[f"{game}/m0/average_exploitability"] for r in its], samples


def distilled(run_dir: Path, name: str, out: Path, steps: int) -> tuple[str, float]:
    """A run's answer fitted into one model (``coevo distill``: self-play's average policy, a
    population's mixture): the answer's name and the model's exploitability."""
    answer, target = ("self_play_average", "average") if name == "self_play" else (name, "mixture")
    print(f"distilling {run_dir.name}'s {target}", file=sys.stderr, flush=True)
    fitted = distill_run(run_dir, out / "distilled" / run_dir.name, target=target, steps=steps)
    return f"{answer}_distilled", fitted["distilled_exploitability"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game", choices=list(GAMES), default="kuhn")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--iterations", type=int, help="iterations per run (default: the config's)")
    parser.add_argument("--parallel", type=int, default=2, help="runs at once")
    parser.add_argument("--out", type=Path, help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--answers", nargs="+", choices=list(RUNS), default=list(RUNS), help="the runs (default: all)")
    parser.add_argument("--quick", action="store_true", help="3 iterations of 16 matches: a smoke test")
    parser.add_argument(
        "--set", nargs="+", default=[], metavar="KEY=VALUE", help="changes to every run's config, e.g. optim.kl_coef=0"
    )
    parser.add_argument("--distill-steps", type=int, default=300, help="distillation steps per answer (0: none)")
    args = parser.parse_args()
    prefix, changes_of = GAMES[args.game]
    changes = [*changes_of(), *args.set, *(["rollout.matches=16", "population.eval_matches=4", "population.snapshot_every=1"] if args.quick else [])]
    iterations = 3 if args.quick else args.iterations
    if iterations:
        changes.append(f"iterations={iterations}")
    matches = load_run_config(EXAMPLES / "kuhn_population.toml", changes).rollout.matches  # self-play's; the listed runs set their own
    listed = [
        {**settings, "rollout.matches": matches * k, "rollout.concurrency": matches * k}
        for settings, k in (RUNS[name] for name in args.answers)
    ]  # fmt: skip
    sweep = {
        "config": str(EXAMPLES / "kuhn_population.toml"), "parallel": args.parallel, "set": changes,
        "grid": {"seed": args.seeds, "model_seed": [0]}, "runs": listed,
    }  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        out = args.out or Path(scratch)
        out.mkdir(parents=True, exist_ok=True)
        (out / "sweep.toml").write_text(tomli_w.dumps(sweep))
        table = run_sweep(out / "sweep.toml", out)
        if (table.status != "done").any():
            raise SystemExit(f"runs failed:\n{table[table.status != 'done'][['run', 'status']].to_string()}")
        runs, samples = {}, {}
        for _, row in table.iterrows():
            name, seed = answer_of(row), int(row.seed)
            population, average, samples[name, seed] = curves(Path(row.run_dir), prefix)
            runs[name, seed] = population
            if name == "self_play":
                runs["self_play_average", seed], samples["self_play_average", seed] = average, samples[name, seed]
            if args.distill_steps:
                answer, value = distilled(Path(row.run_dir), name, out, 10 if args.quick else args.distill_steps)
                runs[answer, seed], samples[answer, seed] = [value], samples[name, seed]
        budget = int(table["iteration"].iloc[0])
    report: dict = {"benchmark": "population_emergence", "game": args.game, "iterations": budget, "seeds": args.seeds, "set": args.set, "runs": {}}
    print(f"{'answer':<30}{'seed':>5}{'samples':>9}{'first':>9}{'best':>9}{'final':>9}")
    for (name, seed), values in sorted(runs.items()):
        trained = samples[name, seed]
        print(f"{name:<30}{seed:>5}{trained:>9.0f}{values[0]:>9.3f}{min(values):>9.3f}{values[-1]:>9.3f}")
        report["runs"][f"{name}/seed{seed}"] = {"first": values[0], "best": min(values), "final": values[-1], "samples": trained}
    order = [*RUNS, "self_play_average"]
    answers = sorted({name for name, _ in runs}, key=lambda name: (name.endswith("_distilled"), order.index(name.removesuffix("_distilled"))))
    finals = {name: statistics.mean(runs[name, s][-1] for s in args.seeds) for name in answers}
    report["final_mean"] = finals
    if "self_play" in finals:
        report["ratio_vs_self_play"] = {name: finals[name] / finals["self_play"] for name in answers}
        report["samples_vs_self_play"] = {
            name: statistics.mean(samples[name, s] for s in args.seeds) / statistics.mean(samples["self_play", s] for s in args.seeds)
            for name in args.answers
        }  # fmt: skip
    print(json.dumps(report))


if __name__ == "__main__":
    main()
