"""Where a step of a rigid chain goes: the compiled Lie loop's kernels timed one by one.

Run: ``python benchmarks/profile_rigid_chain.py [links]`` (default 32, the
chain of ``bench_engine.py``: solid cylinders on revolute joints with axes
alternating y and z, released horizontal; dt = 1e-3). Not part of ``make
bench``: a tool for whoever speeds up the rigid-body path. It prints

1. the time per step of ``verlet`` at constraint tolerances 1e-12 … 1e-3
   (what SHAKE's iterations cost);
2. how many constrained drifts each of 3000 steps of one run takes, from half a second in, and how
   many factorizations of A they made;
3. the residual the first drift leaves, relative to the tolerance, with the
   multipliers extrapolated from the last 1 … 6 steps (constant … quintic):
   whether a better warm start would save the second drift (the quartic and
   quintic miss by more than the cubic: past it, the multipliers' noise wins);
4. each kernel of a step, timed in a compiled loop of 20000 calls: the
   constraint values, the Jacobian in velocity coordinates, the assembly and
   the profile Cholesky of A = G M⁻¹ Gᵀ, a solve, the drift of every body
   (Newton on its Cayley parameter from h ω, or from the previous SHAKE
   iterate's parameter), the rates after the accepted drift, M⁻¹Gᵀy;
5. a run from the start saving every state (simulate's default) or only the last, over the first second and the
   20-s whip: µs a step, drifts and factorizations a step (the projection of a saved velocity takes a fresh factor).

Timings are the best of 5 runs (µs); they use the engine's private kernels.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

import mbvi
from mbvi.engine import kernels as K
from mbvi.engine import lieloop as LIE
from mbvi.engine.fields import LB, LT, WARM_ROWS, WK, M
from mbvi.engine.kernels import workspace_view as _buf
from mbvi.engine.scheme import VERLET

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import rigid_chain

H = 1e-3
TOL = 1e-12


def best(f, *args, n: int = 20000) -> float:
    """Best of 5 runs of ``f(n, *args)``, µs per call."""
    f(10, *args)
    t = np.inf
    for _ in range(5):
        t0 = time.perf_counter()
        f(n, *args)
        t = min(t, (time.perf_counter() - t0) / n)
    return t * 1e6


@njit
def _constraint_values(k, I, F, WI, WS, q):
    n = I[M.N]
    u, w, g = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n), _buf(WI, WS, WK.G, n)
    for _ in range(k):
        K.constraint_values(I, F, q, u, w, g)


@njit
def _jacobian(k, I, F, Iv, IL, FL, WI, WS, bufs, q):
    n, nnz = I[M.N], Iv[M.NNZ]
    u, w = _buf(WI, WS, WK.U, 3 * n), _buf(WI, WS, WK.W, 3 * n)
    gd = WS[WI[WK.GD] : WI[WK.GD] + nnz]
    uw = _buf(WI, WS, WK.U, 6 * n)
    for _ in range(k):
        if IL[LT.FUSED]:  # as the loop does (lie.fuse_jacobian)
            LIE._jacobian_v_fused(IL, FL, q, uw, gd)
        else:
            LIE._jacobian_v(I, F, IL, FL, q, u, w, bufs[LB.GDQ], gd)


@njit
def _assemble(k, Iv, Fv, WI, WS, cholesky):
    """The assembly of A, and with ``cholesky`` its profile Cholesky after it."""
    gd = WS[WI[WK.GD] : WI[WK.GD] + Iv[M.NNZ]]
    ab = WS[WI[WK.AB] : WI[WK.AB] + WI[WK.SIZE_AB]]
    for _ in range(k):
        K._assemble(Iv, Fv, gd, ab)
        if cholesky:
            K._cholesky_profile(Iv, ab)


@njit
def _solve(k, Iv, WI, WS, rhs, out):
    ab = WS[WI[WK.AB] : WI[WK.AB] + WI[WK.SIZE_AB]]
    tmp = _buf(WI, WS, WK.TMP, Iv[M.N])
    for _ in range(k):
        K.solve(Iv, ab, rhs, out, tmp)


@njit
def _drift(k, IL, FL, q0, uh, q1, xs, warm, bufs):
    for _ in range(k):
        LIE._drift(IL, FL, q0, uh, H, q1, xs, warm, bufs)


@njit
def _drift_rates(k, IL, FL, uh, xs, ua, um):
    for _ in range(k):
        LIE._drift_rates(IL, FL, uh, H, xs, ua, um, False)


@njit
def _wgt(k, Iv, Fv, WI, WS, y, out):
    gd = WS[WI[WK.GD] : WI[WK.GD] + Iv[M.NNZ]]
    for _ in range(k):
        K.wgt(Iv, Fv, gd, y, out)


@njit
def _first_residuals(I, F, Iv, Fv, IL, FL, q, u, nsteps, order, out):
    """Verlet steps; before each, the residual of one drift from multipliers extrapolated to ``order``."""
    WI, WS = Iv[Iv[M.WKOFF] : Iv[M.WKOFF] + WK.count].copy(), np.zeros(Iv[M.WS_SIZE])
    bufs = LIE.lie_buffers(I, Iv, IL)
    n = I[M.N]
    hist = np.zeros((6, n))  # multipliers of the last steps, newest first
    lam = np.zeros(n)
    LIE._factor_at(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, WI[WK.CUR], False)
    WI[WK.HAVE_FACTOR] = 1
    weights = (
        (1.0, 0.0, 0.0, 0.0, 0.0, 0.0),
        (2.0, -1.0, 0.0, 0.0, 0.0, 0.0),
        (3.0, -3.0, 1.0, 0.0, 0.0, 0.0),
        (4.0, -6.0, 4.0, -1.0, 0.0, 0.0),
        (5.0, -10.0, 10.0, -5.0, 1.0, 0.0),
        (6.0, -15.0, 20.0, -15.0, 6.0, -1.0),
    )
    for k in range(nsteps):
        use = min(order, k)  # as many past steps as there are
        for i in range(n):
            lam[i] = 0.0
            if use > 0:
                for j in range(use):
                    lam[i] += weights[use - 1][j] * hist[j, i]
        grad = bufs[LB.GRAD0] if WI[WK.CUR] == 0 else bufs[LB.GRAD1]
        K.gradient(I, F, q, 0.0, grad)
        LIE._forces(I, F, IL, q, u, 0.0, grad, bufs, bufs[LB.FV0])
        LIE._kick(Iv, Fv, u, 0.5 * H, bufs[LB.TMPV], bufs[LB.UFREE])
        probe = lam.copy()
        LIE._shake(I, F, Iv, Fv, IL, FL, WI, WS, bufs, WI[WK.CUR], q, bufs[LB.UFREE], H, probe, True, TOL, 1)
        out[k] = K.residual(I, F, _buf(WI, WS, WK.G, n)) / TOL
        WI[WK.HAVE_GRAD] = 0
        LIE._substep(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q, u, k * H, H, 0.5 * H, 0.5 * H, lam, TOL, 50, 1.0)
        for j in range(5, 0, -1):
            hist[j] = hist[j - 1]
        hist[0] = lam


@njit
def _count_drifts(I, F, Iv, Fv, IL, FL, q, u, ls, counts):
    """Verlet steps of one run (the workspace, warm starts and factor carry over), drifts of each; factorizations."""
    WI, WS = Iv[Iv[M.WKOFF] : Iv[M.WKOFF] + WK.count].copy(), np.zeros(Iv[M.WS_SIZE])
    bufs = LIE.lie_buffers(I, Iv, IL)
    lam = np.zeros((WARM_ROWS, I[M.N]))
    qs, us = q.copy(), u.copy()
    for k in range(len(counts)):
        before = WI[WK.DRIFTS]
        LIE.lie_step_refined(I, F, Iv, Fv, IL, FL, WI, WS, bufs, VERLET, q, u, k * H, H, lam, TOL, 50, ls, np.inf, qs,
                             us)  # fmt: skip
        counts[k] = WI[WK.DRIFTS] - before
    return WI[WK.REFACTORED]


def main(links: int) -> None:
    system = mbvi.assemble(rigid_chain(links))
    stepper = mbvi.get_integrator("verlet")(system, H)
    _, Q, V = stepper.integrate(system.initial_state(), 0.0, 500, save_every=500)
    q0, v0 = Q[-1].copy(), V[-1].copy()  # half a second in: the chain is moving
    I, F, Iv, Fv, IL, FL = system.engine_model().arrays
    n, nv = Iv[M.N], Iv[M.NQ]
    print(f"{links}-link rigid chain: {n} constraint rows, {nv} velocity coordinates, G has {Iv[M.NNZ]} entries, "
          f"A's profile {Iv[M.SIZE_L]} entries ({Iv[M.NPAIR]} products)")  # fmt: skip

    print("\n1. time per verlet step against the tolerance")
    for tol in (1e-12, 1e-10, 1e-8, 1e-6, 1e-3):
        stepper.tol = tol
        t = np.inf
        for _ in range(3):
            t0 = time.perf_counter()
            stepper.integrate(mbvi.State(q0, v0), 0.0, 2000, save_every=2000)
            t = min(t, (time.perf_counter() - t0) / 2000)
        print(f"   tol {tol:7.0e}: {t * 1e6:6.1f} µs")
    stepper.tol = TOL

    print("\n2. constrained drifts per step (3000 steps, one run)")
    counts = np.zeros(3000, dtype=np.int64)
    u0 = np.zeros(nv)
    LIE.to_u(IL, q0, v0, u0)
    factors = _count_drifts(I, F, Iv, Fv, IL, FL, q0.copy(), u0, float(system.length_scale), counts)
    print("   " + ", ".join(f"{c} drifts: {k} steps" for c, k in enumerate(np.bincount(counts)) if k))
    print(f"   factorizations of A: {factors} in {len(counts)} steps (the others refine an older factor)")

    print("\n3. residual of the first drift / tolerance, by warm start (median, 90th percentile)")
    u = np.zeros(nv)
    LIE.to_u(IL, q0, v0, u)
    for order, name in (
        (1, "last step's"),
        (2, "linear"),
        (3, "quadratic"),
        (4, "cubic"),
        (5, "quartic"),
        (6, "quintic"),
    ):
        out = np.zeros(300)
        _first_residuals(I, F, Iv, Fv, IL, FL, q0.copy(), u.copy(), 300, order, out)
        r = out[10:]
        print(f"   {name:12s} {np.median(r):9.3g} {np.percentile(r, 90):9.3g}   (a second drift is needed above 0.5)")

    print("\n4. kernels, µs per call")
    WI, WS = Iv[Iv[M.WKOFF] : Iv[M.WKOFF] + WK.count].copy(), np.zeros(Iv[M.WS_SIZE])
    bufs = LIE.lie_buffers(I, Iv, IL)
    LIE._factor_at(I, F, Iv, Fv, IL, FL, WI, WS, bufs, q0, 0, False)
    rhs, out = np.random.default_rng(0).random(n), np.zeros(n)
    xs = np.zeros(6 * links)  # the Cayley parameters of the drift (and the first guess's misses)
    LIE._drift(IL, FL, q0, u, H, q0.copy(), xs, False, bufs)
    rows = (
        ("constraint values g(q)", best(_constraint_values, I, F, WI, WS, q0)),
        ("Jacobian G_v (fused)", best(_jacobian, I, F, Iv, IL, FL, WI, WS, bufs, q0)),
        ("assembly of A", best(_assemble, Iv, Fv, WI, WS, False)),
        ("assembly + profile Cholesky", best(_assemble, Iv, Fv, WI, WS, True)),
        ("solve with the factor", best(_solve, Iv, WI, WS, rhs, out)),
        ("drift of every body (Cayley)", best(_drift, IL, FL, q0, u, q0.copy(), xs.copy(), False, bufs)),
        ("  the same from the last drift's x", best(_drift, IL, FL, q0, u, q0.copy(), xs.copy(), True, bufs)),
        ("rates after the accepted drift", best(_drift_rates, IL, FL, u, xs, u.copy(), u.copy())),
        ("M⁻¹Gᵀy", best(_wgt, Iv, Fv, WI, WS, rhs, np.zeros(nv))),
    )
    for name, t in rows:
        print(f"   {name:30s} {t:7.2f}")

    print("\n5. what saving every state costs (simulate's default): one run from the start, best of 3")
    saving(system, stepper)


def saving(system, stepper) -> None:
    """µs a step, constrained drifts and factorizations of A a step, saving every state or only the last, over the
    first second and over the 20-s whip: RATTLE's velocity projection at each saved q takes a fresh factor."""
    from mbvi.integrators.compiled import Drive

    model = stepper.engine_model()
    for steps in (1000, 20000):
        for save_every in (1, steps):
            t = np.inf
            for _ in range(3):
                run = Drive(stepper, model, system.initial_state(), 0.0, steps, save_every)
                t0 = time.perf_counter()
                run.advance_to(steps)
                t = min(t, (time.perf_counter() - t0) / steps)
            WI = run.rs.WI
            print(f"   {steps * H:4.0f} s, {'every state' if save_every == 1 else 'last state '}: {t * 1e6:6.1f} µs, "
                  f"{WI[WK.DRIFTS] / steps:.2f} drifts, {WI[WK.REFACTORED] / steps:.2f} factorizations a step")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 32)
