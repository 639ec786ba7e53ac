"""Numbers in the forms users have them: float32 and NumPy scalars, lists, 0-d arrays, inf spelled as text, flags.

Each was taken the wrong way somewhere: a float32 state made the implicit steps fail "for dt" at every dt, a
float32 dt an extra step of 2e-8 s and a time axis off its grid, a float32 inertia tensor was "not symmetric", a
flag "no" was taken as true, a 0-d grid a TypeError, an integrator that cannot run a sweep's LagrangianSystem
members was found only after running them all, a sweep far larger than memory ran towards it.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scene_loader import SCENES

import mbvi


def _pendulum() -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0, 0)))
    scene.add(mbvi.Rod("world", "bob"))
    return scene


@pytest.mark.parametrize("name", ["midpoint", "implicit_euler", "verlet"])
def test_a_step_of_a_float32_or_list_state_is_the_float64_step(name: str) -> None:
    system = mbvi.assemble(_pendulum())
    stepper = mbvi.get_integrator(name)(system, np.float32(0.01))  # a NumPy dt, as simulate takes it
    assert stepper.dt == 0.01
    q, v = np.array([1.0, 0.0, 0.0]), np.zeros(3)
    exact = stepper.step(mbvi.State(q, v), 0.0)
    for state in (mbvi.State(q.astype(np.float32), v.astype(np.float32)), mbvi.State([1.0, 0, 0], [0.0, 0, 0])):
        out = stepper.step(state, 0.0)
        assert out.q.dtype == np.float64
        np.testing.assert_array_equal(out.q, exact.q)
        np.testing.assert_array_equal(out.v, exact.v)
    with pytest.raises(ValueError, match=f"{name}: the state's q must be numbers"):
        stepper.step(mbvi.State(["a", "b", "c"], [0.0, 0, 0]), 0.0)


def test_a_float32_dt_is_the_decimal_it_prints_as() -> None:
    dt = np.float32(0.01)
    traj = mbvi.simulate(_pendulum(), 1.0, dt)
    ref = mbvi.simulate(_pendulum(), 1.0, 0.01)
    assert len(traj) == len(ref) == 101  # (102: a last step of 2e-8 s)
    np.testing.assert_array_equal(traj.t, ref.t)
    np.testing.assert_array_equal(traj.q, ref.q)
    sim = mbvi.Simulator(_pendulum(), dt=dt)
    sim.step(100)
    assert sim.t == 1.0
    ds = mbvi.sweep(lambda length=1.0: _pendulum(), {"length": [1.0]}, 1.0, dt, scheduler="synchronous")
    assert ds.sizes["time"] == 101
    assert float(ds.energy.sel(time=0.5).values[0]) == pytest.approx(float(ref.energy[50]), rel=1e-12)


def test_a_float32_inertia_tensor_is_taken_and_a_skew_one_says_how_skew() -> None:
    from scipy.spatial.transform import Rotation

    R32 = Rotation.from_euler("xyz", [0.3, 0.7, 1.1]).as_matrix().astype(np.float32)
    J = R32 @ np.diag([1.0, 2.0, 2.5]).astype(np.float32) @ R32.T  # in float32: off symmetric by its rounding
    assert 0 < np.max(np.abs(J - J.T)) < 1e-6
    body = mbvi.RigidBody("b", mass=1.0, inertia=J, position=(0, 0, 0))
    np.testing.assert_allclose(np.sort(body.principal_inertia), [1.0, 2.0, 2.5], rtol=1e-6)
    skew = np.diag([1.0, 2.0, 2.5])
    skew[0, 1] = 0.01
    with pytest.raises(ValueError, match=r"must be symmetric \(J − Jᵀ is 0.004 of its largest entry\)"):
        mbvi.RigidBody("b", mass=1.0, inertia=skew, position=(0, 0, 0))


def test_flags_are_true_or_false() -> None:
    with pytest.raises(ValueError, match="option 'progress' must be True or False, got 'no'"):
        mbvi.simulate(_pendulum(), 0.01, 1e-3, progress="no")
    with pytest.raises(ValueError, match="option 'timing' must be True or False, got 'no'"):
        mbvi.sweep(lambda k=1.0: _pendulum(), {"k": [1.0]}, 0.01, 1e-3, timing="no", scheduler="synchronous")


def test_inf_and_nan_on_the_command_line_are_numbers() -> None:
    from mbvi.cli import parse_params

    got = parse_params(["a=inf", "b=math.inf", "c=-inf", "d=np.nan", "e=Infinity", "f=text", "g=1.5"])
    assert got["a"] == got["b"] == got["e"] == math.inf and got["c"] == -math.inf and math.isnan(got["d"])
    assert got["f"] == "text" and got["g"] == 1.5


def test_sweep_refuses_up_front_what_no_member_can_run() -> None:
    with pytest.raises(ValueError, match=r"grid\['theta0'\] must be a list of values, got array\(0.5\)"):
        mbvi.sweep(SCENES / "pendulum.py", {"theta0": np.array(0.5)}, 0.1, 1e-2, scheduler="synchronous")
    # an integrator that runs no LagrangianSystem: before any member runs, as simulate says it
    with pytest.raises(ValueError, match="sweep: integrator 'yoshida4' does not handle Lagrangian systems"):
        mbvi.sweep(SCENES / "double_pendulum_angles.py", {"m2": [1.0, 2.0]}, 0.1, 1e-2, "yoshida4",
                   scheduler="synchronous")  # fmt: skip
    # a dataset far larger than this machine's memory (50 members of 2e7 states, ~75 GB)
    with pytest.raises(ValueError, match=r"the sweep's dataset, 50 × 20000002 × 10 numbers, would take .* GiB"):
        mbvi.sweep(lambda k=1.0: _pendulum(), {"k": list(range(1, 51))}, 2e4, 1e-3, scheduler="synchronous")


def test_equilibrium_out_of_iterations_says_to_raise_maxiter() -> None:
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2.0, 0, 0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    with pytest.raises(mbvi.SolverError, match=r"raise maxiter \(now 2\) if it was still converging"):
        mbvi.equilibrium(scene, maxiter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert mbvi.equilibrium(scene).potential == pytest.approx(-3 * 9.81, rel=1e-9)


def test_a_run_setting_given_where_it_is_not_taken_is_named_as_one() -> None:
    with pytest.raises(ValueError, match="save_every is not an integrator option but a setting of the run, taken by "
                                         "simulate, simulate_batch and sweep"):  # fmt: skip
        mbvi.Simulator(_pendulum(), dt=1e-3, save_every=10)
    with pytest.raises(ValueError, match="saveevery: did you mean save_every"):
        mbvi.simulate(_pendulum(), 0.01, 1e-3, saveevery=10)
    with pytest.raises(ValueError, match="mxiter: did you mean maxiter"):
        mbvi.simulate(_pendulum(), 0.01, 1e-3, "midpoint", mxiter=10)


def test_a_lagrangian_systems_parameters_are_numbers_and_its_integrator_a_known_name() -> None:
    sp = pytest.importorskip("sympy")
    th, w, g = sp.symbols("theta omega g")
    L = w**2 / 2 + g * sp.cos(th)
    for bad in (True, "9.81"):
        with pytest.raises(ValueError, match=f"parameter g = {bad!r} is not a number"):
            mbvi.LagrangianSystem(L, coordinates=[th], velocities=[w], parameters={"g": bad})
    system = mbvi.LagrangianSystem(L, coordinates=[th], velocities=[w], parameters={"g": sp.Rational(981, 100)},
                                   initial_state=mbvi.State([0.5], [0.0]))  # fmt: skip
    with pytest.raises(ValueError, match=r"unknown integrator 'verlett'; registered: .*verlet"):
        mbvi.simulate(system, 0.1, 1e-2, "verlett")
    with pytest.raises(ValueError, match="integrator 'yoshida4' does not handle Lagrangian systems"):
        mbvi.simulate(system, 0.1, 1e-2, "yoshida4")
    with pytest.raises(ValueError, match="save_every is not an integrator option but a setting of the run"):
        mbvi.Simulator(system, dt=1e-2, save_every=2)
    with pytest.raises(ValueError, match="mxiter: did you mean maxiter"):
        mbvi.simulate(system, 0.1, 1e-2, "midpoint", mxiter=5)
    stepper = mbvi.lagrangian.integrators.INTEGRATORS["verlet"](system, np.float32(0.01))
    assert stepper.dt == 0.01


def test_a_grid_of_ragged_list_values_still_runs() -> None:
    """A grid value may be a list (a chain's link lengths), of different lengths member to member."""

    def chain(lengths=(1.0,)):
        scene = mbvi.Scene(gravity=(0, 0, -9.81))
        x, parent = 0.0, "world"
        for i, length in enumerate(lengths):
            x += length
            scene.add(mbvi.Particle(f"b{i}", mass=1.0, position=(x, 0, 0)))
            scene.add(mbvi.Rod(parent, f"b{i}"))
            parent = f"b{i}"
        return scene

    ds = mbvi.sweep(chain, {"lengths": [[1.0], [0.5, 0.5]]}, 0.05, 1e-2, scheduler="synchronous")
    assert ds.sizes["lengths"] == 2 and not any(ds.error.values)


def test_csm_out_of_its_tolerances_is_told_to_tighten_them_not_dt() -> None:
    """csm's steps are solve_ivp's: at rtol = atol = 1 the pendulum blew up alike at every dt, told to reduce dt."""
    for dt in (1e-2, 2.5e-3):
        with warnings.catch_warnings(record=True) as said:
            warnings.simplefilter("always")
            try:
                mbvi.simulate(_pendulum(), 2.0, dt, "csm", rtol=1.0, atol=1.0)
                text = " ".join(str(w.message) for w in said)
            except mbvi.SolverError as err:
                text = str(err)
        assert "tighten rtol and atol (defaults 1e-08, 1e-10)" in text
        assert "reduce dt" not in text and "try dt" not in text


def test_a_rod_off_its_length_by_less_than_the_printed_digits_says_by_how_much() -> None:
    """A 1.5-mm rod 1e-10 m off its length (a hanging chain of 1000 links built from chords) said "distance 0.0015 m,
    length 0.0015 m": equal numbers for a violation. It now says how far off and against what tolerance."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("a", mass=1.0, position=(0.0015000001, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a", length=0.0015))
    with pytest.raises(ValueError, match=r"Rod 'world-a': .*length 0\.0015 m: \+1e-10 m off, 6\.7e-08 of the length"):
        mbvi.assemble(scene)
