"""Statics of a LagrangianSystem: minimum of U − W = −L(q, 0) − W under g(q) = 0.

The search, from q = 0 unless given a start, has two stages.

1. A descent on the constraint set: the start is brought onto g = 0 (Gauss–Newton), then each step
   is a saddle-free Newton step in the tangent space of g = 0 (the tangent Hessian of U − W + λ·g
   relative to the mass matrix, its eigenvalues taken in absolute value), brought back onto g = 0;
   a backtracking line search asks U − W to decrease, W counted as the work of the loads along the
   step, so that loads without a potential (a torque written on Cartesian coordinates) are
   descended too. A stationary point that is not a minimum (a start at a maximum or a saddle) is
   left along the tangent direction of most negative curvature.
2. Newton's method on the KKT conditions ∂U/∂q − Q(q, 0, t) + Gᵀλ = 0, g(q) = 0 with the analytic
   Hessians polishes the point the descent found. Should it land on a point that is not a minimum,
   the descent resumes from there.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.linalg as sla

from mbvi._validate import coordinate_key
from mbvi.errors import SolverError
from mbvi.lagrangian.derive import NoNumericForm
from mbvi.lagrangian.system import LagrangianSystem
from mbvi.state import State

__all__ = ["LagrangianEquilibrium", "lagrangian_equilibrium", "lagrangian_modes"]

#: Gauss–Legendre nodes for the work of the loads along the straight path from q = 0
_GL_X, _GL_W = np.polynomial.legendre.leggauss(12)
#: descents resumed after a Newton polish that ends on a point that is not a minimum
_ROUNDS = 8
#: a tangent eigenvalue below −_ESCAPE · max |eigenvalue| marks a direction of descent
_ESCAPE = 1e-8


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
    t : float
        Time at which the loads were evaluated, s.
    """

    q: np.ndarray
    multipliers: np.ndarray
    potential: float
    stable: bool
    tangent_eigenvalues: np.ndarray
    iterations: int
    residual: float
    system: LagrangianSystem = field(repr=False)
    t: float = 0.0

    @property
    def state(self) -> State:
        """The equilibrium at rest, a valid ``initial_state`` for :func:`mbvi.simulate`."""
        return State(self.q.copy(), np.zeros_like(self.q))

    def coordinate(self, name: str) -> float:
        """The equilibrium value of one coordinate, by name."""
        names, name = self.system.coordinate_names, coordinate_key(name)  # (the Symbol it was built from too)
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


@dataclass
class _Model:
    """Second-order model of U − W on the tangent space of g = 0 at a point on it."""

    lam: np.ndarray  # least-squares multipliers: the normal part of ∂U/∂q − Q balanced by Gᵀλ
    Z: np.ndarray  # orthonormal basis of the tangent space, (n, k)
    r: np.ndarray  # reduced gradient Zᵀ(∂U/∂q − Q), (k,)
    mu: np.ndarray  # eigenvalues of the tangent Hessian relative to the tangent mass matrix, ascending
    V: np.ndarray  # their eigenvectors, mass-orthonormal, (k, k)
    imbalance: float  # max |∂U/∂q − Q + Gᵀλ|
    meet: float  # the forces that meet: max(|∂U/∂q − Q|, |Gᵀλ|)


class _Statics:
    """U − W, its derivatives and the constraints of one system at one time.

    Parameters
    ----------
    system : mbvi.LagrangianSystem
    t : float
        Time at which the loads Q(q, 0, t) are evaluated, s.
    """

    def __init__(self, system: LagrangianSystem, t: float) -> None:
        self.system = system
        self.t = t
        self.n, self.m = system.nq, system.nc
        self.zeros = np.zeros(self.n)

    def gradient(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(∂U/∂q − Q, its Jacobian ∂²U/∂q² − ∂Q/∂q) at q."""
        _, Lq, _, Lqq, _, _ = self.system.point(q, self.zeros, self.t)
        f, H = -Lq, -Lqq
        if self.system.has_forces:
            Q, Qq, _ = self.system.derived.force(q, self.zeros, self.t)
            f, H = f - Q, H - Qq
        return f, H

    def kkt(self, q: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(KKT residual [∂U/∂q − Q + Gᵀλ, g], its q-Jacobian of the first block, G) at (q, λ)."""
        f, H = self.gradient(q)
        if not self.m:
            return f, H, np.zeros((0, self.n))
        g, G, Hg = self.system.derived.constraint(q, lam)
        return np.concatenate([f + G.T @ lam, g]), H + Hg, G

    def change(self, a: np.ndarray, b: np.ndarray) -> float:
        """Change of U − W from a to b, W the work of the loads along the straight segment (Gauss–Legendre)."""
        du = float(self.system.potential(b, self.t)) - float(self.system.potential(a, self.t))
        if not self.system.has_forces:
            return du
        d = b - a
        s = 0.5 * (_GL_X + 1.0)
        work = 0.5 * sum(
            w * self.system.force(a + si * d, self.zeros, self.t) @ d for si, w in zip(s, _GL_W, strict=True)
        )
        return du - float(work)

    def restore(self, q: np.ndarray, maxiter: int = 50) -> np.ndarray | None:
        """q brought onto g = 0 by minimum-norm Gauss–Newton steps, or None when it cannot be."""
        if not self.m:
            return q
        lam0 = np.zeros(self.m)
        for _ in range(maxiter):
            g, G, _ = self.system.derived.constraint(q, lam0)
            if not np.any(g):
                return q
            dq = -np.linalg.lstsq(G, g, rcond=None)[0]
            norm0 = float(np.linalg.norm(g))
            if not np.all(np.isfinite(dq)) or np.linalg.norm(g + G @ dq) > 0.5 * norm0:
                return None  # G has lost the rank the constraints need here (q = 0 on a circle)
            if np.max(np.abs(dq)) <= 1e-14 * max(1.0, float(np.max(np.abs(q)))):
                return q + dq
            alpha = 1.0
            while True:
                qn = q + alpha * dq
                if np.linalg.norm(self.system.constraints(qn)) <= (1.0 - 1e-4 * alpha) * norm0:
                    break
                alpha *= 0.5
                if alpha < 1e-6:
                    return None
            q = qn
        return None

    def model(self, q: np.ndarray) -> _Model:
        """The tangent model of U − W at q (on g = 0)."""
        f, H = self.gradient(q)
        if self.m:
            _, G, _ = self.system.derived.constraint(q, np.zeros(self.m))
            lam = np.linalg.lstsq(G.T, -f, rcond=None)[0]
            H = H + self.system.derived.constraint(q, lam)[2]
        else:
            G, lam = np.zeros((0, self.n)), np.zeros(0)
        Z = _null_space(G, self.n)
        r = Z.T @ f
        k = Z.shape[1]
        if k:
            Hr = Z.T @ (0.5 * (H + H.T)) @ Z
            Mr = Z.T @ self.system.mass_matrix(q, self.zeros, self.t) @ Z
            mu, V = _eigh(0.5 * (Hr + Hr.T), 0.5 * (Mr + Mr.T), q, self.system)
        else:
            mu, V = np.zeros(0), np.zeros((0, 0))
        imbalance = float(np.max(np.abs(Z @ r))) if k else 0.0
        return _Model(lam=lam, Z=Z, r=r, mu=mu, V=V, imbalance=imbalance, meet=_meet(f, G, lam))

    def _search(self, q: np.ndarray, d: np.ndarray, slope: float, curvature: float) -> tuple[np.ndarray | None, float]:
        """Backtracking search along q + α d, brought back onto g = 0, for a sufficient decrease of U − W.

        Parameters
        ----------
        q : ndarray, shape (n,)
            The current point, on g = 0.
        d : ndarray, shape (n,)
            A tangent step.
        slope, curvature : float
            First and second derivatives of U − W along d at α = 0 (the predicted change is
            α·slope + ½α²·curvature, negative).

        Returns
        -------
        q : ndarray or None
            The accepted point, or None when no α ≥ 1e-10 decreases U − W enough.
        alpha : float
            The accepted α.
        """
        alpha = 1.0
        while alpha >= 1e-10:
            qn = self.restore(q + alpha * d)
            if qn is not None and self.change(q, qn) <= 1e-4 * (alpha * slope + 0.5 * alpha**2 * curvature):
                return qn, alpha
            alpha *= 0.5
        return None, alpha

    def descend(self, q: np.ndarray, scale: float, maxiter: int) -> tuple[np.ndarray, np.ndarray, int]:
        """Descend U − W on g = 0 from a point on it to near a minimum.

        Parameters
        ----------
        q : ndarray, shape (n,)
            A point on g = 0.
        scale : float
            Load scale of the problem (:func:`_load_scale`); the stationarity test is relative to it, or to the
            forces that meet at the point when they are larger.
        maxiter : int

        Returns
        -------
        q, lam : ndarray
            A point where the tangent Hessian has no direction of descent and either U − W is
            stationary or the Newton step is small (Newton's method on the KKT conditions finishes
            from there), and the multipliers there.
        iterations : int

        Raises
        ------
        SolverError
            When U − W keeps decreasing for ``maxiter`` steps (no minimum) or no step decreases it.
        """
        reach = 0.1 * max(1.0, float(np.max(np.abs(q))))  # longest step (coordinates' units), adapted below
        for it in range(1, maxiter + 1):
            mdl = self.model(q)
            mu, V, r, Z = mdl.mu, mdl.V, mdl.r, mdl.Z
            if not len(mu):
                return q, mdl.lam, it - 1  # the constraints fix q
            big = float(np.max(np.abs(mu)))
            descending = mu[0] < -_ESCAPE * big
            stationary = mdl.imbalance <= 1e-10 * max(scale, mdl.meet)
            if stationary and not descending:
                return q, mdl.lam, it - 1
            steps = []  # (tangent step p, slope r·p, curvature pᵀ Hr p) to try in turn
            if descending:
                # near a maximum or a saddle: along the direction of most negative curvature, downhill
                v = V[:, 0] if r @ V[:, 0] <= 0.0 else -V[:, 0]
                stretch = reach / float(np.max(np.abs(Z @ v)))
                steps.append((stretch * v, stretch * float(r @ v), float(mu[0]) * stretch**2))  # vᵀ Hr v = μ₀
            if not stationary:
                floor = 1e-10 * big if big > 0.0 else 1.0
                p = -V @ ((V.T @ r) / np.maximum(np.abs(mu), floor))  # saddle-free Newton step
                size = float(np.max(np.abs(Z @ p)))
                if not descending and mu[0] > 0.0 and size <= 1e-6 * max(1.0, float(np.max(np.abs(q)))):
                    return q, mdl.lam, it - 1  # in the basin of a minimum: Newton polishes
                if size > reach:
                    p = p * (reach / size)
                steps.append((p, float(r @ p), 0.0))
            qn, alpha = None, 0.0
            for p, slope, curvature in steps:
                qn, alpha = self._search(q, Z @ p, slope, curvature)
                if qn is not None:
                    break
            if qn is None:
                if not descending:
                    return q, mdl.lam, it - 1  # no step below the round-off of U − W: Newton polishes
                raise SolverError(
                    f"equilibrium of {self.system.name!r}: no step decreases U − W from q = {q.tolist()} "
                    f"(force imbalance {mdl.imbalance:.3g}); try another start (initial_state=…)"
                )
            # a trust region of sorts: steps grow while whole ones are taken, shrink when cut back,
            # so that the descent follows its path rather than leaping over neighbouring minima
            top = max(1.0, float(np.max(np.abs(q))))
            reach = min(2.0 * reach, top) if alpha == 1.0 else max(alpha * reach, 1e-8 * top)
            q = qn
        raise SolverError(
            f"equilibrium of {self.system.name!r} did not converge in {maxiter} iterations "
            f"(force imbalance {mdl.imbalance:.3g}): U − W keeps decreasing, so there may be no minimum; "
            "try another start (initial_state=…)"
        )


def _newton(
    st: _Statics, q: np.ndarray, lam: np.ndarray, tol: float, maxiter: int, scale: float, gtol: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float, int]:
    """Newton's method on the KKT conditions with a backtracking line search on their residual.

    It stops when the force rows ∂U/∂q − Q + Gᵀλ are within ``tol`` of the larger of the load ``scale`` and the
    forces that meet at the point (:func:`_meet`), and the constraint rows g within ``gtol``.

    Returns ``(q, λ, H, G, residual, iterations)``, H the q-Jacobian of ∂U/∂q − Q + Gᵀλ, the residual the
    largest entry of the KKT residual.

    Raises
    ------
    SolverError
        When the residual is not below its tolerances after ``maxiter`` iterations.
    """
    n, m = st.n, st.m
    res_vec, H, G = st.kkt(q, lam)
    res = float(np.max(np.abs(res_vec))) if len(res_vec) else 0.0

    def converged() -> bool:
        forces, g = res_vec[:n], res_vec[n:]
        size = max(scale, _meet(forces - G.T @ lam, G, lam))
        return bool(np.all(np.abs(forces) <= tol * size) and np.all(np.abs(g) <= gtol))

    it = 0
    for it in range(1, maxiter + 1):
        if converged():
            it -= 1
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
            rn, Hn, Gn = st.kkt(qn, ln)
            if np.linalg.norm(rn) <= (1.0 - 1e-4 * alpha) * norm0 or alpha < 1e-8:
                break
            alpha *= 0.5
        q, lam, res_vec, H, G = qn, ln, rn, Hn, Gn
        res = float(np.max(np.abs(res_vec)))
    else:
        if not converged():
            raise SolverError(
                f"equilibrium of {st.system.name!r} did not converge in {maxiter} iterations "
                f"(KKT residual {res:.3g}); try another start (initial_state=…)"
            )
    return q, lam, H, G, res, it


def _tangent_problem(st: _Statics, q: np.ndarray, H: np.ndarray, G: np.ndarray) -> tuple:
    """(Zᵀ H Z, Zᵀ M Z, Z): the Hessian of U − W + λ·g and the mass matrix on the tangent space, Z (n, k) an
    orthonormal basis of ker G."""
    Z = _null_space(G, st.n)
    M = st.system.mass_matrix(q, st.zeros, st.t)
    Hr = Z.T @ (0.5 * (H + H.T)) @ Z
    Mr = Z.T @ M @ Z
    return Hr, 0.5 * (Mr + Mr.T), Z


def _meet(f: np.ndarray, G: np.ndarray, lam: np.ndarray) -> float:
    """The size of the forces that meet at a point: max(|f|, |Gᵀλ|), f = ∂U/∂q − Q (generalized forces)."""
    size = float(np.max(np.abs(f))) if len(f) else 0.0
    return max(size, float(np.max(np.abs(G.T @ lam)))) if len(lam) else size


def _load_scale(st: _Statics, q: np.ndarray, start_residual: np.ndarray) -> float:
    """The size of the loads, in the generalized forces' units: |∂U/∂q − Q| at the start q, or its change over
    each coordinate's reach, |∂²U/∂q² − ∂Q/∂q| |q| (1 for a coordinate at 0), when that is larger (a start at a
    stationary point).

    The tests of a balance are relative to it, whatever the units of L: the same pendulum with L multiplied by
    1e-14 was found at rest where it was not (an absolute floor of 1 passed it), and reported stable; an argon
    dimer in metres (r = 3.6e-10 m) was balanced to 5e-6 of its r over a reach of 1 m.
    """
    if not len(start_residual):
        return 0.0
    with np.errstate(all="ignore"):
        H = st.gradient(q)[1]
    reach = np.where(q != 0.0, np.abs(q), 1.0)
    curvature = float(np.max(np.abs(H) * reach[None, :])) if np.isfinite(H).all() else 0.0
    size = max(float(np.max(np.abs(start_residual))), curvature)
    return max(size, np.finfo(float).tiny)


def _start_residual(st: _Statics, q: np.ndarray, n: int) -> np.ndarray | None:
    """The KKT residual's first n entries at the start q, or None when L cannot be evaluated there (a math function
    off its domain, 1/0.0) or they are not finite."""
    try:
        with np.errstate(all="ignore"):
            r = st.kkt(q, np.zeros(st.m))[0][:n]
    except NoNumericForm:
        raise
    except (ValueError, ArithmeticError):
        return None
    return r if np.isfinite(r).all() else None


def _eigh(Hr: np.ndarray, Mr: np.ndarray, q: np.ndarray, system) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues and vectors of Hr φ = μ Mr φ; a ValueError naming the configuration when the mass matrix on the
    tangent space is singular there (scipy's 'leading minor of B is not positive definite')."""
    if not (np.isfinite(Hr).all() and np.isfinite(Mr).all()):
        raise ValueError(
            f"{system.name!r}: L's second derivatives are not finite at q = {np.asarray(q).tolist()} (a singular "
            "point of L, such as r = 0 of a spring written in x and y): start the search elsewhere (initial_state=…)"
        )
    try:
        if Mr.size:
            w = np.linalg.eigvalsh(Mr)  # singular to round-off (θ = 1e-24 at a spherical pole) is singular too
            if not w[0] > 1e-12 * max(float(np.max(np.abs(w))), 1e-300):
                raise np.linalg.LinAlgError("the mass matrix is not positive definite")
        return sla.eigh(Hr, Mr)
    except np.linalg.LinAlgError:
        raise ValueError(
            f"{system.name!r}: the mass matrix ∂²L/∂v² is singular at q = {np.asarray(q).tolist()} (a singularity "
            "of the coordinates, such as the pole of spherical ones): start the search elsewhere (initial_state=…)"
        ) from None


def _tangent_eigenvalues(st: _Statics, q: np.ndarray, H: np.ndarray, G: np.ndarray) -> tuple[np.ndarray, float]:
    """Eigenvalues of the Hessian of U − W + λ·g on the tangent space, relative to the mass matrix; and the size
    they are round-off of, max |H| / max |M_tangent| (1/s²): a bead on a ring where U = (x² + y²)² is neutral,
    its tangent eigenvalues 1e-15 beside a radial curvature of 12."""
    Hr, Mr, Z = _tangent_problem(st, q, H, G)
    if not Z.shape[1]:
        return np.zeros(0), 0.0
    mass = float(np.max(np.abs(Mr)))
    size = float(np.max(np.abs(H))) / mass if mass > 0 and np.size(H) else 0.0
    return _eigh(Hr, Mr, q, st.system)[0], size if np.isfinite(size) else 0.0


def lagrangian_modes(eq: LagrangianEquilibrium) -> tuple[np.ndarray, np.ndarray]:
    """Small oscillations of a :class:`mbvi.LagrangianSystem` about a static equilibrium (:func:`mbvi.modes`).

    About (q*, 0) the motion δq obeys M δq̈ + K δq = 0 on the tangent space of g = 0, M = ∂²L/∂v² and K the
    Hessian of U − W + λ·g at q* (the loads' stiffness −∂Q/∂q included); Zᵀ K Z φ = ω² Zᵀ M Z φ.

    Parameters
    ----------
    eq : LagrangianEquilibrium

    Returns
    -------
    w2 : ndarray, shape (k,)
        ω², 1/s² (for time-like units of the coordinates), ascending; k = n − m, the tangent space's dimension.
    shapes : ndarray, shape (n, k)
        Mode shapes in the system's coordinates, mass-normalized: shapesᵀ M shapes = I.

    Raises
    ------
    ValueError
        When the small motion has gyroscopic terms: terms of L linear in the velocities that do not cancel
        (∂²L/∂q∂v not symmetric at q*: a magnetic field, a rotating frame) or loads with an antisymmetric
        ∂Q/∂v (a Lorentz force written as Q). Its roots s of det(M s² + C s + K) = 0 are then not ±iω of
        undamped modes.

    Notes
    -----
    The loads' symmetric velocity dependence (a damper, ∂Q/∂v symmetric) is left out, as :func:`mbvi.modes`
    leaves out a scene's dampers: these are the undamped system's modes.
    """
    system = eq.system
    st = _Statics(system, eq.t)
    q = np.asarray(eq.q, dtype=float)
    _, H, G = st.kkt(q, np.asarray(eq.multipliers, dtype=float))
    Hr, Mr, Z = _tangent_problem(st, q, H, G)
    if not Z.shape[1]:
        return np.zeros(0), np.zeros((st.n, 0))
    # the linearized equations' gyroscopic term: ∂²L/∂v∂q − ∂²L/∂q∂v minus the antisymmetric part of ∂Q/∂v
    _, _, _, _, Lqv, _ = system.point(q, st.zeros, eq.t)
    Qv = system.force_jacobians(q, st.zeros, eq.t)[1]
    gyro = Z.T @ ((Lqv.T - Lqv) - 0.5 * (Qv - Qv.T)) @ Z
    scale = np.sqrt(max(float(np.max(np.abs(Hr))), 1e-300) * max(float(np.max(np.abs(Mr))), 1e-300))
    if float(np.max(np.abs(gyro))) > 1e-10 * scale:
        raise ValueError(
            f"modes: the small motion of {system.name!r} about this equilibrium has gyroscopic terms "
            f"(max {float(np.max(np.abs(gyro))):.3g} against a scale {scale:.3g}: terms of L linear in the "
            "velocities, or a load whose ∂Q/∂v is not symmetric), so it has no undamped normal modes; its roots "
            "solve det(M s² + C s + K) = 0 (M, C, K from system.point and system.force_jacobians)"
        )
    w2, phi = _eigh(Hr, Mr, q, system)
    return w2, Z @ phi


def lagrangian_equilibrium(
    system: LagrangianSystem,
    *,
    t: float = 0.0,
    initial: Any = None,
    tol: float = 1e-12,
    maxiter: int = 200,
) -> LagrangianEquilibrium:
    """Static equilibrium of a Lagrangian system: a local minimum of U − W subject to g(q) = 0.

    Parameters
    ----------
    system : mbvi.LagrangianSystem
    t : float, default: 0
        Time at which the loads Q(q, 0, t) are evaluated, s.
    initial : array_like or mbvi.State, shape (n,), optional
        Start of the search (default: q = 0, or the system's own ``initial_state`` when L cannot be evaluated
        there, r = 0 of a spring written in x and y); :func:`mbvi.equilibrium` passes its ``initial_state`` here.
    tol : float, default: 1e-12
        Tolerance on the KKT residual, relative to the load scale.
    maxiter : int, default: 200
        Iterations allowed to the descent and, separately, to each Newton polish.

    Returns
    -------
    LagrangianEquilibrium
        The minimum reached by descending U − W on g = 0 from the start (``stable`` is True
        unless the minimum is degenerate, a zero tangent eigenvalue).

    Raises
    ------
    ValueError
        For a start that is not n finite coordinates.
    SolverError
        When the start cannot be brought onto g = 0 and Newton's method from it does not
        converge either, when U − W keeps decreasing (no minimum), or when Newton's method
        does not converge.

    Warns
    -----
    RuntimeWarning
        When, after repeated descents, the point found is still not a minimum.

    Notes
    -----
    Newton's method on the KKT conditions alone finds any stationary point: from above the
    horizontal, a pendulum written in Cartesian coordinates went to its top. Here a descent on
    the constraint set (see the module's notes) comes first; a start exactly at a maximum or a
    saddle is left along the tangent direction of most negative curvature (ω² < 0). The descent
    measures U − W by the work of the loads along its own steps, so it also finds the balance of
    loads that have no potential, such as a torque written on Cartesian coordinates. The reported
    ``potential`` keeps its documented meaning (W along the straight path from q = 0).
    """
    n = system.nq
    if initial is None:
        q = np.zeros(n)
    else:
        q = np.array(initial.q if isinstance(initial, State) else initial, dtype=float).reshape(-1)
        if q.shape != (n,) or not np.isfinite(q).all():
            raise ValueError(f"equilibrium: the start must be {n} finite coordinates, got {initial!r}")
    st = _Statics(system, t)
    start_residual = _start_residual(st, q, n)
    if start_residual is None and initial is None and system._initial is not None:
        q = np.array(system._initial.q, dtype=float)  # q = 0 is a singular point of L: the system's own start
        start_residual = _start_residual(st, q, n)
    if start_residual is None:
        raise ValueError(
            f"equilibrium of {system.name!r}: L's derivatives are not finite at the start q = {q.tolist()} (a "
            "singular point of L, or outside its domain): start the search elsewhere (initial_state=…)"
        )
    scale = _load_scale(st, q, start_residual)
    gtol = tol * max(1.0, float(np.max(np.abs(start_residual)))) if n else tol  # the constraint rows' own tolerance
    iterations = 0
    feasible = st.restore(q)
    if feasible is None and initial is None and system._initial is not None:
        # q = 0 where the constraints' Jacobian vanishes (a Cartesian pendulum's origin): Newton cannot move from
        # there on a potential linear in q (it stalled at a KKT residual of g); the system's own start instead
        q = np.array(system._initial.q, dtype=float)
        feasible = st.restore(q)
    if feasible is None:
        # G is rank deficient at the start (q = 0 on a circle): Newton on the KKT conditions, as a way in
        q, _, _, _, _, iterations = _newton(st, q, np.zeros(st.m), tol, maxiter, scale, gtol)
    else:
        q = feasible
    for rounds in range(1, _ROUNDS + 1):
        q, lam, steps = st.descend(q, scale, maxiter)
        q, lam, H, G, res, polish = _newton(st, q, lam, tol, maxiter, scale, gtol)
        iterations += steps + polish
        eig, curvature = _tangent_eigenvalues(st, q, H, G)
        big = float(np.max(np.abs(eig))) if len(eig) else 0.0
        if not len(eig) or eig[0] >= -_ESCAPE * big:
            break
        if rounds == _ROUNDS:
            warnings.warn(
                f"equilibrium of {system.name!r}: after {_ROUNDS} descents the point found, q = {q.tolist()}, "
                f"is not a minimum (tangent eigenvalue {eig[0]:.3g}); try another start (initial_state=…)",
                RuntimeWarning,
                stacklevel=3,
            )
    # relative: a pendulum of ω² = 9.8e-14 1/s² is stable (an absolute 1e-12 said not), to the Hessian's size too: a
    # neutral balance's eigenvalues are round-off, and judged against themselves they were called stable
    tol_eig = 1e-12 * max(big, curvature)
    return LagrangianEquilibrium(
        q=q,
        multipliers=lam,
        potential=float(system.potential(q, t)) - _work(system, q, t),
        stable=bool(np.all(eig > tol_eig)),
        tangent_eigenvalues=eig,
        iterations=iterations,
        residual=res,
        system=system,
        t=float(t),
    )
