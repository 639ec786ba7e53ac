"""A chain hung between two supports: the discrete catenary.

``links`` rigid massless rods of length ℓ = length/links join ``links − 1``
point masses; the first and last rods hang from the world supports at
(0, 0, 0) and (span, 0, height). The chain's mass is lumped at the joints,
μℓ = mass/links on each (the half-links next to the supports are carried
by them). It starts as a circular arc of equal chords through both
supports and, released, swings about its equilibrium: the discrete
catenary, in which the horizontal tension H is the same in every rod and
the vertical tension changes by μℓg from one rod to the next. As links → ∞
it tends to the catenary z = a cosh((x − x₀)/a) + c with a = H/(μg).

``mbvi.equilibrium(build())`` gives the hanging shape directly, its rod
tensions as multipliers; ``build(start="equilibrium")`` builds the chain
already in that shape (a scene at rest).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.optimize import brentq

import mbvi

T_END = 5.0
DT = 1e-3

_EPS = float(np.finfo(float).eps)


def _real(value: object) -> bool:
    """A real number that is not a bool (``--param mass=True`` is no number of kilograms)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _positive(value: object) -> bool:
    return _real(value) and 0.0 < value < math.inf


def _links(links: object) -> int:
    if not (isinstance(links, numbers.Integral) and not isinstance(links, (bool, np.bool_)) and links >= 2):
        raise ValueError(f"hanging_chain: links must be a whole number of rods >= 2, got {links!r}")
    return int(links)


def arc(links: int, length: float, span: float, height: float = 0.0) -> np.ndarray:
    """Joint points of a chain of equal chords on a circular arc between two supports.

    Parameters
    ----------
    links : int
        Number of chords N (≥ 2).
    length : float
        Total chain length Nℓ, m; must exceed the support distance.
    span, height : float
        Horizontal (x) and vertical (z) offset of the right support from the left one, m.

    Returns
    -------
    ndarray, shape (links + 1, 3)
        Points from the left support to the right one, sagging downwards (−z).

    Raises
    ------
    ValueError
        For ``links`` not a whole number ≥ 2, a ``length`` or ``span`` that is not a positive finite number, or
        a chain no longer than the distance between its supports.
    """
    links = _links(links)
    for what, value in (("length", length), ("span", span)):
        if not _positive(value):
            raise ValueError(f"hanging_chain: {what} must be a positive number of metres, got {value!r}")
    if not (_real(height) and math.isfinite(height)):
        raise ValueError(f"hanging_chain: height must be a finite number of metres, got {height!r}")
    chord = math.hypot(span, height)
    if not length > chord * (1.0 + 1e-9):
        raise ValueError(
            f"hanging_chain: the chain (length {length:g} m) must be longer than the distance between its supports "
            f"(span {span:g} m, height {height:g} m: {chord:.6g} m); shorten span or lengthen the chain"
        )
    ell = length / links
    # equal chords ℓ subtending 2θ each: ℓ sin(Nθ)/sin θ = chord, θ in (0, π/N)
    # θ ~ π/N, so brentq's default absolute xtol (2e-12) is a relative 6e-9 at N = 1000: the end chords, which
    # absorb the error, then missed ℓ by more than a Rod allows (1e-9). Solve to a few ulps of θ instead.
    top = math.pi / links
    theta = brentq(
        lambda th: ell * math.sin(links * th) / math.sin(th) - chord,
        1e-12 * top,
        top,
        xtol=4 * _EPS * top,
        rtol=4 * _EPS,
    )
    radius = ell / (2.0 * math.sin(theta))
    phi = (2.0 * np.arange(links + 1) - links) * theta  # angle from the downward normal
    along = 0.5 * chord + radius * np.sin(phi)
    depth = radius * (np.cos(phi) - math.cos(links * theta))
    u = np.array([span, 0.0, height]) / chord  # chord direction
    n = np.array([height, 0.0, -span]) / chord  # in-plane normal pointing down
    pts = along[:, None] * u + depth[:, None] * n
    pts[0], pts[-1] = 0.0, (span, 0.0, height)
    return pts


def build(
    links: int = 20,
    length: float = 1.5,
    span: float = 1.0,
    height: float = 0.0,
    mass: float = 1.0,
    g: float = 9.81,
    start: str = "arc",
) -> mbvi.Scene:
    """A chain of ``links`` rods and ``links − 1`` joints ``p1`` … between two supports.

    Parameters
    ----------
    links : int, default: 20
        Number of rods N, a whole number ≥ 2.
    length : float, default: 1.5
        Chain length, m; longer than the distance between the supports, √(span² + height²).
    span : float, default: 1
        Horizontal distance of the supports, m (> 0).
    height : float, default: 0
        Height of the right support above the left one, m.
    mass : float, default: 1
        Chain mass, kg; each joint carries mass/links.
    g : float, default: 9.81
        Gravitational acceleration, m/s².
    start : {"arc", "equilibrium"}, default: "arc"
        Release from the circular arc, or build the chain at rest in its
        static equilibrium (computed with :func:`mbvi.equilibrium`).

    Rods are named ``"rod0"`` (left support–p1) … ``"rod{N-1}"`` (p{N-1}–right support).

    Raises
    ------
    ValueError
        For ``links`` that is not a whole number ≥ 2, a ``length``, ``span`` or ``mass`` that is not a positive
        finite number, or a chain no longer than the distance between its supports (``span=0`` gave brentq's
        "f(a) and f(b) must have different signs").
    """
    if start not in ("arc", "equilibrium"):
        raise ValueError(f"hanging_chain: start must be 'arc' or 'equilibrium', got {start!r}")
    if not _positive(mass):
        raise ValueError(f"hanging_chain: mass must be a positive number of kilograms, got {mass!r}")
    links = _links(links)
    pts = arc(links, length, span, height)
    # each rod gets its own chord of the arc: ℓ to a few ulps (the arc is solved that tightly), and exactly what
    # the initial positions say, however many links
    chords = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    if start == "equilibrium":
        eq = mbvi.equilibrium(_scene(pts, chords, mass / links, g))
        pts[1:-1] = [eq.position(f"p{i}") for i in range(1, links)]
    return _scene(pts, chords, mass / links, g)


def _scene(pts: np.ndarray, chords: np.ndarray, node_mass: float, g: float) -> mbvi.Scene:
    links = len(pts) - 1
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    names = ["world"] + [f"p{i}" for i in range(1, links)] + ["world"]
    for i in range(1, links):
        scene.add(mbvi.Particle(names[i], mass=node_mass, position=pts[i]))
    for i in range(links):
        anchor_a = pts[0] if i == 0 else None
        anchor_b = pts[-1] if i == links - 1 else None
        scene.add(
            mbvi.Rod(
                names[i], names[i + 1], anchor_a=anchor_a, anchor_b=anchor_b, length=float(chords[i]), name=f"rod{i}"
            )
        )
    return scene
