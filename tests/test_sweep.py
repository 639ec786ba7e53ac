"""mbvi.sweep: physics of a pendulum sweep, the same numbers on a Dask cluster, failing members, the CLI's store.

The periods of a pendulum sweep over lengths × amplitudes are checked against
the exact period 4√(l/g)·K(sin²(θ₀/2)) (scipy's complete elliptic integral of
the first kind, parameter m); the same sweep on a two-process ``LocalCluster``
must give the local numbers bit for bit.
"""

from __future__ import annotations

import importlib
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

xr = pytest.importorskip("xarray")
pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
from scipy.special import ellipk  # noqa: E402

import mbvi  # noqa: E402
from mbvi.cli import main  # noqa: E402

SWEEP = importlib.import_module("mbvi.sweep")  # the module (mbvi.sweep is the function)

ROOT = Path(__file__).resolve().parents[1]
PENDULUM = ROOT / "scenes" / "pendulum.py"  # m = 1, g = 1 by default; build(length, theta0, ...)
DOUBLE = ROOT / "scenes" / "double_pendulum.py"
GRID = {"length": [0.5, 1.0, 2.0], "theta0": [0.1, 1.0, 2.5]}
#: verlet's period error is ≈ (ω dt)²/24·…: at dt = 1e-2 s and g = 1 it stays below 4e-5 on this grid
DT = 1e-2
T_END = 40.0  # ≥ 2 periods of the slowest member (l = 2, θ₀ = 2.5: 12.9 s)
G = 1.0


def exact_period(length: float, theta0: float, g: float = G) -> float:
    """Period of the pendulum released from rest at θ₀, s: 4√(l/g)·K(m), m = sin²(θ₀/2)."""
    return 4.0 * math.sqrt(length / g) * float(ellipk(math.sin(theta0 / 2.0) ** 2))


def measured_period(t: np.ndarray, x: np.ndarray) -> float:
    """Mean period from the downward zero crossings of x(t), each located by linear interpolation, s."""
    k = np.nonzero((x[:-1] > 0.0) & (x[1:] <= 0.0))[0]
    crossings = t[k] + (t[k + 1] - t[k]) * x[k] / (x[k] - x[k + 1])
    assert len(crossings) >= 3, "run longer: fewer than two periods"
    return float((crossings[-1] - crossings[0]) / (len(crossings) - 1))


@pytest.fixture(scope="module")
def local() -> xr.Dataset:
    """The pendulum sweep on the local default, made to take its pool of worker processes.

    The default runs two members here and sends the rest to a pool when they would take more than
    ``POOL_WORTH`` s; with the threshold at 0 this sweep (well under a second) takes both paths.
    """
    saved = SWEEP.POOL_WORTH
    SWEEP.POOL_WORTH = 0.0
    try:
        return mbvi.sweep(str(PENDULUM), GRID, t_end=T_END, dt=DT, timing=True)
    finally:
        SWEEP.POOL_WORTH = saved


def test_a_sweep_of_a_few_seconds_stays_in_this_process(caplog: pytest.LogCaptureFixture) -> None:
    """The default runs it here (no pool to start) and gives the numbers of the other schedulers."""
    grid = {"length": [0.5, 1.0], "theta0": [0.1, 1.0, 2.5]}
    with caplog.at_level("INFO", logger="mbvi.sweep"):
        default = mbvi.sweep(str(PENDULUM), grid, t_end=4.0, dt=DT)
    assert any("local synchronous scheduler" in r.getMessage() for r in caplog.records)
    assert not any("local processes scheduler" in r.getMessage() for r in caplog.records)
    xr.testing.assert_identical(default, mbvi.sweep(str(PENDULUM), grid, t_end=4.0, dt=DT, scheduler="threads"))


def test_dataset_is_labelled_by_the_grid(local: xr.Dataset) -> None:
    assert list(local.energy.dims) == ["length", "theta0", "time"]
    assert list(local.position.dims) == ["length", "theta0", "time", "body", "xyz"]
    assert list(local.error.dims) == ["length", "theta0"]
    assert local.length.values.tolist() == GRID["length"]
    assert local.theta0.values.tolist() == GRID["theta0"]
    assert local.body.values.tolist() == ["bob"]
    assert local.xyz.values.tolist() == ["x", "y", "z"]
    n = round(T_END / DT) + 1
    np.testing.assert_allclose(local.time.values, np.arange(n) * DT, rtol=0, atol=1e-9)
    assert (local.error == "").all()
    assert local.attrs["integrator"] == "verlet" and local.attrs["dt"] == DT and local.attrs["t_end"] == T_END
    assert (local.wall_time > 0).all()


def test_member_equals_its_own_simulate_run(local: xr.Dataset) -> None:
    from mbvi.scenefile import load_scene_module

    traj = mbvi.simulate(load_scene_module(PENDULUM).build(length=2.0, theta0=1.0), t_end=T_END, dt=DT)
    member = local.sel(length=2.0, theta0=1.0)
    np.testing.assert_array_equal(member.energy.values, traj.energy)
    np.testing.assert_array_equal(member.position.sel(body="bob").values, traj.position("bob"))
    np.testing.assert_array_equal(member.velocity.sel(body="bob").values, traj.velocity("bob"))


def test_periods_match_the_elliptic_integral(local: xr.Dataset) -> None:
    t = local.time.values
    worst = 0.0
    for length in GRID["length"]:
        for theta0 in GRID["theta0"]:
            x = local.position.sel(length=length, theta0=theta0, body="bob", xyz="x").values
            error = abs(measured_period(t, x) / exact_period(length, theta0) - 1.0)
            worst = max(worst, error)
            assert error < 2e-4, (length, theta0, error)
    assert worst > 0.0  # not trivially equal
    # control: the small-angle period 2π√(l/g) misses the large amplitudes by far more than the tolerance
    x = local.position.sel(length=1.0, theta0=2.5, body="bob", xyz="x").values
    assert abs(measured_period(t, x) / (2 * math.pi) - 1.0) > 100 * 2e-4


def test_two_worker_cluster_gives_the_local_numbers_bit_for_bit(local: xr.Dataset) -> None:
    with warnings.catch_warnings():
        # distributed may warn about ports or slow closes when it starts and stops workers on a busy machine
        warnings.filterwarnings("ignore", module=r"distributed\..*")
        warnings.filterwarnings("ignore", category=ResourceWarning)
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            remote = mbvi.sweep(str(PENDULUM), GRID, t_end=T_END, dt=DT, client=client)
    for name in ("energy", "kinetic", "potential", "constraint_error", "position", "velocity", "error"):
        np.testing.assert_array_equal(remote[name].values, local[name].values, err_msg=name)
    assert "wall_time" not in remote  # timing is off by default: every variable is reproducible
    xr.testing.assert_identical(remote, local.drop_vars("wall_time"))


def test_a_build_written_in_a_script_reaches_worker_processes() -> None:
    """A build defined where it runs (a script's or a notebook's function, a lambda: pickled by value) that reads
    ``mbvi.…`` is sent to worker processes: the package pickles by name, as a module does (it raised
    "cannot pickle '_Package' object", and sweeps fell back to threads)."""
    import cloudpickle

    def build(length: float = 1.0) -> mbvi.Scene:
        s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
        s.add(mbvi.Particle("bob", mass=1.0, position=(length, 0.0, 0.0)))
        s.add(mbvi.Rod("world", "bob"))
        return s

    assert isinstance(cloudpickle.loads(cloudpickle.dumps(lambda: mbvi.Scene()))(), mbvi.Scene)
    grid = {"length": [0.5, 1.0]}
    there = mbvi.sweep(build, grid, t_end=0.05, dt=0.01, scheduler="processes")
    here = mbvi.sweep(build, grid, t_end=0.05, dt=0.01, scheduler="synchronous")
    assert list(there.error.values) == ["", ""]
    np.testing.assert_array_equal(there.position.values, here.position.values)


def test_a_failed_first_member_does_not_set_the_estimate(caplog: pytest.LogCaptureFixture) -> None:
    """A member that fails at once says nothing of the others' cost: the next one, run to its end, decides."""
    grid = {"length": [0.0, 1.0, 0.5], "theta0": [0.3]}
    with caplog.at_level("INFO", logger="mbvi.sweep"):
        ds = mbvi.sweep(str(PENDULUM), grid, t_end=2.0, dt=DT)
    probes = [r.getMessage() for r in caplog.records if "members need" in r.getMessage()]
    assert probes == ["sweep: the other 1 members need ~" + probes[0].split("~")[1]]  # two probed, one left
    assert probes[0].endswith(": synchronous")
    assert str(ds.error.sel(length=0.0, theta0=0.3).values).startswith("ValueError:")
    assert (ds.error.sel(length=[1.0, 0.5]) == "").all()


def test_one_member_left_after_failed_probes_is_not_sent_to_a_pool(caplog: pytest.LogCaptureFixture) -> None:
    """Both probes fail at once (no estimate): the one member left runs here, not alone in a pool."""
    saved = SWEEP.POOL_WORTH
    SWEEP.POOL_WORTH = 0.0  # whatever the estimate, a pool of one member is not worth starting
    try:
        with caplog.at_level("INFO", logger="mbvi.sweep"):
            ds = mbvi.sweep(str(PENDULUM), {"mass": [0.0, -1.0, 1.0]}, t_end=0.5, dt=DT)
    finally:
        SWEEP.POOL_WORTH = saved
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.endswith("unknown (no member ran to its end) here: synchronous") for m in messages)
    assert not any("local processes scheduler" in m for m in messages)
    assert str(ds.error.sel(mass=-1.0).values).startswith("ValueError:")
    assert str(ds.error.sel(mass=1.0).values) == ""


def test_a_zero_length_rod_is_that_members_error_and_the_others_run() -> None:
    grid = {"length": [1.0, 0.0, 0.5], "theta0": [0.3]}
    ds = mbvi.sweep(str(PENDULUM), grid, t_end=2.0, dt=DT, scheduler="synchronous")
    errors = ds.error.sel(theta0=0.3)
    assert errors.sel(length=1.0) == "" and errors.sel(length=0.5) == ""
    message = str(errors.sel(length=0.0).values)
    assert message.startswith("ValueError:") and "pendulum: length must be a positive number" in message
    assert np.isnan(ds.energy.sel(length=0.0)).all() and np.isnan(ds.position.sel(length=0.0)).all()
    good = ds.sel(length=[1.0, 0.5])
    assert np.isfinite(good.energy).all() and np.isfinite(good.position).all()
    x = good.position.sel(body="bob", xyz="x", time=0.0).values[:, 0]
    np.testing.assert_allclose(x, [math.sin(0.3), 0.5 * math.sin(0.3)], rtol=1e-12)


def test_a_solver_failure_keeps_the_partial_trajectory() -> None:
    # the double pendulum at dt = 0.3 s: SHAKE fails after a few steps, whatever the release angle
    ds = mbvi.sweep(str(DOUBLE), {"theta1": [0.5, 1.5]}, t_end=3.0, dt=0.3, scheduler="synchronous")
    for theta1 in (0.5, 1.5):
        member = ds.sel(theta1=theta1)
        assert str(member.error.values).startswith("SolverError:")
        energy = member.energy.values
        ran = np.isfinite(energy)
        assert 0 < ran.sum() < len(energy) and ran[: ran.sum()].all()  # the partial run, then NaN
        assert np.isfinite(member.position.values[ran]).all()


@pytest.mark.parametrize("scheduler", ["processes", "threads", "synchronous"])
def test_a_member_at_too_large_a_step_is_marked_in_the_dataset_and_said_once(scheduler: str) -> None:
    """The double pendulum released at θ = 3 with dt = 0.05 s: its energy strays 21 % of the energy in motion, and
    simulate warns. In a sweep that warning went to a worker's stderr (or nowhere), and the member passed with
    error == "" and nothing else to tell it from an accurate one."""
    grid = {"theta1": [0.5, 3.0], "theta2": [0.5]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = mbvi.sweep(str(DOUBLE), grid, t_end=3.0, dt=0.05, scheduler=scheduler)
    said = [str(w.message) for w in caught]  # one, for all members (not each member's again besides)
    assert len(said) == 1 and re.search(r"sweep: 1 of 2 members warned.*theta1=3\.0.*energy balance.*strayed", said[0])
    assert caught[0].filename == __file__  # (it points at the call)
    calm, wild = ds.sel(theta1=0.5, theta2=0.5), ds.sel(theta1=3.0, theta2=0.5)
    assert str(calm.warning.values) == "" and str(wild.error.values) == ""
    assert "strayed" in str(wild.warning.values) and "reduce dt" in str(wild.warning.values)
    assert float(wild.energy_error) > 0.1 > float(calm.energy_error) > 0.0
    energy = wild.energy.values  # the figure is the member's own energy balance: no work, so E − E₀ over motion
    motion = max(wild.kinetic.values.max(), np.ptp(wild.potential.values))
    assert float(wild.energy_error) == pytest.approx(np.abs(energy - energy[0]).max() / motion, rel=1e-9)


def test_an_option_is_checked_on_the_first_member_that_builds() -> None:
    """An unknown option fails before anything runs even when the first member's build is invalid (it was then
    recorded for every member, and the sweep returned); the invalid member is still its own error."""
    with pytest.raises(ValueError, match=r"does not take option.*nosuch"):
        mbvi.sweep(str(PENDULUM), {"length": [0.0, 1.0]}, t_end=0.1, dt=DT, scheduler="synchronous", nosuch=1)
    ds = mbvi.sweep(str(PENDULUM), {"length": [0.0, 1.0]}, t_end=0.1, dt=DT, scheduler="synchronous", tol=1e-11)
    assert "length must be a positive number" in str(ds.error.sel(length=0.0).values)
    assert str(ds.error.sel(length=1.0).values) == ""
    assert np.isnan(float(ds.energy_error.sel(length=0.0)))


def test_bodies_that_differ_between_members_share_one_axis_with_nan() -> None:
    def build(links: int) -> mbvi.Scene:
        scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
        parent = "world"
        for i in range(links):
            scene.add(mbvi.Particle(f"p{i}", mass=1.0, position=(0.5 * (i + 1), 0.0, 0.0)))
            scene.add(mbvi.Rod(parent, f"p{i}"))
            parent = f"p{i}"
        return scene

    ds = mbvi.sweep(build, {"links": [1, 3, 2]}, t_end=0.1, dt=1e-2)  # a local closure: threads
    assert ds.body.values.tolist() == ["p0", "p1", "p2"]
    assert np.isnan(ds.position.sel(links=1, body=["p1", "p2"])).all()
    assert np.isnan(ds.position.sel(links=2, body="p2")).all()
    assert np.isfinite(ds.position.sel(links=3)).all()


def test_a_build_returning_one_shared_scene_gives_each_member_its_own_parameters() -> None:
    """A build that sets its parameter on one scene and returns it for every member: on threads, another
    member's build changed the scene before this member's run assembled it (1 member in 8 took another's
    stiffness, silently). The pause in the build makes the overlap certain."""
    import time

    scene = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    spring = scene.add(mbvi.Spring("world", "a", stiffness=1.0, rest_length=0.5))

    def build(k: float) -> mbvi.Scene:
        spring.stiffness = k
        time.sleep(0.02)
        return scene

    stiffness = [1.0, 4.0, 9.0, 16.0, 25.0, 36.0]
    ds = mbvi.sweep(build, {"k": stiffness}, t_end=1.0, dt=1e-3, scheduler="threads")
    x = ds.position.sel(body="a", xyz="x").isel(time=-1).values
    exact = 0.5 + 0.5 * np.cos(np.sqrt(stiffness) * 1.0)  # x(t) of the unit mass from rest, 0.5 m stretched
    np.testing.assert_allclose(x, exact, atol=1e-4)


def test_bad_arguments_fail_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="reserved"):
        mbvi.sweep(str(PENDULUM), {"time": [1.0]}, t_end=1.0, dt=DT)
    with pytest.raises(ValueError, match="no values"):
        mbvi.sweep(str(PENDULUM), {"length": []}, t_end=1.0, dt=DT)
    with pytest.raises(ValueError, match="dt"):
        mbvi.sweep(str(PENDULUM), {"length": [1.0]}, t_end=1.0, dt=-1.0)
    with pytest.raises(FileNotFoundError):
        mbvi.sweep("no/such/scene.py", {"length": [1.0]}, t_end=1.0, dt=DT)


def test_cli_writes_a_zarr_store_that_reads_back_as_the_same_dataset(tmp_path: Path, capsys) -> None:
    out = tmp_path / "sweep.zarr"
    argv = ["sweep", str(PENDULUM), "--grid", "length=0.5,1", "--grid", "theta0=0.1,0.2,0.3"]
    argv += ["--t-end", "2", "--dt", "1e-2", "--out", str(out), "--scheduler", "threads"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "6 members" in capsys.readouterr().out
    stored = xr.open_zarr(out).load()
    direct = mbvi.sweep(
        str(PENDULUM), {"length": [0.5, 1], "theta0": [0.1, 0.2, 0.3]}, t_end=2.0, dt=1e-2, scheduler="synchronous"
    )
    assert stored.error.dtype.kind == "U"
    xr.testing.assert_identical(stored, direct)


def test_cli_errors_are_one_line(tmp_path: Path, capsys) -> None:
    assert main(["sweep", str(PENDULUM), "--grid", "length", "--t-end", "1"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mbvi: error: ") and err.count("\n") == 1 and "--grid" in err
    assert main(["sweep", str(PENDULUM), "--grid", "length=1", "--out", str(tmp_path / "x.csv")]) == 1
    assert "unsupported" in capsys.readouterr().err


def _whirl(w: float = 0.0) -> mbvi.Scene:
    """A double pendulum whose first bob is thrown at w m/s: at w = 300 and dt = 0.05 its SHAKE fails."""
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1, 0, 0), velocity=(0, 0, w)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2, 0, 0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    return scene


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
def test_a_failed_members_warning_is_its_own_and_the_filters_are_left_as_they_were(scheduler: str) -> None:
    """The re-runs that verify a failed run's suggested dt silenced their warnings with warnings.catch_warnings:
    process-wide, so members side by side in threads left a catch-all "ignore" filter behind (every later
    warning lost), and the member's own record caught a re-run's warning of a dt that was none of its own
    ("at dt = 0.0015625 s … reduce dt, e.g. to 0.00039 s", beside the error's verified 0.000256 s)."""
    filters = list(warnings.filters)
    ds = mbvi.sweep(_whirl, {"w": [300.0, 301.0, 302.0, 303.0]}, t_end=0.5, dt=0.05, scheduler=scheduler)
    assert all(str(e).startswith("SolverError:") for e in ds.error.values)
    assert [str(w) for w in ds.warning.values] == [""] * 4
    assert list(warnings.filters) == filters


def test_an_all_failed_sweep_has_the_time_axis_of_one_that_ran() -> None:
    """The axis of a sweep whose members all failed ended at t_end (0.3) and that of one that ran at 3 × 0.1 =
    0.30000000000000004: two parts of a grid combined into five times, NaN in the middle of a good member."""

    def build(length: float = 1.0):
        return _whirl(0.0) if length > 0 else _whirl(300.0)

    ran = mbvi.sweep(build, {"length": [1.0]}, t_end=0.3, dt=0.1, scheduler="synchronous")
    failed = mbvi.sweep(build, {"length": [-1.0]}, t_end=0.3, dt=0.1, scheduler="synchronous")
    assert failed.error.values[0].startswith("SolverError:") and not ran.error.values[0]
    assert np.array_equal(failed.time.values, ran.time.values)
    assert np.array_equal(ran.time.values, mbvi.simulate(_whirl(), 0.3, 0.1).t)
    both = xr.concat([ran, failed], dim="length")
    assert both.sizes["time"] == 4 and np.isfinite(both.energy.sel(length=1.0).values).all()


def test_a_grid_value_given_twice_is_refused() -> None:
    """{"L": [1.0, 1.0, 2.0]} made a coordinate with two rows for 1.0: .sel gave both, alignment failed."""
    with pytest.raises(ValueError, match=r"grid\['w'\] has the value 300.0 twice"):
        mbvi.sweep(_whirl, {"w": [300.0, 300.0]}, t_end=0.1, dt=0.01, scheduler="synchronous")


@pytest.mark.parametrize(("args", "needle"), [
    (["--grid", "theta1=a,(1, 2)"], "quote the strings beside tuples"),
    (["--grid", "theta1=0.5", "--option", "save_every=10"], "--option save_every: not an integrator option"),
])  # fmt: skip
def test_the_sweep_command_refuses_what_it_would_misread(args, needle, capsys) -> None:
    """'a,(1, 2)' was split at every comma into three members 'a', '(1', '2)'; --option save_every=10 was a
    TypeError: sweep() got multiple values for keyword argument 'save_every'."""
    assert main(["sweep", str(DOUBLE), "--t-end", "0.1", "--dt", "0.01", *args]) == 1
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
