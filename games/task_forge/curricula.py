"""Classical curriculum teachers: choose the next task, see how the learner did, adapt.

A task is a *family* (a name) and a point ``knobs`` in the unit square [0, 1]^D (D = ``dims``,
2 by default: size and complexity). After the learner tries it, the teacher gets its
``success`` in [0, 1]: a 0/1 outcome, or a success rate p̂ over k attempts.

>>> import numpy as np
>>> from games.task_forge.curricula import SEC
>>> teacher, rng = SEC(["arith", "logic"]), np.random.default_rng(0)
>>> family, knobs = teacher.propose(rng)
>>> teacher.update(family, knobs, success=0.5)  # the learner solved half its attempts
>>> round(float(teacher.q.max()), 3)  # α · 2p̂(1 − p̂) = 0.5 · 0.5
0.25

Teachers (``CURRICULA`` by name):

- ``RandomCurriculum``: uniform family, uniform knobs. The baseline.
- ``ALPGMM``: absolute learning progress + Gaussian mixture (Portelas et al. 2019,
  https://arxiv.org/abs/1910.07224). Each finished task gets ALP = |r_new − r_old|, r_old the
  success of the nearest earlier task; every ``fit_rate`` tasks, Gaussian mixtures of 2 ..
  ``max_components`` components are fitted to the last ``window`` points (knobs, ALP) and the one
  with the lowest AIC is kept; a proposal is uniform with probability ``random_fraction`` (always
  before the first fit), else drawn from a Gaussian picked in proportion to its mean ALP.
- ``SEC``: Self-Evolving Curriculum (Chen et al. 2025, https://arxiv.org/abs/2505.14970). Arms are
  (family, difficulty level); an arm's reward is the learner's mean absolute advantage on it;
  Q(arm) ← α·r + (1 − α)·Q(arm) (TD(0)); arms are drawn from softmax(Q / τ).
- ``Staircase``: per family, the difficulty at which the learner succeeds a target share of the
  time (Robbins–Monro; an adaptive staircase): d ← d + η·(p̂ − target).
- ``PAIRED``: regret-based environment design (Dennis et al. 2020, https://arxiv.org/abs/2012.02096).
  An antagonist (a second executor) plays every task the learner played; a bandit over
  (family, difficulty level) arms proposes where the antagonist's success minus the learner's is
  highest: tasks solvable, but not yet by the learner. Not in ``CURRICULA``: it needs an
  antagonist (``games.task_forge.players.CurriculumProposer.named("paired")`` builds one).

Each teacher's ``state_dict`` is JSON-serialisable and, loaded into a teacher built with the same
arguments, continues exactly: the same proposals from the same ``rng``. ``check_curriculum`` is
the conformance check for any implementation of ``Curriculum``.
"""

from __future__ import annotations

import copy
import json
import warnings
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Curriculum(Protocol):
    def propose(self, rng: np.random.Generator) -> tuple[str, np.ndarray]:
        """The next task: (family, knobs in [0, 1]^dims). Reads state; never changes it."""

    def update(self, family: str, knobs: np.ndarray, success: float) -> None:
        """Record the learner's success in [0, 1] on a task (proposed by this teacher or not)."""

    def state_dict(self) -> dict:
        """Everything needed to resume exactly, JSON-serialisable."""

    def load_state_dict(self, state: dict) -> None:
        """Resume from ``state_dict()``; refuses, naming the key, if the teacher's arguments differ."""


# ---------------------------------------------------------------------------- shared checks


def _check_families(families: Sequence[str]) -> tuple[str, ...]:
    if isinstance(families, str):
        raise ValueError(f"families must be a sequence of names, not the string {families!r}; wrap it: [{families!r}]")
    families = tuple(families)
    if not families or len(set(families)) != len(families) or not all(isinstance(f, str) for f in families):
        raise ValueError(f"families must be distinct strings, at least one; got {families!r}")
    return families


def _check_int(name: str, value: int, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value!r}")
    return int(value)


def _check_task(families: tuple[str, ...], dims: int, family: str, knobs, success: float) -> tuple[int, np.ndarray]:
    """(family index, knobs as float64 (D,)) after checking the task and success are valid."""
    if family not in families:
        raise ValueError(f"unknown family {family!r}; this teacher knows {families!r}")
    x = np.asarray(knobs, dtype=np.float64)
    if x.shape != (dims,) or not np.all((x >= 0) & (x <= 1)):
        raise ValueError(f"knobs must be {dims} numbers in [0, 1]; got {knobs!r}")
    if not 0 <= success <= 1:  # also rejects NaN
        raise ValueError(f"success must be in [0, 1] (a 0/1 outcome or a success rate); got {success!r}")
    return families.index(family), x


def _check_config(state: dict, config: dict) -> None:
    """A state may only resume into a teacher built with the same arguments."""
    saved = state.get("config", {})
    for key, value in config.items():
        if saved.get(key) != value:
            raise ValueError(
                f"cannot resume: {key} is {saved.get(key)!r} in the state but {value!r} here; "
                f"build the teacher with {key}={saved.get(key)!r}"
            )


def _uniform(families: tuple[str, ...], dims: int, rng: np.random.Generator) -> tuple[str, np.ndarray]:
    return families[int(rng.integers(len(families)))], rng.random(dims)


# ---------------------------------------------------------------------------- Random


class RandomCurriculum:
    """Uniform family, uniform knobs: the baseline every teacher must beat."""

    def __init__(self, families: Sequence[str], dims: int = 2):
        self.families = _check_families(families)
        self.dims = _check_int("dims", dims)

    def propose(self, rng: np.random.Generator) -> tuple[str, np.ndarray]:
        return _uniform(self.families, self.dims, rng)

    def update(self, family: str, knobs: np.ndarray, success: float) -> None:
        _check_task(self.families, self.dims, family, knobs, success)

    def _config(self) -> dict:
        return {"families": list(self.families), "dims": self.dims}

    def state_dict(self) -> dict:
        return {"config": self._config()}

    def load_state_dict(self, state: dict) -> None:
        _check_config(state, self._config())


# ---------------------------------------------------------------------------- ALP-GMM


class ALPGMM:
    """Portelas et al. 2019 (CoRL), "Teacher algorithms for curriculum learning of Deep RL in
    continuously parameterized environments", https://arxiv.org/abs/1910.07224.

    Defaults are those of the reference implementation (flowersteam/teachDeepRL,
    teachers/algos/alp_gmm.py): fit every 250 tasks on the last 250, 2..10 components, full
    covariances, one EM initialisation, AIC, 20 % random tasks, uniform until the first fit.

    Algorithm, per finished task (family f, knobs x, success r):
      1) ALP = |r − r_old|, r_old the success of the nearest earlier task of family f (Euclidean
         distance on the knobs; the earliest on ties). The first task of a family has ALP 0.
      2) Every ``fit_rate`` tasks: for each family, fit GMMs with k = 2 .. ``max_components``
         components to that family's points (x, ALP) among the last ``window`` tasks; keep the
         lowest AIC.
    and per proposal:
      3) With probability ``random_fraction``, or before the first fit: uniform family and knobs.
      4) Else pick one Gaussian among all families' mixtures with probability proportional to its
         mean ALP (uniform if all are 0), draw from it, drop the ALP coordinate, clip to [0, 1].

    Families: the task space is the disjoint union of one square per family, and ALP-GMM runs on
    that union. Tasks of different families are never neighbours (their successes are not
    comparable), so each family gets its own mixture, but all Gaussians compete in step 4. A
    family is then proposed in proportion to the learning progress found in it, with no extra
    machinery, and uniform sampling on the union (step 3) keeps exploring every family. The
    alternative, the family as one-hot extra dims, would make mixtures model a discrete
    coordinate and let nearest neighbours cross families.

    Deviations: the reference gives ALP 0 to the first 6 tasks overall; here only the first task
    of each family has ALP 0. A family with under 2 points in the window gets no mixture (only
    step 3 reaches it); with few points k is capped at the number of points.

    Args:
        families: task family names.
        dims: number of knobs, each in [0, 1].
        fit_rate: tasks between two fits; also the number of uniform bootstrap tasks (250, the
            reference's ``fit_rate``).
        window: how many of the latest tasks each fit sees (250: the reference fits on the last
            ``fit_rate`` tasks).
        max_components: largest mixture tried (10: the reference's ``potential_ks = 2..10``).
        random_fraction: probability of a uniform proposal after the first fit (0.2: the
            reference's ``random_task_ratio``).
        seed: the mixtures' EM initialisation (``random_state``). Proposals draw only from the
            ``rng`` given to ``propose``.
    """

    def __init__(
        self,
        families: Sequence[str],
        dims: int = 2,
        fit_rate: int = 250,
        window: int = 250,
        max_components: int = 10,
        random_fraction: float = 0.2,
        seed: int = 0,
    ):
        self.families = _check_families(families)
        self.dims = _check_int("dims", dims)
        self.fit_rate = _check_int("fit_rate", fit_rate)
        self.window = _check_int("window", window, minimum=2)
        self.max_components = _check_int("max_components", max_components, minimum=2)
        if not 0 <= random_fraction <= 1:
            raise ValueError(f"random_fraction must be a probability in [0, 1]; got {random_fraction!r}")
        self.random_fraction = float(random_fraction)
        self.seed = _check_int("seed", seed, minimum=0)
        # History of finished tasks, N rows; D = dims.
        self.family_index = np.zeros(0, dtype=np.int64)  # (N,)
        self.knobs = np.zeros((0, self.dims))  # (N, D)
        self.success = np.zeros(0)  # (N,)
        self.alp = np.zeros(0)  # (N,)
        # The current mixtures of all families, G Gaussians over (knobs, ALP).
        self.fitted = False  # whether a fit has happened: before it every proposal is uniform
        self.gaussian_family = np.zeros(0, dtype=np.int64)  # (G,)
        self.means = np.zeros((0, self.dims + 1))  # (G, D+1), ALP last
        self.covariances = np.zeros((0, self.dims + 1, self.dims + 1))  # (G, D+1, D+1)

    def learning_progress(self, family: str, knobs: np.ndarray, success: float) -> float:
        """Step 1: |success − success of the nearest earlier task of ``family``| (0 if none)."""
        f, x = _check_task(self.families, self.dims, family, knobs, success)
        same = np.flatnonzero(self.family_index == f)
        if not len(same):
            return 0.0
        nearest = same[np.argmin(np.linalg.norm(self.knobs[same] - x, axis=1))]
        return abs(success - float(self.success[nearest]))

    def update(self, family: str, knobs: np.ndarray, success: float) -> None:
        alp = self.learning_progress(family, knobs, success)
        self.family_index = np.append(self.family_index, self.families.index(family))
        self.knobs = np.vstack([self.knobs, np.asarray(knobs, dtype=np.float64)])
        self.success = np.append(self.success, float(success))
        self.alp = np.append(self.alp, alp)
        if len(self.success) % self.fit_rate == 0:
            self._fit()

    def _fit(self) -> None:
        """Step 2: per family, the lowest-AIC mixture of the last ``window`` (knobs, ALP) points."""
        # Imported here: scikit-learn takes over a second to import, and `import games` is for everyone.
        from sklearn.exceptions import ConvergenceWarning
        from sklearn.mixture import GaussianMixture
        from threadpoolctl import threadpool_limits

        recent = slice(max(0, len(self.success) - self.window), None)
        points = np.column_stack([self.knobs[recent], self.alp[recent]])  # (W, D+1)
        family_index, means, covariances = [], [], []
        for f in range(len(self.families)):
            x = points[self.family_index[recent] == f]
            if len(x) < 2:
                continue
            # One BLAS thread: on (<= window, D+1) data, threads only add overhead (3x slower on 2 cores).
            # Few distinct points (e.g. ALP all 0) make k-means init and EM warn; the fit is still usable.
            with threadpool_limits(1), warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                mixtures = [
                    GaussianMixture(k, covariance_type="full", n_init=1, random_state=self.seed).fit(x)
                    for k in range(2, min(self.max_components, len(x)) + 1)
                ]
            best = min(mixtures, key=lambda m: m.aic(x))
            family_index += [f] * best.n_components
            means.append(best.means_)
            covariances.append(best.covariances_)
        self.fitted = True
        self.gaussian_family = np.array(family_index, dtype=np.int64)
        self.means = np.concatenate(means) if means else np.zeros((0, self.dims + 1))
        self.covariances = np.concatenate(covariances) if covariances else np.zeros((0, self.dims + 1, self.dims + 1))

    def gaussian_probabilities(self) -> np.ndarray:
        """Step 4's choice: each Gaussian's probability, proportional to its mean ALP. (G,)"""
        alp = np.clip(self.means[:, -1], 0, None)  # a fitted mean of ALPs >= 0 is >= 0 up to rounding
        if alp.sum() == 0:
            return np.full(len(alp), 1 / len(alp))
        return alp / alp.sum()

    def propose(self, rng: np.random.Generator) -> tuple[str, np.ndarray]:
        if not len(self.means) or rng.random() < self.random_fraction:
            return _uniform(self.families, self.dims, rng)
        g = rng.choice(len(self.means), p=self.gaussian_probabilities())
        x = rng.multivariate_normal(self.means[g], self.covariances[g])[:-1]  # drop the ALP coordinate
        return self.families[self.gaussian_family[g]], np.clip(x, 0, 1)

    def _config(self) -> dict:
        return {
            "families": list(self.families), "dims": self.dims, "fit_rate": self.fit_rate, "window": self.window,
            "max_components": self.max_components, "random_fraction": self.random_fraction, "seed": self.seed,
        }  # fmt: skip

    def state_dict(self) -> dict:
        return {
            "config": self._config(),
            "family_index": self.family_index.tolist(),
            "knobs": self.knobs.tolist(),
            "success": self.success.tolist(),
            "alp": self.alp.tolist(),
            "fitted": self.fitted,
            "gaussian_family": self.gaussian_family.tolist(),
            "means": self.means.tolist(),
            "covariances": self.covariances.tolist(),
        }

    def load_state_dict(self, state: dict) -> None:
        _check_config(state, self._config())
        d = self.dims
        self.family_index = np.array(state["family_index"], dtype=np.int64)
        self.knobs = np.array(state["knobs"], dtype=np.float64).reshape(-1, d)
        self.success = np.array(state["success"], dtype=np.float64)
        self.alp = np.array(state["alp"], dtype=np.float64)
        self.fitted = bool(state["fitted"])
        self.gaussian_family = np.array(state["gaussian_family"], dtype=np.int64)
        self.means = np.array(state["means"], dtype=np.float64).reshape(-1, d + 1)
        self.covariances = np.array(state["covariances"], dtype=np.float64).reshape(-1, d + 1, d + 1)


# ---------------------------------------------------------------------------- difficulty levels


def difficulty_level(knobs: np.ndarray, levels: int) -> int:
    """The difficulty level of ``knobs`` among ``levels``: ⌊mean(knobs)·L⌋, with difficulty 1 in the top level."""
    return min(levels - 1, int(np.mean(knobs) * levels))


def knobs_in_level(level: int, levels: int, dims: int, rng: np.random.Generator) -> np.ndarray:
    """Knobs drawn uniformly from the band of the unit cube at ``level``, by rejection: tasks of one
    level vary in size and complexity at equal difficulty. (D,)"""
    while True:
        candidates = rng.random((64, dims))  # (64, D)
        inside = np.minimum(levels - 1, (candidates.mean(axis=1) * levels).astype(int)) == level
        if inside.any():
            return candidates[np.argmax(inside)]


# ---------------------------------------------------------------------------- SEC


def absolute_advantage(success: float) -> float:
    """Mean |A_i| over k Bernoulli attempts with success rate p̂ and the group-mean baseline:
    A_i = r_i − p̂, so a fraction p̂ of attempts has |A| = 1 − p̂ and the rest |A| = p̂, giving
    2·p̂·(1 − p̂). Zero when every attempt succeeds or every one fails (no learning signal);
    largest, 0.5, at p̂ = 1/2. GRPO's division by the group std would give 2·sqrt(p̂(1 − p̂)),
    the same ordering; pass such advantages to ``SEC.update_advantages`` instead.
    """
    return 2 * success * (1 - success)


class SEC:
    """Chen et al. 2025, "Self-Evolving Curriculum for LLM reasoning",
    https://arxiv.org/abs/2505.14970: a non-stationary multi-armed bandit over difficulty categories.

    Arms are categories c = (family, level). Difficulty is the mean of the knobs; level ℓ of
    ``levels`` holds the tasks with difficulty in [ℓ/L, (ℓ+1)/L) (the last also holds 1).
    Proposing from arm (f, ℓ) draws knobs uniformly from that band of the square (by rejection),
    so tasks in one category vary in size and complexity at equal difficulty.

    Algorithm:
      1) Propose: draw an arm with probability softmax(Q / τ), then knobs within its level.
      2) Reward of a finished task in arm c: the learner's mean absolute advantage on it,
         r = mean_i |A_i| (``update_advantages``), or from a success rate p̂ over k attempts with
         the group-mean baseline, r = 2·p̂·(1 − p̂) (``update``, see ``absolute_advantage``).
      3) TD(0): Q(c) ← α·r + (1 − α)·Q(c). Other arms keep their Q.

    A single 0/1 outcome is a group of one: its group-mean advantage is 0, so ``update`` with
    0/1 successes teaches SEC nothing. Give a success rate over several attempts, or compute
    advantages against a baseline of your own and call ``update_advantages``.

    Deviations: the paper updates each arm once per training step with the mean |A| over that
    step's problems in the arm; here each finished task is one TD(0) step. Q starts at 0 for every
    arm (uniform first proposals). The paper's defaults for α and τ are our best recollection
    (α = 0.5, τ = 1.0); with rewards in [0, 0.5], τ = 1 gives a mild preference (at most e^0.5
    ≈ 1.65 times the probability of a zero-Q arm): lower τ to exploit more.

    Args:
        families: task family names.
        levels: difficulty levels per family (L); arms = families × levels.
        learning_rate: α of the TD(0) update, in (0, 1].
        temperature: τ of the Boltzmann (softmax) policy, > 0.
        dims: number of knobs, each in [0, 1].
    """

    def __init__(
        self,
        families: Sequence[str],
        levels: int = 5,
        learning_rate: float = 0.5,
        temperature: float = 1.0,
        dims: int = 2,
    ):
        self.families = _check_families(families)
        self.levels = _check_int("levels", levels)
        if not 0 < learning_rate <= 1:
            raise ValueError(f"learning_rate (α) must be in (0, 1]; got {learning_rate!r}")
        if not temperature > 0:
            raise ValueError(f"temperature (τ) must be > 0; got {temperature!r}")
        self.learning_rate = float(learning_rate)
        self.temperature = float(temperature)
        self.dims = _check_int("dims", dims)
        self.q = np.zeros((len(self.families), self.levels))  # (F, L): Q of arm (family, level)

    def level(self, knobs: np.ndarray) -> int:
        return difficulty_level(knobs, self.levels)

    def probabilities(self) -> np.ndarray:
        """Step 1's Boltzmann policy over arms: softmax(Q / τ). (F, L)"""
        z = np.exp((self.q - self.q.max()) / self.temperature)  # shifted by max Q for stability
        return z / z.sum()

    def propose(self, rng: np.random.Generator) -> tuple[str, np.ndarray]:
        f, level = divmod(int(rng.choice(self.q.size, p=self.probabilities().ravel())), self.levels)
        return self.families[f], knobs_in_level(level, self.levels, self.dims, rng)

    def update(self, family: str, knobs: np.ndarray, success: float) -> None:
        """Steps 2–3 with r = 2·p̂·(1 − p̂), ``success`` = p̂ the success rate over the attempts."""
        f, x = _check_task(self.families, self.dims, family, knobs, success)
        self._td(f, self.level(x), absolute_advantage(success))

    def update_advantages(self, family: str, knobs: np.ndarray, advantages: Sequence[float]) -> None:
        """Steps 2–3 with r = mean |A_i| over the learner's advantages on this task."""
        f, x = _check_task(self.families, self.dims, family, knobs, 0.0)
        a = np.asarray(advantages, dtype=np.float64)
        if a.ndim != 1 or not len(a) or not np.all(np.isfinite(a)):
            raise ValueError(f"advantages must be a non-empty list of finite numbers; got {advantages!r}")
        self._td(f, self.level(x), float(np.mean(np.abs(a))))

    def _td(self, f: int, level: int, reward: float) -> None:
        self.q[f, level] = self.learning_rate * reward + (1 - self.learning_rate) * self.q[f, level]

    def _config(self) -> dict:
        return {
            "families": list(self.families), "levels": self.levels, "learning_rate": self.learning_rate,
            "temperature": self.temperature, "dims": self.dims,
        }  # fmt: skip

    def state_dict(self) -> dict:
        return {"config": self._config(), "q": self.q.tolist()}

    def load_state_dict(self, state: dict) -> None:
        _check_config(state, self._config())
        self.q = np.array(state["q"], dtype=np.float64).reshape(len(self.families), self.levels)


# ---------------------------------------------------------------------------- staircase


class Staircase:
    """Track the difficulty at which the learner succeeds ``target`` of the time, per family: a
    Robbins–Monro stochastic approximation (1951), the adaptive staircase of psychophysics, and
    the idea behind OpenAI's automatic domain randomisation (2019), which widens a parameter's
    range while performance stays above a threshold and narrows it below another.

    Each family f has a difficulty d_f, starting at ``start``. Propose: a family uniformly, then
    knobs with mean d_f — (d_f + u, d_f − u) for two knobs, u uniform within ``spread`` and the
    unit square — so size and complexity vary at equal difficulty. Update with the success rate
    p̂ on a task of family f: d_f ← clip(d_f + η·(p̂ − target), 0, 1). If success falls as
    difficulty rises, d_f settles where the learner's success is ``target``, and follows the
    learner as it improves: the band Agent0 trains on (0.3 ≤ p̂ ≤ 0.8) stays in reach, limited
    by the binomial spread of p̂ over k attempts (k = 8 at p = ½: 82% of tasks in the band).

    Args:
        families: task family names.
        target: success rate to hold, in (0, 1); 0.55 is the middle of Agent0's band.
        step: η, the step size per finished task, > 0.
        start: every family's initial difficulty, in [0, 1].
        spread: largest |u| between the knobs at equal difficulty, in [0, 0.5].
        dims: number of knobs, each in [0, 1].
    """

    def __init__(
        self, families: Sequence[str], target: float = 0.55, step: float = 0.1, start: float = 0.2,
        spread: float = 0.1, dims: int = 2,
    ):  # fmt: skip
        self.families = _check_families(families)
        if not 0 < target < 1:
            raise ValueError(f"target must be in (0, 1): a success rate to hold; got {target!r}")
        if not step > 0:
            raise ValueError(f"step (η) must be > 0; got {step!r}")
        if not 0 <= start <= 1:
            raise ValueError(f"start must be a difficulty in [0, 1]; got {start!r}")
        if not 0 <= spread <= 0.5:
            raise ValueError(f"spread must be in [0, 0.5]; got {spread!r}")
        self.target, self.step, self.start, self.spread = float(target), float(step), float(start), float(spread)
        self.dims = _check_int("dims", dims)
        self.difficulty = np.full(len(self.families), self.start)  # (F,)

    def propose(self, rng: np.random.Generator) -> tuple[str, np.ndarray]:
        f = int(rng.integers(len(self.families)))
        d = self.difficulty[f]
        room = min(self.spread, d, 1 - d)  # every knob within room of d: inside [0, 1]
        offsets = rng.uniform(-room, room, size=self.dims)
        offsets -= offsets.mean()  # the knobs' mean is d exactly
        widest = np.abs(offsets).max()
        if widest > room:  # centring can push one past room (three knobs or more): shrink them all
            offsets *= room / widest
        return self.families[f], np.clip(d + offsets, 0.0, 1.0)  # clip: rounding only

    def update(self, family: str, knobs: np.ndarray, success: float) -> None:
        f, _ = _check_task(self.families, self.dims, family, knobs, success)
        self.difficulty[f] = min(1.0, max(0.0, self.difficulty[f] + self.step * (success - self.target)))

    def _config(self) -> dict:
        return {
            "families": list(self.families), "target": self.target, "step": self.step, "start": self.start,
            "spread": self.spread, "dims": self.dims,
        }  # fmt: skip

    def state_dict(self) -> dict:
        return {"config": self._config(), "difficulty": self.difficulty.tolist()}

    def load_state_dict(self, state: dict) -> None:
        _check_config(state, self._config())
        self.difficulty = np.array(state["difficulty"], dtype=np.float64)


# ---------------------------------------------------------------------------- PAIRED


@runtime_checkable
class Antagonist(Protocol):
    """PAIRED's second executor: it plays each task the protagonist played."""

    def success(self, family: str, knobs: np.ndarray) -> float:
        """Attempt the task; its success rate in [0, 1] (and, if it learns, learn from the attempts)."""

    def state_dict(self) -> dict:
        """Everything needed to resume exactly, JSON-serialisable."""

    def load_state_dict(self, state: dict) -> None:
        """Resume from ``state_dict()``."""


def estimated_regret(pairs: Sequence[Sequence[float]]) -> float:
    """PAIRED's regret from recent (antagonist success, protagonist success) pairs on one arm: the
    antagonist's mean success minus the protagonist's, in [−1, 1]; 0 before any pair (no evidence
    either way, so an untried arm sits between arms known to be too easy and arms with regret)."""
    if not len(pairs):
        return 0.0
    antagonist, protagonist = np.mean(np.asarray(pairs, dtype=np.float64), axis=0)
    return float(antagonist - protagonist)


class PAIRED:
    """Dennis et al. 2020, "Emergent Complexity and Zero-shot Transfer via Unsupervised Environment
    Design", https://arxiv.org/abs/2012.02096: the task designer maximises the *regret* between an
    antagonist and the protagonist, regret = antagonist success − protagonist success. Tasks the
    antagonist solves and the protagonist does not have high regret; tasks too hard for both, or
    easy for both, have none. So, unlike minimax (the hardest tasks), the tasks stay solvable.

    The paper's designer is an RL policy writing environments; here it is a bandit over task-parameter
    bins, arms = (family, level) as in SEC (level ℓ of ``levels``: difficulty, the knobs' mean, in
    [ℓ/L, (ℓ+1)/L)):

      1) Propose: an arm with probability (1 − ε)·softmax(R / τ) + ε / #arms, then knobs uniformly
         within its level (``knobs_in_level``); ε = ``exploration`` keeps every arm's estimate alive
         as both executors change.
      2) Update with the protagonist's success p̂ on a task of arm c: the antagonist attempts the same
         task (``Antagonist.success``, giving q̂), and (q̂, p̂) joins arm c's last ``window`` pairs.
      3) R(c) = mean q̂ − mean p̂ over those pairs (``estimated_regret``).

    Deviations: the paper trains the designer by policy gradient on each episode's regret, and
    estimates regret with the antagonist's best episode minus the protagonist's mean return; a
    bandit over bins with windowed means is the designer here (the same reward, a simpler policy),
    and both success rates are means over their k attempts. No latent task space (CLUTR) is
    learnt: the bins over the knobs are the designer's whole action space.

    Args:
        families: task family names.
        antagonist: the second executor (``games.task_forge.players.SkilledAntagonist``).
        levels: difficulty levels per family (L); arms = families × levels.
        window: recent pairs per arm that its regret estimate averages over, >= 1.
        temperature: τ of the softmax over regret estimates, > 0.
        exploration: ε, the share of uniform proposals, in [0, 1].
        dims: number of knobs, each in [0, 1].
    """

    def __init__(
        self, families: Sequence[str], antagonist: Antagonist, levels: int = 5, window: int = 8,
        temperature: float = 0.1, exploration: float = 0.1, dims: int = 2,
    ):  # fmt: skip
        self.families = _check_families(families)
        if not isinstance(antagonist, Antagonist):
            raise ValueError(f"antagonist must have success(family, knobs), state_dict and load_state_dict; got {antagonist!r}")
        self.antagonist = antagonist
        self.levels = _check_int("levels", levels)
        self.window = _check_int("window", window)
        if not temperature > 0:
            raise ValueError(f"temperature (τ) must be > 0; got {temperature!r}")
        if not 0 <= exploration <= 1:
            raise ValueError(f"exploration (ε) must be a probability in [0, 1]; got {exploration!r}")
        self.temperature, self.exploration = float(temperature), float(exploration)
        self.dims = _check_int("dims", dims)
        # pairs[f][ℓ]: arm (f, ℓ)'s last `window` [antagonist success, protagonist success], oldest first.
        self.pairs: list[list[list[list[float]]]] = [[[] for _ in range(self.levels)] for _ in self.families]

    def regrets(self) -> np.ndarray:
        """Step 3's estimate for every arm. (F, L)"""
        return np.array([[estimated_regret(arm) for arm in family] for family in self.pairs])

    def probabilities(self) -> np.ndarray:
        """Step 1's policy over arms. (F, L)"""
        r = self.regrets()
        z = np.exp((r - r.max()) / self.temperature)  # shifted by the max for stability
        return (1 - self.exploration) * z / z.sum() + self.exploration / r.size

    def propose(self, rng: np.random.Generator) -> tuple[str, np.ndarray]:
        f, level = divmod(int(rng.choice(self.levels * len(self.families), p=self.probabilities().ravel())), self.levels)
        return self.families[f], knobs_in_level(level, self.levels, self.dims, rng)

    def update(self, family: str, knobs: np.ndarray, success: float) -> None:
        """Step 2: the antagonist plays the task the protagonist succeeded on ``success`` of the time."""
        f, x = _check_task(self.families, self.dims, family, knobs, success)
        self.update_pair(family, x, self.antagonist.success(family, x), success)

    def update_pair(self, family: str, knobs: np.ndarray, antagonist: float, protagonist: float) -> None:
        """Record both executors' success rates on one task (both already played it)."""
        f, x = _check_task(self.families, self.dims, family, knobs, protagonist)
        _check_task(self.families, self.dims, family, x, antagonist)
        arm = self.pairs[f][difficulty_level(x, self.levels)]
        arm.append([float(antagonist), float(protagonist)])
        del arm[: -self.window]

    def _config(self) -> dict:
        return {
            "families": list(self.families), "levels": self.levels, "window": self.window,
            "temperature": self.temperature, "exploration": self.exploration, "dims": self.dims,
        }  # fmt: skip

    def state_dict(self) -> dict:
        return {"config": self._config(), "pairs": copy.deepcopy(self.pairs), "antagonist": self.antagonist.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        _check_config(state, self._config())
        self.pairs = [[[[float(a), float(p)] for a, p in arm] for arm in family] for family in state["pairs"]]
        self.antagonist.load_state_dict(state["antagonist"])


CURRICULA: dict[str, type] = {"random": RandomCurriculum, "alp_gmm": ALPGMM, "sec": SEC, "staircase": Staircase}


# ---------------------------------------------------------------------------- conformance


def check_curriculum(make: Callable[[], Curriculum], steps: int = 40, seed: int = 0) -> None:
    """Conformance check for a ``Curriculum``, built fresh by ``make()``. Raises AssertionError
    naming the rule broken: proposals are known families with knobs in [0, 1]^dims, ``propose``
    leaves the state alone, and the JSON round trip of ``state_dict`` into a fresh teacher
    continues with the same proposals.
    """
    teacher, rng = make(), np.random.default_rng(seed)
    families, dims = teacher.families, teacher.dims

    def run(t: Curriculum, r: np.random.Generator, n: int) -> list[tuple[str, list[float]]]:
        out = []
        for _ in range(n):
            family, knobs = t.propose(r)
            assert family in families, f"proposed family {family!r} is not one of {families!r}"
            knobs = np.asarray(knobs)
            assert knobs.shape == (dims,), f"knobs must have shape ({dims},); got {knobs.shape}"
            assert np.all((knobs >= 0) & (knobs <= 1)), f"knobs must lie in [0, 1]; got {knobs}"
            t.update(family, knobs, float(r.random()))
            out.append((family, knobs.tolist()))
        return out

    run(teacher, rng, steps)
    before = json.dumps(teacher.state_dict())
    teacher.propose(np.random.default_rng(seed + 1))
    assert json.dumps(teacher.state_dict()) == before, "propose must not change the teacher's state"
    resumed = make()
    resumed.load_state_dict(json.loads(before))
    assert json.dumps(resumed.state_dict()) == before, "load_state_dict(state_dict()) must restore the same state"
    continued = run(teacher, np.random.default_rng(seed + 2), steps)
    assert run(resumed, np.random.default_rng(seed + 2), steps) == continued, (
        "a teacher resumed from state_dict must propose what the original proposes, given the same rng"
    )
