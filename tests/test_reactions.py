"""Joint reactions along a run (``traj.constraint_force``, ``traj.constraint_torque``) against closed forms.

Reactions could be read only at rest (``mbvi.equilibrium``); along a run a user differenced ``traj.v`` to get a
rod's tension. λ of the equations of motion at each saved state gives them: the tension of a swinging bob is
m v²/L + m g·r̂ of its own state, a conical pendulum's m g / cos θ, a hinge transmits no moment about its axis,
and at rest they are the equilibrium's.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import mbvi

G = 9.81


def _pendulum(m: float = 2.0, length: float = 1.5) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("bob", mass=m, position=(length, 0.0, 0.0)))  # released level with its pivot
    scene.add(mbvi.Rod("world", "bob", name="rod"))
    return scene


@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "yoshida4", "csm"])
def test_a_swinging_bobs_rod_pulls_with_the_tension_of_its_state(integrator: str) -> None:
    """T = m |v|²/L + m g·r̂ (r̂ from the pivot to the bob), along −r̂: the radial equation at each saved state.
    Released level with the pivot, it is 3 m g sin φ at the angle φ below the level (3 m g at the bottom)."""
    m, length = 2.0, 1.5
    traj = mbvi.simulate(_pendulum(m, length), 3.0, 1e-3, integrator)
    force = traj.constraint_force("rod")  # on the bob (the rod's other end is the world)
    x, v = traj.position("bob"), traj.velocity("bob")
    reach = np.linalg.norm(x, axis=1)  # L, to the constraint tolerance (csm's 1e-9)
    r = x / reach[:, None]
    tension = m * np.sum(v * v, axis=1) / reach + m * (r @ np.array([0.0, 0.0, -G]))
    np.testing.assert_allclose(force, -tension[:, None] * r, rtol=0, atol=1e-9 * m * G)
    assert np.max(np.linalg.norm(force, axis=1)) == pytest.approx(3 * m * G, rel=1e-4)  # at the bottom


def test_a_conical_pendulums_rod_holds_its_weight_over_cos_theta() -> None:
    m, length, theta = 2.0, 1.0, 0.6
    w = math.sqrt(G / (length * math.cos(theta)))
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("bob", mass=m, position=(length * math.sin(theta), 0.0, -length * math.cos(theta)),
                            velocity=(0.0, w * length * math.sin(theta), 0.0)))  # fmt: skip
    scene.add(mbvi.Rod("world", "bob", name="rod"))
    traj = mbvi.simulate(scene, 2.0, 1e-3)
    tension = np.linalg.norm(traj.constraint_force("rod"), axis=1)
    np.testing.assert_allclose(tension, m * G / math.cos(theta), rtol=2e-6)  # the orbit kept to O(dt²)


def test_a_rod_pulls_its_two_bodies_apart_equally_and_oppositely() -> None:
    scene = _pendulum()
    scene.add(mbvi.Particle("tail", mass=0.5, position=(2.5, 0.0, 0.0)))
    scene.add(mbvi.Rod("bob", "tail", name="link"))
    traj = mbvi.simulate(scene, 2.0, 1e-3)
    on_tail, on_bob = traj.constraint_force("link"), traj.constraint_force("link", "bob")
    np.testing.assert_allclose(on_bob, -on_tail, rtol=0, atol=1e-10)
    d = traj.position("tail") - traj.position("bob")  # along the link
    np.testing.assert_allclose(np.cross(on_tail, d), 0.0, atol=1e-9)
    # the tail: m a = m g + force (a from the run's velocities, second order)
    a = np.gradient(traj.velocity("tail"), traj.t, axis=0)[5:-5]
    np.testing.assert_allclose(0.5 * a, 0.5 * np.array([0, 0, -G]) + on_tail[5:-5], atol=2e-3)


def _arm(torque=(0.0, 1.0, 0.0), along: float = 0.0) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0.3, along, -0.4)))
    scene.add(mbvi.Revolute("world", "arm", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="hinge"))
    scene.add(mbvi.ExternalTorque("arm", torque=torque))
    return scene


def test_at_rest_the_reactions_are_the_equilibriums() -> None:
    eq = mbvi.equilibrium(_arm())
    traj = mbvi.simulate(_arm(), 0.01, 1e-3, initial_state=eq.state)
    np.testing.assert_allclose(traj.constraint_force("hinge")[0], eq.constraint_force("hinge"), atol=1e-10)
    np.testing.assert_allclose(traj.constraint_torque("hinge")[0], eq.constraint_torque("hinge"), atol=1e-10)
    np.testing.assert_allclose(traj.constraint_force("hinge")[0], [0.0, 0.0, G], atol=1e-10)  # its weight


def test_a_swinging_hinge_transmits_no_moment_about_its_axis() -> None:
    """The hinge's moment on the arm, about its anchor, has no part along the axis (y); the arm's centre 0.2 m
    along the axis makes it hold a moment across it (m g 0.2 = 1.96 N m at rest); the force is m a − m g."""
    traj = mbvi.simulate(_arm(along=0.2), 2.0, 1e-3, "yoshida4")
    moment = traj.constraint_torque("hinge")
    assert np.max(np.abs(moment[:, 1])) < 1e-9 and np.max(np.abs(moment)) > 1.0
    force = traj.constraint_force("hinge")
    a = np.gradient(traj.velocity("arm"), traj.t, axis=0)[5:-5]
    np.testing.assert_allclose(a, np.array([0.0, 0.0, -G]) + force[5:-5], atol=1e-4)  # m = 1 kg


def test_reactions_of_a_part_are_the_parts_and_a_loaded_run_has_none(tmp_path) -> None:
    traj = mbvi.simulate(_pendulum(), 1.0, 1e-3)
    np.testing.assert_array_equal(traj[200:400].constraint_force("rod"), traj.constraint_force("rod")[200:400])
    with pytest.raises(ValueError, match="unknown joint 'hinge'"):
        traj.constraint_force("hinge")
    with pytest.raises(ValueError, match="constraint forces are read on one of its bodies, not the world"):
        traj.constraint_force("rod", "world")
    traj.save(tmp_path / "run.npz")
    with pytest.raises(ValueError, match=r"this trajectory has none .* simulate again"):
        mbvi.Trajectory.load(tmp_path / "run.npz").constraint_force("rod")


def test_a_simulators_reactions_read_the_loads_that_acted_at_each_state() -> None:
    """A bob held at rest on a rod (no gravity) by a pull the Simulator sets: 20 N from a function of time, then
    held at 10 N, then 50 N; the rod carries the pull acting at each state. Read after the run, the reactions
    took the value set last for every state (999 N here, set after the run), and a function of time once it was
    held."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("bob", mass=1.0, position=(0, 0, -1)))
    scene.add(mbvi.Rod("world", "bob", name="rod"))
    scene.add(mbvi.ExternalForce("bob", force=lambda t: (0.0, 0.0, -20.0), name="pull"))
    sim = mbvi.Simulator(scene, dt=1e-3)
    sim.step(50)
    sim.set_load("pull", (0.0, 0.0, -10.0))
    sim.step(50)
    sim.set_load("pull", (0.0, 0.0, -30.0))  # set twice at one state: the last acts
    sim.set_load("pull", (0.0, 0.0, -50.0))
    sim.step(100)
    traj = sim.trajectory()
    sim.set_load("pull", (0.0, 0.0, -999.0))
    assert np.max(np.abs(traj.velocity("bob"))) == 0.0  # held at rest throughout
    pull = np.r_[np.full(50, 20.0), np.full(50, 10.0), np.full(101, 50.0)]  # a set acts on the step out of its state
    np.testing.assert_allclose(traj.constraint_force("rod")[:, 2], pull, rtol=1e-12)
    np.testing.assert_allclose(traj[120:].constraint_force("rod")[:, 2], pull[120:], rtol=1e-12)
    # the simulator goes on with the value set last
    sim.step(1)
    np.testing.assert_allclose(sim.trajectory().constraint_force("rod")[-1], [0.0, 0.0, 999.0], rtol=1e-12)


def test_a_simulators_trajectory_taken_before_a_set_or_after_a_reset_keeps_its_reactions() -> None:
    """Taken before the first set_load (or after a reset), a trajectory read its reactions with whatever the loads
    held when first read: a set after it changed them."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("bob", mass=1.0, position=(0, 0, -1)))
    scene.add(mbvi.Rod("world", "bob", name="rod"))
    scene.add(mbvi.ExternalForce("bob", force=(0.0, 0.0, -20.0), name="pull"))
    sim = mbvi.Simulator(scene, dt=1e-3)
    sim.step(50)
    before = sim.trajectory()
    sim.set_load("pull", (0.0, 0.0, -999.0))
    np.testing.assert_allclose(before.constraint_force("rod")[:, 2], 20.0, rtol=1e-12)
    sim.set_load("pull", (0.0, 0.0, -10.0))
    sim.reset()
    sim.step(50)
    after = sim.trajectory()
    sim.set_load("pull", (0.0, 0.0, -999.0))
    np.testing.assert_allclose(after.constraint_force("rod")[:, 2], 10.0, rtol=1e-12)


def test_every_joint_of_many_pendulums_reads_its_own_tension_from_one_pass_over_the_states() -> None:
    """Each joint's reaction evaluated the whole system's Jacobian at every state again, so reading N joints cost
    O(N² × states) (0.2 s a joint for 1000 pendulums over 2000 states: 199 s for all). The Jacobians the
    multipliers' factors evaluate are kept: one pass for every joint, and each joint's force is its bob's
    m g cos θ + m v²/L."""
    from unittest import mock

    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    masses = [0.5, 1.0, 2.0, 3.0]
    for i, m in enumerate(masses):
        scene.add(mbvi.Particle(f"bob{i}", mass=m, position=(2.0 * i + 1.0, 0.0, -0.5 * (i + 1))))
        scene.add(mbvi.Rod("world", f"bob{i}", anchor_a=(2.0 * i, 0.0, 0.0), name=f"rod{i}"))
    traj = mbvi.simulate(scene, 1.0, 1e-3)
    system = traj._system
    with mock.patch.object(type(system), "active_values_and_jacobian", autospec=True,
                           side_effect=type(system).active_values_and_jacobian) as evaluated:  # fmt: skip
        forces = [traj.constraint_force(f"rod{i}") for i in range(len(masses))]
    assert evaluated.call_count == len(traj.t)  # the multipliers' factors' Jacobians, kept: once a state
    for i, (m, force) in enumerate(zip(masses, forces, strict=True)):
        x, v = traj.position(f"bob{i}") - [2.0 * i, 0.0, 0.0], traj.velocity(f"bob{i}")
        reach = np.linalg.norm(x, axis=1)
        r = x / reach[:, None]
        tension = m * np.sum(v * v, axis=1) / reach + m * (r @ np.array([0.0, 0.0, -G]))
        np.testing.assert_allclose(force, -tension[:, None] * r, rtol=0, atol=1e-9 * m * G)


PUSH = 0.0


def _pushed(t):
    return (0.0, 0.0, PUSH)


def test_reactions_of_a_run_are_refused_once_its_load_reads_other_values() -> None:
    """A load reading a global set anew after the run (a notebook trying another value): the reactions, computed
    when first read from the loads at each state, read the new value — the rod's pull on the bob came out
    (27.1, 0, −12.7) N where it is (−11.3, 0, 5.3), |T| = m g cos θ + m v²/L — silently. They are refused, naming
    the load; read before the change, or after it is undone, they are those of the run."""
    global PUSH

    def build() -> mbvi.Scene:
        scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
        scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
        scene.add(mbvi.Rod("world", "bob", name="rod"))
        scene.add(mbvi.ExternalForce("bob", force=_pushed, name="push"))
        return scene

    PUSH = 0.0
    try:
        run = mbvi.simulate(build(), 0.3, 1e-3)
        sim = mbvi.Simulator(build(), dt=1e-3)
        sim.step(300)
        PUSH = 100.0
        for traj in (run, sim.trajectory()):
            with pytest.raises(ValueError, match=r"ExternalForce 'push' now reads other values than it did in the run"):
                traj.constraint_force("rod")
        PUSH = 0.0  # as in the run again
        pull = run.constraint_force("rod")[-1]
        x, v = run.position("bob")[-1], run.velocity("bob")[-1]
        tension = G * -x[2] / np.linalg.norm(x) + v @ v / np.linalg.norm(x)
        np.testing.assert_allclose(pull, -tension * x / np.linalg.norm(x), rtol=1e-6)
    finally:
        PUSH = 0.0


CALLS = 0


def _counting(t):
    global CALLS
    CALLS += 1  # a load keeping its own state in a global: live Python, changing at every call by design
    return (0.0, 0.0, 0.0)


def test_a_load_that_keeps_its_own_state_does_not_refuse_its_runs_reactions() -> None:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob", name="rod"))
    scene.add(mbvi.ExternalForce("bob", force=_counting, name="counter"))
    first = mbvi.simulate(scene, 0.1, 1e-3)
    mbvi.simulate(scene, 0.1, 1e-3)  # another run: the counter moved on
    x, v = first.position("bob")[-1], first.velocity("bob")[-1]
    tension = G * -x[2] / np.linalg.norm(x) + v @ v / np.linalg.norm(x)
    np.testing.assert_allclose(first.constraint_force("rod")[-1], -tension * x / np.linalg.norm(x), rtol=1e-6)


def test_an_over_braced_squares_rod_forces_are_the_least_squares_split_at_every_state() -> None:
    """Four unit masses on a flat square with both diagonals (one rod more than a plane needs), spinning at 3 rad/s
    about its normal: the rods' split of the centripetal load is not determined, and a factor of the singular
    G M⁻¹ Gᵀ completing with a pivot of round-off (4e-16 against 4) split it anew at every state: the sides read
    0.4 … 26 N, the diagonals in compression at times. The least-squares (minimum-norm) split is constant: each
    mass needs m ω² r = 9√2 N inward, √2 s + d = 9√2 for sides s and diagonals d, and 4 s² + 2 d² least there
    gives s = 4.5 N, d = 4.5√2 N."""
    omega = 3.0
    scene = mbvi.Scene(gravity=None)
    corners = {"p0": (1.0, 1.0, 0.0), "p1": (-1.0, 1.0, 0.0), "p2": (-1.0, -1.0, 0.0), "p3": (1.0, -1.0, 0.0)}
    for name, p in corners.items():
        scene.add(mbvi.Particle(name, mass=1.0, position=p, velocity=np.cross((0.0, 0.0, omega), p)))
    rods = [("p0", "p1"), ("p1", "p2"), ("p2", "p3"), ("p3", "p0"), ("p0", "p2"), ("p1", "p3")]
    for a, b in rods:
        scene.add(mbvi.Rod(a, b))
    with pytest.warns(mbvi.RedundantConstraintWarning) as said:  # (flat: one rod more than the plane needs)
        run = mbvi.simulate(scene, 1.0, 1e-3)
    assert any("Rod 'p1-p3'" in str(w.message) for w in said)
    with pytest.warns(mbvi.RedundantConstraintWarning, match="least-squares multipliers"):
        pulls = np.stack([np.linalg.norm(run.constraint_force(f"{a}-{b}"), axis=1) for a, b in rods], axis=1)
    np.testing.assert_allclose(pulls[:, :4], 4.5, rtol=1e-6)
    np.testing.assert_allclose(pulls[:, 4:], 4.5 * np.sqrt(2), rtol=1e-6)
