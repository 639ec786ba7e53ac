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
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from mbvi import interrupts, notices
from mbvi.diagnosis import engine_failure, instability, kernel_failure, reach, recorded_failure
from mbvi.engine import scheme as SC
from mbvi.engine.fields import RI, ST
from mbvi.engine.model import configuration_model
from mbvi.engine.runner import Advancer, RunResult, RunState, entry, nsave, saved_states, saved_steps
from mbvi.errors import RedundantConstraintWarning, SolverError
from mbvi.integrators.base import Integrator
from mbvi.state import State

__all__ = ["CHUNK", "Compiled", "Drive", "step_work"]

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
        scheme = self.method()
        if not SC.is_rattle(scheme) and len(scheme) != 1:  # the compiled implicit step is one stage: a
            return None  # composition of the implicit pair runs its own NumPy step
        if model is not None and model.rigid and not SC.is_rattle(scheme):
            model = configuration_model(model)  # the implicit pair: rotation columns under their rows
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
        if model is None:  # the NumPy step, its work measured as the compiled loop measures it
            return self._run_numpy(state, t0, nsteps, save_every, callback)
        return drive(self, model, state, t0, nsteps, save_every, callback)

    def _step_work(self, q0, v0, new, t, f0=None):
        """:func:`step_work`: the scheme's own quadrature (F where its equations evaluate it)."""
        return step_work(self, q0, v0, new, t), None


def drive(integrator: Compiled, model, state: State, t0: float, nsteps: int, save_every: int = 1,
          callback: Callable[[int], None] | None = None) -> RunResult:  # fmt: skip
    """Run ``integrator``'s scheme on ``model`` from ``state`` (see the module docstring)."""
    run = Drive(integrator, model, state, t0, nsteps, save_every)
    run.advance_to(nsteps, callback)
    return run.result()


class Drive:
    """A compiled run in progress: what :meth:`Compiled.run` runs at once and :class:`mbvi.Simulator` steps.

    Parameters
    ----------
    integrator : Compiled
        The integrator (its system, step, options and NumPy step for the steps the engine hands back).
    model : mbvi.engine.model.Model
        The compiled model it runs.
    state : mbvi.State
        Where it starts.
    t0 : float
        When it starts, s.
    nsteps : int or None
        The run's length; None: open-ended (every state saved, the arrays growing as it goes).
    save_every : int, default: 1
        Keep every n-th state (and the last).

    Attributes
    ----------
    k : int
        Steps taken.
    j : int
        States saved (the initial one included).
    """

    def __init__(self, integrator: Compiled, model, state: State, t0: float, nsteps: int | None,
                 save_every: int = 1) -> None:  # fmt: skip
        system = integrator.system
        self.integrator, self.model, self.t0, self.h = integrator, model, float(t0), integrator.dt
        self.nsteps, self.save_every = nsteps, save_every if nsteps is not None else 1
        self.scheme = integrator.method()
        ns = nsave(nsteps, save_every) if nsteps is not None else 64
        self.Q, self.V = saved_states((ns, system.nq)), saved_states((ns, system.nq))
        self.Wk = np.zeros(ns + 1)  # the last entry: the work so far (in and out of every compiled call)
        self.info = np.zeros(RI.count, dtype=np.int64)
        self.rs = RunState(model, self.scheme, state.q, state.v)
        self.Q[0], self.V[0] = self.rs.q, self.rs.v
        for cb in model.callbacks:
            cb.reset()
        self.k, self.j = 0, 1
        self.burst = 1  # NumPy steps after a hand-back: doubles while the compiled step keeps handing steps back
        self.burst_end = -1  # the step the last burst ended at
        self.numpy_steps = 0
        self.call = Advancer(model, self.scheme, self.rs, (self.Q, self.V, self.Wk, self.info), t0=self.t0, h=self.h,
                             tol=integrator.tol, maxiter=integrator.maxiter,
                             length_scale=float(system.length_scale), max_turn=float(integrator.max_turn),
                             save_every=self.save_every)  # fmt: skip

    def _times(self, count: int) -> np.ndarray:
        if self.nsteps is None:
            return self.t0 + np.arange(count) * self.h
        return self.t0 + saved_steps(count, self.nsteps, self.save_every) * self.h

    def partial(self, last: tuple[np.ndarray, np.ndarray, float] | None = None) -> RunResult:
        """The states saved so far, and ``last``, the state (q, v, work) of step :attr:`k` when given (a failed
        step's start, off the save grid)."""
        j = self.j
        saved = RunResult(self._times(j), self.Q[:j], self.V[:j], self.Wk[:j].copy())
        return saved if last is None else saved.ending_at(self.t0 + self.k * self.h, *last)

    def _failed_at(self) -> RunResult:
        """:meth:`partial` with the run state, where a failed compiled call leaves the failing step's start."""
        return self.partial((self.rs.q.copy(), self.rs.v.copy(), float(self.Wk[-1])))

    def _grow(self, kstop: int) -> None:
        """Room for the states up to step ``kstop`` (open-ended runs)."""
        need = kstop + 1
        if need <= len(self.Q):
            return
        size = max(need, 2 * len(self.Q))
        Q, V, Wk = saved_states((size, self.Q.shape[1])), saved_states((size, self.Q.shape[1])), np.zeros(size + 1)
        j = self.j
        Q[:j], V[:j], Wk[:j], Wk[-1] = self.Q[:j], self.V[:j], self.Wk[:j], self.Wk[-1]
        self.Q, self.V, self.Wk = Q, V, Wk
        self.call.set_out((Q, V, Wk, self.info))

    def advance_to(self, kstop: int, callback: Callable[[int], None] | None = None) -> None:
        """Take the steps up to ``kstop`` (the run's step count so far becomes ``kstop``).

        Raises
        ------
        SolverError
            With ``partial`` (the states saved so far); the run state is left at the failing step's start.
        KeyboardInterrupt
            Ctrl-C during a run of more than :data:`CHUNK` steps, at the end of the chunk it came in
            (:mod:`mbvi.interrupts`), with ``partial``; the run state is at that chunk's end.
        """
        open_ended = self.nsteps is None
        if open_ended:
            self._grow(kstop)
        nsteps = kstop if open_ended else self.nsteps
        if kstop - self.k <= CHUNK:  # (a Simulator's single steps: no chunks, no signal handler to set)
            self._advance(kstop, nsteps, callback, None)
            return
        with interrupts.deferred() as interrupt:
            self._advance(kstop, nsteps, callback, interrupt)

    def _advance(self, kstop: int, nsteps: int, callback: Callable[[int], None] | None,
                 interrupt: interrupts.Interrupt | None) -> None:  # fmt: skip
        """:meth:`advance_to` in calls of :data:`CHUNK` steps with a ``callback``, else, with an ``interrupt`` to
        read, of about :data:`mbvi.interrupts.CHECK_EVERY` seconds each, else in one."""
        integrator, system, h, t0 = self.integrator, self.integrator.system, self.h, self.t0
        rs = self.rs
        pace = interrupts.Pace(interrupt, CHUNK)
        while self.k < kstop:
            stop = pace.stop(self.k, kstop, callback)
            kstart = self.k
            status, self.k, self.j = self.call(self.k, stop, nsteps, self.j)
            pace.took(self.k - kstart)
            if status in (ST.DONE, ST.NEEDS_NUMPY):  # a load that raised in a step the call then took again
                failed = recorded_failure(self.model.callbacks, t0, h, t0 + self.k * h)
                if failed is not None:
                    self.back_to(failed.step)
                    failed.partial = self.partial()
                    raise failed
            if status == ST.NEEDS_NUMPY:
                # a step handed back because a load's kernel failed in it (NaN, an exception: Newton then does
                # not converge) is that load's error, not a step for the law's NumPy twin to take quietly
                failed = kernel_failure(self.model.callbacks, t0 + self.k * h, self.k, (rs.q, rs.v, h),
                                        reach(self.scheme))  # fmt: skip
                if failed is not None:
                    failed.partial = self._failed_at()
                    raise failed
                self._numpy_burst(kstop)
            elif status != ST.DONE:
                err = engine_failure(system, status, rs.q, rs.v, t0 + self.k * h, self.k, h, self.model.rigid,
                                     integrator.name, self.model.callbacks, self.scheme)  # fmt: skip
                err.partial = self._failed_at()
                raise err
            pace.check(t0 + self.k * h, self.k, self.partial)
            if callback is not None:
                callback(self.k)

    def back_to(self, k: int) -> None:
        """Forget the steps from step ``k`` on (a failure met there): the states saved up to its start are kept."""
        if k < self.k:
            self.k = k
            self.j = min(self.j, k // self.save_every + 1)

    def _numpy_burst(self, stop: int) -> None:
        """The integrator's NumPy step takes 1, 2, 4 … steps the engine handed back (up to ``stop``, where the run
        goes this time); the engine resumes, cold. Bursts and their lengths do not depend on where the calls of a
        run in chunks stopped (a parallelogram through its change points, whose steps the engine hands back, ran
        differently at each machine load: a burst was cut at a chunk's end and doubled at the next one's start)."""
        integrator, system, h, t0, rs = self.integrator, self.integrator.system, self.h, self.t0, self.rs
        nsteps = stop if self.nsteps is None else self.nsteps
        self.burst = min(2 * self.burst, 1024) if self.k == self.burst_end else 1
        integrator._cache = {"q": None}
        q, v, work = rs.q.copy(), rs.v.copy(), rs.work
        for _ in range(min(self.burst, stop - self.k)):
            t = t0 + self.k * h
            try:
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # judged just below
                    new = integrator._step(State(q.copy(), v.copy()), t)
            except SolverError as exc:
                err = exc.located(t, self.k)
                err.partial = self.partial((q, v, work))
                raise err from exc
            if not (np.isfinite(new.q).all() and np.isfinite(new.v).all()):
                err = instability(system, integrator.name, h, t, self.k)
                err.partial = self.partial((q, v, work))
                raise err
            if system.has_forces:
                work += step_work(integrator, q, v, new, t)
            q, v = new.q.copy(), new.v.copy()
            self.k += 1
            self.numpy_steps += 1
            if self.k % self.save_every == 0 or self.k == nsteps:
                self.Q[self.j], self.V[self.j], self.Wk[self.j] = q, v, work
                self.j += 1
        self.burst_end = self.k
        rs.reset(q, v, work)  # the compiled loop starts again from here, cold

    def restart(self, q: np.ndarray, v: np.ndarray) -> None:
        """A new run from (q, v) at t0 (an open-ended run's :meth:`mbvi.Simulator.reset`): the states saved so far
        dropped, the workspace and the counters those of a new run (the next steps bit for bit a new Drive's)."""
        self.Q[0], self.V[0], self.Wk[0], self.Wk[-1] = q, v, 0.0, 0.0
        self.k, self.j = 0, 1
        self.rs.reset(q, v, 0.0, new=True)
        for cb in self.model.callbacks:
            cb.reset()
        self.info[:] = 0
        self.numpy_steps, self.burst, self.burst_end = 0, 1, -1

    def restore(self) -> None:
        """Back to the last saved state (after a failure): the run can go on from there, cold."""
        j = self.j - 1
        self.rs.reset(self.Q[j], self.V[j], float(self.Wk[j]))
        for cb in self.model.callbacks:
            cb.reset()

    def counters(self) -> dict[str, int]:
        """How the run went (:attr:`mbvi.engine.runner.RunResult.counters`)."""
        info = self.info
        return {"refined_steps": int(info[RI.REFINED]), "numpy_steps": self.numpy_steps,
                "shifted": int(info[RI.SHIFTED]), "newton": int(info[RI.NEWTON])}  # fmt: skip

    def result(self) -> RunResult:
        """The run's saved states, work and counters (warning once when the constraints were singular)."""
        if self.info[RI.SHIFTED]:
            notices.warn(
                "the constraint matrix G M⁻¹ Gᵀ was singular on some steps (dependent constraints); it was "
                "factored with a 1e-12 relative regularization (least-squares multipliers)",
                RedundantConstraintWarning,
            )
        j = self.j
        return RunResult(self._times(j), self.Q[:j], self.V[:j], self.Wk[:j].copy(), self.counters())


def step_work(integrator: Compiled, q0: np.ndarray, v0: np.ndarray, state: State, t: float) -> float:
    """Work of the non-conservative forces over a step the NumPy path took, J.

    The implicit pair's own discrete work (F at the point its equations
    evaluate it, times q₁ − q₀), as the compiled step counts it; for the
    RATTLE family the trapezoidal rule with both ends' forces at the step's
    mean velocity (q₁ − q₀)/h, as the compiled loop sums its kicks' work (at
    the knots' velocities v₀, v₁ symplectic Euler's work differed from the
    compiled loop's by O(h) on the same trajectory).
    """
    system, h = integrator.system, integrator.dt
    dq = state.q - q0
    kind = int(integrator.method()[0, SC.KIND])
    if kind == SC.MIDPOINT:
        return float(system.force(q0 + 0.5 * dq, dq / h, t + 0.5 * h) @ dq)
    if kind == SC.IMPLICIT_EULER:
        return float(system.force(state.q, dq / h, t + h) @ dq)
    vm = dq / h
    return 0.5 * float((system.force(q0, vm, t) + system.force(state.q, vm, t + h)) @ dq)
