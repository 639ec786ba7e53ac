"""The work of the loads under symplectic Euler: the balance E − E₀ − W holds the scheme's own band.

A load that reads the position acts as a spring: τ = −kθ written as a ``(t, state)`` controller must leave the
balance E − E₀ − W where the built-in ``TorsionSpring`` of the same k leaves E + U − E₀ − U₀ (the same motion,
to round-off). Under symplectic Euler the work was summed one-sidedly, F(q_k)·(q_k+1 − q_k): its error kept its
sign, and the balance grew linearly (6.7 J in 60 s against a band of 0.07 J), with a false energy warning (a
helper's review). Now the work is the trapezoidal rule's, the other end's force evaluated for it:

* a rigid arm on a hinge (the Lie loop), both variants: the balance equals the TorsionSpring's energy error,
  bounded, no warning; a constant torque's work is still exactly τ Δθ;
* a pendulum of particles pulled by −k x (the particle loop) against a built-in spring: the same;
* a batch of that pendulum (the lockstep loop) is its serial runs bit for bit, judged silent as they are.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mbvi

K_SPRING, G = 5.0, 9.81


def _arm(extra) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0.0, 0.0, -0.5),
                         velocity=(-1.5, 0.0, 0.0), angular_velocity=(0.0, 3.0, 0.0)))  # fmt: skip
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    s.add(extra)
    return s


def _spring_torque(t, state):
    return (0.0, -K_SPRING * state.joint_angle("hinge"), 0.0)


@pytest.mark.parametrize("integrator", ["symplectic_euler_a", "symplectic_euler_b"])
def test_a_controller_acting_as_a_spring_keeps_the_balance_of_the_built_in_spring(integrator: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no energy warning: the motion is fine
        load = mbvi.simulate(_arm(mbvi.ExternalTorque("arm", _spring_torque, name="motor")), 30.0, 1e-2, integrator)
        spring = mbvi.simulate(_arm(mbvi.TorsionSpring("hinge", stiffness=K_SPRING)), 30.0, 1e-2, integrator)
    np.testing.assert_allclose(load.q, spring.q, rtol=0, atol=1e-9)  # the same motion
    balance = load.energy - load.energy[0] - load.work
    spring_error = spring.energy - spring.energy[0]  # the spring's potential is in its energy
    band = np.ptp(spring_error)
    assert 0.0 < band < 0.2
    np.testing.assert_allclose(balance, spring_error, rtol=0, atol=0.05 * band)


@pytest.mark.parametrize("integrator", ["symplectic_euler_a", "symplectic_euler_b"])
def test_a_constant_torque_s_work_is_still_its_torque_times_the_turn(integrator: str) -> None:
    tau = 0.4
    traj = mbvi.simulate(_arm(mbvi.ExternalTorque("arm", (0.0, tau, 0.0), name="motor")), 5.0, 1e-2, integrator)
    theta = traj.joint_angle("hinge")
    np.testing.assert_allclose(traj.work, tau * (theta - theta[0]), rtol=0, atol=1e-12)


def _pulled_pendulum(extra=None) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("bob", mass=1.0, position=(0.6, 0.0, -0.8), velocity=(0.0, 0.7, 0.0)))
    s.add(mbvi.Rod("world", "bob"))
    if extra is not None:
        s.add(extra)
    return s


def _pull(t, state):
    x = state.position("bob")
    return (-K_SPRING * x[0], -K_SPRING * x[1], 0.0)


@pytest.mark.parametrize("integrator", ["symplectic_euler_a", "symplectic_euler_b"])
def test_a_pull_that_reads_the_position_keeps_the_balance_of_a_spring_on_particles(integrator: str) -> None:
    # the same pull as a built-in spring: from (0, 0, z) to the bob, in x and y — a spring of rest length 0 from a
    # point that follows the bob's height is not a built-in element, so compare against the pull's own potential
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = mbvi.simulate(_pulled_pendulum(mbvi.ExternalForce("bob", _pull, name="pull")), 30.0, 1e-2, integrator)
    x = traj.position("bob")
    true_energy = traj.energy + 0.5 * K_SPRING * (x[:, 0] ** 2 + x[:, 1] ** 2)
    balance = traj.energy - traj.energy[0] - traj.work
    band = np.ptp(true_energy)
    assert 0.0 < band < 0.5
    # the balance is the true energy's error (the work is −ΔU of the pull to the quadrature's O(h²)), bounded
    np.testing.assert_allclose(balance, true_energy - true_energy[0], rtol=0, atol=0.1 * band)


def test_a_batch_under_symplectic_euler_judges_its_members_as_their_serial_runs() -> None:
    """The lockstep loop measures the work the same way: its members are their serial runs bit for bit, and the
    energy judgement (from that work) stays silent over 30 s, as for the serial runs."""
    scene = _pulled_pendulum(mbvi.ExternalForce("bob", _pull, name="pull"))
    s0 = mbvi.assemble(scene).initial_state()
    states = [mbvi.State(s0.q, s0.v * f) for f in (0.5, 1.0, 1.5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batch = mbvi.simulate_batch(scene, 30.0, 1e-2, states, integrator="symplectic_euler_a", save_every=100)
    for member, state in zip(batch, states, strict=True):
        serial = mbvi.simulate(scene, 30.0, 1e-2, "symplectic_euler_a", initial_state=state, save_every=100)
        assert np.array_equal(member.q, serial.q) and np.array_equal(member.v, serial.v)


def _swinging_arm(extra=None) -> mbvi.Scene:
    from scipy.spatial.transform import Rotation

    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    tilt = Rotation.from_rotvec([0.0, 2.5, 0.0])
    s.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.02, 0.02, 0.002), position=tilt.apply([0.0, 0.0, -0.5]),
                         orientation=tilt))  # fmt: skip
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    if extra is not None:
        s.add(extra)
    return s


def test_a_numpy_path_run_with_loads_measures_their_work_and_is_judged() -> None:
    """``midpoint`` steps rigid bodies on the NumPy path, which measured no work: with any load (a damper of
    1e-4) its energy could not be judged, and a step of 0.12 s, 15 % off in energy and 4 rad off in angle,
    passed silently where the same run without the damper warned (a helper's review)."""
    for extra in (None, mbvi.JointDamping("hinge", coefficient=1e-4)):
        with pytest.warns(RuntimeWarning, match=r"integrator 'midpoint' at dt = 0.12 s: the energy balance"):
            mbvi.simulate(_swinging_arm(extra), 10.0, 0.12, "midpoint")
    # and the work it measures is the damper's: a resolved run keeps E − E₀ − W in midpoint's band
    traj = mbvi.simulate(_swinging_arm(mbvi.JointDamping("hinge", coefficient=0.05)), 3.0, 2e-3, "midpoint")
    assert traj.work is not None and traj.work[-1] < -0.05  # the damper took energy out
    balance = traj.energy - traj.energy[0] - traj.work
    assert np.max(np.abs(balance)) < 1e-3 * abs(traj.work[-1]) + 1e-5


def _faults_at_the_end(t, state):
    if t > 0.995:
        raise RuntimeError("fault at the end")
    return (0.0, -K_SPRING * state.joint_angle("hinge"), 0.0)


def test_a_load_that_fails_only_where_the_work_alone_reads_it_does_not_fail_the_run() -> None:
    """Under symplectic Euler A the work evaluates the load at the last step's end, t_end, where no step does:
    a load failing there only stopped a run that completes (it was taken for a broken energy balance, and
    re-run at four smaller steps: a helper's review). The work falls back to the kick's one-sided rule there."""
    arm = _arm(mbvi.ExternalTorque("arm", _faults_at_the_end, name="motor"))
    traj = mbvi.simulate(arm, 1.0, 1e-2, "symplectic_euler_a")
    assert traj.t[-1] == pytest.approx(1.0) and np.all(np.isfinite(traj.work))
    with pytest.raises(mbvi.SolverError, match="fault at the end"):  # B's kick does evaluate it at t_end
        mbvi.simulate(arm, 1.0, 1e-2, "symplectic_euler_b")


class _InPlaceEuler(mbvi.Integrator):
    """Symplectic Euler written in NumPy, updating the state it is given in place."""

    name, order, symplectic, handles = "in_place_euler", 1, True, ("constraints", "forces")

    def step(self, state, t):
        system, h, q, v = self.system, self.dt, state.q, state.v
        v += h * system.inv_mass * system.generalized_acceleration_force(q, v, t)  # the arrays, in place
        q += h * v
        return state


def test_a_numpy_step_that_updates_its_state_in_place_measures_the_work() -> None:
    """A constant 2 N pull on a free particle: W = F Δx, whether the step returns new arrays or updates the
    state in place (the measurement compared the step's end with a start it had overwritten: W = 0 and a false
    energy warning, a helper's review)."""
    s = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    s.add(mbvi.Particle("bob", mass=1.0, position=(0.0, 0.0, 0.0), velocity=(0.1, 0.0, 0.0)))
    s.add(mbvi.ExternalForce("bob", (2.0, 0.0, 0.0), name="pull"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = mbvi.simulate(s, 2.0, 1e-2, _InPlaceEuler)
    x = traj.q[:, 0]
    np.testing.assert_allclose(traj.work, 2.0 * (x - x[0]), rtol=1e-12, atol=1e-14)


def test_a_simulator_on_the_numpy_path_measures_the_work_as_simulate_does() -> None:
    """A Simulator stepping ``midpoint`` on a rigid body (the NumPy path) keeps the work its steps measure:
    its trajectory's work is simulate's (to the round-off of adding it call by call), and a too-large step is
    judged and warned about as simulate's is (it had no work there, so with a load nothing was judged)."""
    scene = _swinging_arm(mbvi.JointDamping("hinge", coefficient=0.05))
    sim = mbvi.Simulator(scene, dt=2e-3, integrator="midpoint")
    for _ in range(10):
        sim.step(50)
    traj = sim.trajectory()
    ref = mbvi.simulate(scene, traj.t[-1], 2e-3, "midpoint")
    assert np.array_equal(traj.q, ref.q)
    np.testing.assert_allclose(traj.work, ref.work, rtol=0, atol=1e-12 * abs(ref.work[-1]))
    coarse = mbvi.Simulator(_swinging_arm(mbvi.JointDamping("hinge", coefficient=1e-4)), dt=0.12, integrator="midpoint")
    coarse.step(84)
    with pytest.warns(RuntimeWarning, match=r"integrator 'midpoint' at dt = 0.12 s: the energy balance"):
        coarse.trajectory()


def _table(t, state):
    if t > 0.995:
        raise RuntimeError("the table ends at 1 s")
    return (0.1, 0.0, 0.0)


def _brake(t, state):
    if t >= 1.5:
        raise RuntimeError("brake fault at 1.5 s")
    return (0.0, 0.0, 0.0)


def test_a_failure_the_work_alone_met_is_not_blamed_for_a_later_one() -> None:
    """Symplectic Euler A's work evaluates the loads at a call's end, where no step does: the table's failure
    there (t = 1 s) was kept and named, a helper's review found, when the brake failed at 1.5 s."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "bob"))
    s.add(mbvi.ExternalForce("bob", _table, name="table"))
    s.add(mbvi.ExternalForce("bob", _brake, name="brake"))
    sim = mbvi.Simulator(s, dt=1e-2, integrator="symplectic_euler_a")
    sim.step(100)  # completes: no step evaluates the table at t = 1 s
    sim.set_load("table", (0.1, 0.0, 0.0))
    with pytest.raises(mbvi.SolverError, match=r"ExternalForce 'brake': force\(t=1.5, state\) raised RuntimeError"):
        sim.step(100)


@pytest.mark.filterwarnings("ignore:.*'explicit_euler' at dt.*not accurate:RuntimeWarning")  # (its 16 % gain: said)
def test_a_numpy_path_run_whose_load_fails_where_only_the_work_reads_it_keeps_its_work() -> None:
    """explicit_euler's work evaluates the load at the last step's end (t_end): failing there it measured no work
    at all (None), and a Simulator lost its whole history's; the start's force measures that step instead."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "bob"))
    s.add(mbvi.ExternalForce("bob", _table, name="table"))
    traj = mbvi.simulate(s, 1.0, 1e-2, "explicit_euler")  # its last step starts at 0.99 s
    x = traj.q[:, 0]
    assert traj.work is not None
    np.testing.assert_allclose(traj.work[-1], 0.1 * (x[-1] - x[0]), rtol=1e-9)  # a constant pull: F Δx


@pytest.mark.parametrize("integrator", ["verlet", "symplectic_euler_a", "symplectic_euler_b"])
def test_the_numpy_path_measures_the_work_as_the_compiled_loop_does(integrator: str) -> None:
    """Drag on three particles on rods: the two paths give one trajectory (to round-off), and the work the NumPy
    path measured took the forces at the knots' velocities v₀, v₁ — O(h) off the compiled loop's under symplectic
    Euler (−12.1765 J against −12.1777 J), where both now take them at the step's mean velocity (q₁ − q₀)/h."""
    base = mbvi.get_integrator(integrator)
    numpy_path = type(f"{base.__name__}OnNumPy", (base,), {"name": f"{integrator}_on_numpy", "compiled": False})
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("hub", mass=1.0, position=(0.0, 0.0, 0.0)))
    scene.add(mbvi.Spherical("world", "hub", anchor=(0.0, 0.0, 0.0)))
    for i in range(3):
        a = 2 * np.pi * i / 3
        scene.add(mbvi.Particle(f"p{i}", mass=0.5, position=(np.cos(a), np.sin(a), 0.0), velocity=(0.0, 0.0, 1.0)))
        scene.add(mbvi.Rod("hub", f"p{i}"))
        scene.add(mbvi.Drag(f"p{i}", coefficient=0.8))
    compiled = mbvi.simulate(scene, 1.0, 1e-3, integrator)
    numpy = mbvi.simulate(scene, 1.0, 1e-3, numpy_path)
    np.testing.assert_allclose(numpy.q, compiled.q, rtol=0, atol=1e-12)
    assert compiled.work[-1] < -10.0  # (the drag does work)
    np.testing.assert_allclose(numpy.work, compiled.work, rtol=1e-8, atol=1e-12)  # (the gap was 1e-4)


def _swinging(body: str):
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    if body == "particle":
        scene.add(mbvi.Particle("b", mass=1.0, position=(1.0, 0.0, 0.0)))
        scene.add(mbvi.Rod("world", "b"))
        scene.add(mbvi.Drag("b", coefficient=0.4))
    else:
        scene.add(mbvi.RigidBody("b", mass=1.0, inertia=(0.01, 0.02, 0.02), position=(0.5, 0.0, 0.0)))
        scene.add(mbvi.Revolute("world", "b", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="hinge"))
        scene.add(mbvi.JointDamping("hinge", 0.05))
    return scene


@pytest.mark.parametrize("body", ["particle", "rigid"])
@pytest.mark.parametrize(("integrator", "t_end"), [("verlet", 2.0), ("symplectic_euler_a", 2.0), ("verlet", 2.0005),
                                                   ("midpoint", 2.0)])  # fmt: skip
def test_a_batch_member_measures_its_work_as_its_run_alone_does(body: str, integrator: str, t_end: float) -> None:
    """A batch's members had no work: a damped pendulum's dissipation (0.44 of its energy in motion) was its
    'relative energy error' in the plots, and its balance was not judged. Each member's work, energy_error and
    judgement are now its run's alone (lockstep particles, rigid bodies member by member, a shorter last step,
    the NumPy path)."""
    scene = _swinging(body)
    start = mbvi.assemble(scene).initial_state()
    starts = [start, mbvi.State(start.q, 0.5 * start.v)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        batch = mbvi.simulate_batch(scene, t_end, 1e-3, starts, integrator=integrator)
        alone = mbvi.simulate(scene, t_end, 1e-3, integrator, initial_state=start)
    member = batch[0]
    np.testing.assert_array_equal(member.q, alone.q)
    np.testing.assert_allclose(member.work, alone.work, rtol=1e-12, atol=1e-15)
    assert alone.work[-1] < -0.1 * abs(alone.energy[0] - alone.energy.min())  # (the damping does work)
    assert member.info["energy_error"] == pytest.approx(alone.info["energy_error"], rel=1e-9)
    assert member.info["energy_error"] < 1e-2  # the balance (O(h) for symplectic Euler), not the dissipation (~0.4)
    figure = np.nanmax(mbvi.plot.energy_error(member).axes[0].get_lines()[0].get_ydata())
    assert figure == pytest.approx(member.info["energy_error"], rel=1e-9)


@pytest.mark.parametrize("save_every", [1, 7])
def test_csm_measures_the_work_of_its_forces_with_the_motion(save_every: int) -> None:
    """csm's runs had ``work`` None on a scene with drag (``traj.energy - traj.work`` a TypeError), where every
    other built-in measures it: solved with the motion as W' = F·v, its balance holds to the ODE's tolerance at any
    saving, and W agrees with verlet's trapezoids to O(h²)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    scene.add(mbvi.Drag("bob", coefficient=0.3))
    run = mbvi.simulate(scene, 3.0, 1e-3, "csm", save_every=save_every)
    assert run.work.shape == run.t.shape and run.work[0] == 0.0
    balance = run.energy - run.energy[0] - run.work
    assert np.ptp(balance) < 1e-6 * abs(run.work[-1])  # (the Baumgarte rows' own drift: ~1e-8 of it)
    verlet = mbvi.simulate(scene, 3.0, 1e-3, "verlet")
    assert run.work[-1] == pytest.approx(verlet.work[-1], rel=1e-5)
    assert run.work[-1] < -5.0  # drag dissipates: most of the swing's energy is gone by 3 s


def test_csm_calls_a_load_once_per_right_hand_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """Solving W' = F·v with the motion evaluated F a second time at every right-hand side: a ``(t, state)`` load
    was called twice as often (a stateful controller saw every call twice), and the run took twice as long."""
    from mbvi.integrators import csm

    calls, rhs = [0], [0]

    def push(t: float, state) -> tuple:
        calls[0] += 1
        return (0.0, 0.0, -0.1 * state.velocity("bob")[2])

    counted = csm.CSM._rhs

    def counting(self, t, y):
        rhs[0] += 1
        return counted(self, t, y)

    monkeypatch.setattr(csm.CSM, "_rhs", counting)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    scene.add(mbvi.ExternalForce("bob", force=push))
    run = mbvi.simulate(scene, 0.5, 1e-3, "csm")
    assert rhs[0] > 100 and calls[0] == rhs[0]
    assert run.work is not None and np.ptp(run.energy - run.energy[0] - run.work) < 1e-6
