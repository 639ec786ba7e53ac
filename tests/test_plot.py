"""Diagnostic plots draw the trajectory's data, never pop up, and write files."""

from __future__ import annotations

import numpy as np
import pytest

import mbvi

plot = pytest.importorskip("mbvi.plot")
plt = pytest.importorskip("matplotlib.pyplot")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _pendulum(integrator: str = "verlet", dt: float = 0.01) -> mbvi.Trajectory:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(0.8, 0.0, -0.6)))  # E(0) = U(0) ≠ 0
    scene.add(mbvi.Rod("world", "a"))
    return mbvi.simulate(scene, t_end=1.0, dt=dt, integrator=integrator)


@pytest.fixture(scope="module")
def traj() -> mbvi.Trajectory:
    return _pendulum()


def _lines(fig) -> dict[str, object]:
    return {line.get_label(): line for ax in fig.axes for line in ax.get_lines()}


def test_energy_plots_the_three_energies(traj) -> None:
    fig = plot.energy(traj)
    lines = _lines(fig)
    assert {"kinetic", "potential", "total"} <= set(lines)
    np.testing.assert_allclose(lines["total"].get_xdata(), traj.t)
    np.testing.assert_allclose(lines["total"].get_ydata(), traj.energy)
    np.testing.assert_allclose(lines["kinetic"].get_ydata(), traj.kinetic)
    np.testing.assert_allclose(lines["potential"].get_ydata(), traj.potential)


def test_energy_error_is_relative_and_logarithmic(traj) -> None:
    fig = plot.energy_error(traj)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    y = np.asarray(ax.get_lines()[0].get_ydata(), dtype=float)
    motion = max(traj.kinetic.max(), np.ptp(traj.potential))  # the energy in motion, not |E₀|
    expected = np.abs(traj.energy - traj.energy[0]) / motion
    finite = np.isfinite(y)
    np.testing.assert_allclose(y[finite], expected[finite])
    assert np.all(expected[~finite] == 0)  # exact zeros are gaps on a log axis
    assert 0 < np.nanmax(y) < 1e-2  # Verlet: a small bounded band
    assert np.nanmax(y) == pytest.approx(traj.info["energy_error"], rel=1e-12)  # the run's own figure
    assert ax.get_ylabel() == "|E − E₀| / E_motion"


def test_energy_error_with_zero_initial_energy_uses_the_energy_scale() -> None:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(0.0, 0.0, 0.0), velocity=(0.0, 0.0, 0.0)))
    traj = mbvi.simulate(scene, t_end=0.5, dt=0.01)  # free fall from the origin: E(0) = 0
    ax = plot.energy_error(traj).axes[0]
    y = np.asarray(ax.get_lines()[0].get_ydata(), dtype=float)
    assert np.all(np.isnan(y) | (y < 1e-6))
    scale = max(np.max(traj.kinetic), np.ptp(traj.potential))
    expected = np.abs(traj.energy - traj.energy[0]) / scale
    np.testing.assert_allclose(y[np.isfinite(y)], expected[np.isfinite(y)])  # exact zeros: gaps on a log axis
    assert ax.get_ylabel() == "|E − E₀| / E_motion"  # not |E₀| = 0


def test_momentum_components(traj) -> None:
    lines = _lines(plot.momentum(traj))
    assert set(lines) == {"p_x", "p_y", "p_z"}
    np.testing.assert_allclose(lines["p_z"].get_ydata(), traj.momentum[:, 2])
    lines = _lines(plot.momentum(traj, angular=True))
    np.testing.assert_allclose(lines["L_y"].get_ydata(), traj.angular_momentum[:, 1])


def test_constraint_error_is_logarithmic(traj) -> None:
    ax = plot.constraint_error(traj).axes[0]
    assert ax.get_yscale() == "log"
    y = np.asarray(ax.get_lines()[0].get_ydata(), dtype=float)
    finite = np.isfinite(y)
    np.testing.assert_allclose(y[finite], traj.constraint_error[finite])


def test_phase_portrait_by_body_and_by_index(traj) -> None:
    fig = plot.phase_portrait(traj, "a", "x")
    line = fig.axes[0].get_lines()[0]
    np.testing.assert_allclose(line.get_xdata(), traj.position("a")[:, 0])
    np.testing.assert_allclose(line.get_ydata(), traj.velocity("a")[:, 0])
    fig = plot.phase_portrait(traj, 2)
    line = fig.axes[0].get_lines()[0]
    np.testing.assert_allclose(line.get_xdata(), traj.q[:, 2])
    np.testing.assert_allclose(line.get_ydata(), traj.v[:, 2])
    # Default component: the one that moves most (x and z for a swinging pendulum, never y).
    assert plot.phase_portrait(traj, "a").axes[0].get_lines()[0].get_label() in ("a.x", "a.z")
    with pytest.raises(ValueError, match="component"):
        plot.phase_portrait(traj, "a", "w")
    with pytest.raises(ValueError, match="out of range"):
        plot.phase_portrait(traj, 99)


def test_draws_into_given_axes(traj) -> None:
    fig, ax = plt.subplots()
    assert plot.energy(traj, ax=ax) is fig
    assert len(ax.get_lines()) == 3


@pytest.mark.filterwarnings("ignore:.*'explicit_euler' at dt.*not accurate:RuntimeWarning")  # (its 12 % gain: said)
def test_compare_integrators(traj) -> None:
    runs = {"verlet": traj, "explicit_euler": _pendulum("explicit_euler")}
    fig = plot.compare(runs, quantity="energy_error")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    lines = _lines(fig)
    assert set(runs) <= set(lines)
    # Explicit Euler drifts far more than Verlet.
    assert np.nanmax(lines["explicit_euler"].get_ydata()) > 10 * np.nanmax(lines["verlet"].get_ydata())
    energy = _lines(plot.compare(runs))  # default quantity: energy
    np.testing.assert_allclose(energy["verlet"].get_ydata(), traj.energy)
    with pytest.raises(ValueError, match="unknown quantity"):
        plot.compare(runs, quantity="entropy")
    with pytest.raises(ValueError):
        plot.compare({})


def _released_level() -> mbvi.Scene:
    """The pendulum of docs/plots.md, released level with its pivot: E₀ = 0."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    return scene


def test_compare_energy_error_names_the_scale_it_divides_by() -> None:
    """Each run's error over its own energy in motion, as the axis says (with E₀ = 0 it once said |E₀|)."""
    runs = {name: mbvi.simulate(_released_level(), t_end=0.5, dt=0.01, integrator=name)
            for name in ("explicit_euler", "verlet")}  # fmt: skip
    assert abs(runs["verlet"].energy[0]) < 1e-12  # control: E₀ = 0
    ax = plot.compare(runs, quantity="energy_error").axes[0]
    assert ax.get_ylabel() == "relative energy error |E − E₀| / E_motion"
    assert ax.get_ylabel().endswith(plot.energy_error(runs["verlet"]).axes[0].get_ylabel())  # as energy_error
    lines = _lines(ax.figure)
    assert set(lines) == set(runs)
    scale = max(np.max(runs["verlet"].kinetic), np.ptp(runs["verlet"].potential))
    expected = np.abs(runs["verlet"].energy - runs["verlet"].energy[0]) / scale
    y = np.asarray(lines["verlet"].get_ydata(), dtype=float)
    np.testing.assert_allclose(y[np.isfinite(y)], expected[np.isfinite(y)])


@pytest.mark.parametrize("lift", [0.0, 1e-9, 1e3])
def test_the_energy_error_does_not_depend_on_where_the_potential_is_zero(lift: float, capsys) -> None:
    """The same swing with its pivot lifted by 1 nm or 1 km (E₀ = 0, ~1e-8 J or 9810 J): divided by |E₀| the plots
    and `mbvi run` said 3e-6, 9e3 and 9e-9 for one motion."""
    import importlib

    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, lift)))
    scene.add(mbvi.Rod("world", "a", anchor_a=(0.0, 0.0, lift)))
    traj = mbvi.simulate(scene, t_end=3.0, dt=1e-3)
    cli = importlib.import_module("mbvi.cli")
    shown = float(np.nanmax(_lines(plot.compare({"run": traj}, quantity="energy_error"))["run"].get_ydata()))
    for figure in (shown, float(np.nanmax(plot.energy_error(traj).axes[0].get_lines()[0].get_ydata())),
                   cli._energy_drift(traj)):  # fmt: skip
        assert figure == pytest.approx(traj.info["energy_error"], rel=1e-9)
        assert 1e-7 < figure < 1e-4  # verlet's band at dt = 1e-3: the same for every lift


def test_summary_writes_a_2x2_png_without_pyplot(traj, tmp_path) -> None:
    import imageio.v3 as iio

    before = plt.get_fignums()
    path = tmp_path / "out" / "summary.png"
    fig = plot.summary(traj, path)
    assert plt.get_fignums() == before  # not registered with pyplot: nothing to close, nothing pops up
    assert len(fig.axes) == 4
    titles = {ax.get_title() for ax in fig.axes}
    assert {"Energy", "Energy error", "Constraint error", "Momentum"} <= titles
    image = iio.imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 400
    assert image[..., :3].std() > 10


def test_backend_is_non_interactive_when_headless() -> None:
    import os

    import matplotlib

    if os.environ.get("DISPLAY") or os.environ.get("MPLBACKEND"):
        pytest.skip("a display or an explicit backend is configured")
    assert matplotlib.get_backend().lower() == "agg"


# ---------------------------------------------------------------- names and units on the axes
@pytest.fixture(scope="module")
def angles_run() -> mbvi.Trajectory:
    from scene_loader import load_scene

    return mbvi.simulate(load_scene("double_pendulum_angles").build(), t_end=0.2, dt=1e-3, integrator="verlet")


def _labels(fig) -> tuple[str, str, str]:
    ax = fig.axes[0]
    return ax.get_xlabel(), ax.get_ylabel(), ax.get_lines()[0].get_label()


def test_phase_portrait_of_a_lagrangian_coordinate_by_name(angles_run) -> None:
    """A LagrangianSystem's coordinates have no unit mbvi could know: labelled by name, never ``q[0] [m]``."""
    fig = plot.phase_portrait(angles_run, "theta2")
    line = fig.axes[0].get_lines()[0]
    np.testing.assert_allclose(line.get_xdata(), angles_run.q[:, 1])
    np.testing.assert_allclose(line.get_ydata(), angles_run.v[:, 1])
    assert _labels(fig) == ("theta2", "dtheta2/dt", "theta2")
    assert _labels(plot.phase_portrait(angles_run, 0)) == ("theta1", "dtheta1/dt", "theta1")
    assert _labels(plot.phase_portrait(angles_run, "theta1", unit="rad")) == (
        "theta1 [rad]", "dtheta1/dt [rad/s]", "theta1"
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"unknown coordinate 'phi'.*theta1"):
        plot.phase_portrait(angles_run, "phi")


def test_phase_portrait_of_a_scene_names_bodies_joints_and_units(traj) -> None:
    assert _labels(plot.phase_portrait(traj, "a", "x")) == ("a.x [m]", "da.x/dt [m/s]", "a.x")
    assert _labels(plot.phase_portrait(traj, 2)) == ("a.z [m]", "da.z/dt [m/s]", "a.z")  # q[2] is a's z
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("bar", shape=mbvi.Box((1.0, 0.1, 0.1)), density=100.0, position=(0.5, 0.0, 0.0)))
    scene.add(mbvi.Revolute("world", "bar", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="hinge"))
    run = mbvi.simulate(scene, t_end=0.2, dt=0.01)
    fig = plot.phase_portrait(run, "hinge")  # a revolute joint: its angle, rad
    assert _labels(fig) == ("hinge [rad]", "dhinge/dt [rad/s]", "hinge")
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_xdata(), run.joint_angle("hinge"))
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_ydata(), run.joint_rate("hinge"))
    assert _labels(plot.phase_portrait(run, 1)) == ("bar.y [m]", "dbar.y/dt [m/s]", "bar.y")
    assert _labels(plot.phase_portrait(run, 5)) == ("q[5]", "dq[5]/dt [1/s]", "q[5]")  # a rotation entry
    with pytest.raises(ValueError, match=r"unknown body, revolute or prismatic joint 'elbow'.*hinge"):
        plot.phase_portrait(run, "elbow")


def test_phase_portrait_of_a_prismatic_joint_in_metres() -> None:
    """A prismatic joint's name was "unknown body or revolute joint" although traj.joint_displacement exists."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("cart", shape=mbvi.Box((0.2, 0.1, 0.1)), density=500.0, position=(0.0, 0.0, 0.0)))
    scene.add(mbvi.Prismatic("world", "cart", axis=(1.0, 0.0, -1.0), name="slider"))  # down a 45° incline
    scene.add(mbvi.Spring("world", "cart", stiffness=50.0, rest_length=0.0))
    run = mbvi.simulate(scene, t_end=0.5, dt=0.01)
    fig = plot.phase_portrait(run, "slider")
    assert _labels(fig) == ("slider [m]", "dslider/dt [m/s]", "slider")
    line = fig.axes[0].get_lines()[0]
    s = run.joint_displacement("slider")
    assert np.ptp(s) > 0.05  # control: it slides
    np.testing.assert_allclose(line.get_xdata(), s)
    # the rate is the displacement's derivative (here the cart's velocity along the unit axis)
    np.testing.assert_allclose(line.get_ydata(), run.velocity("cart") @ (np.array([1.0, 0.0, -1.0]) / np.sqrt(2)),
                               atol=1e-9)  # fmt: skip
    np.testing.assert_allclose(np.gradient(s, run.t)[1:-1], line.get_ydata()[1:-1], atol=0.05 * np.ptp(s) / 0.5)
    with pytest.raises(ValueError, match=r"unknown body, revolute or prismatic joint 'track'.*slider"):
        plot.phase_portrait(run, "track")


# ---------------------------------------------------------------- numbers as they are
def _offset_texts(fig) -> list[str]:
    fig.canvas.draw()
    return [axis.get_offset_text().get_text() for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)]


def test_energy_that_hardly_moves_is_labelled_without_an_offset() -> None:
    """Verlet at dt = 1 ms keeps E to 1e-5 J: matplotlib alone labels such an axis "1e-5 − 5.886" and ticks it
    with the last digits; mbvi's plots print the values."""
    fine = _pendulum(dt=1e-3)
    control, ax = plt.subplots()
    ax.plot(fine.t, fine.energy)
    assert _offset_texts(control)[1], "control: matplotlib's default would use an offset here"
    fig = plot.compare({"verlet": fine})
    assert _offset_texts(fig) == ["", ""]
    ticks = [float(t.get_text().replace("\u2212", "-")) for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert all(abs(v - fine.energy[0]) < 1e-3 for v in ticks), ticks  # the energies themselves, J
    for fig in (plot.energy(fine), plot.momentum(fine), plot.phase_portrait(fine, "a", "z")):
        assert _offset_texts(fig) == ["", ""], fig.axes[0].get_title()


def test_integrator_zoo_panels_read_without_an_offset() -> None:
    from scene_loader import load_scene

    zoo = load_scene("integrator_zoo")
    runs = zoo.compare(dts=(2.0**-6, 2.0**-7), t_end=2.0, integrators=("explicit_euler", "verlet", "midpoint"))
    fig = zoo.figure(runs=runs)
    assert len(fig.axes) == 4
    assert _offset_texts(fig) == [""] * 8


def test_constraint_error_of_a_run_without_constraints_says_so() -> None:
    """It said "no constraint violation" for a free particle, which has no constraint to violate."""
    free = mbvi.Scene()
    free.add(mbvi.Particle("p", mass=1.0, position=(0.0, 0.0, 0.0), velocity=(1.0, 0.0, 0.0)))
    fig = plot.constraint_error(mbvi.simulate(free, 0.1, 1e-2))
    assert [t.get_text() for t in fig.axes[0].texts] == ["no constraints"]


def test_the_energy_error_shown_is_the_runs_own_when_nothing_moves() -> None:
    """Two masses on a spring at its rest length, no gravity: only round-off moves (4e-27 J). The plots and `mbvi
    run` said 0.40 (divided by that), the run's own figure 1.7e-25 (floored at a thousandth of its energy scale)."""
    import importlib

    a, b = np.array([0.1, 0.2, 0.3]), np.array([0.3, 0.71, -0.13])
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("a", mass=0.7, position=tuple(a)))
    scene.add(mbvi.Particle("b", mass=1.3, position=tuple(b)))
    scene.add(mbvi.Spring("a", "b", stiffness=1e4, rest_length=float(np.linalg.norm(b - a)) * (1 + 1e-15)))
    traj = mbvi.simulate(scene, t_end=2.0, dt=1e-3)
    own = traj.info["energy_error"]
    assert 0 < own < 1e-12 and 0 < traj.kinetic.max() < 1e-20  # (round-off moves it, and nothing else)
    shown = float(np.nanmax(np.append(plot.energy_error(traj).axes[0].get_lines()[0].get_ydata(), 0.0)))
    assert shown == pytest.approx(own, rel=1e-9, abs=1e-300)
    assert importlib.import_module("mbvi.cli")._energy_drift(traj) == pytest.approx(own, rel=1e-9, abs=1e-300)


def test_compare_constraint_error_prints_no_unit() -> None:
    """The axis said "[m]" whatever the constraints: g(q) is in m² for a LagrangianSystem's x² + y² − l² and
    without a unit for a rotation's rows; plot.constraint_error labels it with none too."""
    import sympy as sp

    x, y, vx, vy = sp.symbols("x y vx vy")
    system = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - 9.81 * y, [x, y], [vx, vy], constraints=[x**2 + y**2 - 1],
                                   initial_state=([1.0, 0.0], [0.0, 0.0]))  # fmt: skip
    run = mbvi.simulate(system, t_end=0.1, dt=1e-2)
    ax = plot.compare({"run": run}, quantity="constraint_error").axes[0]
    assert ax.get_ylabel() == "constraint error max |g(q)|"
    assert ax.get_ylabel().replace("constraint error ", "") == plot.constraint_error(run).axes[0].get_ylabel()
