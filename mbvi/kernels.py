"""Vectorized kernels: affine 3-vector maps of q and groups of bilinear rows.

These are the per-step hot path. Nothing here loops over bodies or joints in
Python: assembly turns each joint and force into index and weight arrays, and
every evaluation is a gather, a few array operations and a ``bincount``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

__all__ = ["AffineMap", "BilinearRows", "SparsePattern"]

Terms = list[tuple[int, float]]
_J3 = np.arange(3)


class AffineMap:
    """``m`` affine maps q ↦ ℝ³: ``V_i(q) = Σ_k w[i,k] q[idx[i,k] : idx[i,k]+3] + c[i]``.

    Parameters
    ----------
    idx : ndarray of int, shape (m, K)
        Start index of each term's 3-block in q (padding: any index with weight 0).
    w : ndarray, shape (m, K)
        Term weights.
    c : ndarray, shape (m, 3)
        Constants.
    nq : int
        Number of generalized coordinates.
    """

    def __init__(self, idx: np.ndarray, w: np.ndarray, c: np.ndarray, nq: int) -> None:
        self.idx = np.asarray(idx, dtype=np.intp)
        self.w = np.asarray(w, dtype=float)
        self.c = np.asarray(c, dtype=float)
        self.nq = nq
        self.m, self.K = self.w.shape
        self.cols = (self.idx[:, :, None] + _J3).reshape(self.m, -1)  # (m, 3K)
        self._wcols = np.repeat(self.w, 3, axis=1)  # (m, 3K)
        self._flat_cols = self.cols.ravel()
        self._matrix: sp.csr_matrix | None = None

    @classmethod
    def from_terms(cls, items: Sequence[tuple[Terms, np.ndarray]], nq: int) -> AffineMap:
        """Build from per-instance ``(terms, const)`` pairs (assembly time only)."""
        m = len(items)
        K = max((len(t) for t, _ in items), default=0)
        idx = np.zeros((m, K), dtype=np.intp)
        w = np.zeros((m, K))
        c = np.zeros((m, 3))
        for i, (terms, const) in enumerate(items):
            for k, (j, wt) in enumerate(terms):
                idx[i, k], w[i, k] = j, wt
            c[i] = const
        return cls(idx, w, c, nq)

    def linear(self, q: np.ndarray) -> np.ndarray:
        """The linear part applied to q (e.g. to a velocity), shape (..., m, 3)."""
        if self.K == 0:
            return np.zeros(q.shape[:-1] + (self.m, 3))
        blocks = q[..., self.cols].reshape(q.shape[:-1] + (self.m, self.K, 3))
        return np.einsum("...mkj,mk->...mj", blocks, self.w)

    def __call__(self, q: np.ndarray) -> np.ndarray:
        """Evaluate at q of shape (..., nq); returns shape (..., m, 3)."""
        return self.linear(q) + self.c

    def adjoint(self, f: np.ndarray) -> np.ndarray:
        """Generalized force Σ_i (∂V_i/∂q)ᵀ f_i of per-instance vectors f, shape (m, 3) → (nq,)."""
        if self.K == 0:
            return np.zeros(self.nq)
        vals = (self._wcols.reshape(self.m, self.K, 3) * f[:, None, :]).ravel()
        return np.bincount(self._flat_cols, weights=vals, minlength=self.nq)

    @property
    def matrix(self) -> sp.csr_matrix:
        """The constant Jacobian ∂V/∂q as a sparse matrix, shape (3m, nq)."""
        if self._matrix is None:
            rows = (np.arange(self.m)[:, None, None] * 3 + _J3[None, None, :]) * np.ones((1, self.K, 1), dtype=np.intp)
            self._matrix = sp.csr_matrix(
                (np.repeat(self.w[:, :, None], 3, axis=2).ravel(), (rows.ravel(), self.cols.ravel())),
                shape=(3 * self.m, self.nq),
            )
        return self._matrix


class SparsePattern:
    """A fixed COO sparsity pattern with fast products for changing values.

    Duplicated (row, col) pairs are allowed; their values add up.
    """

    def __init__(self, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> None:
        self.rows = np.asarray(rows, dtype=np.intp)
        self.cols = np.asarray(cols, dtype=np.intp)
        self.shape = shape

    def matvec(self, data: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Return ``A @ x``."""
        return np.bincount(self.rows, weights=data * x[self.cols], minlength=self.shape[0])

    def rmatvec(self, data: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Return ``A.T @ y``."""
        return np.bincount(self.cols, weights=data * y[self.rows], minlength=self.shape[1])

    def tocsr(self, data: np.ndarray) -> sp.csr_matrix:
        """The matrix as ``scipy.sparse.csr_matrix`` (duplicates summed)."""
        return sp.csr_matrix((data, (self.rows, self.cols)), shape=self.shape)

    def subset_rows(self, keep: np.ndarray) -> tuple[SparsePattern, np.ndarray]:
        """Pattern restricted to rows ``keep`` (renumbered) and the entry mask used."""
        newrow = np.full(self.shape[0], -1, dtype=np.intp)
        newrow[keep] = np.arange(len(keep))
        mask = newrow[self.rows] >= 0
        return SparsePattern(newrow[self.rows[mask]], self.cols[mask], (len(keep), self.shape[1])), mask


class _Group:
    """Rows sharing a term structure: ``g = s (U·W) − k``."""

    def __init__(self, U: AffineMap, W: AffineMap, s: np.ndarray, k: np.ndarray, rows: np.ndarray) -> None:
        self.U, self.W, self.s, self.k, self.rows = U, W, s, k, rows

    def values(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        u = self.U(q)
        w = self.W(q)
        return self.s * np.einsum("...j,...j->...", u, w) - self.k, u, w

    def jacobian_data(self, u: np.ndarray, w: np.ndarray) -> np.ndarray:
        # d g / d (U-term k, component j) = s * w_k * W_j, and symmetrically
        du = (self.s[:, None, None] * self.U.w[:, :, None]) * w[:, None, :]
        dw = (self.s[:, None, None] * self.W.w[:, :, None]) * u[:, None, :]
        return np.concatenate([du.reshape(len(self.s), -1), dw.reshape(len(self.s), -1)], axis=1).ravel()


class BilinearRows:
    """All constraint rows of a system, grouped by term structure and evaluated vectorized.

    Row ``r`` is ``g_r(q) = s_r (U_r(q) · W_r(q)) − k_r`` with affine U_r, W_r.
    Provides values, the sparse Jacobian (on a fixed pattern), the
    multiplier-weighted Hessian Σ λ_r ∇²g_r, and the curvature term Ġ(v) v.
    """

    def __init__(self, rows: Sequence, nq: int) -> None:
        self.nq = nq
        self.n = len(rows)
        self.scale = np.array([r.scale for r in rows], dtype=float) if rows else np.zeros(0)
        self.owner = [r.owner for r in rows]
        buckets: dict[tuple[int, int], list[int]] = {}
        for i, r in enumerate(rows):
            buckets.setdefault((len(r.u_terms), len(r.w_terms)), []).append(i)
        self.groups: list[_Group] = []
        prow, pcol = [], []
        for (_, _), members in sorted(buckets.items()):
            members_arr = np.asarray(members, dtype=np.intp)
            U = AffineMap.from_terms([(rows[i].u_terms, rows[i].u_const) for i in members], nq)
            W = AffineMap.from_terms([(rows[i].w_terms, rows[i].w_const) for i in members], nq)
            s = np.array([rows[i].s for i in members])
            k = np.array([rows[i].k for i in members])
            grp = _Group(U, W, s, k, members_arr)
            self.groups.append(grp)
            ncol = 3 * (U.K + W.K)
            prow.append(np.repeat(members_arr, ncol))
            pcol.append(np.concatenate([U.cols, W.cols], axis=1).ravel())
        rr = np.concatenate(prow) if prow else np.zeros(0, dtype=np.intp)
        cc = np.concatenate(pcol) if pcol else np.zeros(0, dtype=np.intp)
        #: pattern of the constraint Jacobian G (duplicates add)
        self.pattern = SparsePattern(rr, cc, (self.n, nq))
        self._single = len(self.groups) == 1 and np.array_equal(self.groups[0].rows, np.arange(self.n))

    def _scatter(self, parts: list[np.ndarray], batch_shape: tuple[int, ...]) -> np.ndarray:
        if self._single:
            return parts[0]
        out = np.empty(batch_shape + (self.n,))
        for grp, p in zip(self.groups, parts, strict=True):
            out[..., grp.rows] = p
        return out

    def values(self, q: np.ndarray) -> np.ndarray:
        """g(q), shape (..., n)."""
        return self._scatter([grp.values(q)[0] for grp in self.groups], q.shape[:-1])

    def values_and_jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """g(q) (n,) and the Jacobian values on :attr:`pattern` for a single q."""
        gs, data = [], []
        for grp in self.groups:
            g, u, w = grp.values(q)
            gs.append(g)
            data.append(grp.jacobian_data(u, w))
        g = self._scatter(gs, ())
        return g, (np.concatenate(data) if data else np.zeros(0))

    def jacobian_data(self, q: np.ndarray) -> np.ndarray:
        """Values of G(q) on :attr:`pattern`."""
        return self.values_and_jacobian(q)[1]

    def curvature(self, v: np.ndarray) -> np.ndarray:
        """Ġ(q, v) v = d²g/dt² at zero acceleration, shape (n,) (independent of q)."""
        parts = [2.0 * grp.s * np.einsum("...j,...j->...", grp.U.linear(v), grp.W.linear(v)) for grp in self.groups]
        return self._scatter(parts, v.shape[:-1])

    def velocity(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """ġ = G(q) v, shape (n,)."""
        parts = []
        for grp in self.groups:
            u, w = grp.U(q), grp.W(q)
            parts.append(
                grp.s
                * (np.einsum("...j,...j->...", grp.U.linear(v), w) + np.einsum("...j,...j->...", u, grp.W.linear(v)))
            )
        return self._scatter(parts, q.shape[:-1])

    def hessian(self, lam: np.ndarray) -> sp.csr_matrix:
        """Σ_r λ_r ∇²g_r(q), a constant-in-q sparse symmetric matrix (nq, nq)."""
        rows, cols, vals = [], [], []
        for grp in self.groups:
            if grp.U.K == 0 or grp.W.K == 0:
                continue
            coef = lam[grp.rows] * grp.s  # (m,)
            # block (iu_k, iw_l) += coef * wu_k * ww_l * I3, plus its transpose
            wu, ww = grp.U.w, grp.W.w
            val = coef[:, None, None] * wu[:, :, None] * ww[:, None, :]  # (m, KU, KW)
            iu = np.broadcast_to(grp.U.idx[:, :, None], val.shape)
            iw = np.broadcast_to(grp.W.idx[:, None, :], val.shape)
            for j in range(3):
                rows += [iu.ravel() + j, iw.ravel() + j]
                cols += [iw.ravel() + j, iu.ravel() + j]
                vals += [val.ravel(), val.ravel()]
        if not rows:
            return sp.csr_matrix((self.nq, self.nq))
        return sp.csr_matrix(
            (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(self.nq, self.nq)
        )
