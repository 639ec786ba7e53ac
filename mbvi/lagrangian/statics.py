"""Statics of a LagrangianSystem: minimum of U − W = −L(q, 0) − W under g(q) = 0.

Solves the KKT conditions ∂U/∂q − Q(q, 0, t) + Gᵀλ = 0, g(q) = 0 by
Newton's method with the analytic Hessians and a backtracking line search on
the KKT residual, from q = 0 unless given a start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as sla

from mbvi.errors import SolverError
from mbvi.lagrangian.system import LagrangianSystem
from mbvi.state import State

__all__ = ["LagrangianEquilibrium", "lagrangian_equilibrium"]

#: Gauss–Legendre nodes for the work of the loads along the straight path from q = 0
_GL_X, _GL_W = np.polynomial.legendre.leggauss(12)


@dataclass
class LagrangianEquilibrium:
    """A static equilibrium of a :class:`mbvi.LagrangianSystem` (from :func:`mbvi.equilibrium`).

    Attributes
    ----------
    q : ndarray, shape (n,)
        Equilibrium coordinates.
    multipliers : ndarray, shape (m,)
        Lagrange multipliers λ (∂U/∂q − Q + Gᵀλ = 0): the constraint force is −Gᵀλ.
    potential : float
        U − W at the equilibrium, J: U = −L(q, 0) and W the work of the
        loads Q(·, 0, t) along the straight path from q = 0 (for a constant
        load, W = Q·q).
    stable : bool
        True when the Hessian of U − W + λ·g is positive definite on the
        constraint tangent space (a strict local minimum).
    tangent_eigenvalues : ndarray
        Eigenvalues of that Hessian relative to the mass matrix: ω² of the
        small oscillations, 1/s² (for time-like units of the coordinates).
    iterations : int
    residual : float
        Final max |∂U/∂q − Q + Gᵀλ|.
    system : mbvi.LagrangianSystem
    """

    q: np.ndarray
    multipliers: np.ndarray
    potential: float
    stable: bool
    tangent_eigenvalues: np.ndarray
    iterations: int
    residual: float
    system: LagrangianSystem = field(repr=False)

    @property
    def state(self) -> State:
        """The equilibrium at rest, a valid ``initial_state`` for :func:`mbvi.simulate`."""
        return State(self.q.copy(), np.zeros_like(self.q))

    def coordinate(self, name: str) -> float:
        """The equilibrium value of one coordinate, by name."""
        names = self.system.coordinate_names
        if name not in names:
            raise ValueError(f"unknown coordinate {name!r}; the coordinates are {names}")
        return float(self.q[names.index(name)])


def _work(system: LagrangianSystem, q: np.ndarray, t: float) -> float:
    """W(q) = ∫₀¹ Q(s q, 0, t)·q ds (Gauss–Legendre); exact for constant loads."""
    if not system.has_forces:
        return 0.0
    zeros = np.zeros_like(q)
    s = 0.5 * (_GL_X + 1.0)
    return float(0.5 * sum(w * system.force(si * q, zeros, t) @ q for si, w in zip(s, _GL_W, strict=True)))


def _null_space(G: np.ndarray, n: int) -> np.ndarray:
    return np.eye(n) if G.shape[0] == 0 else sla.null_space(G, rcond=1e-10)


def lagrangian_equilibrium(
    system: LagrangianSystem,
    *,
    t: float = 0.0,
    initial: Any = None,
    tol: float = 1e-12,
    maxiter: int = 200,
) -> LagrangianEquilibrium:
    """Static equilibrium of a Lagrangian system: stationary U − W subject to g(q) = 0.

    Parameters
    ----------
    system : mbvi.LagrangianSystem
    t : float, default: 0
        Time at which the loads Q(q, 0, t) are evaluated, s.
    initial : array_like or mbvi.State, shape (n,), optional
        Start of the search (default: q = 0).
    tol : float, default: 1e-12
        Tolerance on the KKT residual, relative to the load scale.
    maxiter : int, default: 200

    Returns
    -------
    LagrangianEquilibrium

    Raises
    ------
    SolverError
        When Newton's method does not converge.
    """
    n, m = system.nq, system.nc
    if initial is None:
        q = np.zeros(n)
    else:
        q = np.array(initial.q if isinstance(initial, State) else initial, dtype=float).reshape(-1)
        if q.shape != (n,) or not np.isfinite(q).all():
            raise ValueError(f"equilibrium: the start must be {n} finite coordinates, got {initial!r}")
    zeros = np.zeros(n)
    lam = np.zeros(m)

    def kkt(x: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        _, Lq, _, Lqq, _, _ = system.point(x, zeros, t)
        r = -Lq
        H = -Lqq
        if system.has_forces:
            Q, Qq, _ = system.derived.force(x, zeros, t)
            r = r - Q
            H = H - Qq
        if m:
            g, G, Hg = system.derived.constraint(x, mu)
            r = r + G.T @ mu
            H = H + Hg
        else:
            g, G = np.zeros(0), np.zeros((0, n))
        return np.concatenate([r, g]), H, G, g

    res_vec, H, G, _ = kkt(q, lam)
    scale = max(1.0, float(np.max(np.abs(res_vec[:n]))))
    res = float(np.max(np.abs(res_vec))) if len(res_vec) else 0.0
    it = 0
    for it in range(1, maxiter + 1):  # noqa: B007 (reported as iterations)
        if res <= tol * scale:
            break
        K = np.block([[H, G.T], [G, np.zeros((m, m))]])
        try:
            dz = np.linalg.solve(K, -res_vec)
        except np.linalg.LinAlgError:
            dz = np.linalg.lstsq(K, -res_vec, rcond=None)[0]
        alpha = 1.0
        norm0 = float(np.linalg.norm(res_vec))
        while True:
            qn, ln = q + alpha * dz[:n], lam + alpha * dz[n:]
            rn, Hn, Gn, _ = kkt(qn, ln)
            if np.linalg.norm(rn) <= (1.0 - 1e-4 * alpha) * norm0 or alpha < 1e-8:
                break
            alpha *= 0.5
        q, lam, res_vec, H, G = qn, ln, rn, Hn, Gn
        res = float(np.max(np.abs(res_vec)))
    else:
        raise SolverError(
            f"equilibrium of {system.name!r} did not converge in {maxiter} iterations (KKT residual {res:.3g}); "
            "try another start (initial=…)"
        )
    Z = _null_space(G, n)
    M = system.mass_matrix(q, zeros, t)
    Hr = Z.T @ (0.5 * (H + H.T)) @ Z
    Mr = Z.T @ M @ Z
    eig = sla.eigh(Hr, 0.5 * (Mr + Mr.T), eigvals_only=True) if Z.shape[1] else np.zeros(0)
    tol_eig = 1e-12 * max(1.0, float(np.max(np.abs(eig)))) if len(eig) else 0.0
    return LagrangianEquilibrium(
        q=q,
        multipliers=lam,
        potential=float(system.potential(q, t)) - _work(system, q, t),
        stable=bool(np.all(eig > tol_eig)),
        tangent_eigenvalues=eig,
        iterations=it,
        residual=res,
        system=system,
    )
