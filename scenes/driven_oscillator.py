"""A driven, damped harmonic oscillator: a particle on a spring, with linear drag and a harmonic force.

The particle (mass m) sits at the rest length L₀ of a spring (stiffness k)
anchored at the origin, slides along x under linear drag f = −c v and the
prescribed force F(t) = F₀ cos(ω t) x̂ (a callable :class:`mbvi.ExternalForce`);
there is no gravity. With u = x − L₀:

    m ü + c u̇ + k u = F₀ cos ω t.

After the transient (decay rate c/2m) the motion is u(t) = A cos(ω t − φ) with

    A = F₀ / √((k − m ω²)² + (c ω)²),      φ = atan2(c ω, k − m ω²) ∈ [0, π),

which :func:`steady_state` returns. The defaults (m = 1 kg, k = 4 N/m,
c = 2 N s/m, i.e. damping ratio ζ = 0.5, F₀ = 1 N, ω = 3 rad/s) drive the
oscillator above its natural frequency ω₀ = 2 rad/s, so the response lags the
force by more than a quarter period (φ = 2.27 rad, A = 0.128 m); the transient
dies as e^{−t}.
"""

from __future__ import annotations

import math

import numpy as np

import mbvi

T_END = 20.0
DT = 1e-2
INTEGRATOR = "verlet"


def steady_state(
    mass: float = 1.0, stiffness: float = 4.0, damping: float = 2.0, amplitude: float = 1.0, omega: float = 3.0
) -> tuple[float, float]:
    """Closed-form steady-state amplitude A (m) and phase lag φ (rad, in [0, π)) of u(t) = A cos(ω t − φ)."""
    detune = stiffness - mass * omega**2
    return amplitude / math.hypot(detune, damping * omega), math.atan2(damping * omega, detune)


def build(
    mass: float = 1.0,
    stiffness: float = 4.0,
    damping: float = 2.0,
    amplitude: float = 1.0,
    omega: float = 3.0,
    rest_length: float = 1.0,
    u0: float = 0.0,
    v0: float = 0.0,
) -> mbvi.Scene:
    """The oscillator along x, starting at displacement ``u0`` with velocity ``v0``.

    Parameters
    ----------
    mass : float, default: 1
        m, kg.
    stiffness : float, default: 4
        k, N/m.
    damping : float, default: 2
        Linear drag coefficient c, N s/m.
    amplitude : float, default: 1
        F₀, N.
    omega : float, default: 3
        Driving angular frequency ω, rad/s.
    rest_length : float, default: 1
        L₀, m: the spring pulls from the origin; keep |u| < L₀.
    u0, v0 : float, default: 0
        Initial displacement from the rest length (m) and velocity (m/s) along x.
    """
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("mass", mass=mass, position=(rest_length + u0, 0.0, 0.0), velocity=(v0, 0.0, 0.0)))
    scene.add(mbvi.Spring("world", "mass", stiffness=stiffness, rest_length=rest_length, name="spring"))
    scene.add(mbvi.Drag("mass", coefficient=damping, name="drag"))

    def drive(t: float) -> np.ndarray:
        return np.array([amplitude * math.cos(omega * t), 0.0, 0.0])

    scene.add(mbvi.ExternalForce("mass", force=drive, name="drive"))
    return scene
