"""What a new user doing parameter studies and pictures hit (a review): options out of range are ValueErrors
before anything is drawn (a negative window size aborted the process), a LagrangianSystem sweep written to netCDF
reads back, the command line checks a sweep's --out before sweeping and says which member failed and where a
build's own error comes from, and a one-body scene is drawn at its size."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
from scene_loader import SCENES

import mbvi
from mbvi.cli import main


def pendulum(length: float = 1.0) -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    s.add(mbvi.Particle("bob", mass=1.0, position=(length, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "bob"))
    return s


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"window_size": (-5, 10)}, "window_size must be two numbers of pixels"),
        ({"window_size": (0, 10)}, "window_size must be two numbers of pixels"),
        ({"window_size": (10, "20")}, "window_size must be two numbers of pixels"),
        ({"zoom": 0}, "zoom must be a positive number"),
        ({"scale": -2}, "scale must be a positive number"),
        ({"ground": "yes"}, "ground must be True, False, 'plane' or 'grid'"),
        ({"time_label": "x"}, "time_label must be True or False"),
        ({"trail": True, "trail_length": -1}, "trail_length must be a positive number"),
    ],
)
def test_render_options_out_of_range_are_value_errors_before_drawing(kwargs, match, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=match):
        mbvi.render.snapshot(pendulum(), tmp_path / "x.png", **kwargs)
    assert not (tmp_path / "x.png").exists()


def test_a_one_body_scene_is_drawn_at_its_size() -> None:
    """The elements' sizes follow the reach from the anchor (a 100 m pendulum's bob was sized for 1 m)."""
    from mbvi.render.frames import FrameData
    from mbvi.render.style import Sizes

    def unit(length: float) -> float:
        return Sizes.for_frames(FrameData.from_trajectory(mbvi.Trajectory.from_scene(pendulum(length)), [0])).unit

    assert unit(100.0) == pytest.approx(100.0 * unit(1.0), rel=1e-12)


def test_a_lagrangian_sweep_written_to_netcdf_reads_back(tmp_path: Path) -> None:
    xr = pytest.importorskip("xarray")
    ds = mbvi.sweep(SCENES / "double_pendulum_angles.py", {"m2": [1.0, 2.0]}, 0.05, 1e-3, scheduler="synchronous")
    assert "position" not in ds and "body" not in ds.dims  # no bodies: no zero-length axis netCDF cannot read
    from mbvi.sweep import write

    write(ds, tmp_path / "s.nc")  # as `mbvi sweep --out s.nc` writes it
    back = xr.open_dataset(tmp_path / "s.nc").load()
    np.testing.assert_array_equal(back.q.values, ds.q.values)


def _seeded(seed: int = 0) -> mbvi.Scene:
    """A bob on a spring whose mass a seed picks (a grid of integers, as random seeds are)."""
    scene = mbvi.Scene(gravity=(0, 0, -9.81))
    scene.add(mbvi.Particle("p", mass=1.0 + (seed % 7) * 0.1, position=(1.0, 0, 0)))
    scene.add(mbvi.Spring("world", "p", stiffness=1.0, rest_length=1.0))
    return scene


def test_a_sweep_over_64_bit_seeds_is_written_to_netcdf_and_reads_back_whole(tmp_path: Path) -> None:
    """A seed past 2³¹ failed the write after the whole sweep had run (netCDF-3 has no int64: xarray's message
    spoke of datetimes), and small seeds came back as int32; netCDF-4 keeps the dataset as it is."""
    xr = pytest.importorskip("xarray")
    from mbvi.sweep import write

    ds = mbvi.sweep(_seeded, {"seed": [1, 3_000_000_000]}, 0.1, 1e-2, scheduler="synchronous")
    write(ds, tmp_path / "s.nc")
    back = xr.open_dataset(tmp_path / "s.nc").load()
    assert back.seed.dtype == np.int64
    assert back.seed.values.tolist() == [1, 3_000_000_000]
    xr.testing.assert_identical(back, ds)


def test_a_sweep_of_failing_members_ends_its_time_axis_at_t_end() -> None:
    def build(k=1.0):
        raise ValueError("no scene")

    ds = mbvi.sweep(build, {"k": [1.0, 2.0]}, 0.105, 0.01, scheduler="synchronous")
    assert ds.time.values[-1] == pytest.approx(0.105, abs=1e-12)


@pytest.fixture
def scenes(tmp_path: Path) -> Path:
    (tmp_path / "boom.py").write_text(textwrap.dedent('''
        import mbvi
        def build(n=1):
            if n == 2:
                raise RuntimeError("kaboom")
            s = mbvi.Scene(gravity=(0, 0, -9.81))
            s.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0, 0)))
            s.add(mbvi.Rod("world", "bob"))
            return s
    '''))  # fmt: skip
    (tmp_path / "bug.py").write_text("def build(n=1):\n    return 'x' + n\n")
    return tmp_path


def test_the_command_line_says_which_member_failed_and_whose_error_it_is(scenes: Path, capsys) -> None:
    assert main(["sweep", str(scenes / "boom.py"), "--grid", "n=1,2", "--t-end", "0.01", "--scheduler",
                 "synchronous"]) == 1  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert err.startswith("mbvi: error: RuntimeError: kaboom") and "parameters {'n': 2}" in err and "\n" not in err
    assert main(["run", str(scenes / "bug.py"), "--param", "n=3", "--t-end", "0.01"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "mbvi: error: build() of '" + str(scenes / "bug.py") + "' raised TypeError: can only concatenate " \
        'str (not "int") to str'  # fmt: skip
    assert main(["run", str(scenes / "bug.py"), "--param", "m=3", "--t-end", "0.01"]) == 1
    assert "rejected the parameters ['m']" in capsys.readouterr().err


def test_a_sweep_output_that_cannot_be_written_is_said_before_sweeping(scenes: Path, capsys) -> None:
    out = scenes / "boom.py" / "x.nc"  # under a file
    assert main(["sweep", str(scenes / "boom.py"), "--grid", "n=1", "--t-end", "0.01", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "--out" in err and "is not a directory" in err and "swept" not in err


def test_a_trajectory_pickled_before_work_existed_still_slices() -> None:
    import pickle

    traj = mbvi.simulate(pendulum(), 0.01, 1e-3)
    state = traj.__getstate__()
    state.pop("work")  # what an older mbvi pickled
    old = pickle.loads(pickle.dumps(traj))
    old.__dict__.clear()
    old.__dict__.update(state)
    assert old.work is None and old.head(3).work is None and len(old.head(3).t) == 3


def test_a_window_size_in_real_numbers_is_rounded_as_before(tmp_path: Path) -> None:
    image = mbvi.render.snapshot(pendulum(), tmp_path / "x.png", window_size=(1920 / 24, 1080 / 18))
    assert image.shape[:2] == (60, 80)


@pytest.mark.parametrize("which", ["scene", "lagrangian"])
def test_a_progress_bar_counts_the_last_shorter_step(which: str, monkeypatch) -> None:
    """With t_end not a multiple of dt the run ends with one shorter step, which the bar did not count: it
    closed at 537 of 538 steps."""
    import tqdm.auto
    from scene_loader import load_scene

    closed = []

    class Recording(tqdm.auto.tqdm):
        def close(self):
            closed.append((self.n, self.total))
            super().close()

    monkeypatch.setattr(tqdm.auto, "tqdm", Recording)
    scene = load_scene("double_pendulum" if which == "scene" else "double_pendulum_angles").build()
    traj = mbvi.simulate(scene, 0.5375, 1e-3, progress=True)
    assert traj.t[-1] == pytest.approx(0.5375) and closed[0] == (538, 538)  # (tqdm may close it again)
