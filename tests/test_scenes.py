"""Every scene in scenes/ is a tested example: it builds, simulates briefly from the command
line with physically sound results, and renders."""

from __future__ import annotations

import contextlib
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from scene_loader import SCENES, load_scene

import mbvi
from mbvi.cli import main

SCENE_FILES = sorted(SCENES.glob("*.py"))


@contextlib.contextmanager
def _expected_warnings():
    """Closed-loop scenes warn, by design, that redundant constraint rows were dropped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
        yield


def _short_run(module) -> tuple[float, float]:
    """(t_end, dt) for a quick run: about 20 steps of the scene's own step size."""
    dt = float(getattr(module, "DT", 1e-3))
    return 20 * dt, dt


@pytest.mark.parametrize("path", SCENE_FILES, ids=[p.stem for p in SCENE_FILES])
def test_scene_builds_and_simulates(path: Path) -> None:
    module = load_scene(path)
    assert module.__doc__, f"{path.name} needs a module docstring"
    t_end, dt = _short_run(module)
    integrator = getattr(module, "INTEGRATOR", "verlet")
    with _expected_warnings():
        scene = module.build()
        assert isinstance(scene, (mbvi.Scene, mbvi.LagrangianSystem))
        traj = mbvi.simulate(scene, t_end=t_end, dt=dt, integrator=integrator)
    assert len(traj.t) == round(t_end / dt) + 1
    assert np.all(np.isfinite(traj.q)) and np.all(np.isfinite(traj.energy))
    if mbvi.get_integrator(integrator).variational and traj.q.shape[1]:
        scale = traj.geometry.length_scale
        assert traj.constraint_error.max() <= 1e-9 * max(1.0, scale)


@pytest.mark.parametrize("path", SCENE_FILES, ids=[p.stem for p in SCENE_FILES])
def test_scene_runs_from_the_command_line_and_renders(path: Path, tmp_path: Path, capsys) -> None:
    module = load_scene(path)
    t_end, dt = _short_run(module)
    out, png = tmp_path / "run.npz", tmp_path / "run.png"
    argv = ["run", str(path), "--t-end", repr(t_end), "--dt", repr(dt), "--out", str(out), "--render", str(png)]
    with _expected_warnings():
        code = main([*argv, "--size", "160x120", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    traj = mbvi.Trajectory.load(out)
    assert math.isclose(traj.t[-1], t_end, rel_tol=1e-9)
    # the picture shows something: not a single flat colour
    import imageio.v3 as iio

    img = iio.imread(png)
    assert img.shape[:2] == (120, 160)
    assert img.reshape(-1, img.shape[-1]).std(axis=0).max() > 5
