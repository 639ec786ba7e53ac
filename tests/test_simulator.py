"""mbvi.Simulator: stepping from Python.

* n calls of ``step()`` give the states of one ``simulate`` call of n steps — bit for bit for the engine's
  schemes (particles, rigid bodies, a closed loop), to round-off or the integrator's tolerance otherwise;
* a PD controller in a Python loop (``view`` read, ``set_load``, ``step``) settles where kp(θ* − θ) balances
  the gravity torque m g d sin θ (an independent root find), as the same PD as a ``(t, state)`` callback does;
* the live view equals the NumPy ``StateView`` of the same state;
* errors: an unknown load or a non-finite value is a ValueError and the simulator goes on; a failing step is a
  SolverError that leaves the last good state in place.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scene_loader import load_scene
from scipy.optimize import brentq

import mbvi
from mbvi.errors import LoadError
from mbvi.loads import state_view_factory

G, M, L = 9.81, 1.0, 0.5
KP, KD, TARGET = 20.0, 2.0, 0.5


def _arm(torque=(0.0, 0.0, 0.0)) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.RigidBody("arm", mass=M, inertia=(0.01, 0.01, 0.002), position=(0.0, 0.0, -L)))
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    s.add(mbvi.ExternalTorque("arm", torque=torque, name="motor"))
    return s


def _double_pendulum() -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    s.add(mbvi.Particle("b", mass=1.0, position=(1.0, 0.0, -1.0), velocity=(0.5, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "a"))
    s.add(mbvi.Rod("a", "b"))
    return s


def _four_bar() -> mbvi.Scene:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        return load_scene("four_bar").build()


SCENES = {"double_pendulum": _double_pendulum, "arm": lambda: _arm((0.0, 0.3, 0.0)), "four_bar": _four_bar}


@pytest.mark.parametrize("scene", list(SCENES))
@pytest.mark.parametrize("integrator", ["verlet", "symplectic_euler_b", "yoshida4", "midpoint", "implicit_euler"])
def test_single_steps_are_one_simulate_call(scene: str, integrator: str) -> None:
    built = SCENES[scene]()
    n = 300
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        ref = mbvi.simulate(built, n * 1e-3, 1e-3, integrator)
        sim = mbvi.Simulator(built, 1e-3, integrator)
        for _ in range(n // 2):
            sim.step()
        sim.step(n // 2 - 10)  # and n at once
        for _ in range(10):
            sim.step()
        traj = sim.trajectory()
    assert sim.t == pytest.approx(n * 1e-3, abs=1e-12) and sim.steps == n
    np.testing.assert_array_equal(traj.t, ref.t)
    np.testing.assert_array_equal(traj.q, ref.q)
    np.testing.assert_array_equal(traj.v, ref.v)
    np.testing.assert_array_equal(sim.state.q, ref.q[-1])
    assert np.ptp(ref.q[:, 0]) > 1e-4  # control: it moved


@pytest.mark.parametrize("integrator", ["explicit_euler", "leapfrog", "csm"])
def test_integrators_outside_the_engines_schemes_step_too(integrator: str) -> None:
    """The baselines and a plugin's compiled step go through their own run, n steps per call."""
    n = 200
    ref = mbvi.simulate(_double_pendulum(), n * 1e-3, 1e-3, integrator)
    sim = mbvi.Simulator(_double_pendulum(), 1e-3, integrator)
    for _ in range(n):
        sim.step()
    traj = sim.trajectory()
    np.testing.assert_allclose(traj.t, ref.t, rtol=0, atol=1e-12)
    tol = 1e-6 if integrator == "csm" else 1e-9  # csm restarts solve_ivp at every call
    np.testing.assert_allclose(traj.q, ref.q, rtol=0, atol=tol)


def test_a_pd_loop_in_python_settles_where_the_controller_balances_gravity() -> None:
    """θ = kp(θ* − θ)/(m g d) … the root of kp(θ* − θ) = m g d sin θ (brentq), from a Simulator loop and from the
    same PD as a (t, state) callback (the callback reads the state the step evaluates the force at: the two agree
    to the loop's one-step lag, O(dt))."""
    expected = brentq(lambda th: KP * (TARGET - th) - M * G * L * math.sin(th), 0.0, TARGET)
    sim = mbvi.Simulator(_arm(), 1e-3)
    view = sim.view
    for _ in range(6000):
        theta, rate = view.joint_angle("hinge"), view.joint_rate("hinge")
        sim.set_load("motor", (0.0, KP * (TARGET - theta) - KD * rate, 0.0))
        sim.step()
    assert view.joint_angle("hinge") == pytest.approx(expected, abs=1e-6)
    assert abs(view.joint_rate("hinge")) < 1e-5

    def pd(t, state):
        return (0.0, KP * (TARGET - state.joint_angle("hinge")) - KD * state.joint_rate("hinge"), 0.0)

    callback = mbvi.simulate(_arm(pd), 6.0, 1e-3)
    assert callback.joint_angle("hinge")[-1] == pytest.approx(expected, abs=1e-6)
    loop = sim.trajectory().joint_angle("hinge")
    assert np.max(np.abs(loop - callback.joint_angle("hinge"))) < 0.02  # the loop's lag of one step
    assert TARGET - expected > 0.09  # control: gravity really offsets the setpoint


def test_set_load_replaces_a_callable_load_in_the_compiled_loop() -> None:
    """A torque given as a function, then held by set_load: the compiled kernel's override."""
    sim = mbvi.Simulator(_arm(lambda t: (0.0, 5.0, 0.0)), 1e-3)
    sim.set_load("motor", (0.0, 0.0, 0.0))
    sim.step(500)
    assert sim.view.joint_angle("hinge") == pytest.approx(0.0, abs=1e-12)  # held at zero: it never moved
    sim.set_load("motor", [0.0, 2.0, 0.0])
    sim.step(500)
    held = mbvi.simulate(_arm((0.0, 2.0, 0.0)), 0.5, 1e-3)
    assert sim.view.joint_angle("hinge") == pytest.approx(held.joint_angle("hinge")[-1], abs=1e-12)


def test_set_load_on_the_numpy_path() -> None:
    sim = mbvi.Simulator(_arm((0.0, 2.0, 0.0)), 1e-3, "explicit_euler")
    sim.set_load("motor", (0.0, 0.0, 0.0))
    sim.step(100)
    assert sim.view.joint_angle("hinge") == pytest.approx(0.0, abs=1e-12)


@pytest.mark.filterwarnings("ignore::mbvi.RedundantConstraintWarning")
def test_the_live_view_is_the_state_view_of_the_current_state() -> None:
    sim = mbvi.Simulator(_four_bar(), 1e-3)
    sim.step(400)
    state = sim.state
    expected = state_view_factory(sim.system.layout)(state.q, state.v)
    view = sim.view
    joints = [n for n, j in sim.system.layout.joint_frames.items() if j.kind == "revolute"]
    bodies = list(sim.system.layout.bodies)
    for name in joints:
        assert view.joint_angle(name) == pytest.approx(expected.joint_angle(name), abs=1e-14)
        assert view.joint_rate(name) == pytest.approx(expected.joint_rate(name), abs=1e-13)
    for name in bodies:
        np.testing.assert_allclose(view.position(name), expected.position(name), rtol=0, atol=1e-15)
        np.testing.assert_allclose(view.velocity(name), expected.velocity(name), rtol=0, atol=1e-15)
        np.testing.assert_allclose(view.rotation(name), expected.rotation(name), rtol=0, atol=1e-14)
        np.testing.assert_allclose(view.angular_velocity(name), expected.angular_velocity(name), rtol=0, atol=1e-13)
        np.testing.assert_allclose(view.point(name, (0.1, 0.2, 0.3)), expected.point(name, (0.1, 0.2, 0.3)),
                                   rtol=0, atol=1e-14)  # fmt: skip
    np.testing.assert_array_equal(view.q, state.q)
    assert abs(expected.joint_rate(joints[0])) > 1e-3  # control: a moving state
    before = view.joint_angle(joints[0])
    sim.step(50)
    assert view.joint_angle(joints[0]) != before  # live: the view follows the simulator


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("nope", (0.0, 0.0, 0.0), r"unknown load 'nope'; the ExternalForce/ExternalTorque are \['motor'\]"),
        ("motor", (0.0, math.nan, 0.0), r"ExternalTorque 'motor': set_load's value must be 3 finite numbers"),
        ("motor", (0.0, 1.0), r"ExternalTorque 'motor': set_load's value must be 3 finite numbers"),
        ("motor", ("0", "1", "2"), r"ExternalTorque 'motor': set_load's value must be 3 finite numbers"),
    ],
)
def test_a_bad_load_is_a_value_error_and_the_simulator_goes_on(name, value, message) -> None:
    sim = mbvi.Simulator(_arm((0.0, 1.0, 0.0)), 1e-3)
    sim.step(10)
    with pytest.raises(ValueError, match=message):
        sim.set_load(name, value)
    sim.step(90)  # unchanged: still the torque of 1 N m
    ref = mbvi.simulate(_arm((0.0, 1.0, 0.0)), 0.1, 1e-3)
    np.testing.assert_array_equal(sim.state.q, ref.q[-1])


def test_a_failing_step_raises_and_leaves_the_last_good_state() -> None:
    """A controller that faults at t = 0.2 s: SolverError naming it; the simulator stays at the last good step,
    and can go on once the fault is cleared (set_load holds a value instead)."""

    def drive(t, state):
        if t >= 0.2:
            raise RuntimeError("encoder lost")
        return (0.0, 1.0, 0.0)

    sim = mbvi.Simulator(_arm(drive), 1e-3)
    sim.step(100)
    with pytest.raises(mbvi.SolverError, match=r"ExternalTorque 'motor'.*encoder lost") as info:
        sim.step(300)
    assert info.value.time == pytest.approx(0.2, abs=1.5e-3)
    assert sim.t == pytest.approx(0.2, abs=1.5e-3)
    good = sim.state
    assert np.isfinite(good.q).all()
    np.testing.assert_array_equal(info.value.trajectory.q[-1], good.q)
    sim.set_load("motor", (0.0, 1.0, 0.0))  # the fault cleared: the run goes on
    sim.step(100)
    assert sim.t == pytest.approx(0.3, abs=1.5e-3)


@pytest.mark.parametrize("n", [0, -1, 1.5, "2", True])
def test_step_counts_must_be_positive_integers(n) -> None:
    sim = mbvi.Simulator(_double_pendulum(), 1e-3)
    with pytest.raises(ValueError, match="positive integer"):
        sim.step(n)


def test_bad_construction_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="dt"):
        mbvi.Simulator(_double_pendulum(), -1e-3)
    with pytest.raises(ValueError, match="nope"):
        mbvi.Simulator(_double_pendulum(), 1e-3, "nope")
    with pytest.raises(ValueError, match="Scene"):
        mbvi.Simulator("pendulum.py", 1e-3)


def test_a_lagrangian_system_steps_with_csm_too() -> None:
    """csm hands a run's whole interval to solve_ivp; stepped one dt at a time it solves each step alone (it
    raised a bare NotImplementedError), and agrees with the run to its tolerances, both on the pendulum's
    energy surface."""
    import sympy as sp

    th, w = sp.symbols("theta omega")
    pend = mbvi.LagrangianSystem(w**2 / 2 + sp.cos(th), [th], [w], initial_state=mbvi.State([0.5], [0.0]))
    sim = mbvi.Simulator(pend, dt=1e-2, integrator="csm")
    for _ in range(100):
        sim.step()
    run = mbvi.simulate(pend, 1.0, 1e-2, "csm")
    assert sim.t == pytest.approx(1.0)
    assert np.allclose(sim.state.q, run.q[-1], atol=1e-6) and np.allclose(sim.state.v, run.v[-1], atol=1e-6)
    stepped = sim.trajectory()
    assert np.max(np.abs(stepped.energy - stepped.energy[0])) < 1e-6


@pytest.mark.parametrize("integrator", ["verlet", "csm"])
def test_the_step_and_the_start_time_cannot_be_changed_under_a_run(integrator: str) -> None:
    """``sim.dt = 2e-3`` was taken: ``sim.t`` jumped with the state unmoved while the compiled run went on with
    its old step (0.2 s simulated of a reported 0.4 s), and the trajectory's clock was a third. Now refused,
    and the run goes on untouched, its clock the one free fall gives."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("a", mass=1.0, position=(0.0, 0.0, 0.0)))
    sim = mbvi.Simulator(s, dt=1e-3, integrator=integrator)
    sim.step(100)
    with pytest.raises(AttributeError, match=r"Simulator.dt is fixed .*mbvi.Simulator\(scene, dt"):
        sim.dt = 2e-3
    with pytest.raises(AttributeError, match=r"Simulator.t0 is fixed"):
        sim.t0 = 1.0
    sim.step(100)
    z = sim.view.position("a")[2]
    assert sim.t == pytest.approx(0.2) and sim.trajectory().t[-1] == pytest.approx(0.2)
    assert z == pytest.approx(-0.5 * G * 0.2**2, rel=1e-6)  # free fall: the clock is the physics'


def _flaky_pendulum(fail_at: int, exc: type[BaseException]):
    """A pendulum pushed by a load (a Python callable) that raises ``exc`` once, at its ``fail_at``-th call."""
    calls = []

    def push(t):
        calls.append(t)
        if len(calls) == fail_at:
            raise exc("driver fault")
        return (0.0, 0.0, 0.1 * math.sin(t))

    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "a"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the closure does not compile with numba: called as Python, said once)
        s.add(mbvi.ExternalForce("a", force=lambda t: push(t), name="push"))
    return s, calls


@pytest.mark.parametrize("integrator", ["verlet", "midpoint"])
def test_a_load_that_raises_once_stops_every_run_that_meets_it(integrator: str) -> None:
    """A load that raised in the second Simulator.step call was dropped (the fast call failed, the step was taken
    again, the load answered): the run went on, 7.8e-6 m off, with no error; midpoint's simulate dropped a raise
    at the first or second call; a KeyboardInterrupt in a batch was lost. Each now stops the run: a LoadError at
    the step it was met in, the simulator left before it; a KeyboardInterrupt as itself."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scene, _ = _flaky_pendulum(10**9, RuntimeError)
        clean = mbvi.simulate(scene, 0.2, 1e-2, integrator)
        for fail_at in (2, 25):
            scene, calls = _flaky_pendulum(fail_at, RuntimeError)
            sim = mbvi.Simulator(scene, dt=1e-2, integrator=integrator)
            with pytest.raises(LoadError, match=r"push.*raised RuntimeError: driver fault") as err:
                sim.step(10)
                sim.step(10)
            assert sim.t <= calls[fail_at - 1] + 1e-12 and err.value.time <= calls[fail_at - 1] + 1e-12
            np.testing.assert_array_equal(sim.state.q, clean.q[round(sim.t / 1e-2)])  # the last good state
            scene, _ = _flaky_pendulum(fail_at, RuntimeError)
            with pytest.raises(LoadError, match="driver fault"):
                mbvi.simulate(scene, 0.2, 1e-2, integrator)
        scene, _ = _flaky_pendulum(25, KeyboardInterrupt)
        sim = mbvi.Simulator(scene, dt=1e-2, integrator=integrator)
        with pytest.raises(KeyboardInterrupt):
            sim.step(10)
            sim.step(10)
        scene, _ = _flaky_pendulum(7, KeyboardInterrupt)
        s0 = mbvi.assemble(scene).initial_state()
        with pytest.raises(KeyboardInterrupt):
            mbvi.simulate_batch(scene, 0.2, 1e-2, [s0, mbvi.State(s0.q, s0.v + (0.0, 0.3, 0.0))], integrator=integrator)


def _pushed_spring(load) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0, 0)))
    scene.add(mbvi.Spring("world", "p", stiffness=4.0, rest_length=1.0))
    scene.add(mbvi.Damper("world", "p", damping=0.5))
    scene.add(mbvi.ExternalForce("p", load, name="push"))
    return scene


@pytest.mark.parametrize("integrator", ["symplectic_euler_a", "symplectic_euler_b"])
def test_loads_switched_by_set_load_are_credited_as_their_kicks_applied_them(integrator: str) -> None:
    """A policy's loop: a random push set before every step of a damped spring, symplectic Euler. The step
    measures its work by a trapezoid whose unkicked end was evaluated with the call's load, while the kick at
    that node applied the other one: traj.work was off by (h/2) ΔF·Δq a switch, the same sign throughout, and
    the balance E − E₀ − W strayed by 1.8× the most energy the spring held, with a warning, of a right
    trajectory. It is now the same as simulate's with the pushes as a function of time (held over each step):
    under A, whose trajectory is the same, its work is too (to the last state, where simulate reads the next
    push); under B, the balance is as tight."""
    dt, n = 1e-2, 600
    pushes = np.random.default_rng(0).uniform(-1.0, 1.0, size=n + 1)
    sim = mbvi.Simulator(_pushed_spring((0.0, 0.0, 0.0)), dt, integrator)
    for i in range(n):
        sim.set_load("push", (float(pushes[i]), 0.0, 0.0))
        sim.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        stepped = sim.trajectory()
        held = mbvi.simulate(_pushed_spring(lambda t: (pushes[min(int(t / dt + 1e-6), n)], 0.0, 0.0)), n * dt, dt,
                             integrator)  # fmt: skip
    balance = np.abs(stepped.energy - stepped.energy[0] - stepped.work).max()
    reference = np.abs(held.energy - held.energy[0] - held.work).max()
    assert balance < 1.2 * reference  # (symplectic Euler's own balance is first order: 1e-3 J here)
    if integrator == "symplectic_euler_a":
        np.testing.assert_array_equal(stepped.q, held.q)
        np.testing.assert_allclose(stepped.work[:-1], held.work[:-1], rtol=0, atol=1e-14)


def test_a_torque_switched_on_a_hinge_is_credited_as_its_kick_applied_it() -> None:
    """The same on a rigid arm: a torque switched every 50 steps (bang-bang) under symplectic Euler A, whose
    balance drifted step by step with each switch, now as tight as with the torque as a function of time."""
    dt, n = 1e-3, 3000
    sign = [1.0 if (i // 50) % 2 == 0 else -1.0 for i in range(n + 1)]
    sim = mbvi.Simulator(_arm(), dt, "symplectic_euler_a")
    for i in range(n):
        if i % 50 == 0:
            sim.set_load("motor", (0.0, 2.0 * sign[i], 0.0))
        sim.step()
    stepped = sim.trajectory()
    held = mbvi.simulate(_arm(lambda t: (0.0, 2.0 * sign[min(int(t / dt + 1e-6), n)], 0.0)), n * dt, dt,
                         "symplectic_euler_a")  # fmt: skip
    balance = np.abs(stepped.energy - stepped.energy[0] - stepped.work).max()
    reference = np.abs(held.energy - held.energy[0] - held.work).max()
    assert balance < 1.2 * reference
    # (each switch's credit is reckoned on the rotation's columns, the step's own on the body's rates: 2e-11 J)
    np.testing.assert_allclose(stepped.work[:-1], held.work[:-1], rtol=0, atol=1e-9)


def test_a_switch_not_yet_stepped_changes_no_work_and_the_credits_are_kept() -> None:
    """A load set after the last step has not acted: under symplectic Euler A its switch was credited at once,
    the last state's work jumped (0.035 → −0.065 J) and the balance warned of a right trajectory. It is credited
    once the step out of it is taken. The credits are kept: a second trajectory() gives the same work."""
    sim = mbvi.Simulator(_pushed_spring((0.5, 0.0, 0.0)), 1e-2, "symplectic_euler_a")
    sim.step(100)
    before = sim.trajectory().work.copy()
    sim.set_load("push", (-20.0, 0.0, 0.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        after = sim.trajectory()
    np.testing.assert_array_equal(after.work, before)
    sim.step(50)
    first, again = sim.trajectory().work, sim.trajectory().work
    np.testing.assert_array_equal(first, again)
    assert first[101] != before[100] + 0.0  # (the switch at state 100 is credited from state 100 on)


def test_a_load_set_at_every_step_costs_trajectory_nothing_until_a_reaction_is_read() -> None:
    """2e4 set_load calls: trajectory() put together the values that acted at each state (a copy of the load's
    values a set, ~7 µs each) at every call, read or not; now when a reaction is first read, and then they are
    the ones that acted (a NumPy array of 3 takes set_load's fast path too)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob", name="rod"))
    scene.add(mbvi.ExternalForce("bob", force=(0.0, 0.0, 0.0), name="push"))
    sim = mbvi.Simulator(scene, dt=1e-3)
    for k in range(20000):
        sim.set_load("push", np.array([0.0, 0.0, 5.0 if k % 2 else -5.0]))
        sim.step()
    traj = sim.trajectory()
    assert traj._loads_along._times is None  # not made yet
    # the rod's force on the bob at state k balances what acted on the step out of it: its pull on m (a − g − F)
    force = traj.constraint_force("rod")
    pushed = np.where(np.arange(len(traj.t)) % 2, 5.0, -5.0)[:-1]
    radial = traj.position("bob")[:-1] / np.linalg.norm(traj.position("bob")[:-1], axis=1)[:, None]
    along = np.einsum("ij,ij->i", force[:-1], radial)
    speed2 = np.einsum("ij,ij->i", traj.velocity("bob")[:-1], traj.velocity("bob")[:-1])
    expected = -speed2 - np.einsum("ij,ij->i", np.array([0.0, 0.0, -9.81]) + pushed[:, None] * [0, 0, 1], radial)
    np.testing.assert_allclose(along, expected, atol=1e-9)
