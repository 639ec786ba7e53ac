"""Coordinate layout: where each body's generalized coordinates live in q.

A particle owns the block ``q[i:i+3]`` (its position). A rigid body owns
``q[i:i+12]``: its centre of mass, then the three columns r₁, r₂, r₃ of its
rotation matrix (principal axes to world). Every body point and every
body-fixed direction is therefore an *affine* function of q — the
:class:`Layout` returns them as lists of ``(block start, weight)`` terms plus a
constant, which :class:`mbvi.kernels.AffineMap` evaluates for many instances
at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from mbvi.bodies import WORLD, Body, Particle, RigidBody
from mbvi.geometry import cross

if TYPE_CHECKING:
    from mbvi.geometry import LinkGeometry

__all__ = ["Layout"]

Terms = list[tuple[int, float]]


class Layout:
    """The generalized-coordinate layout of a list of bodies.

    Parameters
    ----------
    bodies : list of Body
        In coordinate order.
    """

    def __init__(self, bodies: list[Body]) -> None:
        self.bodies: dict[str, Body] = {}
        self.offset: dict[str, int] = {}
        i = 0
        for body in bodies:
            self.bodies[body.name] = body
            self.offset[body.name] = i
            i += body.ncoords
        #: number of generalized coordinates
        self.nq = i
        mass = np.empty(self.nq)
        q0 = np.empty(self.nq)
        v0 = np.empty(self.nq)
        trans, rot = [], []
        for body in bodies:
            o = self.offset[body.name]
            mass[o : o + 3] = body.mass
            q0[o : o + 3] = body.position
            v0[o : o + 3] = body.velocity
            trans.append(o)
            if isinstance(body, RigidBody):
                R = body.orientation @ body.principal_axes  # principal frame to world
                wr = cross(body.angular_velocity, R.T)  # row c: ω × (column c of R)
                for c in range(3):
                    s = o + 3 + 3 * c
                    mass[s : s + 3] = body.column_masses[c]
                    q0[s : s + 3] = R[:, c]
                    v0[s : s + 3] = wr[c]
                    rot.append(s)
        #: diagonal of the constant mass matrix, shape (nq,)
        self.mass = mass
        #: initial configuration and velocity, shape (nq,)
        self.q0 = q0
        self.v0 = v0
        #: start index of every translational (position) block
        self.translation_blocks = np.asarray(trans, dtype=np.intp)
        #: start index of every rotation-column block
        self.rotation_blocks = np.asarray(rot, dtype=np.intp)
        #: characteristic length of the scene, m: the extent of the bodies' positions here; assembly widens it to
        #: the joints' anchors (:meth:`fit_length_scale`)
        self.length_scale = self._extent(())
        spread = self._spread(())
        #: the bodies' spread, m (at least a millimetre; 1 m for one body): what pictures size their bodies by
        #: (:class:`mbvi.geometry.SceneGeometry`), not a length the physics is measured against
        self.body_spread = max(spread, 1e-3) if spread > 0 else 1.0
        #: the scene's joints by name (set by assembly; the model, read-only)
        self.joints: dict[str, Any] = {}  # name -> mbvi.Joint
        #: each joint's anchors and axes in the body frames (set by assembly, from ``Joint.describe``)
        self.joint_frames: dict[str, LinkGeometry] = {}

    def _spread(self, points: Any, lengths: Any = ()) -> float:
        """The largest spread along x, y or z of the bodies' positions and ``points`` (m, each (3,)), or of
        ``lengths`` (m) when longer; 0 when there is none."""
        pts = [*self.q0.reshape(-1, 3)[self.translation_blocks // 3], *points]
        spread = float(np.max(np.ptp(np.asarray(pts, dtype=float), axis=0))) if len(pts) > 1 else 0.0
        spread = max([spread, *(float(x) for x in lengths if x is not None and math.isfinite(x))])
        return spread if math.isfinite(spread) else 0.0

    def _extent(self, points: Any, forces: Iterable[Any] = ()) -> float:
        """:meth:`_spread` of the bodies and ``points``; where they have none (a lone body at its own joint), that
        of the two-body ``forces``' anchors and rest lengths (a bead on its spring); else the largest radius of
        gyration of a rigid body, else 1 m (a lone particle has no length of its own)."""
        extent = self._spread(points)
        if extent > 0:
            return extent
        points, lengths = [], []
        for force in forces:
            bodies = getattr(force, "bodies", ())
            if len(bodies) == 2 and all(b == WORLD or b in self.bodies for b in bodies) and hasattr(force, "anchor_a"):
                for body, anchor in zip(bodies, (force.anchor_a, force.anchor_b), strict=True):
                    points.append(self.world_point(body, np.zeros(3) if anchor is None else np.asarray(anchor, float)))
                lengths.append(getattr(force, "rest_length", None))
        extent = self._spread(points, lengths)
        if extent > 0:
            return extent
        rigid = [b for b in self.bodies.values() if isinstance(b, RigidBody)]
        radii = [np.sqrt(np.max(b.principal_inertia) / b.mass) for b in rigid]
        return float(max(radii)) if radii and max(radii) > 0 else 1.0

    def fit_length_scale(self, frames: dict[str, LinkGeometry], forces: Iterable[Any] = ()) -> None:
        """Widen :attr:`length_scale` to the joints' anchors at the initial configuration (``frames``, from each
        joint's ``describe``): a pendulum's one body and its pivot, not the 1 m given to a lone body, or the
        millimetre every smaller scene was held to (a 1 µm top's pivot held to 1e-12 m, 1e-6 of its arm). The
        springs' and dampers' anchors and rest lengths (``forces``) count only where bodies and joints have no
        spread (a bead on its spring): a slack tether anchored 1 km away made a 1 m hinge's scale 1 km. It is
        what the constraint rows, SHAKE's tolerance, the statics' steps and the energy judgement's floor
        (:attr:`mbvi.System.energy_unit`) are measured against."""
        points = [self.world_point(f.a, np.asarray(f.anchor_a, dtype=float)) for f in frames.values()]
        points += [self.world_point(f.b, np.asarray(f.anchor_b, dtype=float)) for f in frames.values()]
        self.length_scale = self._extent(points, forces)

    # -- queries ---------------------------------------------------------------------------------
    def kind(self, name: str) -> str:
        """``"world"``, ``"particle"`` or ``"rigid"``."""
        if name == WORLD:
            return "world"
        body = self.bodies[name]
        return "rigid" if isinstance(body, RigidBody) else "particle"

    def _frame(self, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(position, R_user, principal axes V) at the initial configuration."""
        if name == WORLD:
            return np.zeros(3), np.eye(3), np.eye(3)
        body = self.bodies[name]
        if isinstance(body, Particle):
            return body.position, np.eye(3), np.eye(3)
        return body.position, body.orientation, body.principal_axes

    def world_point(self, name: str, anchor: np.ndarray) -> np.ndarray:
        """World position of a body-frame point at the initial configuration, m."""
        x, R, _ = self._frame(name)
        return x + R @ anchor

    def to_body_point(self, name: str, p_world: np.ndarray) -> np.ndarray:
        """Body-frame (user frame) coordinates of a world point at the initial configuration."""
        x, R, _ = self._frame(name)
        return R.T @ (p_world - x)

    def to_body_direction(self, name: str, d_world: np.ndarray) -> np.ndarray:
        """Body-frame coordinates of a world direction at the initial configuration."""
        _, R, _ = self._frame(name)
        return R.T @ d_world

    def point(self, name: str, anchor: np.ndarray) -> tuple[Terms, np.ndarray]:
        """Affine terms of the world position of body-frame point ``anchor``."""
        anchor = np.asarray(anchor, dtype=float)
        if name == WORLD:
            return [], anchor.copy()
        o = self.offset[name]
        if self.kind(name) == "particle":
            return [(o, 1.0)], anchor.copy()
        terms, _ = self.direction(name, anchor)
        return [(o, 1.0)] + terms, np.zeros(3)

    def direction(self, name: str, d_body: np.ndarray) -> tuple[Terms, np.ndarray]:
        """Affine terms of the world image of a body-fixed direction ``d_body``."""
        d_body = np.asarray(d_body, dtype=float)
        if name == WORLD or self.kind(name) == "particle":
            return [], d_body.copy()
        o = self.offset[name]
        p = self.bodies[name].principal_axes.T @ d_body
        return [(o + 3 + 3 * c, float(p[c])) for c in range(3) if p[c] != 0.0], np.zeros(3)
