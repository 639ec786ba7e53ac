"""A pendulum under a steady horizontal load: it swings about a tilted equilibrium.

A bob of mass m on a massless rod of length l feels gravity and a constant
horizontal force f. Its static equilibrium (``mbvi.equilibrium``) leans at
tan θ = f/(mg) with rod tension √(f² + (mg)²), the rod's Lagrange
multiplier; small oscillations about it have ω² = √(f² + (mg)²)/(ml). Released
hanging straight down (the default θ₀ = 0), the bob swings between 0 and
about 2θ about the tilted equilibrium.
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
        raise ValueError(f"loaded_pendulum: {name} must be a positive number of metres, got {value!r}")
    return float(value)


def build(
    mass: float = 1.0, length: float = 1.0, g: float = 9.81, force: float = 5.0, theta0: float = 0.0
) -> mbvi.Scene:
    """A pendulum in the x–z plane pushed along +x.

    Parameters
    ----------
    mass : float, default: 1
        Bob mass m, kg.
    length : float, default: 1
        Rod length l, m.
    g : float, default: 9.81
        Gravitational acceleration, m/s².
    force : float, default: 5
        Steady horizontal load f along +x, N.
    theta0 : float, default: 0
        Initial angle from the downward vertical towards +x, rad (released at rest).

    The rod is the joint ``"world-bob"``, the load the force ``"load"``.

    Raises
    ------
    ValueError
        For a ``length`` that is not a positive finite number (a negative one hung the bob above the pivot).
    """
    length = _positive("length", length)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    scene.add(mbvi.Particle("bob", mass=mass, position=(length * math.sin(theta0), 0.0, -length * math.cos(theta0))))
    scene.add(mbvi.Rod("world", "bob"))
    scene.add(mbvi.ExternalForce("bob", force=(force, 0.0, 0.0), name="load"))
    return scene
