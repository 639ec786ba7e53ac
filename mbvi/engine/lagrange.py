"""The time loop of a system in its own coordinates (:class:`mbvi.LagrangianSystem`), compiled once per machine.

A Lagrangian system hands the engine its derivatives as kernels of the contract
(:data:`mbvi.engine.callbacks.SIGNATURE`), generated from its sympy expressions
(:mod:`mbvi.lagrangian.codegen`), each *setting* its ``out``. Every kernel gets the
system's parameter values as its ``ints`` (``fns[NFN:]``, float64s by their bits), so
systems that differ only in their values share one compiled module:

===============  ==========  ================================================================
kernel (``FN``)  ``floats``  ``out``
===============  ==========  ================================================================
``POINT``        —           L, L_q (n), L_v (n), L_qq, L_qv, L_vv (n × n each, row-major)
``FORCE``        —           Q (n), Q_q, Q_v (n × n each)
``CONSTRAINT``   λ (m)       g (m), G (m × n), H = Σ λ_k ∇²g_k (n × n)
===============  ==========  ================================================================

The loop calls them through their addresses, so one compiled loop runs every
Lagrangian. It steps the discrete Euler–Lagrange equations of a quadrature
discrete Lagrangian (nodes ``c``, weights ``w``: symplectic Euler A/B, the
trapezoid "verlet", the midpoint rule) or backward Euler in (q, p), with
their Newton solves, exactly as :mod:`mbvi.lagrangian.integrators` does in
NumPy. A step it cannot take — Newton not converging, a singular matrix, a
non-finite value — is handed back (``ST.NEEDS_NUMPY``): the NumPy step takes
it (and reports the failure in its own words when it fails too).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from mbvi.engine.fields import ST
from mbvi.engine.kernels import _call_address

__all__ = ["CONSTRAINT", "DISCRETE", "FORCE", "IMPLICIT_EULER", "NFN", "POINT", "run"]

#: kernels (addresses in ``fns``; 0: none), and where the parameter values start in ``fns``
POINT, FORCE, CONSTRAINT = 0, 1, 2
NFN = 3
#: methods
DISCRETE, IMPLICIT_EULER = 0, 1

#: the per-step functions allocate nothing: no reference counting (see mbvi.engine.kernels)
jit = njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
#: the functions that allocate (a run's workspace)
jit_alloc = njit(cache=True, nogil=True, error_model="numpy", _nrt=True)

@jit
def _lu_solve(A, b, piv, x):
    """x = A⁻¹ b by LU with partial pivoting (A, b overwritten); False when A is singular or nearly so (a pivot
    below 1e-13 of the largest entry: redundant constraints, left to the NumPy step's least squares)."""
    n = A.shape[0]
    scale = 0.0
    for i in range(n):
        piv[i] = i
        for j in range(n):
            scale = max(scale, abs(A[i, j]))
    for k in range(n):
        p, big = k, abs(A[k, k])
        for i in range(k + 1, n):
            if abs(A[i, k]) > big:
                p, big = i, abs(A[i, k])
        if not big > 1e-13 * scale or not big < math.inf:
            return False
        if p != k:
            for j in range(n):
                A[k, j], A[p, j] = A[p, j], A[k, j]
            b[k], b[p] = b[p], b[k]
        for i in range(k + 1, n):
            f = A[i, k] / A[k, k]
            if f != 0.0:
                for j in range(k + 1, n):
                    A[i, j] -= f * A[k, j]
                b[i] -= f * b[k]
    for i in range(n - 1, -1, -1):
        s = b[i]
        for j in range(i + 1, n):
            s -= A[i, j] * x[j]
        x[i] = s / A[i, i]
        if not abs(x[i]) < math.inf:
            return False
    return True


@jit
def _scale_rows(A, b):
    """Each row of a step's matrix with constraints (and of b) scaled to a largest entry of 1, before
    :func:`_lu_solve`.

    A step's matrix [[J, G₀ᵀ], [G₁, 0]] has J ≈ −M/h beside constraint rows of order one: unscaled, a 1e6 kg
    Cartesian pendulum at dt = 1e-3 had its constraint pivots at 1e-18 of the largest entry (every step handed
    to NumPy, whose least squares then dropped the constraint). The steps without constraints do not call it."""
    n = A.shape[0]
    for i in range(n):
        row = 0.0
        for j in range(n):
            row = max(row, abs(A[i, j]))
        if row > 0.0 and row < math.inf:
            inv = 1.0 / row
            for j in range(n):
                A[i, j] *= inv
            b[i] *= inv


@jit
def _point(fns, n, x, vel, t, buf):
    """buf ← (L, L_q, L_v, L_qq, L_qv, L_vv) at (x, vel, t)."""
    _call_address(fns[POINT], x, vel, t, fns[NFN:], buf[:0], buf)


@jit
def _force(fns, n, x, vel, t, buf):
    _call_address(fns[FORCE], x, vel, t, fns[NFN:], buf[:0], buf)


@jit
def _constraint(fns, q, lam, buf):
    _call_address(fns[CONSTRAINT], q, q, 0.0, fns[NFN:], lam, buf)


@jit
def _ends(fns, n, nodes, weights, q0, dq, t, h, jacobian, pb, fb, vel, x, a, b, J):
    """(D₁L_d + f⁻, D₂L_d + f⁺) into a, b and ∂(D₁L_d + f⁻)/∂q₁ into J, for the step q₀ → q₀ + Δq: its
    unknown is the increment Δq, not q₁ (:meth:`_DiscreteLagrangian._ends`: why)."""
    nn = n * n
    for i in range(n):
        vel[i] = dq[i] / h
        a[i] = 0.0
        b[i] = 0.0
    if jacobian:
        J[:, :] = 0.0
    forced = fns[FORCE] != 0
    for s in range(nodes.shape[0]):
        c, w = nodes[s], weights[s]
        ti = t + c * h
        for i in range(n):
            x[i] = q0[i] + c * dq[i] if c != 0.0 else q0[i]
        _point(fns, n, x, vel, ti, pb)
        oq, ov, oqq, oqv, ovv = 1, 1 + n, 1 + 2 * n, 1 + 2 * n + nn, 1 + 2 * n + 2 * nn
        for i in range(n):
            if c != 1.0:
                a[i] = a[i] + (w * h * (1.0 - c)) * pb[oq + i] - w * pb[ov + i]
            else:
                a[i] = a[i] - w * pb[ov + i]
            if c != 0.0:
                b[i] = b[i] + (w * h * c) * pb[oq + i] + w * pb[ov + i]
            else:
                b[i] = b[i] + w * pb[ov + i]
        if jacobian:
            for i in range(n):
                for j in range(n):
                    jc = (-w / h) * pb[ovv + i * n + j]
                    if c == 0.0:
                        jc += w * pb[oqv + i * n + j]
                    elif c == 1.0:
                        jc -= w * pb[oqv + j * n + i]
                    else:
                        jc += (
                            (w * h * c * (1.0 - c)) * pb[oqq + i * n + j]
                            + (w * (1.0 - c)) * pb[oqv + i * n + j]
                            - (w * c) * pb[oqv + j * n + i]
                        )
                    J[i, j] += jc
        if forced:
            _force(fns, n, x, vel, ti, fb)
            for i in range(n):
                a[i] += (h * w * (1.0 - c)) * fb[i]
                b[i] += (h * w * c) * fb[i]
            if jacobian:
                for i in range(n):
                    for j in range(n):
                        J[i, j] += (h * w * (1.0 - c)) * (c * fb[n + i * n + j] + fb[n + nn + i * n + j] / h)


@jit
def _maxabs(x, n):
    top = 0.0
    for i in range(n):
        top = max(top, abs(x[i]))
    return top


@jit
def _step_scale(q0, q1, n):
    """max(|q₀|, |q₁|, |q₁ − q₀|): what a step's Newton corrections are measured against (relative, as
    :func:`mbvi.lagrangian.integrators._step_scale`)."""
    top = max(_maxabs(q0, n), _maxabs(q1, n))
    for i in range(n):
        top = max(top, abs(q1[i] - q0[i]))
    return max(top, 1e-290)


@jit
def _legendre(fns, n, m, quadratic, q, p, t, v, pout, W):
    """v with ∂L/∂v(q, v) + Gᵀμ = p, G v = 0 (Newton from ``v``, in place); pout ← p − Gᵀμ. False: not taken."""
    pb, cb, K, rhs, dz, piv, mu, lam0 = W[0], W[2], W[3], W[4], W[5], W[6], W[7], W[8]
    nn = n * n
    ovv = 1 + 2 * n + 2 * nn
    ov = 1 + n
    if m:
        lam0[:] = 0.0
        _constraint(fns, q, lam0, cb)  # G at cb[m : m + m n]
    mu[:] = 0.0
    done = False
    for _ in range(1 if quadratic else 30):
        _point(fns, n, q, v, t, pb)
        K[:, :] = 0.0
        for i in range(n):
            r = pb[ov + i] - p[i]
            for k in range(m):
                r += cb[m + k * n + i] * mu[k]
            rhs[i] = -r
            for j in range(n):
                K[i, j] = pb[ovv + i * n + j]
        for k in range(m):
            s = 0.0
            for j in range(n):
                K[n + k, j] = cb[m + k * n + j]
                K[j, n + k] = cb[m + k * n + j]
                s += cb[m + k * n + j] * v[j]
            rhs[n + k] = -s
        if m:
            _scale_rows(K[: n + m, : n + m], rhs[: n + m])
        if not _lu_solve(K[: n + m, : n + m], rhs[: n + m], piv, dz):
            return False
        for i in range(n):
            v[i] += dz[i]
        for k in range(m):
            mu[k] += dz[n + k]
        if quadratic or _maxabs(dz, n) <= 1e-14 * (1.0 + _maxabs(v, n)):
            done = True
            break
    if not done:
        return False
    for i in range(n):
        s = p[i]
        for k in range(m):
            s -= cb[m + k * n + i] * mu[k]
        pout[i] = s
    return True


@jit
def _discrete_step(fns, n, m, nodes, weights, quadratic, q0, v0, p0, t, h, tol, maxiter, q1, v1, p1, W):
    """One step of the discrete Lagrangian (nodes, weights): (q0, v0, p0) → (q1, v1, p1); False: hand it back."""
    pb, fb, cb, K, rhs, dz, piv, lam, lam0, J, a, b, dq, vel, x, G0 = W
    for i in range(n):
        dq[i] = h * v0[i]  # the unknown (see _ends)
        q1[i] = q0[i] + dq[i]
    lam[:] = 0.0
    if m:
        lam0[:] = 0.0
        _constraint(fns, q0, lam0, cb)
        for k in range(m):
            for j in range(n):
                G0[k, j] = cb[m + k * n + j]
    prev = math.inf
    converged = False
    for _ in range(maxiter):
        _ends(fns, n, nodes, weights, q0, dq, t, h, True, pb, fb, vel, x, a, b, J)
        K[:, :] = 0.0
        for i in range(n):
            r = p0[i] + a[i]
            for k in range(m):
                r += G0[k, i] * lam[k]
            rhs[i] = -r
            for j in range(n):
                K[i, j] = J[i, j]
        if m:
            lam0[:] = 0.0
            _constraint(fns, q1, lam0, cb)
            for k in range(m):
                rhs[n + k] = -cb[k]
                for j in range(n):
                    K[n + k, j] = cb[m + k * n + j]
                    K[j, n + k] = G0[k, j]
        if m:
            _scale_rows(K[: n + m, : n + m], rhs[: n + m])
        if not _lu_solve(K[: n + m, : n + m], rhs[: n + m], piv, dz):
            return False
        for i in range(n):
            dq[i] += dz[i]
            q1[i] = q0[i] + dq[i]
        for k in range(m):
            lam[k] += dz[n + k]
        size = _maxabs(dz, n)
        if not size < math.inf:
            return False
        bound = tol * _step_scale(q0, q1, n)
        if size <= bound or (prev < math.inf and size < 1e-3 * prev and size**3 <= 1e-2 * bound * prev**2):
            converged = True
            break
        prev = size
    if not converged:
        return False
    _ends(fns, n, nodes, weights, q0, dq, t, h, False, pb, fb, vel, x, a, b, J)
    for i in range(n):
        v1[i] = dq[i] / h
    return _legendre(fns, n, m, quadratic, q1, b, t + h, v1, p1, W)


@jit
def _project_velocity(fns, n, m, q, v, t, W):
    """v ← the velocity closest to v in the L_vv-weighted norm with G(q) v = 0; False: singular."""
    pb, cb, K, rhs, dz, piv, lam0 = W[0], W[2], W[3], W[4], W[5], W[6], W[8]
    nn = n * n
    ovv = 1 + 2 * n + 2 * nn
    _point(fns, n, q, v, t, pb)
    lam0[:] = 0.0
    _constraint(fns, q, lam0, cb)
    K[:, :] = 0.0
    for i in range(n):
        s = 0.0
        for j in range(n):
            K[i, j] = pb[ovv + i * n + j]
            s += pb[ovv + i * n + j] * v[j]
        rhs[i] = s
    for k in range(m):
        rhs[n + k] = 0.0
        for j in range(n):
            K[n + k, j] = cb[m + k * n + j]
            K[j, n + k] = cb[m + k * n + j]
    if m:
        _scale_rows(K[: n + m, : n + m], rhs[: n + m])
    if not _lu_solve(K[: n + m, : n + m], rhs[: n + m], piv, dz):
        return False
    for i in range(n):
        v[i] = dz[i]
    return True


@jit
def _implicit_euler_step(fns, n, m, q0, v0, p0, t, h, tol, maxiter, q1, v1, p1, W):
    """Backward Euler in (q, p) (:class:`mbvi.lagrangian.integrators.ImplicitEuler`); False: hand it back."""
    pb, fb, cb, K, rhs, dz, piv, lam = W[0], W[1], W[2], W[3], W[4], W[5], W[6], W[7]
    nn = n * n
    oq, ov, oqq, oqv, ovv = 1, 1 + n, 1 + 2 * n, 1 + 2 * n + nn, 1 + 2 * n + 2 * nn
    t1 = t + h
    forced = fns[FORCE] != 0
    for i in range(n):
        v1[i] = v0[i]
    lam[:] = 0.0
    converged = False
    for _ in range(maxiter):
        for i in range(n):
            q1[i] = q0[i] + h * v1[i]
        _point(fns, n, q1, v1, t1, pb)
        if forced:
            _force(fns, n, q1, v1, t1, fb)
        if m:
            _constraint(fns, q1, lam, cb)
        K[:, :] = 0.0
        for i in range(n):
            r = pb[ov + i] - p0[i] - h * pb[oq + i]
            if forced:
                r -= h * fb[i]
            for k in range(m):
                r += cb[m + k * n + i] * lam[k]
            rhs[i] = -r
            for j in range(n):
                jj = h * pb[oqv + j * n + i] + pb[ovv + i * n + j] - h * (h * pb[oqq + i * n + j] + pb[oqv + i * n + j])
                if forced:
                    jj -= h * (h * fb[n + i * n + j] + fb[n + nn + i * n + j])
                if m:
                    jj += h * cb[m + m * n + i * n + j]
                K[i, j] = jj
        for k in range(m):
            rhs[n + k] = -cb[k]
            for j in range(n):
                K[n + k, j] = h * cb[m + k * n + j]
                K[j, n + k] = cb[m + k * n + j]
        if m:
            _scale_rows(K[: n + m, : n + m], rhs[: n + m])
        if not _lu_solve(K[: n + m, : n + m], rhs[: n + m], piv, dz):
            return False
        for i in range(n):
            v1[i] += dz[i]
        for k in range(m):
            lam[k] += dz[n + k]
        if abs(h) * _maxabs(dz, n) <= tol * _step_scale(q0, q1, n):
            converged = True
            break
    if not converged:
        return False
    for i in range(n):
        q1[i] = q0[i] + h * v1[i]
    if m and not _project_velocity(fns, n, m, q1, v1, t1, W):
        return False
    _point(fns, n, q1, v1, t1, pb)
    for i in range(n):
        p1[i] = pb[ov + i]
    return True


@jit
def _mass_positive(pb, n, A):
    """Whether the mass matrix ∂²L/∂v² in ``pb`` (a point's kernel output) is positive definite: the LDLᵀ
    factor of its symmetric part in A (scratch, n × n at least; no square roots), every pivot above 1e-12 of its
    own diagonal entry (the test of the Jacobi-scaled matrix: diag(1, r²) of a satellite in metres is fine)."""
    ovv = 1 + 2 * n + 2 * n * n
    for j in range(n):  # L below the diagonal (unit diagonal), D on it
        diag = pb[ovv + j * n + j]
        if not 0.0 < diag < math.inf:
            return False
        d = diag
        for k in range(j):
            d -= A[j, k] * A[j, k] * A[k, k]
        if not d > 1e-12 * diag:
            return False
        A[j, j] = d
        for i in range(j + 1, n):
            s = 0.5 * (pb[ovv + i * n + j] + pb[ovv + j * n + i])
            for k in range(j):
                s -= A[i, k] * A[j, k] * A[k, k]
            A[i, j] = s / d
    return True


@jit_alloc
def _workspace(n, m):
    nn = n * n
    k = n + m
    return (
        np.zeros(1 + 2 * n + 3 * nn),  # point
        np.zeros(n + 2 * nn),  # force
        np.zeros(m + m * n + nn),  # constraint
        np.zeros((k, k)),  # K
        np.zeros(k),  # rhs
        np.zeros(k),  # dz
        np.zeros(k, np.int64),  # piv
        np.zeros(max(m, 1)),  # λ
        np.zeros(max(m, 1)),  # zeros (a constraint evaluated without multipliers)
        np.zeros((n, n)),  # J
        np.zeros(n),  # a
        np.zeros(n),  # b
        np.zeros(n),  # dq
        np.zeros(n),  # vel
        np.zeros(n),  # x
        np.zeros((max(m, 1), n)),  # G(q0)
    )


@jit_alloc
def run(fns, n, m, method, nodes, weights, quadratic, q, v, p, t0, h, k0, kstop, nsteps, save_every, j0, tol, maxiter,
        Q, V, P, info):  # fmt: skip
    """Steps ``k0`` … ``kstop − 1`` of a run of ``nsteps`` from (q, v, p) (stepped in place), saving every
    ``save_every``-th state (and the last) into Q, V, P from slot ``j0``.

    ``info`` ← (status, the step reached, the next save slot): ``ST.DONE``, or ``ST.NEEDS_NUMPY`` at a step the
    loop hands back (the state is then that step's start).
    """
    W = _workspace(n, m)
    q1, v1, p1 = np.empty(n), np.empty(n), np.empty(n)
    k, j = k0, j0
    status = ST.DONE
    while k < kstop:
        t = t0 + k * h
        if method == DISCRETE:
            ok = _discrete_step(fns, n, m, nodes, weights, quadratic, q, v, p, t, h, tol, maxiter, q1, v1, p1, W)
        else:
            ok = _implicit_euler_step(fns, n, m, q, v, p, t, h, tol, maxiter, q1, v1, p1, W)
        if ok:
            for i in range(n):
                if not (abs(q1[i]) < math.inf and abs(v1[i]) < math.inf and abs(p1[i]) < math.inf):
                    ok = False
        # a step that lands where the mass matrix is singular or indefinite (L = (1 − q²) v²/2 past q = 1, a mass
        # m(t) that reaches 0) is no motion: handed back, the NumPy step says so
        if ok and not _mass_positive(W[0], n, W[3]):
            ok = False
        # nor is one where L itself is not finite (numba's log of a negative number is NaN, not an error): the
        # NumPy step says the motion left L's domain
        if ok and not abs(W[0][0]) < math.inf:
            ok = False
        if not ok:
            status = ST.NEEDS_NUMPY
            break
        for i in range(n):
            q[i], v[i], p[i] = q1[i], v1[i], p1[i]
        k += 1
        if k % save_every == 0 or k == nsteps:
            for i in range(n):
                Q[j, i], V[j, i], P[j, i] = q[i], v[i], p[i]
            j += 1
    info[0], info[1], info[2] = status, k, j


@jit_alloc
def momentum(fns, n, q, v, t, p):
    """p ← ∂L/∂v(q, v, t)."""
    pb = np.zeros(1 + 2 * n + 3 * n * n)
    _point(fns, n, q, v, t, pb)
    for i in range(n):
        p[i] = pb[1 + n + i]
