"""A planar four-bar linkage (crank–rocker) of capsules on revolute joints: a closed loop.

The ground link joins the pivots A = (0, 0, 0) and D = (ground, 0, 0); the
crank AB, coupler BC and rocker DC move in the x–z plane, hinged about the
world −y axis (so joint angles grow from +x towards +z). In 3D the loop is
redundant — 38 constraint equations of rank 35 — so assembly warns with
:class:`mbvi.RedundantConstraintWarning` and drops three of them; they stay
satisfied. The output (rocker) angle follows Freudenstein's equation
K₁ cos θ₄ − K₂ cos θ₂ + K₃ = cos(θ₂ − θ₄), K₁ = d/a, K₂ = d/c,
K₃ = (a² − b² + c² + d²)/(2ac).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

import mbvi

T_END = 5.0
DT = 1e-3

AXIS = np.array([0.0, -1.0, 0.0])  # hinge axis: a positive angle turns +x towards +z
# |sin μ| of the transmission angle μ (coupler to rocker) below which build() refuses: the coupler's and rocker's
# rates grow as 1/sin μ, and C's offset from the line BD, √(b² − along²), is known only to ~√eps·b ≈ 1.5e-8 b,
# so near 1e-6 the velocities carry percent errors and at 0 they are undetermined (np.linalg.solve: "Singular
# matrix")
_DEAD_POINT = 1e-6


def _real(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _planar(angle: float) -> np.ndarray:
    return np.array([math.cos(angle), 0.0, math.sin(angle)])


def positions(crank: float, coupler: float, rocker: float, ground: float, theta: float) -> dict[str, np.ndarray]:
    """Joint points A, B, C, D (m) for crank angle ``theta`` (rad), open branch (C above the line BD).

    Raises
    ------
    ValueError
        For a link length that is not a positive finite number or a crank angle that is not finite, or when
        the loop cannot close at this crank angle (the crank pin B on the rocker pivot D included).
    """
    lengths = {"crank": crank, "coupler": coupler, "rocker": rocker, "ground": ground}
    for what, value in lengths.items():
        if not (_real(value) and 0 < value < math.inf):
            raise ValueError(f"four_bar: {what} must be a positive link length in metres, got {value!r}")
    if not (_real(theta) and math.isfinite(theta)):
        raise ValueError(f"four_bar: theta must be a finite crank angle in radians, got {theta!r}")
    A, D = np.zeros(3), np.array([ground, 0.0, 0.0])
    B = A + crank * _planar(theta)
    BD = D - B
    dist = float(np.linalg.norm(BD))
    if dist <= 1e-12 * max(lengths.values()):
        raise ValueError(
            f"four_bar: at crank angle {theta:g} rad the crank pin B lies on the rocker pivot D (crank {crank:g} m "
            f"= ground {ground:g} m): the linkage cannot be assembled there; choose another theta"
        )
    along = (coupler**2 - rocker**2 + dist**2) / (2 * dist)
    if coupler**2 - along**2 < 0:
        raise ValueError(
            f"four_bar: the loop does not close at crank angle {theta:g} rad (crank {crank:g} m, coupler "
            f"{coupler:g} m, rocker {rocker:g} m, ground {ground:g} m): the linkage cannot be assembled there"
        )
    across = math.sqrt(coupler**2 - along**2)
    ex = BD / dist
    ez = np.cross(AXIS, ex)  # ex turned by +90° in the x–z plane
    return {"A": A, "B": B, "C": B + along * ex + across * ez, "D": D}


def _link(
    name: str,
    p: np.ndarray,
    q: np.ndarray,
    radius: float,
    density: float,
    omega: float,
    pivot: np.ndarray,
    pivot_velocity: np.ndarray,
) -> mbvi.RigidBody:
    u = q - p
    z = u / np.linalg.norm(u)
    x = np.array([0.0, 1.0, 0.0])
    R = np.column_stack([x, np.cross(z, x), z])  # body z along the link
    com = 0.5 * (p + q)
    w = omega * AXIS
    return mbvi.RigidBody(
        name,
        shape=mbvi.Capsule(radius, float(np.linalg.norm(u))),
        density=density,
        position=com,
        orientation=R,
        velocity=pivot_velocity + np.cross(w, com - pivot),
        angular_velocity=w,
    )


def build(
    crank: float = 0.3,
    coupler: float = 1.0,
    rocker: float = 0.8,
    ground: float = 1.0,
    theta: float = 0.7,
    crank_speed: float = 6.0,
    g: float = 9.81,
    radius: float = 0.03,
    density: float = 1000.0,
) -> mbvi.Scene:
    """A crank–rocker four-bar linkage.

    Parameters
    ----------
    crank, coupler, rocker, ground : float, default: 0.3, 1, 0.8, 1
        Link lengths a, b, c, d, m. The defaults satisfy Grashof's condition
        (shortest + longest ≤ sum of the other two) with the crank shortest,
        so the crank turns fully.
    theta : float, default: 0.7
        Initial crank angle from +x towards +z, rad.
    crank_speed : float, default: 6
        Initial crank angular velocity about −y, rad/s; the coupler's and the
        rocker's follow from the velocity analysis of the loop.
    g : float, default: 9.81
        Gravity along −z, m/s².
    radius : float, default: 0.03
        Capsule radius of the links, m.
    density : float, default: 1000
        Link density, kg/m³.

    Raises
    ------
    ValueError
        For a link length that is not a positive finite number, a ``theta`` or ``crank_speed`` that is not
        finite, a crank angle at which the loop does not close, or a dead point: the coupler and the rocker in
        line (|sin μ| < 1e-6 for the transmission angle μ), where their rates are undetermined.
    """
    P = positions(crank, coupler, rocker, ground, theta)
    if not (_real(crank_speed) and math.isfinite(crank_speed)):
        raise ValueError(f"four_bar: crank_speed must be a finite number of rad/s, got {crank_speed!r}")
    A, B, C, D = P["A"], P["B"], P["C"], P["D"]
    sin_mu = float(np.cross(C - B, C - D) @ AXIS) / (coupler * rocker)
    if abs(sin_mu) < _DEAD_POINT:
        raise ValueError(
            f"four_bar: at theta = {theta:g} rad the coupler ({coupler:g} m) and the rocker ({rocker:g} m) lie in "
            f"line (crank {crank:g} m, ground {ground:g} m; sin of the transmission angle {sin_mu:.2g}): the "
            "linkage is at a dead point, where the coupler's and rocker's rates are undetermined; "
            "choose another theta or other lengths"
        )
    # velocity analysis: v_B + ω₃ n × (C − B) = ω₄ n × (C − D), solved in the x–z plane
    vB = crank_speed * np.cross(AXIS, B - A)
    M = np.column_stack([np.cross(AXIS, C - B), -np.cross(AXIS, C - D)])[[0, 2]]
    w3, w4 = np.linalg.solve(M, -vB[[0, 2]])
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    scene.add(_link("crank", A, B, radius, density, crank_speed, A, np.zeros(3)))
    scene.add(_link("coupler", B, C, radius, density, w3, B, vB))
    scene.add(_link("rocker", D, C, radius, density, w4, D, np.zeros(3)))
    scene.add(mbvi.Revolute("world", "crank", anchor=A, axis=AXIS, name="input"))
    scene.add(mbvi.Revolute("crank", "coupler", anchor=B, axis=AXIS, name="B"))
    scene.add(mbvi.Revolute("coupler", "rocker", anchor=C, axis=AXIS, name="C"))
    scene.add(mbvi.Revolute("world", "rocker", anchor=D, axis=AXIS, name="output"))
    return scene
