"""The constraint stabilization method (Baumgarte) integrated by ``scipy.integrate.solve_ivp``.

The holonomic constraints g = 0 are replaced by g̈ + 2αġ + α²g = 0, giving an
index-1 system for accelerations and multipliers that any ODE solver can
integrate. It is the classical baseline: the constraints drift (kept small by
α, never at solver tolerance) and energy drifts with the ODE solver's error.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.integrate import solve_ivp

from mbvi._validate import is_number
from mbvi.diagnosis import adaptive_remedy
from mbvi.engine.runner import DERIVED_PER_STATE, RunResult, check_memory, nsave
from mbvi.errors import LoadError, SolverError
from mbvi.hookspecs import hookimpl
from mbvi.integrators.base import Integrator
from mbvi.integrators.explicit import constrained_acceleration
from mbvi.state import State

__all__ = ["CSM", "check_method"]

#: arrays of the saved states' size, (saved states, nq) float64, a csm run holds at its peak: solve_ivp's list of
#: sampled columns and their stacked ``sol.y`` (2 nq rows each: 2 + 2), then ``sol.y`` and the q and v split from it
#: (2 + 1 + 1). Measured with tracemalloc: 4.01–4.08 of them (nq = 60–600, 10⁴–2·10⁴ saved states, solver steps
#: longer and shorter than dt); the Trajectory that simulate builds from q and v adds nothing above that peak
CSM_ARRAYS = 4

#: the method names ``scipy.integrate.solve_ivp`` accepts (case-sensitive)
SOLVE_IVP_METHODS = ("RK45", "RK23", "DOP853", "Radau", "BDF", "LSODA")


def check_method(method: object) -> object:
    """Return ``method`` if ``solve_ivp`` accepts it (a method name or an ``OdeSolver`` subclass), else ValueError."""
    from scipy.integrate import OdeSolver

    if isinstance(method, str) and method in SOLVE_IVP_METHODS:
        return method
    if isinstance(method, type) and issubclass(method, OdeSolver):
        return method
    names = ", ".join(SOLVE_IVP_METHODS)
    if isinstance(method, str):
        close = [m for m in SOLVE_IVP_METHODS if m.lower() == method.strip().lower()]
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"option 'method' {method!r} is not a solve_ivp method{hint}; use one of {names}")
    raise ValueError(
        f"option 'method' must be a solve_ivp method name ({names}) or a scipy.integrate.OdeSolver subclass, "
        f"got {method!r}"
    )


class _Stiff(Exception):
    """The right-hand side was evaluated more often than the work budget allows."""

    def __init__(self, t: float, q: np.ndarray) -> None:
        super().__init__(t)
        self.t, self.q = t, q  # the time and configuration of the evaluation over the budget


class CSM(Integrator):
    """Baumgarte-stabilized index-1 formulation integrated by ``solve_ivp``.

    Options
    -------
    alpha : float, default: 10.0
        Stabilization rate α, 1/s (critically damped constraint error).
    method : str or scipy.integrate.OdeSolver subclass, default: "RK45"
        A ``solve_ivp`` method: RK45, RK23, DOP853, Radau, BDF or LSODA
        (case-sensitive), or an ``OdeSolver`` subclass; checked on construction.
    rtol, atol : float, default: 1e-8, 1e-10
        Relative and absolute tolerances passed to ``solve_ivp`` (per step local
        error ≲ atol + rtol·|y|, y = (q, v)); they, not ``dt``, set the accuracy.
    max_evaluations : int, optional
        Cap on right-hand-side evaluations (default 2·10⁴ + 1000 per output
        sample): beyond it the run stops with a :class:`mbvi.SolverError` that
        says the system is stiff and what to use instead.

    Output is sampled every ``dt``; the ODE solver chooses its own steps, so
    the declared order is that of the time-step-independent sampling: exact
    up to ``rtol``. A run whose saved states would take more than half of
    this machine's memory (:data:`CSM_ARRAYS` arrays of (saved states, nq) at
    its peak) is refused with a ValueError before it starts, as every
    integrator's is: keep fewer (``save_every``) or run shorter.
    """

    name = "csm"
    order = 4
    handles = frozenset({"constraints", "forces"})
    options = {"alpha": 10.0, "method": "RK45", "rtol": 1e-8, "atol": 1e-10, "max_evaluations": None}

    def __init__(self, system, dt, **options):
        super().__init__(system, dt, **options)
        if not is_number(self.alpha) or not self.alpha >= 0 or not math.isfinite(self.alpha):
            raise ValueError(f"option 'alpha' (Baumgarte rate, 1/s) must be a number >= 0, got {self.alpha!r}")
        self.alpha = float(self.alpha)
        self.rtol = self.check_option("rtol", self.rtol)
        self.atol = self.check_option("atol", self.atol)
        if self.max_evaluations is not None:
            self.max_evaluations = self.check_option("max_evaluations", self.max_evaluations, integer=True)
        self.method = check_method(self.method)
        self._evaluations = 0
        self._budget = None

    def _rhs(self, t, y):
        self._evaluations += 1
        if self._budget is not None and self._evaluations > self._budget:
            raise _Stiff(t, y[: self.system.nq].copy())
        n = self.system.nq
        q, v = y[:n], y[n : 2 * n]
        try:
            if len(y) == 2 * n:
                return np.concatenate([v, constrained_acceleration(self.system, q, v, t, self.alpha)])
            force = self.system.force(q, v, t)  # once: the motion's, and the work's W' = F·v
            a = constrained_acceleration(self.system, q, v, t, self.alpha, force=force)
        except LoadError as exc:
            exc.at = t  # where the load failed (integrate() locates the error and keeps what came before)
            raise
        return np.concatenate([v, a, [float(force @ v)]])

    def _solve(self, state: State, t0: float, times: np.ndarray, max_step: float | None = None):
        """solve_ivp over ``times``, its work bounded: a stiff system is an error that says what to use."""
        # with non-conservative forces, their work W as one more state (W' = F·v): measured to the ODE's tolerance
        y0 = np.concatenate([state.q, state.v, [0.0] if self.system.has_forces else []])
        span = float(times[-1]) - t0
        # a non-stiff problem needs a few evaluations per output sample; allow 1000× that
        self._budget = self.max_evaluations or int(2e4 + 1000 * max(1.0, span / self.dt))
        self._evaluations = 0
        try:
            return self._ivp(y0, t0, times, max_step)
        except _Stiff as stiff:
            used = self._evaluations - 1
            partial = self._reached(y0, t0, times[times <= stiff.t], max_step)
            where = f"csm: {used} right-hand-side evaluations reached t = {stiff.t:.6g} s of {float(times[-1]):.6g} s"
            # the kept rows' spread where the solver was stepping when the cap came, against the start's: a
            # mechanism that became singular, not a scene whose rows mix lengths of different sizes
            spread, start = _rows_spread(self.system, stiff.q), _rows_spread(self.system, state.q)
            if spread is not None and start is not None and spread < SINGULAR_DROP * start:
                what = (f"{where} — the constraints are nearly dependent there (the smallest singular value of "
                        f"their Jacobian is {spread:.1e} of the largest): a singular configuration of the "
                        "mechanism (a linkage at a change or dead point), which an error-controlled solver "
                        "cannot step across; use integrator='midpoint' or 'verlet'")  # fmt: skip
            else:
                el = self.system.stiffest_element()
                hint = "" if el is None else f" (the stiffest element {el[0]!r} has ω ≈ {el[1]:.3g} rad/s)"
                what = (f"{where} — the system is stiff for method {self.method!r}{hint}; use method='Radau' or "
                        "'BDF', or integrator='midpoint' or 'verlet' with a small dt")  # fmt: skip
            err = SolverError(
                what + " (raise the cap with option max_evaluations)",
                time=float(stiff.t),
                step=int((stiff.t - t0) / self.dt),
            )
            err.partial = partial
            raise err from None
        finally:
            self._budget = None

    def _reached(self, y0: np.ndarray, t0: float, keep: np.ndarray, max_step: float | None) -> RunResult | None:
        """The samples a run stopped by its evaluation cap had passed (solve_ivp keeps nothing of a run its
        right-hand side stopped): solved again up to the last of them, which the same steps reach within the
        cap (None when it passed none but the start)."""
        if len(keep) < 2:
            return None
        n = self.system.nq
        self._budget, self._evaluations = None, 0
        try:
            sol = self._ivp(y0, t0, keep, max_step)
        except (SolverError, ArithmeticError):
            return None
        return _result(sol.t, sol.y, n) if sol.success else None

    def _ivp(self, y0: np.ndarray, t0: float, times: np.ndarray, max_step: float | None):
        """``solve_ivp`` of the constrained dynamics from (t0, y0) to ``times[-1]``, sampled at ``times``."""
        with np.errstate(over="ignore", invalid="ignore"):
            return solve_ivp(
                self._rhs, (t0, float(times[-1])), y0, method=self.method, t_eval=times, rtol=self.rtol,
                atol=self.atol, **({} if max_step is None else {"max_step": max_step, "first_step": max_step}),
            )  # fmt: skip

    def step(self, state: State, t: float) -> State:
        sol = self._solve(state, t, np.array([t + self.dt]))
        if not sol.success:
            raise SolverError(f"solve_ivp failed: {sol.message}", suggested_dt=self.dt)
        n = self.system.nq
        return State(sol.y[:n, -1].copy(), sol.y[n : 2 * n, -1].copy())

    def run(self, state, t0, nsteps, save_every=1, callback=None) -> RunResult:
        """:meth:`integrate`, with the work of the non-conservative forces at every saved state (``work``, J; solved
        with the motion as W' = F·v, so that the run's energy balance E − E₀ − W can be judged)."""
        return self._run(state, t0, nsteps, save_every, callback)

    def integrate(self, state, t0, nsteps, save_every=1, callback=None):
        out = self._run(state, t0, nsteps, save_every, callback)
        return out.t, out.q, out.v

    def _run(self, state, t0, nsteps, save_every, callback) -> RunResult:
        n = self.system.nq
        # before anything runs: what its saved states would take (the same ValueError as every other integrator's),
        # not numpy's MemoryError or an out-of-memory kill minutes into the run
        check_memory((nsave(nsteps, save_every), n), copies=CSM_ARRAYS + DERIVED_PER_STATE / max(1, n))
        k = np.arange(0, nsteps + 1, save_every)
        if k[-1] != nsteps:
            k = np.append(k, nsteps)
        times = t0 + k * self.dt
        if nsteps == 0 or n == 0:  # (nothing moves: a scene of no bodies, or of bodies fixed to the world)
            return RunResult(times, np.repeat(state.q[None], len(times), axis=0),
                             np.repeat(state.v[None], len(times), axis=0),
                             np.zeros(len(times)) if self.system.has_forces else None)  # fmt: skip
        try:
            sol = self._solve(state, t0, times)
        except LoadError as exc:
            raise self._load_failure(exc, state, t0, times, nsteps) from exc
        rows = 2 * n + (1 if self.system.has_forces else 0)
        y = np.asarray(sol.y, dtype=float).reshape(rows, -1)  # (an empty list when it failed before any output)
        result = _result(times if sol.success else sol.t, y, n)
        if callback is not None:
            callback(nsteps)
        if not sol.success:
            m = len(sol.t)
            err = SolverError(
                f"solve_ivp failed: {sol.message} ({adaptive_remedy(self)})",
                time=float(sol.t[-1]) if m else t0, step=int(k[m - 1]) if m else 0,
            )  # fmt: skip
            err.partial = result
            raise err
        return result

    def _load_failure(self, exc: LoadError, state: State, t0: float, times: np.ndarray, nsteps: int) -> LoadError:
        """A load that raised, located in the step of its earliest failing call, with the samples before it.

        solve_ivp keeps nothing of a run its right-hand side stopped, and its stages probe ahead of the samples:
        the run is solved again, in steps of at most dt (no stage probes further ahead), up to the last sample
        before the failing call, and again when that run meets the load failing earlier.
        """
        n = self.system.nq
        partial = RunResult(times[:1], state.q[None].copy(), state.v[None].copy())

        def failing_step(exc: LoadError) -> int:  # the step whose end (or a stage before it) the call fell in
            return min(max(math.ceil((getattr(exc, "at", t0) - t0) / self.dt - 1e-9) - 1, 0), max(nsteps - 1, 0))

        for _ in range(6):
            k = failing_step(exc)
            keep = times[times <= t0 + k * self.dt + 1e-9 * self.dt]
            if len(keep) < 2:
                break
            try:
                sol = self._solve(state, t0, keep, max_step=self.dt)
            except LoadError as earlier:
                exc = earlier
                continue
            except SolverError:
                break
            if sol.success:
                partial = _result(sol.t, sol.y, n)
            break
        k = failing_step(exc)
        err = LoadError(exc.reason, time=t0 + k * self.dt, step=k, culprit=getattr(exc, "culprit", None))
        err.partial = partial
        return err


@hookimpl
def register_integrators(register):
    """Register the CSM baseline."""
    register(CSM)


#: how far the spread of the constraint Jacobian's singular values (smallest / largest) must fall below the
#: start's for a run that used up its evaluations to be said to be at a singular configuration rather than stiff
SINGULAR_DROP = 1e-4
#: the largest Jacobian (rows × coordinates) whose singular values that judgement takes
SINGULAR_CHECK_MAX = 4_000_000


def _rows_spread(system, q: np.ndarray) -> float | None:
    """σ_min / σ_max of the kept constraint rows' Jacobian at q, each row scaled to its natural size; None when
    there are no rows, more rows than coordinates or too many to judge."""
    active = system.active
    if len(active) == 0 or len(active) > system.nq or len(active) * system.nq > SINGULAR_CHECK_MAX:
        return None
    G = system.constraint_jacobian(q)[active].toarray() / system.active_scale[:, None]
    with np.errstate(all="ignore"):
        sv = np.linalg.svd(G, compute_uv=False)
    if not (len(sv) and np.all(np.isfinite(sv)) and sv[0] > 0.0):
        return None
    return float(sv[-1] / sv[0])


def _result(t: np.ndarray, y: np.ndarray, n: int) -> RunResult:
    """The RunResult of solve_ivp's samples: times ``t`` (m,) and states ``y`` (2n or 2n + 1, m), q, v and, when the
    work was solved with them (row 2n), W."""
    y = np.asarray(y, dtype=float)
    work = y[2 * n].copy() if y.shape[0] > 2 * n else None
    return RunResult(np.asarray(t, dtype=float), y[:n].T.copy(), y[n : 2 * n].T.copy(), work)
