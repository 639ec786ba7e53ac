"""Body shapes: geometry for rendering and mass properties from a density.

Every shape is centred on its body's centre of mass; cylinders and capsules
lie along the body z axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mbvi._validate import positive, vector3

__all__ = ["Box", "Capsule", "Cylinder", "Shape", "Sphere"]


class Shape:
    """Abstract base class of body shapes."""

    def volume(self) -> float:
        """Volume, m³."""
        raise NotImplementedError

    def unit_inertia(self) -> np.ndarray:
        """Principal moments of inertia per unit mass about the centre, m², shape (3,)."""
        raise NotImplementedError

    def mass_properties(self, density: float) -> tuple[float, np.ndarray]:
        """Mass (kg) and principal inertia (kg m², shape (3,)) for a uniform density (kg/m³).

        Raises
        ------
        ValueError
            If the mass or the inertia is not a representable positive number
            (e.g. ``Sphere(1e308)``, whose volume overflows).
        """
        with np.errstate(over="ignore", under="ignore"):
            try:
                m = density * self.volume()
                inertia = m * self.unit_inertia()
            except OverflowError:
                m, inertia = math.inf, np.full(3, math.inf)
        if not (math.isfinite(m) and m > 0 and np.all(np.isfinite(inertia)) and np.all(inertia > 0)):
            raise ValueError(
                f"{self!r} with density {density:g} kg/m³: mass {m:g} kg, inertia {np.asarray(inertia).tolist()} "
                "kg m² are not representable (overflow or underflow); use a smaller size or a unit system in which "
                "they are"
            )
        return m, inertia

    def describe(self) -> dict:
        """JSON-serializable description used by rendering."""
        raise NotImplementedError


@dataclass(frozen=True)
class Sphere(Shape):
    """Solid sphere.

    Parameters
    ----------
    radius : float
        Radius, m.
    """

    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", positive(self.radius, "radius", "Sphere"))

    def volume(self) -> float:
        return 4.0 / 3.0 * math.pi * self.radius**3

    def unit_inertia(self) -> np.ndarray:
        return np.full(3, 0.4 * self.radius**2)

    def describe(self) -> dict:
        return {"type": "sphere", "radius": float(self.radius)}


@dataclass(frozen=True)
class Box(Shape):
    """Solid box.

    Parameters
    ----------
    size : tuple of 3 float
        Edge lengths along body x, y, z, m.
    """

    size: tuple[float, float, float]

    def __post_init__(self) -> None:
        s = vector3(self.size, "size", "Box")
        if np.any(s <= 0):
            raise ValueError(f"Box: size must be positive, got {self.size!r}")
        object.__setattr__(self, "size", tuple(float(x) for x in s))

    def volume(self) -> float:
        return float(np.prod(self.size))

    def unit_inertia(self) -> np.ndarray:
        a, b, c = self.size
        return np.array([b * b + c * c, a * a + c * c, a * a + b * b]) / 12.0

    def describe(self) -> dict:
        return {"type": "box", "size": list(self.size)}


@dataclass(frozen=True)
class Cylinder(Shape):
    """Solid cylinder along the body z axis.

    Parameters
    ----------
    radius : float
        Radius, m.
    length : float
        Length along z, m.
    """

    radius: float
    length: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", positive(self.radius, "radius", "Cylinder"))
        object.__setattr__(self, "length", positive(self.length, "length", "Cylinder"))

    def volume(self) -> float:
        return math.pi * self.radius**2 * self.length

    def unit_inertia(self) -> np.ndarray:
        r, h = self.radius, self.length
        t = (3 * r * r + h * h) / 12.0
        return np.array([t, t, 0.5 * r * r])

    def describe(self) -> dict:
        return {"type": "cylinder", "radius": float(self.radius), "length": float(self.length)}


@dataclass(frozen=True)
class Capsule(Shape):
    """Solid capsule (cylinder with hemispherical caps) along the body z axis.

    Parameters
    ----------
    radius : float
        Radius, m.
    length : float
        Distance between the centres of the two caps, m.
    """

    radius: float
    length: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "radius", positive(self.radius, "radius", "Capsule"))
        object.__setattr__(self, "length", positive(self.length, "length", "Capsule", allow_zero=True))

    def volume(self) -> float:
        r, h = self.radius, self.length
        return math.pi * r * r * h + 4.0 / 3.0 * math.pi * r**3

    def unit_inertia(self) -> np.ndarray:
        r, h = self.radius, self.length
        mc = math.pi * r * r * h  # cylinder volume
        mh = 2.0 / 3.0 * math.pi * r**3  # one hemisphere volume
        total = mc + 2 * mh
        izz = mc * r * r / 2 + 2 * mh * 0.4 * r * r
        # hemisphere about its own centroid axis (perpendicular): 83/320 m r^2; centroid 3r/8 from the flat face
        d = h / 2 + 3 * r / 8
        ihem = mh * (83.0 / 320.0 * r * r) + mh * d * d
        ixx = mc * (3 * r * r + h * h) / 12 + 2 * ihem
        return np.array([ixx, ixx, izz]) / total

    def describe(self) -> dict:
        return {"type": "capsule", "radius": float(self.radius), "length": float(self.length)}
