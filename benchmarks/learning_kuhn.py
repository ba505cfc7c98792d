"""Does self-play learn Kuhn poker? RAE against REINFORCE, same budget, same seeds, in one run.

Each config (``examples/kuhn_tiny.toml`` and its REINFORCE ablation) is trained for the same number
of iterations from each seed, and the exact exploitability of the policy is read from its run
directory: initially, at its best iteration, at the end, and for the run's average policy
(``kuhn/average_exploitability``: every policy it held, reach-weighted; the policy self-play's
convergence guarantees are about).
0 is a Nash equilibrium; uniform play is 0.458; the best card-blind play is 1/3.

Target (issue 4): ``kuhn_tiny`` cuts the final policy's exploitability by at least 70%.

    python benchmarks/learning_kuhn.py [--iterations N] [--seeds 0 1] [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from marl.config import load_config
from coevo.train import Trainer

EXAMPLES = Path(__file__).parent.parent / "examples"
CONFIGS = {"rae": EXAMPLES / "kuhn_tiny.toml", "reinforce": EXAMPLES / "kuhn_tiny_reinforce.toml"}


def trained_events(path: Path, seed: int, iterations: int | None, overrides: list[str]) -> tuple[list[dict], float]:
    """One run of the config at ``path`` from ``seed`` (model and matches), without evaluation
    matches: its events and its wall-clock seconds."""
    sets = [f"seed={seed}", f"model_seed={seed}", "eval.every=0", *overrides]
    config = load_config(path, sets + ([f"iterations={iterations}"] if iterations else []))
    with tempfile.TemporaryDirectory() as run_dir:
        start = time.perf_counter()
        Trainer(config, Path(run_dir)).run()
        seconds = time.perf_counter() - start
        return [json.loads(line) for line in (Path(run_dir) / "events.jsonl").read_text().splitlines()], seconds


def train(path: Path, seed: int, iterations: int | None, overrides: list[str]) -> dict:
    """One run; its exploitability summary, read back from the run directory's events."""
    records, seconds = trained_events(path, seed, iterations, overrides)
    initial = next(r for r in records if r["kind"] == "start")["kuhn/exploitability"]
    its = [r for r in records if r["kind"] == "iteration"]
    curve = [r["kuhn/exploitability"] for r in its]
    return {
        "initial": initial,
        "best": min(curve),
        "final": curve[-1],
        "averaged": its[-1]["kuhn/average_exploitability"],
        "final_reduction": 1 - curve[-1] / initial,
        "seconds": seconds,
    }


def learning_arguments(doc: str, **extra: dict) -> tuple[list[int], int | None, list[str], argparse.Namespace]:
    """A learning benchmark's command line: its seeds, the iterations per run (None: the
    config's), the config overrides (``--set``'s, and ``--quick``'s: 2 iterations of 8 matches
    and 8 evaluation matches per opponent, a smoke test), and all arguments, ``extra`` ones
    included (``--name``: ``add_argument``'s keywords)."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, help="iterations per run (default: the config's)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--quick", action="store_true", help="2 iterations of 8 matches (8 evaluation matches): a smoke test")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="changes to every run's config, e.g. optim.kl_coef=0")
    for flag, keywords in extra.items():
        parser.add_argument(f"--{flag}", **keywords)
    args = parser.parse_args()
    overrides = [*args.set, *(["rollout.matches=8", "eval.matches=8"] if args.quick else [])]
    return args.seeds, 2 if args.quick else args.iterations, overrides, args


def main() -> None:
    seeds, iterations, overrides, _ = learning_arguments(__doc__)
    report: dict = {"benchmark": "learning_kuhn", "seeds": seeds}
    for name, path in CONFIGS.items():
        runs = [train(path, seed, iterations, overrides) for seed in seeds]
        report[name] = {key: statistics.mean(r[key] for r in runs) for key in runs[0]}
        report[name]["per_seed_final"] = [r["final"] for r in runs]
    report["iterations"] = iterations or load_config(CONFIGS["rae"]).iterations
    report["final_ratio_reinforce_over_rae"] = report["reinforce"]["final"] / max(report["rae"]["final"], 1e-12)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
