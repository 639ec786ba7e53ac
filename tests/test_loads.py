"""Loads that read the state: ExternalForce/ExternalTorque callables of (t, state).

Physics checks: a PD-controlled pendulum settles where kp(θ* − θ) balances the
gravity torque m g L sin θ (root found by brentq, independent of mbvi), and
its damped response is the same at two step sizes; a particle under a
state-feedback spring–damper force follows the closed-form damped oscillator.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.spatial.transform import Rotation

import mbvi
from mbvi.loads import StateView, load_arity, state_view_factory

G, M, L = 9.81, 1.0, 0.5
KP, KD, TARGET = 20.0, 2.0, 0.5


def pd_pendulum(kp: float = KP, kd: float = KD, target: float = TARGET, theta0: float = 0.0) -> mbvi.Scene:
    """A rigid arm hanging from a hinge about y at the origin, PD torque about the hinge."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    pos = L * np.array([-np.sin(theta0), 0.0, -np.cos(theta0)])  # rotation θ₀ about +y of (0, 0, −L)
    s.add(mbvi.RigidBody("arm", mass=M, inertia=(0.01, 0.01, 0.002), position=pos))
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge", initial_angle=theta0))

    def pd(t, state):
        theta, rate = state.joint_angle("hinge"), state.joint_rate("hinge")
        return (0.0, kp * (target - theta) - kd * rate, 0.0)

    s.add(mbvi.ExternalTorque("arm", torque=pd, name="pd"))
    return s


def test_pd_pendulum_settles_where_the_controller_balances_gravity():
    # kp(θ* − θ) = m g L sin θ: gravity pulls the arm (rotated θ about +y) back with −m g L sin θ
    expected = brentq(lambda th: KP * (TARGET - th) - M * G * L * np.sin(th), 0.0, TARGET)
    traj = mbvi.simulate(pd_pendulum(), t_end=6.0, dt=2e-3, save_every=50)
    theta = traj.joint_angle("hinge")
    assert abs(theta[-1] - expected) < 1e-6
    assert abs(traj.joint_rate("hinge")[-1]) < 1e-5
    assert TARGET - theta[-1] > 0.09  # control: the gravity offset is real (the setpoint is not reached)


def test_pd_damped_response_is_step_size_independent():
    coarse = mbvi.simulate(pd_pendulum(), t_end=0.8, dt=1e-3)
    fine = mbvi.simulate(pd_pendulum(), t_end=0.8, dt=1e-4, save_every=10)
    assert np.allclose(coarse.t, fine.t)
    gap = np.max(np.abs(coarse.joint_angle("hinge") - fine.joint_angle("hinge")))
    assert gap < 1e-4
    assert np.ptp(coarse.joint_angle("hinge")) > 0.3  # control: it really moved


@pytest.mark.parametrize("integrator", ["midpoint", "implicit_euler"])
def test_implicit_integrators_use_finite_difference_jacobians(integrator):
    scene = pd_pendulum()
    system = mbvi.assemble(scene)
    law = next(law for law in system.force_laws if law.name == "external_torque")
    assert law.velocity_dependent and system.has_velocity_forces
    q, v = system.layout.q0, system.layout.v0 + 0.1
    errors = mbvi.check_force_law(law, q, v)
    assert errors["force_dq"] < 1e-5 and errors["force_dv"] < 1e-5
    ref = mbvi.simulate(pd_pendulum(), t_end=0.2, dt=1e-3)
    traj = mbvi.simulate(scene, t_end=0.2, dt=1e-3, integrator=integrator)
    tol = 2e-3 if integrator == "implicit_euler" else 1e-5  # first order vs second order
    assert abs(traj.joint_angle("hinge")[-1] - ref.joint_angle("hinge")[-1]) < tol


def test_feedback_force_on_a_particle_is_a_damped_oscillator():
    k, c, m, x0 = 40.0, 1.2, 0.5, 0.1
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=m, position=(x0, 0, 0)))
    scene.add(mbvi.ExternalForce("p", force=lambda t, s: -k * s.position("p") - c * s.velocity("p"), name="ctrl"))
    traj = mbvi.simulate(scene, t_end=2.0, dt=1e-3)
    w0 = np.sqrt(k / m)
    zeta = c / (2 * np.sqrt(k * m))
    wd = w0 * np.sqrt(1 - zeta**2)
    t = traj.t
    exact = x0 * np.exp(-zeta * w0 * t) * (np.cos(wd * t) + zeta * w0 / wd * np.sin(wd * t))
    assert np.max(np.abs(traj.position("p")[:, 0] - exact)) < 2e-5
    assert np.max(np.abs(traj.position("p")[:, 1:])) == 0.0


def test_state_view_reads_the_same_kinematics_as_the_trajectory():
    scene = pd_pendulum(theta0=0.3)
    scene.add(mbvi.Particle("bob", mass=0.2, position=(0.2, 0.1, 0.3), velocity=(0.1, 0.0, 0.0)))
    system = mbvi.assemble(scene)
    traj = mbvi.simulate(scene, t_end=0.3, dt=1e-3)
    view = state_view_factory(system.layout)
    for i in (0, len(traj) // 2, -1):
        s = view(traj.q[i], traj.v[i])
        assert isinstance(s, StateView)
        for name in ("arm", "bob", "world"):
            assert np.allclose(s.position(name), traj.position(name)[i], atol=1e-15)
            assert np.allclose(s.velocity(name), traj.velocity(name)[i], atol=1e-15)
            assert np.allclose(s.rotation(name), traj.rotation(name)[i], atol=1e-15)
            assert np.allclose(s.angular_velocity(name), traj.angular_velocity(name)[i], atol=1e-15)
        assert s.joint_angle("hinge") == pytest.approx(traj.joint_angle("hinge")[i], abs=1e-14)
        assert s.joint_rate("hinge") == pytest.approx(traj.joint_rate("hinge")[i], abs=1e-14)
    assert traj.joint_angle("hinge")[0] == pytest.approx(0.3, abs=1e-14)  # initial_angle sets the zero
    with pytest.raises(ValueError, match="read-only"):
        s.q[0] = 1.0
    with pytest.raises(ValueError, match="unknown body 'nope'"):
        s.position("nope")
    with pytest.raises(ValueError, match="unknown revolute joint 'nope'"):
        s.joint_angle("nope")


def test_arity_is_read_from_the_signature():
    class Controller:
        def __call__(self, t, state):
            return (0, 0, 0)

    def three(t, state, extra):
        return (0, 0, 0)

    assert load_arity(lambda t: 0, "x", "force") == 1
    assert load_arity(lambda t, state: 0, "x", "force") == 2
    assert load_arity(lambda t, state=None: 0, "x", "force") == 1
    assert load_arity(lambda *args: 0, "x", "force") == 1
    assert load_arity(Controller(), "x", "force") == 2
    assert load_arity(functools.partial(three, extra=1), "x", "force") == 2
    assert load_arity(np.sin, "x", "force") == 1  # a ufunc: no readable signature
    with pytest.raises(ValueError, match=r"ExternalForce 'f': force callable must take \(t\) or \(t, state\)"):
        scene = mbvi.Scene(gravity=None)
        scene.add(mbvi.Particle("p", mass=1.0))
        scene.add(mbvi.ExternalForce("p", force=three, name="f"))
        mbvi.assemble(scene)


def test_time_only_loads_keep_their_fast_path():
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=1.0))
    scene.add(mbvi.ExternalForce("p", force=lambda t: (1.0, 0.0, 0.0)))
    system = mbvi.assemble(scene)
    assert not system.has_velocity_forces
    traj = mbvi.simulate(scene, t_end=1.0, dt=1e-2)
    assert traj.position("p")[-1, 0] == pytest.approx(0.5, rel=1e-12)


def test_errors_in_a_users_callable_name_the_element_and_the_time():
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("b", mass=1.0, inertia=(1, 1, 1)))

    def bad(t, state):
        return 1 / 0

    scene.add(mbvi.ExternalTorque("b", torque=bad, name="x"))
    with pytest.raises(ValueError, match=r"ExternalTorque 'x': torque\(t=0, state\) raised ZeroDivisionError"):
        mbvi.simulate(scene, t_end=0.1, dt=1e-2)
    scene2 = mbvi.Scene(gravity=None)
    scene2.add(mbvi.Particle("p", mass=1.0))
    scene2.add(mbvi.ExternalForce("p", force=lambda t, s: (1.0, 2.0), name="short"))
    with pytest.raises(ValueError, match=r"ExternalForce 'short': force\(t=0, state\) must return 3 finite numbers"):
        mbvi.simulate(scene2, t_end=0.1, dt=1e-2)


# -- what a load returns: 3 finite numbers, or a ValueError naming the element (in NumPy-evaluated paths) --

RETURNED = [
    ("abc", "'abc' (str)"),
    (("1", "2", "3"), "('1', '2', '3') (tuple)"),
    ("1.0", "'1.0' (str)"),
    (b"abc", "b'abc' (bytes)"),
    (None, "None (NoneType)"),
    ({"x": 1.0}, "{'x': 1.0} (dict)"),
    ((True, 0.0, 0.0), "(True, 0.0, 0.0) (tuple)"),
    ((1.0, 2.0), "(1.0, 2.0) (tuple)"),
    ((float("nan"), 0.0, 0.0), "(nan, 0.0, 0.0) (tuple)"),
]


def _pushed_bob(value, reads_state: bool) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("bob", mass=M, position=(0.0, 0.0, -L)))
    s.add(mbvi.Rod("world", "bob"))
    s.add(mbvi.ExternalForce("bob", force=(lambda t, state: value) if reads_state else (lambda t: value), name="push"))
    return s


@pytest.mark.parametrize(("value", "shown"), RETURNED, ids=[r[1] for r in RETURNED])
def test_a_force_that_returns_no_vector_stops_equilibrium_with_a_value_error_naming_it(value, shown) -> None:
    """A string used to fail in equilibrium with numpy's 'could not convert string to float', naming nothing;
    a tuple of strings and a bool passed silently (converted by numpy)."""
    with pytest.raises(ValueError) as info:
        mbvi.equilibrium(_pushed_bob(value, reads_state=False))
    assert str(info.value) == f"ExternalForce 'push': force(t=0) must return 3 finite numbers (N); it returned {shown}"


@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "implicit_euler", "explicit_euler", "csm"])
@pytest.mark.parametrize("reads_state", [False, True], ids=["f(t)", "f(t, state)"])
def test_a_force_that_returns_a_string_stops_simulate_with_a_value_error_naming_it(integrator, reads_state) -> None:
    """Compiled in the loop (verlet, midpoint, implicit_euler) or evaluated in NumPy (explicit_euler, csm), every
    integrator reports the element, the call and what came back."""
    args = r"t=[0-9.e-]+, state" if reads_state else r"t=[0-9.e-]+"
    expected = rf"ExternalForce 'push': force\({args}\) must return 3 finite numbers \(N\); it returned 'abc' \(str\)"
    with pytest.raises(ValueError, match=rf"{expected}$") as info:
        mbvi.simulate(_pushed_bob("abc", reads_state), t_end=0.01, dt=1e-3, integrator=integrator)
    assert info.value.culprit == "ExternalForce 'push'"  # named in the message, and as the culprit, on every path


def test_a_torque_that_returns_strings_is_a_value_error_in_simulate_batch_and_equilibrium() -> None:
    scene = pd_pendulum()
    scene.add(mbvi.ExternalTorque("arm", torque=lambda t, state: ("0", "1", "0"), name="bad"))
    expected = (
        r"ExternalTorque 'bad': torque\(t=0, state\) must return 3 finite numbers \(N m\); "
        r"it returned \('0', '1', '0'\) \(tuple\)$"
    )
    with pytest.raises(ValueError, match=expected):
        mbvi.equilibrium(scene)
    state = mbvi.assemble(scene).initial_state()
    batch = (np.stack([state.q, state.q]), np.stack([state.v, state.v]))
    with pytest.raises(ValueError, match=expected):
        mbvi.simulate_batch(scene, 0.01, 1e-3, initial_states=batch)


def test_equilibrium_of_a_pd_controlled_arm_is_where_the_controller_balances_gravity() -> None:
    """A load that reads the state has no work potential, so U − W cannot see it: the statics line search
    accepts the steps that reduce the imbalance (it used to fail, 'line search failed')."""
    expected = brentq(lambda th: KP * (TARGET - th) - M * G * L * np.sin(th), 0.0, TARGET)
    eq = mbvi.equilibrium(pd_pendulum())
    x = eq.position("arm")
    assert np.arctan2(-x[0], -x[2]) == pytest.approx(expected, abs=1e-10)  # rotated θ about +y: x = −L sin θ
    assert eq.stable


def test_a_state_reading_torques_jacobians_are_the_whole_laws_differences() -> None:
    """∂f/∂q and ∂f/∂v of a torque τ(t, state) on a tilted, spinning body: the held-τ part exact and τ alone
    differenced agree with central differences of the whole law (what the implicit steps used, at 3× the cost),
    off the rotation group too (midpoint's mean configuration)."""
    from mbvi.forcelaws.base import ForceLaw

    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.RigidBody("arm", mass=M, inertia=(0.01, 0.02, 0.015), position=(0.1, -0.2, -0.4),
                             orientation=Rotation.from_rotvec([0.3, 0.6, 0.15]).as_matrix(),
                             angular_velocity=(0.3, -1.1, 2.0), velocity=(0.2, 0.1, -0.3)))  # fmt: skip

    def torque(t, state):  # reads the body's rotation and spin, and the time
        w, R = state.angular_velocity("arm"), state.rotation("arm")
        return -2.0 * w + 3.0 * R[:, 2] * np.sin(t) + 0.5 * np.cross(R[:, 0], w)

    scene.add(mbvi.ExternalTorque("arm", torque=torque))
    system = mbvi.assemble(scene)
    law = next(law for law in system.force_laws if law.name == "external_torque")
    s0 = system.initial_state()
    rng = np.random.default_rng(3)
    for q in (s0.q, s0.q + 1e-2 * rng.standard_normal(len(s0.q))):  # on and off the rotation group
        dq, dv = law.force_jacobians(q, s0.v, 0.4)
        fdq, fdv = ForceLaw.force_jacobians(law, q, s0.v, 0.4)
        np.testing.assert_allclose(dq.toarray(), fdq.toarray(), rtol=0, atol=1e-7 * np.abs(fdq.toarray()).max())
        np.testing.assert_allclose(dv.toarray(), fdv.toarray(), rtol=0, atol=1e-7 * np.abs(fdv.toarray()).max())
        assert np.abs(dv.toarray()).max() > 0.1  # the load's own rate dependence is there
