"""Acceptance tests of the core (issue 2): scenes → System → RATTLE (``verlet``) → Trajectory.

Every test checks physics against a closed form, a conservation law or an
independent reference (Lagrange's equations in angle coordinates integrated by
scipy's DOP853 at rtol 1e-12, see ``conftest.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from scipy.special import ellipk

import mbvi


def _crossing_times(t: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Times where x changes sign, by linear interpolation (x is nearly linear there: θ̈ = 0 at θ = 0)."""
    i = np.nonzero(np.signbit(x[:-1]) != np.signbit(x[1:]))[0]
    return t[i] - x[i] * (t[i + 1] - t[i]) / (x[i + 1] - x[i])


@pytest.mark.parametrize("t_end", [200.0, pytest.param(1000.0, marks=pytest.mark.slow)])
def test_pendulum_energy_period_and_constraint(pendulum, t_end):
    """m = l = g = 1, θ₀ = π/4, dt = 2⁻⁶: bounded energy without drift, exact period, rod length held."""
    traj = mbvi.simulate(pendulum.scene(), t_end, 2.0**-6)
    E = traj.energy
    band = np.ptp(E)
    assert band < 2e-3  # m g l = 1
    # no secular drift: the first and last tenths oscillate in the same band around the same mean
    tenth = len(E) // 10
    first, last = E[:tenth], E[-tenth:]
    assert abs(last.mean() - first.mean()) < 0.02 * band
    assert np.ptp(last) == pytest.approx(np.ptp(first), rel=0.05)
    # period from the bob's crossings of the vertical (two per period)
    crossings = _crossing_times(traj.t, traj.position("bob")[:, 0])
    period = 2.0 * (crossings[-1] - crossings[0]) / (len(crossings) - 1)
    exact = 4.0 * ellipk(np.sin(pendulum.theta0 / 2) ** 2)  # 6.53434… s
    assert exact == pytest.approx(6.53434, abs=1e-5)
    assert abs(period - exact) < 1e-3
    assert traj.constraint_error.max() <= 1e-10


def test_double_pendulum_against_angle_coordinates(double_pendulum):
    """Positions at t = 1 s converge to the minimal-coordinate solution at second order."""
    ref = double_pendulum.reference(1.0)
    dts = 2.0 ** -np.arange(7, 11)
    errors = []
    for dt in dts:
        traj = double_pendulum.scene()
        traj = mbvi.simulate(traj, 1.0, dt)
        assert traj.t[-1] == 1.0
        errors.append(max(np.max(np.abs(traj.position(b)[-1] - ref[b])) for b in ("a", "b")))
        assert traj.constraint_error.max() <= 1e-10
    order = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert order == pytest.approx(2.0, abs=0.1)
    assert errors[-1] < 1e-5


def test_free_chain_conserves_momentum(free_chain):
    """Zero gravity, internal rod forces only: linear and angular momentum to round-off over 5000 steps."""
    with pytest.warns(mbvi.ConstraintWarning):
        traj = mbvi.simulate(free_chain.scene(), 5.0, 1e-3)
    assert len(traj) == 5001
    m = np.array([b.mass for b in traj.geometry.bodies])
    x = np.stack([traj.position(b) for b in traj.body_names], axis=1)
    v = np.stack([traj.velocity(b) for b in traj.body_names], axis=1)
    p_scale = np.sum(m * np.linalg.norm(v[0], axis=1))
    l_scale = np.sum(m * np.linalg.norm(x[0], axis=1) * np.linalg.norm(v[0], axis=1))
    assert np.max(np.abs(traj.momentum - traj.momentum[0])) <= 1e-9 * p_scale
    assert np.max(np.abs(traj.angular_momentum - traj.angular_momentum[0])) <= 1e-9 * l_scale
    # the chain does move: the test is not trivially satisfied by a frozen state
    assert np.max(np.abs(x[-1] - x[0])) > 0.5
    assert traj.constraint_error.max() <= 1e-10


def test_save_load_round_trip_is_bit_exact(double_pendulum, tmp_path):
    traj = mbvi.simulate(double_pendulum.scene(), 0.5, 1e-2)
    path = tmp_path / "run.npz"
    traj.save(path)
    back = mbvi.Trajectory.load(path)
    for field in ("t", "q", "v", "energy", "kinetic", "potential", "momentum", "angular_momentum", "constraint_error"):
        a, b = getattr(traj, field), getattr(back, field)
        assert a.dtype == b.dtype and a.shape == b.shape
        assert np.array_equal(a, b), field
    assert back.info == traj.info and back.geometry == traj.geometry
    for body in ("a", "b"):
        assert np.array_equal(back.position(body), traj.position(body))
        assert np.array_equal(back.velocity(body), traj.velocity(body))


def test_particle_views_are_consistent_with_the_physics(double_pendulum):
    """Per-body views agree with the rods, with the time derivative of positions, and with the energies."""
    dt = 1e-3
    traj = mbvi.simulate(double_pendulum.scene(), 1.0, dt)
    xa, xb = traj.position("a"), traj.position("b")
    va, vb = traj.velocity("a"), traj.velocity("b")
    assert xa.shape == (len(traj), 3)
    np.testing.assert_allclose(np.linalg.norm(xa, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(xb - xa, axis=1), 0.8, atol=1e-12)
    # velocities are the time derivatives of positions (central differences, O(dt²))
    np.testing.assert_allclose((xa[2:] - xa[:-2]) / (2 * dt), va[1:-1], atol=1e-4)
    np.testing.assert_allclose((xb[2:] - xb[:-2]) / (2 * dt), vb[1:-1], atol=1e-4)
    m = {b.name: b.mass for b in traj.geometry.bodies}
    np.testing.assert_allclose(traj.momentum, m["a"] * va + m["b"] * vb, rtol=1e-13, atol=1e-13)
    kinetic = 0.5 * (m["a"] * np.sum(va**2, axis=1) + m["b"] * np.sum(vb**2, axis=1))
    potential = 9.81 * (m["a"] * xa[:, 2] + m["b"] * xb[:, 2])  # −m g·x with g = (0, 0, −9.81)
    np.testing.assert_allclose(traj.kinetic, kinetic, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(traj.potential, potential, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(traj.energy, kinetic + potential, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(traj.rotation("a"), np.broadcast_to(np.eye(3), (len(traj), 3, 3)))
    with pytest.raises(ValueError, match="'nobody'"):
        traj.position("nobody")


def test_rigid_body_views_follow_a_steady_spin():
    """A torque-free body spinning about a principal axis rotates uniformly: R(t) = exp(t ω̂) R₀.

    The inertia is a full tensor (principal axes not the user's frame) and the
    initial orientation is arbitrary, so the views must undo both.
    """
    J = np.array([[2.0, 0.3, 0.0], [0.3, 1.5, 0.2], [0.0, 0.2, 1.0]])
    _, axes = np.linalg.eigh(J)
    R0 = Rotation.from_rotvec([0.3, -0.2, 0.5])
    omega = R0.apply(axes[:, 0]) * 2.0  # world frame, along a principal axis, |ω| = 2 rad/s
    x0, v0 = np.array([0.1, 0.2, 0.3]), np.array([0.5, 0.0, -0.2])
    scene = mbvi.Scene(gravity=None)
    scene.add(
        mbvi.RigidBody("top", mass=2.0, inertia=J, position=x0, orientation=R0, velocity=v0, angular_velocity=omega)
    )
    dt = 1e-3
    traj = mbvi.simulate(scene, 2.0, dt)
    R = traj.rotation("top")
    np.testing.assert_allclose(R[0], R0.as_matrix(), atol=1e-12)
    np.testing.assert_allclose(np.einsum("nji,njk->nik", R, R), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)
    exact = (Rotation.from_rotvec(traj.t[:, None] * omega) * R0).as_matrix()
    np.testing.assert_allclose(R, exact, atol=1e-5)  # O(dt²) phase error of the discrete rotation
    np.testing.assert_allclose(traj.angular_velocity("top"), np.broadcast_to(omega, (len(traj), 3)), atol=1e-5)
    np.testing.assert_allclose(traj.position("top"), x0 + traj.t[:, None] * v0, atol=1e-12)
    anchor = np.array([0.4, -0.1, 0.2])
    np.testing.assert_allclose(traj.point("top", anchor), traj.position("top") + R @ anchor, atol=1e-14)
    # angular momentum about the origin: m x × ẋ + J_world ω, constant
    L = 2.0 * np.cross(x0, v0) + R0.as_matrix() @ J @ R0.as_matrix().T @ omega
    np.testing.assert_allclose(traj.angular_momentum, np.broadcast_to(L, (len(traj), 3)), atol=1e-9)


def test_initial_velocity_violating_a_rod_is_projected_with_a_warning(pendulum):
    """A radial velocity component is removed (mass-weighted projection) and reported."""
    radial = np.array([np.sin(np.pi / 4), 0.0, -np.cos(np.pi / 4)])
    tangential = np.array([np.cos(np.pi / 4), 0.0, np.sin(np.pi / 4)])
    with pytest.warns(mbvi.ConstraintWarning, match="projected"):
        traj = mbvi.simulate(pendulum.scene(velocity=0.3 * radial + 0.7 * tangential), 0.1, 0.01)
    np.testing.assert_allclose(traj.velocity("bob")[0], 0.7 * tangential, atol=1e-14)
    # a tangent velocity is accepted silently (warnings are errors in this suite)
    traj = mbvi.simulate(pendulum.scene(velocity=0.7 * tangential), 0.1, 0.01)
    np.testing.assert_allclose(traj.velocity("bob")[0], 0.7 * tangential, atol=1e-14)


@pytest.mark.parametrize("offset", [0.0, 1e5, 1e7])
def test_a_mechanism_far_from_the_origin_runs_at_round_off(offset: float) -> None:
    """Coordinates of 1e7 m carry round-off of ~1e-9 m: the solvers must not ask for less."""
    o = np.array([offset, offset, 0.0])
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=o + (1, 0, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=o + (1, 0, -1), velocity=(1.0, 0.0, 0.0)))
    scene.add(
        mbvi.RigidBody(
            "r", mass=1.0, inertia=(1, 1.5, 2), position=o + (0, 1, 0), velocity=(0, 1.5, 0), angular_velocity=(3, 0, 0)
        )
    )
    scene.add(mbvi.Spherical("world", "a", anchor=o + (1, 0, 0)))
    scene.add(mbvi.Rod("a", "b"))
    scene.add(mbvi.Revolute("world", "r", anchor=o + (0, 1, 0.5), axis=(1, 0, 0)))
    traj = mbvi.simulate(scene, t_end=0.5, dt=1e-3)
    assert traj.constraint_error.max() <= 1e-12 + 1e-15 * offset
    band = np.ptp(traj.energy[:, None] - traj.energy[0])
    assert band < 1e-3 * np.abs(traj.kinetic).max()  # the motion is the same physics wherever it happens
