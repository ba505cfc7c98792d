"""A team's learners by member name: one object a trainer drives the same way in its own process
or in a Ray actor (``marl.pools.RemoteLearners``), so every run kind trains on every pool.

With LoRA the learners of a team are adapters on one base, each with its own optimiser state;
PBT copies a donor's whole learner state (weights, moments, schedule) into a member, and the
league's reset gives a member its origin's weights and a fresh optimiser.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from marl.learner import Learner, OptimConfig, TrainSample, load_weights
from marl.rollout import SeatSpec

Weights = dict[str, torch.Tensor]  # a member's trainable weights (the whole model, or its adapter)


@dataclass(frozen=True)
class LearnerSpec:
    """How to build one member's learner, as data."""

    optim: OptimConfig
    updates: int  # the run's iterations, for the learning-rate schedule
    teacher: str | None = None  # the member whose model kickstarts this one
    kickstart: float | None = None  # λ, overriding optim.kickstart_coef


class Learners:
    """The learners of members whose seats are ``seats`` (the models they play with, updated in place)."""

    def __init__(self, seats: Mapping[str, SeatSpec], specs: Mapping[str, LearnerSpec], teachers: Mapping[str, SeatSpec] = {}):
        self.seats, self.specs, self.teachers = dict(seats), dict(specs), dict(teachers)
        self.learners = {name: self._new(name, spec.optim) for name, spec in self.specs.items()}

    def _new(self, name: str, optim: OptimConfig) -> Learner:
        spec, seat = self.specs[name], self.seats[name]
        teacher = self.teachers.get(spec.teacher) if spec.teacher else None
        return Learner(
            seat.policy, optim, updates=spec.updates, adapter=seat.adapter, kickstart_coef=spec.kickstart,
            teacher=teacher.policy if teacher else None, teacher_adapter=teacher.adapter if teacher else None,
        )  # fmt: skip

    def __getitem__(self, name: str) -> Learner:
        return self.learners[name]

    def update(self, name: str, samples: Sequence[TrainSample]) -> dict[str, float]:
        return self.learners[name].update(samples)

    def set_hparams(self, name: str, values: dict[str, float]) -> None:
        self.learners[name].set_hparams(values)

    def weights(self, name: str) -> Weights:
        return self.learners[name].weights()

    def teach(self, teacher: str, weights: Weights) -> None:
        """A kickstarting teacher's current weights, where it learns in another process."""
        load_weights(self.teachers[teacher].policy.model, weights, self.teachers[teacher].adapter)

    def state(self) -> dict[str, dict]:
        return {name: learner.state_dict() for name, learner in self.learners.items()}

    def load_state(self, states: Mapping[str, dict], hparams: Mapping[str, dict[str, float]] = {}) -> None:
        """Each learner's state, its hyper-parameters (PBT's) set first so the schedule keeps its place."""
        for name, state in states.items():
            self.learners[name].set_hparams(hparams.get(name, {}))
            self.learners[name].load_state_dict(state)

    def reset(self, name: str, weights: Weights, hparams: dict[str, float]) -> None:
        """``name`` starts again from ``weights`` with a fresh optimiser (a league exploiter's reset)."""
        load_weights(self.seats[name].policy.model, weights, self.seats[name].adapter)
        self.learners[name] = self._new(name, self.specs[name].optim.model_copy(update=hparams))

    def copy(self, name: str, donor: str, hparams: dict[str, float]) -> None:
        """PBT's exploit: ``donor``'s whole learner state into ``name`` (a deep copy: torch would
        share the moments), then its explored hyper-parameters."""
        self.learners[name].load_state_dict(copy.deepcopy(self.learners[donor].state_dict()))
        self.learners[name].set_hparams(hparams)
