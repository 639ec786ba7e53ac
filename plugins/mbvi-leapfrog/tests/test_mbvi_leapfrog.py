"""Tests of the mbvi-leapfrog plugin: registration, accuracy against closed forms, constraints.

Run with ``pytest plugins/mbvi-leapfrog`` after ``pip install -e plugins/mbvi-leapfrog``.
"""

from __future__ import annotations

import importlib.metadata as md

import numpy as np
import pytest
from mbvi_leapfrog import Leapfrog
from scipy.special import ellipj, ellipk

import mbvi

THETA0 = np.pi / 4  # pendulum amplitude, rad (m = l = g = 1)


def pendulum() -> mbvi.Scene:
    """The seed course's pendulum: m = l = g = 1, released from rest at θ₀ = π/4."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -1.0))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(np.sin(THETA0), 0.0, -np.cos(THETA0))))
    scene.add(mbvi.Rod("world", "bob"))
    return scene


def pendulum_exact(t: np.ndarray) -> np.ndarray:
    """Exact bob position, θ(t) = 2 asin(k sn(K − t | k²)) with k = sin(θ₀/2); shape (n, 3)."""
    k = np.sin(THETA0 / 2)
    sn = ellipj(ellipk(k * k) - np.asarray(t), k * k)[0]
    theta = 2.0 * np.arcsin(k * sn)
    return np.stack([np.sin(theta), np.zeros_like(theta), -np.cos(theta)], axis=-1)


def slope(dts, errors) -> float:
    """Least-squares slope of log(error) against log(dt)."""
    return float(np.polyfit(np.log(dts), np.log(errors), 1)[0])


def test_registered_through_the_entry_point():
    eps = {ep.name: ep.value for ep in md.entry_points(group="mbvi")}
    assert eps.get("leapfrog") == "mbvi_leapfrog"
    assert "leapfrog" in mbvi.integrators()
    assert mbvi.get_integrator("leapfrog") is Leapfrog
    assert Leapfrog.order == 2 and not Leapfrog.symplectic and not Leapfrog.variational


def test_pendulum_second_order_against_the_elliptic_solution():
    t_end = 4.0
    dts = 2.0 ** -np.arange(4, 8)
    errors = []
    for dt in dts:
        traj = mbvi.simulate(pendulum(), t_end, dt, "leapfrog")
        errors.append(np.max(np.abs(traj.position("bob") - pendulum_exact(traj.t))))
        # the projections keep the rod length and the velocity tangent at every step
        assert traj.constraint_error.max() <= 1e-10
        radial_speed = np.einsum("ij,ij->i", traj.position("bob"), traj.velocity("bob"))
        assert np.max(np.abs(radial_speed)) <= 1e-12
    assert slope(dts, errors) == pytest.approx(2.0, abs=0.2)
    assert errors[-1] < 1e-4


def test_without_constraints_it_is_stormer_verlet():
    """No constraints and no velocity-dependent forces: leapfrog and RATTLE are the same map."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=0.5, position=(0.3, 0.1, -1.2), velocity=(0.0, 0.4, 0.0)))
    scene.add(mbvi.Spring("world", "bob", stiffness=20.0, rest_length=1.0))
    a = mbvi.simulate(scene, 3.0, 1e-2, "leapfrog")
    b = mbvi.simulate(scene, 3.0, 1e-2, "verlet")
    assert np.max(np.abs(a.q - b.q)) <= 1e-12
    assert np.max(np.abs(a.v - b.v)) <= 1e-12


def test_velocity_dependent_force_second_order():
    """Falling particle with linear drag: x(t) has a closed form; the corrector keeps order 2."""
    m, c, g = 2.0, 1.5, 9.81
    x0, v0 = np.array([0.0, 0.0, 10.0]), np.array([1.0, -0.5, 3.0])
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    scene.add(mbvi.Particle("p", mass=m, position=x0, velocity=v0))
    scene.add(mbvi.Drag("p", coefficient=c))
    t_end = 2.0
    v_inf = np.array([0.0, 0.0, -m * g / c])
    exact = x0 + v_inf * t_end + (v0 - v_inf) * (m / c) * (1.0 - np.exp(-c * t_end / m))
    dts = 2.0 ** -np.arange(3, 7)
    errors = [np.max(np.abs(mbvi.simulate(scene, t_end, dt, "leapfrog").position("p")[-1] - exact)) for dt in dts]
    assert slope(dts, errors) == pytest.approx(2.0, abs=0.2)


def test_unknown_option_is_rejected():
    with pytest.raises(ValueError, match=r"leapfrog.*omega"):
        mbvi.simulate(pendulum(), 1.0, 0.1, "leapfrog", omega=1.0)


@pytest.mark.parametrize("option, value", [("maxiter", 0), ("tol", -1.0), ("maxiter", "x"), ("tol", float("nan"))])
def test_a_bad_option_value_is_a_value_error_naming_it(option, value):
    """It ran, then failed as an unstable step and set simulate re-running down to dt = 7.8e-6."""
    with pytest.raises(ValueError, match=rf"option '{option}' must be"):
        mbvi.simulate(pendulum(), 1.0, 0.1, "leapfrog", **{option: value})
