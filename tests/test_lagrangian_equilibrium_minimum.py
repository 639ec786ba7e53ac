"""mbvi.equilibrium of a LagrangianSystem is a minimum of U − W on g = 0, not just any stationary point.

Newton's method on the KKT conditions alone went to the top of a pendulum written in Cartesian
coordinates from any start above the horizontal, and failed from the horizontal. References are
closed forms worked out here by hand (sign convention of the multipliers: ∂U/∂q − Q + Gᵀλ = 0).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

import mbvi

M, L, G = 2.0, 1.5, 9.81  # bob mass (kg), rod length (m), gravity (m/s²)


def cartesian_pendulum(force: tuple[float, float] = (0.0, 0.0)) -> mbvi.LagrangianSystem:
    """Bob at (x, y) on a rod from the origin, gravity along −y, a constant load ``force`` on the bob."""
    x, y, vx, vy = sp.symbols("x y vx vy")
    return mbvi.LagrangianSystem(
        M * (vx**2 + vy**2) / 2 - M * G * y,
        coordinates=[x, y],
        velocities=[vx, vy],
        constraints=[x**2 + y**2 - L**2],
        force=list(force),
    )


def _on_rod(angle_from_bottom: float) -> list[float]:
    return [L * math.sin(angle_from_bottom), -L * math.cos(angle_from_bottom)]


# starts above the horizontal (on and off the rod), on the horizontal, and exactly inverted
STARTS = {
    "above horizontal": [0.725 * L, 0.689 * L],
    "above horizontal, left, off the rod": [-0.3, 0.9],
    "just above horizontal": _on_rod(math.pi / 2 + 1e-3),
    "horizontal, right": [L, 0.0],
    "horizontal, left": [-L, 0.0],
    "exactly inverted": [0.0, L],
    "a hair off the top": _on_rod(math.pi - 1e-9),
}


@pytest.mark.parametrize("start", STARTS.values(), ids=STARTS.keys())
def test_cartesian_pendulum_hangs_from_any_start(start: list[float]) -> None:
    eq = mbvi.equilibrium(cartesian_pendulum(), initial_state=mbvi.State(start, [0.0, 0.0]))
    np.testing.assert_allclose(eq.q, [0.0, -L], rtol=0, atol=1e-12)
    assert eq.potential == pytest.approx(-M * G * L, rel=1e-12)
    # ∂U/∂y + λ ∂g/∂y = M g + λ (2 y) = 0 at y = −L: the rod pulls up with 2Lλ = M g
    np.testing.assert_allclose(eq.multipliers, [M * G / (2 * L)], rtol=1e-10)
    assert eq.stable
    np.testing.assert_allclose(eq.tangent_eigenvalues, [G / L], rtol=1e-10)  # ω² of the small swings


def test_a_start_given_as_plain_coordinates_at_the_top_also_hangs() -> None:
    eq = mbvi.equilibrium(cartesian_pendulum(), initial_state=np.array([0.0, L]))
    np.testing.assert_allclose(eq.q, [0.0, -L], rtol=0, atol=1e-12)
    assert eq.potential == pytest.approx(-M * G * L, rel=1e-12)


@pytest.mark.parametrize("start", [[0.0, L], [-L, 0.0], [-0.2 * L, 0.98 * L], _on_rod(math.pi + 0.3)])
def test_cartesian_pendulum_with_a_constant_load_leans_with_it(start: list[float]) -> None:
    F = 3.0  # N, along +x
    eq = mbvi.equilibrium(cartesian_pendulum((F, 0.0)), initial_state=mbvi.State(start, [0.0, 0.0]))
    resultant = math.hypot(F, M * G)
    phi = math.atan2(F, M * G)  # the rod lines up with the resultant of weight and load
    np.testing.assert_allclose(eq.q, _on_rod(phi), rtol=0, atol=1e-12)
    assert eq.potential == pytest.approx(-L * resultant, rel=1e-12)  # U − W = M g y − F x
    np.testing.assert_allclose(eq.multipliers, [resultant / (2 * L)], rtol=1e-10)
    assert eq.stable


def test_torque_on_cartesian_coordinates_from_the_top_finds_the_stable_balance() -> None:
    """A torque τ (no potential in x, y) balances the weight at sin θ = τ/(M g L); the other balance is a maximum."""
    tau = 0.5 * M * G * L
    x, y, vx, vy = sp.symbols("x y vx vy")
    system = mbvi.LagrangianSystem(
        M * (vx**2 + vy**2) / 2 - M * G * y,
        coordinates=[x, y],
        velocities=[vx, vy],
        constraints=[x**2 + y**2 - L**2],
        force=[-tau * y / L**2, tau * x / L**2],
    )
    theta = math.asin(tau / (M * G * L))
    for start in ([0.0, L], _on_rod(math.pi - theta), [-L, 0.0]):
        eq = mbvi.equilibrium(system, initial_state=start)
        np.testing.assert_allclose(eq.q, _on_rod(theta), rtol=0, atol=1e-10)
        # radial balance: the rod carries the weight's radial part, 2Lλ = M g cos θ
        np.testing.assert_allclose(eq.multipliers, [M * G * math.cos(theta) / (2 * L)], rtol=1e-9)
        assert eq.stable


# ---------------------------------------------------------------- the double pendulum in its angles
M1, M2, L1, L2 = 1.0, 1.5, 1.0, 0.8


def double_pendulum(force: float = 0.0) -> mbvi.LagrangianSystem:
    """Angles from the downward vertical; ``force`` is a constant horizontal load on the second bob, N."""
    th1, th2, w1, w2 = sp.symbols("theta1 theta2 omega1 omega2")
    T = (M1 + M2) * L1**2 * w1**2 / 2 + M2 * L2**2 * w2**2 / 2 + M2 * L1 * L2 * w1 * w2 * sp.cos(th1 - th2)
    V = -(M1 + M2) * G * L1 * sp.cos(th1) - M2 * G * L2 * sp.cos(th2)
    Q = [force * L1 * sp.cos(th1), force * L2 * sp.cos(th2)]  # F · ∂x₂/∂θ, x₂ = L1 sin θ1 + L2 sin θ2
    return mbvi.LagrangianSystem(T - V, coordinates=[th1, th2], velocities=[w1, w2], force=Q if force else None)


@pytest.mark.parametrize("start", [[math.pi, math.pi], [0.0, math.pi], [math.pi, 0.0], [3.0, -2.5]])
def test_double_pendulum_from_inverted_or_saddle_starts_hangs(start: list[float]) -> None:
    eq = mbvi.equilibrium(double_pendulum(), initial_state=mbvi.State(start, [0.0, 0.0]))
    np.testing.assert_allclose(np.cos(eq.q), [1.0, 1.0], rtol=0, atol=1e-14)  # hanging, up to whole turns
    assert eq.potential == pytest.approx(-(M1 + M2) * G * L1 - M2 * G * L2, rel=1e-12)
    assert eq.stable
    # ω² of the small oscillations: K v = ω² M v with the hanging mass and stiffness matrices
    mass = np.array([[(M1 + M2) * L1**2, M2 * L1 * L2], [M2 * L1 * L2, M2 * L2**2]])
    stiffness = np.diag([(M1 + M2) * G * L1, M2 * G * L2])
    omega2 = np.sort(np.linalg.eigvals(np.linalg.solve(mass, stiffness)).real)
    np.testing.assert_allclose(eq.tangent_eigenvalues, omega2, rtol=1e-10)


def test_double_pendulum_with_a_constant_load_from_inverted_leans_with_it() -> None:
    F = 5.0
    eq = mbvi.equilibrium(double_pendulum(F), initial_state=mbvi.State([math.pi, math.pi], [0.0, 0.0]))
    # each rod lines up with the load below it: tan θ1 = F/((m1 + m2) g), tan θ2 = F/(m2 g)
    expected = [math.atan2(F, (M1 + M2) * G), math.atan2(F, M2 * G)]
    np.testing.assert_allclose(np.mod(eq.q + math.pi, 2 * math.pi) - math.pi, expected, rtol=0, atol=1e-12)
    heights = -(M1 + M2) * G * L1 * math.cos(expected[0]) - M2 * G * L2 * math.cos(expected[1])
    work = F * (L1 * math.sin(expected[0]) + L2 * math.sin(expected[1]))  # F x₂, whatever the whole turns
    assert eq.potential == pytest.approx(heights - work, rel=1e-10)
    assert eq.stable


# ---------------------------------------------------------------- what the errors tell the user to do
def test_solver_error_hints_at_the_keyword_equilibrium_accepts() -> None:
    system = cartesian_pendulum()  # q = 0 is the centre of the circle: no way onto the rod from there
    with pytest.raises(mbvi.SolverError, match=r"initial_state=") as info:
        mbvi.equilibrium(system)
    assert "initial=" not in str(info.value)
    # and the hinted keyword works
    eq = mbvi.equilibrium(system, initial_state=mbvi.State([0.1, 1.0], [0.0, 0.0]))
    np.testing.assert_allclose(eq.q, [0.0, -L], rtol=0, atol=1e-12)


def test_no_minimum_is_a_solver_error_not_a_maximum() -> None:
    """A bead on a straight wire sloping down forever has no equilibrium at all."""
    x, y, vx, vy = sp.symbols("x y vx vy")
    bead = mbvi.LagrangianSystem(
        (vx**2 + vy**2) / 2 - G * y, coordinates=[x, y], velocities=[vx, vy], constraints=[y - x]
    )
    with pytest.raises(mbvi.SolverError, match=r"did not converge.*initial_state="):
        mbvi.equilibrium(bead, initial_state=[0.0, 0.0])


@pytest.mark.parametrize("units", [1.0, 1e-14, 1e10])
def test_the_balance_does_not_depend_on_the_units_of_the_lagrangian(units: float) -> None:
    """L and c·L have the same equilibria and modes: the pendulum in its angle (θ from the top) hangs at θ = π
    with ω² = g. An absolute force floor of 1 stopped the descent of c = 1e-14 at θ = 2.5 and called it stable."""
    th, w = sp.symbols("theta omega")
    eq = mbvi.equilibrium(mbvi.LagrangianSystem(units * (w**2 / 2 - G * sp.cos(th)), [th], [w]))
    assert eq.q[0] == pytest.approx(math.pi, abs=1e-9)
    assert eq.stable
    assert eq.tangent_eigenvalues[0] == pytest.approx(G, rel=1e-9)


def test_small_loads_balance_as_they_do_in_a_scene() -> None:
    """A 0.1 µg bead on a 1 mm thread pushed sideways by 0.5 nN leans to tan θ = f/(mg), as the same Scene does; a
    slow pendulum of ω² = 9.81e-14 1/s² hangs and is stable (both were absolute-tolerance casualties)."""
    th, w = sp.symbols("theta omega")
    m, length, f = 1e-10, 1e-3, 5e-10
    bead = mbvi.LagrangianSystem(
        m * length**2 * w**2 / 2 + m * G * length * sp.cos(th), [th], [w], force=[f * length * sp.cos(th)]
    )
    eq = mbvi.equilibrium(bead)
    assert eq.q[0] == pytest.approx(math.atan(f / (m * G)), abs=1e-9)
    assert eq.stable
    slow = mbvi.equilibrium(mbvi.LagrangianSystem(w**2 / 2 - 9.81e-14 * sp.cos(th), [th], [w]))
    assert slow.q[0] == pytest.approx(math.pi, abs=1e-9)
    assert slow.stable
    assert slow.tangent_eigenvalues[0] == pytest.approx(9.81e-14, rel=1e-9)
