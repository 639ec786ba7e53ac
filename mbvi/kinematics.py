"""Kinematics of the maximal coordinates: the one owner of positions, rotations, ω and joint angles.

A rigid body's block of ``q`` is its centre of mass followed by the three
columns r₁, r₂, r₃ of the rotation from its principal frame to the world
(see :mod:`mbvi.layout`). Everything users read about a body or a joint —
:class:`mbvi.Trajectory` (many frames), :class:`mbvi.loads.StateView` (the
current state inside a step) and the force laws — is computed here, on arrays
with any leading batch shape ``(...)``:

* position x = q[o : o+3], velocity ẋ = v[o : o+3];
* rotation R = [r₁ r₂ r₃] Vᵀ (V: principal axes as columns in the user's body frame);
* angular velocity in the world frame ω = ½ Σᵢ rᵢ × ṙᵢ (exact for orthonormal columns,
  since ṙᵢ = ω × rᵢ);
* revolute joint angle θ = atan2((R_a u₂)·(R_b u₁), (R_a u₁)·(R_b u₁)) and rate
  θ̇ = (R_a n)·(ω_b − ω_a);
* prismatic joint displacement d = (P_b − P_a)·(R_a n).
"""

from __future__ import annotations

import numpy as np

from mbvi.geometry import BodyGeometry, LinkGeometry, cross

__all__ = [
    "angular_velocity",
    "body_angular_velocity",
    "body_point",
    "body_position",
    "body_rotation",
    "body_velocity",
    "columns",
    "cross",
    "joint_angle",
    "joint_displacement",
    "joint_displacement_rate",
    "joint_rate",
    "unwrap_by_rates",
]


def columns(x: np.ndarray, offset: int) -> np.ndarray:
    """The three rotation columns of the rigid body at ``offset``, one per row: shape (..., 3, 3).

    ``columns(q, o)[..., i, :]`` is rᵢ (dimensionless); ``columns(v, o)`` gives ṙᵢ (1/s).
    """
    return x[..., offset + 3 : offset + 12].reshape(x.shape[:-1] + (3, 3))


def angular_velocity(r: np.ndarray, rdot: np.ndarray) -> np.ndarray:
    """World-frame angular velocity ω = ½ Σᵢ rᵢ × ṙᵢ, rad/s.

    Parameters
    ----------
    r, rdot : ndarray, shape (..., 3, 3)
        Rotation columns rᵢ and their rates ṙᵢ, one per row (``[..., i, :]``).

    Returns
    -------
    ndarray, shape (..., 3)
    """
    return 0.5 * cross(r, rdot).sum(axis=-2)


def body_position(q: np.ndarray, body: BodyGeometry | None) -> np.ndarray:
    """Position of a body's origin (centre of mass), m, shape (..., 3); the world (None) is at 0."""
    if body is None:
        return np.zeros(q.shape[:-1] + (3,))
    return q[..., body.offset : body.offset + 3].copy()


def body_velocity(v: np.ndarray, body: BodyGeometry | None) -> np.ndarray:
    """Velocity of a body's origin, m/s, shape (..., 3); zero for the world (None)."""
    return body_position(v, body)


def body_rotation(q: np.ndarray, body: BodyGeometry | None) -> np.ndarray:
    """Body-to-world rotation in the user's body frame, shape (..., 3, 3); identity for particles and the world."""
    if body is None or body.kind != "rigid":
        return np.broadcast_to(np.eye(3), q.shape[:-1] + (3, 3)).copy()
    Rp = np.swapaxes(columns(q, body.offset), -1, -2)  # [..., :, c] = column c
    return Rp @ body.axes_matrix.T


def body_angular_velocity(q: np.ndarray, v: np.ndarray, body: BodyGeometry | None) -> np.ndarray:
    """World-frame angular velocity of a body, rad/s, shape (..., 3); zero for particles and the world."""
    if body is None or body.kind != "rigid":
        return np.zeros(q.shape[:-1] + (3,))
    return angular_velocity(columns(q, body.offset), columns(v, body.offset))


def body_point(q: np.ndarray, body: BodyGeometry | None, anchor: np.ndarray) -> np.ndarray:
    """World position of a body-frame point, m, shape (..., 3) (for the world: the point itself)."""
    a = np.asarray(anchor, dtype=float)
    return body_position(q, body) + body_rotation(q, body) @ a


def joint_angle(q: np.ndarray, link: LinkGeometry, a: BodyGeometry | None, b: BodyGeometry | None) -> np.ndarray:
    """Angle of a revolute joint (b relative to a, about its axis), rad, shape (...): within π of the joint's
    ``initial_angle`` θ₀, which it is at assembly (4 rad reads 4, not 4 − 2π); ``a``/``b`` are the joint's bodies
    (None for the world).
    """
    Ra, Rb = body_rotation(q, a), body_rotation(q, b)
    u1a, u2a = angle_frame(link)
    w = Rb @ np.asarray(link.u1_b, dtype=float)
    s = np.einsum("...j,...j->...", Ra @ u2a, w)
    c = np.einsum("...j,...j->...", Ra @ u1a, w)
    return link.initial_angle + np.arctan2(s, c)


def angle_frame(link: LinkGeometry) -> tuple[np.ndarray, np.ndarray]:
    """u₁, u₂ of a revolute joint in body a's frame turned by its initial angle θ₀ about the axis: the joint angle is
    θ₀ + atan2((R_a u₂)·(R_b u₁ᵇ), (R_a u₁)·(R_b u₁ᵇ)) in this frame, within π of θ₀ (NumPy and compiled views)."""
    c, s = np.cos(link.initial_angle), np.sin(link.initial_angle)
    u1, u2 = np.asarray(link.u1_a, dtype=float), np.asarray(link.u2_a, dtype=float)
    return c * u1 + s * u2, c * u2 - s * u1


def joint_rate(
    q: np.ndarray, v: np.ndarray, link: LinkGeometry, a: BodyGeometry | None, b: BodyGeometry | None
) -> np.ndarray:
    """Rate of a revolute joint angle θ̇ = (R_a n)·(ω_b − ω_a), rad/s, shape (...)."""
    n = body_rotation(q, a) @ np.asarray(link.axis_a, dtype=float)
    dw = body_angular_velocity(q, v, b) - body_angular_velocity(q, v, a)
    return np.einsum("...j,...j->...", n, dw)


def unwrap_by_rates(angle: np.ndarray, rate: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whole turns added to sampled angles known only up to 2π, from their rates: the angle of sample k is
    predicted from sample k − 1 by the trapezoidal rule on the rates, and takes the turn nearest that prediction.

    ``numpy.unwrap`` assumes that an angle moves less than π between samples, and a wheel spinning at 30 rad/s
    saved every 0.2 s moves 6 rad: it then counts turns backwards, silently. The rates say how far it went.

    Parameters
    ----------
    angle : ndarray, shape (n,)
        Angles, rad, each right up to a whole turn (the first is kept as it is).
    rate : ndarray, shape (n,)
        Their rates, rad/s.
    t : ndarray, shape (n,)
        Sample times, s.

    Returns
    -------
    unwrapped : ndarray, shape (n,)
        ``angle`` plus whole turns, rad.
    miss : ndarray, shape (n,)
        How far each sample lies from its prediction once unwrapped, rad (0 for the first). Past π/2 the turn
        taken is in doubt: the rate changed too much between two samples for the trapezoidal rule.
    """
    angle, rate, t = (np.asarray(x, dtype=float) for x in (angle, rate, t))
    if angle.size < 2:
        return angle.copy(), np.zeros_like(angle)
    step = 0.5 * (rate[1:] + rate[:-1]) * np.diff(t)
    gap = angle[:-1] + step - angle[1:]  # prediction minus sample, before whole turns
    turns = np.rint(gap / (2 * np.pi))
    unwrapped = angle + 2 * np.pi * np.concatenate(([0.0], np.cumsum(turns)))
    miss = np.concatenate(([0.0], np.abs(gap - 2 * np.pi * turns)))
    return unwrapped, miss


def joint_displacement(q: np.ndarray, link: LinkGeometry, a: BodyGeometry | None, b: BodyGeometry | None) -> np.ndarray:
    """Displacement of a prismatic joint along its axis from the assembly configuration, m, shape (...)."""
    d = body_point(q, b, link.anchor_b) - body_point(q, a, link.anchor_a)
    n = body_rotation(q, a) @ np.asarray(link.axis_a, dtype=float)
    return np.einsum("...j,...j->...", d, n)


def joint_displacement_rate(
    q: np.ndarray, v: np.ndarray, link: LinkGeometry, a: BodyGeometry | None, b: BodyGeometry | None
) -> np.ndarray:
    """Rate of a prismatic joint displacement, m/s, shape (...) (d/dt of :func:`joint_displacement`)."""
    d = body_point(q, b, link.anchor_b) - body_point(q, a, link.anchor_a)
    ra = body_rotation(q, a)
    n = ra @ np.asarray(link.axis_a, dtype=float)
    wa, wb = body_angular_velocity(q, v, a), body_angular_velocity(q, v, b)
    pa = ra @ np.asarray(link.anchor_a, dtype=float)
    pb = body_rotation(q, b) @ np.asarray(link.anchor_b, dtype=float)
    dd = body_velocity(v, b) + cross(wb, pb) - body_velocity(v, a) - cross(wa, pa)
    return np.einsum("...j,...j->...", dd, n) + np.einsum("...j,...j->...", d, cross(wa, n))
