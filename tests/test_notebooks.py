"""The example notebooks run (nbmake, headless: EGL and MPLBACKEND=Agg) and write their figures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nbmake")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "docs" / "notebooks"


def test_robot_arm_notebook_runs_and_writes_its_figures(tmp_path):
    env = dict(os.environ)
    env.update(
        MPLBACKEND="Agg",
        VTK_DEFAULT_OPENGL_WINDOW=env.get("VTK_DEFAULT_OPENGL_WINDOW", "vtkEGLRenderWindow"),
        MBVI_NOTEBOOK_OUT=str(tmp_path),
        MBVI_NOTEBOOK_SHOW="0",  # no trame server in CI
    )
    notebook = str(NOTEBOOKS / "robot_arm.ipynb")
    cmd = [sys.executable, "-m", "pytest", "--nbmake", notebook, "-q", "-p", "no:cacheprovider"]
    cmd += ["--nbmake-timeout", "120", "--rootdir", str(tmp_path)]
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    for name in ("robot_arm_angles.png", "robot_arm.png", "robot_arm.gif"):
        assert (tmp_path / name).stat().st_size > 1000, name
