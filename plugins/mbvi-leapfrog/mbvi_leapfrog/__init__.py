"""mbvi-leapfrog: velocity Verlet with projection, as an mbvi integrator plugin.

The equations of motion with constraints are turned into an ODE for the
accelerations (the index-1 formulation), a(q, v, t) = M⁻¹(f − Gᵀλ) with
f = −∇U(q) + F(q, v, t) and λ from (G M⁻¹ Gᵀ) λ = G M⁻¹ f + Ġ v, which keeps
g̈ = 0. One step of size h from (q₀, v₀) at time t:

1. half kick            v½ = v₀ + ½h a(q₀, v₀, t)
2. unconstrained drift  q* = q₀ + h v½
3. position projection  q₁ = mass-weighted Newton projection of q* onto g(q) = 0
                        (:meth:`mbvi.System.project_position`)
4. half kick            v₁ = v½ + ½h a(q₁, ṽ₁, t + h), with the predictor
                        ṽ₁ = v½ + ½h a(q₁, v½, t + h) because a depends on v
5. velocity projection  v₁ ← mass-weighted projection onto G(q₁) v = 0
                        (:meth:`mbvi.System.project_velocity`)

Steps 1, 2 and 4 are velocity Verlet for that ODE (second order); the
projections move the state by no more than the local error, so the method
stays second order while g(q) = 0 holds to the projection tolerance and
G(q) v = 0 to round-off. It is *not* symplectic and not variational (the
projection is not a symplectic map): a useful foil for mbvi's RATTLE
(``verlet``). Without constraints and velocity-dependent forces it is exactly
Störmer–Verlet. The plugin is registered through the ``register_integrators``
hook and the entry point ``leapfrog = "mbvi_leapfrog"`` of the group ``mbvi``.

The step is written twice, as every mbvi integrator's is: :meth:`Leapfrog.step`
in NumPy against :class:`mbvi.System` (direct calls, and systems mbvi's engine
does not run), and :func:`leapfrog_step`, the same operations compiled with
numba against the engine's arrays (:mod:`mbvi.engine.api`). The class hands the
latter to mbvi as ``kernel``: a run is then one compiled call, like the
built-in integrators'.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np

import mbvi
from mbvi.engine import api

__all__ = ["Leapfrog", "leapfrog_step", "register_integrators"]
__version__ = "0.1.0"


@numba.njit(cache=True)
def leapfrog_step(model, ws, q, v, t, h, params):
    """The compiled step: (q, v) advanced in place from t to t + h (:meth:`Leapfrog.step`, operation for operation).

    Parameters
    ----------
    model, ws : tuple
        The engine's arrays (:mod:`mbvi.engine.api`); ``ws[2]`` is this plugin's two scratch rows.
    q, v : ndarray, (nq,)
        Positions and velocities, m and m/s (rotation columns for rigid bodies).
    t, h : float
        Time at the start of the step and the step, s.
    params : ndarray
        ``[tol, maxiter]`` (:meth:`Leapfrog.kernel_params`).

    Returns
    -------
    int
        0 when the step went well, 1 when a projection or a factorization failed.
    """
    a, vh = ws[2][0], ws[2][1]
    tol, maxiter = params[0], int(params[1])
    n = len(q)
    if not api.accelerations(model, ws, q, v, t, a):  # half kick
        return 1
    for i in range(n):
        vh[i] = v[i] + 0.5 * h * a[i]
        q[i] += h * vh[i]  # drift
    if not api.project_position(model, ws, q, tol, maxiter):
        return 1
    if not api.accelerations(model, ws, q, vh, t + h, a):  # half kick, predictor
        return 1
    for i in range(n):
        v[i] = vh[i] + 0.5 * h * a[i]
    if api.n_rows(model) > 0 or api.velocity_dependent(model):  # a depends on v: one corrector pass
        if not api.accelerations(model, ws, q, v, t + h, a):
            return 1
        for i in range(n):
            v[i] = vh[i] + 0.5 * h * a[i]
    return 0 if api.project_velocity(model, ws, q, v) else 1


class Leapfrog(mbvi.Integrator):
    """Velocity Verlet (leapfrog) with projection onto the constraints.

    Parameters
    ----------
    system : mbvi.System
        The assembled system.
    dt : float
        Step size h, s.
    tol : float, default: 1e-12
        Relative constraint tolerance of the position projection
        (``max |g / constraint_scale|``).
    maxiter : int, default: 50
        Newton iterations allowed in the position projection.

    Raises
    ------
    ValueError
        Non-positive ``dt`` or an unknown option.

    Notes
    -----
    Global order 2 (measured by mbvi's test suite and this package's tests),
    not symplectic, not variational. Per step: three factorizations of
    G M⁻¹ Gᵀ for the accelerations, one per Newton iteration of the position
    projection and one for the velocity projection.

    Examples
    --------
    >>> import mbvi
    >>> scene = mbvi.Scene(gravity=(0, 0, -1))
    >>> _ = scene.add(mbvi.Particle("bob", mass=1.0, position=(1, 0, 0)))
    >>> _ = scene.add(mbvi.Rod("world", "bob"))
    >>> traj = mbvi.simulate(scene, t_end=1.0, dt=0.01, integrator="leapfrog")
    >>> bool(traj.constraint_error.max() < 1e-10)
    True
    """

    name = "leapfrog"
    order = 2
    symplectic = False
    #: it applies system.force(q, v, t) in its kicks, so mbvi may give it forced scenes
    handles = frozenset({"constraints", "forces"})
    variational = False
    options = {"tol": 1e-12, "maxiter": 50}
    #: the compiled step mbvi runs (one compiled call a run) and its two scratch rows (accelerations, v½)
    kernel = leapfrog_step
    scratch_rows = 2

    def __init__(self, system: mbvi.System, dt: float, **options: Any) -> None:
        super().__init__(system, dt, **options)
        self.tol = self.check_option("tol", self.tol)  # a ValueError naming the option, not a failed step
        self.maxiter = self.check_option("maxiter", self.maxiter, integer=True)
        self.constrained = len(system.active) > 0
        # ∇U at the last step's end point, reused by the next step's first kick
        self._cached_q: np.ndarray | None = None
        self._cached_grad: np.ndarray | None = None

    def kernel_params(self) -> np.ndarray:
        """``[tol, maxiter]`` for :func:`leapfrog_step`."""
        return np.array([self.tol, self.maxiter], dtype=float)

    def acceleration(self, q: np.ndarray, v: np.ndarray, t: float, grad: np.ndarray) -> np.ndarray:
        """Accelerations of the index-1 formulation, a = M⁻¹(f − Gᵀλ), shape (nq,).

        Parameters
        ----------
        q, v : ndarray, shape (nq,)
            Positions (on the constraints) and velocities.
        t : float
            Time, s.
        grad : ndarray, shape (nq,)
            ∇U(q), J/m (passed in so that it can be reused).
        """
        sysm = self.system
        f = -grad
        if sysm.has_forces:
            f = f + sysm.force(q, v, t)
        Wf = sysm.inv_mass * f
        if not self.constrained:
            return Wf
        factor, gdata = sysm.factor(q)  # A = G M⁻¹ Gᵀ on the active rows, and G's values
        rhs = sysm.G_matvec(gdata, Wf) + sysm.constraint_curvature(v)[sysm.active]
        lam = factor.solve(rhs)
        return Wf - sysm.inv_mass * sysm.G_rmatvec(gdata, lam)

    def _gradient(self, q: np.ndarray) -> np.ndarray:
        if q is self._cached_q and self._cached_grad is not None:
            return self._cached_grad
        return self.system.potential_gradient(q)

    def step(self, state: mbvi.State, t: float) -> mbvi.State:
        """One step of size ``dt`` from ``(state, t)``.

        Parameters
        ----------
        state : mbvi.State
            Positions on the constraints and tangent velocities, shapes (nq,).
        t : float
            Time at the start of the step, s.

        Returns
        -------
        mbvi.State
            The state at ``t + dt``.

        Raises
        ------
        mbvi.SolverError
            When the position projection does not converge (step too large).
        """
        sysm, h = self.system, self.dt
        q0, v0 = state.q, state.v
        v_half = v0 + 0.5 * h * self.acceleration(q0, v0, t, self._gradient(q0))
        q1 = sysm.project_position(q0 + h * v_half, maxiter=self.maxiter, tol=self.tol)
        grad1 = sysm.potential_gradient(q1)
        v1 = v_half + 0.5 * h * self.acceleration(q1, v_half, t + h, grad1)
        if self.constrained or sysm.has_velocity_forces:  # a depends on v: one corrector pass
            v1 = v_half + 0.5 * h * self.acceleration(q1, v1, t + h, grad1)
        v1 = sysm.project_velocity(q1, v1)
        self._cached_q, self._cached_grad = q1, grad1
        return mbvi.State(q1, v1)


@mbvi.hookimpl
def register_integrators(register):
    """Register :class:`Leapfrog` with mbvi (called once, when the registry is first used)."""
    register(Leapfrog)
