"""Built-in force laws, registered through the same ``register_force_laws`` hook as plugins.

Each law evaluates every instance of its element type in one vectorized call.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from mbvi.engine.contract import Family
from mbvi.errors import SolverError
from mbvi.forcelaws.base import ForceLaw, _fd_jacobian
from mbvi.forces import (
    Damper,
    Drag,
    ExternalForce,
    ExternalTorque,
    Gravity,
    JointDamping,
    Spring,
    TorsionSpring,
)
from mbvi.hookspecs import hookimpl
from mbvi.kernels import AffineMap
from mbvi.kinematics import angular_velocity
from mbvi.kinematics import cross as _cross
from mbvi.layout import Layout
from mbvi.loadkernels import load_kernels
from mbvi.loads import call_load, load_arity, state_view_factory

__all__ = [
    "DamperLaw",
    "DragLaw",
    "ExternalForceLaw",
    "ExternalTorqueLaw",
    "GravityLaw",
    "JointDampingLaw",
    "SpringLaw",
    "TorsionSpringLaw",
    "block_quadratic",
    "rotation_columns",
]


def block_quadratic(J: sp.spmatrix, blocks: np.ndarray) -> sp.csr_matrix:
    """Jᵀ B J for B block-diagonal with 3×3 blocks ``blocks`` (m, 3, 3) and J of shape (3m, nq)."""
    m = len(blocks)
    B = sp.bsr_matrix((blocks, np.arange(m), np.arange(m + 1)), shape=(3 * m, 3 * m))
    return (J.T @ B @ J).tocsr()


def _point_map(layout: Layout, pairs) -> AffineMap:
    return AffineMap.from_terms([layout.point(b, a) for b, a in pairs], layout.nq)


def _difference_map(layout: Layout, elements) -> AffineMap:
    items = []
    for e in elements:
        ta, ca = layout.point(e.a, e.anchor_a)
        tb, cb = layout.point(e.b, e.anchor_b)
        items.append((ta + [(i, -w) for i, w in tb], ca - cb))
    return AffineMap.from_terms(items, layout.nq)


def rotation_columns(layout: Layout, bodies: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Indices (m, 3, 3) of the rotation-column coordinates of each body and a rigid mask (m,)."""
    idx = np.zeros((len(bodies), 3, 3), dtype=np.intp)
    rigid = np.zeros(len(bodies), dtype=bool)
    for i, b in enumerate(bodies):
        if layout.kind(b) == "rigid":
            o = layout.offset[b]
            idx[i] = o + 3 + np.arange(9).reshape(3, 3)
            rigid[i] = True
    return idx, rigid


class GravityLaw(ForceLaw):
    """Uniform gravity: U = −Σ m g·x over all translational blocks."""

    name = "gravity"
    element = Gravity
    has_potential = True
    batched = True

    def __init__(self, elements, layout):
        super().__init__(elements, layout)
        g = np.sum([e.g for e in elements], axis=0)
        self.gvec = np.zeros(self.nq)
        for o in layout.translation_blocks:
            self.gvec[o : o + 3] = layout.mass[o] * g

    def potential(self, q):
        return -(q @ self.gvec)

    def gradient(self, q):
        return -self.gvec

    def gradient_batch(self, Q):
        return np.broadcast_to(-self.gvec, Q.shape)

    def hessian(self, q):
        return sp.csr_matrix((self.nq, self.nq))

    def support(self):
        return np.nonzero(self.gvec)[0]

    def compiled(self) -> Family:
        return Family("gravity", (self.gvec,))


class SpringLaw(ForceLaw):
    """Linear springs: U = Σ ½k(|d| − L₀)², d = P_a − P_b."""

    name = "spring"
    element = Spring
    has_potential = True
    batched = True

    def __init__(self, elements, layout):
        super().__init__(elements, layout)
        self.D = _difference_map(layout, elements)
        self.k = np.array([e.stiffness for e in elements])
        d0 = np.linalg.norm(self.D(layout.q0), axis=-1)
        self.L0 = np.array([d0[i] if e.rest_length is None else e.rest_length for i, e in enumerate(elements)])
        for i in np.flatnonzero((d0 == 0.0) & (self.L0 > 0.0) & (self.k > 0.0)):
            # its direction, and so its force, is undefined there: verlet pulled the bob down, midpoint and
            # implicit_euler launched it up (a Hessian of −k L₀/1e-300)
            raise ValueError(f"{elements[i].owner}: its anchors coincide at the start, where a spring of rest "
                             f"length {self.L0[i]:g} m pushes in no defined direction; start them apart")  # fmt: skip

    def potential(self, q):
        r = np.linalg.norm(self.D(q), axis=-1)
        return 0.5 * np.sum(self.k * (r - self.L0) ** 2, axis=-1)

    def gradient(self, q):
        d = self.D(q)
        r = np.linalg.norm(d, axis=-1)
        coef = np.divide(self.k * (r - self.L0), r, out=np.zeros_like(r), where=r > 0)
        return self.D.adjoint(coef[:, None] * d)

    def gradient_batch(self, Q):
        d = self.D(Q)  # (B, m, 3)
        r = np.linalg.norm(d, axis=-1)
        coef = np.divide(self.k * (r - self.L0), r, out=np.zeros_like(r), where=r > 0)
        return (coef[..., None] * d).reshape(len(Q), -1) @ self.D.matrix

    def hessian(self, q):
        d = self.D(q)
        r = np.maximum(np.linalg.norm(d, axis=-1), 1e-300)
        n = d / r[:, None]
        a = self.k * (1 - self.L0 / r)
        b = self.k * self.L0 / r
        H = a[:, None, None] * np.eye(3) + b[:, None, None] * n[:, :, None] * n[:, None, :]
        return block_quadratic(self.D.matrix, H)

    def support(self):
        return np.unique(self.D.cols[self.D._wcols != 0])

    def compiled(self) -> Family:
        return Family("spring", (self.D.terms, self.k, self.L0))

    def frequencies(self):
        # Gershgorin bound on the springs' M⁻¹K: row j of K sums to Σᵢ kᵢ|wᵢⱼ| Σₗ|wᵢₗ| (wᵢ: weights of dᵢ);
        # each spring reports the largest bound over the coordinates it moves
        A = abs(self.D.matrix[0::3]).tocsr()  # (m, nq)
        row = np.asarray(A.sum(axis=1)).ravel()
        omega2 = (A.T @ (self.k * row)) / self.layout.mass
        A.data = omega2[A.indices]
        return np.sqrt(np.asarray(A.max(axis=1).todense()).ravel())


class DamperLaw(ForceLaw):
    """Linear viscous dampers along the line between two points: f = −c (ḋ·d̂) d̂."""

    name = "damper"
    element = Damper
    has_force = True
    velocity_dependent = True

    def __init__(self, elements, layout):
        super().__init__(elements, layout)
        self.D = _difference_map(layout, elements)
        self.c = np.array([e.damping for e in elements])

    def _parts(self, q, v):
        d = self.D(q)
        r = np.maximum(np.linalg.norm(d, axis=-1), 1e-300)
        n = d / r[:, None]
        dd = self.D.linear(v)
        s = np.einsum("ij,ij->i", n, dd)
        return d, r, n, dd, s

    def force(self, q, v, t):
        _, _, n, _, s = self._parts(q, v)
        return self.D.adjoint(-(self.c * s)[:, None] * n)

    def force_jacobians(self, q, v, t):
        _, r, n, dd, s = self._parts(q, v)
        P = np.eye(3) - n[:, :, None] * n[:, None, :]  # I − nnᵀ
        nn = n[:, :, None] * n[:, None, :]
        dfdv = -self.c[:, None, None] * nn
        Pdd = np.einsum("ijk,ik->ij", P, dd)
        dfdd = -(self.c / r)[:, None, None] * (s[:, None, None] * P + n[:, :, None] * Pdd[:, None, :])
        J = self.D.matrix
        return block_quadratic(J, dfdd), block_quadratic(J, dfdv)

    def compiled(self) -> Family:
        return Family("damper", (self.D.terms, self.c))


class DragLaw(ForceLaw):
    """Linear drag at body points: f = −c v_P."""

    name = "drag"
    element = Drag
    has_force = True
    velocity_dependent = True

    def __init__(self, elements, layout):
        super().__init__(elements, layout)
        self.P = _point_map(layout, [(e.body, e.anchor) for e in elements])
        self.c = np.array([e.coefficient for e in elements])

    def force(self, q, v, t):
        return self.P.adjoint(-self.c[:, None] * self.P.linear(v))

    def force_jacobians(self, q, v, t):
        blocks = -self.c[:, None, None] * np.eye(3)
        return sp.csr_matrix((self.nq, self.nq)), block_quadratic(self.P.matrix, blocks)

    def compiled(self) -> Family:
        return Family("drag", (self.P.terms, self.c))


class _Prescribed:
    """Loads of one law stacked as (m, 3): constants once, callables of ``(t)`` or ``(t, state)`` per call.

    The calling form of each callable is read once, here (:func:`mbvi.loads.load_arity`);
    :attr:`reads_state` is True when any of them takes the state.
    """

    def __init__(self, elements, attr: str, layout: Layout):
        self.attr = attr
        self.values0 = np.array(
            [np.zeros(3) if callable(getattr(e, attr)) else getattr(e, attr) for e in elements], dtype=float
        ).reshape(-1, 3)
        self.callables = [
            (i, e, getattr(e, attr), load_arity(getattr(e, attr), e.owner, attr))
            for i, e in enumerate(elements)
            if callable(getattr(e, attr))
        ]
        self.index = np.array([i for i, *_ in self.callables], dtype=np.intp)
        #: the loads given as constants (the engine's families take them)
        self.constant = np.setdiff1d(np.arange(len(elements)), self.index)
        self.reads_state = any(arity == 2 for *_, arity in self.callables)
        self.view = state_view_factory(layout) if self.reads_state else None
        self.held: set[int] = set()  # callables whose value mbvi.Simulator.set_load holds instead

    def loads(self, anchors: np.ndarray | None = None) -> list[tuple[Any, Callable, int, np.ndarray]]:
        """(element, callable, calling form, anchor) of each load given as a callable, as read at assembly
        (:func:`mbvi.loadkernels.load_kernels`); ``anchors`` shape (m, 3), m, body frame (a torque's: none)."""
        return [(e, func, arity, np.zeros(3) if anchors is None else anchors[i]) for i, e, func, arity in
                self.callables]  # fmt: skip

    def copy(self) -> _Prescribed:
        """A copy whose values and holds are its own (the callables and the view shared)."""
        out = copy.copy(self)
        out.values0, out.held = self.values0.copy(), set(self.held)
        return out

    def hold(self, i: int, value: np.ndarray) -> None:
        """Load ``i`` is ``value`` from now on (N or N m), whatever it was (:meth:`mbvi.Simulator.set_load`)."""
        self.values0[i] = value
        if any(j == i for j, *_ in self.callables):
            self.held.add(i)

    def __call__(self, t: float, q: np.ndarray | None = None, v: np.ndarray | None = None) -> np.ndarray:
        """Load vectors at time t (s) and state (q, v), shape (m, 3) (N or N m)."""
        if not self.callables:
            return self.values0
        out = self.values0.copy()
        state = self.view(q, v) if self.view is not None and q is not None else None
        for i, e, func, arity in self.callables:
            if i in self.held:
                continue
            if arity == 2 and state is None:
                raise ValueError(f"{e.owner}: {self.attr}(t, state) needs the state; none was given")
            f = np.asarray(call_load(func, arity, t, state, e.owner, self.attr), dtype=float).reshape(-1)
            if f.shape != (3,) or not np.all(np.isfinite(f)):
                args = f"t={t:g}" if arity == 1 else f"t={t:g}, state"
                raise ValueError(f"{e.owner}: {self.attr}({args}) must return 3 finite numbers, got {f!r}")
            out[i] = f
        return out


class ExternalForceLaw(ForceLaw):
    """World forces at body points: constant, functions of time ``f(t)`` or of time and state ``f(t, state)``.

    When any load reads the state the law is velocity dependent (an instance
    attribute): integrators evaluate it like damping, and its Jacobians are the
    finite differences of :meth:`mbvi.ForceLaw.force_jacobians`.
    """

    name = "external_force"
    element = ExternalForce
    has_force = True

    def __init__(self, elements, layout):
        super().__init__(elements, layout)
        self.anchors = np.array([e.anchor for e in elements], dtype=float).reshape(-1, 3)
        self.P = _point_map(layout, [(e.body, a) for e, a in zip(elements, self.anchors, strict=True)])
        self.values = _Prescribed(elements, "force", layout)
        self.velocity_dependent = self.values.reads_state

    def force(self, q, v, t):
        return self.P.adjoint(self.values(t, q, v))

    def force_jacobians(self, q, v, t):
        if self.values.reads_state:
            return super().force_jacobians(q, v, t)
        z = sp.csr_matrix((self.nq, self.nq))
        return z, z

    def work(self, q, t):
        """f·x of the loads that do not read the state (state-reading loads have no work potential), J."""
        f = self.values(t, q, np.zeros_like(q))
        if self.values.reads_state:
            f = f.copy()
            f[[i for i, *_, arity in self.values.callables if arity == 2]] = 0.0
        return float(np.sum(f * self.P(q)))

    def compiled(self) -> list:
        """Constant forces as the engine's ``point_force`` family; each function of ``(t)`` or ``(t, state)`` as
        its own kernel, compiled with numba where it allows (:mod:`mbvi.loadkernels`)."""
        const = self.values.constant
        parts: list = []
        if len(const):
            P = _point_map(self.layout, [(self.elements[i].body, self.anchors[i]) for i in const])
            owners = tuple(self.elements[i].owner for i in const)
            parts.append(Family("point_force", (P.terms, self.values.values0[const]), owners=owners))
        return parts + load_kernels(self.values.loads(self.anchors), "force", self.layout, torque=False)


class ExternalTorqueLaw(ForceLaw):
    """World torques on rigid bodies: generalized force ½ τ × rᵢ on each rotation column.

    A torque is constant, a function of time ``τ(t)`` or of time and state
    ``τ(t, state)``; when any reads the state the law is velocity dependent and
    its Jacobians are finite differences (see :class:`ExternalForceLaw`).
    """

    name = "external_torque"
    element = ExternalTorque
    has_force = True

    def __init__(self, elements, layout):
        super().__init__(elements, layout)
        for e in elements:
            if layout.kind(e.body) != "rigid":
                raise ValueError(f"{e.owner}: body {e.body!r} is not a rigid body (a torque needs orientation)")
        self.cols, _ = rotation_columns(layout, [e.body for e in elements])
        self.values = _Prescribed(elements, "torque", layout)
        self.velocity_dependent = self.values.reads_state

    def force(self, q, v, t):
        """½ (S⁻¹ τ) × rᵢ on each rotation column: a torque of exactly τ at any q (:func:`_spin_inverse`; S = I
        on the rotation group). ``midpoint`` evaluates forces at (q₀ + q₁)/2, where the columns are not quite
        orthonormal: ½ τ × rᵢ there was a torque S τ, and a free body's angular momentum missed L₀ + τ t by
        1.2e-4 of |τ| t after 1 s at dt = 1e-3 (a pair ±τ on two bodies drifted by 3e-6 in 2 s)."""
        tau = _spin_inverse_times(q, self.cols, np.ones(len(self.cols), dtype=bool), self.values(t, q, v))
        r = q[self.cols]  # (m, 3 columns, 3)
        f = 0.5 * _cross(tau[:, None, :], r)
        return np.bincount(self.cols.ravel(), weights=f.ravel(), minlength=self.nq)

    def force_jacobians(self, q, v, t):
        """∂f/∂q of ½ (S⁻¹ τ) × rᵢ, exact (:func:`_spin_rate_derivatives` with w = τ), and ∂f/∂v = 0.

        A torque that reads the state adds ∂f/∂τ ∂τ/∂(q, v): f is linear in τ, and only τ is differenced
        (central differences of the load alone; differencing the whole law spent most of an implicit step's
        time in the columns' S⁻¹, a tenth of a millisecond per evaluation).
        """
        tau = self.values(t, q, v)
        m = len(tau)
        _, _, dr, _, _ = _spin_rate_derivatives(q, np.zeros_like(q), self.cols, np.ones(m, dtype=bool), tau)
        c9 = self.cols.reshape(m, 9)
        rows, cols = np.repeat(c9[:, :, None], 9, axis=2), np.repeat(c9[:, None, :], 9, axis=1)
        dq = sp.csr_matrix((dr.ravel(), (rows.ravel(), cols.ravel())), shape=(self.nq, self.nq))
        if not self.values.reads_state:
            return dq, sp.csr_matrix((self.nq, self.nq))
        # τ ↦ f at this q, a matrix: column i of body k gets ½ (S⁻¹ τₖ) × rᵢ = −½ [rᵢ]× S⁻¹ τₖ
        s_inv = _spin_inverse(q, self.cols, np.ones(m, dtype=bool))
        r = q[self.cols]  # (m, 3 columns, 3)
        skew = np.zeros((m, 3, 3, 3))
        skew[..., 0, 1], skew[..., 0, 2], skew[..., 1, 2] = -r[..., 2], r[..., 1], -r[..., 0]
        skew[..., 1, 0], skew[..., 2, 0], skew[..., 2, 1] = r[..., 2], -r[..., 1], r[..., 0]
        blocks = -0.5 * np.einsum("mcij,mjk->mcik", skew, s_inv)  # (m, column, 3, 3)
        rows = np.repeat(self.cols.reshape(m, 9)[:, :, None], 3, axis=2)
        taus = np.repeat((3 * np.arange(m))[:, None, None] + np.arange(3), 9, axis=1)
        at_q = sp.csr_matrix((blocks.ravel(), (rows.ravel(), taus.ravel())), shape=(self.nq, 3 * m))
        sup = self.support()
        dq = dq + _fd_jacobian(lambda x: at_q @ self.values(t, x, v).ravel(), q, sup)
        return dq, _fd_jacobian(lambda x: at_q @ self.values(t, q, x).ravel(), v, sup)

    def compiled(self) -> list:
        """Constant torques as the engine's ``torque`` family; each function of ``(t)`` or ``(t, state)`` as its
        own kernel, compiled with numba where it allows (:mod:`mbvi.loadkernels`)."""
        const = self.values.constant
        parts: list = []
        if len(const):
            owners = tuple(self.elements[i].owner for i in const)
            parts.append(Family("torque", (_columns(self.cols[const]), self.values.values0[const]), owners=owners))
        return parts + load_kernels(self.values.loads(), "torque", self.layout, torque=True)


def _columns(cols: np.ndarray) -> np.ndarray:
    """Rotation-column indices (m, 3, 3) as the engine's rows of nine."""
    return np.asarray(cols, dtype=np.int64).reshape(len(cols), 9)


def _angular_velocity(q: np.ndarray, v: np.ndarray, cols: np.ndarray, rigid: np.ndarray) -> np.ndarray:
    """ω = ½ Σᵢ rᵢ × ṙᵢ per body (:func:`mbvi.kinematics.angular_velocity`), shape (m, 3), zero for non-rigid."""
    return angular_velocity(q[cols], v[cols]) * rigid[:, None]


def _spin_inverse(q: np.ndarray, cols: np.ndarray, rigid: np.ndarray) -> np.ndarray:
    """S⁻¹ per body, S = ½ (Σᵢ |rᵢ|² I − Σᵢ rᵢ rᵢᵀ) of its rotation columns rᵢ, shape (m, 3, 3); I for non-rigid.

    ½ Σᵢ rᵢ × (ξ × rᵢ) = S ξ: S maps a rigid spin ξ of the columns to the ω = ½ Σ rᵢ × ṙᵢ it reads, and the
    torque a generalized force ½ τ × rᵢ exerts (Σ rᵢ × ½ τ × rᵢ = S τ). S = I where the columns are orthonormal;
    midpoint evaluates forces at (q₀ + q₁)/2, where they are not quite.
    """
    r = q[cols]
    S = 0.5 * (np.einsum("mci,mci->m", r, r)[:, None, None] * np.eye(3) - np.einsum("mci,mcj->mij", r, r))
    S[~rigid] = np.eye(3)
    try:
        return np.linalg.inv(S)
    except np.linalg.LinAlgError:  # an iterate far off the rotations (a diverging Newton step), not the law's fault
        raise SolverError(
            "a rigid body's rotation columns became singular at an iterate of the step (its iteration diverged); "
            "reduce dt"
        ) from None


def _spin_inverse_times(q: np.ndarray, cols: np.ndarray, rigid: np.ndarray, x: np.ndarray) -> np.ndarray:
    """S⁻¹ x per body (:func:`_spin_inverse`), x (m, 3)."""
    return np.einsum("mij,mj->mi", _spin_inverse(q, cols, rigid), x)


def _spin_rate_derivatives(q, v, cols, rigid, w) -> tuple:
    """Derivatives of s = w·u, u = S⁻¹ ω̃, ω̃ = ½ Σᵢ rᵢ × ṙᵢ (the body's spin read invariantly; w (m, 3) a direction).

    Returns ``(a, g, dr, dw, u)``: a = ∂s/∂ṙ (m, 9: ½ (S⁻¹w) × rᵢ per column), g = ∂s/∂r at fixed w (m, 9),
    dr = ∂a/∂r (m, 9, 9), dw = ∂a/∂w (m, 9, 3) and u (m, 3). With M = S⁻¹ w: ∂M/∂rⱼ =
    −S⁻¹ (M rⱼᵀ − ½ (rⱼ·M) I − ½ rⱼ Mᵀ) (from dS = (rⱼ·drⱼ) I − ½ (drⱼ rⱼᵀ + rⱼ drⱼᵀ)), and
    ∂s/∂rⱼ = ½ ṙⱼ × M − (u·M) rⱼ + ½ (rⱼ·M) u + ½ (u·rⱼ) M.
    """
    mask = rigid[:, None, None]
    r, rd = q[cols] * mask, v[cols] * mask  # (m, 3 columns, 3)
    Pinv = _spin_inverse(q, cols, rigid)
    u = np.einsum("mij,mj->mi", Pinv, angular_velocity(r, rd))
    M = np.einsum("mij,mj->mi", Pinv, w)
    m = len(w)
    a = 0.5 * np.cross(M[:, None, :], r)  # (m, 3, 3)
    uM = np.einsum("mi,mi->m", u, M)
    rM, ur = np.einsum("mci,mi->mc", r, M), np.einsum("mci,mi->mc", r, u)
    g = (0.5 * np.cross(rd, M[:, None, :]) - uM[:, None, None] * r + 0.5 * rM[:, :, None] * u[:, None, :]
         + 0.5 * ur[:, :, None] * M[:, None, :])  # fmt: skip
    eye = np.eye(3)
    dr = np.zeros((m, 9, 9))
    dw = np.zeros((m, 9, 3))
    sr = _skew(r.reshape(-1, 3)).reshape(m, 3, 3, 3)  # [rᵢ]× per column
    sM = _skew(M)
    for j in range(3):
        inner = (M[:, :, None] * r[:, j, None, :] - 0.5 * rM[:, j, None, None] * eye
                 - 0.5 * r[:, j, :, None] * M[:, None, :])  # fmt: skip
        dMj = -np.einsum("mik,mkl->mil", Pinv, inner)  # ∂M/∂rⱼ
        for i in range(3):
            block = -0.5 * np.einsum("mik,mkl->mil", sr[:, i], dMj)  # ½ (∂M/∂rⱼ drⱼ) × rᵢ
            if i == j:
                block = block + 0.5 * sM  # ½ M × drᵢ
            dr[:, 3 * i : 3 * i + 3, 3 * j : 3 * j + 3] = block * mask
    for i in range(3):
        dw[:, 3 * i : 3 * i + 3, :] = -0.5 * np.einsum("mik,mkl->mil", sr[:, i], Pinv) * mask
    return a.reshape(m, 9), g.reshape(m, 9) * rigid[:, None], dr, dw, u


def _column_force(q: np.ndarray, cols: np.ndarray, rigid: np.ndarray, t: np.ndarray, nq: int) -> np.ndarray:
    """The generalized force ½ t × rᵢ on each body's rotation columns, t (m, 3): a torque of exactly τ (N m) on
    the body, at any q, when t = S⁻¹ τ (:func:`_spin_inverse`)."""
    f = 0.5 * _cross(t[:, None, :], q[cols]) * rigid[:, None, None]
    return np.bincount(cols.ravel(), weights=f.ravel(), minlength=nq)


class JointDampingLaw(ForceLaw):
    """Viscous joint friction: −b θ̇ about revolute axes, −b ḋ along prismatic axes.

    For a revolute joint, θ̇ = n·(ω_b − ω_a) with n the joint axis and
    ω = S⁻¹ ½ Σᵢ rᵢ × ṙᵢ, the torque is −b θ̇ n on b and +b θ̇ n on a (generalized
    force ½ (S⁻¹ τ) × rᵢ on each rotation column). This is −∂R/∂v of the Rayleigh
    function R = ½ b θ̇², with exact analytic Jacobians (:func:`_spin_rate_derivatives`). S
    (:func:`_spin_inverse`) is the identity on the rotation group; off it — where
    ``midpoint`` evaluates forces, at (q₀ + q₁)/2 — it makes the torques exactly
    ±τ and θ̇ blind to a rigid spin of the whole, so that the pair exerts no net
    torque and angular momentum is kept (it drifted by 6e-7 in 5 s at dt = 1e-2).
    A prismatic pair ∓b ḋ n at the two anchors has the couple d × f off the
    joint's line (d = p_b − p_a): the opposite couple is put on a rigid body of
    the joint.
    """

    name = "joint_damping"
    element = JointDamping
    has_force = True
    velocity_dependent = True

    def __init__(self, elements, layout):
        super().__init__(elements, layout)
        self.rev, self.pri = [], []
        for e in elements:
            joint = layout.joint_frames.get(e.joint)  # body-frame axes and anchors (mbvi.geometry.LinkGeometry)
            kind = None if joint is None else joint.kind
            if kind == "revolute":
                self.rev.append((e, joint))
            elif kind == "prismatic":
                self.pri.append((e, joint))
            else:
                raise ValueError(f"{e.owner}: joint {e.joint!r} is not a revolute or prismatic joint")
        if self.rev:
            self.b_rev = np.array([e.coefficient for e, _ in self.rev])
            self.N = AffineMap.from_terms([layout.direction(j.a, j.axis_a) for _, j in self.rev], self.nq)
            self.cols_a, self.rigid_a = rotation_columns(layout, [j.a for _, j in self.rev])
            self.cols_b, self.rigid_b = rotation_columns(layout, [j.b for _, j in self.rev])
        if self.pri:
            self.b_pri = np.array([e.coefficient for e, _ in self.pri])
            self.Np = AffineMap.from_terms([layout.direction(j.a, j.axis_a) for _, j in self.pri], self.nq)
            items = []
            for _, j in self.pri:
                tb, cb = layout.point(j.b, j.anchor_b)
                ta, ca = layout.point(j.a, j.anchor_a)
                items.append((tb + [(i, -w) for i, w in ta], cb - ca))
            self.Dp = AffineMap.from_terms(items, self.nq)
            self.cols_pa, self.rigid_pa = rotation_columns(layout, [j.a for _, j in self.pri])
            self.cols_pb, self.rigid_pb = rotation_columns(layout, [j.b for _, j in self.pri])
            self.on_a = self.rigid_pa.astype(float)  # the couple goes to a rigid a, else to a rigid b
            self.on_b = (~self.rigid_pa & self.rigid_pb).astype(float)

    def _revolute(self, q: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """θ̇ = n·(S_b⁻¹ ω̃_b − S_a⁻¹ ω̃_a) = m_b·ω̃_b − m_a·ω̃_a of the revolute instances (m,), with
        m = S⁻¹ n of each body (m, 3): what its torque −b θ̇ n becomes on its columns (S symmetric)."""
        n = self.N(q)
        mb = _spin_inverse_times(q, self.cols_b, self.rigid_b, n)
        ma = _spin_inverse_times(q, self.cols_a, self.rigid_a, n)
        wb = _angular_velocity(q, v, self.cols_b, self.rigid_b)
        wa = _angular_velocity(q, v, self.cols_a, self.rigid_a)
        return np.einsum("ij,ij->i", mb, wb) - np.einsum("ij,ij->i", ma, wa), mb, ma

    def rates(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Joint rates θ̇ (rad/s) of the revolute instances, shape (m,)."""
        return self._revolute(q, v)[0]

    def force(self, q, v, t):
        F = np.zeros(self.nq)
        if self.rev:
            rate, mb, ma = self._revolute(q, v)
            c = -(self.b_rev * rate)[:, None]  # the torque c n on b, −c n on a
            F += _column_force(q, self.cols_b, self.rigid_b, c * mb, self.nq)
            F += _column_force(q, self.cols_a, self.rigid_a, -c * ma, self.nq)
        if self.pri:
            n = self.Np(q)
            rate = np.einsum("ij,ij->i", n, self.Dp.linear(v))
            f = -(self.b_pri * rate)[:, None] * n  # on b at p_b, −f on a at p_a
            F += self.Dp.adjoint(f)
            couple = -np.cross(self.Dp(q), f)  # cancels d × f, zero on the joint's line
            for cols, rigid, on in ((self.cols_pa, self.rigid_pa, self.on_a), (self.cols_pb, self.rigid_pb, self.on_b)):
                t = _spin_inverse_times(q, cols, rigid, couple * on[:, None])
                F += _column_force(q, cols, rigid, t, self.nq)
        return F

    # analytic Jacobians ---------------------------------------------------------------------------
    def _rev_maps(self) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """Selections V (18m, nq): (ṙᵇ, ṙᵃ) per instance, and P (21m, nq): (rᵇ, rᵃ, n) per instance."""
        if getattr(self, "_maps", None) is None:
            m = len(self.rev)
            cols = np.concatenate([self.cols_b.reshape(m, 9), self.cols_a.reshape(m, 9)], axis=1)
            vals = np.repeat(np.stack([self.rigid_b, self.rigid_a], axis=1), 9, axis=1).astype(float)
            V = sp.csr_matrix((vals.ravel(), (np.arange(18 * m), cols.ravel())), shape=(18 * m, self.nq))
            P = sp.vstack([V, self.N.matrix]).tocsr()
            perm = (np.arange(m)[:, None] * 18 + np.arange(18)).ravel()
            perm = np.concatenate([perm.reshape(m, 18), 18 * m + 3 * np.arange(m)[:, None] + np.arange(3)], axis=1)
            self._maps = (V, P[perm.ravel()])
        return self._maps

    def force_jacobians(self, q, v, t):
        """Analytic (∂F/∂q, ∂F/∂v) of the Rayleigh-function forces F = −b θ̇ ∂θ̇/∂v."""
        nq = self.nq
        dq, dv = sp.csr_matrix((nq, nq)), sp.csr_matrix((nq, nq))
        if self.rev:
            m = len(self.rev)
            V, P = self._rev_maps()
            n = self.N(q)
            a_parts, grad_parts, da_blocks, du = [], [], [], 0.0
            for cols, rigid, sign in ((self.cols_b, self.rigid_b, 1.0), (self.cols_a, self.rigid_a, -1.0)):
                a, g, dr, dn, u = _spin_rate_derivatives(q, v, cols, rigid, n)
                du = du + sign * u
                a_parts.append(sign * a)
                grad_parts.append(sign * g)
                da_blocks.append((sign * dr, sign * dn))
            # θ̇ = n·(u_b − u_a), u = S⁻¹ ½ Σ rᵢ × ṙᵢ (see _spin_rate_derivatives); its gradient in the instance's
            # coordinates (rᵇ, rᵃ, n) (21), ∂θ̇/∂(ṙᵇ, ṙᵃ) (18) and the derivative of the latter in (rᵇ, rᵃ, n)
            rate = np.einsum("ij,ij->i", n, du)
            a = np.concatenate(a_parts, axis=1)  # (m, 18)
            grad = np.concatenate(grad_parts + [du], axis=1)  # (m, 21)
            da = np.zeros((m, 18, 21))
            (drb, dnb), (dra, dna) = da_blocks
            da[:, 0:9, 0:9], da[:, 0:9, 18:] = drb, dnb
            da[:, 9:18, 9:18], da[:, 9:18, 18:] = dra, dna
            b = self.b_rev[:, None, None]
            Bq = -b * (a[:, :, None] * grad[:, None, :] + rate[:, None, None] * da)
            Bv = -b * a[:, :, None] * a[:, None, :]
            idx = np.arange(m)
            dq = dq + V.T @ sp.bsr_matrix((Bq, idx, np.arange(m + 1)), shape=(18 * m, 21 * m)) @ P
            dv = dv + V.T @ sp.bsr_matrix((Bv, idx, np.arange(m + 1)), shape=(18 * m, 18 * m)) @ V
        if self.pri:
            n = self.Np(q)
            dd = self.Dp.linear(v)
            rate = np.einsum("ij,ij->i", n, dd)
            b = self.b_pri[:, None, None]
            m = len(self.pri)
            Bq = -b * (n[:, :, None] * dd[:, None, :] + rate[:, None, None] * np.eye(3))
            D = self.Dp.matrix
            dq = dq + D.T @ sp.bsr_matrix((Bq, np.arange(m), np.arange(m + 1)), shape=(3 * m, 3 * m)) @ self.Np.matrix
            dv = dv + block_quadratic(D, -b * n[:, :, None] * n[:, None, :])
            cq, cv = self._couple_jacobians(q, v, n, dd, rate)
            dq, dv = dq + cq, dv + cv
        return dq.tocsr(), dv.tocsr()

    def _couple_jacobians(self, q, v, n, dd, rate) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """(∂/∂q, ∂/∂v) of the prismatic couple b ḋ ½ (S⁻¹w) × rᵢ, w = d × n, on the rigid body that takes it."""
        m, nq = len(self.pri), self.nq
        d = self.Dp(q)
        w = np.cross(d, n)
        blocks = np.arange(m), np.arange(m + 1)
        dq, dv = sp.csr_matrix((nq, nq)), sp.csr_matrix((nq, nq))
        for cols, rigid, on in ((self.cols_pa, self.rigid_pa, self.on_a), (self.cols_pb, self.rigid_pb, self.on_b)):
            if not on.any():
                continue
            a, _g, dr, dw, _u = _spin_rate_derivatives(q, v, cols, rigid, w)
            sel = sp.csr_matrix((np.repeat(on, 9), (np.arange(9 * m), cols.reshape(m, 9).ravel())), shape=(9 * m, nq))
            b = self.b_pri[:, None, None]
            dv = dv + sel.T @ sp.bsr_matrix((b * a[:, :, None] * n[:, None, :], *blocks), shape=(9 * m, 3 * m)) @ (
                self.Dp.matrix
            )
            by_n = b * (a[:, :, None] * dd[:, None, :] + rate[:, None, None] * np.einsum("mik,mkl->mil", dw, _skew(d)))
            by_d = -b * rate[:, None, None] * np.einsum("mik,mkl->mil", dw, _skew(n))
            by_r = b * rate[:, None, None] * dr
            dq = dq + sel.T @ (
                sp.bsr_matrix((by_n, *blocks), shape=(9 * m, 3 * m)) @ self.Np.matrix
                + sp.bsr_matrix((by_d, *blocks), shape=(9 * m, 3 * m)) @ self.Dp.matrix
                + sp.bsr_matrix((by_r, *blocks), shape=(9 * m, 9 * m)) @ sel
            )
        return dq, dv

    def compiled(self) -> list[Family]:
        parts = []
        if self.rev:
            side_a = (_columns(self.cols_a), self.rigid_a.astype(float))
            side_b = (_columns(self.cols_b), self.rigid_b.astype(float))
            parts.append(Family("hinge_damping", (self.N.terms, *side_a, *side_b, self.b_rev)))
        if self.pri:  # the couple on the body force() puts it on (on_a, on_b: a rigid a, else a rigid b)
            cols = np.where(self.on_a[:, None, None] > 0.0, self.cols_pa, self.cols_pb)
            parts.append(Family("slider_damping", (self.Np.terms, self.Dp.terms, self.b_pri, _columns(cols),
                                                   self.on_a + self.on_b)))  # fmt: skip
        return parts


def _skew(x: np.ndarray) -> np.ndarray:
    """Cross-product matrices [x]× of vectors x, shape (m, 3) → (m, 3, 3)."""
    S = np.zeros(x.shape[:-1] + (3, 3))
    S[..., 0, 1], S[..., 0, 2], S[..., 1, 2] = -x[..., 2], x[..., 1], -x[..., 0]
    S[..., 1, 0], S[..., 2, 0], S[..., 2, 1] = x[..., 2], -x[..., 1], x[..., 0]
    return S


class TorsionSpringLaw(ForceLaw):
    """Torsion springs on revolute joints: U = ½k(θ − θ₀)², θ = atan2(s, c).

    With u₁, u₂ ⊥ axis fixed in a and u₁ fixed in b (equal at assembly),
    s = (R_a u₂)·(R_b u₁) and c = (R_a u₁)·(R_b u₁) are bilinear in q.
    """

    name = "torsion_spring"
    element = TorsionSpring
    has_potential = True
    batched = True

    def __init__(self, elements, layout):
        super().__init__(elements, layout)
        joints = []
        for e in elements:
            j = layout.joint_frames.get(e.joint)  # body-frame axes (mbvi.geometry.LinkGeometry)
            if j is None or j.kind != "revolute":
                raise ValueError(f"{e.owner}: joint {e.joint!r} is not a revolute joint")
            joints.append(j)
        n = self.nq
        self.U1 = AffineMap.from_terms([layout.direction(j.a, j.u1_a) for j in joints], n)
        self.U2 = AffineMap.from_terms([layout.direction(j.a, j.u2_a) for j in joints], n)
        self.W1 = AffineMap.from_terms([layout.direction(j.b, j.u1_b) for j in joints], n)
        self.k = np.array([e.stiffness for e in elements])
        self.theta0 = np.array([e.rest_angle for e in elements])

    def angles(self, q):
        w = self.W1(q)
        s = np.einsum("...j,...j->...", self.U2(q), w)
        c = np.einsum("...j,...j->...", self.U1(q), w)
        return np.arctan2(s, c), s, c

    def _dev(self, theta):
        return (theta - self.theta0 + np.pi) % (2 * np.pi) - np.pi

    def potential(self, q):
        theta, _, _ = self.angles(q)
        return 0.5 * np.sum(self.k * self._dev(theta) ** 2, axis=-1)

    def gradient(self, q):
        theta, s, c = self.angles(q)
        u1, u2, w = self.U1(q), self.U2(q), self.W1(q)
        coef = self.k * self._dev(theta) / (s * s + c * c)
        # dθ = (c ds − s dc)/(s²+c²); ds = d(u2·w), dc = d(u1·w)
        a, b = (coef * c)[:, None], (coef * s)[:, None]
        return self.U2.adjoint(a * w) + self.U1.adjoint(-b * w) + self.W1.adjoint(a * u2 - b * u1)

    def hessian(self, q):
        """Analytic ∂²U/∂q² = k ∇θ∇θᵀ + k (θ − θ₀) ∇²θ through the local variables (u₁, u₂, w)."""
        m = len(self.k)
        if getattr(self, "_local", None) is None:  # (9m, nq): rows (u₁, u₂, w) of each instance
            L = sp.vstack([self.U1.matrix, self.U2.matrix, self.W1.matrix]).tocsr()
            perm = (np.arange(3)[None, :, None] * 3 * m + 3 * np.arange(m)[:, None, None] + np.arange(3)).ravel()
            self._local = L[perm]
        theta, s, c = self.angles(q)
        u1, u2, w = self.U1(q), self.U2(q), self.W1(q)
        z = np.zeros_like(w)
        ds = np.concatenate([z, w, u2], axis=1)  # ∇s in (u₁, u₂, w), shape (m, 9)
        dc = np.concatenate([w, z, u1], axis=1)
        I3 = np.broadcast_to(np.eye(3), (m, 3, 3))
        Hs, Hc = np.zeros((m, 9, 9)), np.zeros((m, 9, 9))
        Hs[:, 3:6, 6:], Hs[:, 6:, 3:6] = I3, I3
        Hc[:, :3, 6:], Hc[:, 6:, :3] = I3, I3
        r2 = s * s + c * c
        dth = (c[:, None] * ds - s[:, None] * dc) / r2[:, None]
        o = lambda x, y: x[:, :, None] * y[:, None, :]  # noqa: E731
        cs, c2s2 = (c * s)[:, None, None], (c * c - s * s)[:, None, None]
        hth = (c[:, None, None] * Hs - s[:, None, None] * Hc) / r2[:, None, None] - (
            2 * cs * (o(ds, ds) - o(dc, dc)) + c2s2 * (o(ds, dc) + o(dc, ds))
        ) / (r2**2)[:, None, None]
        B = self.k[:, None, None] * (o(dth, dth) + self._dev(theta)[:, None, None] * hth)
        L = self._local
        return (L.T @ sp.bsr_matrix((B, np.arange(m), np.arange(m + 1)), shape=(9 * m, 9 * m)) @ L).tocsr()

    def compiled(self) -> Family:
        return Family("torsion_spring", (self.U1.terms, self.U2.terms, self.W1.terms, self.k, self.theta0))


@hookimpl
def register_force_laws(register):
    """Register the built-in force laws."""
    for law in (
        GravityLaw,
        SpringLaw,
        DamperLaw,
        DragLaw,
        ExternalForceLaw,
        ExternalTorqueLaw,
        JointDampingLaw,
        TorsionSpringLaw,
    ):
        register(law)
