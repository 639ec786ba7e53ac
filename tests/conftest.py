"""Shared test systems with independent references (minimal coordinates, scipy's DOP853).

Each fixture returns a small object with ``scene()`` (a fresh :class:`mbvi.Scene`)
and, where there is one, ``reference(t)`` computed without mbvi.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import mbvi

G = 9.81  # m/s²
REF = {"method": "DOP853", "rtol": 1e-12, "atol": 1e-12}


def _polar(length: float, theta: float) -> np.ndarray:
    """Point at ``length`` from the origin, ``theta`` from the downward vertical, in the x–z plane."""
    return length * np.array([np.sin(theta), 0.0, -np.cos(theta)])


def _polar_rate(length: float, theta: float, omega: float) -> np.ndarray:
    return length * omega * np.array([np.cos(theta), 0.0, np.sin(theta)])


@pytest.fixture
def pendulum():
    """The seed course's pendulum (m = l = g = 1, released from rest at θ₀ = π/4)."""

    def scene(theta0: float = np.pi / 4, velocity=(0.0, 0.0, 0.0)) -> mbvi.Scene:
        s = mbvi.Scene(gravity=(0.0, 0.0, -1.0))
        s.add(mbvi.Particle("bob", mass=1.0, position=_polar(1.0, theta0), velocity=velocity))
        s.add(mbvi.Rod("world", "bob"))
        return s

    return SimpleNamespace(scene=scene, theta0=np.pi / 4)


@pytest.fixture
def double_pendulum():
    """Planar double pendulum of particles on rods; reference: Lagrange's equations in the two angles."""
    m1, m2, l1, l2 = 1.0, 1.5, 1.0, 0.8
    th1, th2, w1, w2 = 0.9, 0.3, 0.0, 0.5  # rad, rad/s, from the downward vertical

    def scene() -> mbvi.Scene:
        x1, v1 = _polar(l1, th1), _polar_rate(l1, th1, w1)
        s = mbvi.Scene(gravity=(0.0, 0.0, -G))
        s.add(mbvi.Particle("a", mass=m1, position=x1, velocity=v1))
        s.add(mbvi.Particle("b", mass=m2, position=x1 + _polar(l2, th2), velocity=v1 + _polar_rate(l2, th2, w2)))
        s.add(mbvi.Rod("world", "a"))
        s.add(mbvi.Rod("a", "b"))
        return s

    def rhs(_, y):
        a, b, wa, wb = y
        c, s = np.cos(a - b), np.sin(a - b)
        M = [[(m1 + m2) * l1**2, m2 * l1 * l2 * c], [m2 * l1 * l2 * c, m2 * l2**2]]
        f = [
            -m2 * l1 * l2 * s * wb**2 - (m1 + m2) * G * l1 * np.sin(a),
            m2 * l1 * l2 * s * wa**2 - m2 * G * l2 * np.sin(b),
        ]
        return [wa, wb, *np.linalg.solve(M, f)]

    def reference(t: float) -> dict[str, np.ndarray]:
        """Positions of "a" and "b" at time t, m."""
        a, b = solve_ivp(rhs, (0.0, t), [th1, th2, w1, w2], **REF).y[:2, -1]
        return {"a": _polar(l1, a), "b": _polar(l1, a) + _polar(l2, b)}

    return SimpleNamespace(scene=scene, reference=reference)


@pytest.fixture
def spring_pendulum():
    """A particle on a linear spring to the world under gravity (no constraints); reference in polar coordinates."""
    m, k, rest, r0, th0 = 1.0, 40.0, 1.0, 1.2, 0.6

    def scene() -> mbvi.Scene:
        s = mbvi.Scene(gravity=(0.0, 0.0, -G))
        s.add(mbvi.Particle("bob", mass=m, position=_polar(r0, th0)))
        s.add(mbvi.Spring("world", "bob", stiffness=k, rest_length=rest))
        return s

    def rhs(_, y):
        r, th, vr, vth = y
        return [vr, vth, r * vth**2 + G * np.cos(th) - k / m * (r - rest), -(G * np.sin(th) + 2 * vr * vth) / r]

    def reference(t: float) -> dict[str, np.ndarray]:
        r, th = solve_ivp(rhs, (0.0, t), [r0, th0, 0.0, 0.0], **REF).y[:2, -1]
        return {"bob": _polar(r, th)}

    return SimpleNamespace(scene=scene, reference=reference)


@pytest.fixture
def free_chain():
    """A chain of particles and rods in zero gravity with random (seeded) initial velocities.

    The velocities violate the rods, so ``simulate`` projects them with a
    :class:`mbvi.ConstraintWarning`.
    """

    def scene(n: int = 6, seed: int = 1) -> mbvi.Scene:
        rng = np.random.default_rng(seed)
        s = mbvi.Scene(gravity=None)
        x = np.cumsum(rng.uniform(0.5, 1.0, (n, 3)), axis=0)
        x -= x.mean(axis=0)
        for i in range(n):
            s.add(mbvi.Particle(f"p{i}", mass=rng.uniform(0.5, 2.0), position=x[i], velocity=rng.normal(size=3)))
            if i:
                s.add(mbvi.Rod(f"p{i - 1}", f"p{i}"))
        return s

    return SimpleNamespace(scene=scene)
