"""One scene, two coordinate choices: a tree scene's Lagrangian in joint (minimal) coordinates.

Every body's position x(q) and rotation R(q) are written symbolically along
the tree from the world; the kinetic energy is Σ ½m|ẋ|² + ½tr(Ṙ D Ṙᵀ)
(D = ½tr(J)·1 − J in the body frame, the same rotation-column masses as
the maximal-coordinate assembly), the potential is that of gravity and
springs, and dampers, drag and joint damping become a generalized force.

Supported: particles on :class:`~mbvi.Rod` joints (one angle per rod when the
whole motion lies in one plane that contains gravity, two angles per rod
otherwise), rigid bodies on :class:`~mbvi.Revolute` (the joint angle),
:class:`~mbvi.Prismatic` (the displacement) and :class:`~mbvi.Fixed`
joints, free particles (x, y, z); gravity, springs, dampers, drag and joint
damping. Anything else (closed loops, spherical joints, beams, free rigid
bodies, torsion springs, external loads) is a ``ValueError`` naming it.
"""

from __future__ import annotations

import re
from collections import deque
from typing import Any

import numpy as np

from mbvi.state import State

__all__ = ["from_scene"]

WORLD = "world"


def _ident(name: str) -> str:
    return re.sub(r"\W", "_", name)


def _rodrigues(sp: Any, n: np.ndarray, th: Any) -> Any:
    """Rotation by angle ``th`` about unit axis ``n`` (sympy 3×3)."""
    K = sp.Matrix([[0, -n[2], n[1]], [n[2], 0, -n[0]], [-n[1], n[0], 0]])
    return sp.eye(3) + sp.sin(th) * K + (1 - sp.cos(th)) * K * K


def _plane(scene: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(e_down, e_side, normal) when every particle, anchor (of the rods, springs and dampers), velocity and
    gravity (the scene's and every Gravity force's) lies in one plane, else None."""
    pts, dirs = [], []

    def point(body: str, anchor: Any) -> np.ndarray:
        anchor = np.asarray(anchor, float)
        return anchor if body == WORLD else np.asarray(scene.body(body).position, float) + anchor

    for j in scene.joints:
        if type(j).__name__ != "Rod":
            return None
        for body, anchor in ((j.a, j.anchor_a), (j.b, j.anchor_b)):
            pts.append(point(body, anchor))
    extra = np.zeros(3)  # the Gravity forces' field (applied on top of the scene's)
    for f in scene.forces:
        kind = type(f).__name__
        if kind in ("Spring", "Damper"):  # a spring to a point off the plane pulls the motion out of it
            pts += [point(f.a, f.anchor_a), point(f.b, f.anchor_b)]
        elif kind == "Gravity":
            dirs.append(np.asarray(f.g, float))
            extra = extra + np.asarray(f.g, float)
    for b in scene.bodies:
        pts.append(b.position)
        dirs.append(b.velocity)
    g = np.asarray(scene.gravity, float)
    if not np.linalg.norm(g) > 0:  # no scene gravity: down is the Gravity forces' field, if any
        g = extra
    dirs.append(g)
    P = np.array(pts)
    rows = np.vstack([P - P[0], np.array(dirs)])
    scale = max(1.0, float(np.max(np.abs(rows))))
    _, s, Vt = np.linalg.svd(rows)
    if len(s) == 3 and s[2] > 1e-9 * scale:
        return None
    normal = Vt[2] if np.linalg.norm(g) == 0 or abs(Vt[2] @ g) < 1e-9 * np.linalg.norm(g) else None
    if normal is None:
        return None
    normal = normal * np.sign(normal[np.argmax(np.abs(normal))])
    if np.linalg.norm(g) > 0:
        down = g / np.linalg.norm(g)
    else:  # no gravity: angles from the initial direction of the first rod
        down = P[1] - P[0] if len(P) > 1 else np.cross(normal, [1.0, 0.0, 0.0])
        down = down - (down @ normal) * normal
        down /= np.linalg.norm(down)
    side = np.cross(down, normal)
    return down, side, normal


def _swing_axes(e1: np.ndarray, rate: np.ndarray, pull: np.ndarray, length: float) -> tuple[np.ndarray, np.ndarray]:
    """The chart of a rod of ``length`` m in 3D, direction u = (e1 cos α + e2 sin α) cos β + e3 sin β about its
    initial direction e1: (e2, e3), with the chart's poles ±e3 (where α is undefined) normal to the rod's initial
    plane of swing, so that the swing starts along the equator: the plane of its relative velocity ``rate``
    (m/s), or of the acceleration ``pull`` (m/s²) of the forces on its bob when the velocity is too slow to
    matter against it over the rod's length (|w|² < 0.1 |a| l, w and a across the rod). Poles fixed along a world
    axis could lie in that plane: a bob swung at 6 m/s passed near one, 550× less accurate than in maximal
    coordinates."""
    w = np.asarray(rate, float) - (np.asarray(rate, float) @ e1) * e1
    a = np.asarray(pull, float) - (np.asarray(pull, float) @ e1) * e1
    first = (w, a) if float(w @ w) >= 0.1 * float(np.linalg.norm(a)) * length else (a, w)
    for along in (*first, np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])):
        size = float(np.linalg.norm(along))
        normal = np.cross(e1, along / size) if size > 0.0 else np.zeros(3)
        if np.linalg.norm(normal) > 1e-6:  # (nothing across the rod: the next choice)
            e3 = normal / np.linalg.norm(normal)
            return np.cross(e3, e1), e3
    raise AssertionError("unreachable: x or y is off any rod's direction")


def _initial_pull(scene: Any, name: str, at: Any) -> np.ndarray:
    """The acceleration (m/s²) the scene's gravity, its Gravity forces and its springs give particle ``name`` at
    the initial configuration (``at(body, anchor)``: a body's anchor point there, m), joints aside."""
    body = next(b for b in scene.bodies if b.name == name)
    acc = np.asarray(scene.gravity, float).copy()
    for f in scene.forces:
        kind = type(f).__name__
        if kind == "Gravity":
            acc += np.asarray(f.g, float)
        elif kind == "Spring" and name in (f.a, f.b) and f.rest_length is not None:
            d = at(f.b, f.anchor_b) - at(f.a, f.anchor_a)
            r = float(np.linalg.norm(d))
            if r > 0.0:
                pull = -f.stiffness * (r - float(f.rest_length)) * d / r  # on b; on a the opposite
                acc += (pull if f.b == name else -pull) / body.mass
    return acc


def from_scene(scene: Any, name: str | None = None, *, system_type: type) -> Any:
    """The joint-coordinate :class:`mbvi.LagrangianSystem` of a tree scene.

    Coordinates are named after their joints: ``theta_<joint>`` (a rod in a
    plane, from the direction of gravity, counter-clockwise about the plane's
    normal; a revolute joint, from its initial configuration),
    ``alpha_<joint>``/``beta_<joint>`` (a rod in 3D: azimuth and elevation
    from its initial direction, the poles normal to its initial swing), ``s_<joint>`` (a prismatic joint, m from the
    initial configuration), ``x_<body>``, ``y_<body>``, ``z_<body>`` (a free
    particle). The system's initial state is the scene's (velocities fitted
    in the mass-weighted least-squares sense), and
    :meth:`LagrangianSystem.body_position` maps coordinates back to the
    world positions of the bodies.

    Parameters
    ----------
    scene : mbvi.Scene
    name : str, optional
        Name of the system (default ``"scene in joint coordinates"``).
    system_type : type
        The class to build (:class:`mbvi.LagrangianSystem`; this module does not import it).

    Returns
    -------
    mbvi.LagrangianSystem

    Raises
    ------
    ValueError
        For a scene with closed loops, or an element it does not support (named).
    """
    import sympy as sp

    scene.check()
    if getattr(scene, "beams", None):
        raise ValueError(f"from_scene: beams ({', '.join(scene.beams)}) are not supported in joint coordinates")
    if scene.has_loops():
        raise ValueError("from_scene: the scene has closed loops; joint coordinates need a tree (use maximal ones)")
    bodies = {b.name: b for b in scene.bodies}
    adj: dict[str, list[Any]] = {WORLD: [], **{n: [] for n in bodies}}
    for j in scene.joints:
        adj[j.a].append(j)
        adj[j.b].append(j)
    plane = _plane(scene) if all(type(b).__name__ == "Particle" for b in bodies.values()) else None

    q: list[Any] = []
    v: list[Any] = []
    X: dict[str, Any] = {WORLD: sp.zeros(3, 1)}
    R: dict[str, Any] = {WORLD: sp.eye(3)}
    R0: dict[str, np.ndarray] = {WORLD: np.eye(3)}
    q0: list[float] = []
    joint_coord: dict[str, Any] = {}

    def new(label: str, value: float) -> Any:
        s, w = sp.Symbol(label), sp.Symbol("d" + label)
        q.append(s)
        v.append(w)
        q0.append(value)
        return s

    def init_rot(body: Any) -> np.ndarray:
        return np.asarray(body.orientation, float) if type(body).__name__ == "RigidBody" else np.eye(3)

    def world_point(name: str, anchor: np.ndarray) -> Any:
        return X[name] + R[name] * sp.Matrix(anchor)

    def x0(name: str) -> np.ndarray:
        return np.zeros(3) if name == WORLD else np.asarray(bodies[name].position, float)

    def point0(name: str, anchor: Any) -> np.ndarray:
        """A body's anchor point at the initial configuration, world frame, m."""
        anchor = np.asarray(anchor, float)
        return anchor if name == WORLD else x0(name) + init_rot(bodies[name]) @ anchor

    def v0(name: str) -> np.ndarray:
        return np.zeros(3) if name == WORLD else np.asarray(bodies[name].velocity, float)

    def v0_point(name: str, anchor: np.ndarray) -> np.ndarray:
        """The initial velocity of a body-frame point of ``name``, m/s."""
        if name == WORLD or type(bodies[name]).__name__ != "RigidBody":
            return v0(name)
        return v0(name) + np.cross(np.asarray(bodies[name].angular_velocity, float), R0[name] @ anchor)

    seen = {WORLD}
    roots = [WORLD] + [n for n in bodies if not adj[n]]
    for n in roots[1:]:
        b = bodies[n]
        if type(b).__name__ != "Particle":
            raise ValueError(f"from_scene: rigid body {n!r} has no joint (free rigid bodies are not supported)")
        X[n] = sp.Matrix([new(f"{c}_{_ident(n)}", float(b.position[i])) for i, c in enumerate("xyz")])
        R[n], R0[n] = sp.eye(3), np.eye(3)
        seen.add(n)
    queue = deque([WORLD])
    while queue:
        parent = queue.popleft()
        for j in adj[parent]:
            child = j.b if j.a == parent else j.a
            if child in seen:
                continue
            if child == WORLD:
                continue
            seen.add(child)
            queue.append(child)
            kind = type(j).__name__
            cb = bodies[child]
            label = _ident(j.name)
            R0[child] = init_rot(cb)
            if kind == "Rod":
                flipped = j.a != parent
                a_anchor = np.asarray(j.anchor_b if flipped else j.anchor_a, float)
                b_anchor = np.asarray(j.anchor_a if flipped else j.anchor_b, float)
                if type(cb).__name__ != "Particle":
                    raise ValueError(
                        f"from_scene: rod {j.name!r} carries rigid body {child!r}; only particles hang on rods"
                    )
                pa0 = a_anchor if parent == WORLD else x0(parent) + R0[parent] @ a_anchor
                d0 = x0(child) + b_anchor - pa0
                length = float(np.linalg.norm(d0))
                pa = world_point(parent, a_anchor)
                if plane is not None:
                    down, side, _ = plane
                    th = new(f"theta_{label}", float(np.arctan2(d0 @ side, d0 @ down)))
                    u = sp.Matrix(side) * sp.sin(th) + sp.Matrix(down) * sp.cos(th)
                else:
                    e1 = d0 / length
                    rate = v0(child) - v0_point(parent, a_anchor)
                    e2, e3 = _swing_axes(e1, rate, _initial_pull(scene, child, point0), length)
                    al = new(f"alpha_{label}", 0.0)
                    be = new(f"beta_{label}", 0.0)
                    u = (sp.Matrix(e1) * sp.cos(al) + sp.Matrix(e2) * sp.sin(al)) * sp.cos(be) + sp.Matrix(e3) * sp.sin(
                        be
                    )
                X[child] = pa + length * u - sp.Matrix(b_anchor)
                R[child] = sp.eye(3)
            elif kind in ("Revolute", "Prismatic", "Fixed"):
                if type(cb).__name__ != "RigidBody":
                    raise ValueError(f"from_scene: joint {j.name!r} needs rigid bodies, {child!r} is a particle")
                Ra0 = R0[parent]
                xa0 = x0(parent)
                rel = sp.Matrix(Ra0.T @ R0[child])  # child's initial rotation in the parent's frame
                off = sp.Matrix(Ra0.T @ (x0(child) - xa0))
                if kind == "Revolute":
                    P0 = np.asarray(j.anchor if j.anchor is not None else x0(j.b), float)
                    n_a = Ra0.T @ np.asarray(j.axis, float)
                    th = new(f"theta_{label}", 0.0)
                    Rot = _rodrigues(sp, n_a, th)
                    Pa = sp.Matrix(Ra0.T @ (P0 - xa0))
                    R[child] = R[parent] * Rot * rel
                    X[child] = X[parent] + R[parent] * (Pa + Rot * (off - Pa))
                    joint_coord[j.name] = th
                elif kind == "Prismatic":
                    n_a = sp.Matrix(Ra0.T @ np.asarray(j.axis, float))
                    s = new(f"s_{label}", 0.0)
                    R[child] = R[parent] * rel
                    X[child] = X[parent] + R[parent] * (off + s * n_a)
                    joint_coord[j.name] = s
                else:
                    R[child] = R[parent] * rel
                    X[child] = X[parent] + R[parent] * off
            else:
                raise ValueError(f"from_scene: joint {j.name!r} of type {kind} is not supported in joint coordinates")
    for j in scene.joints:
        if j.a not in seen or j.b not in seen:
            raise ValueError(f"from_scene: joint {j.name!r} is not connected to the world")
    if not q:
        raise ValueError("from_scene: the scene has no degrees of freedom")

    qv, vv = sp.Matrix(q), sp.Matrix(v)

    def rate(expr: Any) -> Any:
        return expr.jacobian(qv) * vv

    T = 0
    U = 0
    g = sp.Matrix(np.asarray(scene.gravity, float))
    for n, b in bodies.items():
        xd = rate(X[n])
        T += sp.Rational(1, 2) * b.mass * (xd.T * xd)[0, 0]
        U -= b.mass * (g.T * X[n])[0, 0]
        if type(b).__name__ == "RigidBody":
            D = 0.5 * np.trace(b.inertia) * np.eye(3) - b.inertia
            Rd = rate(R[n].reshape(9, 1)).reshape(3, 3)
            T += sp.Rational(1, 2) * (Rd * sp.Matrix(D) * Rd.T).trace()
    Qf = sp.zeros(len(q), 1)
    for f in scene.forces:
        kind = type(f).__name__
        if kind == "Gravity":  # on top of the scene's gravity, as the maximal-coordinate assembly applies it
            for n, b in bodies.items():
                U -= b.mass * (sp.Matrix(np.asarray(f.g, float)).T * X[n])[0, 0]
        elif kind in ("Spring", "Damper"):
            d = world_point(f.b, f.anchor_b) - world_point(f.a, f.anchor_a)
            dist = sp.sqrt((d.T * d)[0, 0])
            if kind == "Spring":
                pa0 = np.asarray(_num(world_point(f.a, f.anchor_a), q, q0), float)
                pb0 = np.asarray(_num(world_point(f.b, f.anchor_b), q, q0), float)
                L0 = float(np.linalg.norm(pb0 - pa0)) if f.rest_length is None else float(f.rest_length)
                U += sp.Rational(1, 2) * f.stiffness * (dist - L0) ** 2
            else:
                grad = sp.Matrix([dist]).jacobian(qv)
                Qf -= f.damping * grad.T * (grad * vv)
        elif kind == "Drag":
            J = world_point(f.body, f.anchor).jacobian(qv)
            Qf -= f.coefficient * J.T * (J * vv)
        elif kind == "JointDamping":
            if f.joint not in joint_coord:
                raise ValueError(f"from_scene: joint damping {f.name!r} needs a revolute or prismatic joint")
            i = q.index(joint_coord[f.joint])
            Qf[i] -= f.coefficient * v[i]
        else:
            raise ValueError(f"from_scene: force {f.name!r} of type {kind} is not supported in joint coordinates")

    # initial velocities: fit the scene's body velocities (and rotation-column rates) by least squares
    qa = np.array(q0)
    rows, target = [], []
    for n, b in bodies.items():
        Jx = np.asarray(_num(X[n].jacobian(qv), q, qa), float)
        w = np.sqrt(b.mass)
        rows.append(w * Jx)
        target.append(w * np.asarray(b.velocity, float))
        if type(b).__name__ == "RigidBody":
            Jr = np.asarray(_num(R[n].reshape(9, 1).jacobian(qv), q, qa), float)
            om = np.asarray(b.angular_velocity, float)
            W = np.array([[0, -om[2], om[1]], [om[2], 0, -om[0]], [-om[1], om[0], 0]])
            wr = np.sqrt(np.trace(b.inertia))
            rows.append(wr * Jr)
            target.append(wr * (W @ R0[n]).reshape(9))
    A, y = np.vstack(rows), np.concatenate(target)
    v0 = np.linalg.lstsq(A, y, rcond=None)[0]
    system = system_type(
        T - U,
        q,
        v,
        force=None if all(e == 0 for e in Qf) else list(Qf),
        initial_state=State(qa, v0),
        name=name or "scene in joint coordinates",
    )
    system._kinematics = {n: (X[n], R[n]) for n in bodies}
    return system


def _num(expr: Any, q: list[Any], values: Any) -> Any:
    import sympy as sp

    return sp.lambdify([q], expr, modules="numpy")(list(values))
