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

The spring is linear in u only while the particle stays on its side of the anchor, x = L₀ + u > 0:
:func:`build` refuses a drive or a start whose closed-form motion would reach the anchor
(:func:`closest_approach`), such as ``damping=0.2, omega=2`` (A = 2.5 m) at the default L₀ = 1 m.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.optimize import minimize_scalar

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


def closest_approach(
    mass: float = 1.0,
    stiffness: float = 4.0,
    damping: float = 2.0,
    amplitude: float = 1.0,
    omega: float = 3.0,
    u0: float = 0.0,
    v0: float = 0.0,
) -> float:
    """The least displacement min over t ≥ 0 of u(t), m, of the closed-form motion from (u0, v0), transient included.

    u(t) = A cos(ω t − φ) + u_h(t), u_h the free damped motion that makes up the start. The particle stays
    clear of the spring's anchor while this exceeds −L₀. Undamped, the free motion never dies and the two
    beat: the result is then the bound −(|A| + |u_h|max), which a long run approaches.
    """
    A, phi = steady_state(mass, stiffness, damping, amplitude, omega)
    lowest = -abs(A) if omega != 0 else A  # the steady motion's own minimum (a constant one at ω = 0)
    uh, vh = u0 - A * math.cos(phi), v0 - A * omega * math.sin(phi)  # what the free motion must make up
    gamma, w0 = damping / (2 * mass), math.sqrt(stiffness / mass)
    s = complex(gamma * gamma - w0 * w0) ** 0.5  # roots −γ ± s of m r² + c r + k
    if abs(s) > 1e-6 * max(gamma, w0):
        a1 = (vh - (-gamma - s) * uh) / (2 * s)
        a2 = uh - a1
        rate, size = gamma - s.real, abs(a1) + abs(a2)  # slowest decay rate, envelope at t = 0

        def free(t):
            return (a1 * np.exp((-gamma + s) * t) + a2 * np.exp((-gamma - s) * t)).real
    else:  # critically damped (to 1e-6): (uh + (vh + γ uh) t) e^{−γt}
        rate, size = gamma / 2, abs(uh) + 2 * abs(vh + gamma * uh) / (math.e * gamma)

        def free(t):
            return (uh + (vh + gamma * uh) * t) * np.exp(-gamma * t)

    if size == 0.0:
        return lowest
    fastest = max(omega, w0, abs(s.imag), gamma + abs(s.real))
    window = (math.log(max(size / (1e-9 * max(size, abs(A))), 1.0)) + 1.0) / rate if rate > 0 else math.inf
    n = window * fastest / (2 * math.pi) * 128 + 2  # 128 samples a period of the fastest motion
    if n > 2e6:  # (nearly) undamped: the beat's bound
        return min(lowest, -abs(A) - size)
    n = math.ceil(n)

    def u(t):
        return A * np.cos(omega * t - phi) + free(t)

    t = np.linspace(0.0, window, n)
    values = u(t)
    i = int(np.argmin(values))
    near = minimize_scalar(u, bounds=(t[max(i - 1, 0)], t[min(i + 1, n - 1)]), method="bounded",
                           options={"xatol": 1e-12 * max(window, 1.0)})  # fmt: skip
    return float(min(lowest, values[i], near.fun))


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
        L₀, m: the spring pulls from the origin; the motion must keep u > −L₀ (build refuses it otherwise).
        0 is a zero-length spring, linear through the anchor.
    u0, v0 : float, default: 0
        Initial displacement from the rest length (m) and velocity (m/s) along x.

    Raises
    ------
    ValueError
        For a parameter that is not a finite number (mass > 0; stiffness, damping, rest_length ≥ 0), an
        undamped drive at resonance, or a motion that would reach the spring's anchor: a steady amplitude
        A ≥ L₀, or a transient from (u0, v0) that reaches u = −L₀. Past the anchor the spring pushes the
        particle away from the origin on the other side (x < 0), the equation above no longer holds and the
        run, unwarned, gave another motion (A = 2.5 m at ``damping=0.2, omega=2`` ran at 0.36 m): use a
        larger rest_length.
    """
    values = {"mass": mass, "stiffness": stiffness, "damping": damping, "amplitude": amplitude, "omega": omega,
              "rest_length": rest_length, "u0": u0, "v0": v0}  # fmt: skip
    for what, value in values.items():
        if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)):
            raise ValueError(f"driven_oscillator: {what} must be a finite number, got {value!r}")
    if not mass > 0:
        raise ValueError(f"driven_oscillator: mass must be positive, got {mass!r}")
    for what in ("stiffness", "damping", "rest_length"):
        if values[what] < 0:
            raise ValueError(f"driven_oscillator: {what} must be non-negative, got {values[what]!r}")
    if stiffness > 0 and damping == 0 and stiffness == mass * omega**2 and amplitude != 0:
        raise ValueError(
            f"driven_oscillator: undamped (damping=0) and driven at resonance (omega = √(k/m) = {omega:g} rad/s), "
            "the amplitude grows without bound; add damping or detune omega"
        )
    # The bound is exact, with no margin (such as 0.9 L₀): the model is linear while x = L₀ + u > 0, so the closed
    # form is the motion right up to the anchor, and a margin would refuse runs that are right. The steady
    # amplitude alone is not enough: from rest, a lightly damped drive off resonance beats up to nearly 2A
    # (damping=0.01, omega=1.5: A = 0.57 m, u reaches −1.13 m), hence closest_approach. A run's own step error,
    # O((ωh)²), is the run's to judge. With L₀ = 0 the spring is linear through the anchor and nothing needs
    # refusing; with k = 0 it exerts no force.
    if stiffness > 0 and rest_length > 0:
        A, _ = steady_state(mass, stiffness, damping, amplitude, omega)
        steady_low = -abs(A) if omega != 0 else A
        if steady_low <= -rest_length:
            raise ValueError(
                f"driven_oscillator: the steady amplitude A = {abs(A):.4g} m (amplitude {amplitude:g} N at omega "
                f"{omega:g} rad/s, damping {damping:g} N s/m) reaches the spring's anchor: rest_length L₀ = "
                f"{rest_length:g} m, so the particle would pass through it and the run would give another motion; "
                f"use a rest_length larger than {abs(A):.4g} m"
            )
        low = closest_approach(mass, stiffness, damping, amplitude, omega, u0, v0)
        if low <= -rest_length:
            raise ValueError(
                f"driven_oscillator: starting from u0 = {u0:g} m, v0 = {v0:g} m/s the motion reaches u = {low:.4g} m "
                f"before it settles to the steady amplitude A = {abs(A):.4g} m: past the spring's anchor "
                f"(rest_length L₀ = {rest_length:g} m), where the run would give another motion; use a rest_length "
                f"larger than {-low:.4g} m, or start nearer the steady motion"
            )
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("mass", mass=mass, position=(rest_length + u0, 0.0, 0.0), velocity=(v0, 0.0, 0.0)))
    scene.add(mbvi.Spring("world", "mass", stiffness=stiffness, rest_length=rest_length, name="spring"))
    scene.add(mbvi.Drag("mass", coefficient=damping, name="drag"))

    def drive(t: float) -> np.ndarray:
        return np.array([amplitude * math.cos(omega * t), 0.0, 0.0])

    scene.add(mbvi.ExternalForce("mass", force=drive, name="drive"))
    return scene
