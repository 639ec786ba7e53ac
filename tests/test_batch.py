"""Batched RATTLE: each copy reproduces the serial verlet run; invariants hold per copy."""

from __future__ import annotations

import numpy as np
import pytest

import mbvi


def _double_pendulum() -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Particle("b", mass=2.0, position=(1.0, 0.0, -1.0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    scene.add(mbvi.Spring("world", "b", stiffness=3.0, rest_length=0.5))
    return scene


def _states(scene: mbvi.Scene, count: int, seed: int = 1) -> list[mbvi.State]:
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    rng = np.random.default_rng(seed)
    return [mbvi.State(s0.q.copy(), system.project_velocity(s0.q, rng.normal(size=system.nq))) for _ in range(count)]


def test_batch_matches_serial_verlet() -> None:
    scene = _double_pendulum()
    states = _states(scene, 6)
    batch = mbvi.simulate_batch(scene, t_end=1.0, dt=1e-3, initial_states=states, save_every=10)
    for i in (0, 3, 5):
        serial = mbvi.simulate(scene, t_end=1.0, dt=1e-3, initial_state=states[i], save_every=10)
        assert np.array_equal(batch[i].t, serial.t)
        assert np.max(np.abs(batch[i].q - serial.q)) < 1e-9
        assert np.max(np.abs(batch[i].v - serial.v)) < 1e-8


def test_batch_invariants_per_copy() -> None:
    scene = _double_pendulum()
    trajs = mbvi.simulate_batch(scene, t_end=5.0, dt=2e-3, initial_states=_states(scene, 16, seed=2))
    for traj in trajs:
        assert traj.constraint_error.max() <= 1e-11
        band = traj.energy.max() - traj.energy.min()
        assert band < 1e-3 * max(1.0, np.abs(traj.energy).max())


def test_batch_accepts_arrays_and_free_bodies() -> None:
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("body", mass=1.0, inertia=(1.0, 2.0, 2.5), angular_velocity=(0.1, 2.0, 0.1)))
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    Q = np.repeat(s0.q[None], 4, axis=0)
    V = np.repeat(s0.v[None], 4, axis=0) * np.array([1.0, 0.5, 2.0, -1.0])[:, None]
    trajs = mbvi.simulate_batch(scene, t_end=2.0, dt=1e-2, initial_states=(Q, V))
    for traj in trajs:
        L = traj.angular_momentum
        assert np.max(np.abs(L - L[0])) <= 1e-10 * max(1.0, np.abs(L[0]).max())
        R = traj.rotation("body")
        assert np.max(np.abs(R.transpose(0, 2, 1) @ R - np.eye(3))) <= 1e-10


def test_batch_rejects_bad_states() -> None:
    scene = _double_pendulum()
    s0 = mbvi.assemble(scene).initial_state()
    bad = mbvi.State(s0.q + 0.1, s0.v)
    with pytest.raises(ValueError, match="violates the constraints"):
        mbvi.simulate_batch(scene, 1.0, 1e-2, [s0, bad])
    with pytest.raises(ValueError, match="initial_states"):
        mbvi.simulate_batch(scene, 1.0, 1e-2, [])
    ragged = ([list(s0.q), [1.0, 0.0]], [list(s0.v), [0.0, 0.0]])  # rows of other lengths: named, not numpy's
    with pytest.raises(ValueError, match=r"simulate_batch: initial_states \(Q, V\) must be two arrays of shape"):
        mbvi.simulate_batch(scene, 1.0, 1e-2, ragged)
    pair = mbvi.simulate_batch(scene, 0.1, 1e-2, (s0, s0))  # a tuple of two States is two members
    assert len(pair) == 2 and np.array_equal(pair[0].q, pair[1].q)


def test_batch_with_damping_matches_serial() -> None:
    scene = _double_pendulum()
    scene.add(mbvi.Drag("b", coefficient=0.8))
    scene.add(mbvi.Damper("world", "a", damping=0.3))
    states = _states(scene, 3, seed=4)
    batch = mbvi.simulate_batch(scene, t_end=2.0, dt=2**-8, initial_states=states)
    for i in range(3):
        serial = mbvi.simulate(scene, t_end=2.0, dt=2**-8, initial_state=states[i])
        assert np.max(np.abs(batch[i].q - serial.q)) < 1e-9
        assert batch[i].energy[-1] < batch[i].energy[0]  # it dissipates
