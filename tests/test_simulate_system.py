"""``simulate`` and ``simulate_batch`` take a scene already assembled (an ``mbvi.System``), as ``Simulator`` does.

A System is built once and its runs reuse its compiled model (MuJoCo's one ``MjModel``, many runs):

* the run of a System is the run of its scene, bit for bit (particles, rigid bodies, a load of (t, state));
* what ``simulate`` judges from the scene it judges from the System: a TorsionSpring wound past half a turn
  warns naming it, and a failed step's suggestion is verified by re-running the System (the same step as for the
  scene, which keeps the pendulum's energy within 1 %);
* a batch of a System is the batch of its scene;
* anything else is a ValueError naming the three types ``simulate`` takes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scene_loader import load_scene
from test_joint_laws import torsion_rotor

import mbvi

G = 9.81


def _pendulum(length: float = 1.1) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("bob", mass=1.0, position=(length * math.sin(1.0), 0.0, -length * math.cos(1.0))))
    s.add(mbvi.Rod("world", "bob"))
    return s


def _pd_arm() -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0.0, 0.0, -0.5)))
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    s.add(mbvi.ExternalTorque("arm", lambda t, state: (0.0, 20.0 * (0.5 - state.joint_angle("hinge"))
                                                       - 2.0 * state.joint_rate("hinge"), 0.0), name="pd"))  # fmt: skip
    return s


SCENES = {
    "double_pendulum": lambda: load_scene("double_pendulum").build(),
    "rigid_chain": lambda: load_scene("rigid_chain").build(links=5),
    "pd_arm": _pd_arm,
}


@pytest.mark.parametrize("name", list(SCENES))
def test_a_system_runs_as_its_scene_bit_for_bit(name: str) -> None:
    scene = SCENES[name]()
    from_scene = mbvi.simulate(scene, 1.0, 1e-3)
    system = mbvi.assemble(scene)
    for _ in range(2):  # and again: a System's runs share its model, not its state
        from_system = mbvi.simulate(system, 1.0, 1e-3)
        assert np.array_equal(from_system.q, from_scene.q) and np.array_equal(from_system.v, from_scene.v)
        assert np.array_equal(from_system.energy, from_scene.energy)
    assert from_system.constraint_error.max() <= 1e-10


def test_a_system_with_a_wound_torsion_spring_warns_naming_it() -> None:
    system = mbvi.assemble(torsion_rotor(5.0))
    with pytest.warns(RuntimeWarning, match=r"torsion-spring:h.*past half a turn"):
        traj = mbvi.simulate(system, 8.0, 1e-3)
    assert np.max(np.abs(traj.joint_angle("h"))) > math.pi


def test_a_failed_step_of_a_system_suggests_the_scene_s_verified_step() -> None:
    errors = []
    for source in (_pendulum(), mbvi.assemble(_pendulum())):
        with pytest.raises(mbvi.SolverError) as info:
            mbvi.simulate(source, 20.0, 2.0)
        errors.append(info.value)
    assert errors[1].verified_dt and errors[1].suggested_dt == errors[0].suggested_dt < 2.0
    run = mbvi.simulate(mbvi.assemble(_pendulum()), 20.0, errors[1].suggested_dt)
    e = run.energy
    assert np.ptp(e) <= 0.01 * G * 1.1  # within 1 % of the swing's energy scale m g ℓ


def test_a_batch_of_a_system_is_the_batch_of_its_scene() -> None:
    scene = load_scene("double_pendulum").build()
    s0 = mbvi.assemble(scene).initial_state()
    states = [mbvi.State(s0.q, s0.v + np.r_[0.0, w, 0.0, 0.0, 0.0, 0.0]) for w in (0.0, 0.3, 0.6)]
    a = mbvi.simulate_batch(scene, 0.5, 1e-3, states)  # (a push out of the plane: on the rods)
    b = mbvi.simulate_batch(mbvi.assemble(scene), 0.5, 1e-3, states)
    for x, y in zip(a, b, strict=True):
        assert np.array_equal(x.q, y.q) and np.array_equal(x.v, y.v)
    assert not np.array_equal(a[0].q, a[2].q)


def test_simulate_names_what_it_takes() -> None:
    with pytest.raises(ValueError, match=r"simulate expects an mbvi.Scene, mbvi.System or mbvi.LagrangianSystem"):
        mbvi.simulate("scenes/pendulum.py", 1.0, 1e-3)


def test_each_run_of_a_system_says_what_its_solver_met() -> None:
    """A singular G M⁻¹ Gᵀ (a particle held by two collinear rods) warns in every run of the System, as in every
    run of its scene: the System's runs share its NumPy solver, whose warning was once per System."""
    import warnings

    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "p", anchor_a=(-1.0, 0.0, 0.0), name="r1"))
    s.add(mbvi.Rod("world", "p", anchor_a=(1.0, 0.0, 0.0), name="r2"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system = mbvi.assemble(s)
    for _ in range(2):
        with pytest.warns(mbvi.RedundantConstraintWarning, match="singular here"):
            mbvi.simulate(system, 0.01, 1e-3, integrator="explicit_euler")


def test_simulate_batch_names_what_it_takes() -> None:
    with pytest.raises(ValueError, match=r"simulate_batch expects an mbvi.Scene, mbvi.System or"):
        mbvi.simulate_batch("scenes/pendulum.py", 1.0, 1e-3, [])
