"""LagrangianSystem: the seeds' systems in their own coordinates, against independent references.

References are written here by hand (the seed's Euler-B with Newton on the
momenta, the implicit midpoint rule, DOP853 on the equations of motion derived
on paper), never through mbvi's derivation.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import sympy as sp
from scene_loader import load_scene
from scipy.integrate import solve_ivp

import mbvi
from mbvi.lagrangian.integrators import INTEGRATORS

# ---------------------------------------------------------------- the double pendulum in its angles
M1 = M2 = L1 = L2 = 1.0
G = 9.81
Q0 = np.array([1.0, 0.5])


@pytest.fixture(scope="module")
def double() -> mbvi.LagrangianSystem:
    th1, th2, w1, w2 = sp.symbols("theta1 theta2 omega1 omega2")
    m1, m2, l1, l2, g = sp.symbols("m1 m2 l1 l2 g")
    T = (m1 + m2) * l1**2 * w1**2 / 2 + m2 * l2**2 * w2**2 / 2 + m2 * l1 * l2 * w1 * w2 * sp.cos(th1 - th2)
    V = -(m1 + m2) * g * l1 * sp.cos(th1) - m2 * g * l2 * sp.cos(th2)
    return mbvi.LagrangianSystem(
        T - V,
        coordinates=[th1, th2],
        velocities=[w1, w2],
        parameters={m1: M1, m2: M2, l1: L1, l2: L2, g: G},
        initial_state=mbvi.State(Q0, [0.0, 0.0]),
    )


def _mass(q: np.ndarray) -> np.ndarray:
    c = M2 * L1 * L2 * math.cos(q[0] - q[1])
    return np.array([[(M1 + M2) * L1**2, c], [c, M2 * L2**2]])


def _dV(q: np.ndarray) -> np.ndarray:
    return np.array([(M1 + M2) * G * L1 * math.sin(q[0]), M2 * G * L2 * math.sin(q[1])])


def _dH_dq(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """∂H/∂q for H = ½pᵀM(q)⁻¹p + V(q): −½ pᵀM⁻¹(∂M/∂qᵢ)M⁻¹p + ∂V/∂qᵢ."""
    u = np.linalg.solve(_mass(q), p)
    s = M2 * L1 * L2 * math.sin(q[0] - q[1])
    dM1 = np.array([[0.0, -s], [-s, 0.0]])
    return np.array([-0.5 * u @ dM1 @ u, 0.5 * u @ dM1 @ u]) + _dV(q)


def seed_euler_b(q: np.ndarray, p: np.ndarray, h: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The seed's scheme: p₊ = p − h ∂H/∂q(q, p₊) by Newton (finite-difference Jacobian), q₊ = q + h ∂H/∂p."""
    qs, ps = [q.copy()], [p.copy()]
    for _ in range(n):
        pn = p.copy()
        for _ in range(30):
            F = pn - p + h * _dH_dq(q, pn)
            J = np.empty((2, 2))
            for j in range(2):
                e = np.zeros(2)
                e[j] = 1e-6
                J[:, j] = (h * (_dH_dq(q, pn + e) - _dH_dq(q, pn - e)) / 2e-6) + e / 1e-6
            dp = np.linalg.solve(J, -F)
            pn = pn + dp
            if np.max(np.abs(dp)) < 1e-15:
                break
        q = q + h * np.linalg.solve(_mass(q), pn)
        p = pn
        qs.append(q)
        ps.append(p)
    return np.array(qs), np.array(ps)


def _double_rhs(t: float, y: np.ndarray) -> np.ndarray:
    """Equations of motion of the double pendulum derived on paper."""
    q, w = y[:2], y[2:]
    s = M2 * L1 * L2 * math.sin(q[0] - q[1])
    rhs = -_dV(q) - np.array([s * w[1] ** 2, -s * w[0] ** 2])
    return np.concatenate([w, np.linalg.solve(_mass(q), rhs)])


def test_euler_b_reproduces_the_seeds_scheme(double) -> None:
    h, n = 1e-3, 2000
    traj = mbvi.simulate(double, t_end=n * h, dt=h, integrator="symplectic_euler_b")
    q_ref, p_ref = seed_euler_b(Q0.copy(), np.zeros(2), h, n)
    assert np.max(np.abs(traj.q - q_ref)) <= 1e-8
    assert np.max(np.abs(traj.momentum - p_ref)) <= 1e-8
    # the knot velocities are the discrete Legendre transform of the momenta
    v_ref = np.array([np.linalg.solve(_mass(q), p) for q, p in zip(q_ref, p_ref, strict=True)])
    assert np.max(np.abs(traj.v - v_ref)) <= 1e-8


@pytest.mark.parametrize(("name", "order"), [("symplectic_euler_a", 1), ("symplectic_euler_b", 1), ("verlet", 2),
                                             ("midpoint", 2)])  # fmt: skip
def test_measured_order_against_dop853(double, name: str, order: int) -> None:
    t_end = 1.0
    ref = solve_ivp(_double_rhs, (0.0, t_end), [*Q0, 0.0, 0.0], method="DOP853", rtol=1e-12, atol=1e-12)
    q_end = ref.y[:2, -1]
    dts = [2.0**-k for k in range(5, 9)]
    errors = [np.max(np.abs(mbvi.simulate(double, t_end, dt, integrator=name).q[-1] - q_end)) for dt in dts]
    slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.25, f"{name}: measured order {slope:.2f}, declared {order} (errors {errors})"
    assert INTEGRATORS[name].order == order


@pytest.mark.slow
def test_energy_bounded_for_variational_and_growing_for_explicit_euler(double) -> None:
    dt, n = 1e-2, 10_000
    e0 = double.energy(Q0, np.zeros(2))
    for name in ("symplectic_euler_a", "symplectic_euler_b", "verlet", "midpoint"):
        err = mbvi.simulate(double, n * dt, dt, integrator=name).energy - e0
        first, second = np.max(np.abs(err[: n // 2])), np.max(np.abs(err[n // 2 :]))
        assert first < 2e-2 * abs(e0), f"{name}: energy band {first:.3g} J"
        assert second < 1.5 * first, f"{name}: energy drifts ({first:.3g} J then {second:.3g} J)"
        # no secular trend: the mean error of the last tenth is within the band of the first tenth
        assert abs(np.mean(err[-n // 10 :]) - np.mean(err[: n // 10])) < np.max(np.abs(err[: n // 10])) + 1e-12
    # explicit Euler's energy grows, past all it had to give in 20 s: said so
    with pytest.warns(RuntimeWarning, match="times the energy the run had to give"):
        run = mbvi.simulate(double, 2000 * dt, dt, integrator="explicit_euler")
    explicit = run.energy - e0
    assert explicit[-1] > 10 * first and np.all(np.diff(explicit[::200]) > 0)
    assert explicit.max() > e0 - run.potential.min()


# ---------------------------------------------------------------- the pendulum in its angle
def _pendulum(**kw) -> mbvi.LagrangianSystem:
    th, w = sp.symbols("theta omega")
    return mbvi.LagrangianSystem(w**2 / 2 + sp.cos(th), [th], [w], **kw)


def test_midpoint_equals_the_implicit_midpoint_rule() -> None:
    h, n = 0.1, 200
    traj = mbvi.simulate(_pendulum(), n * h, h, integrator="midpoint", initial_state=mbvi.State([math.pi / 4], [0.0]))
    z = np.array([math.pi / 4, 0.0])  # (q, p), m = l = g = 1: q' = p, p' = −sin q
    for k in range(n):
        z1 = z.copy()
        for _ in range(50):  # Newton on z₁ − z − h f((z + z₁)/2) = 0
            zm = 0.5 * (z + z1)
            F = z1 - z - h * np.array([zm[1], -math.sin(zm[0])])
            J = np.eye(2) - 0.5 * h * np.array([[0.0, 1.0], [-math.cos(zm[0]), 0.0]])
            dz = np.linalg.solve(J, -F)
            z1 = z1 + dz
            if np.max(np.abs(dz)) < 1e-16:
                break
        z = z1
        assert abs(traj.q[k + 1, 0] - z[0]) <= 1e-10 and abs(traj.momentum[k + 1, 0] - z[1]) <= 1e-10


# ---------------------------------------------------------------- Hirai's pendulum in Cartesian x, y
HM, HL, HG = 0.01, 2.0, 9.8


def hirai_cartesian(c: float = 0.0, tau: float = 0.0, theta0: float = 1.0) -> mbvi.LagrangianSystem:
    """Bob at (x, y) = (l sin θ, −l cos θ) on a rod; viscous friction torque −cθ̇ and torque τ as forces on x, y."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    L = HM * (vx**2 + vy**2) / 2 - HM * HG * y
    Q = [-c * vx / HL**2 - tau * y / HL**2, -c * vy / HL**2 + tau * x / HL**2]
    q0 = [HL * math.sin(theta0), -HL * math.cos(theta0)]
    return mbvi.LagrangianSystem(L, [x, y], [vx, vy], constraints=[x**2 + y**2 - HL**2], force=Q,
                                 initial_state=mbvi.State(q0, [0.0, 0.0]))  # fmt: skip


def _theta_reference(c: float, t: np.ndarray, theta0: float = 1.0) -> np.ndarray:
    def rhs(_t, y):
        return [y[1], (-HM * HG * HL * math.sin(y[0]) - c * y[1]) / (HM * HL**2)]

    return solve_ivp(rhs, (0, t[-1]), [theta0, 0.0], method="DOP853", t_eval=t, rtol=1e-12, atol=1e-12).y[0]


@pytest.mark.parametrize("c", [0.0, 0.01])
@pytest.mark.parametrize("name", ["verlet", "midpoint", "symplectic_euler_b"])
def test_hirai_cartesian_pendulum_keeps_its_rod_and_follows_theta(name: str, c: float) -> None:
    dt = 1e-2
    traj = mbvi.simulate(hirai_cartesian(c), 5.0, dt, integrator=name)
    assert traj.constraint_error.max() <= 1e-10
    theta = np.arctan2(traj.q[:, 0], -traj.q[:, 1])
    err = np.max(np.abs(theta - _theta_reference(c, traj.t)))
    assert err <= (2.0 * dt if name == "symplectic_euler_b" else 10.0 * dt**2), err
    if c:
        assert traj.energy[-1] < 0.8 * traj.energy[0] - 0.2 * traj.potential.min()


def test_csm_runs_and_stays_within_its_tolerance() -> None:
    traj = mbvi.simulate(hirai_cartesian(0.01), 5.0, 1e-2, integrator="csm", alpha=10.0, rtol=1e-9, atol=1e-11)
    assert traj.constraint_error.max() <= 1e-6
    theta = np.arctan2(traj.q[:, 0], -traj.q[:, 1])
    assert np.max(np.abs(theta - _theta_reference(0.01, traj.t))) <= 1e-5


def test_damping_does_not_depend_on_the_step() -> None:
    system = hirai_cartesian(0.02)
    coarse = mbvi.simulate(system, 4.0, 2.0**-5, integrator="midpoint")
    fine = mbvi.simulate(system, 4.0, 2.0**-10, integrator="midpoint", save_every=32)
    np.testing.assert_allclose(coarse.t, fine.t)
    dissipated = fine.energy[0] - fine.energy[-1]
    assert dissipated > 0.1 * abs(fine.energy[0] - fine.potential.min())
    assert np.max(np.abs(coarse.energy - fine.energy)) <= 2e-3 * dissipated


@pytest.mark.filterwarnings("ignore:.*'explicit_euler' at dt.*not accurate:RuntimeWarning")  # (its 11 % gain: said)
def test_explicit_and_implicit_euler_bracket_the_energy() -> None:
    system = hirai_cartesian(0.0)
    up = mbvi.simulate(system, 2.0, 1e-2, integrator="explicit_euler")
    down = mbvi.simulate(system, 2.0, 1e-2, integrator="implicit_euler")
    assert up.energy[-1] > up.energy[0] and down.energy[-1] < down.energy[0]
    assert up.constraint_error.max() <= 1e-10 and down.constraint_error.max() <= 1e-10


# ---------------------------------------------------------------- statics
def test_statics_of_the_pendulum_with_a_torque() -> None:
    th, w = sp.symbols("theta omega")
    m, l, g, tau = 0.01, 2.0, 9.8, 0.1
    system = mbvi.LagrangianSystem(m * l**2 * w**2 / 2 - m * g * l * (1 - sp.cos(th)), [th], [w], force=[tau])
    eq = mbvi.equilibrium(system)
    assert eq.q[0] == pytest.approx(0.5354, abs=5e-5)  # the seed's values (U zero at the bottom, W = τθ)
    assert eq.potential == pytest.approx(-0.0261, abs=5e-5)
    assert eq.stable and eq.q[0] == pytest.approx(math.asin(tau / (m * g * l)), abs=1e-12)
    # the same equilibrium in Cartesian coordinates, with the rod's multiplier
    cart = mbvi.equilibrium(hirai_cartesian(tau=tau), initial_state=np.array([0.5, -1.9]))
    assert math.atan2(cart.q[0], -cart.q[1]) == pytest.approx(eq.q[0], abs=1e-10)
    tension = 2 * HL * cart.multipliers[0]  # λ·∂g/∂r, g = r² − l²: the rod force along the radius
    assert tension == pytest.approx(HM * HG * math.cos(eq.q[0]) + 0.0, rel=1e-9)
    assert cart.stable


# ---------------------------------------------------------------- one scene, two coordinate choices
def test_double_pendulum_scene_in_joint_and_in_maximal_coordinates() -> None:
    scene = load_scene("double_pendulum").build(theta1=1.0, theta2=0.5)
    joint = mbvi.LagrangianSystem.from_scene(scene)
    assert joint.coordinate_names == ["theta_world_bob1", "theta_bob1_bob2"]
    np.testing.assert_allclose(joint.initial_state().q, [1.0, 0.5], atol=1e-14)
    diffs = []
    for dt in (2e-3, 1e-3):
        maximal = mbvi.simulate(scene, 1.0, dt, integrator="verlet")
        minimal = mbvi.simulate(joint, 1.0, dt, integrator="verlet")
        assert minimal.energy[0] == pytest.approx(maximal.energy[0], rel=1e-12)
        diffs.append(max(np.max(np.abs(maximal.position(b) - joint.body_position(b, minimal.q))) for b in
                         ("bob1", "bob2")))  # fmt: skip
    assert diffs[1] < 1e-5
    assert 3.0 < diffs[0] / diffs[1] < 5.0  # both second order: they agree to O(dt²)


def test_a_rod_in_3d_is_charted_along_its_swing_not_through_a_pole() -> None:
    """A spherical pendulum swung at 6 m/s in the x–z plane (0.3 m/s across it): the chart's poles, fixed from
    world axes, lay in the plane of the swing, and the bob passed near one — 0.069 m off a fine reference at
    dt = 1e-3 where maximal coordinates are 1.3e-4 off. The poles now stand normal to the initial swing: the
    joint coordinates are as accurate as the maximal ones, and second order."""
    th, speed = 0.5, 6.0
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(math.sin(th), 0.0, -math.cos(th)),
                            velocity=(-speed * math.cos(th), 0.3, -speed * math.sin(th))))  # fmt: skip
    scene.add(mbvi.Rod("world", "bob"))
    reference = mbvi.simulate(scene, 3.0, 1e-4, save_every=100).position("bob")
    joint = mbvi.LagrangianSystem.from_scene(scene)
    errors = []
    for dt in (1e-3, 5e-4):
        every = round(1e-2 / dt)
        maximal = mbvi.simulate(scene, 3.0, dt, save_every=every).position("bob")
        minimal = joint.body_position("bob", mbvi.simulate(joint, 3.0, dt, save_every=every).q)
        errors.append(np.max(np.abs(minimal - reference)))
        assert errors[-1] < 2.0 * np.max(np.abs(maximal - reference))
    assert 3.0 < errors[0] / errors[1] < 5.0


def _bob_on_a_rod(*forces) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(math.sin(0.5), 0.0, -math.cos(0.5))))
    scene.add(mbvi.Rod("world", "bob"))
    for f in forces:
        scene.add(f)
    return scene


@pytest.mark.parametrize("pull", ["spring off the plane", "gravity force off the plane", "gravity force twice"])
def test_joint_coordinates_keep_every_force_of_the_scene(pull: str) -> None:
    """A spring to a point off the rod's plane, or a Gravity force across it, pulls the bob out of the plane: the
    joint coordinates took the motion as planar (one angle) and kept y = 0 where the bob swung out 0.97 m. A
    Gravity force equal to the scene's was dropped (the maximal assembly applies both: twice the field)."""
    force = {
        "spring off the plane": mbvi.Spring("world", "bob", stiffness=20.0, rest_length=0.0, anchor_a=(0, 1, 0)),
        "gravity force off the plane": mbvi.Gravity((0.0, 3.0, 0.0)),
        "gravity force twice": mbvi.Gravity((0.0, 0.0, -9.81)),
    }[pull]
    scene = _bob_on_a_rod(force)
    joint = mbvi.LagrangianSystem.from_scene(scene)
    planar = pull == "gravity force twice"
    assert len(joint.coordinates) == (1 if planar else 2)
    maximal = mbvi.simulate(scene, 2.0, 1e-3, integrator="verlet")
    minimal = mbvi.simulate(joint, 2.0, 1e-3, integrator="verlet")
    assert minimal.potential[0] == pytest.approx(maximal.potential[0], rel=1e-12)
    gap = np.max(np.abs(maximal.position("bob") - joint.body_position("bob", minimal.q)))
    assert gap < 1e-4  # both second order: they agree to O(dt²) (the lost motion was 0.97 m, 0.85 m)
    if not planar:
        assert np.abs(maximal.position("bob")[:, 1]).max() > 0.4  # it does leave the plane


def test_rigid_pendulum_on_a_revolute_joint_in_joint_coordinates() -> None:
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.RigidBody("link", mass=2.0, inertia=(0.2, 0.3, 0.15), position=(0.5, 0, 0)))
    scene.add(mbvi.Revolute("world", "link", anchor=(0, 0, 0), axis=(0, 1, 0)))
    joint = mbvi.LagrangianSystem.from_scene(scene)
    # physical pendulum: I_O θ̈ = −m g d sin(...) with I_O = I_yy + m d²
    th, w = joint.coordinates[0], joint.velocities[0]
    expected = (0.3 + 2.0 * 0.25) * w**2 / 2
    assert float(sp.simplify(joint.lagrangian_expr.subs(th, 0) - expected)) == pytest.approx(0.0, abs=1e-12)
    a = mbvi.simulate(scene, 1.0, 1e-3, integrator="verlet")
    b = mbvi.simulate(joint, 1.0, 1e-3, integrator="verlet")
    assert np.max(np.abs(a.position("link") - joint.body_position("link", b.q))) < 1e-4


def test_from_scene_refuses_what_it_does_not_support() -> None:
    scene = mbvi.Scene()
    scene.add(mbvi.RigidBody("box", mass=1.0, inertia=(1, 1, 1)))
    with pytest.raises(ValueError, match="box"):
        mbvi.LagrangianSystem.from_scene(scene)
    loop = load_scene("four_bar").build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="loop"):
            mbvi.LagrangianSystem.from_scene(loop)


# ---------------------------------------------------------------- output, dispatch and errors
def test_trajectory_holds_generalized_momentum_and_saves(double, tmp_path) -> None:
    traj = mbvi.simulate(double, 0.1, 1e-2, integrator="verlet")
    assert traj.momentum.shape == traj.q.shape == (11, 2)
    np.testing.assert_allclose(traj.momentum, double.momentum(traj.q, traj.v), atol=1e-12)
    np.testing.assert_allclose(traj.energy, traj.kinetic + traj.potential)
    assert traj.coordinate("theta2").shape == (11,)
    traj.save(tmp_path / "run.npz")
    back = mbvi.Trajectory.load(tmp_path / "run.npz")
    np.testing.assert_array_equal(back.q, traj.q)
    np.testing.assert_array_equal(back.momentum, traj.momentum)
    assert back.coordinate_names == ["theta1", "theta2"]


def test_every_integrator_name_runs_a_lagrangian_system(double) -> None:
    for name in ("explicit_euler", "implicit_euler", "symplectic_euler_a", "symplectic_euler_b", "verlet",
                 "midpoint", "csm"):  # fmt: skip
        assert name in mbvi.integrators()
        with warnings.catch_warnings():  # five steps from rest: Euler's energy error is a fifth of the motion
            warnings.simplefilter("ignore", RuntimeWarning)
            traj = mbvi.simulate(double, 0.05, 1e-2, integrator=name)
        assert np.isfinite(traj.q).all() and traj.info["integrator"] == name


def test_errors_are_value_errors_naming_the_culprit() -> None:
    th, w, k, zeta = sp.symbols("theta omega k zeta")
    with pytest.raises(ValueError, match=r"1 coordinates .* 2 velocities"):
        mbvi.LagrangianSystem(w**2 / 2, [th], [w, k])
    with pytest.raises(ValueError, match="zeta"):
        mbvi.LagrangianSystem(w**2 / 2 - zeta * th**2, [th], [w])
    with pytest.raises(ValueError, match="k"):
        mbvi.LagrangianSystem(w**2 / 2, [th], [w], force=[-k * w])
    with pytest.raises(ValueError, match="twice"):
        mbvi.LagrangianSystem(w**2 / 2, [th], [th])
    with pytest.raises(ValueError, match="positive definite"):
        mbvi.LagrangianSystem(-(w**2) / 2 + sp.cos(th), [th], [w])
    with pytest.raises(ValueError, match="positive definite"):
        mbvi.LagrangianSystem(sp.cos(th) * w**2 / 2, [th], [w], initial_state=mbvi.State([2.0], [0.0]))
    ok = mbvi.LagrangianSystem(w**2 / 2 - k * th**2 / 2, [th], [w], parameters={"k": 4.0})
    with pytest.raises(ValueError, match="initial state"):
        mbvi.simulate(ok, 1.0, 0.1)
    with pytest.raises(ValueError, match="handle Lagrangian systems"):
        mbvi.simulate(ok, 1.0, 0.1, integrator="leapfrog", initial_state=mbvi.State([1.0], [0.0]))
    x, y, vx, vy = sp.symbols("x y vx vy")
    rod = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 + y * 0, [x, y], [vx, vy], constraints=[x**2 + y**2 - 1])
    with pytest.raises(ValueError, match="constraint 0"):
        mbvi.simulate(rod, 1.0, 0.1, initial_state=mbvi.State([1.0, 1.0], [0.0, 0.0]))
    with pytest.warns(mbvi.ConstraintWarning):
        traj = mbvi.simulate(rod, 0.1, 0.1, initial_state=mbvi.State([1.0, 0.0], [1.0, 1.0]))
    np.testing.assert_allclose(traj.v[0], [0.0, 1.0], atol=1e-14)


def test_import_mbvi_does_not_import_sympy() -> None:
    import subprocess
    import sys

    code = "import sys, mbvi; mbvi.LagrangianSystem; mbvi.simulate; assert 'sympy' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_plugin_integrator_declaring_lagrangian_runs_a_lagrangian_system() -> None:
    """A plugin written against mbvi.Integrator runs a LagrangianSystem once it declares "lagrangian"."""

    class SemiImplicitEuler(mbvi.Integrator):  # v₁ = v + h M⁻¹ ∂L/∂q(q, v), q₁ = q + h v₁ (for L = ½ vᵀMv − V(q))
        name = "semi_implicit_euler_test"
        order = 1
        handles = frozenset({"constraints", "lagrangian"})

        def step(self, state, t):
            _, Lq, _, _, _, Lvv = self.system.point(state.q, state.v, t)
            v1 = state.v + self.dt * np.linalg.solve(Lvv, Lq)
            return mbvi.State(state.q + self.dt * v1, v1)

    h, T = 1e-3, 2.0
    start = mbvi.State([math.pi / 4], [0.0])
    traj = mbvi.simulate(_pendulum(), T, h, SemiImplicitEuler, initial_state=start)
    ref = mbvi.simulate(_pendulum(), T, h, "symplectic_euler_a", initial_state=start)
    assert np.max(np.abs(traj.q - ref.q)) < 5e-3  # both first order, against each other
    np.testing.assert_allclose(traj.momentum[:, 0], traj.v[:, 0], rtol=1e-12)  # p = ∂L/∂v = v here

    class SceneOnly(mbvi.Integrator):
        name = "scene_only_test"

        def step(self, state, t):
            return state

    with pytest.raises(ValueError, match="Lagrangian"):
        mbvi.simulate(_pendulum(), 0.1, h, SceneOnly, initial_state=start)


def test_an_undefined_function_or_a_complex_lagrangian_is_a_value_error() -> None:
    """sympy's own errors (PrintMethodNotImplementedError, TypeError) reached the user before."""
    x, vx = sp.symbols("x vx")
    with pytest.raises(ValueError, match=r"undefined function.* f"):
        mbvi.LagrangianSystem(vx**2 / 2 - sp.Function("f")(x), [x], [vx])
    with pytest.raises(ValueError, match="not real"):
        mbvi.LagrangianSystem(vx**2 / 2 + sp.I * x, [x], [vx])
    with pytest.raises(ValueError, match=r"undefined function.* g"):
        mbvi.LagrangianSystem(vx**2 / 2, [x], [vx], constraints=[sp.Function("g")(x)])
    # one given a NumPy implementation too (the docs once advised it): L's second derivatives need its formula
    from sympy.utilities.lambdify import implemented_function

    U = implemented_function("U", lambda q: q**4 / 4 - q**2)
    with pytest.raises(ValueError, match=r"undefined function.* U: write them out") as err:
        mbvi.LagrangianSystem(vx**2 / 2 - U(x), [x], [vx])
    assert "implemented_function" not in str(err.value)
    start = mbvi.State([1.0], [0.0])
    written_out = mbvi.LagrangianSystem(vx**2 / 2 - (x**4 / 4 - x**2), [x], [vx], initial_state=start)
    assert mbvi.simulate(written_out, 0.1, 1e-2).energy[0] == pytest.approx(-0.75, rel=1e-12)  # U(1) = 1/4 − 1


def test_coordinates_are_read_by_the_symbols_the_system_was_built_from() -> None:
    """view.coordinate(theta), with the Symbol of the Lagrangian, was "unknown coordinate theta; the coordinates
    are ['theta']"; so were a trajectory's and an equilibrium's."""
    import sympy as sp

    theta, omega = sp.symbols("theta omega")
    system = mbvi.LagrangianSystem(omega**2 / 2 + 9.81 * sp.cos(theta), [theta], [omega],
                                   initial_state=mbvi.State([0.5], [0.0]))  # fmt: skip
    sim = mbvi.Simulator(system, 1e-2)
    sim.step(10)
    assert sim.view.coordinate(theta) == sim.view.coordinate("theta") == sim.state.q[0]
    traj = sim.trajectory()
    np.testing.assert_array_equal(traj.coordinate(theta), traj.q[:, 0])
    assert mbvi.equilibrium(system).coordinate(theta) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="unknown coordinate 'phi'"):
        traj.coordinate(sp.Symbol("phi"))


def _final_angles(system: mbvi.LagrangianSystem) -> np.ndarray:
    """A module-level function: what a process pool pickles by name."""
    return mbvi.simulate(system, 0.5, 1e-3).q[-1]


def test_a_lagrangian_system_pickles_and_runs_the_same_in_another_process(double) -> None:
    """pickle.dumps raised "Can't pickle local object '_arrays.<locals>.wrapped'" (the lambdified forms), so a
    LagrangianSystem could not go to a multiprocessing pool or a Dask process scheduler. Its sympy expressions
    travel; the numerical forms are made again where it lands, and step for step give the same trajectory."""
    import multiprocessing
    import pickle

    copy = pickle.loads(pickle.dumps(double))
    assert repr(copy) == repr(double) and copy.parameters == double.parameters
    here = mbvi.simulate(double, 0.5, 1e-3)
    np.testing.assert_array_equal(mbvi.simulate(copy, 0.5, 1e-3).q, here.q)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        (there,) = pool.map(_final_angles, [double])
    np.testing.assert_array_equal(there, here.q[-1])
    # a system from a scene keeps its bodies' kinematics
    scene = load_scene("double_pendulum").build()
    from_scene = mbvi.LagrangianSystem.from_scene(scene)
    copied = pickle.loads(pickle.dumps(from_scene))
    q0 = from_scene.initial_state().q
    for name in from_scene.body_names:
        np.testing.assert_array_equal(copied.body_position(name, q0), from_scene.body_position(name, q0))
