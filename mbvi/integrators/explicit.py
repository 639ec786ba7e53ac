"""Explicit Euler on the index-1 formulation (a non-variational baseline)."""

from __future__ import annotations

import numpy as np

from mbvi.hookspecs import hookimpl
from mbvi.integrators.base import Integrator
from mbvi.state import State
from mbvi.system import System

__all__ = ["ExplicitEuler", "constrained_acceleration"]


def constrained_acceleration(system: System, q: np.ndarray, v: np.ndarray, t: float, alpha: float = 0.0,
                             force: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """Accelerations of the index-1 system, with optional Baumgarte stabilization.

    Solves G a = −Ġv − 2α G v − α² g with a = M⁻¹(f − Gᵀλ), f = −∇U + F:
    (G M⁻¹ Gᵀ) λ = G M⁻¹ f + Ġv + 2α G v + α² g.

    ``force``: F(q, v, t) when the caller has it (csm, which also integrates its power), else evaluated here.

    Returns
    -------
    a : ndarray, shape (nq,)
    """
    W = system.inv_mass
    f = system.generalized_acceleration_force(q, v, t) if force is None else force - system.potential_gradient(q)
    if len(system.active) == 0:
        return W * f
    g, gdata = system.active_values_and_jacobian(q)
    factor = system.solver.factor(gdata)
    rhs = system.G_matvec(gdata, W * f) + system.constraint_curvature(v)[system.active]
    if alpha:
        rhs += 2.0 * alpha * system.G_matvec(gdata, v) + alpha * alpha * g
    lam = factor.solve(rhs)
    return W * (f - system.G_rmatvec(gdata, lam))


class ExplicitEuler(Integrator):
    """Explicit (forward) Euler: q₁ = q₀ + h v₀, v₁ = v₀ + h a(q₀, v₀).

    First order, not symplectic: energy grows. With ``project=True`` (default)
    positions and velocities are projected back onto the constraints after
    each step (mass-weighted); with ``project=False`` they drift.
    """

    name = "explicit_euler"
    order = 1
    handles = frozenset({"constraints", "forces"})
    options = {"project": True}

    def __init__(self, system: System, dt: float, **options: object) -> None:
        super().__init__(system, dt, **options)
        self.project = self.check_flag("project", self.project)

    def step(self, state: State, t: float) -> State:
        sysm, h = self.system, self.dt
        a = constrained_acceleration(sysm, state.q, state.v, t)
        q1 = state.q + h * state.v
        v1 = state.v + h * a
        if self.project:
            q1 = sysm.project_position(q1)
            v1 = sysm.project_velocity(q1, v1)
        return State(q1, v1)

    def _step_work(self, q0: np.ndarray, v0: np.ndarray, new: State, t: float, f0: np.ndarray | None = None
                  ) -> tuple[float, None]:  # fmt: skip
        """Work of the non-conservative forces over a step, J: the force the step applies, F(q₀, v₀, t), times
        q₁ − q₀. (The trapezoid with the end's force credited a damping that drives the step unstable, h c/m > 2,
        with positive work: the velocity flips sign every step, and the growing energy balanced.)"""
        start = self.system.force(q0, v0, t) if f0 is None else f0
        return float(start @ (new.q - q0)), None


@hookimpl
def register_integrators(register):
    """Register explicit Euler."""
    register(ExplicitEuler)
