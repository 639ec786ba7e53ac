"""Every default keeps the promise: no energy drift from substepping, no silent nonsense, no run that ends
somewhere else than asked.

* the whipping 10-link capsule chain (0.1 m, 1 kg each, released horizontal) at dt = 1e-2 with the default
  substepping: no drift (the second half's mean energy within the first half's band) and a band no wider than
  a tenth of the energy available; a substep count chosen afresh at every step lost 29 % monotonically;
* a pendulum of period 2.1 s stepped at dt = 0.5 s completes with a RuntimeWarning naming its energy error;
* a step size suggested as "verified" keeps the energy band of its run within 1 % of the energy in motion;
* a run ends at t_end also when t_end − t0 is not a whole number of steps (its last step shorter), and that
  last state is the solution at t_end (against a fine reference, to second order).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import mbvi
from mbvi.simulate import energy_error

G = 9.81


def _whip(n: int = 10, ell: float = 0.1) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    turn = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])  # the capsule's axis along x
    for i in range(n):
        s.add(mbvi.RigidBody(f"l{i}", mass=1.0, shape=mbvi.Capsule(0.01, ell), position=((i + 0.5) * ell, 0, 0),
                             orientation=turn))  # fmt: skip
    parents = ["world"] + [f"l{i}" for i in range(n - 1)]
    for i, (a, b) in enumerate(zip(parents, [f"l{i}" for i in range(n)], strict=True)):
        s.add(mbvi.Revolute(a, b, anchor=(i * ell, 0, 0), axis=(0, 1, 0)))
    return s


def test_the_whipping_chain_keeps_its_energy_band_with_the_default_substepping() -> None:
    traj = mbvi.simulate(_whip(), 30.0, 1e-2)
    available = G * sum((i + 0.5) * 0.1 for i in range(10))  # the potential drop to hanging, J
    e = (traj.energy - traj.energy[0]) / available
    half = len(e) // 2
    assert traj.info["refined_steps"] > 0  # control: the tip whips fast enough to need substeps
    assert np.ptp(e) < 0.1
    assert abs(np.mean(e[half:]) - np.mean(e[:half])) < np.ptp(e[:half])  # no drift


def test_a_run_that_strays_for_a_loose_tol_says_to_tighten_tol_not_dt() -> None:
    """SHAKE stops once its residual is under ``tol``, with a sign that depends on the state: at a loose tol the
    energy creeps step by step whatever dt, and a quarter of the step does not help. The warning named dt. (At
    tol = 1e-3 the creep of the first 10 s is 0.09 or 0.6 of the motion, as the residuals' signs fall: 2e-3.)"""
    loose = {}
    for dt in (1e-3, 2.5e-4):
        with pytest.warns(RuntimeWarning, match=r"tol = 0\.002 is loose: .*tighten tol, e\.g\. to its default 1e-12"):
            loose[dt] = mbvi.simulate(_whip(), 10.0, dt, tol=2e-3, save_every=round(1e-2 / dt))
    assert loose[1e-3].info["energy_error"] > 0.1
    assert loose[2.5e-4].info["energy_error"] > 0.5 * loose[1e-3].info["energy_error"]  # dt is not the cause
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tight = mbvi.simulate(_whip(), 10.0, 1e-3, save_every=10)  # the default tol: silent, in its band
    assert tight.info["energy_error"] < 0.01
    with pytest.warns(RuntimeWarning, match=r"reduce dt, e\.g\. to 0\.125 s"):  # a default tol: dt it is
        mbvi.simulate(_pendulum(), 20.0, 0.5)
    spring = mbvi.Scene(gravity=(0.0, 0.0, 0.0))  # no constraint rows: tol solves nothing, dt it is
    spring.add(mbvi.Particle("m", mass=1.0, position=(1.5, 0.0, 0.0), velocity=(0.0, 1.0, 0.0)))
    spring.add(mbvi.Spring("world", "m", stiffness=100.0, rest_length=1.0))
    for integrator in ("verlet", "midpoint"):  # (midpoint: its solves converge below tol)
        with pytest.warns(RuntimeWarning, match=r"reduce dt"):
            mbvi.simulate(spring, 5.0, 0.12 if integrator == "verlet" else 0.25, integrator, tol=1e-9)


def _pendulum(length: float = 1.1) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("bob", mass=1.0, position=(length * math.sin(1.0), 0.0, -length * math.cos(1.0))))
    s.add(mbvi.Rod("world", "bob"))
    return s


def test_an_inaccurate_run_warns_naming_its_energy_error() -> None:
    with pytest.warns(RuntimeWarning, match=r"integrator 'verlet' at dt = 0.5 s: the energy balance .* strayed by"):
        mbvi.simulate(_pendulum(), 20.0, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        traj = mbvi.simulate(_pendulum(), 20.0, 0.01)  # an accurate run: silent
    assert traj.info["energy_error"] < 0.01


def test_a_verified_step_keeps_the_energy_band() -> None:
    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate(_pendulum(), 20.0, 2.0)
    err = info.value
    assert err.verified_dt and err.suggested_dt < 2.0
    run = mbvi.simulate(_pendulum(), 20.0, err.suggested_dt)
    system = mbvi.assemble(_pendulum())
    assert energy_error(run, system, None)[0] <= 0.01


def test_a_run_ends_at_t_end_with_a_shorter_last_step() -> None:
    traj = mbvi.simulate(_pendulum(), 2.5e-3 * 100, 1e-3 * 100)
    assert traj.t[-1] == pytest.approx(0.25, abs=1e-15) and len(traj.t) == 4
    assert traj.info["last_dt"] == pytest.approx(0.05)
    fine = mbvi.simulate(_pendulum(), 0.25, 1e-5, save_every=25000)
    coarse_error = np.max(np.abs(traj.q[-1] - fine.q[-1]))
    assert coarse_error < 5e-3  # second order at dt = 0.1 s
    assert np.max(np.abs(traj.q[-2] - fine.q[-1])) > 10 * coarse_error  # control: t = 0.2 s is elsewhere


@pytest.mark.parametrize("save_every", [1, 7, 10])
def test_a_lagrangian_run_with_a_shorter_last_step_saves_at_the_times_a_scene_does(save_every: int) -> None:
    """The same pendulum as a scene and in its angle, t_end = 1.0005 s at dt = 1e-3: the saved times are the
    save_every grid and t_end. The Lagrangian run also kept the state before its shorter last step when that was
    off the grid (145 samples against 144 at save_every = 7), and the two agree to the method's order there."""
    import sympy as sp

    th, w = sp.symbols("theta omega")
    ell = 1.1
    lag = mbvi.LagrangianSystem(0.5 * ell**2 * w**2 + G * ell * sp.cos(th), [th], [w],
                                initial_state=mbvi.State([1.0], [0.0]))  # fmt: skip
    scene = mbvi.simulate(_pendulum(ell), 1.0005, 1e-3, save_every=save_every)
    angle = mbvi.simulate(lag, 1.0005, 1e-3, save_every=save_every)
    np.testing.assert_array_equal(angle.t, scene.t)
    assert angle.t[-1] == pytest.approx(1.0005, abs=1e-12) and np.all(np.diff(angle.t) > 0)
    bob = scene.position("bob")
    np.testing.assert_allclose(np.arctan2(bob[:, 0], -bob[:, 2]), angle.q[:, 0], atol=1e-5)


def test_a_heavy_fast_body_on_a_hinge_answers_in_seconds_with_every_rattle_integrator() -> None:
    """A 1e9 kg body at 6e5 m/s on a hinge (h|ω| = 545 rad a step at dt = 1e-3): yoshida4 used not to answer
    within 20 s. Now every member of the family answers with a SolverError naming the body and a verified dt
    within seconds."""
    import time

    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(
        mbvi.RigidBody(
            "b",
            mass=1e9,
            inertia=(1e8, 1e8, 1e8),
            position=(1.0, 0.0, 0.0),
            velocity=(0.0, 0.0, 6e5),
            angular_velocity=(0.0, -6e5, 0.0),
        )
    )  # on the hinge: v = ω × r
    s.add(mbvi.Revolute("world", "b", anchor=(0, 0, 0), axis=(0, 1, 0)))
    for integrator in ("verlet", "yoshida4"):
        start = time.perf_counter()
        with pytest.raises(mbvi.SolverError, match="rigid body 'b' spins") as info:
            mbvi.simulate(s, 0.05, 1e-3, integrator)
        assert time.perf_counter() - start < 20.0
        assert info.value.suggested_dt < 1e-3


def test_a_run_of_billions_of_steps_still_ends_at_t_end_or_says_its_last_step_is_shorter() -> None:
    """t_end − t0 is a whole number of steps to 1e-9 of the count, relative, but never beyond 1e-3 of a step: above
    5e8 steps the relative margin alone was half a step, and a run could end dt/2 short of t_end or past it."""
    from mbvi.runs import last_step, run_numbers, whole_steps

    assert whole_steps(1.0, 1e-3) and whole_steps(0.3, 0.1)  # quotients that round (0.3/0.1 = 2.9999999999999996)
    assert whole_steps(1e6 + 1e-9, 1e-3)  # 1e9 steps, 1e-6 of a step off: the quotient's rounding
    t_end = 5e6 + 4e-4  # 5e9 steps and 0.4 of one
    assert not whole_steps(t_end, 1e-3)
    *_, nsteps = run_numbers(t_end, 1e-3, save_every=10**6)
    assert nsteps == 5_000_000_001
    assert abs(last_step(t_end, 1e-3, 0.0, nsteps) - 4e-4) < 1e-9
