"""Python side of a compiled run: allocate outputs, call the loop, turn a status into an answer.

A run is one call of :func:`mbvi.engine.loop.run` (or a few, when a progress
bar asks for chunks). Two rare events leave the compiled loop: a solve too
large for its dense fallbacks (the NumPy step, with sparse LU, takes it — and
the next 1, 2, 4, … 1024 steps while the compiled step keeps handing them
back; the loop resumes after them), and a failure, which becomes a
:class:`mbvi.SolverError` with the partial trajectory.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import numba
import numpy as np

from mbvi.engine import lieloop as LIE
from mbvi.engine import lockstep, loop
from mbvi.engine.fields import LT, ST, WARM_ROWS, M
from mbvi.errors import RedundantConstraintWarning, SolverError
from mbvi.state import State

__all__ = ["integrate", "integrate_batch"]

CHUNK = 2000  # steps per call when a progress callback wants updates


def _nsave(nsteps: int, save_every: int) -> int:
    return nsteps // save_every + 1 + (nsteps % save_every != 0)


def _method(integrator) -> int:
    """The compiled loop's code for a built-in integrator."""
    return loop.METHODS.get(integrator.name, loop.IMPLICIT.get(integrator.name))


def _failure(integrator, status: int, q: np.ndarray, v: np.ndarray, t: float, k: int, lie: bool) -> SolverError:
    """The SolverError for a failed compiled step, diagnosed like the NumPy path does.

    ``lie``: the system's rigid bodies step on their Lie group, whose failing
    step was already retried in up to :data:`mbvi.engine.lieloop.MAX_REFINE` substeps.
    """
    from mbvi.integrators.rattle import DRIFT_FAILED, _diagnose

    system, h = integrator.system, integrator.dt
    if status == ST.NONFINITE:
        return integrator._instability(t, k)
    if status == ST.DRIFT_FAILED:
        return SolverError(DRIFT_FAILED, time=t, step=k, suggested_dt=h / 4)
    with np.errstate(all="ignore"):
        culprit, hint = _diagnose(system, q, v, h, system.active_constraints(q + h * v), lie)
    what = "SHAKE (constrained drift) did not converge"
    if lie:
        what += f", even split into {LIE.MAX_REFINE} substeps"
    return SolverError(what, time=t, step=k, culprit=culprit, suggested_dt=hint)


def integrate(
    integrator, model, state: State, t0: float, nsteps: int, save_every: int = 1, callback: Callable | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run ``integrator`` (a built-in of :data:`mbvi.engine.loop.METHODS` or ``IMPLICIT``) through the compiled loop.

    Returns (t, q, v) like :meth:`mbvi.Integrator.integrate`; the work of the
    non-conservative forces at each saved state is left on
    ``integrator.work`` (J). Raises :class:`mbvi.SolverError` with ``partial``.
    """
    system, h = integrator.system, integrator.dt
    method = _method(integrator)
    nsave = _nsave(nsteps, save_every)
    Q = np.empty((nsave, system.nq))
    V = np.empty((nsave, system.nq))
    Wk = np.zeros(nsave + 1)  # the last entry: the work so far (in and out of every compiled call)
    q = np.array(state.q, dtype=float)
    v = np.array(state.v, dtype=float)
    Q[0], V[0] = q, v
    n = int(model[0][M.N])
    lam = getattr(integrator, "_engine_lam", None)
    if lam is None or lam.shape != (WARM_ROWS, n):  # warm starts of the compiled SHAKE (see ShakeRattle._lam)
        lam = integrator._engine_lam = np.zeros((WARM_ROWS, n))
    elif not np.array_equal(q, getattr(integrator, "_engine_end", None)):
        lam[...] = 0.0  # they are those of the state the last run ended at: a run from another starts cold
    integrator._engine_end = None  # until this run ends well
    info = np.zeros(6, dtype=np.int64)
    k, j = 0, 1
    burst = 1  # NumPy steps after a fallback: doubles while the compiled step keeps handing steps back
    integrator.numpy_steps = 0
    max_turn = getattr(integrator, "max_turn", math.inf)
    args = (integrator.tol, integrator.maxiter, float(system.length_scale), max_turn, lam)
    while k < nsteps:
        stop = nsteps if callback is None else min(nsteps, k + CHUNK)
        loop.run(*model, method, q, v, float(t0), h, k, stop, nsteps, save_every, *args, Q, V, Wk, j, info)
        kstart, (status, k, j) = k, (int(info[0]), int(info[1]), int(info[2]))
        if status == ST.NEEDS_NUMPY:
            burst = min(2 * burst, 1024) if k == kstart else 1
            integrator._cache = {"q": None}
            for _ in range(min(burst, stop - k)):
                t = t0 + k * h
                try:
                    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # judged just below
                        state = integrator._step(State(q.copy(), v.copy()), t)
                except SolverError as exc:
                    err = exc.located(t, k)
                    err.partial = (t0 + _saved_steps(j, nsteps, save_every) * h, Q[:j], V[:j])
                    raise err from exc
                if not (np.isfinite(state.q).all() and np.isfinite(state.v).all()):
                    err = integrator._instability(t, k)
                    err.partial = (t0 + _saved_steps(j, nsteps, save_every) * h, Q[:j], V[:j])
                    raise err
                if system.has_forces:
                    Wk[-1] += _step_work(integrator, q, v, state, t)
                q, v = state.q.copy(), state.v.copy()
                k += 1
                integrator.numpy_steps += 1
                if k % save_every == 0 or k == nsteps:
                    Q[j], V[j], Wk[j] = q, v, Wk[-1]
                    j += 1
            lam[...] = 0.0  # the compiled warm starts are those of steps before the burst: start cold
        elif status != ST.DONE:
            err = _failure(integrator, status, q, v, t0 + k * h, k, bool(model[4][LT.NB]))
            err.partial = (t0 + _saved_steps(j, nsteps, save_every) * h, Q[:j], V[:j])
            raise err
        if callback is not None:
            callback(k)
    if info[3]:
        warnings.warn(
            "the constraint matrix G M⁻¹ Gᵀ was singular on some steps (dependent constraints); it was "
            "factored with a 1e-12 relative regularization (least-squares multipliers)",
            RedundantConstraintWarning,
            stacklevel=4,
        )
    integrator.work = Wk[:j]
    integrator.refined_steps = int(info[5])
    integrator._engine_end = q.copy()  # where the warm starts in lam belong (a run from here continues them)
    return t0 + _saved_steps(j, nsteps, save_every) * h, Q[:j], V[:j]


def _step_work(integrator, q0: np.ndarray, v0: np.ndarray, state: State, t: float) -> float:
    """Work of the non-conservative forces over a step the NumPy path took, J.

    The implicit pair's own discrete work (F at the point its equations
    evaluate it, times q₁ − q₀), as the compiled step counts it; for the
    RATTLE family the trapezoidal rule, which its kicks' work matches to O(h³).
    """
    system, h = integrator.system, integrator.dt
    dq = state.q - q0
    if integrator.name == "midpoint":
        return float(system.force(q0 + 0.5 * dq, dq / h, t + 0.5 * h) @ dq)
    if integrator.name == "implicit_euler":
        return float(system.force(state.q, dq / h, t + h) @ dq)
    return 0.5 * float((system.force(q0, v0, t) + system.force(state.q, state.v, t + h)) @ dq)


def _saved_steps(count: int, nsteps: int, save_every: int) -> np.ndarray:
    """Step indices of the first ``count`` saved states."""
    k = np.minimum(np.arange(count) * save_every, nsteps)
    return k.astype(float)


def threads() -> int:
    """Threads a batch runs on: numba's (``numba.set_num_threads``, ``NUMBA_NUM_THREADS``; by default one per core)."""
    return max(1, int(numba.get_num_threads()))


def _chunk(B: int) -> int:
    """Members per lockstep chunk: up to :data:`mbvi.engine.lockstep.CHUNK`, at least two chunks per thread."""
    return min(lockstep.CHUNK, max(1, -(-B // (2 * threads()))))


def integrate_batch(
    integrator, model, Q0: np.ndarray, V0: np.ndarray, t0: float, nsteps: int, save_every: int,
    chunk: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Every member of (Q0, V0) through the same compiled run, in parallel.

    ``chunk``: members stepped in lockstep (:mod:`mbvi.engine.lockstep`); by default up to
    :data:`mbvi.engine.lockstep.CHUNK`, at least two chunks per thread; 0: member by member.
    It changes the speed, not the result.

    Returns
    -------
    t : ndarray, (nsave,)
    Q, V : ndarray, (B, nsave, nq)
    work : ndarray, (B, nsave)
    info : ndarray of int, (B, 6)
        Per member: status, step reached, states saved, pseudo-inverse and Newton uses.
    """
    system, h = integrator.system, integrator.dt
    B = len(Q0)
    nsave = _nsave(nsteps, save_every)
    Q0, V0 = np.ascontiguousarray(Q0, float), np.ascontiguousarray(V0, float)
    Q = np.zeros((B, nsave, system.nq))
    V = np.zeros((B, nsave, system.nq))
    Q[:, 0], V[:, 0] = Q0, V0
    Wk = np.zeros((B, nsave + 1))
    info = np.zeros((B, 6), dtype=np.int64)
    method = _method(integrator)
    chunk = _chunk(B) if chunk is None else int(chunk)
    together = chunk >= 1 and lockstep.eligible(int(model[4][LT.NB]), method)
    size = chunk if together else 1
    units = -(-B // size)
    max_turn = getattr(integrator, "max_turn", math.inf)
    args = (*model, method, Q0, V0, float(t0), h, nsteps, save_every, integrator.tol, integrator.maxiter,
            float(system.length_scale), max_turn, Q, V, Wk, info, size, together)  # fmt: skip
    # the compiled loop releases the GIL: threads take blocks of units (a few per thread, for balance)
    nthreads = min(threads(), units)
    if nthreads == 1:
        loop.run_batch(*args, 0, units)
    elif nthreads > 1:
        blocks = np.linspace(0, units, min(units, 4 * nthreads) + 1).astype(int)
        with ThreadPoolExecutor(nthreads) as pool:
            for f in [pool.submit(loop.run_batch, *args, int(a), int(b)) for a, b in pairwise(blocks)]:
                f.result()
    return t0 + _saved_steps(nsave, nsteps, save_every) * h, Q, V, Wk[:, :nsave], info
