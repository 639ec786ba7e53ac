"""Outcomes that must not mislead: a singular start, a given initial state off the joints, step-size hints that
work, errors that describe the integrator at hand, and the command line's report (found by a contract review)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mbvi
from mbvi.cli import main

G = 9.81


def taut_chain(n: int = 6, gravity: float = G, push: float = 0.0) -> mbvi.Scene:
    """n particles on rods pulled taut in a straight line between the origin and a world point: the rod lengths
    add up to the span, so the chain cannot move (a singular configuration, not a redundant loop)."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -gravity))
    for i in range(n):
        s.add(mbvi.Particle(f"p{i}", mass=1.0, position=(0.3 * (i + 1), 0.0, 0.0),
                            velocity=(0.0, 0.0, push if i == 2 else 0.0)))  # fmt: skip
    s.add(mbvi.Rod("world", "p0"))
    for i in range(n - 1):
        s.add(mbvi.Rod(f"p{i}", f"p{i + 1}"))
    s.add(mbvi.Rod(f"p{n - 1}", "world", anchor_b=(0.3 * (n + 1), 0.0, 0.0)))
    return s


def four_bar() -> mbvi.Scene:
    """A planar four-bar of revolute joints: 3 of its equations are redundant wherever it is."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    inertia = (1e-3, 1e-2, 1e-2)
    s.add(mbvi.RigidBody("crank", mass=1.0, inertia=inertia, position=(0.0, 0.0, 0.5),
                         orientation=np.array([[0, 0, -1], [0, 1, 0], [1, 0, 0]], float)))  # fmt: skip
    s.add(mbvi.RigidBody("coupler", mass=1.0, inertia=inertia, position=(1.0, 0.0, 1.0)))
    s.add(mbvi.RigidBody("rocker", mass=1.0, inertia=inertia, position=(2.0, 0.0, 0.5),
                         orientation=np.array([[0, 0, -1], [0, 1, 0], [1, 0, 0]], float)))  # fmt: skip
    y = (0.0, 1.0, 0.0)
    s.add(mbvi.Revolute("world", "crank", anchor=(0.0, 0.0, 0.0), axis=y))
    s.add(mbvi.Revolute("crank", "coupler", anchor=(0.0, 0.0, 1.0), axis=y))
    s.add(mbvi.Revolute("coupler", "rocker", anchor=(2.0, 0.0, 1.0), axis=y))
    s.add(mbvi.Revolute("rocker", "world", anchor=(2.0, 0.0, 0.0), axis=y))
    return s


# ----------------------------------------------------------------------------------- a singular start
def test_a_chain_pulled_taut_keeps_every_rod_and_never_leaves_one() -> None:
    """Its rows are dependent at the start only: dropping one let the chain fall off it (constraint error 23.8
    after 1 s, no error). Every row is kept; the run cannot go on and says so, the equilibrium holds every rod."""
    with pytest.warns(mbvi.RedundantConstraintWarning, match="singular"):
        system = mbvi.assemble(taut_chain())
    assert len(system.active) == system.nc == 7
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        eq = mbvi.equilibrium(taut_chain())
        assert np.max(np.abs(system.constraints(eq.q)) / system.rows.scale) < 1e-9
        for push, gravity in ((0.0, G), (0.1, 0.0)):
            try:
                traj = mbvi.simulate(taut_chain(gravity=gravity, push=push), 0.2, 1e-3)
            except mbvi.SolverError as err:  # the locked chain cannot follow gravity or the push: an honest end
                assert err.time is not None and err.step is not None
                continue
            assert np.max(traj.constraint_error) < 1e-8  # or it stays on every rod


def test_a_redundant_loop_still_drops_its_dependent_rows() -> None:
    """The four-bar's dependence is its own: the dropped rows stay satisfied as it moves."""
    with pytest.warns(mbvi.RedundantConstraintWarning, match="redundant"):
        system = mbvi.assemble(four_bar())
    assert len(system.active) == system.nc - 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        traj = mbvi.simulate(four_bar(), 1.0, 1e-3)
    assert np.max(traj.constraint_error) < 1e-9  # every row, the dropped ones included


# --------------------------------------------------------------------------- a given initial state
def pendulum() -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "bob"))
    return s


def test_a_given_position_off_a_joint_is_a_value_error_naming_it() -> None:
    state = mbvi.assemble(pendulum()).initial_state()
    off = mbvi.State(2.0 * state.q, state.v)
    with pytest.raises(ValueError, match="Rod 'world-bob'"):
        mbvi.simulate(pendulum(), 0.01, 1e-3, initial_state=off)
    with pytest.raises(ValueError, match="Rod 'world-bob'"):
        mbvi.Simulator(pendulum(), dt=1e-3, initial_state=off)


def test_a_given_velocity_off_the_joints_is_projected_with_a_warning() -> None:
    """A radial velocity on a rod is no motion of the pendulum: projected (mass-weighted) as the scene's own
    initial velocity is, so the energy is that of the motion the rod allows (here none: U alone)."""
    state = mbvi.assemble(pendulum()).initial_state()
    radial = mbvi.State(state.q, np.array([0.5, 0.0, 0.0]))  # along the rod
    with pytest.warns(mbvi.ConstraintWarning, match="projected"):
        traj = mbvi.simulate(pendulum(), 0.01, 1e-3, initial_state=radial)
    assert np.allclose(traj.v[0], 0.0, atol=1e-12)
    assert abs(traj.energy[0] - traj.potential[0]) < 1e-12


def test_a_state_on_the_joints_is_taken_as_it_is() -> None:
    """A run's own state starts the next run bit for bit (no projection of what is already on the joints)."""
    half = mbvi.simulate(pendulum(), 0.1, 1e-3)
    given = mbvi.State(half.q[-1], half.v[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rest = mbvi.simulate(pendulum(), 0.2, 1e-3, t0=0.1, initial_state=given)
    assert np.array_equal(rest.q[0], given.q) and np.array_equal(rest.v[0], given.v)
    whole = mbvi.simulate(pendulum(), 0.2, 1e-3)
    assert np.allclose(rest.q[-1], whole.q[-1], atol=1e-12, rtol=0)


# ------------------------------------------------------------------------------------- step-size hints
def stiff_spring() -> mbvi.Scene:
    """A 1 kg particle on a 1e6 N/m spring: ω = 1000 rad/s."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Particle("a", mass=1.0, position=(1.2, 0.0, 0.0)))
    s.add(mbvi.Spring("world", "a", stiffness=1e6, rest_length=1.0))
    return s


@pytest.mark.parametrize("integrator", ["symplectic_euler_b", "midpoint"])
def test_a_suggested_step_is_one_that_really_works(integrator: str) -> None:
    """At dt = 0.01 (hω = 10) the run fails; the step the error suggests is verified, or none is suggested. The
    suggestion of symplectic Euler used to be the stability bound 1.8/ω, whose run strays by 171 % of its
    energy: a verified one keeps the energy within 1 %."""
    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate(stiff_spring(), 3.0, 0.01, integrator)
    err = info.value
    assert err.suggested_dt is not None and err.verified_dt
    assert "verified" in str(err)
    assert len(err.trajectory.t) == err.step + 1 and err.trajectory.t[-1] == pytest.approx(err.time)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no energy warning either
        traj = mbvi.simulate(stiff_spring(), 3.0, err.suggested_dt, integrator)
    e = traj.energy
    assert np.max(np.abs(e - e[0])) < 0.01 * np.ptp(traj.potential)


def test_an_implicit_method_is_not_told_to_use_itself() -> None:
    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate(stiff_spring(), 3.0, 0.01, "midpoint")
    text = str(info.value)
    assert "integrator='midpoint'" not in text and "explicit step" not in text
    assert "2/ω" in text and "spring" in text


def test_no_step_is_suggested_when_no_step_cures_the_run() -> None:
    """The taut chain fails at its first step whatever the step: the error says a smaller step may not cure it
    rather than suggest one as if it would."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        with pytest.raises(mbvi.SolverError) as info:
            mbvi.simulate(taut_chain(), 0.2, 1e-3)
    err = info.value
    assert not err.verified_dt
    assert err.suggested_dt is None and "may not cure" in str(err)


# ------------------------------------------------------------------------------------- the command line
@pytest.fixture
def pendulum_file(tmp_path):
    path = tmp_path / "pend.py"
    path.write_text(
        "import mbvi\n"
        "def build(angle=1.0):\n"
        "    import math\n"
        "    s = mbvi.Scene(gravity=(0, 0, -9.81))\n"
        "    s.add(mbvi.Particle('bob', mass=1.0, position=(math.sin(angle), 0, -math.cos(angle))))\n"
        "    s.add(mbvi.Rod('world', 'bob'))\n"
        "    return s\n"
    )
    return path


def test_the_command_line_reports_the_steps_it_took(pendulum_file, capsys) -> None:
    assert main(["run", str(pendulum_file), "--t-end", "0.025", "--dt", "0.01"]) == 0
    assert "3 steps of 0.01 s (the last of 0.005 s) to t = 0.025 s" in capsys.readouterr().out
    assert main(["run", str(pendulum_file), "--t-end", "0.02", "--dt", "0.001", "--option", "save_every=10"]) == 0
    assert "20 steps of 0.001 s to t = 0.02 s" in capsys.readouterr().out


def test_a_warning_on_the_command_line_is_one_line(pendulum_file, capsys) -> None:
    """A step of a sixth of the pendulum's period completes with an energy warning: one line, no source line."""
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        assert main(["run", str(pendulum_file), "--t-end", "20", "--dt", "0.3"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "warning" in line]
    assert lines and all(line.startswith("mbvi: warning: ") for line in lines)
    assert "RuntimeWarning" not in err and "warnings.warn" not in err and "% of the energy in motion" in err


def test_the_command_line_does_not_call_damping_an_error(tmp_path, capsys) -> None:
    """A damped pendulum loses energy to its drag: the command line reports the balance E − E₀ − W, not the
    energy the drag took as a "relative energy error" (it printed 4e-1 for the damped pendulum)."""
    path = tmp_path / "damped.py"
    path.write_text(
        "import mbvi\n"
        "def build():\n"
        "    s = mbvi.Scene(gravity=(0, 0, -9.81))\n"
        "    s.add(mbvi.Particle('bob', mass=1.0, position=(1.0, 0, 0)))\n"
        "    s.add(mbvi.Rod('world', 'bob'))\n"
        "    s.add(mbvi.Drag('bob', coefficient=0.5))\n"
        "    return s\n"
    )
    assert main(["run", str(path), "--t-end", "5", "--dt", "0.001"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("max energy balance error |E − E₀ − W| ")
    assert float(line.split("W| ")[1].split()[0]) < 1e-3  # the balance holds; the energy itself fell by far more


# ----------------------------------------------------------------------------- sizes and numbers given
def test_saved_states_that_cannot_fit_are_a_value_error_before_anything_runs() -> None:
    """The memory a run's states take counts the coordinates: a 50-segment beam for 1e5 s at 1e-3 is 114 GiB
    (numpy's MemoryError before, or the machine swapping), a Simulator asked for 1e12 steps the same."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.Beam("beam", start=(0, 0, 0), end=(1, 0, 0), segments=50, density=7800.0, area=1e-4,
                    youngs_modulus=2e11))  # fmt: skip
    with pytest.raises(ValueError, match=r"GiB.*save_every"):
        mbvi.simulate(s, 1e5, 1e-3)
    sim = mbvi.Simulator(pendulum(), dt=1e-3)
    with pytest.raises(ValueError, match=r"GiB.*step fewer"):  # it keeps every state: no save_every to change
        sim.step(10**12)
    sim.step(3)  # unharmed
    assert sim.t == pytest.approx(3e-3)


def test_numpy_numbers_are_numbers() -> None:
    """np.int64 t_end, np.float32 dt, a 0-d array, np.int64 save_every ("t_end must be a finite number, got
    np.int64(1)" before) run as the same Python numbers do."""
    plain = mbvi.simulate(pendulum(), 0.1, 1e-3, save_every=2)
    for kw in (dict(t_end=np.int64(0) + 0.1), dict(dt=np.array(1e-3)), dict(save_every=np.int64(2))):
        args = {"t_end": 0.1, "dt": 1e-3, "save_every": 2, **kw}
        traj = mbvi.simulate(pendulum(), **args)
        assert np.array_equal(traj.q, plain.q)
    sim = mbvi.Simulator(pendulum(), dt=np.float64(1e-3))
    sim.step(np.int64(2))
    assert sim.steps == 2
    with pytest.raises(ValueError, match="dt"):
        mbvi.Simulator(pendulum(), dt=np.array([1e-3]))


def test_a_simulators_step_hint_says_it_is_not_verified() -> None:
    """A Simulator cannot re-run its steps to verify a hint (simulate does): it says so (the hint 0.0025 of a
    1e6 N push failed again)."""
    s = pendulum()
    s.add(mbvi.ExternalForce("bob", force=(0.0, 0.0, 1e6), name="push"))
    with pytest.raises(mbvi.SolverError, match=r"not verified") as info:
        mbvi.Simulator(s, dt=0.01).step(5)
    assert info.value.verified_dt is False


def test_a_run_ending_between_steps_saves_only_its_grid_and_its_end() -> None:
    """save_every = 2 and a last step of half a dt: the saved times are 0, 0.02 and the end 0.035 (0.03, the
    step before the last, was saved too), for simulate and simulate_batch alike."""
    traj = mbvi.simulate(pendulum(), 0.035, 0.01, save_every=2)
    np.testing.assert_allclose(traj.t, [0.0, 0.02, 0.035])
    s0 = mbvi.assemble(pendulum()).initial_state()
    batch = mbvi.simulate_batch(pendulum(), 0.035, 0.01, initial_states=[s0], save_every=2)
    assert np.array_equal(batch[0].t, traj.t) and np.array_equal(batch[0].q, traj.q)
    np.testing.assert_allclose(mbvi.simulate(pendulum(), 0.045, 0.01, save_every=2).t, [0, 0.02, 0.04, 0.045])


def test_the_command_line_refuses_an_animation_of_a_lagrangian_system_before_running_it(tmp_path, capsys) -> None:
    """It ran the whole simulation, then refused the GIF; now it says so first (no --out written either), and a
    .jpg is the state-space picture, as .png is."""
    path = tmp_path / "angle.py"
    path.write_text(
        "import sympy as sp\n"
        "import mbvi\n"
        "def build():\n"
        "    th, w = sp.symbols('theta omega')\n"
        "    return mbvi.LagrangianSystem(w**2 / 2 + 9.81 * sp.cos(th), [th], [w],\n"
        "                                 initial_state=mbvi.State([1.0], [0.0]))\n"
    )
    out = tmp_path / "run.npz"
    assert main(["run", str(path), "--t-end", "1", "--out", str(out), "--render", str(tmp_path / "x.gif")]) == 1
    assert "no bodies to animate" in capsys.readouterr().err and not out.exists()
    picture = tmp_path / "x.jpg"
    assert main(["run", str(path), "--t-end", "1", "--render", str(picture)]) == 0
    assert picture.read_bytes()[:3] == b"\xff\xd8\xff"  # a JPEG


def _warned(run) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        traj = run()
    return traj, [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def _hung_at(z: float) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(np.sin(1.0), 0.0, z - np.cos(1.0))))
    scene.add(mbvi.Rod("world", "bob", anchor_a=(0.0, 0.0, z)))
    return scene


def _drifting_pair(speed: float) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("a", mass=1.0, position=(0, 0, 0), velocity=(speed, 0.5, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(1, 0, 0), velocity=(speed, -0.5, 0)))
    scene.add(mbvi.Spring("a", "b", stiffness=100.0, rest_length=0.8))
    return scene


def test_an_energy_error_is_judged_the_same_wherever_the_scene_sits_and_however_it_drifts() -> None:
    """A pendulum at dt = 0.3 s strays by 1.52 J of its 4.51 J swing (34 %): hung at z = 1e4 m it was judged
    against 1e-3 |U₀| = 98 J (1.5 %, no warning). Two particles on a spring at hω = 1.9 stray by 1.70 J of 2.25 J:
    drifting together at 30 m/s, judged against the drift's 900 J (0.2 %, no warning). Neither the origin of
    gravity's potential nor a frame's steady motion is the dynamics."""
    for z in (0.0, 1e4):
        traj, said = _warned(lambda z=z: mbvi.simulate(_hung_at(z), 20.0, 0.3))
        assert traj.info["energy_error"] == pytest.approx(0.337, abs=0.01), z
        assert any("strayed" in m for m in said), z
    omega = np.sqrt(2 * 100.0)
    for speed in (0.0, 30.0):
        traj, said = _warned(lambda speed=speed: mbvi.simulate(_drifting_pair(speed), 20.0, 1.9 / omega))
        assert traj.info["energy_error"] == pytest.approx(0.85, abs=0.02), speed
        assert any("strayed" in m for m in said), speed


def test_an_implicit_euler_run_that_gains_energy_says_so() -> None:
    """Implicit Euler only loses energy; at dt = 0.5 s its step on a pendulum released at 1 rad took the far root
    of its equations, flipping the bob over (q₁ = (−0.27, 0, 0.96)): 15.6 J gained where 4.51 J was there to give,
    returned silently — the gain was judged against the motion it made itself."""
    traj, said = _warned(lambda: mbvi.simulate(_hung_at(0.0), 100.0, 0.5, "implicit_euler"))
    gain = traj.energy.max() - traj.energy[0]
    assert gain > 3.0 * (traj.energy[0] - traj.potential.min())
    assert any("gained" in m and "times the energy the run had to give" in m for m in said), said
    traj, said = _warned(lambda: mbvi.simulate(_hung_at(0.0), 10.0, 0.01, "implicit_euler"))  # losing: no word
    assert traj.energy[-1] < traj.energy[0] and not said


def test_an_implicit_euler_hint_is_verified_by_what_implicit_euler_keeps() -> None:
    """A four-bar under implicit_euler at dt = 0.2 s fails at its first step; the hint was verified by the 1 % energy
    band of the variational methods, which implicit Euler's damping never keeps, and shrank to 2.03e-5 s where
    0.1 s runs. A baseline's hint is verified by what it keeps: no energy gained."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenes"))
    try:
        import four_bar
    finally:
        sys.path.pop(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)  # (a planar loop's, by design)
        with pytest.raises(mbvi.SolverError) as info:
            mbvi.simulate(four_bar.build(), 5.0, 0.2, "implicit_euler")
        hint = info.value.suggested_dt
        assert info.value.verified_dt is True and 0.02 < hint < 0.2, str(info.value)
        traj, said = _warned(lambda: mbvi.simulate(four_bar.build(), 5.0, hint, "implicit_euler"))
    assert traj.constraint_error.max() < 1e-9 and not said
