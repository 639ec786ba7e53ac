"""Vectorized kernels: affine 3-vector maps of q and groups of bilinear rows.

These are the per-step hot path. Nothing here loops over bodies or joints in
Python: assembly turns each joint and force into index and weight arrays, and
every evaluation is a gather, a few array operations and a ``bincount``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from mbvi.engine.spec import ROW_JOINT, ROW_ROTATION, RowTerms

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

    @property
    def terms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(idx, w, c)``: the map as the engine's kernel families take it (:mod:`mbvi.engine.contract`)."""
        return self.idx, self.w, self.c

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


def _flatten(items: Sequence[tuple[Terms, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """COO entries (row = 3·instance + component, col, weight) and constants (3m,) of affine maps."""
    c = np.array([const for _, const in items], dtype=float).reshape(len(items), 3)
    # the terms of every item in order, one (instance, column, weight) row each; zero weights dropped
    flat = [(i, j, w) for i, (terms, _) in enumerate(items) for j, w in terms]
    ijw = np.array(flat, dtype=float).reshape(-1, 3)
    ijw = ijw[ijw[:, 2] != 0.0]
    inst, col = ijw[:, 0].astype(np.intp), ijw[:, 1].astype(np.intp)
    rows = (3 * inst[:, None] + _J3).ravel()
    cols = (col[:, None] + _J3).ravel()
    return rows, cols, np.repeat(ijw[:, 2], 3), c.ravel()


class BilinearRows:
    """All constraint rows of a system, evaluated together.

    Row ``r`` is ``g_r(q) = s_r (U_r(q) · W_r(q)) − k_r`` with affine U_r, W_r.
    The linear parts of all U (and all W) are stored as one COO list, so an
    evaluation of every row of every joint type is two gathers, two
    ``bincount`` calls and a few array operations — whatever the mix of joints.
    Provides values, the sparse Jacobian (on a fixed pattern), the
    multiplier-weighted Hessian Σ λ_r ∇²g_r, and the curvature term Ġ(v) v.
    """

    def __init__(self, rows: Sequence, nq: int) -> None:
        self.nq = nq
        self.n = n = len(rows)
        self.scale = np.array([r.scale for r in rows], dtype=float)
        self.owner = [r.owner for r in rows]
        self.s = np.array([r.s for r in rows], dtype=float)
        self.k = np.array([r.k for r in rows], dtype=float)
        #: kind of each row: ``ROW_JOINT`` or ``ROW_ROTATION`` (a rigid body's orthonormality)
        self.kind = np.array([ROW_ROTATION if r.kind == "rotation" else ROW_JOINT for r in rows], dtype=np.int64)
        self._s3 = np.repeat(self.s, 3)
        ur, uc, uv, self._cu = _flatten([(r.u_terms, r.u_const) for r in rows])
        wr, wc, wv, self._cw = _flatten([(r.w_terms, r.w_const) for r in rows])
        self._ur, self._uc, self._uv = ur, uc, uv
        self._wr, self._wc, self._wv = wr, wc, wv
        self._AU = sp.csr_matrix((uv, (ur, uc)), shape=(3 * n, nq))
        self._AW = sp.csr_matrix((wv, (wr, wc)), shape=(3 * n, nq))
        self._su = self._s3[ur] * uv  # s_r * weight, per U entry
        self._sw = self._s3[wr] * wv
        self._m3 = 3 * n
        # rows whose U and W are the same map (distances, |r_i|² = 1) are evaluated once
        self._same = (
            np.array_equal(ur, wr)
            and np.array_equal(uc, wc)
            and np.array_equal(uv, wv)
            and np.array_equal(self._cu, self._cw)
        )
        raw_rows = ur // 3 if self._same else np.concatenate([ur // 3, wr // 3])
        raw_cols = uc if self._same else np.concatenate([uc, wc])
        key = raw_rows.astype(np.int64) * max(nq, 1) + raw_cols
        ukey, self._dedup = np.unique(key, return_inverse=True)
        self._nnz = len(ukey)
        # the pattern is sorted by (row, col): raw entries need the scatter unless already in that order
        self._needs_dedup = not np.array_equal(ukey, key)
        #: pattern of the constraint Jacobian G (each (row, col) once)
        self.pattern = SparsePattern(ukey // max(nq, 1), ukey % max(nq, 1), (n, nq))

    def roundoff(self, q: np.ndarray, ulps: float = 16.0) -> np.ndarray:
        """Size of the floating-point error in evaluating each row at q, shape (n,).

        g = s (U·W) − k is computed from coordinates of magnitude |q|: its
        round-off scales with Σ (|∂U| |q| + |c_U|)·|W| + |U|·(|∂W| |q| + |c_W|),
        times ``ulps`` units of round-off (16: a generous bound on the evaluation;
        1: each coordinate rounded once, what a converged state carries).
        """
        aq = np.abs(q)
        mu = abs(self._AU) @ aq + np.abs(self._cu)
        mw = abs(self._AW) @ aq + np.abs(self._cw)
        u, w = self._affine(q)
        return ulps * np.finfo(float).eps * np.abs(self.s) * (self._dot3(mu, np.abs(w)) + self._dot3(np.abs(u), mw))

    def _affine(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """U and W, flat (3n,) for a single q."""
        m3 = self._m3
        u = np.bincount(self._ur, weights=self._uv * q[self._uc], minlength=m3) + self._cu
        if self._same:
            return u, u
        w = np.bincount(self._wr, weights=self._wv * q[self._wc], minlength=m3) + self._cw
        return u, w

    def _dot3(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (a * b).reshape(a.shape[:-1] + (self.n, 3)).sum(axis=-1)

    def _many(self, q: np.ndarray, largest: bool) -> np.ndarray:
        """g of every state of q (..., nq), or its max |g_r| with ``largest``, in one compiled pass
        (:mod:`mbvi.engine.rowvalues`: ~1 µs a state where SciPy's sparse products took ~65)."""
        from mbvi.engine.rowvalues import bilinear_values

        flat = bilinear_values(self._AU, self._cu, self._AW, self._cw, self.s, self.k, self._same,
                               q.reshape(-1, self.nq), largest=largest)  # fmt: skip
        return flat.reshape(q.shape[:-1] + (() if largest else (self.n,)))

    def largest(self, q: np.ndarray) -> np.ndarray:
        """max_r |g_r(q)| of every state of q (..., nq), shape (...,)."""
        return self._many(q, largest=True)

    def values(self, q: np.ndarray) -> np.ndarray:
        """g(q), shape (..., n)."""
        if q.ndim == 1:
            u, w = self._affine(q)
            return self.s * self._dot3(u, w) - self.k
        return self._many(q, largest=False)

    def values_and_jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """g(q) (n,) and the Jacobian values on :attr:`pattern` for a single q."""
        u, w = self._affine(q)
        g = self.s * self._dot3(u, w) - self.k
        if self._same:
            raw = 2.0 * self._su * u[self._ur]
        else:
            raw = np.concatenate([self._su * w[self._ur], self._sw * u[self._wr]])
        if self._needs_dedup:
            return g, np.bincount(self._dedup, weights=raw, minlength=self._nnz)
        return g, raw

    def jacobian_data(self, q: np.ndarray) -> np.ndarray:
        """Values of G(q) on :attr:`pattern`."""
        return self.values_and_jacobian(q)[1]

    def _linear(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        m3 = self._m3
        return (
            np.bincount(self._ur, weights=self._uv * v[self._uc], minlength=m3),
            np.bincount(self._wr, weights=self._wv * v[self._wc], minlength=m3),
        )

    def curvature(self, v: np.ndarray) -> np.ndarray:
        """Ġ(q, v) v = d²g/dt² at zero acceleration, shape (n,) (independent of q)."""
        du, dw = self._linear(v)
        return 2.0 * self.s * self._dot3(du, dw)

    def velocity(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """ġ = G(q) v, shape (n,)."""
        u, w = self._affine(q)
        du, dw = self._linear(v)
        return self.s * (self._dot3(du, w) + self._dot3(u, dw))

    def terms(self, active: np.ndarray, roundoff: np.ndarray) -> RowTerms:
        """Rows ``active`` (renumbered 0 … n−1) as the engine reads them, each term with its entry in the
        pattern of those rows (:meth:`SparsePattern.subset_rows`); ``roundoff`` (n,) is theirs."""
        act = np.asarray(active, dtype=np.int64)
        n = len(act)
        new = np.full(self.n, -1, dtype=np.int64)
        new[act] = np.arange(n)
        # slot of each full-pattern entry in the pattern of the selected rows (−1: a row left out)
        keep = new[self.pattern.rows] >= 0
        slot = np.full(len(keep), -1, dtype=np.int64)
        slot[keep] = np.arange(int(keep.sum()))
        raw_slot = slot[self._dedup] if self._needs_dedup else slot
        nu = len(self._ur)

        def part(r, c, v, offset):
            sel = new[r // 3] >= 0
            rr = 3 * new[r[sel] // 3] + r[sel] % 3
            return rr, c[sel], v[sel], (self._s3[r] * v)[sel], raw_slot[offset : offset + len(r)][sel]

        ur, uc, uv, su, upos = part(self._ur, self._uc, self._uv, 0)
        if self._same:
            wr, wc, wv, sw, wpos = ur, uc, uv, su, upos
            su = 2.0 * su
        else:
            wr, wc, wv, sw, wpos = part(self._wr, self._wc, self._wv, nu)
        sel3 = (3 * act[:, None] + np.arange(3)).ravel()
        return RowTerms(
            ur, uc, uv, su, upos, wr, wc, wv, sw, wpos, bool(self._same), self._cu[sel3], self._cw[sel3], self.s[act],
            self.k[act], self.scale[act], np.asarray(roundoff, float), self.kind[act],
        )  # fmt: skip

    def hessian(self, lam: np.ndarray) -> sp.csr_matrix:
        """Σ_r λ_r ∇²g_r, a constant-in-q sparse symmetric matrix (nq, nq)."""
        D = sp.diags(np.repeat(lam * self.s, 3))
        H = self._AU.T @ D @ self._AW
        return (H + H.T).tocsr()
