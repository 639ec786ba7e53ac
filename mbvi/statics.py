"""Statics: minimum of U − W under the constraints, its multipliers, stability and modes.

The equilibrium solves the KKT conditions

    ∇U(q) − F(q, 0, t) + G(q)ᵀλ = 0,      g(q) = 0

(F the non-conservative loads at rest, whose position-independent part has
work potential W) by a feasible sequential-quadratic-programming Newton
method: each step solves the KKT system with the Hessian of the Lagrangian,
shifted to be positive definite on the constraint tangent space when it is
not (unloaded strings, slack chains), then projects back onto g = 0 and
backtracks on U − W. The multipliers are the constraint forces.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg as sla

from mbvi.assembly import assemble
from mbvi.errors import SolverError
from mbvi.kernels import AffineMap
from mbvi.scene import Scene
from mbvi.state import State
from mbvi.system import System

__all__ = ["Equilibrium", "equilibrium", "modes"]


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
        U − W at the equilibrium, J.
    stable : bool
        True when the Hessian of the Lagrangian is positive definite on the
        constraint tangent space (a strict local minimum).
    tangent_eigenvalues : ndarray
        Eigenvalues of that reduced Hessian (mass-weighted: ω² of the modes), 1/s².
    iterations : int
    residual : float
        Final |∇U − F + Gᵀλ|∞.
    system : mbvi.System
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
        rows = [i for i, o in enumerate(sysm.rows.owner) if o.endswith(f"{joint!r}") and not o.startswith("RigidBody")]
        if not rows:
            raise ValueError(f"unknown joint {joint!r}")
        if body is None:
            body = self.scene.joint(joint).b if self.scene is not None else None
        if body is None or body == "world":
            raise ValueError("constraint forces are read on a body that is not the world")
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
        layout = self.system.layout
        if layout.kind(body) != "rigid":
            raise ValueError(f"constraint_torque: body {body!r} is not a rigid body")
        o = layout.offset[body]
        r = self.q[o + 3 : o + 12].reshape(3, 3)  # rotation columns
        fr = f[o + 3 : o + 12].reshape(3, 3)
        torque_com = np.cross(r, fr).sum(axis=0)  # Σ rᵢ × fᵢ: the moment about the centre of mass
        j = layout.joint_frames[self.scene.joint(joint).name]  # body-frame anchors (mbvi.geometry.LinkGeometry)
        anchor = j.anchor_a if body == j.a else j.anchor_b
        point = AffineMap.from_terms([layout.point(body, anchor)], layout.nq)(self.q)[0]
        return torque_com - np.cross(point - self.q[o : o + 3], f[o : o + 3])


def _null_space(G: np.ndarray, n: int) -> np.ndarray:
    if G.shape[0] == 0:
        return np.eye(n)
    return sla.null_space(G, rcond=1e-10)


def _lagrangian_hessian(sysm: System, q: np.ndarray, lam_full: np.ndarray, t: float) -> np.ndarray:
    H = sysm.potential_hessian(q) + sysm.constraint_hessian(lam_full)
    if sysm.has_forces:
        dq, _ = sysm.force_jacobians(q, np.zeros_like(q), t)
        H = H - dq
    H = H.toarray()
    return 0.5 * (H + H.T)


def equilibrium(
    scene: Scene, *, t: float = 0.0, initial_state: State | None = None, tol: float = 1e-10, maxiter: int = 200
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
        Tolerance on the KKT residual, relative to the load scale.
    maxiter : int, default: 200

    Returns
    -------
    Equilibrium

    Raises
    ------
    SolverError
        When the iteration does not converge.

    Notes
    -----
    For an :class:`mbvi.LagrangianSystem` this is the minimum of
    −L(q, 0) − W under its constraints, searched from q = 0 unless
    ``initial_state`` (a State or the coordinates) gives a start; it returns a
    :class:`mbvi.lagrangian.statics.LagrangianEquilibrium` (same ``q``,
    ``multipliers``, ``potential``, ``stable``, ``state``).
    """
    from mbvi.lagrangian import LagrangianSystem

    if isinstance(scene, LagrangianSystem):
        from mbvi.lagrangian.statics import lagrangian_equilibrium

        return lagrangian_equilibrium(scene, t=t, initial=initial_state, tol=min(tol, 1e-12), maxiter=maxiter)
    sysm = assemble(scene)
    q = sysm.project_position(sysm.layout.q0 if initial_state is None else initial_state.q)
    zeros = np.zeros(sysm.nq)
    M = sysm.mass
    act = sysm.active
    lam_full = np.zeros(sysm.nc)

    def merit(x: np.ndarray) -> float:
        return sysm.potential(x) - sysm.work(x, t)

    def load(x: np.ndarray) -> np.ndarray:
        f = sysm.potential_gradient(x)
        if sysm.has_forces:
            f = f - sysm.force(x, zeros, t)
        return f

    fscale = max(1.0, float(np.max(np.abs(load(q)))), float(np.max(M)) * float(np.linalg.norm(scene.gravity)))
    # convergence is judged on the mass-weighted residual M⁻¹ r (an acceleration), so that a light body
    # among heavy ones must be in equilibrium too (a 1e-9 kg bob next to a 1 kg one)
    ascale = max(1.0, float(np.max(np.abs(load(q) / M))) if sysm.nq else 1.0, float(np.linalg.norm(scene.gravity)))
    res = np.inf
    for it in range(1, maxiter + 1):  # noqa: B007 (reported as iterations)
        grad = load(q)
        G = sysm.constraint_jacobian(q).toarray()[act]
        # least-squares multipliers and KKT residual
        lam = sla.lstsq(G.T, -grad, check_finite=False)[0] if len(act) else np.zeros(0)
        lam_full[:] = 0.0
        lam_full[act] = lam
        r = grad + G.T @ lam
        res = float(np.max(np.abs(r))) if len(r) else 0.0
        if res <= tol * fscale and (not len(r) or float(np.max(np.abs(r / M))) <= tol * ascale):
            break
        H = _lagrangian_hessian(sysm, q, lam_full, t)
        Z = _null_space(G, sysm.nq)
        Hr = Z.T @ H @ Z
        Mr = Z.T @ (M[:, None] * Z)
        # mass-weighted curvature (ω² of the tangent modes): masses 1e9 apart do not hide the light body's
        w, V = sla.eigh(0.5 * (Hr + Hr.T), 0.5 * (Mr + Mr.T)) if Z.shape[1] else (np.zeros(0), np.zeros((0, 0)))
        # Newton along positive curvature (however small: stiff beams span 1e-10 of the largest
        # eigenvalue); positive-definite modification where the curvature is negative or numerically
        # zero (saddles, unloaded strings, slack chains), its step capped at the scene's length scale
        tiny = 1e-12 * max(1.0, float(np.max(np.abs(w)))) if len(w) else 0.0
        good = w > tiny
        coef = (V.T @ (Z.T @ grad)) / np.where(good, w, np.maximum(np.abs(w), tiny))
        bad_norm = float(np.linalg.norm(coef[~good]))
        if bad_norm > sysm.length_scale:
            coef[~good] *= sysm.length_scale / bad_norm
        dq = -(Z @ (V @ coef))
        step = float(np.max(np.abs(dq))) if len(dq) else 0.0
        if step <= 1e-12 * sysm.length_scale:
            break  # the residual is at its round-off floor (stiff elements): no further progress
        if step > sysm.length_scale:
            dq *= sysm.length_scale / step
        # backtracking on U − W along the projected path
        f0 = merit(q)
        alpha = 1.0
        while alpha > 1e-10:
            try:
                trial = sysm.project_position(q + alpha * dq)
            except SolverError:
                alpha *= 0.5
                continue
            if (
                merit(trial) <= f0 + 1e-4 * alpha * float(grad @ dq)
                or alpha * float(np.max(np.abs(dq))) < 1e-14 * sysm.length_scale
            ):
                break
            alpha *= 0.5
        else:
            raise SolverError(f"equilibrium: line search failed (KKT residual {res:.3g})")
        q = trial
    else:
        raise SolverError(
            f"equilibrium did not converge in {maxiter} iterations (KKT residual {res:.3g} N, "
            f"U − W = {merit(q):.6g} J); if U − W keeps falling it is unbounded below under the "
            "constraints (e.g. a body free to move along a constant load): there is no equilibrium"
        )
    G = sysm.constraint_jacobian(q).toarray()[act]
    H = _lagrangian_hessian(sysm, q, lam_full, t)
    Z = _null_space(G, sysm.nq)
    # mass-weighted reduced Hessian: eigenvalues are ω² of small oscillations
    Mr = Z.T @ (M[:, None] * Z)
    Hr = Z.T @ H @ Z
    eig = sla.eigh(0.5 * (Hr + Hr.T), 0.5 * (Mr + Mr.T), eigvals_only=True) if Z.shape[1] else np.zeros(0)
    # zero modes (unloaded strings) sit at round-off, ~1e-15 of the largest ω²; a slender beam's lowest
    # bending ω² is a genuine 1e-8 … 1e-11 of its highest axial one
    tol_eig = 1e-12 * max(1.0, float(np.max(np.abs(eig)))) if len(eig) else 0.0
    return Equilibrium(
        q=q,
        multipliers=lam_full.copy(),
        potential=float(merit(q)),
        stable=bool(np.all(eig > tol_eig)),
        tangent_eigenvalues=eig,
        iterations=it,
        residual=res,
        system=sysm,
        scene=scene,
    )


def modes(scene_or_eq: Scene | Equilibrium, count: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Natural frequencies and mode shapes of small oscillations about a static equilibrium.

    Solves Zᵀ H Z φ = ω² Zᵀ M Z φ on the constraint tangent space (Z a basis of
    ker G) with H the Hessian of the Lagrangian at the equilibrium.

    Parameters
    ----------
    scene_or_eq : mbvi.Scene or Equilibrium
        A scene (its equilibrium is computed first) or an equilibrium.
    count : int, optional
        Number of lowest modes to return (default: all).

    Returns
    -------
    omega : ndarray, shape (k,)
        Angular frequencies, rad/s, ascending (negative ω² are returned as −√|ω²|: unstable).
    shapes : ndarray, shape (nq, k)
        Mode shapes in generalized coordinates (mass-normalized).
    """
    if count is not None and (isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0):
        raise ValueError(f"modes: count must be a non-negative integer or None, got {count!r}")
    eq = scene_or_eq if isinstance(scene_or_eq, Equilibrium) else equilibrium(scene_or_eq)
    sysm = eq.system
    # Mass-normalized coordinates y = M^½ q: a standard symmetric eigenproblem, well scaled whatever the
    # bodies' sizes (kg and kg m² of very different magnitudes made the generalized one fail).
    root = np.sqrt(sysm.mass)
    G = sysm.constraint_jacobian(eq.q).toarray()[sysm.active] / root[None, :]
    G = G / np.maximum(np.abs(G).max(axis=1, initial=0.0), np.finfo(float).tiny)[:, None] if len(G) else G
    H = _lagrangian_hessian(sysm, eq.q, eq.multipliers, 0.0) / np.outer(root, root)
    Z = _null_space(G, sysm.nq)
    Hr = Z.T @ H @ Z
    try:
        w2, phi = sla.eigh(0.5 * (Hr + Hr.T))
    except (sla.LinAlgError, ValueError) as exc:
        raise ValueError(f"modes: the eigenproblem could not be solved ({exc}); check masses and stiffnesses") from exc
    phi = Z @ phi / root[:, None]  # back to q, mass-normalized: φᵀ M φ = I
    if count is not None:
        w2, phi = w2[:count], phi[:, :count]
    omega = np.sign(w2) * np.sqrt(np.abs(w2))
    return omega, phi
