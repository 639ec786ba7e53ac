"""Finite-difference checkers for user-written derivatives (trep's ``validate_h_dq`` idea).

Force-law and joint authors call these in their tests::

    errors = mbvi.check_force_law(MyLaw(elements, layout), q, v, t)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

__all__ = ["check_force_law", "check_gradient", "check_jacobian"]


def _as_dense(a) -> np.ndarray:
    return a.toarray() if sp.issparse(a) else np.asarray(a, dtype=float)


def check_jacobian(
    fun: Callable[[np.ndarray], np.ndarray],
    jac: np.ndarray | sp.spmatrix,
    x: np.ndarray,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    label: str = "jacobian",
) -> float:
    """Compare an analytic Jacobian with central differences of ``fun`` at ``x``.

    Returns
    -------
    float
        max |J − J_fd| / max(1, max |J_fd|).

    Raises
    ------
    AssertionError
        When the relative error exceeds ``rtol`` (naming the worst entry).
    """
    x = np.asarray(x, dtype=float)
    J = _as_dense(jac)
    f0 = np.atleast_1d(fun(x))
    Jfd = np.empty((len(f0), len(x)))
    h = eps * max(1.0, float(np.max(np.abs(x))))
    for j in range(len(x)):
        xp, xm = x.copy(), x.copy()
        xp[j] += h
        xm[j] -= h
        Jfd[:, j] = (np.atleast_1d(fun(xp)) - np.atleast_1d(fun(xm))) / (2 * h)
    J = J.reshape(Jfd.shape)
    scale = max(1.0, float(np.max(np.abs(Jfd))))
    err = float(np.max(np.abs(J - Jfd))) / scale if J.size else 0.0
    if err > rtol:
        i, j = np.unravel_index(np.argmax(np.abs(J - Jfd)), J.shape)
        raise AssertionError(
            f"{label}: relative error {err:.3g} > {rtol:g} at entry ({i}, {j}): "
            f"analytic {J[i, j]:.6g}, finite difference {Jfd[i, j]:.6g}"
        )
    return err


def check_gradient(
    fun: Callable[[np.ndarray], float],
    grad: np.ndarray,
    x: np.ndarray,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    label: str = "gradient",
) -> float:
    """Compare an analytic gradient of a scalar function with central differences (see :func:`check_jacobian`)."""
    return check_jacobian(lambda y: np.atleast_1d(fun(y)), np.asarray(grad).reshape(1, -1), x, eps, rtol, label)


def check_force_law(
    law, q: np.ndarray, v: np.ndarray | None = None, t: float = 0.0, rtol: float = 1e-5
) -> dict[str, float]:
    """Check every derivative a force law provides against finite differences.

    Checks ``gradient`` against ``potential`` and ``hessian`` against
    ``gradient`` (conservative laws), and ``force_jacobians`` against ``force``
    (non-conservative laws).

    Returns
    -------
    dict
        Relative error per check.
    """
    v = np.zeros_like(q) if v is None else v
    out: dict[str, float] = {}
    name = getattr(law, "name", type(law).__name__)
    if law.has_potential:
        out["gradient"] = check_gradient(law.potential, law.gradient(q), q, rtol=rtol, label=f"{name}.gradient")
        out["hessian"] = check_jacobian(law.gradient, law.hessian(q), q, rtol=rtol, label=f"{name}.hessian")
    if law.has_force:
        dq, dv = law.force_jacobians(q, v, t)
        out["force_dq"] = check_jacobian(lambda x: law.force(x, v, t), dq, q, rtol=rtol, label=f"{name}.dF/dq")
        out["force_dv"] = check_jacobian(lambda x: law.force(q, x, t), dv, v, rtol=rtol, label=f"{name}.dF/dv")
    return out
