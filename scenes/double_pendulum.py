"""A double pendulum: two bobs on massless rods, released from rest.

The benchmark of chaotic motion: energy stays in a narrow band under the
variational integrators for as long as you care to run it.
"""

from __future__ import annotations

import math
import numbers

import mbvi

T_END = 10.0
DT = 1e-3


def _positive(name: str, value: object) -> float:
    """``value`` as a positive finite number, else a ValueError naming the parameter."""
    if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value < math.inf):
        raise ValueError(f"double_pendulum: {name} must be a positive number of metres, got {value!r}")
    return float(value)


def build(
    m1: float = 1.0,
    m2: float = 1.0,
    l1: float = 1.0,
    l2: float = 1.0,
    g: float = 9.81,
    theta1: float = math.pi / 2,
    theta2: float = math.pi / 2,
) -> mbvi.Scene:
    """Double pendulum in the x–z plane, released from rest.

    Parameters
    ----------
    m1, m2 : float, default: 1, 1
        Bob masses, kg.
    l1, l2 : float, default: 1, 1
        Rod lengths (pivot–bob1, bob1–bob2), m.
    g : float, default: 9.81
        Gravitational acceleration, m/s².
    theta1, theta2 : float, default: π/2, π/2
        Initial angles of the rods from the downward vertical, rad.

    Raises
    ------
    ValueError
        For an ``l1`` or ``l2`` that is not a positive finite number (a negative one turned the rod round).
    """
    l1, l2 = _positive("l1", l1), _positive("l2", l2)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    p1 = (l1 * math.sin(theta1), 0.0, -l1 * math.cos(theta1))
    p2 = (p1[0] + l2 * math.sin(theta2), 0.0, p1[2] - l2 * math.cos(theta2))
    scene.add(mbvi.Particle("bob1", mass=m1, position=p1))
    scene.add(mbvi.Particle("bob2", mass=m2, position=p2))
    scene.add(mbvi.Rod("world", "bob1"))
    scene.add(mbvi.Rod("bob1", "bob2"))
    return scene
