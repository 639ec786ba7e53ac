"""Bad input raises ValueError naming the element at fault; failed solves raise SolverError with context."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import mbvi


def _scene_with_bob() -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    return scene


def _add_twice(element_factory):
    scene = _scene_with_bob()
    scene.add(mbvi.Particle("other", mass=1.0, position=(2.0, 0.0, 0.0)))
    scene.add(element_factory())
    scene.add(element_factory())


def _simulate_with(*elements, **options):
    scene = _scene_with_bob()
    for e in elements:
        scene.add(e)
    return mbvi.simulate(scene, 0.1, 0.01, **options)


BAD_INPUTS = {
    "unknown body": (lambda: _scene_with_bob().add(mbvi.Rod("world", "ghost")), "ghost"),
    "duplicate body name": (lambda: _scene_with_bob().add(mbvi.Particle("bob", mass=2.0)), "bob"),
    "duplicate explicit joint name": (lambda: _add_twice(lambda: mbvi.Rod("bob", "other", name="link")), "link"),
    "non-positive mass": (lambda: mbvi.Particle("light", mass=0.0), "light"),
    "negative mass": (lambda: mbvi.RigidBody("neg", mass=-1.0, inertia=(1, 1, 1)), "neg"),
    "NaN position": (lambda: mbvi.Particle("lost", mass=1.0, position=(np.nan, 0.0, 0.0)), "lost"),
    "inf velocity": (lambda: mbvi.Particle("fast", mass=1.0, velocity=(0.0, np.inf, 0.0)), "fast"),
    "self-joint": (lambda: mbvi.Rod("bob", "bob"), "bob"),
    "inertia not positive definite": (lambda: mbvi.RigidBody("flat", mass=1.0, inertia=(1.0, 1.0, -0.5)), "flat"),
    "inertia breaks the triangle inequality": (
        lambda: mbvi.RigidBody("odd", mass=1.0, inertia=(1.0, 1.0, 2.5)),
        "odd",
    ),
    "rod length violates the initial positions": (
        lambda: _simulate_with(mbvi.Rod("world", "bob", length=2.0, name="tether")),
        "tether",
    ),
    "spherical joint away from a particle": (
        lambda: _simulate_with(mbvi.Spherical("world", "bob", anchor=(0.0, 0.0, 0.0), name="ball")),
        "ball",
    ),
    "unknown integrator": (lambda: _simulate_with(integrator="runge_kutta_17"), "runge_kutta_17"),
    "unknown integrator option": (
        lambda: _simulate_with(integrator="verlet", stepsize_control=True),
        "stepsize_control",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_raises_value_error_naming_the_element(case):
    action, culprit = BAD_INPUTS[case]
    with pytest.raises(ValueError, match=rf"\b{re.escape(culprit)}\b"):
        action()


def test_triangle_inequality_boundary():
    """J₃ = J₁ + J₂ is a flat (planar) body: rejected; just inside the bound is accepted."""
    with pytest.raises(ValueError, match="triangle"):
        mbvi.RigidBody("plate", mass=1.0, inertia=(1.0, 1.0, 2.0))
    body = mbvi.RigidBody("plate", mass=1.0, inertia=(1.0, 1.0, 1.99))
    np.testing.assert_allclose(sorted(body.principal_inertia), [1.0, 1.0, 1.99])


def _spun_up_rotor() -> mbvi.Scene:
    """A constant torque τ = 10 N m on a body with J = 1 spins it up as ω = τt."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("rotor", mass=1.0, inertia=(1.0, 1.0, 1.0)))
    scene.add(mbvi.ExternalTorque("rotor", torque=(0.0, 0.0, 10.0)))
    return scene


@pytest.mark.parametrize("max_turn", [0.1, math.inf])
# up to 5 rad a step with substepping off: ω stays exact, the energy is off by half, which simulate says
@pytest.mark.filterwarnings("ignore:integrator .* the energy balance:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:integrator .* with max_turn=inf turned rigid body:RuntimeWarning")
def test_a_rotor_spun_up_past_the_rattle_limit_keeps_stepping_on_its_lie_group(max_turn: float):
    """With h = 0.1 the rotation-matrix RATTLE has no step once h|ω| ≥ 1 (t ≈ 1 s); the Cayley update goes on.

    Kicks are exact for a constant torque about a fixed axis, so ω = τt at every
    step whatever the rotation per step (h|ω| reaches 5 at t = 5 s).
    """
    traj = mbvi.simulate(_spun_up_rotor(), 5.0, 0.1, max_turn=max_turn)
    np.testing.assert_allclose(traj.angular_velocity("rotor")[:, 2], 10.0 * traj.t, rtol=1e-12, atol=1e-9)
    R = traj.rotation("rotor")
    assert np.max(np.abs(np.einsum("nki,nkj->nij", R, R) - np.eye(3))) <= 1e-12
    # a step starting or ending with h|ω| > max_turn is taken in substeps, and so is every step after it
    assert traj.info["refined_steps"] == int(np.sum(0.1 * 10.0 * traj.t[1:] > max_turn))


def test_solver_error_on_a_rigid_body_spun_past_the_rattle_limit_under_midpoint():
    """The implicit midpoint rule still steps the rotation columns: no step exists once h|ω| ≳ 1."""
    h = 0.1
    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate(_spun_up_rotor(), 5.0, h, integrator="midpoint")
    err = info.value
    assert err.time == pytest.approx(1.0, abs=3 * h)
    assert err.step == round(err.time / h)
    message = str(err)
    assert "rotor" in message and "h|ω|" in message
    assert f"step {err.step}" in message
    assert err.suggested_dt is not None and err.suggested_dt < h
    partial = err.trajectory
    assert isinstance(partial, mbvi.Trajectory) and len(partial) > 1
    assert partial.t[-1] == pytest.approx(err.time)
    # what was kept is physics: ω grew with τ/J up to the failure (the midpoint knot velocity of the rotation
    # columns is ω only to O(h²|ω|²), so exactly linear only while h|ω| is small)
    omega_z = partial.angular_velocity("rotor")[:, 2]
    assert np.all(np.diff(omega_z) > 0) and np.isfinite(partial.q).all()
    np.testing.assert_allclose(omega_z[:3], 10.0 * partial.t[:3], rtol=1e-2, atol=1e-9)


def test_solver_error_from_a_starved_newton_solve():
    """maxiter=1 cannot bring SHAKE to 1e-12: the first step fails and says which joint."""
    scene = _scene_with_bob()
    scene.add(mbvi.Rod("world", "bob", name="tether"))
    with pytest.raises(mbvi.SolverError, match="tether") as info:
        mbvi.simulate(scene, 1.0, 0.1, "verlet", maxiter=1)
    assert info.value.time == 0.0 and info.value.step == 0


def test_an_unstable_explicit_step_names_the_stiffest_element_and_a_stable_dt() -> None:
    """A steel bar at dt = 1e-3 blows up under verlet; the error says which spring and what dt works."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(
        mbvi.Beam(
            "bar",
            start=(0, 0, 0),
            end=(1, 0, 0),
            segments=20,
            density=7800.0,
            area=1e-4,
            youngs_modulus=2e11,
            clamp="start",
        )
    )
    with pytest.raises(mbvi.SolverError, match=r"stiffest element 'bar:axial\[\d+\]'") as info:
        mbvi.simulate(scene, t_end=0.5, dt=1e-3)
    err = info.value
    assert err.culprit.startswith("bar:axial[") and err.trajectory is not None and len(err.trajectory.t) > 1
    # the suggested step is stable: the sag stays small and energy is conserved
    traj = mbvi.simulate(scene, t_end=200 * err.suggested_dt, dt=err.suggested_dt)
    assert np.abs(traj.strain("bar")).max() < 1e-6
    assert abs(traj.energy[-1] - traj.energy[0]) < 1e-9


@pytest.mark.parametrize("compiled", [True, False])
def test_a_stiff_springs_blow_up_is_not_blamed_on_a_light_drag(compiled: bool) -> None:
    """A 1e5 N/m spring at dt = 0.02 s (ω dt ≈ 9) blows up; the error names it. With a drag of c dt / m = 4e-5
    added, the blow-up threw the implicit drift's fixed point off first, and the error said "the damping is too
    stiff for this step", naming nothing."""
    from unittest import mock

    def scene(drag: float | None) -> mbvi.Scene:
        s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
        s.add(mbvi.Particle("a", mass=0.5, position=(0.0, 0.0, 0.0)))
        s.add(mbvi.Particle("b", mass=0.5, position=(0.0, 0.0, -1.0)))
        s.add(mbvi.Rod("a", "b"))
        s.add(mbvi.Spring("world", "b", stiffness=1e5, anchor_a=(0.0, 0.0, -1.01)))
        if drag is not None:
            s.add(mbvi.Drag("a", coefficient=drag))
        return s

    with mock.patch.object(mbvi.get_integrator("verlet"), "compiled", compiled):
        for drag in (None, 1e-3):
            with pytest.raises(mbvi.SolverError) as info:
                mbvi.simulate(scene(drag), 1.0, 0.02)
            assert info.value.culprit == "spring:world-b", (drag, str(info.value))
            assert "went unstable" in str(info.value) and "damping" not in str(info.value)


def test_a_failed_implicit_drift_names_the_force_that_jumps_with_the_velocity() -> None:
    """A Coulomb friction −τ sign(θ̇) written as a (t, state) torque on a torsion-spring wheel stops it at the
    closed form's −0.1 rad at dt = 1e-3; at dt = 1e-2 the drift's fixed point cannot settle at the stop, and the
    error said "the damping is too stiff", in a scene with no damping, naming nothing: it names the load now."""
    import math

    def friction(t, state):
        rate = state.joint_rate("h")
        return (0.0, 0.0, -0.6 * (1.0 if rate > 0 else (-1.0 if rate < 0 else 0.0)))

    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("w", mass=1.0, inertia=(0.4, 0.4, 0.5)))
    scene.add(mbvi.Revolute("world", "w", anchor=(0, 0, 0), axis=(0, 0, 1), name="h", initial_angle=1.0))
    scene.add(mbvi.TorsionSpring("h", stiffness=4.0))
    scene.add(mbvi.ExternalTorque("w", torque=friction, name="friction"))
    stops = mbvi.simulate(scene, 5.0, 1e-3).joint_angle("h")[-1]
    assert stops == pytest.approx(-(1.0 - 6 * 0.6 / 4.0), abs=1e-4)  # three half swings, each 2τ/k shorter
    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate(scene, 5.0, 1e-2)
    assert info.value.culprit == "friction"
    assert "that of 'friction'" in str(info.value) and "Coulomb friction" in str(info.value)
    assert info.value.time == pytest.approx(3 * math.pi / math.sqrt(4.0 / 0.5), abs=0.02)  # at the stop
