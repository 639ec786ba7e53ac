"""An N-link hanging chain of point masses on rigid rods, released from a horizontal line.

Maximal coordinates make each step O(N): the constraint matrix G M⁻¹ Gᵀ is
tridiagonal and is factored in linear time.
"""

from __future__ import annotations

import itertools
import math
import numbers

import mbvi

T_END = 3.0
DT = 1e-3


def _positive(name: str, value: object) -> float:
    """``value`` as a positive finite number, else a ValueError naming the parameter."""
    if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 < value < math.inf):
        raise ValueError(f"chain: {name} must be a positive number of metres, got {value!r}")
    return float(value)


def build(
    links: int = 20,
    length: float = 1.0,
    mass: float = 1.0,
    g: float = 9.81,
    attached: str = "one",
    angle: float = math.pi / 2,
) -> mbvi.Scene:
    """An N-link chain.

    Parameters
    ----------
    links : int, default: 20
        Number of links N (= number of bobs), a whole number ≥ 1.
    length : float, default: 1
        Total chain length, m.
    mass : float, default: 1
        Total mass, kg (equal bobs).
    g : float, default: 9.81
        Gravity, m/s².
    attached : {"one", "none"}, default: "one"
        Whether the first link hangs from the world origin or the chain is free.
    angle : float, default: π/2
        Initial angle of the straight chain from the downward vertical, rad
        (π/2: horizontal, the classic whip).

    Raises
    ------
    ValueError
        For ``links`` that is not a whole number ≥ 1 (``True`` included), or a ``length`` that is not a
        positive finite number (a negative one laid the chain out on the other side of the pivot).
    """
    if not (isinstance(links, numbers.Integral) and not isinstance(links, bool) and links >= 1):
        raise ValueError(f"chain: links must be a whole number >= 1, got {links!r}")
    links = int(links)
    length = _positive("length", length)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    ell = length / links
    names = [f"bob{i}" for i in range(1, links + 1)]
    for i, name in enumerate(names, start=1):
        r = i * ell
        scene.add(mbvi.Particle(name, mass=mass / links, position=(r * math.sin(angle), 0.0, -r * math.cos(angle))))
    if attached == "one":
        scene.add(mbvi.Rod("world", names[0]))
    elif attached != "none":
        raise ValueError(f"chain: attached must be 'one' or 'none', got {attached!r}")
    for a, b in itertools.pairwise(names):
        scene.add(mbvi.Rod(a, b))
    return scene
