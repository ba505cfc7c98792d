"""Does a pretrained model learn by self-play on a CPU? SmolLM2-135M (LoRA) on Kuhn poker in free
text, its move in \\boxed{}: the invalid rate per iteration; the win rate and chips per hand against
random-legal play in evaluation matches at the start and every ``eval.every`` iterations; the
exact chips per hand its policy (read by scoring, every iteration) wins against random-legal play,
beside what a best response, the equilibrium and a passive player (check, fold) win; the exact
exploitability; and the wall-clock time. The ratio is the final win rate over the untrained
model's, measured in the same run.

``--population`` trains examples/kuhn_smollm2_population.toml (four LoRA members, PFSP) instead of
examples/kuhn_smollm2.toml; its rates and values are the means over members (each member's final
win rate is listed too). ``--run-dir DIR`` reads a finished run instead of training one (its seconds
then run from the start event to the last: without loading the model); ``--plot PATH`` draws the
curves (docs/smollm2_kuhn.png).

    python benchmarks/learning_smollm2.py [--population] [--run-dir DIR] [--plot PATH] [--quick] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from pathlib import Path

import numpy as np

from coevo.config import load_run_config
from coevo.train import Trainer
from games import kuhn_analysis

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CONFIGS = {False: EXAMPLES / "kuhn_smollm2.toml", True: EXAMPLES / "kuhn_smollm2_population.toml"}
QUICK = ["iterations=1", "rollout.matches=4", "rollout.max_new_tokens=8", "eval.matches=2", "eval.every=1"]
EVAL = "eval/kuhn_poker/random/"
MEMBER_INVALID = re.compile(r"^(?:(\w+)/)?kuhn_poker/player_\d/invalid_rate$")
MEMBER_STRATEGY = re.compile(r"^kuhn/(?:(\w+)/)?strategy$")
MEMBER_WIN = re.compile(r"^eval/(\w+)/kuhn_poker/random/win$")


def train(config_path: Path, overrides: list[str], run_dir: Path) -> float:
    """Train the config into ``run_dir``; the wall-clock seconds it took."""
    start = time.perf_counter()
    Trainer(load_run_config(config_path, overrides), run_dir).run()
    return time.perf_counter() - start


def invalid_rate(record: dict) -> float:
    """The iteration's invalid rate: a population's mean over its members of their own turns, or
    the run's own. Why not a population's rollout rate: half its turns can be frozen snapshots',
    whose rate stays where it was when they were frozen."""
    per_member: dict[str, list[float]] = {}
    for key, value in record.items():
        if (found := MEMBER_INVALID.match(key)) and found.group(1):
            per_member.setdefault(found.group(1), []).append(value)
    if not per_member:
        return float(record["rollout/invalid_rate"])
    return float(np.mean([np.mean(v) for v in per_member.values()]))


def value_vs_random(strategy: dict[str, float]) -> float:
    """Exact chips per hand ``strategy`` wins against random-legal play, the mean of both seats."""
    uniform = kuhn_analysis.uniform()
    first = kuhn_analysis.first_player_value(kuhn_analysis.combine(strategy, uniform))
    second = -kuhn_analysis.first_player_value(kuhn_analysis.combine(uniform, strategy))
    return float(first + second) / 2


def references() -> dict[str, float]:
    """What known strategies win per hand against random-legal play: the most anyone can, the
    equilibrium's, and a passive player's (check, fold to a bet)."""
    uniform = kuhn_analysis.uniform()
    best = sum(kuhn_analysis.best_response_value(uniform, seat) for seat in (0, 1)) / 2
    return {"best_response": float(best), "nash": value_vs_random(kuhn_analysis.nash()), "passive": value_vs_random(kuhn_analysis.always_fold())}


def learners_value(record: dict) -> float | None:
    """The exact value against random of the record's learners' strategies, their mean."""
    values = [value_vs_random(v) for k, v in record.items() if MEMBER_STRATEGY.match(k) and v is not None]
    return float(np.mean(values)) if values else None


def exploitability(record: dict) -> float:
    return record.get("kuhn/exploitability", record.get("kuhn/population_exploitability"))


def summary(run_dir: Path) -> dict:
    """The curves and their ends, read back from the run's events."""
    records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    start = next(r for r in records if r["kind"] == "start")
    its = [r for r in records if r["kind"] == "iteration"]
    evaluated = {0: start} if EVAL + "win" in start else {}
    evaluated |= {r["iteration"]: r for r in its if EVAL + "win" in r}
    wins = {str(i): r[EVAL + "win"] for i, r in sorted(evaluated.items())}
    returns = {str(i): r[EVAL + "return"] for i, r in sorted(evaluated.items())}
    values = [learners_value(r) for r in [start, *its]]
    invalid = [invalid_rate(r) for r in its]
    last = evaluated[max(evaluated)]
    first_win, last_win = wins[min(wins, key=int)], wins[max(wins, key=int)]
    return {
        "iterations": len(its),
        "invalid_rate": [round(v, 4) for v in invalid],
        "win_vs_random": wins,
        "return_vs_random": returns,
        "value_vs_random": [None if v is None else round(v, 4) for v in values],  # the start's, then each iteration's
        "references_vs_random": references(),
        "initial_invalid_rate": invalid[0],
        "final_invalid_rate": float(np.mean(invalid[-5:])),  # the last five iterations: one is noisy
        "initial_win_vs_random": first_win,
        "final_win_vs_random": last_win,
        "members_final_win_vs_random": {m.group(1): v for k, v in last.items() if (m := MEMBER_WIN.match(k))},
        "initial_value_vs_random": values[0],
        "final_value_vs_random": values[-1],
        "initial_exploitability": exploitability(start),
        "final_exploitability": exploitability(its[-1]),
        "ratio_final_to_initial_win": last_win / max(first_win, 1e-9),
    }


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(11, 2.9), constrained_layout=True)
    left.plot(range(1, len(report["invalid_rate"]) + 1), report["invalid_rate"], color="tab:red")
    left.set(xlabel="iteration", ylabel="invalid rate (training turns)", ylim=(0, 1))
    wins = report["win_vs_random"]
    middle.plot([int(k) for k in wins], list(wins.values()), marker="o", color="tab:blue")
    middle.set(xlabel="iteration", ylabel="win rate vs random-legal", ylim=(0, 1))
    values = report["value_vs_random"]
    right.plot(range(len(values)), values, color="tab:green", label="its policy (exact)")
    for (name, value), style in zip(report["references_vs_random"].items(), (":", "--", "-.")):
        right.axhline(value, color="grey", linestyle=style, linewidth=1, label=name.replace("_", " "))
    right.set(xlabel="iteration", ylabel="chips per hand vs random-legal")
    right.legend(fontsize=7, loc="center right")
    who = "a population of 4 (PFSP), means over members" if report["population"] else "one policy"
    fig.suptitle(f"SmolLM2-135M (LoRA) self-play on Kuhn poker in free text, {who}: 2 CPU cores, {report['seconds'] / 60:.0f} min")
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--population", action="store_true", help="four LoRA members matched by PFSP")
    parser.add_argument("--run-dir", type=Path, help="read this finished run instead of training one")
    parser.add_argument("--plot", type=Path, help="write the curves to this PNG")
    parser.add_argument("--quick", action="store_true", help="one tiny iteration: a smoke test")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE", help="changes to the config")
    args = parser.parse_args()
    overrides = [*args.set, *(QUICK if args.quick else [])]
    with tempfile.TemporaryDirectory() as scratch:
        run_dir = args.run_dir or Path(scratch) / "run"
        seconds = None if args.run_dir else train(CONFIGS[args.population], overrides, run_dir)
        report = {"benchmark": "learning_smollm2", "population": args.population, **summary(run_dir)}
    if seconds is None:  # a finished run: its start to its last event (the end, or the last iteration of one stopped)
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        stamps = [np.datetime64(r["timestamp"].rstrip("Z")) for r in events]
        seconds = float((stamps[-1] - stamps[0]) / np.timedelta64(1, "s"))
    report["seconds"] = seconds
    if args.plot:
        plot(report, args.plot)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
