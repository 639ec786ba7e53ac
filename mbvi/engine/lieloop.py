"""The compiled RATTLE family for systems with rigid bodies: rotations on their Lie group.

The same three pieces as :mod:`mbvi.engine.loop` (kick, constrained drift,
kick and velocity projection), in velocity coordinates u = (ẋ, ω_body) of
:mod:`mbvi.engine.lie`, with a rigid body's drift the Cayley map of
:mod:`mbvi.engine.rotation` instead of a straight line in its rotation
columns:

* kick: u ← u + c₀ M_v⁻¹ f_v(q₀), f_v the generalized force mapped to forces
  and body torques;
* constrained drift (SHAKE on the position-level multipliers Λ):
  u½ = u_free − M_v⁻¹ G_v(q₀)ᵀ Λ / h, q₁ = drift(q₀, u½, h), g(q₁) = 0 —
  quasi-Newton with A(q₀) = G_v M_v⁻¹ G_vᵀ (a factor up to
  :data:`MAX_FACTOR_AGE` steps old, refined once on A(q₀): :func:`_correction`),
  and full Newton with the exact Jacobian G_v(q₁) (∂η₁/∂u½) M_v⁻¹ G_v(q₀)ᵀ / h
  when a body turns far in one step and the quasi-Newton iteration stalls;
* kick c₁ at q₁, and the projection of u onto G_v(q₁) u = 0 (RATTLE) when a
  state is read: it changes no position (:func:`_substep`, :func:`lie_project`).

Each step is the discrete Lagrange–d'Alembert map of a discrete Lagrangian
(the trapezoid rule for translations and potentials, the Cayley discrete
kinetic energy for rotations), so momentum maps are conserved exactly and the
energy stays in a band; a step exists for any spin. States enter and leave
as (q, Ṙ-column velocities) like everywhere else.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba import uint64 as U

from mbvi.engine import dense as D
from mbvi.engine import kernels as K
from mbvi.engine import rotation as ROT
from mbvi.engine import scheme as SC
from mbvi.engine.fields import LB, LT, RF, RK, ST, WARM_HISTORY, WARM_ROWS, WK, M
from mbvi.engine.kernels import inline, jit, jit_alloc, loop_report, loop_start
from mbvi.engine.kernels import workspace_view as _buf

__all__ = ["lie_buffers", "lie_prepare", "lie_project", "lie_step", "run_lie", "to_u", "to_vq"]


@jit_alloc
def lie_buffers(I, Iv, IL):
    """The float buffers of a Lie run, in the order of :data:`mbvi.engine.fields.LB` (the runs' own are sized by
    :mod:`mbvi.engine.runner` from the table; this is for tools that call the kernels alone)."""
    nq, nv, nnz, nb1 = I[M.NQ], Iv[M.NQ], I[M.NNZ], max(IL[LT.NB], 1)
    return (np.zeros(nnz), np.zeros(nq), np.zeros(nq), np.zeros(nq), np.zeros(nq), np.zeros(nq),
            np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv), np.zeros(nv),
            np.zeros(nv), np.zeros(nv), np.zeros(6 * nb1), np.zeros(nv),
            np.zeros(max(I[M.N], 1)), np.zeros(Z_ROWS * nv), np.zeros(3 * nb1), np.zeros(13 * nb1),
            np.zeros(nq), np.zeros(nv), np.zeros(nq), np.zeros(nv), np.zeros(nv),
            np.zeros(nv), np.zeros(nv))  # fmt: skip


#: steps a factor of A serves SHAKE at most (:func:`_correction`), and the contraction of its correction
#: (new residual / old) above which it is refreshed at the end of the step
MAX_FACTOR_AGE = 8
STALE_CONTRACTION = 0.05

#: the loosest SHAKE tolerance at which a step leaves RATTLE's velocity projection to the next step's
#: multipliers (:func:`_substep`). A step's residual may leave up to ~tol ℓ/h of velocity off the joints,
#: and a step accepted as predicted does not absorb it: at 1e-3 a 32-link chain piled up 1 m/s within
#: 0.1 s and SHAKE failed; at tighter tolerances the residual test itself bounds it. Looser: every step projects,
#: with SHAKE's factor refined once (:func:`_project`; exact only when forces read the velocity), so that a
#: factor is not made at every step for the projection alone (the 32-link chain at 1e-6: 19.7 → 17.5 µs a step)
LAZY_TOL = 1e-9


# ----------------------------------------------------------------------------- coordinates and forces
@jit
def to_u(IL, q, vq, u):
    """Velocity coordinates u = (ẋ, ω_body) from the column velocities vq at q."""
    tq, tv = IL[LT.TQ], IL[LT.TV]
    for i in range(IL[LT.NT]):
        u[IL[tv + i]] = vq[IL[tq + i]]
    bq, bv = IL[LT.BQ], IL[LT.BV]
    for b in range(IL[LT.NB]):
        ov = IL[bv + b]
        u[ov + 3], u[ov + 4], u[ov + 5] = ROT.body_rates(q, vq, IL[bq + b])


@jit
def to_vq(IL, q, u, vq):
    """Column velocities (ẋ, Ṙ = R ω̂) from the velocity coordinates u at q."""
    tq, tv = IL[LT.TQ], IL[LT.TV]
    for i in range(IL[LT.NT]):
        vq[IL[tq + i]] = u[IL[tv + i]]
    bq, bv = IL[LT.BQ], IL[LT.BV]
    for b in range(IL[LT.NB]):
        ov = IL[bv + b]
        ROT.column_rates(q, u[ov + 3], u[ov + 4], u[ov + 5], IL[bq + b], vq)


@jit
def _to_fv(IL, q, fq, fv):
    """Forces and body torques f_v from the generalized force fq on q."""
    tq, tv = IL[LT.TQ], IL[LT.TV]
    for i in range(IL[LT.NT]):
        fv[IL[tv + i]] = fq[IL[tq + i]]
    bq, bv = IL[LT.BQ], IL[LT.BV]
    for b in range(IL[LT.NB]):
        ov = IL[bv + b]
        fv[ov + 3], fv[ov + 4], fv[ov + 5] = ROT.body_torque(q, fq, IL[bq + b])


@jit
def _jacobian_v(I, F, IL, FL, q, u, w, gdq, gdv):
    """G_v(q) on the velocity pattern from U, W at q (:func:`mbvi.engine.kernels.constraint_values`)."""
    K.jacobian_values(I, F, u, w, gdq)
    gdv[:] = 0.0
    nc, nr = IL[LT.NCOPY], IL[LT.NROT]
    cq, cv = K.ints(IL, LT.CQ, nc), K.ints(IL, LT.CV, nc)
    for e in range(nc):
        gdv[U(cv[e])] = gdq[U(cq[e])]
    rv, rq, rr, rs = K.ints(IL, LT.RV, nr), K.ints(IL, LT.RQ, nr), K.ints(IL, LT.RR, nr), K.floats(IL, FL, LT.RS, nr)
    for e in range(nr):
        gdv[U(rv[e])] += rs[e] * q[U(rr[e])] * gdq[U(rq[e])]


@jit
def _jacobian_v_fused(IL, FL, q, uw, gdv):
    """:func:`_jacobian_v` in one pass from the concatenated (U, W) when ``IL[L_FUSED]`` (see
    :func:`mbvi.engine.lie.fuse_jacobian`): the same operations, without G on the configuration pattern."""
    nc, nr, two, rot3 = IL[LT.NCOPY], IL[LT.NROT], IL[LT.FUSED] == 2, IL[LT.ROT3]
    if two or rot3 != 2:  # else every entry is written once below, by its copy or its three
        gdv[:] = 0.0
    cv, cs, cc = (
        K.ints(IL, LT.CV, nc),
        K.ints(IL, LT.FCS, 2 * nc if two else nc),
        K.floats(IL, FL, LT.FCC, 2 * nc if two else nc),
    )
    rv, rr = K.ints(IL, LT.RV, nr), K.ints(IL, LT.RR, nr)
    fs, fc = K.ints(IL, LT.FRS, 2 * nr if two else nr), K.floats(IL, FL, LT.FRC, 2 * nr if two else nr)
    if two:  # an entry of G is (0 + first term) + second term, as jacobian_values sums it
        for e in range(nc):
            gdv[U(cv[e])] = (0.0 + cc[e] * uw[U(cs[e])]) + cc[nc + e] * uw[U(cs[nc + e])]
        for e in range(nr):
            gdv[U(rv[e])] += q[U(rr[e])] * ((0.0 + fc[e] * uw[U(fs[e])]) + fc[nr + e] * uw[U(fs[nr + e])])
        return
    for e in range(nc):
        gdv[U(cv[e])] = 0.0 + cc[e] * uw[U(cs[e])]
    if rot3:  # an entry's terms side by side, in threes: each three summed in a register, in order
        for k in range(nr // 3):
            e = 3 * k
            t = U(rv[e])
            acc = (0.0 if rot3 == 2 else gdv[t]) + q[U(rr[e])] * (0.0 + fc[e] * uw[U(fs[e])])
            acc += q[U(rr[e + 1])] * (0.0 + fc[e + 1] * uw[U(fs[e + 1])])
            gdv[t] = acc + q[U(rr[e + 2])] * (0.0 + fc[e + 2] * uw[U(fs[e + 2])])
        return
    for e in range(nr):
        gdv[U(rv[e])] += q[U(rr[e])] * (0.0 + fc[e] * uw[U(fs[e])])


@jit
def _jacobian_at(I, F, Iv, IL, FL, WI, WS, bufs, q, slot, fresh):
    """G_v(q) into Jacobian buffer ``slot`` (``fresh``: U, W in the workspace are already those at q)."""
    n, nnz = I[M.N], Iv[M.NNZ]
    u, w = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n)
    gd = WS[WI[WK.GD] + slot * nnz : WI[WK.GD] + (slot + 1) * nnz]
    if not fresh:
        K.affine_uw(I, F, q, u, w)
    if IL[LT.FUSED]:
        _jacobian_v_fused(IL, FL, q, _buf(WI, WS, WK.U, 6 * n), gd)
    else:
        _jacobian_v(I, F, IL, FL, q, u, w, bufs[LB.GDQ], gd)


@jit
def _refactor(Iv, Fv, WI, WS, slot):
    """SHAKE's factor of A = G_v M_v⁻¹ G_vᵀ from Jacobian buffer ``slot``; False when A cannot be factored.

    The factor may then serve a few steps (``FACTOR_AGE``; see :func:`_correction`).
    """
    nnz, size = Iv[M.NNZ], WI[WK.SIZE_AB]
    kind = K.factor(Iv, Fv, WS[WI[WK.GD] + slot * nnz : WI[WK.GD] + (slot + 1) * nnz], WS[WI[WK.AB] : WI[WK.AB] + size])
    if kind == K.SHIFTED:
        WI[WK.SHIFT_USED] += 1
    WI[WK.FACTOR_AGE] = 0
    WI[WK.REFRESH] = 0
    WI[WK.REFACTORED] += 1
    return kind != K.FAILED


@jit
def _factor_at(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, slot, fresh):
    """G_v(q) into Jacobian buffer ``slot`` and SHAKE's factor of A(q) (``fresh``: U, W already at q)."""
    _jacobian_at(I, F, Iv, IL, FL, WI, WS, bufs, q, slot, fresh)
    return _refactor(Iv, Fv, WI, WS, slot)


@jit
def _solve(Iv, WI, WS, rhs, out):
    K.solve(Iv, WS[WI[WK.AB] : WI[WK.AB] + WI[WK.SIZE_AB]], rhs, out, _buf(WI, WS, WK.TMP, Iv[M.N]))


@jit
def _correction(Iv, Fv, WI, WS, bufs, gd0, g, dl, rhs):
    """dl = A(q₀)⁻¹ g: a solve with SHAKE's factor, plus one step of iterative refinement on A(q₀) = G₀ M⁻¹ G₀ᵀ
    when the factor is of an earlier configuration (its error is then squared: as good as a fresh factor's).
    ``rhs`` (n,) is scratch for the refinement's residual (not g); bufs[B_DV] and bufs[B_DL2] are overwritten."""
    _solve(Iv, WI, WS, g, dl)
    if WI[WK.FACTOR_AGE] == 0:
        return
    n = Iv[M.N]
    dv, dl2 = bufs[LB.DV], bufs[LB.DL2]
    K.wgt(Iv, Fv, gd0, dl, dv)
    K.matvec(Iv, gd0, dv, rhs)
    for i in range(n):
        rhs[i] = g[i] - rhs[i]
    _solve(Iv, WI, WS, rhs, dl2)
    for i in range(n):
        dl[i] += dl2[i]


# ------------------------------------------------------------------------------------------ drift
@njit(inline="always")  # a view: inlined (see mbvi.engine.kernels.workspace_view)
def _moments(IL, FL):
    """The bodies' principal moments J (3, NB), kg m², one column per body."""
    nb, jo = IL[LT.NB], IL[LT.J]
    return FL[jo : jo + 3 * nb].reshape((3, nb))


@jit
def _drift(IL, FL, q0, uh, h, q1, xs, warm, bufs):
    """q₁ = drift(q₀, u½, h): straight lines for translations, Cayley steps for rotations (R₁ = R₀ cay(x),
    orthonormalized by :func:`_shake` once SHAKE keeps the drift).

    xs (6, NB) by rows receives the Cayley parameters (rows 0–2, one column per
    body); with ``warm`` they are those of a nearby drift (the previous SHAKE
    iterate), Newton's first guess (one Newton step when u½ barely moved). Else
    the guess is :func:`mbvi.engine.rotation.cayley_guess` plus its miss at the
    last accepted drift (rows 3–5, from :func:`_drift_rates`): the guess misses
    by O(|hω|³), and that miss changes little from one step to the next, so
    Newton again needs one step where the bare guess needed two. Every body's
    first Newton step runs at once (:func:`mbvi.engine.rotation.cayley_newton_all`),
    the rare body it does not settle goes on alone; bufs[B_CW], bufs[B_CC] are its scratch.
    """
    bv, nb = IL[LT.BV], IL[LT.NB]
    if IL[LT.NT] + 9 * nb != len(q1):  # coordinates that are neither positions nor rotation columns stay
        K.copy_into(q1, q0)
    tq, tv = IL[LT.TQ], IL[LT.TV]
    for i in range(IL[LT.NT]):
        q1[IL[tq + i]] = q0[IL[tq + i]] + h * uh[IL[tv + i]]
    if nb == 0:
        return True
    J, X = _moments(IL, FL), xs[: 6 * nb].reshape((6, nb))
    W, C = bufs[LB.CW][: 3 * nb].reshape((3, nb)), bufs[LB.CC][: 13 * nb].reshape((13, nb))
    for b in range(nb):
        ov = IL[bv + b] + 3
        W[0, b], W[1, b], W[2, b] = uh[ov], uh[ov + 1], uh[ov + 2]
    ROT.cayley_newton_all(J, W, X, C, h, warm)
    bq = IL[LT.BQ]
    for b in range(nb):
        oq = IL[bq + b]
        if C[9, b] == 0.0:  # settled by the one Newton step: R₁ = R₀ cay(x)
            ROT.rotate_by(q0, q1, oq, C[0, b], C[1, b], C[2, b], C[3, b], C[4, b], C[5, b], C[6, b], C[7, b], C[8, b])
            continue
        ok, X[0, b], X[1, b], X[2, b] = ROT.rotate_columns(  # on alone, from the first guess
            J[0, b], J[1, b], J[2, b], W[0, b], W[1, b], W[2, b], h, q0, q1, oq, C[10, b], C[11, b], C[12, b]
        )
        if not ok:
            return False
    return True


@jit
def _drift_rates(IL, FL, uh, h, xs, ua, um, mean):
    """After the drift that SHAKE accepted: ua the velocity after it, and with ``mean`` um the step's mean
    velocity (read only by non-conservative forces: ``HAS_F``).

    (x₁ − x₀)/h = u½ for translations; for a body, the rate J⁻¹ cay(x)ᵀ J ω½
    after the drift and the rate log(cay(x))/h at which it turned. Stores the
    miss of :func:`mbvi.engine.rotation.cayley_guess` at this drift in rows 3–5 of xs (6, NB)
    (the next step's first guess, see :func:`_drift`).
    """
    tv = IL[LT.TV]
    for i in range(IL[LT.NT]):
        ua[IL[tv + i]] = uh[IL[tv + i]]
        um[IL[tv + i]] = uh[IL[tv + i]]
    bv, nb = IL[LT.BV], IL[LT.NB]
    if nb == 0:
        return
    J, X = _moments(IL, FL), xs[: 6 * nb].reshape((6, nb))
    for b in range(nb):
        ov = IL[bv + b] + 3
        J0, J1, J2 = J[0, b], J[1, b], J[2, b]
        x0, x1, x2 = X[0, b], X[1, b], X[2, b]
        w0, w1, w2 = uh[ov], uh[ov + 1], uh[ov + 2]
        ua[ov], ua[ov + 1], ua[ov + 2] = ROT.rate_after(J0, J1, J2, w0, w1, w2, x0, x1, x2)
        if mean:  # an arctangent a body: skipped when no force reads it
            um[ov], um[ov + 1], um[ov + 2] = ROT.mean_rate(x0, x1, x2, h)
        c0, c1, c2 = ROT.cayley_guess(J0, J1, J2, h * w0, h * w1, h * w2)
        X[3, b], X[4, b], X[5, b] = x0 - c0, x1 - c1, x2 - c2


@jit_alloc
def _drift_sensitivity(IL, FL, q0, uh, h, q1, Bq):
    """∂η₁/∂ω½ (3×3) of every body by forward differences (η₁: body-frame increment at R₁); Bq (NB, 3, 3)."""
    bq, bv = IL[LT.BQ], IL[LT.BV]
    J = _moments(IL, FL)
    qp = q1.copy()
    for b in range(IL[LT.NB]):
        oq, ov = IL[bq + b], IL[bv + b] + 3
        a = oq + 3  # R[i, c] = q[a + 3c + i]
        w0, w1, w2 = uh[ov], uh[ov + 1], uh[ov + 2]
        eps = 1e-7 * (math.sqrt(w0**2 + w1**2 + w2**2) + 1.0 / abs(h))
        for k in range(3):
            p0, p1, p2 = w0 + (eps if k == 0 else 0.0), w1 + (eps if k == 1 else 0.0), w2 + (eps if k == 2 else 0.0)
            ROT.rotate_columns(J[0, b], J[1, b], J[2, b], p0, p1, p2, h, q0, qp, oq, h * p0, h * p1, h * p2)
            # η = vee(skew(R₁ᵀ Rp)) / eps
            for kk, (ca, cc) in enumerate(((2, 1), (0, 2), (1, 0))):
                s = 0.0
                for i in range(3):
                    s += q1[a + 3 * ca + i] * qp[a + 3 * cc + i] - q1[a + 3 * cc + i] * qp[a + 3 * ca + i]
                Bq[b, kk, k] = 0.5 * s / eps


@jit_alloc
def _shake_newton(I, F, Iv, Fv, IL, FL, WI, WS, bufs, gd0, q0, ufree, h, lamv, tol, maxiter):
    """Full Newton on Λ with the Jacobian G_v(q₁) (∂η₁/∂u½) M_v⁻¹ G_v(q₀)ᵀ / h (dense least squares,
    :func:`mbvi.engine.dense.lstsq`)."""
    n, nv, nnz = I[M.N], Iv[M.NQ], Iv[M.NNZ]
    if not I[M.DENSE_OK]:
        return ST.NEEDS_NUMPY
    WI[WK.NEWTON_USED] += 1
    prow, pcol, wo = Iv[M.PROW], Iv[M.PCOL], Iv[M.W]
    q1, uh, dv, xs = bufs[LB.Q1], bufs[LB.UH], bufs[LB.DV], bufs[LB.X]
    u, w, g = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n), _buf(WI, WS, WK.G, n)
    # M⁻¹ G(q₀)ᵀ, dense (nv, n)
    WG0 = np.zeros((nv, n))
    for i in range(nnz):
        c = Iv[pcol + i]
        WG0[c, Iv[prow + i]] += Fv[wo + c] * gd0[i]
    nb = IL[LT.NB]
    Bq = np.zeros((max(nb, 1), 3, 3))
    gd1 = np.zeros(nnz)
    BWG = np.zeros((nv, n))
    J = np.zeros((n, n))
    bv = IL[LT.BV]
    for it in range(maxiter):
        K.wgt(Iv, Fv, gd0, lamv, dv)
        for i in range(nv):
            uh[i] = ufree[i] - dv[i] / h
        if not _drift(IL, FL, q0, uh, h, q1, xs, it > 0, bufs):
            return ST.SHAKE_FAILED
        K.constraint_values(I, F, q1, u, w, g)
        r = K.residual(I, F, g)
        if r <= tol or (it >= 2 and K.residual_at_roundoff(I, F, q1, u, w, g) <= tol):
            return ST.DONE
        if not r < math.inf:
            break
        if it % 4 == 0:  # refresh the drift's sensitivity now and then (quasi-Newton in between)
            _drift_sensitivity(IL, FL, q0, uh, h, q1, Bq)
            for i in range(nv):  # BWG = h WG0 (element by element: no array expression to compile)
                for c in range(n):
                    BWG[i, c] = h * WG0[i, c]
            for b in range(nb):
                ov = IL[bv + b]
                for c in range(n):
                    for i in range(3):
                        BWG[ov + 3 + i, c] = (Bq[b, i, 0] * WG0[ov + 3, c] + Bq[b, i, 1] * WG0[ov + 4, c]
                                              + Bq[b, i, 2] * WG0[ov + 5, c])  # fmt: skip
        _jacobian_v(I, F, IL, FL, q1, u, w, bufs[LB.GDQ], gd1)
        J[:, :] = 0.0
        for i in range(nnz):  # J = G_v(q₁) BWG / h, G_v(q₁) by its entries
            r, c, gv = Iv[prow + i], Iv[pcol + i], gd1[i] / h
            for a in range(n):
                J[r, a] += gv * BWG[c, a]
        dl = D.lstsq(J, g)
        for i in range(n):
            lamv[i] += dl[i]
    return ST.SHAKE_FAILED


@jit
def _shake(I, F, Iv, Fv, IL, FL, WI, WS, bufs, slot0, q0, ufree, h, lam, warm, tol, maxiter):
    """Constrained drift from u_free: u½ (bufs[B_UH]), q₁ (bufs[B_Q1]), u after it (bufs[B_UA]) and, when
    non-conservative forces read it, the step's mean velocity (bufs[B_UM])."""
    st = _shake_multipliers(I, F, Iv, Fv, IL, FL, WI, WS, bufs, slot0, q0, ufree, h, lam, warm, tol, maxiter)
    if st == ST.DONE:
        q1, bq = bufs[LB.Q1], IL[LT.BQ]
        for b in range(IL[LT.NB]):  # once for the drift kept, not for every SHAKE iterate
            ROT.orthonormalize(q1, IL[bq + b])
        _drift_rates(IL, FL, bufs[LB.UH], h, bufs[LB.X], bufs[LB.UA], bufs[LB.UM], I[M.HAS_F] != 0)
    return st


@inline
def _shake_multipliers(I, F, Iv, Fv, IL, FL, WI, WS, bufs, slot0, q0, ufree, h, lam, warm, tol, maxiter):
    """SHAKE on the multipliers: u½ and q₁ (the rates after the drift are :func:`_drift_rates`)."""
    n, nnz = I[M.N], Iv[M.NNZ]
    q1, uh, dv, xs = bufs[LB.Q1], bufs[LB.UH], bufs[LB.DV], bufs[LB.X]
    lamv, dl = _buf(WI, WS, WK.LAMV, n), _buf(WI, WS, WK.DL, n)
    u, w, g = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n), _buf(WI, WS, WK.G, n)
    gd0 = WS[WI[WK.GD] + slot0 * nnz : WI[WK.GD] + (slot0 + 1) * nnz]
    for i in range(n):
        lamv[i] = lam[i] if warm else 0.0
    prev = math.inf
    slow = 0
    for it in range(maxiter):
        if n:
            K.wgt(Iv, Fv, gd0, lamv, dv)
            for i in range(len(uh)):
                uh[i] = ufree[i] - dv[i] / h
        else:
            K.copy_into(uh, ufree)
        WI[WK.DRIFTS] += 1
        if not _drift(IL, FL, q0, uh, h, q1, xs, it > 0, bufs):
            return ST.SHAKE_FAILED
        if n == 0:
            return ST.DONE
        K.constraint_values(I, F, q1, u, w, g)
        r = K.residual(I, F, g)
        if r <= 0.5 * tol:  # not tol: a warm start whose error creeps up step by step stops well inside it
            if warm:
                K.copy_into(lam, lamv)
            if it >= 2 or (it == 1 and WI[WK.FACTOR_AGE] and r > STALE_CONTRACTION * prev):
                WI[WK.REFRESH] = (
                    1  # a step that needed more than one correction, or an old factor that served less well
                )
            return ST.DONE
        if not r < math.inf:
            break
        slow = slow + 1 if r > 0.25 * prev else 0
        prev = r
        if slow and WI[WK.FACTOR_AGE]:  # first a fresh factor, at q₀
            if not _refactor(Iv, Fv, WI, WS, slot0):
                return ST.NEEDS_NUMPY
            slow = 0
        if slow >= 2 and K.residual_at_roundoff(I, F, q1, u, w, g) <= tol:  # stalled at round-off: done
            if warm:
                K.copy_into(lam, lamv)
            return ST.DONE
        if slow >= 3:
            st = _shake_newton(I, F, Iv, Fv, IL, FL, WI, WS, bufs, gd0, q0, ufree, h, lamv, tol, maxiter)
            if warm and st == ST.DONE:
                K.copy_into(lam, lamv)
            elif warm:
                lam[:] = 0.0
            return st
        _correction(Iv, Fv, WI, WS, bufs, gd0, g, dl, _buf(WI, WS, WK.RHS, n))
        for i in range(n):
            lamv[i] += dl[i]
    return ST.SHAKE_FAILED


# ------------------------------------------------------------------------------------------- steps
@jit
def _forces(I, F, IL, q, uF, t, grad, bufs, fv):
    """f_v(−∇U + F(q, u_F, t)) into bufs[LB.TMPV]; fv receives f_v(F), the non-conservative part."""
    fq, tmp, vq = bufs[LB.FQ], bufs[LB.TMPV], bufs[LB.VQ]
    if I[M.HAS_F]:
        to_vq(IL, q, uF, vq)
        K.nonconservative_force(I, F, q, vq, t, fq)
        _to_fv(IL, q, fq, fv)
        for i in range(len(fq)):
            fq[i] -= grad[i]
    else:
        fv[:] = 0.0
        for i in range(len(fq)):
            fq[i] = -grad[i]
    _to_fv(IL, q, fq, tmp)


@jit
def _kick(Iv, Fv, u_in, c, f, out):
    """out = u_in + c M_v⁻¹ f."""
    wo = Iv[M.W]
    for i in range(len(out)):
        out[i] = u_in[i] + c * Fv[wo + i] * f[i]


@jit
def lie_prepare(I, F, IL, WI, bufs, q, u):
    """Sets ``WI[CONST_FORCE]`` when the generalized force is constant in velocity coordinates, and then
    stores it in bufs[B_FC]: gravity alone (no spring, torsion or bending family, no non-conservative
    force) acting on the bodies' centres (no gravity entry on a rotation column, so no torque), as in the
    chains, pendulums and tops most scenes are. Its steps skip the force evaluations, with the same
    result bit for bit (:func:`_forces` gives this force at every q)."""
    gv = I[M.GVEC]
    const = not I[M.HAS_F] and I[M.SP_M] == 0 and I[M.T1_M] == 0 and I[M.BA_M] == 0 and not I[M.KGRAD]
    bq = IL[LT.BQ]
    for b in range(IL[LT.NB]):
        for c in range(9):
            if F[gv + IL[bq + b] + 3 + c] != 0.0:
                const = False
    WI[WK.CONST_FORCE] = 1 if const else 0
    if const:
        grad = bufs[LB.GRAD0]
        K.gradient(I, F, q, 0.0, grad)
        _forces(I, F, IL, q, u, 0.0, grad, bufs, bufs[LB.FV0])  # (a force of no time)
        K.copy_into(bufs[LB.FC], bufs[LB.TMPV])


@inline
def _substep(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, t, h, c0, c1, lam, tol, maxiter, length_scale):
    """One RATTLE-family substep of (q, u) in place: kick c₀, constrained Lie drift h, kick c₁.

    u is left off the joints: RATTLE's projection onto G_v(q₁) u = 0 changes
    no position (the next SHAKE's multipliers absorb any velocity along
    M_v⁻¹ G_vᵀ), so it is made when a state is read (:func:`lie_project`), and
    here only when forces read the velocity (exactly, with a new factor) or the
    tolerance is looser than :data:`LAZY_TOL` (with SHAKE's factor, refined once).
    """
    n, nv = I[M.N], Iv[M.NQ]
    cur = WI[WK.CUR]
    nxt = 1 - cur
    if not WI[WK.HAVE_FACTOR]:
        if not _factor_at(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, cur, K.opaque(False)):
            return ST.NEEDS_NUMPY
        WI[WK.HAVE_FACTOR] = 1
    grad0 = bufs[LB.GRAD0] if cur == 0 else bufs[LB.GRAD1]
    grad1 = bufs[LB.GRAD1] if cur == 0 else bufs[LB.GRAD0]
    cf = WI[WK.CONST_FORCE]
    if c0 != 0.0 and not WI[WK.HAVE_GRAD] and not cf:
        K.gradient(I, F, q, t, grad0)
    ufree, ua, unew, fv0, fv1 = bufs[LB.UFREE], bufs[LB.UA], bufs[LB.UNEW], bufs[LB.FV0], bufs[LB.FV1]
    q1 = bufs[LB.Q1]
    # --- kick c₀ and constrained drift
    if c0 == 0.0:
        K.copy_into(ufree, u)
        fv0[:] = 0.0
        st = _shake(I, F, Iv, Fv, IL, FL, WI, WS, bufs, cur, q, ufree, h, lam, K.opaque(True), tol, maxiter)
    elif cf:
        _kick(Iv, Fv, u, c0, bufs[LB.FC], ufree)
        st = _shake(I, F, Iv, Fv, IL, FL, WI, WS, bufs, cur, q, ufree, h, lam, K.opaque(True), tol, maxiter)
    elif not I[M.HAS_VF]:
        _forces(I, F, IL, q, u, t, grad0, bufs, fv0)
        _kick(Iv, Fv, u, c0, bufs[LB.TMPV], ufree)
        st = _shake(I, F, Iv, Fv, IL, FL, WI, WS, bufs, cur, q, ufree, h, lam, K.opaque(True), tol, maxiter)
    else:
        # fixed point on u½ (the force at the step's mean velocity), as the NumPy path does
        floor = 10.0 * tol * length_scale / abs(h) if n else 0.0
        K.copy_into(unew, u)
        prev = math.inf
        mixing = 0 if h > 0.0 else -1  # (a backward stage is not mixed: K.settle_mixed)
        st = ST.DRIFT_FAILED
        for it in range(100):
            _forces(I, F, IL, q, unew, t, grad0, bufs, fv0)
            _kick(Iv, Fv, u, c0, bufs[LB.TMPV], ufree)
            if it == 0:  # the round-off of the iterate's terms (u₀ and its kick may nearly cancel)
                floor += K.sum_roundoff(u, ufree)
            s2 = _shake(I, F, Iv, Fv, IL, FL, WI, WS, bufs, cur, q, ufree, h, lam, K.opaque(False), tol, maxiter)
            if s2 == ST.NEEDS_NUMPY:
                return s2
            if s2 != ST.DONE:  # at the first iterate (u½ = u₀) SHAKE itself fails, as it would with no such
                if it == 0:  # force; later, the fixed point may have run away before SHAKE could follow
                    return s2
                break
            # the force acts at the step's mean velocity: unew ← u_m
            outcome, prev, mixing = K.settle_mixed(bufs[LB.UM], unew, bufs[LB.GP], bufs[LB.RP], floor, it, prev,
                                                   mixing)  # fmt: skip
            if outcome == K.SETTLED:
                st = ST.DONE
            if outcome != K.GOING:
                break
        if st != ST.DONE:
            return ST.DRIFT_FAILED
    if st != ST.DONE:
        return st
    _push_impulse(WI, bufs)
    # --- kick c₁ at q₁ and projection onto G_v(q₁) u = 0
    fv1[:] = 0.0
    if c1 != 0.0 and cf:
        _kick(Iv, Fv, ua, c1, bufs[LB.FC], u)
    elif c1 != 0.0:
        K.gradient(I, F, q1, t + h, grad1)
        _forces(I, F, IL, q1, bufs[LB.UM], t + h, grad1, bufs, fv1)
        _kick(Iv, Fv, ua, c1, bufs[LB.TMPV], u)
        WI[WK.HAVE_GRAD] = 1
    else:
        K.copy_into(u, ua)
        WI[WK.HAVE_GRAD] = 0
    if I[M.HAS_F]:
        acc, um = 0.0, bufs[LB.UM]  # each kicked end's force at the step's mean velocity, times the drift
        for i in range(nv):
            acc += (c0 * fv0[i] + c1 * fv1[i]) * um[i]
        if c0 == 0.0 or c1 == 0.0:  # one end kicked (symplectic Euler): the trapezoid (mbvi.engine.loop._substep)
            if c1 == 0.0:
                _forces(I, F, IL, q1, um, t + h, grad1, bufs, fv1)
            else:
                _forces(I, F, IL, q, um, t, grad0, bufs, fv0)
            trapezoid, c = 0.0, c0 + c1
            for i in range(nv):
                trapezoid += 0.5 * c * (fv0[i] + fv1[i]) * um[i]
            if abs(trapezoid) < math.inf:
                acc = trapezoid
        WS[WI[WK.WORK]] += acc
    exact = I[M.HAS_VF]  # forces read the velocity: u exactly on the joints
    _jacobian_at(I, F, Iv, IL, FL, WI, WS, bufs, q1, nxt, K.opaque(True))
    if exact or WI[WK.REFRESH] or WI[WK.FACTOR_AGE] + 1 >= MAX_FACTOR_AGE:
        if not _refactor(Iv, Fv, WI, WS, nxt):
            return ST.NEEDS_NUMPY
    else:
        WI[WK.FACTOR_AGE] += 1
    K.copy_into(q, q1)
    WI[WK.CUR] = nxt
    # u stays off the joints at a tight tolerance (the velocity along M_v⁻¹ G_vᵀ it carries is ~tol ℓ/h
    # from the step's residual plus O(h) from the kicks) when no force reads the velocity. At a loose one
    # SHAKE's factor, of this or an earlier configuration, takes most of it off (see LAZY_TOL)
    if exact or tol > LAZY_TOL:
        _project(Iv, Fv, WI, WS, bufs, nxt, u, u)
    return ST.DONE


@jit
def _project(Iv, Fv, WI, WS, bufs, slot, u, out):
    """out = u − M_v⁻¹ G_vᵀ A⁻¹ G_v u with G_v in buffer ``slot`` (out may be u).

    With SHAKE's factor of an earlier configuration (``FACTOR_AGE`` > 0), A⁻¹ is :func:`_correction`'s solve
    with one step of iterative refinement on A = G_v M_v⁻¹ G_vᵀ: the velocity it leaves along M_v⁻¹ G_vᵀ is the
    square of the factor's error times the velocity there was.
    """
    n, nnz = Iv[M.N], Iv[M.NNZ]
    if n:
        gd = WS[WI[WK.GD] + slot * nnz : WI[WK.GD] + (slot + 1) * nnz]
        rhs, dl, dv = _buf(WI, WS, WK.RHS, n), _buf(WI, WS, WK.DL, n), bufs[LB.DV]
        K.matvec(Iv, gd, u, rhs)
        _correction(Iv, Fv, WI, WS, bufs, gd, rhs, dl, _buf(WI, WS, WK.G, n))
        K.wgt(Iv, Fv, gd, dl, dv)
        for i in range(len(u)):
            out[i] = u[i] - dv[i]
    else:
        K.copy_into(out, u)


@jit
def lie_project(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, out):
    """out = u − M_v⁻¹ G_vᵀ A⁻¹ G_v u at q: RATTLE's projection onto the joints (out may be u).

    The steps leave u off the joints (:func:`_substep`); a run projects it when
    it saves or returns a state, with the factor the last step left at q
    (``HAVE_FACTOR``), else one made here. False when A cannot be factored.
    """
    cur = WI[WK.CUR]
    if not WI[WK.HAVE_FACTOR]:
        if not _factor_at(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, cur, K.opaque(False)):
            return False
        WI[WK.HAVE_FACTOR] = 1
    elif WI[WK.FACTOR_AGE] and not _refactor(Iv, Fv, WI, WS, cur):
        return False
    _project(Iv, Fv, WI, WS, bufs, cur, u, out)
    return True


@jit
def _project_aside(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, out):
    """:func:`lie_project` for the state a call returns without saving it (a long run called in chunks, stopped
    by the clock: :mod:`mbvi.interrupts`): with SHAKE's factor as the steps left it, of an earlier configuration or
    not (then with one step of iterative refinement), so that the steps after the call go on from the same factor
    as a run in one call. A fresh factor made here made a run's numbers depend on where its calls stopped — on the
    machine's load (a parallelogram through its change points strayed by 61 % of its energy in one run in many)."""
    if WI[WK.HAVE_FACTOR]:
        _project(Iv, Fv, WI, WS, bufs, WI[WK.CUR], u, out)
        return True
    return lie_project(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, out)


#: rows of the impulse history: the last step's and the four before it
Z_ROWS = 5


@jit
def _push_impulse(WI, bufs):
    """After a constrained drift: its impulse M_v⁻¹ G_vᵀ Λ (bufs[B_DV], velocity units) onto the ring of the
    last :data:`Z_ROWS` (:func:`_warm_start`)."""
    dv = bufs[LB.DV]
    head = (WI[WK.Z_HEAD] + 1) % Z_ROWS
    K.copy_into(bufs[LB.ZH].reshape((Z_ROWS, len(dv)))[head], dv)
    WI[WK.Z_HEAD] = head
    WI[WK.Z_KNOWN] = min(WI[WK.Z_KNOWN] + 1, Z_ROWS)


@jit
def _impulse_misses(WI, bufs):
    """How far orders 0 … 3 through the impulses of the steps before missed the last step's (max norm)."""
    zh = bufs[LB.ZH]
    nv = len(zh) // Z_ROWS
    h0 = WI[WK.Z_HEAD]
    z = zh.reshape((Z_ROWS, nv))
    return K.misses(z[h0], z[(h0 + 4) % Z_ROWS], z[(h0 + 3) % Z_ROWS], z[(h0 + 2) % Z_ROWS], z[(h0 + 1) % Z_ROWS])


@jit
def _warm_start(I, WI, bufs, scheme, lam):
    """Before a step: :func:`mbvi.engine.kernels.extrapolate_warm_start`, the order chosen by how well each
    predicted the last step's impulse M_v⁻¹ G_vᵀ Λ rather than Λ itself.

    A chain's multipliers carry noise along the soft modes of A = G_v M_v⁻¹ G_vᵀ (a residual of a tolerance
    is a multiplier error A⁻¹ r) that moves nothing: measured on Λ, that noise hides how much better the cubic
    predicts. The impulse weighs an error by what it moves: over 3000 steps of the 32-link rigid chain
    whipping, 2.24 drifts a step instead of 2.28 and 839 factorizations of A instead of 925. Until the
    impulses of five steps are known (a run's first steps), by Λ.
    """
    if not K.extrapolates(I, scheme, lam):
        return
    now, hist = lam[0], lam[WARM_HISTORY:WARM_ROWS]
    cold, known = K.history_known(now, hist)
    if cold:
        WI[WK.Z_KNOWN] = 0
    e0 = e1 = e2 = e3 = 0.0
    if known >= 2 and WI[WK.Z_KNOWN] > known:
        e0, e1, e2, e3 = _impulse_misses(WI, bufs)
    elif known >= 2:
        e0, e1, e2, e3 = K.misses(now, hist[0], hist[1], hist[2], hist[3])
    K.advance_warm_start(now, hist, K._best_order(known, e0, e1, e2, e3), cold)


@inline
def lie_step(I, F, Iv, Fv, IL, FL, WI, WS, bufs, scheme, q, u, t, h, lam, tol, maxiter, ls):
    """One step of a RATTLE-family ``scheme`` (:mod:`mbvi.engine.scheme`) of (q, u) in place: its stages in order."""
    _warm_start(I, WI, bufs, scheme, lam)
    ts = t
    for s in range(scheme.shape[0]):
        hs = scheme[s, SC.WEIGHT] * h
        row = int(scheme[s, SC.ROW])
        st = _substep(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, ts, hs, scheme[s, SC.A0] * hs,
                      scheme[s, SC.A1] * hs, lam[row], tol, maxiter, ls)  # fmt: skip
        if st != ST.DONE:
            return st
        ts = ts + hs
    return ST.DONE


@jit
def _fastest_turn(IL, u, h):
    """max over bodies of h |ω| (rad): how far the fastest body turns in a step."""
    bv = IL[LT.BV]
    top = 0.0
    for b in range(IL[LT.NB]):
        o = IL[bv + b] + 3
        top = max(top, abs(h) * math.sqrt(u[o] ** 2 + u[o + 1] ** 2 + u[o + 2] ** 2))
    return top


@jit
def _pieces(IL, u, h, max_turn, at_least):
    """The substeps (a power of two, ≥ ``at_least``) a step of h needs for no body to turn more than ``max_turn``
    rad in one (h|ω| from the velocity coordinates u)."""
    turn = _fastest_turn(IL, u, h)
    pieces = at_least
    while turn > max_turn * pieces and pieces < SC.MAX_REFINE:
        pieces *= 2
    return pieces


@inline
def lie_step_refined(I, F, Iv, Fv, IL, FL, WI, WS, bufs, scheme, q, u, t, h, lam, tol, maxiter, ls, max_turn, qb, ub):
    """:func:`lie_step`, taken as 2, 4, … equal substeps when a body would turn more than ``max_turn`` rad.

    The count is **fixed for the run, and only grows**: a step takes the run's count (``WI[WK.PIECES]``), more
    when the fastest body would turn more than ``max_turn`` at the step's start or at its end (the step is then
    taken again), and the run keeps the larger count from then on. Every step is then one fixed composition of
    the variational method — a symplectic map, the same forward and backward in time — but at the few steps
    where the count grows. A count chosen afresh at every step from the state is a different map at every step
    and the energy drifted (a whipping 10-link chain lost 2.3 % of its energy in 30 s at dt = 1e-3, 41 % in
    100 s at dt = 1e-2; with this rule its energy stays in a band of 0.16 % and 0.7 %, docs/integrators.md). A
    step whose constrained drift has no solution is retried from the same state with twice as many substeps.
    The run goes on at h; ``WI[WK.REFINED]`` counts the steps taken in substeps.
    """
    pieces = _pieces(IL, u, h, max_turn, max(WI[WK.PIECES], 1))
    K.copy_into(qb, q)
    K.copy_into(ub, u)
    wb = WS[WI[WK.WORK]]
    st = ST.DONE
    while True:
        if pieces > max(WI[WK.PIECES], 1):
            lam[:, :] = 0.0  # the warm starts of h do not suit its substeps
        for piece in range(pieces):
            st = lie_step(I, F, Iv, Fv, IL, FL, WI, WS, bufs, scheme, q, u, t + piece * (h / pieces), h / pieces, lam,
                          tol, maxiter, ls)  # fmt: skip
            if st != ST.DONE:
                break
        more = pieces
        if st == ST.DONE:
            more = _pieces(IL, u, h, max_turn, pieces)  # what the step's end needs
            if more == pieces:
                if pieces > 1:
                    WI[WK.REFINED] += 1
                if pieces > max(WI[WK.PIECES], 1):  # from now on every step takes these substeps
                    lam[:, :] = 0.0
                    WI[WK.PIECES] = pieces
                return ST.DONE
        K.copy_into(q, qb)
        K.copy_into(u, ub)
        WS[WI[WK.WORK]] = wb  # the work of the pieces taken is not the step's
        WI[WK.HAVE_FACTOR] = 0
        WI[WK.HAVE_GRAD] = 0
        if st == ST.NEEDS_NUMPY or pieces >= SC.MAX_REFINE:
            return st
        pieces = more if more > pieces else 2 * pieces


@jit  # allocates nothing (its buffers are the run state's): no reference counting on its ~40 arrays
def run_lie(model, scheme, state, steps, params, out):
    """:func:`mbvi.engine.loop.run_rattle` for a system with rigid bodies: the steps of this module in velocity
    coordinates u (the state's ``u``, carried unprojected from call to call; the v a call leaves and saves is
    its projection)."""
    I, F, Iv, Fv, IL, FL = model
    q, v, u, lam, WI, WS, bufs = state
    Q, V, Wk, info = out
    k, kstop, nsteps, save_every = steps[RK.K0], steps[RK.KSTOP], steps[RK.NSTEPS], steps[RK.SAVE_EVERY]
    j, maxiter = steps[RK.J0], steps[RK.MAXITER]
    t0, h, tol, ls, max_turn = params[RF.T0], params[RF.H], params[RF.TOL], params[RF.LENGTH], params[RF.MAX_TURN]
    loop_start(Iv, WI, WS, steps, Wk)
    nq, nv = I[M.NQ], Iv[M.NQ]
    if steps[RK.FRESH]:
        for b in bufs:
            b[:] = 0.0
        to_u(IL, q, v, u)
        lie_prepare(I, F, IL, WI, bufs, q, u)
    if steps[RK.PROJECT] and j > 0:
        if not lie_project(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, u):
            loop_report(info, K.opaque(ST.NEEDS_NUMPY), k, j, WI, Wk, WS)
            return
        to_vq(IL, q, u, v)
        K.copy_into(V[j - 1], v)
    # u leaves a step off the joints (RATTLE's projection changes no position, only the velocity read
    # out): uo is its projection, made when a state is saved or returned
    qb, ub, qs, us, uo = bufs[LB.QB], bufs[LB.UB], bufs[LB.QS], bufs[LB.US], bufs[LB.UO]
    K.copy_into(uo, u)
    status = ST.DONE
    projected = False
    while k < kstop:
        K.copy_into(qb, q)
        K.copy_into(ub, u)
        wb = WS[WI[WK.WORK]]
        status = lie_step_refined(I, F, Iv, Fv, IL, FL, WI, WS, bufs, scheme, q, u, t0 + k * h, h, lam, tol, maxiter,
                                  ls, max_turn, qs, us)  # fmt: skip
        if status == ST.DONE:
            for i in range(nq):
                if not abs(q[i]) < math.inf:
                    status = ST.NONFINITE
            for i in range(nv):
                if not abs(u[i]) < math.inf:
                    status = ST.NONFINITE
        projected = False
        if status == ST.DONE and ((k + 1) % save_every == 0 or k + 1 == nsteps):
            projected = lie_project(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, uo)
            if not projected:
                status = ST.NEEDS_NUMPY
        if status != ST.DONE:
            K.copy_into(q, qb)  # leave the last good state
            K.copy_into(u, ub)
            WS[WI[WK.WORK]] = wb
            WI[WK.HAVE_FACTOR] = 0
            break
        k += 1
        if projected:
            K.copy_into(Q[j], q)
            to_vq(IL, q, uo, v)
            K.copy_into(V[j], v)
            Wk[j] = WS[WI[WK.WORK]]
            j += 1
    if not projected:
        if _project_aside(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, uo):
            to_vq(IL, q, uo, v)
        else:  # A cannot be factored here: the velocity as the steps left it (NumPy takes the next step)
            to_vq(IL, q, u, v)
    loop_report(info, status, k, j, WI, Wk, WS)
