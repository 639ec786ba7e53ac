"""A heavy symmetric top: a disc on a massless stem, its tip on a ball joint at the origin.

The symmetry axis is tilted by ``tilt`` from the vertical. With ``steady=True``
(default) the initial angular velocity is set for steady precession: the
precession rate Ω about the vertical is the slow root of

    A cos θ Ω² − C ω₃ Ω + m g ℓ = 0,

with A = A_cm + m ℓ² the transverse moment about the tip, C the axial moment
and ω₃ the spin (the angular velocity along the axis); for a fast top
Ω ≈ m g ℓ / (C ω₃). With ``steady=False`` the top is released with spin only
and nutates.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial.transform import Rotation

import mbvi

T_END = 4.0
DT = 5e-4


def precession_rate(
    mass: float, arm: float, transverse: float, axial: float, spin: float, tilt: float, g: float = 9.81
) -> float:
    """Steady (slow) precession rate Ω of a heavy symmetric top, rad/s.

    Parameters
    ----------
    mass : float
        Mass m, kg.
    arm : float
        Distance ℓ from the tip to the centre of mass, m.
    transverse, axial : float
        Moments of inertia about the centre of mass, kg m² (transverse A_cm, axial C).
    spin : float
        ω₃, the angular velocity component along the symmetry axis, rad/s.
    tilt : float
        Angle θ of the axis from the vertical, rad.
    g : float, default: 9.81
        Gravity, m/s².

    Raises
    ------
    ValueError
        When the top spins too slowly to precess steadily at this tilt.
    """
    A = transverse + mass * arm * arm
    b = axial * spin
    a = A * math.cos(tilt)
    c = mass * g * arm
    disc = b * b - 4 * a * c
    if disc < 0 or (b == 0 and a == 0):
        raise ValueError(f"spinning_top: spin {spin:g} rad/s is too slow for steady precession at tilt {tilt:g} rad")
    # the root of smaller magnitude, 2c/(b + sgn(b)√disc): the textbook (b − sgn(b)√disc)/(2a) subtracts two
    # nearly equal numbers when 4ac ≪ b² (a fast top, or a tilt near π/2, where cos θ → 0) and lost up to
    # 5 digits at θ = π/2 − 1e-11; this form has no cancellation and gives c/b at a = 0 without a special case
    return 2 * c / (b + math.copysign(math.sqrt(disc), b))


def build(
    spin: float = 80.0,
    tilt: float = 0.5,
    radius: float = 0.05,
    thickness: float = 0.02,
    arm: float = 0.04,
    density: float = 7800.0,
    g: float = 9.81,
    steady: bool = True,
) -> mbvi.Scene:
    """A heavy top.

    Parameters
    ----------
    spin : float, default: 80
        Spin ω₃ about the symmetry axis, rad/s.
    tilt : float, default: 0.5
        Initial angle of the axis from the vertical, rad.
    radius, thickness : float, default: 0.05, 0.02
        Disc radius and thickness, m.
    arm : float, default: 0.04
        Distance from the tip (the ball joint) to the disc centre, m.
    density : float, default: 7800
        Disc density, kg/m³ (steel).
    g : float, default: 9.81
        Gravity along −z, m/s².
    steady : bool, default: True
        Start with the steady-precession rate (else with no precession).

    Raises
    ------
    ValueError
        For a ``steady`` that is not a bool (the command line's ``--param steady=false`` is the string
        ``'false'``, which Python counts as true: write ``steady=False``), or a spin too slow for steady
        precession.
    """
    if not isinstance(steady, (bool, np.bool_)):
        raise ValueError(
            f"spinning_top: steady must be True or False, got {steady!r} "
            "(on the command line: --param steady=True or --param steady=False)"
        )
    shape = mbvi.Cylinder(radius, thickness)
    m, J = shape.mass_properties(density)
    omega_p = precession_rate(m, arm, J[0], J[2], spin, tilt, g) if steady else 0.0
    orientation = Rotation.from_rotvec([tilt, 0.0, 0.0])
    e3 = orientation.apply([0.0, 0.0, 1.0])
    omega = omega_p * np.array([0.0, 0.0, 1.0]) + (spin - omega_p * math.cos(tilt)) * e3
    com = arm * e3
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    scene.add(
        mbvi.RigidBody(
            "top",
            mass=m,
            inertia=J,
            position=com,
            orientation=orientation,
            velocity=np.cross(omega, com),
            angular_velocity=omega,
            shape=shape,
        )
    )
    scene.add(mbvi.Spherical("world", "top", anchor=(0.0, 0.0, 0.0), name="tip"))
    return scene
