"""A trajectory's derived quantities, computed for every saved state at once (compiled), against the same
formulas state by state: the constraint values g(q) of every row kind and the angular momentum Σ m q × v."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mbvi


def _mixed_scene() -> mbvi.Scene:
    """Rigid bodies on a revolute and a spherical joint (orthonormality, point and axis rows), a particle on a
    rod (a distance row: U is W) and a prismatic slider, moving off every axis."""
    s = mbvi.Scene(gravity=(0.3, -1.0, -9.81))
    s.add(mbvi.RigidBody("arm", mass=1.5, inertia=(0.02, 0.1, 0.11), position=(0.5, 0.0, 0.0),
                         angular_velocity=(0.0, 0.0, 0.0)))  # fmt: skip
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 1) / np.sqrt(2.0)))
    s.add(mbvi.RigidBody("top", mass=0.7, inertia=(0.012, 0.012, 0.02), position=(1.2, 0.0, 0.3),
                         angular_velocity=(-2.0, 0.0, -3.0)))  # fmt: skip
    s.add(mbvi.Spherical("arm", "top", anchor=(1.0, 0.0, 0.0)))
    s.add(mbvi.Particle("bob", mass=0.3, position=(1.2, 0.0, -0.7), velocity=(0.0, 1.0, 0.0)))
    s.add(mbvi.Rod("top", "bob"))
    s.add(mbvi.RigidBody("slider", mass=0.4, inertia=(0.01, 0.01, 0.01), position=(-1.0, 0.5, 0.0)))
    s.add(mbvi.Prismatic("world", "slider", axis=(1.0, 0.0, 0.0)))
    return s


def test_constraint_values_of_every_state_match_state_by_state() -> None:
    system = mbvi.assemble(_mixed_scene())
    traj = mbvi.simulate(_mixed_scene(), 0.5, 1e-3, save_every=5)
    assert len(traj.t) > 100
    q = traj.q[:100] + 1e-3 * np.random.default_rng(0).standard_normal(
        (100, traj.q.shape[1])
    )  # off the joints: every row ≠ 0
    one_by_one = np.array([system.constraints(x) for x in q])
    assert np.min(np.abs(one_by_one)) > 0.0 and len(set(system.rows.owner)) >= 5
    np.testing.assert_allclose(system.constraints(q), one_by_one, rtol=0, atol=1e-14)  # the same sums, maybe reordered
    np.testing.assert_array_equal(
        system.constraints(q.reshape(2, -1, q.shape[1])), one_by_one.reshape(2, -1, system.nc)
    )
    np.testing.assert_allclose(system.constraint_error(q), np.max(np.abs(one_by_one), axis=1), rtol=0, atol=1e-14)
    assert traj.constraint_error.max() <= 1e-10  # the run's own states hold every row


def test_angular_momentum_of_every_state_is_the_sum_of_m_q_cross_v() -> None:
    """Σ over 3-blocks of m q × v (for a rigid body: m x × ẋ plus its spin R J Rᵀ ω), checked against NumPy and
    against the body's spin directly; conserved by a free tumbling body (no gravity, no joint)."""
    s = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    s.add(mbvi.RigidBody("b", mass=2.0, inertia=(0.15, 0.2, 0.3), position=(1.0, 2.0, 3.0), velocity=(0.1, -0.2, 0.3),
                         angular_velocity=(0.01, 3.0, 0.2)))  # fmt: skip
    system = mbvi.assemble(s)
    traj = mbvi.simulate(s, 2.0, 1e-3, save_every=10)
    qb, vb = traj.q.reshape(len(traj.t), -1, 3), traj.v.reshape(len(traj.t), -1, 3)
    expected = np.einsum("fbj,b->fj", np.cross(qb, vb), system.mass[::3])
    np.testing.assert_allclose(traj.angular_momentum, expected, rtol=1e-13, atol=1e-13)
    L0 = 2.0 * np.cross([1.0, 2.0, 3.0], [0.1, -0.2, 0.3]) + np.diag([0.15, 0.2, 0.3]) @ [0.01, 3.0, 0.2]
    np.testing.assert_allclose(traj.angular_momentum, np.broadcast_to(L0, traj.angular_momentum.shape), atol=1e-12)
    assert math.isclose(float(np.linalg.norm(L0)), float(np.linalg.norm(traj.angular_momentum[-1])), rel_tol=1e-12)


def test_linear_momentum_of_every_state_is_the_sum_of_m_v_over_the_bodies() -> None:
    """Σ m ẋ over the bodies' centres (particles and rigid bodies; not the rotation columns), against NumPy."""
    scene = _mixed_scene()
    system = mbvi.assemble(scene)
    traj = mbvi.simulate(scene, 0.3, 1e-3, save_every=3)
    masses = {b.name: b.mass for b in scene.bodies}
    expected = sum(masses[name] * traj.velocity(name) for name in masses)
    np.testing.assert_allclose(traj.momentum, expected, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(system.momentum(traj.v[-1]), expected[-1], rtol=1e-13, atol=1e-13)
    assert np.ptp(expected[:, 2]) > 0.1  # it changed (gravity and the joints' forces act)


def test_the_momenta_of_many_states_broadcast_as_numpy_does_and_refuse_shapes_that_do_not() -> None:
    """Q (n, nq) with one velocity v (nq,): every state with that v, as np.cross broadcast (the compiled pass read
    past the end of v and returned 1e181s)."""
    s = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    s.add(mbvi.RigidBody("b", mass=2.0, inertia=(0.15, 0.2, 0.3), position=(1.0, 2.0, 3.0), velocity=(0.1, -0.2, 0.3),
                         angular_velocity=(0.01, 3.0, 0.2)))  # fmt: skip
    system = mbvi.assemble(s)
    traj = mbvi.simulate(s, 0.01, 1e-3)
    v0 = traj.v[0].copy()
    expected = np.array([system.angular_momentum(x, v0) for x in traj.q])
    np.testing.assert_allclose(system.angular_momentum(traj.q, v0), expected, rtol=1e-14, atol=1e-14)
    pairs = np.array([system.angular_momentum(x, y) for x, y in zip(traj.q[:2], traj.v[:2], strict=True)])
    np.testing.assert_allclose(
        system.angular_momentum(traj.q[:2][None], traj.v[:2]), pairs[None], rtol=1e-14, atol=1e-14
    )
    with pytest.raises(ValueError):
        system.angular_momentum(traj.q[:3], traj.v[:2])


def test_the_constraint_error_of_many_states_keeps_a_nan() -> None:
    """max |g| of a state that is not finite is NaN, state by state and for many at once (a compiled max dropped
    it: 0 for a NaN state)."""
    system = mbvi.assemble(_mixed_scene())
    q = np.repeat(system.initial_state().q[None], 3, axis=0)
    q[1, 0] = np.nan
    q[2, -1] = np.nan
    got = system.constraint_error(q)
    assert got[0] < 1e-12 and np.isnan(got[1]) and np.isnan(got[2])
    assert np.isnan(system.constraint_error(q[1]))
