"""The compiled RATTLE family (and the implicit pair) and its time loop: one run is one call.

A step of every method is a composition of three pieces (see
:mod:`mbvi.integrators.rattle`, whose NumPy implementation this mirrors
operation for operation):

* a kick v ← v + c₀ M⁻¹(−∇U + F) at q₀ (c₀ = h/2 for ``verlet``, h for
  ``symplectic_euler_a``, 0 for ``symplectic_euler_b``);
* a constrained drift (SHAKE), quasi-Newton with A(q₀) = G M⁻¹ Gᵀ warm-started
  from the multipliers extrapolated from the last steps (a polynomial of the
  order that predicted the last step best, :func:`mbvi.engine.kernels.predict_multipliers`), full Newton when it
  contracts slowly; with velocity-dependent forces a fixed point on the drift
  velocity around it;
* a kick c₁ at q₁ and the velocity projection (RATTLE), whose factorization of
  A(q₁) the next step's drift reuses.

``yoshida4`` is three ``verlet`` substeps of γ₁h, γ₂h, γ₁h. ``midpoint`` and
``implicit_euler`` (:data:`IMPLICIT`) reuse the same drift: a fixed point on
their implicit force around SHAKE, or a dense Newton when it is too stiff
(:func:`_implicit_step`). The same
:func:`run` serves one system (:func:`mbvi.simulate`) and each member of a
batch (:func:`run_batch`, on every core).
"""

from __future__ import annotations

import math

import numpy as np

from mbvi.engine import dense as D
from mbvi.engine import kernels as K
from mbvi.engine import scheme as SC
from mbvi.engine.fields import RF, RK, ST, WK, M
from mbvi.engine.kernels import inline, jit, jit_alloc
from mbvi.engine.kernels import workspace_view as _buf

__all__ = ["run_implicit", "run_rattle"]


@jit
def _factor_at(I, F, WI, WS, q, slot, fresh):
    """G(q) values and the factorization of A(q) into buffer ``slot``; False when too big to pseudo-invert.

    ``fresh``: U and W in the workspace are already those at q (the last SHAKE iterate).
    """
    n, nnz = I[M.N], I[M.NNZ]
    u, w = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n)
    gd = WS[WI[WK.GD] + slot * nnz : WI[WK.GD] + (slot + 1) * nnz]
    if not fresh:
        K.affine_uw(I, F, q, u, w)
    K.jacobian_values(I, F, u, w, gd)
    size = WI[WK.SIZE_AB]
    kind = K.factor(I, F, gd, WS[WI[WK.AB] + slot * size : WI[WK.AB] + (slot + 1) * size])
    if kind == K.SHIFTED:
        WI[WK.SHIFT_USED] += 1
    return kind != K.FAILED


@jit
def _solve(I, WI, WS, slot, rhs, out):
    size = WI[WK.SIZE_AB]
    K.solve(I, WS[WI[WK.AB] + slot * size : WI[WK.AB] + (slot + 1) * size], rhs, out, _buf(WI, WS, WK.TMP, I[M.N]))


@jit
def _correct(I, F, gd0, dl, dq, q1, corr):
    """A SHAKE update ΔΛ: q₁ −= M⁻¹ G(q₀)ᵀ ΔΛ, and the accumulated correction grows by the same."""
    K.wgt(I, F, gd0, dl, dq)
    for i in range(len(q1)):
        q1[i] -= dq[i]
        corr[i] += dq[i]


@jit_alloc
def _shake_newton(I, F, WI, WS, gd0, q1, corr, vfree, h, tol, maxiter, vh):
    """Full Newton on Λ with the unsymmetric Jacobian G(q) M⁻¹ G(q₀)ᵀ (dense least squares,
    :func:`mbvi.engine.dense.lstsq`)."""
    n, nq, nnz = I[M.N], I[M.NQ], I[M.NNZ]
    if not I[M.DENSE_OK]:
        return ST.NEEDS_NUMPY
    WI[WK.NEWTON_USED] += 1
    prow, pcol, wo = I[M.PROW], I[M.PCOL], I[M.W]
    gd = np.zeros(nnz)
    GW = np.zeros((n, nq))
    J = np.zeros((n, n))
    u, w, g, dq = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n), _buf(WI, WS, WK.G, n), _buf(WI, WS, WK.DQ, nq)
    for it in range(maxiter):
        K.constraint_values(I, F, q1, u, w, g)
        K.jacobian_values(I, F, u, w, gd)
        r = K.residual(I, F, g)
        if r <= tol or (it >= 2 and K.residual_at_roundoff(I, F, q1, u, w, g) <= tol):
            for i in range(nq):
                vh[i] = vfree[i] - corr[i] / h
            return ST.DONE
        if not r < math.inf:
            break
        GW[:, :] = 0.0
        for i in range(nnz):
            c = I[pcol + i]
            GW[I[prow + i], c] += gd[i] * F[wo + c]
        J[:, :] = 0.0
        for i in range(nnz):  # J = G(q) M⁻¹ G(q₀)ᵀ, G(q₀) by its entries
            r, c, gv = I[prow + i], I[pcol + i], gd0[i]
            for a in range(n):
                J[a, r] += GW[a, c] * gv
        dl = D.lstsq(J, g)
        _correct(I, F, gd0, dl, dq, q1, corr)
    return ST.SHAKE_FAILED


@jit
def _shake(I, F, WI, WS, slot0, dslot, q0, vfree, h, lam, warm, tol, maxiter, q1, vh):
    """Constrained drift q₁ = q₀ + h v_free − M⁻¹ Gᵀ Λ, g(q₁) = 0; v½ = v_free − M⁻¹ Gᵀ Λ / h.

    G is the Jacobian in buffer ``dslot`` (G(q₀) for the RATTLE family), A the
    factorization in buffer ``slot0`` (A(q₀)).
    """
    nq, n, nnz = I[M.NQ], I[M.N], I[M.NNZ]
    for i in range(nq):
        q1[i] = q0[i] + h * vfree[i]
    if n == 0:
        K.copy_into(vh, vfree)
        return ST.DONE
    lamv, dl = _buf(WI, WS, WK.LAMV, n), _buf(WI, WS, WK.DL, n)
    corr, dq = _buf(WI, WS, WK.CORR, nq), _buf(WI, WS, WK.DQ, nq)
    u, w, g = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n), _buf(WI, WS, WK.G, n)
    gd0 = WS[WI[WK.GD] + dslot * nnz : WI[WK.GD] + (dslot + 1) * nnz]
    for i in range(n):
        lamv[i] = lam[i] if warm else 0.0
    K.wgt(I, F, gd0, lamv, corr)
    for i in range(nq):
        q1[i] -= corr[i]
    prev = math.inf
    slow = 0
    for _ in range(maxiter):
        K.constraint_values(I, F, q1, u, w, g)
        r = K.residual(I, F, g)
        if not r < math.inf:
            break
        slow = slow + 1 if r > 0.25 * prev else 0
        prev = r
        # converged, or stalled at the round-off of where the system is now (far from the origin, it exceeds that
        # of the initial configuration the residual counts), as the rigid loop (lieloop._shake_multipliers)
        if r <= tol or (slow >= 2 and K.residual_at_roundoff(I, F, q1, u, w, g) <= tol):
            if warm:
                K.copy_into(lam, lamv)
            for i in range(nq):
                vh[i] = vfree[i] - corr[i] / h
            return ST.DONE
        if slow >= 3:
            if warm:
                lam[:] = 0.0
            return _shake_newton(I, F, WI, WS, gd0, q1, corr, vfree, h, tol, maxiter, vh)
        _solve(I, WI, WS, slot0, g, dl)
        for i in range(n):
            lamv[i] += dl[i]
        _correct(I, F, gd0, dl, dq, q1, corr)
    return ST.SHAKE_FAILED


@jit
def _kick(I, F, q, vF, t, v, c, grad, f, out):
    """out = v + c M⁻¹(−∇U(q) + F(q, v_F, t)) with ∇U given; F written into f."""
    wo = I[M.W]
    if I[M.HAS_F]:
        K.nonconservative_force(I, F, q, vF, t, f)
        for i in range(len(out)):
            out[i] = v[i] + c * F[wo + i] * (f[i] - grad[i])
    else:
        for i in range(len(out)):
            out[i] = v[i] - c * F[wo + i] * grad[i]


@jit
def _substep(I, F, WI, WS, q, v, t, h, c0, c1, lam, tol, maxiter, length_scale):
    """One RATTLE-family substep from (q, v) in place: kick c₀, constrained drift h, kick c₁, projection."""
    nq, n = I[M.NQ], I[M.N]
    cur = WI[WK.CUR]
    nxt = 1 - cur
    if not _ensure_factor(I, F, WI, WS, q):
        return ST.NEEDS_NUMPY
    go = WI[WK.GRAD]
    grad0 = WS[go + cur * nq : go + (cur + 1) * nq]
    grad1 = WS[go + nxt * nq : go + (nxt + 1) * nq]
    if c0 != 0.0 and not WI[WK.HAVE_GRAD]:
        K.gradient(I, F, q, t, grad0)
    q1, vh, vfree = _buf(WI, WS, WK.Q1, nq), _buf(WI, WS, WK.VH, nq), _buf(WI, WS, WK.VFREE, nq)
    f0, f1 = _buf(WI, WS, WK.F0, nq), _buf(WI, WS, WK.F1, nq)
    # --- kick c₀ and constrained drift
    if c0 == 0.0:
        st = _shake(I, F, WI, WS, cur, cur, q, v, h, lam, K.opaque(True), tol, maxiter, q1, vh)
        f0[:] = 0.0
    elif not I[M.HAS_VF]:
        _kick(I, F, q, v, t, v, c0, grad0, f0, vfree)
        st = _shake(I, F, WI, WS, cur, cur, q, vfree, h, lam, K.opaque(True), tol, maxiter, q1, vh)
    else:
        # fixed point on v½ (the force at the step's mean velocity), as the NumPy path does
        floor = 10.0 * tol * length_scale / abs(h) if n else 0.0
        vnew = _buf(WI, WS, WK.VNEW, nq)
        gprev, rprev = _buf(WI, WS, WK.QM, nq), f1  # the mixing's history (both free until the kick at q₁)
        K.copy_into(vh, v)
        prev = math.inf
        mixing = 0 if h > 0.0 else -1  # (a backward stage is not mixed: K.settle_mixed)
        st = ST.DRIFT_FAILED
        for it in range(100):
            _kick(I, F, q, vh, t, v, c0, grad0, f0, vfree)  # v₀ + c₀ M⁻¹(F(q₀, v½, t) − ∇U(q₀))
            if it == 0:  # the round-off of the iterate's terms (v₀ and its kick may nearly cancel)
                floor += K.sum_roundoff(v, vfree)
            s2 = _shake(I, F, WI, WS, cur, cur, q, vfree, h, lam, K.opaque(False), tol, maxiter, q1, vnew)
            if s2 == ST.NEEDS_NUMPY:
                return s2
            if s2 != ST.DONE:  # at the first iterate (v½ = v₀) SHAKE itself fails, as it would with no such
                if it == 0:  # force; later, the fixed point may have run away before SHAKE could follow
                    return s2
                break
            outcome, prev, mixing = K.settle_mixed(vnew, vh, gprev, rprev, floor, it, prev, mixing)  # vh ← next x
            if outcome == K.SETTLED:
                st = ST.DONE
            if outcome != K.GOING:
                break
        if st != ST.DONE:
            return ST.DRIFT_FAILED
    if st != ST.DONE:
        return st
    # --- kick c₁ at q₁ and projection onto G(q₁) v = 0
    f1[:] = 0.0
    if c1 != 0.0:
        K.gradient(I, F, q1, t + h, grad1)
        _kick(I, F, q1, vh, t + h, vh, c1, grad1, f1, v)
        WI[WK.HAVE_GRAD] = 1
    else:
        K.copy_into(v, vh)
        WI[WK.HAVE_GRAD] = 0
    if I[M.HAS_F]:
        acc = 0.0  # each kicked end's force (at the step's mean velocity) times the drift
        for i in range(nq):
            acc += (c0 * f0[i] + c1 * f1[i]) * (q1[i] - q[i])
        if c0 == 0.0 or c1 == 0.0:
            # one end kicked (symplectic Euler): the work by the trapezoidal rule, the other end's force evaluated
            # for it. The one-sided rule above is right for a constant load but its error keeps its sign under one
            # that reads the position: τ = −kθ on a hinge lost 6.7 J in 60 s, a false energy warning. It stays
            # when that evaluation fails (at t_end, say): the evaluation measures, it steps nothing
            if c1 == 0.0:
                K.nonconservative_force(I, F, q1, vh, t + h, f1)
            else:
                K.nonconservative_force(I, F, q, vh, t, f0)
            trapezoid, c = 0.0, c0 + c1
            for i in range(nq):
                trapezoid += 0.5 * c * (f0[i] + f1[i]) * (q1[i] - q[i])
            if abs(trapezoid) < math.inf:
                acc = trapezoid
        WS[WI[WK.WORK]] += acc / h
    return _accept(I, F, WI, WS, q, q1, v)


@jit
def _ensure_factor(I, F, WI, WS, q):
    """The factorization of A(q) in the current buffer (the last step's projection left it); False when it fails."""
    if not WI[WK.HAVE_FACTOR]:
        if not _factor_at(I, F, WI, WS, q, WI[WK.CUR], K.opaque(False)):
            return False
        WI[WK.HAVE_FACTOR] = 1
    return True


@jit
def _accept(I, F, WI, WS, q, q1, v):
    """End of a step: factor A(q₁) into the other buffer (U, W already at q₁), q ← q₁, project v at q₁."""
    nxt = 1 - WI[WK.CUR]
    if not _factor_at(I, F, WI, WS, q1, nxt, K.opaque(True)):
        return ST.NEEDS_NUMPY
    K.copy_into(q, q1)
    _remove_normal(I, F, WI, WS, nxt, v)
    WI[WK.CUR] = nxt
    return ST.DONE


@jit
def _remove_normal(I, F, WI, WS, slot, v):
    """v ← v − M⁻¹ Gᵀ A⁻¹ G v with G and the factor of A in buffer ``slot`` (the RATTLE projection)."""
    n, nq, nnz = I[M.N], I[M.NQ], I[M.NNZ]
    if n:
        gd = WS[WI[WK.GD] + slot * nnz : WI[WK.GD] + (slot + 1) * nnz]
        rhs, dl, dq = _buf(WI, WS, WK.RHS, n), _buf(WI, WS, WK.DL, n), _buf(WI, WS, WK.DQ, nq)
        K.matvec(I, gd, v, rhs)
        _solve(I, WI, WS, slot, rhs, dl)
        K.wgt(I, F, gd, dl, dq)
        for i in range(nq):
            v[i] -= dq[i]


@jit
def _implicit_residual(I, F, WI, WS, midpoint, q, v, t, h, q1, lamv, gd, r, vq, qm, grad, f, tmp):
    """R = q₁ − q₀ − h v_free(q₁) + M⁻¹ Gᵀ Λ (nq) of :func:`_implicit_step`'s drift, into r.

    G is G(q₀) (in ``gd``) for the midpoint rule, G(q₁) (written into ``gd``) for implicit Euler.
    """
    nq, n = I[M.NQ], I[M.N]
    for i in range(nq):
        vq[i] = (q1[i] - q[i]) / h
        qm[i] = 0.5 * (q[i] + q1[i]) if midpoint else q1[i]
    K.gradient(I, F, qm, t + 0.5 * h if midpoint else t + h, grad)
    _kick(I, F, qm, vq, t + 0.5 * h if midpoint else t + h, v, 0.5 * h if midpoint else h, grad, f, tmp)
    if not midpoint and n:
        u, w = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n)
        K.affine_uw(I, F, q1, u, w)
        K.jacobian_values(I, F, u, w, gd)
    K.wgt(I, F, gd, lamv, r)
    for i in range(nq):
        r[i] += q1[i] - q[i] - h * tmp[i]


@jit_alloc
def _implicit_newton(I, F, WI, WS, midpoint, q, v, t, h, lam, tol, maxiter, q1, vh, ls):
    """The drift of :func:`_implicit_step` by simplified Newton on (q₁, Λ), for steps too stiff for the fixed point.

    The KKT matrix [[∂R/∂q₁, M⁻¹Gᵀ], [G(q₁), 0]] is dense: ∂R/∂q₁ by forward
    differences of R (the force laws' Hessians, and for implicit Euler the
    curvature of the constraints, without writing them), factored by LU and
    kept while Newton contracts fast — the iteration of
    :func:`mbvi.integrators.newton.newton_kkt`. Systems with more than
    :data:`mbvi.engine.model.DENSE_NEWTON_MAX` rows or 400 unknowns return NEEDS_NUMPY.
    """
    nq, n, nnz = I[M.NQ], I[M.N], I[M.NNZ]
    m = nq + n
    if not I[M.DENSE_OK] or m > 400:
        return ST.NEEDS_NUMPY
    WI[WK.NEWTON_USED] += 1
    cur = WI[WK.CUR]
    prow, pcol, wo = I[M.PROW], I[M.PCOL], I[M.W]
    gd0 = WS[WI[WK.GD] + cur * nnz : WI[WK.GD] + (cur + 1) * nnz]
    gd = gd0.copy()  # G(q₀), or G(q₁) for implicit Euler (rewritten by every residual)
    u, w, g = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n), _buf(WI, WS, WK.G, n)
    A = np.zeros((m, m))
    piv = np.zeros(m, dtype=np.int64)
    r, rp, vq, qm = np.zeros(nq), np.zeros(nq), np.zeros(nq), np.zeros(nq)
    grad, f, tmp = np.zeros(nq), np.zeros(nq), np.zeros(nq)
    rhs = np.zeros(m)
    G1 = np.zeros(nnz)
    lamv = lam.copy()
    for i in range(nq):
        q1[i] = q[i] + h * v[i]
    xtol = 0.0
    for i in range(nq):
        xtol = max(xtol, abs(q1[i]))
    xtol = 1e-13 * max(1.0, xtol)
    fresh = False
    prev = math.inf
    for _ in range(maxiter):
        _implicit_residual(I, F, WI, WS, midpoint, q, v, t, h, q1, lamv, gd, r, vq, qm, grad, f, tmp)
        K.constraint_values(I, F, q1, u, w, g)
        if not fresh:  # the KKT matrix at (q₁, Λ)
            A[:, :] = 0.0
            for j in range(nq):
                eps = 1e-7 * max(ls, abs(q1[j]))  # (the scene's size: 1 m was a tenth of a 1 µm beam)
                keep = q1[j]
                q1[j] = keep + eps
                _implicit_residual(I, F, WI, WS, midpoint, q, v, t, h, q1, lamv, gd, rp, vq, qm, grad, f, tmp)
                q1[j] = keep
                for i in range(nq):
                    A[i, j] = (rp[i] - r[i]) / eps
            K.affine_uw(I, F, q1, u, w)
            K.jacobian_values(I, F, u, w, G1)
            if not midpoint:  # back to G(q₁) at the unperturbed q₁
                K.copy_into(gd, G1)
            for e in range(nnz):
                c = I[pcol + e]
                A[c, nq + I[prow + e]] += F[wo + c] * gd[e]
            for e in range(nnz):
                A[nq + I[prow + e], I[pcol + e]] += G1[e]
            if not D.lu_factor(A, piv, 0.0):
                return ST.NEEDS_NUMPY
            fresh = True
        for i in range(nq):
            rhs[i] = -r[i]
        for i in range(n):
            rhs[nq + i] = -g[i]
        D.lu_solve(A, piv, rhs)
        size = 0.0
        for i in range(nq):
            q1[i] += rhs[i]
            size = max(size, abs(rhs[i]))
        for i in range(n):
            lamv[i] += rhs[nq + i]
        if not size < math.inf:
            break
        if size <= xtol:
            K.constraint_values(I, F, q1, u, w, g)
            if K.residual(I, F, g) <= tol:
                for i in range(nq):
                    vh[i] = (q1[i] - q[i]) / h
                K.copy_into(lam, lamv)
                return ST.DONE
        if size > 0.1 * prev:  # contraction too slow: refresh the matrix
            fresh = False
        prev = size
    return ST.NEEDS_NUMPY


@jit
def _implicit_step(I, F, WI, WS, midpoint, q, v, t, h, lam, tol, maxiter, ls):
    """One step of ``midpoint`` or ``implicit_euler`` from (q, v) in place (NumPy: :mod:`mbvi.integrators.implicit`).

    Both are a constrained drift q₁ = q₀ + h v_free − M⁻¹ Gᵀ Λ, g(q₁) = 0,
    whose free velocity depends on the unknown q₁:

    * midpoint: v_free = v₀ + (h/2) M⁻¹ f(q̄, v), q̄ = (q₀ + q₁)/2, G = G(q₀);
      then v₁ = v + (h/2) M⁻¹ f(q̄, v), projected at q₁;
    * implicit Euler: v_free = v₀ + h M⁻¹ f(q₁, v), G = G(q₁); v₁ = v projected at q₁,

    with v = (q₁ − q₀)/h and f = −∇U + F. The unknown is found by a fixed
    point on v around SHAKE (each iterate is one SHAKE solve warm-started
    from the last), the same equations the NumPy path solves by Newton. When
    the fixed point does not settle (stiff forces, h² k/m ≳ 1) the step is
    taken by :func:`_implicit_newton`, and the next 32 steps go straight
    to it; NEEDS_NUMPY when that fails too (the NumPy Newton, sparse, takes the step).
    """
    nq, n, nnz = I[M.NQ], I[M.N], I[M.NNZ]
    cur = WI[WK.CUR]
    nxt = 1 - cur
    if not _ensure_factor(I, F, WI, WS, q):
        return ST.NEEDS_NUMPY
    c = 0.5 * h if midpoint else h
    tf = t + 0.5 * h if midpoint else t + h  # where the pair evaluates its force
    grad = WS[WI[WK.GRAD] + cur * nq : WI[WK.GRAD] + (cur + 1) * nq]
    q1, vh, vfree = _buf(WI, WS, WK.Q1, nq), _buf(WI, WS, WK.VH, nq), _buf(WI, WS, WK.VFREE, nq)
    vnew, f, qm = _buf(WI, WS, WK.VNEW, nq), _buf(WI, WS, WK.F0, nq), _buf(WI, WS, WK.QM, nq)
    u, w = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n)
    gd1 = WS[WI[WK.GD] + nxt * nnz : WI[WK.GD] + (nxt + 1) * nnz]
    floor = 10.0 * tol * ls / abs(h) if n else 0.0
    dslot = cur
    K.copy_into(vh, v)
    prev = math.inf
    settled = False
    if WI[WK.STIFF] > 0:  # the fixed point failed lately: straight to Newton (and try it again now and then)
        WI[WK.STIFF] -= 1
    else:
        for it in range(100):
            for i in range(nq):
                q1[i] = q[i] + h * vh[i]  # the current estimate of q₁
                qm[i] = 0.5 * (q[i] + q1[i]) if midpoint else q1[i]
            K.gradient(I, F, qm, tf, grad)
            _kick(I, F, qm, vh, tf, v, c, grad, f, vfree)
            if it == 0:  # the round-off of the iterate's terms (v₀ and its kick may nearly cancel)
                floor += K.sum_roundoff(v, vfree)
            if not midpoint and n:  # the multiplier force acts along G(q₁)
                K.affine_uw(I, F, q1, u, w)
                K.jacobian_values(I, F, u, w, gd1)
                dslot = nxt
            if _shake(I, F, WI, WS, cur, dslot, q, vfree, h, lam, K.opaque(True), tol, maxiter, q1, vnew) != ST.DONE:
                break
            outcome, prev = K.settle(vnew, vh, floor, it, prev)  # vh ← vnew
            if outcome == K.SETTLED:
                settled = True
            if outcome != K.GOING:
                break
        if not settled:
            WI[WK.STIFF] = 32
    if not settled:
        st = _implicit_newton(I, F, WI, WS, midpoint, q, v, t, h, lam, tol, maxiter, q1, vh, ls)
        if st != ST.DONE:
            return st
    # v₁ before projection, and the work of F over the step (F · (q₁ − q₀))
    if midpoint:
        for i in range(nq):
            qm[i] = 0.5 * (q[i] + q1[i])
        K.gradient(I, F, qm, tf, grad)
        _kick(I, F, qm, vh, tf, vh, c, grad, f, v)
    else:
        K.nonconservative_force(I, F, q1, vh, tf, f)
        K.copy_into(v, vh)
    if I[M.HAS_F]:
        acc = 0.0
        for i in range(nq):
            acc += f[i] * (q1[i] - q[i])
        WS[WI[WK.WORK]] += acc
    WI[WK.HAVE_GRAD] = 0
    return _accept(I, F, WI, WS, q, q1, v)


@jit
def _project(I, F, WI, WS, q, v):
    """v ← v − M⁻¹ G(q)ᵀ A(q)⁻¹ G(q) v (mass-weighted projection onto G v = 0); keeps the factor at q."""
    cur = WI[WK.CUR]
    if not _factor_at(I, F, WI, WS, q, cur, K.opaque(False)):
        return False
    WI[WK.HAVE_FACTOR] = 1
    _remove_normal(I, F, WI, WS, cur, v)
    return True


@inline
def _rattle_step(I, F, WI, WS, scheme, q, v, t, h, lam, tol, maxiter, ls):
    """One step of a RATTLE-family scheme (:mod:`mbvi.engine.scheme`) from (q, v) in place: its stages in order.

    Stage s is a substep of h_s = w_s h with kicks a0_s h_s and a1_s h_s, warm-started from row ``row_s``
    of ``lam`` (``verlet`` is one stage (1, ½, ½); Yoshida's triple jump three of weights γ₁, 1 − 2γ₁, γ₁).
    """
    K.extrapolate_warm_start(I, scheme, lam)
    ts = t
    for s in range(scheme.shape[0]):
        hs = scheme[s, SC.WEIGHT] * h
        row = int(scheme[s, SC.ROW])
        st = _substep(I, F, WI, WS, q, v, ts, hs, scheme[s, SC.A0] * hs, scheme[s, SC.A1] * hs, lam[row], tol,
                      maxiter, ls)  # fmt: skip
        if st != ST.DONE:
            return st
        ts = ts + hs
    return ST.DONE


@inline
def _implicit_pair_step(I, F, WI, WS, scheme, q, v, t, h, lam, tol, maxiter, ls):
    """One step of ``midpoint`` or ``implicit_euler`` (a one-stage scheme of that kind) from (q, v) in place."""
    return _implicit_step(I, F, WI, WS, scheme[0, SC.KIND] == SC.MIDPOINT, q, v, t, h, lam[0], tol, maxiter, ls)


@inline
def _points(implicit, model, scheme, state, steps, params, out):
    """The time loop of a system without rigid bodies, one step (:func:`_rattle_step`, or
    :func:`_implicit_pair_step` when ``implicit`` is not None) after the other (see :func:`run_rattle`).

    ``implicit`` is None or not by its type, at compile time: numba prunes the other branch, so a run compiles
    only the step it takes (passing the step function itself would make the call uncacheable).
    """
    I, F = model[0], model[1]
    q, v, lam, WI, WS = state[0], state[1], state[3], state[4], state[5]
    Q, V, Wk, info = out
    k, kstop, nsteps, save_every = steps[RK.K0], steps[RK.KSTOP], steps[RK.NSTEPS], steps[RK.SAVE_EVERY]
    j, maxiter = steps[RK.J0], steps[RK.MAXITER]
    t0, h, tol, ls = params[RF.T0], params[RF.H], params[RF.TOL], params[RF.LENGTH]
    K.loop_start(I, WI, WS, steps, Wk)
    nq = I[M.NQ]
    if steps[RK.PROJECT] and j > 0:
        if not _project(I, F, WI, WS, q, v):
            K.loop_report(info, K.opaque(ST.NEEDS_NUMPY), k, j, WI, Wk, WS)
            return
        K.copy_into(V[j - 1], v)
    qb, vb = _buf(WI, WS, WK.QB, nq), _buf(WI, WS, WK.VB, nq)
    status = ST.DONE
    while k < kstop:
        K.copy_into(qb, q)
        K.copy_into(vb, v)
        wb = WS[WI[WK.WORK]]
        if implicit is None:
            status = _rattle_step(I, F, WI, WS, scheme, q, v, t0 + k * h, h, lam, tol, maxiter, ls)
        else:
            status = _implicit_pair_step(I, F, WI, WS, scheme, q, v, t0 + k * h, h, lam, tol, maxiter, ls)
        if status == ST.DONE and not K.finite(q, v):
            status = ST.NONFINITE
        if status != ST.DONE:
            K.copy_into(q, qb)  # leave the last good state (and its work: a step handed back is counted by its taker)
            K.copy_into(v, vb)
            WS[WI[WK.WORK]] = wb
            break
        k += 1
        if k % save_every == 0 or k == nsteps:
            K.save_state(Q, V, Wk, j, q, v, WI, WS)
            j += 1
    K.loop_report(info, status, k, j, WI, Wk, WS)


@jit  # allocates nothing: no reference counting on its arrays
def run_rattle(model, scheme, state, steps, params, out):
    """Steps ``steps[RK.K0]`` … ``steps[RK.KSTOP]`` − 1 of a RATTLE-family ``scheme`` for a system without rigid bodies.

    Parameters
    ----------
    model : tuple
        ``(I, F, Iv, Fv, IL, FL)`` of :func:`mbvi.engine.model.build`.
    scheme : ndarray, (stages, 5)
        The method (:mod:`mbvi.engine.scheme`).
    state : tuple
        ``(q, v, u, lam, WI, WS, bufs)`` of a :class:`mbvi.engine.runner.RunState`, stepped in place: on
        failure (q, v) is the state at the start of the failing step.
    steps, params : ndarray
        The run's integers and floats (:data:`mbvi.engine.fields.RK`, :data:`~mbvi.engine.fields.RF`).
    out : tuple
        ``(Q, V, Wk, info)``: saved states from slot ``steps[RK.J0]`` (and the work of the non-conservative forces
        at each, J; the last entry of Wk is the work so far), and the outcome (:data:`mbvi.engine.fields.RI`).
    """
    _points(None, model, scheme, state, steps, params, out)


@jit
def run_implicit(model, scheme, state, steps, params, out):
    """:func:`run_rattle` for ``midpoint`` and ``implicit_euler`` (systems without rigid bodies)."""
    _points(True, model, scheme, state, steps, params, out)
