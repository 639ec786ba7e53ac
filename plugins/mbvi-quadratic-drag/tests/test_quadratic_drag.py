"""Tests of the mbvi-quadratic-drag plugin: registration, derivatives, and the physics it predicts.

Run with ``pytest plugins/mbvi-quadratic-drag`` after ``pip install -e plugins/mbvi-quadratic-drag``.
"""

from __future__ import annotations

import importlib.metadata as md

import numpy as np
import pytest
from mbvi_quadratic_drag import QuadraticDrag, QuadraticDragLaw, terminal_speed
from scipy.spatial.transform import Rotation

import mbvi

G = 9.81  # m/s²


def falling_ball(mass: float = 2.0, coefficient: float = 0.5, drag: bool = True) -> mbvi.Scene:
    """A particle released from rest at 100 m, with or without quadratic drag."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("ball", mass=mass, position=(0.0, 0.0, 100.0)))
    if drag:
        scene.add(QuadraticDrag("ball", coefficient=coefficient))
    return scene


def falling_speed(t: np.ndarray, mass: float, coefficient: float) -> np.ndarray:
    """Closed form from rest: v(t) = v_t tanh(g t / v_t), v_t = √(m g / c), m/s (downwards)."""
    vt = terminal_speed(mass, coefficient, G)
    return vt * np.tanh(G * np.asarray(t) / vt)


def slope(dts, errors) -> float:
    """Least-squares slope of log(error) against log(dt)."""
    return float(np.polyfit(np.log(dts), np.log(errors), 1)[0])


def random_scene(seed: int) -> tuple[mbvi.System, np.ndarray, np.ndarray]:
    """Particles and rigid bodies with several off-centre drag points; a random state (q, v)."""
    rng = np.random.default_rng(seed)
    scene = mbvi.Scene(gravity=None)
    for i in range(2):
        scene.add(mbvi.Particle(f"p{i}", mass=rng.uniform(0.5, 2.0), position=rng.normal(size=3)))
        scene.add(QuadraticDrag(f"p{i}", coefficient=rng.uniform(0.1, 1.0)))
    for i in range(2):
        scene.add(
            mbvi.RigidBody(
                f"b{i}",
                mass=rng.uniform(0.5, 2.0),
                inertia=(0.3, 0.4, 0.5),
                position=rng.normal(size=3),
                orientation=Rotation.random(random_state=seed + i),
            )
        )
        for _ in range(2):  # several drag points on each body, off the centre of mass
            scene.add(QuadraticDrag(f"b{i}", coefficient=rng.uniform(0.1, 1.0), anchor=rng.normal(scale=0.3, size=3)))
    system = mbvi.assemble(scene)
    q = system.layout.q0 + 0.05 * rng.normal(size=system.nq)
    v = rng.normal(size=system.nq)
    return system, q, v


def test_registered_through_the_entry_point():
    eps = {ep.name: ep.value for ep in md.entry_points(group="mbvi")}
    assert eps.get("quadratic_drag") == "mbvi_quadratic_drag"
    assert "quadratic_drag" in mbvi.force_laws()
    assert mbvi.get_force_law("quadratic_drag") is QuadraticDragLaw
    assert QuadraticDragLaw.element is QuadraticDrag
    assert QuadraticDragLaw.has_force and QuadraticDragLaw.velocity_dependent and not QuadraticDragLaw.has_potential


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_analytic_jacobians_pass_the_finite_difference_check(seed):
    system, q, v = random_scene(seed)
    (law,) = [law for law in system.laws if isinstance(law, QuadraticDragLaw)]
    assert len(law.elements) == 6  # every instance in one law object
    errors = mbvi.check_force_law(law, q, v, t=0.3, rtol=1e-6)
    assert set(errors) == {"force_dq", "force_dv"}
    # the check must be able to fail: a Jacobian off by 1 % is caught
    _, dv = law.force_jacobians(q, v, 0.3)
    with pytest.raises(AssertionError, match="relative error"):
        mbvi.check_jacobian(lambda x: law.force(q, x, 0.3), 1.01 * dv, v, rtol=1e-6)


def test_force_is_minus_c_speed_times_velocity_at_each_point():
    """F·v = −Σ c |v_P|³, with v_P from the trajectory's point positions (finite differences of q)."""
    system, q, v = random_scene(3)
    (law,) = [law for law in system.laws if isinstance(law, QuadraticDragLaw)]
    eps = 1e-6
    traj = mbvi.Trajectory.from_states(system, np.array([0.0, eps]), np.stack([q, q + eps * v]), np.stack([v, v]))
    power = 0.0
    for e in law.elements:
        x = traj.point(e.body, e.anchor)
        vp = (x[1] - x[0]) / eps
        power -= e.coefficient * np.linalg.norm(vp) ** 3
    assert law.force(q, v, 0.0) @ v == pytest.approx(power, rel=1e-6)
    assert system.force(q, np.zeros_like(v), 0.0) == pytest.approx(np.zeros(system.nq))


def test_falling_ball_reaches_terminal_speed():
    m, c = 2.0, 0.5
    vt = terminal_speed(m, c, G)
    with_drag = mbvi.simulate(falling_ball(m, c), t_end=6.0, dt=1e-2)
    free_fall = mbvi.simulate(falling_ball(m, c, drag=False), t_end=6.0, dt=1e-2)
    vz = with_drag.velocity("ball")[:, 2]
    # the plugin changes the simulation: free fall would be at −g t = −58.9 m/s
    assert free_fall.velocity("ball")[-1, 2] == pytest.approx(-G * 6.0, rel=1e-12)
    assert vz[-1] == pytest.approx(-vt, rel=1e-5)  # tanh(6 g / v_t) = 1 − 1e-8
    assert np.max(np.abs(vz + falling_speed(with_drag.t, m, c))) <= 1e-4 * vt
    # the speed never overshoots the terminal speed, and energy only decreases
    assert np.all(-vz <= vt * (1 + 1e-9))
    assert np.all(np.diff(with_drag.energy) <= 1e-12)


@pytest.mark.parametrize(("integrator", "order"), [("verlet", 2), ("midpoint", 2), ("implicit_euler", 1)])
def test_falling_ball_converges_at_the_declared_order(integrator, order):
    """The implicit integrators use the analytic ∂F/∂v; each converges to the tanh law at its order."""
    m, c, t_end = 2.0, 0.5, 2.0
    exact = falling_speed(t_end, m, c)
    dts = 2.0 ** -np.arange(4, 8)
    errors = [
        abs(mbvi.simulate(falling_ball(m, c), t_end, dt, integrator).velocity("ball")[-1, 2] + exact) for dt in dts
    ]
    assert mbvi.get_integrator(integrator).order == order
    assert slope(dts, errors) == pytest.approx(order, abs=0.25)


def test_off_centre_drag_brakes_a_hinged_disk():
    """A thick disk on a hinge with drag at its rim: J ω̇ = −c r³ ω², so ω(t) = ω₀ / (1 + c r³ ω₀ t / J)."""
    m, radius, thickness, c, w0 = 2.0, 0.5, 0.2, 0.8, 6.0
    J = 0.5 * m * radius**2
    J_side = m * (3 * radius**2 + thickness**2) / 12
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("disk", mass=m, inertia=(J_side, J_side, J), angular_velocity=(0.0, 0.0, w0)))
    scene.add(mbvi.Revolute("world", "disk", anchor=(0, 0, 0), axis=(0, 0, 1)))
    scene.add(QuadraticDrag("disk", coefficient=c, anchor=(radius, 0.0, 0.0)))
    traj = mbvi.simulate(scene, t_end=3.0, dt=1e-3)
    w = traj.angular_velocity("disk")[:, 2]
    exact = w0 / (1.0 + c * radius**3 * w0 * traj.t / J)
    assert np.max(np.abs(w - exact)) <= 1e-5 * w0
    assert np.max(np.abs(traj.position("disk"))) <= 1e-12  # the hinge holds the centre


@pytest.mark.parametrize(
    "bad", [{"coefficient": -1.0}, {"coefficient": np.nan}, {"coefficient": 1.0, "anchor": (0, 1)}]
)
def test_bad_input_is_rejected(bad):
    with pytest.raises(ValueError, match="QuadraticDrag"):
        QuadraticDrag("ball", **bad)


def test_unknown_body_is_rejected():
    scene = falling_ball(drag=False)
    with pytest.raises(ValueError, match="unknown body 'nope'"):
        scene.add(QuadraticDrag("nope", coefficient=1.0))
