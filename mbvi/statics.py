"""Statics: minimum of U − W under the constraints, its multipliers, stability and modes.

The equilibrium solves the KKT conditions

    ∇U(q) − F(q, 0, t) + G(q)ᵀλ = 0,      g(q) = 0

(F the non-conservative loads at rest, whose position-independent part has
work potential W) by a feasible sequential-quadratic-programming Newton
method: each step solves the KKT system with the Hessian of the Lagrangian,
shifted to be positive definite on the constraint tangent space when it is
not (unloaded strings, slack chains), then projects back onto g = 0 and
backtracks on U − W. The multipliers are the constraint forces.

Every step is scaled so that the ratio of the bodies' masses does not enter
it (a 1 kg bob and a 1e18 kg body in one chain): see :func:`equilibrium` and
the user guide (docs/statics.md, "Masses of any ratio"). Trial points are
relaxed along stiff modes (stiff springs: a steel rope), and a stationary
point that is not a minimum (an upright pendulum) is left along its most
negative curvature, so that the result is a local minimum.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from mbvi import notices
from mbvi.assembly import assemble
from mbvi.errors import SolverError
from mbvi.reactions import joint_rows, moment, read_body
from mbvi.scene import Scene
from mbvi.state import State
from mbvi.system import System

__all__ = ["Equilibrium", "SaddleWarning", "equilibrium", "modes"]


@dataclass
class Equilibrium:
    """A static equilibrium (returned by :func:`equilibrium`).

    Attributes
    ----------
    q : ndarray, shape (nq,)
        Equilibrium configuration.
    multipliers : ndarray, shape (nc,)
        Lagrange multipliers λ (zero on dropped redundant rows); the
        generalized constraint force is −Gᵀλ.
    potential : float
        U − W at the equilibrium, J: W the work potential f·x of the constant ``ExternalForce`` loads (an
        ``ExternalTorque`` has none on rotations in general and is not counted, though the balance holds it).
    stable : bool
        True when the Hessian of the Lagrangian is positive definite on the
        constraint tangent space (a strict local minimum).
    tangent_eigenvalues : ndarray
        Eigenvalues of that reduced Hessian (mass-weighted: ω² of the modes), 1/s², ascending; exactly 0
        where they are round-off of the bodies' own stiffness (neutral directions).
    iterations : int
    residual : float
        Final |∇U − F + Gᵀλ|∞, N (N m on rotation columns).
    system : mbvi.System
    scene : mbvi.Scene
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
    system: System = field(repr=False)
    scene: Scene | None = field(default=None, repr=False)
    t: float = 0.0

    @property
    def state(self) -> State:
        """The equilibrium at rest, a valid ``initial_state`` for :func:`mbvi.simulate`."""
        return State(self.q.copy(), np.zeros_like(self.q))

    def position(self, name: str) -> np.ndarray:
        """Equilibrium position of a body's origin, m, shape (3,)."""
        if name == "world":
            return np.zeros(3)
        if name not in self.system.layout.offset:
            raise ValueError(f"unknown body {name!r}")
        o = self.system.layout.offset[name]
        return self.q[o : o + 3].copy()

    def _joint_generalized_force(self, joint: str, body: str | None) -> tuple[np.ndarray, str]:
        """−Gᵀλ restricted to one joint's rows, and the body it is read on."""
        sysm = self.system
        rows = joint_rows(sysm, joint)
        ends = None
        if self.scene is not None:
            j = self.scene.joint(joint)
            ends = (j.a, j.b)
        body = read_body(sysm, joint, body, ends)
        lam = np.zeros(sysm.nc)
        lam[rows] = self.multipliers[rows]
        return -(sysm.constraint_jacobian(self.q).T @ lam), body

    def constraint_force(self, joint: str, body: str | None = None) -> np.ndarray:
        """Force (N, world frame, shape (3,)) that a joint exerts on one of its bodies (default: its child b)."""
        f, body = self._joint_generalized_force(joint, body)
        o = self.system.layout.offset[body]
        return f[o : o + 3]

    def constraint_torque(self, joint: str, body: str | None = None) -> np.ndarray:
        """Moment (N m, world frame, shape (3,)) that a joint exerts on a rigid body, about the joint's anchor.

        This is the couple the joint transmits (the "root moment" of a welded
        cantilever); with :meth:`constraint_force` it is the joint's whole
        reaction. Zero about a revolute axis, as a hinge transmits no moment there.
        """
        f, body = self._joint_generalized_force(joint, body)
        return moment(self.system, self.scene.joint(joint).name, body, self.q[None], f[None])[0]


class SaddleWarning(UserWarning):
    """The equilibrium returned is a stationary point that is not a local minimum (see :func:`equilibrium`)."""


_EPS = float(np.finfo(float).eps)

#: eigenvalues below this fraction of the largest are recomputed on their own subspace (see :func:`_graded_eigh`)
_REFINE = 1e-6

#: descents in a row whose step, cut a millionfold, lowers neither U − W (beyond its round-off) nor the imbalance
#: before equilibrium says no step does: a load nothing resists and no work potential sees (a torque on a free
#: hinge) took 200 such steps, then said "U − W keeps falling" at U − W = 0
_STUCK = 3
#: a mode whose curvature is below this fraction of its bodies' own stiffness scale counts as zero (the round-off
#: of a steel bar's sideways modes, neutral without tension, is 1e-14 of its nodes' axial scale E/ρℓ²)
_ZERO = 1e-13

#: a beam whose lowest bending curvature is below this fraction of its nodes' axial scale E/ρℓ² is not resolved
#: (:func:`_unresolved_beams`): twice :data:`_ZERO`
_BEAM_RESOLVED = 2 * _ZERO

#: round-off of a force, in units of ε times the size of the terms it is computed from (|H| |q|, the forces)
_NOISE = 8 * float(np.finfo(float).eps)

#: a tangent mode is stiff when its curvature exceeds this multiple of the curvature along the Newton step
_STIFF = 100.0

#: Newton steps along the stiff modes that relax a trial point of the line search (see :func:`equilibrium`)
_RELAX = 4

#: trial points of one line search (the longest steps) that are relaxed when they are not accepted as they are
_RELAX_TRIALS = 8

#: leaving a saddle: the first trial steps along its most negative curvature, as fractions of the largest step
#: (then shorter ones, by factors of 4, while the decrease they promise is above the round-off of U − W)
_ESCAPE_STEPS = (0.1, 0.4)

#: saddles left on the way to a minimum before the stationary point reached is returned as it is
_ESCAPES = 8


#: dense (nq, nq) float64 arrays :func:`equilibrium` holds at its peak (the Hessian, its scaled copy and their
#: temporaries, the tangent basis, the reduced Hessian and its eigenvectors). Measured with tracemalloc: 12.9–13.3
#: for independent pendulums (nq = 300–1200), 15.3–15.4 for a beam (nq = 300–600, almost no constraints: a tangent
#: basis of nq columns), 14.1–14.5 for bars under torques on ball joints (the Levenberg–Marquardt path); peak RSS
#: 14–17 at nq = 600–2400 (16.5 for the beam at 1200, 15.3 at 2400)
EQUILIBRIUM_ARRAYS = 16
#: the same for :func:`modes` of an equilibrium already found (tracemalloc: 8.0–8.4 for the pendulums and the bars,
#: 10.0–10.1 for the beam)
MODES_ARRAYS = 11


def _check_dense_size(nq: int, what: str, copies: int) -> None:
    """A ValueError naming ``what`` (``"equilibrium"``, ``"modes"``) and its coordinate count when ``copies`` dense
    (nq, nq) float64 arrays would take more than half of this machine's memory
    (:func:`mbvi.engine.runner.check_memory`), before any of them is made.

    Statics and modes work with dense matrices: O(nq²) memory and O(nq³) time (docs/statics.md, "Size: dense
    matrices"). A problem refused here would have run for hours and ended in numpy's MemoryError, an
    out-of-memory kill or a machine swapping.
    """
    from mbvi.engine.runner import check_memory

    check_memory(
        (nq, nq),
        f"{what}: a scene of {nq} coordinates is solved with dense matrices, and its peak",
        "statics and modes cost O(nq²) memory and O(nq³) time (measured: 0.5 s at nq = 600, 24–29 s at nq = 2400 "
        'for a two-iteration solve; docs/statics.md, "Size: dense matrices"): use fewer bodies or segments, or '
        "solve the scene's independent parts separately",
        copies=copies,
    )


def _null_space(G: np.ndarray, n: int) -> np.ndarray:
    if G.shape[0] == 0:
        return np.eye(n)
    return sla.null_space(G, rcond=1e-10)


def _lagrangian_hessian(sysm: System, q: np.ndarray, lam_full: np.ndarray, t: float) -> np.ndarray:
    """The symmetric part of ∇²U − ∂F/∂q + Σ λ ∇²g (dense): what the equilibrium's Newton steps on U − W use."""
    return _hessian_and_load_skew(sysm, q, lam_full, t)[0]


def _hessian_and_load_skew(
    sysm: System, q: np.ndarray, lam_full: np.ndarray, t: float
) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """:func:`_lagrangian_hessian`, the skew part of the loads' stiffness −∂F/∂q (dense; None when it is
    symmetric), and whether the loads have any stiffness (they read the configuration: a PD torque, a force of
    the position), from one evaluation of the loads' Jacobian.

    A constant torque on a body free to turn about more than one axis has no work potential, and its stiffness
    ½ [τ]× on the rotation columns is skew: the symmetric part alone is another operator, and the small
    oscillations read from it were wrong (a bar tilted by a torque on a ball joint, stable with ω² = 0, 12.65,
    12.65, was reported a saddle of ω² = −99.9).
    """
    H = sysm.potential_hessian(q) + sysm.constraint_hessian(lam_full)
    skew, stiff = None, False
    if sysm.has_forces:
        dq, _ = sysm.force_jacobians(q, np.zeros_like(q), t)
        H = H - dq
        D = dq.toarray()
        stiff = bool(np.any(D))
        skew = -0.5 * (D - D.T)
        skew = skew if np.any(skew) else None
    H = H.toarray()
    return 0.5 * (H + H.T), skew, stiff


def _graded_eigh(H: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of Bᵀ H B (B with orthonormal columns), each eigenvalue to its own precision.

    LAPACK's ``eigh`` is accurate to ε‖Bᵀ H B‖ in absolute terms, and forming Bᵀ H B already rounds
    every entry to that size: when the eigenvalues span more than the precision (a 1 kg bead between two
    rods that hold up 1e15 kg: ω² of 2e16 and of 5 1/s² in one problem) the small ones are lost in the
    round-off of the large ones. Their eigenvectors, though, are accurate to ε (the gap to the large
    ones is as wide as the norm), so the small eigenvalues are computed again on their own subspace
    X = B V, as Xᵀ (H X) from the full H (Rayleigh–Ritz, recursively), where the large ones no longer
    enter.

    Parameters
    ----------
    H : ndarray, shape (n, n)
        Symmetric.
    B : ndarray, shape (n, k)
        Orthonormal columns: the subspace.

    Returns
    -------
    w : ndarray, shape (k,)
        Eigenvalues, ascending.
    V : ndarray, shape (k, k)
        Their orthonormal eigenvectors, as coefficients on the columns of B.
    """
    A = B.T @ (H @ B)
    w, V = sla.eigh(0.5 * (A + A.T))
    if len(w) == 0:
        return w, V
    small = np.abs(w) <= _REFINE * float(np.max(np.abs(w)))
    if small.all() or not small.any():
        return w, V
    ws, U = _graded_eigh(H, B @ V[:, small])
    w, V = w.copy(), V.copy()
    w[small], V[:, small] = ws, V[:, small] @ U
    order = np.argsort(w, kind="stable")
    return w[order], V[:, order]


class _Coordinates:
    """Per-coordinate facts the statics solver scales by.

    Attributes
    ----------
    body : ndarray of int, shape (nq,)
        Index of each coordinate's body (in layout order).
    body_mass : ndarray, shape (nq,)
        That body's mass, kg.
    weight : ndarray, shape (nq,)
        The mass-ratio-free metric W = M / m_body: 1 on positions, ρᵢ² = dᵢ/m (m²) on a rigid body's
        rotation columns, so that W^½ q is a length on every coordinate and bodies of any mass weigh alike.
    """

    def __init__(self, sysm: System) -> None:
        layout = sysm.layout
        self.body = np.zeros(sysm.nq, dtype=np.intp)
        self.body_mass = np.ones(sysm.nq)
        for k, (name, body) in enumerate(layout.bodies.items()):
            o = layout.offset[name]
            self.body[o : o + body.ncoords] = k
            self.body_mass[o : o + body.ncoords] = body.mass
        self.nbodies = len(layout.bodies)
        self.rotation = np.zeros(sysm.nq, dtype=bool)
        for o in layout.rotation_blocks:
            self.rotation[o : o + 3] = True
        self.weight = sysm.mass / self.body_mass
        self.root_weight = np.sqrt(self.weight)

    def step_cap(self, length: float) -> np.ndarray:
        """Largest Newton step per coordinate: ``length`` (m) on positions, ½ on rotation columns (dimensionless)."""
        cap = np.full(len(self.weight), float(length))
        cap[self.rotation] = 0.5
        return cap

    def own_block_scale(self, H: np.ndarray) -> np.ndarray:
        """Per coordinate, the largest |H[i, j]| over i, j of its body: the body's own stiffness scale, couplings
        within it included (a bar hinged along its own axis has a zero diagonal on its spin and couplings of its
        weight times its length between its centre and its rotation columns)."""
        same = self.body[:, None] == self.body[None, :]
        return self.body_scale(np.max(np.where(same, np.abs(H), 0.0), axis=1))

    def body_scale(self, diag: np.ndarray) -> np.ndarray:
        """Per coordinate, the largest |diag| over its body's coordinates (a body's own stiffness scale)."""
        top = np.zeros(self.nbodies)
        np.maximum.at(top, self.body, np.abs(diag))
        return top[self.body]


class UnresolvedBeamWarning(UserWarning):
    """A beam too slender, for its number of segments, for statics to resolve its bending (see :func:`equilibrium`)."""


def _unresolved_beams(scene: Scene) -> None:
    """An :class:`UnresolvedBeamWarning` naming each beam whose bending statics cannot resolve beside its axial
    stiffness, and the segments it may have.

    A cantilever's lowest bending ω² is 12.4 EI/(ρA L⁴); its nodes' axial scale is E/(ρℓ²) (ℓ = L/N). Their
    ratio 12.4 (I/A) ℓ²/L⁴ is ~b² ℓ²/L⁴ for a section of thickness b: a steel wire 1 m long, 10 µm thick, in 100
    segments is at 1e-14, where round-off of the axial terms is as large as the bending, and equilibrium came
    back with a third of the deflection and ``stable`` False, saying nothing. Fewer segments raise the ratio.
    """
    for beam in scene.beams.values():
        if not beam.second_moment:
            continue
        ratio = 12.4 * beam.second_moment / beam.area * beam.segment_length**2 / beam.length**4
        if ratio < _BEAM_RESOLVED:
            most = int(beam.segments * math.sqrt(ratio / _BEAM_RESOLVED))
            fix = (f"use at most {most} segments" if most >= 2 else
                   "even 2 segments are too many: model it as a rod, a rigid body or a LagrangianSystem")  # fmt: skip
            notices.warn(
                f"Beam {beam.name!r}: its bending is {ratio:.2g} of its nodes' axial stiffness, below the "
                f"{_BEAM_RESOLVED:g} that equilibrium and modes resolve in double precision (deflections and "
                f"frequencies may be wrong); {fix}",
                UnresolvedBeamWarning,
            )


def _tangent_basis(G: np.ndarray, coords: _Coordinates) -> np.ndarray:
    """Orthonormal basis (shape (nq, k)) of ker G in the coordinates u = W^½ q (each row of G scaled to unit size)."""
    Gu = G / coords.root_weight[None, :]
    if len(Gu):
        Gu = Gu / np.maximum(np.abs(Gu).max(axis=1), np.finfo(float).tiny)[:, None]
    return _null_space(Gu, G.shape[1])


def _lstsq_rows(G: np.ndarray, rhs: np.ndarray, col: np.ndarray) -> np.ndarray:
    """λ minimizing |(rhs + Gᵀλ) / col|₂, each row of G / col scaled to unit size first."""
    Gs = G / col[None, :]
    rs = np.maximum(np.abs(Gs).max(axis=1), np.finfo(float).tiny)
    return sla.lstsq((Gs / rs[:, None]).T, -rhs / col, check_finite=False)[0] / rs


def _force_scale(G: np.ndarray, grad: np.ndarray, lam: np.ndarray, coords: _Coordinates) -> np.ndarray:
    """Per coordinate, the size of the forces that meet on its body, N: max over the body of |grad| + |G|ᵀ|λ|.

    Forces on rotation columns are divided by ρᵢ (W^-½), so that every coordinate's force is in newtons.
    """
    meet = np.abs(grad) + (np.abs(G).T @ np.abs(lam) if len(lam) else 0.0)
    return coords.body_scale(meet / coords.root_weight)


def _multipliers(G: np.ndarray, grad: np.ndarray, coords: _Coordinates) -> np.ndarray:
    """Multipliers λ that balance the loads, grad + Gᵀλ ≈ 0, least squares relative to each body's forces.

    Away from the equilibrium the equations are inconsistent and their weighting decides what λ is. Each
    body's equations are weighted by the inverse of the forces that meet on it (two reweighted passes from
    the solution in the metric W): a 1 kg bob's rod then carries the bob's weight even while the 1e15 kg
    body above it is still off its balance (unweighted, that body's imbalance, or only its round-off of
    1 N, leaks into the light rod's tension and into the light body's curvature), and a 1 kg bead between
    a support and a 1e15 kg bob is held by the bob's weight (weighted by the mass, as a system released at
    rest, the rods would go slack). The same relative balance is the convergence test of :func:`equilibrium`.
    """
    if not len(G):
        return np.zeros(0)
    lam = _lstsq_rows(G, grad, coords.root_weight)
    for _ in range(2):
        scale = _force_scale(G, grad, lam, coords)
        top = float(np.max(scale))
        if top == 0.0:
            return np.zeros(len(G))  # nothing to balance
        lam = _lstsq_rows(G, grad, coords.root_weight * np.maximum(scale, 1e-30 * top))
    return lam


def _small_oscillations(
    sysm: System, q: np.ndarray, lam_full: np.ndarray, t: float, coords: _Coordinates | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ω² (1/s², ascending; 0 within round-off), mass-normalized shapes (nq, k) and each mode's zero threshold (1/s²).

    Solves Zᵀ H Z φ = ω² Zᵀ M Z φ without forming Zᵀ M Z (whose Cholesky factor does not exist in
    double precision when masses differ by 1e16: 1e18 + 1 = 1e18): the tangent space, found in the
    mass-ratio-free metric W, is carried into y = M^½ q by a QR factorization of M^½ Z (Householder,
    column scales kept), and the standard problem Qᵀ (M^-½ H M^-½) Q ψ = ω² ψ is solved by
    :func:`_graded_eigh`, whose small eigenvalues keep their relative precision beside large ones.
    """
    coords = coords or _Coordinates(sysm)
    G = sysm.constraint_jacobian(q).toarray()[sysm.active]
    Zu = _tangent_basis(G, coords)
    if Zu.shape[1] == 0:
        return np.zeros(0), np.zeros((sysm.nq, 0)), np.zeros(0)
    Q, _ = sla.qr(np.sqrt(coords.body_mass)[:, None] * Zu, mode="economic")  # M^½ Z, as M = m_body W
    root = np.sqrt(sysm.mass)
    H, skew, _ = _hessian_and_load_skew(sysm, q, lam_full, t)
    Hy = H / np.outer(root, root)
    w2, psi = _graded_eigh(Hy, Q)
    X = Q @ psi
    threshold = _ZERO * ((X * X).T @ coords.own_block_scale(Hy))
    if skew is not None:  # loads whose stiffness is not symmetric: the symmetric part alone is another operator
        A = Q.T @ (Hy + skew / np.outer(root, root)) @ Q
        As = Q.T @ (skew / np.outer(root, root)) @ Q
        if float(np.max(np.abs(As))) > 1e-12 * max(float(np.max(np.abs(A))), np.finfo(float).tiny):
            ev, vec = sla.eig(A)
            big = max(float(np.max(np.abs(ev))), np.finfo(float).tiny)
            flutter = np.abs(ev.imag) > 1e-9 * big  # a complex ω²: an oscillation that grows (not stable)
            X = Q @ vec.real
            X = X / np.maximum(np.linalg.norm(X, axis=0), np.finfo(float).tiny)
            w2 = ev.real
            threshold = _ZERO * ((X * X).T @ coords.own_block_scale(Hy))
            threshold = np.where(flutter, np.inf, threshold)  # never "> threshold": stable is False
    # below the round-off of the bodies' own stiffness a curvature is zero (a neutral direction), whatever its
    # sign: a rigid body's spin about the line of two rods that carry 1e16 N cancels terms of 1e17 1/s²
    w2 = np.where(np.abs(w2) <= np.where(np.isinf(threshold), 0.0, threshold), 0.0, w2)
    order = np.argsort(w2, kind="stable")
    return w2[order], X[:, order] / root[:, None], threshold[order]


def _option_number(value: object, what: str, *, positive: bool = False) -> float:
    """A finite real option of :func:`equilibrium` (strings and bools refused), as a float."""
    ok = not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))
    x = float(value) if ok else np.nan
    if not np.isfinite(x) or (positive and x <= 0):
        kind = "a positive finite number" if positive else "a finite number"
        raise ValueError(f"equilibrium: {what} must be {kind}, got {value!r}")
    return x


def _start(sysm: System, initial_state: object) -> np.ndarray:
    """The start configuration: the scene's, or ``initial_state`` (a State or nq finite coordinates)."""
    if initial_state is None:
        return sysm.layout.q0
    raw = initial_state.q if isinstance(initial_state, State) else initial_state
    try:
        q = np.asarray(raw, dtype=float).reshape(-1) if not isinstance(raw, (str, bytes)) else None
    except (TypeError, ValueError):
        q = None
    if q is None or q.shape != (sysm.nq,) or not np.all(np.isfinite(q)):
        raise ValueError(
            f"equilibrium: initial_state must be an mbvi.State (or {sysm.nq} coordinates) of finite numbers, "
            f"got {type(initial_state).__name__}"
        )
    return q


def equilibrium(
    scene: Scene,
    *,
    t: float = 0.0,
    initial_state: State | None = None,
    tol: float = 1e-10,
    maxiter: int = 200,
    minimum: bool = True,
) -> Equilibrium:
    """Static equilibrium: minimize U − W subject to g(q) = 0.

    Parameters
    ----------
    scene : mbvi.Scene or mbvi.LagrangianSystem
    t : float, default: 0
        Time at which time-dependent loads are evaluated, s.
    initial_state : mbvi.State, optional
        Start configuration (default: the scene's).
    tol : float, default: 1e-10
        Tolerance on the KKT residual ∇U − F + Gᵀλ, relative to the forces that meet on each body
        (its loads and the constraint forces on it); once met, one more Newton step polishes the balance.
        A LagrangianSystem's equilibrium is solved to at most 1e-12 (its Newton converges quadratically:
        a looser tolerance would save a step and lose digits).
    maxiter : int, default: 200
        Largest number of Newton iterations, counted over every descent (see ``minimum``).
    minimum : bool, default: True
        Return a local minimum of U − W: a stationary point that is not one (a saddle or a maximum, such as a
        pendulum started exactly upright) is left along its most negative curvature on the constraint tangent
        space and the descent resumed. False returns the stationary point the Newton iteration reaches from
        the start whatever its stability (the upright pendulum, to read its growth rate with :func:`modes`).
        Ignored for an :class:`mbvi.LagrangianSystem`.

    Returns
    -------
    Equilibrium

    Raises
    ------
    ValueError
        For a scene that is not one, options that are not finite positive numbers (``tol``, ``maxiter``,
        ``t``: finite; ``minimum``: a bool), an ``initial_state`` of the wrong size or that cannot be projected
        onto the joints, or a load callable that fails or returns anything but 3 finite numbers (naming the
        element); and, before any work, for a scene whose dense matrices would take more than half of this
        machine's memory (naming equilibrium, the coordinate count and the GiB it would take; see Size below).
    SolverError
        When the iteration does not converge (after how many iterations, and why).

    Warns
    -----
    SaddleWarning
        With ``minimum=True``, when the stationary point reached is not a minimum and no direction of
        descent is found from it (the negative curvature is within the round-off of U − W, or higher-order
        terms cancel it): it is returned with ``stable`` False.

    Notes
    -----
    The problem is scaled so that the masses' ratio does not enter it. The Newton step is computed in
    the metric W = M / m_body (each body's own mass distribution, every body of the same weight), each
    tangent mode's curvature to its own precision (:func:`_graded_eigh`); the multipliers are least
    squares relative to the forces on each body, and the load is projected onto the modes after the
    constraint forces are subtracted; the path back onto g = 0 moves the soft bodies (W times each
    body's stiffness); below the round-off of U − W the line search accepts a step that is no worse,
    and, where the Newton model is convex, one that reduces the imbalance (which also lets loads that
    read the state, without a work potential, find their equilibrium). Where such loads' stiffness has a
    skew part on the tangent space (a torque on a body free to turn about more than one axis), the step is
    Levenberg–Marquardt's on the imbalance with the whole stiffness (:func:`_levenberg_marquardt`); so is a
    step no descent of U − W takes where loads read the configuration (PD torques holding an arm up). The
    mass-weighted ω² of the
    stability test are computed without forming an ill-conditioned generalized eigenproblem
    (:func:`_small_oscillations`). A 1e15 kg bob below a 1 kg one (or above it) is found hanging
    straight down, its frequencies those of the minimal-coordinate model.

    Stiff elements (a rope of steel springs, EA/ℓ a million times its weight per length) make the Newton
    model of U − W accurate only over a tiny region: a step that swings the soft modes (the rope about its
    pin) stretches the stiff ones at second order, and their energy swamps the decrease the step was
    meant to bring. A trial point of the line search that U − W does not accept as it is, is therefore
    relaxed along the stiff modes, those with a curvature more than 100 times the curvature along the
    step (a few Newton steps on U − W restricted to them, each taken only if it lowers U − W), and judged
    again: the nonlinear elimination of the stiff variables, the analogue for stiff springs of the
    projection back onto g = 0 (a second-order correction). At most 8 trial points of a line search are
    relaxed, and none after a relaxation that does not lower U − W.

    A stationary point that is not a minimum (ω² < 0 on the tangent space, :func:`_small_oscillations`)
    is left along the mode of most negative ω², by a step of a tenth of the largest step (else longer or
    shorter ones; the side that lowers U − W, projected back onto g = 0), and the descent resumed, so that
    the result is a local minimum. A negative ω² whose decrease over the longest such step would be
    round-off of U − W is a neutral direction: that point is returned, ``stable`` False, as one with a zero
    ω². Where no step lowers U − W, or after 8 saddles, the stationary point is returned with ``stable``
    False and a :class:`SaddleWarning`.

    Size: the solver works with dense matrices (nq × nq Hessians, a dense tangent basis from an SVD of G, a
    full symmetric eigendecomposition every iteration): O(nq²) memory, some 16 arrays of nq × nq (8 nq² bytes
    each: 0.7 GiB at nq = 2400, 12 GiB at nq = 10000), and O(nq³) time per iteration. Measured on a shared
    2-core machine (one BLAS thread), independent pendulums, two Newton iterations: 0.5–0.6 s at nq = 600,
    2.4–3.8 s at nq = 1200, 24–29 s at nq = 2400; a beam (four iterations): 1.3 s, 10–13 s and 128 s. A scene
    whose :data:`EQUILIBRIUM_ARRAYS` dense arrays would take more than half of the machine's memory is refused
    with a ValueError before any work (docs/statics.md, "Size: dense matrices").

    For an :class:`mbvi.LagrangianSystem` this is the minimum of
    −L(q, 0) − W under its constraints, searched from q = 0 unless
    ``initial_state`` (a State or the coordinates) gives a start; it returns a
    :class:`mbvi.lagrangian.statics.LagrangianEquilibrium` (same ``q``,
    ``multipliers``, ``potential``, ``stable``, ``state``).
    """
    from mbvi.lagrangian import LagrangianSystem

    t = _option_number(t, "t")
    tol = _option_number(tol, "tol", positive=True)
    if isinstance(maxiter, bool) or not isinstance(maxiter, (int, np.integer)) or maxiter < 1:
        raise ValueError(f"equilibrium: maxiter must be a positive integer, got {maxiter!r}")
    if not isinstance(minimum, (bool, np.bool_)):
        raise ValueError(f"equilibrium: minimum must be True or False, got {minimum!r}")
    if isinstance(scene, LagrangianSystem):
        from mbvi.lagrangian.statics import lagrangian_equilibrium

        return lagrangian_equilibrium(scene, t=t, initial=initial_state, tol=min(tol, 1e-12), maxiter=int(maxiter))
    if not isinstance(scene, Scene):
        raise ValueError(f"equilibrium: expected an mbvi.Scene or mbvi.LagrangianSystem, got {type(scene).__name__}")
    _unresolved_beams(scene)
    sysm = assemble(scene)
    _check_dense_size(sysm.nq, "equilibrium", EQUILIBRIUM_ARRAYS)  # before the dense work: see "Size" in Notes
    coords = _Coordinates(sysm)
    try:
        q = _project(sysm, _start(sysm, initial_state), coords.weight)
    except SolverError as exc:  # the scene's own start is on its joints (assembly checks it): a given one is not
        raise ValueError(
            f"equilibrium: initial_state cannot be brought onto the constraints ({exc.reason}); start nearer to them"
        ) from None
    zeros = np.zeros(sysm.nq)
    act = sysm.active
    lam_full = np.zeros(sysm.nc)
    ls = sysm.length_scale

    def merit(x: np.ndarray) -> float:
        return sysm.potential(x) - sysm.work(x, t)

    def balance(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Load ∇U − F, active G, multipliers, residual r = ∇U − F + Gᵀλ and the force scale of each body."""
        f = sysm.potential_gradient(x)
        if sysm.has_forces:
            f = f - sysm.force(x, zeros, t)
        G = _dense_jacobian(sysm, sysm.active_values_and_jacobian(x)[1]) if len(act) else np.zeros((0, sysm.nq))
        lam = _multipliers(G, f, coords)
        return f, G, lam, f + G.T @ lam, np.maximum(_force_scale(G, f, lam, coords), np.finfo(float).tiny)

    def relative(r: np.ndarray, scale: np.ndarray, noise: np.ndarray) -> float:
        """Largest imbalance above round-off relative to the forces that meet on its body.

        Every body balances to tol of the forces that meet on it (its load and the constraint forces on it):
        a 1e-9 kg bob must balance its own weight, a 1 kg bead between two rods that carry 1e16 N balances
        to 1e-10 of those (an angle of 1e-10 rad: all double precision can tell). What the rounding of the
        coordinates leaves in the forces does not count: a cable node's springs and weight cancel to 1e-10 N.
        """
        excess = np.maximum(np.abs(r) / coords.root_weight - noise, 0.0)
        return float(np.max(excess / scale)) if len(r) else 0.0

    def weighted_max(r: np.ndarray) -> float:
        return float(np.max(np.abs(r) / coords.root_weight)) if len(r) else 0.0

    def no_step(it: int, res: float) -> SolverError:
        return SolverError(
            f"equilibrium: line search failed at iteration {it} (KKT residual {res:.3g}): no step lowers "
            "U − W and the loads still do not balance. A load that nothing resists (a torque on a free "
            "hinge or body, or one larger than its spring can hold) has no equilibrium; otherwise start "
            "elsewhere (initial_state=…)"
        )

    def relax(x: np.ndarray, split: float, metric: np.ndarray, enough: float) -> tuple[np.ndarray, bool]:
        """``x`` relaxed along its stiff modes (curvature above ``split``): Newton on U − W restricted to them.

        Each step is taken only if it lowers U − W; the relaxation ends once a step promised no more than
        ``enough`` (its Newton decrement, J), or after :data:`_RELAX` steps. Returns the point and whether
        any step was taken.
        """
        fx = merit(x)
        relaxed = False
        for _ in range(_RELAX):
            _, Gx, lam_x, rx, _ = balance(x)
            full = np.zeros(sysm.nc)
            full[act] = lam_x
            Hx = _lagrangian_hessian(sysm, x, full, t) / np.outer(coords.root_weight, coords.root_weight)
            Zx = _tangent_basis(Gx, coords)
            wx, Vx = _graded_eigh(Hx, Zx)
            Xx = Zx @ Vx
            zero = _ZERO * ((Xx * Xx).T @ coords.body_scale(np.diag(Hx)))
            stiff = wx > np.maximum(split, zero)
            if not stiff.any():
                break
            b = Xx[:, stiff].T @ (rx / coords.root_weight)
            c = b / wx[stiff]
            dx = -(Xx[:, stiff] @ c) / coords.root_weight
            over = float(np.max(np.abs(dx) / coords.step_cap(ls)))
            if over > 1.0:
                dx = dx / over
            try:
                y = _project(sysm, x + dx, metric)
            except SolverError:
                break
            fy = merit(y)
            if not fy < fx:
                break
            x, fx, relaxed = y, fy, True
            if 0.5 * float(b @ c) <= enough:
                break
        return x, relaxed

    res = np.inf
    grad, G, lam, r, scale = balance(q)
    stuck = 0  # descents in a row that took only a round-off step (neither U − W nor the imbalance fell)
    midway = None  # (U − W, the imbalance) halfway through the iterations left: what maxiter's error compares
    polish = False
    it = 0
    first = 1  # the first iteration of the current descent
    escapes = 0
    damping: list[float] = []  # Levenberg–Marquardt's μ, kept from step to step (loads without a work potential)

    def imbalance(r: np.ndarray) -> float:
        """The imbalance's 2-norm in the fixed metric W (N per √(kg/kg)), what Levenberg–Marquardt's steps
        descend: each point judged by the same weights (by each point's own force scale the search cycled)."""
        return float(np.linalg.norm(r / coords.root_weight))

    while True:
        for it in range(it + 1, maxiter + 1):  # noqa: B020 (the count goes on over every descent)
            lam_full[:] = 0.0
            lam_full[act] = lam
            res = float(np.max(np.abs(r))) if len(r) else 0.0
            if it == (first + maxiter) // 2:
                midway = (merit(q), res)
            H, skew, stiff_loads = _hessian_and_load_skew(sysm, q, lam_full, t)
            Hu = H / np.outer(coords.root_weight, coords.root_weight)
            # the round-off of the forces: what rounding the coordinates (and the terms of the sums) leaves, N
            noise = _NOISE * (np.abs(Hu) @ np.abs(coords.root_weight * q) + scale)
            rel = relative(r, scale, noise)
            if rel <= tol:
                if polish or it == first:
                    break
                # converged: one more Newton step takes the balance from tol to round-off, which the modes of a
                # light body held by heavy ones are sensitive to (1e-12 rad off its balance moves its ω by 1e-5)
                polish = True
            Zu = _tangent_basis(G, coords)
            # the tangential load: grad and r = grad + Gᵀλ agree on ker G, and r keeps no normal part (a 1e19 N
            # weight held by a rod) for the round-off of Z to carry into a light body's modes
            gu = r / coords.root_weight
            # loads without a work potential whose stiffness has a skew part on the tangent space (a torque on a
            # body free to turn about more than one axis): U − W does not see them and the symmetric part is not
            # their stiffness (a bar tilted by a torque on a ball joint: −99.9 1/s² where it is stable), so the
            # step is Newton's on the imbalance with the whole stiffness, judged by the imbalance alone
            Su = None if skew is None else skew / np.outer(coords.root_weight, coords.root_weight)
            skewed = Su is not None and _acts_on(Su, Zu, Hu)
            if skewed:
                Ku = Zu.T @ (Hu + Su) @ Zu
                du = Zu @ sla.lstsq(Ku, -(Zu.T @ gu), cond=1e-12, check_finite=False)[0]  # (the polish step)
            else:
                # curvature along the tangent space in the metric W, each mode to its own precision
                w, V = _graded_eigh(Hu, Zu)
                X = Zu @ V
                thr = _ZERO * ((X * X).T @ coords.body_scale(np.diag(Hu)))
                # Newton along positive curvature (however small next to other bodies' curvature: a beam's bending,
                # a heavy bob's pendulum); positive-definite modification where the curvature is negative or zero at
                # the mode's own scale (saddles, unloaded strings, slack chains), that step capped at the length scale
                good = w > thr
                proj = X.T @ gu
                # along a direction without curvature, a load within round-off is none (else the capped step it
                # drives, a rigid body spun about a free axis, goes on for ever); Newton steps along curvature are
                # as small as their load, and polish the balance to its real floor
                proj[~good & (np.abs(proj) <= np.abs(X).T @ noise)] = 0.0
                coef = np.zeros_like(proj)
                coef[good] = proj[good] / w[good]
                if not good.all():
                    bad = ~good
                    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
                        cb = proj[bad] / np.maximum(np.abs(w[bad]), thr[bad])
                        norm = float(np.linalg.norm(cb))
                    if not np.isfinite(norm) or norm > ls:
                        pn = float(np.linalg.norm(proj[bad]))
                        cb = proj[bad] * (ls / pn) if pn > 0 else np.zeros_like(cb)
                    coef[bad] = cb
                du = -(X @ coef)
            step = float(np.max(np.abs(du))) if len(du) else 0.0
            if step <= 1e-12 * ls and not skewed:  # (skewed: a load its stiffness cannot take is no polish)
                # a step this short moves nothing a user sees, but a stiff element's force along it does (a steel
                # beam's EA/ℓ of 4e8 N/m: 1e-12 m carries 4e-4 N, and its clamp showed a 5e-6 N reaction to no
                # load): it is taken as the polish step, kept if it balances better, and the solve ends
                polish = True
            dq = du / coords.root_weight
            # a step of at most the scene's length on positions and ½ (some 30°) on rotation columns
            over = float(np.max(np.abs(dq) / coords.step_cap(ls)))
            if over > 1.0:
                du, dq = du / over, dq / over
            # the path back onto g = 0 moves the soft bodies: the metric W times each body's stiffness, so that a
            # 1 kg bob's large step does not drag the 1e18 kg body it hangs from (which is all U − W can see)
            stiffness = coords.body_scale(np.diag(Hu))
            metric = coords.weight * np.maximum(stiffness, 1e-8 * float(np.max(stiffness)) or 1.0)
            # backtracking along the projected path: on U − W, known only to its round-off (a 1e15 kg bob: ~1 J,
            # below which a Newton step shows no decrease and is accepted); where the Newton model is convex, a
            # step that reduces the relative imbalance is accepted too (loads that read the state have no work
            # potential, so U − W does not see them)
            if polish:
                if skewed or good.all():
                    try:
                        trial = _project(sysm, q + dq, metric)
                    except SolverError:
                        break
                    found = balance(trial)  # kept if it balances better, round-off included
                    before, after = relative(r, scale, 0.0 * noise), relative(found[3], found[4], 0.0 * noise)
                    # an unloaded beam node's forces meet only in its residual (the elements' pulls sum before
                    # they are measured): relative to them it is 1 whatever its size, and then the size decides
                    if after < before or (after == before and weighted_max(found[3]) < weighted_max(r)):
                        q = trial
                        grad, G, lam, r, scale = found
                        lam_full[:] = 0.0
                        lam_full[act] = lam
                        res = float(np.max(np.abs(r))) if len(r) else 0.0
                break
            # a Levenberg–Marquardt step on the imbalance with the stiffness K (on the tangent space), from q
            on_imbalance = functools.partial(
                _levenberg_marquardt, g=Zu.T @ gu, basis=Zu / coords.root_weight[:, None], cap=coords.step_cap(ls),
                project=functools.partial(_project, sysm, metric=metric), balance=balance,
                imbalance=lambda f: imbalance(f[3]), rel=imbalance(r), damping=damping, it=it, res=res,
            )  # fmt: skip
            if skewed:
                q, found = on_imbalance(q, Ku)
                grad, G, lam, r, scale = found
                continue
            f0 = merit(q)
            slope = float(r @ dq)
            fnoise = noise  # (the forces' round-off, N; noise is U − W's from here, J)
            noise = 1e3 * _EPS * (abs(f0) + float(np.abs(grad) @ np.abs(q)))
            # stiff modes: curvature far above the curvature along the step (its Rayleigh quotient); the step
            # stretches them at second order, so each trial point is relaxed along them before it is judged
            moved = float(coef @ coef)
            split = _STIFF * float(coef**2 @ np.maximum(np.abs(w), thr)) / moved if moved > 0 else np.inf
            relaxations = _RELAX_TRIALS if np.any(good & (w > split)) else 0
            alpha = 1.0
            while alpha > 1e-10:
                try:
                    trial = _project(sysm, q + alpha * dq, metric)
                except SolverError:
                    alpha *= 0.5
                    continue
                accept = f0 + 1e-4 * alpha * slope + noise
                if relaxations and merit(trial) > accept:
                    trial, relaxed = relax(trial, split, metric, 1e-2 * alpha * abs(slope) + noise)
                    relaxations = relaxations - 1 if relaxed else 0  # where it does not help, not again
                fx = merit(trial)
                if fx <= accept or alpha * float(np.max(np.abs(du))) < 1e-14 * ls:
                    found = balance(trial)
                    # a step cut a millionfold, within U − W's round-off, that leaves the imbalance as it was (to a
                    # millionth: what maxiter steps could not finish) is no progress: along a load nothing resists
                    # they go on for ever (a slender wire's full steps within the round-off do move it on)
                    idle = (alpha < 1e-6 and fx >= f0 - noise
                            and relative(found[3], scale, fnoise) > (1.0 - 1e-6) * rel)  # fmt: skip
                    stuck = stuck + 1 if idle else 0
                    if stuck >= _STUCK:
                        raise no_step(it, res)
                    break
                if good.all():  # judged on this point's force scale: the trial's own shrinks with the multipliers
                    found = balance(trial)
                    if relative(found[3], scale, fnoise) <= (1.0 - 1e-4 * alpha) * rel:
                        stuck = 0
                        break
                alpha *= 0.5
            else:
                if not stiff_loads:
                    raise no_step(it, res)
                # loads that read the configuration without a work potential (a PD torque holding an arm up): a step
                # towards their balance can raise U − W, and from some starts every step was refused, "a load that
                # nothing resists", where a run settles: this step is then taken on the imbalance, as for a skew load
                q, found = on_imbalance(q, Zu.T @ (Hu if Su is None else Hu + Su) @ Zu)
                grad, G, lam, r, scale = found
                continue
            q = trial
            grad, G, lam, r, scale = found
        else:
            now = merit(q)
            if midway is not None and now >= midway[0] - 0.5 * abs(midway[0]) and res > 0.5 * midway[1]:
                # a load without a work potential that nothing resists: U − W does not see it and does not fall
                # (it wanders as the rest settles: a bead on the turning bar), nor does the imbalance
                raise SolverError(
                    f"equilibrium did not converge in {maxiter} iterations (KKT residual {res:.3g} N): over the last "
                    f"{maxiter - (first + maxiter) // 2} neither U − W nor the imbalance fell by half. Most likely a "
                    "load that nothing resists (a torque about a free hinge or on a free body, a force along a free "
                    "slider), which has no equilibrium: hold that motion (a spring, a joint) or remove the load; "
                    f"raise maxiter (now {maxiter}) only if the imbalance was still falling"
                )
            raise SolverError(
                f"equilibrium did not converge in {maxiter} iterations (KKT residual {res:.3g} N, "
                f"U − W = {merit(q):.6g} J): raise maxiter (now {maxiter}) if it was still converging; if U − W "
                "keeps falling it is unbounded below under the constraints (e.g. a body free to move along a "
                "constant load): there is no equilibrium"
            )
        # mass-weighted reduced Hessian: eigenvalues are ω² of small oscillations
        eig, shapes, thr_eig = _small_oscillations(sysm, q, lam_full, t, coords)
        if not minimum or not len(eig) or eig[0] >= 0.0:
            break  # a minimum (or a neutral direction: degenerate, not a saddle), or any stationary point asked for
        # a saddle or a maximum: leave it along its most negative curvature, and descend again
        moved, neutral = _leave_saddle(sysm, q, eig[0], shapes[:, 0], merit, grad, coords.weight, coords.step_cap(ls))
        if neutral:
            break  # the negative curvature is round-off of U − W over any step: a neutral direction (stable False)
        if moved is None or escapes == _ESCAPES:
            why = (
                "no step along its most negative curvature lowers U − W beyond its round-off"
                if moved is None
                else f"the descent has already left {escapes} saddles on its way"
            )
            warnings.warn(
                f"equilibrium: the stationary point reached is not a minimum (ω² = {eig[0]:.3g} 1/s² on the "
                f"constraint tangent space, U − W = {merit(q):.6g} J), and {why}; it is returned as it is "
                "(stable=False)",
                SaddleWarning,
                stacklevel=2,
            )
            break
        q = moved
        escapes += 1
        polish = False
        first = it + 1
        grad, G, lam, r, scale = balance(q)
    return Equilibrium(
        q=q,
        multipliers=lam_full.copy(),
        potential=float(merit(q)),
        stable=bool(np.all(eig > thr_eig)),
        tangent_eigenvalues=eig,
        iterations=it,
        residual=res,
        system=sysm,
        scene=scene,
        t=float(t),
    )


def _acts_on(Su: np.ndarray, Z: np.ndarray, Hu: np.ndarray) -> bool:
    """True when the loads' skew stiffness ``Su`` (dense, (nq, nq)) is more than round-off of the stiffness on the
    tangent space Z (orthonormal columns in the metric W; ``Su`` and ``Hu``, the symmetric part, in that metric):
    a torque on a hinge has a skew part on the rotation columns that the hinge's one direction does not see."""
    S = Z.T @ Su @ Z
    scale = max(float(np.max(np.abs(Z.T @ Hu @ Z), initial=0.0)), float(np.max(np.abs(Su), initial=0.0)))
    return float(np.max(np.abs(S), initial=0.0)) > 1e-10 * scale


def _levenberg_marquardt(
    q: np.ndarray,
    K: np.ndarray,
    g: np.ndarray,
    basis: np.ndarray,
    cap: np.ndarray,
    project: Callable[[np.ndarray], np.ndarray],
    balance: Callable[[np.ndarray], tuple],
    imbalance: Callable[[tuple], float],
    rel: float,
    damping: list[float],
    it: int,
    res: float,
) -> tuple[np.ndarray, tuple]:
    """One Levenberg–Marquardt step on the tangential imbalance g + K c = 0, taken once the imbalance falls.

    Newton's own step is no good far from the balance: a torque's generalized force turns with the rotation
    columns, so spinning a body about its free axis changes the imbalance by O(the imbalance) — a direction that
    looks stiff until the balance is reached, where Newton stepped by the largest step allowed, every step (a bar
    on a ball joint under a torque (3, 4, 0) N m, started tilted in the wrong plane, took 124 iterations or none
    converged). The damped step (KᵀK + μ diag KᵀK) c = −Kᵀ g follows the imbalance's descent; μ falls by 3 after a
    step that lowered it and grows by 4 until one does, so that near the balance the step is Gauss–Newton's and
    converges quadratically.

    Parameters
    ----------
    q : ndarray, shape (nq,)
    K : ndarray, shape (m, m)
        The whole stiffness on the tangent space (orthonormal basis in the metric W).
    g : ndarray, shape (m,)
        The tangential imbalance in that basis.
    basis : ndarray, shape (nq, m)
        Tangent coefficients to a step in q.
    cap : ndarray, shape (nq,)
        The largest step on each coordinate (a longer one is shortened to it).
    project, balance, imbalance : callable
        Back onto g = 0; a point's balance (load, G, λ, residual, force scale); its relative imbalance.
    rel : float
        ``imbalance`` at ``q``.
    damping : list of float
        μ from the previous step (empty at first), updated in place.
    it, res : int, float
        The iteration and the KKT residual, N (for the message).

    Returns
    -------
    q : ndarray
        The accepted point.
    found : tuple
        Its balance.

    Raises
    ------
    SolverError
        When no damping lowers the imbalance.
    """
    KtK, Ktg = K.T @ K, K.T @ g
    diag = np.maximum(np.diag(KtK), 1e-12 * float(np.max(np.diag(KtK), initial=0.0)) or 1.0)
    mu = damping[0] if damping else 1e-3
    for _ in range(60):
        try:
            dq = basis @ sla.solve(KtK + mu * np.diag(diag), -Ktg, assume_a="pos", check_finite=False)
            if float(np.max(np.abs(dq) / cap)) > 1.0:  # past the largest step: more damping (a trust region),
                mu *= 4.0  # not the same direction cut short (Gauss-Newton's, clipped, cycled)
                continue
            trial = project(q + dq)
        except (SolverError, sla.LinAlgError):
            mu *= 4.0
            continue
        found = balance(trial)
        if imbalance(found) < rel:
            damping[:] = [max(mu / 10.0, 1e-12)]
            return trial, found
        mu *= 4.0
        if mu > 1e16:
            break
    raise SolverError(
        f"equilibrium: line search failed at iteration {it} (KKT residual {res:.3g}): a load without a work "
        "potential (a torque on a body free to turn about more than one axis, a controller's torque) is balanced by "
        "steps that lower the "
        "imbalance, and none does from here. A load that nothing resists (a torque along a free axis, or one "
        "larger than the weight or spring that holds it can balance) has no equilibrium; otherwise start nearer "
        "to it (initial_state=…)"
    )


def _leave_saddle(
    sysm: System,
    q: np.ndarray,
    omega2: float,
    shape: np.ndarray,
    merit: Callable[[np.ndarray], float],
    grad: np.ndarray,
    metric: np.ndarray,
    cap: np.ndarray,
) -> tuple[np.ndarray | None, bool]:
    """A point off a saddle along ± its mode of negative curvature, back on g = 0, where U − W is lower.

    Parameters
    ----------
    sysm : mbvi.System
    q : ndarray, shape (nq,)
        The stationary point (on g = 0).
    omega2 : float
        The mode's ω² (< 0), 1/s².
    shape : ndarray, shape (nq,)
        The mode's shape, mass-normalized (φᵀ M φ = 1): along s φ, U − W falls by ½ |ω²| s² to second order.
    merit : callable
        U − W of a configuration, J.
    grad : ndarray, shape (nq,)
        The load ∇U − F at ``q`` (the size of the terms whose round-off U − W carries).
    metric : ndarray, shape (nq,)
        Diagonal metric of the projection back onto g = 0 (see :func:`_project`).
    cap : ndarray, shape (nq,)
        Largest step per coordinate (see :meth:`_Coordinates.step_cap`).

    Returns
    -------
    point : ndarray or None
        The lower of the two points ±s φ (projected) at the first step size that lowers U − W beyond its
        round-off, or None when none does. The sizes are :data:`_ESCAPE_STEPS` (fractions of the largest
        step), then shorter ones by factors of 4, down to where the second-order decrease ½ |ω²| s² is
        round-off (stiff springs swamp it over long steps: a straight rope standing upright).
    neutral : bool
        True when even the largest of those steps would lower U − W by less than its round-off (the
        negative ω² is round-off of a neutral direction); nothing is tried then.
    """
    size = float(np.max(np.abs(shape) / cap))
    if not np.isfinite(size) or size == 0.0:
        return None, True
    unit = shape / size
    f0 = merit(q)
    reach = max(_ESCAPE_STEPS)
    # the round-off of U − W: of its value, and of the work of the loads over the coordinates' size (a load on
    # one coordinate, the step along others, still rounds the coordinates it moves: a bar turned about a hinge)
    noise = 1e3 * _EPS * (abs(f0) + float(np.sum(np.abs(grad))) * float(np.max(np.abs(q) + reach * np.abs(unit))))

    def promised(fraction: float) -> float:
        return 0.5 * abs(omega2) * (fraction / size) ** 2

    if promised(reach) <= noise:
        return None, True
    fractions = list(_ESCAPE_STEPS)
    shorter = min(fractions) / 4.0
    while len(fractions) < 40 and promised(shorter) > 1e2 * noise:
        fractions.append(shorter)
        shorter /= 4.0
    for fraction in fractions:
        best, lowest = None, f0 - noise
        for sign in (1.0, -1.0):
            try:
                x = _project(sysm, q + sign * fraction * unit, metric)
            except SolverError:
                continue
            fx = merit(x)
            if fx < lowest:
                best, lowest = x, fx
        if best is not None:
            return best, False
    return None, False


def _dense_jacobian(sysm: System, data: np.ndarray) -> np.ndarray:
    """The active G, dense (nc_active, nq), from its values on :attr:`mbvi.System.solver`'s pattern."""
    pattern = sysm.solver.pattern
    G = np.zeros(pattern.shape)
    np.add.at(G, (pattern.rows, pattern.cols), data)
    return G


def _min_norm_step(sysm: System, data: np.ndarray, root: np.ndarray, g: np.ndarray) -> np.ndarray:
    """δy of least norm with (G / root) δy = −g, G the active Jacobian's values ``data`` on its pattern, each row
    scaled to unit size (:func:`_project`)."""
    pattern = sysm.solver.pattern
    Gy = sp.csr_matrix((data / root[pattern.cols], (pattern.rows, pattern.cols)), shape=pattern.shape)
    rs = np.maximum(abs(Gy).max(axis=1).toarray().ravel(), np.finfo(float).tiny)
    Gs = sp.diags(1.0 / rs) @ Gy
    b = -g / rs
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", spla.MatrixRankWarning)
            y = spla.splu((Gs @ Gs.T).tocsc()).solve(b)
        dy = Gs.T @ y
        if np.all(np.isfinite(dy)) and np.linalg.norm(Gs @ dy - b) <= 1e-10 * max(np.linalg.norm(b), 1e-300):
            return dy
    except RuntimeError:  # exactly singular: dependent rows
        pass
    return sla.lstsq(Gs.toarray(), b, check_finite=False)[0]


def _project(sysm: System, q: np.ndarray, metric: np.ndarray, maxiter: int = 50) -> np.ndarray:
    """Newton projection of q onto g(q) = 0, nearest in a diagonal metric.

    Each correction is the minimum-norm least-squares solution of G P^-½ δy = −g, δq = P^-½ δy, rows scaled to
    unit size: by a sparse factor of (G P^-½)(G P^-½)ᵀ (linear in the chain's length), or where that does not
    solve it to round-off (dependent rows: a closed loop's) by the SVD, which no dependent row fails (a 60-link
    chain's equilibrium spent 14 s of its 17 in dense SVDs here).

    Parameters
    ----------
    q : ndarray, shape (nq,)
    metric : ndarray, shape (nq,)
        The diagonal P (> 0): coordinates of large P move least.
    maxiter : int, default: 50

    Raises
    ------
    SolverError
        When Newton does not converge.
    """
    q = np.array(q, dtype=float)
    if len(sysm.active) == 0:
        return q
    root = np.sqrt(metric)
    r = best = np.inf
    stalled = 0
    for k in range(maxiter):  # noqa: B007 (reported)
        g, data = sysm.active_values_and_jacobian(q)
        r = sysm.residual(g)
        if r <= sysm.tolerance:
            return q
        # Newton converges fast or not at all: a start from which 6 steps bring no improvement is given up
        # (the line search then tries a shorter step) rather than iterated to maxiter
        stalled = 0 if r < 0.9 * best else stalled + 1
        best = min(best, r)
        if stalled >= 6:
            break
        q += _min_norm_step(sysm, data, root, g) / root
    raise SolverError(f"Newton projection: residual {r:.3g} ({best:.3g} at best) after {k + 1} iterations")


def modes(scene_or_eq: Scene | Equilibrium, count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Natural frequencies and mode shapes of small oscillations about a static equilibrium.

    Solves Zᵀ H Z φ = ω² Zᵀ M Z φ on the constraint tangent space (Z a basis of
    ker G) with H the Hessian of the Lagrangian at the equilibrium. The problem
    is solved in mass-normalized coordinates, each frequency to its own relative
    precision: a 1 kg bead held between 1e15 kg bodies does not hide the heavy
    bodies' slow pendulum modes (nor make the problem unsolvable).

    Parameters
    ----------
    scene_or_eq : mbvi.Scene, mbvi.LagrangianSystem, Equilibrium or LagrangianEquilibrium
        A scene or a Lagrangian system (its equilibrium is computed first, from its default start) or an
        equilibrium of one. For a Lagrangian system the problem is Zᵀ K Z φ = ω² Zᵀ M Z φ with M = ∂²L/∂v²
        and K the Hessian of U − W + λ·g (:func:`mbvi.lagrangian.statics.lagrangian_modes`).
    count : int, optional
        Number of lowest modes to return (default: all).

    Returns
    -------
    omega : ndarray, shape (k,)
        Angular frequencies, rad/s, ascending (negative ω² are returned as −√|ω²|: unstable; exactly 0 for a
        neutral direction, whose ω² is round-off of the stiffness of the bodies it moves).
    shapes : ndarray, shape (nq, k)
        Mode shapes in generalized coordinates (mass-normalized: φᵀ M φ = I); a Lagrangian system's in its
        own coordinates.

    Raises
    ------
    ValueError
        For a ``count`` that is not a non-negative integer, an argument that is neither a scene, a Lagrangian
        system nor an equilibrium of one, or a Lagrangian equilibrium about which the small motion is
        gyroscopic (no undamped normal modes); and, before any work, for a problem whose dense matrices would
        take more than half of this machine's memory (naming modes, or equilibrium when it computes that first,
        the coordinate count and the GiB it would take).

    Notes
    -----
    The eigenproblem is dense: all nq × nq, every mode computed (``count`` only selects), O(nq²) memory (some
    :data:`MODES_ARRAYS` arrays of 8 nq² bytes) and O(nq³) time. Measured on a shared 2-core machine (one BLAS
    thread), of an equilibrium already found: 0.15 s at nq = 600, 0.7–1.1 s at nq = 1200 and 6–12 s at
    nq = 2400 for independent pendulums; 0.4 s, 3.2 s and 18 s for a beam. See docs/statics.md, "Size: dense
    matrices".
    """
    if count is not None and (isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0):
        raise ValueError(f"modes: count must be a non-negative integer or None, got {count!r}")
    from mbvi.lagrangian import LagrangianSystem
    from mbvi.lagrangian.statics import LagrangianEquilibrium, lagrangian_modes

    if isinstance(scene_or_eq, (Scene, LagrangianSystem)):
        scene_or_eq = equilibrium(scene_or_eq)
    if isinstance(scene_or_eq, Equilibrium):
        eq = scene_or_eq
        _check_dense_size(eq.system.nq, "modes", MODES_ARRAYS)
        w2, phi, _ = _small_oscillations(eq.system, eq.q, eq.multipliers, eq.t)
    elif isinstance(scene_or_eq, LagrangianEquilibrium):
        w2, phi = lagrangian_modes(scene_or_eq)
    else:
        raise ValueError(
            "modes: expected an mbvi.Scene or mbvi.LagrangianSystem, or the equilibrium of one, got "
            f"{type(scene_or_eq).__name__}"
        )
    if count is not None:
        w2, phi = w2[:count], phi[:, :count]
    omega = np.sign(w2) * np.sqrt(np.abs(w2))
    return omega, phi
