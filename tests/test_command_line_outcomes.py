"""What a new user meets on the command line, in sweeps and in plots (a review in the new user's place found each;
every test here fails on the main before it): nothing lost, one line naming the option, the picture right."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import numpy as np
import pytest

import mbvi
from mbvi.cli import main
from mbvi.sweep import write

PENDULUM = """
import mbvi

T_END = 0.2
DT = 0.01

def build(length=1.0):
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(length, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    return scene
"""


def _write(directory: Path, text: str, name: str = "scene.py") -> Path:
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return path


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mbvi: error: "), err
    return lines[0]


def test_a_sweep_does_not_empty_a_directory_that_is_not_a_zarr_store(tmp_path: Path, capsys) -> None:
    """``--out stuff.zarr`` on a directory of the user's files wrote the store over them: they were gone."""
    scene = _write(tmp_path, PENDULUM)
    store = tmp_path / "stuff.zarr"
    (store / "sub").mkdir(parents=True)
    (store / "thesis.tex").write_text("precious")
    assert main(["sweep", str(scene), "--grid", "length=1", "--out", str(store)]) == 1
    assert "is a directory with files that are not a Zarr store" in _error_line(capsys)
    assert (store / "thesis.tex").read_text() == "precious" and (store / "sub").is_dir()
    with pytest.raises(ValueError, match="not a Zarr store"):  # the API's writer too
        write(mbvi.sweep(str(scene), {"length": [1.0]}, t_end=0.05, dt=0.01), store)
    assert (store / "thesis.tex").exists()
    # a Zarr store is rewritten, as documented
    fresh = tmp_path / "run.zarr"
    assert main(["sweep", str(scene), "--grid", "length=1", "--out", str(fresh)]) == 0
    assert main(["sweep", str(scene), "--grid", "length=1,2", "--out", str(fresh)]) == 0


@pytest.mark.parametrize("name", ["velocity", "energy", "error", "q"])
def test_a_grid_named_like_a_variable_of_the_dataset_is_refused_before_any_member_runs(
    name: str, tmp_path: Path
) -> None:
    """``build(velocity=…)`` failed after every member had run, in xarray ("variables found in both data_vars and
    coords")."""
    scene = _write(tmp_path, PENDULUM.replace("length=1.0", f"length=1.0, {name}=0.0"))
    with pytest.raises(ValueError, match=rf"grid name '{name}' is reserved, one of the dataset's own"):
        mbvi.sweep(str(scene), {name: [1.0, 2.0]}, t_end=0.05, dt=0.01)


def test_a_grid_that_mixes_kinds_keeps_its_strings_as_labels() -> None:
    from mbvi.sweep import _coordinate

    assert list(_coordinate(["none", "one", None])) == ["none", "one", "None"]  # were "'none'", "'one'"
    assert list(_coordinate([1, 1.5, True])) == ["1", "1.5", "True"]  # were 1.0, 1.5, 1.0: two alike
    assert list(_coordinate(["None", None])) == ["'None'", "None"]  # alike as text: all by repr
    assert _coordinate([1.0, 2.5]).dtype.kind == "f" and _coordinate(["a", "b"]).dtype.kind == "U"


def test_a_scene_file_imports_a_module_beside_it(tmp_path: Path, capsys, monkeypatch) -> None:
    """``python scene.py`` can import params.py beside it; ``mbvi run scene.py`` could not, from anywhere."""
    home = tmp_path / "model"
    home.mkdir()
    _write(home, "LENGTH = 0.7\n", "beside_params.py")
    scene = _write(home, PENDULUM.replace("import mbvi\n", "import mbvi\nfrom beside_params import LENGTH\n", 1)
                   .replace("length=1.0", "length=LENGTH"))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))  # the import adds its directory: undone after
    out = tmp_path / "run.npz"
    assert main(["run", str(scene), "--out", str(out)]) == 0
    assert mbvi.Trajectory.load(out).position("bob")[0, 0] == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('DT = "1e-3 s"', "DT = '1e-3 s' in"),
        ("T_END = None", "T_END = None in"),
        ("T_END = -1", "T_END = -1 in"),
        ("import sys\nsys.exit(0)", "SystemExit"),
    ],
)
def test_a_scene_file_that_is_wrong_is_named_in_one_line(text: str, needle: str, tmp_path: Path, capsys) -> None:
    """A bad DT/T_END gave numpy's or float()'s message naming nothing; sys.exit(0) in the file exited silently,
    with status 0 and nothing written."""
    scene = _write(tmp_path, PENDULUM.replace("T_END = 0.2\nDT = 0.01\n", text + "\n"))
    assert main(["run", str(scene), "--out", str(tmp_path / "x.npz")]) == 1
    assert needle in _error_line(capsys)
    assert not (tmp_path / "x.npz").exists()


@pytest.mark.parametrize(
    ("args", "needle", "status"),
    [
        (["--fps", "inf"], "argument --fps: expected a positive finite number", 2),
        (["--speed", "inf"], "argument --speed: expected a positive finite number", 2),
        (["--speed", "1e-12"], "--fps and --speed: fps = 30 and speed = 1e-12 make 6e+15 frames", 1),
    ],
)
def test_animation_options_that_ask_for_no_or_endless_frames_are_refused_before_the_run(
    args: list[str], needle: str, status: int, tmp_path: Path, capsys
) -> None:
    """--fps inf failed after the run with an OverflowError; --speed 1e-12 asked for 437 TiB after it; --speed inf
    wrote a 1-frame video with a numpy warning."""
    scene = _write(tmp_path, PENDULUM.replace("T_END = 0.2", "T_END = 200.0").replace("DT = 0.01", "DT = 1.0"))
    command = ["run", str(scene), "--render", str(tmp_path / "a.gif"), *args]
    if status == 2:  # a malformed command line: argparse's exit
        with pytest.raises(SystemExit) as exited:
            main(command)
        assert exited.value.code == 2
    else:
        assert main(command) == status
    err = capsys.readouterr().err
    assert needle in err and "simulated" not in err
    with pytest.raises(ValueError, match="more than 1,000,000"):
        mbvi.render.frames.animation_indices(np.linspace(0.0, 2.0, 3), 30.0, 1e-12)


def test_two_outputs_on_one_path_are_refused(tmp_path: Path, capsys) -> None:
    """``--plot same.png --render same.png`` wrote the plot, then the picture over it, both reported written."""
    scene = _write(tmp_path, PENDULUM)
    same = str(tmp_path / "same.png")
    assert main(["run", str(scene), "--plot", same, "--render", same]) == 1
    assert "--render and --plot name the same file" in _error_line(capsys)


def test_a_logged_warning_is_one_line_on_the_command_line(tmp_path: Path, capsys) -> None:
    """A controller numba cannot compile is logged; the command line printed the bare message, not a warning."""
    scene = _write(tmp_path, PENDULUM.replace(
        'scene.add(mbvi.Rod("world", "bob"))',
        'scene.add(mbvi.Rod("world", "bob"))\n    gains = {"k": 0.1}\n'
        '    scene.add(mbvi.ExternalForce("bob", lambda t: (0.0, 0.0, -gains["k"] * t), name="push"))'))  # fmt: skip
    assert main(["run", str(scene), "--out", str(tmp_path / "x.npz")]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "numba" in ln]
    assert lines and all(ln.startswith("mbvi: warning: ExternalForce 'push'") for ln in lines)


def test_the_energy_error_plot_of_a_damped_run_is_its_balance() -> None:
    """A damped pendulum's energy falls by its damping's work: the 'Energy error' panel drew that fall (0.36) while
    ``mbvi run`` reported a balance error of 1e-4 just above it."""
    import matplotlib

    matplotlib.use("Agg")
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    scene.add(mbvi.Damper("world", "bob", damping=0.5, anchor_a=(1.0, 0.0, 0.0)))
    traj = mbvi.simulate(scene, 3.0, 1e-3)
    assert traj.energy[0] - traj.energy[-1] > 0.5  # the damping took energy: the test is not vacuous
    fig = mbvi.plot.energy_error(traj)
    ax = fig.axes[0]
    drawn = ax.lines[0].get_ydata()
    assert "balance" in ax.get_title() and "W" in ax.get_ylabel()
    assert np.nanmax(drawn) < 1e-3
    compared = mbvi.plot.compare({"verlet": traj}, quantity="energy_error").axes[0]
    assert np.nanmax(compared.lines[0].get_ydata()) < 1e-3 and "E − E₀ − W" in compared.get_ylabel()


def test_plots_of_a_lagrangian_run_name_its_generalized_momentum_and_have_no_angular_one() -> None:
    import matplotlib
    import sympy as sp

    matplotlib.use("Agg")
    th, w = sp.symbols("theta omega")
    lag = mbvi.LagrangianSystem(0.5 * w**2 + 9.81 * sp.cos(th), [th], [w], initial_state=mbvi.State([1.0], [0.0]))
    traj = mbvi.simulate(lag, 1.0, 1e-2)
    ax = mbvi.plot.compare({"a": traj}, quantity="momentum").axes[0]
    assert "∂L/∂v" in ax.get_ylabel() and "kg" not in ax.get_ylabel()
    for call in (lambda: mbvi.plot.compare({"a": traj}, quantity="angular_momentum"),
                 lambda: mbvi.plot.momentum(traj, angular=True)):  # fmt: skip
        with pytest.raises(ValueError, match=r"no angular momentum|not defined for a LagrangianSystem"):
            call()


def test_a_picture_wider_than_supersampling_allows_is_drawn_not_black(tmp_path: Path) -> None:
    """Past 7327 px SSAA needs a framebuffer over 16384 px: an 8000-px picture came out all black, exit status 0."""
    pytest.importorskip("pyvista")
    from PIL import Image

    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    traj = mbvi.simulate(scene, 0.1, 0.01)
    path = tmp_path / "wide.png"
    mbvi.render.snapshot(traj, path, window_size=(8000, 60))
    pixels = np.asarray(Image.open(path))
    assert pixels.shape[:2] == (60, 8000) and pixels.max() > 0 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 2


def test_batch_states_of_the_wrong_size_are_named() -> None:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    s0 = mbvi.assemble(scene).initial_state()
    with pytest.raises(ValueError, match=r"initial state 1 has q of shape \(2,\)"):
        mbvi.simulate_batch(scene, 0.1, 1e-2, [s0, mbvi.State(s0.q[:2], s0.v[:2])])
    with pytest.raises(ValueError, match="Q holds 3 states and V 2"):
        mbvi.simulate_batch(scene, 0.1, 1e-2, (np.tile(s0.q, (3, 1)), np.tile(s0.v, (2, 1))))


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("option", ["--out", "--plot"])
def test_an_output_where_nothing_can_be_written_is_refused_before_the_run(
    option: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    """/proc passes os.access for root (and read-only or root-squashed mounts pass it for anyone): the run was done,
    then lost, with "[Errno 2] No such file or directory" naming no option."""
    scene = _write(tmp_path, PENDULUM)
    suffix = ".npz" if option == "--out" else ".png"
    run_module = importlib.import_module("mbvi.simulate")  # (the module: mbvi.simulate is the function)
    with monkeypatch.context() as patch:
        patch.setattr(run_module, "simulate", lambda *a, **k: pytest.fail("simulated before the output was checked"))
        patch.setattr("mbvi.cli.os.access", lambda *a, **k: True)  # what root is told (any user, on some mounts)
        assert main(["run", str(scene), option, f"/proc/mbvi-run{suffix}"]) == 1
    line = _error_line(capsys)
    assert f"{option} '/proc/mbvi-run{suffix}'" in line and "cannot be written" in line
    assert not list(tmp_path.glob(".mbvi-probe-*"))  # (a writable directory's probe is gone)
    assert main(["run", str(scene), option, str(tmp_path / f"fine{suffix}")]) == 0
    assert (tmp_path / f"fine{suffix}").exists() and not list(tmp_path.glob(".mbvi-probe-*"))


def test_an_empty_integrator_name_is_refused_not_read_as_the_default(tmp_path: Path, capsys) -> None:
    scene = _write(tmp_path, PENDULUM)
    assert main(["run", str(scene), "--integrator", ""]) == 1
    assert "unknown integrator ''" in _error_line(capsys)
