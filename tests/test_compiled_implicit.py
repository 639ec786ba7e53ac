"""The compiled midpoint and implicit Euler (a fixed point around SHAKE) against Newton on the same equations."""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from scene_loader import SCENES, load_scene

import mbvi

METHODS = ("midpoint", "implicit_euler")
SCENE_FILES = sorted(SCENES.glob("*.py"))


def _scene(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        scene = load_scene(path).build()
        if not isinstance(scene, mbvi.Scene):
            pytest.skip("not a scene of bodies and joints")
        dt = float(getattr(load_scene(path), "DT", 1e-3))
        if mbvi.get_integrator("midpoint")(mbvi.assemble(scene), dt).engine_model() is None:
            pytest.skip("a constraint matrix too wide for the compiled solver: NumPy path")
    return scene, dt


def _newton(scene, t_end, dt, integrator, **kw):
    """The same run on the NumPy path (Newton on the KKT system)."""
    with mock.patch.object(mbvi.get_integrator(integrator), "compiled", False):
        return mbvi.simulate(scene, t_end, dt, integrator, **kw)


def _run(scene, t_end, dt, integrator):
    """A compiled run and the number of its steps Newton took (``numpy_steps``)."""
    system = mbvi.assemble(scene)
    stepper = mbvi.get_integrator(integrator)(system, dt)
    nsteps = round(t_end / dt)
    out = stepper.run(system.initial_state(), 0.0, nsteps)
    return out.q, out.v, out.counters["numpy_steps"], out.work


@pytest.mark.parametrize("integrator", METHODS)
@pytest.mark.parametrize("path", SCENE_FILES, ids=[p.stem for p in SCENE_FILES])
def test_compiled_implicit_steps_solve_the_same_equations_as_newton(path: Path, integrator: str) -> None:
    """Every scene, at its own dt: the two solutions agree to the solvers' tolerances. Rigid bodies step their
    rotation columns under the orthonormality rows, as the NumPy path does (the compiled loop of particles on the
    configuration model, with torques and joint rates through S⁻¹ where the columns are off the group)."""
    scene, dt = _scene(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        q, v, _, _ = _run(scene, 30 * dt, dt, integrator)
        slow = _newton(scene, 30 * dt, dt, integrator)
    scale = max(1.0, float(np.abs(slow.q).max()))
    assert np.max(np.abs(q - slow.q)) <= 1e-9 * scale
    assert np.max(np.abs(v - slow.v)) <= 1e-7 * max(1.0, float(np.abs(slow.v).max()))


def _chain(links: int = 5) -> mbvi.Scene:
    scene = mbvi.Scene()
    prev = "world"
    for i in range(links):
        scene.add(mbvi.Particle(f"p{i}", mass=1.0, position=(i + 1.0, 0, 0)))
        scene.add(mbvi.Rod(prev, f"p{i}"))
        prev = f"p{i}"
    return scene


@pytest.mark.parametrize("integrator", METHODS)
def test_a_gravity_chain_is_stepped_entirely_in_compiled_code(integrator: str) -> None:
    q, v, numpy_steps, _ = _run(_chain(), 2.0, 1e-3, integrator)
    assert numpy_steps == 0
    system = mbvi.assemble(_chain())
    assert np.abs(system.constraints(q[-1])).max() <= 1e-11
    assert np.abs(system.constraint_velocity(q[-1], v[-1])).max() <= 1e-10


@pytest.mark.parametrize("integrator", METHODS)
def test_a_stiff_beam_is_stepped_by_the_compiled_newton_and_agrees(integrator: str) -> None:
    """The cantilever at its own dt: h²k/m ≫ 1, the fixed point cannot contract; the compiled Newton
    (finite-difference KKT matrix) takes the steps and lands where the NumPy Newton (exact Hessians) does."""
    scene, dt = _scene(SCENES / "cantilever.py")
    q, v, numpy_steps, _ = _run(scene, 40 * dt, dt, integrator)
    slow = _newton(scene, 40 * dt, dt, integrator)
    assert numpy_steps == 0
    np.testing.assert_allclose(q, slow.q, rtol=0, atol=1e-11 * max(1.0, np.abs(slow.q).max()))
    np.testing.assert_allclose(v, slow.v, rtol=0, atol=1e-7 * max(1.0, np.abs(slow.v).max()))


def test_a_stiff_system_too_large_for_dense_newton_hands_its_steps_to_numpy() -> None:
    """A 150-segment steel cantilever (over 400 unknowns): the NumPy Newton (sparse LU) takes the steps."""
    cantilever = load_scene(SCENES / "cantilever.py")
    scene = cantilever.build(segments=150)
    dt = 1e-4
    traj = mbvi.simulate(scene, 6 * dt, dt, "midpoint")
    slow = _newton(scene, 6 * dt, dt, "midpoint")
    assert traj.info["numpy_steps"] > 0
    np.testing.assert_allclose(traj.q, slow.q, rtol=0, atol=1e-12 * max(1.0, np.abs(slow.q).max()))


@pytest.mark.parametrize(("integrator", "order"), [("midpoint", 2), ("implicit_euler", 1)])
def test_damped_pendulum_energy_balance_and_order(integrator: str, order: int) -> None:
    """E(t) − E(0) − W(t) with W the work the joint damper did, measured by the step: → 0 at the method's order."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0, 0)))
    scene.add(mbvi.Rod("world", "bob"))
    scene.add(mbvi.Drag("bob", coefficient=0.3))
    errs, dissipated = [], 0.0
    for dt in (2e-3, 1e-3, 5e-4):
        system = mbvi.assemble(scene)
        stepper = mbvi.get_integrator(integrator)(system, dt)
        out = stepper.run(system.initial_state(), 0.0, round(2.0 / dt), save_every=round(0.01 / dt))
        q, v = out.q, out.v
        assert out.counters["numpy_steps"] == 0
        work = out.work
        energy = np.array([system.energy(qi, vi) for qi, vi in zip(q, v, strict=True)])
        dissipated = -work[-1]
        errs.append(float(np.max(np.abs(energy - energy[0] - work))))
    assert dissipated > 1.0  # the damper took a good part of the 9.81 J released
    for coarse, fine in itertools.pairwise(errs):
        assert 0.7 * 2**order <= coarse / fine <= 1.4 * 2**order, errs


@pytest.mark.parametrize("integrator", METHODS)
@pytest.mark.parametrize("path", SCENE_FILES, ids=[p.stem for p in SCENE_FILES])
def test_batch_reproduces_serial_implicit_runs(path: Path, integrator: str) -> None:
    scene, dt = _scene(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        system = mbvi.assemble(scene)
    s0 = system.initial_state()
    rng = np.random.default_rng(5)
    V = [s0.v] + [system.project_velocity(s0.q, s0.v + 0.01 * rng.normal(size=system.nq)) for _ in range(2)]
    Q = np.repeat(s0.q[None], 3, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        batch = mbvi.simulate_batch(scene, 20 * dt, dt, initial_states=(Q, np.array(V)), integrator=integrator)
        for b in (0, 2):
            serial = mbvi.simulate(scene, 20 * dt, dt, integrator, initial_state=mbvi.State(Q[b], V[b]))
            np.testing.assert_allclose(batch[b].q, serial.q, rtol=0, atol=1e-12 * max(1.0, np.abs(serial.q).max()))


def test_batch_of_a_rigid_scene_under_midpoint_runs_member_by_member() -> None:
    scene = mbvi.Scene()
    scene.add(mbvi.RigidBody("top", mass=1.0, inertia=(0.1, 0.1, 0.05), position=(0, 0, 0.5),
                             angular_velocity=(0.0, 0.0, 20.0)))  # fmt: skip
    scene.add(mbvi.Spherical("world", "top", anchor=(0, 0, 0)))
    s0 = mbvi.assemble(scene).initial_state()
    batch = mbvi.simulate_batch(scene, 0.05, 1e-3, initial_states=[s0, s0], integrator="midpoint")
    serial = mbvi.simulate(scene, 0.05, 1e-3, "midpoint")
    for traj in batch:
        np.testing.assert_allclose(traj.q, serial.q, rtol=0, atol=1e-12)


@pytest.mark.parametrize("integrator", ["verlet", *METHODS])
def test_work_is_continuous_across_the_calls_of_one_run(integrator: str) -> None:
    """A progress callback splits a run into compiled calls of 2000 steps: the work they report is one sum."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0, 0)))
    scene.add(mbvi.Rod("world", "bob"))
    scene.add(mbvi.Drag("bob", coefficient=0.3))
    system = mbvi.assemble(scene)
    whole = mbvi.get_integrator(integrator)(system, 1e-3)
    whole = whole.run(system.initial_state(), 0.0, 5000, save_every=7)
    chunked = mbvi.get_integrator(integrator)(system, 1e-3)
    chunked = chunked.run(system.initial_state(), 0.0, 5000, save_every=7, callback=lambda k: None)
    assert whole.work[-1] < -1.0
    np.testing.assert_allclose(chunked.work, whole.work, rtol=0, atol=1e-12)


@pytest.mark.parametrize("integrator", METHODS)
def test_rigid_bodies_are_stepped_entirely_in_compiled_code(integrator: str) -> None:
    """A 3D chain of rigid links on alternating hinges: every step compiled (it was NumPy's, ~1 ms a step), every
    row held — the rotations' orthonormality rows among them — and the velocities on the joints."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    parent = "world"
    for i in range(4):
        scene.add(mbvi.RigidBody(f"l{i}", mass=1.0, inertia=(0.002, 0.08, 0.08), position=(i + 0.5, 0.0, 0.0)))
        axis = (0.0, 1.0, 0.0) if i % 2 == 0 else (0.0, 0.0, 1.0)
        scene.add(mbvi.Revolute(parent, f"l{i}", anchor=(float(i), 0.0, 0.0), axis=axis))
        parent = f"l{i}"
    q, v, numpy_steps, _ = _run(scene, 1.0, 1e-3, integrator)
    assert numpy_steps == 0
    system = mbvi.assemble(scene)
    assert np.abs(system.constraints(q)).max() <= 1e-11
    assert np.abs(system.constraint_velocity(q[-1], v[-1])).max() <= 1e-10
    assert np.ptp(q[:, 2]) > 0.1  # the links fell
