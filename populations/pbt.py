"""Population-based training (Jaderberg et al. 2017), with Ray Tune's defaults.

Every ``every`` iterations the trainable members are ranked by fitness (their Elo rating). Each
member in the bottom ``quantile`` **exploits**: it copies the weights, optimiser state and
hyper-parameters of a member drawn uniformly from the top ``quantile`` (truncation selection).
Then it **explores**: each hyper-parameter is, with probability ``resample_probability``,
redrawn log-uniformly from its range, otherwise multiplied by 0.8 or 1.2 (and kept in range).
The decision is pure (this module never touches weights); the trainer applies it and the
lineage records it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator


class PBTConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    every: int = Field(0, ge=0, description="exploit/explore every K iterations; 0 = off")
    quantile: float = Field(0.25, gt=0, le=0.5, description="bottom fraction that copies the top fraction (Ray Tune: 0.25)")
    resample_probability: float = Field(0.25, ge=0, le=1, description="chance a value is redrawn instead of perturbed")
    factors: tuple[float, float] = Field((0.8, 1.2), description="perturbation factors (Ray Tune: 1.2, 0.8)")
    ranges: dict[str, tuple[float, float]] = Field(
        {"lr": (1e-4, 3e-3), "entropy_coef": (1e-3, 0.3)},
        description="hyper-parameters PBT tunes (optim.<name>, temperature, top_p), each with the range resampling draws from",
    )

    @model_validator(mode="after")
    def _positive_ranges(self) -> PBTConfig:
        for name, (low, high) in self.ranges.items():
            if not 0 < low <= high:
                raise ValueError(f"ranges.{name}: need 0 < low <= high for log-uniform resampling, got ({low}, {high})")
        return self


@dataclass(frozen=True)
class Exploit:
    """``member`` takes ``donor``'s weights and these hyper-parameters."""

    member: str
    donor: str
    hparams: dict[str, float]
    change: str


def explore(hparams: dict[str, float], config: PBTConfig, rng: np.random.Generator) -> tuple[dict[str, float], list[str]]:
    """Perturbed or resampled values, and a note per change (``lr ×1.2``, ``entropy_coef resampled``)."""
    out, notes = dict(hparams), []
    for name, (low, high) in config.ranges.items():
        if rng.random() < config.resample_probability:
            out[name] = float(math.exp(rng.uniform(math.log(low), math.log(high))))
            notes.append(f"{name} resampled")
        else:
            factor = config.factors[rng.integers(len(config.factors))]
            out[name] = float(min(max(hparams[name] * factor, low), high))
            notes.append(f"{name} ×{factor:g}")
    return out, notes


def exploit_and_explore(
    fitness: dict[str, float], hparams: dict[str, dict[str, float]], config: PBTConfig, rng: np.random.Generator
) -> list[Exploit]:
    """Truncation selection over ``fitness`` (member → score, higher is better)."""
    ranked = sorted(fitness, key=lambda name: (fitness[name], name))
    cut = max(1, int(len(ranked) * config.quantile)) if len(ranked) >= 2 else 0
    bottom, top = ranked[:cut], ranked[len(ranked) - cut :]
    decisions = []
    for member in bottom:
        donor = top[rng.integers(len(top))]
        new, notes = explore(hparams[donor], config, rng)
        decisions.append(Exploit(member, donor, new, f"pbt: copied {donor}; " + ", ".join(notes)))
    return decisions
