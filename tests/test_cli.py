"""The ``mbvi`` command line: run, render, listings, and one-line errors."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mbvi
from mbvi.cli import main, parse_params

PENDULUM = '''
"""A pendulum for the CLI tests."""
import mbvi

T_END = 0.2
DT = 0.01

def build(length=1.0, mass=1.0, label="bob"):
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle(label, mass=mass, position=(length, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", label))
    return scene
'''


def _write(tmp_path: Path, text: str, name: str = "scene.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def scene_file(tmp_path: Path) -> Path:
    return _write(tmp_path, PENDULUM)


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("mbvi: error: ")
    return lines[0]


# ---------------------------------------------------------------- run
def test_run_writes_a_trajectory_that_loads(scene_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run.npz"
    code = main(
        ["run", str(scene_file), "--param", "length=2.0", "--param", "label=tip", "--out", str(out), "--no-progress"]
    )
    assert code == 0
    traj = mbvi.Trajectory.load(out)
    np.testing.assert_allclose(traj.t[-1], 0.2)  # the scene's T_END
    np.testing.assert_allclose(traj.t[1] - traj.t[0], 0.01)  # the scene's DT
    np.testing.assert_allclose(np.linalg.norm(traj.position("tip"), axis=1), 2.0, rtol=1e-8)
    stdout = capsys.readouterr().out
    assert "verlet" in stdout and str(out) in stdout


def test_run_options_override_scene_defaults(scene_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.npz"
    assert (
        main(["run", str(scene_file), "--integrator", "midpoint", "--dt", "0.02", "--t-end", "0.1", "--out", str(out)])
        == 0
    )
    traj = mbvi.Trajectory.load(out)
    assert len(traj.t) == 6
    np.testing.assert_allclose(traj.t[-1], 0.1)


def test_run_renders_and_plots(scene_file: Path, tmp_path: Path) -> None:
    import imageio.v3 as iio

    png, plot_png, gif = tmp_path / "last.png", tmp_path / "plot.png", tmp_path / "run.gif"
    assert main(["run", str(scene_file), "--render", str(png), "--plot", str(plot_png), "--size", "80x60"]) == 0
    assert iio.imread(png).shape[:2] == (60, 80)
    assert iio.imread(plot_png).ndim == 3
    assert main(["run", str(scene_file), "--render", str(gif), "--fps", "10", "--size", "64x48"]) == 0
    assert iio.imread(gif, index=None).shape[0] == round(0.2 * 10) + 1


def test_render_a_saved_run(scene_file: Path, tmp_path: Path) -> None:
    import imageio.v3 as iio

    run = tmp_path / "run.npz"
    assert main(["run", str(scene_file), "--out", str(run)]) == 0
    png = tmp_path / "x.png"
    assert main(["render", str(run), "--out", str(png), "--size", "80x60", "--frame", "0"]) == 0
    image = iio.imread(png)
    assert image.shape[:2] == (60, 80)
    assert image.std() > 1.0


def test_render_with_trail_draws_more(scene_file: Path, tmp_path: Path) -> None:
    import imageio.v3 as iio

    run = tmp_path / "run.npz"
    assert main(["run", str(scene_file), "--out", str(run)]) == 0
    plain, trail = tmp_path / "plain.png", tmp_path / "trail.png"
    assert main(["render", str(run), "--out", str(plain), "--size", "120x90"]) == 0
    assert main(["render", str(run), "--out", str(trail), "--size", "120x90", "--trail"]) == 0
    a, b = iio.imread(plain).astype(int), iio.imread(trail).astype(int)
    background = a[0, 0]
    drawn = lambda img: np.count_nonzero(np.abs(img - background).sum(axis=-1) > 30)  # noqa: E731
    assert drawn(b) > drawn(a)  # the trail adds the bob's path


# ---------------------------------------------------------------- listings
def test_integrators_lists_names_with_order(capsys) -> None:
    assert main(["integrators"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    names = [line.split()[0] for line in lines]
    assert names == list(mbvi.integrators())
    verlet = lines[names.index("verlet")]
    assert "order 2" in verlet and "symplectic" in verlet
    assert "non-symplectic" in lines[names.index("explicit_euler")]


def test_force_laws_lists_names(capsys) -> None:
    assert main(["force-laws"]) == 0
    assert capsys.readouterr().out.split() == list(mbvi.force_laws())


# ---------------------------------------------------------------- errors
def test_a_reader_that_goes_away_is_not_an_error() -> None:
    """`mbvi integrators | head -1`: the pipe closes before mbvi writes; it stops quietly, no message."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mbvi", "integrators"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()  # no reader: every write to stdout fails with EPIPE
    _, err = proc.communicate(timeout=120)
    assert err.decode() == ""
    assert proc.returncode == 141  # 128 + SIGPIPE, as a shell reports a tool stopped by the pipe


def test_missing_scene_file(tmp_path: Path, capsys) -> None:
    assert main(["run", str(tmp_path / "nope.py")]) == 1
    assert "not found" in _error_line(capsys)
    assert main(["run", str(tmp_path)]) == 1  # a directory: said so (it said "scene file not found")
    assert "is a directory, not a scene file" in _error_line(capsys)


def test_scene_file_without_build(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, "X = 1\n")
    assert main(["run", str(path)]) == 1
    assert "build" in _error_line(capsys)


def test_scene_file_that_does_not_import(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, "def build(:\n")
    assert main(["run", str(path)]) == 1
    assert "SyntaxError" in _error_line(capsys)


@pytest.mark.parametrize("param", ["noequals", "=3", "2x=1", "colour=red"])
def test_bad_param(scene_file: Path, param: str, capsys) -> None:
    assert main(["run", str(scene_file), "--param", param]) == 1
    assert "param" in _error_line(capsys)


def test_invalid_scene_value_error(tmp_path: Path, capsys) -> None:
    path = _write(tmp_path, PENDULUM)
    assert main(["run", str(path), "--param", "mass=-1"]) == 1
    assert "mass" in _error_line(capsys)


def test_unknown_integrator(scene_file: Path, capsys) -> None:
    assert main(["run", str(scene_file), "--integrator", "nope"]) == 1
    assert "nope" in _error_line(capsys)


def test_bad_render_suffix_fails_before_simulating(scene_file: Path, tmp_path: Path, capsys) -> None:
    assert main(["run", str(scene_file), "--render", str(tmp_path / "x.avi")]) == 1
    assert ".gif" in _error_line(capsys)


def test_solver_error_saves_the_partial_trajectory(tmp_path: Path, capsys) -> None:
    path = _write(
        tmp_path,
        """
        import mbvi

        def build():
            scene = mbvi.Scene(gravity=None)
            scene.add(mbvi.RigidBody("top", mass=1.0, inertia=(1.0, 2.0, 2.5), angular_velocity=(0, 0, 150.0)))
            return scene
    """,
    )
    out = tmp_path / "partial.npz"
    # the midpoint rule steps rotation columns: no step past h|ω| ≈ 1 (the RATTLE family steps it on SO(3))
    assert main(["run", str(path), "--dt", "0.01", "--integrator", "midpoint", "--out", str(out)]) == 1
    line = _error_line(capsys)
    assert "partial trajectory saved" in line and "top" in line
    assert len(mbvi.Trajectory.load(out).t) >= 1


def test_python_m_mbvi_reports_errors_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mbvi", "run", str(tmp_path / "missing.py")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("mbvi: error: ")
    ok = subprocess.run([sys.executable, "-m", "mbvi", "integrators"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "verlet" in ok.stdout


def test_malformed_command_line_exits_2(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("mbvi: error:") and "Traceback" not in err


# ---------------------------------------------------------------- helpers
def test_parse_params_reads_literals_and_strings() -> None:
    params = parse_params(["n=5", "k=1e3", "axis=(0, 0, 1)", "name=chain", "flag=True", "s='x y'", "empty="])
    assert params == {"n": 5, "k": 1000.0, "axis": (0, 0, 1), "name": "chain", "flag": True, "s": "x y", "empty": ""}


# -- issue 11: integrator options, output paths checked first, files that are not runs --------------
def test_option_reaches_the_integrator(scene_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "run.npz"
    args = ["run", str(scene_file), "--integrator", "csm", "--option", "alpha=20", "--option", "rtol=1e-6"]
    assert main([*args, "--out", str(out)]) == 0
    assert mbvi.Trajectory.load(out).info.get("integrator") == "csm"


def test_option_save_every_thins_the_output(scene_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.npz"
    assert main(["run", str(scene_file), "--option", "save_every=5", "--out", str(out)]) == 0
    assert len(mbvi.Trajectory.load(out).t) == 20 // 5 + 1


@pytest.mark.parametrize(
    ("option", "needle"),
    [
        ("tol=-1", "'tol'"),
        ("bogus=1", "bogus"),
        ("save_every=0", "save_every"),
        ("save_every=1.5", "save_every"),
        ("=3", "--option"),
        ("noequals", "--option"),
    ],
)
def test_bad_option_is_named(scene_file: Path, option: str, needle: str, capsys) -> None:
    assert main(["run", str(scene_file), "--option", option]) == 1
    assert needle in _error_line(capsys)


@pytest.mark.parametrize("option", ["t0=0.5", "integrator='csm'", "progress=True"])
def test_an_option_of_the_run_itself_is_refused(scene_file: Path, option: str, capsys) -> None:
    """simulate()'s own keywords took them: t0=0.5 started the run at 0.5 s silently, integrator=... raised a
    TypeError ("got multiple values")."""
    assert main(["run", str(scene_file), "--option", option]) == 1
    line = _error_line(capsys)
    assert f"--option {option.split('=')[0]}: not an integrator option" in line


@pytest.mark.parametrize(("extra", "needle"), [
    (["--render", "x.gif", "--fps", "0.001"], "fps must be a finite number of frames per second, at least 0.01"),
    (["--render", "x.mp4", "--fps", "1e-7"], "at least 0.01"),
    (["--render", "x.png", "--size", "20000x100"], "window size must be 1 … 16384 pixels"),
])  # fmt: skip
def test_render_settings_out_of_range_stop_before_the_run(scene_file, tmp_path, extra, needle, capsys,
                                                          monkeypatch) -> None:  # fmt: skip
    """An fps of 1e-3 ran the whole simulation, then failed with OverflowError (a GIF delay is a 16-bit count of
    hundredths of a second; ffmpeg rounded 1e-7 to 0: a broken pipe and six lines); --size 20000x100 likewise."""

    def fail(*args, **kwargs):
        raise AssertionError("simulated before checking the render settings")

    monkeypatch.setattr(mbvi, "simulate", fail)
    extra = [str(tmp_path / a) if a.startswith("x.") else a for a in extra]
    code = main(["run", str(scene_file), *extra]) if "--size" not in extra else None
    if code is None:  # argparse's own check: exit status 2
        with pytest.raises(SystemExit) as exc:
            main(["run", str(scene_file), *extra])
        assert exc.value.code == 2
        assert needle in capsys.readouterr().err
        return
    assert code == 1
    assert needle in _error_line(capsys)


@pytest.mark.parametrize(
    ("flag", "name", "needle"),
    [
        ("--out", "run.txt", "unsupported file type"),
        ("--plot", "plot.gif", "unsupported file type"),
        ("--out", "file_not_dir/run.npz", "not a directory"),
        ("--render", "sub", "unsupported file type"),
        ("--out", "run.npz/", "names a directory (it ends in '/')"),  # (ran, then IsADirectoryError: run lost)
        ("--plot", "p.png/", "names a directory"),  # (wrote p.png, said "wrote p.png/")
    ],
)
def test_output_paths_are_checked_before_simulating(
    scene_file: Path, tmp_path: Path, flag: str, name: str, needle: str, capsys, monkeypatch
) -> None:
    (tmp_path / "file_not_dir").write_text("a file, not a directory")

    def fail(*args, **kwargs):
        raise AssertionError("simulated before checking the output paths")

    monkeypatch.setattr(mbvi, "simulate", fail)
    assert main(["run", str(scene_file), flag, str(tmp_path / name) + ("/" if name.endswith("/") else "")]) == 1
    line = _error_line(capsys)
    assert flag in line and needle in line


def test_unwritable_output_directory_fails_before_simulating(scene_file: Path, tmp_path: Path, capsys) -> None:
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        assert main(["run", str(scene_file), "--out", str(locked / "run.npz")]) == 1
        line = _error_line(capsys)
        assert "--out" in line and "not writable" in line
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize("content", [b"hello", b"PK\x03\x04garbage"])
def test_render_of_a_file_that_is_not_a_trajectory(tmp_path: Path, content: bytes, capsys) -> None:
    bad = tmp_path / "notes.npz"
    bad.write_bytes(content)
    assert main(["render", str(bad), "--out", str(tmp_path / "x.png")]) == 1
    line = _error_line(capsys)
    assert "is not an mbvi trajectory" in line and "allow_pickle" not in line


def test_render_of_an_npz_that_is_not_a_trajectory(tmp_path: Path, capsys) -> None:
    other = tmp_path / "arrays.npz"
    np.savez(other, x=np.arange(3), y=np.array([{}], dtype=object))
    assert main(["render", str(other), "--out", str(tmp_path / "x.png")]) == 1
    assert "is not an mbvi trajectory" in _error_line(capsys)


def test_cli_docs_say_scene_files_run_as_code() -> None:
    text = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
    assert "run as Python code" in text and "--option" in text


def test_a_scene_file_is_the_same_module_in_every_process(scene_file: Path) -> None:
    """The module a scene file is loaded as was named by hash() of its path, which changes with each process: a
    callable of the file (a lambda load) was a new kernel to compile at each ``mbvi run``, and one more on disk."""
    code = ("from mbvi.scenefile import load_scene_module; "
            f"print(load_scene_module({str(scene_file)!r}).build.__module__)")  # fmt: skip
    names = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
             for _ in range(2)}  # fmt: skip
    assert len(names) == 1 and next(iter(names)).startswith("_mbvi_scene_")


def test_a_frame_asked_of_a_video_is_refused(scene_file: Path, tmp_path: Path, capsys) -> None:
    """``mbvi render run.npz --out x.gif --frame 3`` drew the whole video, ``--frame`` ignored without a word."""
    run = tmp_path / "run.npz"
    assert main(["run", str(scene_file), "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["render", str(run), "--out", str(tmp_path / "x.gif"), "--frame", "3"]) == 1
    assert "--frame picks the frame of a still (.png or .jpg)" in _error_line(capsys)
    assert not (tmp_path / "x.gif").exists()
