"""A LagrangianSystem's motion does not depend on the units it is written in.

Every tolerance of the Lagrangian path was once absolute somewhere (a Newton correction against 1e-12 (1 + |q|),
a mass matrix against its largest eigenvalue, an energy error against |T₀| + |U₀|), so the same motion written in
metres at the scale of atoms or of orbits drifted, was refused, or warned of round-off. References: the same
system in reduced units, and closed forms (a circular orbit, a pendulum at rest).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import sympy as sp

import mbvi


@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "implicit_euler"])
def test_a_duffing_oscillator_moves_alike_at_any_amplitude(integrator: str) -> None:
    """x → s x, k₃ → k₃/s²: the motion scaled by s is the same motion. At s = 1e-10 the absolute Newton
    tolerance (1e-12 m: 1 % of the motion) left 1.4e-5 of it in midpoint's steps and 8.5e-5 in implicit Euler's."""
    x, v = sp.symbols("x v")
    runs = {}
    for s in (1.0, 1e-10):
        system = mbvi.LagrangianSystem(v**2 / 2 - x**2 / 2 - (1.0 / s**2) * x**4 / 4, [x], [v],
                                       initial_state=mbvi.State([2.0 * s], [0.0]))  # fmt: skip
        runs[s] = mbvi.simulate(system, 10.0, 0.05, integrator=integrator).q[:, 0] / s
    assert np.max(np.abs(runs[1e-10] - runs[1.0])) < 1e-9 * 2.0


def test_a_satellite_in_metres_keeps_its_circular_orbit() -> None:
    """Polar coordinates in SI units: M = diag(m, m r²) = diag(1, 4.9e13) is positive definite, and was refused
    (its smallest eigenvalue under 1e-12 of its largest). A circular orbit keeps r = r₀ and turns 2π a period."""
    r, th, vr, w = sp.symbols("r theta v_r omega")
    gm, r0 = 3.986e14, 7.0e6
    rate = math.sqrt(gm / r0) / r0
    system = mbvi.LagrangianSystem((vr**2 + r**2 * w**2) / 2 + gm / r, [r, th], [vr, w],
                                   initial_state=mbvi.State([r0, 0.0], [0.0, rate]))  # fmt: skip
    period = 2 * math.pi / rate
    traj = mbvi.simulate(system, period, period / 2000)
    assert np.max(np.abs(traj.q[:, 0] - r0)) < 1e-9 * r0
    assert traj.q[-1, 1] == pytest.approx(2 * math.pi, rel=1e-6)


@pytest.mark.parametrize("integrator", ["verlet", "symplectic_euler_b"])
def test_a_motion_out_of_the_domain_of_l_stops_with_finite_states(integrator: str) -> None:
    """L = v²/2 − log x pulls the particle into x = 0. The compiled loop took log of a negative x as NaN and
    went on from a state of energy NaN; the run stops at the step that leaves the domain, saying so."""
    x, v = sp.symbols("x v")
    system = mbvi.LagrangianSystem(v**2 / 2 - sp.log(x), [x], [v], initial_state=mbvi.State([1.0], [-3.0]))
    with pytest.raises(mbvi.SolverError, match="cannot be evaluated where the step went") as err:
        mbvi.simulate(system, 3.0, 1e-2, integrator=integrator)
    traj = err.value.trajectory
    assert np.all(traj.q > 0.0)
    assert np.all(np.isfinite(traj.energy))


def test_a_pendulum_at_rest_where_u_is_zero_is_no_energy_error() -> None:
    """A Cartesian pendulum resting in its balance under tilted gravity, U = 0 there: it moves by 1e-13 m of
    round-off, and its 3e-15 J was judged against T₀ + U₀ = 0, 100 % of its motion, with a warning."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    g, length, tilt = 9.81, 0.7, 0.3
    potential = g * (-x * math.sin(tilt) + y * math.cos(tilt) + length)
    system = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - potential, [x, y], [vx, vy],
                                   constraints=[x**2 + y**2 - length**2],
                                   initial_state=mbvi.State([length * math.sin(tilt), -length * math.cos(tilt)],
                                                            [0.0, 0.0]))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = mbvi.simulate(system, 2.0, 1e-3)
    assert traj.info["energy_error"] < 1e-9


def test_a_coordinate_may_be_named_like_a_function_l_calls() -> None:
    """A coordinate named cos in L = v²/2 + 3 cos(q) shadowed math.cos in the numerical forms (TypeError)."""
    v = sp.Symbol("v")
    runs = []
    for name in ("cos", "x"):
        q = sp.Symbol(name)
        system = mbvi.LagrangianSystem(v**2 / 2 + 3 * sp.cos(q), [q], [v], initial_state=mbvi.State([1.0], [0.0]))
        runs.append(mbvi.simulate(system, 1.0, 1e-3).q)
    np.testing.assert_array_equal(runs[0], runs[1])


def test_an_argon_dimer_in_metres_balances_at_two_to_the_sixth_sigma() -> None:
    """The Lennard-Jones minimum r = 2^(1/6) σ, σ = 3.4e-10 m: the balance was judged over a reach of 1 m, and
    stopped 5e-6 of r short of it."""
    r, v = sp.symbols("r v")
    sigma, epsilon, mass = 3.4e-10, 1.65e-21, 6.63e-26
    potential = 4 * epsilon * ((sigma / r) ** 12 - (sigma / r) ** 6)
    dimer = mbvi.LagrangianSystem(
        mass / 4 * v**2 - potential, [r], [v], initial_state=mbvi.State([1.05 * sigma], [0.0])
    )
    eq = mbvi.equilibrium(dimer, initial_state=[1.3 * sigma])
    assert eq.q[0] == pytest.approx(2 ** (1 / 6) * sigma, rel=1e-12)
    assert eq.stable


def test_an_implicit_euler_step_that_lands_at_zero_completes() -> None:
    """Corrections were measured against |q₁| alone: a pendulum whose implicit Euler step landed within 1e-7 rad of
    θ = 0 had them held under their own round-off, and every such start failed ("Newton did not converge")."""
    th, w = sp.symbols("theta omega")
    h, v1 = 0.01, 1.0
    for q1 in (1e-6, 1e-9, 1e-12, 0.0):
        q0, v0 = q1 - h * v1, v1 + h * math.sin(q1)  # implicit Euler's step from (q0, v0) lands at q1
        system = mbvi.LagrangianSystem(w**2 / 2 + sp.cos(th), [th], [w], initial_state=mbvi.State([q0], [v0]))
        run = mbvi.simulate(system, 0.05, h, "implicit_euler")
        assert run.q[1, 0] == pytest.approx(q1, abs=1e-14)
        sim = mbvi.Simulator(system, dt=h, integrator="implicit_euler")
        sim.step(5)
        assert sim.state.q[0] == pytest.approx(run.q[-1, 0], abs=1e-12)


def test_a_pendulum_far_from_its_coordinates_origin_is_judged_as_at_it() -> None:
    """The least energy in motion was a thousandth of |∂L/∂q| |q₀|: the same Cartesian pendulum hung 1e4 m up had
    its 12 % energy error judged as 0.15 %, and no warning."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    errors = []
    for y0 in (0.0, 1e4):
        L = (vx**2 + vy**2) / 2 - 9.81 * (y - y0)
        start = mbvi.State([math.sin(0.5), y0 - math.cos(0.5)], [0.0, 0.0])
        system = mbvi.LagrangianSystem(L, [x, y], [vx, vy], constraints=[x**2 + (y - y0) ** 2 - 1.0],
                                       initial_state=start)  # fmt: skip
        with pytest.warns(RuntimeWarning, match="energy"):
            run = mbvi.simulate(system, 10.0, 0.07, "symplectic_euler_a")
        errors.append(run.info["energy_error"])
    assert errors[0] > 0.1 and errors[1] == pytest.approx(errors[0], rel=1e-3)


def test_a_neutral_balance_is_not_called_stable() -> None:
    """A bead on the ring x² + y² = 1 in U = (x² + y²)²: every point balances, the tangent curvature is 0. Its
    round-off eigenvalues (1e-16) were judged against themselves and called stable."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    ring = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - (x**2 + y**2) ** 2, [x, y], [vx, vy],
                                 constraints=[x**2 + y**2 - 1])  # fmt: skip
    for a in (0.3, 2.0, 2.9):
        eq = mbvi.equilibrium(ring, initial_state=[math.cos(a), math.sin(a)])
        assert abs(eq.tangent_eigenvalues).max() < 1e-12 and not eq.stable
    pendulum = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - 9.81 * y, [x, y], [vx, vy], constraints=[x**2 + y**2 - 1])
    assert mbvi.equilibrium(pendulum, initial_state=[0.1, -1.0]).stable  # (a hanging one still is)
