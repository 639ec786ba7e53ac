"""A scene means the same in any units: the same motion, balance, warnings and errors at 1 µm as at 1 m or 1 km.

A helper's hunt (scale invariance of the Scene path) found thresholds fixed in SI units: the scene's length scale
was its bodies' spread, 1 m for one body and never under a millimetre; the energy judgement's floor took
9.81 m/s² and the rigid bodies' column masses; the velocity fixed point, the settling test and the finite
differences of the compiled implicit step had floors of 1 m/s or 1 m. Each case below differed across units.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import mbvi


def _top(L: float) -> mbvi.Scene:
    """A heavy top on a ball joint, its arm L: times scale with √(L/g)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    tilt = 0.3
    axis = np.array([math.sin(tilt), 0.0, math.cos(tilt)])  # its symmetry axis, spun about
    scene.add(mbvi.RigidBody("top", mass=1.0, inertia=(0.3 * L**2, 0.3 * L**2, 0.2 * L**2), position=L * axis,
                             orientation=Rotation.from_euler("y", tilt),
                             angular_velocity=30.0 / math.sqrt(L) * axis))  # fmt: skip
    scene.add(mbvi.Spherical("world", "top", anchor=(0.0, 0.0, 0.0)))
    return scene


@pytest.mark.parametrize("L", [1e-6, 1e-3, 1e3])
def test_a_top_of_any_size_moves_alike_and_holds_its_pivot_alike(L: float) -> None:
    """A 1 µm top's pivot was held to 1e-12 m, 1e-6 of its arm (1e-11 of it at 1 m): the scale was a millimetre."""
    runs = {}
    for size in (1.0, L):
        tau = math.sqrt(size)  # √(L/g) up to a constant
        runs[size] = mbvi.simulate(_top(size), 200 * 2e-3 * tau, 2e-3 * tau, max_turn=math.inf)
    ref, run = runs[1.0], runs[L]
    assert np.max(np.abs(run.position("top") / L - ref.position("top"))) < 1e-9
    assert np.max(np.abs(run.rotation("top") - ref.rotation("top"))) < 1e-9
    assert np.max(np.abs(run.point("top", (0.0, 0.0, -L)))) < 1e-11 * L  # the pivot, in the body's frame
    assert run.info["refined_steps"] == ref.info["refined_steps"]


@pytest.mark.parametrize("unit", [1.0, 1e3, 1e6])
def test_a_spring_on_a_slider_finds_its_balance_in_any_unit(unit: float) -> None:
    """1 kg on a 20 N/m spring, stretched 0.49 m by its weight: in mm (unit = 1e3) the statics' steps were capped at
    1 mm and 200 iterations did not reach it ("there is no equilibrium")."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81 * unit))
    scene.add(mbvi.Particle("m", mass=1.0, position=(0.0, 0.0, -1.0 * unit)))
    scene.add(mbvi.Prismatic("world", "m", axis=(0.0, 0.0, 1.0)))
    scene.add(mbvi.Spring("world", "m", stiffness=20.0, rest_length=1.0 * unit))
    eq = mbvi.equilibrium(scene)
    assert eq.position("m")[2] / unit == pytest.approx(-1.0 - 9.81 / 20.0, rel=1e-12)
    assert eq.iterations <= 5


def _resonator(L: float, M: float, wdt: float) -> tuple[mbvi.Scene, float]:
    """A proof mass of 1e-12 M kg on a k = M N/m spring of rest length L µm (ω = 1e6 rad/s), swinging 1 %; dt."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("m", mass=1e-12 * M, position=(1e-6 * L * 1.01, 0.0, 0.0)))
    scene.add(mbvi.Prismatic("world", "m", axis=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Spring("world", "m", stiffness=M, rest_length=1e-6 * L))
    return scene, wdt / 1e6


@pytest.mark.parametrize(("L", "M"), [(1.0, 1.0), (1e6, 1e12)])
def test_a_resonator_at_a_step_it_cannot_resolve_warns_in_any_unit(L: float, M: float) -> None:
    """A 1 µm, 1e-12 kg resonator at ω dt = 1.99 kept a 99 % energy band without a word (judged against
    9.81 m/s² × 1e-12 kg × 1 m: 2e5 times its energy), where the same resonator in metres warned."""
    scene, dt = _resonator(L, M, 1.99)
    with pytest.warns(RuntimeWarning, match="strayed"):
        run = mbvi.simulate(scene, 200 * dt, dt)
    assert run.info["energy_error"] > 0.5
    scene, dt = _resonator(L, M, 0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run = mbvi.simulate(scene, 200 * dt, dt)
    assert run.info["energy_error"] < 0.01


@pytest.mark.parametrize("L", [1e-6, 1e-3, 1e3])
def test_a_damped_slider_moves_alike_in_any_unit(L: float) -> None:
    """A mass on a spring and a damper along a slider under gravity, shrunk to 1 µm: its velocity fixed point
    stopped at 1 m/s's tolerance, 8e-6 of the motion off the 1 m run's (1e-11 at 1 km)."""

    def scene(size: float) -> mbvi.Scene:
        s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
        s.add(mbvi.Particle("m", mass=1.0, position=(0.0, 0.0, -1.3 * size)))
        s.add(mbvi.Prismatic("world", "m", axis=(0.0, 0.0, 1.0)))
        s.add(mbvi.Spring("world", "m", stiffness=40.0 / size, rest_length=1.0 * size))
        s.add(mbvi.Damper("world", "m", damping=2.0 * math.sqrt(1.0 / size)))
        return s

    for integrator in ("verlet", "midpoint"):
        tau = math.sqrt(L)
        ref = mbvi.simulate(scene(1.0), 2.0, 1e-2, integrator)
        run = mbvi.simulate(scene(L), 2.0 * tau, 1e-2 * tau, integrator)
        assert np.max(np.abs(run.position("m") / L - ref.position("m"))) < 1e-12
        assert run.info["energy_error"] == pytest.approx(ref.info["energy_error"], rel=1e-6, abs=1e-12)


def test_a_micrometre_cantilever_bends_as_a_metre_one_in_the_compiled_step() -> None:
    """A steel cantilever under a sudden tip load, shrunk to 1 µm (the same steel: masses by L³, times by L) under
    midpoint: the compiled Newton's finite differences stepped 1e-7 m, a tenth of the beam, and failed; 19 of 20
    steps went to NumPy, and the tip was 0.13 % off the 1 m beam's."""

    def beam(L: float) -> mbvi.Scene:
        s = mbvi.Scene(gravity=None)
        s.add(mbvi.Beam("b", start=(0, 0, 0), end=(L, 0, 0), segments=10, density=7850.0, area=2e-4 * L**2,
                        youngs_modulus=2.1e11, second_moment=1.67e-9 * L**4, clamp="start"))  # fmt: skip
        s.add(mbvi.ExternalForce("b[10]", force=(0.0, 0.0, -10.0 * L**2)))  # (M L / T²)
        return s

    tips = {}
    for L in (1.0, 1e-6):
        run = mbvi.simulate(beam(L), 0.02 * L, 1e-3 * L, "midpoint")
        assert run.info.get("numpy_steps", 0) == 0
        tips[L] = run.position("b[10]")[:, 2] / L
    assert np.max(np.abs(tips[1e-6] - tips[1.0])) < 1e-6 * np.max(np.abs(tips[1.0]))


@pytest.mark.parametrize("L", [1.0, 1e-6])
def test_a_particle_off_its_ball_joint_is_refused_at_any_size(L: float) -> None:
    """0.05 % of the arm off the anchor: refused at 1 m, taken at 1 µm (an absolute nanometre) and pinned."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=1.0, position=(1.0005 * L, 0.0, 0.0)))
    scene.add(mbvi.Particle("q", mass=1.0, position=(0.0, 0.0, 0.0)))
    scene.add(mbvi.Spherical("world", "p", anchor=(L, 0.0, 0.0)))
    with pytest.raises(ValueError, match="Spherical 'world-p': initial positions violate the joint"):
        mbvi.assemble(scene)


def test_the_energy_unit_weighs_the_bodies_masses_under_the_scenes_gravity() -> None:
    """Σ m g L: a rigid body's column masses (kg m²) were counted beside its mass, 9.81 taken on the Moon."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -1.62))
    scene.add(mbvi.RigidBody("a", mass=1e4, inertia=(1e6, 2e6, 2.5e6), position=(0.0, 0.0, -300.0)))
    scene.add(mbvi.Particle("b", mass=2.0, position=(0.0, 0.0, -600.0)))
    scene.add(mbvi.Spherical("world", "a", anchor=(0.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("a", "b"))
    system = mbvi.assemble(scene)
    assert system.length_scale == pytest.approx(600.0)
    assert system.energy_unit == pytest.approx((1e4 + 2.0) * 1.62 * 600.0, rel=1e-12)


def test_a_spring_anchored_far_away_leaves_a_mechanism_its_own_size() -> None:
    """A slack spring from a world point 1 km away made a 1 m hinge's scale 1 km: its constraint held to 5e-10 m
    (5e-13 without the spring), and an explicit Euler run that gained 6.5 times its energy was judged against
    m g × 1 km, with no warning (a review of the change that widened the scale to the anchors)."""
    for far in (0.0, 1e3):
        scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
        scene.add(mbvi.RigidBody("link", mass=1.0, inertia=(0.02, 0.02, 0.01), position=(0.7, 0.0, -0.7)))
        scene.add(mbvi.Revolute("world", "link", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))
        if far:
            scene.add(mbvi.Spring("world", "link", stiffness=1e-3, anchor_a=(far, 0.0, 0.0)))
        assert mbvi.assemble(scene).length_scale == pytest.approx(0.7)
        assert mbvi.simulate(scene, 5.0, 1e-2).constraint_error.max() < 1e-12
        with pytest.warns(RuntimeWarning, match="not a solution"):
            mbvi.simulate(scene, 20.0, 1e-2, "explicit_euler")
