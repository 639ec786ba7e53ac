"""The compiled engine's model: a :class:`mbvi.System` flattened into constant arrays.

Nothing here changes during a run (MuJoCo's ``mjModel``): index and weight
arrays of the constraint rows, of the factorization of A = G M⁻¹ Gᵀ and of
every force law's kernel. Run state (multipliers, factorizations, buffers)
lives in a per-run workspace inside the compiled loop.

A force law takes part in the compiled path by expressing its instances in
one of the engine's **kernel families** (see :data:`FAMILIES`): the built-in
laws do so here; a plugin law does so by returning ``{family: arrays}`` from
:meth:`mbvi.ForceLaw.compiled`. A law that returns ``None`` keeps the NumPy
path for the whole system (correct, slower, and logged once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import reverse_cuthill_mckee

from mbvi.engine.fields import LT, M
from mbvi.forcelaws import builtin as B
from mbvi.forcelaws.base import ForceLaw
from mbvi.kernels import AffineMap

__all__ = ["FAMILIES", "build", "family_terms"]

log = logging.getLogger("mbvi")

#: entries of the profile (envelope) of the Cholesky factor beyond which the NumPy path's sparse LU is used
PROFILE_MAX = 2_000_000
#: rows up to which SHAKE's full-Newton fallback runs densely inside the compiled loop
DENSE_NEWTON_MAX = 300

#: kernel families: name -> the arrays a contribution gives (maps are (idx, w, c) triples)
FAMILIES: dict[str, tuple[str, ...]] = {
    "gravity": ("gvec",),
    "spring": ("map", "stiffness", "rest_length"),
    "torsion_spring": ("u1", "u2", "w1", "stiffness", "rest_angle"),
    "damper": ("map", "damping"),
    "drag": ("map", "coefficient"),
    "point_force": ("map", "force"),
    "torque": ("columns", "torque"),
    "hinge_damping": ("axis", "columns_a", "rigid_a", "columns_b", "rigid_b", "coefficient"),
    "slider_damping": ("axis", "map", "coefficient"),
    "bending": ("edge_a", "edge_b", "stiffness"),
}


def _map(m: AffineMap) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return m.idx, m.w, m.c


def _constant(elements: list, attr: str) -> bool:
    return not any(callable(getattr(e, attr)) for e in elements)


def _columns(cols: np.ndarray) -> np.ndarray:
    return np.asarray(cols, dtype=np.int64).reshape(len(cols), 9)


def _gravity(law: B.GravityLaw) -> dict:
    return {"gravity": (law.gvec,)}


def _spring(law: B.SpringLaw) -> dict:
    return {"spring": (_map(law.D), law.k, law.L0)}


def _torsion(law: B.TorsionSpringLaw) -> dict:
    return {"torsion_spring": (_map(law.U1), _map(law.U2), _map(law.W1), law.k, law.theta0)}


def _damper(law: B.DamperLaw) -> dict:
    return {"damper": (_map(law.D), law.c)}


def _drag(law: B.DragLaw) -> dict:
    return {"drag": (_map(law.P), law.c)}


def _point_force(law: B.ExternalForceLaw) -> dict | None:
    if not _constant(law.elements, "force"):
        return None
    f = np.array([np.asarray(e.force, dtype=float) for e in law.elements]).reshape(-1, 3)
    return {"point_force": (_map(law.P), f)}


def _torque(law: B.ExternalTorqueLaw) -> dict | None:
    if not _constant(law.elements, "torque"):
        return None
    tau = np.array([np.asarray(e.torque, dtype=float) for e in law.elements]).reshape(-1, 3)
    return {"torque": (_columns(law.cols), tau)}


def _joint_damping(law: B.JointDampingLaw) -> dict:
    out: dict = {}
    if law.rev:
        out["hinge_damping"] = (
            _map(law.N),
            _columns(law.cols_a),
            law.rigid_a.astype(float),
            _columns(law.cols_b),
            law.rigid_b.astype(float),
            law.b_rev,
        )
    if law.pri:
        out["slider_damping"] = (_map(law.Np), _map(law.Dp), law.b_pri)
    return out


_BUILTIN: dict[type, Callable[[ForceLaw], dict | None]] = {
    B.GravityLaw: _gravity,
    B.SpringLaw: _spring,
    B.TorsionSpringLaw: _torsion,
    B.DamperLaw: _damper,
    B.DragLaw: _drag,
    B.ExternalForceLaw: _point_force,
    B.ExternalTorqueLaw: _torque,
    B.JointDampingLaw: _joint_damping,
}


def family_terms(law: ForceLaw) -> dict | None:
    """A law's contribution to the compiled kernels, or None when it has none (NumPy path)."""
    make = _BUILTIN.get(type(law))
    return make(law) if make is not None else law.compiled()


# ---------------------------------------------------------------------------------------- forces
def _stack_maps(maps: list[tuple]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Concatenate affine maps (idx, w, c), padding the term axis with zero weights."""
    K = max([1] + [m[0].shape[1] for m in maps])
    idx, w, c = [np.zeros((0, K), np.int64)], [np.zeros((0, K))], [np.zeros((0, 3))]
    for i, wi, ci in maps:
        m = len(wi)
        pad = K - wi.shape[1]
        idx.append(np.pad(np.asarray(i, np.int64).reshape(m, -1), ((0, 0), (0, pad))))
        w.append(np.pad(np.asarray(wi, float).reshape(m, -1), ((0, 0), (0, pad))))
        c.append(np.asarray(ci, float).reshape(m, 3))
    return np.concatenate(idx), np.concatenate(w), np.concatenate(c)


def _cat(parts: list, shape: tuple, dtype=float) -> np.ndarray:
    if not parts:
        return np.zeros(shape, dtype)
    return np.ascontiguousarray(np.concatenate([np.asarray(p, dtype).reshape((-1, *shape[1:])) for p in parts]))


class _Packer:
    """Collects the model's arrays into the flat ``I`` (int64) and ``F`` (float64) with a header of slots."""

    def __init__(self) -> None:
        self.head = np.zeros(M.count, dtype=np.int64)
        self.ints: list[np.ndarray] = []
        self.floats: list[np.ndarray] = []
        self.ni = M.count
        self.nf = 0

    def set(self, slot: int, value: int) -> None:
        self.head[slot] = int(value)

    def int_array(self, slot: int, a) -> None:
        a = np.ascontiguousarray(a, dtype=np.int64).ravel()
        self.head[slot] = self.ni
        self.ints.append(a)
        self.ni += len(a)

    def float_array(self, slot: int, a) -> None:
        a = np.ascontiguousarray(a, dtype=float).ravel()
        self.head[slot] = self.nf
        self.floats.append(a)
        self.nf += len(a)

    def affine(self, prefix: str, m: tuple) -> None:
        idx, w, c = m
        base = getattr(M, prefix + "_I")  # slots _I, _W, _C, _M, _K are consecutive
        self.int_array(base, idx)
        self.float_array(base + 1, w)
        self.float_array(base + 2, c)
        self.set(base + 3, len(w))
        self.set(base + 4, w.shape[1])

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        I = np.concatenate([self.head, *self.ints]) if self.ints else self.head.copy()
        F = np.concatenate(self.floats) if self.floats else np.zeros(0)
        return I, np.ascontiguousarray(F)


def _pack_forces(pk: _Packer, nq: int, terms: list[dict], has_forces: bool, has_velocity_forces: bool) -> None:
    got: dict[str, list[tuple]] = {name: [] for name in FAMILIES}
    for contribution in terms:
        for family, arrays in contribution.items():
            if family not in FAMILIES:
                raise ValueError(f"unknown compiled-kernel family {family!r}; known: {', '.join(FAMILIES)}")
            got[family].append(arrays)
    gvec = np.zeros(nq)
    for (g,) in got["gravity"]:
        gvec += np.asarray(g, float)

    def maps(family: str, i: int) -> tuple:
        return _stack_maps([a[i] for a in got[family]])

    def col(family: str, i: int, shape: tuple = (0,), dtype=float) -> np.ndarray:
        return _cat([a[i] for a in got[family]], shape, dtype)

    pk.set(M.HAS_F, has_forces)
    pk.set(M.HAS_VF, has_velocity_forces)
    pk.float_array(M.GVEC, gvec)
    pk.affine("SP", maps("spring", 0))
    pk.float_array(M.SP_STIFF, col("spring", 1))
    pk.float_array(M.SP_REST, col("spring", 2))
    pk.affine("T1", maps("torsion_spring", 0))
    pk.affine("T2", maps("torsion_spring", 1))
    pk.affine("TW", maps("torsion_spring", 2))
    pk.float_array(M.TS_STIFF, col("torsion_spring", 3))
    pk.float_array(M.TS_REST, col("torsion_spring", 4))
    pk.affine("DP", maps("damper", 0))
    pk.float_array(M.DP_COEF, col("damper", 1))
    pk.affine("DR", maps("drag", 0))
    pk.float_array(M.DR_COEF, col("drag", 1))
    pk.affine("PF", maps("point_force", 0))
    pk.float_array(M.PF_FORCE, col("point_force", 1, (0, 3)))
    tq = col("torque", 0, (0, 9), np.int64)
    pk.set(M.TQ_M, len(tq))
    pk.int_array(M.TQ_COLS, tq)
    pk.float_array(M.TQ_TAU, col("torque", 1, (0, 3)))
    pk.affine("HD", maps("hinge_damping", 0))
    pk.int_array(M.HD_CA, col("hinge_damping", 1, (0, 9), np.int64))
    pk.float_array(M.HD_RA, col("hinge_damping", 2))
    pk.int_array(M.HD_CB, col("hinge_damping", 3, (0, 9), np.int64))
    pk.float_array(M.HD_RB, col("hinge_damping", 4))
    pk.float_array(M.HD_COEF, col("hinge_damping", 5))
    pk.affine("SN", maps("slider_damping", 0))
    pk.affine("SD", maps("slider_damping", 1))
    pk.float_array(M.SD_COEF, col("slider_damping", 2))
    pk.affine("BA", maps("bending", 0))
    pk.affine("BB", maps("bending", 1))
    pk.float_array(M.BE_KAPPA, col("bending", 2))


# ----------------------------------------------------------------------------------- constraints
def _profile(pi: np.ndarray, pj: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, int]:
    """First column f_i of each row's envelope, each row's start in the profile storage, and its size."""
    first = np.arange(n, dtype=np.int64)
    lo, hi = np.minimum(pi, pj), np.maximum(pi, pj)
    np.minimum.at(first, hi, lo)
    widths = np.arange(n) - first + 1
    rowstart = np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(np.int64)
    return first, rowstart, int(widths.sum())


def _profile_columns(first: np.ndarray, rowstart: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The envelope below the diagonal by columns: for column j, the rows k > j with f_k ≤ j (ascending)
    from colptr[j] to colptr[j + 1], with the position of L[k, j] in the profile storage."""
    n = len(first)
    widths = np.arange(n) - first
    k = np.repeat(np.arange(n), widths)
    j = first[k] + np.arange(len(k)) - np.repeat(np.cumsum(widths) - widths, widths)
    order = np.lexsort((k, j))
    k, j = k[order], j[order]
    colptr = np.searchsorted(j, np.arange(n + 1)).astype(np.int64)
    return colptr, k.astype(np.int64), (rowstart[k] - first[k] + j).astype(np.int64)


def _u_aliases(ur: np.ndarray, uc: np.ndarray, uv: np.ndarray, cu: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """The U map without the rows that repeat an earlier row's, and which rows those are.

    A joint's point rows share one U (the difference of its two anchor
    points; W picks the component), a revolute joint's two axis rows another
    (the first body's axis): on a chain of 32 rigid bodies 96 of 160 rows
    repeat one, 849 of 1320 terms. A row repeats another when it has the same
    terms in the same order and the same constant, so the U computed once and
    copied is the U computed again, bit for bit. Returns (ur, uc, uv) of the
    rows kept, and the (repeating, repeated) row pairs.
    """
    none = np.zeros(0, np.int64)
    row = ur // 3
    if len(row) and np.any(np.diff(row) < 0):  # terms not grouped by row: no aliases
        return ur, uc, uv, none, none
    starts = np.searchsorted(row, np.arange(n + 1))
    seen: dict[tuple, int] = {}
    keep = np.ones(len(ur), bool)
    dst, src = [], []
    for r in range(n):
        a, b = starts[r], starts[r + 1]
        key = ((ur[a:b] % 3).tobytes(), uc[a:b].tobytes(), uv[a:b].tobytes(), cu[3 * r : 3 * r + 3].tobytes())
        if key in seen:
            keep[a:b] = False
            dst.append(r)
            src.append(seen[key])
        else:
            seen[key] = r
    return ur[keep], uc[keep], uv[keep], np.asarray(dst, np.int64), np.asarray(src, np.int64)


def _pack_constraints(pk: _Packer, system, space: tuple | None = None) -> bool:
    """Pack the constraint rows of ``system`` and the factorization data of A = G W Gᵀ.

    ``space``: (pattern, solver, inverse mass, size) of G in other coordinates
    than q (the velocity coordinates of :mod:`mbvi.engine.lie`); the row maps
    stay those of q.
    """
    rows = system.rows
    act = system.active
    n = len(act)
    nq = system.nq
    new = np.full(rows.n, -1, dtype=np.int64)
    new[act] = np.arange(n)
    # slot of each full-pattern entry in the active pattern (−1: a dropped row)
    full_rows = rows.pattern.rows
    keep = new[full_rows] >= 0
    slot = np.full(len(full_rows), -1, dtype=np.int64)
    slot[keep] = np.arange(int(keep.sum()))
    raw_slot = slot[rows._dedup] if rows._needs_dedup else slot
    nu = len(rows._ur)
    s3 = np.repeat(rows.s, 3)

    def part(r, c, v, offset):
        sel = new[r // 3] >= 0
        rr = 3 * new[r[sel] // 3] + r[sel] % 3
        return rr, c[sel], v[sel], (s3[r] * v)[sel], raw_slot[offset : offset + len(r)][sel]

    ur, uc, uv, su, upos = part(rows._ur, rows._uc, rows._uv, 0)
    sel3 = (3 * act[:, None] + np.arange(3)).ravel()
    same = bool(rows._same)
    if same:
        wr, wc, wv, sw, wpos = ur, uc, uv, su, upos
        su = 2.0 * su
    else:
        wr, wc, wv, sw, wpos = part(rows._wr, rows._wc, rows._wv, nu)
    pattern, solver, inv_mass = system._active_pattern, system.solver, system.inv_mass
    if space is not None:
        pattern, solver, inv_mass, nq = space
    prow, pcol = pattern.rows, pattern.cols
    # A = G W Gᵀ: entry pairs sharing a column, lower triangle in profile storage, Cuthill–McKee order
    perm = np.arange(n)
    pa = pb = aw = np.zeros(0, np.int64)
    tstart = np.zeros(1, np.int64)
    first, rowstart, size = np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    if n:
        pa, pb, w = solver._pa, solver._pb, solver._w
        if solver.kind == "banded":  # the solver kept the lower pairs only: mirror the off-diagonal ones
            off = pa != pb
            pa, pb, w = np.concatenate([pa, pb[off]]), np.concatenate([pb, pa[off]]), np.concatenate([w, w[off]])
        ri, rj = prow[pa], prow[pb]
        ones = csr_matrix((np.ones(len(ri)), (ri, rj)), shape=(n, n))
        perm = reverse_cuthill_mckee(ones, symmetric_mode=True) if n > 1 else np.arange(n)
        inv = np.empty(n, dtype=np.int64)
        inv[perm] = np.arange(n)
        if _profile(inv[ri], inv[rj], n)[2] > _profile(ri, rj, n)[2]:  # the assembly order is better
            perm, inv = np.arange(n), np.arange(n)
        pi, pj = inv[ri], inv[rj]
        first, rowstart, size = _profile(pi, pj, n)
        if size > PROFILE_MAX:
            return False
        lower = pi >= pj
        pa, pb, aw, pi, pj = pa[lower], pb[lower], w[lower], pi[lower], pj[lower]
        target = rowstart[pi] + pj - first[pi]
        order = np.argsort(target, kind="stable")  # the pairs of each profile entry contiguous
        pa, pb, aw = pa[order], pb[order], aw[order]
        tstart = np.searchsorted(target[order], np.arange(size + 1)).astype(np.int64)
    colptr, colrows, colpos = _profile_columns(first, rowstart)
    pk.set(M.NQ, nq)
    pk.set(M.N, n)
    pk.set(M.SAME, same)
    pk.set(M.SIZE_L, size)
    pk.set(M.DENSE_OK, n <= DENSE_NEWTON_MAX)
    pk.set(M.NU, len(ur))
    pk.set(M.NW, len(wr))
    pk.set(M.NNZ, len(prow))
    gsorted = bool(np.all(np.diff(prow) >= 0))  # row by row: products and sums by rows, in a register
    growptr = np.concatenate([[0], np.cumsum(np.bincount(prow, minlength=n))]) if gsorted else np.zeros(n + 1, int)
    pk.set(M.GSORTED, int(gsorted))
    gcolent = np.argsort(pcol, kind="stable")  # a column's entries in pattern order: M⁻¹Gᵀy sums them in a register
    gcolptr = np.concatenate([[0], np.cumsum(np.bincount(pcol, minlength=nq))])
    pk.set(M.NPAIR, len(pa))
    cu = rows._cu[sel3]
    ur1, uc1, uv1, alias_dst, alias_src = _u_aliases(ur, uc, uv, cu, n)
    o = np.argsort(ur1, kind="stable")  # an entry's terms side by side, in their order: summed in a register
    ur1, uc1, uv1 = ur1[o], uc1[o], uv1[o]
    pk.set(M.NU1, len(ur1))
    pk.set(M.NALIAS, len(alias_dst))
    for slot, arr in (
        (M.UR, ur),
        (M.UC, uc),
        (M.UPOS, upos),
        (M.WR, wr),
        (M.WC, wc),
        (M.WPOS, wpos),
        (M.PROW, prow),
        (M.PCOL, pcol),
        (M.GROWPTR, growptr),
        (M.GCOLPTR, gcolptr),
        (M.GCOLENT, gcolent),
        (M.GCOLROW, prow[gcolent]),
        (M.PA, pa),
        (M.PB, pb),
        (M.TSTART, tstart),
        (M.PERM, perm),
        (M.FIRST, first),
        (M.ROWSTART, rowstart),
        (M.COLPTR, colptr),
        (M.COLROWS, colrows),
        (M.COLPOS, colpos),
        (M.U1R, ur1),
        (M.U1C, uc1),
        (M.ALIAS_DST, alias_dst),
        (M.ALIAS_SRC, alias_src),
    ):
        pk.int_array(slot, arr)
    for slot, arr in (
        (M.W, inv_mass),
        (M.UV, uv),
        (M.SU, su),
        (M.WV, wv),
        (M.SW, sw),
        (M.CU, cu),
        (M.U1V, uv1),
        (M.CW, rows._cw[sel3]),
        (M.S, rows.s[act]),
        (M.KK, rows.k[act]),
        (M.SCALE, system.active_scale),
        (M.ROUND, system.active_roundoff),
        (M.AW, aw),
    ):
        pk.float_array(slot, arr)
    return True


_logged: set = set()


def build(system) -> tuple[np.ndarray, ...] | None:
    """Flatten ``system`` into the engine's model, or None when part of it has no compiled kernel.

    The model is ``(I, F, Iv, Fv, IL, FL)``: the configuration model (constraint
    rows and force kernels), the factorization model in velocity coordinates and
    the rigid-body tables of :mod:`mbvi.engine.lie`. Without rigid bodies the
    velocity coordinates are q's (``Iv, Fv`` are ``I, F``) and ``IL`` says no bodies.
    """
    terms = []
    for law in system.laws:
        t = family_terms(law)
        if t is None:
            key = type(law).__name__
            if key not in _logged:
                _logged.add(key)
                log.warning(
                    "force law %r has no compiled kernel: systems with it run on the NumPy path (slower, same results)",
                    getattr(law, "name", key) or key,
                )
            return None
        terms.append(t)
    qsys = system
    if len(system.layout.rotation_blocks):
        from mbvi.engine.lie import owner_is_rotation
        from mbvi.system import System

        joints = [r for r in system.active.tolist() if not owner_is_rotation(system.rows.owner[r])]
        qsys = System(system.layout, system.rows, np.asarray(joints, np.intp), system.laws, system.geometry)
    pk = _Packer()
    if not _pack_constraints(pk, qsys):
        _log_sparse()
        return None
    _pack_forces(pk, system.nq, terms, system.has_forces, system.has_velocity_forces)
    I, F = pk.arrays()
    if qsys is system:
        return I, F, I, F, np.zeros(LT.count, np.int64), np.zeros(1)
    from mbvi.engine.lie import fuse_jacobian, lie_tables

    pattern, solver, IL, FL, winv, nv = lie_tables(system, qsys)
    IL, FL = fuse_jacobian(IL, FL, I, F)
    pv = _Packer()
    if not _pack_constraints(pv, qsys, (pattern, solver, winv, nv)):
        _log_sparse()
        return None
    Iv, Fv = pv.arrays()
    return I, F, Iv, Fv, IL, FL


def _log_sparse() -> None:
    if "sparse" not in _logged:
        _logged.add("sparse")
        log.warning("constraint matrix too wide for the compiled profile solver: using the NumPy path (sparse LU)")
