"""Hirai's pendulum in Cartesian x, y: the rod as a constraint, with viscous friction and a torque.

L = ½m(ẋ² + ẏ²) − m g y with g(x, y) = x² + y² − l² = 0 kept by a Lagrange
multiplier, the friction torque −cθ̇ and a torque τ entering as the
generalized force Q = (−c ẋ − τ y, −c ẏ + τ x)/l² by the discrete
Lagrange–d'Alembert principle. The rod holds to round-off at every step, and
the bob settles at the static equilibrium sin θ = τ/(m g l)
(``mbvi.equilibrium``). The picture is the phase portrait of x.
"""

from __future__ import annotations

import math
import numbers

import sympy as sp

import mbvi

T_END = 20.0
DT = 1e-2
INTEGRATOR = "midpoint"
GALLERY_T_END = 20.0


def build(
    m: float = 0.01,
    length: float = 2.0,
    g: float = 9.8,
    friction: float = 0.004,
    torque: float = 0.05,
    theta0: float = 1.0,
) -> mbvi.LagrangianSystem:
    """Bob of mass m (kg) on a rod of length l (m); friction c (N·m·s), torque τ (N·m); θ₀ rad from the bottom.

    Parameters
    ----------
    m : float, default: 0.01
        Bob mass, kg.
    length : float, default: 2
        Rod length l, m: a positive number up to 1e150 (its square enters the constraint and the force).
    g : float, default: 9.8
        Gravitational acceleration, m/s².
    friction : float, default: 0.004
        Viscous friction c of the hinge, N·m·s.
    torque : float, default: 0.05
        Steady torque τ, N·m.
    theta0 : float, default: 1
        Initial angle from the bottom, rad (released at rest).

    Raises
    ------
    ValueError
        For a ``length`` that is not a positive number up to 1e150 (0 divided by zero in the force, a
        negative one put the bob on the other side, 1e200 overflowed l²).
    """
    if not (isinstance(length, numbers.Real) and not isinstance(length, bool) and 0 < length <= 1e150):
        raise ValueError(
            f"hirai_pendulum: length must be a positive number of metres up to 1e150 (l² must not overflow), "
            f"got {length!r}"
        )
    length = float(length)
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    L = m * (vx**2 + vy**2) / 2 - m * g * y
    Q = [(-friction * vx - torque * y) / length**2, (-friction * vy + torque * x) / length**2]
    q0 = [length * math.sin(theta0), -length * math.cos(theta0)]
    return mbvi.LagrangianSystem(
        L,
        coordinates=[x, y],
        velocities=[vx, vy],
        constraints=[x**2 + y**2 - length**2],
        force=Q,
        initial_state=mbvi.State(q0, [0.0, 0.0]),
        name="Hirai's pendulum in x, y",
    )
