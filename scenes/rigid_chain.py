"""A 3D chain of capsules on revolute joints, released from a horizontal line.

Link i is a capsule along x from (i·ℓ, 0, 0) to ((i + 1)·ℓ, 0, 0). The first
hinge holds the chain to the world at the origin. The hinge axes alternate
between the world y axis (the link swings in the vertical x–z plane) and a
tilted axis in the x–z plane, so the chain folds in three dimensions. Each
rigid link has 12 coordinates (centre of mass and rotation columns) and every
hinge gives five bilinear constraint rows; the constraint matrix is banded
and factors in linear time.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

import mbvi

T_END = 3.0
DT = 1e-3


def _positive(name: str, value: object) -> float:
    """``value`` as a positive finite number, else a ValueError naming the parameter."""
    if not (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and 0 < value < math.inf):
        raise ValueError(f"rigid_chain: {name} must be a positive number of metres, got {value!r}")
    return float(value)


def build(
    links: int = 6,
    length: float = 1.8,
    radius: float = 0.03,
    density: float = 1200.0,
    g: float = 9.81,
    twist: float = math.pi / 3,
) -> mbvi.Scene:
    """A chain of capsule links on revolute joints.

    Parameters
    ----------
    links : int, default: 6
        Number of links, a whole number ≥ 1.
    length : float, default: 1.8
        Total chain length, m (each link is length/links between hinge points).
    radius : float, default: 0.03
        Capsule radius, m.
    density : float, default: 1200
        Link density, kg/m³.
    g : float, default: 9.81
        Gravity along −z, m/s².
    twist : float, default: π/3
        Angle, rad, by which every second hinge axis is tilted from the world y
        axis about x (0 gives a planar chain).

    Raises
    ------
    ValueError
        For ``links`` that is not a whole number ≥ 1 (``True`` included), or a ``length`` that is not a
        positive finite number (0 made every hinge sit on one point).
    """
    if not (isinstance(links, numbers.Integral) and not isinstance(links, (bool, np.bool_)) and links >= 1):
        raise ValueError(f"rigid_chain: links must be a whole number >= 1, got {links!r}")
    links = int(links)
    length = _positive("length", length)
    ell = length / links
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    # body z (the capsule axis) along world x: a quarter turn about y
    R = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
    tilted = np.array([0.0, math.cos(twist), math.sin(twist)])
    names = [f"link{i}" for i in range(links)]
    for i, name in enumerate(names):
        scene.add(
            mbvi.RigidBody(
                name,
                shape=mbvi.Capsule(radius, ell),
                density=density,
                position=((i + 0.5) * ell, 0.0, 0.0),
                orientation=R,
            )
        )
    parents = ["world", *names[:-1]]
    for i, (a, b) in enumerate(zip(parents, names, strict=True)):
        axis = (0.0, 1.0, 0.0) if i % 2 == 0 else tilted
        scene.add(mbvi.Revolute(a, b, anchor=(i * ell, 0.0, 0.0), axis=axis, name=f"hinge{i}"))
    return scene
