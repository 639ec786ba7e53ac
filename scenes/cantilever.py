"""A cantilever: a steel beam with bending stiffness, clamped at one end, a load at the tip.

The beam (rectangular section ``width`` × ``height``, I = width·height³/12)
is clamped at x = 0 (position and tangent held) and carries a downward tip
load P switched on at t = 0, plus its own weight. Small static deflections
follow Euler–Bernoulli: PL³/3EI from the tip load and qL⁴/8EI from the
weight q = ρAg (``mbvi.equilibrium``); the first bending frequency is
1.875²√(EI/ρA)/L² (``mbvi.modes``). Released straight, the beam vibrates
about its static deflection.

Axial waves are thousands of times faster than bending, so the scene uses
the implicit ``midpoint`` integrator, which is stable at steps far above ℓ/c
and still resolves the slow bending motion.
"""

from __future__ import annotations

import math

import mbvi

T_END = 0.5
DT = 1e-3
INTEGRATOR = "midpoint"


def build(
    length: float = 1.0,
    segments: int = 20,
    width: float = 0.02,
    height: float = 0.01,
    density: float = 7850.0,
    youngs_modulus: float = 2.1e11,
    tip_load: float = 10.0,
    g: float = 9.81,
) -> mbvi.Scene:
    """A cantilever ``beam[0]`` … ``beam[segments]`` along x, clamped at ``beam[0]``, bending in x–z.

    Parameters
    ----------
    length : float, default: 1
        L, m.
    segments : int, default: 20
        Number of elements.
    width, height : float, default: 0.02, 0.01
        Cross-section, m (height along z, the bending direction).
    density : float, default: 7850
        ρ, kg/m³ (steel).
    youngs_modulus : float, default: 2.1e11
        E, Pa (steel).
    tip_load : float, default: 10
        Downward tip force P, N (the force ``"tip_load"``).
    g : float, default: 9.81
        Gravitational acceleration along −z, m/s² (0 for none).

    Raises
    ------
    ValueError
        For a length, width or height that is not a positive finite number (the Beam checks the others; a
        negative length made a beam along −x, a negative section a positive area and I).
    """
    for what, value in (("length", length), ("width", width), ("height", height)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf):
            raise ValueError(f"cantilever: {what} must be a positive number of metres, got {value!r}")
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    beam = scene.add(
        mbvi.Beam(
            "beam",
            start=(0.0, 0.0, 0.0),
            end=(length, 0.0, 0.0),
            segments=segments,
            density=density,
            area=width * height,
            youngs_modulus=youngs_modulus,
            second_moment=width * height**3 / 12.0,
            clamp="start",
        )
    )
    scene.add(mbvi.ExternalForce(beam.nodes[-1], force=(0.0, 0.0, -tip_load), name="tip_load"))
    return scene
