"""A double pendulum: two bobs on massless rods, released from rest.

The benchmark of chaotic motion: energy stays in a narrow band under the
variational integrators for as long as you care to run it.
"""

from __future__ import annotations

import math

import mbvi

T_END = 10.0
DT = 1e-3


def build(
    m1: float = 1.0,
    m2: float = 1.0,
    l1: float = 1.0,
    l2: float = 1.0,
    g: float = 9.81,
    theta1: float = math.pi / 2,
    theta2: float = math.pi / 2,
) -> mbvi.Scene:
    """Double pendulum in the x–z plane; angles from the downward vertical, rad; SI units."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    p1 = (l1 * math.sin(theta1), 0.0, -l1 * math.cos(theta1))
    p2 = (p1[0] + l2 * math.sin(theta2), 0.0, p1[2] - l2 * math.cos(theta2))
    scene.add(mbvi.Particle("bob1", mass=m1, position=p1))
    scene.add(mbvi.Particle("bob2", mass=m2, position=p2))
    scene.add(mbvi.Rod("world", "bob1"))
    scene.add(mbvi.Rod("bob1", "bob2"))
    return scene
