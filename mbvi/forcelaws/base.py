"""The force-law interface for plugin authors.

A force law evaluates *all instances* of one force element type in one
vectorized call. Register it with the ``register_force_laws`` hook::

    class QuadraticDragLaw(mbvi.ForceLaw):
        name = "quadratic_drag"
        element = QuadraticDrag          # the class users add to a Scene
        velocity_dependent = True

        def __init__(self, elements, layout): ...
        def force(self, q, v, t): ...    # generalized force, shape (nq,)

A conservative law implements :meth:`ForceLaw.potential` and
:meth:`ForceLaw.gradient` (and :meth:`ForceLaw.hessian` for implicit
integrators and statics; the default is a finite difference of the gradient).
A non-conservative law implements :meth:`ForceLaw.force` and, optionally,
:meth:`ForceLaw.force_jacobians`. Check your derivatives with
:func:`mbvi.check_force_law`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from mbvi.engine.contract import Kernel
    from mbvi.layout import Layout

__all__ = ["ForceLaw"]


class ForceLaw:
    """Abstract base class of force laws.

    Class attributes
    ----------------
    name : str
        Registered name (``mbvi.force_laws()`` lists them).
    element : type
        The :class:`mbvi.forces.Force` subclass this law evaluates.
    has_potential : bool
        True when the law has a potential energy U(q) (conservative part).
    has_force : bool
        True when the law contributes a non-conservative generalized force.
    velocity_dependent : bool
        True when :meth:`force` depends on v (dampers, drag).
    batched : bool
        True when :meth:`potential` accepts q of shape (..., nq).

    Parameters
    ----------
    elements : list
        All instances of :attr:`element` in the scene.
    layout : mbvi.layout.Layout
        Coordinate layout: ``layout.point(body, anchor)`` and
        ``layout.direction(body, d)`` give affine maps of q
        (see :class:`mbvi.kernels.AffineMap`), ``layout.joint_frames[name]`` a
        joint's anchors and axes in the body frames
        (:class:`mbvi.geometry.LinkGeometry`), ``layout.joints`` the joints themselves.
    """

    name: ClassVar[str] = ""
    element: ClassVar[type] = object
    has_potential: ClassVar[bool] = False
    has_force: ClassVar[bool] = False
    velocity_dependent: ClassVar[bool] = False
    batched: ClassVar[bool] = False

    def __init__(self, elements: list, layout: Layout) -> None:
        self.elements = elements
        self.layout = layout
        self.nq = layout.nq

    # conservative part -----------------------------------------------------------------------
    def potential(self, q: np.ndarray) -> float | np.ndarray:
        """Potential energy U(q), J. Shape () (or (...,) for batched q when :attr:`batched`)."""
        return np.zeros(q.shape[:-1]) if q.ndim > 1 else 0.0

    def gradient(self, q: np.ndarray) -> np.ndarray:
        """∂U/∂q, shape (nq,)."""
        return np.zeros(self.nq)

    def gradient_batch(self, Q: np.ndarray) -> np.ndarray:
        """∂U/∂q for a batch of configurations, shape (B, nq) → (B, nq). Default: a loop over :meth:`gradient`."""
        return np.array([self.gradient(q) for q in Q]).reshape(Q.shape)

    def force_batch(self, Q: np.ndarray, V: np.ndarray, t: float) -> np.ndarray:
        """:meth:`force` for a batch, shape (B, nq). Default: a loop over :meth:`force`."""
        return np.array([self.force(q, v, t) for q, v in zip(Q, V, strict=True)]).reshape(Q.shape)

    def hessian(self, q: np.ndarray) -> sp.spmatrix:
        """∂²U/∂q², sparse (nq, nq). Default: central differences of :meth:`gradient`."""
        if not self.has_potential:
            return sp.csr_matrix((self.nq, self.nq))
        return _fd_jacobian(self.gradient, q, self.support())

    # non-conservative part -------------------------------------------------------------------
    def force(self, q: np.ndarray, v: np.ndarray, t: float) -> np.ndarray:
        """Generalized non-conservative force F(q, v, t), shape (nq,)."""
        return np.zeros(self.nq)

    def force_jacobians(self, q: np.ndarray, v: np.ndarray, t: float) -> tuple[sp.spmatrix, sp.spmatrix]:
        """(∂F/∂q, ∂F/∂v), sparse (nq, nq) each. Default: central differences of :meth:`force`."""
        if not self.has_force:
            z = sp.csr_matrix((self.nq, self.nq))
            return z, z
        sup = self.support()
        dq = _fd_jacobian(lambda x: self.force(x, v, t), q, sup)
        dv = (
            _fd_jacobian(lambda x: self.force(q, x, t), v, sup)
            if self.velocity_dependent
            else sp.csr_matrix((self.nq, self.nq))
        )
        return dq, dv

    def work(self, q: np.ndarray, t: float) -> float:
        """Work potential W(q) of position-independent loads (W = f·x), J; used by statics."""
        return 0.0

    def frequencies(self) -> np.ndarray | None:
        """Estimated natural angular frequency of each instance, rad/s, shape (m,), or None.

        Used only to explain an unstable run: an explicit step needs dt < 2/ω.
        """
        return None

    def support(self) -> np.ndarray:
        """Indices of the coordinates this law depends on (default: all)."""
        return np.arange(self.nq)

    # compiled path ---------------------------------------------------------------------------
    def compiled(self) -> dict | Kernel | list | None:
        """This law in the compiled engine: its instances in the engine's kernel families, its own kernels, or
        None (the default).

        Return ``{family: arrays}`` with a family of :data:`mbvi.engine.contract.FAMILIES` (e.g.
        ``{"spring": ((idx, w, c), stiffness, rest_length)}`` for a set of linear springs between affine points,
        or ``{"point_force": ((idx, w, c), f)}`` for constant world forces); or an :class:`mbvi.Kernel` (or a
        list of them) whose numba-compilable functions ``kernel(q, v, t, ints, floats, out)`` add the force
        (role ``force``, when :attr:`has_force`) and ∇U (role ``gradient``, when :attr:`has_potential`) into
        ``out`` (docs/plugins-force-law.md, section 8). A role the law declares but no kernel gives is its NumPy
        method called from the compiled loop; a kernel for a role the law does not declare is a ``ValueError``.
        A law that returns None runs inside the compiled loop too: its NumPy ``force`` and ``gradient`` are
        called back, one Python call per evaluation (the log says so once).
        """
        return None


def _fd_jacobian(fun, x: np.ndarray, cols: np.ndarray, eps: float = 1e-6) -> sp.csr_matrix:
    n = len(x)
    out_rows, out_cols, out_vals = [], [], []
    scale = max(1.0, float(np.max(np.abs(x)))) if n else 1.0
    for j in cols:
        h = eps * scale
        xp = x.copy()
        xp[j] += h
        fp = fun(xp)
        xp[j] -= 2 * h
        fm = fun(xp)
        d = (fp - fm) / (2 * h)
        nz = np.nonzero(d)[0]
        out_rows.append(nz)
        out_cols.append(np.full(len(nz), j))
        out_vals.append(d[nz])
    if not out_rows:
        return sp.csr_matrix((n, n))
    return sp.csr_matrix((np.concatenate(out_vals), (np.concatenate(out_rows), np.concatenate(out_cols))), shape=(n, n))
