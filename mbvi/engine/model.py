"""The compiled engine's model: a system flattened into constant arrays (MuJoCo's ``mjModel``).

Nothing here changes during a run: index and weight arrays of the constraint
rows, the factorization plan of A = G M⁻¹ Gᵀ, and every force law's kernels.
Run state (multipliers, factorizations, buffers) lives in a run's workspace
(:mod:`mbvi.engine.runner`). Every field is declared in
:data:`mbvi.engine.fields.M`; :class:`_Packer` checks that each declared array is
given, with its declared length.

:func:`build` reads a :class:`mbvi.engine.spec.ModelSpec` — public, typed
arrays — and nothing else. A force law takes part through its compiled form
(:mod:`mbvi.engine.contract`): :class:`~mbvi.engine.contract.Family`
contributions fused into the engine's own loops, :class:`~mbvi.engine.contract.Kernel`
functions called through their address, or, for a law with neither, its NumPy
methods called back from the loop.
"""

from __future__ import annotations

import logging
import threading
from typing import NamedTuple

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import reverse_cuthill_mckee

from mbvi.engine import contract as CT
from mbvi.engine.fields import LT, WK, M, allocate, length
from mbvi.engine.spec import ROW_ROTATION, ModelSpec, Pattern, RowTerms

__all__ = ["Model", "build", "value_offsets"]

log = logging.getLogger("mbvi")

#: entries of the profile (envelope) of the Cholesky factor beyond which the NumPy path's sparse LU is used
PROFILE_MAX = 2_000_000
#: rows up to which SHAKE's full-Newton fallback runs densely inside the compiled loop
DENSE_NEWTON_MAX = 300


_Q_LOCK = threading.Lock()  # packs a QModel once when runs on threads share one System


class QModel:
    """The configuration model with every active row, packed on first use (:attr:`Model.Iq`).

    Without rigid bodies it is the model's own ``(I, F)``; with them it is packed from the spec and the same
    resolved kernels as the model (some 2 ms for a 32-link chain, which the Lie loop never reads).
    """

    def __init__(self, arrays: tuple[np.ndarray, np.ndarray] | None = None, spec: ModelSpec | None = None,
                 parts: list | None = None, kernels: list | None = None) -> None:  # fmt: skip
        self._arrays, self._spec, self._parts, self._kernels = arrays, spec, parts, kernels
        self._model: Model | None = None  # the model of these arrays alone (configuration_model), made once

    def arrays(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(Iq, Fq)``, packed the first time; None when the constraint matrix with the rotations' rows is too
        wide for the compiled profile solver (the integrators that read it then run on the NumPy path)."""
        if self._spec is not None:
            with _Q_LOCK:  # one packing, seen whole by every thread (runs sharing one System)
                if self._spec is not None:
                    spec, parts, kernels, pq = self._spec, self._parts, self._kernels, _Packer()
                    if _pack_constraints(pq, spec.rows, spec.pattern):
                        _pack_forces(pq, spec.nq, parts, kernels, spec.has_forces, spec.has_velocity_forces)
                        self._arrays = pq.arrays()
                    else:
                        _log_once("sparse-q", "constraint matrix with the rigid bodies' rotation rows too wide for the "
                                  "compiled profile solver: midpoint, implicit_euler and integrator plugins with a "
                                  "compiled step run on the NumPy path (sparse LU)")  # fmt: skip
                    self._spec = self._parts = self._kernels = None
        return self._arrays


class Model(NamedTuple):
    """The engine's model: ``arrays`` go into every compiled call; the rest keeps the kernels alive.

    Attributes
    ----------
    I, F : ndarray
        The configuration model (int64 and float64, :data:`mbvi.engine.fields.M`).
    Iv, Fv : ndarray
        The factorization model in velocity coordinates (``I``, ``F`` without rigid bodies).
    IL, FL : ndarray
        The rigid-body tables (:data:`mbvi.engine.fields.LT`).
    q_model : QModel
        Builds, on first use, the configuration model with every active row (:attr:`Iq`, :attr:`Fq`).
    kernels : tuple
        The compiled kernels and callbacks whose addresses are in ``I`` (kept alive here).
    callbacks : tuple of mbvi.engine.callbacks.Callback
        Those that call Python (their ``error`` tells why an evaluation failed).
    parts : tuple
        Every law's parts (:class:`~mbvi.engine.contract.Family`, :class:`~mbvi.engine.contract.Kernel`) in the
        order they were packed (:func:`value_offsets` finds a load's value by them).
    """

    I: np.ndarray
    F: np.ndarray
    Iv: np.ndarray
    Fv: np.ndarray
    IL: np.ndarray
    FL: np.ndarray
    q_model: QModel
    kernels: tuple = ()
    callbacks: tuple = ()
    parts: tuple = ()

    @property
    def Iq(self) -> np.ndarray:
        """The configuration model with every active row, rigid bodies' orthonormality rows included (``I``
        without rigid bodies): what the implicit pair (:func:`configuration_model`) and compiled integrator plugins
        (:mod:`mbvi.engine.api`) step. Built on first use: the RATTLE family steps rotations on their group and never
        reads it."""
        return self._q_arrays()[0]

    @property
    def Fq(self) -> np.ndarray:
        """The float array of :attr:`Iq` (``F`` without rigid bodies)."""
        return self._q_arrays()[1]

    def _q_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        arrays = self.q_model.arrays()
        if arrays is None:
            raise ValueError("the constraint matrix with the rotations' rows is too wide for the compiled solver")
        return arrays

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """``(I, F, Iv, Fv, IL, FL)``: what the compiled loop reads."""
        return (self.I, self.F, self.Iv, self.Fv, self.IL, self.FL)

    @property
    def rigid(self) -> bool:
        """Whether rigid bodies step on SO(3) (:mod:`mbvi.engine.lieloop`)."""
        return bool(self.IL[LT.NB] > 0)


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
    counts = np.diff(starts)
    consts = np.ascontiguousarray(cu, dtype=float).reshape(-1, 3)[:n]
    dst, src = [none], [none]
    for size in np.unique(counts):  # rows of as many terms, compared bit for bit (floats by their bits)
        rs = np.flatnonzero(counts == size)
        if len(rs) < 2:
            continue
        at = starts[rs][:, None] + np.arange(size)
        key = np.concatenate([(ur[at] % 3).astype(np.int64), uc[at].astype(np.int64),
                              np.ascontiguousarray(uv[at], dtype=float).view(np.int64), consts[rs].view(np.int64)],
                             axis=1)  # fmt: skip
        seen: dict[bytes, int] = {}
        first = np.array([seen.setdefault(b, i) for i, b in enumerate(map(bytes, key))], np.int64)
        again = np.flatnonzero(first != np.arange(len(rs)))
        dst.append(rs[again])
        src.append(rs[first[again]])
    dst_rows, src_rows = np.concatenate(dst).astype(np.int64), np.concatenate(src).astype(np.int64)
    order = np.argsort(dst_rows, kind="stable")
    dst_rows, src_rows = dst_rows[order], src_rows[order]
    keep = np.repeat(np.isin(np.arange(n), dst_rows, invert=True), counts)
    return ur[keep], uc[keep], uv[keep], dst_rows, src_rows


class _Packer:
    """Collects the model's arrays into the flat ``I`` (int64) and ``F`` (float64) after a header of slots.

    :meth:`arrays` checks every array of :data:`mbvi.engine.fields.M` against its declared length (a field
    forgotten or packed with the wrong length fails here, not silently in a kernel).
    """

    def __init__(self) -> None:
        self.head = np.zeros(M.count, dtype=np.int64)
        self.given = np.zeros(M.count, dtype=bool)
        self.lengths = np.zeros(M.count, dtype=np.int64)
        self.ints: list[np.ndarray] = []
        self.floats: list[np.ndarray] = []
        self.ni = M.count
        self.nf = 0

    def set(self, slot: int, value: int) -> None:
        self.head[slot] = int(value)
        self.given[slot] = True

    def int_array(self, slot: int | None, a) -> int:
        """Append int array ``a`` (for field ``slot``, or a kernel's parameters when None); its offset in I."""
        a = np.ascontiguousarray(a, dtype=np.int64).ravel()
        offset = self.ni
        if slot is not None:
            self.set(slot, offset)
            self.lengths[slot] = len(a)
        self.ints.append(a)
        self.ni += len(a)
        return offset

    def float_array(self, slot: int | None, a) -> int:
        """Append float array ``a`` (for field ``slot``, or a kernel's parameters when None); its offset in F."""
        a = np.ascontiguousarray(a, dtype=float).ravel()
        offset = self.nf
        if slot is not None:
            self.set(slot, offset)
            self.lengths[slot] = len(a)
        self.floats.append(a)
        self.nf += len(a)
        return offset

    def affine(self, prefix: str, m: tuple) -> None:
        idx, w, c = m
        base = getattr(M, prefix + "_I")  # slots _I, _W, _C, _M, _K are consecutive
        self.set(base + 3, len(w))
        self.set(base + 4, w.shape[1])
        self.int_array(base, idx)
        self.float_array(base + 1, w)
        self.float_array(base + 2, c)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        sizes = {f.name: int(self.head[i]) for i, f in enumerate(M.fields) if f.kind == "size"}
        sizes["WK_COUNT"] = WK.count
        for i, f in enumerate(M.fields):
            if not self.given[i]:
                raise AssertionError(f"engine model: field M.{f.name} was not packed")
            if f.kind in ("int", "float") and self.lengths[i] != length(f.size, sizes):
                declared = length(f.size, sizes)
                raise AssertionError(f"engine model: M.{f.name} has {self.lengths[i]} entries, declared {declared}")
        I = np.concatenate([self.head, *self.ints]) if self.ints else self.head.copy()
        F = np.concatenate(self.floats) if self.floats else np.zeros(0)
        return I, np.ascontiguousarray(F)


def _pack_workspace(pk: _Packer) -> None:
    """The layout of a run's workspace for this model (``M.WKOFF``, ``M.WS_SIZE``; :data:`mbvi.engine.fields.WK`)."""
    sizes = {"N": int(pk.head[M.N]), "NQ": int(pk.head[M.NQ]), "NNZ": int(pk.head[M.NNZ]),
             "SIZE_L": int(pk.head[M.SIZE_L])}  # fmt: skip
    WI, WS = allocate(WK, sizes)
    WI[WK.SIZE_AB] = sizes["SIZE_L"]
    pk.set(M.WS_SIZE, len(WS))
    pk.int_array(M.WKOFF, WI)


def _families(parts: list) -> dict[str, list[tuple]]:
    got: dict[str, list[tuple]] = {name: [] for name in CT.FAMILIES}
    for part in parts:
        if isinstance(part, CT.Family):
            got[part.name].append(part.arrays)
    return got


def _pack_forces(pk: _Packer, nq: int, parts: list, kernels: list[tuple[int, int, object]], has_forces: bool,
                 has_velocity_forces: bool) -> None:
    """The fused families of every law, then the kernels called through their address ``(role, address, part)``;
    whether some law has a non-conservative force, and some such force reads the velocity."""
    got = _families(parts)
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
    pk.int_array(M.SD_CC, col("slider_damping", 3, (0, 9), np.int64))
    pk.float_array(M.SD_RC, col("slider_damping", 4))
    pk.affine("BA", maps("bending", 0))
    pk.affine("BB", maps("bending", 1))
    pk.float_array(M.BE_KAPPA, col("bending", 2))
    nk = len(kernels)
    pk.set(M.KN, nk)
    pk.set(M.KGRAD, any(role == CT.GRADIENT for role, _, _ in kernels))
    kio = [pk.int_array(None, part.ints) for _, _, part in kernels]
    kfo = [pk.float_array(None, part.floats) for _, _, part in kernels]
    pk.int_array(M.KADDR, [addr for _, addr, _ in kernels])
    pk.int_array(M.KROLE, [role for role, _, _ in kernels])
    pk.int_array(M.KIO, kio)
    pk.int_array(M.KIN, [len(part.ints) for _, _, part in kernels])
    pk.int_array(M.KFO, kfo)
    pk.int_array(M.KFN, [len(part.floats) for _, _, part in kernels])


def _pack_constraints(pk: _Packer, rows: RowTerms, pattern: Pattern) -> bool:
    """Pack constraint ``rows`` and the factorization plan of A = G M⁻¹ Gᵀ on ``pattern`` (False: too wide).

    The rows' maps act on q; ``pattern`` may be in other coordinates (the velocity coordinates of
    :mod:`mbvi.engine.lie`), with its own inverse mass.
    """
    n, nq = rows.n, pattern.nq
    ur, uc, uv, su, upos = rows.ur, rows.uc, rows.uv, rows.su, rows.upos
    wr, wc, wv, sw, wpos = rows.wr, rows.wc, rows.wv, rows.sw, rows.wpos
    same = rows.same
    prow, pcol = pattern.rows, pattern.cols
    # A = G W Gᵀ: entry pairs sharing a column, lower triangle in profile storage, Cuthill–McKee order
    perm = np.arange(n)
    pa = pb = aw = np.zeros(0, np.int64)
    tstart = np.zeros(1, np.int64)
    first, rowstart, size = np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    if n:
        pa, pb, w = pattern.pa, pattern.pb, pattern.aw
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
    cu = rows.cu
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
        (M.W, pattern.inv_mass),
        (M.UV, uv),
        (M.SU, su),
        (M.WV, wv),
        (M.SW, sw),
        (M.CU, cu),
        (M.U1V, uv1),
        (M.CW, rows.cw),
        (M.S, rows.s),
        (M.KK, rows.k),
        (M.SCALE, rows.scale),
        (M.ROUND, rows.roundoff),
        (M.AW, aw),
    ):
        pk.float_array(slot, arr)
    _pack_workspace(pk)
    return True


_logged: set = set()


def _log_once(key: str, message: str, *args) -> None:
    if key not in _logged:
        _logged.add(key)
        log.warning(message, *args)


def _resolve(spec: ModelSpec) -> tuple[list, list[tuple[int, int, object]], list, list]:
    """Every law's parts; the kernels to call through an address (role, address, part); what keeps them alive;
    the Python callbacks among them."""
    from mbvi.engine import callbacks

    parts, kernels, keep, calls = [], [], [], []
    for law, name in zip(spec.laws, spec.law_names, strict=True):
        for part in law:
            parts.append(part)
            if isinstance(part, CT.Family):
                continue
            if part.watch is not None:
                calls.append(part.watch)
            for role, fn in part.roles():
                if role == "potential":  # the time loop needs no U (energies use the law's NumPy potential)
                    continue
                code = CT.ROLES[role]
                if isinstance(part, CT.PythonKernel):
                    cb = callbacks.python(fn, role, part.name or name)
                    kernels.append((code, cb.address, part))
                    keep.append(cb)
                    calls.append(cb)
                    continue
                try:
                    label = f"the {part.source[4:]} of {part.name}" if part.source.startswith("its ") else ""
                    cf = callbacks.compiled(fn, role, salt=part.salt, label=label)
                except Exception as exc:  # numba cannot compile it: called from the loop as Python instead
                    if callbacks.interrupted(exc):  # (a deadline, a MemoryError: the caller's, not numba's)
                        raise
                    _log_once(
                        f"numba:{name}:{part.name}:{part.source}:{role}",
                        "%s: %s does not compile with numba (%s); it is called from the compiled loop as Python "
                        "instead, one call per evaluation",
                        part.name or name, part.source or f"its {role} kernel {callbacks.function_name(fn)}",
                        callbacks.numba_reason(exc),
                    )  # fmt: skip
                    cb = callbacks.python(CT.kernel_as_numpy(fn, part, role), role, part.name or name)
                    kernels.append((code, cb.address, part))
                    keep.append(cb)
                    calls.append(cb)
                    continue
                kernels.append((code, cf.address, part))
                keep.append(cf)
                if part.watch is None:  # (a load's kernel records its own failures)
                    calls.append(callbacks.CompiledWatch(fn, role, part.name or name, part.ints, part.floats,
                                                         part.source or f"its {role} kernel"))  # fmt: skip
    return parts, kernels, keep, calls


def build(spec: ModelSpec) -> Model | None:
    """Flatten ``spec`` into the engine's :class:`Model`, or None when its constraint matrix is too wide.

    The model is the configuration model (constraint rows and force kernels), the factorization model in
    velocity coordinates and the rigid-body tables of :mod:`mbvi.engine.lie`. Without rigid bodies the
    velocity coordinates are q's (``Iv, Fv`` are ``I, F``) and ``IL`` says no bodies.
    """
    parts, kernels, keep, calls = _resolve(spec)
    rigid = bool(np.any(spec.bodies.rigid))
    rows, pattern = (spec.joint_rows, spec.joint_pattern) if rigid else (spec.rows, spec.pattern)
    pk = _Packer()
    if not _pack_constraints(pk, rows, pattern):
        _log_sparse()
        return None
    _pack_forces(pk, spec.nq, parts, kernels, spec.has_forces, spec.has_velocity_forces)
    I, F = pk.arrays()
    if not rigid:
        return Model(I, F, I, F, np.zeros(LT.count, np.int64), np.zeros(1), QModel((I, F)), tuple(keep),
                     tuple(calls), tuple(parts))  # fmt: skip
    from mbvi.engine.lie import fuse_jacobian, lie_tables

    vpattern, IL, FL = lie_tables(spec.bodies, pattern)
    IL, FL = fuse_jacobian(IL, FL, I, F)
    pv = _Packer()
    if not _pack_constraints(pv, rows, vpattern):
        _log_sparse()
        return None
    # the velocity model factors A; its force fields stay empty
    _pack_forces(pv, vpattern.nq, [], [], spec.has_forces, spec.has_velocity_forces)
    Iv, Fv = pv.arrays()
    # every active row, in q, for the integrators that step the rotation columns: packed when one asks
    q_model = QModel(spec=spec, parts=parts, kernels=kernels)
    return Model(I, F, Iv, Fv, IL, FL, q_model, tuple(keep), tuple(calls), tuple(parts))


def family_model(nq: int, families: list) -> tuple[np.ndarray, np.ndarray]:
    """``(I, F)`` of the fused ``families`` alone, on ``nq`` coordinates: no constraint rows, no kernels. The NumPy
    methods of a law that gives its force only as families (:class:`mbvi.lawmethods.FamilyMethod`) evaluate it
    with :func:`mbvi.engine.kernels.gradient` and :func:`~mbvi.engine.kernels.nonconservative_force` on it, the
    compiled loop's own code."""
    none, e = np.zeros(0, np.int64), np.zeros(0)
    rows = RowTerms(none, none, e, e, none, none, none, e, e, none, True, e, e, e, e, e, e, none)
    pk = _Packer()
    _pack_constraints(pk, rows, Pattern.of(none, none, nq, np.ones(nq)))
    _pack_forces(pk, nq, families, [], True, True)
    return pk.arrays()


def configuration_model(model: Model) -> Model | None:
    """The model that steps every coordinate of q, a rigid body's rotation columns too, under every active row
    (their orthonormality rows included): :attr:`Model.Iq` as a model without rigid bodies, for the loops of
    :mod:`mbvi.engine.loop`. ``model`` itself when it has no rigid bodies; None when the rows are too wide.

    The implicit pair runs rigid bodies on it: their discrete Lagrangian is the NumPy path's, in the columns
    (constant column masses, the rotation's rows as constraints), so the compiled loop of particles takes
    their steps unchanged.
    """
    if not model.rigid:
        return model
    qm = model.q_model
    if qm._model is None:
        arrays = qm.arrays()
        if arrays is None:
            return None
        Iq, Fq = arrays
        qm._model = Model(Iq, Fq, Iq, Fq, np.zeros(LT.count, np.int64), np.zeros(1), QModel((Iq, Fq)),
                          model.kernels, model.callbacks, model.parts)  # fmt: skip
    return qm._model


def value_offsets(model: Model, owner: str, q_model: bool = True) -> list[tuple[np.ndarray, int, bool]]:
    """Where the value of the load ``owner`` (e.g. ``"ExternalTorque 'motor'"``) is in the model's float arrays.

    ``q_model``: also in the rotation rows' model (:attr:`Model.Fq`, packed here if it was not), which a
    compiled step plugin's runs read (the implicit pair's runs are given that model itself, as ``model``; the
    RATTLE family never reads it).

    Returns
    -------
    list of (F, offset, kernel)
        For each float array that holds it (``F``, and ``Fq`` when it is another array): the offset of its 3
        values in a ``point_force``/``torque`` family (``kernel`` False), or of its kernel's floats (``kernel``
        True: an override flag and value at :data:`mbvi.engine.stateview.F_OVERRIDE`); empty when not found.
    """
    rows = {"point_force": 0, "torque": 0}
    slot = {"point_force": M.PF_FORCE, "torque": M.TQ_TAU}
    found: list[tuple[str, int, bool]] = []  # (what, index, kernel)
    k = 0
    for part in model.parts:
        if isinstance(part, CT.Family):
            if part.name in rows:
                if owner in part.owners:
                    found.append((part.name, rows[part.name] + part.owners.index(owner), False))
                rows[part.name] += len(part.arrays[1])
            continue
        if part.name == owner:
            found.append(("kernel", k, True))
        k += len(part.roles())
    out = []
    # the rotation rows' model too when the run reads it (a compiled step plugin's; packed here if it was not)
    q = model.q_model.arrays() if q_model else None
    pairs = [(model.I, model.F)] + ([q] if q is not None and q[1] is not model.F else [])
    for I, F in pairs:
        for what, index, kernel in found:
            offset = int(I[I[M.KFO] + index]) if kernel else int(I[slot[what]]) + 3 * index
            out.append((F, offset, kernel))
    return out


def _log_sparse() -> None:
    _log_once("sparse", "constraint matrix too wide for the compiled profile solver: using the NumPy path (sparse LU)")


def rotation_rows(rows: RowTerms) -> np.ndarray:
    """Which of ``rows`` are rigid bodies' orthonormality rows (left to the rotation update on SO(3))."""
    return rows.kind == ROW_ROTATION
