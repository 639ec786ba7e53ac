"""A bead on a spinning rod (a particle on a Prismatic joint of a rigid body) and the TorsionSpring's periodic law,
against closed forms (found by a physics review: the bead was refused; a spring wound past half a turn silently
followed a law with a torque jump)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import mbvi


def bead_on_a_spinning_rod(w0: float = 2.0, r0: float = 0.1) -> mbvi.Scene:
    """A heavy rotor (I_z = 1e6 kg m²) spinning at w0 about z; a 1 kg bead on a frictionless radial rod fixed in it,
    co-rotating at r0 with no radial speed: r(t) = r0 cosh(w0 t) while the rotor's spin barely changes."""
    s = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    s.add(mbvi.RigidBody("rotor", mass=1.0, inertia=(6e5, 6e5, 1e6), angular_velocity=(0.0, 0.0, w0)))
    s.add(mbvi.Revolute("world", "rotor", anchor=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0)))
    s.add(mbvi.Particle("bead", mass=1.0, position=(r0, 0.0, 0.0), velocity=(0.0, w0 * r0, 0.0)))
    s.add(mbvi.Prismatic("rotor", "bead", axis=(1.0, 0.0, 0.0), name="rod"))
    return s


def test_a_bead_slides_out_on_a_spinning_rod_as_r0_cosh_wt() -> None:
    w0, r0 = 2.0, 0.1
    traj = mbvi.simulate(bead_on_a_spinning_rod(w0, r0), 1.0, 1e-3)
    r = np.linalg.norm(traj.position("bead")[:, :2], axis=1)
    # the rotor slows by m r² w0 / I_z ~ 3e-7 relative: far below the tolerance
    np.testing.assert_allclose(r, r0 * np.cosh(w0 * traj.t), rtol=1e-5)
    lz = traj.angular_momentum[:, 2]
    assert np.ptp(lz) < 1e-12 * abs(lz[0])  # no torque about the axis
    assert np.max(traj.constraint_error) < 1e-10
    assert np.ptp(traj.energy) < 1e-5 * traj.energy[0]


def test_a_rigid_body_cannot_slide_on_a_particle() -> None:
    s = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    s.add(mbvi.Particle("a", mass=1.0, position=(0.0, 0.0, 0.0)))
    s.add(mbvi.RigidBody("r", mass=1.0, inertia=(1.0, 1.0, 1.0), position=(1.0, 0.0, 0.0)))
    with pytest.raises(ValueError, match=r"cannot slide on particle 'a'.*Prismatic\('r', 'a'\)"):
        s.add(mbvi.Prismatic("a", "r", axis=(1.0, 0.0, 0.0)))  # refused when added (was: by assembly)


def torsion_rotor(spin: float, k: float = 0.7) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    s.add(mbvi.RigidBody("link", mass=3.0, inertia=(0.4, 0.5, 0.7), angular_velocity=(0.0, 0.0, spin)))
    s.add(mbvi.Revolute("world", "link", axis=(0.0, 0.0, 1.0), name="h"))
    s.add(mbvi.TorsionSpring("h", stiffness=k))
    return s


def test_a_torsion_spring_within_half_a_turn_is_the_harmonic_oscillator() -> None:
    """ω = √(k/I_z) = 1 rad/s; a spin of 2.5 rad/s swings ±2.5 rad (< π): θ = 2.5 sin t, no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = mbvi.simulate(torsion_rotor(2.5), 8.0, 1e-3)
    np.testing.assert_allclose(traj.joint_angle("h"), 2.5 * np.sin(traj.t), atol=1e-4)  # O(dt²) phase


def test_a_torsion_spring_wound_past_half_a_turn_warns_naming_it() -> None:
    """A spin of 5 rad/s would swing ±5 rad: past the periodic law's cusp at ±π the joint goes on turning (it
    reached 36.9 rad); the run says so rather than pass it as the spring's motion."""
    with pytest.warns(RuntimeWarning, match=r"torsion-spring:h.*past half a turn"):
        traj = mbvi.simulate(torsion_rotor(5.0), 8.0, 1e-3)
    assert np.max(np.abs(traj.joint_angle("h"))) > math.pi


def test_a_wound_torsion_spring_is_named_by_a_batch_and_a_simulator_too() -> None:
    """simulate_batch's member and a Simulator's run of the same steps said nothing (each is judged as simulate
    judges its run); the Simulator names it once, and a member's is a warning naming the member."""
    scene = torsion_rotor(5.0)
    state = mbvi.assemble(scene).initial_state()
    with pytest.warns(RuntimeWarning, match=r"member 1 of 2: TorsionSpring 'torsion-spring:h'.*past half a turn"):
        batch = mbvi.simulate_batch(scene, 8.0, 1e-3, initial_states=[mbvi.State(state.q, 0.1 * state.v), state])
    assert np.max(np.abs(batch[0].joint_angle("h"))) < math.pi < np.max(np.abs(batch[1].joint_angle("h")))
    sim = mbvi.Simulator(scene, dt=1e-3)
    sim.step(8000)
    with warnings.catch_warnings(record=True) as given:
        warnings.simplefilter("always")
        sim.trajectory()
        sim.trajectory()
    assert len(given) == 1 and str(given[0].message).startswith("TorsionSpring 'torsion-spring:h': joint 'h' turned")


@pytest.mark.parametrize(("initial_angle", "rest_angle", "spin"), [(4.0, 4.0 - 2 * math.pi, 0.0), (-3.0, 3.0, 0.3)])
def test_a_joint_that_starts_a_turn_away_from_the_rest_angle_is_not_wound(initial_angle, rest_angle, spin) -> None:
    """The joint's angle counts turns from its initial_angle, the law reads θ − θ₀ in (−π, π]: a hinge assembled at
    4 rad with its spring at rest there (rest_angle 4 − 2π) never moved, and the run warned it had turned 6.28 rad
    from rest; one started 0.28 rad from rest across the cut at ±π, swinging 0.3 rad, was said to turn 6.3 rad."""
    s = mbvi.Scene(gravity=None)
    s.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0.5, 0.0, 0.0),
                         angular_velocity=(0.0, spin, 0.0), velocity=(0.0, 0.0, -0.5 * spin)))  # fmt: skip
    s.add(mbvi.Revolute("world", "arm", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="h",
                        initial_angle=initial_angle))  # fmt: skip
    s.add(mbvi.TorsionSpring("h", 3.0, rest_angle=rest_angle))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = mbvi.simulate(s, 2.0, 1e-3)
    assert abs(traj.joint_angle("h")[0] - initial_angle) < 1e-12
    assert np.max(np.abs(traj.joint_angle("h") - initial_angle)) < 0.7


def test_a_rest_angle_beyond_half_a_turn_is_refused() -> None:
    with pytest.raises(ValueError, match=r"rest_angle must be within \[−π, π\].*-2.28"):
        mbvi.TorsionSpring("h", stiffness=1.0, rest_angle=4.0)


@pytest.mark.parametrize("joint", ["revolute", "prismatic"])
@pytest.mark.parametrize("integrator", ["midpoint", "verlet", "yoshida4"])
def test_joint_damping_between_free_bodies_keeps_momentum(joint: str, integrator: str) -> None:
    """Two free bodies in zero gravity, spinning and sliding against JointDamping: an internal force, so linear and
    angular momentum stay as they were. midpoint evaluates the damping at (q₀ + q₁)/2, where rotation columns are
    not orthonormal: the torque pair ±½ τ × rᵢ no longer cancelled and |ΔL| grew as dt² (5.9e-7 over 5 s at
    dt = 1e-2 on the hinge, 3.6e-7 on the slider)."""
    s = mbvi.Scene(gravity=None)
    s.add(mbvi.RigidBody("a", mass=1.0, inertia=(0.1, 0.2, 0.25), angular_velocity=(1.0, -2.0, 0.5)))
    s.add(mbvi.RigidBody("b", mass=2.0, inertia=(0.3, 0.2, 0.15), position=(1.0, 0.0, 0.0),
                         velocity=(0.4, 0.1, 0.0), angular_velocity=(0.3, 2.0, -1.0)))  # fmt: skip
    if joint == "revolute":
        s.add(mbvi.Revolute("a", "b", anchor=(0.5, 0.0, 0.0), axis=(0.0, 0.0, 1.0), name="j"))
    else:
        s.add(mbvi.Prismatic("a", "b", axis=(1.0, 0.0, 0.0), name="j"))
    s.add(mbvi.JointDamping("j", coefficient=0.4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.ConstraintWarning)  # the velocities given are projected onto the joint
        traj = mbvi.simulate(s, 3.0, 1e-2, integrator)
    L, P = traj.angular_momentum, traj.momentum
    assert np.abs(L - L[0]).max() < 1e-10 * max(1.0, np.abs(L[0]).max())
    assert np.abs(P - P[0]).max() < 1e-10
    assert traj.energy[-1] < traj.energy[0] - 1e-3  # the damping did work: the test is not vacuous


@pytest.mark.parametrize("integrator", ["midpoint", "verlet", "yoshida4"])
def test_a_world_torque_changes_a_free_bodys_angular_momentum_by_exactly_its_impulse(integrator: str) -> None:
    """Euler's second law dL/dt = τ, whatever the body does: L(t) = L₀ + τ t. midpoint evaluates forces at
    (q₀ + q₁)/2, where the rotation columns are not orthonormal, and ½ τ × rᵢ there was a torque S τ: L missed by
    1.2e-4 of |τ| t after 1 s at dt = 1e-3 (a physics audit against this law; verlet and yoshida4 held 1e-14)."""
    from scipy.spatial.transform import Rotation

    tau = np.array([0.3, -0.2, 0.5])
    inertia = np.array([[0.02, 0.003, 0.0], [0.003, 0.03, 0.002], [0.0, 0.002, 0.04]])
    s = mbvi.Scene(gravity=None)
    turned = Rotation.from_euler("xyz", [0.3, 0.2, 0.1]).as_matrix()
    s.add(mbvi.RigidBody("b", mass=1.0, inertia=inertia, orientation=turned, angular_velocity=(3.0, -10.0, 20.0)))
    s.add(mbvi.ExternalTorque("b", torque=tau))
    traj = mbvi.simulate(s, 1.0, 1e-3, integrator)
    L = traj.angular_momentum
    assert np.abs(L - L[0] - np.outer(traj.t, tau)).max() < 1e-12
    assert np.abs(L[-1] - L[0]).max() > 0.1  # the torque turned L: the test is not vacuous
