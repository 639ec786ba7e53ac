"""A LagrangianSystem run keeps the promises a scene's run keeps (found by a review as an expert user would):
too large a step warns or fails instead of returning nonsense, a Lagrangian evaluated outside its domain is a
located SolverError, a batch ends at t_end, and input is read as written (kinks, parameters with assumptions,
constraints on velocities or time, Newton options)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import sympy as sp
from scipy import special

import mbvi

r, th, vr, vth = sp.symbols("r theta v_r v_theta")


def kepler(e: float = 0.9) -> tuple[mbvi.LagrangianSystem, float]:
    """The Kepler problem in polar coordinates (GM = 1), released at perihelion r = 0.1 of an orbit of
    eccentricity e; its period 2π a^{3/2}."""
    a = 0.1 / (1 - e)
    start = mbvi.State([0.1, 0.0], [0.0, math.sqrt((1 + e) / 0.1) / 0.1])
    system = mbvi.LagrangianSystem((vr**2 + r**2 * vth**2) / 2 + 1 / r, [r, th], [vr, vth], initial_state=start)
    return system, 2 * math.pi * a**1.5


@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "symplectic_euler_b"])
def test_a_step_too_large_for_a_conservative_lagrangian_warns_naming_the_energy_error(integrator: str) -> None:
    """Kepler at e = 0.9 with 20 steps an orbit: the energy went from −0.5 to +70 (an unbound orbit), silently."""
    system, period = kepler()
    with pytest.warns(RuntimeWarning, match=rf"{integrator}.*energy E = v·∂L/∂v − L.*strayed.*reduce dt"):
        traj = mbvi.simulate(system, period, period / 20, integrator)
    assert traj.info["energy_error"] > 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # a step that resolves the orbit: silent, and accurate
        fine = mbvi.simulate(system, period, period / 20000, integrator)
    assert fine.info["energy_error"] < 0.1
    assert abs(fine.energy[-1] - fine.energy[0]) < 0.05 * abs(fine.energy[0])


def test_a_failed_step_gives_a_hint_a_run_has_verified() -> None:
    """The double pendulum in its angles at dt = 0.5 s: Newton cannot solve verlet's first step. The hint was
    dt/4, said "not verified"; the compiled run verifies it by re-running (as a scene's), and a run at it
    completes within 1 % of its energy in motion. (Kepler at e = 0.9 with 100 steps an orbit, the case this
    test had, failed by a hair: its Newton converges or not on the last digit of an absolute tolerance.)"""
    from scene_loader import load_scene

    system = load_scene("double_pendulum_angles").build()
    with pytest.raises(mbvi.SolverError, match=r"try dt <= .* \(verified: a run at that dt completes") as err:
        mbvi.simulate(system, 10.0, 0.5, "verlet")
    assert err.value.verified_dt is True and err.value.trajectory is not None
    assert err.value.suggested_dt < 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # within 1 % of the energy in motion: no warning
        run = mbvi.simulate(system, 10.0, err.value.suggested_dt, "verlet", save_every=50)
    assert run.t[-1] == pytest.approx(10.0)


def test_a_numpy_path_blow_up_names_its_start_and_says_its_hint_is_not_verified() -> None:
    """explicit_euler (NumPy: a re-run may take long, so its hint is said to be unverified) on a stiff oscillator
    at dt = 0.01 failed on non-finite values at step 10; the balance broke well before, where the error now is."""
    x, v = sp.symbols("x v")
    system = mbvi.LagrangianSystem(v**2 / 2 - 1e6 * x**2 / 2 - 1e6 * x**4, [x], [v],
                                   initial_state=mbvi.State([0.1], [0.0]))  # fmt: skip
    with pytest.raises(mbvi.SolverError, match=r"the run blew up.*try dt <= .* \(not verified\)") as err:
        mbvi.simulate(system, 1.0, 0.01, "explicit_euler")
    assert err.value.verified_dt is False and err.value.step < 10
    assert np.isfinite(err.value.trajectory.energy).all()


@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "explicit_euler", "csm"])
def test_leaving_the_domain_of_l_is_a_located_solver_error(integrator: str) -> None:
    """L = v²/2 + √(1 − x²) started at v = 2 leaves |x| ≤ 1: a bare "math domain error" before."""
    x, v = sp.symbols("x v")
    system = mbvi.LagrangianSystem(v**2 / 2 + sp.sqrt(1 - x**2), [x], [v], initial_state=mbvi.State([0.0], [2.0]))
    with pytest.raises(mbvi.SolverError, match="domain of L") as err:
        mbvi.simulate(system, 2.0, 1e-2, integrator)
    assert err.value.time is not None and err.value.trajectory is not None


def test_a_batch_ends_at_t_end_as_each_serial_run_does() -> None:
    th1, w1 = sp.symbols("theta omega")
    system = mbvi.LagrangianSystem(w1**2 / 2 + sp.cos(th1), [th1], [w1])
    states = (np.array([[0.5], [1.0]]), np.array([[0.0], [0.3]]))
    batch = mbvi.simulate_batch(system, 1.005, 0.01, initial_states=states)
    for b, traj in enumerate(batch):
        serial = mbvi.simulate(system, 1.005, 0.01, initial_state=mbvi.State(states[0][b], states[1][b]))
        assert traj.t[-1] == pytest.approx(1.005) and np.array_equal(traj.q, serial.q)


def test_kinks_abs_and_sign_are_read_away_from_the_kink() -> None:
    """|x| in L and sign(v) in Q: sympy's derivative of |x| for a symbol not declared real held re, im and an
    unprintable Derivative (construction failed); sign's held a DiracDelta (every step failed)."""
    x, v = sp.symbols("x v")
    v_shape = mbvi.LagrangianSystem(v**2 / 2 - sp.Abs(x), [x], [v], initial_state=mbvi.State([1.0], [0.0]))
    traj = mbvi.simulate(v_shape, 1.0, 1e-2)  # a constant force −1 while x > 0: x = 1 − t²/2
    np.testing.assert_allclose(traj.q[:, 0], 1 - traj.t**2 / 2, atol=1e-12)
    coulomb = mbvi.LagrangianSystem(v**2 / 2, [x], [v], force=[-0.5 * sp.sign(v)],
                                    initial_state=mbvi.State([0.0], [1.0]))  # fmt: skip
    traj = mbvi.simulate(coulomb, 1.0, 1e-3)  # v = 1 − t/2 while it slides
    np.testing.assert_allclose(traj.v[:, 0], 1 - traj.t / 2, atol=1e-9)


def test_a_parameter_is_matched_by_name_whatever_its_assumptions() -> None:
    k_pos = sp.Symbol("k", positive=True)
    x, v = sp.symbols("x v")
    for L, params in ((v**2 / 2 - k_pos * x**2 / 2, {"k": 4.0}), (v**2 / 2 - k_pos * x**2 / 2, {sp.Symbol("k"): 4.0})):
        system = mbvi.LagrangianSystem(L, [x], [v], parameters=params, initial_state=mbvi.State([1.0], [0.0]))
        traj = mbvi.simulate(system, 1.0, 1e-3)
        np.testing.assert_allclose(traj.q[:, 0], np.cos(2 * traj.t), atol=1e-5)


@pytest.mark.parametrize(("constraint", "role"), [("velocity", "the velocity"), ("time", "time")])
def test_a_constraint_on_a_velocity_or_on_time_says_so(constraint: str, role: str) -> None:
    x, y, vx, vy, t = sp.symbols("x y v_x v_y t")
    g = x * vx + y * vy if constraint == "velocity" else x**2 + y**2 - 1 - t
    with pytest.raises(ValueError, match=rf"constraint 0 .* depends on {role}.*holonomic") as err:
        mbvi.LagrangianSystem((vx**2 + vy**2) / 2, [x, y], [vx, vy], constraints=[g])
    assert "pass parameters" not in str(err.value)  # it told the user to give the velocity a value


@pytest.mark.parametrize(("option", "value"), [("tol", -1.0), ("tol", "a"), ("maxiter", 0), ("maxiter", 2.5)])
def test_newton_options_are_checked(option: str, value) -> None:
    th1, w1 = sp.symbols("theta omega")
    system = mbvi.LagrangianSystem(w1**2 / 2 + sp.cos(th1), [th1], [w1], initial_state=mbvi.State([0.5], [0.0]))
    with pytest.raises(ValueError, match=rf"option {option!r}"):
        mbvi.simulate(system, 0.1, 1e-2, "verlet", **{option: value})


def test_polar_coordinates_need_no_start_at_construction_and_a_singular_start_is_refused() -> None:
    """M = diag(1, r²) is singular at r = 0 only: the Kepler problem is built without an initial_state (it was a
    ValueError: the check was made at q = 0), and a run from r = 0 is a ValueError naming the start."""
    system = mbvi.LagrangianSystem((vr**2 + r**2 * vth**2) / 2 + 1 / r, [r, th], [vr, vth])
    traj = mbvi.simulate(system, 2 * math.pi, 1e-3, initial_state=mbvi.State([1.0, 0.0], [0.0, 1.0]))
    np.testing.assert_allclose(traj.q[-1], [1.0, 2 * math.pi], atol=1e-5)  # the circular orbit, once round
    with pytest.raises(ValueError, match=r"not positive definite at the initial state q = \[0\.0, 0\.0\]"):
        mbvi.simulate(system, 1.0, 1e-3, initial_state=mbvi.State([0.0, 0.0], [0.0, 1.0]))
    with pytest.raises(ValueError, match="not positive definite at q = 0"):  # negative everywhere: still refused
        mbvi.LagrangianSystem(-(vr**2 + r**2 * vth**2) / 2, [r, th], [vr, vth])


t, w = sp.symbols("t omega")


def shaken_pendulum() -> mbvi.LagrangianSystem:
    """A pendulum (1 m, 1 kg) whose support moves as 5 cm cos(30 t), the motion written into L (explicit t)."""
    ys = 0.05 * sp.cos(30 * t)
    x, y = sp.sin(th), ys - sp.cos(th)
    vx, vy = sp.diff(x, th) * w, sp.diff(y, th) * w + sp.diff(ys, t)
    L = (vx**2 + vy**2) / 2 - 9.81 * y
    return mbvi.LagrangianSystem(L, [th], [w], time=t, initial_state=mbvi.State([0.5], [0.0]))


def driven_oscillator() -> mbvi.LagrangianSystem:
    """ẍ + 0.3 ẋ + 4 x = sin 1.9 t: a damper and a drive in Q."""
    return mbvi.LagrangianSystem(
        w**2 / 2 - 2 * th**2, [th], [w], force=[-0.3 * w + sp.sin(1.9 * t)], time=t,
        initial_state=mbvi.State([1.0], [0.0]),
    )  # fmt: skip


@pytest.mark.parametrize("build, coarse", [(shaken_pendulum, 0.2), (driven_oscillator, 0.9)])
def test_a_forced_or_time_dependent_run_is_judged_by_its_energy_balance(build, coarse: float) -> None:
    """E − W, W = ∫ (Q·v − ∂L/∂t) dt: kept to 1e-3 of the energy in motion at dt = 1e-3 (a wrong sign or a
    missing term in W leaves an imbalance of the order of the work itself), a warning at a step that does not
    resolve the motion (these returned nonsense silently: only conservative Lagrangians were judged)."""
    system = build()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        fine = mbvi.simulate(system, 20.0, 1e-3)
    assert fine.info["energy_error"] < 1e-3
    with pytest.warns(RuntimeWarning, match=r"energy balance E − W.*strayed.*reduce dt"):
        mbvi.simulate(system, 50.0, coarse)
    with warnings.catch_warnings():  # samples too far apart to integrate the work by: not judged
        warnings.simplefilter("error", RuntimeWarning)
        sparse = mbvi.simulate(system, 50.0, coarse, save_every=10)
    assert "energy_error" not in sparse.info


def test_only_two_free_angles_are_drawn_on_a_torus(tmp_path, monkeypatch) -> None:
    """A coordinate is an angle when L (and Q, g) do not see it turn by 2π: polar r is not (its picture was a
    torus of 'angles' r and θ), the double pendulum's two angles are."""
    import mbvi.render.torus as torus_module
    from mbvi.lagrangian.picture import picture

    polar = mbvi.LagrangianSystem((vr**2 + r**2 * vth**2) / 2 + 1 / r, [r, th], [vr, vth])
    assert polar.angles == (False, True)
    a, b, wa, wb = sp.symbols("a b w_a w_b")
    L = wa**2 + wb**2 / 2 + wa * wb * sp.cos(a - b) + 2 * sp.cos(a) + sp.cos(b)
    double = mbvi.LagrangianSystem(L, [a, b], [wa, wb])
    assert double.angles == (True, True)
    # cyclic coordinates (L does not read them): a cart's x is no angle, a free particle's x, y neither
    x, vx = sp.symbols("x v_x")
    cart = mbvi.LagrangianSystem(vx**2 + vx * wa * sp.cos(a) + wa**2 / 2 - 9.81 * sp.cos(a), [x, a], [vx, wa])
    assert cart.angles == (False, True)
    y, vy = sp.symbols("y v_y")
    assert mbvi.LagrangianSystem((vx**2 + vy**2) / 2, [x, y], [vx, vy]).angles == (False, False)
    drawn = []
    monkeypatch.setattr(torus_module, "torus", lambda traj, out, **kw: drawn.append("torus"))
    orbit = mbvi.simulate(polar, 1.0, 1e-2, initial_state=mbvi.State([1.0, 0.0], [0.1, 1.0]))
    picture(orbit, tmp_path / "polar.png")
    assert drawn == [] and (tmp_path / "polar.png").stat().st_size > 0  # a phase portrait of r
    swing = mbvi.simulate(double, 1.0, 1e-2, initial_state=mbvi.State([1.0, 0.5], [0.0, 0.0]))
    picture(swing, tmp_path / "double.png")
    assert drawn == ["torus"]


@pytest.mark.parametrize(("mass", "length", "dt", "t_end"), [(1e6, 1.0, 1e-3, 1.0), (1e9, 1.0, 1e-3, 1.0),
                                                             (1.0, 1e-4, 1e-5, 0.02)])  # fmt: skip
@pytest.mark.parametrize("integrator", ["verlet", "midpoint"])
def test_a_constraint_holds_at_any_mass_and_length(mass: float, length: float, dt: float, t_end: float,
                                                   integrator: str) -> None:  # fmt: skip
    """A Cartesian pendulum (x, y; the rod as a constraint) at 1e6 kg, 1e9 kg, or 0.1 mm long: a step's matrix
    [[J, G₀ᵀ], [G₁, 0]] has J ≈ −M/h beside constraint rows of order one; unequilibrated, least squares dropped the
    constraint's direction and the rod stretched (1.2e-2 m at 1e6 kg, 29 m at 1e9 kg, 2.5 % of a 0.1 mm rod),
    silently. θ(t) does not depend on the mass, nor, in units of the length, on the length: the same run at 1 kg
    and 1 m is its reference."""
    from scipy.integrate import solve_ivp

    x, y, vx, vy = sp.symbols("x y v_x v_y")
    g = 9.81

    def run(m: float, ell: float, h: float, t1: float) -> mbvi.Trajectory:
        system = mbvi.LagrangianSystem(m * (vx**2 + vy**2) / 2 - m * g * y, [x, y], [vx, vy],
                                       constraints=[x**2 + y**2 - ell**2])  # fmt: skip
        start = mbvi.State([ell * math.sin(1.0), -ell * math.cos(1.0)], [0.0, 0.0])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return mbvi.simulate(system, t1, h, integrator, initial_state=start)

    traj = run(mass, length, dt, t_end)
    theta = math.atan2(traj.q[-1, 0], -traj.q[-1, 1])
    assert np.max(np.abs(np.hypot(traj.q[:, 0], traj.q[:, 1]) - length)) < 1e-12 * length
    exact = solve_ivp(lambda t, z: [z[1], -g / length * math.sin(z[0])], (0.0, t_end), [1.0, 0.0], rtol=1e-12,
                      atol=1e-13).y[0, -1]  # fmt: skip
    assert abs(theta - exact) < 20 * (dt * math.sqrt(g / length)) ** 2  # order 2 in ω h


def test_a_start_off_a_small_constraint_is_refused_as_at_any_scale() -> None:
    """A 0.1 mm pendulum started 4 % off its rod: x² + y² − l² is 8e-10 there, under the absolute 1e-9 the check
    used, and the run kept a rod 4 % long. The check is now a distance |g| / |∇g| in the coordinates' scale."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    ell = 1e-4
    system = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - 9.81 * y, [x, y], [vx, vy], constraints=[x**2 + y**2 - ell**2])
    with pytest.raises(ValueError, match="initial positions violate constraint 0"):
        mbvi.simulate(system, 0.01, 1e-5, initial_state=mbvi.State([1.04 * ell, 0.0], [0.0, 0.0]))
    mbvi.simulate(system, 0.001, 1e-5, initial_state=mbvi.State([ell, 0.0], [0.0, 0.0]))  # on it: runs


def test_equilibrium_of_a_cartesian_pendulum_starts_where_it_can_and_a_singular_start_is_named() -> None:
    """From q = 0 the rod's Jacobian vanishes and Newton never moved (SolverError, KKT residual 9.81): the search
    starts from the system's own initial state then. At the pole of spherical coordinates the mass matrix is
    singular: scipy's 'leading minor of B is not positive definite' became a ValueError naming it."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    pend = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - 9.81 * y, [x, y], [vx, vy], constraints=[x**2 + y**2 - 1],
                                 initial_state=mbvi.State([math.sin(1.0), -math.cos(1.0)], [0.0, 0.0]))  # fmt: skip
    eq = mbvi.equilibrium(pend)
    np.testing.assert_allclose(eq.q, [0.0, -1.0], atol=1e-12)
    assert eq.stable
    th, ph, wt, wp = sp.symbols("theta phi omega_theta omega_phi")
    sph = mbvi.LagrangianSystem((wt**2 + sp.sin(th) ** 2 * wp**2) / 2 + 9.81 * sp.cos(th), [th, ph], [wt, wp],
                                initial_state=mbvi.State([0.5, 0.0], [0.0, 1.0]))  # fmt: skip
    for call in (lambda: mbvi.equilibrium(sph), lambda: mbvi.modes(sph)):
        with pytest.raises(ValueError, match=r"the mass matrix ∂²L/∂v² is singular at q = \[0.0, 0.0\]"):
            call()


def test_a_coordinate_is_matched_by_name_whatever_its_assumptions() -> None:
    """L written with Symbol("x", real=True) (as sympy.physics users write it) and the coordinates given as "x" or
    Symbol("x"): x was 'neither a coordinate nor a parameter', and the advice given then failed ('given twice')."""
    x, vx = sp.symbols("x v_x", real=True)
    t = sp.Symbol("t", positive=True)
    plain_x, plain_v = sp.symbols("x v_x")
    reference = mbvi.LagrangianSystem(plain_v**2 / 2 - plain_x**2 / 2 - 0.1 * plain_x * sp.Symbol("t"),
                                      [plain_x], [plain_v], initial_state=mbvi.State([1.0], [0.0]))  # fmt: skip
    runs = [mbvi.simulate(reference, 2.0, 1e-2)]
    for coords, vels in ((["x"], ["v_x"]), ([plain_x], [plain_v])):
        system = mbvi.LagrangianSystem(vx**2 / 2 - x**2 / 2 - 0.1 * x * t, coords, vels,
                                       initial_state=mbvi.State([1.0], [0.0]))  # fmt: skip
        runs.append(mbvi.simulate(system, 2.0, 1e-2))
    for run in runs[1:]:
        np.testing.assert_array_equal(run.q, runs[0].q)


@pytest.mark.parametrize("integrator", ["midpoint", "implicit_euler", "verlet"])
def test_a_mass_matrix_that_vanishes_ahead_says_so_not_to_reduce_dt(integrator: str) -> None:
    """L = (1 − q²) v²/2 from q = 0 at v = 1 reaches q = 1, where ∂²L/∂v² = 0, at t = π/4: Newton's failure there
    said 'try dt <= 0.005', and at that step 'try dt <= 0.0005' — a smaller step cannot help."""
    q, v = sp.symbols("q v")
    system = mbvi.LagrangianSystem((1 - q**2) * v**2 / 2, [q], [v], initial_state=mbvi.State([0.0], [1.0]))
    with pytest.raises(mbvi.SolverError, match=r"mass matrix ∂²L/∂v² is singular or indefinite") as err:
        mbvi.simulate(system, 1.0, 1e-2, integrator)
    assert err.value.suggested_dt is None and 0.7 < err.value.time < math.pi / 4


def test_backward_euler_creeping_short_of_a_vanishing_mass_names_it() -> None:
    """From v = 2 (docs/lagrangian.md's example), implicit_euler at dt = 0.01 fails short of q = 1; two half steps
    creep on, so the hint is half the step, and re-runs show that no step size cures it. The error said only
    "Newton did not converge", naming nothing: it names the mass matrix that vanishes where the motion goes."""
    q, v = sp.symbols("q v")
    system = mbvi.LagrangianSystem((1 - q**2) * v**2 / 2, [q], [v], initial_state=mbvi.State([0.0], [2.0]))
    with pytest.raises(mbvi.SolverError, match=r"ahead the mass matrix ∂²L/∂v² is singular or indefinite"):
        mbvi.simulate(system, 2.0, 1e-2, "implicit_euler")
    # a batch's member error keeps it (SolverError.ahead was None there)
    with pytest.raises(mbvi.SolverError, match="member 0 of 2") as err:
        mbvi.simulate_batch(system, 2.0, 1e-2, initial_states=(np.array([[0.0], [0.0]]), np.array([[2.0], [1.9]])),
                            integrator="implicit_euler")  # fmt: skip
    assert err.value.ahead is not None and "mass matrix ∂²L/∂v² is singular or indefinite" in err.value.ahead


x_, v_ = sp.symbols("x v")


@pytest.mark.parametrize(
    ("integrator", "dt"), [("explicit_euler", 0.05), ("explicit_euler", 0.5), ("implicit_euler", 0.9), ("verlet", 0.25)]
)
def test_a_blow_up_is_never_returned_silently_by_any_integrator(integrator: str, dt: float) -> None:
    """A harmonic oscillator (ω = 10 rad/s) past every method's stable step, or explicit Euler's growth (1 + h²ω²)
    a step, blows up: the variational ones raise a located SolverError with the states up to it, the baselines
    warn that the run blew up (both returned 1e28-m results with no word: the energy in motion the balance was
    judged against grew with the blow-up itself)."""
    oscillator = mbvi.LagrangianSystem(v_**2 / 2 - 50 * x_**2, [x_], [v_], initial_state=mbvi.State([1.0], [0.0]))
    if integrator == "implicit_euler":  # damps: it does not blow up, and nothing is said
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            traj = mbvi.simulate(oscillator, 30.0, dt, integrator)
        assert np.abs(traj.q).max() <= 1.0
        return
    if integrator == "verlet":  # h ω = 2.5 > 2
        with pytest.raises(mbvi.SolverError, match="blew up") as info:
            mbvi.simulate(oscillator, 5.0, dt, integrator)
        partial = info.value.trajectory
        assert 1 < len(partial.t) < 21 and info.value.time == pytest.approx(partial.t[-1])
        assert np.isfinite(partial.q).all()
        return
    with pytest.warns(RuntimeWarning, match=rf"{integrator}.*blew up"):
        traj = mbvi.simulate(oscillator, 30.0, dt, integrator)
    assert np.abs(traj.q).max() > 1e6  # (the run it warns about did blow up)


def test_a_baseline_run_that_ends_in_nan_warns_and_reports_an_infinite_energy_error() -> None:
    """The double pendulum in its angles at dt = 0.5 under explicit Euler: its angles reach 1e85 and then NaN; the
    run said nothing and its energy_error was NaN."""
    t1, t2, w1, w2 = sp.symbols("theta1 theta2 omega1 omega2")
    lagrangian = w1**2 + w2**2 / 2 + w1 * w2 * sp.cos(t1 - t2) + 2 * 9.81 * sp.cos(t1) + 9.81 * sp.cos(t2)
    system = mbvi.LagrangianSystem(lagrangian, [t1, t2], [w1, w2], initial_state=mbvi.State([1.5, 1.0], [0.0, 0.0]))
    with pytest.warns(RuntimeWarning, match="explicit_euler.*blew up"):
        traj = mbvi.simulate(system, 5.0, 0.5, "explicit_euler")
    assert traj.info["energy_error"] == math.inf


def test_a_slow_start_from_zero_energy_is_not_taken_for_a_blow_up() -> None:
    """U = 0 and T = 0 at the start (a pendulum released horizontal, U = −g cos θ): the energy in play at the start
    is zero, and an accurate run's round-off must not be judged against it."""
    t, w = sp.symbols("theta omega")
    system = mbvi.LagrangianSystem(w**2 / 2 + 9.81 * sp.cos(t), [t], [w], initial_state=mbvi.State([math.pi / 2], [0]))
    for integrator in ("verlet", "explicit_euler"):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            traj = mbvi.simulate(system, 2.0, 1e-4, integrator)
        assert abs(traj.q[-1, 0]) <= math.pi / 2 + 1e-2


@pytest.mark.parametrize(
    ("lagrangian", "message"),
    [
        (v_**2 / 2 + sp.zoo, "infinity or NaN"),
        (v_**2 / 2 + sp.nan * x_, "infinity or NaN"),
        (sp.true, "not an expression"),
        (sp.Eq(v_**2 / 2, x_), "an equation or inequality, not an expression"),
    ],
)
def test_a_lagrangian_that_is_not_a_finite_expression_is_a_value_error_saying_so(lagrangian, message: str) -> None:
    """zoo escaped as KeyError('ComplexInfinity'), an equation or True as AttributeError, nan·x as 'the mass matrix
    is not positive definite'."""
    with pytest.raises(ValueError, match=f"LagrangianSystem: Lagrangian .*{message}"):
        mbvi.LagrangianSystem(lagrangian, [x_], [v_])


def test_a_constraint_may_be_written_as_an_equation() -> None:
    """Eq(x² + y², 1) is the constraint x² + y² − 1 = 0 (it raised AttributeError); an inequality is refused."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    lagrangian = (vx**2 + vy**2) / 2 - 9.81 * y
    start = mbvi.State([1.0, 0.0], [0.0, 0.0])
    as_equation = mbvi.LagrangianSystem(lagrangian, [x, y], [vx, vy], constraints=[sp.Eq(x**2 + y**2, 1)],
                                        initial_state=start)  # fmt: skip
    as_expression = mbvi.LagrangianSystem(lagrangian, [x, y], [vx, vy], constraints=[x**2 + y**2 - 1],
                                          initial_state=start)  # fmt: skip
    a, b = mbvi.simulate(as_equation, 1.0, 1e-3), mbvi.simulate(as_expression, 1.0, 1e-3)
    np.testing.assert_array_equal(a.q, b.q)
    assert np.abs(np.hypot(a.q[:, 0], a.q[:, 1]) - 1).max() < 1e-12
    with pytest.raises(ValueError, match="constraint x < 1 is an equation or inequality"):
        mbvi.LagrangianSystem(lagrangian, [x, y], [vx, vy], constraints=[x < 1])


def near_the_top() -> mbvi.LagrangianSystem:
    """A pendulum with U = −g(1 + cos θ), zero at the top, released 1e-6 rad from it: ~1e-12 J in play at the
    start, and the first tenth of a run creeping off the top."""
    t, w = sp.symbols("theta omega")
    return mbvi.LagrangianSystem(w**2 / 2 + 9.81 * (1 + sp.cos(t)), [t], [w],
                                 initial_state=mbvi.State([math.pi - 1e-6], [0.0]))  # fmt: skip


@pytest.mark.parametrize(("integrator", "dt"), [("implicit_euler", 0.05), ("symplectic_euler_a", 0.1)])
def test_a_run_that_loses_energy_or_strays_boundedly_from_no_energy_is_no_blow_up(integrator: str, dt: float) -> None:
    """Implicit Euler only loses energy and was judged "the run blew up" against the 1e-7 J of the start; symplectic
    Euler at dt = 0.1 strays boundedly (12 %: it warns so), and a Simulator's own judgement raised a SolverError for
    it ("6.9e-9 J against 4.9e-12 J")."""
    system = near_the_top()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traj = mbvi.simulate(system, 20.0, dt, integrator)
        sim = mbvi.Simulator(system, dt=dt, integrator=integrator)
        sim.step(round(20.0 / dt))
        simulated = sim.trajectory()
    assert not [w for w in caught if "blew up" in str(w.message)]
    assert np.abs(traj.q).max() < 4 * math.pi and traj.energy.max() <= 3.0  # bounded: E ≤ 0 at the top, ±12 %
    np.testing.assert_array_equal(simulated.q, traj.q)
    if integrator == "implicit_euler":
        assert traj.energy.max() <= traj.energy[0] + 1e-12  # it only loses energy


def test_a_growing_forced_motion_saved_coarsely_is_not_judged_by_its_coarse_work() -> None:
    """A swing pumped at twice its frequency (L = v²/2 − (1 + 0.2 cos 2t) x²/2) grows as e^{0.05 t} — 2e4 in 64π s —
    and verlet at dt = π/1000 follows it (balance 1e-6 of the motion when every step is saved). Saved every 500
    steps its work's quadrature is too coarse to judge by, and the run was a "blow-up" SolverError."""
    x, v, t = sp.symbols("x v t")
    swing = mbvi.LagrangianSystem(v**2 / 2 - (1 + 0.2 * sp.cos(2 * t)) * x**2 / 2, [x], [v],
                                  initial_state=mbvi.State([1.0], [0.0]))  # fmt: skip
    fine = mbvi.simulate(swing, 64 * math.pi, math.pi / 1000)
    assert fine.info["energy_error"] < 1e-5 and np.abs(fine.q).max() > 1e3
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        coarse = mbvi.simulate(swing, 64 * math.pi, math.pi / 1000, save_every=500)
    np.testing.assert_array_equal(coarse.q, fine.q[::500])
    assert "energy_error" not in coarse.info


def test_a_batch_of_a_lagrangian_system_is_judged_as_each_run_is() -> None:
    """simulate_batch never judged a LagrangianSystem's members: explicit Euler returned |q| = 5e4 and verlet past
    its stable step 5e11, silently."""
    oscillator = mbvi.LagrangianSystem(v_**2 / 2 - 50 * x_**2, [x_], [v_])
    starts = [mbvi.State([1.0], [0.0]), mbvi.State([0.5], [0.0])]
    with pytest.raises(mbvi.SolverError, match=r"members? 0.*blew up") as info:
        mbvi.simulate_batch(oscillator, 5.0, 0.25, starts, integrator="verlet")
    assert len(info.value.trajectory) == 2 and all(np.isfinite(tr.q).all() for tr in info.value.trajectory)
    with pytest.warns(RuntimeWarning, match=r"simulate_batch: members 0, 1 of 2: integrator 'explicit_euler'"):
        trajs = mbvi.simulate_batch(oscillator, 30.0, 0.05, starts, integrator="explicit_euler")
    assert min(np.abs(tr.q).max() for tr in trajs) > 1e6
    with warnings.catch_warnings():  # an accurate batch says nothing, and each member keeps its own figure
        warnings.simplefilter("error", RuntimeWarning)
        calm = mbvi.simulate_batch(oscillator, 5.0, 1e-3, starts, integrator="verlet")
    assert calm[0].info is not calm[1].info  # (one dict shared, the last member's figure was every member's)
    for tr in calm:  # the figure is each member's own: its largest energy change over its energy in motion
        motion = max(tr.kinetic.max(), np.ptp(tr.potential))
        assert tr.info["energy_error"] == pytest.approx(np.abs(tr.energy - tr.energy[0]).max() / motion, rel=1e-9)
        assert tr.info["energy_error"] < 1e-4


def test_a_parameter_that_makes_l_infinite_is_named() -> None:
    """v²/(2m) with m = 0 raised KeyError('ComplexInfinity') after the substitution."""
    m = sp.Symbol("m")
    with pytest.raises(
        ValueError, match=r"Lagrangian .* has an infinity or NaN in it with the parameters given \(m = 0\)"
    ):
        mbvi.LagrangianSystem(v_**2 / (2 * m) - x_**2 / 2, [x_], [v_], parameters={"m": 0.0})


@pytest.mark.parametrize("integrator", ["symplectic_euler_a", "symplectic_euler_b", "explicit_euler", "csm"])
def test_a_run_never_steps_onto_a_singular_or_indefinite_mass_matrix(integrator: str) -> None:
    """L = (1 − q²) v²/2 from (0, 1) reaches q = 1, where ∂²L/∂v² = 0, at t = π/4. symplectic_euler_b at dt = 0.01
    stepped past it and returned 11 states of negative mass with an energy warning; symplectic_euler_a's Newton
    failed short of it asking for a smaller step, then a smaller one."""
    q, v = sp.symbols("q v")
    system = mbvi.LagrangianSystem((1 - q**2) * v**2 / 2, [q], [v], initial_state=mbvi.State([0.0], [1.0]))
    for dt in (1e-2, 1e-3):
        with pytest.raises(mbvi.SolverError, match=r"mass matrix ∂²L/∂v² is singular or indefinite") as err:
            mbvi.simulate(system, 1.0, dt, integrator)
        assert err.value.suggested_dt is None and 0.7 < err.value.time < math.pi / 4 + 2 * dt
        assert np.all(np.abs(err.value.trajectory.q) < 1.0)  # no state of negative mass returned


def test_backward_euler_does_not_run_through_a_mass_that_reaches_zero() -> None:
    """m(t) = 1 − t/10 vanishes at t = 10: implicit_euler went straight through it and returned x(15) = −9.5e6
    with no warning."""
    x, v, t = sp.symbols("x v t")
    system = mbvi.LagrangianSystem((1 - t / 10) * v**2 / 2 - x**2 / 2, [x], [v], time=t,
                                   initial_state=mbvi.State([1.0], [0.0]))  # fmt: skip
    with pytest.raises(mbvi.SolverError, match=r"mass matrix ∂²L/∂v² is singular or indefinite") as err:
        mbvi.simulate(system, 15.0, 1e-3, "implicit_euler")
    assert 9.9 < err.value.time < 10.0 and err.value.trajectory.t[-1] < 10.0


@pytest.mark.parametrize("dt", [1e-2, 1e-3])
@pytest.mark.parametrize(
    "integrator", ["symplectic_euler_a", "symplectic_euler_b", "verlet", "midpoint", "explicit_euler", "implicit_euler"]
)
def test_a_step_that_lands_on_a_mass_of_zero_says_the_mass_matrix_is_singular(integrator: str, dt: float) -> None:
    """m(t) = 1 − t: the step lands on t = 1 exactly, where the mass is 0, and said only "singular Newton matrix
    (Singular matrix)". At dt = 1e-3 the Euler methods blamed the step ("two of half its size stay where L gives a
    motion; try dt <= 0.0005"): the halves landed at 0.999 + 0.0005 + 0.0005 = 1 − 1.1e-16, short of the zero."""
    x, v, t = sp.symbols("x v t")
    system = mbvi.LagrangianSystem((1 - t) * v**2 / 2 - x**2 / 2, [x], [v], time=t,
                                   initial_state=mbvi.State([1.0], [0.0]))  # fmt: skip
    with pytest.raises(mbvi.SolverError, match=r"mass matrix ∂²L/∂v² is singular or indefinite") as err:
        mbvi.simulate(system, 2.0, dt, integrator)
    assert err.value.suggested_dt is None and "any step size" in str(err.value)
    assert err.value.time == pytest.approx(1.0 - dt) and err.value.trajectory.t[-1] < 1.0


def test_the_mass_matrix_is_checked_at_the_runs_start_time() -> None:
    """It was checked at t = 0 whatever t0: m(t) = t (0 at t = 0) could not be built with a start, and
    m(t) = 1 − t/10 ran from t0 = 12, where it is −0.2, without a word."""
    x, v, t = sp.symbols("x v t")
    growing = mbvi.LagrangianSystem(t * v**2 / 2, [x], [v], time=t, initial_state=mbvi.State([1.0], [0.5]))
    run = mbvi.simulate(growing, 2.0, 1e-3, "midpoint", t0=1.0)
    assert run.q[-1, 0] == pytest.approx(1.0 + 0.5 * math.log(2.0), abs=1e-6)  # p = t ẋ = 0.5: x = 1 + ½ ln t
    sim = mbvi.Simulator(growing, dt=1e-3, integrator="midpoint", t0=1.0)
    sim.step(1000)
    assert sim.state.q[0] == pytest.approx(run.q[-1, 0], abs=1e-12)
    with pytest.raises(ValueError, match=r"not positive definite at the initial state .* t = 0 s"):
        mbvi.simulate(growing, 1.0, 1e-3)
    bare = mbvi.LagrangianSystem(t * v**2 / 2, [x], [v], time=t)  # built: its mass is checked where a run starts
    assert mbvi.simulate(bare, 2.0, 1e-3, "midpoint", t0=1.0, initial_state=mbvi.State([1.0], [0.5])).q[-1, 0] == (
        pytest.approx(run.q[-1, 0], abs=1e-12))  # fmt: skip
    shrinking = mbvi.LagrangianSystem((1 - t / 10) * v**2 / 2 - x**2 / 2, [x], [v], time=t)
    start = mbvi.State([1.0], [0.0])
    for call in (lambda: mbvi.simulate(shrinking, 14.0, 1e-3, t0=12.0, initial_state=start),
                 lambda: mbvi.Simulator(shrinking, dt=1e-3, t0=12.0, initial_state=start)):  # fmt: skip
        with pytest.raises(ValueError, match=r"not positive definite at the initial state .* t = 12 s"):
            call()


def _particle_reference(accel, x0: float, t_end: float) -> float:
    from scipy.integrate import solve_ivp

    sol = solve_ivp(lambda _t, y: [y[1], accel(y[0])], (0.0, t_end), [x0, 0.0], rtol=1e-12, atol=1e-12)
    return float(sol.y[0, -1])


@pytest.mark.parametrize(
    ("potential", "accel"),
    [
        (lambda x: sp.erf(x), lambda x: -2 / math.sqrt(math.pi) * math.exp(-(x**2))),
        (lambda x: -sp.besselj(0, x), lambda x: -special.j1(x)),
        (lambda x: sp.gamma(2 + x / 3), lambda x: -special.gamma(2 + x / 3) * special.digamma(2 + x / 3) / 3),
    ],
    ids=["erf", "besselj", "gamma"],
)
def test_special_functions_run_as_written(potential, accel) -> None:
    """U = erf(x) failed in every run ("only 0-dimensional arrays can be converted": math.erf on arrays);
    besselj's and gamma's derivatives (polygamma) were NameErrors from generated code. Against solve_ivp."""
    x, v = sp.symbols("x v")
    system = mbvi.LagrangianSystem(v**2 / 2 - potential(x), [x], [v], initial_state=mbvi.State([0.5], [0.0]))
    run = mbvi.simulate(system, 1.0, 1e-3, "verlet")
    assert run.q[-1, 0] == pytest.approx(_particle_reference(accel, 0.5, 1.0), abs=1e-5)  # O(h²)
    assert np.ptp(run.energy) < 1e-5


def test_what_has_no_numerical_form_is_a_value_error_saying_so() -> None:
    """A sympy Function of the user's own and sympy functions SciPy lacks (elliptic_k) were NameErrors from
    generated code; L given as a Python function a TypeError ("'function' object is not iterable")."""
    x, v = sp.symbols("x v")
    bump = sp.Function("bump")

    class Soft(sp.Function):  # differentiable, but with no numbers behind it
        def fdiff(self, argindex=1):
            return 1 / (1 + sp.exp(-self.args[0]))

    for L in (v**2 / 2 - Soft(x), v**2 / 2 - sp.elliptic_k(x / 4)):
        with pytest.raises(ValueError, match=r"no numerical form"):
            mbvi.simulate(mbvi.LagrangianSystem(L, [x], [v], initial_state=mbvi.State([0.2], [0.0])), 0.01, 1e-3)
    with pytest.raises(ValueError, match=r"undefined function"):
        mbvi.LagrangianSystem(v**2 / 2 - bump(x), [x], [v])
    with pytest.raises(ValueError, match=r"Lagrangian must be a sympy expression"):
        mbvi.LagrangianSystem(lambda q, w: w**2 / 2, [x], [v])


def test_a_start_outside_l_or_at_its_singular_point_is_named() -> None:
    """√(1 + x) at x = −2 was a bare "math domain error"; the elastic pendulum in x, y (a spring of rest length 1
    from the origin) a bare ZeroDivisionError when built without a start, and in equilibrium(), from q = 0."""
    x, y, v, vx, vy = sp.symbols("x y v v_x v_y")
    for L, x0 in ((v**2 / 2 - sp.sqrt(1 + x), -2.0), (v**2 / 2 - 1 / x, 0.0)):  # (the second: L = inf there)
        with pytest.raises(ValueError, match=r"L or its mass matrix .* is not finite at the initial state"):
            mbvi.LagrangianSystem(L, [x], [v], initial_state=mbvi.State([x0], [0.1]))
    L = (vx**2 + vy**2) / 2 - 10 * (sp.sqrt(x**2 + y**2) - 1) ** 2 / 2 - 9.81 * y
    mbvi.LagrangianSystem(L, [x, y], [vx, vy])  # built: singular at q = 0 only
    system = mbvi.LagrangianSystem(L, [x, y], [vx, vy], initial_state=mbvi.State([0.5, -1.0], [0.0, 0.0]))
    np.testing.assert_allclose(mbvi.equilibrium(system).q, [0.0, -1.981], atol=1e-12)  # spring stretched by g/k
    bare = mbvi.LagrangianSystem(L, [x, y], [vx, vy])
    with pytest.raises(ValueError, match=r"not finite at the start q = \[0.0, 0.0\].*initial_state"):
        mbvi.equilibrium(bare)


@pytest.mark.parametrize(("integrator", "dt"), [("verlet", 0.08), ("symplectic_euler_a", 0.06)])
def test_a_step_too_large_near_a_singular_mass_suggests_half_of_it(integrator: str, dt: float) -> None:
    """L = (1 − q²) v²/2 − 200 q² from (0, 6) swings within |q| ≤ 0.35, far from q = 1; a step too large for the
    stiff spring overshoots past it. That was called "no motion at any step size" (a straight line ahead of the
    step, or its landing, taken for where the motion goes); two half steps that stay inside say it is the step."""
    q, v = sp.symbols("q v")
    system = mbvi.LagrangianSystem((1 - q**2) * v**2 / 2 - 200 * q**2, [q], [v],
                                   initial_state=mbvi.State([0.0], [6.0]))  # fmt: skip
    with pytest.raises(mbvi.SolverError) as err:
        mbvi.simulate(system, 1.0, dt, integrator)
    # half of it, or less: the run at dt/2 completes, and one within 1 % of the energy in motion is verified
    assert err.value.suggested_dt <= dt / 2 and err.value.verified_dt and "any step size" not in str(err.value)
    with warnings.catch_warnings():  # it runs (a coarse step: its energy warning is right, and not the point)
        warnings.simplefilter("ignore", RuntimeWarning)
        run = mbvi.simulate(system, 1.0, err.value.suggested_dt, integrator)
    assert np.max(np.abs(run.q)) < 0.45


def test_a_lagrangian_blow_up_keeps_its_start_and_a_verified_step() -> None:
    """A stiff quartic oscillator (ω ≈ 1e3 rad/s) at dt = 0.01: the error kept the blown-up states (x up to 1e186,
    energy inf, kinetic NaN) and named the first non-finite step; its hint, dt/4, was never verified, and failed
    again. Now the states stop where the balance broke, all finite, and the hint is a dt whose run completes."""
    x, v = sp.symbols("x v")
    system = mbvi.LagrangianSystem(v**2 / 2 - 1e6 * x**2 / 2 - 1e6 * x**4, [x], [v],
                                   initial_state=mbvi.State([0.1], [0.0]))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # (inf − inf leaked a RuntimeWarning)
        with pytest.raises(mbvi.SolverError, match=r"the run blew up.*\(verified") as err:
            mbvi.simulate(system, 1.0, 0.01, integrator="symplectic_euler_b")
    e = err.value
    assert e.verified_dt and e.suggested_dt < 2.0 / 1.06e3  # below the stability bound 2/ω
    traj = e.trajectory
    assert np.isfinite(traj.energy).all() and np.isfinite(traj.kinetic).all() and np.abs(traj.q).max() < 1e10
    assert e.step == len(traj.t) - 1
    again = mbvi.simulate(system, 1.0, e.suggested_dt, integrator="symplectic_euler_b", save_every=100)
    assert again.t[-1] == pytest.approx(1.0)


def test_verifying_a_hint_keeps_to_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of 1000 s that blows up at its second step: its re-runs at ever smaller steps took 78 s (the budget
    was checked only before each one). A re-run that would not fit in what is left is not started."""
    import time

    from mbvi import runs

    monkeypatch.setattr(runs, "VERIFY_BUDGET", 1.0)
    x, v = sp.symbols("x v")
    system = mbvi.LagrangianSystem(v**2 / 2 - 1e6 * x**2 / 2 - 1e6 * x**4, [x], [v],
                                   initial_state=mbvi.State([0.1], [0.0]))  # fmt: skip
    mbvi.simulate(system, 0.01, 1e-5, integrator="symplectic_euler_b")  # (compiled before the clock starts)
    start = time.perf_counter()
    with pytest.raises(mbvi.SolverError, match=r"try dt <= .* \(not verified\)") as err:
        mbvi.simulate(system, 1000.0, 0.01, integrator="symplectic_euler_b")
    assert time.perf_counter() - start < 8.0
    assert err.value.suggested_dt is not None and err.value.suggested_dt < 0.01


def test_a_forced_lagrangian_runs_work_is_kept_and_its_plot_is_the_balance() -> None:
    """Hirai's pendulum with viscous friction (docs/lagrangian.md): its runs kept no ``work``, so the energy-error
    plot drew |E − E₀| / E_motion, the friction's work, up to 0.63, titled "Energy error", where the run's own
    balance |E − E₀ − W| is 1.5e-4. W = −(c / l²) ∫ |v|² dt by hand; the same in the batch and the Simulator."""
    import matplotlib

    matplotlib.use("Agg")
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    m, length, g, c = 0.01, 2.0, 9.8, 0.004
    hirai = mbvi.LagrangianSystem(
        m * (vx**2 + vy**2) / 2 - m * g * y, coordinates=[x, y], velocities=[vx, vy],
        constraints=[x**2 + y**2 - length**2], force=[-c * vx / length**2, -c * vy / length**2],
        initial_state=mbvi.State([length * math.sin(1.0), -length * math.cos(1.0)], [0.0, 0.0]),
    )  # fmt: skip
    traj = mbvi.simulate(hirai, t_end=10.0, dt=1e-2)
    power = -c / length**2 * np.sum(traj.v**2, axis=1)
    by_hand = np.concatenate([[0.0], np.cumsum(0.5 * (power[1:] + power[:-1]) * np.diff(traj.t))])
    np.testing.assert_allclose(traj.work, by_hand, rtol=1e-12, atol=1e-15)
    drop = abs(traj.energy[-1] - traj.energy[0]) / traj.info["energy_in_motion"]
    assert drop > 0.3  # the friction took much of it: what the plot drew as error
    ax = mbvi.plot.energy_error(traj).axes[0]
    assert ax.get_title().startswith("Energy balance error")
    assert np.nanmax(ax.lines[0].get_ydata()) == pytest.approx(traj.info["energy_error"], rel=1e-9)
    assert traj.info["energy_error"] < 1e-3
    (member,) = mbvi.simulate_batch(hirai, 10.0, 1e-2, initial_states=[hirai.initial_state()])
    np.testing.assert_allclose(member.work, traj.work, rtol=1e-12, atol=1e-15)
    sim = mbvi.Simulator(hirai, 1e-2)
    sim.step(1000)
    np.testing.assert_allclose(sim.trajectory().work, traj.work, rtol=1e-12, atol=1e-15)
    assert mbvi.simulate(hirai, t_end=10.0, dt=1e-2, save_every=10).work is None  # (a coarse quadrature: none)


def test_an_implicit_euler_hint_is_verified_by_what_implicit_euler_keeps() -> None:
    """The double pendulum in its angles under implicit_euler at dt = 1 s: Newton fails at t = 2 s, and the hint
    was verified by the 1 % energy band of the variational methods, which implicit Euler's damping never keeps:
    1.2e-4 s, 4000 times smaller than 0.5 s, which runs. A baseline's hint is verified by what it keeps."""
    from scene_loader import load_scene

    system = load_scene("double_pendulum_angles").build()
    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate(system, 10.0, 1.0, "implicit_euler")
    hint = info.value.suggested_dt
    assert info.value.verified_dt is True and hint >= 0.1, str(info.value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (no gain to speak of)
        run = mbvi.simulate(system, 10.0, hint, "implicit_euler")
    assert run.energy[-1] < run.energy[0]


def test_a_lagrangian_baseline_that_gains_more_than_it_had_says_so() -> None:
    """Explicit Euler on the pendulum in its angle (released at 1 rad, 4.51 J to give) at dt = 1/16 s gains 32.5 J
    in 10 s — it swings over the top — and said nothing: a baseline's gain was judged against the run's own motion,
    which the gain inflates. A gain past a tenth of what it had (dt = 1/128 s: 3.8 J, 83 %) is said too, as not
    accurate (it passed under a bound of all of it); one below (dt = 1/8192 s over 1 s) is not."""
    th, w = sp.symbols("th w")
    pendulum = mbvi.LagrangianSystem(w**2 / 2 + 9.81 * sp.cos(th), [th], [w], initial_state=([1.0], [0.0]))
    for t_end, dt, warns in ((10.0, 2.0**-4, "a solution"), (10.0, 2.0**-7, "accurate"), (1.0, 2.0**-13, "")):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            traj = mbvi.simulate(pendulum, t_end, dt, "explicit_euler")
        gain = traj.energy.max() - traj.energy[0]
        given = traj.energy[0] - traj.potential.min()
        assert (gain > 0.1 * given) == bool(warns) and (gain > given) == (warns == "a solution")
        said = [str(c.message) for c in caught if "times the energy the run had to give" in str(c.message)]
        assert bool(said) == bool(warns), (dt, gain, said)
        assert all(f"the result is not {warns}" in s for s in said)


def test_a_verified_step_keeps_its_energy_within_one_percent_at_every_step_not_only_at_sparse_samples() -> None:
    """A two-rod chain in the azimuth/elevation angles of ``from_scene`` passes a pole of its coordinates near
    t = 8.79 s: verlet's Newton fails there at dt = 1e-3 and suggests a step "verified within 1 %". The
    verifying re-run kept every 78th state, missed the few steps at the pole (energy 6 % off there, back after)
    and suggested 5e-4, whose run strays by 6 % of the energy in motion."""
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.Particle("p1", mass=1.0, position=(0.5, 0, -0.3), velocity=(0, 1.0, 0)))
    scene.add(mbvi.Particle("p2", mass=0.5, position=(1.0, 0.3, -0.5), velocity=(0, -2.0, 0.5)))
    scene.add(mbvi.Rod("world", "p1"))
    scene.add(mbvi.Rod("p1", "p2"))
    system = mbvi.LagrangianSystem.from_scene(scene)
    with pytest.raises(mbvi.SolverError, match="verified") as err:
        mbvi.simulate(system, 10.0, 1e-3, "verlet")
    assert err.value.verified_dt is True and 8.7 < err.value.time < 8.9
    run = mbvi.simulate(system, 10.0, err.value.suggested_dt, "verlet")  # every state judged (save_every=1)
    assert run.info["energy_error"] <= 0.01
    e = run.energy
    assert np.max(np.abs(e - e[0])) <= 0.01 * run.info["energy_in_motion"]


def test_a_verifying_rerun_keeps_every_state_that_fits_in_its_memory_budget() -> None:
    from mbvi.runs import VERIFY_MEMORY, VERIFY_SAMPLES_MIN, verify_samples

    assert verify_samples(12) * 12 * 8 <= VERIFY_MEMORY < (verify_samples(12) + 1) * 12 * 8
    assert verify_samples(10**9) == VERIFY_SAMPLES_MIN  # huge states: still enough samples to judge by


def test_a_constraint_whose_gradient_vanishes_at_the_start_is_named() -> None:
    """A disk rolling down an incline with its rolling constraint written squared, (x − R φ)² = 0: ∇g = 0 on g = 0,
    so its force is not determined there; midpoint ran without a word, x(1) = 0.963245 against the closed form
    0.966351 (csm failed at t = 0, "Required step size is less than spacing between numbers"). Named at the start;
    the same constraint written x − R φ = 0 runs silently, exact."""
    x, phi, vx, vphi = sp.symbols("x phi v_x v_phi")
    m, R, g, slope = 1.0, 0.5, 9.81, 0.3
    L = m * vx**2 / 2 + (m * R**2 / 2) * vphi**2 / 2 + m * g * math.sin(slope) * x
    start = mbvi.State([0.0, 0.0], [0.0, 0.0])
    squared = mbvi.LagrangianSystem(L, [x, phi], [vx, vphi], constraints=[(x - R * phi) ** 2], initial_state=start)
    with pytest.warns(mbvi.ConstraintWarning, match=r"gradient of constraint 0 .* vanishes at the initial state"):
        mbvi.simulate(squared, 1.0, 1e-2, "midpoint")
    with pytest.warns(mbvi.ConstraintWarning, match=r"gradient of constraint 0 .* vanishes") as said:  # a batch: once
        mbvi.simulate_batch(squared, 1.0, 1e-2, [start, start], integrator="midpoint")
    assert len(said) == 1
    rolling = mbvi.LagrangianSystem(L, [x, phi], [vx, vphi], constraints=[x - R * phi], initial_state=start)
    run = mbvi.simulate(rolling, 1.0, 1e-2, "midpoint")  # (a warning would fail here: warnings are errors)
    assert run.q[-1, 0] == pytest.approx(g * math.sin(slope) / 3.0, rel=1e-12)  # a = (2/3) g sin α, x = a t²/2


def test_csm_stops_at_its_evaluation_cap_with_the_run_so_far() -> None:
    """A pendulum given its rod twice, as g and g (1 + x²): the rows differ by O(g) as g drifts, the Baumgarte
    right-hand sides are held exactly, and RK45 ground on (10⁶ evaluations in 4 minutes reached t = 0.9354 s) —
    a LagrangianSystem's csm had no cap. It stops at it with a SolverError saying so and keeps the run so far."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    g = x**2 + y**2 - 1
    start = mbvi.State([math.sin(1.0), -math.cos(1.0)], [0.0, 0.0])
    twice = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - 9.81 * y, [x, y], [vx, vy], constraints=[g, g * (1 + x**2)],
                                  initial_state=start)  # fmt: skip
    with pytest.raises(mbvi.SolverError, match=r"csm: 2000 right-hand-side evaluations within one step .*stiff") as e:
        mbvi.simulate(twice, 1.0, 1e-3, "csm", max_evaluations_per_step=2000)
    part = e.value.trajectory
    assert part.t[-1] <= e.value.time and np.abs(part.q[:, 0] ** 2 + part.q[:, 1] ** 2 - 1).max() < 1e-5
    with pytest.raises(ValueError, match="max_evaluations_per_step"):
        mbvi.simulate(twice, 1.0, 1e-3, "csm", max_evaluations_per_step=0.5)
    once = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - 9.81 * y, [x, y], [vx, vy], constraints=[g], initial_state=start)
    assert mbvi.simulate(once, 1.0, 1e-3, "csm", max_evaluations_per_step=2000).t[-1] == pytest.approx(1.0)
    # the cap is per step of the run's time, not of its samples: 40 s saved at dt = 1 s (~25000 evaluations in
    # all) is no stiff run
    assert mbvi.simulate(once, 40.0, 1.0, "csm").t[-1] == pytest.approx(40.0)
