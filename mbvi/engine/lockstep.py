"""The RATTLE family over a chunk of batch members in lockstep: members on the inner (SIMD) axis.

:func:`mbvi.engine.loop.run_batch` hands every member of a batch the same
model; only the states differ. Run member by member, each kernel pays its
index loads and loop overhead once per member (30–60 ns for the two rows of a
double pendulum, where the arithmetic is a few ns). Here a chunk of ``m``
members steps together: every buffer is ``(rows, m)`` with the member last,
each kernel reads an index once and applies it to all members in a contiguous
inner loop the compiler vectorizes.

Each member performs exactly the operations of its serial run
(:mod:`mbvi.engine.loop`, in the same order), so it reproduces that run. A
SHAKE iteration goes on until every member has converged; a converged member
is left untouched. Whatever the common path does not cover — a factorization
that fails (the serial run's shifted pseudo-inverse), SHAKE stalling (its full
Newton), a diverging or non-finite step — sends that one member back to the
start of its step, and the driver finishes it with the serial
:func:`mbvi.engine.loop.run`, which takes the step again with every fallback.

Covers ``verlet``, ``symplectic_euler_a``/``_b`` and ``yoshida4`` on systems
without rigid bodies (:func:`eligible`), velocity-dependent forces included
(each member's own fixed point on v½); other batches run member by member.
"""

from __future__ import annotations

import math

import numpy as np

from mbvi.engine import contract as CT
from mbvi.engine import kernels as K
from mbvi.engine import scheme as SC
from mbvi.engine.fields import LF, LI, LN, RF, RK, WARM_HISTORY, M
from mbvi.engine.kernels import inline, jit, jit_alloc

__all__ = ["CHUNK", "eligible", "run_chunk"]

#: members stepped together (the inner axis of every buffer): large enough to amortize the index
#: loads, small enough that a chunk's buffers stay in the core's caches
CHUNK = 32


def eligible(bodies: int, scheme: np.ndarray) -> bool:
    """True when the lockstep loop covers ``scheme`` (RATTLE-family stages) on a system without rigid ``bodies``."""
    return SC.is_rattle(scheme) and bodies == 0


# ------------------------------------------------------------------------------------ lane kernels
# Each mirrors the kernel of the same name in mbvi.engine.kernels, operation for operation, with
# every member c of the chunk in the inner loop.
@jit
def _affine_uw(I, F, q, u, w, m):
    n3 = 3 * I[M.N]
    cu, ur, uc, uv = I[M.CU], I[M.UR], I[M.UC], I[M.UV]
    for i in range(n3):
        x = F[cu + i]
        for c in range(m):
            u[i, c] = x
    for e in range(I[M.NU]):
        r, col, x = I[ur + e], I[uc + e], F[uv + e]
        for c in range(m):
            u[r, c] += x * q[col, c]
    if not I[M.SAME]:
        cw, wr, wc, wv = I[M.CW], I[M.WR], I[M.WC], I[M.WV]
        for i in range(n3):
            x = F[cw + i]
            for c in range(m):
                w[i, c] = x
        for e in range(I[M.NW]):
            r, col, x = I[wr + e], I[wc + e], F[wv + e]
            for c in range(m):
                w[r, c] += x * q[col, c]


@jit
def _constraint_values(I, F, q, u, w, g, m):
    _affine_uw(I, F, q, u, w, m)
    if I[M.SAME]:
        w = u
    s, k = I[M.S], I[M.KK]
    for r in range(I[M.N]):
        i = 3 * r
        sr, kr = F[s + r], F[k + r]
        for c in range(m):
            g[r, c] = sr * (u[i, c] * w[i, c] + u[i + 1, c] * w[i + 1, c] + u[i + 2, c] * w[i + 2, c]) - kr


@jit
def _jacobian_values(I, F, u, w, gd, m):
    for e in range(I[M.NNZ]):
        for c in range(m):
            gd[e, c] = 0.0
    if I[M.SAME]:
        w = u
    ur, upos, su = I[M.UR], I[M.UPOS], I[M.SU]
    for e in range(I[M.NU]):
        p, r, x = I[upos + e], I[ur + e], F[su + e]
        for c in range(m):
            gd[p, c] += x * w[r, c]
    if not I[M.SAME]:
        wr, wpos, sw = I[M.WR], I[M.WPOS], I[M.SW]
        for e in range(I[M.NW]):
            p, r, x = I[wpos + e], I[wr + e], F[sw + e]
            for c in range(m):
                gd[p, c] += x * u[r, c]


@jit
def _residual(I, F, g, out, m):
    """out[c] = the residual of member c (:func:`mbvi.engine.kernels.residual`)."""
    for c in range(m):
        out[c] = 0.0
    sc, ro = I[M.SCALE], I[M.ROUND]
    for i in range(I[M.N]):
        rnd, scale = F[ro + i], F[sc + i]
        for c in range(m):
            a = abs(g[i, c])
            if not a < math.inf:
                out[c] = math.inf
            else:
                a = (a - rnd) / scale
                if a > out[c]:
                    out[c] = a


@jit
def _matvec(I, gd, x, out, m):
    for i in range(I[M.N]):
        for c in range(m):
            out[i, c] = 0.0
    prow, pcol = I[M.PROW], I[M.PCOL]
    for i in range(I[M.NNZ]):
        r, col = I[prow + i], I[pcol + i]
        for c in range(m):
            out[r, c] += gd[i, c] * x[col, c]


@jit
def _wgt(I, F, gd, y, out, m):
    for i in range(I[M.NQ]):
        for c in range(m):
            out[i, c] = 0.0
    prow, pcol, wo = I[M.PROW], I[M.PCOL], I[M.W]
    for i in range(I[M.NNZ]):
        col, r = I[pcol + i], I[prow + i]
        x = F[wo + col]
        for c in range(m):
            out[col, c] += x * gd[i, c] * y[r, c]


@jit
def _factor(I, F, gd, ab, bad, m):
    """A = G M⁻¹ Gᵀ and its profile Cholesky for every member; a member whose A is not positive definite is bad."""
    n = I[M.N]
    if n == 0:
        return
    pa, pb, ts, aw = I[M.PA], I[M.PB], I[M.TSTART], I[M.AW]
    for t in range(I[M.SIZE_L]):
        for c in range(m):
            ab[t, c] = 0.0
        for i in range(I[ts + t], I[ts + t + 1]):
            a, b, x = I[pa + i], I[pb + i], F[aw + i]
            for c in range(m):
                ab[t, c] += gd[a, c] * gd[b, c] * x
    fo, ro = I[M.FIRST], I[M.ROWSTART]
    for i in range(n):
        fi = I[fo + i]
        ri = I[ro + i] - fi
        for j in range(fi, i):
            fj = I[fo + j]
            rj = I[ro + j] - fj
            for k in range(max(fi, fj), j):
                for c in range(m):
                    ab[ri + j, c] -= ab[ri + k, c] * ab[rj + k, c]
            for c in range(m):
                ab[ri + j, c] *= ab[rj + j, c]
        for k in range(fi, i):
            for c in range(m):
                ab[ri + i, c] -= ab[ri + k, c] * ab[ri + k, c]
        for c in range(m):
            d = ab[ri + i, c]
            if not d > 0.0 or not d < math.inf:
                bad[c] = 1
                d = 1.0
            ab[ri + i, c] = 1.0 / math.sqrt(d)


@jit
def _solve(I, ab, rhs, out, tmp, m):
    n = I[M.N]
    perm, fo, ro = I[M.PERM], I[M.FIRST], I[M.ROWSTART]
    for i in range(n):
        fi = I[fo + i]
        ri = I[ro + i] - fi
        p = I[perm + i]
        for c in range(m):
            tmp[i, c] = rhs[p, c]
        for k in range(fi, i):
            for c in range(m):
                tmp[i, c] -= ab[ri + k, c] * tmp[k, c]
        for c in range(m):
            tmp[i, c] *= ab[ri + i, c]
    for i in range(n - 1, -1, -1):
        fi = I[fo + i]
        ri = I[ro + i] - fi
        for c in range(m):
            tmp[i, c] *= ab[ri + i, c]
        for k in range(fi, i):
            for c in range(m):
                tmp[k, c] -= ab[ri + k, c] * tmp[i, c]
    for i in range(n):
        p = I[perm + i]
        for c in range(m):
            out[p, c] = tmp[i, c]


@jit
def _column(A, c, out):
    """out ← A[:, c] (a contiguous copy: the serial kernels then run as compiled for one system)."""
    for i in range(len(out)):
        out[i] = A[i, c]


@jit
def _set_column(A, c, x):
    """A[:, c] ← x."""
    for i in range(len(x)):
        A[i, c] = x[i]


@jit
def _gradient(I, F, q, t, out, X, m):
    """∇U for every member: gravity in lockstep, the other conservative families member by member.

    X: (3, nq) scratch rows for one member's q and ∇U.
    """
    gv = I[M.GVEC]
    for i in range(I[M.NQ]):
        x = -F[gv + i]
        for c in range(m):
            out[i, c] = x
    if I[M.SP_I + 3] or I[M.T1_I + 3] or I[M.BA_I + 3] or I[M.KGRAD]:
        for c in range(m):
            _column(q, c, X[0])
            _column(out, c, X[1])
            K.gradient_families(I, F, X[0], X[1])
            K.call_kernels(I, F, K.opaque(CT.GRADIENT), X[0], X[0], t, X[1])
            _set_column(out, c, X[1])


@jit
def _force(I, F, q, vF, t, f, X, c):
    """f[:, c] ← F(q[:, c], vF[:, c], t) (:func:`mbvi.engine.kernels.nonconservative_force`), through the scratch
    rows X."""
    _column(q, c, X[0])
    _column(vF, c, X[1])
    K.nonconservative_force(I, F, X[0], X[1], t, X[2])
    _set_column(f, c, X[2])


@jit
def _kick(I, F, q, vF, t, v, cc, grad, f, out, X, m):
    """out = v + cc M⁻¹(−∇U(q) + F(q, v_F, t)) (:func:`mbvi.engine.loop._kick`); F written into f."""
    wo = I[M.W]
    if I[M.HAS_F]:
        for c in range(m):
            _force(I, F, q, vF, t, f, X, c)
        for i in range(I[M.NQ]):
            x = cc * F[wo + i]
            for c in range(m):
                out[i, c] = v[i, c] + x * (f[i, c] - grad[i, c])
    else:
        for i in range(I[M.NQ]):
            x = cc * F[wo + i]
            for c in range(m):
                out[i, c] = v[i, c] - x * grad[i, c]


@jit
def _kick_some(I, F, q, vF, t, v, cc, grad, f, out, X, mask, m):
    """:func:`_kick` of the members with ``mask`` set only (the others' f and out untouched)."""
    wo = I[M.W]
    if I[M.HAS_F]:
        for c in range(m):
            if mask[c]:
                _force(I, F, q, vF, t, f, X, c)
        for i in range(I[M.NQ]):
            x = cc * F[wo + i]
            for c in range(m):
                if mask[c]:
                    out[i, c] = v[i, c] + x * (f[i, c] - grad[i, c])
    else:
        for i in range(I[M.NQ]):
            x = cc * F[wo + i]
            for c in range(m):
                if mask[c]:
                    out[i, c] = v[i, c] - x * grad[i, c]


@jit
def _remove_normal(I, F, gd, ab, v, L, m):
    """v ← v − M⁻¹ Gᵀ A⁻¹ G v (the RATTLE projection) for every member."""
    if I[M.N] == 0:
        return
    rhs, dl, dq, tmp = L[LN.RHS], L[LN.DL], L[LN.DQ], L[LN.TMP]
    _matvec(I, gd, v, rhs, m)
    _solve(I, ab, rhs, dl, tmp, m)
    _wgt(I, F, gd, dl, dq, m)
    for i in range(I[M.NQ]):
        for c in range(m):
            v[i, c] -= dq[i, c]


@jit
def _shake(I, F, gd0, ab0, q0, vfree, h, lam, warm, tol, maxiter, L, SF, SI, vh, m):
    """SHAKE (:func:`mbvi.engine.loop._shake`) of the members with SI[J_GOING] set, v½ into ``vh``.

    The other members' q₁ and ``vh`` are left as they are; a member that does not converge is bad.
    """
    nq, n = I[M.NQ], I[M.N]
    q1 = L[LN.Q1]
    going = SI[LI.GOING]
    for i in range(nq):
        for c in range(m):
            if going[c]:
                q1[i, c] = q0[i, c] + h * vfree[i, c]
    if n == 0:
        for i in range(nq):
            for c in range(m):
                if going[c]:
                    vh[i, c] = vfree[i, c]
        return
    lamv, dl, corr, dq = L[LN.LAMV], L[LN.DL], L[LN.CORR], L[LN.DQ]
    u, w, g, tmp = L[LN.U], L[LN.W], L[LN.G], L[LN.TMP]
    bad, slow = SI[LI.BAD], SI[LI.SLOW]
    r, prev = SF[LF.R], SF[LF.PREV]
    for i in range(n):
        for c in range(m):
            lamv[i, c] = lam[i, c] if warm else 0.0
    _wgt(I, F, gd0, lamv, corr, m)
    for i in range(nq):
        for c in range(m):
            if going[c]:
                q1[i, c] -= corr[i, c]
    for c in range(m):
        prev[c] = math.inf
        slow[c] = 0
    for _ in range(maxiter):
        _constraint_values(I, F, q1, u, w, g, m)
        _residual(I, F, g, r, m)
        more = False
        for c in range(m):
            if not going[c]:
                continue
            if r[c] <= tol:
                going[c] = 0
                if warm:
                    for i in range(n):
                        lam[i, c] = lamv[i, c]
                for i in range(nq):
                    vh[i, c] = vfree[i, c] - corr[i, c] / h
            elif not r[c] < math.inf:
                going[c] = 0
                bad[c] = 1
            else:
                slow[c] = slow[c] + 1 if r[c] > 0.25 * prev[c] else 0
                prev[c] = r[c]
                if slow[c] >= 3:  # the serial run switches to full Newton here
                    going[c] = 0
                    bad[c] = 1
                else:
                    more = True
        if not more:
            return
        _solve(I, ab0, g, dl, tmp, m)
        _wgt(I, F, gd0, dl, dq, m)
        for i in range(n):
            for c in range(m):
                if going[c]:
                    lamv[i, c] += dl[i, c]
        for i in range(nq):
            for c in range(m):
                if going[c]:
                    q1[i, c] -= dq[i, c]
                    corr[i, c] += dq[i, c]
    for c in range(m):
        if going[c]:
            bad[c] = 1


@jit
def _enter(SI, m):
    """SI[J_GOING] ← the members still on the common path."""
    for c in range(m):
        SI[LI.GOING, c] = 1 if SI[LI.ACT, c] and not SI[LI.BAD, c] else 0


@jit
def _drift_fixed_point(I, F, GD, AB, cur, q, v, t, h, c0, grad0, lam, tol, maxiter, ls, L, X, SF, SI, m):
    """The drift with velocity-dependent forces: v½ by a fixed point around SHAKE, member by member's own test.

    :func:`mbvi.engine.loop._substep`'s loop: kick with F(q₀, v½), a cold SHAKE, and
    :func:`mbvi.engine.kernels.settle` on v½; a member that stalls or fails is bad, and so is one whose iteration
    contracts slowly enough for the serial loop to mix it (:func:`mbvi.engine.kernels.settle_mixed`): the serial
    loop then takes its step, with the same result.
    """
    nq, n = I[M.NQ], I[M.N]
    vh, vfree, vnew, f0 = L[LN.VH], L[LN.VFREE], L[LN.VNEW], L[LN.F0]
    fixed, going, bad = SI[LI.FIXED], SI[LI.GOING], SI[LI.BAD]
    fprev, ffloor = SF[LF.FPREV], SF[LF.FFLOOR]
    floor = 10.0 * tol * ls / abs(h) if n else 0.0
    for c in range(m):
        fixed[c] = 1 if SI[LI.ACT, c] and not bad[c] else 0
        fprev[c] = math.inf
        for i in range(nq):
            vh[i, c] = v[i, c]
    for it in range(100):
        more = False
        for c in range(m):
            going[c] = fixed[c]
            more = more or fixed[c] != 0
        if not more:
            return
        _kick_some(I, F, q, vh, t, v, c0, grad0, f0, vfree, X, going, m)  # v₀ + c₀ M⁻¹(F(q₀, v½, t) − ∇U(q₀))
        if it == 0:  # each member's round-off of the iterate's terms, the serial loop's rule
            for c in range(m):
                ffloor[c] = floor + K.sum_roundoff(v[:, c], vfree[:, c])
        _shake(I, F, GD[cur], AB[cur], q, vfree, h, lam, K.opaque(False), tol, maxiter, L, SF, SI, vnew, m)
        for c in range(m):
            if not fixed[c]:
                continue
            if bad[c]:
                fixed[c] = 0
                continue
            delta = 0.0
            big = 0.0  # (the serial loop's rule, mbvi.engine.kernels.settle: not 1 m/s)
            for i in range(nq):
                delta = max(delta, abs(vnew[i, c] - vh[i, c]))
                big = max(big, abs(vnew[i, c]))
                vh[i, c] = vnew[i, c]
            if delta <= 1e-13 * big + ffloor[c]:
                fixed[c] = 0
            elif (h > 0.0 and K.would_mix(it, delta, fprev[c])) or K.stalls(it, delta, fprev[c]):
                # where the serial loop would stall or mix (K.settle_mixed), it takes the step: bit for bit
                fixed[c] = 0
                bad[c] = 1
            fprev[c] = delta
    for c in range(m):
        if fixed[c]:
            bad[c] = 1


@jit
def _substep(I, F, GD, AB, cur, have_grad, t, h, c0, c1, lam, tol, maxiter, ls, L, X, SF, SI, m, vf):
    """One RATTLE-family substep of every member (:func:`mbvi.engine.loop._substep`); returns HAVE_GRAD.

    ``vf``: None for a model whose forces do not read the velocity (``HAS_VF`` 0; numba then prunes the
    fixed point on v½, which is not compiled into that entry), else 1.
    """
    nq = I[M.NQ]
    nxt = 1 - cur
    q, v, q1, vh, vfree = L[LN.Q], L[LN.V], L[LN.Q1], L[LN.VH], L[LN.VFREE]
    f0, f1 = L[LN.F0], L[LN.F1]
    grad0, grad1 = (L[LN.GR0], L[LN.GR1]) if cur == 0 else (L[LN.GR1], L[LN.GR0])
    if c0 != 0.0 and not have_grad:
        _gradient(I, F, q, t, grad0, X, m)
    if c0 == 0.0:
        _enter(SI, m)
        _shake(I, F, GD[cur], AB[cur], q, v, h, lam, K.opaque(True), tol, maxiter, L, SF, SI, vh, m)
        for i in range(nq):
            for c in range(m):
                f0[i, c] = 0.0
    elif not I[M.HAS_VF]:
        _kick(I, F, q, v, t, v, c0, grad0, f0, vfree, X, m)
        _enter(SI, m)
        _shake(I, F, GD[cur], AB[cur], q, vfree, h, lam, K.opaque(True), tol, maxiter, L, SF, SI, vh, m)
    elif vf is not None:
        _drift_fixed_point(I, F, GD, AB, cur, q, v, t, h, c0, grad0, lam, tol, maxiter, ls, L, X, SF, SI, m)
    for i in range(nq):
        for c in range(m):
            f1[i, c] = 0.0
    if c1 != 0.0:
        _gradient(I, F, q1, t + h, grad1, X, m)
        _kick(I, F, q1, vh, t + h, vh, c1, grad1, f1, v, X, m)
        have_grad = True
    else:
        for i in range(nq):
            for c in range(m):
                v[i, c] = vh[i, c]
        have_grad = False
    if I[M.HAS_F]:
        work = SF[LF.WORK]
        for c in range(m):
            acc = 0.0
            for i in range(nq):
                acc += (c0 * f0[i, c] + c1 * f1[i, c]) * (q1[i, c] - q[i, c])
            if c0 == 0.0 or c1 == 0.0:  # one end kicked: the trapezoidal rule (mbvi.engine.loop._substep)
                if c1 == 0.0:
                    _force(I, F, q1, vh, t + h, f1, X, c)
                else:
                    _force(I, F, q, vh, t, f0, X, c)
                trapezoid, cc = 0.0, c0 + c1
                for i in range(nq):
                    trapezoid += 0.5 * cc * (f0[i, c] + f1[i, c]) * (q1[i, c] - q[i, c])
                if abs(trapezoid) < math.inf:
                    acc = trapezoid
            work[c] += acc / h
    # accept: G and the factor of A at q₁ (U and W are the last SHAKE iterate's, at q₁), q ← q₁, project
    _jacobian_values(I, F, L[LN.U], L[LN.W], GD[nxt], m)
    _factor(I, F, GD[nxt], AB[nxt], SI[LI.BAD], m)
    for i in range(nq):
        for c in range(m):
            q[i, c] = q1[i, c]
    _remove_normal(I, F, GD[nxt], AB[nxt], v, L, m)
    return have_grad


@jit
def _predict(lam, SF, SI, m):
    """:func:`mbvi.engine.kernels.predict_multipliers` of every member, members on the inner axis.

    The serial function's operations, member by member (bit for bit): the
    miss of each order is the max over rows, which does not depend on the
    order of the rows.
    """
    n = lam.shape[1]
    hr = WARM_HISTORY
    cold, order = SI[LI.COLD], SI[LI.ORDER]
    e0, e1, e2, e3 = SF[LF.E0], SF[LF.E1], SF[LF.E2], SF[LF.E3]
    for c in range(m):
        cold[c] = 1
        e0[c] = e1[c] = e2[c] = e3[c] = 0.0
    for i in range(n):
        for c in range(m):
            now, p1, p2, p3, p4 = lam[0, i, c], lam[hr, i, c], lam[hr + 1, i, c], lam[hr + 2, i, c], lam[hr + 3, i, c]
            if now != 0.0:
                cold[c] = 0
            d0, d1, d2, d3 = K._misses_at(now, p1, p2, p3, p4)
            e0[c], e1[c], e2[c], e3[c] = max(e0[c], d0), max(e1[c], d1), max(e2[c], d2), max(e3[c], d3)
    for c in range(m):
        known = 0
        if not cold[c]:
            while known < 4 and lam[hr + known, 0, c] == lam[hr + known, 0, c]:
                known += 1
        order[c] = K._best_order(known, e0[c], e1[c], e2[c], e3[c])
    for i in range(n):
        for c in range(m):
            now = lam[0, i, c]
            lam[0, i, c] = K._extrapolated(order[c], now, lam[hr, i, c], lam[hr + 1, i, c], lam[hr + 2, i, c])
            if cold[c]:
                for r in range(4):
                    lam[hr + r, i, c] = math.nan
            else:
                lam[hr + 3, i, c] = lam[hr + 2, i, c]
                lam[hr + 2, i, c] = lam[hr + 1, i, c]
                lam[hr + 1, i, c] = lam[hr, i, c]
                lam[hr, i, c] = now


@inline
def _steps(I, F, scheme, steps, params, b0, L, X, GD, AB, LAM, LAMB, SF, SI, Q, V, Wk, HK, HJ, HQ, HV, HLAM, HW, m,
           vf):  # fmt: skip
    """The whole run of members b0 … b0+m−1 (:func:`mbvi.engine.loop.run_rattle` with ``project``), in lockstep.

    Q[b, 0], V[b, 0] hold the initial states. A member that leaves the common
    path gets HK = the step it must take again (else −1), HJ the next save
    slot, and its state at the start of that step in HQ, HV, HLAM, HW.
    """
    nq, n = I[M.NQ], I[M.N]
    nsteps, save_every, maxiter = steps[RK.NSTEPS], steps[RK.SAVE_EVERY], steps[RK.MAXITER]
    t0, h, tol, ls = params[RF.T0], params[RF.H], params[RF.TOL], params[RF.LENGTH]
    rows = LAM.shape[0]
    q, v, qb, vb = L[LN.Q], L[LN.V], L[LN.QB], L[LN.VB]
    act, bad = SI[LI.ACT], SI[LI.BAD]
    work, workb, fin = SF[LF.WORK], SF[LF.WORKB], SF[LF.FIN]
    for c in range(m):
        HK[c] = -1
        act[c] = 1
        bad[c] = 0
        work[c] = 0.0
        for i in range(nq):
            q[i, c] = Q[b0 + c, 0, i]
            v[i, c] = V[b0 + c, 0, i]
    # the initial projection (run(..., project=True)): G and the factor of A at q into slot 0
    _affine_uw(I, F, q, L[LN.U], L[LN.W], m)
    _jacobian_values(I, F, L[LN.U], L[LN.W], GD[0], m)
    _factor(I, F, GD[0], AB[0], bad, m)
    if steps[RK.PROJECT]:  # else the members' velocities are taken as given (simulate_batch: as simulate takes one)
        _remove_normal(I, F, GD[0], AB[0], v, L, m)
    live = m
    for c in range(m):
        if bad[c]:  # the serial run projects it (or reports why it cannot)
            act[c] = 0
            live -= 1
            HK[c] = 0
            HJ[c] = 0
        else:
            for i in range(nq):
                V[b0 + c, 0, i] = v[i, c]
    cur = K.opaque(0)  # (not literals: numba would compile _substep for each, see mbvi.engine.kernels.opaque)
    have_grad = K.opaque(False)
    j = 1
    for k in range(nsteps):
        if live == 0:
            break
        for c in range(m):
            workb[c] = work[c]
        for i in range(nq):  # members on the inner axis: contiguous copies
            for c in range(m):
                qb[i, c] = q[i, c]
                vb[i, c] = v[i, c]
        for r in range(rows):
            for i in range(n):
                for c in range(m):
                    LAMB[r, i, c] = LAM[r, i, c]
        if n and K.extrapolates(I, scheme, LAM):  # (:func:`mbvi.engine.kernels.extrapolate_warm_start`)
            _predict(LAM, SF, SI, m)
        ts = t0 + k * h
        for s in range(scheme.shape[0]):  # the scheme's stages (:func:`mbvi.engine.loop._rattle_step`)
            hs = scheme[s, SC.WEIGHT] * h
            row = int(scheme[s, SC.ROW])
            have_grad = _substep(I, F, GD, AB, cur, have_grad, ts, hs, scheme[s, SC.A0] * hs, scheme[s, SC.A1] * hs,
                                 LAM[row], tol, maxiter, ls, L, X, SF, SI, m, vf)  # fmt: skip
            cur = 1 - cur
            ts = ts + hs
        save = (k + 1) % save_every == 0 or k + 1 == nsteps
        for c in range(m):
            fin[c] = 0.0
        for i in range(nq):  # 0 · x is NaN for an inf or NaN x: one branch-free pass over the members
            for c in range(m):
                fin[c] += 0.0 * q[i, c] + 0.0 * v[i, c]
        for c in range(m):
            if not act[c]:
                continue
            if not bad[c] and not fin[c] == 0.0:
                bad[c] = 1
            if bad[c]:  # hand the step to the serial run, from its start
                act[c] = 0
                live -= 1
                HK[c] = k
                HJ[c] = j
                HW[c] = workb[c]
                for i in range(nq):
                    HQ[c, i] = qb[i, c]
                    HV[c, i] = vb[i, c]
                for r in range(rows):
                    for i in range(n):
                        HLAM[c, r, i] = LAMB[r, i, c]
            elif save:
                for i in range(nq):
                    Q[b0 + c, j, i] = q[i, c]
                    V[b0 + c, j, i] = v[i, c]
                Wk[b0 + c, j] = work[c]
        if save:
            j += 1
    for c in range(m):
        if act[c]:
            HJ[c] = j
            Wk[b0 + c, Wk.shape[1] - 1] = work[c]


@jit_alloc
def run_chunk(I, F, scheme, steps, params, b0, m, Q, V, Wk, HK, HJ, HQ, HV, HLAM, HW, vf):
    """Members b0 … b0+m−1 of a batch through :func:`_steps`, with buffers of their own (see :func:`_steps`).

    ``vf``: None when no force reads the velocity (``HAS_VF`` 0), else 1 — two compiled entries, the first
    without the fixed point on v½ (less to compile for the batches most scenes make).

    The members that leave the common path are finished by the caller on the serial loop
    (:func:`mbvi.engine.runner.run_batch`). Releases the GIL: threads run disjoint chunks at once.
    """
    # private copies of the model: numba reference-counts every array it passes, and two threads
    # counting references to one shared array contend for its cache line on every call
    I, F = I.copy(), F.copy()
    nq, n = I[M.NQ], I[M.N]
    L = (
        np.zeros((nq, m)), np.zeros((nq, m)), np.zeros((nq, m)), np.zeros((nq, m)), np.zeros((nq, m)),
        np.zeros((nq, m)), np.zeros((nq, m)), np.zeros((nq, m)), np.zeros((nq, m)), np.zeros((nq, m)),
        np.zeros((nq, m)), np.zeros((nq, m)), np.zeros((nq, m)), np.zeros((nq, m)),
        np.zeros((3 * n, m)), np.zeros((3 * n, m)),
        np.zeros((n, m)), np.zeros((n, m)), np.zeros((n, m)), np.zeros((n, m)), np.zeros((n, m)),
    )  # fmt: skip
    GD = np.zeros((2, I[M.NNZ], m))
    AB = np.zeros((2, I[M.SIZE_L], m))
    LAM = np.zeros((HLAM.shape[1], n, m))
    LAMB = np.zeros((HLAM.shape[1], n, m))
    SF = np.zeros((LF.count, m))
    SI = np.zeros((LI.count, m), dtype=np.int64)
    X = np.zeros((3, nq))
    _steps(I, F, scheme, steps, params, b0, L, X, GD, AB, LAM, LAMB, SF, SI, Q, V, Wk, HK, HJ, HQ, HV, HLAM, HW, m,
           vf)  # fmt: skip
