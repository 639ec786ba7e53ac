"""The typed, read-only description of an assembled scene: what trajectories store and rendering draws.

Assembly builds one :class:`SceneGeometry` from the :class:`mbvi.Scene` and its
:class:`mbvi.layout.Layout` — bodies with their coordinate offsets and mass
properties, links (joints, springs, dampers) with their attachment points and
axes **in the body frames**, beams — and never writes anything back onto the
model. Force laws read the joints' body-frame frames from
``layout.joint_frames``; :class:`mbvi.Trajectory` keeps the description (and
saves it as JSON, :meth:`SceneGeometry.to_dict`); :mod:`mbvi.render` draws from
it. Everything here is plain data: frozen dataclasses of floats, strings and
tuples.

Body-frame conventions: a rigid body's frame is the user's body frame (the
``orientation`` given to :class:`mbvi.RigidBody`), a particle's frame is
translated but never rotated, and the world's frame is the world (anchors and
axes on the world are world points and directions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BeamGeometry", "BodyGeometry", "LinkGeometry", "SceneGeometry", "cross", "vec3"]

Vec3 = tuple[float, float, float]

#: link kinds drawn as a straight segment between the two anchors
SEGMENT_KINDS = ("rod", "spring", "damper")
#: link kinds drawn as a marker at the joint point
JOINT_KINDS = ("spherical", "revolute", "prismatic", "fixed")


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × b over the last axis, broadcasting (numpy.cross's arithmetic, without its ~40 µs of axis handling).

    Parameters
    ----------
    a, b : array_like, shape (..., 3)
        Vectors, broadcast against each other.

    Returns
    -------
    ndarray, shape (..., 3)
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape == b.shape == (3,):  # two vectors: the entries from scalars (a third of the broadcast form's time)
        return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out[..., 0] = a1 * b2 - a2 * b1
    out[..., 1] = a2 * b0 - a0 * b2
    out[..., 2] = a0 * b1 - a1 * b0
    return out


def vec3(x: Any) -> Vec3:
    """A 3-vector as a tuple of Python floats (hashable, JSON-exact)."""
    a = np.asarray(x, dtype=float).reshape(3)
    return (float(a[0]), float(a[1]), float(a[2]))


def _opt_vec3(x: Any) -> Vec3 | None:
    return None if x is None else vec3(x)


@dataclass(frozen=True)
class BodyGeometry:
    """One body of an assembled scene.

    Attributes
    ----------
    name : str
        Body name (beam nodes are ``"beam[i]"``).
    kind : str
        ``"particle"`` or ``"rigid"``.
    mass : float
        Mass, kg.
    offset : int
        Start of the body's block in the generalized coordinates ``q``.
    shape : dict or None
        The shape's description (``{"type": "sphere", "radius": r}`` …), rigid bodies only.
    principal_axes : tuple of 3 tuples, or None
        Rows of the 3×3 matrix whose columns are the principal axes in the body
        frame (rigid bodies only).
    inertia : tuple of 3 float, or None
        Principal moments of inertia, kg m² (rigid bodies only).
    """

    name: str
    kind: str
    mass: float
    offset: int
    shape: Mapping[str, Any] | None = None
    principal_axes: tuple[Vec3, Vec3, Vec3] | None = None
    inertia: Vec3 | None = None

    @property
    def axes_matrix(self) -> np.ndarray:
        """Principal axes as columns in the body frame, shape (3, 3) (identity for particles)."""
        return np.eye(3) if self.principal_axes is None else np.asarray(self.principal_axes, dtype=float)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form."""
        d: dict[str, Any] = {"name": self.name, "kind": self.kind, "mass": self.mass, "offset": self.offset}
        d["shape"] = None if self.shape is None else dict(self.shape)
        if self.kind == "rigid":
            d["principal_axes"] = None if self.principal_axes is None else [list(r) for r in self.principal_axes]
            d["inertia"] = None if self.inertia is None else list(self.inertia)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BodyGeometry:
        """Inverse of :meth:`to_dict`."""
        axes = d.get("principal_axes")
        return cls(
            name=str(d["name"]),
            kind=str(d.get("kind", "particle")),
            mass=float(d.get("mass", 1.0)),
            offset=int(d["offset"]),
            shape=None if d.get("shape") is None else dict(d["shape"]),
            principal_axes=None if axes is None else tuple(vec3(r) for r in axes),  # type: ignore[arg-type]
            inertia=_opt_vec3(d.get("inertia")),
        )


@dataclass(frozen=True)
class LinkGeometry:
    """A joint, spring or damper between bodies ``a`` and ``b``, in the body frames.

    Attributes
    ----------
    kind : str
        ``"rod"``, ``"spherical"``, ``"revolute"``, ``"prismatic"``, ``"fixed"``,
        ``"spring"`` or ``"damper"`` (``"type"`` in the JSON form).
    name : str
        Element name.
    a, b : str
        Body names (``"world"`` allowed).
    anchor_a, anchor_b : tuple of 3 float
        Attachment points in the frames of a and b, m.
    axis_a : tuple of 3 float or None
        Unit joint axis in a's frame (revolute and prismatic joints).
    u1_a, u2_a : tuple of 3 float or None
        Unit vectors ⊥ the axis in a's frame, (u1, u2, axis) right-handed (revolute joints).
    u1_b : tuple of 3 float or None
        u1 in b's frame at assembly, turned by ``initial_angle`` (revolute joints: the joint angle is
        the angle from R_a u1_a to R_b u1_b about R_a axis_a, plus ``initial_angle``, taken within π of it).
    initial_angle : float
        The revolute joint's angle at assembly, rad (0 for the other kinds).
    length : float or None
        Rod length, m (rods only).
    """

    kind: str
    name: str
    a: str
    b: str
    anchor_a: Vec3 = (0.0, 0.0, 0.0)
    anchor_b: Vec3 = (0.0, 0.0, 0.0)
    axis_a: Vec3 | None = None
    u1_a: Vec3 | None = None
    u2_a: Vec3 | None = None
    u1_b: Vec3 | None = None
    length: float | None = None
    initial_angle: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form."""
        d: dict[str, Any] = {
            "type": self.kind,
            "name": self.name,
            "a": self.a,
            "b": self.b,
            "anchor_a": list(self.anchor_a),
            "anchor_b": list(self.anchor_b),
        }
        for key in ("axis_a", "u1_a", "u2_a", "u1_b"):
            value = getattr(self, key)
            if value is not None:
                d[key] = list(value)
        if self.length is not None:
            d["length"] = self.length
        if self.initial_angle:
            d["initial_angle"] = self.initial_angle
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LinkGeometry:
        """Inverse of :meth:`to_dict`; also reads files of format 1 (extra ``"axis"`` key ignored)."""
        a, b = str(d["a"]), str(d["b"])
        length = d.get("length")
        return cls(
            kind=str(d["type"]),
            name=str(d.get("name", f"{a}-{b}")),
            a=a,
            b=b,
            anchor_a=vec3(d.get("anchor_a") or (0.0, 0.0, 0.0)),
            anchor_b=vec3(d.get("anchor_b") or (0.0, 0.0, 0.0)),
            axis_a=_opt_vec3(d.get("axis_a")),
            u1_a=_opt_vec3(d.get("u1_a")),
            u2_a=_opt_vec3(d.get("u2_a")),
            u1_b=_opt_vec3(d.get("u1_b")),
            length=None if length is None else float(length),
            initial_angle=float(d.get("initial_angle", 0.0)),
        )


@dataclass(frozen=True)
class BeamGeometry:
    """A beam: its node bodies and the rest lengths of its segments.

    Attributes
    ----------
    name : str
    nodes : tuple of str
        Node body names, ``name[0]`` … ``name[k-1]``.
    rest_lengths : tuple of float
        Rest length of each of the ``k - 1`` segments, m.
    """

    name: str
    nodes: tuple[str, ...]
    rest_lengths: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form."""
        return {"name": self.name, "nodes": list(self.nodes), "rest_lengths": list(self.rest_lengths)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> BeamGeometry:
        """Inverse of :meth:`to_dict`."""
        return cls(str(d["name"]), tuple(str(n) for n in d["nodes"]), tuple(float(x) for x in d["rest_lengths"]))


@dataclass(frozen=True)
class SceneGeometry:
    """Everything that is drawn or read per body, fixed at assembly.

    Attributes
    ----------
    bodies : tuple of BodyGeometry
        In coordinate order.
    links : tuple of LinkGeometry
        Joints first (scene order), then springs and dampers.
    beams : tuple of BeamGeometry
    length_scale : float
        The bodies' spread at the start, m (at least a millimetre; 1 m for one body): what pictures size
        their bodies by.
    gravity : tuple of 3 float
        Gravity, m/s².
    extra : dict
        Other JSON-serializable entries (e.g. the coordinate names of a
        :class:`mbvi.LagrangianSystem`), kept as given.
    """

    bodies: tuple[BodyGeometry, ...] = ()
    links: tuple[LinkGeometry, ...] = ()
    beams: tuple[BeamGeometry, ...] = ()
    length_scale: float = 1.0
    gravity: Vec3 = (0.0, 0.0, -9.81)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def body(self, name: str) -> BodyGeometry:
        """The body called ``name``.

        Raises
        ------
        KeyError
            If there is none.
        """
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(name)

    def link(self, name: str) -> LinkGeometry:
        """The link (joint, spring or damper) called ``name``.

        Raises
        ------
        KeyError
            If there is none.
        """
        for link in self.links:
            if link.name == name:
                return link
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form (what :meth:`mbvi.Trajectory.save` writes)."""
        d = dict(self.extra)
        d.update(
            bodies=[b.to_dict() for b in self.bodies],
            links=[link.to_dict() for link in self.links],
            beams=[b.to_dict() for b in self.beams],
            length_scale=self.length_scale,
            gravity=list(self.gravity),
        )
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SceneGeometry:
        """Inverse of :meth:`to_dict`; reads the untyped dicts of trajectory files of format 1 too."""
        known = {"bodies", "links", "beams", "length_scale", "gravity"}
        return cls(
            bodies=tuple(BodyGeometry.from_dict(b) for b in d.get("bodies", ())),
            links=tuple(LinkGeometry.from_dict(link) for link in d.get("links", ())),
            beams=tuple(BeamGeometry.from_dict(b) for b in d.get("beams", ())),
            length_scale=float(d.get("length_scale") or 1.0),
            gravity=vec3(d.get("gravity", (0.0, 0.0, -9.81))),
            extra={k: v for k, v in d.items() if k not in known},
        )

    @classmethod
    def coerce(cls, geometry: SceneGeometry | Mapping[str, Any] | None) -> SceneGeometry:
        """A :class:`SceneGeometry` from itself, its dict form, or None (empty)."""
        if isinstance(geometry, SceneGeometry):
            return geometry
        return cls.from_dict(geometry or {})

    @classmethod
    def of(
        cls,
        bodies: Iterable[BodyGeometry],
        links: Iterable[LinkGeometry],
        beams: Iterable[BeamGeometry],
        length_scale: float,
        gravity: Any,
    ) -> SceneGeometry:
        """Build from iterables (a convenience for assembly)."""
        return cls(tuple(bodies), tuple(links), tuple(beams), float(length_scale), vec3(gravity))


def joint_of_kind(name: str, kind: str, kinds: Mapping[str, str]) -> str:
    """The message for a joint ``name`` that ``kinds`` (joint name to kind) has not, or not of ``kind`` (revolute
    or prismatic: the joints the read-outs take)."""
    known = sorted(k for k, j in kinds.items() if j == kind)
    if name in kinds:
        return (f"joint {name!r} is {kinds[name]}, not {kind} (joint_angle and joint_rate read revolute joints, "
                f"joint_displacement and joint_displacement_rate prismatic ones); the {kind} joints are {known}")
    return f"unknown {kind} joint {name!r}; the {kind} joints are {known}"
