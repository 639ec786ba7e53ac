"""The compiled system, for integrator plugins: what a compiled step may call (numba, cached on disk).

An integrator plugin that is not a :class:`mbvi.Composition` writes its step as a
numba-compilable function (:mod:`mbvi.engine.steps`)::

    def step(model, ws, q, v, t, h, params):
        ...                      # advance (q, v) in place from t to t + h
        return 0                 # 0: done; anything else: the step failed

and calls these functions on ``model`` and ``ws`` — the same kernels the
built-in integrators run, on the system's flat arrays (the System's methods of
the same names, compiled):

* ``model`` is ``(I, F)``: the configuration model with every active constraint
  row (a rigid body's orthonormality rows included) and every force law's kernels;
* ``ws`` is ``(WI, WS, scratch)``: the run's workspace (factors, buffers; these
  functions use it, a step should not rely on what they leave in it) and
  ``scratch``, (rows, nq) float rows of the plugin's own
  (:attr:`mbvi.Integrator.scratch_rows`), kept from step to step.

A function returning bool returns False when it could not do its job (a
factorization failed, a Newton iteration did not converge); a step then returns
a non-zero status, and the run stops with a :class:`mbvi.SolverError`.
"""

from __future__ import annotations

import math

from mbvi.engine import kernels as K
from mbvi.engine.fields import WK, M
from mbvi.engine.kernels import floats, ints, jit
from mbvi.engine.kernels import workspace_view as _buf

__all__ = [
    "accelerations",
    "constraint_curvature",
    "constraint_residual",
    "force",
    "gradient",
    "inv_mass",
    "n_rows",
    "nq",
    "project_position",
    "project_velocity",
    "velocity_dependent",
]


@jit
def nq(model):
    """Number of coordinates."""
    return model[0][M.NQ]


@jit
def n_rows(model):
    """Number of active constraint rows."""
    return model[0][M.N]


@jit
def velocity_dependent(model):
    """Whether some non-conservative force depends on the velocity."""
    return model[0][M.HAS_VF] != 0


@jit
def inv_mass(model):
    """The diagonal inverse mass M⁻¹, (nq,), 1/kg or 1/(kg m²) (a view: do not write to it)."""
    I, F = model
    return floats(I, F, M.W, I[M.NQ])


@jit
def gradient(model, q, out):
    """``out`` ← ∇U(q), N (every conservative force law, compiled kernels and callbacks alike)."""
    K.gradient(model[0], model[1], q, math.nan, out)  # (no time: a gradient called back as Python that raises is
    # named at the step that called it)


@jit
def force(model, q, v, t, out):
    """``out`` ← F(q, v, t), N: every non-conservative force (dampers, drag, loads) at time t."""
    K.nonconservative_force(model[0], model[1], q, v, t, out)


@jit
def constraint_residual(model, ws, q):
    """max |g(q) / scale| over the active rows (dimensionless), not counting round-off."""
    I, F = model
    WI, WS = ws[0], ws[1]
    n = I[M.N]
    u, w, g = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n), _buf(WI, WS, WK.G, n)
    K.constraint_values(I, F, q, u, w, g)
    return K.residual(I, F, g)


@jit
def _factor(I, F, WI, WS, q):
    """G(q) into the workspace's slot 0 and the factor of A = G M⁻¹ Gᵀ; False when A cannot be factored.

    A step that asks again at the same q (a leapfrog's kicks after its projection) reuses the factor it has
    (``WK.API_FACTOR``, the configuration kept in ``WK.QF``); U and W of the rows are those at q either way.
    """
    n, nnz, nq_ = I[M.N], I[M.NNZ], I[M.NQ]
    u, w = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n)
    gd = _buf(WI, WS, WK.GD, nnz)
    qf = _buf(WI, WS, WK.QF, nq_)
    K.affine_uw(I, F, q, u, w)
    if WI[WK.API_FACTOR]:
        same = True
        for i in range(nq_):
            if qf[i] != q[i]:
                same = False
                break
        if same:
            return True
    WI[WK.API_FACTOR] = 0
    K.jacobian_values(I, F, u, w, gd)
    kind = K.factor(I, F, gd, WS[WI[WK.AB] : WI[WK.AB] + WI[WK.SIZE_AB]])
    if kind == K.SHIFTED:
        WI[WK.SHIFT_USED] += 1
    if kind == K.FAILED:
        return False
    K.copy_into(qf, q)
    WI[WK.API_FACTOR] = 1
    return True


@jit
def _solve(I, WI, WS, rhs, out):
    K.solve(I, WS[WI[WK.AB] : WI[WK.AB] + WI[WK.SIZE_AB]], rhs, out, _buf(WI, WS, WK.TMP, I[M.N]))


@jit
def project_velocity(model, ws, q, v):
    """v ← its mass-weighted projection onto G(q) v = 0 (RATTLE's velocity projection); False if A is singular."""
    I, F = model
    WI, WS = ws[0], ws[1]
    n, nq_ = I[M.N], I[M.NQ]
    if n == 0:
        return True
    if not _factor(I, F, WI, WS, q):
        return False
    gd = _buf(WI, WS, WK.GD, I[M.NNZ])
    rhs, dl, dq = _buf(WI, WS, WK.RHS, n), _buf(WI, WS, WK.DL, n), _buf(WI, WS, WK.DQ, nq_)
    K.matvec(I, gd, v, rhs)
    _solve(I, WI, WS, rhs, dl)
    K.wgt(I, F, gd, dl, dq)
    for i in range(nq_):
        v[i] -= dq[i]
    return True


@jit
def project_position(model, ws, q, tol, maxiter):
    """q ← the nearest point (mass-weighted) with g(q) = 0, by Newton to the relative tolerance ``tol``.

    Returns False when ``maxiter`` iterations do not reach it (:meth:`mbvi.System.project_position`, compiled).
    """
    I, F = model
    WI, WS = ws[0], ws[1]
    n, nq_ = I[M.N], I[M.NQ]
    if n == 0:
        return True
    g, dl, dq = _buf(WI, WS, WK.G, n), _buf(WI, WS, WK.DL, n), _buf(WI, WS, WK.DQ, nq_)
    u, w = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n)
    gd = _buf(WI, WS, WK.GD, I[M.NNZ])
    for _ in range(maxiter):
        K.constraint_values(I, F, q, u, w, g)
        r = K.residual(I, F, g)
        if r <= tol:
            return True
        if not r < math.inf:
            return False
        K.jacobian_values(I, F, u, w, gd)
        WI[WK.API_FACTOR] = 0  # this factor is at an iterate, not at a configuration kept in QF
        kind = K.factor(I, F, gd, WS[WI[WK.AB] : WI[WK.AB] + WI[WK.SIZE_AB]])
        if kind == K.FAILED:
            return False
        _solve(I, WI, WS, g, dl)
        K.wgt(I, F, gd, dl, dq)
        for i in range(nq_):
            q[i] -= dq[i]
    return False


@jit
def constraint_curvature(model, ws, v, out):
    """``out`` ← Ġ(q, v) v, (n,): g̈ at zero acceleration, 2 s (U̇ · Ẇ) for every active row (independent of q)."""
    I, F = model
    WI, WS = ws[0], ws[1]
    n = I[M.N]
    du, dw = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n)
    nu = I[M.NU]
    ur, uc, uv = ints(I, M.UR, nu), ints(I, M.UC, nu), floats(I, F, M.UV, nu)
    du[:] = 0.0
    for e in range(nu):
        du[ur[e]] += uv[e] * v[uc[e]]
    if I[M.SAME]:
        dw = du
    else:
        nw = I[M.NW]
        wr, wc, wv = ints(I, M.WR, nw), ints(I, M.WC, nw), floats(I, F, M.WV, nw)
        dw[:] = 0.0
        for e in range(nw):
            dw[wr[e]] += wv[e] * v[wc[e]]
    s = floats(I, F, M.S, n)
    for r in range(n):
        i = 3 * r
        out[r] = 2.0 * s[r] * (du[i] * dw[i] + du[i + 1] * dw[i + 1] + du[i + 2] * dw[i + 2])


@jit
def accelerations(model, ws, q, v, t, out):
    """``out`` ← the accelerations of the index-1 equations a = M⁻¹(f − Gᵀλ), f = −∇U + F(q, v, t), with λ from
    (G M⁻¹ Gᵀ) λ = G M⁻¹ f + Ġ v (so that g̈ = 0); False when A cannot be factored."""
    I, F = model
    WI, WS = ws[0], ws[1]
    n, nq_ = I[M.N], I[M.NQ]
    wi = floats(I, F, M.W, nq_)
    f = _buf(WI, WS, WK.F0, nq_)
    K.gradient(I, F, q, t, out)
    K.nonconservative_force(I, F, q, v, t, f)
    for i in range(nq_):
        out[i] = wi[i] * (f[i] - out[i])  # M⁻¹ f
    if n == 0:
        return True
    rhs, lam, dq = _buf(WI, WS, WK.RHS, n), _buf(WI, WS, WK.DL, n), _buf(WI, WS, WK.DQ, nq_)
    constraint_curvature(model, ws, v, lam)  # Ġ v (into lam, before U and W are those at q)
    if not _factor(I, F, WI, WS, q):
        return False
    gd = _buf(WI, WS, WK.GD, I[M.NNZ])
    K.matvec(I, gd, out, rhs)
    for r in range(n):
        rhs[r] += lam[r]
    _solve(I, WI, WS, rhs, lam)
    K.wgt(I, F, gd, lam, dq)
    for i in range(nq_):
        out[i] -= dq[i]
    return True
