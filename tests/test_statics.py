"""Statics: the minimum of U − W under the constraints, its multipliers and its stability.

Checked against closed forms (a pendulum under a steady load, the discrete and the continuous
catenary), against an independent constrained minimization (scipy SLSQP in the node positions),
against simulation (an equilibrium is a rest state), and on the hard cases: singular Hessians
(unloaded strings, slack chains) and scenes without an equilibrium.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scene_loader import load_scene
from scipy.optimize import brentq, minimize
from scipy.spatial.transform import Rotation

import mbvi

pendulum = load_scene("loaded_pendulum")
chain = load_scene("hanging_chain")

M, G, L = 2.0, 9.81, 1.5


# -- a pendulum under a steady horizontal load -----------------------------------------------------------


@pytest.mark.parametrize("force", [7.0, -3.0, 60.0])
@pytest.mark.parametrize("theta0", [0.0, 2.5])
def test_loaded_pendulum_leans_at_arctan_f_over_mg(force: float, theta0: float) -> None:
    eq = mbvi.equilibrium(pendulum.build(mass=M, length=L, g=G, force=force, theta0=theta0))
    x = eq.position("bob")
    tension = math.hypot(force, M * G)
    assert x[0] / -x[2] == pytest.approx(force / (M * G), rel=1e-8, abs=1e-12)  # tan θ = f/(mg)
    assert np.linalg.norm(x) == pytest.approx(L, rel=1e-12)
    # the rod's multiplier is its tension, and the constraint force holds the bob against load and weight
    assert eq.multipliers == pytest.approx([tension], rel=1e-8)
    np.testing.assert_allclose(eq.constraint_force("world-bob"), [-force, 0.0, M * G], rtol=0, atol=1e-8 * tension)
    # eq.potential is U − W = m g z − f x = −l √(f² + (mg)²)
    assert eq.potential == pytest.approx(-L * tension, rel=1e-10)
    # stable, both swinging modes with ω² = √(f² + (mg)²)/(m l)
    assert eq.stable
    np.testing.assert_allclose(eq.tangent_eigenvalues, tension / (M * L), rtol=1e-8)


def test_hanging_pendulum_is_stable_and_upright_one_unstable() -> None:
    down = mbvi.equilibrium(pendulum.build(mass=M, length=L, g=G, force=0.0, theta0=0.0))
    assert down.stable
    np.testing.assert_allclose(down.tangent_eigenvalues, G / L, rtol=1e-10)
    assert down.multipliers == pytest.approx([M * G], rel=1e-12)  # tension
    # the upright stationary point, asked for as such (by default the equilibrium is a minimum: the hanging one)
    up = mbvi.equilibrium(pendulum.build(mass=M, length=L, g=G, force=0.0, theta0=math.pi), minimum=False)
    np.testing.assert_allclose(up.position("bob"), [0.0, 0.0, L], atol=1e-12)
    assert not up.stable
    np.testing.assert_allclose(up.tangent_eigenvalues, -G / L, rtol=1e-10)  # ω² < 0: it falls
    assert up.multipliers == pytest.approx([-M * G], rel=1e-12)  # the rod is in compression
    assert up.potential == pytest.approx(M * G * L, rel=1e-12)
    omega, _ = mbvi.modes(up)
    np.testing.assert_allclose(omega, -math.sqrt(G / L), rtol=1e-10)  # negative: growth rate, not frequency


def test_loaded_pendulum_swings_about_its_equilibrium_at_the_modal_frequency() -> None:
    scene = pendulum.build(mass=M, length=L, g=G, force=7.0)
    eq = mbvi.equilibrium(scene)
    omega, _ = mbvi.modes(eq)
    assert omega == pytest.approx(np.full(2, math.sqrt(math.hypot(7.0, M * G) / (M * L))), rel=1e-8)
    # nudge the bob by 0.005 rad in the x–z plane and time the swing
    theta_eq = math.atan2(7.0, M * G)
    start = pendulum.build(mass=M, length=L, g=G, force=7.0, theta0=theta_eq + 0.005)
    traj = mbvi.simulate(start, t_end=4 * 2 * math.pi / omega[0], dt=1e-3)
    x = traj.position("bob")
    angle = np.arctan2(x[:, 0], -x[:, 2]) - theta_eq
    k = np.nonzero(np.diff(np.sign(angle)) != 0)[0]
    crossings = traj.t[k] - angle[k] * (traj.t[k + 1] - traj.t[k]) / (angle[k + 1] - angle[k])
    period = 2 * np.mean(np.diff(crossings))
    assert period == pytest.approx(2 * math.pi / omega[0], rel=1e-4)


# -- an equilibrium is a rest state ----------------------------------------------------------------------


@pytest.mark.parametrize("build", [lambda: pendulum.build(force=7.0, theta0=0.3), lambda: chain.build(links=12)])
def test_simulation_started_at_an_equilibrium_stays_there(build) -> None:
    scene = build()
    eq = mbvi.equilibrium(scene)
    traj = mbvi.simulate(scene, t_end=1.0, dt=1e-3, initial_state=eq.state)
    assert np.max(np.abs(traj.q - eq.q)) < 1e-10
    assert np.max(np.abs(traj.v)) < 1e-9
    # and the scene itself moves when released elsewhere
    assert np.max(np.abs(mbvi.simulate(scene, t_end=0.1, dt=1e-3).v[-1])) > 1e-2


def test_chain_built_at_its_equilibrium_is_at_rest() -> None:
    scene = chain.build(links=12, height=0.2, start="equilibrium")
    state = mbvi.assemble(scene).initial_state()
    eq = mbvi.equilibrium(scene)
    assert eq.iterations == 1 and eq.stable
    np.testing.assert_allclose(state.q, eq.q, atol=1e-12)


# -- the hanging chain -----------------------------------------------------------------------------------


def _chain_points(eq: mbvi.Equilibrium, links: int, span: float, height: float) -> np.ndarray:
    inner = [eq.position(f"p{i}") for i in range(1, links)]
    return np.array([np.zeros(3), *inner, [span, 0.0, height]])


def _slsqp_chain(links: int, length: float, span: float, height: float, mass: float, g: float) -> np.ndarray:
    """Minimize Σ m g zᵢ over the joint positions subject to |xᵢ₊₁ − xᵢ|² = ℓ² (scipy SLSQP)."""
    ell, m = length / links, mass / links
    ends = np.array([[0.0, 0.0, 0.0], [span, 0.0, height]])
    x0 = chain.arc(links, length, span, height)[1:-1].ravel()

    def full(y):
        return np.vstack([ends[0], y.reshape(-1, 3), ends[1]])

    def lengths(y):
        d = np.diff(full(y), axis=0)
        return (np.sum(d * d, axis=1) - ell**2) / (2 * ell)

    def lengths_jac(y):
        d = np.diff(full(y), axis=0) / ell
        J = np.zeros((links, 3 * (links - 1)))
        for i in range(links):
            if i > 0:
                J[i, 3 * (i - 1) : 3 * i] = -d[i]
            if i < links - 1:
                J[i, 3 * i : 3 * i + 3] = d[i]
        return J

    weight = np.tile([0.0, 0.0, m * g], links - 1)
    res = minimize(
        lambda y: weight @ y,
        x0,
        jac=lambda y: weight,
        method="SLSQP",
        constraints=[{"type": "eq", "fun": lengths, "jac": lengths_jac}],
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert res.success, res.message
    return full(res.x)


@pytest.mark.parametrize("height", [0.0, 0.3])
def test_hanging_chain_matches_an_independent_constrained_minimization(height: float) -> None:
    links, length, span, mass, g = 16, 1.5, 1.0, 1.0, 9.81
    eq = mbvi.equilibrium(chain.build(links=links, length=length, span=span, height=height, mass=mass, g=g))
    assert eq.stable
    ref = _slsqp_chain(links, length, span, height, mass, g)
    np.testing.assert_allclose(_chain_points(eq, links, span, height), ref, rtol=0, atol=1e-6)
    assert eq.potential == pytest.approx(mass / links * g * np.sum(ref[1:-1, 2]), rel=1e-9)


def _discrete_catenary(links: int, length: float, span: float, mass: float, g: float):
    """Symmetric discrete catenary: horizontal tension H and rod tensions from force balance alone.

    Joint i carries m = mass/links; by symmetry rod i has vertical tension Vᵢ = m g ((N − 1)/2 − i)
    (upwards towards the left support) and slope angle atan(Vᵢ/H); H closes the span Σ ℓ cos φᵢ = span.
    """
    ell, m = length / links, mass / links
    V = m * g * ((links - 1) / 2 - np.arange(links))
    H = brentq(lambda H: np.sum(ell * H / np.hypot(H, V)) - span, 1e-9, 1e9, xtol=1e-15, rtol=1e-15)
    return H, V


def test_hanging_chain_rod_tensions_are_the_discrete_catenary() -> None:
    links, length, span, mass, g = 20, 1.5, 1.0, 1.0, 9.81
    scene = chain.build(links=links, length=length, span=span, mass=mass, g=g)
    eq = mbvi.equilibrium(scene)
    ell, m = length / links, mass / links
    H, V = _discrete_catenary(links, length, span, mass, g)
    tension = eq.multipliers[:links]  # rows of rod0 … rod{N-1}, in order
    np.testing.assert_allclose(tension, np.hypot(H, V), rtol=1e-8)
    # rod directions, and the force each rod exerts on the joint to its right
    x = _chain_points(eq, links, span, 0.0)
    e = np.diff(x, axis=0) / ell
    np.testing.assert_allclose(e[:, 0] * tension, H, rtol=1e-8)  # the horizontal tension is constant
    np.testing.assert_allclose(-e[:, 2] * tension, V, rtol=0, atol=1e-8 * H)  # the vertical one carries the weight
    for i in range(links - 1):
        on_right = eq.constraint_force(f"rod{i}")  # force of rod i on its child p{i+1}
        on_left = eq.constraint_force(f"rod{i + 1}", body=f"p{i + 1}")
        np.testing.assert_allclose(on_right, -tension[i] * e[i], rtol=0, atol=1e-8 * H)
        # each joint is in equilibrium: the two rods hold up its weight
        np.testing.assert_allclose(on_right + on_left, [0.0, 0.0, m * g], rtol=0, atol=1e-8 * H)
    # the supports carry the whole weight of the joints
    left = -eq.constraint_force("rod0")
    right = -eq.constraint_force(f"rod{links - 1}", body=f"p{links - 1}")
    np.testing.assert_allclose(left + right, [0.0, 0.0, -(links - 1) * m * g], rtol=0, atol=1e-8 * H)


def test_hanging_chain_tends_to_the_continuous_catenary() -> None:
    length, span, mass, g = 1.5, 1.0, 1.0, 9.81
    mu = mass / length
    a = brentq(lambda a: 2 * a * math.sinh(span / (2 * a)) - length, 0.01, 100.0, xtol=1e-15)  # catenary parameter
    H0, sag0 = mu * g * a, a * (math.cosh(span / (2 * a)) - 1)
    errors = []
    for links in (10, 20, 40):
        eq = mbvi.equilibrium(chain.build(links=links, length=length, span=span, mass=mass, g=g))
        ell = length / links
        x = _chain_points(eq, links, span, 0.0)
        tension = eq.multipliers[:links]
        H = tension * np.diff(x[:, 0]) / ell
        s = (np.arange(links) + 0.5) * ell  # arc length at the rod midpoints
        z = a * (np.cosh((x[:, 0] - span / 2) / a) - math.cosh(span / (2 * a)))
        errors.append(
            [
                abs(np.mean(H) - H0) / H0,
                abs(-x[links // 2, 2] - sag0) / sag0,
                np.max(np.abs(x[:, 2] - z)) / sag0,
                np.max(np.abs(tension - np.hypot(H0, mu * g * (s - length / 2)))) / H0,
            ]
        )
    errors = np.array(errors)
    assert np.all(errors[-1] < 5e-4)
    np.testing.assert_allclose(errors[:-1] / errors[1:], 4.0, rtol=0.05)  # second order in ℓ


# -- singular Hessians and scenes without an equilibrium -------------------------------------------------


def _string(load: float) -> mbvi.Scene:
    """Two springs at their rest length ℓ = 0.5 m between two supports, a transverse load at the middle."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("mid", mass=1.0, position=(0.5, 0.0, 0.0)))
    scene.add(mbvi.Spring("world", "mid", stiffness=100.0))
    scene.add(mbvi.Spring("mid", "world", stiffness=100.0, anchor_b=(1.0, 0.0, 0.0)))
    if load:
        scene.add(mbvi.ExternalForce("mid", force=(0.0, 0.0, -load)))
    return scene


def test_unloaded_string_is_a_neutral_equilibrium() -> None:
    eq = mbvi.equilibrium(_string(0.0))
    np.testing.assert_allclose(eq.position("mid"), [0.5, 0.0, 0.0], atol=1e-15)
    assert not eq.stable  # zero transverse stiffness: not a strict minimum
    np.testing.assert_allclose(np.sort(eq.tangent_eigenvalues), [0.0, 0.0, 200.0], atol=1e-9)


def test_string_loaded_across_its_singular_start_sags_to_the_force_balance() -> None:
    k, ell, f = 100.0, 0.5, 1.0
    eq = mbvi.equilibrium(_string(f))
    # 2 k (s − ℓ) w / s = f with s = √(ℓ² + w²)
    w = brentq(lambda w: 2 * k * (math.hypot(ell, w) - ell) * w / math.hypot(ell, w) - f, 1e-9, 1.0, xtol=1e-15)
    np.testing.assert_allclose(eq.position("mid"), [0.5, 0.0, -w], atol=1e-10)
    assert eq.stable


def test_slack_chain_without_load_is_returned_as_it_is() -> None:
    scene = chain.build(links=10, g=0.0)
    eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.q, mbvi.assemble(scene).layout.q0, atol=1e-14)
    assert not eq.stable
    np.testing.assert_allclose(eq.tangent_eigenvalues, 0.0, atol=1e-12)
    np.testing.assert_allclose(eq.multipliers, 0.0, atol=1e-12)


def test_cable_hung_straight_sags_and_its_clamps_carry_its_weight() -> None:
    # an elastic cable (beam without bending) clamped at both ends, starting straight: zero tension,
    # zero transverse stiffness, yet gravity pulls across it
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    rho, area, length, n = 1000.0, 1e-4, 1.0, 20
    scene.add(
        mbvi.Beam("cable", (0, 0, 0), (length, 0, 0), n, density=rho, area=area, youngs_modulus=1e7, clamp="both")
    )
    eq = mbvi.equilibrium(scene)
    assert eq.stable and eq.position(f"cable[{n // 2}]")[2] < -0.01
    support = eq.constraint_force("cable:clamp[0]") + eq.constraint_force(f"cable:clamp[{n}]")
    np.testing.assert_allclose(support, [0.0, 0.0, rho * area * length * 9.81], rtol=0, atol=1e-10)


def test_no_equilibrium_raises_a_clear_solver_error() -> None:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("falling", mass=1.0, position=(0.0, 0.0, 0.0)))
    with pytest.raises(mbvi.SolverError, match=r"did not converge.*no equilibrium"):
        mbvi.equilibrium(scene)


def test_iteration_limit_raises_solver_error() -> None:
    scene = pendulum.build(force=3.0, theta0=1.5)
    with pytest.raises(mbvi.SolverError, match=r"did not converge in 1 iterations \(KKT residual"):
        mbvi.equilibrium(scene, maxiter=1)


def test_equilibrium_accessors_reject_unknown_names() -> None:
    eq = mbvi.equilibrium(pendulum.build())
    np.testing.assert_array_equal(eq.position("world"), np.zeros(3))
    with pytest.raises(ValueError, match="unknown body"):
        eq.position("nobody")
    with pytest.raises(ValueError, match="unknown joint"):
        eq.constraint_force("no-joint")


@pytest.mark.parametrize("joint", ["fixed", "revolute"])
def test_constraint_torque_is_the_root_moment_of_a_cantilevered_bar(joint: str) -> None:
    """A horizontal bar held at one end: the joint carries m g up and the moment m g L/2 about y."""
    length, mass, g = 2.0, 3.0, 9.81
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    scene.add(mbvi.RigidBody("bar", mass=mass, shape=mbvi.Box((length, 0.1, 0.1)), position=(length / 2, 0, 0)))
    if joint == "fixed":
        scene.add(mbvi.Fixed("world", "bar", anchor=(0, 0, 0)))
    else:  # a hinge about the vertical: it cannot turn about y, so it carries the bending moment too
        scene.add(mbvi.Revolute("world", "bar", anchor=(0, 0, 0), axis=(0, 0, 1)))
    eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.constraint_force("world-bar"), [0, 0, mass * g], atol=1e-9)
    np.testing.assert_allclose(eq.constraint_torque("world-bar"), [0, -mass * g * length / 2, 0], atol=1e-9)


def test_constraint_torque_vanishes_about_a_hinge_axis() -> None:
    """A bar hanging from a horizontal hinge at rest: no moment about the hinge axis."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("bar", mass=1.0, shape=mbvi.Box((0.1, 0.1, 1.0)), position=(0.3, 0, -0.4)))
    scene.add(mbvi.Revolute("world", "bar", anchor=(0, 0, 0), axis=(0, 1, 0)))
    eq = mbvi.equilibrium(scene)
    assert abs(eq.constraint_torque("world-bar")[1]) < 1e-9
    np.testing.assert_allclose(eq.constraint_force("world-bar"), [0, 0, 9.81], atol=1e-9)


@pytest.mark.parametrize(("ma", "mb"), [(1.0, 1e-9), (1.0, 1e9), (1e9, 1.0), (1.0, 1e6)])
def test_equilibrium_of_a_double_pendulum_with_extreme_mass_ratios(ma: float, mb: float) -> None:
    """Both bobs hang straight down whatever the mass ratio (the light one is not left off the vertical)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=ma, position=(0.6, 0.0, -0.8)))
    scene.add(mbvi.Particle("b", mass=mb, position=(1.3, 0.0, -1.5)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.position("a"), (0.0, 0.0, -1.0), atol=1e-8)
    np.testing.assert_allclose(eq.position("b"), (0.0, 0.0, -1.0 - np.hypot(0.7, 0.7)), atol=1e-8)
    assert eq.stable


# -- extreme mass ratios: the scaled problem (issue: LinAlgError / "no equilibrium" at 1e9 … 1e18) ------------

_LEN_B = math.sqrt(0.6**2 + 0.3**2 + 0.2**2)  # the lower rod: a → b at the start below


def _two_links(ma: float, mb: float, rigid: bool) -> mbvi.Scene:
    """world –(1 m)– a –(rod)– b, released well off the vertical (and b out of the plane).

    a is a particle on a rod, or a rigid ball (J = 0.4 m (0.1 m)²) on a hinge about y with its centre 1 m
    from the axis; b is a particle on a rod from a's centre.
    """
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    if rigid:
        j = 0.4 * ma * 0.1**2
        scene.add(mbvi.RigidBody("a", mass=ma, inertia=(j, j, j), position=(0.6, 0.0, -0.8)))
        scene.add(mbvi.Revolute("world", "a", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))
    else:
        scene.add(mbvi.Particle("a", mass=ma, position=(0.6, 0.0, -0.8)))
        scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Particle("b", mass=mb, position=(1.2, 0.3, -1.0)))
    scene.add(mbvi.Rod("a", "b"))
    return scene


def _two_link_frequencies(ma: float, mb: float, rigid: bool) -> np.ndarray:
    """Small-oscillation ω (rad/s, ascending) of the hanging two-link chain, from its minimal coordinates.

    In a vertical plane, with θ₁ the upper link's and θ₂ the rod's angle from the vertical (l₁ = 1 m):
    M = [[J₁ + m_b l₁², m_b l₁ l₂], [m_b l₁ l₂, m_b l₂²]], K = diag((m_a + m_b) g l₁, m_b g l₂), J₁ the upper
    body's moment of inertia about the support. det(K − ω² M) = 0 is a quadratic in ω² whose roots are taken
    without cancellation (the large one from the sum, the small one from the product), since at these mass
    ratios they are 1e18 apart. The particle chain swings in two planes (each pair twice); the hinged ball
    keeps the plane, and b swings across it as a pendulum of length l₂ about a fixed point.
    """
    l1, l2 = 1.0, _LEN_B
    j1 = (0.4 * ma * 0.1**2 if rigid else 0.0) + ma * l1**2
    k1, k2 = (ma + mb) * G * l1, mb * G * l2
    m11, m22 = j1 + mb * l1**2, mb * l2**2
    det = j1 * mb * l2**2  # m11 m22 − (m_b l₁ l₂)², without the cancellation
    total = (k1 * m22 + k2 * m11) / det
    big = 0.5 * (total + math.sqrt(total**2 - 4 * k1 * k2 / det))
    small = k1 * k2 / det / big
    w2 = [small, big, G / l2] if rigid else [small, small, big, big]
    return np.sqrt(np.sort(w2))


@pytest.mark.parametrize("rigid", [False, True], ids=["particles", "rigid-ball"])
@pytest.mark.parametrize(("ma", "mb"), [(1.0, 1e12), (1e12, 1.0), (1.0, 1e15), (1e15, 1.0), (1.0, 1e18), (1e18, 1.0)])
def test_equilibrium_and_modes_at_mass_ratios_of_1e12_to_1e18(ma: float, mb: float, rigid: bool) -> None:
    """The chain hangs straight down, its rods carry the weight below them, and its frequencies are those of
    the minimal-coordinate model (scipy's generalized eigh raised LinAlgError, the solver 'no equilibrium')."""
    eq = mbvi.equilibrium(_two_links(ma, mb, rigid))
    np.testing.assert_allclose(eq.position("a"), [0.0, 0.0, -1.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(eq.position("b"), [0.0, 0.0, -1.0 - _LEN_B], rtol=0, atol=1e-12)
    assert eq.multipliers[-1] == pytest.approx(mb * G, rel=1e-12)  # the lower rod holds b
    if not rigid:
        assert eq.multipliers[0] == pytest.approx((ma + mb) * G, rel=1e-12)  # the upper one both
    assert eq.stable
    omega, shapes = mbvi.modes(eq)
    np.testing.assert_allclose(omega, _two_link_frequencies(ma, mb, rigid), rtol=1e-9)
    # mass-normalized shapes: φᵀ M φ = I even with masses 1e18 apart
    mass = eq.system.mass
    np.testing.assert_allclose(shapes.T @ (mass[:, None] * shapes), np.eye(len(omega)), rtol=0, atol=1e-9)
    np.testing.assert_allclose(eq.tangent_eigenvalues, omega**2, rtol=1e-9)


def test_a_light_and_a_heavy_bob_hang_straight_with_their_rods_carrying_the_weight_below() -> None:
    """world–a–b with 0.5 kg and 5e9 kg, released in a bent line (the solver reported 'no equilibrium'):
    the closed form."""
    ma, mb = 0.5, 5e9
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("a", mass=ma, position=(0.6, 0.0, -0.8)))
    scene.add(mbvi.Particle("b", mass=mb, position=(1.3, 0.0, -1.5)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.position("a"), [0.0, 0.0, -1.0], rtol=0, atol=1e-12)
    np.testing.assert_allclose(eq.position("b"), [0.0, 0.0, -1.0 - math.hypot(0.7, 0.7)], rtol=0, atol=1e-12)
    # the rod tensions: the upper rod (first row) carries both weights, the lower one b's
    np.testing.assert_allclose(eq.multipliers, [(ma + mb) * G, mb * G], rtol=1e-12)
    np.testing.assert_allclose(eq.constraint_force("a-b"), [0.0, 0.0, mb * G], rtol=1e-12, atol=1e-12 * mb * G)
    assert eq.stable


def test_a_neutral_spin_is_reported_as_zero_not_as_round_off_of_the_heavy_load() -> None:
    """A ball on a ball joint at 0.5 m above its centre, a 1e15 kg bob on a rod from its centre: spinning the
    ball about the vertical changes nothing (ω² = 0), though the terms that cancel there are 1e17 1/s²."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.RigidBody("ball", mass=1.0, inertia=(0.004, 0.004, 0.004), position=(0.3, 0.0, -0.4)))
    scene.add(mbvi.Spherical("world", "ball", anchor=(0.0, 0.0, 0.0)))
    scene.add(mbvi.Particle("bob", mass=1e15, position=(0.3, 0.5, -1.4)))
    scene.add(mbvi.Rod("ball", "bob"))
    eq = mbvi.equilibrium(scene)
    assert not eq.stable  # neutral about the vertical: not a strict minimum
    omega, _ = mbvi.modes(eq)
    assert omega[0] == 0.0 and np.all(omega[1:] > 1.0)


@pytest.mark.parametrize("mass", [3.0, 3e9])
def test_a_bar_hinged_along_its_own_axis_is_neutral_with_a_zero_not_round_off(mass: float) -> None:
    """A box bar hinged at its end along its own axis, its weight held by the hinge: turning it about that axis
    changes nothing. Its spin has a zero diagonal in the Hessian and couplings of m g ℓ between its centre and its
    rotation columns; the zero threshold read the diagonal alone and reported ω² = −2.5e-13 (a physics review).
    The hinge carries the weight and its moment. Hanging from a hinge across it, the same bar is a pendulum of
    ω² = m g (ℓ/2) / I_pivot."""
    ell = 2.0
    along = mbvi.Scene(gravity=(0.0, 0.0, -G))
    along.add(mbvi.RigidBody("bar", mass=mass, shape=mbvi.Box((ell, 0.1, 0.1)), position=(ell / 2, 0.0, 0.0)))
    along.add(mbvi.Revolute("world", "bar", anchor=(0.0, 0.0, 0.0), axis=(1.0, 0.0, 0.0), name="h"))
    eq = mbvi.equilibrium(along)
    np.testing.assert_allclose(eq.constraint_force("h"), (0.0, 0.0, mass * G), rtol=1e-12, atol=1e-12 * mass)
    np.testing.assert_allclose(eq.constraint_torque("h"), (0.0, -mass * G * ell / 2, 0.0), rtol=1e-12,
                               atol=1e-12 * mass)  # fmt: skip
    assert not eq.stable and eq.tangent_eigenvalues[0] == 0.0
    across = mbvi.Scene(gravity=(0.0, 0.0, -G))
    across.add(mbvi.RigidBody("bar", mass=mass, shape=mbvi.Box((0.1, 0.1, ell)), position=(0.0, 0.0, -ell / 2)))
    across.add(mbvi.Revolute("world", "bar", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="h"))
    eq = mbvi.equilibrium(across)
    i_pivot = mass * (0.1**2 + ell**2) / 12 + mass * (ell / 2) ** 2
    assert eq.stable
    assert eq.tangent_eigenvalues[0] == pytest.approx(G * mass * (ell / 2) / i_pivot, rel=1e-12)


def test_a_torque_on_a_ball_joint_keeps_its_stiffness_in_the_small_oscillations() -> None:
    """A bar on a ball joint tilted by a constant world torque about x: a constant torque on a body free to turn
    about every axis has a skew stiffness (½ [τ]× on the rotation columns), which the symmetrized Hessian dropped:
    the equilibrium was reported a saddle of ω² = −99.9 (SaddleWarning) where it is stable with ω² = 0 (the spin
    about the bar), and twice that of the same bar on a hinge about x (a physics review: hand linearization,
    mbvi's own unsymmetrized matrices and a perturbed simulation agreed)."""
    m, ell, tau = 2.0, 1.0, 5.0
    tilt = math.asin(tau / (m * G * ell / 2))
    turn = np.array([[1.0, 0.0, 0.0], [0.0, math.cos(tilt), -math.sin(tilt)], [0.0, math.sin(tilt), math.cos(tilt)]])

    def bar(joint) -> mbvi.Scene:
        scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
        scene.add(mbvi.RigidBody("bar", mass=m, shape=mbvi.Box((0.05, 0.05, ell)),
                                 position=tuple(turn @ [0.0, 0.0, -ell / 2]), orientation=turn))  # fmt: skip
        scene.add(joint)
        scene.add(mbvi.ExternalTorque("bar", torque=(tau, 0.0, 0.0)))
        return scene

    hinge = mbvi.equilibrium(bar(mbvi.Revolute("world", "bar", anchor=(0, 0, 0), axis=(1, 0, 0))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no SaddleWarning
        ball = mbvi.equilibrium(bar(mbvi.Spherical("world", "bar", anchor=(0, 0, 0))))
    np.testing.assert_allclose(ball.position("bar"), turn @ [0.0, 0.0, -ell / 2], atol=1e-12)
    assert hinge.stable and hinge.tangent_eigenvalues[0] > 1.0
    w2 = hinge.tangent_eigenvalues[0]
    np.testing.assert_allclose(ball.tangent_eigenvalues, [0.0, w2, w2], rtol=1e-9, atol=1e-9)
    assert not ball.stable  # neutral about the bar's own axis: not a strict minimum
    omega, _ = mbvi.modes(ball)
    np.testing.assert_allclose(omega, [0.0, math.sqrt(w2), math.sqrt(w2)], rtol=1e-9, atol=1e-9)


def test_a_constraint_force_is_read_only_on_a_body_of_its_joint() -> None:
    """A body not on the joint gave [0, 0, 0] (the joint's rows have no entry there), an unknown body a KeyError,
    and a joint whose second body is the world "constraint forces are read on a body that is not the world"."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(0.0, 0.0, -1.0)))
    scene.add(mbvi.Particle("b", mass=2.0, position=(0.0, 0.0, -2.0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    scene.add(mbvi.Particle("c", mass=1.0, position=(5.0, 0.0, 0.0)))
    scene.add(mbvi.Spherical("c", "world", anchor=(5.0, 0.0, 0.0)))
    eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.constraint_force("world-a"), [0.0, 0.0, 3 * 9.81], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(eq.constraint_force("a-b", body="a"), [0.0, 0.0, -2 * 9.81], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(eq.constraint_force("c-world", body="c"), [0.0, 0.0, 9.81], rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="joint 'world-a' joins 'world' and 'a': it exerts no force on 'b'"):
        eq.constraint_force("world-a", body="b")
    with pytest.raises(ValueError, match="joint 'world-a': unknown body 'nosuch'"):
        eq.constraint_force("world-a", body="nosuch")
    # a joint listed with the world second is read on its other body by default (as documented; it raised)
    np.testing.assert_array_equal(eq.constraint_force("c-world"), eq.constraint_force("c-world", body="c"))
    with pytest.raises(ValueError, match="joint 'c-world': constraint forces are read on one of its bodies, not"):
        eq.constraint_force("c-world", body="world")


def test_a_torque_nothing_resists_is_said_to_have_no_equilibrium() -> None:
    """A hinge turned by a constant torque, with no spring: "line search failed at iteration 1 (KKT residual
    1.5)" said nothing of why (the force case says there is no equilibrium); it now names the likely cause."""
    sc = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    sc.add(mbvi.RigidBody("b", mass=1.0, shape=mbvi.Box((1.0, 0.1, 0.1)), position=(0.5, 0.0, 0.0)))
    sc.add(mbvi.Revolute("world", "b", anchor=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0), name="h"))
    sc.add(mbvi.ExternalTorque("b", torque=(0.0, 0.0, 1.0)))
    with pytest.raises(mbvi.SolverError, match=r"A load that nothing resists .* has no equilibrium"):
        mbvi.equilibrium(sc)
    sc.add(mbvi.TorsionSpring("h", stiffness=4.0))  # resisted: it turns by τ/k = 0.25 rad
    centre = mbvi.equilibrium(sc).position("b")
    np.testing.assert_allclose(centre, (0.5 * np.cos(0.25), 0.5 * np.sin(0.25), 0.0), atol=1e-9)


def test_a_torque_nothing_resists_with_a_bead_sliding_on_the_bar_is_said_so_too() -> None:
    """The same free hinge with a bead on a spring sliding along the bar: each step moved the bead a little, so
    the line search never failed, and after 200 iterations (5 s) the error said to raise maxiter "if it was
    still converging", or that U − W keeps falling, when neither U − W nor the imbalance fell. It now says what
    nothing resists; with a torsion spring the balance is found (the bar at τ/k, the bead at rest on its
    spring's rest length, its centripetal load nil in statics)."""
    sc = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    sc.add(mbvi.RigidBody("rod", mass=1.0, inertia=(0.01, 0.3, 0.3)))
    sc.add(mbvi.Revolute("world", "rod", anchor=(0, 0, 0), axis=(0, 0, 1), name="hinge"))
    sc.add(mbvi.Particle("bead", mass=0.5, position=(0.5, 0, 0)))
    sc.add(mbvi.Prismatic("rod", "bead", axis=(1, 0, 0), name="slide"))
    sc.add(mbvi.Spring("rod", "bead", stiffness=4.0, rest_length=0.4))
    sc.add(mbvi.ExternalTorque("rod", torque=(0, 0, 0.5)))
    with pytest.raises(mbvi.SolverError, match=r"neither U − W nor the imbalance fell by half. Most likely a load that "
                                               r"nothing resists .* has no equilibrium"):  # fmt: skip
        mbvi.equilibrium(sc, maxiter=60)
    sc.add(mbvi.TorsionSpring("hinge", stiffness=2.0))
    bead = mbvi.equilibrium(sc).position("bead")
    np.testing.assert_allclose(bead, 0.4 * np.array([np.cos(0.25), np.sin(0.25), 0.0]), atol=1e-9)


def _bar_on_a_hinge(*loads) -> mbvi.Scene:
    sc = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    sc.add(mbvi.RigidBody("bar", mass=1.0, shape=mbvi.Box((1.0, 0.1, 0.1)), position=(0.5, 0.0, 0.0)))
    sc.add(mbvi.Revolute("world", "bar", anchor=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0), name="h"))
    for load in loads:
        sc.add(load)
    return sc


@pytest.mark.parametrize("case", ["pd particle", "pd hinge", "torsion spring 1", "torsion spring 2"])
def test_loads_without_a_work_potential_find_their_equilibrium(case: str) -> None:
    """A PD load (it reads the state: no work potential) and a constant torque held by a torsion spring: the
    search judged each trial's imbalance on the trial's own force scale, which shrinks with the multipliers, and
    refused the steps that balance ("line search failed … no equilibrium"). Closed forms: x = target, θ = τ/k."""
    if case == "pd particle":
        sc = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
        sc.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, 0.0)))
        sc.add(mbvi.ExternalForce("p", force=lambda t, s: tuple(-10.0 * (s.position("p") - (0.1, 0.0, 0.0)))))
        assert mbvi.equilibrium(sc).position("p")[0] == pytest.approx(0.1, abs=1e-10)
        return
    if case == "pd hinge":
        sc = _bar_on_a_hinge(mbvi.ExternalTorque("bar", torque=lambda t, s: (0, 0, -2.0 * (s.joint_angle("h") - 0.1))))
        expected = 0.1
    else:
        tau = float(case.split()[-1])
        sc = _bar_on_a_hinge(mbvi.TorsionSpring("h", stiffness=1.0), mbvi.ExternalTorque("bar", torque=(0, 0, tau)))
        expected = tau
    centre = mbvi.equilibrium(sc).position("bar")
    np.testing.assert_allclose(centre, (0.5 * np.cos(expected), 0.5 * np.sin(expected), 0.0), atol=1e-9)


def _bar_on_a_ball_joint(torque, start_tilt: float, about=(0.0, 1.0, 0.0)) -> mbvi.Scene:
    from scipy.spatial.transform import Rotation

    turn = Rotation.from_rotvec(start_tilt * np.asarray(about, float))
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("bar", mass=2.0, shape=mbvi.Box((0.05, 0.05, 1.0)), position=turn.apply([0, 0, -0.5]),
                             orientation=turn))  # fmt: skip
    scene.add(mbvi.Spherical("world", "bar", anchor=(0.0, 0.0, 0.0)))
    scene.add(mbvi.ExternalTorque("bar", torque=torque))
    return scene


@pytest.mark.parametrize(
    ("torque", "start", "about"),
    [((0.0, 5.0, 0.0), 0.0, (0, 1, 0)), ((0.0, 5.0, 0.0), 0.53, (0, 1, 0)), ((0.0, 9.0, 0.0), 0.0, (0, 1, 0)),
     ((3.0, 4.0, 0.0), 0.0, (0, 1, 0)), ((3.0, 4.0, 0.0), 0.53, (0, 1, 0)), ((3.0, 4.0, 0.0), 1.2, (1, 0, 0)),
     ((3.0, 4.0, 0.0), 1.2, (0, -1, 0))],
)
def test_a_bar_on_a_ball_joint_finds_the_tilt_a_torque_holds_it_at(torque, start: float, about) -> None:
    """A torque has no work potential, and on a ball joint its stiffness is skew: the search steered by U − W and
    the symmetric part raised "no step lowers U − W … a load that nothing resists has no equilibrium" from any
    start but the answer itself (0.9999 of the tilt failed). The tilt balances the torque: m g (L/2) sin θ = |τ|,
    the bar in the plane normal to τ. Started 1.2 rad off in another plane, Gauss-Newton's steps clipped to the
    largest step cycled for 200 iterations; damped to fit it (a trust region) they converge."""
    tau = np.asarray(torque, float)
    eq = mbvi.equilibrium(_bar_on_a_ball_joint(torque, start, about))
    down = eq.position("bar") / 0.5  # the bar's direction, from the pivot to its centre
    assert np.arcsin(np.linalg.norm(tau) / (2.0 * 9.81 * 0.5)) == pytest.approx(np.arccos(-down[2]), abs=1e-9)
    assert abs(down @ tau) < 1e-9  # in the plane normal to the torque
    np.testing.assert_allclose(np.cross(0.5 * down, [0.0, 0.0, -2.0 * 9.81]) + tau, 0.0, atol=1e-9)  # moments
    w2 = eq.tangent_eigenvalues  # its spin about itself, and the two swings of the tilted bar
    assert abs(w2[0]) < 1e-9 and w2[1] == pytest.approx(w2[2], rel=1e-6) and w2[1] > 0


@pytest.mark.parametrize("torque", [(0.0, 0.0, 1.0), (0.0, 12.0, 0.0)])
def test_a_torque_a_ball_jointed_bar_cannot_hold_has_no_equilibrium(torque) -> None:
    """Along the hanging bar's own free axis, or more than its weight's largest moment m g L/2 = 9.81 N m."""
    with pytest.raises(mbvi.SolverError, match=r"A load that nothing resists .* has no equilibrium"):
        mbvi.equilibrium(_bar_on_a_ball_joint(torque, 0.0))


# -- an arm held by PD torques: loads that read the configuration and have no work potential -------------------
ARM_KP, ARM_SET = 40.0, (0.7, -0.6)


def _shoulder_torque(t, s):
    return ARM_KP * (ARM_SET[0] - s.joint_angle("shoulder")) - 4.0 * s.joint_rate("shoulder")


def _elbow_torque(t, s):
    return ARM_KP * (ARM_SET[1] - s.joint_angle("elbow")) - 4.0 * s.joint_rate("elbow")


def _on_upper(t, s):
    return (0.0, _shoulder_torque(t, s) - _elbow_torque(t, s), 0.0)


def _on_fore(t, s):
    return (0.0, _elbow_torque(t, s), 0.0)


def _pd_arm(start: tuple[float, float] = (0.0, 0.0)) -> mbvi.Scene:
    """Two 1-kg links of 0.5 m on hinges about y, built at joint angles ``start`` (rad, turning x down towards
    −z), each joint driven by a PD torque towards (0.7, −0.6) rad with no gravity compensation."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    a1, a2 = start[0], start[0] + start[1]
    e1, e2 = np.array([math.cos(a1), 0.0, -math.sin(a1)]), np.array([math.cos(a2), 0.0, -math.sin(a2)])
    inertia = (1e-3, 1.0 * 0.5**2 / 12, 1.0 * 0.5**2 / 12)
    scene.add(mbvi.RigidBody("upper", mass=1.0, inertia=inertia, position=tuple(0.25 * e1),
                             orientation=Rotation.from_rotvec([0.0, a1, 0.0])))  # fmt: skip
    scene.add(mbvi.RigidBody("fore", mass=1.0, inertia=inertia, position=tuple(0.5 * e1 + 0.25 * e2),
                             orientation=Rotation.from_rotvec([0.0, a2, 0.0])))  # fmt: skip
    scene.add(mbvi.Revolute("world", "upper", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="shoulder"))
    scene.add(mbvi.Revolute("upper", "fore", anchor=tuple(0.5 * e1), axis=(0.0, 1.0, 0.0), name="elbow"))
    scene.add(mbvi.ExternalTorque("upper", torque=_on_upper, name="shoulder motor"))
    scene.add(mbvi.ExternalTorque("fore", torque=_on_fore, name="elbow motor"))
    return scene


def _arm_balance() -> np.ndarray:
    """The joint angles where the PD torques hold the links' weight (an independent root find). A link whose
    centre is x ahead of a joint (along x) is turned by m g x about +y, down."""
    from scipy.optimize import fsolve

    def imbalance(th):
        a1, a2 = th[0], th[0] + th[1]
        x_upper, x_elbow = 0.25 * math.cos(a1), 0.5 * math.cos(a1)
        x_fore = x_elbow + 0.25 * math.cos(a2)
        shoulder = ARM_KP * (ARM_SET[0] - th[0]) + G * (x_upper + x_fore)
        return [shoulder, ARM_KP * (ARM_SET[1] - th[1]) + G * (x_fore - x_elbow)]

    return fsolve(imbalance, ARM_SET, xtol=1e-12)


@pytest.mark.parametrize("start", [(0.0, 0.0), (0.2, 0.3), (-0.5, 0.9)])
def test_an_arm_held_by_pd_torques_is_found_at_its_balance_from_any_start(start) -> None:
    """PD torques have no work potential (U − W does not see them): the balance found from each start is the
    closed form's, kp (θ* − θ) against the links' weight, and the one a run settles at."""
    there = mbvi.assemble(_pd_arm(start)).initial_state().q  # the arm at the start, in the zero-built arm's q
    eq = mbvi.equilibrium(_pd_arm(), initial_state=there)
    sim = mbvi.Simulator(_pd_arm(), dt=1e-3, initial_state=eq.state)
    found = np.array([sim.view.joint_angle("shoulder"), sim.view.joint_angle("elbow")])
    np.testing.assert_allclose(found, _arm_balance(), atol=1e-9)
    assert eq.stable
    settled = mbvi.simulate(_pd_arm(), 20.0, 2e-3, initial_state=mbvi.State(there, np.zeros_like(there)))
    assert [settled.joint_angle("shoulder")[-1], settled.joint_angle("elbow")[-1]] == pytest.approx(found, abs=1e-6)


URDF_ARM = Path(__file__).resolve().parent.parent / "docs" / "notebooks" / "two_link_arm.urdf"
ELBOW_AXIS = np.array([1.0, 0.0, 0.5]) / math.sqrt(1.25)


def _urdf_shoulder(t, s):
    return ARM_KP * (ARM_SET[0] - s.joint_angle("shoulder")) - 4.0 * s.joint_rate("shoulder")


def _urdf_elbow(t, s):
    return ARM_KP * (ARM_SET[1] - s.joint_angle("elbow")) - 4.0 * s.joint_rate("elbow")


def _urdf_on_upper(t, s):
    return _urdf_shoulder(t, s) * (s.rotation("upper") @ np.array([0.0, 1.0, 0.0])) - _urdf_elbow(t, s) * (
        s.rotation("fore") @ ELBOW_AXIS
    )


def _urdf_on_fore(t, s):
    return _urdf_elbow(t, s) * (s.rotation("fore") @ ELBOW_AXIS)


def _urdf_pd_arm(start: tuple[float, float]) -> mbvi.Scene:
    scene = mbvi.Scene.from_urdf(URDF_ARM, joint_positions={"shoulder": start[0], "elbow": start[1]})
    scene.add(mbvi.ExternalTorque("upper", torque=_urdf_on_upper, name="upper motors"))
    scene.add(mbvi.ExternalTorque("fore", torque=_urdf_on_fore, name="elbow motor"))
    return scene


def test_the_notebooks_arm_held_by_pd_torques_is_found_where_a_run_settles_from_an_ordinary_start() -> None:
    """docs/notebooks' two-link arm (its elbow axis skewed) under PD torques without gravity compensation, started
    at (0.2, 0.3) rad: equilibrium said "line search failed at iteration 1 ... a load that nothing resists", though
    a run settles at one balance from there and equilibrium found it from (0, 0). A step no descent of U − W takes
    is now taken on the imbalance (Levenberg–Marquardt) where loads read the configuration."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (the URDF's joint limits, which mbvi does not enforce)
        eq = mbvi.equilibrium(_urdf_pd_arm((0.2, 0.3)))
        settled = mbvi.simulate(_urdf_pd_arm((0.2, 0.3)), 20.0, 2e-3)
        sim = mbvi.Simulator(_urdf_pd_arm((0.2, 0.3)), dt=1e-3, initial_state=eq.state)
    assert eq.stable
    found = [sim.view.joint_angle("shoulder"), sim.view.joint_angle("elbow")]
    assert found == pytest.approx([settled.joint_angle("shoulder")[-1], settled.joint_angle("elbow")[-1]], abs=1e-6)
    assert found == pytest.approx([0.611740, -0.596061], abs=1e-6)
