"""Joints: the edges of a scene graph, each a set of holonomic constraints.

Every constraint equation is written as a *bilinear row*

    g(q) = s · (U(q) · W(q)) − k

of two affine 3-vector functions U, W of the generalized coordinates. In
maximal coordinates every body point and every body-fixed direction is affine
in q (x + R p), so distances, coincidences, perpendicularities and the
orthonormality of rotation columns all take this form: assembly groups rows of
the same term structure and evaluates each group in one vectorized call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from mbvi._validate import Checked, finite, perpendicular_pair, positive, renamed_state, unit, vector3
from mbvi._validate import name as check_name
from mbvi.geometry import LinkGeometry, vec3

if TYPE_CHECKING:
    from mbvi.layout import Layout

__all__ = ["Fixed", "Joint", "Prismatic", "Revolute", "Rod", "Row", "Spherical"]

Terms = list[tuple[int, float]]


def _optional_point(value: Any, what: str, owner: str) -> np.ndarray | None:
    return None if value is None else vector3(value, what, owner)


def _point_or_origin(value: Any, what: str, owner: str) -> np.ndarray:
    return np.zeros(3) if value is None else vector3(value, what, owner)


def _optional_length(value: Any, what: str, owner: str) -> float | None:
    return None if value is None else positive(value, what, owner)


@dataclass
class Row:
    """One scalar constraint ``s * (U·W) - k`` with affine U, W (assembly-time data)."""

    u_terms: Terms
    u_const: np.ndarray
    w_terms: Terms
    w_const: np.ndarray
    s: float
    k: float
    scale: float  # natural size of g for convergence tests (m or 1)
    owner: str = ""
    #: "joint", or "rotation" for a rigid body's orthonormality rows
    kind: str = "joint"
    #: "point" for a joint's point-coincidence rows (:func:`coincidence_rows`), else ""
    part: str = ""


def _diff(a: tuple[Terms, np.ndarray], b: tuple[Terms, np.ndarray]) -> tuple[Terms, np.ndarray]:
    return a[0] + [(i, -w) for i, w in b[0]], a[1] - b[1]


def _const(v: np.ndarray) -> tuple[Terms, np.ndarray]:
    return [], np.asarray(v, dtype=float)


def coincidence_rows(pa, pb, scale: float, owner: str) -> list[Row]:
    """Three rows making two affine points coincide: their difference along the world axes."""
    t, c = _diff(pa, pb)
    return [Row(t, c, [], np.eye(3)[j], 1.0, 0.0, scale, owner, part="point") for j in range(3)]


def body_frame_coincidence_rows(layout: Layout, joint: Joint) -> list[Row] | None:
    """The three point rows of an anchored ``joint`` along the axes of one of its rigid bodies (a, else b),
    (p_a − p_b)·(R e_j) = 0 with e_j the world axes at assembly: still bilinear. None when neither body is rigid.

    Assembly uses them for a joint of a closed loop only some of whose point rows are implied by the others
    (:func:`mbvi.assembly.assemble`): the implied direction (a planar loop's normal, a crank's direction) is fixed
    in the loop's bodies, not in the world, and world rows kept for the others lose rank where it turns onto them.
    """
    body = next((b for b in (joint.a, joint.b) if layout.kind(b) == "rigid"), None)
    if body is None:
        return None
    frame = layout.joint_frames[joint.name]
    t, c = _diff(layout.point(joint.a, frame.anchor_a), layout.point(joint.b, frame.anchor_b))
    rows = []
    for j in range(3):
        w = layout.direction(body, layout.to_body_direction(body, np.eye(3)[j]))
        rows.append(Row(t, c, w[0], w[1], 1.0, 0.0, layout.length_scale, joint.owner, part="point"))
    return rows


def orientation_rows(layout: Layout, a: str, b: str, frame: np.ndarray, pairs, owner: str) -> list[Row]:
    """Rows ``(R_a f_i)·(R_b f_j) = 0`` for the given (i, j) pairs of a world frame's columns at assembly."""
    rows = []
    for i, j in pairs:
        u = layout.direction(a, layout.to_body_direction(a, frame[:, i]))
        w = layout.direction(b, layout.to_body_direction(b, frame[:, j]))
        rows.append(Row(u[0], u[1], w[0], w[1], 1.0, 0.0, 1.0, owner))
    return rows


class Joint:
    """Abstract base class of joints between two bodies ``a`` (parent) and ``b`` (child)."""

    kind: str = "joint"
    name: str
    a: str
    b: str

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(renamed_state(state, type(self)))

    def check_bodies(self, kind: Callable[[str], str]) -> None:
        """A ValueError naming the joint when it cannot join its bodies, of kinds ``kind(name)`` ("world",
        "particle", "rigid"): checked by :meth:`mbvi.Scene.add`, so that the scene never holds a joint assembly
        refuses (its rows check again, for bodies changed since)."""

    def _init_names(self, a: str, b: str, name: str | None) -> None:
        self.a = check_name(a, type(self).__name__ + " body")
        self.b = check_name(b, type(self).__name__ + " body")
        self.explicit_name = name is not None
        self.name = check_name(name, type(self).__name__) if name is not None else f"{a}-{b}"
        if self.a == self.b:
            raise ValueError(f"{type(self).__name__} {self.name!r}: joins body {a!r} to itself")

    @property
    def owner(self) -> str:
        return f"{type(self).__name__} {self.name!r}"

    def constraint_rows(self, layout: Layout) -> list[Row]:
        """The constraint rows of this joint at the initial configuration of ``layout``.

        Reads the joint and the layout only; writes nothing (the body-frame
        anchors and axes it uses are :meth:`describe`'s).
        """
        raise NotImplementedError

    def describe(self, layout: Layout) -> LinkGeometry:
        """Anchors and axes in the body frames at the initial configuration of ``layout``.

        A pure function of the joint and the layout: assembly collects these
        into :class:`mbvi.geometry.SceneGeometry` and ``layout.joint_frames``.
        """
        raise NotImplementedError

    def _described(self, layout: Layout) -> LinkGeometry:
        """:meth:`describe`'s result, as assembly already collected it in ``layout.joint_frames`` when it did."""
        known = layout.joint_frames.get(self.name)
        return known if known is not None else self.describe(layout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.a!r}, {self.b!r}, name={self.name!r})"


class Rod(Joint):
    """Massless rigid rod keeping two body points at a fixed distance.

    Parameters
    ----------
    a, b : str
        Body names (``"world"`` allowed).
    anchor_a, anchor_b : array_like, shape (3,), optional
        Body-frame attachment points, m (default: the body origin; for the
        world, a world point).
    length : float, optional
        Rod length, m. Default (None): the distance between the anchors where the
        bodies are when the scene is assembled (each :func:`mbvi.simulate`); when
        given it must match that distance.
    name : str, optional
        Default ``"a-b"``.
    """

    kind = "rod"
    anchor_a = Checked(_point_or_origin, "Body-frame attachment point on a, m, shape (3,) (the world's: a point).")
    anchor_b = Checked(_point_or_origin, "Body-frame attachment point on b, m, shape (3,) (the world's: a point).")
    length = Checked(_optional_length, "Rod length, m (positive), or None: the anchors' distance at assembly.")

    def __init__(
        self,
        a: str,
        b: str,
        anchor_a: Any = None,
        anchor_b: Any = None,
        length: float | None = None,
        name: str | None = None,
    ) -> None:
        self._init_names(a, b, name)
        self.anchor_a, self.anchor_b, self.length = anchor_a, anchor_b, length

    def _distance(self, layout: Layout) -> float:
        return float(
            np.linalg.norm(layout.world_point(self.a, self.anchor_a) - layout.world_point(self.b, self.anchor_b))
        )

    def constraint_rows(self, layout: Layout) -> list[Row]:
        pa = layout.point(self.a, self.anchor_a)
        pb = layout.point(self.b, self.anchor_b)
        actual = self._distance(layout)
        L = actual if self.length is None else self.length
        if actual <= 1e-12 * layout.length_scale:
            raise ValueError(f"{self.owner}: its anchors coincide (zero length); use a Spherical joint")
        if abs(actual - L) > 1e-9 * L:
            raise ValueError(
                f"{self.owner}: initial positions violate the joint (distance {actual:.6g} m, length {L:.6g} m: "
                f"{actual - L:+.3g} m off, {abs(actual - L) / L:.2g} of the length; the tolerance is 1e-09)"
            )
        t, c = _diff(pa, pb)
        return [Row(t, c, t, c, 1.0 / (2 * L), L / 2, L, self.owner)]

    def describe(self, layout: Layout) -> LinkGeometry:
        L = self._distance(layout) if self.length is None else self.length
        return LinkGeometry(self.kind, self.name, self.a, self.b, vec3(self.anchor_a), vec3(self.anchor_b), length=L)


class _AnchoredJoint(Joint):
    """A joint defined by a world anchor point (and possibly an axis) at assembly."""

    anchor = Checked(_optional_point, "World anchor point at assembly, m, shape (3,), or None: body b's origin.")

    def _anchor_point(self, layout: Layout) -> np.ndarray:
        if self.anchor is not None:
            return self.anchor
        return layout.world_point(self.b, np.zeros(3))

    def _anchor_rows(self, layout: Layout, frame: LinkGeometry) -> list[Row]:
        p = self._anchor_point(layout)
        for body in (self.a, self.b):
            if layout.kind(body) == "particle" and np.linalg.norm(
                layout.world_point(body, np.zeros(3)) - p
            ) > 1e-9 * layout.length_scale:
                raise ValueError(
                    f"{self.owner}: initial positions violate the joint "
                    f"(particle {body!r} is not at the anchor {p.tolist()})"
                )
        return coincidence_rows(
            layout.point(self.a, frame.anchor_a), layout.point(self.b, frame.anchor_b), layout.length_scale, self.owner
        )

    def _require_orientation(self, layout: Layout | Callable[[str], str]) -> None:
        kind = layout if callable(layout) else layout.kind
        for body in (self.a, self.b):
            if kind(body) == "particle":
                raise ValueError(
                    f"{self.owner}: body {body!r} is a particle and has no orientation; "
                    "use Spherical or Rod for particles"
                )

    def describe(self, layout: Layout) -> LinkGeometry:
        p = self._anchor_point(layout)
        return LinkGeometry(
            self.kind,
            self.name,
            self.a,
            self.b,
            vec3(layout.to_body_point(self.a, p)),
            vec3(layout.to_body_point(self.b, p)),
        )


class Spherical(_AnchoredJoint):
    """Ball joint: one world point, fixed in both bodies, stays common to them.

    Parameters
    ----------
    a, b : str
        Body names.
    anchor : array_like, shape (3,), optional
        World point at the initial configuration, m (default: b's origin).
        A particle joined by a spherical joint must sit at the anchor.
    name : str, optional
    """

    kind = "spherical"

    def __init__(self, a: str, b: str, anchor: Any = None, name: str | None = None) -> None:
        self._init_names(a, b, name)
        self.anchor = anchor
        self.axis = None

    def constraint_rows(self, layout: Layout) -> list[Row]:
        return self._anchor_rows(layout, self._described(layout))


#: a rigid body on a particle's rail
_RAIL = ("{owner}: rigid body {b!r} cannot slide on particle {a!r} (a particle has no orientation to hold {b!r}'s "
         "rotation to); make the rigid body the rail: Prismatic({b!r}, {a!r})")  # fmt: skip


class Revolute(_AnchoredJoint):
    """Hinge: a spherical joint whose bodies also share an axis.

    Parameters
    ----------
    a, b : str
        Body names (rigid bodies or the world).
    anchor : array_like, shape (3,), optional
        A world point on the hinge axis at the initial configuration, m
        (default: b's origin).
    axis : array_like, shape (3,), default: (0, 0, 1)
        Hinge axis in world coordinates at the initial configuration.
    name : str, optional
    initial_angle : float, default: 0
        The joint angle at the initial configuration, rad: where the angle's
        zero lies (a URDF joint's coordinate, say). It moves no body.

    Notes
    -----
    The joint angle (``traj.joint_angle(name)``) is the rotation of b relative
    to a about the axis, ``initial_angle`` at the initial configuration.
    """

    kind = "revolute"
    axis = Checked(unit, "Hinge axis, world frame at assembly, shape (3,) (normalised when set).")
    initial_angle = Checked(finite, "Angle the joint reads at the initial configuration, rad.")

    def check_bodies(self, kind: Callable[[str], str]) -> None:
        self._require_orientation(kind)

    def __init__(
        self,
        a: str,
        b: str,
        anchor: Any = None,
        axis: Any = (0.0, 0.0, 1.0),
        name: str | None = None,
        initial_angle: float = 0.0,
    ) -> None:
        self._init_names(a, b, name)
        self.anchor = anchor
        self.axis, self.initial_angle = axis, initial_angle

    def frame(self) -> np.ndarray:
        """World frame (u1, u2, axis) at the initial configuration, columns."""
        u1, u2 = perpendicular_pair(self.axis)
        return np.column_stack([u1, u2, self.axis])

    def constraint_rows(self, layout: Layout) -> list[Row]:
        self._require_orientation(layout)
        rows = self._anchor_rows(layout, self._described(layout))
        rows += orientation_rows(layout, self.a, self.b, self.frame(), [(2, 0), (2, 1)], self.owner)
        return rows

    def describe(self, layout: Layout) -> LinkGeometry:
        F = self.frame()
        c, s = np.cos(self.initial_angle), np.sin(self.initial_angle)
        return replace(
            super().describe(layout),
            axis_a=vec3(layout.to_body_direction(self.a, F[:, 2])),
            u1_a=vec3(layout.to_body_direction(self.a, F[:, 0])),
            u2_a=vec3(layout.to_body_direction(self.a, F[:, 1])),
            # R_b u1_b = cos θ₀ u1 + sin θ₀ u2 at assembly, so the joint angle starts at θ₀
            u1_b=vec3(layout.to_body_direction(self.b, c * F[:, 0] + s * F[:, 1])),
            initial_angle=float(self.initial_angle),
        )


class Prismatic(_AnchoredJoint):
    """Slider: b translates relative to a along an axis fixed in a, without relative rotation.

    Parameters
    ----------
    a, b : str
        Body names. Particles are allowed (they have no rotation to lock).
    axis : array_like, shape (3,), default: (1, 0, 0)
        Sliding axis in world coordinates at the initial configuration.
    anchor : array_like, shape (3,), optional
        World point on b's sliding line (default: b's origin).
    name : str, optional
    initial_displacement : float, default: 0
        The joint displacement at the initial configuration, m (a's anchor
        sits that far behind b's along the axis). It moves no body.

    Notes
    -----
    The joint displacement (``traj.joint_displacement(name)``) is measured
    along the axis, ``initial_displacement`` at the initial configuration, m.
    """

    kind = "prismatic"
    axis = Checked(unit, "Slide axis, world frame at assembly, shape (3,) (normalised when set).")
    initial_displacement = Checked(finite, "Displacement the joint reads at the initial configuration, m.")

    def check_bodies(self, kind: Callable[[str], str]) -> None:
        if (kind(self.a), kind(self.b)) == ("particle", "rigid"):
            raise ValueError(_RAIL.format(owner=self.owner, a=self.a, b=self.b))

    def __init__(
        self,
        a: str,
        b: str,
        axis: Any = (1.0, 0.0, 0.0),
        anchor: Any = None,
        name: str | None = None,
        initial_displacement: float = 0.0,
    ) -> None:
        self._init_names(a, b, name)
        self.axis = axis
        self.anchor = anchor
        self.initial_displacement = initial_displacement

    def constraint_rows(self, layout: Layout) -> list[Row]:
        u1, u2 = perpendicular_pair(self.axis)
        F = np.column_stack([u1, u2, self.axis])
        if layout.kind(self.b) == "particle":  # the anchor is any point of its sliding line
            off = layout.world_point(self.b, np.zeros(3)) - self._anchor_point(layout)
            off = off - (off @ self.axis) * self.axis
            if np.linalg.norm(off) > 1e-9 * layout.length_scale:
                raise ValueError(f"{self.owner}: initial positions violate the joint (particle {self.b!r} is "
                                 f"{np.linalg.norm(off):.3g} m off the sliding line through the anchor)")  # fmt: skip
        frame = self._described(layout)
        pa = layout.point(self.a, frame.anchor_a)
        pb = layout.point(self.b, frame.anchor_b)
        t, c = _diff(pb, pa)
        rows = []
        for u in (u1, u2):
            w = layout.direction(self.a, layout.to_body_direction(self.a, u))
            rows.append(Row(t, c, w[0], w[1], 1.0, 0.0, layout.length_scale, self.owner))
        kinds = (layout.kind(self.a), layout.kind(self.b))
        if kinds[1] == "rigid" and kinds[0] == "particle":
            raise ValueError(_RAIL.format(owner=self.owner, a=self.a, b=self.b))
        if "rigid" in kinds and "particle" not in kinds:  # a particle sliding on a body has no rotation to lock
            rows += orientation_rows(layout, self.a, self.b, F, [(0, 1), (1, 2), (2, 0)], self.owner)
        return rows

    def describe(self, layout: Layout) -> LinkGeometry:
        p = self._anchor_point(layout) - self.initial_displacement * self.axis  # a's anchor: the displacement's zero
        return replace(
            super().describe(layout),
            anchor_a=vec3(layout.to_body_point(self.a, p)),
            axis_a=vec3(layout.to_body_direction(self.a, self.axis)),
        )


class Fixed(_AnchoredJoint):
    """Weld: b keeps its initial pose relative to a.

    Parameters
    ----------
    a, b : str
        Body names (rigid bodies or the world).
    anchor : array_like, shape (3,), optional
        World point where the weld is drawn (default: b's origin).
    name : str, optional
    """

    kind = "fixed"

    def check_bodies(self, kind: Callable[[str], str]) -> None:
        self._require_orientation(kind)

    def __init__(self, a: str, b: str, anchor: Any = None, name: str | None = None) -> None:
        self._init_names(a, b, name)
        self.anchor = anchor
        self.axis = None

    def constraint_rows(self, layout: Layout) -> list[Row]:
        self._require_orientation(layout)
        rows = self._anchor_rows(layout, self._described(layout))
        rows += orientation_rows(layout, self.a, self.b, np.eye(3), [(0, 1), (1, 2), (2, 0)], self.owner)
        return rows
