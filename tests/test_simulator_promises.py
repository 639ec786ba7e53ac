"""mbvi.Simulator keeps the promises simulate keeps (found by a review as a control/RL user would):

* ``set_load`` takes effect whatever the integrator — a compiled-step plugin (``leapfrog``) ignored it once its
  first step had built the engine's model — and belongs to the simulator: one made from a shared System leaves
  the System, and every other simulator of it, as they were;
* a blow-up is a SolverError at the step simulate names, and the simulator goes back to its last state before
  it (it stepped on to |q| ~ 1e140 and kept that as its "last good state"); a baseline warns;
* a failing step's number counts from the run's start on every path (the NumPy paths counted from the call's);
* SystemExit or KeyboardInterrupt raised by a controller the loop calls as Python stops the run as itself
  (ctypes printed and swallowed it, and the run went on).
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest
from scene_loader import load_scene

import mbvi
from mbvi.simulator import JUDGE_EVERY

TAU = (0.0, 5.0, 0.0)


def arm(torque=(0.0, 0.0, 0.0)) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    s.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0.0, 0.0, -0.5)))
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    s.add(mbvi.ExternalTorque("arm", torque=torque, name="motor"))
    return s


@pytest.mark.parametrize("integrator", ["leapfrog", "verlet", "explicit_euler"])
def test_set_load_mid_run_acts_as_the_same_load_from_that_state(integrator: str) -> None:
    """100 steps unloaded, then 100 with the torque held: the states of two simulate calls, the second one
    from the first one's end with the torque in the scene."""
    if integrator not in mbvi.integrators():
        pytest.skip(f"{integrator} is not installed")
    sim = mbvi.Simulator(arm(), dt=1e-3, integrator=integrator)
    sim.step(100)
    sim.set_load("motor", TAU)
    sim.step(100)
    first = mbvi.simulate(arm(), 0.1, 1e-3, integrator)
    second = mbvi.simulate(arm(TAU), 0.1, 1e-3, integrator, initial_state=mbvi.State(first.q[-1], first.v[-1]))
    np.testing.assert_allclose(sim.state.q, second.q[-1], rtol=0, atol=1e-12)
    unloaded = mbvi.simulate(arm(), 0.2, 1e-3, integrator)
    assert np.abs(sim.state.q - unloaded.q[-1]).max() > 1e-3  # the torque did act


def test_set_load_on_a_simulator_of_a_shared_system_leaves_the_others_as_they_were() -> None:
    system = mbvi.assemble(arm())
    for integrator in ("verlet", "explicit_euler"):
        a = mbvi.Simulator(system, dt=1e-3, integrator=integrator)
        a.set_load("motor", TAU)
        a.step(100)
        b = mbvi.Simulator(system, dt=1e-3, integrator=integrator)
        b.step(100)
        alone = mbvi.Simulator(arm(), dt=1e-3, integrator=integrator)
        alone.step(100)
        np.testing.assert_array_equal(b.state.q, alone.state.q)
        assert np.abs(a.state.q - b.state.q).max() > 1e-3


def test_a_blow_up_is_the_error_simulate_gives_and_the_simulator_goes_back_before_it() -> None:
    """The cantilever of scenes/ at dt = 1e-3 (its fastest mode needs ~1e-5): simulate fails at a step; the
    simulator stepped one at a time fails at the same step, and is left at the state before it."""
    scene = load_scene("cantilever").build()
    with pytest.raises(mbvi.SolverError) as ref:
        mbvi.simulate(scene, 0.5, 1e-3)
    sim = mbvi.Simulator(scene, dt=1e-3)
    with pytest.raises(mbvi.SolverError, match=r"energy balance broke.*back at t") as info:
        for _ in range(500):
            sim.step()
    err = info.value
    assert (err.time, err.step) == (ref.value.time, ref.value.step)
    assert sim.steps == err.step - 1 and np.isfinite(sim.state.q).all()
    kept = err.trajectory
    assert len(kept.t) == sim.steps + 1 and np.isfinite(kept.energy).all()
    scale = abs(kept.kinetic[0]) + abs(kept.potential[0])
    assert np.abs(kept.energy - kept.energy[0]).max() < 1e3 * max(scale, 1.0)


def test_a_blow_up_of_a_lagrangian_system_is_rolled_back_too() -> None:
    """ẍ = −10⁴ x stepped at ω dt = 3 (> 2: verlet's bound): its amplitude grows ~30× a step."""
    import sympy as sp

    x, v = sp.symbols("x v")
    system = mbvi.LagrangianSystem(v**2 / 2 - 1e4 * x**2 / 2, [x], [v], initial_state=mbvi.State([1.0], [0.0]))
    sim = mbvi.Simulator(system, dt=0.03)
    with pytest.raises(mbvi.SolverError, match="energy balance broke") as info:
        sim.step(2 * JUDGE_EVERY)  # judged every JUDGE_EVERY states
    assert 0 < sim.steps < 10 and abs(sim.state.q[0]) < 1e3
    assert len(info.value.trajectory.t) == sim.steps + 1


def test_a_baseline_that_blows_up_warns_as_simulate_does() -> None:
    """A baseline's blow-up is a warning while it steps on, and the error once a step fails after it (the
    cantilever under explicit_euler does both within these steps)."""
    scene = load_scene("cantilever").build()
    sim = mbvi.Simulator(scene, dt=1e-3, integrator="explicit_euler")
    with warnings.catch_warnings(record=True) as given, np.errstate(all="ignore"):
        warnings.simplefilter("always")
        try:
            sim.step(2 * JUDGE_EVERY)
        except mbvi.SolverError as err:  # it may also become non-finite within these steps: the blow-up is the error
            assert "the energy balance broke" in str(err)
        else:
            assert any("energy balance broke" in str(w.message) for w in given)


def _faulty(t, s):
    if t >= 0.25:
        raise RuntimeError("motor driver fault")
    return (0.0, 0.0, 0.0)


@pytest.mark.parametrize("integrator", ["verlet", "explicit_euler", "leapfrog", "csm"])
def test_a_failing_step_is_numbered_from_the_run_start_on_every_path(integrator: str) -> None:
    if integrator not in mbvi.integrators():
        pytest.skip(f"{integrator} is not installed")
    sim = mbvi.Simulator(arm(_faulty), dt=1e-3, integrator=integrator)
    sim.step(200)
    with pytest.raises(mbvi.SolverError) as info:
        sim.step(100)
    err = info.value
    assert err.step == round(err.time / 1e-3) == sim.steps
    assert f"(step {err.step})" in str(err)


CFG = {"limit": 0.05}  # a dict: the controller cannot compile, and is called from the compiled loop as Python


def _stop(t, s):
    if t >= CFG["limit"]:
        sys.exit("safety stop")
    return (0.0, 5.0, 0.0)


def test_system_exit_in_a_python_called_controller_stops_the_run_as_itself(capfd) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(SystemExit, match="safety stop"):
            mbvi.simulate(arm(_stop), 0.2, 1e-3)
        sim = mbvi.Simulator(arm(_stop), dt=1e-3)
        with pytest.raises(SystemExit, match="safety stop"):
            sim.step(200)
    assert "Exception ignored" not in capfd.readouterr().err


def test_the_work_of_the_loads_is_kept_and_closes_the_energy_balance(tmp_path) -> None:
    """traj.work: a constant torque τ held from step 200 does W = τ Δθ (a closed form), and E − E₀ − W stays
    at the integrator's error; a drag's work is −∫ c |v|² dt (trapezoids of the saved velocities)."""
    sim = mbvi.Simulator(arm(), dt=1e-3)
    sim.step(200)
    theta0 = sim.view.joint_angle("hinge")
    sim.set_load("motor", TAU)
    sim.step(800)
    traj = sim.trajectory()
    turned = traj.joint_angle("hinge")[-1] - theta0
    np.testing.assert_allclose(traj.work[-1], TAU[1] * turned, rtol=1e-9)
    assert np.abs(traj.energy - traj.energy[0] - traj.work).max() < 1e-4 * abs(traj.work[-1])

    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    scene.add(mbvi.Drag("bob", coefficient=0.5))
    run = mbvi.simulate(scene, 5.0, 1e-3)
    power = -0.5 * np.sum(run.v**2, axis=1)
    expected = np.concatenate([[0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * np.diff(run.t))])
    np.testing.assert_allclose(run.work, expected, atol=1e-4 * abs(expected[-1]))
    assert np.abs(run.energy - run.energy[0] - run.work).max() < 1e-4 * abs(run.work[-1])
    run.save(tmp_path / "run.npz")
    np.testing.assert_array_equal(mbvi.Trajectory.load(tmp_path / "run.npz").work, run.work)


@pytest.mark.parametrize(
    "scene, integrator",
    [("rigid_chain", "verlet"), ("double_pendulum", "yoshida4"), ("four_bar", "verlet"),
     ("double_pendulum", "explicit_euler"), ("double_pendulum_angles", "verlet")],
)  # fmt: skip
@pytest.mark.filterwarnings("ignore::mbvi.RedundantConstraintWarning")  # the four-bar's, at assembly
def test_reset_steps_as_a_new_simulator_from_that_state(scene: str, integrator: str) -> None:
    """An episode, reset, the same episode: bit for bit what a new Simulator steps (the run state, the warm
    starts and a whipping chain's substep count start afresh), and the view stays live."""
    build = load_scene(scene).build
    sim = mbvi.Simulator(build(), dt=1e-3, integrator=integrator)
    view = sim.view
    sim.step(300)
    sim.reset()
    assert sim.t == 0.0 and sim.steps == 0 and len(sim.trajectory().t) == 1
    for _ in range(150):
        sim.step()
    fresh = mbvi.Simulator(build(), dt=1e-3, integrator=integrator)
    fresh.step(150)
    np.testing.assert_array_equal(sim.state.q, fresh.state.q)
    np.testing.assert_array_equal(sim.trajectory().q, fresh.trajectory().q)
    np.testing.assert_array_equal(view.q, fresh.state.q)
    other = fresh.trajectory().q[40], fresh.trajectory().v[40]
    sim.reset(mbvi.State(*other))  # from another state: as a Simulator made from it
    sim.step(60)
    made = mbvi.Simulator(build(), dt=1e-3, integrator=integrator, initial_state=mbvi.State(*other))
    made.step(60)
    np.testing.assert_array_equal(sim.state.q, made.state.q)
    with pytest.raises(ValueError):
        sim.reset(mbvi.State(np.zeros(3), np.zeros(3)))


def test_copying_or_pickling_a_simulator_says_what_to_do_instead() -> None:
    import copy
    import pickle

    sim = mbvi.Simulator(arm(), dt=1e-3)
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match=r"cannot be copied or pickled.*initial_state=sim\.state"):
            attempt(sim)


def test_reset_starts_the_work_of_the_loads_afresh() -> None:
    sim = mbvi.Simulator(arm(), dt=1e-3)
    sim.set_load("motor", TAU)
    sim.step(300)
    sim.reset()
    sim.step(100)
    fresh = mbvi.Simulator(arm(), dt=1e-3)
    fresh.set_load("motor", TAU)
    fresh.step(100)
    np.testing.assert_array_equal(sim.trajectory().work, fresh.trajectory().work)
    assert sim.trajectory().work[-1] > 0.0


def test_a_lagrangian_system_with_no_energy_at_the_start_is_not_a_blow_up() -> None:
    """A body dropped from the origin (T₀ = U₀ = 0: no m g L floor for a LagrangianSystem) was a blow-up at step
    1 (a round-off of 7e-21 J against a scale of 1e-300 J); a driven oscillator started at rest too."""
    import sympy as sp

    x, y, vx, vy, t = sp.symbols("x y v_x v_y t")
    drop = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - 9.81 * y, [x, y], [vx, vy],
                                 initial_state=mbvi.State([0.0, 0.0], [0.0, 0.0]))  # fmt: skip
    driven = mbvi.LagrangianSystem(vx**2 / 2 - 2 * x**2, [x], [vx], force=[sp.sin(1.9 * t)], time=t,
                                   initial_state=mbvi.State([0.0], [0.0]))  # fmt: skip
    for system in (drop, driven):
        sim = mbvi.Simulator(system, dt=1e-3)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            sim.step(2 * JUDGE_EVERY)
            traj = sim.trajectory()
        assert len(traj.t) == 2 * JUDGE_EVERY + 1
        np.testing.assert_array_equal(traj.q, mbvi.simulate(system, 2 * JUDGE_EVERY * 1e-3, 1e-3).q)


def _resonance(amplitude: float) -> mbvi.Scene:
    """1 kg on a slider and a 1 N/m spring, pushed by amplitude·cos t from rest at the spring's rest length: at
    resonance, x(t) = amplitude · t sin(t) / 2 and the energy grows as t²."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Prismatic("world", "p", axis=(1, 0, 0), name="slide"))
    scene.add(mbvi.Spring("world", "p", stiffness=1.0, rest_length=1.0))
    scene.add(mbvi.ExternalForce("p", force=lambda t: (amplitude * np.cos(t), 0.0, 0.0), name="push"))
    return scene


def test_an_accurate_driven_run_is_not_called_a_blow_up() -> None:
    """Resonance pumped 4e6 J into the oscillator by t = 58 s, the balance E − E₀ − W off by 1e4 J (0.24 %, the
    step's error): simulate and the Simulator called it a blow-up against the 9.8 J in play at the start, and
    said it "produced non-finite values". A blow-up strays by about all the energy in motion too."""
    amplitude, dt, t_end = 100.0, 0.1, 80.0
    run = mbvi.simulate(_resonance(amplitude), t_end, dt)
    x = run.position("p")[:, 0] - 1.0
    exact = amplitude * run.t * np.sin(run.t) / 2
    assert np.abs(x - exact).max() < 0.01 * np.abs(exact).max()
    balance = run.energy - run.energy[0] - run.work
    assert 1e3 * 9.81 < np.abs(balance).max() < 0.01 * run.energy.max()  # past the old bound, small in its run
    sim = mbvi.Simulator(_resonance(amplitude), dt)
    sim.step(round(t_end / dt))
    np.testing.assert_allclose(sim.trajectory().q, run.q, rtol=0, atol=1e-9 * np.abs(run.q).max())


def test_csm_failing_before_its_first_output_is_a_solver_error() -> None:
    """A torque of 1e40 N m set mid-run: solve_ivp gave up before any output, leaving sol.y an empty list, and the
    simulator's step raised AttributeError: 'list' object has no attribute 'T'."""
    sim = mbvi.Simulator(arm(), 1e-3, "csm")
    sim.step(3)
    sim.set_load("motor", (0.0, 1e40, 0.0))
    with pytest.raises(mbvi.SolverError, match="solve_ivp failed"):
        sim.step()


@pytest.mark.parametrize("t0", [np.float32(2.0), np.int64(2), True])
def test_the_simulator_takes_the_start_times_simulate_takes(t0) -> None:
    """It refused NumPy numbers (a t0 read off a time array) and took True for 1 s; simulate does the opposite."""
    if t0 is True:
        for run in (lambda: mbvi.simulate(arm(), 2.1, 1e-2, t0=t0), lambda: mbvi.Simulator(arm(), 1e-2, t0=t0)):
            with pytest.raises(ValueError, match="t0"):
                run()
        return
    sim = mbvi.Simulator(arm(), 1e-2, t0=t0)
    assert sim.t == 2.0 and mbvi.simulate(arm(), 2.1, 1e-2, t0=t0).t[0] == 2.0


def test_a_diverging_midpoint_step_is_a_solver_error_not_the_torque_laws_fault() -> None:
    """A torque of 1e200 N m from t = 0.25 s: the Newton iterate left the rotations, S of the torque law's spin
    read became singular, and the run stopped with "force law 'external_torque': its force(q, v, t) raised
    LinAlgError: Singular matrix", blaming a law that had done nothing wrong."""

    def torque(t, state):
        return (0.0, 1e200 if t >= 0.25 else 1.0 - 5.0 * state.joint_angle("hinge"), 0.0)

    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate(arm(torque), 1.0, 1e-3, "midpoint")
    assert not isinstance(info.value, mbvi.errors.LoadError) and "LinAlgError" not in str(info.value)
    assert 0.25 <= info.value.time <= 0.252


def _coarse_oscillator() -> mbvi.Scene:
    """1 kg on a 1 N/m spring along a slider, 0.5 m out: at dt = 1.5 s (stable, h ω < 2) verlet's energy
    strays by about half the energy in motion, (h ω)²/4, so a run's trajectory warns."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=1.0, position=(1.5, 0.0, 0.0)))
    scene.add(mbvi.Prismatic("world", "p", axis=(1, 0, 0), name="slide"))
    scene.add(mbvi.Spring("world", "p", stiffness=1.0, rest_length=1.0))
    return scene


def test_the_energy_warning_leaves_the_process_warning_filters_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trajectory's energy warning is given once a simulator, without ``warnings.catch_warnings`` (it changes
    the process's filters: a simulator in another thread lost its warnings meanwhile)."""
    sim = mbvi.Simulator(_coarse_oscillator(), dt=1.5)
    sim.step(40)
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")

        def refused(*args, **kwargs):
            raise AssertionError("warnings.catch_warnings called while judging a trajectory")

        monkeypatch.setattr(warnings, "catch_warnings", refused)
        sim.trajectory()
        sim.trajectory()
        monkeypatch.undo()
    energy = [w for w in given if "strayed" in str(w.message)]
    assert len(energy) == 1 and "56%" in str(energy[0].message)  # (h ω)² / 4 = 0.5625
    assert energy[0].filename == __file__  # it names the line of the user's code


def test_a_watched_simulator_keeps_its_energy_warning_for_the_watcher() -> None:
    """Inside a block that keeps warnings quietly (a sweep member's), the simulator's warning is the block's, not
    given to the process."""
    from mbvi import notices

    sim = mbvi.Simulator(_coarse_oscillator(), dt=1.5)
    sim.step(40)
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")
        with notices.kept(quiet=True) as kept:
            sim.trajectory()
    assert not given
    assert len(kept) == 1 and "strayed" in kept[0]


def test_a_baseline_failing_after_its_balance_broke_reports_the_blow_up() -> None:
    """explicit_euler's projection failed at 5e38 J: the error named no step size and kept the states of the
    blow-up. The blow-up's start is the error, with a step size and the states up to it."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("a", mass=1.0, position=(0, 0, 0), velocity=(0.0, 1.0, 0.0)))
    scene.add(mbvi.Particle("b", mass=2.0, position=(1, 0, 0), velocity=(0.0, -0.5, 0.2)))
    scene.add(mbvi.Rod("a", "b"))
    with pytest.raises(mbvi.SolverError, match="the energy balance broke") as err:
        mbvi.simulate(scene, t_end=200.0, dt=5e-2, integrator="explicit_euler")
    e = err.value
    assert e.suggested_dt is not None and e.suggested_dt < 5e-2
    traj = e.trajectory
    assert traj.t[-1] == pytest.approx(e.time) and e.step == len(traj.t) - 1
    assert np.isfinite(traj.energy).all() and traj.energy[-1] < 1e8  # cut where it broke, not at 5e38 J


@pytest.mark.parametrize("calls", [1, 20])
def test_a_baseline_blow_up_ending_in_a_failing_step_is_the_error_simulate_gives(calls: int) -> None:
    """explicit_euler on a spring of ω = 100 rad/s at dt = 0.03 s blows up at step 4 (simulate's error). The
    Simulator only warned there and stepped on to 1e154 m, where a step failed, and kept those states; stepped by a
    controller, it blamed the controller for overflowing. A failing step after a baseline's blow-up is the blow-up's
    error, and the simulator goes back to its last state before it, in one call or over many."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=1.0, position=(1.1, 0.0, 0.0)))
    scene.add(mbvi.Spring("world", "p", stiffness=1e4, rest_length=1.0))
    with pytest.raises(mbvi.SolverError) as ref, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mbvi.simulate(scene, t_end=60.0, dt=0.03, integrator="explicit_euler")
    sim = mbvi.Simulator(scene, dt=0.03, integrator="explicit_euler")
    with pytest.raises(mbvi.SolverError, match="the energy balance broke") as err, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            for _ in range(calls):
                sim.step(2000 // calls)
    assert err.value.step == ref.value.step and err.value.time == pytest.approx(ref.value.time)
    assert sim.steps == err.value.step - 1  # back at the last state before the blow-up
    traj = err.value.trajectory
    assert len(traj.t) == sim.steps + 1 and np.abs(traj.q).max() < 10.0
    assert err.value.suggested_dt is not None and err.value.suggested_dt < 0.03
