"""Runs of integrator plugins that supply a compiled step (:attr:`mbvi.Integrator.kernel`).

The plugin's ``kernel(model, ws, q, v, t, h, params)`` is wrapped once into a C
function (:func:`mbvi.engine.callbacks.compiled_step`, cached on disk) and the
whole run is one call of :func:`mbvi.engine.steps.run_steps`, the engine's loop
for every such plugin. A kernel numba cannot compile is reported once and the
plugin's NumPy ``step`` runs instead, as before.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mbvi.diagnosis import diagnose, instability, kernel_failure
from mbvi.engine.fields import RF, RI, RK, ST, WK, M
from mbvi.engine.runner import RunResult, nsave, saved_states, saved_steps, threads
from mbvi.errors import SolverError
from mbvi.state import State

__all__ = ["run_kernel", "run_kernel_batch", "step_address"]

log = logging.getLogger("mbvi")
#: steps per compiled call when a progress callback wants updates
CHUNK = 2000
_failed: set = set()


def step_address(cls: type) -> tuple[int, object] | None:
    """The address of ``cls.kernel``'s C wrapper (compiled once), or None when numba cannot compile it (logged)."""
    from mbvi.engine import callbacks

    try:
        cf = callbacks.compiled_step(cls.kernel)
    except Exception as exc:  # numba's errors: the NumPy step runs
        if callbacks.interrupted(exc):  # (a deadline, a MemoryError: the caller's, not numba's)
            raise
        if cls not in _failed:
            _failed.add(cls)
            log.warning("integrator %r: its compiled step does not compile with numba (%s); its NumPy step runs",
                        cls.name, callbacks.numba_reason(exc))  # fmt: skip
        return None
    return cf.address, cf


def _address_of(integrator) -> tuple[int, object] | None:
    """:func:`step_address` of the integrator's class, found once per integrator (a Simulator steps through it
    many times; hashing the step's code at every call cost 0.75 ms)."""
    if "_step_found" not in integrator.__dict__:
        integrator._step_found = step_address(type(integrator))
    return integrator._step_found


def _arrays(integrator, model) -> tuple:
    I, F = model.Iq, model.Fq
    nq = int(I[M.NQ])
    WI = I[I[M.WKOFF] : I[M.WKOFF] + WK.count].copy()
    WS = np.zeros(int(I[M.WS_SIZE]))
    scratch = np.zeros((max(int(integrator.scratch_rows), 0), nq))
    kparams = np.ascontiguousarray(integrator.kernel_params(), dtype=float).ravel()
    return (I, F), WI, WS, scratch, kparams


def _params(t0: float, h: float) -> np.ndarray:
    p = np.zeros(RF.count)
    p[RF.T0], p[RF.H] = t0, h
    return p


def _step_raised(integrator, arrays: tuple, q, v, t: float) -> Exception | None:
    """What the plugin's step raises when called again as Python from the failing step's start (its compiled
    wrapper cannot raise through C), or None."""
    (I, F), WI, WS, scratch, kparams = arrays
    step = getattr(type(integrator).kernel, "py_func", type(integrator).kernel)
    try:
        with np.errstate(all="ignore"):
            step((I.copy(), F.copy()), (WI.copy(), WS.copy(), scratch.copy()), np.array(q, dtype=float),
                 np.array(v, dtype=float), float(t), float(integrator.dt), kparams.copy())  # fmt: skip
    except Exception as exc:
        return exc
    return None


def _failure(integrator, model, status: int, q, v, t: float, k: int, arrays: tuple | None = None) -> SolverError:
    err = kernel_failure(model.callbacks, t, k, (q, v, integrator.dt))
    if err is not None:
        return err
    raised = _step_raised(integrator, arrays, q, v, t) if arrays is not None else None
    if raised is not None:
        return SolverError(f"integrator {integrator.name!r}: its compiled step raised {type(raised).__name__}: "
                           f"{raised}", time=t, step=k, culprit=integrator.name)  # fmt: skip
    if status == ST.NONFINITE:
        return instability(integrator.system, integrator.name, integrator.dt, t, k)
    culprit, hint = diagnose(integrator.system, q, v, integrator.dt, np.zeros(0))
    return SolverError(f"integrator {integrator.name!r}: its compiled step failed", time=t, step=k, culprit=culprit,
                       suggested_dt=hint)  # fmt: skip


def run_kernel(integrator, state: State, t0: float, nsteps: int, save_every: int = 1,
               callback: Callable[[int], None] | None = None) -> RunResult | None:  # fmt: skip
    """The run of ``integrator`` through its compiled step, or None when it cannot run compiled (NumPy then)."""
    model = integrator.system.engine_model()
    if model is None or model.q_model.arrays() is None:
        return None
    found = _address_of(integrator)
    if found is None:
        return None
    addr, _keep = found
    run_steps = importlib.import_module("mbvi.engine.steps").run_steps
    system, h = integrator.system, integrator.dt
    ns = nsave(nsteps, save_every)
    Q, V = saved_states((ns, system.nq)), saved_states((ns, system.nq))
    Wk = np.zeros(ns + 1)
    info = np.zeros(RI.count, dtype=np.int64)
    q, v = np.array(state.q, dtype=float), np.array(state.v, dtype=float)
    Q[0], V[0] = q, v
    mdl, WI, WS, scratch, kparams = _arrays(integrator, model)
    for cb in model.callbacks:
        cb.reset()
    steps = np.zeros(RK.count, dtype=np.int64)
    steps[RK.NSTEPS], steps[RK.SAVE_EVERY], steps[RK.FRESH] = nsteps, save_every, 1
    k, j = 0, 1
    while k < nsteps:
        steps[RK.K0], steps[RK.KSTOP], steps[RK.J0] = k, nsteps if callback is None else min(nsteps, k + CHUNK), j
        run_steps(addr, mdl, (q, v, WI, WS), scratch, kparams, steps, _params(float(t0), h), (Q, V, Wk, info))
        steps[RK.FRESH] = 0
        status, k, j = int(info[RI.STATUS]), int(info[RI.STEP]), int(info[RI.SAVED])
        if status != ST.DONE:
            err = _failure(integrator, model, status, q, v, t0 + k * h, k, (mdl, WI, WS, scratch, kparams))
            saved = RunResult(t0 + saved_steps(j, nsteps, save_every) * h, Q[:j], V[:j], Wk[:j].copy())
            # the failing step's start, off the grid (the work up to it: the last entry of Wk)
            err.partial = saved.ending_at(t0 + k * h, q.copy(), v.copy(), float(Wk[-1]))
            raise err
        if callback is not None:
            callback(k)
    return RunResult(t0 + saved_steps(j, nsteps, save_every) * h, Q[:j], V[:j], Wk[:j].copy())


def step_failure(integrator, status: int, q, v, t: float, k: int) -> SolverError:
    """The error of a batch member whose compiled step stopped with ``status`` at its k-th step, from (q, v) at
    time t: a load or the step itself named when they raised (called again as Python there), else why it failed,
    as :func:`run_kernel` says it for a run alone."""
    model = integrator.system.engine_model()
    return _failure(integrator, model, status, q, v, t, k, _arrays(integrator, model))


def run_kernel_batch(integrator, Q0: np.ndarray, V0: np.ndarray, t0: float, nsteps: int, save_every: int):
    """Every member of (Q0, V0) through the compiled step, member by member on every core; or None (NumPy).

    Returns ``(t, Q, V, W, info, ends)`` with Q, V (B, nsave, nq), the work W (B, nsave) and info (B, RI.count)
    as :func:`mbvi.engine.runner.run_batch`, and ``ends`` = (q, v (B, nq), work (B,)): where each member's run
    stopped (a failed one: its failing step's start, which :func:`member_failure` probes).
    """
    model = integrator.system.engine_model()
    found = _address_of(integrator) if model is not None and model.q_model.arrays() is not None else None
    if found is None:
        return None
    addr, _keep = found
    run_steps = importlib.import_module("mbvi.engine.steps").run_steps
    B, nq, h = len(Q0), integrator.system.nq, integrator.dt
    ns = nsave(nsteps, save_every)
    Q, V = saved_states((B, ns, nq), zero=True), saved_states((B, ns, nq), zero=True)
    Q[:, 0], V[:, 0] = Q0, V0
    info = np.zeros((B, RI.count), dtype=np.int64)
    Wk = np.zeros((B, ns + 1))
    ends = (np.array(Q0, dtype=float), np.array(V0, dtype=float), Wk[:, -1])

    def member(b: int) -> None:
        mdl, WI, WS, scratch, kparams = _arrays(integrator, model)
        q, v = ends[0][b], ends[1][b]  # stepped in place: left at the failing step's start
        steps = np.zeros(RK.count, dtype=np.int64)
        steps[RK.NSTEPS], steps[RK.SAVE_EVERY], steps[RK.FRESH] = nsteps, save_every, 1
        steps[RK.KSTOP], steps[RK.J0] = nsteps, 1
        run_steps(addr, mdl, (q, v, WI, WS), scratch, kparams, steps, _params(float(t0), h),
                  (Q[b], V[b], Wk[b], info[b]))  # fmt: skip

    with ThreadPoolExecutor(max(1, min(threads(), B))) as pool:  # the compiled loop releases the GIL
        for f in [pool.submit(member, b) for b in range(B)]:
            f.result()
    return t0 + saved_steps(ns, nsteps, save_every) * h, Q, V, Wk[:, :ns], info, ends
