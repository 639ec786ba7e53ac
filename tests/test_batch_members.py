"""simulate_batch member by member: each member is its own mbvi.simulate run, failures keep everyone's results.

Every path a batch can take (the compiled loop member by member, the lockstep chunks, the NumPy path) takes
each member's initial state as ``mbvi.simulate(..., initial_state=...)`` takes it and reports a failing member
the same way: ``err.member``, ``err.members`` and every member's trajectory up to where it stopped.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import mbvi


def _double_pendulum() -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Particle("b", mass=2.0, position=(1.0, 0.0, -1.0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    return scene


def _box_and_capsule() -> mbvi.Scene:
    """A box on a revolute joint (oblique axis), a capsule hanging from it on a spherical joint."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("box", shape=mbvi.Box((0.4, 0.1, 0.05)), density=800.0, position=(0.2, 0.0, 0.0)))
    scene.add(mbvi.Revolute("world", "box", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.3)))
    scene.add(
        mbvi.RigidBody(
            "capsule",
            shape=mbvi.Capsule(0.03, 0.3),
            density=800.0,
            position=(0.4, 0.0, -0.2),
            orientation=Rotation.from_euler("x", 20, degrees=True),
        )
    )
    scene.add(mbvi.Spherical("box", "capsule", anchor=(0.4, 0.0, -0.02)))
    return scene


SCENES = {"particles": _double_pendulum, "rigid": _box_and_capsule}


def _members(scene: mbvi.Scene, count: int, seed: int = 3) -> list[mbvi.State]:
    """States on the joints, bar one at rest whose positions are off by round-off (1e-9: brought onto them)."""
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    rng = np.random.default_rng(seed)
    states = [mbvi.State(s0.q.copy(), system.project_velocity(s0.q, rng.normal(size=system.nq))) for _ in range(count)]
    states[1] = mbvi.State(s0.q + 1e-9 * rng.normal(size=system.nq), np.zeros(system.nq))
    return states


@pytest.mark.parametrize(
    ("kind", "integrator"),
    [
        ("rigid", "verlet"),  # the compiled loop, member by member
        ("rigid", "midpoint"),  # the NumPy path (the implicit pair with rigid bodies)
        ("particles", "midpoint"),  # the compiled loop, member by member
        ("particles", "explicit_euler"),  # the NumPy path
        ("particles", "verlet"),  # lockstep chunks, taking the members' velocities as given
        ("particles", "yoshida4"),  # a composition in lockstep
    ],
)
@pytest.mark.filterwarnings("ignore:.*'explicit_euler' at dt.*the result is not:RuntimeWarning")  # (its drift: said)
def test_every_member_is_its_serial_run_bit_for_bit(kind: str, integrator: str) -> None:
    scene = SCENES[kind]()
    states = _members(scene, 3)
    batch = mbvi.simulate_batch(scene, 0.5, 1e-2, initial_states=states, integrator=integrator, save_every=3)
    for b, state in enumerate(states):
        serial = mbvi.simulate(scene, 0.5, 1e-2, integrator, initial_state=state, save_every=3)
        assert np.array_equal(batch[b].t, serial.t)
        assert np.array_equal(batch[b].q, serial.q), b
        assert np.array_equal(batch[b].v, serial.v), b
    # a state on the joints is taken as it is
    assert np.array_equal(batch[0].q[0], states[0].q) and np.array_equal(batch[0].v[0], states[0].v)


def test_members_on_the_lockstep_path_are_their_serial_runs() -> None:
    """Lockstep chunks take the members' velocities as given (they projected every one again: round-off)."""
    scene = _double_pendulum()
    states = _members(scene, 3)
    batch = mbvi.simulate_batch(scene, 0.5, 1e-2, initial_states=states)
    for b, state in enumerate(states):
        serial = mbvi.simulate(scene, 0.5, 1e-2, initial_state=state)
        assert np.array_equal(batch[b].t, serial.t)
        assert np.array_equal(batch[b].q, serial.q) and np.array_equal(batch[b].v, serial.v)


@pytest.mark.filterwarnings("ignore:.*'explicit_euler' at dt.*the result is not:RuntimeWarning")  # (its drift: said)
@pytest.mark.parametrize("integrator", ["midpoint", "explicit_euler", "verlet"])
def test_a_failing_member_keeps_every_members_trajectory(integrator: str) -> None:
    """Member 2 is thrown down at 300 m/s (200 m/s once on the joints): its step fails; the others, released
    from rest, run to 2 s."""
    scene = _double_pendulum()
    s0 = mbvi.assemble(scene).initial_state()
    Q = np.repeat(s0.q[None], 4, axis=0)
    V = np.zeros_like(Q)
    V[2, 5] = -300.0
    with warnings.catch_warnings(), pytest.raises(mbvi.SolverError) as info:
        warnings.simplefilter("ignore", mbvi.ConstraintWarning)  # its velocity is projected (tested below)
        mbvi.simulate_batch(scene, 2.0, 1e-2, initial_states=(Q, V), integrator=integrator)
    err = info.value
    assert err.member == 2 and err.members == [2]
    assert str(err).count("member 2 of 4") == 1
    if err.suggested_dt is not None:  # a batch re-runs no member to verify it (it said "try dt <= …" as if sure)
        assert err.verified_dt is False and "not verified" in str(err)
    trajs = err.trajectory
    assert isinstance(trajs, list) and len(trajs) == 4
    assert all(isinstance(traj, mbvi.Trajectory) for traj in trajs)
    alone = mbvi.simulate(scene, 2.0, 1e-2, integrator, initial_state=s0)
    for b in (0, 1, 3):  # released from rest: they swing to the end, each as it would alone
        assert len(trajs[b].t) == 201 and trajs[b].t[-1] == pytest.approx(2.0)
        assert np.max(np.abs(trajs[b].q - alone.q)) < 1e-12
    # the failing member's states up to the step that failed, its initial one first
    assert len(trajs[2].t) == err.step + 1 and trajs[2].t[-1] == pytest.approx(err.time)
    assert np.array_equal(trajs[2].q[0], s0.q)
    assert trajs[2].v[0, 5] == pytest.approx(-200.0)  # projected onto the joints (mass-weighted)


def test_velocities_off_the_joints_warn_once_naming_the_members() -> None:
    """As mbvi.simulate does for one state: the same projection, the same largest change, one warning."""
    scene = _double_pendulum()
    s0 = mbvi.assemble(scene).initial_state()
    off = mbvi.State(s0.q.copy(), np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.0]))  # along the rod world-a
    said = r"the velocity of Particle 'a' by 1 m/s \(the given velocities violated Rod 'world-a' most\)"
    with pytest.warns(mbvi.ConstraintWarning, match=said):
        serial = mbvi.simulate(scene, 0.1, 1e-2, initial_state=off)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = mbvi.simulate_batch(scene, 0.1, 1e-2, initial_states=[s0, off, s0])
    assert [w.category for w in caught] == [mbvi.ConstraintWarning]
    text = str(caught[0].message)
    assert "member 1 of 3" in text and "largest change 1" in text and "projected" in text
    assert "the velocity of Particle 'a' by 1 m/s (the given velocities violated Rod 'world-a' most)" in text
    assert np.array_equal(batch[1].v[0], serial.v[0])
    assert np.array_equal(batch[0].v[0], s0.v) and np.array_equal(batch[2].v[0], s0.v)
    # several members: still one warning, naming each and the one changed most
    twice = mbvi.State(s0.q.copy(), 2.0 * off.v)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mbvi.simulate_batch(scene, 0.1, 1e-2, initial_states=[off, s0, twice], integrator="midpoint")
    assert len(caught) == 1
    assert "members 0, 2 of 3" in str(caught[0].message)
    assert "largest change 2, member 2" in str(caught[0].message)


def test_rigid_velocities_off_the_joints_are_projected_as_a_serial_run_projects_them() -> None:
    scene = _box_and_capsule()
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    off = mbvi.State(s0.q.copy(), s0.v + 0.5 * np.random.default_rng(5).normal(size=system.nq))
    with pytest.warns(mbvi.ConstraintWarning, match="member 0 of 2"):
        batch = mbvi.simulate_batch(scene, 0.2, 1e-2, initial_states=[off, s0])
    with pytest.warns(mbvi.ConstraintWarning):
        serial = mbvi.simulate(scene, 0.2, 1e-2, initial_state=off)
    assert np.array_equal(batch[0].q, serial.q) and np.array_equal(batch[0].v, serial.v)


def test_positions_off_a_joint_name_the_member_and_the_joint() -> None:
    scene = _box_and_capsule()
    s0 = mbvi.assemble(scene).initial_state()
    moved = mbvi.State(s0.q.copy(), s0.v)
    moved.q[:3] += 0.05  # the box moved off its hinge and its capsule
    with pytest.raises(ValueError, match=r"initial state 1 violates the constraints: (Revolute|Spherical) '"):
        mbvi.simulate_batch(scene, 0.1, 1e-2, initial_states=[s0, moved])


def _pendulum() -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    s.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "a"))
    return s


@pytest.mark.parametrize("t_end", [2.5e-3, 0.5e-3])
def test_a_batch_ends_at_t_end_as_simulate_does(t_end: float) -> None:
    """t_end − t0 not a whole number of steps: the last step is shorter and the run ends at t_end (it ended at
    3e-3 for t_end = 2.5e-3, silently), each member the run simulate makes of it."""
    scene = _pendulum()
    s0 = mbvi.assemble(scene).initial_state()
    states = [s0, mbvi.State(s0.q, s0.v + np.array([0.0, 0.5, 0.0]))]
    batch = mbvi.simulate_batch(scene, t_end, 1e-3, initial_states=states)
    for b, state in enumerate(states):
        alone = mbvi.simulate(scene, t_end, 1e-3, initial_state=state)
        assert batch[b].t[-1] == pytest.approx(t_end) and np.array_equal(batch[b].t, alone.t)
        assert np.array_equal(batch[b].q, alone.q) and np.array_equal(batch[b].v, alone.v)


def _stiff_spring() -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    s.add(mbvi.Particle("a", mass=1.0, position=(1.2, 0.0, 0.0)))
    s.add(mbvi.Spring("world", "a", stiffness=1e6, rest_length=1.0))
    return s


def test_a_blown_up_batch_is_never_returned_as_if_fine() -> None:
    """hω = 10: midpoint's members blow up without a NaN (a SolverError naming the member, keeping every
    trajectory up to where it broke); explicit Euler's reach 1e204 J, returned with a warning naming them (they
    were returned silently)."""
    scene = _stiff_spring()
    s0 = mbvi.assemble(scene).initial_state()
    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate_batch(scene, 1.0, 1e-2, initial_states=[s0, s0], integrator="midpoint")
    err = info.value
    assert err.member == 0 and err.members == [0, 1] and "blew up" in str(err)
    assert [len(t.t) for t in err.trajectory] == [err.step + 1] * 2
    with pytest.warns(RuntimeWarning, match=r"members 0, 1 of 2: .*explicit_euler"):
        mbvi.simulate_batch(scene, 1.0, 1e-2, initial_states=[s0, s0], integrator="explicit_euler")
