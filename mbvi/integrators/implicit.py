"""Implicit integrators solved by Newton on (q_{k+1}, λ): midpoint VI and implicit Euler.

A run is one compiled call (:func:`mbvi.engine.loop.run_implicit`; rigid bodies
step their rotation columns under their orthonormality rows, on
:func:`mbvi.engine.model.configuration_model`): the same equations, solved by a
fixed point around SHAKE, and by a compiled Newton (finite-difference KKT
matrix) where the fixed point cannot settle (stiff forces). A stiff step of a
system too large for that dense Newton is taken here, by Newton with sparse LU,
and so is every step of a system whose constraint matrix is too wide for the
compiled solver.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from mbvi.diagnosis import diagnose, stiff_kick, velocity_law
from mbvi.engine import scheme as SC
from mbvi.errors import LoadError, SolverError
from mbvi.hookspecs import hookimpl
from mbvi.integrators.compiled import Compiled
from mbvi.integrators.newton import newton_kkt
from mbvi.state import State

__all__ = ["ImplicitEuler", "Midpoint"]


class _NewtonIntegrator(Compiled):
    options = {"tol": 1e-12, "maxiter": 40}
    handles = frozenset({"constraints", "forces"})
    compiled = True

    def __init__(self, system, dt, **options):
        super().__init__(system, dt, **options)
        self.tol = self.check_option("tol", self.tol)
        self.maxiter = self.check_option("maxiter", self.maxiter, integer=True)
        self._M = sp.diags(system.mass)
        self._y = np.zeros(len(system.active))
        self._force_jacobians: tuple | None = None

    def _forces_jacobians(self, q, v, t, refresh: bool) -> tuple:
        """(∂F/∂q, ∂F/∂v) at (q, v, t) for a Newton matrix; at its first making in a step (not ``refresh``)
        those of the last made, from an earlier step, when there are.

        A load that reads the state has them by central differences, 4 nq calls of the user's function: made
        at every step, they cost a 3-body chain with a `(t, state)` torque ~10 ms a step. Simplified Newton
        needs only a matrix near the Jacobian, and the forces' part changes little in a step; when its
        contraction slows, Newton makes the matrix again with them made afresh (``refresh``)."""
        if refresh or self._force_jacobians is None:
            self._force_jacobians = self.system.force_jacobians(q, v, t)
        return self._force_jacobians

    def _solve(self, residual, jacobian, x0, culprit_q, t):
        sysm = self.system
        try:
            return newton_kkt(
                residual,
                jacobian,
                x0,
                self._y,
                xtol=1e-13 * max(1.0, float(np.max(np.abs(x0)))),
                gscale=sysm.active_scale,
                gtol=self.tol,
                maxiter=self.maxiter,
            )
        except LoadError:  # a load or law raised: its own message, not the solve's
            raise
        except SolverError as exc:
            # the drift q₀ → x0 = q₀ + h v₀ has the same h|ω| < 1 limit as SHAKE: name a spinning body
            v0 = (x0 - culprit_q) / self.dt
            culprit, hint = diagnose(sysm, culprit_q, v0, self.dt, np.zeros(0))
            reason = f"{self.name}: {exc.reason}"
            if stiff_kick(sysm, culprit_q, v0, t, self.dt):  # a force that reads the velocity threw Newton off
                named = velocity_law(sysm, culprit_q, v0, t, self.dt)
                if named is not None:
                    culprit, reason = named[0], f"{reason}. {named[1]}"
            raise SolverError(reason, culprit=culprit, suggested_dt=hint) from exc


class Midpoint(_NewtonIntegrator):
    """Implicit-midpoint variational integrator (midpoint discrete Lagrangian).

    L_d(q₀, q₁) = h [½ vᵀMv − U(q̄)], v = (q₁ − q₀)/h, q̄ = (q₀ + q₁)/2; forcing
    f± = (h/2) F(q̄, v, t + h/2). Constraints g(q₁) = 0 with the multiplier
    force G(q₀)ᵀλ, velocities projected at q₁. Second order, symplectic;
    Newton with the potential Hessian.
    """

    name = "midpoint"
    order = 2
    symplectic = True
    variational = True
    compiled = True
    scheme = SC.stage(SC.MIDPOINT, 1.0, 0.5, 0.5)

    def step(self, state: State, t: float) -> State:
        sysm, h = self.system, self.dt
        M, W = sysm.mass, sysm.inv_mass
        q0, v0 = state.q, state.v
        _, gd0 = sysm.active_values_and_jacobian(q0)
        G0 = sysm.active_jacobian(gd0)
        tm = t + 0.5 * h

        def residual(q1, lam):
            v = (q1 - q0) / h
            qm = 0.5 * (q0 + q1)
            f = -sysm.potential_gradient(qm)
            if sysm.has_forces:
                f += sysm.force(qm, v, tm)
            return M * (v - v0) - 0.5 * h * f + G0.T @ lam, sysm.active_constraints(q1)

        def jacobian(q1, lam, refresh):
            v = (q1 - q0) / h
            qm = 0.5 * (q0 + q1)
            K = self._M / h + 0.25 * h * sysm.potential_hessian(qm)
            if sysm.has_forces:
                dq, dv = self._forces_jacobians(qm, v, tm, refresh)
                K = K - 0.25 * h * dq - 0.5 * dv
            _, gd1 = sysm.active_values_and_jacobian(q1)
            return K, G0.T, sysm.active_jacobian(gd1)

        q1, lam, _ = self._solve(residual, jacobian, q0 + h * v0, q0, t)
        self._y = lam
        v = (q1 - q0) / h
        qm = 0.5 * (q0 + q1)
        f = -sysm.potential_gradient(qm)
        if sysm.has_forces:
            f += sysm.force(qm, v, tm)
        v1 = sysm.project_velocity(q1, v + 0.5 * h * W * f)
        return State(q1, v1)


class ImplicitEuler(_NewtonIntegrator):
    """Implicit (backward) Euler on positions, velocities and multipliers.

    q₁ = q₀ + h v₁, M(v₁ − v₀) = h(−∇U(q₁) + F(q₁, v₁, t₁)) − G(q₁)ᵀλ, g(q₁) = 0,
    solved by Newton on (q₁, λ); v₁ is then projected onto G(q₁)v = 0.
    First order, not symplectic: energy decays at a step-dependent rate.
    """

    name = "implicit_euler"
    order = 1
    dissipative = True
    compiled = True
    scheme = SC.stage(SC.IMPLICIT_EULER, 1.0, 0.0, 1.0)

    def step(self, state: State, t: float) -> State:
        sysm, h = self.system, self.dt
        M = sysm.mass
        q0, v0 = state.q, state.v
        t1 = t + h
        full_lam = np.zeros(sysm.nc)

        def residual(q1, lam):
            v = (q1 - q0) / h
            f = -sysm.potential_gradient(q1)
            if sysm.has_forces:
                f += sysm.force(q1, v, t1)
            g, gd = sysm.active_values_and_jacobian(q1)
            return M * (v - v0) / h - f + sysm.G_rmatvec(gd, lam), g

        def jacobian(q1, lam, refresh):
            v = (q1 - q0) / h
            K = self._M / (h * h) + sysm.potential_hessian(q1)
            if sysm.has_forces:
                dq, dv = self._forces_jacobians(q1, v, t1, refresh)
                K = K - dq - dv / h
            full_lam[sysm.active] = lam
            K = K + sysm.constraint_hessian(full_lam)
            _, gd = sysm.active_values_and_jacobian(q1)
            G1 = sysm.active_jacobian(gd)
            return K, G1.T, G1

        q1, lam, _ = self._solve(residual, jacobian, q0 + h * v0, q0, t)
        self._y = lam
        v1 = sysm.project_velocity(q1, (q1 - q0) / h)
        return State(q1, v1)


@hookimpl
def register_integrators(register):
    """Register the Newton-based implicit integrators."""
    register(Midpoint)
    register(ImplicitEuler)
