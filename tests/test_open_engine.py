"""The open engine: user-written force laws and integrators run inside the compiled loop, through one contract.

* a plugin law's compiled kernel (``mbvi_quadratic_drag``) and the same law's NumPy methods give the same run
  to round-off; a law with no kernel at all runs inside the compiled loop (its methods called back), the same;
* compositions declared as data and a plugin's compiled step (``mbvi_leapfrog``) run compiled: serial and batched
  runs agree bit for bit, the compiled step is the NumPy step to round-off, a bad composition is refused naming it;
* a run's state is a value: a run split into compiled calls is the one run, bit for bit.
"""

from __future__ import annotations

import logging
import math
from unittest import mock

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import mbvi
from mbvi.engine import callbacks

qd = pytest.importorskip("mbvi_quadratic_drag")
lf = pytest.importorskip("mbvi_leapfrog")


def _double_pendulum(*forces) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(math.sin(0.8), 0.0, -math.cos(0.8))))
    scene.add(mbvi.Particle("b", mass=1.0, position=(math.sin(0.8) + 1.0, 0.0, -math.cos(0.8))))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    for f in forces:
        scene.add(f)
    return scene


def _dragged_bodies(seed: int = 3) -> mbvi.Scene:
    """A particle and two rigid bodies on joints, with quadratic drag at off-centre points."""
    rng = np.random.default_rng(seed)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("p", mass=0.7, position=(0.0, 0.0, -1.0), velocity=(1.0, 0.5, 0.0)))
    scene.add(mbvi.Rod("world", "p"))
    orientation = Rotation.random(random_state=seed)
    scene.add(
        mbvi.RigidBody("b0", mass=1.2, inertia=(0.1, 0.2, 0.25), position=(1.0, 0.0, 0.0), orientation=orientation)
    )
    scene.add(mbvi.Spherical("world", "b0", anchor=(0.6, 0.0, 0.0)))
    scene.add(mbvi.RigidBody("b1", mass=0.8, inertia=(0.05, 0.06, 0.07), position=(1.6, 0.0, 0.0)))
    scene.add(mbvi.Revolute("b0", "b1", anchor=(1.3, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))
    for body in ("p", "b0", "b1"):
        scene.add(qd.QuadraticDrag(body, coefficient=rng.uniform(0.2, 0.6), anchor=rng.normal(scale=0.1, size=3)))
    return scene


class SlowDrag(qd.QuadraticDrag):
    """Quadratic drag evaluated by :class:`_NumpyOnlyDrag`."""


class _NumpyOnlyDrag(qd.QuadraticDragLaw):
    """The same law without its kernel: only NumPy methods (a plugin written before the kernel contract)."""

    name = "numpy_only_drag"
    element = SlowDrag

    def compiled(self):
        return None


@pytest.mark.parametrize("scene", ["double_pendulum", "rigid"])
def test_a_compiled_plugin_law_is_its_numpy_methods_to_round_off(scene: str) -> None:
    """The QuadraticDrag kernel in the compiled loop against the same law stepped by the NumPy path."""
    built = (
        _double_pendulum(qd.QuadraticDrag("b", coefficient=0.4)) if scene == "double_pendulum" else _dragged_bodies()
    )
    fast = mbvi.simulate(built, 2.0, 1e-3)
    with mock.patch.object(mbvi.get_integrator("verlet"), "compiled", False):
        slow = mbvi.simulate(built, 2.0, 1e-3)
    if scene == "double_pendulum":
        np.testing.assert_allclose(fast.q, slow.q, rtol=0, atol=1e-11)
    else:  # the compiled loop turns rigid bodies on SO(3), the NumPy path through their columns: both 2nd order
        assert np.abs(fast.q - slow.q).max() < 1e-4
    assert fast.energy[-1] < fast.energy[0] - 0.01  # the drag took energy out


def test_a_law_without_a_kernel_runs_inside_the_compiled_loop(caplog: pytest.LogCaptureFixture) -> None:
    """Its NumPy force is called back from the compiled loop: no step on the NumPy path, the kernel's numbers."""
    system = mbvi.assemble(_double_pendulum(qd.QuadraticDrag("b", coefficient=0.4)))
    kernel_run = mbvi.get_integrator("verlet")(system, 1e-3).run(system.initial_state(), 0.0, 2000)
    plugin = _PluginModule()
    mbvi.plugins.register_plugin(plugin, name="numpy_only_drag")
    try:
        numpy_law = mbvi.assemble(_double_pendulum(SlowDrag("b", coefficient=0.4)))
        assert any(type(law) is _NumpyOnlyDrag for law in numpy_law.laws)
        with caplog.at_level(logging.INFO, logger="mbvi"):
            assert numpy_law.engine_model() is not None and len(numpy_law.engine_model().callbacks) == 1
        out = mbvi.get_integrator("verlet")(numpy_law, 1e-3).run(numpy_law.initial_state(), 0.0, 2000)
    finally:
        mbvi.plugins.unregister_plugin(plugin)
    assert out.counters["numpy_steps"] == 0
    np.testing.assert_allclose(out.q, kernel_run.q, rtol=0, atol=1e-12)
    assert any("no compiled kernel" in r.getMessage() for r in caplog.records)


class _PluginModule:
    """A run-time plugin registering the kernel-less law."""

    @mbvi.hookimpl
    def register_force_laws(self, register):
        register(_NumpyOnlyDrag)


def test_a_kernel_numba_cannot_compile_is_called_as_python(caplog: pytest.LogCaptureFixture) -> None:
    """A kernel that uses Python objects numba refuses: logged once, then called from the loop, same numbers."""

    table = {"coefficient": 0.3}  # a dict read from a closure: numba's nopython mode cannot type it

    def untyped_drag(q, v, t, ints, floats, out):
        for k in range(3):
            out[ints[0] + k] -= table["coefficient"] * v[ints[0] + k]

    class UntypedDrag(mbvi.Drag):
        pass

    class Law(mbvi.ForceLaw):
        name = "untyped_drag"
        element = UntypedDrag
        has_force = True
        velocity_dependent = True

        def force(self, q, v, t):
            return -0.3 * v * (np.arange(self.nq) >= 3)

        def compiled(self):
            return mbvi.Kernel(force=untyped_drag, ints=[3], floats=[0.3], name="untyped drag")

    class Module:
        @mbvi.hookimpl
        def register_force_laws(self, register):
            register(Law)

    builtin = mbvi.simulate(_double_pendulum(mbvi.Drag("b", coefficient=0.3)), 1.0, 1e-3)
    module = Module()
    mbvi.plugins.register_plugin(module, name="untyped")
    try:
        with caplog.at_level(logging.WARNING, logger="mbvi"):
            traj = mbvi.simulate(_double_pendulum(UntypedDrag("b", coefficient=0.3)), 1.0, 1e-3)
    finally:
        mbvi.plugins.unregister_plugin(module)
    # it names the user's function, not only the law
    assert any("untyped drag: its force kernel" in r.getMessage() and "untyped_drag does not compile with numba"
               in r.getMessage() for r in caplog.records)  # fmt: skip
    np.testing.assert_allclose(traj.q, builtin.q, rtol=0, atol=1e-12)


def test_a_callable_numba_cannot_compile_is_tried_once_not_at_every_assembly() -> None:
    """A (t, state) load writing to a dict is called from the loop as Python. numba's failed attempt (~0.8 s) was
    not remembered: every simulate(scene) of it tried again (16 such loads: 14 s before each run's first step).
    The second run asks numba nothing, and runs the same."""
    log = {}

    def pull(t, state):
        log["t"] = t  # a dict written: numba's nopython mode refuses it
        return (0.0, 0.0, -0.5 * state.velocity("b")[2])

    scene = _double_pendulum(mbvi.ExternalForce("b", force=pull))
    first = mbvi.simulate(scene, 0.05, 1e-3)
    with mock.patch.object(callbacks, "import_generated", side_effect=AssertionError("numba asked again")) as tried:
        second = mbvi.simulate(scene, 0.05, 1e-3)
    assert tried.call_count == 0
    np.testing.assert_array_equal(second.q, first.q)


def test_a_load_that_raises_stops_the_run_naming_it_and_keeps_what_ran() -> None:
    calls = []

    def push(t):
        calls.append(t)
        if t > 0.05:
            raise RuntimeError("sensor lost")
        return (0.0, 0.0, 1.0)

    scene = _double_pendulum(mbvi.ExternalForce("b", force=push, name="thruster"))
    with pytest.raises(mbvi.SolverError, match=r"ExternalForce 'thruster'.*RuntimeError: sensor lost") as err:
        mbvi.simulate(scene, 1.0, 1e-3)
    assert isinstance(err.value, ValueError)  # the element is at fault
    assert 0.05 <= err.value.time <= 0.052
    assert err.value.trajectory is not None and err.value.trajectory.t[-1] <= err.value.time


@pytest.mark.parametrize(("weights", "base", "match"), [
    ((0.5, 0.4), "verlet", "sum to 1"),
    ((0.5, 0.5), "no_such_method", "not a registered integrator"),
    ((0.5, 0.5), "midpoint", "not a member of the RATTLE family"),
    ((0.5, float("nan"), 0.5), "verlet", "finite"),
])  # fmt: skip
def test_a_bad_composition_is_refused_naming_it(weights, base, match) -> None:
    class Bad(mbvi.Composition):
        name = "bad_composition"
        order = 2

    Bad.weights, Bad.base = weights, base
    scene = _double_pendulum()
    with pytest.raises(ValueError, match=f"composition .*Bad.*{match}"):
        mbvi.simulate(scene, 0.01, 1e-3, Bad)

    class Module:
        @mbvi.hookimpl
        def register_integrators(self, register):
            register(Bad)

    module = Module()
    try:  # refused when registered, naming the class; not kept, so the registry stays usable
        with pytest.raises(mbvi.PluginError, match=f"Bad.*{match}"):
            mbvi.plugins.register_plugin(module, name="bad")
    finally:
        mbvi.plugins.unregister_plugin(module)
    assert "verlet" in mbvi.integrators()


def test_a_composition_changed_after_a_run_runs_its_new_weights_checked() -> None:
    """In a notebook: a composition's weights changed after a run are the next run's (the old scheme ran on,
    unchecked), and new weights that do not sum to 1 are refused."""

    class Mine(mbvi.Composition):
        name = "mine_changed"
        order = 2
        base = "verlet"
        weights = (0.5, 0.5)

    scene = _double_pendulum()
    halves = mbvi.simulate(scene, 0.5, 0.05, Mine)
    Mine.weights, Mine.order = mbvi.get_integrator("forest_ruth").weights, 4
    fourth = mbvi.simulate(scene, 0.5, 0.05, Mine)
    assert np.array_equal(fourth.q, mbvi.simulate(scene, 0.5, 0.05, "forest_ruth").q)
    assert not np.allclose(fourth.q, halves.q, rtol=0, atol=1e-6)
    assert fourth.info["order"] == 4
    Mine.weights = (0.7, 0.7)
    with pytest.raises(ValueError, match=r"composition .*Mine.*sum to 1"):
        mbvi.simulate(scene, 0.5, 0.05, Mine)
    with pytest.raises(ValueError, match="changed after it was bound"):  # the old scheme is not taken silently
        Mine.method()


def test_a_composition_of_a_changed_composition_is_bound_again() -> None:
    """B composed on A: A's weights changed and A bound again, B kept running its scheme composed on the old A."""

    class Inner(mbvi.Composition):
        name = "inner_changed"
        order = 2
        base = "verlet"
        weights = (0.5, 0.5)

    class Outer(mbvi.Composition):
        name = "outer_of_inner"
        order = 2
        base = "inner_changed"
        weights = (0.5, 0.5)

    class Module:
        @mbvi.hookimpl
        def register_integrators(self, register):
            register(Inner)
            register(Outer)

    module = Module()
    mbvi.plugins.register_plugin(module, name="inner_outer")
    try:
        scene = _double_pendulum()
        before = mbvi.simulate(scene, 0.5, 0.05, Outer)
        Inner.weights, Inner.order = mbvi.get_integrator("forest_ruth").weights, 4
        with pytest.raises(ValueError, match="or its base's, changed after it was bound"):
            Outer.method()  # run by name, it says so
        after = mbvi.simulate(scene, 0.5, 0.05, Outer)  # given as a class: bound again on the new Inner
        halves = mbvi.simulate(scene, 0.5, 0.025, "forest_ruth")  # two half steps of Forest–Ruth
        np.testing.assert_allclose(after.q[-1], halves.q[-1], rtol=0, atol=1e-12)
        assert not np.allclose(after.q[-1], before.q[-1], rtol=0, atol=1e-6)
    finally:
        mbvi.plugins.unregister_plugin(module)


def test_a_composition_of_a_plugin_that_takes_its_own_step_is_refused() -> None:
    """A subclass of verlet that writes its own step does not take the scheme it inherits: composing that scheme
    ran two half steps of RATTLE under its name."""

    class Frozen(mbvi.get_integrator("verlet")):
        name = "frozen_step"

        def step(self, state, t):
            return state

    class Twice(mbvi.Composition):
        name = "twice_frozen"
        order = 2
        base = "frozen_step"
        weights = (0.5, 0.5)

    class Module:
        @mbvi.hookimpl
        def register_integrators(self, register):
            register(Frozen)
            register(Twice)

    module = Module()
    try:
        with pytest.raises(mbvi.PluginError, match="Twice: base 'frozen_step' takes a step of its own"):
            mbvi.plugins.register_plugin(module, name="frozen")
    finally:
        mbvi.plugins.unregister_plugin(module)
    assert "verlet" in mbvi.integrators()


def test_a_composition_given_as_a_class_runs_compiled_as_the_same_weights_written_out() -> None:
    """A composition of yoshida4 (itself a composition of verlet) is the flat composition of verlet it stands for."""

    class Nested(mbvi.Composition):
        name = "nested_triple_jump"
        order = 4
        base = "yoshida4"
        weights = (1.0,)

    class Flat(mbvi.Composition):
        name = "flat_triple_jump"
        order = 4
        base = "verlet"
        weights = mbvi.get_integrator("yoshida4").weights

    scene = _double_pendulum()
    a = mbvi.simulate(scene, 1.0, 1e-3, Nested)
    b = mbvi.simulate(scene, 1.0, 1e-3, Flat)
    c = mbvi.simulate(scene, 1.0, 1e-3, "yoshida4")
    assert np.array_equal(a.q, c.q) and np.array_equal(b.q, c.q)


@pytest.mark.parametrize("integrator", ["forest_ruth", "yoshida6", "leapfrog", "yoshida4"])
@pytest.mark.parametrize("scene", ["double_pendulum", "rigid"])
def test_batch_equals_serial_for_compositions_and_compiled_plugin_steps(integrator: str, scene: str) -> None:
    built = _double_pendulum(mbvi.Drag("b", coefficient=0.2)) if scene == "double_pendulum" else _dragged_bodies()
    system = mbvi.assemble(built)
    s0 = system.initial_state()
    rng = np.random.default_rng(1)
    states = [mbvi.State(s0.q, system.project_velocity(s0.q, s0.v + 0.1 * rng.normal(size=system.nq)))
              for _ in range(3)]  # fmt: skip
    batch = mbvi.simulate_batch(built, 0.5, 1e-3, initial_states=states, integrator=integrator)
    for member in batch:  # from the state the batch starts its member at (it projects the velocity once more)
        serial = mbvi.simulate(built, 0.5, 1e-3, integrator, initial_state=mbvi.State(member.q[0], member.v[0]))
        if scene == "rigid" and integrator != "leapfrog":
            # the body rates a member starts from are its projected ones, the serial run's are those read back
            # from the saved column velocities (Ṙ = R ω̂, ω again): a round-off apart
            np.testing.assert_allclose(member.q, serial.q, rtol=0, atol=1e-12)
        else:
            assert np.array_equal(member.q, serial.q) and np.array_equal(member.v, serial.v)
        assert serial.constraint_error.max() <= 1e-10
        assert (member.work is None) == (serial.work is None)


@pytest.mark.parametrize("integrator", ["leapfrog", "verlet"])
def test_a_batch_without_forces_has_zero_work_as_a_run_alone(integrator: str) -> None:
    built = _double_pendulum()
    s0 = mbvi.assemble(built).initial_state()
    batch = mbvi.simulate_batch(built, 0.05, 1e-3, initial_states=[s0, s0], integrator=integrator)
    alone = mbvi.simulate(built, 0.05, 1e-3, integrator)
    assert alone.work is not None and not alone.work.any()
    for member in batch:
        assert member.work is not None and np.array_equal(member.work, alone.work)


@pytest.mark.parametrize("scene", ["double_pendulum", "rigid"])
def test_the_compiled_leapfrog_step_is_its_numpy_step_to_round_off(scene: str) -> None:
    built = _double_pendulum(mbvi.Drag("b", coefficient=0.2)) if scene == "double_pendulum" else _dragged_bodies()
    fast = mbvi.simulate(built, 1.0, 1e-3, "leapfrog")
    with mock.patch.object(lf.Leapfrog, "kernel", None):
        slow = mbvi.simulate(built, 1.0, 1e-3, "leapfrog")
    np.testing.assert_allclose(fast.q, slow.q, rtol=0, atol=1e-11)
    np.testing.assert_allclose(fast.v, slow.v, rtol=0, atol=1e-10)


@pytest.mark.parametrize("integrator", ["verlet", "yoshida4", "midpoint", "leapfrog"])
@pytest.mark.parametrize("scene", ["double_pendulum", "rigid"])
def test_a_run_split_into_compiled_calls_is_the_one_run_bit_for_bit(integrator: str, scene: str) -> None:
    """A progress callback cuts a run into calls of 2000 steps; the run's state carries over whole."""
    built = _double_pendulum(mbvi.Drag("b", coefficient=0.2)) if scene == "double_pendulum" else _dragged_bodies()
    whole = mbvi.simulate(built, 5.0, 1e-3, integrator)
    chunked = mbvi.simulate(built, 5.0, 1e-3, integrator, progress=True)
    assert np.array_equal(whole.q, chunked.q) and np.array_equal(whole.v, chunked.v)


def test_a_kernel_is_compiled_once_per_code_and_cached_by_it(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The wrapper of a kernel lives in a file named by its code (and the constants it reads): the same code gives
    the same file, another constant another file."""
    monkeypatch.setenv("MBVI_CACHE_DIR", str(tmp_path))
    ns: dict = {}
    source = "def k(q, v, t, ints, floats, out):\n    out[0] += C * v[0]\n"
    exec(compile(source, str(tmp_path / "user_kernels.py"), "exec"), {"C": 1.0}, ns)
    first = callbacks._signature_key(ns["k"], "force")
    exec(compile(source, str(tmp_path / "user_kernels.py"), "exec"), {"C": 1.0}, ns)
    assert callbacks._signature_key(ns["k"], "force") == first
    exec(compile(source, str(tmp_path / "user_kernels.py"), "exec"), {"C": 2.0}, ns)
    assert callbacks._signature_key(ns["k"], "force") != first


def test_the_first_compilation_is_announced_once(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """A compilation longer than a moment prints one line on stderr (the first run on a machine), once."""
    import time

    import numba

    from mbvi.engine import cache

    monkeypatch.setattr(cache, "TELL_AFTER", 0.0)
    monkeypatch.setattr(cache, "_told_of", set())
    numba.njit(lambda x: x + 1.0)(1.0)  # a user's new function: numba compiles it (no cache), not the engine
    time.sleep(0.2)
    err = capsys.readouterr().err
    assert err.count("mbvi: compiling test_open_engine.") == 1 and "the engine itself is not recompiled" in err
    assert "compiling the engine" not in err  # it said so for every new controller, which misled
    numba.njit(lambda x: x + 2.0)(1.0)  # the same name again: said once
    time.sleep(0.2)
    assert "compiling" not in capsys.readouterr().err
    cache._tell("engine")  # what the engine's own first compilation says, once
    cache._tell("engine")
    assert capsys.readouterr().err.count("compiling the engine for this machine") == 1
