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


@pytest.mark.parametrize(("theta1", "flips"), [(1.45, False), (1.55, False), (1.6, True)])
def test_the_double_pendulum_flips_only_outside_its_energy_curve(theta1: float, flips: bool) -> None:
    """The gallery and docs/sweeps.md drew the no-flip curve as 3 cos θ₁ + cos θ₂ = 2, which is two uniform
    rods'. The scene's bobs are points: V = −mgl(2 cos θ₁ + cos θ₂), and the cheapest flip lifts the lower bob
    over the top with the upper arm hanging (V = −mgl), so a release from rest with 2 cos θ₁ + cos θ₂ > 1 never
    flips. θ₁ = 1.45 and 1.55 (θ₂ = 0) lie between the two curves: they never flip in 30 s; θ₁ = 1.6, just
    outside, does (not every angle outside does: the flip times there are erratic)."""
    traj = mbvi.simulate(load_scene("double_pendulum").build(theta1=theta1, theta2=0.0), 30.0, 1e-2)
    assert (2 * math.cos(theta1) + 1 > 1) is not flips
    bob1, bob2 = traj.position("bob1"), traj.position("bob2")
    arms = [bob1, bob2 - bob1]
    angles = [np.unwrap(np.arctan2(arm[:, 0], -arm[:, 2])) for arm in arms]  # from the downward vertical
    assert bool(max(np.abs(a).max() for a in angles) > math.pi) is flips  # an arm went over the top
