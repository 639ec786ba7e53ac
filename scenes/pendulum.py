"""The classic pendulum in Cartesian coordinates: a bob on a massless rod.

m = l = g = 1 and θ₀ = π/4 by default (the seed course's example); the exact
period is 4 K(sin²(θ₀/2)) √(l/g) = 6.53434… s.
"""

from __future__ import annotations

import math
import numbers

import mbvi

T_END = 20.0
DT = 2.0**-6


def _positive(name: str, value: object) -> float:
    """``value`` as a positive finite number, else a ValueError naming the parameter."""
    if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value < math.inf):
        raise ValueError(f"pendulum: {name} must be a positive number of metres, got {value!r}")
    return float(value)


def build(
    mass: float = 1.0, length: float = 1.0, g: float = 1.0, theta0: float = math.pi / 4, omega0: float = 0.0
) -> mbvi.Scene:
    """A planar pendulum swinging in the x–z plane.

    Parameters
    ----------
    mass : float, default: 1
        Bob mass, kg.
    length : float, default: 1
        Rod length, m.
    g : float, default: 1
        Gravitational acceleration, m/s².
    theta0 : float, default: π/4
        Initial angle from the downward vertical, rad.
    omega0 : float, default: 0
        Initial angular velocity, rad/s.

    Raises
    ------
    ValueError
        For a ``length`` that is not a positive finite number (a negative one put the bob on the other side
        of the pivot: a different swing from the one asked for).
    """
    length = _positive("length", length)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    s, c = math.sin(theta0), math.cos(theta0)
    scene.add(
        mbvi.Particle(
            "bob",
            mass=mass,
            position=(length * s, 0.0, -length * c),
            velocity=(length * omega0 * c, 0.0, length * omega0 * s),
        )
    )
    scene.add(mbvi.Rod("world", "bob"))
    return scene
