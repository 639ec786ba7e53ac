"""Compiled kernels on the engine model's flat arrays (numba, cached on disk).

Every function takes the model as ``(I, F)`` (see :mod:`mbvi.engine.slots`),
writes into buffers it is given and allocates nothing on the per-step path.
Each constraint row type and each force family is evaluated for all its
instances in one loop.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit
from numba import types as nt
from numba import uint64 as U
from numba.extending import intrinsic

from mbvi.engine import contract as CT
from mbvi.engine import extrapolation
from mbvi.engine import scheme as SC
from mbvi.engine.cache import announce_compiling, ensure_fresh
from mbvi.engine.fields import RI, RK, WARM_HISTORY, WARM_ROWS, WK, M
from mbvi.engine.spin import spin_solve

ensure_fresh()  # before the first compiled function is loaded from numba's cache
announce_compiling()

__all__ = [
    "constraint_values",
    "copy_into",
    "factor",
    "gradient",
    "gradient_families",
    "jacobian_values",
    "nonconservative_force",
    "predict_multipliers",
    "residual",
    "solve",
    "wgt",
]

#: the per-step kernels: no reference counting (they allocate nothing; numba's atomic
#: increments and decrements of every array passed or sliced cost a third of a small step)
jit = njit(cache=True, nogil=True, error_model="numpy", _nrt=False)
#: the functions that allocate (workspaces, dense fallbacks, whole runs)
jit_alloc = njit(cache=True, nogil=True, error_model="numpy", _nrt=True)
#: thin layers between entry points and the work (a time loop's frame, the choice of step): inlined into their
#: callers in numba's IR. A function compiled on its own is optimized again, whole, with everything it calls, in
#: every function that calls it: a chain of thin layers cost the first batch run ~10 s of compiling
inline = njit(inline="always", nogil=True, error_model="numpy")


@njit(inline="always")  # a view: inlined, as the functions without reference counting cannot return one
def workspace_view(WI, WS, slot, length):
    """The float buffer ``slot`` of a run's workspace (its offset is WI[slot]), as a view of WS."""
    o = WI[slot]
    return WS[o : o + length]


@njit(inline="always")
def ints(I, slot, length):
    """The int array at offset I[slot] of the model, as a view (indexing a view, not I[I[slot] + i], lets LLVM
    keep the base in a register: the sparse kernels run 1.5× faster)."""
    o = I[slot]
    return I[o : o + length]


@njit(inline="always")
def floats(I, F, slot, length):
    """The float array at offset I[slot] of F, as a view (see :func:`ints`)."""
    o = I[slot]
    return F[o : o + length]


# An index known to be ≥ 0 is cast to unsigned where it indexes in the sparse kernels below, ``a[U(i)]``:
# a signed index makes numba test it for Python's negative wraparound on every access, which costs
# these gather/scatter loops two thirds of their time (assembly of A on a 32-link rigid chain: 11 → 3.7 µs).
# Only the index is cast, never a term of index arithmetic (int64 ± uint64 is a float in numba).

OK, SHIFTED, FAILED = 0, 1, 2


# ------------------------------------------------------------------------------------- constraints
@jit
def affine_uw(I, F, q, u, w):
    """U and W of every active row at q, flat (3n,) each (W untouched when the maps coincide).

    A row whose U map repeats an earlier row's copies its U (``NALIAS``, see
    :func:`mbvi.engine.model._u_aliases`): the same numbers, a third of the terms on a rigid chain.
    """
    n3, nu = 3 * I[M.N], I[M.NU1]
    cu, ur, uc, uv = floats(I, F, M.CU, n3), ints(I, M.U1R, nu), ints(I, M.U1C, nu), floats(I, F, M.U1V, nu)
    for i in range(n3):
        u[i] = cu[i]
    if nu:  # the terms come entry by entry (model: a stable sort), each entry's summed in a register
        cur = U(ur[0])
        acc = u[cur]
        for e in range(nu):
            r = U(ur[e])
            if r != cur:
                u[cur] = acc
                cur = r
                acc = u[r]
            acc += uv[e] * q[U(uc[e])]
        u[cur] = acc
    na = I[M.NALIAS]
    dst, src = ints(I, M.ALIAS_DST, na), ints(I, M.ALIAS_SRC, na)
    for a in range(na):
        d, s = 3 * dst[a], 3 * src[a]
        for c in range(3):
            u[U(d + c)] = u[U(s + c)]
    if not I[M.SAME]:
        nw = I[M.NW]
        cw, wr, wc, wv = floats(I, F, M.CW, n3), ints(I, M.WR, nw), ints(I, M.WC, nw), floats(I, F, M.WV, nw)
        for i in range(n3):
            w[i] = cw[i]
        for e in range(nw):
            w[U(wr[e])] += wv[e] * q[U(wc[e])]


@jit
def constraint_values(I, F, q, u, w, g):
    """g_r = s_r (U_r · W_r) − k_r on the active rows, at q."""
    affine_uw(I, F, q, u, w)
    if I[M.SAME]:
        w = u
    n = I[M.N]
    s, k = floats(I, F, M.S, n), floats(I, F, M.KK, n)
    for r in range(n):
        i = 3 * r
        g[r] = s[r] * (u[i] * w[i] + u[i + 1] * w[i + 1] + u[i + 2] * w[i + 2]) - k[r]


@jit
def jacobian_values(I, F, u, w, gd):
    """Values of G on its pattern, s (∂U · W + U · ∂W), from U and W (:func:`constraint_values`)."""
    gd[:] = 0.0
    if I[M.SAME]:
        w = u
    nu = I[M.NU]
    ur, upos, su = ints(I, M.UR, nu), ints(I, M.UPOS, nu), floats(I, F, M.SU, nu)
    for e in range(nu):
        gd[U(upos[e])] += su[e] * w[U(ur[e])]
    if not I[M.SAME]:
        nw = I[M.NW]
        wr, wpos, sw = ints(I, M.WR, nw), ints(I, M.WPOS, nw), floats(I, F, M.SW, nw)
        for e in range(nw):
            gd[U(wpos[e])] += sw[e] * u[U(wr[e])]


@jit
def residual(I, F, g):
    """max |g / scale| over active rows, not counting round-off (dimensionless).

    A row is divided by its scale only when it may raise the running maximum:
    a row with |g| − round-off ≤ r·scale·(1 − 1e-14) cannot (its quotient,
    rounded, is at most r), so the result is the same bit for bit with a
    handful of divisions instead of one a row (SHAKE calls this at every drift).
    """
    r = 0.0
    n = I[M.N]
    sc, ro = floats(I, F, M.SCALE, n), floats(I, F, M.ROUND, n)
    for i in range(n):
        a = abs(g[i])
        if not a < math.inf:
            return math.inf
        a = a - ro[i]
        if a > r * sc[i] * (1.0 - 1e-14):
            a = a / sc[i]
            if a > r:
                r = a
    return r


@jit_alloc
def residual_at_roundoff(I, F, q, u, w, g):
    """:func:`residual` with the round-off of each row estimated at q (not at the initial configuration).

    A mechanism far from the origin carries round-off that grows as it turns
    (a rod at 1e7 m: ~1e-9 m per coordinate, times the rod's extent along
    it); SHAKE accepts a residual at that level when it stalls there. U and W
    must be those at q (:func:`constraint_values`).
    """
    n = I[M.N]
    if I[M.SAME]:
        w = u
    mu = np.zeros(3 * n)
    mw = np.zeros(3 * n)
    ur, uc, uv, cu = I[M.UR], I[M.UC], I[M.UV], I[M.CU]
    for i in range(3 * n):
        mu[i] = abs(F[cu + i])
    for e in range(I[M.NU]):
        mu[I[ur + e]] += abs(F[uv + e] * q[I[uc + e]])
    if I[M.SAME]:
        copy_into(mw, mu)
    else:
        wr, wc, wv, cw = I[M.WR], I[M.WC], I[M.WV], I[M.CW]
        for i in range(3 * n):
            mw[i] = abs(F[cw + i])
        for e in range(I[M.NW]):
            mw[I[wr + e]] += abs(F[wv + e] * q[I[wc + e]])
    r = 0.0
    s, sc = I[M.S], I[M.SCALE]
    for i in range(n):
        a = abs(g[i])
        if not a < math.inf:
            return math.inf
        b = 0.0
        for c in range(3):
            b += mu[3 * i + c] * abs(w[3 * i + c]) + abs(u[3 * i + c]) * mw[3 * i + c]
        a = (a - 64.0 * 2.220446049250313e-16 * abs(F[s + i]) * b) / F[sc + i]
        if a > r:
            r = a
    return r


# ------------------------------------------------------------------------------ a compiled call's frame
@jit
def loop_start(I, WI, WS, steps, Wk):
    """The workspace at the start of a compiled call: counters zeroed; and when ``steps[RK.FRESH]`` (the state
    was not stepped to by this workspace) the workspace of a new run — every buffer zero, no factor, no
    gradient, slot 0 — with the work so far read from the last entry of ``Wk``."""
    if steps[RK.FRESH]:
        wk = ints(I, M.WKOFF, WK.count)
        for i in range(WK.count):
            WI[i] = wk[i]
        WS[:] = 0.0
        WS[WI[WK.WORK]] = Wk[len(Wk) - 1]
    WI[WK.SHIFT_USED] = 0
    WI[WK.NEWTON_USED] = 0
    WI[WK.REFINED] = 0


@jit
def finite(q, v):
    """Whether every entry of q and v (of one length) is finite: a step that leaves one is not kept."""
    for i in range(len(q)):
        if not (abs(q[i]) < math.inf and abs(v[i]) < math.inf):
            return False
    return True


@jit
def save_state(Q, V, Wk, j, q, v, WI, WS):
    """The state (q, v) into save slot ``j`` of (Q, V), and the work so far into Wk[j], J."""
    copy_into(Q[j], q)
    copy_into(V[j], v)
    Wk[j] = WS[WI[WK.WORK]]


@jit
def loop_report(info, status, k, j, WI, Wk, WS):
    """A compiled call's outcome into ``info`` (:data:`mbvi.engine.fields.RI`): status, step reached, next save
    slot, the counters added; the work so far into the last entry of ``Wk``."""
    info[RI.STATUS] = status
    info[RI.STEP] = k
    info[RI.SAVED] = j
    info[RI.SHIFTED] += WI[WK.SHIFT_USED]
    info[RI.NEWTON] += WI[WK.NEWTON_USED]
    info[RI.REFINED] += WI[WK.REFINED]
    Wk[len(Wk) - 1] = WS[WI[WK.WORK]]


#: outcomes of :func:`settle`
GOING, SETTLED, STALLED = 0, 1, 2


@jit
def sum_roundoff(start, total):
    """1e-13 of the largest term of the sums ``total = start + (total − start)``, element by element: what rounding
    leaves in a velocity formed as a start velocity and a kick (the fixed point's iterate), m/s.

    A change of the iterate within it is round-off, however small the sum: a drag's step whose mean velocity
    passes near zero (v½ = 7e-6 m/s, formed as 4e-3 − 4e-3) 2-cycled at 9e-19 against 1e-13 |v½| = 7e-19, and the
    run failed as if its damping were too stiff (h c/m = 0.02).
    """
    big = 0.0
    for i in range(len(start)):
        big = max(big, abs(start[i]), abs(total[i] - start[i]))
    return 1e-13 * big


@jit
def settle(new, old, floor, it, prev):
    """One test of a fixed-point iteration on a velocity: old ← new; (outcome, the change max |new − old|).

    SETTLED when the change is within 1e-13 relative (to max |new|, in the velocities' own units: not 1 m/s,
    which let a 1 µm beam's steps settle on their first iterate) plus ``floor`` (the constraints' tolerance as a
    velocity, and :func:`sum_roundoff` of the iterate's terms); STALLED when it grows (from
    iteration 1 on) or halves too slowly (from iteration 4 on) relative to ``prev``, the last change.
    """
    delta = 0.0
    big = 0.0
    for i in range(len(new)):
        delta = max(delta, abs(new[i] - old[i]))
        big = max(big, abs(new[i]))
    copy_into(old, new)
    if delta <= 1e-13 * big + floor:
        return SETTLED, delta
    if stalls(it, delta, prev):
        return STALLED, delta
    return GOING, delta


@jit
def stalls(it, delta, prev):
    """Whether a plain fixed-point iteration has stalled: its change ``delta`` grew (from iteration 1 on) or
    shrank by less than half (from iteration 4 on) against ``prev``, the last change."""
    return (it >= 1 and delta > prev) or (it >= 4 and delta > 0.5 * prev)


@jit
def would_mix(it, delta, prev):
    """Whether :func:`settle_mixed` starts mixing a forward stage's iterates here (the change shrank by less than
    :data:`MIX_ABOVE`): the batch's lanes hand such a member to the serial loop, which mixes it."""
    return it >= 1 and delta > MIX_ABOVE * prev


#: the contraction (change / last change) of a velocity's fixed point above which :func:`settle_mixed` mixes
#: its iterates (Anderson's acceleration, depth 1); below it the plain iteration is fast and left as it was
MIX_ABOVE = 0.25


@jit
def settle_mixed(new, old, gprev, rprev, floor, it, prev, mixing):
    """:func:`settle` with Anderson's acceleration (depth 1) once the plain iteration contracts slowly.

    The iteration is x ← g(x): ``old`` is x, ``new`` g(x). A stiff damping force makes g contract by about
    h c / 2m (a PD hinge of gain kd: h kd / 2J), and from ½ on the plain iteration stalled and every step
    went in substeps (a linear damper past 1: it diverged). Once the change shrinks by less than
    :data:`MIX_ABOVE` (or grows) the next iterate is g(x) − γ (g(x) − g(x_prev)), γ minimising the mixed
    residual r − γ (r − r_prev) (r = g(x) − x): exact at once for a linear damping of one rate, and a secant
    step for the rest. ``gprev``, ``rprev`` keep g and r of the last iterate. Mixed, the change must halve
    from the third mixed iterate on, else STALLED (the step then goes in substeps, as before).

    ``mixing`` starts at 0, or at −1 for a stage that steps backward in time (h < 0, the middle stage of a
    triple jump): there a damping's fixed point is 1 − h c/2m ≈ 0 away from singular, an anti-damped solution
    that mixing would find and substeps avoid, so it is never mixed (:func:`settle`'s rule alone).

    Returns (outcome, the change max |g(x) − x|, ``mixing``: 0 while plain, else the mixed iterates + 1). The
    NumPy path runs the same code as Python (``settle_mixed.py_func``; the two tests it calls run so too).
    """
    delta = 0.0
    big = 0.0
    for i in range(len(new)):
        delta = max(delta, abs(new[i] - old[i]))
        big = max(big, abs(new[i]))
    if delta <= 1e-13 * big + floor:
        for i in range(len(new)):
            old[i] = new[i]
        return SETTLED, delta, mixing
    if mixing == 0 and would_mix(it, delta, prev):
        mixing = 1
    if mixing <= 0:
        for i in range(len(new)):
            rprev[i] = new[i] - old[i]
            gprev[i] = new[i]
        for i in range(len(new)):
            old[i] = new[i]
        if stalls(it, delta, prev):  # settle's rule (reached unmixed only)
            return STALLED, delta, mixing
        return GOING, delta, mixing
    num = 0.0
    den = 0.0
    dxx = 0.0
    for i in range(len(new)):
        r = new[i] - old[i]
        dr = r - rprev[i]
        dx = (new[i] - gprev[i]) - dr  # x − x_prev
        num += r * dr
        den += dr * dr
        dxx += dx * dx
    # x's error is r/(1 − g′), g′ the secant slope: under a damping g′ = −h c/2m, so that a stiff one leaves x far
    # closer than its residual, whose round-off (1 + h c/2m) ε |x| the plain test above would wait for in vain
    if den > 0.0 and delta * min(1.0, math.sqrt(dxx / den)) <= 1e-13 * big + floor:
        for i in range(len(new)):
            old[i] = new[i]
        return SETTLED, delta, mixing
    if mixing >= 3 and delta > 0.5 * prev:
        for i in range(len(new)):
            old[i] = new[i]
        return STALLED, delta, mixing
    gamma = num / den if den > 0.0 else 0.0
    if not abs(gamma) < math.inf:
        gamma = 0.0
    for i in range(len(new)):
        r = new[i] - old[i]
        g = new[i]
        old[i] = g - gamma * (g - gprev[i])
        rprev[i] = r
        gprev[i] = g
    return GOING, delta, mixing + 1


#: the warm start rule of :mod:`mbvi.engine.extrapolation`, compiled (the NumPy path calls the same functions)
_extrapolated = jit(extrapolation.extrapolated)
_best_order = jit(extrapolation.best_order)


@jit
def _misses_at(now, p1, p2, p3, p4):
    """How far orders 0 … 3 through the steps before (p₁ newest) missed one multiplier ``now``."""
    return (
        abs(now - _extrapolated(0, p1, p2, p3, p4)),
        abs(now - _extrapolated(1, p1, p2, p3, p4)),
        abs(now - _extrapolated(2, p1, p2, p3, p4)),
        abs(now - _extrapolated(3, p1, p2, p3, p4)),
    )


@jit
def misses(now, p1, p2, p3, p4):
    """The misses of :func:`_misses_at` over all rows of ``now`` (max norm), through the rows p₁ … p₄ of the
    steps before, newest first, in one pass (an order without the history it needs gives a meaningless
    value, not used)."""
    e0 = e1 = e2 = e3 = 0.0
    for i in range(len(now)):
        d0, d1, d2, d3 = _misses_at(now[i], p1[i], p2[i], p3[i], p4[i])
        e0, e1, e2, e3 = max(e0, d0), max(e1, d1), max(e2, d2), max(e3, d3)
    return e0, e1, e2, e3


@jit
def predict_multipliers(lam, hist):
    """Warm start of the next SHAKE: lam ← the multipliers extrapolated from the last steps; hist shifted.

    ``lam`` (n,) holds the last step's multipliers (all zero: none, a cold
    start), ``hist`` (4, n) those of the four steps before, newest first (a
    NaN row: unknown). The multipliers of a smooth motion are a smooth
    function of time, so a polynomial through the last ones predicts the
    next: linear leaves SHAKE an O(h²) residual, cubic an O(h⁴) one, and a
    32-link rigid chain takes two constrained drifts a step instead of 2.75 (the compiled Lie loop compares
    the orders by the impulses they apply: :func:`mbvi.engine.lieloop._warm_start`).
    The order (0 … 3) is the one that best predicted this step's multipliers
    from the steps before (max norm): a motion that is not smooth at the
    step's scale (a stiff spring's fast oscillation) falls back to a low
    order instead of amplifying its wiggles. Linear while the history is
    too short to compare.
    """
    cold, known = history_known(lam, hist)
    e0 = e1 = e2 = e3 = 0.0
    if known >= 2:
        e0, e1, e2, e3 = misses(lam, hist[0], hist[1], hist[2], hist[3])
    advance_warm_start(lam, hist, _best_order(known, e0, e1, e2, e3), cold)


@jit
def history_known(lam, hist):
    """(cold, known): whether ``lam`` is all zero (a cold start), and how many rows of ``hist`` are known."""
    n = len(lam)
    cold = True
    for i in range(n):
        if lam[i] != 0.0:
            cold = False
            break
    known = 0
    if not cold:
        while known < 4 and n > 0 and hist[known, 0] == hist[known, 0]:
            known += 1
    return cold, known


@jit
def advance_warm_start(lam, hist, order, cold):
    """lam ← its extrapolation of ``order`` through ``hist``, and lam pushed onto ``hist`` (which a cold start
    forgets)."""
    for i in range(len(lam)):
        now = lam[i]
        lam[i] = _extrapolated(order, now, hist[0, i], hist[1, i], hist[2, i])
        hist[3, i] = math.nan if cold else hist[2, i]
        hist[2, i] = math.nan if cold else hist[1, i]
        hist[1, i] = math.nan if cold else hist[0, i]
        hist[0, i] = math.nan if cold else now


@jit
def extrapolate_warm_start(I, scheme, lam):
    """Before a step of ``scheme``: SHAKE's warm start lam[0] extrapolated from lam[2:6]
    (:func:`predict_multipliers`).

    For the schemes of one drift a step (``verlet``, ``symplectic_euler_a``/``_b``) without
    velocity-dependent forces (whose drift is a cold-started fixed point); a ``lam`` of fewer than
    ``WARM_ROWS`` rows has no history and runs without the extrapolation.
    """
    if extrapolates(I, scheme, lam):
        predict_multipliers(lam[0], lam[WARM_HISTORY:WARM_ROWS])


@jit
def extrapolates(I, scheme, lam):
    """Whether a step of ``scheme`` starts SHAKE from extrapolated multipliers (:func:`extrapolate_warm_start`):
    one RATTLE stage, no velocity-dependent force, a ``lam`` with the history rows."""
    return scheme.shape[0] == 1 and scheme[0, SC.KIND] == SC.RATTLE and not I[M.HAS_VF] and lam.shape[0] >= WARM_ROWS


@jit
def copy_into(dst, src):
    """dst[:] = src for arrays of equal length (no overlap check, hence no temporary)."""
    for i in range(len(dst)):
        dst[i] = src[i]


@jit
def matvec(I, gd, x, out):
    """out = G x (row by row in a register when ``GSORTED``: the same sums in the same order)."""
    nnz = I[M.NNZ]
    pcol = ints(I, M.PCOL, nnz)
    if I[M.GSORTED]:
        n = I[M.N]
        rp = ints(I, M.GROWPTR, n + 1)
        for r in range(n):
            acc = 0.0
            for i in range(U(rp[r]), U(rp[r + 1])):
                acc += gd[i] * x[U(pcol[i])]
            out[r] = acc
        return
    out[:] = 0.0
    prow = ints(I, M.PROW, nnz)
    for i in range(nnz):
        out[U(prow[i])] += gd[i] * x[U(pcol[i])]


@jit
def wgt(I, F, gd, y, out):
    """out = M⁻¹ Gᵀ y, column by column, each column's terms summed in a register in G's pattern order
    (``GCOLPTR``, ``GCOLENT``, ``GCOLROW``): the sums of the entry-by-entry form bit for bit, without its
    store-to-load round trip on every entry of a column."""
    nnz, nq = I[M.NNZ], I[M.NQ]
    cp, ent, row = ints(I, M.GCOLPTR, nq + 1), ints(I, M.GCOLENT, nnz), ints(I, M.GCOLROW, nnz)
    wi = floats(I, F, M.W, nq)
    for c in range(nq):
        acc = 0.0
        w = wi[c]
        for a in range(U(cp[c]), U(cp[c + 1])):
            acc += w * gd[U(ent[a])] * y[U(row[a])]
        out[c] = acc


# ----------------------------------------------------------------- A = G W Gᵀ, profile (skyline) Cholesky
# Row i of the lower factor L is stored densely from its first nonzero column f_i to the diagonal:
# L[i, j] is ab[R_i − f_i + j] (R_i = I[I[ROWSTART] + i]). Cholesky creates no fill outside this
# envelope, and a Cuthill–McKee ordering keeps it narrow: a chain's envelope is its band, a chain of
# rigid bodies' is about a third of its band. The diagonal holds 1/L_ii. The model also lists the
# envelope by columns (COLPTR, COLROWS, COLPOS: the rows k > j with f_k ≤ j and where L[k, j] is).
@jit
def _cholesky_profile(I, ab):
    """In-place Cholesky in profile storage; False when A is not positive definite.

    Right-looking: column j is scaled, then its outer product is subtracted from
    the envelope to its right. Each entry still receives its terms in ascending
    j, as in the row-by-row (dot product) form, so the factor is the same bit for
    bit; but the updates of one column are independent of one another, where the
    row-by-row form waits on each entry's dot product before the next (the
    latency chain that made the factor of a 32-link rigid chain take 4.5 µs, 3.0 now).
    """
    n = I[M.N]
    first, rowstart = ints(I, M.FIRST, n), ints(I, M.ROWSTART, n)
    colptr, colrows, colpos = (
        ints(I, M.COLPTR, n + 1),
        ints(I, M.COLROWS, I[M.SIZE_L] - n),
        ints(I, M.COLPOS, I[M.SIZE_L] - n),
    )
    for j in range(n):
        dj = rowstart[j] - first[j] + j
        d = ab[U(dj)]
        if not d > 0.0 or not d < math.inf:
            return False
        inv = 1.0 / math.sqrt(d)
        ab[U(dj)] = inv
        c0, c1 = colptr[j], colptr[j + 1]
        for a in range(c0, c1):
            pk = colpos[U(a)]
            x = ab[U(pk)] * inv  # L[k, j]
            ab[U(pk)] = x
            rk = pk - j  # ab[rk + l] is L[k, l]
            for b in range(c0, a):  # rows l of column j above k: L[k, l] −= L[k, j] L[l, j]
                ab[U(rk + colrows[U(b)])] -= x * ab[U(colpos[U(b)])]
            ab[U(rk + colrows[U(a)])] -= x * x  # the diagonal L[k, k]
    return True


@jit
def _assemble(I, F, gd, ab):
    """Values of A = G M⁻¹ Gᵀ into the profile storage ``ab``."""
    npair, size = I[M.NPAIR], I[M.SIZE_L]
    pa, pb, aw, ts = ints(I, M.PA, npair), ints(I, M.PB, npair), floats(I, F, M.AW, npair), ints(I, M.TSTART, size + 1)
    for t in range(size):  # the pairs of entry t, summed in a register (no store-to-load chain)
        s = 0.0
        for i in range(ts[t], ts[t + 1]):
            s += gd[U(pa[U(i)])] * gd[U(pb[U(i)])] * aw[U(i)]
        ab[t] = s


@jit
def factor(I, F, gd, ab):
    """Factor A(G) = G M⁻¹ Gᵀ into ``ab``: OK, or SHIFTED when A is singular, or FAILED.

    A singular A (constraint rows that became dependent at this configuration)
    is factored as A + εI, ε = 1e-12 max diag(A): its solves give the
    least-squares multipliers of the consistent rows up to a relative 1e-12.
    """
    n = I[M.N]
    if n == 0:
        return OK
    _assemble(I, F, gd, ab)
    if _cholesky_profile(I, ab):
        return OK
    _assemble(I, F, gd, ab)
    first, rowstart = ints(I, M.FIRST, n), ints(I, M.ROWSTART, n)
    big = 0.0
    for i in range(n):
        big = max(big, abs(ab[rowstart[i] - first[i] + i]))
    shift = 1e-12 * big if big > 0.0 else 1e-300
    for i in range(n):
        ab[rowstart[i] - first[i] + i] += shift
    if _cholesky_profile(I, ab):
        return SHIFTED
    return FAILED


@jit
def solve(I, ab, rhs, out, tmp):
    """out = A⁻¹ rhs with the factorization from :func:`factor`.

    Each substitution runs along a chain: an unknown waits on the one before it. That newest unknown is
    carried in a register, not read back from ``tmp`` right after it is stored (a store-to-load round trip
    on the chain, which cost a 32-link rigid chain's solve a third of its time). The same terms in the same
    order: the same result bit for bit.
    """
    n = I[M.N]
    perm, first, rowstart = ints(I, M.PERM, n), ints(I, M.FIRST, n), ints(I, M.ROWSTART, n)
    last = 0.0  # L y = P rhs, row by row; ``last`` is y[i − 1]
    for i in range(n):
        fi = first[i]
        ri = rowstart[i] - fi
        s = rhs[U(perm[i])]
        if fi < i:
            for k in range(fi, i - 1):
                s -= ab[U(ri + k)] * tmp[U(k)]
            s -= ab[U(ri + i - 1)] * last
        last = s * ab[U(ri + i)]
        tmp[i] = last
    # Lᵀ x = y, column by column; ``nxt`` is tmp[i] with the columns to its right subtracted
    nxt = tmp[U(n - 1)] if n else 0.0
    for i in range(n - 1, -1, -1):
        fi = first[U(i)]
        ri = rowstart[U(i)] - fi
        x = nxt * ab[U(ri + i)]
        tmp[U(i)] = x
        if fi < i:
            for k in range(fi, i - 1):
                tmp[U(k)] -= ab[U(ri + k)] * x
            nxt = tmp[U(i - 1)] - ab[U(ri + i - 1)] * x
        elif i > 0:
            nxt = tmp[U(i - 1)]
    for i in range(n):
        out[U(perm[i])] = tmp[i]


@intrinsic
def opaque(typingctx, x):
    """``x`` typed as a plain bool or int, not as a literal.

    numba compiles a function once more for every literal argument it is called with
    (``Literal[bool](True)``, ``Literal[int](0)``): a call with the constant ``True`` and one with ``False``
    compile two copies of the callee, and of everything it calls. Call sites pass constants through this to
    compile one.
    """
    ty = nt.unliteral(x)

    def codegen(context, builder, signature, args):
        return args[0]

    return ty(x), codegen


# ---------------------------------------------------------------------------- kernels of the contract
@intrinsic
def _call_address(typingctx, addr, q, v, t, ints, floats, out):
    """Call the kernel at ``addr`` (:data:`mbvi.engine.callbacks.SIGNATURE`) on the arrays' data; its status."""
    sig = nt.int32(addr, q, v, t, ints, floats, out)

    def codegen(context, builder, signature, args):
        i64, f64 = ir.IntType(64), ir.DoubleType()
        fnty = ir.FunctionType(ir.IntType(32), [f64.as_pointer(), f64.as_pointer(), i64, f64, i64.as_pointer(), i64,
                                                 f64.as_pointer(), i64, f64.as_pointer(), i64])  # fmt: skip
        fptr = builder.inttoptr(args[0], fnty.as_pointer())

        def data(k):
            a = context.make_array(signature.args[k])(context, builder, args[k])
            return a.data, a.nitems

        (qd, nq), (vd, _), (idata, ni), (fdata, nf), (od, no) = data(1), data(2), data(4), data(5), data(6)
        return builder.call(fptr, [qd, vd, nq, args[3], idata, ni, fdata, nf, od, no])

    return sig, codegen


@jit
def call_kernels(I, F, role, q, v, t, out):
    """Add the contribution of every kernel of ``role`` (:data:`mbvi.engine.contract.ROLES`) into ``out``.

    Each is called through its address with its own parameters (``M.KIO``/``M.KIN`` in I, ``M.KFO``/``M.KFN``
    in F). A kernel's failure shows as NaN in ``out`` (the step then fails); the caller learns which from the
    kernels themselves.
    """
    nk = I[M.KN]
    if nk == 0:
        return
    addr, kr = ints(I, M.KADDR, nk), ints(I, M.KROLE, nk)
    kio, kin, kfo, kfn = ints(I, M.KIO, nk), ints(I, M.KIN, nk), ints(I, M.KFO, nk), ints(I, M.KFN, nk)
    for k in range(nk):
        if kr[k] == role:
            _call_address(addr[k], q, v, t, I[kio[k] : kio[k] + kin[k]], F[kfo[k] : kfo[k] + kfn[k]], out)


# ----------------------------------------------------------------------------------- force families
@jit
def _point(I, F, base, i, q, constant):
    """Affine map ``base`` (slots _I, _W, _C, _M, _K) of instance i at q (``constant``=False: linear part)."""
    K = I[base + 4]
    io, wo = I[base] + i * K, I[base + 1] + i * K
    if constant:
        co = I[base + 2] + 3 * i
        x0, x1, x2 = F[co], F[co + 1], F[co + 2]
    else:
        x0 = x1 = x2 = 0.0
    for k in range(K):
        wt = F[wo + k]
        if wt != 0.0:
            j = I[io + k]
            x0 += wt * q[j]
            x1 += wt * q[j + 1]
            x2 += wt * q[j + 2]
    return x0, x1, x2


@jit
def _scatter(I, F, base, i, f0, f1, f2, out):
    """out += (∂P_i/∂q)ᵀ f for affine map ``base``."""
    K = I[base + 4]
    io, wo = I[base] + i * K, I[base + 1] + i * K
    for k in range(K):
        wt = F[wo + k]
        if wt != 0.0:
            j = I[io + k]
            out[j] += wt * f0
            out[j + 1] += wt * f1
            out[j + 2] += wt * f2


@jit
def _omega(I, cols, i, q, v):
    """½ Σ_c r_c × ṙ_c for the rotation columns at I[cols + 9 i …]."""
    o0 = o1 = o2 = 0.0
    for c in range(3):
        a = I[cols + 9 * i + 3 * c]
        r0, r1, r2 = q[a], q[a + 1], q[a + 2]
        d0, d1, d2 = v[a], v[a + 1], v[a + 2]
        o0 += 0.5 * (r1 * d2 - r2 * d1)
        o1 += 0.5 * (r2 * d0 - r0 * d2)
        o2 += 0.5 * (r0 * d1 - r1 * d0)
    return o0, o1, o2


@njit(inline="always")
def _spin_solve(I, cols, i, q, x0, x1, x2):
    """S⁻¹ x for the rotation columns at I[cols + 9 i …] (:func:`mbvi.engine.spin.spin_solve`)."""
    o = cols + 9 * i
    return spin_solve(q, I[o], I[o + 3], I[o + 6], x0, x1, x2)


@jit
def _torque_on_columns(I, cols, i, t0, t1, t2, scale, q, out):
    """Generalized force ½ (S⁻¹ τ) × r_c on each rotation column (:func:`_spin_solve`), times ``scale``: the
    torque τ exactly, on the rotation group and off it."""
    t0, t1, t2 = _spin_solve(I, cols, i, q, t0, t1, t2)
    for c in range(3):
        a = I[cols + 9 * i + 3 * c]
        r0, r1, r2 = q[a], q[a + 1], q[a + 2]
        out[a] += 0.5 * scale * (t1 * r2 - t2 * r1)
        out[a + 1] += 0.5 * scale * (t2 * r0 - t0 * r2)
        out[a + 2] += 0.5 * scale * (t0 * r1 - t1 * r0)


@jit
def gradient(I, F, q, t, out):
    """∇U(q) into ``out`` (nq,): gravity, the other conservative families, then the gradient kernels.

    ``t`` (s) is the time of the stage that evaluates it: no gradient reads it, but a gradient called back as
    Python that raises records it, and the run's error names the step it was met in (it was always 0)."""
    gv = I[M.GVEC]
    for i in range(I[M.NQ]):
        out[i] = -F[gv + i]
    gradient_families(I, F, q, out)
    call_kernels(I, F, opaque(CT.GRADIENT), q, q, t, out)


@jit
def gradient_families(I, F, q, out):
    """Adds ∇U(q) of the springs, torsion springs and bending (every conservative family but gravity) to ``out``.

    (:func:`gradient` adds the gradient kernels after them.)
    """
    stiff, rest = I[M.SP_STIFF], I[M.SP_REST]
    for i in range(I[M.SP_I + 3]):
        d0, d1, d2 = _point(I, F, M.SP_I, i, q, True)
        r = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        coef = F[stiff + i] * (r - F[rest + i]) / r if r > 0.0 else 0.0
        _scatter(I, F, M.SP_I, i, coef * d0, coef * d1, coef * d2, out)
    stiff, rest = I[M.TS_STIFF], I[M.TS_REST]
    for i in range(I[M.T1_I + 3]):
        a0, a1, a2 = _point(I, F, M.T1_I, i, q, True)
        b0, b1, b2 = _point(I, F, M.T2_I, i, q, True)
        w0, w1, w2 = _point(I, F, M.TW_I, i, q, True)
        s = b0 * w0 + b1 * w1 + b2 * w2
        c = a0 * w0 + a1 * w1 + a2 * w2
        dev = (math.atan2(s, c) - F[rest + i] + math.pi) % (2.0 * math.pi) - math.pi
        coef = F[stiff + i] * dev / (s * s + c * c)
        ca, cb = coef * c, coef * s
        _scatter(I, F, M.T2_I, i, ca * w0, ca * w1, ca * w2, out)
        _scatter(I, F, M.T1_I, i, -cb * w0, -cb * w1, -cb * w2, out)
        _scatter(I, F, M.TW_I, i, ca * b0 - cb * a0, ca * b1 - cb * a1, ca * b2 - cb * a2, out)
    kappa = I[M.BE_KAPPA]
    for i in range(I[M.BA_I + 3]):  # bending: U = κ (1 − êₐ·ê_b)
        a0, a1, a2 = _point(I, F, M.BA_I, i, q, True)
        b0, b1, b2 = _point(I, F, M.BB_I, i, q, True)
        la = math.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
        lb = math.sqrt(b0 * b0 + b1 * b1 + b2 * b2)
        a0, a1, a2 = a0 / la, a1 / la, a2 / la
        b0, b1, b2 = b0 / lb, b1 / lb, b2 / lb
        c = a0 * b0 + a1 * b1 + a2 * b2
        ka, kb = -F[kappa + i] / la, -F[kappa + i] / lb
        _scatter(I, F, M.BA_I, i, ka * (b0 - c * a0), ka * (b1 - c * a1), ka * (b2 - c * a2), out)
        _scatter(I, F, M.BB_I, i, kb * (a0 - c * b0), kb * (a1 - c * b1), kb * (a2 - c * b2), out)


@jit
def nonconservative_force(I, F, q, v, t, out):
    """F(q, v, t) into ``out`` (nq,): the non-conservative families, then the force kernels (at time t, s)."""
    out[:] = 0.0
    if not I[M.HAS_F]:
        return
    coef = I[M.DP_COEF]
    for i in range(I[M.DP_I + 3]):
        d0, d1, d2 = _point(I, F, M.DP_I, i, q, True)
        r = max(math.sqrt(d0 * d0 + d1 * d1 + d2 * d2), 1e-300)
        n0, n1, n2 = d0 / r, d1 / r, d2 / r
        e0, e1, e2 = _point(I, F, M.DP_I, i, v, False)
        f = -F[coef + i] * (n0 * e0 + n1 * e1 + n2 * e2)
        _scatter(I, F, M.DP_I, i, f * n0, f * n1, f * n2, out)
    coef = I[M.DR_COEF]
    for i in range(I[M.DR_I + 3]):
        e0, e1, e2 = _point(I, F, M.DR_I, i, v, False)
        c = -F[coef + i]
        _scatter(I, F, M.DR_I, i, c * e0, c * e1, c * e2, out)
    fo = I[M.PF_FORCE]
    for i in range(I[M.PF_I + 3]):
        _scatter(I, F, M.PF_I, i, F[fo + 3 * i], F[fo + 3 * i + 1], F[fo + 3 * i + 2], out)
    to = I[M.TQ_TAU]
    for i in range(I[M.TQ_M]):
        _torque_on_columns(I, I[M.TQ_COLS], i, F[to + 3 * i], F[to + 3 * i + 1], F[to + 3 * i + 2], 1.0, q, out)
    coef, ra, rb, ca, cb = I[M.HD_COEF], I[M.HD_RA], I[M.HD_RB], I[M.HD_CA], I[M.HD_CB]
    for i in range(I[M.HD_I + 3]):
        n0, n1, n2 = _point(I, F, M.HD_I, i, q, True)
        a0 = a1 = a2 = b0 = b1 = b2 = 0.0
        if F[ra + i] != 0.0:  # each body's rate S⁻¹ ½ Σ r_c × ṙ_c: θ̇ blind to a rigid spin of the pair
            w0, w1, w2 = _omega(I, ca, i, q, v)
            a0, a1, a2 = _spin_solve(I, ca, i, q, w0, w1, w2)
        if F[rb + i] != 0.0:
            w0, w1, w2 = _omega(I, cb, i, q, v)
            b0, b1, b2 = _spin_solve(I, cb, i, q, w0, w1, w2)
        f = -F[coef + i] * (n0 * (b0 - a0) + n1 * (b1 - a1) + n2 * (b2 - a2))
        if F[rb + i] != 0.0:
            _torque_on_columns(I, cb, i, f * n0, f * n1, f * n2, 1.0, q, out)
        if F[ra + i] != 0.0:
            _torque_on_columns(I, ca, i, f * n0, f * n1, f * n2, -1.0, q, out)
    coef = I[M.SD_COEF]
    for i in range(I[M.SN_I + 3]):
        n0, n1, n2 = _point(I, F, M.SN_I, i, q, True)
        e0, e1, e2 = _point(I, F, M.SD_I, i, v, False)
        f = -F[coef + i] * (n0 * e0 + n1 * e1 + n2 * e2)
        _scatter(I, F, M.SD_I, i, f * n0, f * n1, f * n2, out)
        if F[I[M.SD_RC] + i] != 0.0:  # the couple d × f the pair makes off the joint's line, cancelled on a body
            d0, d1, d2 = _point(I, F, M.SD_I, i, q, True)
            _torque_on_columns(I, I[M.SD_CC], i, -f * (d1 * n2 - d2 * n1), -f * (d2 * n0 - d0 * n2),
                               -f * (d0 * n1 - d1 * n0), 1.0, q, out)  # fmt: skip
    call_kernels(I, F, opaque(CT.FORCE), q, v, t, out)
