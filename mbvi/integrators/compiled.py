"""Integrators whose steps are schemes of the compiled engine: a run is one compiled call.

A :class:`Compiled` integrator declares its method as data — a scheme
(:mod:`mbvi.engine.scheme`) — and :meth:`Compiled.run` hands the whole run to
the engine (:func:`mbvi.engine.runner.advance`). Two rare events leave the
compiled loop, and both are handled here: a solve too large for the engine's
dense fallbacks (the integrator's own NumPy step takes it — and the next
1, 2, 4, … 1024 steps while the engine keeps handing them back — and the loop
resumes after them), and a failure, which :mod:`mbvi.diagnosis` turns into a
:class:`mbvi.SolverError` keeping the partial run.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from mbvi.diagnosis import engine_failure, instability
from mbvi.engine import scheme as SC
from mbvi.engine.fields import RI, ST
from mbvi.engine.runner import RunResult, RunState, advance, entry, nsave, saved_steps
from mbvi.errors import RedundantConstraintWarning, SolverError
from mbvi.integrators.base import Integrator
from mbvi.state import State

__all__ = ["CHUNK", "Compiled", "step_work"]

#: steps per compiled call when a progress callback wants updates
CHUNK = 2000


class Compiled(Integrator):
    """An integrator that is a scheme of the compiled engine (abstract).

    Subclasses set :attr:`scheme` (or compute it, :meth:`method`) and keep a NumPy ``_step`` of the same
    method: it takes the steps the engine hands back, and runs systems the engine does not (a constraint
    matrix too wide for its profile solver).

    Attributes
    ----------
    tol : float
        Relative constraint tolerance (option ``tol``).
    maxiter : int
        Newton iterations per solve (option ``maxiter``).
    """

    compiled = True
    #: the method as data: (stages, 5) rows (kind, w, a0, a1, warm row), :mod:`mbvi.engine.scheme`
    scheme: ClassVar[np.ndarray | None] = None
    max_turn: float = math.inf

    @classmethod
    def method(cls) -> np.ndarray:
        """The scheme this class runs (its :attr:`scheme`)."""
        if cls.scheme is None:
            raise NotImplementedError(f"{cls.__qualname__} declares no scheme")
        return cls.scheme

    def engine_model(self):
        """The compiled model this integrator runs, or None when it runs on the NumPy path."""
        if not type(self).compiled:
            return None
        model = self.system.engine_model()
        if model is None or entry(model, self.method()) is None:
            return None
        return model

    def integrate(self, state, t0, nsteps, save_every=1, callback=None):
        out = self.run(state, t0, nsteps, save_every, callback)
        return out.t, out.q, out.v

    def run(
        self, state: State, t0: float, nsteps: int, save_every: int = 1, callback: Callable[[int], None] | None = None
    ) -> RunResult:
        model = self.engine_model()
        if model is None:
            t, q, v = Integrator.integrate(self, state, t0, nsteps, save_every, callback)
            return RunResult(t, q, v)
        return drive(self, model, state, t0, nsteps, save_every, callback)


def drive(integrator: Compiled, model, state: State, t0: float, nsteps: int, save_every: int = 1,
          callback: Callable[[int], None] | None = None) -> RunResult:  # fmt: skip
    """Run ``integrator``'s scheme on ``model`` from ``state`` (see the module docstring)."""
    system, h = integrator.system, integrator.dt
    scheme = integrator.method()
    ns = nsave(nsteps, save_every)
    Q, V = np.empty((ns, system.nq)), np.empty((ns, system.nq))
    Wk = np.zeros(ns + 1)  # the last entry: the work so far (in and out of every compiled call)
    info = np.zeros(RI.count, dtype=np.int64)
    rs = RunState(model, scheme, state.q, state.v)
    Q[0], V[0] = rs.q, rs.v
    for cb in model.callbacks:
        cb.reset()
    k, j = 0, 1
    burst = 1  # NumPy steps after a hand-back: doubles while the compiled step keeps handing steps back
    numpy_steps = 0
    options = dict(tol=integrator.tol, maxiter=integrator.maxiter, length_scale=float(system.length_scale),
                   max_turn=float(integrator.max_turn))  # fmt: skip

    def partial() -> RunResult:
        return RunResult(t0 + saved_steps(j, nsteps, save_every) * h, Q[:j], V[:j], Wk[:j].copy())

    while k < nsteps:
        stop = nsteps if callback is None else min(nsteps, k + CHUNK)
        kstart = k
        out = advance(model, scheme, rs, t0=float(t0), h=h, k0=k, kstop=stop, nsteps=nsteps, save_every=save_every,
                      out=(Q, V, Wk, info), j0=j, **options)  # fmt: skip
        k, j = out.step, out.saved
        if out.status == ST.NEEDS_NUMPY:
            burst = min(2 * burst, 1024) if k == kstart else 1
            integrator._cache = {"q": None}
            q, v, work = rs.q.copy(), rs.v.copy(), rs.work
            for _ in range(min(burst, stop - k)):
                t = t0 + k * h
                try:
                    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # judged just below
                        new = integrator._step(State(q.copy(), v.copy()), t)
                except SolverError as exc:
                    err = exc.located(t, k)
                    err.partial = partial()
                    raise err from exc
                if not (np.isfinite(new.q).all() and np.isfinite(new.v).all()):
                    err = instability(system, integrator.name, h, t, k)
                    err.partial = partial()
                    raise err
                if system.has_forces:
                    work += step_work(integrator, q, v, new, t)
                q, v = new.q.copy(), new.v.copy()
                k += 1
                numpy_steps += 1
                if k % save_every == 0 or k == nsteps:
                    Q[j], V[j], Wk[j] = q, v, work
                    j += 1
            rs.reset(q, v, work)  # the compiled loop starts again from here, cold
        elif out.status != ST.DONE:
            err = engine_failure(system, out.status, rs.q, rs.v, t0 + k * h, k, h, model.rigid, integrator.name,
                                 model.callbacks)  # fmt: skip
            err.partial = partial()
            raise err
        if callback is not None:
            callback(k)
    if info[RI.SHIFTED]:
        warnings.warn(
            "the constraint matrix G M⁻¹ Gᵀ was singular on some steps (dependent constraints); it was "
            "factored with a 1e-12 relative regularization (least-squares multipliers)",
            RedundantConstraintWarning,
            stacklevel=4,
        )
    counters = {"refined_steps": int(info[RI.REFINED]), "numpy_steps": numpy_steps, "shifted": int(info[RI.SHIFTED]),
                "newton": int(info[RI.NEWTON])}  # fmt: skip
    return RunResult(t0 + saved_steps(j, nsteps, save_every) * h, Q[:j], V[:j], Wk[:j].copy(), counters)


def step_work(integrator: Compiled, q0: np.ndarray, v0: np.ndarray, state: State, t: float) -> float:
    """Work of the non-conservative forces over a step the NumPy path took, J.

    The implicit pair's own discrete work (F at the point its equations
    evaluate it, times q₁ − q₀), as the compiled step counts it; for the
    RATTLE family the trapezoidal rule, which its kicks' work matches to O(h³).
    """
    system, h = integrator.system, integrator.dt
    dq = state.q - q0
    kind = int(integrator.method()[0, SC.KIND])
    if kind == SC.MIDPOINT:
        return float(system.force(q0 + 0.5 * dq, dq / h, t + 0.5 * h) @ dq)
    if kind == SC.IMPLICIT_EULER:
        return float(system.force(state.q, dq / h, t + h) @ dq)
    return 0.5 * float((system.force(q0, v0, t) + system.force(state.q, state.v, t + h)) @ dq)
