"""The compiled engine's model of rigid bodies stepped on their Lie group.

A system with rigid bodies runs in the compiled loop with each body's
rotation advanced by the Cayley update of :mod:`mbvi.engine.rotation`
instead of through six orthonormality constraints. The loop then works in
*velocity coordinates* (MuJoCo's ``nv`` next to ``nq``): three per particle,
six per rigid body (ẋ and the body-frame ω), with the constant diagonal
inverse mass (1/m, 1/J₁, 1/J₂, 1/J₃ in principal axes). Constraints are the
joints' rows only; their values come from the configuration model (the same
kernels as for particles) and their Jacobian in velocity coordinates from a
fixed linear map of the configuration Jacobian:

    ∂g/∂η_k = Σᵢ R_ia ∂g/∂R_ib − R_ib ∂g/∂R_ia ,   (a, b) = (3, 2), (1, 3), (2, 1) for k = 1, 2, 3

(δR = R η̂), stored as entry-to-entry copy and product terms. A generalized
force on R's columns becomes a body torque by the same map.

This module builds, once per :class:`mbvi.System`, the arrays the loop reads:
``(Iv, Fv)``, the factorization model of A = G_v M_v⁻¹ G_vᵀ in the layout of
:mod:`mbvi.engine.fields` (``M``), and ``(IL, FL)``, the bodies and the map tables
(fields ``LT.*`` of :mod:`mbvi.engine.fields`).
"""

from __future__ import annotations

import numpy as np

from mbvi.engine.fields import LT
from mbvi.engine.spec import Bodies, Pattern

__all__ = ["fuse_jacobian", "lie_tables"]

# body-frame component k of ω, a torque or ∂g/∂η pairs columns (a, b) of R
_AB = ((2, 1), (0, 2), (1, 0))


def _velocity_layout(bodies: Bodies) -> tuple[np.ndarray, list, np.ndarray, np.ndarray, np.ndarray]:
    """Velocity offset of every q index's block, rigid bodies (oq, ov, J), translational pairs (q, v), 1/m_v."""
    nq = int(np.sum(np.where(bodies.rigid, 12, 3)))
    rigid, trans_q, trans_v, winv = [], [], [], []
    vmap = np.full(nq, -1, dtype=np.int64)
    ov = 0
    for oq, is_rigid, mass, J in zip(bodies.offset.tolist(), bodies.rigid.tolist(), bodies.mass.tolist(),
                                     np.asarray(bodies.moments, float), strict=True):  # fmt: skip
        trans_q += [oq, oq + 1, oq + 2]
        trans_v += [ov, ov + 1, ov + 2]
        vmap[oq : oq + 3] = np.arange(ov, ov + 3)
        winv += [1.0 / mass] * 3
        if is_rigid:
            rigid.append((oq, ov, J))
            vmap[oq + 3 : oq + 12] = ov + 3
            winv += list(1.0 / J)
            ov += 6
        else:
            ov += 3
    return vmap, rigid, np.asarray(trans_q, np.int64), np.asarray(trans_v, np.int64), np.asarray(winv)


def lie_tables(all_bodies: Bodies, pat: Pattern) -> tuple[Pattern, np.ndarray, np.ndarray]:
    """The joint rows' pattern in velocity coordinates (with its plan) and the (IL, FL) tables, from the
    bodies and the joint rows' pattern ``pat`` in q.

    Returns
    -------
    pattern : Pattern
        G_v's pattern (n, nv) with the inverse mass 1/m, 1/J and its entry pairs.
    IL, FL : ndarray
        The tables of :data:`mbvi.engine.fields.LT`.
    """
    vmap, bodies, tq, tv, winv = _velocity_layout(all_bodies)
    nv = len(winv)
    nq = len(vmap)
    # every rotation column of a rigid body: its body's (oq, ov)
    body_oq, body_ov = np.full(nq, -1, np.int64), np.zeros(nq, np.int64)
    for oq, ov, _ in bodies:
        body_oq[oq + 3 : oq + 12], body_ov[oq + 3 : oq + 12] = oq, ov
    # column c of R (0-2) → the two (k, other column, sign) it enters, in the order of k (see _AB)
    enters = [[(k, b if col == a else a, 1.0 if col == b else -1.0) for k, (a, b) in enumerate(_AB) if col in (a, b)]
              for col in range(3)]  # fmt: skip
    K2 = np.array([[k for k, _, _ in e] for e in enters], np.int64)  # (3 columns, 2 terms)
    OTHER = np.array([[o for _, o, _ in e] for e in enters], np.int64)
    SIGN = np.array([[sg for _, _, sg in e] for e in enters])
    rows, cols = pat.rows.astype(np.int64), pat.cols.astype(np.int64)
    rot = body_oq[cols] >= 0
    # the entries of G_v each pattern entry touches, in pattern order: one copy, or two product terms
    per = np.where(rot, 2, 1)
    at = np.cumsum(per) - per  # where each pattern entry's items start
    items = int(per.sum())
    item_row, item_col = np.repeat(rows, per), np.zeros(items, np.int64)
    ec = np.flatnonzero(~rot)
    item_col[at[ec]] = vmap[cols[ec]]
    er = np.flatnonzero(rot)
    oq, ov = body_oq[cols[er]], body_ov[cols[er]]
    col, comp = np.divmod(cols[er] - oq - 3, 3)
    for t in range(2):
        item_col[at[er] + t] = ov + 3 + K2[col, t]
    # G_v's entries numbered in the order the items first meet them
    key = item_row * nv + item_col
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    met = np.argsort(first, kind="stable")
    rank = np.empty(len(uniq), np.int64)
    rank[met] = np.arange(len(uniq))
    slot = rank[inverse]
    vrows, vcols = uniq[met] // nv, uniq[met] % nv
    copies = np.stack([ec, slot[at[ec]]], axis=1) if len(ec) else np.zeros((0, 2), np.int64)
    terms = np.zeros((len(er), 2, 4))
    for t in range(2):
        terms[:, t, 0] = slot[at[er] + t]
        terms[:, t, 1] = er
        terms[:, t, 2] = oq + 3 + 3 * OTHER[col, t] + comp
        terms[:, t, 3] = SIGN[col, t]
    pattern = Pattern.of(vrows.astype(np.intp), vcols.astype(np.intp), nv, winv)
    cp = copies.astype(np.int64)
    tm = terms.reshape(-1, 4)
    # an entry's terms side by side, in the order they are added (a stable sort: the same sums bit for bit),
    # so that the Jacobian adds them in a register and stores the entry once (L_ROT3)
    tm = tm[np.argsort(tm[:, 0], kind="stable")]
    runs = np.diff(np.flatnonzero(np.r_[True, tm[1:, 0] != tm[:-1, 0], True])) if len(tm) else np.zeros(0)
    head = np.zeros(LT.count, np.int64)
    ints: list[np.ndarray] = []
    pos = LT.count

    def put(s: int, a) -> None:
        nonlocal pos
        a = np.ascontiguousarray(a, np.int64).ravel()
        head[s] = pos
        ints.append(a)
        pos += len(a)

    head[LT.NB], head[LT.NV], head[LT.NT], head[LT.NCOPY], head[LT.NROT] = len(bodies), nv, len(tq), len(cp), len(tm)
    head[LT.ROT3] = int(len(runs) > 0 and bool(np.all(runs % 3 == 0)))
    rot_targets = tm[::3, 0].astype(np.int64) if len(tm) else np.zeros(0, np.int64)
    targets = np.concatenate([cp[:, 1], rot_targets])
    if head[LT.ROT3] and np.all(runs == 3) and np.array_equal(np.sort(targets), np.arange(len(vrows))):
        head[LT.ROT3] = 2  # each entry is one copy or one three: written once, without a zero fill first
    put(LT.BQ, [b[0] for b in bodies])
    put(LT.BV, [b[1] for b in bodies])
    put(LT.TQ, tq)
    put(LT.TV, tv)
    put(LT.CQ, cp[:, 0])
    put(LT.CV, cp[:, 1])
    put(LT.RV, tm[:, 0].astype(np.int64))
    put(LT.RQ, tm[:, 1].astype(np.int64))
    put(LT.RR, tm[:, 2].astype(np.int64))
    IL = np.concatenate([head, *ints])
    J = np.array([b[2] for b in bodies], float).reshape(-1, 3)
    FL = np.concatenate([J.T.ravel(), tm[:, 3]])  # J by rows (3, NB): the drift's Newton runs over bodies
    IL[LT.J], IL[LT.RS] = 0, J.size
    return pattern, IL, np.ascontiguousarray(FL)


def fuse_jacobian(IL: np.ndarray, FL: np.ndarray, I: np.ndarray, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(IL, FL) with the map from U and W straight to G_v.

    G's entry p on the configuration pattern is the sum of s_e W_r over the
    terms e of the U map that land on p, then of s_e U_r over the W map's
    (:func:`mbvi.engine.kernels.jacobian_values`); the velocity Jacobian then
    copies or multiplies those entries. When no p has more than two terms
    (every joint of the built-in types: one, or two where both factors of a
    row turn with one body, as a prismatic joint's) both steps fold into one
    pass over the copies and products, reading U and W directly.
    ``L_FUSED`` is the most terms of an entry (0: not fused); ``L_FCS``/
    ``L_FRS`` index the concatenated (U, W) of the workspace and ``L_FCC``/
    ``L_FRC`` hold s_e, first terms then second terms (coefficient 0 where an
    entry has one); a product term's sign (±1, ``L_RS``) is folded into its
    coefficients, which changes no value: ±(a + b) = (±a) + (±b) and
    ±(a b) = (±a) b exactly, and a zero's sign is lost in the sum that
    starts from +0. The floating-point operations are otherwise the same, in
    the same order, so is the result.
    """
    from mbvi.engine.fields import M

    n, nu, nw, nnz = int(I[M.N]), int(I[M.NU]), int(I[M.NW]), int(I[M.NNZ])
    same = bool(I[M.SAME])
    pos = [I[I[M.UPOS] : I[M.UPOS] + nu]]
    src = [I[I[M.UR] : I[M.UR] + nu] + (0 if same else 3 * n)]  # a U term multiplies W (U when they coincide)
    cof = [F[I[M.SU] : I[M.SU] + nu]]
    if not same:
        pos.append(I[I[M.WPOS] : I[M.WPOS] + nw])
        src.append(I[I[M.WR] : I[M.WR] + nw])
        cof.append(F[I[M.SW] : I[M.SW] + nw])
    pos, src, cof = np.concatenate(pos), np.concatenate(src), np.concatenate(cof)  # in the order they are added
    count = np.bincount(pos, minlength=nnz)
    head = IL[: LT.count].copy()
    most = int(count.max()) if nnz else 0
    if nnz == 0 or most > 2 or count.min() < 1:
        head[LT.FUSED] = 0
        return np.concatenate([head, IL[LT.count :]]), FL
    src2, cof2 = np.zeros((most, nnz), np.int64), np.zeros((most, nnz))
    order = np.argsort(pos, kind="stable")  # an entry's terms in the order they are added: first, second
    rank = np.empty(len(pos), np.int64)
    rank[order] = np.arange(len(pos)) - (np.cumsum(count) - count)[pos[order]]
    src2[rank, pos], cof2[rank, pos] = src, cof
    nc, nr = int(IL[LT.NCOPY]), int(IL[LT.NROT])
    cq, rq = IL[IL[LT.CQ] : IL[LT.CQ] + nc], IL[IL[LT.RQ] : IL[LT.RQ] + nr]
    sign = FL[IL[LT.RS] : IL[LT.RS] + nr]  # ±1: folded into the coefficients, exactly (see above)
    if not np.all(np.abs(sign) == 1.0):
        head[LT.FUSED] = 0
        return np.concatenate([head, IL[LT.count :]]), FL
    head[LT.FUSED] = most
    head[LT.FCS] = len(IL)
    head[LT.FRS] = len(IL) + most * nc
    head[LT.FCC] = len(FL)
    head[LT.FRC] = len(FL) + most * nc
    IL = np.concatenate([head, IL[LT.count :], src2[:, cq].ravel(), src2[:, rq].ravel()])
    FL = np.concatenate([FL, cof2[:, cq].ravel(), (cof2[:, rq] * sign).ravel()])
    return IL, np.ascontiguousarray(FL)
