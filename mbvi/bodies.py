"""Bodies: the nodes of a scene graph.

A :class:`Particle` has 3 generalized coordinates (its position). A
:class:`RigidBody` has 12: its centre of mass and the three columns of its
rotation matrix (body principal axes to world), so that its kinetic energy
½m|ẋ|² + Σᵢ ½dᵢ|ṙᵢ|² has a constant diagonal mass, dᵢ = ½tr(J) − Jᵢ.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from mbvi._validate import Checked, positive, renamed_state, vector3
from mbvi._validate import name as check_name
from mbvi.shapes import Shape

__all__ = ["WORLD", "Body", "Particle", "RigidBody"]

WORLD = "world"


class Body:
    """Abstract base class of bodies (scene graph nodes)."""

    name: str
    #: number of generalized coordinates
    ncoords: int = 0

    mass = Checked(positive, "Mass, kg (positive, finite).")
    position = Checked(vector3, "Initial position (of the centre of mass), m, shape (3,).")
    velocity = Checked(vector3, "Initial velocity (of the centre of mass), m/s, shape (3,).")

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(renamed_state(state, type(self)))


class Particle(Body):
    """A point mass.

    Parameters
    ----------
    name : str
        Unique name in the scene.
    mass : float
        Mass, kg (> 0).
    position : array_like, shape (3,)
        Initial position, m.
    velocity : array_like, shape (3,), default: (0, 0, 0)
        Initial velocity, m/s (projected onto the joints at assembly).

    Notes
    -----
    A particle's body frame is the world frame translated to the particle, so a
    body-frame anchor on a particle is a world-frame offset from it.

    Examples
    --------
    >>> import mbvi
    >>> p = mbvi.Particle("bob", mass=1.0, position=(1, 0, 0))
    """

    ncoords = 3

    def __init__(
        self,
        name: str,
        mass: float,
        position: Any = (0.0, 0.0, 0.0),
        velocity: Any = (0.0, 0.0, 0.0),
    ) -> None:
        self.name = check_name(name, "Particle")
        if self.name == WORLD:
            raise ValueError("Particle 'world': the name 'world' is reserved for the fixed world node")
        owner = f"Particle {self.name!r}"
        self.mass = positive(mass, "mass", owner)
        self.position = vector3(position, "position", owner)
        self.velocity = vector3(velocity, "velocity", owner)
        _check_representable(owner, self.mass, self.position, self.velocity)

    def __repr__(self) -> str:
        return f"Particle({self.name!r}, mass={self.mass:g}, position={self.position.tolist()})"


def _shape(value: Any, owner: str) -> Shape | None:
    """``value`` when it is an mbvi shape or None, else ValueError naming ``owner``."""
    if value is not None and not isinstance(value, Shape):
        raise ValueError(f"{owner}: shape must be an mbvi shape (Box, Sphere, Cylinder, Capsule)")
    return value


def _orientation_matrix(orientation: Any, owner: str) -> np.ndarray:
    if orientation is None:
        return np.eye(3)
    if isinstance(orientation, Rotation):
        if not orientation.single:
            raise ValueError(f"{owner}: orientation must be a single rotation, got a stack of {len(orientation)}")
        return orientation.as_matrix()
    try:
        R = np.asarray(orientation, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}: orientation must be a 3x3 matrix or a Rotation") from None
    if R.shape != (3, 3) or not np.all(np.isfinite(R)):
        raise ValueError(f"{owner}: orientation must be a finite 3x3 matrix or a Rotation")
    if np.max(np.abs(R.T @ R - np.eye(3))) > 1e-6 or np.linalg.det(R) < 0:
        raise ValueError(f"{owner}: orientation is not a rotation matrix (RᵀR ≠ I or det R < 0)")
    # polar decomposition: the nearest exact rotation
    u, _, vt = np.linalg.svd(R)
    return u @ vt


class RigidBody(Body):
    """A rigid body.

    Parameters
    ----------
    name : str
        Unique name in the scene.
    mass : float, optional
        Mass, kg. Computed from ``shape`` and ``density`` when omitted.
    inertia : array_like, shape (3,) or (3, 3), optional
        Inertia about the centre of mass in the body frame, kg m²: principal
        moments (Jxx, Jyy, Jzz) or a symmetric tensor (rotated into principal
        axes internally). Computed from ``shape`` when omitted.
    position : array_like, shape (3,), default: origin
        Initial centre of mass, m.
    orientation : (3, 3) array_like or scipy.spatial.transform.Rotation, optional
        Initial body-to-world rotation (default identity).
    velocity : array_like, shape (3,), default: 0
        Initial velocity of the centre of mass, m/s.
    angular_velocity : array_like, shape (3,), default: 0
        Initial angular velocity in the world frame, rad/s.
    shape : mbvi.shapes.Shape, optional
        Geometry, centred on the centre of mass, for rendering and mass properties.
    density : float, optional
        Density, kg/m³, used with ``shape`` when ``mass`` is omitted.

    Raises
    ------
    ValueError
        Non-positive mass, inertia that is not positive definite or breaks the
        triangle inequality (Jᵢ < Jⱼ + Jₖ strictly), non-finite values, or an
        orientation that is not a rotation.
    """

    orientation = Checked(lambda value, what, owner: _orientation_matrix(value, owner),
                           "Initial orientation, a rotation matrix (body frame to world), shape (3, 3).")  # fmt: skip
    angular_velocity = Checked(vector3, "Initial angular velocity, rad/s, world frame, shape (3,).")
    shape = Checked(lambda value, what, owner: _shape(value, owner),
                    "Geometry drawn, and the mass and inertia computed from when omitted, or None. Set after "
                    "construction it is drawn; the mass and the inertia stay as they are.")  # fmt: skip

    ncoords = 12

    def __init__(
        self,
        name: str,
        mass: float | None = None,
        inertia: Any = None,
        position: Any = (0.0, 0.0, 0.0),
        orientation: Any = None,
        velocity: Any = (0.0, 0.0, 0.0),
        angular_velocity: Any = (0.0, 0.0, 0.0),
        shape: Shape | None = None,
        density: float | None = None,
    ) -> None:
        self.name = check_name(name, "RigidBody")
        owner = f"RigidBody {self.name!r}"
        if self.name == WORLD:
            raise ValueError(f"{owner}: the name 'world' is reserved for the fixed world node")
        self.shape = shape
        if density is not None:  # (checked with a mass too: density=nan or "heavy" beside one was taken silently)
            density = positive(density, "density", owner)  # its message names the body already
        if mass is None:
            if shape is None or density is None:
                raise ValueError(f"{owner}: give a mass, or a shape and a density")
            try:
                mass = shape.mass_properties(density)[0]
            except ValueError as exc:  # the shape's message names the shape: prefix the body once
                raise ValueError(f"{owner}: {exc}") from None
        self.mass = positive(mass, "mass", owner)
        if inertia is None:
            if shape is None:
                raise ValueError(f"{owner}: give an inertia or a shape")
            inertia = self.mass * shape.unit_inertia()
        self._set_inertia(inertia)
        self.position = vector3(position, "position", owner)
        self.orientation = _orientation_matrix(orientation, owner)
        self.velocity = vector3(velocity, "velocity", owner)
        self.angular_velocity = vector3(angular_velocity, "angular_velocity", owner)
        _check_representable(
            owner, self.mass, self.position, self.velocity, self.principal_inertia, self.angular_velocity
        )

    def _set_inertia(self, inertia: Any) -> None:
        """Check an inertia (3 principal moments or a 3×3 tensor, kg m²) and keep its principal moments and axes,
        and the masses of the rotation columns they give."""
        owner = f"RigidBody {self.name!r}"
        try:
            J = np.asarray(inertia)
            if J.dtype.kind not in "iuf":
                J = np.asarray([[_float(x) for x in row] for row in J] if J.ndim == 2 else [_float(x) for x in J.flat])
            J = J.astype(float)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(
                f"{owner}: inertia must be 3 principal moments or a 3x3 tensor of numbers (kg m²), got {inertia!r}"
            ) from None
        if J.shape == (3,):
            J = np.diag(J)
        if J.shape != (3, 3) or not np.all(np.isfinite(J)):
            raise ValueError(f"{owner}: inertia must be 3 finite moments or a finite 3x3 tensor")
        # relative: a mm-scale body's 1e-10 kg m² too; 1e-6, a float32 tensor's rounding (R J Rᵀ in float32 is
        # 3e-9 off symmetric), symmetrized below
        asymmetry = np.max(np.abs(J - J.T)) / np.max(np.abs(J))
        if asymmetry > 1e-6:
            raise ValueError(
                f"{owner}: inertia tensor must be symmetric (J − Jᵀ is {asymmetry:.2g} of its largest entry)"
            )
        moments, axes = np.linalg.eigh(0.5 * (J + J.T))
        if np.any(moments <= 0):
            raise ValueError(f"{owner}: inertia must be positive definite, got moments {moments.tolist()}")
        d = 0.5 * moments.sum() - moments
        if np.any(d <= 1e-12 * moments.sum()):
            flat = bool(np.any(np.abs(d) <= 1e-12 * moments.sum()))
            raise ValueError(
                f"{owner}: inertia breaks the triangle inequality (each principal moment must be "
                f"smaller than the sum of the other two), got {moments.tolist()}"
                + (": that is a body of zero thickness (a lamina or a rod of no radius); give it some" if flat else "")
            )
        if np.linalg.det(axes) < 0:
            axes[:, 2] *= -1
        for array in (moments, axes, d):
            array.flags.writeable = False  # (set through ``inertia``: a value written into them was not simulated)
        self._principal_inertia, self._principal_axes, self._column_masses = moments, axes, d

    @property
    def principal_inertia(self) -> np.ndarray:
        """Principal moments of inertia, kg m², shape (3,), ascending (read-only: set ``inertia``)."""
        return self._principal_inertia

    @property
    def principal_axes(self) -> np.ndarray:
        """Principal axes as columns in the body frame, shape (3, 3) (read-only: set ``inertia``)."""
        return self._principal_axes

    @property
    def column_masses(self) -> np.ndarray:
        """The diagonal masses of the three rotation columns, kg m² (½ tr J − Jᵢ; read-only: set ``inertia``)."""
        return self._column_masses

    @property
    def inertia(self) -> np.ndarray:
        """Inertia tensor about the centre of mass in the body frame, kg m², shape (3, 3); set it (3 principal
        moments or a tensor) and it is checked as the constructor checks it. Changing the mass or the shape does
        not change it."""
        V = self.principal_axes
        return V @ np.diag(self.principal_inertia) @ V.T

    @inertia.setter
    def inertia(self, value: Any) -> None:
        kept = self._principal_inertia, self._principal_axes, self._column_masses
        self._set_inertia(value)
        try:
            _check_representable(f"RigidBody {self.name!r}", self.mass, self.position, self.velocity,
                                 self.principal_inertia, self.angular_velocity)  # fmt: skip
        except ValueError:  # refused: the body as it was
            self._principal_inertia, self._principal_axes, self._column_masses = kept
            raise

    def __repr__(self) -> str:
        return f"RigidBody({self.name!r}, mass={self.mass:g}, position={self.position.tolist()})"


def _float(x: Any) -> float:
    """A number as a float; strings and bools are refused (TypeError)."""
    if isinstance(x, (bool, np.bool_, str, bytes)):
        raise TypeError(x)
    return float(x)


#: largest coordinate accepted, m: squares of differences (distances, energies) stay finite
MAX_POSITION = 1e150


def _check_representable(
    owner: str,
    mass: float,
    position: np.ndarray,
    velocity: np.ndarray,
    inertia: np.ndarray | None = None,
    angular_velocity: np.ndarray | None = None,
) -> None:
    """Refuse initial states whose energy or geometry overflows double precision (naming the body)."""
    if np.max(np.abs(position)) > MAX_POSITION:
        raise ValueError(
            f"{owner}: position {position.tolist()} is beyond ±{MAX_POSITION:g} m, where distances and energies "
            "overflow; use a unit system in which the scene is smaller"
        )
    with np.errstate(over="ignore"):
        energy = 0.5 * mass * float(velocity @ velocity)
        if inertia is not None and angular_velocity is not None:
            energy += 0.5 * float(inertia.max() * (angular_velocity @ angular_velocity))
    if not np.isfinite(energy):
        raise ValueError(
            f"{owner}: the initial kinetic energy overflows (velocity {velocity.tolist()} m/s with mass {mass:g} kg); "
            "such a state cannot be represented in double precision"
        )
