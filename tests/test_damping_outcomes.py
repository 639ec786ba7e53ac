"""Damping too stiff for the step is never a result passed as fine: explicit Euler's blow-up under its own damping
is seen, midpoint's sign-flipping velocity under a damping that stops a motion within a step warns, and the
advice for a stiff damping names the integrator that damps it."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import mbvi


def dragged(coefficient: float, gravity=None) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=gravity)
    scene.add(mbvi.Particle("a", mass=1.0, position=(0, 0, 0), velocity=(1, 0, 0)))
    scene.add(mbvi.Drag("a", coefficient=coefficient))
    return scene


def damped_arm(coefficient: float) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0, 0, -0.5),
                             velocity=(-1.0, 0, 0), angular_velocity=(0, 2.0, 0)))  # fmt: skip
    scene.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    scene.add(mbvi.JointDamping("hinge", coefficient=coefficient))
    return scene


def test_explicit_euler_unstable_under_its_own_damping_is_not_passed_silently() -> None:
    """A drag of c/m = 5 1/s at dt = 0.624 s (h c/m = 3.1 > 2): explicit Euler's velocity flips and grows, 0.5 J
    became 5.7e12 J, and the drag was credited with +5.7e12 J of work (the trapezoid over a flipping velocity), so
    that E − E₀ − W balanced and nothing warned. The work is now that of the force the step applies, F(q₀, v₀)."""
    with pytest.warns(RuntimeWarning, match=r"explicit_euler.*energy balance"):
        run = mbvi.simulate(dragged(5.0), t_end=12.48, dt=0.624, integrator="explicit_euler")
    assert run.work[-1] < 0.0  # a drag takes energy, whatever the step does
    with pytest.warns(RuntimeWarning, match=r"explicit_euler.*energy balance"):
        mbvi.simulate(damped_arm(40.0), t_end=1.0, dt=0.02, integrator="explicit_euler")


def test_explicit_euler_within_its_stability_keeps_a_first_order_work_balance() -> None:
    """At h c/m < 2 the drag's work balances the energy lost, the balance error first order in dt."""
    errors = []
    for dt in (0.02, 0.01, 0.005):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            run = mbvi.simulate(dragged(5.0), t_end=1.0, dt=dt, integrator="explicit_euler")
        assert run.energy[-1] == pytest.approx(0.5 * math.exp(-10.0), rel=0.5)  # ½ v² e^(−2ct/m)
        errors.append(float(np.max(np.abs(run.energy - run.energy[0] - run.work))))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 0.8), orders


def test_midpoint_under_damping_that_stops_a_motion_within_a_step_warns() -> None:
    """A drag of c/m = 1e5 1/s at dt = 0.01 s: midpoint's velocity went 1, −0.996, 0.992 … and still 0.82 at 0.5 s
    (the motion stops in 1e-4 s), with an exact energy balance and no warning."""
    scene = dragged(1e5, gravity=(0, 0, -9.81))
    with pytest.warns(RuntimeWarning, match=r"midpoint.*damping is stiff.*'a'.*h c/m = 1e\+03.*implicit_euler") as rec:
        run = mbvi.simulate(scene, t_end=0.5, dt=0.01, integrator="midpoint")
    assert abs(run.velocity("a")[-1, 0]) > 0.5  # what it warns of: (1 − a)/(1 + a) = −0.996 a step
    assert "dt <= 2e-05" in str(rec[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the remedy it names damps it
        damped = mbvi.simulate(scene, t_end=0.5, dt=0.01, integrator="implicit_euler")
    assert damped.velocity("a")[-1] == pytest.approx([0.0, 0.0, -9.81e-5], abs=1e-12)
    with pytest.warns(RuntimeWarning, match=r"midpoint.*damping is stiff.*'arm'"):  # a joint's damping, rigid body
        mbvi.simulate(damped_arm(40.0), t_end=0.2, dt=0.02, integrator="midpoint")


def test_midpoint_just_past_h_c_over_m_2_damps_at_once_and_stays_silent() -> None:
    """h c/m = 2.000001: midpoint's factor (1 − a)/(1 + a) is −2.5e-7, the motion is gone after one step as it
    should be (velocity 1, −2.5e-7, 6e-14), yet it warned that the result was not accurate and named the dt in
    use as the remedy (the flexible blade of scenes/spin_up.py warned so at its own defaults). Past a tenth of the
    velocity left it warns (test above)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run = mbvi.simulate(dragged(2000.001), t_end=0.01, dt=1e-3, integrator="midpoint")
    assert abs(run.velocity("a")[1, 0]) < 1e-6 and abs(run.velocity("a")[-1, 0]) < 1e-12
    with pytest.warns(RuntimeWarning, match=r"h c/m = 2.6 > 2.*shrinking it by only 0.13"):  # a flip that lingers
        mbvi.simulate(dragged(2600.0), t_end=0.01, dt=1e-3, integrator="midpoint")


@pytest.mark.parametrize("case", ["moderate drag", "damper along a rod"])
def test_midpoint_under_damping_the_step_resolves_or_the_joints_hold_stays_silent(case: str) -> None:
    """h c/m = 1.5 (its factor (1 − a)/(1 + a) positive: a decay), and a stiff damper along the only direction a rod
    forbids (it damps no motion the rod allows): no warning."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("a", mass=1.0, position=(1, 0, 0)))
    scene.add(mbvi.Rod("world", "a"))
    if case == "moderate drag":
        scene.add(mbvi.Drag("a", coefficient=150.0))
    else:
        scene.add(mbvi.Damper("world", "a", damping=1e5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run = mbvi.simulate(scene, t_end=1.0, dt=0.01, integrator="midpoint")
    if case == "damper along a rod":  # a conservative swing: the pendulum's energy kept
        assert abs(run.energy[-1] - run.energy[0]) < 1e-4 * 9.81


def test_a_force_that_turns_the_velocity_without_taking_energy_is_no_damping() -> None:
    """A charge in a magnetic field, F = q v × B (a (t, state) load), at h qB/m = 10: midpoint turns the velocity
    exactly (its energy kept to round-off) and says nothing of damping; its ∂F/∂v is skew, not a damping."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("e", mass=1.0, position=(0, 0, 0), velocity=(1, 0, 0)))
    scene.add(mbvi.ExternalForce("e", force=lambda t, state: 100.0 * np.cross(state.velocity("e"), [0.0, 0.0, 1.0])))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run = mbvi.simulate(scene, t_end=1.0, dt=0.1, integrator="midpoint")
    assert np.ptp(run.energy) < 1e-12 and abs(run.energy[0] - 0.5) < 1e-15


def test_a_damping_rate_is_that_of_the_motion_the_joints_allow() -> None:
    """mbvi.simulate.damping_rate: c/m of a free particle's drag; zero for a damper along a rod; a rigid body's
    joint damping c/J about its hinge."""
    from mbvi.assembly import assemble
    from mbvi.simulate import damping_rate

    free = assemble(dragged(3.0))
    assert damping_rate(free, free.initial_state().q, free.initial_state().v, 0.0)[0] == pytest.approx(3.0)
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("a", mass=2.0, position=(1, 0, 0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Damper("world", "a", damping=1e5))
    rod = assemble(scene)
    assert damping_rate(rod, rod.initial_state().q, rod.initial_state().v, 0.0)[0] < 1e-6
    arm = assemble(damped_arm(40.0))
    j = 0.01 + 1.0 * 0.5**2  # about the hinge's y: J_yy + m d²
    assert damping_rate(arm, arm.initial_state().q, arm.initial_state().v, 0.0)[0] == pytest.approx(40.0 / j, rel=1e-6)


def test_the_advice_for_a_stiff_damping_names_the_integrator_that_damps_it() -> None:
    """verlet's error for a drag too stiff for its drift recommended 'midpoint', whose velocity then flips sign
    every step without decaying. verlet now solves its drift at that step (below) and flips as midpoint does: the
    warning names the integrators that damp it, and the dt that does not flip."""
    advice = r"integrator='implicit_euler', which damps it, or dt <= 2e-05 s"
    with pytest.warns(RuntimeWarning, match=r"'verlet'.*h c/m = 1e\+03.*" + advice) as rec:
        run = mbvi.simulate(dragged(1e5, gravity=(0, 0, -9.81)), t_end=0.5, dt=0.01, integrator="verlet")
    assert len(rec) == 1 and abs(run.velocity("a")[-1, 0]) > 0.5  # what it warns of: −0.996 a step
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the remedy it names damps it
        damped = mbvi.simulate(dragged(1e5, gravity=(0, 0, -9.81)), t_end=0.5, dt=0.01, integrator="implicit_euler")
    assert abs(damped.velocity("a")[-1, 0]) < 1e-12


def _drag_map(kappa: float, h: float, steps: int, m: float = 2.0, g: float = -9.81) -> np.ndarray:
    """Positions of verlet's steps under gravity and a linear drag c = 2 m κ/h, the force at the step's mean
    velocity, in closed form: v½ = (v₀ + h g/2)/(1 + κ), x₁ = x₀ + h v½, v₁ = v½ + (h/2)(g − (c/m) v½)."""
    x, v, gv = np.zeros(3), np.array([0.5, 0.0, 3.0]), np.array([0.0, 0.0, g])
    out = [x]
    for _ in range(steps):
        vh = (v + 0.5 * h * gv) / (1.0 + kappa)
        x = x + h * vh
        v = vh + 0.5 * h * (gv - 2.0 * kappa / h * vh)
        out.append(x)
    return np.array(out)


@pytest.mark.parametrize("integrator", ["verlet", "verlet_rigid", "verlet_np"])
@pytest.mark.parametrize("kappa", [0.6, 0.9, 3.0])
def test_verlet_solves_a_stiff_damping_at_its_own_step(integrator: str, kappa: float) -> None:
    """The drift's fixed point on the mean velocity contracts by κ = h c/2m under a linear damping. From κ = ½ it
    stalled (past 1 it diverged), and every step was taken in substeps, silently: the run was not the method at
    dt, and a dt study saw nothing change as dt halved. With Anderson mixing it is solved at dt: verlet's steps
    are their closed form to round-off, with no substep; past κ ≈ 1.2, where verlet flips the velocity's sign as
    midpoint does, it warns."""
    h, steps, m = 1e-2, 300, 2.0
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    kind = mbvi.RigidBody if integrator == "verlet_rigid" else mbvi.Particle
    extra = {"inertia": (0.1, 0.1, 0.1)} if kind is mbvi.RigidBody else {}
    scene.add(kind("p", mass=m, position=(0, 0, 0), velocity=(0.5, 0, 3.0), **extra))
    scene.add(mbvi.Drag("p", coefficient=2 * m * kappa / h))
    method = "verlet"  # (verlet_np: the NumPy path, the same fixed point as Python)
    if integrator == "verlet_np":
        method = type("VerletOnNumPy", (mbvi.get_integrator("verlet"),), {"name": "verlet_np", "compiled": False})
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        run = mbvi.simulate(scene, t_end=steps * h, dt=h, integrator=method)
    assert run.info.get("refined_steps", 0) == 0
    np.testing.assert_allclose(run.position("p"), _drag_map(kappa, h, steps, m), rtol=0, atol=1e-13)
    flips = [str(w.message) for w in rec if "flips its velocity" in str(w.message)]
    assert len(flips) == (kappa > 1.2)


def test_a_stiff_pd_hinge_runs_at_its_own_step_to_second_order() -> None:
    """A PD hinge (TorsionSpring kp, JointDamping kd) with h kd/2J = 0.77 at dt = 1e-3, the gains a robot's
    controller takes: every step went in substeps. It runs at dt and converges at second order to the hinge's
    equation J θ̈ = −kp (θ − θ*) − kd θ̇ − m g d sin θ (solve_ivp at rtol 1e-12)."""
    from scipy.integrate import solve_ivp

    m, d, kp, kd, target = 1.0, 0.5, 50.0, 400.0, 0.5
    J = 0.01 + m * d * d
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.RigidBody("arm", mass=m, inertia=(0.01, 0.01, 0.002), position=(0, 0, -d)))
    scene.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    scene.add(mbvi.TorsionSpring("hinge", kp, rest_angle=target))
    scene.add(mbvi.JointDamping("hinge", kd))

    def rhs(t, y):
        return [y[1], (-kp * (y[0] - target) - kd * y[1] - m * 9.81 * d * math.sin(y[0])) / J]

    t_end, errors = 0.5, []
    exact = solve_ivp(rhs, (0.0, t_end), [0.0, 0.0], rtol=1e-12, atol=1e-14, dense_output=True)
    for h in (1e-3, 5e-4):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            run = mbvi.simulate(scene, t_end=t_end, dt=h, integrator="verlet")
        assert run.info["refined_steps"] == 0
        assert 0.5 * h * kd / J > 0.38  # past the old stall (½) at 1e-3, near it at 5e-4
        errors.append(np.abs(run.joint_angle("hinge") - exact.sol(run.t)[0]).max())
    assert errors[0] < 1e-3 and 3.5 < errors[0] / errors[1] < 4.5


def _pushed(body: str) -> mbvi.Scene:
    """1 kg under a drag of 2 N s/m and a push of 0.8236 N, released at −4.1e-3 m/s: the first step's mean velocity
    is 7e-6 m/s, formed as 4e-3 − 4e-3."""
    scene = mbvi.Scene(gravity=None)
    start = dict(mass=1.0, position=(0.74, 0.0, 0.0), velocity=(-0.00412537224298517, 0.0, 0.0))
    if body == "rigid":
        scene.add(mbvi.RigidBody("p", inertia=(0.1, 0.1, 0.1), **start))
    else:
        scene.add(mbvi.Particle("p", **start))
    scene.add(mbvi.Drag("p", coefficient=2.0))
    scene.add(mbvi.ExternalForce("p", force=(0.8236416281840693, 0.0, 0.0)))
    return scene


@pytest.mark.parametrize("body", ["particle", "rigid"])
@pytest.mark.parametrize("integrator", ["verlet", "yoshida4", "verlet_np"])
def test_a_gentle_drag_whose_step_passes_through_rest_is_no_stiff_damping(body: str, integrator: str) -> None:
    """h c/m = 0.02, and the step's mean velocity near zero: the velocity fixed point 2-cycled at the round-off of
    v₀ + (h/2)F/m (9e-19) against 1e-13 |v½| (7e-19) and the run failed, "the damping is too stiff for this step",
    suggesting dt/4 (after 179,679 good steps, in a driven run). It runs, on the closed form
    v = F/c + (v₀ − F/c) e^(−ct/m)."""
    if integrator == "verlet_np":
        integrator = type("VerletOnNumPy", (mbvi.get_integrator("verlet"),), {"name": "verlet_np", "compiled": False})
    run = mbvi.simulate(_pushed(body), t_end=0.05, dt=1e-2, integrator=integrator)
    v0, terminal = -0.00412537224298517, 0.8236416281840693 / 2.0
    exact = terminal + (v0 - terminal) * np.exp(-2.0 * run.t)
    np.testing.assert_allclose(run.velocity("p")[:, 0], exact, rtol=0, atol=5e-6)  # second order: (hc/m)² / 12 · |Δv|


def test_a_batch_of_gently_dragged_members_passing_through_rest_runs() -> None:
    """The same in simulate_batch's lockstep loop (which also settled against 1 m/s, not the velocities' own
    size: its members are now their serial runs' rule)."""
    scene = _pushed("particle")
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    V = np.repeat(s0.v[None], 3, axis=0) * np.array([[1.0], [1.0 + 1e-9], [0.5]])
    runs = mbvi.simulate_batch(scene, 0.05, 1e-2, initial_states=(np.repeat(s0.q[None], 3, axis=0), V))
    for run, v in zip(runs, V, strict=True):
        alone = mbvi.simulate(scene, 0.05, 1e-2, initial_state=mbvi.State(s0.q, v))
        np.testing.assert_array_equal(run.v, alone.v)


def test_a_long_driven_run_is_judged_by_what_flows_through_it() -> None:
    """scenes/driven_oscillator.py at its dt = 1e-2, accurate to 1.5e-4 of its amplitude, warned at 400 s that its
    balance had strayed by 16 % of its energy in motion: its quadrature errs by O(h²) of the energy its drive and
    damper move through it, which grows with the run. Judged against a tenth of that flow too, it is silent; at
    dt = 0.1 (its motion 1.5 % off) it still warns."""
    from scene_loader import load_scene

    oscillator = load_scene("driven_oscillator")
    amplitude, phase = oscillator.steady_state()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run = mbvi.simulate(oscillator.build(), 400.0, oscillator.DT, oscillator.INTEGRATOR, save_every=10)
    late = run.t > 30.0  # the transient e^(−t) gone
    u = run.position("mass")[late, 0] - 1.0
    assert np.max(np.abs(u - amplitude * np.cos(3.0 * run.t[late] - phase))) < 2e-4 * amplitude
    balance = run.energy - run.energy[0] - run.work
    assert abs(balance[-1]) > 0.1 * run.kinetic.max()  # what warned: more than a tenth of the energy in motion
    assert run.info["energy_error"] < 0.01
    with pytest.warns(RuntimeWarning, match=r"verlet.*dt = 0.1 s: the energy balance"):
        mbvi.simulate(oscillator.build(), 400.0, 0.1, oscillator.INTEGRATOR)


def test_a_plugin_steps_forced_run_measures_its_work_and_is_judged_by_it() -> None:
    """A particle under a drag of c/m = 5 1/s, ``leapfrog`` (a plugin: its compiled step, not mbvi's loop) at
    dt = 0.624 s: its explicit kicks amplify, the particle that should stop sped up (0.5 J to 3.4 J) and the run
    passed unjudged, ``traj.work`` None. The loop around a plugin's step measures W now (the trapezoidal rule):
    within its stability the balance holds at second order, beyond it the run warns."""
    errors = []
    for dt in (0.02, 0.01, 0.005):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            run = mbvi.simulate(dragged(5.0), t_end=1.0, dt=dt, integrator="leapfrog")
        assert run.work is not None and run.work[-1] == pytest.approx(run.energy[-1] - 0.5, rel=1e-2)
        errors.append(float(np.max(np.abs(run.energy - run.energy[0] - run.work))))
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all(orders > 1.8), orders
    with pytest.warns(RuntimeWarning, match=r"leapfrog.*energy balance"):
        mbvi.simulate(dragged(5.0), t_end=12.48, dt=0.624, integrator="leapfrog")
    # a batch's members measure it as their runs alone do
    scene = dragged(5.0)
    s0 = mbvi.assemble(scene).initial_state()
    members = mbvi.simulate_batch(scene, 1.0, 0.01, initial_states=(s0.q[None], s0.v[None]), integrator="leapfrog")
    alone = mbvi.simulate(scene, 1.0, 0.01, integrator="leapfrog")
    np.testing.assert_array_equal(members[0].work, alone.work)


def test_yoshida4_is_not_said_to_flip_where_its_velocity_decays() -> None:
    """The flip factor of a scheme with a backward stage (yoshida4's middle one, h_s = −1.7 h) has a pole where
    that stage's damping is solved at h_s, which the engine never does (it is not mixed: substeps, or an
    error): at h c/m = 1.2 the velocity decayed 1, 0.30, 0.09 while it warned "shrinking it by only 1.03" and
    suggested a dt larger than the one in use. No flip is judged for such a scheme."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("p", mass=1.0, inertia=(0.1, 0.1, 0.1), position=(0, 0, 0), velocity=(1.0, 0, 0)))
    scene.add(mbvi.Drag("p", coefficient=120.0))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        run = mbvi.simulate(scene, t_end=0.05, dt=0.01, integrator="yoshida4")
    assert not [w for w in rec if "flips its velocity" in str(w.message)]
    vx = run.velocity("p")[:, 0]
    assert np.all(vx[1:] > 0.0) and np.all(np.diff(vx) < 0.0)  # it decays, without a flip


def _slider_with_friction(law: str) -> mbvi.Scene:
    """A 2 kg block sliding down a 20° incline on a slider at 1.5 m/s against a dry friction μ = 0.5 that stops it
    (at t = 1.196 s) and holds it: written as a load, sign(v) or tanh(v/ε) with ε = 1e-3 m/s."""
    m, g, slope, mu = 2.0, 9.81, math.radians(20.0), 0.5
    down = np.array([math.cos(slope), 0.0, -math.sin(slope)])
    limit = mu * m * g * math.cos(slope)

    def friction(t, state):
        v = state.joint_displacement_rate("sl")
        return tuple(-limit * (np.sign(v) if law == "sign" else math.tanh(v / 1e-3)) * down)

    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    scene.add(mbvi.Particle("block", mass=m, position=(0.0, 0.0, 0.0), velocity=tuple(1.5 * down)))
    scene.add(mbvi.Prismatic("world", "block", axis=tuple(down), name="sl"))
    scene.add(mbvi.ExternalForce("block", force=friction, name="friction"))
    return scene


@pytest.mark.parametrize("integrator", ["verlet", "midpoint", "implicit_euler"])
def test_a_friction_that_jumps_at_a_stop_is_named_and_said_to_jump(integrator: str) -> None:
    """sign(v) friction at the stop: verlet's message advised implicit_euler and warned off midpoint, both of which
    fail there too, and told the user to smooth it; the implicit integrators named nothing ("Newton iteration on
    the implicit step did not converge"). Each now names the load and says it jumps (no damping any step solves)."""
    with pytest.raises(mbvi.SolverError, match=r"'friction'.*jumps with the velocity.*smooth it") as info:
        mbvi.simulate(_slider_with_friction("sign"), 3.0, 1e-2, integrator)
    assert info.value.culprit == "friction" and 1.18 < info.value.time < 1.21
    assert "integrator='implicit_euler', which solves it" not in str(info.value)


def test_a_steep_smooth_friction_is_named_a_damping_with_its_rate() -> None:
    """A 1 kg slider pushed by 3 N against a friction 5 tanh(v/ε) N, ε = 1e-3 m/s: it creeps at ε atanh(3/5) once
    slowed, where the friction is a damping of h c/m = h 5/(ε m) = 50 a step at dt = 1e-2, too stiff for verlet's
    fixed point; its message told the user to smooth a law that is smooth. Named now a damping, with its rate."""

    def push_and_friction(t, state):
        return (3.0 - 5.0 * math.tanh(state.joint_displacement_rate("sl") / 1e-3), 0.0, 0.0)

    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("block", mass=1.0, position=(0.0, 0.0, 0.0), velocity=(0.5, 0.0, 0.0)))
    scene.add(mbvi.Prismatic("world", "block", axis=(1.0, 0.0, 0.0), name="sl"))
    scene.add(mbvi.ExternalForce("block", force=push_and_friction, name="friction"))
    with pytest.raises(mbvi.SolverError, match=r"'friction'.*a damping of h c/m ≈ 50 a step") as info:
        mbvi.simulate(scene, 2.0, 1e-2, "verlet")
    assert info.value.culprit == "friction" and "jumps" not in str(info.value)
