"""Controllers inside the compiled loop: loads of ``(t)`` and ``(t, state)`` compiled with numba, or called back.

Physics and equivalence checks:

* every accessor of the compiled ``StateView`` equals the NumPy one (:class:`mbvi.loads.StateView`) on a random
  state of a scene with rotated principal axes, particles, a revolute and a prismatic joint;
* a PD torque compiled, the same PD called back as Python from the loop, and the same law built in
  (``TorsionSpring`` + ``JointDamping``) give the same trajectory to round-off;
* the compiled loop with a compiled state-feedback force against the NumPy path of the same scene;
* a controller that raises, returns NaN or another length stops the run with a ``LoadError`` (a ``SolverError``)
  naming the element, the time and the controller's own message, the partial trajectory kept — compiled or not.
"""

from __future__ import annotations

import logging
import math
from unittest import mock

import numba
import numpy as np
import pytest

import mbvi
from mbvi.loadkernels import LoadFailure, compiled_view
from mbvi.loads import state_view_factory

G, M, L = 9.81, 1.0, 0.5
KP, KD, TARGET = 20.0, 2.0, 0.5


def _arm(torque=None) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.RigidBody("arm", mass=M, inertia=(0.01, 0.01, 0.002), position=(0.0, 0.0, -L)))
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    if torque is not None:
        s.add(mbvi.ExternalTorque("arm", torque=torque, name="pd"))
    return s


def pd(t, state):
    """A PD torque about the hinge (y)."""
    return (0.0, KP * (TARGET - state.joint_angle("hinge")) - KD * state.joint_rate("hinge"), 0.0)


GAINS = {"kp": KP, "kd": KD}  # a dict global: numba cannot compile a function that reads it


def pd_as_python(t, state):
    """The same PD, reading its gains from a dict: called back from the loop as Python."""
    return (0.0, GAINS["kp"] * (TARGET - state.joint_angle("hinge")) - GAINS["kd"] * state.joint_rate("hinge"), 0.0)


def _built_in() -> mbvi.Scene:
    s = _arm()
    s.add(mbvi.TorsionSpring("hinge", KP, rest_angle=TARGET))
    s.add(mbvi.JointDamping("hinge", KD))
    return s


def _watches(scene) -> list:
    return list(mbvi.assemble(scene).engine_model().callbacks)


def test_a_pd_torque_is_compiled_and_equals_the_built_in_law_and_its_python_form(caplog) -> None:
    compiled = mbvi.simulate(_arm(pd), 3.0, 1e-3)
    built_in = mbvi.simulate(_built_in(), 3.0, 1e-3)
    with caplog.at_level(logging.WARNING, logger="mbvi"):
        python = mbvi.simulate(_arm(pd_as_python), 3.0, 1e-3)
    # compiled: its failure record is the only watch; the Python form: a callback from the loop
    assert [type(w) for w in _watches(_arm(pd))] == [LoadFailure]
    assert [type(w).__name__ for w in _watches(_arm(pd_as_python))] == ["LoadFailure", "Callback"]
    assert any(
        "ExternalTorque 'pd': its torque callable pd_as_python does not compile with numba" in r.getMessage()
        and "called from the compiled loop as Python" in r.getMessage()
        for r in caplog.records
    )
    np.testing.assert_allclose(compiled.q, built_in.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(python.q, compiled.q, rtol=0, atol=1e-12)
    assert np.ptp(compiled.joint_angle("hinge")) > 0.4  # control: the arm moved


def test_the_compiled_loop_with_a_feedback_force_equals_the_numpy_path() -> None:
    """A particle on a rod under a state-feedback force (spring to a moving target, damping): the compiled kernel
    in the compiled loop against the law's NumPy force in the NumPy RATTLE step."""

    def feedback(t, state):
        x, v = state.position("bob"), state.velocity("bob")
        return (-30.0 * (x[0] - 0.2 * math.sin(3.0 * t)) - 0.5 * v[0], 0.0, -0.5 * v[2])

    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("bob", mass=M, position=(0.0, 0.0, -L)))
    scene.add(mbvi.Rod("world", "bob"))
    scene.add(mbvi.ExternalForce("bob", force=feedback, name="ctrl"))
    fast = mbvi.simulate(scene, 2.0, 1e-3)
    with mock.patch.object(mbvi.get_integrator("verlet"), "compiled", False):
        slow = mbvi.simulate(scene, 2.0, 1e-3)
    np.testing.assert_allclose(fast.q, slow.q, rtol=0, atol=1e-11)
    assert np.ptp(fast.q[:, 0]) > 0.1


def _probe_scene() -> mbvi.Scene:
    """Rigid bodies with rotated principal axes (an off-diagonal inertia), a particle, a hinge and a slider."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    inertia = np.array([[0.02, 0.003, 0.0], [0.003, 0.01, 0.001], [0.0, 0.001, 0.015]])
    s.add(mbvi.RigidBody("a", mass=1.0, inertia=inertia, position=(0.0, 0.0, -0.4)))
    s.add(mbvi.RigidBody("b", mass=0.5, inertia=(0.015, 0.02, 0.025), position=(0.3, 0.0, -0.4)))
    s.add(mbvi.Particle("p", mass=0.2, position=(0.0, 0.5, 0.0)))
    s.add(mbvi.Revolute("world", "a", anchor=(0, 0, 0), axis=(0.3, 1.0, 0.2), name="hinge"))
    s.add(mbvi.Prismatic("a", "b", anchor=(0.3, 0.0, -0.4), axis=(1.0, 0.2, 0.0), name="slide"))
    return s


def probe(t, state):
    """Every accessor of the view, concatenated."""
    out = np.empty(41)
    out[0:3] = state.position("a")
    out[3:6] = state.velocity("b")
    out[6:15] = state.rotation("a").ravel()
    out[15:18] = state.angular_velocity("a")
    out[18:21] = state.point("b", np.array([0.1, -0.2, 0.3]))
    out[21] = state.joint_angle("hinge")
    out[22] = state.joint_rate("hinge")
    out[23] = state.joint_displacement("slide")
    out[24] = state.joint_displacement_rate("slide")
    out[25:28] = state.position("p")
    out[28:31] = state.angular_velocity("b")
    out[31:40] = state.rotation("p").ravel()
    out[40] = state.q[0] + state.v[1]
    return out


def test_every_compiled_accessor_equals_the_numpy_state_view() -> None:
    system = mbvi.assemble(_probe_scene())
    layout = system.layout
    rng = np.random.default_rng(7)
    # a state off the assembly configuration: the scene stepped a while, then random velocities projected
    traj = mbvi.simulate(_probe_scene(), 0.3, 1e-3)
    q = traj.q[-1]
    v = system.project_velocity(q, rng.normal(size=layout.nq))
    view, ints, floats = compiled_view(probe, layout)
    assert set(view._mbvi_bodies) == {"a", "b", "p"} and set(view._mbvi_joints) == {"hinge", "slide"}
    got = numba.njit(probe)(0.0, view(q, v, ints, floats))
    expected = probe(0.0, state_view_factory(layout)(q, v))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13)
    assert abs(expected[21]) > 0.01 and abs(expected[22]) > 0.01 and abs(expected[24]) > 0.01  # not trivially 0


def _failing(kind: str, compiled: bool):
    """A PD torque that fails at t ≥ 0.25 s: raising, returning NaN or returning 4 numbers."""
    if kind == "raises" and compiled:

        def bad(t, state):
            if t >= 0.25:
                raise RuntimeError("motor driver fault")
            return (0.0, -KP * state.joint_angle("hinge"), 0.0)

    elif kind == "raises":

        def bad(t, state):
            if t >= 0.25:
                raise RuntimeError("motor driver fault" + GAINS.get("suffix", ""))
            return (0.0, -KP * state.joint_angle("hinge"), 0.0)

    elif kind == "nan":

        def bad(t, state):
            tau = math.nan if t >= 0.25 else -KP * state.joint_angle("hinge")
            return (0.0, tau + (0.0 if compiled else GAINS["kp"] * 0.0), 0.0)

    else:

        def bad(t, state):
            if t >= 0.25:
                return np.zeros(4) + (0.0 if compiled else GAINS["kp"] * 0.0)
            return np.array([0.0, -KP * state.joint_angle("hinge"), 0.0])

    return bad


EXPECTED = {
    "raises": r"ExternalTorque 'pd': torque\(t=0\.25\d*, state\) raised RuntimeError: motor driver fault",
    "nan": r"ExternalTorque 'pd': torque\(t=0\.25\d*, state\) must return 3 finite numbers \(N m\); it returned "
    r"\(0\.0, nan, 0\.0\)",
    "length": r"ExternalTorque 'pd': torque\(t=0\.25\d*, state\) must return 3 finite numbers \(N m\); it returned "
    r"array\(\[0\., 0\., 0\., 0\.\]\)",
}


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
@pytest.mark.parametrize("kind", ["raises", "nan", "length"])
def test_a_failing_controller_stops_the_run_naming_the_element_time_and_message(kind: str, compiled: bool) -> None:
    scene = _arm(_failing(kind, compiled))
    watches = [type(w).__name__ for w in _watches(scene)]
    assert ("Callback" not in watches) == compiled  # the form under test
    with pytest.raises(mbvi.SolverError, match=EXPECTED[kind]) as info:
        mbvi.simulate(scene, 1.0, 1e-3)
    err = info.value
    assert isinstance(err, ValueError)  # a LoadError: both
    assert err.time == pytest.approx(0.25, abs=1.5e-3)
    partial = err.trajectory
    assert partial is not None and partial.t[-1] == pytest.approx(0.25, abs=1.5e-3)
    assert np.isfinite(partial.q).all() and len(partial.t) >= 249
    assert err.culprit == "ExternalTorque 'pd'"  # (None when the load's own check named it in the message only)


@pytest.mark.parametrize("integrator", ["yoshida4", "forest_ruth", "yoshida6"])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "python"])
def test_a_failing_controller_is_named_under_a_composition_whose_stages_reach_past_the_step(
    integrator: str, compiled: bool
) -> None:
    """yoshida4's stages run to 1.35 h past a step's start, yoshida6's to 1.02 h: the load's failure was taken for
    another step's and the run blamed stiff damping ("the implicit drift does not converge") or SHAKE, after
    re-running the scene at ever smaller steps."""
    with pytest.raises(mbvi.SolverError, match=EXPECTED["raises"]) as info:
        mbvi.simulate(_arm(_failing("raises", compiled)), 1.0, 1e-3, integrator)
    assert isinstance(info.value, ValueError) and info.value.culprit == "ExternalTorque 'pd'"
    assert info.value.time == pytest.approx(0.25, abs=1.5e-3)
    sim = mbvi.Simulator(_arm(_failing("raises", compiled)), dt=1e-3, integrator=integrator)
    with pytest.raises(mbvi.SolverError, match=EXPECTED["raises"]):
        sim.step(1000)


def test_a_load_of_time_only_compiles_and_a_callable_object_is_called_back() -> None:
    """``f(t)`` compiles like ``f(t, state)``; an object with ``__call__`` (numba cannot take it) is called back."""

    class Drive:
        def __call__(self, t):
            return (0.0, 0.3 * math.sin(2.0 * t), 0.0)

    def drive(t):
        return (0.0, 0.3 * math.sin(2.0 * t), 0.0)

    as_function = mbvi.simulate(_arm(drive), 2.0, 1e-3)
    as_object = mbvi.simulate(_arm(Drive()), 2.0, 1e-3)
    assert [type(w).__name__ for w in _watches(_arm(drive))] == ["LoadFailure"]
    assert [type(w).__name__ for w in _watches(_arm(Drive()))] == ["Callback"]
    np.testing.assert_allclose(as_function.q, as_object.q, rtol=0, atol=1e-12)
    assert np.ptp(as_function.joint_angle("hinge")) > 0.01


_FACTORY = """
import sys
import numpy as np
import mbvi

def make(gain):
    def pd(t, state):
        return (0.0, -gain * state.joint_angle("hinge") + gain * 0.1, 0.0)
    return pd

gains = [float(g) for g in sys.argv[1:]]
for gain in gains:
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    s.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0.0, 0.0, -0.5)))
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    s.add(mbvi.ExternalTorque("arm", torque=make(gain), name="pd"))
    traj = mbvi.simulate(s, 0.05, 1e-3)
    print(repr(float(traj.joint_angle("hinge")[-1])))
"""


def test_controllers_of_one_name_compiled_by_different_processes_keep_their_own_code(tmp_path) -> None:
    """Two closures of one factory (one qualified name, different gains) compiled and cached by two processes,
    then loaded by a third: each runs its own code (numba names compiled code by name; mbvi names them apart)."""
    import os
    import subprocess
    import sys

    script = tmp_path / "factory.py"
    script.write_text(_FACTORY)
    env = {**os.environ, "MBVI_CACHE_DIR": str(tmp_path / "cache"), "MBVI_QUIET": "1"}

    def run(*gains: str) -> list[float]:
        out = subprocess.run([sys.executable, str(script), *gains], env=env, capture_output=True, text=True,
                             timeout=300, check=True)  # fmt: skip
        return [float(x) for x in out.stdout.split()]

    first, second = run("5.0"), run("50.0")
    both = run("5.0", "50.0")
    assert both == first + second
    assert abs(first[0] - second[0]) > 1e-3  # control: the two gains give different motions


def _gain(angle):
    """A helper the controller calls, not decorated: mbvi compiles it along."""
    return KP * (TARGET - angle)


def pd_with_helper(t, state):
    return (0.0, _gain(state.joint_angle("hinge")) - KD * state.joint_rate("hinge"), 0.0)


def test_a_controller_calling_its_own_helpers_compiles() -> None:
    assert [type(w) for w in _watches(_arm(pd_with_helper))] == [LoadFailure]  # compiled: no Python callback
    np.testing.assert_allclose(mbvi.simulate(_arm(pd_with_helper), 1.0, 1e-3).q,
                               mbvi.simulate(_arm(pd), 1.0, 1e-3).q, rtol=0, atol=1e-13)  # fmt: skip


def _settled_angle(torque) -> float:
    """The hinge angle the PD arm settles at (6 s, well past its ~1.5 s decay)."""
    return float(mbvi.simulate(_arm(torque), 6.0, 2e-3).joint_angle("hinge")[-1])


def _balance(kp: float) -> float:
    """θ where kp(θ* − θ) = m g d sin θ (an independent root find)."""
    from scipy.optimize import brentq

    return brentq(lambda th: kp * (TARGET - th) - M * G * L * math.sin(th), 0.0, TARGET)


GAIN = np.int64(20)


def _pd_numpy_gain(t, state):
    return (0.0, GAIN * (TARGET - state.joint_angle("hinge")) - KD * state.joint_rate("hinge"), 0.0)


def test_a_gain_held_in_a_default_argument_or_a_numpy_scalar_compiles_with_its_value() -> None:
    """Two controllers that differ only in a gain numba freezes as a constant — a default argument (the
    ``kp=kp`` of a loop's lambdas), a NumPy integer global — each settle at their own balance: they shared one
    kernel, and the second ran with the first's gain (found by a helper's review)."""
    global GAIN
    for kp in (20.0, 80.0):

        def pd(t, state, kp=kp):
            return (0.0, kp * (TARGET - state.joint_angle("hinge")) - KD * state.joint_rate("hinge"), 0.0)

        assert _settled_angle(pd) == pytest.approx(_balance(kp), abs=1e-4)
    try:
        for kp in (20, 80):
            GAIN = np.int64(kp)
            assert _settled_angle(_pd_numpy_gain) == pytest.approx(_balance(kp), abs=1e-4)
    finally:
        GAIN = np.int64(20)


def test_a_joint_name_held_in_a_default_argument_compiles(caplog) -> None:
    """Controllers made in a loop bind the joint's name as they bind its gains (``jn=jn``). The view's table held
    only the names written in the code, closure cells and globals, so the default's name was unknown to it: the
    controller did not compile and ran as Python, 40× slower, with a cut-off reason. It compiles, and settles at
    the balance kp(θ* − θ) = m g d sin θ."""
    caplog.set_level(logging.INFO, logger="mbvi")
    controllers = []
    for name, kp in (("hinge", 20.0),):
        controllers.append(lambda t, state, kp=kp, jn=name: (0.0, kp * (TARGET - state.joint_angle(jn))
                                                            - KD * state.joint_rate(jn), 0.0))  # fmt: skip
    assert _settled_angle(controllers[0]) == pytest.approx(_balance(20.0), abs=1e-4)
    assert "does not compile" not in caplog.text


def test_an_assembled_system_sees_a_gain_changed_after_its_first_run() -> None:
    """``system = mbvi.assemble(scene)`` kept the controller compiled at its first run: a module-level gain
    changed afterwards was ignored by verlet on that System, and seen by explicit_euler on it (0.404 against
    0.472 rad). The System's model is built again when what a load's callable reads has changed."""
    global GAIN
    system = mbvi.assemble(_arm(_pd_numpy_gain))
    try:
        for kp in (20, 80):
            GAIN = np.int64(kp)
            compiled = float(mbvi.simulate(system, 6.0, 2e-3).joint_angle("hinge")[-1])
            assert compiled == pytest.approx(_balance(kp), abs=1e-4)
    finally:
        GAIN = np.int64(20)


def test_the_kernel_key_sees_every_value_numba_freezes() -> None:
    """The key of a function's compiled code (:func:`mbvi.engine.callbacks.code_key`) changes with each value it
    reads as a constant: a module's attribute, a NumPy float32 in a closure, a keyword-only default, an array in
    a tuple; and not with a global it does not read."""
    import sys
    import types

    from mbvi.engine.callbacks import code_key

    cfg = types.ModuleType("mbvi_test_cfg")
    cfg.KP = 20.0
    sys.modules["mbvi_test_cfg"] = cfg
    try:
        namespace = {"cfg": cfg, "np": np}
        exec("def by_module(t, state):\n    return (0.0, cfg.KP * t, 0.0)\n", namespace)
        before = code_key(namespace["by_module"])
        cfg.KP = 80.0
        assert code_key(namespace["by_module"]) != before
        cfg.OTHER = 1.0  # not read: the same key
        assert code_key(namespace["by_module"]) == code_key(namespace["by_module"])
    finally:
        del sys.modules["mbvi_test_cfg"]

    def closure(kp):
        return lambda t: (0.0, kp * t, 0.0)

    gains = np.array([20.0, 80.0], dtype=np.float32)
    assert code_key(closure(gains[0])) != code_key(closure(gains[1]))

    def keyword(t, *, kp=20.0):
        return (0.0, kp * t, 0.0)

    key = code_key(keyword)
    keyword.__kwdefaults__ = {"kp": 80.0}
    assert code_key(keyword) != key

    big = np.zeros(5000)
    table = (big, 1.0)

    def tabled(t):
        return (0.0, table[0][4000] * t, 0.0)

    key = code_key(tabled)
    big[4000] = 1.0  # inside a tuple, beyond what an array's repr shows
    assert code_key(tabled) != key


def _writes_the_state(t, state):
    state.q[0] = 0.3  # the view is read-only
    return (0.0, 0.0, 0.0)


def test_a_controller_that_writes_into_the_state_is_refused_naming_it() -> None:
    """The view lends the run's own q and v: compiled, a controller that wrote into them moved the body by
    hand and the run blew up, blamed on the step (a helper's review). Now it does not compile (the view's
    arrays are typed read-only), and called as Python it meets NumPy's read-only arrays: a LoadError naming it."""
    with pytest.raises(mbvi.SolverError, match=r"ExternalTorque 'pd': torque\(t=0, state\) raised ValueError: "
                       "assignment destination is read-only"):  # fmt: skip
        mbvi.simulate(_arm(_writes_the_state), 0.1, 1e-3)


class _Mode(__import__("enum").Enum):
    LOW = 1.0
    HIGH = 2.0


MODE = _Mode.LOW
PUSH = 1.0


def _push_of_a_comprehension(t):
    return np.array([0.0, 0.0, sum([PUSH for _ in range(1)])])  # PUSH read by the comprehension's own code


@numba.njit
def _h4():
    return PUSH


@numba.njit
def _h3():
    return _h4()


@numba.njit
def _h2():
    return _h3()


@numba.njit
def _h1():
    return _h2()


def _push_four_calls_deep(t):
    return np.array([0.0, 0.0, _h1()])


def _pushed(force) -> float:
    """A free particle pushed along z for 1 s: its speed is the push (kg m/s², 1 kg)."""
    s = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    s.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, 0.0)))
    s.add(mbvi.ExternalForce("p", force=force, name="push"))
    return float(mbvi.simulate(s, 1.0, 0.01).velocity("p")[-1, 2])


@pytest.mark.parametrize("force", [_push_of_a_comprehension, _push_four_calls_deep], ids=["comprehension", "deep"])
def test_a_value_read_by_nested_code_or_a_deep_helper_compiles_with_its_value(force) -> None:
    """A global read only inside a comprehension (a code object of its own), or by a ``numba.njit`` helper four
    calls down, is a constant of the compiled code too: changed, the load compiles again (it ran with the old
    value: a helper's review)."""
    global PUSH
    try:
        for push in (1.0, 5.0):
            PUSH = push
            assert _pushed(force) == pytest.approx(push, rel=1e-12)
    finally:
        PUSH = 1.0


def test_the_kernel_key_sees_enums_nested_code_and_a_module_s_functions() -> None:
    import sys
    import types

    from mbvi.engine.callbacks import code_key

    global MODE

    def by_mode(t):
        return (0.0, 0.0, MODE.value)

    try:
        low = code_key(by_mode)
        MODE = _Mode.HIGH
        assert code_key(by_mode) != low
    finally:
        MODE = _Mode.LOW
    helpers = types.ModuleType("mbvi_test_helpers")
    sys.modules["mbvi_test_helpers"] = helpers
    try:
        exec("def gain():\n    return 1.0\n", vars(helpers))
        namespace = {"helpers": helpers}
        exec("def by_helper(t):\n    return (0.0, 0.0, helpers.gain())\n", namespace)
        before = code_key(namespace["by_helper"])
        exec("def gain():\n    return 4.0\n", vars(helpers))  # the helper's code edited (a reload)
        assert code_key(namespace["by_helper"]) != before
    finally:
        del sys.modules["mbvi_test_helpers"]


def _arm_chain_with_pd(calls: list) -> mbvi.Scene:
    """Three links on hinges about y, the first held by a PD torque read from the state (a Python function)."""

    def pd(t, state):
        calls[0] += 1
        return (0.0, -20.0 * float(state.q[0] - 0.5) - 1.0 * float(state.v[0]), 0.0)

    s = mbvi.Scene(gravity=(0, 0, -9.81))
    parent = "world"
    for i in range(3):
        s.add(mbvi.RigidBody(f"l{i}", mass=1.0, inertia=(0.002, 0.08, 0.08), position=(i + 0.5, 0, 0)))
        s.add(mbvi.Revolute(parent, f"l{i}", anchor=(i, 0, 0), axis=(0, 1, 0), name=f"j{i}"))
        parent = f"l{i}"
    s.add(mbvi.ExternalTorque("l0", pd, name="motor"))
    return s


@pytest.mark.parametrize("integrator", ["midpoint", "implicit_euler"])
def test_newton_steps_of_rigid_bodies_make_a_loads_differences_only_when_newton_slows(integrator, monkeypatch):
    """On the NumPy path (a system too wide for the compiled solver; forced here) the implicit pair steps by
    Newton, and a state-reading load's Jacobians are central differences (4 nq calls of the user's function).
    Made afresh at every step they cost 150 calls a step on this chain (~10 ms); kept from an earlier step
    until Newton's contraction slows, ~7, and the run is the same to Newton's tolerance."""
    from mbvi.integrators import implicit

    monkeypatch.setattr(mbvi.get_integrator(integrator), "compiled", False)
    calls = [0]
    steps = 200
    traj = mbvi.simulate(_arm_chain_with_pd(calls), steps * 1e-3, 1e-3, integrator)
    kept = calls[0] / steps
    monkeypatch.setattr(
        implicit._NewtonIntegrator,
        "_forces_jacobians",
        lambda self, q, v, t, refresh: self.system.force_jacobians(q, v, t),
    )
    calls[0] = 0
    fresh = mbvi.simulate(_arm_chain_with_pd(calls), steps * 1e-3, 1e-3, integrator)
    assert kept <= 20 < 100 <= calls[0] / steps
    np.testing.assert_allclose(traj.q, fresh.q, rtol=0, atol=1e-11)
    np.testing.assert_allclose(traj.v, fresh.v, rtol=0, atol=1e-9)
    assert abs(traj.joint_angle("j0")[-1] - traj.joint_angle("j0")[0]) > 0.1  # it moved


STIFF_KD = 360.0  # h kd / 2J = 0.69 at dt = 1e-3 (J = 0.26 kg m² about the hinge)


def stiff_pd(t, state):
    return (0.0, KP * (TARGET - state.joint_angle("hinge")) - STIFF_KD * state.joint_rate("hinge"), 0.0)


def test_steps_taken_in_substeps_with_max_turn_off_are_said_and_counted_by_the_simulator_too() -> None:
    """A PD torque whose kd makes the step's velocity fixed point contract by more than ½ an iterate had every step
    retried in substeps, with max_turn=inf (which the docs say turns substepping off) and no word: a convergence
    study that halved dt saw nothing change. verlet now solves that fixed point at dt (Anderson mixing: no
    substep, no warning); yoshida4's backward stage (h_s = −1.7 h, never mixed) still cannot, and simulate warns,
    and a Simulator's trajectory counts them too (it had no refined_steps). A kd the step resolves stays silent."""
    import math
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        solved = mbvi.simulate(_arm(stiff_pd), 0.5, 1e-3, max_turn=math.inf)
    assert solved.info["refined_steps"] == 0
    with pytest.warns(RuntimeWarning, match=r"took 500 of 500 steps in substeps although max_turn=inf.*kd"):
        run = mbvi.simulate(_arm(stiff_pd), 0.5, 1e-3, "yoshida4", max_turn=math.inf)
    assert run.info["refined_steps"] == 500
    with pytest.warns(RuntimeWarning, match=r"took 500 of 500 steps"):  # steps, not the saved states
        mbvi.simulate(_arm(stiff_pd), 0.5, 1e-3, "yoshida4", max_turn=math.inf, save_every=50)
    sim = mbvi.Simulator(_arm(stiff_pd), 1e-3, "yoshida4", max_turn=math.inf)
    sim.step(500)
    stepped = sim.trajectory()
    assert stepped.info["refined_steps"] == 500
    np.testing.assert_array_equal(stepped.q, run.q)
    np.testing.assert_allclose(solved.q, run.q, rtol=0, atol=1e-5)  # both the same motion, to their orders
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        calm = mbvi.simulate(_arm(pd), 0.5, 1e-3, max_turn=math.inf)
    assert calm.info["refined_steps"] == 0
    assert mbvi.Simulator(_arm(pd), 1e-3).trajectory().info["refined_steps"] == 0
