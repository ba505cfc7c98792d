"""Meta-game solvers: which mixture over a population's members to play, train against or rank by.

A *meta-game* is the normal-form game whose pure strategies are whole policies (population members)
and whose payoffs are their measured mean returns against each other. PSRO-style training needs a
*meta-solver* that turns that payoff table into a mixture; evaluation needs a ranking that cycles
(rock beats scissors beats paper beats rock) and redundant copies cannot fool. This module holds
the standard ones, written from the papers' equations (docs/research/population.md §2.3, §2.6, §4.4-4.5).

Nash by linear programming. In a two-player zero-sum matrix game the row player, who receives
A[i, j] and maximises, can guarantee the value v = max_x min_j (xᵀA)_j. That maximin is a linear
programme: maximise v subject to Aᵀx ≥ v·1, Σx = 1, x ≥ 0. The column player's minimax strategy
solves the same programme for −Aᵀ, and von Neumann's minimax theorem says both give the same v;
the pair is a Nash equilibrium (``lp_nash``).

Projected replicator dynamics (PRD; Lanctot et al. 2017, https://arxiv.org/abs/1711.00832). Each
player p holds a mixture x_p and moves it towards the pure strategies that earn more than its
average: with u = M_p ×_{-p} x_{-p} the expected payoff of each pure strategy against the others'
mixtures, x_p ← x_p + dt·x_p ⊙ (u − x_pᵀu), then x_p is projected back onto {x ≥ γ, Σx = 1}. The
floor γ keeps every strategy alive so that the dynamics can always recover it. Replicator
trajectories cycle around interior equilibria rather than converge to them, so the solver
returns the average of the trajectory (``projected_replicator_dynamics``).

α-Rank (Omidshafiei et al. 2019, https://doi.org/10.1038/s41598-019-45619-9). Each population of
m individuals is, most of the time, monomorphic: everyone plays the same pure strategy, so the
state of the game is a pure strategy *profile*. Rarely a mutant appears in one population and
either dies out or takes over (fixates); selection intensity α sets how strongly fitness decides
which. This is a Markov chain over pure profiles: from profile s, population k moves to mutant
strategy r with probability η·ρ, where η = 1/Σ_k(|S_k| − 1) picks the population and mutant
uniformly and ρ is the fixation probability of Traulsen et al. 2006 (Fermi imitation). The
stationary distribution π of the chain is the ranking: mass stays on profiles that nothing
invades. As α → ∞ the chain follows the game's response graph, and π concentrates on its sink
strongly connected components (``alpha_rank``, ``symmetric_alpha_rank``).

Nash averaging (Balduzzi et al. 2018, "Re-evaluating Evaluation", https://arxiv.org/abs/1806.02643).
Given an antisymmetric evaluation matrix A (A[i, j] = how much i beats j; A = −Aᵀ), play the
symmetric zero-sum game (A, −A). Its Nash equilibria are the mixtures p with A p ≤ 0 (the value
is 0 by symmetry); the maximum-entropy one p* is unique. The Nash average skill of member i is
(A p*)_i: how well i does against the equilibrium, not against the population average. Members
in the equilibrium's support score 0 and dominated members below 0. Adding a redundant copy of a
member splits its mass and leaves every skill unchanged when the equilibrium is unique, as it is
for almost every A. With a continuum of equilibria the copy shifts which one has maximum entropy,
so skills outside the support can move (tests/populations/test_metagame.py has a worked case)
(``nash_averaging``).

``META_SOLVERS`` maps a name to a solver for a symmetric one-population meta-game given as a
square matrix M, with M[i, j] member i's mean return against member j.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod

import numpy as np
from scipy.linalg import null_space
from scipy.optimize import linprog, minimize
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import logit, logsumexp


def _probabilities(x: np.ndarray) -> np.ndarray:
    """Clip a solver's tiny negative rounding noise to 0 and renormalise to sum 1."""
    x = np.clip(x, 0.0, None)
    return x / x.sum()


# ---------------------------------------------------------------------------------------------------
# Nash equilibrium of a two-player zero-sum matrix game
# ---------------------------------------------------------------------------------------------------


def _maximin(payoff: np.ndarray) -> tuple[np.ndarray, float]:
    """The row player's maximin strategy and value: max v s.t. payoffᵀx ≥ v·1, Σx = 1, x ≥ 0."""
    rows, cols = payoff.shape
    cost = np.zeros(rows + 1)  # variables (x_1 … x_rows, v); minimise −v
    cost[-1] = -1.0
    a_ub = np.hstack([-payoff.T, np.ones((cols, 1))])  # v − (xᵀA)_j ≤ 0 for every column j
    a_eq = np.append(np.ones(rows), 0.0)[None, :]
    bounds = [(0, None)] * rows + [(None, None)]
    result = linprog(cost, A_ub=a_ub, b_ub=np.zeros(cols), A_eq=a_eq, b_eq=[1.0], bounds=bounds, method="highs")
    if result.status != 0:
        raise RuntimeError(f"the maximin linear programme failed: {result.message}")
    return _probabilities(result.x[:rows]), float(result.x[-1])


def lp_nash(payoff: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """A Nash equilibrium (x, y, v) of the zero-sum game where the row player receives payoff[i, j].

    Two linear programmes solved with HiGHS: the row player's maximin over ``payoff`` and the
    column player's over −payoffᵀ. Works for non-square matrices. v is the row player's value, so
    min_j (xᵀA)_j ≥ v and max_i (A y)_i ≤ v up to HiGHS's feasibility tolerance (1e-7).
    """
    payoff = np.asarray(payoff, dtype=np.float64)
    if payoff.ndim != 2 or payoff.size == 0 or not np.isfinite(payoff).all():
        raise ValueError(f"lp_nash needs a non-empty, finite 2-D payoff matrix, got shape {payoff.shape}")
    row, value = _maximin(payoff)
    column, _ = _maximin(-payoff.T)
    return row, column, value


# ---------------------------------------------------------------------------------------------------
# Projected replicator dynamics
# ---------------------------------------------------------------------------------------------------


def _project_onto_floored_simplex(x: np.ndarray, gamma: float) -> np.ndarray:
    """Euclidean projection of x onto {y ≥ γ, Σy = 1}.

    With y = γ + z this is the projection onto the simplex {z ≥ 0, Σz = r}, r = 1 − nγ, whose
    solution is z = max(x − γ − θ, 0) for the one threshold θ that makes Σz = r (Held, Wolfe and
    Crowder 1974; Duchi et al. 2008): sort, and θ comes from the largest k whose top-k
    entries all stay positive.
    """
    shifted = x - gamma
    radius = 1.0 - x.size * gamma
    descending = np.sort(shifted)[::-1]
    excess = np.cumsum(descending) - radius  # Σ of the top k entries, minus r
    k = np.arange(1, x.size + 1)
    last = np.flatnonzero(descending - excess / k > 0)[-1]
    theta = excess[last] / (last + 1)
    return gamma + np.maximum(shifted - theta, 0.0)


def _payoff_per_strategy(payoff: np.ndarray, strategies: Sequence[np.ndarray], player: int) -> np.ndarray:
    """u = M_p ×_{-p} x_{-p}: player p's expected payoff for each pure strategy, others mixing."""
    for other in reversed(range(len(strategies))):  # from the last axis down, so indices stay valid
        if other != player:
            payoff = np.tensordot(payoff, strategies[other], axes=([other], [0]))
    return payoff


def projected_replicator_dynamics(
    payoffs: Sequence[np.ndarray],
    iterations: int = 10_000,
    dt: float = 1e-3,
    gamma: float = 1e-6,
    average_last: int | None = None,
) -> list[np.ndarray]:
    """Projected replicator dynamics (Lanctot et al. 2017, https://arxiv.org/abs/1711.00832).

    From uniform mixtures, every player at once, ``iterations`` times:

        u = M_p ×_{-p} x_{-p}
        x_p ← Π_γ( x_p + dt · x_p ⊙ (u − x_pᵀu) )      Π_γ: Euclidean projection onto {x ≥ γ, Σx = 1}

    Returns each player's average over the last ``average_last`` iterates (the iterates after each
    update; all of them when None, as OpenSpiel's PSRO default). ``payoffs[p]`` is player p's
    payoff tensor, indexed by every player's pure strategy.
    Symbols: M_p = ``payoffs[p]``, dt = ``dt``, γ = ``gamma``. Defaults: dt and γ are OpenSpiel's;
    its PSRO runs 1e5 iterations, here 1e4 (docs/research/population.md §2.2 measures 22 s for 1e5).
    """
    payoffs = [np.asarray(m, dtype=np.float64) for m in payoffs]
    shape = payoffs[0].shape
    if len(payoffs) != len(shape) or any(m.shape != shape for m in payoffs):
        raise ValueError(
            f"PRD needs one payoff tensor per player, each indexed by every player's strategy; "
            f"got {len(payoffs)} tensors of shapes {[m.shape for m in payoffs]}"
        )
    average_last = iterations if average_last is None else average_last
    if not 1 <= average_last <= iterations:
        raise ValueError(f"average_last ({average_last}) must be between 1 and iterations ({iterations})")
    if not 0 <= gamma < 1 / max(shape):
        raise ValueError(f"gamma ({gamma}) must be in [0, 1/{max(shape)}) so that {{x ≥ γ, Σx = 1}} is not empty")
    strategies = [np.full(n, 1.0 / n) for n in shape]
    totals = [np.zeros(n) for n in shape]
    for t in range(iterations):
        updated = []
        for player, (payoff, x) in enumerate(zip(payoffs, strategies)):
            u = _payoff_per_strategy(payoff, strategies, player)
            updated.append(_project_onto_floored_simplex(x + dt * x * (u - x @ u), gamma))
        strategies = updated
        if t >= iterations - average_last:
            for total, x in zip(totals, strategies):
                total += x
    return [total / average_last for total in totals]


def _square(matrix: np.ndarray, what: str) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] == 0:
        raise ValueError(f"{what} needs a non-empty square matrix, got shape {matrix.shape}")
    return matrix


def symmetric_prd(matrix: np.ndarray, **kwargs) -> np.ndarray:
    """PRD on the symmetric two-player game whose row player receives matrix[i, j].

    Both players draw from one population: the column player's payoff tensor is matrixᵀ. From the
    common uniform start both mixtures stay equal, so player 0's is the answer. ``kwargs`` go to
    ``projected_replicator_dynamics``.
    """
    matrix = _square(matrix, "symmetric_prd")
    return projected_replicator_dynamics([matrix, matrix.T], **kwargs)[0]


# ---------------------------------------------------------------------------------------------------
# α-Rank
# ---------------------------------------------------------------------------------------------------


def _fixation_probability(fitness_gaps: np.ndarray, alpha: float) -> np.ndarray:
    """Probability that one mutant takes over a population of m residents (Fermi process).

    ``fitness_gaps[..., k-1]`` is f_r(k) − f_s(k), the mutant's fitness minus the resident's when k
    of the m individuals are mutants (k = 1 … m−1). Traulsen, Nowak and Pacheco 2006 (Phys. Rev. E 74):

        ρ = 1 / (1 + Σ_{l=1}^{m-1} Π_{k=1}^{l} exp(−α (f_r(k) − f_s(k))))

    computed in log space, so large α·gaps neither overflow nor warn. With a constant gap g this is
    the closed form (1 − e^{−αg}) / (1 − e^{−mαg}), and 1/m when g = 0.
    """
    exponents = -alpha * np.cumsum(fitness_gaps, axis=-1)  # log of each product, l = 1 … m−1
    exponents = np.concatenate([np.zeros_like(exponents[..., :1]), exponents], axis=-1)  # the 1 (l = 0)
    return np.exp(-logsumexp(exponents, axis=-1))


def _infinite_alpha_probability(fitness_gaps: np.ndarray, eps: float) -> np.ndarray:
    """α → ∞ (Omidshafiei et al. 2019, the infinite-α limit): 1 − ε if the mutant is strictly fitter,
    ε if strictly less fit, 1/2 on a tie. ε > 0 keeps the chain irreducible."""
    return np.where(fitness_gaps > 0, 1.0 - eps, np.where(fitness_gaps < 0, eps, 0.5))


def _stationary_distribution(transitions: np.ndarray) -> np.ndarray:
    """π with πᵀC = πᵀ and Σπ = 1, for the row-stochastic C.

    π is unique exactly when the chain has one closed class (a strongly connected set of states
    that no transition leaves); then πᵀ(C − I + 11ᵀ) = 1ᵀ has the unique solution π.
    """
    n = len(transitions)
    moves = transitions * (1 - np.eye(n)) > 0
    _, labels = connected_components(csr_matrix(moves), directed=True, connection="strong")
    sources, targets = np.nonzero(moves)
    left = labels[sources[labels[sources] != labels[targets]]]
    closed = np.setdiff1d(labels, left)
    if len(closed) > 1:
        raise ValueError(
            f"the α-Rank Markov chain has {len(closed)} closed classes, so its stationary distribution is "
            f"not unique (transitions underflow to 0 at this alpha); lower alpha or use inf_alpha=True"
        )
    system = transitions - np.eye(n) + np.ones((n, n))
    return _probabilities(np.linalg.solve(system.T, np.ones(n)))


def alpha_rank(
    payoffs: Sequence[np.ndarray],
    alpha: float = 100.0,
    population_size: int = 50,
    inf_alpha: bool = False,
    inf_alpha_eps: float = 0.01,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Multi-population α-Rank (Omidshafiei et al. 2019, https://doi.org/10.1038/s41598-019-45619-9).

    One population per player; ``payoffs[k]`` is population k's payoff tensor over pure profiles.
    From profile s, population k's mutant r (every other profile entry fixed) fixates with

        ρ = (1 − e^{−α(f_r − f_s)}) / (1 − e^{−mα(f_r − f_s)}),    1/m when f_r = f_s

    where f_r and f_s are population k's payoffs at the mutated and the current profile: with
    monomorphic populations a mutant plays only the other populations' residents. Transitions
    C[s, s'] = η·ρ with η = 1/Σ_k(|S_k| − 1), and C[s, s] = 1 − Σ_{s'} C[s, s'].
    ``inf_alpha`` replaces ρ by 1 − ε, ε or 1/2 for a strictly better, worse or tied deviation.

    Returns π over pure profiles, flattened in C order of the profile tensor, and each
    population's marginal of π. Raises ValueError when π is not unique (several sinks whose
    escape probabilities underflow); inf_alpha mode with ε > 0 never does.
    Symbols: α = ``alpha``, m = ``population_size``, ε = ``inf_alpha_eps``. Defaults are OpenSpiel's.
    """
    payoffs = [np.asarray(m, dtype=np.float64) for m in payoffs]
    shape = payoffs[0].shape
    if len(payoffs) != len(shape) or any(m.shape != shape for m in payoffs) or min(shape) < 1:
        raise ValueError(
            f"α-Rank needs one payoff tensor per population, each indexed by every population's strategy; "
            f"got {len(payoffs)} tensors of shapes {[m.shape for m in payoffs]}"
        )
    if population_size < 2:
        raise ValueError(f"population_size must be at least 2, got {population_size}")
    n_profiles = prod(shape)
    eta = 1.0 / max(sum(n - 1 for n in shape), 1)  # max: a single profile has no moves at all
    profiles = np.indices(shape).reshape(len(shape), n_profiles)  # (K, N): each profile's strategies
    transitions = np.zeros((n_profiles, n_profiles))
    for k, payoff in enumerate(payoffs):
        fitness = payoff.reshape(n_profiles)  # population k's payoff at each profile
        for mutant in range(shape[k]):
            mutated = profiles.copy()
            mutated[k] = mutant
            target = np.ravel_multi_index(mutated, shape)
            moves = np.flatnonzero(profiles[k] != mutant)
            gaps = fitness[target[moves]] - fitness[moves]  # f_r − f_s
            if inf_alpha:
                rho = _infinite_alpha_probability(gaps, inf_alpha_eps)
            else:  # the same gap at every intermediate state
                rho = _fixation_probability(np.repeat(gaps[:, None], population_size - 1, axis=1), alpha)
            transitions[moves, target[moves]] = eta * rho
    transitions[np.diag_indices(n_profiles)] = 1.0 - transitions.sum(axis=1)
    pi = _stationary_distribution(transitions)
    joint = pi.reshape(shape)
    marginals = [joint.sum(axis=tuple(a for a in range(len(shape)) if a != k)) for k in range(len(shape))]
    return pi, marginals


def symmetric_alpha_rank(
    matrix: np.ndarray,
    alpha: float = 100.0,
    population_size: int = 50,
    inf_alpha: bool = False,
    inf_alpha_eps: float = 0.01,
) -> np.ndarray:
    """Single-population α-Rank (Omidshafiei et al. 2019, its single-population case) of the
    symmetric two-player game whose row player receives matrix[i, j]. Returns π over pure strategies.

    Individuals of one population of m play each other. With k mutants r among m − k residents s,
    each individual's fitness is its mean payoff against the other m − 1:

        f_r(k) = ((k − 1)·M[r, r] + (m − k)·M[r, s]) / (m − 1)
        f_s(k) = (k·M[s, r] + (m − k − 1)·M[s, s]) / (m − 1)

    and ρ is the intermediate-state sum of ``_fixation_probability``. Transitions between
    monomorphic states are C[s, r] = ρ/(n − 1). For a zero-sum M (M = −Mᵀ) the gap is the constant
    m/(m − 1)·M[r, s], so this agrees with the closed form. ``inf_alpha`` compares M[r, s] with
    M[s, s]: whether r is a better reply than s to a population of s (the response graph).
    Symbols: M = ``matrix``, α = ``alpha``, m = ``population_size``, ε = ``inf_alpha_eps``.
    """
    matrix = _square(matrix, "symmetric_alpha_rank")
    if population_size < 2:
        raise ValueError(f"population_size must be at least 2, got {population_size}")
    n, m = len(matrix), population_size
    if n == 1:
        return np.ones(1)
    resident_vs_self = np.diag(matrix)[:, None]  # M[s, s], indexed [s, r]
    mutant_vs_self = np.diag(matrix)[None, :]  # M[r, r]
    mutant_vs_resident = matrix.T  # M[r, s]
    resident_vs_mutant = matrix  # M[s, r]
    if inf_alpha:
        rho = _infinite_alpha_probability(mutant_vs_resident - resident_vs_self, inf_alpha_eps)
    else:
        k = np.arange(1, m)  # mutants present, (m−1,)
        f_r = ((k - 1) * mutant_vs_self[..., None] + (m - k) * mutant_vs_resident[..., None]) / (m - 1)
        f_s = (k * resident_vs_mutant[..., None] + (m - k - 1) * resident_vs_self[..., None]) / (m - 1)
        rho = _fixation_probability(f_r - f_s, alpha)  # (n, n), indexed [s, r]
    transitions = rho / (n - 1)
    np.fill_diagonal(transitions, 0.0)
    np.fill_diagonal(transitions, 1.0 - transitions.sum(axis=1))
    return _stationary_distribution(transitions)


# ---------------------------------------------------------------------------------------------------
# Maximum-entropy Nash and Nash averaging
# ---------------------------------------------------------------------------------------------------


def _check_antisymmetric(a: np.ndarray) -> np.ndarray:
    a = _square(a, "Nash averaging")
    asymmetry = np.abs(a + a.T).max()
    if not np.isfinite(a).all() or asymmetry > 1e-8 * max(1.0, np.abs(a).max()):
        raise ValueError(
            f"Nash averaging needs a finite antisymmetric matrix (A = −Aᵀ); max |A + Aᵀ| is {asymmetry:.3g}. "
            f"Antisymmetrise a noisy zero-sum table with (A - A.T) / 2"
        )
    return a


def _widest_nash(a: np.ndarray) -> np.ndarray:
    """A symmetric Nash equilibrium of the antisymmetric A whose support is as large as possible.

    The equilibria are {p ∈ Δ: A p ≤ 0}; without the Σp = 1 they form a cone, and a sum of points
    in a cone stays in it. So one LP finds the union of all equilibrium supports: maximise Σ_i z_i
    with z_i ≤ q_i, z_i ≤ 1, A q ≤ 0, q ≥ 0; every strategy that some equilibrium plays gets
    z_i = 1. Returns q/Σq, positive exactly on that union.
    """
    n = len(a)
    cost = np.concatenate([np.zeros(n), -np.ones(n)])  # variables (q, z); maximise Σz
    a_ub = np.block([[a, np.zeros((n, n))], [-np.eye(n), np.eye(n)]])  # A q ≤ 0 and z − q ≤ 0
    bounds = [(0, None)] * n + [(0, 1)] * n
    result = linprog(cost, A_ub=a_ub, b_ub=np.zeros(2 * n), bounds=bounds, method="highs")
    if result.status != 0:
        raise RuntimeError(f"the Nash-support linear programme failed: {result.message}")
    support = result.x[n:] > 0.5  # z is 0 or 1 at the optimum
    q = np.where(support, result.x[:n], 0.0)
    return q / q.sum()


def max_entropy_nash(antisymmetric: np.ndarray) -> np.ndarray:
    """The maximum-entropy Nash equilibrium p* of the symmetric zero-sum game with payoff A.

        p* = argmax −Σ p log p   s.t.  A p ≤ 0,  Σp = 1,  p ≥ 0

    Steps: 1) ``_widest_nash`` finds the union S of all equilibrium supports and an equilibrium
    p0 positive on all of S; entropy is strictly concave, so p* lies in that relative interior.
    2) For i ∈ S every equilibrium has (A p)_i = 0 (a strategy some equilibrium plays earns the
    value 0 against every other), so p* = p0 + N z with N a basis of the null space of [A_SS; 1ᵀ].
    3) Maximise entropy over z with SLSQP, keeping p ≥ 0 and the rows outside S at A p ≤ 0.
    The result is checked: A p* ≤ 1e-6·max|A|.
    """
    a = _check_antisymmetric(antisymmetric)
    p0 = _widest_nash(a)  # 1)
    support = p0 > 0
    basis = null_space(np.vstack([a[np.ix_(support, support)], np.ones((1, support.sum()))]))  # 2)
    p = p0.copy()
    if basis.shape[1] > 0:  # 3) a continuum of equilibria: pick the most spread out
        start, outside = p0[support], a[np.ix_(~support, support)]

        def negative_entropy(z: np.ndarray) -> tuple[float, np.ndarray]:
            q = np.clip(start + basis @ z, 1e-300, None)
            return float(q @ np.log(q)), basis.T @ (np.log(q) + 1)

        constraints = [
            {"type": "ineq", "fun": lambda z: start + basis @ z, "jac": lambda z: basis},
            {"type": "ineq", "fun": lambda z: -outside @ (start + basis @ z), "jac": lambda z: -outside @ basis},
        ]
        result = minimize(negative_entropy, np.zeros(basis.shape[1]), jac=True, method="SLSQP",
                          constraints=constraints, options={"ftol": 1e-12, "maxiter": 1000})  # fmt: skip
        if not result.success:
            raise RuntimeError(f"max_entropy_nash: SLSQP did not converge: {result.message}")
        p[support] = start + basis @ result.x
    p = _probabilities(p)
    violation = (a @ p).max()
    if violation > 1e-6 * max(1.0, np.abs(a).max()):
        raise RuntimeError(f"max_entropy_nash found p with max (A p)_i = {violation:.3g} > 0; not an equilibrium")
    return p


def nash_averaging(antisymmetric: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nash averaging (Balduzzi et al. 2018, https://arxiv.org/abs/1806.02643): (p*, A p*).

    p* is the maximum-entropy Nash equilibrium of A and A p* the members' skills: 0 for members the
    equilibrium plays, negative for members it beats. Raises ValueError unless A = −Aᵀ.
    Caveat: the paper calls the skills invariant to redundant copies; that holds for every
    member when the equilibrium is unique, but only for support members when it is not.
    """
    p = max_entropy_nash(antisymmetric)
    return p, np.asarray(antisymmetric, dtype=np.float64) @ p


def antisymmetric_from_win_rates(p: np.ndarray, eps: float = 1e-3) -> np.ndarray:
    """Log-odds evaluation matrix A[i, j] = logit(p[i, j]) with a zero diagonal (Balduzzi et al. 2018).

    p[i, j] is the probability that i beats j, clipped to [eps, 1 − eps] so that a perfect record
    gives a large finite score. A is antisymmetric when p[i, j] + p[j, i] = 1 (count draws as half
    a win).
    """
    a = logit(np.clip(np.asarray(p, dtype=np.float64), eps, 1 - eps))
    np.fill_diagonal(a, 0.0)
    return a


# ---------------------------------------------------------------------------------------------------
# Meta-solvers for a symmetric one-population meta-game
# ---------------------------------------------------------------------------------------------------


def _zero_sum(matrix: np.ndarray) -> np.ndarray:
    """(M − Mᵀ)/2 with unplayed (NaN) pairs as draws: the zero-sum game a noisy table estimates.

    Averages both seatings of every pair. A constant-sum table (win rates, M + Mᵀ = 1) becomes
    M − 1/2: the same game, made zero-sum.
    """
    matrix = np.nan_to_num(_square(matrix, "a meta-solver"), nan=0.0)
    return (matrix - matrix.T) / 2


def uniform_strategy(matrix: np.ndarray) -> np.ndarray:
    """Every member equally often (fictitious self-play over the population)."""
    n = len(_square(matrix, "a meta-solver"))
    return np.full(n, 1.0 / n)


def nash_strategy(matrix: np.ndarray) -> np.ndarray:
    """An LP Nash equilibrium of the antisymmetrised meta-game (not necessarily the max-entropy one)."""
    return lp_nash(_zero_sum(matrix))[0]


def prd_strategy(matrix: np.ndarray) -> np.ndarray:
    """Projected replicator dynamics on the antisymmetrised meta-game, default settings."""
    return symmetric_prd(_zero_sum(matrix))


def alpharank_strategy(matrix: np.ndarray) -> np.ndarray:
    """Single-population α-Rank of the antisymmetrised meta-game, default α = 100 and m = 50."""
    return symmetric_alpha_rank(_zero_sum(matrix))


META_SOLVERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "uniform": uniform_strategy,
    "nash": nash_strategy,
    "prd": prd_strategy,
    "alpharank": alpharank_strategy,
}


def meta_strategy(name: str, matrix: np.ndarray) -> np.ndarray:
    """The mixture over members that meta-solver ``name`` picks for the meta-game ``matrix``.

    matrix[i, j] is member i's mean return against member j in a zero-sum game. NaN marks a pair
    never played and counts as a draw (0). Every solver but "uniform" reads the antisymmetrised
    matrix (M − Mᵀ)/2, which averages out seat and sampling noise.
    """
    if name not in META_SOLVERS:
        raise ValueError(f"unknown meta-solver {name!r}; known: {sorted(META_SOLVERS)}")
    return META_SOLVERS[name](matrix)
