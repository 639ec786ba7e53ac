"""Dense solves for the engine's Newton steps, written out in loops: LU with partial pivoting and least squares.

The fallbacks (:func:`mbvi.engine.loop._shake_newton`, :func:`mbvi.engine.lieloop._shake_newton`) solve
J Δλ ≈ g with a square J that is singular when constraints are redundant (a planar loop closed in 3-D).
``numpy.linalg.lstsq`` did it, but compiling numba's LAPACK wrapper and its error formatting cost every
machine's first run ~3 s per loop; this is LAPACK's ``gelsy`` in a page: Householder QR with column
pivoting (its column norms downdated, as LAPACK does) of the system with its rows scaled to a largest
entry of 1, the rank where a diagonal of R falls under :data:`RCOND` of the first, and the minimum-norm
solution through a second QR of the kept rows' transpose (a complete orthogonal decomposition); a square
system whose LU with partial pivoting keeps every pivot above :data:`LU_TINY` is solved by that LU (a
third of the work: the fallbacks' usual case, and then the same solution). The rank
test reads R's diagonal, not the singular values numpy's ``lstsq`` reads: on a matrix made to defeat
pivoted QR (Kahan's) it can keep a direction numpy drops.
"""

from __future__ import annotations

import math

import numpy as np

from mbvi.engine.kernels import jit, jit_alloc

__all__ = ["LU_TINY", "RCOND", "lstsq", "lu_factor", "lu_solve"]

#: a pivot of the LU of a square system (rows scaled to a largest entry of 1) under this: solved by QR instead
LU_TINY = 1e-11
#: a diagonal of the pivoted R under RCOND × |R₀₀| ends the rank (rows scaled to a largest entry of 1 first;
#: ~n ε for the engine's n ≤ :data:`mbvi.engine.model.DENSE_NEWTON_MAX` = 300 rows)
RCOND = 1e-13


@jit
def _reflect(C, k, m, col0, ncol, v):
    """Householder reflection zeroing rows k+1 … m−1 of column k, applied to columns col0 … ncol−1.

    C holds the matrix by columns (C[j] is column j, of length ≥ m); v (length ≥ m + 1) keeps the
    reflection for :func:`_apply`, vᵀv in v[m]. Returns α, the column's new diagonal entry.
    """
    s = 0.0
    for i in range(k, m):
        s += C[k, i] * C[k, i]
    norm = math.sqrt(s)
    if norm == 0.0:
        v[m] = 0.0  # the identity
        return 0.0
    alpha = -norm if C[k, k] >= 0.0 else norm
    for i in range(k, m):
        v[i] = C[k, i]
    v[k] -= alpha
    vv = 2.0 * (s - alpha * C[k, k])  # vᵀv = ‖x‖² − 2αx₀ + α²
    v[m] = vv
    if vv == 0.0:
        return alpha
    for j in range(col0, ncol):
        t = 0.0
        for i in range(k, m):
            t += v[i] * C[j, i]
        t *= 2.0 / vv
        for i in range(k, m):
            C[j, i] -= t * v[i]
    return alpha


@jit
def _apply(v, k, m, x):
    """x ← H x for the reflection :func:`_reflect` left in v (rows k … m−1; vᵀv in v[m])."""
    vv = v[m]
    if vv == 0.0:
        return
    t = 0.0
    for i in range(k, m):
        t += v[i] * x[i]
    t *= 2.0 / vv
    for i in range(k, m):
        x[i] -= t * v[i]


@jit
def lu_factor(A, piv, tiny):
    """In-place LU with partial pivoting of a dense square A (L's multipliers below the diagonal, the row
    swaps in ``piv``); False when a pivot is not above ``tiny`` (≥ 0) or not finite."""
    m = A.shape[0]
    for k in range(m):
        p = k
        big = abs(A[k, k])
        for i in range(k + 1, m):
            if abs(A[i, k]) > big:
                big, p = abs(A[i, k]), i
        if not big > tiny or not big < math.inf:
            return False
        piv[k] = p
        if p != k:
            for j in range(m):
                A[k, j], A[p, j] = A[p, j], A[k, j]
        inv = 1.0 / A[k, k]
        for i in range(k + 1, m):
            a = A[i, k] * inv
            A[i, k] = a
            if a != 0.0:
                for j in range(k + 1, m):
                    A[i, j] -= a * A[k, j]
    return True


@jit
def lu_solve(A, piv, b):
    """b ← A⁻¹ b with the factor of :func:`lu_factor`."""
    m = A.shape[0]
    for k in range(m):
        p = piv[k]
        if p != k:
            b[k], b[p] = b[p], b[k]
    for i in range(m):
        for j in range(i):
            b[i] -= A[i, j] * b[j]
    for i in range(m - 1, -1, -1):
        for j in range(i + 1, m):
            b[i] -= A[i, j] * b[j]
        b[i] /= A[i, i]


@jit_alloc
def lstsq(A, b):
    """Minimum-norm least-squares solution of A x ≈ b.

    Parameters
    ----------
    A : ndarray, shape (m, n)
        Any rank; not modified.
    b : ndarray, shape (m,)
        Not modified.

    Returns
    -------
    ndarray, shape (n,)
        The x of least ‖x‖ among those of least ‖D (A x − b)‖, D scaling each row of A to a largest entry of
        1 (for a consistent system, as the engine's are, the least-squares solution of least norm), A's rank
        counted to :data:`RCOND`; zeros for a zero A, or a non-finite entry in A or b.
    """
    m, n = A.shape
    x = np.zeros(n)
    R = np.empty((n, m))  # by columns: R[j] is column j
    c = np.empty(m)
    for i in range(m):  # each row scaled to a largest entry of 1: no overflow in the squares, rows of any size
        big = 0.0
        for j in range(n):
            a = abs(A[i, j])
            if not a < math.inf:  # inf or NaN
                return x
            big = max(big, a)
        if not abs(b[i]) < math.inf:
            return x
        scale = 1.0 / big if big > 0.0 else 1.0
        if not scale < math.inf:  # a subnormal row
            scale = 1.0
        for j in range(n):
            R[j, i] = A[i, j] * scale
        c[i] = b[i] * scale
        if not abs(c[i]) < math.inf:
            return x
    if m == n:  # square and well inside full rank (the usual case): LU
        S = R.T.copy()  # the scaled rows again, row by row
        piv = np.empty(n, np.int64)
        if lu_factor(S, piv, LU_TINY):
            y = c.copy()
            lu_solve(S, piv, y)
            finite = True
            for i in range(n):
                finite = finite and abs(y[i]) < math.inf
            if finite:
                return y
    perm = np.arange(n)
    v = np.zeros(max(m, n) + 1)
    # column norms below the current row, downdated as rows are eliminated (LAPACK's xLAQP2): vn1 the
    # current estimate, vn2 its value when last computed; recomputed when the downdate lost its digits
    vn1, vn2 = np.empty(n), np.empty(n)
    for j in range(n):
        s = 0.0
        for i in range(m):
            s += R[j, i] * R[j, i]
        vn1[j] = vn2[j] = math.sqrt(s)
    tol3z = math.sqrt(2.220446049250313e-16)
    rank = 0
    first = 0.0
    for k in range(min(m, n)):
        p = k  # pivot: the column of largest remaining norm
        for j in range(k + 1, n):
            if vn1[j] > vn1[p]:
                p = j
        if p != k:
            for i in range(m):
                R[k, i], R[p, i] = R[p, i], R[k, i]
            perm[k], perm[p] = perm[p], perm[k]
            vn1[p], vn2[p] = vn1[k], vn2[k]
        s = 0.0  # the pivot column's true norm decides the rank
        for i in range(k, m):
            s += R[k, i] * R[k, i]
        norm = math.sqrt(s)
        if k == 0:
            first = norm
        if not norm > RCOND * first:
            break
        alpha = _reflect(R, k, m, k, n, v)
        _apply(v, k, m, c)
        R[k, k] = alpha
        for i in range(k + 1, m):
            R[k, i] = 0.0
        rank += 1
        for j in range(k + 1, n):
            if vn1[j] != 0.0:
                t = abs(R[j, k]) / vn1[j]
                t = max(0.0, (1.0 + t) * (1.0 - t))
                if t * (vn1[j] / vn2[j]) ** 2 <= tol3z:
                    s = 0.0
                    for i in range(k + 1, m):
                        s += R[j, i] * R[j, i]
                    vn1[j] = vn2[j] = math.sqrt(s)
                else:
                    vn1[j] *= math.sqrt(t)
    r = rank
    if r == 0:
        return x
    y = np.zeros(n)
    if r == n:  # full column rank: back-substitution in R
        for i in range(r - 1, -1, -1):
            s = c[i]
            for j in range(i + 1, r):
                s -= R[j, i] * y[j]
            y[i] = s / R[i, i]
    else:  # the r kept rows [R₁₁ R₁₂] = Lᵀ Q₂ᵀ from the QR of their transpose T = Q₂ L: y = Q₂ L⁻ᵀ c
        T = np.zeros((r, n))  # T by columns: T[i] is row i of [R₁₁ R₁₂]
        for i in range(r):
            for j in range(i, n):
                T[i, j] = R[j, i]
        V = np.zeros((r, n + 1))
        for k in range(r):
            T[k, k] = _reflect(T, k, n, k, r, v)
            for i in range(k + 1, n):
                T[k, i] = 0.0
            for i in range(n + 1):
                V[k, i] = v[i]
        for i in range(r):  # forward substitution with Lᵀ (lower triangular)
            s = c[i]
            for j in range(i):
                s -= T[i, j] * y[j]
            y[i] = s / T[i, i]
        for k in range(r - 1, -1, -1):  # y ← Q₂ y = H₀ H₁ … H_{r−1} y
            _apply(V[k], k, n, y)
    for j in range(n):
        x[perm[j]] = y[j]
    return x
