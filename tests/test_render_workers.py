"""animate() in worker processes draws the same video as in this process, also from unguarded scripts."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mbvi

iio = pytest.importorskip("imageio.v3")


def _frames(path) -> np.ndarray:
    if path.suffix == ".gif":
        return iio.imread(path)
    import imageio_ffmpeg  # decoded by the bundled ffmpeg (subprocess.run closes its pipes)

    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    raw = subprocess.run(cmd, capture_output=True, check=True, timeout=60).stdout
    return np.frombuffer(raw, dtype=np.uint8).reshape(-1, 120, 160, 3)


@pytest.fixture(scope="module")
def pendulum() -> mbvi.Trajectory:
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    return mbvi.simulate(scene, t_end=1.0, dt=1e-3)


@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_workers_write_the_same_frames(pendulum, tmp_path, suffix):
    one = mbvi.render.animate(pendulum, tmp_path / f"one{suffix}", fps=20, window_size=(160, 120), workers=1)
    two = mbvi.render.animate(pendulum, tmp_path / f"two{suffix}", fps=20, window_size=(160, 120), workers=2)
    a, b = _frames(one), _frames(two)
    assert a.shape == b.shape and a.shape[0] == 21
    assert np.array_equal(a, b)
    assert not np.array_equal(a[0], a[-1])  # control: the frames differ


def test_unguarded_script_renders_with_workers(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        textwrap.dedent(
            """
            import mbvi
            scene = mbvi.Scene()
            scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
            scene.add(mbvi.Rod("world", "bob"))
            traj = mbvi.simulate(scene, t_end=0.5, dt=1e-3)
            mbvi.render.animate(traj, "run.gif", fps=20, window_size=(80, 60), workers=2)
            print("done")
            """
        )
    )
    out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done"
    assert iio.imread(tmp_path / "run.gif").shape[0] == 11
