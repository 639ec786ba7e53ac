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
        pts = q0.reshape(-1, 3)[self.translation_blocks // 3] if trans else np.zeros((1, 3))
        extent = float(np.max(np.ptp(pts, axis=0))) if len(pts) > 1 else 0.0
        #: characteristic length of the scene, m
        self.length_scale = max(extent, 1e-3) if extent > 0 else 1.0
        #: the scene's joints by name (set by assembly; the model, read-only)
        self.joints: dict[str, Any] = {}  # name -> mbvi.Joint
        #: each joint's anchors and axes in the body frames (set by assembly, from ``Joint.describe``)
        self.joint_frames: dict[str, LinkGeometry] = {}

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
