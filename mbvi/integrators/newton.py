"""Newton's method on KKT systems, for the implicit integrators.

The KKT matrix [[K, B], [C, 0]] is factored once per solve (dense LU for small
systems, sparse LU otherwise) and reused while Newton converges fast
(simplified Newton); it is refactored when the contraction slows down.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from mbvi.errors import LoadError, SolverError

__all__ = ["KKTFactor", "newton_kkt", "solve_kkt"]

DENSE_KKT_MAX = 400


def _dense(a) -> np.ndarray:
    return a.toarray() if sp.issparse(a) else np.asarray(a)


class KKTFactor:
    """A factorization of [[K, B], [C, 0]] (K: n×n, B: n×m, C: m×n)."""

    def __init__(self, K, B, C) -> None:
        n, m = K.shape[0], C.shape[0]
        self.n = n
        if n + m <= DENSE_KKT_MAX:
            A = np.zeros((n + m, n + m))
            A[:n, :n] = _dense(K)
            if m:
                A[:n, n:] = _dense(B)
                A[n:, :n] = _dense(C)
            self._lu = sla.lu_factor(A, check_finite=False)
            self._solve = lambda r: sla.lu_solve(self._lu, r, check_finite=False)
        else:
            A = (
                sp.bmat([[sp.csr_matrix(K), sp.csr_matrix(B)], [sp.csr_matrix(C), None]], format="csc")
                if m
                else sp.csc_matrix(K)
            )
            lu = spla.splu(A)
            self._solve = lu.solve

    def solve(self, r1: np.ndarray, r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Solve for (x, y) with right-hand side (r1, r2)."""
        sol = self._solve(np.concatenate([r1, r2]))
        return sol[: self.n], sol[self.n :]


def solve_kkt(K, B, C, r1: np.ndarray, r2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve [[K, B], [C, 0]] [x; y] = [r1; r2] once."""
    return KKTFactor(K, B, C).solve(r1, r2)


def newton_kkt(
    residual: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    jacobian: Callable[[np.ndarray, np.ndarray, bool], tuple],
    x0: np.ndarray,
    y0: np.ndarray,
    *,
    xtol: float,
    gscale: np.ndarray,
    gtol: float,
    maxiter: int = 40,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Simplified Newton on R₁(x, y) = 0, R₂(x) = 0 with Jacobian [[K, B], [C, 0]].

    Converged when the update |δx|∞ ≤ xtol and max |R₂ / gscale| ≤ gtol. ``jacobian(x, y, refresh)`` is
    called at the start (``refresh`` False: parts that are costly to make, such as finite differences of a
    load, may be those of an earlier solve) and again whenever the contraction slows (``refresh`` True: all
    made at x).

    Returns
    -------
    x, y, iterations

    Raises
    ------
    SolverError
        When it does not converge in ``maxiter`` iterations.
    """
    x, y = x0.copy(), y0.copy()
    factor = None
    prev = np.inf
    refresh = False
    for it in range(1, maxiter + 1):
        r1, r2 = residual(x, y)
        if factor is None:
            try:
                factor = KKTFactor(*jacobian(x, y, refresh))
            except LoadError:  # a load or law raised: its own message
                raise
            except (np.linalg.LinAlgError, RuntimeError, ValueError) as exc:
                raise SolverError(f"singular Newton matrix ({exc})") from exc
        dx, dy = factor.solve(-r1, -r2)
        x += dx
        y += dy
        if not np.all(np.isfinite(x)):
            break
        size = float(np.max(np.abs(dx))) if len(dx) else 0.0
        if size <= xtol:
            _, r2n = residual(x, y)
            if not len(r2n) or float(np.max(np.abs(r2n) / gscale)) <= gtol:
                return x, y, it
        if size > 0.1 * prev:  # contraction too slow: refresh the Jacobian, all of it
            factor = None
            refresh = True
        prev = size
    raise SolverError("Newton iteration on the implicit step did not converge")
