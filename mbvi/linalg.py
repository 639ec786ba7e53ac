"""Factorizations of the constraint matrix A = G W Gᵀ (W = M⁻¹ diagonal).

The sparsity of A is the joint graph's: for a chain it is tridiagonal, for a
tree it factors without fill-in. The pattern is fixed at assembly, so the
values of A are computed from G's values with precomputed index pairs (one
gather and one ``bincount``), and the factorization is chosen once:

* dense Cholesky for small systems (fewest Python calls),
* banded Cholesky after a reverse Cuthill–McKee ordering when the band is
  narrow (chains, ladders, beams: linear time),
* sparse LU (SuperLU, minimum-degree ordering) otherwise (trees factor with no
  fill-in).

A matrix that turns out singular (a configuration where constraints become
dependent) is solved in the least-squares sense instead of crashing.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.linalg.lapack import dpbtrf, dpbtrs, dpotrf, dpotrs
from scipy.sparse.csgraph import reverse_cuthill_mckee
from scipy.sparse.linalg import splu

from mbvi import notices
from mbvi.engine.spec import entry_pairs
from mbvi.errors import RedundantConstraintWarning
from mbvi.kernels import SparsePattern

__all__ = ["ConstraintSolver", "Factor"]

DENSE_ALWAYS = 32  # rows: below this a dense factorization has the fewest calls
DENSE_MAX = 160  # rows: above this, a matrix that is not narrow-banded is factored sparse
BAND_MAX = 48  # half-bandwidth up to which the banded Cholesky is used


class Factor:
    """A factorized A = G W Gᵀ; call :meth:`solve`."""

    def __init__(self, kind: str, data, perm: np.ndarray | None = None) -> None:
        self.kind, self.data, self.perm = kind, data, perm

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """Solve A x = rhs, shape (n,)."""
        k = self.kind
        if k == "empty":
            return np.zeros(0)
        if k == "dense":
            return dpotrs(self.data, rhs, lower=1)[0]
        if k == "banded":
            p = self.perm
            if p is None:
                return dpbtrs(self.data, rhs, lower=1)[0]
            x = np.empty_like(rhs)
            x[p] = dpbtrs(self.data, rhs[p], lower=1)[0]
            return x
        if k == "sparse":
            return self.data.solve(rhs)
        # least squares: data is the pseudo-inverse
        return self.data @ rhs


#: a pivot of A's factor below this fraction of its diagonal entry is round-off: A is singular there (dependent
#: constraints), and the least-squares multipliers are taken
PIVOT_FLOOR = 1e-12


def _pivots_hold(pivots: np.ndarray, diag: np.ndarray) -> bool:
    """Whether every pivot of a factor of A stands above :data:`PIVOT_FLOOR` of A's diagonal entry: a factor of an
    exactly singular A often completes with a pivot of round-off size (4e-16 against 4) and solves to a finite,
    meaningless split of the load among dependent constraints (a braced square's rods read 0.4 … 26 N where the
    split is 4.5 N, changing from state to state)."""
    return bool(np.all(pivots > PIVOT_FLOOR * diag))


class ConstraintSolver:
    """Builds and factors A = G W Gᵀ for a fixed pattern of G.

    Parameters
    ----------
    pattern : SparsePattern
        Pattern of G (rows = the constraint rows used in solves).
    winv : ndarray, shape (nq,)
        Inverse masses W = M⁻¹.
    """

    def __init__(self, pattern: SparsePattern, winv: np.ndarray) -> None:
        self.pattern = pattern
        self.n = n = pattern.shape[0]
        self.winv = winv
        self._warned = False
        if n == 0:
            self.kind = "empty"
            return
        rows = pattern.rows
        pa, pb, self._w = entry_pairs(rows, pattern.cols, winv)
        ri, rj = rows[pa], rows[pb]
        self._pa, self._pb = pa, pb
        if n <= DENSE_ALWAYS:
            self._dense(ri, rj)
            return
        ones = sp.csr_matrix((np.ones(len(ri)), (ri, rj)), shape=(n, n))
        perm = reverse_cuthill_mckee(ones, symmetric_mode=True)
        inv = np.empty(n, dtype=np.intp)
        inv[perm] = np.arange(n)
        pi, pj = inv[ri], inv[rj]
        band = int(np.max(np.abs(pi - pj)))
        natural = int(np.max(np.abs(ri - rj)))
        if natural <= band:  # the assembly order is already as narrow: skip the permutation
            perm, pi, pj, band = np.arange(n), ri, rj, natural
        if band <= BAND_MAX:
            self.kind = "banded"
            self.band = band
            lower = pi >= pj
            self._pa, self._pb, self._w = pa[lower], pb[lower], self._w[lower]
            self._target = (pi[lower] - pj[lower]) * n + pj[lower]
            self._size = (band + 1) * n
            self.perm = None if np.array_equal(perm, np.arange(n)) else perm
            return
        if n <= DENSE_MAX:
            self._dense(ri, rj)
            return
        self.kind = "sparse"
        csc = ones.tocsc()
        csc.sum_duplicates()
        csc.sort_indices()
        self._csc = csc
        # position of each (ri, rj) in csc.data
        key = rj.astype(np.int64) * n + ri
        ckeys = np.repeat(np.arange(n), np.diff(csc.indptr)).astype(np.int64) * n + csc.indices
        self._target = np.searchsorted(ckeys, key)
        self._size = len(csc.data)

    def _dense(self, ri: np.ndarray, rj: np.ndarray) -> None:
        self.kind = "dense"
        self._target = ri * self.n + rj
        self._size = self.n * self.n

    def matrix_values(self, gdata: np.ndarray, winv: np.ndarray | None = None) -> np.ndarray:
        """Values of A in the solver's storage from G's values."""
        w = self._w if winv is None else winv[self.pattern.cols[self._pa]]
        return np.bincount(self._target, weights=gdata[self._pa] * gdata[self._pb] * w, minlength=self._size)

    def dense(self, gdata: np.ndarray, winv: np.ndarray | None = None) -> np.ndarray:
        """A = G W Gᵀ as a dense array (for diagnostics and the least-squares fallback)."""
        G = self.pattern.tocsr(gdata)
        return (G.multiply(self.winv if winv is None else winv) @ G.T).toarray()

    def factor(self, gdata: np.ndarray, winv: np.ndarray | None = None) -> Factor:
        """Factor A(G) for Jacobian values ``gdata`` on :attr:`pattern`."""
        if self.kind == "empty":
            return Factor("empty", None)
        vals = self.matrix_values(gdata, winv)
        try:
            if self.kind == "dense":
                diag = vals.reshape(self.n, self.n).diagonal().copy()
                c, info = dpotrf(vals.reshape(self.n, self.n), lower=1, clean=0, overwrite_a=1)
                if info != 0 or not _pivots_hold(np.diagonal(c) ** 2, diag):
                    raise np.linalg.LinAlgError("not positive definite")
                return Factor("dense", c)
            if self.kind == "banded":
                diag = vals.reshape(self.band + 1, self.n)[0].copy()
                c, info = dpbtrf(vals.reshape(self.band + 1, self.n), lower=1, overwrite_ab=1)
                if info != 0 or not _pivots_hold(c[0] ** 2, diag):
                    raise np.linalg.LinAlgError("not positive definite")
                return Factor("banded", c, self.perm)
            A = sp.csc_matrix((vals, self._csc.indices, self._csc.indptr), shape=(self.n, self.n))
            lu = splu(A, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0, options={"SymmetricMode": True})
            if not _pivots_hold(np.abs(lu.U.diagonal()), A.diagonal()[np.argsort(lu.perm_c)]):
                raise np.linalg.LinAlgError("not positive definite")
            return Factor("sparse", lu)
        except (np.linalg.LinAlgError, RuntimeError, ValueError):
            return self._least_squares(gdata, winv)

    def warn_again(self) -> None:
        """Warn at the next singular matrix again (once per run: a System's runs share its solver)."""
        self._warned = False

    def _least_squares(self, gdata: np.ndarray, winv: np.ndarray | None) -> Factor:
        if not self._warned:
            notices.warn(
                "the constraint matrix G M⁻¹ Gᵀ is singular here (dependent constraints); "
                "using least-squares multipliers",
                RedundantConstraintWarning,
            )
            self._warned = True
        return Factor("lstsq", np.linalg.pinv(self.dense(gdata, winv), rcond=1e-12, hermitian=True))
