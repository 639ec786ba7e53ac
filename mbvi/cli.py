"""The ``mbvi`` command line.

::

    mbvi run SCENE.py [--integrator NAME] [--dt DT] [--t-end T] [--param key=value ...]
                      [--option key=value ...] [--out RUN.npz] [--render RUN.gif|RUN.mp4|RUN.png|RUN.jpg]
                      [--plot PLOT.png]
                      [--fps FPS] [--speed S] [--size WxH] [--progress | --no-progress]
    mbvi render RUN.npz --out RUN.gif|RUN.mp4|RUN.png|RUN.jpg [--fps FPS] [--speed S] [--frame I] [--size WxH]
    mbvi integrators
    mbvi force-laws
    mbvi compile [--jobs N]          (compile and cache the engine's loops for this machine now)
    mbvi sweep SCENE.py --grid key=v1,v2,... [--grid ...] [--t-end T] [--dt DT] [--integrator NAME]
                        [--save-every N] [--option key=value ...] [--out SWEEP.zarr|SWEEP.nc]
                        [--scheduler processes|threads|synchronous|ADDRESS] [--progress | --no-progress]

A scene file is a Python module with ``build(**params) -> mbvi.Scene``; it is
run as Python code, so only run scene files you trust. It may set ``T_END``,
``DT`` and ``INTEGRATOR`` to change the defaults (10 s, 1e-3 s, ``verlet``).
Errors are reported as one line ``mbvi: error: …`` on stderr with exit status 1
(2 for malformed command lines, as argparse does).
"""

from __future__ import annotations

import argparse
import ast
import logging
import math
import numbers
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mbvi.scenefile import load_scene_module

__all__ = ["CLIError", "load_scene_module", "main", "parse_params"]

PROG = "mbvi"
_VIDEO = (".gif", ".mp4")
_SNAPSHOT = (".png", ".jpg", ".jpeg")  # what mbvi.render.snapshot writes (`mbvi render --out`)
_PLOT = (".png", ".pdf", ".svg")
_DEFAULTS = {"T_END": 10.0, "DT": 1e-3, "INTEGRATOR": "verlet"}


class CLIError(Exception):
    """A user error the command line reports in one line."""


# ---------------------------------------------------------------- helpers
def parse_params(items: Sequence[str], option: str = "--param") -> dict[str, Any]:
    """Parse ``key=value`` strings; values are Python literals, else strings.

    Parameters
    ----------
    items : sequence of str
        E.g. ``["n=5", "stiffness=1e3", "name=chain", "axis=(0, 0, 1)"]``.
    option : str, default: "--param"
        The command-line option the items came from (named in errors).

    Returns
    -------
    dict
        ``{"n": 5, "stiffness": 1000.0, "name": "chain", "axis": (0, 0, 1)}``.

    Raises
    ------
    CLIError
        For an item without ``=`` or with an empty or non-identifier key.
    """
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise CLIError(f"bad {option} {item!r}: expected key=value with a Python identifier as key")
        if key in params:
            raise CLIError(f"{option} {key!r} given twice")
        try:
            params[key] = ast.literal_eval(raw.strip())
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            # inf and nan as Python spells them (max_turn=inf, as the docs' max_turn=math.inf), else the text
            text = raw.strip().lower().replace("numpy.", "").replace("math.", "").replace("np.", "")
            params[key] = float(text) if text.lstrip("+-") in ("inf", "infinity", "nan") else raw
    return params


#: simulate()'s own parameters but save_every: never integrator options (``--option t0=0.5`` started the run late)
_RUN_SETTINGS = frozenset({"scene", "t_end", "dt", "integrator", "t0", "initial_state", "progress"})


def _window_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT such as 640x480, got {text!r}") from None
    if not (0 < w <= 16384 and 0 < h <= 16384):  # (checked before the run, not after it)
        raise argparse.ArgumentTypeError(f"window size must be 1 … 16384 pixels each way, got {text!r}")
    return w, h


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {text!r}")
    return value


def _scene_number(module: Any, name: str, scene: str) -> float:
    """The scene file's ``T_END`` or ``DT`` (or the default), a positive finite number, or a CLIError naming it."""
    value = getattr(module, name, _DEFAULTS[name])
    number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    if not (math.isfinite(number) and number > 0):
        raise CLIError(f"{name} = {value!r} in {scene!r}: expected a positive number of seconds")
    return number


def _check_output(path: str | None, allowed: tuple[str, ...], option: str, directory: tuple[str, ...] = ()) -> None:
    """Check an output path before any work: its suffix, and that it can be written.

    Raises
    ------
    CLIError
        Naming ``option``: an unsupported suffix, a directory, or a parent that
        is not a writable directory (missing parents are created later).
    """
    if path is None:
        return
    out = Path(path)
    if path.endswith(("/", os.sep)) and out.suffix.lower() not in directory:  # (Path drops the slash; open does not)
        raise CLIError(f"{option} {path!r} names a directory (it ends in '/'): give a file name")
    if out.suffix.lower() not in allowed:
        raise CLIError(f"{option} {path!r}: unsupported file type; use {', '.join(allowed)}")
    if out.is_dir() and out.suffix.lower() not in directory:  # (a Zarr store is a directory, rewritten)
        raise CLIError(f"{option} {path!r} is a directory")
    if out.exists() and not out.is_dir() and out.suffix.lower() in directory:
        raise CLIError(f"{option} {path!r} is a file, not a {out.suffix} store (a directory)")
    if out.exists() and not os.access(out, os.W_OK):
        raise CLIError(f"{option} {path!r}: file is not writable")
    parent = out.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise CLIError(f"{option} {path!r}: {str(parent)!r} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CLIError(f"{option} {path!r}: directory {str(parent)!r} is not writable")
    # os.access says yes to root, and on /proc, /sys, read-only or root-squashed mounts: write there for real
    try:
        if out.exists() and not out.is_dir():
            with open(out, "ab"):  # (nothing written: the file is left as it is)
                pass
        else:
            with tempfile.NamedTemporaryFile(dir=parent, prefix=".mbvi-probe-"):
                pass
    except OSError as exc:
        where = str(out) if out.exists() else f"directory {str(parent)!r}"
        raise CLIError(f"{option} {path!r}: {where} cannot be written ({exc.strerror or exc})") from None


def _render(traj: Any, path: str, args: argparse.Namespace, progress: bool) -> None:
    from mbvi import render

    if Path(path).suffix.lower() in _SNAPSHOT:
        render.snapshot(traj, path, frame=args.frame, window_size=args.size, trail=args.trail)
    else:
        render.animate(
            traj, path, fps=args.fps, speed=args.speed, window_size=args.size, progress=progress, trail=args.trail
        )


def _integrator(args: argparse.Namespace, module: Any) -> str:
    """The integrator a run or sweep of a scene file uses: ``--integrator`` as given (an empty name is an unknown
    one, not the default), else the file's ``INTEGRATOR``, else the default."""
    if args.integrator is not None:
        return args.integrator
    return str(getattr(module, "INTEGRATOR", _DEFAULTS["INTEGRATOR"]))


def _energy_drift(traj: Any) -> float:
    """max |E − E₀| over the run's energy in motion (:func:`mbvi.runs.energy_in_motion`; not over |E₀|, which
    depends on where the potential is zero)."""
    from mbvi.runs import energy_in_motion

    e = traj.energy
    return float(abs(e - e[0]).max()) / energy_in_motion(traj.kinetic, traj.potential, traj.info)


def _energy_report(scene: Any, traj: Any) -> str:
    """The run's energy figure: its error where the energy is conserved; where forces do work (damping, drag,
    loads), the error of the balance E − E₀ − W when the run measured W, else the change, said to be one."""
    from mbvi.assembly import assemble
    from mbvi.lagrangian import LagrangianSystem

    forced = scene.has_forces if isinstance(scene, LagrangianSystem) else assemble(scene).has_forces
    if not forced:
        return f"max relative energy error {_energy_drift(traj):.3e}"
    balance = traj.info.get("energy_error")
    if balance is not None:
        return f"max energy balance error |E − E₀ − W| {balance:.3e} of the energy in motion (W: the forces' work)"
    return f"max relative energy change {_energy_drift(traj):.3e} (forces do work on it: not an error)"


def _save(traj: Any, path: str) -> None:
    """Save a trajectory, creating the parent directory."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    traj.save(path)


def _say(text: str) -> None:
    print(text, flush=True)


# ---------------------------------------------------------------- commands
def _cmd_run(args: argparse.Namespace) -> int:
    from mbvi.errors import SolverError
    from mbvi.lagrangian import LagrangianSystem
    from mbvi.scene import Scene
    from mbvi.simulate import simulate

    _check_output(args.render, _VIDEO + _SNAPSHOT, "--render")
    _check_output(args.out, (".npz",), "--out")
    _check_output(args.plot, _PLOT, "--plot")
    given = [(opt, Path(p).resolve()) for opt, p in (("--out", args.out), ("--render", args.render),
                                                     ("--plot", args.plot)) if p is not None]  # fmt: skip
    for i, (opt, path) in enumerate(given):
        for other, path2 in given[i + 1 :]:
            if path == path2:  # the second would overwrite the first, both reported as written
                raise CLIError(f"{opt} and {other} name the same file {str(path)!r}")
    params = parse_params(args.param or [])
    options = parse_params(args.option or [], "--option")
    save_every = options.pop("save_every", 1)
    if isinstance(save_every, bool) or not isinstance(save_every, int) or save_every < 1:
        raise CLIError(f"--option save_every={save_every!r}: expected a positive integer")
    own = sorted(set(options) & _RUN_SETTINGS)  # simulate's own keywords took them: t0=0.5 moved the start
    if own:
        raise CLIError(f"--option {own[0]}: not an integrator option but a setting of the run itself "
                       "(the command line sets it: --t-end, --dt, --integrator, --progress)")  # fmt: skip
    module = load_scene_module(args.scene)
    t_end = args.t_end if args.t_end is not None else _scene_number(module, "T_END", args.scene)
    dt = args.dt if args.dt is not None else _scene_number(module, "DT", args.scene)
    integrator = _integrator(args, module)
    _check_parameters(module.build, params, args.scene, "parameters")
    try:
        scene = module.build(**params)
    except (CLIError, FileNotFoundError):
        raise
    except ValueError as exc:  # mbvi's own checks name the element; the scene's own code's may not
        raise CLIError(f"build() of {args.scene!r}: {str(exc) or type(exc).__name__}") from exc
    except (Exception, SystemExit) as exc:  # a failure inside the scene's code (not a rejection of its parameters)
        raise CLIError(f"build() of {args.scene!r} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(scene, (Scene, LagrangianSystem)):  # a LagrangianSystem starts at its initial_state
        raise CLIError(
            f"build() of {args.scene!r} returned {type(scene).__name__}, not an mbvi.Scene or mbvi.LagrangianSystem"
        )
    if args.render and Path(args.render).suffix.lower() in _VIDEO:  # the frames it asks for, before the run
        from mbvi.render.frames import check_fps, frame_count

        try:
            check_fps(args.fps)
            frame_count(t_end, args.fps, args.speed)
        except ValueError as exc:
            raise CLIError(f"--render {args.render}: --fps and --speed: {exc}") from None
    if args.render and isinstance(scene, LagrangianSystem) and Path(args.render).suffix.lower() in _VIDEO:
        raise CLIError(  # said before the run, not after it
            f"--render {args.render}: {args.scene!r} builds a LagrangianSystem, which has no bodies to animate; "
            "render it to a .png or .jpg (the picture of its state space)"
        )
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    start = time.perf_counter()
    try:
        traj = simulate(
            scene, t_end=t_end, dt=dt, integrator=integrator, progress=progress, save_every=save_every, **options
        )
    except SolverError as err:
        if args.out and err.trajectory is not None:
            _save(err.trajectory, args.out)
            raise CLIError(f"{err} (partial trajectory saved to {args.out})") from err
        raise
    except KeyboardInterrupt as stopped:  # Ctrl-C: what was run is kept, as a failed run's is
        kept = getattr(stopped, "trajectory", None)
        if args.out and kept is not None:
            _save(kept, args.out)
            said = f"at t = {kept.t[-1]:.6g} s; the states run so far are saved to {args.out}"
            raise KeyboardInterrupt(said) from None
        raise
    elapsed = time.perf_counter() - start
    from mbvi.runs import step_count

    steps = step_count(t_end, dt, float(traj.t[0]), save_every)
    last = traj.info.get("last_dt")
    shape = f"{steps} steps of {dt:g} s" if last is None else (
        f"1 step of {last:g} s" if steps == 1 else f"{steps} steps of {dt:g} s (the last of {last:g} s)")  # fmt: skip
    _say(f"simulated {shape} to t = {traj.t[-1]:g} s with {integrator} in {elapsed:.2f} s")
    _say(f"{_energy_report(scene, traj)}, max constraint error {float(traj.constraint_error.max()):.3e}")
    if args.out:
        _save(traj, args.out)
        _say(f"wrote {args.out}")
    if args.plot:
        from mbvi import plot

        plot.summary(traj, args.plot)
        _say(f"wrote {args.plot}")
    if args.render:
        if isinstance(scene, LagrangianSystem) and Path(args.render).suffix.lower() == ".png":  # its state space
            from mbvi.lagrangian.picture import picture

            picture(traj, args.render, window_size=args.size)
        elif isinstance(scene, LagrangianSystem):  # .jpg: the same picture, through snapshot
            import mbvi.render

            mbvi.render.snapshot(traj, args.render, window_size=args.size)
        else:
            _render(traj, args.render, args, progress)
        _say(f"wrote {args.render}")
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    from mbvi.trajectory import Trajectory

    _check_output(args.out, _VIDEO + _SNAPSHOT, "--out")
    if args.frame is not None and Path(args.out).suffix.lower() in _VIDEO:  # (it was ignored, without a word)
        raise CLIError(f"--frame picks the frame of a still (.png or .jpg); a video ({Path(args.out).suffix}) "
                       "draws every frame")  # fmt: skip
    if args.frame is None:
        args.frame = -1
    if not Path(args.run).is_file():
        raise FileNotFoundError(f"run file not found: {args.run!r}")
    traj = Trajectory.load(args.run)
    geo = traj.geometry
    if Path(args.out).suffix.lower() in _VIDEO and traj.coordinate_names and not (geo.bodies or geo.links or geo.beams):
        # a LagrangianSystem run: as `mbvi run --render`, a picture (.png/.jpg: its phase portrait), no video
        raise CLIError(
            f"{args.run!r} is a LagrangianSystem run: it has no bodies to animate; render it to a .png or .jpg "
            f"(its phase portrait), not {Path(args.out).suffix!r}"
        )
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    _render(traj, args.out, args, progress)
    _say(f"wrote {args.out}")
    return 0


def _cmd_integrators(args: argparse.Namespace) -> int:
    from mbvi.plugins import get_integrator, integrators

    names = list(integrators())
    width = max((len(n) for n in names), default=0)
    for name in names:
        cls = get_integrator(name)
        kind = "symplectic" if cls.symplectic else "non-symplectic"
        _say(f"{name:<{width}}  order {cls.order}  {kind}")
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    from mbvi.precompile import GROUPS, cores, precompile

    if args.jobs is not None and args.jobs < 1:
        raise CLIError(f"--jobs {args.jobs}: expected a positive integer")
    jobs = args.jobs or cores()
    procs = min(jobs, len(GROUPS))
    _say(f"compiling the engine's loops for this machine in {procs} process(es) (cached until the engine changes)")
    t = time.perf_counter()
    try:
        precompile(jobs, say=_say)
    except RuntimeError as exc:
        raise CLIError(str(exc)) from None
    _say(f"done in {time.perf_counter() - t:.1f} s")
    return 0


def _cmd_force_laws(args: argparse.Namespace) -> int:
    from mbvi.plugins import force_laws

    for name in force_laws():
        _say(name)
    return 0


def _parse_grid(items: Sequence[str]) -> dict[str, list[Any]]:
    """``["length=0.5,1,2", "name=a,b"]`` → ``{"length": [0.5, 1, 2], "name": ["a", "b"]}`` (literals, else strings)."""
    grid: dict[str, list[Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier() or not raw.strip():
            raise CLIError(f"bad --grid {item!r}: expected name=value1,value2,... with a Python identifier as name")
        if key in grid:
            raise CLIError(f"--grid {key!r} given twice")
        try:
            values = list(ast.literal_eval(f"[{raw}]"))  # numbers, strings, tuples: (0, 0, 1),(1, 0, 0)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            if any(c in raw for c in "([{"):  # bare strings beside tuples: a split on every comma cut the tuples up
                raise CLIError(f"--grid {key}={raw.strip()}: not a list of values; quote the strings beside "
                               f"tuples or lists, e.g. {key}='a',(1, 2)") from None  # fmt: skip
            values = [parse_params([f"v={v.strip()}"], "--grid")["v"] for v in raw.split(",")]  # bare strings
        grid[key] = values
    return grid


def _is_scheduler_address(text: str) -> bool:
    """Whether ``text`` looks like a Dask scheduler address: PROTOCOL://… (tcp://host:8786, tls://…) or HOST:PORT."""
    import re

    return re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*://\S+|[^\s:/\[\]]+:\d+|\[[0-9A-Fa-f:.]+\]:\d+", text) is not None


def _cmd_sweep(args: argparse.Namespace) -> int:
    from mbvi.sweep import SCHEDULERS, check_zarr_target, netcdf_engine, sweep, write

    _check_output(args.out, (".zarr", ".nc"), "--out", directory=(".zarr",))  # before the sweep, not after it
    if args.out is not None and Path(args.out).suffix.lower() == ".zarr":
        try:
            check_zarr_target(args.out)
        except ValueError as exc:
            raise CLIError(f"--out: {exc}") from None
    if args.out is not None and Path(args.out).suffix.lower() == ".nc":
        try:
            netcdf_engine()
        except ImportError as exc:
            raise CLIError(f"--out: {exc}") from None
    if not args.grid:
        raise CLIError("give at least one --grid name=value1,value2,...")
    grid = _parse_grid(args.grid)
    options = parse_params(args.option or [], "--option")
    own = sorted(set(options) & (_RUN_SETTINGS | {"save_every"}))  # (sweep() got multiple values for save_every)
    if own:
        flag = "--save-every" if own[0] == "save_every" else "--t-end, --dt, --integrator, --progress"
        raise CLIError(f"--option {own[0]}: not an integrator option but a setting of the sweep itself ({flag})")
    module = load_scene_module(args.scene)
    _check_parameters(getattr(module, "build", None), grid, args.scene, "grid parameters")
    t_end = args.t_end if args.t_end is not None else _scene_number(module, "T_END", args.scene)
    dt = args.dt if args.dt is not None else _scene_number(module, "DT", args.scene)
    integrator = _integrator(args, module)
    progress = sys.stderr.isatty() if args.progress is None else args.progress
    local = args.scheduler in (None, *SCHEDULERS)
    if not local and not _is_scheduler_address(args.scheduler):
        raise CLIError(
            f"--scheduler {args.scheduler!r}: expected processes, threads, synchronous or a Dask scheduler "
            "address (tcp://HOST:PORT)"
        )
    run = {"t_end": t_end, "dt": dt, "integrator": integrator, "save_every": args.save_every, "progress": progress}
    start = time.perf_counter()
    if local:
        ds = sweep(args.scene, grid, scheduler=args.scheduler, **run, **options)
    else:
        from distributed import Client

        with Client(args.scheduler) as client:
            ds = sweep(args.scene, grid, client=client, **run, **options)
    elapsed = time.perf_counter() - start
    failed = [str(e) for e in ds.error.values.ravel() if e]
    warned = sum(1 for w in ds.warning.values.ravel() if w)
    shape = " × ".join(f"{name} ({len(values)})" for name, values in grid.items())
    _say(
        f"swept {ds.error.size} members over {shape} to t = {t_end:g} s with {integrator} in {elapsed:.2f} s "
        f"({len(failed)} failed, {warned} warned)"
    )
    if failed:
        _say(f"first failure: {failed[0]}")
    if args.out:
        write(ds, args.out)
        _say(f"wrote {args.out}")
    else:
        _say(str(ds))
    return 0


# ---------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``mbvi: error: …``), exit status 2."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        self.exit(2, f"{PROG}: error: {message}\n")


def _add_render_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fps", type=_positive_float, default=30.0, help="video frames per second (default: 30)")
    p.add_argument("--speed", type=_positive_float, default=1.0, help="playback speed vs real time (default: 1)")
    p.add_argument("--size", type=_window_size, default=(640, 480), metavar="WxH", help="image size (default: 640x480)")
    p.add_argument("--trail", action="store_true", help="draw the motion trail of every particle and body")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show progress bars (default: when stderr is a terminal)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``mbvi`` command."""
    from mbvi._version import __version__

    parser = _Parser(prog=PROG, description="Multibody mechanics with variational integrators.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    run = sub.add_parser("run", help="simulate a scene file", description="Simulate a scene file.")
    run.add_argument("scene", metavar="SCENE.py", help="Python file defining build(**params) -> mbvi.Scene")
    run.add_argument("--integrator", metavar="NAME", help="integrator name (default: scene's INTEGRATOR or verlet)")
    run.add_argument("--dt", type=_positive_float, help="time step, s (default: scene's DT or 1e-3)")
    run.add_argument("--t-end", type=_positive_float, help="end time, s (default: scene's T_END or 10)")
    run.add_argument(
        "--param",
        action="append",
        metavar="KEY=VALUE",
        help="keyword for build(); VALUE is a Python literal or a string (repeatable)",
    )
    run.add_argument(
        "--option",
        action="append",
        metavar="KEY=VALUE",
        help="integrator option (alpha, rtol, tol, save_every, a plugin's own), read like --param (repeatable)",
    )
    run.add_argument("--out", metavar="RUN.npz", help="save the trajectory")
    run.add_argument("--render", metavar="FILE", help="render to .gif, .mp4, or .png or .jpg (last frame)")
    run.add_argument("--plot", metavar="FILE.png", help="write an energy/constraint summary plot (.png, .pdf, .svg)")
    _add_render_options(run)
    run.set_defaults(func=_cmd_run, frame=-1)

    rend = sub.add_parser("render", help="render a saved run", description="Render a saved trajectory.")
    rend.add_argument("run", metavar="RUN.npz", help="trajectory saved by `mbvi run --out`")
    rend.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help=".gif, .mp4, .png or .jpg (a LagrangianSystem run: .png or .jpg, its phase portrait)",
    )
    rend.add_argument("--frame", type=int, default=None, help="frame drawn into a .png or .jpg (default: last)")
    _add_render_options(rend)
    rend.set_defaults(func=_cmd_render)

    ints = sub.add_parser("integrators", help="list registered integrators with their order")
    ints.set_defaults(func=_cmd_integrators)
    laws = sub.add_parser("force-laws", help="list registered force laws")
    laws.set_defaults(func=_cmd_force_laws)
    comp = sub.add_parser(
        "compile",
        help="compile the engine's loops for this machine now (make setup does)",
        description="Compile and cache the engine's loops for this machine, so that no first run waits.",
    )
    comp.add_argument("--jobs", type=int, metavar="N", help="parallel processes (default: the cores it may use)")
    comp.set_defaults(func=_cmd_compile)

    swp = sub.add_parser(
        "sweep", help="simulate a scene file over a grid of parameters", description="Run a parameter sweep on Dask."
    )
    swp.add_argument("scene", metavar="SCENE.py", help="Python file defining build(**params) -> mbvi.Scene")
    swp.add_argument(
        "--grid",
        action="append",
        metavar="NAME=V1,V2,...",
        help="values of a keyword of build(), read as Python literals; one dimension per --grid (repeatable)",
    )
    swp.add_argument("--integrator", metavar="NAME", help="integrator name (default: scene's INTEGRATOR or verlet)")
    swp.add_argument("--dt", type=_positive_float, help="time step, s (default: scene's DT or 1e-3)")
    swp.add_argument("--t-end", type=_positive_float, help="end time, s (default: scene's T_END or 10)")
    swp.add_argument("--save-every", type=int, default=1, metavar="N", help="keep every N-th state (default: 1)")
    swp.add_argument("--option", action="append", metavar="KEY=VALUE", help="integrator option (repeatable)")
    swp.add_argument("--out", metavar="SWEEP.zarr|SWEEP.nc", help="write the dataset (Zarr store or netCDF file)")
    swp.add_argument(
        "--scheduler",
        metavar="WHERE",
        help="processes, threads or synchronous on this machine (default: a pool of processes unless the "
        "sweep takes only seconds), or a Dask scheduler address",
    )
    swp.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar over members (default: when stderr is a terminal)",
    )
    swp.set_defaults(func=_cmd_sweep)
    return parser


def _check_parameters(build: Any, params: Any, scene: str, what: str) -> None:
    """A CLIError when ``build`` cannot take ``params`` by name (checked on its signature, before it runs: a
    TypeError raised inside it is the scene's own, not a rejection)."""
    import inspect

    if build is None or not params:
        return
    try:
        inspect.signature(build).bind(**dict.fromkeys(params))
    except TypeError as exc:
        raise CLIError(f"build() of {scene!r} rejected the {what} {sorted(params)}: {exc}") from None
    except ValueError:  # no signature to read (a builtin): the call says
        return


def _one_line(exc: BaseException) -> str:
    """The exception's message on one line, with its notes (a sweep member's parameters)."""
    text = " ".join(str(exc).split())
    notes = [" ".join(str(n).split()) for n in getattr(exc, "__notes__", ())]
    return "; ".join([text or type(exc).__name__, *notes])


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success, 1 on an error (reported in one line on stderr), 2 for
        a malformed command line, 130 when interrupted.
    """
    import warnings

    parser = build_parser()
    args = parser.parse_args(argv)
    from mbvi.errors import SolverError

    show = warnings.showwarning
    warnings.showwarning = _show_warning
    # mbvi's logged warnings (a function numba cannot compile, called as Python) as one line each, like warnings
    logger = logging.getLogger("mbvi")
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_OneLine(f"{PROG}: warning: %(message)s"))
    logger.addHandler(handler)
    try:
        return int(args.func(args))
    except (CLIError, ValueError, FileNotFoundError, SolverError) as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
    except KeyboardInterrupt as stopped:
        said = str(stopped) if str(stopped).startswith("at t = ") else ""  # (the run's own, not a bare Ctrl-C's)
        print(f"{PROG}: interrupted" + (f" {said}" if said else ""), file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`mbvi integrators | head -3`): stop quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's final flush does not fail again
        return 141  # 128 + SIGPIPE
    except Exception as exc:  # never a traceback on the command line
        print(f"{PROG}: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
    finally:
        warnings.showwarning = show
        logger.removeHandler(handler)
    return 1


class _OneLine(logging.Formatter):
    """A log record on one line (:func:`_one_line`)."""

    def format(self, record: logging.LogRecord) -> str:
        return _one_line(super().format(record))


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning on the command line: one line, ``mbvi: warning: …``, without the source line that raised it."""
    print(f"{PROG}: warning: {_one_line(message)}", file=sys.stderr if file is None else file)


if __name__ == "__main__":
    sys.exit(main())
