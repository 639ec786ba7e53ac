"""What a plugin author and a controller writer meet when their code is wrong, and when it is right.

Each case failed before this test was written: a compiled kernel that raised was ignored (numba cannot carry an
exception through C) and the run finished with wrong numbers; a controller that raised on a NumPy path was a
bare ``ValueError`` with no time and no trajectory; a kernel missing a role its law declares dropped that part
of the physics; two functions differing only in the names they read shared a compiled kernel; a ``numba.njit``
kernel kept the value a global had when it first compiled; compositions declaring an order their weights cannot
give, or with a zero weight, were accepted; runtime-registered plugins were missing in sweep worker processes.
"""

from __future__ import annotations

import math
import subprocess
import sys
import types

import numba
import numpy as np
import pytest

import mbvi
import mbvi.plugins  # the attribute after a bare import mbvi is tested in a fresh process below
from mbvi.engine import callbacks
from mbvi.errors import LoadError

lf = pytest.importorskip("mbvi_leapfrog")
G = 9.81


class LinearDrag(mbvi.Force):
    """f = −c v on a body's origin (a plugin element)."""

    def __init__(self, body: str, coefficient: float) -> None:
        self.name, self.body, self.bodies, self.joints = f"drag:{body}", body, (body,), ()
        self.coefficient = float(coefficient)


def _law(kernel=None, *, has_force=True, gradient=None, tag="lin"):
    """A force-law class for :class:`LinearDrag` whose ``compiled()`` gives ``kernel`` (and ``gradient``)."""

    class Law(mbvi.ForceLaw):
        name = f"linear_drag_{tag}"
        element = LinearDrag
        velocity_dependent = True

        def __init__(self, elements, layout):
            super().__init__(elements, layout)
            self.idx = np.array([layout.offset[e.body] for e in elements])
            self.c = np.array([e.coefficient for e in elements])

        def force(self, q, v, t):
            f = np.zeros(self.nq)
            for i, c in zip(self.idx, self.c, strict=True):
                f[i : i + 3] -= c * v[i : i + 3]
            return f

        def compiled(self):
            if kernel is None:
                return None
            ints = np.concatenate([[len(self.idx)], self.idx])
            return mbvi.Kernel(force=kernel, gradient=gradient, ints=ints, floats=self.c, name=self.name)

    Law.has_force = has_force
    return Law


@numba.njit
def _drag(q, v, t, ints, floats, out):
    for i in range(ints[0]):
        j = ints[1 + i]
        for d in range(3):
            out[j + d] -= floats[i] * v[j + d]


@numba.njit
def _drag_that_fails(q, v, t, ints, floats, out):
    if t > 0.2:
        raise ValueError("drag table out of range")
    _drag(q, v, t, ints, floats, out)


@numba.njit
def _drag_that_gives_nan(q, v, t, ints, floats, out):
    _drag(q, v, t, ints, floats, out)
    if t > 0.2:
        out[0] += math.nan


def _pendulum(*extra) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    s.add(mbvi.Particle("b", mass=2.0, position=(2.0, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "a"))
    s.add(mbvi.Rod("a", "b"))
    for e in extra:
        s.add(e)
    return s


def _arm(torque) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0.0, 0.0, -0.5)))
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    s.add(mbvi.ExternalTorque("arm", torque=torque, name="motor"))
    return s


class _Registered:
    """Register a plugin for the duration of a ``with`` block."""

    def __init__(self, **hooks) -> None:
        self.module = types.ModuleType("test_plugin_authoring_plugin")
        for hook, classes in hooks.items():
            setattr(self.module, hook, mbvi.hookimpl(lambda register, classes=classes: [register(c) for c in classes]))

    def __enter__(self):
        mbvi.plugins.register_plugin(self.module)
        return self.module

    def __exit__(self, *exc) -> None:
        mbvi.plugins.unregister_plugin(self.module)


# ---------------------------------------------------------------------------------------- compiled kernels
@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "implicit_euler"])
@pytest.mark.parametrize(
    ("kernel", "match"),
    [(_drag_that_fails, "raised ValueError: drag table out of range"), (_drag_that_gives_nan, "non-finite")],
)
def test_a_compiled_kernel_that_fails_stops_the_run_naming_the_law(kernel, match: str, integrator: str) -> None:
    """It ran on with the failing evaluations dropped (0.04 m off after 0.5 s): now a LoadError at its step.
    Under midpoint and implicit_euler on rods, the failing kernel made Newton hand the step back, and the law's
    NumPy force took every step after it, unsaid."""
    Law = _law(kernel, tag="failing")
    with _Registered(register_force_laws=[Law]):
        with pytest.raises(LoadError, match=rf"linear_drag_failing.*{match}") as err:
            mbvi.simulate(_pendulum(LinearDrag("b", 0.5)), 0.5, 1e-3, integrator)
    assert isinstance(err.value, mbvi.SolverError) and isinstance(err.value, ValueError)
    assert 0.199 <= err.value.time <= 0.201
    assert err.value.trajectory is not None and 0.199 <= err.value.trajectory.t[-1] <= err.value.time
    assert np.all(np.isfinite(err.value.trajectory.q))


def test_a_compiled_step_that_raises_stops_the_run_naming_it() -> None:
    def step(model, ws, q, v, t, h, params):
        if t > 0.1:
            raise ValueError("step table out of range")
        return lf.leapfrog_step(model, ws, q, v, t, h, params)

    class Raising(lf.Leapfrog):
        name = "raising_leapfrog"
        kernel = step

    with pytest.raises(mbvi.SolverError, match="its compiled step raised ValueError: step table out of range") as e:
        mbvi.simulate(_pendulum(), 0.5, 1e-3, Raising)
    assert 0.1 <= e.value.time <= 0.102 and e.value.trajectory.t[-1] <= e.value.time
    # a batch says it too, naming the member (it said only "its compiled step failed")
    start = mbvi.assemble(_pendulum()).initial_state()
    states = (np.stack([start.q, start.q]), np.stack([start.v, start.v]))
    with pytest.raises(mbvi.SolverError, match=r"member 0 of 2 \(and 1 more\): .*its compiled step raised "
                       "ValueError: step table out of range") as e:  # fmt: skip
        mbvi.simulate_batch(_pendulum(), 0.5, 1e-3, states, integrator=Raising)
    assert e.value.time == pytest.approx(0.101) and e.value.members == [0, 1]


def test_a_kernel_missing_a_role_its_law_declares_runs_that_role_from_numpy() -> None:
    """A potential law whose kernel gives U but not ∇U had no gradient in the loop: the body fell freely."""

    class Tether(mbvi.Force):
        def __init__(self, body, stiffness):
            self.name, self.body, self.bodies, self.joints = f"tether:{body}", body, (body,), ()
            self.k = float(stiffness)

    def potential_only(q, v, t, ints, floats, out):
        out[0] += 0.0

    class TetherLaw(mbvi.ForceLaw):
        name = "tether_law"
        element = Tether
        has_potential = True

        def __init__(self, elements, layout):
            super().__init__(elements, layout)
            self.i = layout.offset[elements[0].body]
            self.k = elements[0].k

        def potential(self, q):
            return 0.5 * self.k * float(q[self.i + 2] ** 2)

        def gradient(self, q):
            g = np.zeros(self.nq)
            g[self.i + 2] = self.k * q[self.i + 2]
            return g

        def hessian(self, q):
            import scipy.sparse as sp

            return sp.csr_matrix(([self.k], ([self.i + 2], [self.i + 2])), shape=(self.nq, self.nq))

        def compiled(self):
            return mbvi.Kernel(potential=potential_only, name=self.name)

    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, 0.0)))
    scene.add(Tether("p", 100.0))
    with _Registered(register_force_laws=[TetherLaw]):
        traj = mbvi.simulate(scene, 2.0, 1e-3)
    z = traj.position("p")[:, 2]
    # a mass on a spring under gravity: z oscillates between 0 and −2 m g / k about −m g / k
    assert z.min() == pytest.approx(-2 * G / 100.0, rel=1e-3) and z.max() <= 1e-12
    assert np.ptp(traj.energy) < 1e-4 * G * 2 * G / 100.0 * 100


def test_a_kernel_for_a_role_the_law_does_not_declare_is_refused() -> None:
    Law = _law(_drag, has_force=False, tag="undeclared")
    with _Registered(register_force_laws=[Law]):
        with pytest.raises(ValueError, match=r"linear_drag_undeclared.*has_force is False"):
            mbvi.simulate(_pendulum(LinearDrag("b", 0.5)), 0.01, 1e-3)


def test_kernel_contract_breaches_are_refused_at_construction() -> None:
    def returns_force(q, v, t, ints, floats, out):
        f = np.zeros_like(out)
        return f

    with pytest.raises(ValueError, match="returns a value"):
        mbvi.Kernel(force=returns_force)
    with pytest.raises(ValueError, match="ints must be integers"):
        mbvi.Kernel(force=_drag, ints=[1.7])
    assert mbvi.Kernel(force=_drag, ints=[1.0, 2]).ints.tolist() == [1, 2]


# ------------------------------------------------------------------------------------------- cache keys
def test_functions_that_differ_only_in_names_have_different_keys() -> None:
    """Without source (exec, code generators) the key hashed bytecode and constants only: sin and cos collided."""
    a, b = {}, {}
    exec("import math\ndef k(q, v, t, ints, floats, out):\n    out[0] += math.sin(t)\n", a)
    exec("import math\ndef k(q, v, t, ints, floats, out):\n    out[0] += math.cos(t)\n", b)
    assert callbacks.code_key(a["k"]) != callbacks.code_key(b["k"])


def test_a_key_is_the_same_in_every_process() -> None:
    """A list comprehension is a nested code object whose repr holds its address: a new key (and a new
    compilation, a new cached file) in every process."""
    script = (
        "import numpy as np\n"
        "from mbvi.engine.callbacks import code_key\n"
        "def k(q, v, t, ints, floats, out):\n"
        "    w = [floats[i] for i in range(len(floats))]\n"
        "    out[0] += w[0]\n"
        "print(code_key(k))\n"
    )
    keys = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
            for _ in range(2)}  # fmt: skip
    assert len(keys) == 1


COEFFICIENT = 0.5


@numba.njit
def _global_drag(q, v, t, ints, floats, out):
    for d in range(3):
        out[ints[1] + d] -= COEFFICIENT * v[ints[1] + d]


def test_a_numba_kernel_reads_a_changed_global_again() -> None:
    """numba freezes the globals a dispatcher read when it compiled: the kernel kept 0.5 after it became 5."""
    global COEFFICIENT
    Law = _law(_global_drag, tag="global")
    scene = _pendulum(LinearDrag("b", 0.0))
    runs = {}
    try:
        with _Registered(register_force_laws=[Law]):
            for c in (0.5, 5.0):
                COEFFICIENT = c
                runs[c] = mbvi.simulate(scene, 0.5, 1e-3)
    finally:
        COEFFICIENT = 0.5
    for c, traj in runs.items():
        reference = mbvi.simulate(_pendulum(mbvi.Drag("b", coefficient=c)), 0.5, 1e-3)
        np.testing.assert_allclose(traj.q, reference.q, rtol=0, atol=1e-12)


# -------------------------------------------------------------------------------------------- NumPy paths
@pytest.mark.parametrize("integrator", ["explicit_euler", "midpoint", "implicit_euler", "csm"])
def test_a_controller_that_raises_on_a_numpy_path_is_a_located_load_error(integrator: str) -> None:
    """It was a bare ValueError with no time and no trajectory (midpoint: a Newton failure with a dt hint)."""

    def faulty(t, state):
        if t >= 0.25:
            raise RuntimeError("motor driver fault")
        return (0.0, -20.0 * state.joint_angle("hinge"), 0.0)

    with pytest.raises(LoadError, match=r"ExternalTorque 'motor'.*RuntimeError: motor driver fault") as err:
        mbvi.simulate(_arm(faulty), 1.0, 1e-3, integrator)
    assert 0.248 <= err.value.time <= 0.251
    assert err.value.suggested_dt is None  # a smaller step does not cure a controller
    traj = err.value.trajectory
    assert traj is not None and 0.248 <= traj.t[-1] <= err.value.time + 1e-12


def _nan_after(t0: float):
    def force(self, q, v, t):
        f = type(self).__mro__[1].force(self, q, v, t)
        if t > t0:
            f[0] = math.nan
        return f

    return force


@pytest.mark.parametrize("where", ["simulate", "batch", "Simulator"])
def test_a_law_called_as_python_that_returns_nan_is_named(where: str) -> None:
    """A law with no kernel (its NumPy force called from the compiled loop) returning NaN at a finite state was
    reported as the integrator's instability ("reduce dt"), after re-runs at smaller steps, naming nothing."""
    NaNLaw = type("NaNLaw", (_law(tag="nan_numpy"),), {"force": _nan_after(0.2)})
    scene = _pendulum(LinearDrag("b", 0.5))
    with _Registered(register_force_laws=[NaNLaw]):
        with pytest.raises(LoadError, match=r"linear_drag_nan_numpy: its force returned non-finite values") as err:
            if where == "simulate":
                mbvi.simulate(scene, 0.5, 1e-3)
            elif where == "batch":
                s0 = mbvi.assemble(scene).initial_state()
                mbvi.simulate_batch(scene, 0.5, 1e-3, initial_states=[s0, s0])
            else:
                mbvi.Simulator(scene, dt=1e-3).step(500)
    assert err.value.culprit == "linear_drag_nan_numpy" and err.value.suggested_dt is None
    assert 0.2 <= err.value.time <= 0.202


@pytest.mark.parametrize("integrator", ["explicit_euler", "midpoint"])
def test_a_law_that_returns_nan_on_a_numpy_path_is_named(integrator: str) -> None:
    """The same law stepped by NumPy (a law with no kernel under explicit_euler; midpoint's Newton): the NaN was
    taken for the integrator's instability ("reduce dt")."""
    NaNLaw = type("NaNLaw", (_law(tag="nan_numpy_path"),), {"force": _nan_after(0.2)})
    with _Registered(register_force_laws=[NaNLaw]):
        # (midpoint: named where the compiled Newton calls it back, or on the NumPy path it hands a step to)
        with pytest.raises(LoadError, match=r"'?linear_drag_nan_numpy_path'?.*returned non-finite values") as err:
            mbvi.simulate(_pendulum(LinearDrag("b", 0.5)), 0.5, 1e-3, integrator)
    assert 0.2 <= err.value.time <= 0.202


@pytest.mark.parametrize("returned", ["text", 3, (np.zeros(3), np.ones(3)), _drag])
def test_a_compiled_form_that_is_not_one_is_a_value_error_naming_the_law(returned) -> None:
    """compiled() returning a bare kernel function (not an mbvi.Kernel) or anything else gave an AttributeError or
    a TypeError from inside the assembly."""
    Odd = type("Odd", (_law(tag="odd_form"),), {"compiled": lambda self: returned})
    with _Registered(register_force_laws=[Odd]):
        with pytest.raises(ValueError, match=r"force law 'linear_drag_odd_form': compiled\(\) must return None, an"):
            mbvi.simulate(_pendulum(LinearDrag("b", 0.5)), 0.01, 1e-3)


def test_a_law_that_gives_its_potential_as_a_family_still_runs_its_force() -> None:
    """A damped anchor spring: its potential as the engine's spring family, its damping force with no kernel. The
    compiled loop ran the family and dropped the force (the energy stayed at 1.77 J where damping takes it to
    0.81 J): the force is now its NumPy method, called from the loop, as for a kernel that misses a role."""
    from mbvi.kernels import AffineMap

    class Anchor(mbvi.Force):
        def __init__(self, body: str) -> None:
            self.name, self.body, self.bodies, self.joints = f"anchor:{body}", body, (body,), ()

    def law(form: str) -> type:
        class AnchorLaw(mbvi.ForceLaw):
            name, element = f"damped_anchor_{form}", type(f"Anchor_{form}", (Anchor,), {})
            has_potential = has_force = velocity_dependent = True

            def __init__(self, elements, layout):
                super().__init__(elements, layout)
                self.P = AffineMap.from_terms([layout.point(e.body, np.zeros(3)) for e in elements], layout.nq)

            def potential(self, q):
                return 0.5 * 2.0 * float(np.sum(self.P(q) ** 2))

            def gradient(self, q):
                return self.P.adjoint(2.0 * self.P(q))

            def force(self, q, v, t):
                return self.P.adjoint(-0.3 * self.P.linear(v))

            def compiled(self):
                if form == "numpy":
                    return None
                n = len(self.elements)
                return {"spring": ((self.P.idx, self.P.w, self.P.c), np.full(n, 2.0), np.zeros(n))}

        return AnchorLaw

    runs = {}
    for form in ("numpy", "family"):
        Law = law(form)
        scene = mbvi.Scene(gravity=None)
        scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.5, 0.0), velocity=(0.0, 1.0, 0.2)))
        scene.add(Law.element("p"))
        with _Registered(register_force_laws=[Law]):
            runs[form] = mbvi.simulate(scene, 3.0, 0.01)
    assert runs["numpy"].energy[-1] < 0.5 * runs["numpy"].energy[0]  # the damping: the test is not vacuous
    np.testing.assert_allclose(runs["family"].q, runs["numpy"].q, atol=1e-12)


def test_a_numpy_law_that_raises_on_a_numpy_path_is_a_load_error_naming_it() -> None:
    class Broken(_law(tag="numpy_broken")):
        def force(self, q, v, t):
            if t > 0.2:
                raise RuntimeError("law fault")
            return super().force(q, v, t)

    with _Registered(register_force_laws=[Broken]):
        with pytest.raises(LoadError, match=r"force law 'linear_drag_numpy_broken'.*RuntimeError: law fault") as err:
            mbvi.simulate(_pendulum(LinearDrag("b", 0.5)), 0.5, 1e-3, "explicit_euler")
    assert 0.2 <= err.value.time <= 0.202 and err.value.trajectory.t[-1] <= err.value.time


@pytest.mark.parametrize("integrator", ["explicit_euler", "midpoint", "implicit_euler", "csm", "verlet"])
def test_a_numpy_law_returning_a_wrong_shape_is_a_load_error_naming_it_on_every_path(integrator) -> None:
    """A force of shape (nq, 1) was broadcast by NumPy on the NumPy paths: "non-broadcastable output operand with
    shape (3,) doesn't match the broadcast shape (3,3)", naming nothing (the compiled loop named the law)."""

    class Column(_law(tag="numpy_column")):
        def force(self, q, v, t):
            return super().force(q, v, t)[:, None]

    with _Registered(register_force_laws=[Column]):
        with pytest.raises(LoadError, match=r"linear_drag_numpy_column.*force\(q, v, t\) returned shape \(6, 1\)"):
            mbvi.simulate(_pendulum(LinearDrag("b", 0.5)), 0.01, 1e-3, integrator)


# ----------------------------------------------------------------------------------------- compositions
#: weights of verlet with Σ wᵢ = 1 and Σ wᵢ³ = 0 that are not symmetric: order 3, not 4 (accepted as 4, measured 3.2)
_S, _P = 1 - 1.2, ((1 - 1.2) ** 3 + 1.2**3) / (3 * (1 - 1.2))
ASYMMETRIC = (1.2, (_S + math.sqrt(_S * _S - 4 * _P)) / 2, _S - (_S + math.sqrt(_S * _S - 4 * _P)) / 2)


@pytest.mark.parametrize(("weights", "base", "order", "match"), [
    ((0.0, 1.0), "verlet", 2, "must not be zero"),
    ((0.25, 0.5, 0.25), "verlet", 4, r"declares order 4.*order at most 2: Σ wᵢ\^3 = 0\.156"),
    ((0.5, 0.5), "symplectic_euler_a", 2, "order 2 would need Σ wᵢ\\^2 = 0"),
    (ASYMMETRIC, "verlet", 4, "weights that are not symmetric .* order at most 3"),  # Σ wᵢ³ = 0: measured order 3
])  # fmt: skip
def test_a_composition_whose_weights_cannot_give_it_is_refused(weights, base, order, match) -> None:
    class Claimed(mbvi.Composition):
        name = "claimed"

    Claimed.weights, Claimed.base, Claimed.order = weights, base, order
    with pytest.raises(mbvi.PluginError, match=f"Claimed.*{match}"):
        mbvi.plugins.register_plugin(types.SimpleNamespace(
            register_integrators=mbvi.hookimpl(lambda register: register(Claimed))), name="claimed")  # fmt: skip
    assert "verlet" in mbvi.integrators()


def test_compositions_of_the_right_order_pass_the_check() -> None:
    """Forest–Ruth (order 4 from verlet), a triple jump of it (order 6) and a non-symmetric order-2 one."""
    theta = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))
    g6 = 1.0 / (2.0 - 2.0 ** (1.0 / 5.0))

    class FR(mbvi.Composition):
        name, order, base, weights = "fr_checked", 4, "verlet", (theta, 1 - 2 * theta, theta)

    class Six(mbvi.Composition):
        name, order, base, weights = "six_checked", 6, "fr_checked", (g6, 1 - 2 * g6, g6)

    class Halves(mbvi.Composition):
        name, order, base, weights = "halves_checked", 2, "verlet", (0.3, 0.7)

    class Third(mbvi.Composition):  # Σ wᵢ³ = 0 makes order 3, symmetric or not
        name, order, base, weights = "third_checked", 3, "verlet", ASYMMETRIC

    with _Registered(register_integrators=[FR, Six, Halves, Third]):
        assert {"fr_checked", "six_checked", "halves_checked", "third_checked"} <= set(mbvi.integrators())
        assert FR.symmetric and Six.symmetric and not Halves.symmetric


def test_a_loop_of_compositions_says_so() -> None:
    class A(mbvi.Composition):
        name, order, base, weights = "loop_a", 2, "loop_b", (1.0,)

    class B(mbvi.Composition):
        name, order, base, weights = "loop_b", 2, "loop_a", (1.0,)

    with pytest.raises(mbvi.PluginError, match="form a loop"):
        mbvi.plugins.register_plugin(types.SimpleNamespace(
            register_integrators=mbvi.hookimpl(lambda register: [register(A), register(B)])), name="loop")  # fmt: skip


# ------------------------------------------------------------------------------------ plugins elsewhere
def test_plugins_registered_at_run_time_reach_sweep_worker_processes() -> None:
    """Every member failed with "unknown integrator" once a sweep went to its pool of processes."""
    theta = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))

    class Shipped(mbvi.Composition):
        name, order, base, weights = "shipped_fr", 4, "verlet", (theta, 1 - 2 * theta, theta)

    def build(length: float = 1.0) -> mbvi.Scene:
        s = mbvi.Scene(gravity=(0.0, 0.0, -G))
        s.add(mbvi.Particle("bob", mass=1.0, position=(length, 0.0, 0.0)))
        s.add(mbvi.Rod("world", "bob"))
        return s

    grid = {"length": [0.5, 1.0]}
    with _Registered(register_integrators=[Shipped]):
        there = mbvi.sweep(build, grid, t_end=0.05, dt=0.01, integrator="shipped_fr", scheduler="processes")
        here = mbvi.sweep(build, grid, t_end=0.05, dt=0.01, integrator="shipped_fr", scheduler="synchronous")
    assert list(there.error.values) == ["", ""]
    np.testing.assert_array_equal(there.position.values, here.position.values)


def test_plugins_is_there_after_import_mbvi() -> None:
    out = subprocess.run([sys.executable, "-c", "import mbvi; print(callable(mbvi.plugins.register_plugin))"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == "True"


def test_a_user_function_compiling_is_announced_by_its_name_not_as_the_engine(monkeypatch, capsys) -> None:
    """A (t, state) controller's wrapper lives in an mbvi module: it was announced as "compiling the engine"."""
    import time

    from mbvi.engine import cache

    mbvi.simulate(_arm(lambda t, state: (0.0, -state.joint_rate("hinge"), 0.0)), 0.01, 1e-3)  # the engine loaded
    monkeypatch.setattr(cache, "TELL_AFTER", 0.0)
    monkeypatch.setattr(cache, "_told_of", set())
    gain = float(np.random.default_rng().uniform(10.0, 20.0))  # a constant of the code: compiled anew

    def pd_announced(t, state):
        return (0.0, -gain * state.joint_angle("hinge"), 0.0)

    mbvi.simulate(_arm(pd_announced), 0.01, 1e-3)
    time.sleep(0.2)
    err = capsys.readouterr().err
    assert "the torque callable" in err and "pd_announced" in err and "ExternalTorque 'motor'" in err
    assert "compiling the engine" not in err


def test_a_composition_that_is_not_symmetric_has_the_order_the_check_allows_it() -> None:
    """The weights the check caps at order 3 (declared 4, they were accepted) measure 3 on a double pendulum."""

    class Third(mbvi.Composition):
        name, order, base, weights = "third_measured", 3, "verlet", ASYMMETRIC

    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0), velocity=(0.0, 0.5, 0.0)))
    scene.add(mbvi.Particle("b", mass=0.5, position=(1.5, 0.0, -0.5)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    reference = mbvi.simulate(scene, 1.0, 1 / 2048, "yoshida6", tol=1e-14).q[-1]
    with _Registered(register_integrators=[Third]):
        errors = [np.abs(mbvi.simulate(scene, 1.0, 1 / n, "third_measured", tol=1e-14).q[-1] - reference).max()
                  for n in (128, 256, 512)]  # fmt: skip
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all((orders > 2.7) & (orders < 3.6)), orders


def test_a_composition_registered_before_the_composition_it_builds_on_runs_by_its_name() -> None:
    """Halves of Forest–Ruth, registered before Forest–Ruth: the registry bound Forest–Ruth once as its base and
    again in its own turn, a new scheme, and ``simulate(..., "halves_of_fr")`` then said its base "changed after it
    was bound" (the class itself ran). By its name it runs, at Forest–Ruth's order 4."""
    theta = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))

    class FR(mbvi.Composition):
        name, order, base, weights = "fr_after", 4, "verlet", (theta, 1 - 2 * theta, theta)

    class HalvesOfFR(mbvi.Composition):
        name, order, base, weights = "halves_of_fr", 4, "fr_after", (0.5, 0.5)

    scene = _pendulum()
    reference = mbvi.simulate(scene, 1.0, 1 / 2048, "yoshida6", tol=1e-14).q[-1]
    with _Registered(register_integrators=[HalvesOfFR, FR]):
        errors = [np.abs(mbvi.simulate(scene, 1.0, 1 / n, "halves_of_fr", tol=1e-14).q[-1] - reference).max()
                  for n in (32, 64)]  # fmt: skip
    assert 3.6 < math.log2(errors[0] / errors[1]) < 4.4, errors


def test_weights_symmetric_to_rounding_are_symmetric_and_no_base_lends_an_order_it_lacks() -> None:
    """Yoshida's weights with the outer pair rounded apart by 1e-13 passed the order check as symmetric but were
    marked not symmetric, and a triple jump on them declared order 8 was accepted (refused on the exact ones);
    a base that is not symmetric had no cap at p + 1 at all."""
    g = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))

    class Near4(mbvi.Composition):
        name, order, base, weights = "near4_checked", 4, "verlet", (g + 1e-13, 1 - 2 * g, g - 1e-13)

    g8 = 1.0 / (2.0 - 2.0 ** (1.0 / 5.0))  # a triple jump to order 6 (declared 8)

    class On8(mbvi.Composition):
        name, order, base, weights = "on8_checked", 8, "near4_checked", (g8, 1 - 2 * g8, g8)

    class Euler3(mbvi.Composition):  # Σ wᵢ² = 0 has no real solution anyway: an order-3 claim on an order-1 base
        name, order, base, weights = "euler3_checked", 3, "symplectic_euler_a", (0.5, 0.5)

    with _Registered(register_integrators=[Near4]):
        assert Near4.symmetric
        refused = ((On8, r"order at most 6"), (Euler3, r"not symmetric\) with any weights has order at most 2"))
        for cls, match in refused:
            plugin = types.SimpleNamespace(register_integrators=mbvi.hookimpl(lambda register, c=cls: register(c)))
            with pytest.raises(mbvi.PluginError, match=match):
                mbvi.plugins.register_plugin(plugin, name=cls.name)


def test_a_slider_damping_family_in_its_three_array_form_is_still_taken() -> None:
    """The family's documented form (axis map, map, coefficient) from before its couple's body was added: the
    missing arrays are made (no body takes a couple), and it damps as the built-in law on a joint of particles."""
    from mbvi.engine.contract import Family
    from mbvi.forcelaws.builtin import JointDampingLaw

    scene = mbvi.Scene(gravity=(0, 0, 0))
    scene.add(mbvi.Particle("a", mass=1.0, position=(0, 0, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(0.5, 0, 0), velocity=(1, 0, 0)))
    scene.add(mbvi.Prismatic("a", "b", axis=(1, 0, 0), name="p"))
    scene.add(mbvi.JointDamping("p", 0.5))
    law = next(law for law in mbvi.assemble(scene).laws if isinstance(law, JointDampingLaw))
    full = law.compiled()[0]
    old = Family("slider_damping", full.arrays[:3])
    assert len(old.arrays) == 5 and not np.any(old.arrays[3]) and not np.any(old.arrays[4])
    with pytest.raises(ValueError, match="takes 5 arrays"):
        Family("slider_damping", full.arrays[:2])


def test_a_composition_of_the_implicit_pair_runs_its_own_step_not_the_compiled_one_stage() -> None:
    """The compiled implicit step takes one stage: a plugin whose scheme composes midpoint (a triple jump) has no
    compiled model, on particles and on rigid bodies alike, and runs its own NumPy step (it ran plain midpoint)."""
    from mbvi.engine import scheme as SC
    from mbvi.integrators.implicit import Midpoint

    class MidpointJump(Midpoint):
        name = "midpoint_jump"
        order = 4
        scheme = SC.compose(Midpoint.scheme, SC.triple_jump(2))

    for system in (mbvi.assemble(_pendulum()), mbvi.assemble(_arm((0.0, 0.0, 0.0)))):
        assert Midpoint(system, 1e-3).engine_model() is not None
        assert MidpointJump(system, 1e-3).engine_model() is None


# ------------------------------------------------------------------- a role given only as a compiled kernel
class _Tether(mbvi.Force):
    """U = ½ k |x|² on one particle (f = −k x): a law that gives its gradient only as a kernel."""

    def __init__(self, body: str, k: float) -> None:
        self.explicit_name, self.name = False, f"tether:{body}"
        self.body, self.bodies, self.k = body, (body,), float(k)


@numba.njit
def _tether_gradient(q, v, t, ints, floats, out):
    for i in range(3):
        out[ints[0] + i] += floats[0] * q[ints[0] + i]


class _TetherLaw(mbvi.ForceLaw):
    name = "tether_kernel_only"
    element = _Tether
    has_potential = True

    def __init__(self, elements, layout) -> None:
        super().__init__(elements, layout)
        self.o, self.k = layout.offset[elements[0].body], elements[0].k

    def potential(self, q):
        x = q[self.o : self.o + 3]
        return 0.5 * self.k * float(x @ x)

    def compiled(self):
        return mbvi.Kernel(gradient=_tether_gradient, ints=[self.o], floats=[self.k], name=self.name)


def test_a_role_given_only_as_a_kernel_is_the_same_force_on_every_path() -> None:
    """A tether whose gradient is only a compiled kernel was a zero force on the NumPy paths: explicit_euler and
    csm fell freely, equilibrium found no balance. Closed forms: x(t) = x₀ cos ωt, z(t) = −(g/ω²)(1 − cos ωt)
    (ω² = k/m), and the equilibrium z = −m g / k."""
    k = 4.0
    with _Registered(register_force_laws=[_TetherLaw]):
        scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
        scene.add(mbvi.Particle("p", mass=1.0, position=(0.1, 0.0, 0.0)))
        scene.add(_Tether("p", k))
        w = math.sqrt(k)
        exact = np.array([0.1 * math.cos(w), 0.0, -(G / k) * (1.0 - math.cos(w))])
        for integrator, tol in (("verlet", 1e-5), ("csm", 1e-6), ("explicit_euler", 5e-3)):
            end = mbvi.simulate(scene, 1.0, 1e-3, integrator).position("p")[-1]
            np.testing.assert_allclose(end, exact, atol=tol, err_msg=integrator)
        assert mbvi.equilibrium(scene).position("p")[2] == pytest.approx(-G / k, rel=1e-9)
        import pickle

        system = pickle.loads(pickle.dumps(mbvi.assemble(scene)))  # (a System holding it pickles)
        np.testing.assert_allclose(system.potential_gradient(np.array([0.1, 0.0, 0.0])), [k * 0.1, 0.0, G])


@pytest.mark.parametrize(("returned", "match"), [
    ("nan", "its potential\\(q\\) returned non-finite values at a finite state"),
    ("none", "its potential\\(q\\) returned NoneType, not a number"),
    ("summed", "its potential\\(q\\) returned shape \\(\\) for q of shape \\(\\d+, 3\\), expected \\(\\d+,\\)"),
])  # fmt: skip
@pytest.mark.parametrize("integrator", ["verlet", "explicit_euler"])
def test_a_bad_potential_is_named_not_blamed_on_the_step(returned: str, match: str, integrator: str) -> None:
    """The law's NumPy potential was never checked: NaN was the integrator's instability ("reduce dt"), None a
    TypeError naming nothing, and a batched law that summed its batch gave every state one energy."""

    class Bad(_TetherLaw):
        name = "tether_bad_potential"
        batched = returned == "summed"

        def potential(self, q):
            if returned == "nan":
                return math.nan
            if returned == "none":
                return None
            x = q[..., self.o : self.o + 3]
            return 0.5 * self.k * float(np.sum(x * x))  # the whole batch summed

    with _Registered(register_force_laws=[Bad]):
        scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
        scene.add(mbvi.Particle("p", mass=1.0, position=(0.1, 0.0, 0.0)))
        scene.add(_Tether("p", 4.0))
        with pytest.raises(LoadError, match=f"force law 'tether_bad_potential': {match}"):
            mbvi.simulate(scene, 0.2, 1e-3, integrator)


@numba.njit
def _pull_without_its_ints(q, v, t, ints, floats, out):
    o = ints[0]  # the law forgot to pack its ints
    for k in range(3):
        out[o + k] -= 0.5 * v[o + k]


@pytest.mark.parametrize("kernel", [_pull_without_its_ints, _pull_without_its_ints.py_func])
def test_a_kernel_indexing_out_of_range_is_refused_naming_the_law(kernel) -> None:
    """The compiled kernel read ints[0] of an empty array: a segmentation fault of the interpreter, naming nothing.
    Its Python form, called once at the initial configuration, names the law and the kernel (a numba function or
    a plain one, which mbvi compiles)."""

    class Pull(_TetherLaw):
        name = "pull_without_ints"
        has_potential, has_force, velocity_dependent = False, True, True

        def force(self, q, v, t):
            return np.zeros(self.nq)

        def compiled(self):
            return mbvi.Kernel(force=kernel, name=self.name)

    with _Registered(register_force_laws=[Pull]):
        scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
        scene.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, -1.0), velocity=(1.0, 0.0, 0.0)))
        scene.add(_Tether("p", 4.0))
        with pytest.raises(ValueError, match=r"force law 'pull_without_ints': its force kernel _pull_without_its_ints "
                                             r"indexes out of range .*ints has 0 entries"):  # fmt: skip
            mbvi.simulate(scene, 0.1, 1e-3)


@numba.njit
def _push_below_a_speed(q, v, t, ints, floats, out):
    o = ints[0]
    if v[o] > 1.0:  # undefined above 1 m/s (a table out of range, say)
        out[o] += math.nan
    else:
        out[o] += 1.0 - 0.1 * v[o]


def test_a_kernel_that_fails_at_the_steps_own_velocity_is_named() -> None:
    """A push on a free particle whose kernel is NaN above 1 m/s: the step's drift reaches it first, and the kernel,
    tried again only at the step's start (below 1 m/s), was cleared — "verlet produced non-finite values …
    reduce dt", after seconds of re-runs. It is now tried at slightly larger velocities too, and named."""

    class Push(_TetherLaw):
        name = "push_below_a_speed"
        has_potential, has_force, velocity_dependent = False, True, True

        def force(self, q, v, t):
            out = np.zeros(self.nq)
            _push_below_a_speed.py_func(q, v, t, np.array([self.o]), np.zeros(0), out)
            return out

        def compiled(self):
            return mbvi.Kernel(force=_push_below_a_speed, ints=[self.o], name=self.name)

    with _Registered(register_force_laws=[Push]):
        scene = mbvi.Scene(gravity=None)
        scene.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, 0.0)))
        scene.add(_Tether("p", 0.0))
        with pytest.raises(LoadError, match=r"push_below_a_speed: its force kernel returned non-finite values") as e:
            mbvi.simulate(scene, 3.0, 1e-2)
        assert 1.0 < e.value.time < 1.2  # v = 1 m/s near t = 1.05 s (dv/dt = 1 − 0.1 v)


def test_what_a_laws_compiled_raises_names_the_law() -> None:
    """A Kernel made with ints that are not integers said "Kernel ?: ints must be integers"; any other error of
    compiled() came out raw, naming no law."""

    class Floaty(_TetherLaw):
        name = "tether_floaty_ints"

        def compiled(self):
            return mbvi.Kernel(gradient=_tether_gradient, ints=[0.5], floats=[self.k])

    with _Registered(register_force_laws=[Floaty]):
        scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
        scene.add(mbvi.Particle("p", mass=1.0, position=(0.1, 0.0, 0.0)))
        scene.add(_Tether("p", 4.0))
        with pytest.raises(ValueError, match=r"force law 'tether_floaty_ints': its compiled\(\) raised ValueError: "
                                             r"Kernel \?: ints must be integers"):  # fmt: skip
            mbvi.simulate(scene, 0.1, 1e-3)


@numba.njit
def _quartic_gradient(q, v, t, ints, floats, out):
    o = ints[0]
    r2 = q[o] ** 2 + q[o + 1] ** 2 + q[o + 2] ** 2
    for i in range(3):
        out[o + i] += floats[0] * r2 * q[o + i]


@numba.njit
def _inverse_gradient(q, v, t, ints, floats, out):
    o = ints[0]
    r = math.sqrt(q[o] ** 2 + q[o + 1] ** 2 + q[o + 2] ** 2)
    for i in range(3):
        out[o + i] += floats[0] * q[o + i] / r**3


def test_an_energy_that_overflows_in_a_blow_up_is_the_runs_fault_not_the_laws() -> None:
    """U = k|x|⁴/4 overflows to inf where explicit_euler blew up (states of 1e78 m): that was a LoadError blaming
    the law, with no trajectory and no step; and a batch member that stopped early had U = −k/|x| evaluated on the
    zeros after its last state (a law that divides by |x| raised there, and the batch was the law's fault)."""

    class QuarticTether(_Tether):
        pass

    class Quartic(_TetherLaw):
        name = "quartic_tether"
        element = QuarticTether
        batched = True

        def potential(self, q):
            x = q[..., self.o : self.o + 3]
            return 0.25 * self.k * np.sum(x * x, axis=-1) ** 2

        def compiled(self):
            return mbvi.Kernel(gradient=_quartic_gradient, ints=[self.o], floats=[self.k], name=self.name)

    class Inverse(_TetherLaw):
        name = "inverse_tether"

        def potential(self, q):
            x = q[self.o : self.o + 3]
            return -self.k / math.sqrt(float(x @ x))  # ZeroDivisionError at the origin

        def compiled(self):
            return mbvi.Kernel(gradient=_inverse_gradient, ints=[self.o], floats=[self.k], name=self.name)

    with _Registered(register_force_laws=[Quartic, Inverse]):
        scene = mbvi.Scene(gravity=None)
        scene.add(mbvi.Particle("p", mass=1.0, position=(1.25, 0.0, 0.0)))
        scene.add(QuarticTether("p", 100.0))
        with pytest.raises(mbvi.SolverError) as err:
            mbvi.simulate(scene, 2.0, 0.05, "explicit_euler")
        assert not isinstance(err.value, LoadError) and err.value.trajectory is not None
        assert err.value.suggested_dt is not None and err.value.suggested_dt < 0.05

        orbit = mbvi.Scene(gravity=None)
        orbit.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0), velocity=(0.0, 1.0, 0.0)))
        orbit.add(mbvi.Rod("world", "p"))
        orbit.add(_Tether("p", 1.0))
        s0 = mbvi.assemble(orbit).initial_state()
        whirled = mbvi.State(s0.q, 3000.0 * s0.v)  # too fast for its step: its SHAKE fails at once
        with pytest.raises(mbvi.SolverError, match="member 1 of 2") as err:
            mbvi.simulate_batch(orbit, 0.3, 1e-3, initial_states=[s0, whirled])
        assert not isinstance(err.value, LoadError)
        assert len(err.value.trajectory[0].t) == 301  # the other member ran to its end


# ---------------------------------------------------------------------- a gradient's failure, a kernel's write
class _TableTether(_TetherLaw):
    """The tether with a NumPy gradient defined for z ≥ −0.3 m only (a lookup table's range)."""

    name = "table_tether"

    def compiled(self):
        return None

    def gradient(self, q):
        x = q[self.o : self.o + 3]
        if x[2] < -0.3:
            raise RuntimeError(f"table out of range at z = {x[2]:.3f}")
        out = np.zeros(self.nq)
        out[self.o : self.o + 3] = self.k * x
        return out


@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "explicit_euler", "yoshida4"])
def test_a_numpy_gradient_that_raises_mid_run_is_named_at_its_step(integrator: str) -> None:
    """The loop called gradient kernels at t = 0 whatever the stage's time: verlet blamed its own instability
    ("reduce dt") after six futile re-runs, midpoint on a rod named the law at t = 0 and kept one state of the
    ~300 it took. The tether (k = 4, from rest at z = 0) reaches z = −0.3 m where −(g/ω²)(1 − cos ωt) does:
    t = arccos(1 − 0.3 ω²/g)/ω = 0.2803 s."""
    k, w = 4.0, 2.0
    crossing = math.acos(1.0 - 0.3 * k / G) / w
    with _Registered(register_force_laws=[_TableTether]):
        scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
        scene.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, 0.0)))
        if integrator == "midpoint":  # on a rod, the implicit pair's Newton hands the step back
            scene.add(mbvi.Particle("anchor", mass=1.0, position=(1.0, 0.0, 0.0)))
            scene.add(mbvi.Rod("p", "anchor"))
            scene.add(_Tether("anchor", k))
        scene.add(_Tether("p", k))
        with pytest.raises(LoadError, match=r"its gradient(\(q\))? raised RuntimeError: table out of range") as info:
            mbvi.simulate(scene, 1.0, 1e-3, integrator)
    err = info.value
    assert "reduce dt" not in str(err)
    assert abs(err.time - crossing) < 0.02 and err.step == round(err.time / 1e-3)  # (the rod slows it a little)
    traj = err.trajectory
    assert traj.t[-1] == pytest.approx(err.time, abs=1e-12) and len(traj.t) == err.step + 1
    assert abs(traj.position("p")[-1, 2] + 0.3) < 0.01  # the failing step starts at the table's edge


@numba.njit
def _tether_gradient_writing_q(q, v, t, ints, floats, out):
    q[ints[0]] = 0.0  # (meant: out[ints[0]] = 0.0)
    for i in range(3):
        out[ints[0] + i] += floats[0] * q[ints[0] + i]


class _WritingTether(_TetherLaw):
    name = "writing_tether"

    def compiled(self):
        return mbvi.Kernel(gradient=_tether_gradient_writing_q, ints=[self.o], floats=[self.k], name=self.name)


def test_a_kernel_that_writes_into_its_state_is_refused_naming_it() -> None:
    """Compiled, ``q[0] = 0.0`` moved the particle from x = 1 to x = 0 in the first step, without a word."""
    with _Registered(register_force_laws=[_WritingTether]):
        scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
        scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0)))
        scene.add(_Tether("p", 4.0))
        match = r"force law 'writing_tether': its gradient kernel _tether_gradient_writing_q writes into its q, v"
        with pytest.raises(ValueError, match=match):
            mbvi.simulate(scene, 0.1, 1e-3)


class _MistypedTether(_TetherLaw):
    """U = ½ (3/2 k) |x|², its gradient k x: a constant typed differently in the two."""

    name = "mistyped_tether"

    def compiled(self):
        return None

    def potential(self, q):
        return 1.5 * super().potential(q)

    def gradient(self, q):
        out = np.zeros(self.nq)
        out[self.o : self.o + 3] = self.k * q[self.o : self.o + 3]
        return out


@pytest.mark.parametrize("dt", [1e-2, 1e-3])
def test_an_energy_balance_a_law_breaks_names_the_law_not_dt(dt: float) -> None:
    """The balance strays by the same 25 % at every dt (the energy is measured with U, the motion made by ∇U
    of another U); the warning said "reduce dt, e.g. to dt/4", which changed nothing."""
    with _Registered(register_force_laws=[_MistypedTether]):
        scene = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
        scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0), velocity=(0.0, 1.0, 0.0)))  # an ellipse
        scene.add(_Tether("p", 4.0))
        with pytest.warns(RuntimeWarning, match=r"force law 'mistyped_tether': its gradient is not the derivative "
                                                r"of its potential .* no dt mends") as record:  # fmt: skip
            mbvi.simulate(scene, 5.0, dt)
    assert not any("reduce dt" in str(w.message) for w in record)


class _CubicTether(_TetherLaw):
    """U = ½ k |x|² + c x³, its gradient k x + 3 c x² e_x: consistent, with a third derivative."""

    name = "cubic_tether"

    def compiled(self):
        return None

    def potential(self, q):
        return super().potential(q) + 0.5 * q[self.o] ** 3

    def gradient(self, q):
        out = np.zeros(self.nq)
        out[self.o : self.o + 3] = self.k * q[self.o : self.o + 3]
        out[self.o] += 1.5 * q[self.o] ** 2
        return out


@pytest.mark.parametrize("law", [_TetherLaw, _CubicTether])
def test_a_consistent_law_at_too_large_a_step_is_still_told_to_reduce_dt(law) -> None:
    """Started at x = 0, where the cubic law's gradient is 0 and its potential's central difference is its
    truncation c ε²: a purely relative test took that for a gradient at odds with the potential."""
    with _Registered(register_force_laws=[law]):
        scene = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
        scene.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, 0.0), velocity=(1.0, 0.0, 0.0)))
        scene.add(_Tether("p", 1e4))  # ω = 100 1/s: h ω = 1.5 is near verlet's limit of 2
        with pytest.warns(RuntimeWarning, match="reduce dt") as record:
            mbvi.simulate(scene, 1.0, 1.5e-2)
    assert not any("not the derivative" in str(w.message) for w in record)
