"""The engine's profile (skyline) Cholesky of A = G M⁻¹ Gᵀ against LAPACK's dense one.

The factor is right-looking over a column list of the envelope
(:func:`mbvi.engine.model._profile_columns`). Mechanisms ordered by
Cuthill–McKee give envelopes whose first columns grow with the row; these
tests also take envelopes where they do not (a row that reaches far back
after rows that do not), which the column list must handle as well.
"""

from __future__ import annotations

import numpy as np
import pytest

from mbvi.engine import kernels as K
from mbvi.engine import model as M
from mbvi.engine.fields import M as S


def _packed(first: np.ndarray, perm: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """A model array I holding only what the factor and the solves read, and the profile's row starts."""
    n = len(first)
    widths = np.arange(n) - first + 1
    rowstart = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    size = int(widths.sum())
    colptr, colrows, colpos = M._profile_columns(first, rowstart)
    arrays = {
        S.PERM: np.arange(n, dtype=np.int64) if perm is None else perm,
        S.FIRST: first,
        S.ROWSTART: rowstart,
        S.COLPTR: colptr,
        S.COLROWS: colrows,
        S.COLPOS: colpos,
    }
    I = np.zeros(S.count, dtype=np.int64)
    I[S.N], I[S.SIZE_L] = n, size
    for slot, arr in arrays.items():
        I[slot] = len(I)
        I = np.concatenate([I, arr.astype(np.int64)])
    return I, rowstart, size


def _random_envelope(n: int, rng: np.random.Generator, monotone: bool) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric positive definite A whose lower triangle fills each row from first[i] on, and first."""
    first = np.array([max(0, i - rng.integers(0, 6)) for i in range(n)], dtype=np.int64)
    if monotone:
        first = np.minimum.accumulate(first[::-1])[::-1]
    else:
        first[n // 2] = 0  # one row reaching back to the start: first is not monotone
    A = np.zeros((n, n))
    for i in range(n):
        A[i, first[i] : i] = rng.normal(size=i - first[i])
    A = A + A.T
    A += np.diag(np.abs(A).sum(axis=1) + 1.0)  # diagonally dominant: positive definite
    return A, first


@pytest.mark.parametrize("monotone", [True, False])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_profile_cholesky_matches_lapack_and_solves(monotone: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    A, first = _random_envelope(n, rng, monotone)
    I, rowstart, size = _packed(first)
    ab = np.zeros(size)
    for i in range(n):
        ab[rowstart[i] : rowstart[i] + i - first[i] + 1] = A[i, first[i] : i + 1]
    assert K._cholesky_profile(I, ab)
    L = np.linalg.cholesky(A)
    for i in range(n):
        row = ab[rowstart[i] : rowstart[i] + i - first[i] + 1]
        np.testing.assert_allclose(row[:-1], L[i, first[i] : i], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(row[-1], 1.0 / L[i, i], rtol=1e-13)  # the diagonal holds 1/L_ii
        assert np.all(L[i, : first[i]] == 0.0)  # no fill outside the envelope
    rhs = rng.normal(size=n)
    out, tmp = np.zeros(n), np.zeros(n)
    K.solve(I, ab, rhs, out, tmp)
    np.testing.assert_allclose(A @ out, rhs, rtol=1e-12, atol=1e-12)


def _textbook_solve(first: np.ndarray, rowstart: np.ndarray, perm: np.ndarray, ab: np.ndarray, rhs: np.ndarray):
    """L y = P rhs row by row and Lᵀ x = y column by column, every value read back from memory."""
    n = len(first)
    y = np.zeros(n)
    for i in range(n):
        ri = rowstart[i] - first[i]
        s = rhs[perm[i]]
        for k in range(first[i], i):
            s -= ab[ri + k] * y[k]
        y[i] = s * ab[ri + i]
    for i in range(n - 1, -1, -1):
        ri = rowstart[i] - first[i]
        y[i] *= ab[ri + i]
        for k in range(first[i], i):
            y[k] -= ab[ri + k] * y[i]
    out = np.zeros(n)
    out[perm] = y
    return out


@pytest.mark.parametrize("seed", range(6))
def test_solve_is_the_textbook_substitution_bit_for_bit(seed: int) -> None:
    """The solve carries each substitution's newest unknown in a register: the same terms in the same order.

    Envelopes with rows that reach back 0 … 5 columns (a row of the diagonal alone included) and one row
    reaching back to the start, a permuted right-hand side, sizes 1 … 60.
    """
    rng = np.random.default_rng(seed)
    for n in (1, 2, 3, 7, 60):
        A, first = _random_envelope(n, rng, monotone=seed % 2 == 0)
        perm = rng.permutation(n).astype(np.int64)
        I, rowstart, size = _packed(first, perm)
        ab = np.zeros(size)
        for i in range(n):
            ab[rowstart[i] : rowstart[i] + i - first[i] + 1] = A[i, first[i] : i + 1]
        assert K._cholesky_profile(I, ab)
        rhs = rng.normal(size=n)
        out = np.zeros(n)
        K.solve(I, ab, rhs, out, np.zeros(n))
        assert np.array_equal(out, _textbook_solve(first, rowstart, perm, ab, rhs))
        # A is stored in the solve's order: row i of A z = rhs[perm[i]], z[i] = out[perm[i]]
        np.testing.assert_allclose(A @ out[perm], rhs[perm], rtol=1e-11, atol=1e-11)


def test_profile_cholesky_reports_an_indefinite_matrix() -> None:
    A = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and −1
    I, _, _ = _packed(np.array([0, 0], dtype=np.int64))
    ab = np.array([A[0, 0], A[1, 0], A[1, 1]])
    assert not K._cholesky_profile(I, ab)


def test_column_list_of_an_envelope() -> None:
    """Column j lists the rows k > j with first[k] ≤ j, ascending, and where L[k, j] is stored."""
    first = np.array([0, 0, 1, 0, 3], dtype=np.int64)
    _, rowstart, _ = _packed(first)
    colptr, colrows, colpos = M._profile_columns(first, rowstart)
    columns = [list(colrows[colptr[j] : colptr[j + 1]]) for j in range(5)]
    assert columns == [[1, 3], [2, 3], [3], [4], []]
    for j in range(5):
        for a in range(colptr[j], colptr[j + 1]):
            k = colrows[a]
            assert colpos[a] == rowstart[k] - first[k] + j
