"""Integrator options and sweep settings are checked before anything runs.

``mbvi.sweep`` constructs the integrator once on the first member's system, so an
unknown or rejected option is one ``ValueError`` (one line and exit 1 on the
command line) rather than an error recorded for every member; ``--scheduler``
is a local scheduler or a Dask address; a ``build`` that returns no scene says
so with the member's parameters; ``csm``'s ``method`` is checked on construction
(scenes and Lagrangian systems).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import RK45

import mbvi
from mbvi.cli import main

ROOT = Path(__file__).resolve().parents[1]
PENDULUM = ROOT / "scenes" / "pendulum.py"  # build(mass, length, g, theta0, omega0) -> Scene
ANGLES = ROOT / "scenes" / "double_pendulum_angles.py"  # build(..., l1, ...) -> LagrangianSystem


def _needs_sweep() -> None:
    pytest.importorskip("xarray")
    pytest.importorskip("dask")


def _pendulum() -> mbvi.Scene:
    return importlib.import_module("mbvi.scenefile").load_scene_module(PENDULUM).build()


def _angles() -> mbvi.LagrangianSystem:
    return importlib.import_module("mbvi.scenefile").load_scene_module(ANGLES).build()


def _none_build(length: float = 1.0) -> None:
    return None


# ---------------------------------------------------------------- sweep: options
def test_an_unknown_option_fails_the_sweep_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_sweep()
    sweep_module = importlib.import_module("mbvi.sweep")
    ran = []
    real = sweep_module.run_members
    monkeypatch.setattr(sweep_module, "run_members", lambda *a: ran.append(a) or real(*a))
    with pytest.raises(ValueError, match=r"sweep: integrator 'verlet' does not take option\(s\) bogus"):
        mbvi.sweep(str(PENDULUM), {"length": [1.0, 2.0]}, t_end=0.1, dt=1e-2, scheduler="synchronous", bogus=1)
    assert not ran  # no member ran
    ds = mbvi.sweep(str(PENDULUM), {"length": [1.0, 2.0]}, t_end=0.1, dt=1e-2, integrator="csm", method="DOP853")
    assert (ds.error.values == "").all()  # good options still sweep


def test_a_value_the_constructor_rejects_fails_the_sweep_up_front() -> None:
    _needs_sweep()
    with pytest.raises(ValueError, match=r"sweep: option 'alpha'"):
        mbvi.sweep(str(PENDULUM), {"length": [1.0]}, t_end=0.1, dt=1e-2, integrator="csm", alpha=-1.0)


def test_options_of_a_lagrangian_system_sweep_are_checked_up_front() -> None:
    _needs_sweep()
    with pytest.raises(ValueError, match=r"sweep: .*does not take option\(s\) bogus"):
        mbvi.sweep(str(ANGLES), {"l1": [1.0, 2.0]}, t_end=0.1, dt=1e-2, scheduler="synchronous", bogus=1)
    with pytest.raises(ValueError, match=r"sweep: option 'method'"):
        mbvi.sweep(str(ANGLES), {"l1": [1.0]}, t_end=0.1, dt=1e-2, integrator="csm", method="XYZ")


def test_cli_sweep_with_an_unknown_option_exits_1_with_one_line(capsys: pytest.CaptureFixture) -> None:
    _needs_sweep()
    argv = ["sweep", str(PENDULUM), "--grid", "length=1,2", "--t-end", "0.1", "--option", "bogus=1"]
    assert main([*argv, "--scheduler", "synchronous"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bogus" in err and err.startswith("mbvi: error:")


# ---------------------------------------------------------------- sweep: scheduler, build
def test_cli_sweep_rejects_an_unknown_scheduler_by_name(capsys: pytest.CaptureFixture) -> None:
    _needs_sweep()
    assert main(["sweep", str(PENDULUM), "--grid", "length=1", "--t-end", "0.1", "--scheduler", "bogus"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--scheduler 'bogus'" in err and "port" not in err


def test_sweep_rejects_an_unknown_scheduler_before_building(monkeypatch: pytest.MonkeyPatch) -> None:
    _needs_sweep()
    built = []
    with pytest.raises(ValueError, match=r"scheduler must be one of .*got 'bogus'"):
        mbvi.sweep(lambda length: built.append(length), {"length": [1.0]}, t_end=0.1, dt=1e-2, scheduler="bogus")
    assert not built


def test_a_build_returning_none_names_build_and_its_parameters() -> None:
    _needs_sweep()
    ds = mbvi.sweep(_none_build, {"length": [1.0, 2.0]}, t_end=0.1, dt=1e-2, scheduler="synchronous")
    message = str(ds.error.sel(length=2.0).values)
    assert "build(length=2.0) returned None" in message and "simulate expects" not in message


# ---------------------------------------------------------------- csm's method
@pytest.mark.parametrize("method", ["XYZ", "rk45", 5, None])
def test_csm_rejects_a_bad_method_on_construction(method: object) -> None:
    with pytest.raises(ValueError, match=r"option 'method'.*RK45.*LSODA"):
        mbvi.Simulator(_pendulum(), 1e-2, integrator="csm", method=method)


def test_csm_suggests_the_right_case() -> None:
    with pytest.raises(ValueError, match=r"did you mean 'RK45'"):
        mbvi.simulate(_pendulum(), t_end=0.1, dt=1e-2, integrator="csm", method="rk45")
    for scene in (_pendulum(), _angles()):  # a method name or an OdeSolver subclass still runs
        for method in ("Radau", RK45):
            traj = mbvi.simulate(scene, t_end=0.05, dt=1e-2, integrator="csm", method=method)
            assert len(traj.t) == 6


@pytest.mark.parametrize("method", ["XYZ", "rk45", 5])
def test_lagrangian_csm_rejects_a_bad_method_on_construction(method: object) -> None:
    with pytest.raises(ValueError, match=r"option 'method'.*RK45.*LSODA"):
        mbvi.Simulator(_angles(), 1e-2, integrator="csm", method=method)


@pytest.mark.parametrize(
    ("integrator", "options"),
    [
        ("verlet", {"maxiter": np.arange(40, 60, 10)[0], "tol": np.float32(1e-10)}),
        ("csm", {"alpha": np.int64(10), "rtol": np.float32(1e-6), "atol": np.float64(1e-9)}),
    ],
)
def test_numpy_numbers_are_numbers_as_options(integrator: str, options: dict) -> None:
    """np.int64(40) (from np.arange, a sweep's grid) was refused as "must be an integer > 0"; np.float32 alike. A
    run with them is the run with the Python numbers."""
    plain = {k: v.item() for k, v in options.items()}
    for build in (_pendulum, _angles):
        a = mbvi.simulate(build(), 0.2, 1e-2, integrator, **options)
        b = mbvi.simulate(build(), 0.2, 1e-2, integrator, **plain)
        np.testing.assert_array_equal(a.q, b.q)
    for bad in (np.bool_(True), np.float64("nan"), np.array([1.0, 2.0])):
        with pytest.raises(ValueError, match="option 'rtol'"):
            mbvi.simulate(_pendulum(), 0.2, 1e-2, "csm", rtol=bad)


@pytest.mark.parametrize("project", ["no", float("nan"), 2, None])
def test_explicit_euler_takes_project_as_a_bool_only(project) -> None:
    """``project="no"`` or nan projected (truthy), None silently did not: each is refused naming the option."""
    with pytest.raises(ValueError, match=r"option 'project' must be True or False"):
        mbvi.simulate(_pendulum(), 0.1, 1e-2, "explicit_euler", project=project)


def test_explicit_euler_without_projection_drifts_off_the_rod_and_with_it_stays() -> None:
    on = mbvi.simulate(_pendulum(), 1.0, 1e-2, "explicit_euler", project=np.bool_(True))
    off = mbvi.simulate(_pendulum(), 1.0, 1e-2, "explicit_euler", project=False)
    assert on.constraint_error.max() <= 1e-10
    assert off.constraint_error.max() >= 1e-3  # a first-order drift, h² a step: some 1e-3 m after a second


def test_explicit_euler_of_a_lagrangian_system_takes_project_as_a_bool_only() -> None:
    with pytest.raises(ValueError, match=r"'explicit_euler': option 'project' must be True or False, got 'no'"):
        mbvi.simulate(_angles(), 0.1, 1e-2, "explicit_euler", project="no")
