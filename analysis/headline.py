"""The metrics that say most about a run at a glance: one list, used by ``coevo train``'s progress
line, ``coevo watch``'s metrics table and the HTML report's summary.

Runs log different metrics: Kuhn poker has an exact exploitability, task forge a curriculum, a
population ratings, and every run its returns per game and seat and its invalid-move rate. So the
list is of patterns, most telling first, and a run's headline is the patterns it has metrics for,
in that order: a Leduc population (no exploitability, no evaluation) still shows its members'
ratings and invalid rates, and a run that logs none of them shows its first metrics by name.

>>> headline(["loss/policy", "rollout/invalid_rate", "kuhn/exploitability", "elo/m1", "elo/m0"])
['kuhn/exploitability', 'elo/m0', 'elo/m1', 'rollout/invalid_rate']
>>> summary_line({"leduc_holdem/player_0/return": 0.25, "rollout/invalid_rate": 0.0, "optim/lr": 1e-3})
'player_0 return 0.25  invalid 0'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PART = r"[^/]+"  # one segment of a metric's name


@dataclass(frozen=True)
class Headline:
    pattern: str  # the whole metric name, as a regex; named groups fill the label
    label: str  # short, for one line: "{who} exploitability"; "{game} " opens it where the game is named
    why: str  # what it says about the run

    def match(self, name: str) -> re.Match[str] | None:
        return re.fullmatch(self.pattern, name)


HEADLINE = (
    Headline(rf"(?P<game>{PART})/population_exploitability", "population exploitability",
             "Kuhn: how far the population's Nash mixture is from equilibrium (0 = Nash)"),
    Headline(rf"(?P<game>{PART})/exploitability", "exploitability", "Kuhn: how far the policy is from Nash (0 = Nash)"),
    Headline(rf"(?P<game>{PART})/average_exploitability", "average exploitability",
             "the policy's average, every policy it held reach-weighted: what converges when the last one cycles"),
    Headline(rf"(?P<game>{PART})/(?P<who>{PART})/exploitability", "{who} exploitability", "Kuhn: each population member's"),
    Headline(r"eval/executor/heldout_accuracy", "held-out accuracy", "task forge: the executors' accuracy on held-out tasks"),
    Headline(rf"eval/(?P<who>{PART})/heldout_accuracy", "{who} held-out accuracy", "task forge: each executor's"),
    Headline(r"eval/graph/heldout_accuracy", "held-out accuracy",
             "an orchestration graph: the share of its graded answers right on held-out tasks"),
    Headline(r"graph/accuracy", "accuracy", "an orchestration graph: graded answers right in training"),
    Headline(r"forge/p_hat", "p̂", "task forge: the executor's success rate on the proposed tasks"),
    Headline(r"forge/difficulty", "difficulty", "task forge: the curriculum's difficulty"),
    Headline(r"forge/valid_task_rate", "valid tasks", "task forge: share of proposals that were valid tasks"),
    Headline(rf"eval/(?P<game>{PART})/(?P<opponent>{PART})/win", "{game} win vs {opponent}", "win rate against a fixed opponent"),
    Headline(rf"elo/(?P<who>{PART})", "elo {who}", "a population member's online Elo rating"),
    Headline(rf"(?P<game>{PART})/(?P<seat>{PART})/return", "{game} {seat} return", "mean return per game and seat"),
    Headline(rf"(?P<game>{PART})/(?P<seat>{PART})/win", "{game} {seat} win", "win rate per game and seat"),
    Headline(r"rollout/invalid_rate", "invalid", "share of turns whose output named no legal move: the first collapse signal"),
    Headline(rf"(?P<who>{PART})/rollout/invalid_rate", "{who} invalid", "each population member's invalid-move rate"),
    Headline(r"policy/grad_norm", "grad", "the policy's gradient norm: a collapse signal"),
)  # fmt: skip
SHOWN = 5  # metrics on one progress line
NOT_SHOWN = ("perf/", "optim/")  # bookkeeping: never a run's headline, even as the fallback


def _rule(name: str) -> tuple[int, re.Match[str]] | None:
    for rank, rule in enumerate(HEADLINE):
        if (found := rule.match(name)) is not None:
            return rank, found
    return None


def is_headline(name: str) -> bool:
    """Whether a metric is one of HEADLINE's."""
    return _rule(name) is not None


def headline(names: Iterable[str]) -> list[str]:
    """The headline metrics among ``names``, most telling first (HEADLINE's order, then by name)."""
    ranked = [(found[0], name) for name in names if (found := _rule(name)) is not None]
    return [name for _, name in sorted(ranked)]


def label(name: str, game: bool = True) -> str:
    """A metric's short label: ``elo m0`` for ``elo/m0``; a metric HEADLINE lacks keeps its name.
    ``game=False`` leaves the game out (``player_0 return``), for a line about one game only."""
    found = _rule(name)
    if found is None:
        return name
    template = HEADLINE[found[0]].label
    return (template if game else template.removeprefix("{game} ")).format(**found[1].groupdict())


def _games(names: Iterable[str]) -> set[str]:
    """The games named in the labels of ``names``."""
    found = [_rule(name) for name in names]
    return {f[1]["game"] for f in found if f is not None and HEADLINE[f[0]].label.startswith("{game} ")}


def scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numbers among an event's fields (not the iteration, flags, tables or text)."""
    return {
        k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "iteration"
    }


def summary_line(metrics: Mapping[str, Any], most: int = SHOWN) -> str:
    """The first ``most`` headline metrics as ``label value`` pairs; a run that logs none of them
    shows its first metrics by name, so the line is empty only when there are no numbers at all."""
    numbers = scalars(metrics)
    keys = headline(numbers) or sorted(k for k in numbers if not k.startswith(NOT_SHOWN))
    named = len(_games(numbers)) > 1  # a run of one game need not say which
    return "  ".join(f"{label(k, named)} {numbers[k]:.4g}" for k in keys[:most])
