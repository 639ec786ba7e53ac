"""The plugin machinery (issue 3): hooks, registries, validation, lazy loading, entry points.

In datasette's way, every hook declared in :mod:`mbvi.hookspecs` must have a
test here named ``test_hook_<hook>`` and a documentation section (a heading
naming it) in ``docs/*.md``; two tests enforce that.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import mbvi
import mbvi.plugins
from mbvi import hookspecs
from mbvi.integrators.rattle import shake

DOCS = Path(__file__).resolve().parents[1] / "docs"
HOOKS = sorted(name for name in vars(hookspecs) if hasattr(getattr(hookspecs, name), f"{hookspecs.PROJECT}_spec"))


@pytest.fixture
def registry(monkeypatch):
    """Run-time plugins registered through this fixture are removed, and the registries rebuilt, afterwards."""
    registered = []

    def register(plugin, name=None):
        mbvi.plugins.register_plugin(plugin, name=name)
        registered.append(plugin)
        return plugin

    yield register
    manager = mbvi.plugins.get_plugin_manager()
    for plugin in reversed(registered):  # a composition's plugin before its base's
        if manager.is_registered(plugin):
            mbvi.plugins.unregister_plugin(plugin)
    mbvi.plugins.reset()


def _plugin(name: str, **hooks) -> types.ModuleType:
    """A plugin module whose attributes are the given hook implementations (attribute name = hook name)."""
    module = types.ModuleType(name)
    for attr, fn in hooks.items():
        setattr(module, attr, mbvi.hookimpl(fn))
    return module


class PublicRattle(mbvi.Integrator):
    """RATTLE for conservative systems written only with the public plugin helpers."""

    name = "public_rattle"
    order = 2
    symplectic = True
    variational = True

    def step(self, state: mbvi.State, t: float) -> mbvi.State:
        sysm, h = self.system, self.dt
        factor0, gdata0 = sysm.factor(state.q)
        v_free = state.v - 0.5 * h * sysm.inv_mass * sysm.potential_gradient(state.q)
        q1, v_half = shake(sysm, state.q, v_free, h, factor0, gdata0)
        v1 = v_half - 0.5 * h * sysm.inv_mass * sysm.potential_gradient(q1)
        return mbvi.State(q1, sysm.project_velocity(q1, v1))


def _pendulum() -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -1.0))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(np.sin(np.pi / 4), 0.0, -np.cos(np.pi / 4))))
    scene.add(mbvi.Rod("world", "bob"))
    return scene


# -- every hook: a test and a documentation section ------------------------------------------------


def test_hookspecs_are_found():
    assert "register_integrators" in HOOKS and "register_force_laws" in HOOKS


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_has_a_test(hook):
    assert callable(globals().get(f"test_hook_{hook}")), f"write test_hook_{hook} in {__file__}"


@pytest.mark.parametrize("hook", HOOKS)
def test_every_hook_is_documented(hook):
    heading = re.compile(rf"^#+ .*\b{hook}\b", re.MULTILINE)
    pages = [p.name for p in sorted(DOCS.glob("*.md")) if heading.search(p.read_text(encoding="utf-8"))]
    assert pages, f"no heading in docs/*.md documents the hook {hook}"


# -- the hooks ------------------------------------------------------------------------------------------


def test_hook_register_integrators(registry):
    """A class registered at run time is listed, found by name, and simulates like the built-in RATTLE."""
    registry(_plugin("runtime_rattle", register_integrators=lambda register: register(PublicRattle)))
    assert "public_rattle" in mbvi.integrators()
    assert mbvi.get_integrator("public_rattle") is PublicRattle
    ours = mbvi.simulate(_pendulum(), 5.0, 2.0**-6, "public_rattle")
    builtin = mbvi.simulate(_pendulum(), 5.0, 2.0**-6, "verlet")
    assert ours.info["integrator"] == "public_rattle"
    np.testing.assert_allclose(ours.q, builtin.q, atol=1e-11)
    assert ours.constraint_error.max() <= 1e-10


class Trap(mbvi.Force):
    """Harmonic trap on one body: U = ½ k |x − c|²."""

    def __init__(self, body: str, stiffness: float, centre=(0.0, 0.0, 0.0), name: str | None = None) -> None:
        self._init_name(name, f"trap:{body}")
        self.bodies = (body,)
        self.body = body
        self.stiffness = float(stiffness)
        self.centre = np.asarray(centre, dtype=float)


class TrapLaw(mbvi.ForceLaw):
    """All traps of a scene in one vectorized evaluation."""

    name = "trap"
    element = Trap
    has_potential = True

    def __init__(self, elements, layout) -> None:
        super().__init__(elements, layout)
        self.idx = np.array([layout.offset[e.body] + np.arange(3) for e in elements])  # (m, 3)
        self.k = np.array([e.stiffness for e in elements])
        self.c = np.array([e.centre for e in elements])

    def potential(self, q):
        d = q[self.idx] - self.c
        return float(0.5 * np.sum(self.k * np.sum(d * d, axis=1)))

    def gradient(self, q):
        grad = np.zeros(self.nq)
        np.add.at(grad, self.idx, self.k[:, None] * (q[self.idx] - self.c))
        return grad

    def hessian(self, q):
        diag = np.zeros(self.nq)
        np.add.at(diag, self.idx, np.repeat(self.k[:, None], 3, axis=1))
        return sp.diags(diag).tocsr()


def test_hook_register_force_laws(registry):
    """A force law registered at run time drives a scene: the trapped particle is a harmonic oscillator."""
    registry(_plugin("runtime_trap", register_force_laws=lambda register: register(TrapLaw)))
    assert "trap" in mbvi.force_laws()
    m, k = 2.0, 8.0
    omega = np.sqrt(k / m)
    centre, x0, v0 = np.array([0.5, 0.0, 1.0]), np.array([1.0, 0.2, 1.0]), np.array([0.0, 0.3, -0.4])
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=m, position=x0, velocity=v0))
    scene.add(Trap("p", stiffness=k, centre=centre))
    system = mbvi.assemble(scene)
    (law,) = [law for law in system.laws if isinstance(law, TrapLaw)]
    mbvi.check_force_law(law, system.initial_state().q + 0.1)
    errors = []
    for dt in (0.02, 0.01):
        traj = mbvi.simulate(scene, 3.0, dt)
        t = traj.t[:, None]
        exact = centre + (x0 - centre) * np.cos(omega * t) + v0 / omega * np.sin(omega * t)
        errors.append(np.max(np.abs(traj.position("p") - exact)))
    assert errors[1] < 1e-3
    assert errors[0] / errors[1] == pytest.approx(4.0, rel=0.05)  # Störmer–Verlet: second order


# -- validation --------------------------------------------------------------------------------------


def _register_object(register):
    register(object)


def _register_force_law_as_integrator(register):
    register(TrapLaw)


class Nameless(mbvi.Integrator):
    order = 1


class OrderZero(mbvi.Integrator):
    name = "order_zero"
    order = 0


@pytest.mark.parametrize(
    "hooks, culprit",
    [
        ({"register_integrator": lambda register: None}, "register_integrator"),  # misspelt hook
        ({"register_force_law": lambda register: None}, "register_force_law"),
        ({"register_integrators": lambda reg: None}, "reg"),  # argument the hook does not offer
    ],
    ids=["misspelt-integrators", "misspelt-force-laws", "unknown-argument"],
)
def test_broken_hook_implementation_raises_plugin_error(registry, hooks, culprit):
    with pytest.raises(mbvi.PluginError, match=rf"\b{culprit}\b"):
        registry(_plugin("broken", **hooks))
    # the broken plugin was not kept: the registry still works
    assert "verlet" in mbvi.integrators()
    assert not mbvi.plugins.get_plugin_manager().has_plugin("broken")


@pytest.mark.parametrize(
    "hook, culprit",
    [(_register_object, "object"), (_register_force_law_as_integrator, "TrapLaw")],
    ids=["object", "force-law"],
)
def test_registering_a_non_integrator_raises(registry, hook, culprit):
    with pytest.raises(mbvi.PluginError, match=culprit):
        registry(_plugin("wrong_kind", register_integrators=hook))
    assert "verlet" in mbvi.integrators()  # refused, not kept: the registry still works


@pytest.mark.parametrize("cls, culprit", [(Nameless, "Nameless"), (OrderZero, "order")])
def test_integrator_without_name_or_order_is_rejected(registry, cls, culprit):
    with pytest.raises(mbvi.PluginError, match=culprit):
        registry(_plugin("bad_class", register_integrators=lambda register: register(cls)))
    assert "verlet" in mbvi.integrators()


def test_duplicate_integrator_name_raises(registry):
    class Impostor(PublicRattle):
        name = "verlet"

    with pytest.raises(mbvi.PluginError, match="'verlet'"):
        registry(_plugin("impostor", register_integrators=lambda register: register(Impostor)))
    assert mbvi.get_integrator("verlet") is not Impostor
    mbvi.simulate(_pendulum(), 0.02, 0.01)  # every later call still works


def test_duplicate_force_law_name_raises(registry):
    class Gravity2(TrapLaw):
        name = "gravity"

    with pytest.raises(mbvi.PluginError, match="'gravity'"):
        registry(_plugin("gravity_again", register_force_laws=lambda register: register(Gravity2)))
    assert "gravity" in mbvi.force_laws()
    assert isinstance(mbvi.PluginError("x"), ValueError)  # the plugin's input is at fault


def test_simulate_accepts_an_integrator_class():
    """A class works without registration; a registered class by object or by name gives the same run."""
    traj = mbvi.simulate(_pendulum(), 2.0, 0.01, integrator=PublicRattle)
    assert traj.info["integrator"] == "public_rattle"
    by_class = mbvi.simulate(_pendulum(), 2.0, 0.01, integrator=mbvi.get_integrator("verlet"))
    by_name = mbvi.simulate(_pendulum(), 2.0, 0.01, integrator="verlet")
    assert np.array_equal(by_class.q, by_name.q)
    np.testing.assert_allclose(traj.q, by_name.q, atol=1e-11)
    with pytest.raises(ValueError, match="Integrator subclass"):
        mbvi.simulate(_pendulum(), 2.0, 0.01, integrator=TrapLaw)


# -- entry points -----------------------------------------------------------------------------------


def test_entry_point_plugin_is_installed_and_simulates():
    """plugins/mbvi-leapfrog, installed with pip, is found through the entry-point group ``mbvi``."""
    assert "leapfrog" in mbvi.integrators(), "install it: pip install -e plugins/mbvi-leapfrog"
    assert mbvi.get_integrator("leapfrog").__module__ == "mbvi_leapfrog"
    traj = mbvi.simulate(_pendulum(), 2.0, 0.01, "leapfrog")
    assert traj.constraint_error.max() <= 1e-10
    assert np.ptp(traj.energy) < 1e-3


@pytest.mark.parametrize(
    "variable, value", [("MBVI_DISABLE_PLUGINS", "1"), ("MBVI_BLOCK_PLUGINS", "leapfrog, nonexistent")]
)
def test_environment_hides_entry_point_plugins(registry, monkeypatch, variable, value):
    assert "leapfrog" in mbvi.integrators()
    monkeypatch.setenv(variable, value)
    mbvi.plugins.reset()
    names = mbvi.integrators()
    assert "leapfrog" not in names
    assert {"verlet", "midpoint", "csm", "explicit_euler", "implicit_euler"} <= set(names)
    with pytest.raises(ValueError, match="unknown integrator 'leapfrog'"):
        mbvi.simulate(_pendulum(), 1.0, 0.1, "leapfrog")


def _python(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MBVI_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return out.stdout


def test_import_is_light_and_plugins_load_lazily():
    """``import mbvi`` imports neither PyVista nor any entry-point plugin; the first registry use loads them."""
    code = (
        "import json, sys, mbvi\n"
        "before = {m: m in sys.modules for m in ('pyvista', 'vtk', 'matplotlib', 'mbvi_leapfrog')}\n"
        "names = mbvi.integrators()\n"
        "after = {m: m in sys.modules for m in ('pyvista', 'mbvi_leapfrog')}\n"
        "print(json.dumps({'before': before, 'after': after, 'names': names}))\n"
    )
    result = json.loads(_python(code))
    assert not any(result["before"].values()), result["before"]
    assert result["after"] == {"pyvista": False, "mbvi_leapfrog": True}
    assert "leapfrog" in result["names"]


def test_command_line_lists_the_plugin():
    out = _python("import sys; from mbvi.cli import main; sys.exit(main(['integrators']))")
    assert re.search(r"\bleapfrog\b", out) and re.search(r"\bverlet\b", out)


def test_a_step_that_returns_no_state_is_a_value_error_naming_the_integrator():
    """A NumPy plugin whose step returns a tuple met a raw AttributeError deep in the run."""

    class TupleStep(mbvi.Integrator):
        name = "tuple_step"
        order = 1

        def step(self, state, t):
            return state.q, state.v

    with pytest.raises(ValueError, match=r"'tuple_step': step\(\) returned tuple, not an mbvi.State"):
        mbvi.simulate(_pendulum(), 0.01, 1e-3, TupleStep)


def test_a_step_of_the_wrong_shape_is_a_value_error_naming_the_integrator():
    """The template promised to check the shape of the state coming out; a run met NumPy's bare "could not
    broadcast input array from shape (2,) into shape (6,)" where it saved the state."""

    class Truncating(mbvi.Integrator):
        name = "truncating_step"
        order = 1

        def step(self, state, t):
            return mbvi.State(state.q[:2], state.v[:2])

    system = mbvi.assemble(_pendulum())
    for call in (lambda: mbvi.simulate(system, 0.01, 1e-3, Truncating),
                 lambda: Truncating(system, 1e-3).step(system.initial_state(), 0.0)):  # fmt: skip
        with pytest.raises(
            ValueError, match=rf"'truncating_step': step\(\) returned q of shape \(2,\) .*\({system.nq},\)"
        ):
            call()


def test_a_subclass_step_that_calls_super_step_reaches_its_parents_step():
    """Every subclass's step was replaced by the one checking template, which calls the most derived
    implementation: a subclass's ``super().step(...)`` came back to itself, a RecursionError."""

    class Euler(mbvi.Integrator):
        name = "np_symplectic_euler"
        order = 1

        def step(self, state, t):
            v = state.v - self.dt * self.system.potential_gradient(state.q) / self.system.mass
            return mbvi.State(state.q + self.dt * v, v)

    calls = []

    class Counted(Euler):
        name = "np_symplectic_euler_counted"

        def step(self, state, t):
            calls.append(t)
            return super().step(state, t)

    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    s.add(mbvi.Particle("a", mass=1.0, position=(0.0, 0.0, 0.0)))
    parent = mbvi.simulate(s, 0.1, 1e-2, Euler)
    child = mbvi.simulate(s, 0.1, 1e-2, Counted)
    assert len(calls) == 10
    np.testing.assert_array_equal(child.q, parent.q)
    assert child.position("a")[-1, 2] == pytest.approx(-9.81 * 1e-4 * sum(range(1, 11)))  # z_n = −g h² n(n+1)/2
    with pytest.raises(ValueError, match="state must have q and v of shape"):  # the checks still run
        Counted(mbvi.assemble(s), 1e-2).step(mbvi.State(np.zeros(2), np.zeros(2)), 0.0)


# -- the registry stays usable, whatever a plugin does (a plugin author's review) -------------------------------

_THETA = 1 / (2 - 2 ** (1 / 3))


def _composition(name: str, weights, order: int = 4, base: str = "verlet") -> type:
    return type(name.title(), (mbvi.Composition,), {"name": name, "order": order, "base": base, "weights": weights})


def test_weights_read_from_a_file_are_used_as_numbers(registry):
    """Weights as strings (a config file) passed the check, which reads them with float(), but the scheme was
    composed from the strings: the registration failed with a TypeError and the plugin stayed registered, so
    every later use of the registry (simulate with verlet, mbvi.integrators()) raised it too."""
    from decimal import Decimal

    text = _composition("forest_ruth_text", (str(_THETA), str(1 - 2 * _THETA), str(_THETA)))
    decimal = _composition("forest_ruth_decimal", tuple(Decimal(repr(x)) for x in (_THETA, 1 - 2 * _THETA, _THETA)))
    registry(_plugin("text_weights", register_integrators=lambda register: (register(text), register(decimal))))
    runs = [mbvi.simulate(_pendulum(), 1.0, 0.01, name) for name in ("forest_ruth_text", "forest_ruth_decimal")]
    reference = mbvi.simulate(_pendulum(), 1.0, 0.01, "forest_ruth")
    for run in runs:
        np.testing.assert_array_equal(run.q, reference.q)


def test_a_plugin_whose_hook_raises_is_refused_and_not_kept(registry):
    def buggy(register):
        return {}["missing"]

    with pytest.raises(mbvi.PluginError, match=r"raised KeyError: 'missing'"):
        registry(_plugin("buggy_hook", register_integrators=buggy))
    assert not mbvi.plugins.get_plugin_manager().has_plugin("buggy_hook")
    assert "verlet" in mbvi.integrators()
    mbvi.simulate(_pendulum(), 0.02, 0.01)


def test_generator_weights_are_refused_naming_the_class(registry):
    gen = _composition("generated", (x for x in (_THETA, 1 - 2 * _THETA, _THETA)))
    with pytest.raises(mbvi.PluginError, match=r"composition Generated: weights must be a tuple"):
        registry(_plugin("generated_weights", register_integrators=lambda register: register(gen)))
    assert "verlet" in mbvi.integrators()


def test_registering_a_plugin_twice_is_refused_and_keeps_the_first(registry):
    """A notebook cell run twice: the second call was refused by pluggy, and its clean-up unregistered the first,
    valid registration (the registry then listed a composition that was gone)."""
    fr = _composition("twice", (_THETA, 1 - 2 * _THETA, _THETA))
    plugin = registry(_plugin("twice_plugin", register_integrators=lambda register: register(fr)))
    with pytest.raises(mbvi.PluginError, match="already registered"):
        mbvi.plugins.register_plugin(plugin)
    assert mbvi.plugins.get_plugin_manager().is_registered(plugin)
    other = _composition("other", (_THETA, 1 - 2 * _THETA, _THETA))
    registry(_plugin("other_plugin", register_integrators=lambda register: register(other)))  # rebuilt: still there
    assert {"twice", "other"} <= set(mbvi.integrators())


@pytest.mark.parametrize(("weights", "order"), [((0.3, 0.7), 3), ((_THETA, 1 - 2 * _THETA, _THETA), 5)])
def test_an_odd_declared_order_the_weights_cannot_give_is_refused(registry, weights, order):
    """A composition of verlet (symmetric, order 2) reaches order q only when Σ wᵢ^k = 0 for every odd k up to q:
    (0.3, 0.7) declared order 3 (measured 2.0) and Forest–Ruth's weights order 5 (measured 4.1) were accepted,
    the check stopping at q − 1."""
    cls = _composition("odd_order", weights, order=order)
    with pytest.raises(mbvi.PluginError, match=rf"declares order {order}"):
        registry(_plugin("odd_order_plugin", register_integrators=lambda register: register(cls)))


def test_the_base_of_a_registered_composition_cannot_be_unregistered_from_under_it(registry):
    """Unregistering it used to succeed, and every later use of the registry (simulate with verlet) raised."""
    base = _composition("base_x", (_THETA, 1 - 2 * _THETA, _THETA))
    top = _composition("on_base_x", (0.5, 0.5), base="base_x")
    px = registry(_plugin("px", register_integrators=lambda register: register(base)))
    registry(_plugin("py", register_integrators=lambda register: register(top)))
    with pytest.raises(mbvi.PluginError, match=r"'px' cannot be unregistered: .*composition On_Base_X: base 'base_x'"):
        mbvi.plugins.unregister_plugin(px)
    assert {"base_x", "on_base_x"} <= set(mbvi.integrators())
    mbvi.simulate(_pendulum(), 0.02, 0.01, "on_base_x")


def test_subclasses_of_built_in_integrators_step_as_they_are_written():
    """A subclass of verlet whose step calls super().step() recursed (the built-in writes _step, which the
    subclass's step had replaced); a subclass overriding _step under a class that writes step was not what
    .step() ran, while simulate ran it."""
    calls = []

    class LoggedVerlet(mbvi.get_integrator("verlet")):
        def step(self, state, t):
            calls.append(t)
            return super().step(state, t)

    system = mbvi.assemble(_pendulum())
    s0 = system.initial_state()
    ours = LoggedVerlet(system, 1e-3)
    theirs = mbvi.get_integrator("verlet")(system, 1e-3)
    a, b = ours.step(s0, 0.0), theirs.step(s0, 0.0)
    assert calls == [0.0]
    np.testing.assert_array_equal(a.q, b.q)

    class Written(mbvi.Integrator):
        name = "written_step"
        order = 1

        def step(self, state, t):
            return mbvi.State(state.q + self.dt * state.v, state.v)

    class Frozen(Written):
        name = "frozen_step"

        def _step(self, state, t):
            return mbvi.State(state.q.copy(), state.v.copy())

    class Both(mbvi.Integrator):  # writes _step and a step that calls it: the step recursed (its _step replaced)
        name = "both_steps"
        order = 1

        def _step(self, state, t):
            return mbvi.State(state.q + self.dt * state.v, state.v)

        def step(self, state, t):
            return self._step(state, t)

    np.testing.assert_array_equal(Both(system, 1e-3).step(s0, 0.0).q, s0.q + 1e-3 * s0.v)
    frozen = Frozen(system, 1e-3)
    moving = mbvi.State(s0.q, s0.v + 1.0)
    np.testing.assert_array_equal(frozen.step(moving, 0.0).q, s0.q)  # its own _step, as simulate runs it
    np.testing.assert_array_equal(mbvi.simulate(system, 0.01, 1e-3, Frozen, initial_state=moving).q[-1], s0.q)


def test_a_subclass_of_a_compiled_step_plugin_runs_its_own_step_not_the_inherited_kernel():
    """A subclass of leapfrog writing its own step inherited ``kernel``: simulate ran leapfrog's compiled step,
    the subclass's step never called (the pendulum fell where the frozen step holds it)."""
    leapfrog = pytest.importorskip("mbvi_leapfrog").Leapfrog

    class FrozenLeapfrog(leapfrog):
        name = "frozen_leapfrog"

        def step(self, state, t):
            return mbvi.State(state.q.copy(), state.v.copy())

    class CompiledAgain(leapfrog):  # says its compiled step is the one it extends': runs it
        name = "compiled_again"
        kernel = leapfrog.kernel

        def step(self, state, t):
            return mbvi.State(state.q.copy(), state.v.copy())

    system = mbvi.assemble(_pendulum())
    s0 = system.initial_state()
    assert FrozenLeapfrog.kernel is None and leapfrog.kernel is not None
    np.testing.assert_array_equal(mbvi.simulate(system, 0.05, 1e-2, FrozenLeapfrog).q[-1], s0.q)
    moved = mbvi.simulate(system, 0.05, 1e-2, CompiledAgain).q[-1]
    np.testing.assert_allclose(moved, mbvi.simulate(system, 0.05, 1e-2, "leapfrog").q[-1], rtol=0, atol=1e-12)
    assert np.abs(moved - s0.q).max() > 1e-4


def test_a_plain_integrator_class_given_to_a_run_passes_the_checks_registration_makes():
    """Only compositions were checked: a subclass named 'verlet', with order None, 0 or True ran, its run
    recording them. A subclass keeps the name of the registered class it extends."""
    base = mbvi.get_integrator("explicit_euler")
    for attrs, match in (({"name": "verlet"}, r"Plain.name 'verlet' is the built-in integrator Verlet's"),
                         ({"order": None}, "Plain.order must be a positive int"),
                         ({"order": True}, "Plain.order must be a positive int"),
                         ({"name": 3}, "Plain has no name: give it a class attribute name")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            mbvi.simulate(_pendulum(), 0.01, 1e-3, type("Plain", (base,), attrs))
    assert mbvi.simulate(_pendulum(), 0.01, 1e-3, type("Plain", (base,), {})).info["integrator"] == "explicit_euler"
    # a quick class of a notebook, with no name of its own and a NumPy order, runs under its class's name
    quick = type("Quick", (base,), {"name": "", "order": np.int64(1)})
    info = mbvi.simulate(_pendulum(), 0.01, 1e-3, quick).info
    assert info["integrator"] == "Quick" and info["order"] == 1


@pytest.mark.parametrize(
    ("attrs", "match"),
    [
        ({"order": None}, r"Unchecked.order must be a positive int"),
        ({"order": 0}, r"Unchecked.order must be a positive int"),
        ({"order": 2.5}, r"Unchecked.order must be a positive int"),
        ({"name": None}, r"Unchecked has no name"),
        ({"name": "verlet"}, r"Unchecked.name 'verlet' is the built-in integrator Verlet's"),
    ],
)
def test_a_composition_given_as_a_class_passes_the_checks_registration_makes(attrs, match):
    """Given to simulate as a class, it skipped them: order None was a bare TypeError, and order 0 or 2.5, no
    name or the name 'verlet' ran, the run recording that name and order for another method."""
    fields = {"name": "unchecked", "order": 2, "base": "verlet", "weights": (0.5, 0.5), **attrs}
    cls = type("Unchecked", (mbvi.Composition,), fields)
    with pytest.raises(ValueError, match=match):
        mbvi.simulate(_pendulum(), 0.02, 0.01, cls)
    with pytest.raises(ValueError, match=match):
        mbvi.Simulator(_pendulum(), 0.01, cls)
    good = type("Checked", (mbvi.Composition,), {**fields, "name": "halves", "order": 2})
    assert mbvi.simulate(_pendulum(), 0.02, 0.01, good).info["integrator"] == "halves"


def test_a_plugin_is_unregistered_by_its_name_given_positionally(registry):
    """``unregister_plugin("m2")`` took the string for a plugin object, found it unregistered and did nothing."""
    halves = _composition("halves_m2", (0.5, 0.5), order=2)
    registry(_plugin("m2", register_integrators=lambda register: register(halves)), name="m2")
    assert "halves_m2" in mbvi.integrators()
    mbvi.plugins.unregister_plugin("m2")
    assert "halves_m2" not in mbvi.integrators()


def test_a_law_whose_element_is_not_a_force_class_is_refused(registry):
    """``element = int`` was registered (only None and object were refused): the law could never be used."""
    from mbvi.forcelaws.builtin import DragLaw

    class IntLaw(DragLaw):
        name = "int_law"
        element = int

    with pytest.raises(mbvi.PluginError, match=r"IntLaw.element must be the force element class .*<class 'int'>"):
        registry(_plugin("int_law", register_force_laws=lambda register: register(IntLaw)))
    assert "int_law" not in mbvi.force_laws() and "drag" in mbvi.force_laws()


def test_a_second_law_for_an_element_is_refused_naming_both(registry):
    """A plugin's law for mbvi.Drag, which the built-in DragLaw handles, was registered and silently ignored."""
    from mbvi.forcelaws.builtin import DragLaw

    class DoubleDrag(DragLaw):
        name = "double_drag"

    with pytest.raises(mbvi.PluginError, match=r"DoubleDrag and mbvi.forcelaws.builtin.DragLaw both handle Drag"):
        registry(_plugin("double_drag", register_force_laws=lambda register: register(DoubleDrag)))
    assert "double_drag" not in mbvi.force_laws()
