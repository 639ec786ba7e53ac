"""An elastic bar clamped at one end and loaded at the other: ρA u_tt = (EA u_x)_x.

A steel bar of length L along x is clamped at x = 0 (``clamp="start"``) and
pulled along its axis at the free end x = L by a force f(t). Axial waves
travel at c = √(E/ρ) (≈ 5.2 km/s in steel) and reflect at both ends; a
constant load gives the static tip extension fL/EA, and the bar's natural
frequencies are (2n − 1)πc/2L (``mbvi.modes``). The bar has no bending
stiffness, so it is also a string: its transverse modes are stiffened only by
tension.

Loads: ``"pulse"`` (default) a smooth sin² pulse of length ``duration`` that
runs to the clamp and back; ``"step"`` a force switched on at t = 0, under
which the tip oscillates between 0 and 2fL/EA with period 4L/c; ``"constant"``
the same load, for statics.

The explicit ``verlet`` integrator needs dt ≤ ℓ/c (ℓ = L/segments); at
exactly dt = ℓ/c it reproduces the travelling wave exactly (the "magic" time
step of the discrete wave equation). ``DT`` suits the default 40 segments.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mbvi

# 2.07 × 4L/c (4L/c = 0.773 ms at the defaults, the fundamental's period): ≈ 2 periods of the fundamental, in which
# the pulse runs to the clamp and back 4 times
T_END = 1.6e-3
DT = 4e-6  # 0.83 ℓ/c at the defaults


def tip_load(load: str, force: float, duration: float) -> Callable[[float], tuple[float, float, float]] | tuple:
    """The tip force f(t) along +x, N (a callable, or a constant vector for ``"constant"``)."""
    if load == "constant":
        return (force, 0.0, 0.0)
    if load == "step":
        return lambda t: (force if t >= 0.0 else 0.0, 0.0, 0.0)
    if load == "pulse":
        return lambda t: (force * math.sin(math.pi * t / duration) ** 2 if 0.0 <= t <= duration else 0.0, 0.0, 0.0)
    raise ValueError(f"axial_beam: load must be 'pulse', 'step' or 'constant', got {load!r}")


def build(
    length: float = 1.0,
    segments: int = 40,
    density: float = 7850.0,
    area: float = 1e-4,
    youngs_modulus: float = 2.1e11,
    force: float = 1e4,
    load: str = "pulse",
    duration: float | None = None,
) -> mbvi.Scene:
    """A bar ``bar[0]`` … ``bar[segments]`` clamped at ``bar[0]``, tip load on ``bar[segments]``.

    Parameters
    ----------
    length : float, default: 1
        L, m.
    segments : int, default: 40
        Number of linear elements.
    density : float, default: 7850
        ρ, kg/m³ (steel).
    area : float, default: 1e-4
        A, m².
    youngs_modulus : float, default: 2.1e11
        E, Pa (steel).
    force : float, default: 1e4
        Load amplitude f, N.
    load : {"pulse", "step", "constant"}, default: "pulse"
    duration : float, optional
        Pulse length, s (default: 0.2 L/c, a pulse 0.2 L long).

    The load is the force ``"tip_load"``; gravity is off.

    Raises
    ------
    ValueError
        For a length or duration that is not a positive finite number (a negative length turned the bar to −x,
        so that the tip load compressed it; a negative duration never applied the pulse, a zero one divided by
        zero mid-run).
    """
    for what, value in (("length", length), ("duration", 1.0 if duration is None else duration)):
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf):
            raise ValueError(f"axial_beam: {what} must be a positive number, got {value!r}")
    scene = mbvi.Scene(gravity=None)
    bar = scene.add(
        mbvi.Beam(
            "bar",
            start=(0.0, 0.0, 0.0),
            end=(length, 0.0, 0.0),
            segments=segments,
            density=density,
            area=area,
            youngs_modulus=youngs_modulus,
            clamp="start",
        )
    )
    if duration is None:
        duration = 0.2 * length / bar.wave_speed
    scene.add(mbvi.ExternalForce(bar.nodes[-1], force=tip_load(load, force, duration), name="tip_load"))
    return scene
