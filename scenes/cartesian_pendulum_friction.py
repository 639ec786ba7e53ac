"""The pendulum in Cartesian coordinates with viscous friction (the seed course's exercise).

A bob of mass m at x = (x, y, z) is held at distance l from the pivot by the
holonomic constraint g(x) = ½(|x|²/l − l) = 0 (a :class:`mbvi.Rod`) and slowed
by viscous friction f = −c ẋ (:class:`mbvi.Drag`); m = l = g = 1, θ₀ = π/4.
Two ways to integrate the same differential-algebraic equations
M ẍ = −∇U + f − Gᵀλ, g(x) = 0:

* **variational with multipliers** (``verlet``: RATTLE with the discrete
  Lagrange–d'Alembert forcing) — the multiplier λ is solved for at every step,
  so |g| stays at the solver tolerance (1e-12) for ever, and the damping does
  not depend on the step;
* **the constraint stabilization method** (``csm``: Baumgarte's
  g̈ + 2αġ + α²g = 0 integrated by ``scipy.integrate.solve_ivp``) — the
  constraint is only stabilized, so |g| sits at the ODE solver's tolerance
  level and depends on α.

:func:`compare` runs both; ``python scenes/cartesian_pendulum_friction.py``
prints the table::

    mbvi run scenes/cartesian_pendulum_friction.py --integrator csm --dt 0.01
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import mbvi
from mbvi.scenefile import load_scene_module

#: the classic pendulum of scenes/pendulum.py, to which this scene adds friction
_PENDULUM = load_scene_module(Path(__file__).with_name("pendulum.py"))

T_END = 20.0
DT = 1e-2
INTEGRATOR = "verlet"


def build(
    friction: float = 0.2,
    theta0: float = math.pi / 4,
    mass: float = 1.0,
    length: float = 1.0,
    g: float = 1.0,
    omega0: float = 0.0,
) -> mbvi.Scene:
    """A planar pendulum in Cartesian coordinates with viscous friction on the bob.

    Parameters
    ----------
    friction : float, default: 0.2
        Viscous friction coefficient c, N s/m (f = −c ẋ).
    theta0 : float, default: π/4
        Initial angle from the downward vertical, rad.
    mass : float, default: 1
        Bob mass, kg.
    length : float, default: 1
        Rod length, m.
    g : float, default: 1
        Gravitational acceleration, m/s².
    omega0 : float, default: 0
        Initial angular velocity, rad/s.
    """
    scene = _PENDULUM.build(mass=mass, length=length, g=g, theta0=theta0, omega0=omega0)  # bob on rod "world-bob"
    scene.add(mbvi.Drag("bob", coefficient=friction, name="friction"))
    return scene


def compare(dt: float = DT, t_end: float = T_END, alpha: float = 10.0, **params) -> dict[str, dict[str, float]]:
    """Variational integration with multipliers against the CSM baseline.

    Parameters
    ----------
    dt : float
        Step (output interval for ``csm``), s.
    t_end : float
        Duration, s.
    alpha : float, default: 10
        Baumgarte rate of the CSM, 1/s.
    **params
        Passed to :func:`build`.

    Returns
    -------
    dict
        Per method (``"verlet"``, ``"csm"``): ``constraint_error`` (max |g|, m),
        ``radial_speed`` (max |ẋ·x̂|, m/s, zero on the constraint) and
        ``energy`` (E(t_end), J).
    """
    out = {}
    for name, options in (("verlet", {}), ("csm", {"alpha": alpha})):
        traj = mbvi.simulate(build(**params), t_end, dt, name, **options)
        x, v = traj.position("bob"), traj.velocity("bob")
        radial = np.einsum("ij,ij->i", x, v) / np.linalg.norm(x, axis=1)
        out[name] = {
            "constraint_error": float(traj.constraint_error.max()),
            "radial_speed": float(np.max(np.abs(radial))),
            "energy": float(traj.energy[-1]),
        }
    return out


if __name__ == "__main__":
    for name, row in compare().items():
        print(f"{name:7s} " + "  ".join(f"{k} = {v:.3e}" for k, v in row.items()))
