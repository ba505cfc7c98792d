"""Does learning offline from self-play transcripts alone improve Kuhn poker? SFT and DPO against
PPO (RAE) and the untrained start, same seeds, same iterations and matches, in one run.

Each run is ``examples/kuhn_tiny.toml`` with ``optim.algorithm`` set: sft learns from the winning
turns of the run's own shards, dpo from their won-vs-lost pairs (``marl.offline``), ppo is the
online baseline. Read back: the policy's exact exploitability at the start (the untrained model,
shared by all three) and at the end; the exact expected chips per hand against the fixed
``always_bet`` opponent at the start and the end (``games.kuhn_analysis``, from the logged strategy,
seats alternating; never trained on); and the final win rate against it in played matches.

    python benchmarks/learning_offline.py [--iterations N] [--seeds 0 1] [--quick] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import json
import statistics

from learning_kuhn import CONFIGS, learning_arguments, trained_events

from games import kuhn_analysis

ALGORITHMS = ("ppo", "sft", "dpo")


def value_vs_always_bet(strategy: dict[str, float]) -> float:
    """Exact chips per hand ``strategy`` wins against always_bet, half the hands in each seat."""
    bet = kuhn_analysis.always_bet()
    first = kuhn_analysis.first_player_value(kuhn_analysis.combine(strategy, bet))
    second = -kuhn_analysis.first_player_value(kuhn_analysis.combine(bet, strategy))
    return float(first + second) / 2


def run(algorithm: str, seed: int, iterations: int, overrides: list[str]) -> dict:
    """One run of ``algorithm``; its start and final exploitability and final win rate."""
    sets = [f"optim.algorithm={algorithm}", f"eval.every={iterations}", 'eval.opponents=["always_bet"]', *overrides]
    records, seconds = trained_events(CONFIGS["rae"], seed, iterations, sets)
    start, last = next(r for r in records if r["kind"] == "start"), [r for r in records if r["kind"] == "iteration"][-1]
    return {
        "initial": start["kuhn/exploitability"],
        "final": last["kuhn/exploitability"],
        "initial_value_vs_always_bet": value_vs_always_bet(start["kuhn/strategy"]),
        "final_value_vs_always_bet": value_vs_always_bet(last["kuhn/strategy"]),
        "win_rate_vs_always_bet": last["eval/kuhn_poker/always_bet/win"],
        "seconds": seconds,
    }


def main() -> None:
    seeds, iterations, overrides, _ = learning_arguments(__doc__)
    iterations = iterations or 20
    report: dict = {"benchmark": "learning_offline", "seeds": seeds, "iterations": iterations}
    for algorithm in ALGORITHMS:
        runs = [run(algorithm, seed, iterations, overrides) for seed in seeds]
        means = ("initial", "final", "initial_value_vs_always_bet", "final_value_vs_always_bet", "seconds")
        report[algorithm] = {k: statistics.mean(r[k] for r in runs) for k in means}
        report[algorithm]["per_seed_final"] = [r["final"] for r in runs]
        report[algorithm]["per_seed_win_rate_vs_always_bet"] = [r["win_rate_vs_always_bet"] for r in runs]
    print(json.dumps(report))


if __name__ == "__main__":
    main()
