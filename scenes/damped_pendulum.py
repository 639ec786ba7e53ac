"""The seed course's damped pendulum: 30 % and 80 % of critical damping.

A bob of mass m on a massless rod of length l swings under gravity g from
θ₀ = π/4 (m = l = g = 1 by default). Damping is either linear air drag on the
bob (``model="drag"``, f = −c v, the seed's air resistance) or viscous
friction in the hinge (``model="joint"``, torque −b θ̇ at a revolute joint; the
bob is then a small rigid sphere). Both are set from the damping ratio ζ of the
linearized pendulum:

    drag:   c = 2 ζ m ω₀,            ω₀ = √(g/l)
    joint:  b = 2 ζ √(I m g l),      I = m l² + (2/5) m r²   (about the hinge)

The point of the scene (the seed's exercise): run it at dt = 2⁻⁵ and 2⁻¹⁰.
Under a forced variational integrator (``verlet``, the discrete
Lagrange–d'Alembert principle) the two energy-versus-time curves lie on top of
each other; under ``implicit_euler`` the coarse step adds its own numerical
dissipation and the curves separate. :func:`compare` measures exactly that::

    mbvi run scenes/damped_pendulum.py --param damping_ratio=0.8 --dt 0.0009765625
    python scenes/damped_pendulum.py          # prints the comparison table
"""

from __future__ import annotations

import math
import numbers

import numpy as np

import mbvi

T_END = 20.0
DT = 2.0**-5
INTEGRATOR = "verlet"


def _positive(name: str, value: object, unit: str = "metres") -> float:
    """``value`` as a positive finite number, else a ValueError naming the parameter."""
    if not (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)) and 0 < value < math.inf):
        raise ValueError(f"damped_pendulum: {name} must be a positive number of {unit}, got {value!r}")
    return float(value)


def damping_coefficient(
    damping_ratio: float,
    mass: float = 1.0,
    length: float = 1.0,
    g: float = 1.0,
    model: str = "drag",
    bob_radius: float = 0.05,
) -> float:
    """Damping coefficient that gives the linearized pendulum the damping ratio ζ.

    Parameters
    ----------
    damping_ratio : float
        ζ (1 = critical damping).
    mass, length, g : float
        Bob mass (kg), rod length (m), gravitational acceleration (m/s²).
    model : {"drag", "joint"}, default: "drag"
        Drag on the bob (returns c, N s/m) or hinge friction (returns b, N m s/rad).
    bob_radius : float, default: 0.05
        Radius of the rigid bob of the ``"joint"`` model, m.

    Returns
    -------
    float
        c = 2 ζ m √(g/l) or b = 2 ζ √(I m g l) with I = m l² + (2/5) m r².

    Raises
    ------
    ValueError
        For a ``length`` or ``g`` that is not a positive finite number: ζ is the damping ratio of the
        linearized pendulum, whose ω₀ = √(g/l) needs both (they gave "math domain error").
    """
    length = _positive("length", length)
    g = _positive("g", g, "m/s² (the damping ratio is that of the linearized pendulum, ω₀ = √(g/l))")
    if model == "drag":
        return 2.0 * damping_ratio * mass * math.sqrt(g / length)
    if model == "joint":
        inertia = mass * length**2 + 0.4 * mass * bob_radius**2
        return 2.0 * damping_ratio * math.sqrt(inertia * mass * g * length)
    raise ValueError(f"damped_pendulum: model must be 'drag' or 'joint', got {model!r}")


def build(
    damping_ratio: float = 0.3,
    theta0: float = math.pi / 4,
    mass: float = 1.0,
    length: float = 1.0,
    g: float = 1.0,
    model: str = "drag",
    bob_radius: float = 0.05,
) -> mbvi.Scene:
    """A damped planar pendulum in the x–z plane, released from rest.

    Parameters
    ----------
    damping_ratio : float, default: 0.3
        ζ of the linearized pendulum (the seed's 0.3 and 0.8).
    theta0 : float, default: π/4
        Initial angle from the downward vertical, rad.
    mass : float, default: 1
        Bob mass, kg.
    length : float, default: 1
        Rod length (pivot to the bob's centre), m.
    g : float, default: 1
        Gravitational acceleration, m/s².
    model : {"drag", "joint"}, default: "drag"
        ``"drag"``: a particle on a :class:`mbvi.Rod` with :class:`mbvi.Drag`;
        ``"joint"``: a rigid sphere on a :class:`mbvi.Revolute` hinge with
        :class:`mbvi.JointDamping`.
    bob_radius : float, default: 0.05
        Radius of the rigid bob (``"joint"`` model), m.

    Raises
    ------
    ValueError
        For a ``length`` or ``g`` that is not a positive finite number (see :func:`damping_coefficient`).
    """
    coefficient = damping_coefficient(damping_ratio, mass, length, g, model, bob_radius)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    bob = (length * math.sin(theta0), 0.0, -length * math.cos(theta0))
    if model == "drag":
        scene.add(mbvi.Particle("bob", mass=mass, position=bob))
        scene.add(mbvi.Rod("world", "bob"))
        scene.add(mbvi.Drag("bob", coefficient=coefficient))
    else:
        scene.add(mbvi.RigidBody("bob", mass=mass, shape=mbvi.Sphere(bob_radius), position=bob))
        scene.add(mbvi.Revolute("world", "bob", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="hinge"))
        scene.add(mbvi.JointDamping("hinge", coefficient=coefficient))
    return scene


def compare(
    damping_ratio: float = 0.3,
    integrators: tuple[str, ...] = ("verlet", "implicit_euler"),
    steps: tuple[float, float] = (2.0**-5, 2.0**-10),
    t_end: float = 10.0,
    **params,
) -> dict[str, float]:
    """How much the energy curve depends on the step, per integrator.

    Parameters
    ----------
    damping_ratio : float, default: 0.3
    integrators : tuple of str
        Registered integrator names.
    steps : (float, float), default: (2⁻⁵, 2⁻¹⁰)
        Coarse and fine step, s; the coarse must be a multiple of the fine.
    t_end : float, default: 10
        Duration, s.
    **params
        Passed to :func:`build`.

    Returns
    -------
    dict
        ``max_t |E_coarse(t) − E_fine(t)| / (E(0) − E_fine(t_end))`` per integrator:
        the disagreement as a fraction of the dissipated energy.
    """
    coarse, fine = steps
    stride = round(coarse / fine)
    out = {}
    for name in integrators:
        a = mbvi.simulate(build(damping_ratio, **params), t_end, coarse, name)
        b = mbvi.simulate(build(damping_ratio, **params), t_end, fine, name)
        dissipated = b.energy[0] - b.energy[-1]
        out[name] = float(np.max(np.abs(a.energy - b.energy[::stride])) / dissipated)
    return out


if __name__ == "__main__":
    for zeta in (0.3, 0.8):
        for name, err in compare(zeta).items():
            print(f"zeta = {zeta}: {name:15s} energy curves at dt = 2^-5 and 2^-10 differ by {100 * err:.3f} %")
