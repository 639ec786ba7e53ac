"""mbvi-quadratic-drag: quadratic aerodynamic drag as an mbvi force-law plugin.

A :class:`QuadraticDrag` element, added to a scene like any built-in force,
pulls a body point against its velocity with the magnitude of high-Reynolds
number air resistance:

    f = −c |v_P| v_P,        c = ½ ρ C_d A   (N s²/m²).

v_P is the world velocity of the body point P. In mbvi's maximal coordinates
every body point is an affine function of the generalized coordinates,
P(q) = x + Σᵢ pᵢ rᵢ (a rigid body's centre of mass x and the columns rᵢ of its
rotation matrix), so v_P = J_P q̇ with a *constant* Jacobian J_P, and the
generalized force is F = J_Pᵀ f. Consequently

* ∂F/∂q = 0 (the force depends on positions only through q̇), and
* ∂F/∂v = J_Pᵀ B J_P with the 3×3 block B = −c (|u| I + u uᵀ / |u|), u = v_P
  (B = 0 at u = 0, where the force is C¹ with zero derivative).

:class:`QuadraticDragLaw` evaluates all instances in one vectorized call with
:class:`mbvi.kernels.AffineMap` (the NumPy methods: statics, diagnostics, the
implicit integrators' Jacobians) and hands the compiled engine a kernel,
:func:`quadratic_drag_force`, with its points' index and weight arrays
(:meth:`QuadraticDragLaw.compiled`): inside mbvi's compiled loop the drag costs
what a built-in force does. It is registered through the
``register_force_laws`` hook and the entry point
``quadratic_drag = "mbvi_quadratic_drag"`` of the group ``mbvi``. The drag is
dissipative: its power F·v = −c Σ |v_P|³ ≤ 0.
"""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
import scipy.sparse as sp

import mbvi
from mbvi.kernels import AffineMap

__all__ = ["QuadraticDrag", "QuadraticDragLaw", "quadratic_drag_force", "register_force_laws", "terminal_speed"]
__version__ = "0.1.0"


def terminal_speed(mass: float, coefficient: float, g: float = 9.81) -> float:
    """Terminal speed √(m g / c) of a body falling under gravity against quadratic drag, m/s.

    Parameters
    ----------
    mass : float
        m, kg.
    coefficient : float
        c, N s²/m² (> 0).
    g : float, default: 9.81
        Gravitational acceleration, m/s².
    """
    return math.sqrt(mass * g / coefficient)


class QuadraticDrag(mbvi.Force):
    """Quadratic air resistance at a body point: f = −c |v_P| v_P.

    Parameters
    ----------
    body : str
        A particle or rigid body (a beam node name works too).
    coefficient : float
        c = ½ ρ C_d A, N s²/m² (≥ 0).
    anchor : array_like, shape (3,), optional
        Body-frame point where the drag acts, m (default: the body origin —
        a particle's position, a rigid body's centre of mass).
    name : str, optional
        Element name (default ``"quadratic-drag:<body>"``; made unique by the scene).

    Raises
    ------
    ValueError
        A negative or non-finite coefficient, or an anchor that is not 3 finite numbers.

    Examples
    --------
    >>> import mbvi
    >>> from mbvi_quadratic_drag import QuadraticDrag
    >>> scene = mbvi.Scene(gravity=(0, 0, -9.81))
    >>> _ = scene.add(mbvi.Particle("ball", mass=1.0, position=(0, 0, 0)))
    >>> _ = scene.add(QuadraticDrag("ball", coefficient=0.1))
    >>> v = mbvi.simulate(scene, t_end=10.0, dt=0.01).velocity("ball")[-1, 2]
    >>> round(float(v), 2)  # −√(m g / c)
    -9.9
    """

    def __init__(self, body: str, coefficient: float, anchor: Any = None, name: str | None = None) -> None:
        self.explicit_name = name is not None
        self.name = name if name is not None else f"quadratic-drag:{body}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"QuadraticDrag: name must be a non-empty string, got {name!r}")
        try:
            c = float(coefficient)
        except (TypeError, ValueError):
            c = math.nan
        if not (math.isfinite(c) and c >= 0.0):
            raise ValueError(
                f"QuadraticDrag {self.name!r}: coefficient must be a finite number ≥ 0, got {coefficient!r}"
            )
        a = np.zeros(3) if anchor is None else np.asarray(anchor, dtype=float).reshape(-1)
        if a.shape != (3,) or not np.all(np.isfinite(a)):
            raise ValueError(f"QuadraticDrag {self.name!r}: anchor must be 3 finite numbers, got {anchor!r}")
        self.body = body
        self.bodies = (body,)
        self.coefficient = c
        self.anchor = a


@numba.njit(cache=True)
def quadratic_drag_force(q, v, t, ints, floats, out):
    """The compiled kernel: adds F = Σᵢ J_Pᵢᵀ (−cᵢ |uᵢ| uᵢ), uᵢ = v_Pᵢ, into ``out`` (mbvi's kernel contract).

    Parameters
    ----------
    q, v : ndarray, (nq,)
        Positions and velocities (q is not used: the drag depends on the velocity only).
    t : float
        Time, s (not used).
    ints : ndarray of int
        ``[m, K, idx…]``: the number of drag points, the terms of each point's affine map, and each term's
        first coordinate (m × K, point by point).
    floats : ndarray
        ``[c…, w…]``: the m coefficients (N s²/m²), then each term's weight (m × K).
    out : ndarray, (nq,)
        The generalized force is added here, N.
    """
    m, K = ints[0], ints[1]
    for i in range(m):
        u0 = u1 = u2 = 0.0  # the point's world velocity v_P = Σ_k w_k v[j_k : j_k + 3]
        for k in range(K):
            w, j = floats[m + i * K + k], ints[2 + i * K + k]
            u0 += w * v[j]
            u1 += w * v[j + 1]
            u2 += w * v[j + 2]
        s = -floats[i] * math.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
        for k in range(K):  # J_Pᵀ f: each term's weight times f on its three coordinates
            w, j = floats[m + i * K + k], ints[2 + i * K + k]
            out[j] += w * s * u0
            out[j + 1] += w * s * u1
            out[j + 2] += w * s * u2


class QuadraticDragLaw(mbvi.ForceLaw):
    """Evaluates every :class:`QuadraticDrag` of a scene in one vectorized call.

    Parameters
    ----------
    elements : list of QuadraticDrag
        All instances in the scene.
    layout : mbvi.layout.Layout
        The coordinate layout; ``layout.point(body, anchor)`` gives each
        drag point as affine terms of q.
    """

    name = "quadratic_drag"
    element = QuadraticDrag
    has_force = True
    velocity_dependent = True

    def __init__(self, elements: list[QuadraticDrag], layout: Any) -> None:
        super().__init__(elements, layout)
        #: the drag points P_i(q), m instances → (m, 3)
        self.P = AffineMap.from_terms([layout.point(e.body, e.anchor) for e in elements], layout.nq)
        #: coefficients c_i, N s²/m², shape (m,)
        self.c = np.array([e.coefficient for e in elements], dtype=float)
        self._support = np.unique(self.P.matrix.tocsr().indices)

    def point_velocities(self, v: np.ndarray) -> np.ndarray:
        """World velocities v_P of the drag points, shape (m, 3), m/s."""
        return self.P.linear(v)

    def force(self, q: np.ndarray, v: np.ndarray, t: float) -> np.ndarray:
        """Generalized force F = Σᵢ J_Pᵢᵀ (−cᵢ |uᵢ| uᵢ), uᵢ = v_Pᵢ; shape (nq,)."""
        u = self.point_velocities(v)
        speed = np.linalg.norm(u, axis=-1)
        return self.P.adjoint(-(self.c * speed)[:, None] * u)

    def force_jacobians(self, q: np.ndarray, v: np.ndarray, t: float) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """(∂F/∂q, ∂F/∂v): zero, and J_Pᵀ B J_P with B = −c (|u| I + u uᵀ/|u|); sparse (nq, nq)."""
        u = self.point_velocities(v)
        speed = np.linalg.norm(u, axis=-1)
        uhat = np.divide(u, speed[:, None], out=np.zeros_like(u), where=speed[:, None] > 0)
        B = -self.c[:, None, None] * speed[:, None, None] * (np.eye(3) + uhat[:, :, None] * uhat[:, None, :])
        m = len(self.c)
        blocks = sp.bsr_matrix((B, np.arange(m), np.arange(m + 1)), shape=(3 * m, 3 * m))
        J = self.P.matrix
        return sp.csr_matrix((self.nq, self.nq)), (J.T @ blocks @ J).tocsr()

    def support(self) -> np.ndarray:
        """Coordinates the force depends on (those of the drag points' bodies)."""
        return self._support

    def compiled(self) -> mbvi.Kernel:
        """The drag as a compiled kernel for mbvi's engine: :func:`quadratic_drag_force` and its parameters.

        ``ints = [m, K, idx…]`` and ``floats = [c…, w…]`` from the points' affine maps (m points of K terms).
        """
        m, K = self.P.w.shape
        ints = np.concatenate([[m, K], self.P.idx.ravel()])
        floats = np.concatenate([self.c, self.P.w.ravel()])
        return mbvi.Kernel(force=quadratic_drag_force, ints=ints, floats=floats, name=self.name)


@mbvi.hookimpl
def register_force_laws(register):
    """Register :class:`QuadraticDragLaw` with mbvi (called once, when the registry is first used)."""
    register(QuadraticDragLaw)
