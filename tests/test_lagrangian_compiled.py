"""A LagrangianSystem in the compiled loop: generated kernels, the engine's Lagrangian loop, batches, sweeps.

* every compiled integrator (symplectic Euler A/B, the trapezoid "verlet", midpoint, implicit Euler) equals
  its NumPy step to round-off (the same equations, solved by the same Newton iterations), on the double
  pendulum in its angles (configuration-dependent mass), on Hirai's Cartesian pendulum (a constraint and a
  force) and on a scene taken into joint coordinates;
* a step the compiled loop cannot take (a singular Newton matrix: a constraint given twice) is handed back to
  the NumPy step, which solves it by least squares — the run equals the one with the constraint given once;
* ``simulate_batch`` of a LagrangianSystem equals its serial runs bit for bit; ``sweep`` accepts a build
  returning one; ``Simulator`` steps equal one ``simulate`` call;
* the generated source is cached on disk, named by its hash.
"""

from __future__ import annotations

import math
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
import sympy as sp
from scene_loader import SCENES, load_scene
from test_lagrangian import Q0, hirai_cartesian

import mbvi
from mbvi.lagrangian import LagrangianSystem

COMPILED = ["symplectic_euler_a", "symplectic_euler_b", "verlet", "midpoint", "implicit_euler"]


def _double() -> LagrangianSystem:
    th1, th2, w1, w2 = sp.symbols("theta1 theta2 omega1 omega2")
    T = w1**2 + w2**2 / 2 + w1 * w2 * sp.cos(th1 - th2)
    V = -2 * 9.81 * sp.cos(th1) - 9.81 * sp.cos(th2)
    return LagrangianSystem(T - V, [th1, th2], [w1, w2], initial_state=mbvi.State(Q0, [0.0, 0.0]))


def _joint_coordinates() -> LagrangianSystem:
    return LagrangianSystem.from_scene(load_scene("double_pendulum").build(theta1=1.0, theta2=0.5))


def _hirai_with_parameters(m: float = 0.3, ell: float = 0.7, c: float = 0.02, tau: float = 0.004) -> LagrangianSystem:
    """Hirai's Cartesian pendulum with its mass, rod, friction and torque given as ``parameters``: in L, in the
    constraint and in the force (the compiled kernels read them at run time)."""
    x, y, vx, vy, m_, l_, c_, tau_, g_ = sp.symbols("x y v_x v_y m l c tau g")
    L = m_ * (vx**2 + vy**2) / 2 - m_ * g_ * y
    Q = [-c_ * vx / l_**2 - tau_ * y / l_**2, -c_ * vy / l_**2 + tau_ * x / l_**2]
    start = mbvi.State([ell * math.sin(1.0), -ell * math.cos(1.0)], [0.0, 0.0])
    return LagrangianSystem(L, [x, y], [vx, vy], constraints=[x**2 + y**2 - l_**2], force=Q,
                            parameters={m_: m, l_: ell, c_: c, tau_: tau, g_: 9.81}, initial_state=start)  # fmt: skip


SYSTEMS = {"double": _double, "hirai": lambda: hirai_cartesian(0.01, 0.002), "from_scene": _joint_coordinates,
           "parameters": _hirai_with_parameters}  # fmt: skip


def _numpy(system: LagrangianSystem, *args, **kw) -> mbvi.Trajectory:
    with mock.patch.object(LagrangianSystem, "compiled_kernels", return_value=None):
        return mbvi.simulate(system, *args, **kw)


@pytest.mark.parametrize("which", list(SYSTEMS))
@pytest.mark.parametrize("integrator", COMPILED)
def test_the_compiled_loop_is_the_numpy_step_to_round_off(which: str, integrator: str) -> None:
    system = SYSTEMS[which]()
    assert system.compiled_kernels() is not None
    fast = mbvi.simulate(system, 1.0, 1e-2, integrator)
    slow = _numpy(system, 1.0, 1e-2, integrator)
    np.testing.assert_allclose(fast.q, slow.q, rtol=0, atol=1e-11)
    np.testing.assert_allclose(fast.v, slow.v, rtol=0, atol=1e-10)
    np.testing.assert_allclose(fast.momentum, slow.momentum, rtol=0, atol=1e-10)
    assert np.ptp(fast.q[:, 0]) > 0.05  # control: it moved


def test_a_step_the_loop_cannot_take_is_handed_to_the_numpy_step() -> None:
    """The rod given twice: the Newton matrix is singular (the compiled LU refuses it), least squares solves it."""
    x, y, vx, vy = sp.symbols("x y v_x v_y")
    L = 0.5 * (vx**2 + vy**2) - 9.81 * y
    q0 = [math.sin(1.0), -math.cos(1.0)]
    once = LagrangianSystem(L, [x, y], [vx, vy], constraints=[x**2 + y**2 - 1], initial_state=mbvi.State(q0, [0, 0]))
    twice = LagrangianSystem(L, [x, y], [vx, vy], constraints=[x**2 + y**2 - 1, 2 * (x**2 + y**2 - 1)],
                             initial_state=mbvi.State(q0, [0, 0]))  # fmt: skip
    a = mbvi.simulate(once, 1.0, 1e-2, "verlet")
    b = mbvi.simulate(twice, 1.0, 1e-2, "verlet")
    np.testing.assert_allclose(b.q, a.q, rtol=0, atol=1e-9)
    assert b.constraint_error.max() < 1e-10


def test_batch_members_equal_their_serial_runs() -> None:
    system = _double()
    s0 = system.initial_state()
    states = [mbvi.State(s0.q + [0.02 * b, -0.01 * b], s0.v + [0.1 * b, 0.0]) for b in range(5)]
    trajs = mbvi.simulate_batch(system, 2.0, 1e-3, states, integrator="symplectic_euler_b", save_every=10)
    for b, state in enumerate(states):
        serial = mbvi.simulate(system, 2.0, 1e-3, "symplectic_euler_b", initial_state=state, save_every=10)
        np.testing.assert_array_equal(trajs[b].q, serial.q)
        np.testing.assert_array_equal(trajs[b].momentum, serial.momentum)
    assert np.ptp([t.q[-1, 0] for t in trajs]) > 0.01  # control: the members differ


def test_batch_refuses_a_state_off_the_constraints_naming_it() -> None:
    system = hirai_cartesian()
    s0 = system.initial_state()
    with pytest.raises(ValueError, match="initial state 1"):
        mbvi.simulate_batch(system, 0.1, 1e-2, [s0, mbvi.State(s0.q * 1.1, s0.v)])


def test_sweep_accepts_a_build_that_returns_a_lagrangian_system() -> None:
    pytest.importorskip("xarray")
    ds = mbvi.sweep(SCENES / "double_pendulum_angles.py", {"m2": [1.0, 2.0]}, 0.2, 1e-3,
                    integrator="symplectic_euler_b", scheduler="synchronous")  # fmt: skip
    build = load_scene("double_pendulum_angles").build
    for i, m2 in enumerate([1.0, 2.0]):
        ref = mbvi.simulate(build(m2=m2), 0.2, 1e-3, "symplectic_euler_b")
        np.testing.assert_array_equal(ds.energy.values[i], ref.energy)
        # its coordinates and velocities too, by name (the sweep kept only energies)
        system = build(m2=m2)
        for j, name in enumerate(system.coordinate_names):
            np.testing.assert_array_equal(ds.q.sel(coordinate=name).values[i], ref.q[:, j])
            np.testing.assert_array_equal(ds.v.sel(coordinate=name).values[i], ref.v[:, j])
    assert (ds.error.values == "").all()
    # the integrator given as a LagrangianIntegrator class (as simulate takes it) was refused by the sweep
    from mbvi.lagrangian.integrators import INTEGRATORS

    by_class = mbvi.sweep(SCENES / "double_pendulum_angles.py", {"m2": [1.0, 2.0]}, 0.2, 1e-3,
                          integrator=INTEGRATORS["symplectic_euler_b"], scheduler="synchronous")  # fmt: skip
    np.testing.assert_array_equal(by_class.energy.values, ds.energy.values)


@pytest.mark.parametrize("integrator", ["symplectic_euler_b", "midpoint", "explicit_euler"])
def test_a_simulator_of_a_lagrangian_system_steps_as_one_simulate_call(integrator: str) -> None:
    system = hirai_cartesian(0.01)
    ref = mbvi.simulate(system, 0.5, 1e-2, integrator)
    sim = mbvi.Simulator(system, 1e-2, integrator)
    for _ in range(25):
        sim.step()
    sim.step(25)
    traj = sim.trajectory()
    np.testing.assert_array_equal(traj.q, ref.q)
    np.testing.assert_array_equal(traj.t, ref.t)
    assert sim.view.coordinate("x") == traj.q[-1, 0]
    with pytest.raises(ValueError, match="no named loads"):
        sim.set_load("motor", (0.0, 0.0, 1.0))


def test_the_generated_source_is_cached_by_its_hash() -> None:
    a, b = _double(), _double()
    ka, kb = a.compiled_kernels(), b.compiled_kernels()
    assert ka.module is kb.module  # the second system with the same expressions loads the first's kernels
    path = Path(ka.path)
    assert path.is_file() and path.name.startswith("mbvi_lagrangian_")
    text = path.read_text()
    assert "def point(" in text and "math.cos" in text


def test_a_negative_integer_power_at_zero_is_inf_in_the_compiled_kernel(capfd) -> None:
    """numba raises ZeroDivisionError for 0.0 ** -2, which a cfunc cannot pass on: it printed "Exception ignored
    in numba CPUContext" and the loop read garbage. Printed as 1.0 / x ** 2 it is inf, as NumPy gives."""
    import numba
    import numpy as np
    import sympy as sp

    import mbvi
    from mbvi.engine.lagrange import _point
    from mbvi.lagrangian.codegen import kernels, source

    x, v = sp.symbols("x v")
    system = mbvi.LagrangianSystem(v**2 / 2 + x**-2, [x], [v])  # (a power alone: sympy printed x**(-2))
    assert "**(-" not in source(system).replace(" ", "")
    compiled = kernels(system)

    @numba.njit
    def point(fns, q, w, out):
        _point(fns, 1, q, w, 0.0, out)

    out = np.zeros(6)
    point(compiled.fns, np.zeros(1), np.zeros(1), out)
    assert out[0] == np.inf and out[1] == -np.inf and out[5] == 1.0  # L, ∂L/∂x, and M = 1
    assert "Exception ignored" not in capfd.readouterr().err


def test_other_parameter_values_run_on_the_kernels_compiled_for_the_first() -> None:
    """A new value of a parameter (a fit's next guess, a sweep's next member) compiled the system again: the
    values were printed into the generated source as literals, so each had its own module (0.4 s a value, 1.3 MB
    of memory and 5 cache files each, kept for good). The kernels now read the values at run time: one module for
    every value, and each system's run is its own (the NumPy step's to round-off, and its closed-form period)."""
    from mbvi.lagrangian import codegen

    forced = _hirai_with_parameters().compiled_kernels().module
    assert _hirai_with_parameters(m=2.0, ell=0.4, c=0.05, tau=-0.01).compiled_kernels().module is forced
    first = _hirai_with_parameters(m=1.0, ell=0.3, c=0.0, tau=0.0)  # no force: a module without one
    module = first.compiled_kernels().module
    assert module is not forced
    held = len(codegen._loaded)
    for ell in (0.5, 1.0, 2.0):
        system = _hirai_with_parameters(m=1.0, ell=ell, c=0.0, tau=0.0)
        assert system.compiled_kernels().module is module
        assert codegen.source(system) == codegen.source(first)
        start = mbvi.State([ell * math.sin(0.01), -ell * math.cos(0.01)], [0.0, 0.0])
        fast = mbvi.simulate(system, 3.0, 1e-3, "midpoint", initial_state=start)
        slow = _numpy(system, 3.0, 1e-3, "midpoint", initial_state=start)
        np.testing.assert_allclose(fast.q, slow.q, rtol=0, atol=1e-12 * ell)
        # small swings: x(t) = x₀ cos(√(g/ℓ) t), its first return to x₀ at 2π√(ℓ/g)
        x = fast.q[:, 0]
        crossings = fast.t[1:][(x[:-1] < 0) & (x[1:] >= 0)]  # upward zero crossings: 3T/4 after the start
        assert crossings[0] == pytest.approx(0.75 * 2 * math.pi * math.sqrt(ell / 9.81), abs=2e-3)
    assert len(codegen._loaded) == held


def test_parameters_in_kinks_compile_and_values_are_those_given() -> None:
    """Found by the review of run-time parameters: a parameter symbol (not declared real) inside Abs or sign gave
    derivatives in re/im that cannot be printed, and the system fell back to its NumPy functions (40x slower);
    a value contradicting its symbol's declaration (k positive, given −4) flipped |k| into an inverted spring; an
    edit of ``parameters`` after building reached the compiled kernels but not the NumPy forms (energy, checks)."""
    x, v, a, k = sp.symbols("x v a k")
    start = mbvi.State([0.3], [0.0])
    for L in (v**2 / 2 - 4 * sp.Abs(x - a) ** 3, v**2 / 2 - (x - a) ** 2 * (1 + sp.sign(x - a)) - (x - a) ** 2):
        system = LagrangianSystem(L, [x], [v], parameters={a: 0.1}, initial_state=start)
        assert system.compiled_kernels() is not None
        fast, slow = mbvi.simulate(system, 1.0, 1e-3, "midpoint"), _numpy(system, 1.0, 1e-3, "midpoint")
        np.testing.assert_allclose(fast.q, slow.q, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"parameter k = -4 is not positive, as its symbol is declared"):
        LagrangianSystem(v**2 / 2 - sp.Abs(k) * x**2 / 2, [x], [v], parameters={sp.Symbol("k", positive=True): -4.0})
    spring = LagrangianSystem(v**2 / 2 - k * x**2 / 2, [x], [v], parameters={k: 4.0}, initial_state=start)
    spring.parameters[k] = 9.0  # not the system's: it was built with k = 4
    run = mbvi.simulate(spring, 1.0, 1e-4, "midpoint")
    assert run.q[-1, 0] == pytest.approx(0.3 * math.cos(2.0), abs=1e-7)
    assert np.ptp(run.energy) < 1e-7


def _spring_pair(offset: float) -> tuple[LagrangianSystem, mbvi.State]:
    """Two particles on a spring in Cartesian x, y (masses 1 and 0.6 kg, k = 30 N/m, rest 0.7 m), total momentum
    zero, placed ``offset`` m from the origin: L is invariant under translations, so its momentum is conserved."""
    x1, y1, x2, y2, u1, v1, u2, v2 = sp.symbols("x1 y1 x2 y2 u1 v1 u2 v2")
    T = (u1**2 + v1**2) / 2 + sp.Rational(3, 10) * (u2**2 + v2**2)
    d = sp.sqrt((x1 - x2) ** 2 + (y1 - y2) ** 2)
    system = LagrangianSystem(T - 15 * (d - sp.Rational(7, 10)) ** 2, [x1, y1, x2, y2], [u1, v1, u2, v2])
    return system, mbvi.State(np.array([0.0, 0.0, 1.0, 0.2]) + offset, [0.6, 0.3, -1.0, -0.5])


@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "symplectic_euler_a"])
@pytest.mark.parametrize("path", ["compiled", "numpy"])
def test_a_conserved_momentum_keeps_to_round_off_wherever_the_system_sits(integrator: str, path: str) -> None:
    """The step's unknown is the increment Δq: formed as q₁ − q₀ it lost ε|q|, which the momenta ∝ Δq/h took
    as ε|q|/h a step (1000 m from the origin the pair's momentum drifted by 1.4e-8 in 1e5 steps; 6e-12 at it)."""
    system, start = _spring_pair(1000.0)
    steps = 20000 if path == "compiled" else 2000
    run = mbvi.simulate if path == "compiled" else _numpy
    traj = run(system, steps * 1e-3, 1e-3, integrator, initial_state=start)
    v = traj.v
    momentum = np.stack([v[:, 0] + 0.6 * v[:, 2], v[:, 1] + 0.6 * v[:, 3]], axis=1)  # P = 0 at the start
    assert np.max(np.abs(momentum)) < 1e-12
    np.testing.assert_allclose(traj.momentum[:, 0] + traj.momentum[:, 2], momentum[:, 0], atol=1e-12)
    assert np.ptp(traj.q[:, 0]) > 0.1  # control: it moved
