"""The compiled engine against the NumPy path, batches against serial runs, and run state kept off the model."""

from __future__ import annotations

import logging
import math
import re
import sys
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from scene_loader import SCENES, load_scene

import mbvi

mbvi.integrators()  # load the built-in plugins so their modules can be reached
RATTLE = sys.modules["mbvi.integrators.rattle"]
FAMILY = ("verlet", "symplectic_euler_a", "symplectic_euler_b", "yoshida4")
SCENE_FILES = sorted(SCENES.glob("*.py"))


def _scene(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        built = load_scene(path).build()
    return built


def _numpy_path(scene, t_end, dt, integrator="verlet", **kw):
    """The same run with the compiled loop switched off (the NumPy implementation of the algorithm)."""
    with mock.patch.object(mbvi.get_integrator(integrator), "compiled", False):
        return mbvi.simulate(scene, t_end, dt, integrator, **kw)


def _quiet():
    """Closed-loop scenes warn, by design, that redundant rows were dropped."""
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
    return ctx


def _scene_and_step(path: Path):
    """A scene file's scene and a step verlet takes stably (skips files that build no Scene)."""
    scene = _scene(path)
    if not isinstance(scene, mbvi.Scene):
        pytest.skip("not a scene of bodies and joints")
    module = load_scene(path)
    dt = float(getattr(module, "DT", 1e-3))
    if getattr(module, "INTEGRATOR", "verlet") not in FAMILY:
        dt /= 1000  # a scene meant for an A-stable integrator
    return scene, dt


def _has_rigid_bodies(scene: mbvi.Scene) -> bool:
    return any(isinstance(b, mbvi.RigidBody) for b in scene.bodies)


@pytest.mark.parametrize("path", SCENE_FILES, ids=[p.stem for p in SCENE_FILES])
def test_compiled_and_numpy_paths_agree_on_every_scene(path: Path) -> None:
    """Particles: the same algorithm, to round-off. Rigid bodies: the compiled path turns them on SO(3)
    (Cayley), the NumPy path through their rotation columns: two second-order methods, so their difference
    falls 4× when the step halves."""
    scene, dt = _scene_and_step(path)
    ctx = _quiet()
    try:
        fast = mbvi.simulate(scene, 30 * dt, dt, "verlet")
        slow = _numpy_path(scene, 30 * dt, dt, "verlet")
        if _has_rigid_bodies(scene):
            fast2 = mbvi.simulate(scene, 30 * dt, dt / 2, "verlet", save_every=2)
            slow2 = _numpy_path(scene, 30 * dt, dt / 2, "verlet", save_every=2)
    finally:
        ctx.__exit__(None, None, None)
    scale = max(1.0, float(np.abs(slow.q).max()))
    if _has_rigid_bodies(scene):
        coarse = np.max(np.abs(fast.q - slow.q)) / scale
        fine = np.max(np.abs(fast2.q - slow2.q)) / scale
        assert coarse <= 1e-3
        if coarse > 1e-10:  # above round-off: the difference is the O(h²) of the two discretizations
            assert 2.8 <= coarse / fine <= 5.7, (coarse, fine)
        return
    assert np.max(np.abs(fast.q - slow.q)) <= 1e-9 * scale
    vscale = max(1.0, float(np.abs(slow.v).max()))
    assert np.max(np.abs(fast.v - slow.v)) <= 1e-7 * vscale


def _members(scene, count: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    rng = np.random.default_rng(seed)
    V = [s0.v] + [system.project_velocity(s0.q, s0.v + 0.3 * rng.normal(size=system.nq)) for _ in range(count - 1)]
    return np.repeat(s0.q[None], count, axis=0), np.array(V)


@pytest.mark.parametrize("path", SCENE_FILES, ids=[p.stem for p in SCENE_FILES])
def test_batch_reproduces_serial_runs_on_every_scene(path: Path) -> None:
    scene, dt = _scene_and_step(path)
    ctx = _quiet()
    try:
        Q, V = _members(scene, 3)
        # (a member kicked at random may be judged inaccurate at this step, as its run alone is: the axial beam's
        # member 1 strays 12 % of its energy in motion; the batch warns of what its members' runs warn of)
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always", RuntimeWarning)
            batch = mbvi.simulate_batch(scene, 20 * dt, dt, initial_states=(Q, V), save_every=5)
        warned = set()
        for b in range(3):
            with warnings.catch_warnings(record=True) as alone:
                warnings.simplefilter("always", RuntimeWarning)
                serial = mbvi.simulate(scene, 20 * dt, dt, initial_state=mbvi.State(Q[b], V[b]), save_every=5)
            warned |= {b} if any(issubclass(w.category, RuntimeWarning) for w in alone) else set()
            np.testing.assert_array_equal(batch[b].t, serial.t)
            np.testing.assert_allclose(batch[b].q, serial.q, rtol=0, atol=1e-12 * max(1.0, np.abs(serial.q).max()))
            assert batch[b].info.get("energy_error") == pytest.approx(serial.info.get("energy_error"), rel=1e-6)
        judged = [re.match(r"simulate_batch: members? ([\d, ]+) of 3: integrator", str(w.message)) for w in said]
        named = {int(b) for m in judged if m for b in m.group(1).split(",")}
        assert named == warned
    finally:
        ctx.__exit__(None, None, None)


def _far_scene(offset: float, mass_ratio: float = 1.0) -> mbvi.Scene:
    o = np.array([offset, offset, 0.0])
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=o + (1, 0, 0)))
    scene.add(mbvi.Particle("b", mass=mass_ratio, position=o + (1, 0, -1), velocity=(1.0, 0.0, 0.0)))
    scene.add(mbvi.RigidBody("r", mass=1.0, inertia=(1, 1.5, 2), position=o + (0, 1, 0), velocity=(0, 1.5, 0),
                             angular_velocity=(3, 0, 0)))  # fmt: skip
    scene.add(mbvi.Spherical("world", "a", anchor=o + (1, 0, 0)))
    scene.add(mbvi.Rod("a", "b"))
    scene.add(mbvi.Revolute("world", "r", anchor=o + (0, 1, 0.5), axis=(1, 0, 0)))
    scene.add(mbvi.Drag("a", coefficient=0.2))
    return scene


@pytest.mark.parametrize("integrator", FAMILY)
@pytest.mark.parametrize(("offset", "ratio"), [(0.0, 1.0), (1e5, 1.0), (1e7, 1.0), (0.0, 1e9), (0.0, 1e-9)])
def test_batch_reproduces_serial_far_away_and_ill_conditioned(integrator: str, offset: float, ratio: float) -> None:
    scene = _far_scene(offset, ratio)
    Q, V = _members(scene, 2, seed=5)
    batch = mbvi.simulate_batch(scene, 0.05, 1e-3, initial_states=(Q, V), integrator=integrator)
    for b in range(2):
        serial = mbvi.simulate(scene, 0.05, 1e-3, integrator, initial_state=mbvi.State(Q[b], V[b]))
        slow = _numpy_path(scene, 0.05, 1e-3, integrator, initial_state=mbvi.State(Q[b], V[b]))
        # the batch projects its initial velocities once more: round-off, amplified by the mass ratio
        assert np.max(np.abs(batch[b].q - serial.q)) <= 1e-13 * max(1.0, offset, ratio / 1e6)
        # the NumPy path turns the body through its rotation columns, the compiled one on SO(3) (Cayley):
        # two second-order methods, 1e-3 s steps over 0.05 s
        assert np.max(np.abs(serial.q - slow.q)) <= 1e-5
        # (SHAKE's tolerance is relative to the scene's size: its bodies and anchors span 1.5 m)
        assert serial.constraint_error.max() <= 1e-12 * mbvi.assemble(scene).length_scale + 1e-15 * offset


def _far_chain(offset: float) -> mbvi.Scene:
    """Four particles on rods from an anchor ``offset`` m from the origin on all three axes (no rigid body:
    the point-mass loop and, in a batch, lockstep)."""
    o = np.full(3, offset)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    parent = "world"
    for i in range(4):
        name = f"p{i}"
        scene.add(mbvi.Particle(name, mass=1.0 + 0.5 * i, position=o + (0.7 * (i + 1), 0.2 * i, -0.7 * (i + 1))))
        scene.add(mbvi.Rod(parent, name, anchor_a=o if parent == "world" else None))
        parent = name
    return scene


@pytest.mark.parametrize("offset", [1e5, 1e7])
def test_a_far_point_chain_holds_its_rods_at_round_off_serial_batch_and_numpy(offset: float) -> None:
    """Without a rigid body SHAKE has no stall test to fall back on: the static allowance (one rounding of
    each coordinate) must be reachable, on the compiled loop, in lockstep and on the NumPy path."""
    scene = _far_chain(offset)
    Q, V = _members(scene, 3, seed=7)
    batch = mbvi.simulate_batch(scene, 0.3, 1e-3, initial_states=(Q, V), integrator="verlet")
    for b in range(3):
        serial = mbvi.simulate(scene, 0.3, 1e-3, "verlet", initial_state=mbvi.State(Q[b], V[b]))
        slow = _numpy_path(scene, 0.3, 1e-3, "verlet", initial_state=mbvi.State(Q[b], V[b]))
        for traj in (batch[b], serial, slow):
            assert traj.constraint_error.max() <= 1e-12 + 1e-15 * offset
        assert np.max(np.abs(batch[b].q - serial.q)) <= 1e-13 * offset  # the batch projects once more
        assert np.max(np.abs(serial.q - slow.q)) <= 1e-12 * offset  # the same algorithm, round-off apart


def _travelling_dumbbell() -> mbvi.Scene:
    """Two particles on a 1 m rod, spinning at 2 rad/s, flying off along x at 20 km/s: 40 km away after 2 s."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("a", mass=1.0, position=(0.0, 0.0, 0.0), velocity=(2e4, -1.0, 0.0)))
    scene.add(mbvi.Particle("b", mass=2.0, position=(1.0, 0.0, 0.0), velocity=(2e4, 1.0, 0.0)))
    scene.add(mbvi.Rod("a", "b"))
    return scene


def test_a_mechanism_that_travels_far_from_where_it_started_runs_at_the_round_off_of_where_it_is() -> None:
    """The allowance for round-off is counted at the initial configuration; a mechanism that then travels carries
    the round-off of where it is (a rod at 4e4 m: ~7e-12 m per coordinate), and SHAKE on particles had no stall test
    to fall back on: a free dumbbell pushed to 8 km failed with "SHAKE did not converge" (compiled loop, batch
    and NumPy path alike). It runs, holds its rod at that round-off, and keeps its momentum."""
    scene = _travelling_dumbbell()
    serial = mbvi.simulate(scene, 2.0, 1e-2, "verlet")
    batch = mbvi.simulate_batch(scene, 2.0, 1e-2, initial_states=[mbvi.assemble(scene).initial_state()] * 2)
    slow = _numpy_path(scene, 2.0, 1e-2, "verlet")
    for traj in (serial, batch[1], slow):
        assert traj.position("a")[-1, 0] > 3.9e4
        assert traj.constraint_error.max() <= 1e-15 * 4e4
        np.testing.assert_allclose(traj.momentum, np.broadcast_to(traj.momentum[0], traj.momentum.shape), rtol=1e-13)


def test_two_integrators_on_one_system_keep_their_own_tolerances() -> None:
    scene = _far_scene(0.0)
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    loose = RATTLE.Verlet(system, 1e-3, tol=1e-6)
    alone = RATTLE.Verlet(mbvi.assemble(scene), 1e-3, tol=1e-6)
    mbvi.get_integrator("midpoint")(system, 1e-3)  # built after it, on the same System
    assert system.tolerance == 1e-12  # the model is unchanged
    _, q1, _ = loose.integrate(s0, 0.0, 200)
    _, q2, _ = alone.integrate(s0, 0.0, 200)
    np.testing.assert_array_equal(q1, q2)
    err = np.abs(system.constraints(q1[-1])).max()
    assert 1e-12 < err < 1e-5  # it really ran at 1e-6, not at the midpoint's 1e-12


@pytest.mark.parametrize("scene", ["double_pendulum", "rigid_chain"])
def test_a_run_does_not_depend_on_what_the_integrator_ran_before(scene: str) -> None:
    """The compiled SHAKE's warm starts belong to the state a run ended at: a run from any other state starts
    cold, so the same run twice gives the same trajectory bit for bit, as a new integrator's does (a warm start
    from another configuration had changed the result within the tolerance, and at tol 1e-3 a 32-link chain's
    first step from the release took 130 ms in substeps). A run continued from where the last one ended keeps
    them: the result is the one run's, to the tolerance."""
    if scene == "rigid_chain":
        from scene_loader import rigid_chain

        system = mbvi.assemble(rigid_chain(8))
    else:
        system = mbvi.assemble(load_scene(SCENES / "double_pendulum.py").build())
    s0 = system.initial_state()
    stepper = mbvi.get_integrator("verlet")(system, 1e-3)
    _, Q1, V1 = stepper.integrate(s0, 0.0, 300)
    stepper.integrate(mbvi.State(Q1[150], V1[150]), 0.15, 100)  # somewhere else
    _, Q2, V2 = stepper.integrate(s0, 0.0, 300)
    _, Q3, V3 = mbvi.get_integrator("verlet")(system, 1e-3).integrate(s0, 0.0, 300)
    np.testing.assert_array_equal(V1, V3)
    np.testing.assert_array_equal(Q1, Q2)
    np.testing.assert_array_equal(V1, V2)
    np.testing.assert_array_equal(Q1, Q3)
    _, Qa, Va = stepper.integrate(s0, 0.0, 150)
    _, Qb, _ = stepper.integrate(mbvi.State(Qa[-1], Va[-1]), 0.15, 150)
    assert np.abs(Qb[-1] - Q1[-1]).max() <= 1e-11 * system.length_scale
    assert np.abs(Q1[-1] - s0.q).max() > 0.1  # it moved


@pytest.mark.parametrize("option", [{"tol": 0.0}, {"tol": float("nan")}, {"tol": -1.0}, {"maxiter": 0},
                                    {"maxiter": 2.5}, {"tol": "1e-9"}])  # fmt: skip
def test_bad_solver_options_name_the_option(option: dict) -> None:
    scene = _far_scene(0.0)
    for name in ("verlet", "midpoint", "yoshida4"):
        with pytest.raises(ValueError, match=next(iter(option))):
            mbvi.simulate(scene, 0.01, 1e-3, name, **option)


def test_absurd_step_counts_are_refused() -> None:
    scene = _far_scene(0.0)
    with pytest.raises(ValueError, match="too many"):
        mbvi.simulate(scene, 1.0, 1e-300)
    with pytest.raises(ValueError, match="inf steps; that is too many"):  # was OverflowError: float infinity
        mbvi.simulate(scene, 1.0, 1e-310)
    with pytest.raises(ValueError, match="dt"):
        mbvi.simulate(scene, 1.0, True)


def test_a_step_below_the_clocks_resolution_is_refused_and_one_above_it_keeps_its_times() -> None:
    """t0 = 1.7e9 s (a Unix time stamp) has floats 2.4e-7 s apart: dt = 1e-7 made 102 states of 43 distinct times
    (loads read wrong times; the saved run was refused by Trajectory.load). Refused naming dt and t0, by simulate,
    simulate_batch and the Simulator; a step of 2 spacings runs, its times increasing by dt to half a spacing, and
    one of 8 (t0 = 1e9 s, dt = 1e-6 s) is not refused."""
    scene = _far_scene(0.0)
    t0, tick = 1.7e9, math.ulp(1.7e9)
    for call in (
        lambda: mbvi.simulate(scene, t0 + 100e-7, 1e-7, t0=t0),
        lambda: mbvi.simulate_batch(scene, t0 + 100e-7, 1e-7, [mbvi.assemble(scene).initial_state()], t0=t0),
        lambda: mbvi.Simulator(scene, dt=1e-7, t0=t0),
    ):
        with pytest.raises(ValueError, match=r"dt = 1e-07 s is below the resolution of the clock at t0 = 1700000000"):
            call()
    traj = mbvi.simulate(scene, t0 + 20 * 2 * tick, 2 * tick, t0=t0)
    assert len(traj) == 21
    assert np.all(np.abs(np.diff(traj.t) - 2 * tick) <= 0.5 * tick)
    assert len(mbvi.simulate(scene, 1e9 + 2000e-6, 1e-6, t0=1e9)) == 2001


def test_direct_step_calls_are_checked() -> None:
    system = mbvi.assemble(_far_scene(0.0))
    s0 = system.initial_state()
    stepper = RATTLE.Verlet(system, 1e-3)
    with pytest.raises(ValueError, match="not finite"):
        stepper.step(mbvi.State(s0.q * np.nan, s0.v), 0.0)
    with pytest.raises(ValueError, match="shape"):
        stepper.step(mbvi.State(s0.q[:3], s0.v[:3]), 0.0)

    class Exploding(mbvi.Integrator):  # written against the documented contract: it implements step()
        name = "exploding"

        def step(self, state, t):
            return mbvi.State(state.q * np.inf, state.v)

    with pytest.raises(mbvi.SolverError):
        Exploding(system, 1e-3).step(s0, 0.0)


def test_a_plugin_integrator_that_ignores_forces_is_refused_on_a_damped_scene() -> None:
    class Drifter(mbvi.Integrator):
        name = "drifter"

        def step(self, state, t):
            q = state.q + self.dt * state.v
            return mbvi.State(q, state.v - self.dt * self.system.inv_mass * self.system.potential_gradient(q))

    free = mbvi.Scene(gravity=(0, 0, -9.81))
    free.add(mbvi.Particle("p", mass=1.0, position=(0, 0, 0)))
    assert mbvi.simulate(free, 0.1, 1e-3, Drifter).position("p")[-1, 2] < 0  # conservative: it runs
    free.add(mbvi.Drag("p", coefficient=1.0))
    with pytest.raises(ValueError, match="forces"):
        mbvi.simulate(free, 0.1, 1e-2, Drifter)


def test_a_numpy_only_force_law_runs_and_says_so_once(caplog) -> None:
    """A plugin law written in NumPy (quadratic drag) takes the NumPy path, correctly, and is logged once."""
    qd = pytest.importorskip("mbvi_quadratic_drag")
    m, c, u0, T = 2.0, 0.5, 3.0, 1.0
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=m, position=(0, 0, 0), velocity=(u0, 0, 0)))
    scene.add(qd.QuadraticDrag("p", coefficient=c))
    with caplog.at_level(logging.WARNING, logger="mbvi"):
        traj = mbvi.simulate(scene, T, 1e-3)
        mbvi.simulate(scene, T, 1e-3)
        batch = mbvi.simulate_batch(scene, T, 1e-3, initial_states=[mbvi.assemble(scene).initial_state()])
    exact = u0 / (1.0 + c * u0 * T / m)  # m u̇ = −c u²
    assert abs(traj.velocity("p")[-1, 0] - exact) < 1e-5
    np.testing.assert_allclose(batch[0].q, traj.q, rtol=0, atol=1e-15)
    assert sum("no compiled kernel" in r.getMessage() for r in caplog.records) <= 1


def test_a_blown_up_run_is_an_error_naming_the_stiffest_element() -> None:
    """A steel bar stepped just past the explicit stability limit ℓ/c: never returned as a result."""
    E, rho, L, n = 200e9, 7850.0, 1.0, 200
    ell, c = L / n, (E / rho) ** 0.5
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Beam("bar", start=(0, 0, 0), end=(L, 0, 0), segments=n, density=rho, area=1e-4,
                        youngs_modulus=E, second_moment=None))  # fmt: skip
    scene.add(mbvi.Spherical("world", "bar[0]", anchor=(0, 0, 0)))
    scene.add(mbvi.ExternalForce("bar[200]", force=(1e3, 0, 0)))
    dt = 1.01 * ell / c
    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate(scene, 4000 * dt, dt)
    err = info.value
    assert err.culprit and "bar" in err.culprit
    assert err.suggested_dt is not None and err.suggested_dt < ell / c
    assert err.trajectory is not None


def test_a_suggested_step_size_works_when_followed() -> None:
    """A body spun far past h|ω| = 1: the error's dt has been verified by a run that completes."""
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.RigidBody("rotor", mass=1.0, inertia=(0.01, 0.015, 0.02), angular_velocity=(0, 0, 400.0),
                             position=(0, 0, 0)))  # fmt: skip
    scene.add(mbvi.Revolute("world", "rotor", anchor=(0, 0, 0), axis=(0, 0, 1)))
    try:
        mbvi.simulate(scene, 0.5, 1e-2)
    except mbvi.SolverError as err:
        assert err.suggested_dt is not None and err.suggested_dt < 1e-2
        assert getattr(err, "verified_dt", False)
        traj = mbvi.simulate(scene, 0.5, err.suggested_dt)
        assert traj.constraint_error.max() <= 1e-10
    else:  # a rotation update that steps past h|ω| = 1 needs no suggestion
        pass


@pytest.mark.parametrize(("h", "where"), [(0.0155, "near"), (0.025, "past"), (0.1, "past")])
def test_a_spin_blamed_says_whether_the_step_is_near_or_past_the_rattle_limit(h: float, where: str) -> None:
    """A failed midpoint step of a crank at h|ω| = 0.62 blamed its spin, "a RATTLE step exists only for h|ω| < 1"."""
    from mbvi.diagnosis import diagnose

    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("crank", mass=1.0, inertia=(0.01, 0.015, 0.02), angular_velocity=(0, 0, 40.0)))
    system = mbvi.assemble(scene)
    state = system.initial_state()
    culprit, dt = diagnose(system, state.q, state.v, h, np.zeros(0))
    assert culprit == (f"rigid body 'crank' spins at |ω| = 40 rad/s (h|ω| = {40 * h:.2f}, {where} the RATTLE step's "
                       "limit: one exists only for h|ω| < 1)")  # fmt: skip
    assert dt == pytest.approx(0.5 / 40)


def test_batch_failure_names_the_member_and_keeps_every_partial_trajectory() -> None:
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("rotor", mass=1.0, inertia=(0.01, 0.02, 0.025), angular_velocity=(0, 0, 1.0)))
    scene.add(mbvi.Revolute("world", "rotor", anchor=(0, 0, 0), axis=(0, 0, 1)))
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    fast = mbvi.State(s0.q, s0.v * 400.0)  # h|ω| = 4 at dt = 1e-2
    try:
        mbvi.simulate_batch(scene, 0.2, 1e-2, initial_states=[s0, fast, s0])
    except mbvi.SolverError as err:
        assert err.member == 1 and "member 1" in str(err)
        assert err.time is not None and err.step is not None
        assert len(err.trajectory) == 3 and len(err.trajectory[0].t) == 21
    else:  # steps past h|ω| = 1 exist: then every member must have completed
        pass


def test_csm_on_a_stiff_spring_stops_quickly_and_says_what_to_use() -> None:
    """k = 1e12 on 1 kg: an explicit solve_ivp method would grind for minutes; its work is bounded."""
    import time

    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, -1.0)))
    scene.add(mbvi.Spring("world", "p", stiffness=1e12, rest_length=0.9))
    start = time.perf_counter()
    with pytest.raises(mbvi.SolverError, match="stiff") as info:
        mbvi.simulate(scene, 0.05, 1e-3, "csm")
    assert time.perf_counter() - start < 30.0
    assert "Radau" in str(info.value) and info.value.time is not None


def test_csm_rejects_a_negative_baumgarte_rate() -> None:
    with pytest.raises(ValueError, match="alpha"):
        mbvi.simulate(_far_scene(0.0), 0.01, 1e-3, "csm", alpha=-1.0)


@pytest.mark.parametrize(("kwargs", "match"), [({"maxiter": 0}, "maxiter"), ({"tol": 0.0}, "tol"),
                                                ({"tol": float("nan")}, "tol")])  # fmt: skip
def test_project_position_validates_its_options(kwargs: dict, match: str) -> None:
    system = mbvi.assemble(_far_scene(0.0))
    with pytest.raises(ValueError, match=match):
        system.project_position(system.layout.q0, **kwargs)


@pytest.mark.parametrize("path", SCENE_FILES, ids=[p.stem for p in SCENE_FILES])
def test_u_computed_once_for_repeated_rows_is_the_full_map_bit_for_bit(path: Path) -> None:
    """A joint's point rows share one U, computed once and copied (``model._u_aliases``): the same numbers as
    every row's own terms summed in order, at a random configuration."""
    from mbvi.engine import kernels as K
    from mbvi.engine.fields import M as S

    scene = _scene(path)
    if not isinstance(scene, mbvi.Scene):
        pytest.skip("not a scene of bodies and joints")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        system = mbvi.assemble(scene)
    model = system.engine_model()
    if model is None:
        pytest.skip("no compiled model")
    I, F = model[:2]
    n, nu = int(I[S.N]), int(I[S.NU])
    if n == 0:
        pytest.skip("no constraint rows")
    q = np.asarray(system.layout.q0, float) + 0.3 * np.random.default_rng(2).normal(size=system.nq)
    full = F[I[S.CU] : I[S.CU] + 3 * n].copy()
    ur, uc, uv = I[I[S.UR] : I[S.UR] + nu], I[I[S.UC] : I[S.UC] + nu], F[I[S.UV] : I[S.UV] + nu]
    for e in range(nu):
        full[ur[e]] += uv[e] * q[uc[e]]
    u, w = np.full(3 * n, np.nan), np.zeros(3 * n)
    K.affine_uw(I, F, q, u, w)
    np.testing.assert_array_equal(u, full)
    if path.stem == "rigid_chain":  # a revolute joint's 3 point rows share one U, its 2 axis rows another
        assert I[S.NALIAS] == 3 * int(I[S.N]) // 5


def test_residual_divides_only_where_a_row_may_raise_the_maximum_and_is_numpy_s_bit_for_bit() -> None:
    """The compiled residual skips the division of rows that cannot raise the running maximum; its value
    is NumPy's max((|g| − round-off) / scale) exactly, near-ties and rows below round-off included."""
    from mbvi.engine import kernels as K
    from mbvi.engine.fields import M

    ROUND, SCALE, N = M.ROUND, M.SCALE, M.N

    system = mbvi.assemble(load_scene("rigid_chain").build(links=6))
    I, F = system.engine_model()[:2]
    n = int(I[N])
    sc, ro = F[I[SCALE] : I[SCALE] + n], F[I[ROUND] : I[ROUND] + n]
    rng = np.random.default_rng(4)
    for trial in range(2000):
        g = rng.normal(size=n) * 10.0 ** rng.uniform(-16, -8, size=n)
        if trial % 3 == 0:  # rows whose quotients tie with the largest to within an ulp or two
            k = rng.integers(n)
            top = (abs(g[k]) - ro[k]) / sc[k]
            g = np.where(rng.random(n) < 0.5, (top * sc + ro) * (1.0 + rng.integers(-2, 3, size=n) * 1e-16), g)
        expected = max(0.0, float(np.max((np.abs(g) - ro) / sc)))
        assert K.residual(I, F, g) == expected
    assert K.residual(I, F, np.full(n, np.nan)) == np.inf


@pytest.mark.filterwarnings("ignore::mbvi.RedundantConstraintWarning")
@pytest.mark.parametrize("scene", ["double_pendulum", "rigid_chain", "four_bar", "hanging_chain"])
def test_g_times_x_row_by_row_is_the_entry_by_entry_sum_bit_for_bit(scene: str) -> None:
    """G x summed row by row in a register (G's entries listed row by row) adds the same terms in the same
    order as entry by entry into memory: the same numbers, in both the configuration and velocity models."""
    from mbvi.engine import kernels as K
    from mbvi.engine.fields import M as MF

    GSORTED, NNZ, NQ, PCOL, PROW, N = MF.GSORTED, MF.NNZ, MF.NQ, MF.PCOL, MF.PROW, MF.N

    system = mbvi.assemble(load_scene(scene).build())
    I, _, Iv, _ = system.engine_model()[:4]
    rng = np.random.default_rng(2)
    for M in (I, Iv):
        n, nnz, nq = int(M[N]), int(M[NNZ]), int(M[NQ])
        assert M[GSORTED] == 1
        prow, pcol = M[M[PROW] : M[PROW] + nnz], M[M[PCOL] : M[PCOL] + nnz]
        gd, x = rng.normal(size=nnz), rng.normal(size=nq)
        expected = [0.0] * n
        for i in range(nnz):
            expected[prow[i]] += float(gd[i]) * float(x[pcol[i]])
        out = np.full(n, np.nan)
        K.matvec(M, gd, x, out)
        assert out.tolist() == expected


@pytest.mark.filterwarnings("ignore::mbvi.RedundantConstraintWarning")
@pytest.mark.parametrize("scene", ["rigid_chain", "four_bar", "spinning_top", "hanging_chain"])
def test_m_inverse_g_transpose_y_by_columns_is_the_entry_by_entry_sum_bit_for_bit(scene: str) -> None:
    """M⁻¹Gᵀy summed column by column in a register (G's entries listed by columns, each column's in pattern
    order) adds the same terms in the same order as entry by entry into memory, in both models."""
    from mbvi.engine import kernels as K
    from mbvi.engine.fields import M as MF

    NNZ, NQ, PCOL, PROW, N, W = MF.NNZ, MF.NQ, MF.PCOL, MF.PROW, MF.N, MF.W

    system = mbvi.assemble(load_scene(scene).build())
    I, F, Iv, Fv = system.engine_model()[:4]
    rng = np.random.default_rng(3)
    for M, Mf in ((I, F), (Iv, Fv)):
        n, nnz, nq = int(M[N]), int(M[NNZ]), int(M[NQ])
        prow, pcol = M[M[PROW] : M[PROW] + nnz], M[M[PCOL] : M[PCOL] + nnz]
        wi = Mf[M[W] : M[W] + nq]
        gd, y = rng.normal(size=nnz), rng.normal(size=n)
        expected = [0.0] * nq
        for i in range(nnz):
            expected[pcol[i]] += float(wi[pcol[i]]) * float(gd[i]) * float(y[prow[i]])
        out = np.full(nq, np.nan)
        K.wgt(M, Mf, gd, y, out)
        assert out.tolist() == expected


def test_saved_states_are_allocated_without_leaving_numpy_s_huge_page_advice_changed() -> None:
    """Trajectories' arrays skip numpy's huge-page advice (memory compaction stalled a 20-s run by 45 %), and
    numpy's global setting is the same afterwards, whatever it was; the arrays are ordinary float64 arrays."""
    from mbvi.engine import runner

    switch = runner._HUGEPAGE
    if switch is None:
        pytest.skip("this numpy has no huge-page switch")
    for setting in (True, False):
        switch(setting)
        try:
            a = runner.saved_states((600, 1000))  # 4.8 MB: numpy would advise huge pages for it
            z = runner.saved_states((3, 4), zero=True)
            assert switch(setting) is setting  # the switch returns the setting it replaces
        finally:
            switch(True)
        assert a.shape == (600, 1000) and a.dtype == np.float64 and a.flags.writeable and a.flags.c_contiguous
        assert z.shape == (3, 4) and not z.any()
    # a run's saved states come from it
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    compiled = sys.modules["mbvi.integrators.compiled"]
    with mock.patch.object(compiled, "saved_states", wraps=runner.saved_states) as spy:
        traj = mbvi.simulate(scene, 0.1, 1e-3)
    assert spy.call_count >= 2 and traj.q.shape == (101, 3)


def _double_pendulum(force=None) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    if force is not None:
        scene.add(force)
    return scene


def _load(t, state):  # reads the state, does next to nothing: a velocity-dependent force for the loops
    return (0.0, 0.0, 1e-9 * state.position("b")[2])


def _push(t, state):  # a hard push down on b, given as a controller: no damping
    return (0.0, 0.0, -150.0 + 0.0 * state.position("b")[2])


@pytest.mark.parametrize("path", ["compiled", "numpy"])
@pytest.mark.parametrize("force", [None, "drag", "controller", "push"])
def test_a_step_too_large_for_the_joints_is_named_so_whatever_forces_read_the_velocity(force, path: str) -> None:
    """The double pendulum at dt = 0.15 s: SHAKE fails on rod a-b. With a drag of 1e-9 N s/m (or a controller that
    reads the state) the run blamed stiff damping ("the implicit drift does not converge", no culprit, advice to
    use midpoint, which fails too): SHAKE's failure at the fixed point's first iterate is SHAKE's own."""
    extra = {"drag": mbvi.Drag("b", coefficient=1e-9), "controller": mbvi.ExternalForce("b", force=_load),
             "push": mbvi.ExternalForce("b", force=_push), None: None}[force]  # fmt: skip
    integrator = "verlet" if path == "compiled" else type("VerletOnNumPy", (mbvi.get_integrator("verlet"),),
                                                           {"name": "verlet_on_numpy", "compiled": False})  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(mbvi.SolverError, match="SHAKE") as info:
            mbvi.simulate(_double_pendulum(extra), 3.0, 0.15, integrator)
    rods = ("Rod 'a-b'", "Rod 'world-a'") if force == "push" else ("Rod 'a-b'",)  # (a hard push strains both)
    assert info.value.culprit in rods and "damping" not in str(info.value)


@pytest.mark.parametrize("integrator", ["verlet", "yoshida4", "numpy"])
@pytest.mark.parametrize("speed", [0.0, 3.0])
def test_damping_too_stiff_for_the_step_is_still_named_so(speed: float, integrator: str) -> None:
    """A drag of 1 N s/m on a 1 mg particle at dt = 1e-3 (h c/m = 1000): the fixed point diverges from rest, and
    moving, the damping's own first kick (h c/m v₀) throws SHAKE off the rod: both are the damping's fault, and
    implicit_euler, which the message advises, runs it to the drag-limited speed m g / c (midpoint, which it advised
    before, flips the velocity's sign every step: it warns)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1e-6, position=(1.0, 0.0, 0.0), velocity=(0.0, 0.0, -speed)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Drag("a", coefficient=1.0))
    if integrator == "numpy":
        integrator = type("VerletOnNumPy", (mbvi.get_integrator("verlet"),), {"name": "verlet_np", "compiled": False})
    with pytest.raises(mbvi.SolverError, match="the implicit drift does not converge — the damping is too stiff"):
        mbvi.simulate(scene, 0.1, 1e-3, integrator)
    with pytest.raises(mbvi.SolverError, match="integrator='implicit_euler', which solves it by Newton and damps it"):
        mbvi.simulate(scene, 0.1, 1e-3, integrator)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run = mbvi.simulate(scene, 0.1, 1e-3, "implicit_euler")
    np.testing.assert_allclose(run.velocity("a")[-1], [0.0, 0.0, -9.81e-6], rtol=0, atol=1e-9)
    with pytest.warns(RuntimeWarning, match="midpoint.*the damping is stiff for this step"):
        mbvi.simulate(scene, 0.1, 1e-3, "midpoint")
