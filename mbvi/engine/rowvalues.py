"""Constraint values and momenta of many saved states at once, compiled: what a trajectory derives when read.

A trajectory's constraint error is max |g(q)| over every row at every saved state. Through SciPy's sparse
products it cost ~65 µs a state on the 32-link rigid chain (the run itself costs ~25): the products go column by
column through (nq, n_states) arrays. Here one compiled pass per state evaluates each bilinear row
g_r = s_r (U_r·W_r) − k_r from the CSR maps of U and W (:class:`mbvi.kernels.BilinearRows`), ~1 µs a state.
Self-contained (numba's cache follows this file alone).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["angular_momenta", "bilinear_values", "linear_momenta"]


@njit(cache=True, nogil=True)
def _values(up, ui, ud, cu, wp, wi, wd, cw, s, k, same, Q, out, largest):  # pragma: no cover - compiled
    n = len(s)
    for f in range(Q.shape[0]):
        q = Q[f]
        top = 0.0
        for r in range(n):
            acc = 0.0
            for c in range(3):
                row = 3 * r + c
                u = cu[row]
                for e in range(up[row], up[row + 1]):
                    u += ud[e] * q[ui[e]]
                if same:
                    w = u
                else:
                    w = cw[row]
                    for e in range(wp[row], wp[row + 1]):
                        w += wd[e] * q[wi[e]]
                acc += u * w
            g = s[r] * acc - k[r]
            if largest:
                a = abs(g)
                if not a <= top:  # a NaN too, and it stays (max would drop it)
                    top = a if not top != top else top
            else:
                out[f, r] = g
        if largest:
            out[f, 0] = top


def bilinear_values(au, cu: np.ndarray, aw, cw: np.ndarray, s: np.ndarray, k: np.ndarray, same: bool,
                    Q: np.ndarray, largest: bool = False) -> np.ndarray:  # fmt: skip
    """g_r = s_r (U_r·W_r) − k_r at every state of Q (m, nq); shape (m, n), or with ``largest`` max_r |g_r| (m,).

    ``au``, ``aw``: the CSR matrices (3n, nq) of U and W's linear parts, ``cu``, ``cw`` (3n,) their constants,
    ``s``, ``k`` (n,) the rows' factors and offsets; ``same`` when W is U (read once).
    """
    Q = np.ascontiguousarray(Q, dtype=float)
    out = np.empty((Q.shape[0], 1 if largest else len(s)))
    _values(
        au.indptr.astype(np.int64), au.indices.astype(np.int64), au.data, cu,
        aw.indptr.astype(np.int64), aw.indices.astype(np.int64), aw.data, cw, s, k, same, Q, out, largest,
    )  # fmt: skip
    return out[:, 0] if largest else out


@njit(cache=True, nogil=True)
def _angular(Q, V, mass, out):  # pragma: no cover - compiled
    nb = Q.shape[1] // 3
    for f in range(Q.shape[0]):
        x = y = z = 0.0
        for b in range(nb):
            o = 3 * b
            m = mass[b]
            q0, q1, q2 = Q[f, o], Q[f, o + 1], Q[f, o + 2]
            v0, v1, v2 = V[f, o], V[f, o + 1], V[f, o + 2]
            x += m * (q1 * v2 - q2 * v1)
            y += m * (q2 * v0 - q0 * v2)
            z += m * (q0 * v1 - q1 * v0)
        out[f, 0], out[f, 1], out[f, 2] = x, y, z


def angular_momenta(Q: np.ndarray, V: np.ndarray, block_mass: np.ndarray) -> np.ndarray:
    """Σ over 3-blocks b of m_b q_b × v_b at every state of Q, V (m, nq); shape (m, 3)."""
    Q = np.ascontiguousarray(Q, dtype=float)
    V = np.ascontiguousarray(V, dtype=float)
    out = np.empty((Q.shape[0], 3))
    _angular(Q, V, np.ascontiguousarray(block_mass, dtype=float), out)
    return out


@njit(cache=True, nogil=True)
def _linear(V, blocks, mass, out):  # pragma: no cover - compiled
    for f in range(V.shape[0]):
        x = y = z = 0.0
        for i in range(len(blocks)):
            o = blocks[i]
            x += mass[3 * i] * V[f, o]
            y += mass[3 * i + 1] * V[f, o + 1]
            z += mass[3 * i + 2] * V[f, o + 2]
        out[f, 0], out[f, 1], out[f, 2] = x, y, z


def linear_momenta(V: np.ndarray, blocks: np.ndarray, mass: np.ndarray) -> np.ndarray:
    """Σ over the translation blocks (start indices ``blocks``) of m ẋ at every state of V (m, nq); shape (m, 3).
    ``mass`` (3 len(blocks),): the masses of the blocks' coordinates."""
    V = np.ascontiguousarray(V, dtype=float)
    out = np.empty((V.shape[0], 3))
    _linear(V, np.ascontiguousarray(blocks, dtype=np.int64), np.ascontiguousarray(mass, dtype=float), out)
    return out
