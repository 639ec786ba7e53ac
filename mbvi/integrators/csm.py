"""The constraint stabilization method (Baumgarte) integrated by ``scipy.integrate.solve_ivp``.

The holonomic constraints g = 0 are replaced by g̈ + 2αġ + α²g = 0, giving an
index-1 system for accelerations and multipliers that any ODE solver can
integrate. It is the classical baseline: the constraints drift (kept small by
α, never at solver tolerance) and energy drifts with the ODE solver's error.
"""

from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from mbvi.errors import SolverError
from mbvi.hookspecs import hookimpl
from mbvi.integrators.base import Integrator
from mbvi.integrators.explicit import constrained_acceleration
from mbvi.state import State

__all__ = ["CSM"]


class CSM(Integrator):
    """Baumgarte-stabilized index-1 formulation integrated by ``solve_ivp``.

    Options
    -------
    alpha : float, default: 10.0
        Stabilization rate α, 1/s (critically damped constraint error).
    method : str, default: "RK45"
        Any ``solve_ivp`` method (RK45, DOP853, Radau, BDF, LSODA, ...).
    rtol, atol : float, default: 1e-8, 1e-10
        Tolerances passed to ``solve_ivp``.

    Output is sampled every ``dt``; the ODE solver chooses its own steps, so
    the declared order is that of the time-step-independent sampling: exact
    up to ``rtol``.
    """

    name = "csm"
    order = 4
    options = {"alpha": 10.0, "method": "RK45", "rtol": 1e-8, "atol": 1e-10}

    def _rhs(self, t, y):
        n = self.system.nq
        q, v = y[:n], y[n:]
        return np.concatenate([v, constrained_acceleration(self.system, q, v, t, self.alpha)])

    def _solve(self, state: State, t0: float, times: np.ndarray):
        y0 = np.concatenate([state.q, state.v])
        sol = solve_ivp(
            self._rhs, (t0, float(times[-1])), y0, method=self.method, t_eval=times, rtol=self.rtol, atol=self.atol
        )
        return sol

    def step(self, state: State, t: float) -> State:
        sol = self._solve(state, t, np.array([t + self.dt]))
        if not sol.success:
            raise SolverError(f"solve_ivp failed: {sol.message}", suggested_dt=self.dt)
        n = self.system.nq
        return State(sol.y[:n, -1].copy(), sol.y[n:, -1].copy())

    def integrate(self, state, t0, nsteps, save_every=1, callback=None):
        k = np.arange(0, nsteps + 1, save_every)
        if k[-1] != nsteps:
            k = np.append(k, nsteps)
        times = t0 + k * self.dt
        n = self.system.nq
        if nsteps == 0:
            return times, state.q[None].copy(), state.v[None].copy()
        sol = self._solve(state, t0, times)
        q, v = sol.y[:n].T.copy(), sol.y[n:].T.copy()
        if callback is not None:
            callback(nsteps)
        if not sol.success:
            m = len(sol.t)
            err = SolverError(
                f"solve_ivp failed: {sol.message}", time=float(sol.t[-1]) if m else t0, step=int(k[m - 1]) if m else 0
            )
            err.partial = (sol.t, q, v)
            raise err
        return times, q, v


@hookimpl
def register_integrators(register):
    """Register the CSM baseline."""
    register(CSM)
