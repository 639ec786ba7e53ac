"""Newton's method on sparse KKT systems, for the implicit integrators and statics."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from mbvi.errors import SolverError

__all__ = ["newton_kkt", "solve_kkt"]

DENSE_KKT_MAX = 400


def solve_kkt(
    K: sp.spmatrix, B: sp.spmatrix, C: sp.spmatrix, r1: np.ndarray, r2: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Solve [[K, B], [C, 0]] [x; y] = [r1; r2] (sparse LU, or dense for small systems)."""
    n, m = K.shape[0], C.shape[0]
    A = sp.bmat([[K, B], [C, None]], format="csc") if m else sp.csc_matrix(K)
    rhs = np.concatenate([r1, r2])
    try:
        if n + m <= DENSE_KKT_MAX:
            sol = sla.solve(A.toarray(), rhs, check_finite=False)
        else:
            sol = spla.splu(A).solve(rhs)
    except (np.linalg.LinAlgError, RuntimeError, ValueError):
        sol = sla.lstsq(A.toarray(), rhs, check_finite=False)[0]
    return sol[:n], sol[n:]


def newton_kkt(
    residual: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    jacobian: Callable[[np.ndarray, np.ndarray], tuple[sp.spmatrix, sp.spmatrix, sp.spmatrix]],
    x0: np.ndarray,
    y0: np.ndarray,
    *,
    xtol: float,
    gscale: np.ndarray,
    gtol: float,
    maxiter: int = 40,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Newton on R₁(x, y) = 0, R₂(x) = 0 with Jacobian [[K, B], [C, 0]].

    Converged when the Newton update |δx|∞ ≤ xtol and max |R₂ / gscale| ≤ gtol.

    Returns
    -------
    x, y, iterations
    """
    x, y = x0.copy(), y0.copy()
    for it in range(1, maxiter + 1):
        r1, r2 = residual(x, y)
        K, B, C = jacobian(x, y)
        dx, dy = solve_kkt(K, B, C, -r1, -r2)
        x += dx
        y += dy
        if not np.all(np.isfinite(x)):
            break
        small = float(np.max(np.abs(dx))) <= xtol if len(dx) else True
        if small:
            _, r2n = residual(x, y)
            if not len(r2n) or float(np.max(np.abs(r2n) / gscale)) <= gtol:
                return x, y, it
    raise SolverError("Newton iteration on the implicit step did not converge", suggested_dt=None)
