"""Parameter sweeps on Dask, with the results as one labelled :class:`xarray.Dataset`.

:func:`sweep` runs ``build(**params)`` for every point of a grid of parameters
(the Cartesian product of ``grid``'s value lists), simulates each scene — a
*member* of the sweep — with :func:`mbvi.simulate`, and gathers the
trajectories into one dataset labelled by the grid::

    ds = mbvi.sweep("scenes/pendulum.py", {"length": [0.5, 1, 2], "theta0": [0.1, 1.0]},
                    t_end=10.0, dt=1e-3)
    ds.energy.sel(length=1, theta0=0.1)           # (time,)
    ds.position.sel(body="bob", xyz="x")          # (length, theta0, time)
    ds.to_zarr("sweep.zarr", zarr_format=2)       # results larger than memory: xarray's own writers

Members run on Dask: on the local machine by default (a temporary pool of
worker processes, one per core), on any cluster when ``client`` is a
:class:`dask.distributed.Client`. Each member's numbers come from its own
:func:`mbvi.simulate` call, so they do not depend on where it ran or which
members shared a task: the same grid gives bit-identical numbers locally and on
a cluster.

Dask and xarray are optional (``pip install "mbvi[sweep]"``) and imported only
when :func:`sweep` runs, so ``import mbvi`` stays light.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mbvi import notices

__all__ = ["check_zarr_target", "sweep", "write"]

log = logging.getLogger(__name__)

#: Dask's local schedulers that ``scheduler=`` may name
SCHEDULERS = ("processes", "threads", "synchronous")
#: the names of the dataset's own dimensions and variables; a grid may not use them (a coordinate named like a
#: variable failed only after every member had run, in xarray)
RESERVED = ("time", "body", "xyz", "coordinate", "position", "velocity", "q", "v", "energy", "kinetic", "potential",
            "constraint_error", "error", "warning", "energy_error", "wall_time")  # fmt: skip
#: members per task never exceed this (keeps the progress bar moving and the load balanced)
MAX_CHUNK = 256
#: tasks per worker thread the members are split into (small enough overhead, good balance)
TASKS_PER_WORKER = 4
#: most members a local sweep with the default scheduler runs first in this process, to time them
PROBE = 2
#: s: a local sweep whose other members would take less than this here (estimated by ``_probe``) runs
#: them in this process; starting a pool of worker processes (each imports mbvi and loads the compiled
#: kernels) costs seconds, which a compiled sweep of a few seconds does not win back
POOL_WORTH = 10.0

_INSTALL = 'mbvi.sweep needs Dask and xarray; install them with: pip install "mbvi[sweep]"'


# ---------------------------------------------------------------- what a worker returns
@dataclass
class MemberResult:
    """One member's run, as shipped back from a worker (arrays only, no scene objects).

    Attributes
    ----------
    index : int
        Flat (C-order) index of the member in the grid.
    error : str
        ``""`` when the member ran to the end, else ``"ExceptionType: message"``.
    wall_time : float
        Seconds spent in ``build`` and :func:`mbvi.simulate`, s.
    t : ndarray, shape (n,)
        Saved times, s (shorter than the others' after a failure; empty when nothing ran).
    energy, kinetic, potential, constraint_error : ndarray, shape (n,)
        J, J, J, and max |g(q)| (m for rods and joints).
    bodies : list of str
        Body names, in the scene's order.
    position, velocity : ndarray, shape (n, len(bodies), 3)
        Body origins (a rigid body's centre of mass), m, and their velocities, m/s.
    coordinates : list of str
        A :class:`mbvi.LagrangianSystem`'s coordinate names (empty for a scene).
    q, v : ndarray, shape (n, len(coordinates))
        Its coordinates and velocities (in their own units).
    warning : str
        What :func:`mbvi.simulate` warned about (``""``: nothing), the messages joined by ``" | "``.
    energy_error : float
        ``traj.info["energy_error"]`` (NaN when the run did not judge it).
    """

    index: int
    error: str
    wall_time: float
    t: np.ndarray
    energy: np.ndarray
    kinetic: np.ndarray
    potential: np.ndarray
    constraint_error: np.ndarray
    bodies: list[str]
    position: np.ndarray
    velocity: np.ndarray
    coordinates: list[str] = field(default_factory=list)
    q: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    v: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    warning: str = ""
    energy_error: float = math.nan

    @classmethod
    def from_trajectory(
        cls, index: int, traj: Any, error: str, wall_time: float, coordinates: Sequence[str] = ()
    ) -> MemberResult:
        """Extract the saved arrays of a :class:`mbvi.Trajectory` (``None``: nothing ran); ``coordinates``: a
        :class:`mbvi.LagrangianSystem`'s names, whose q and v are then kept too."""
        if traj is None:
            empty = np.empty(0)
            return cls(
                index, error, wall_time, empty, empty, empty, empty, empty, [], np.empty((0, 0, 3)), np.empty((0, 0, 3))
            )
        n = len(traj.t)
        bodies = list(traj.body_names)
        if bodies:
            position = np.stack([traj.position(b) for b in bodies], axis=1)
            velocity = np.stack([traj.velocity(b) for b in bodies], axis=1)
        else:
            position = velocity = np.empty((n, 0, 3))
        coordinates = list(coordinates)
        q = np.asarray(traj.q, dtype=float) if coordinates else np.empty((n, 0))
        v = np.asarray(traj.v, dtype=float) if coordinates else np.empty((n, 0))
        return cls(
            index,
            error,
            wall_time,
            np.asarray(traj.t, dtype=float),
            np.asarray(traj.energy, dtype=float),
            np.asarray(traj.kinetic, dtype=float),
            np.asarray(traj.potential, dtype=float),
            np.asarray(traj.constraint_error, dtype=float),
            bodies,
            np.asarray(position, dtype=float),
            np.asarray(velocity, dtype=float),
            coordinates,
            q,
            v,
        )


# ---------------------------------------------------------------- the worker side
@dataclass(frozen=True)
class SceneFile:
    """A scene file shipped to workers: its absolute path and its source text.

    A worker that sees the same file at the same path (the local machine, a
    shared file system) imports it with :func:`mbvi.scenefile.load_scene_module`;
    one that does not (a cloud worker) runs the shipped source instead.
    """

    path: str
    source: str

    @property
    def key(self) -> str:
        return self.path + ":" + hashlib.sha1(self.source.encode()).hexdigest()


_BUILDS: dict[str, Callable[..., Any]] = {}
_BUILDS_LOCK = threading.Lock()
_BUILDING = threading.Lock()  # held by a member from its build to its assembly (threads of one process)


def _build_function(build: SceneFile | Callable[..., Any]) -> Callable[..., Any]:
    """The ``build`` callable of a shipped scene file (imported once per process) or the callable itself."""
    if not isinstance(build, SceneFile):
        return build
    with _BUILDS_LOCK:
        fn = _BUILDS.get(build.key)
        if fn is None:
            fn = _BUILDS[build.key] = _import_scene(build)
    return fn


def _import_scene(spec: SceneFile) -> Callable[..., Any]:
    from mbvi.scenefile import load_scene_module

    file = Path(spec.path)
    if file.is_file() and file.read_text(encoding="utf-8") == spec.source:
        return load_scene_module(file).build
    name = "_mbvi_scene_" + hashlib.sha1(spec.key.encode()).hexdigest()[:16]
    module = types.ModuleType(name)
    module.__file__ = spec.path
    sys.modules[name] = module
    exec(compile(spec.source, spec.path, "exec"), module.__dict__)
    return module.build


def run_members(
    build: SceneFile | Callable[..., Any], members: Sequence[tuple[int, dict[str, Any]]], settings: dict[str, Any]
) -> list[MemberResult]:
    """Run some members of a sweep one after another (one Dask task).

    Parameters
    ----------
    build : SceneFile or callable
        What makes a scene from the parameters.
    members : sequence of (int, dict)
        Flat grid index and ``build`` keywords of each member.
    settings : dict
        ``t_end`` (s), ``dt`` (s), ``integrator``, ``save_every`` and ``options`` for :func:`mbvi.simulate`;
        ``plugins``, those registered at run time in the calling process (registered here when missing).

    Returns
    -------
    list of MemberResult
        In the order of ``members``. An invalid scene (``ValueError``, or an
        ``ArithmeticError`` of its parameters, a division by zero) or a
        failed solve (:class:`mbvi.SolverError`, with its partial trajectory)
        is recorded, not raised; any other exception propagates with the
        member's parameters added as a note.
    """
    from mbvi.assembly import assemble
    from mbvi.errors import SolverError
    from mbvi.plugins import register_shipped
    from mbvi.scene import Scene
    from mbvi.simulate import simulate

    register_shipped(settings.get("plugins", []))
    fn = _build_function(build)
    results = []
    for index, params in members:
        start = time.perf_counter()
        traj, error, names = None, "", []
        with notices.kept(quiet=True) as notes:  # (a worker's warnings reach nobody: the dataset keeps them,
            # and the sweep gives one for all)
            try:
                with _BUILDING:  # (a build may set its parameters on one scene it returns for every member:
                    # assembled before another thread's member changes it)
                    scene = _built(fn, params)
                    names = list(getattr(scene, "coordinate_names", []))
                    if isinstance(scene, Scene):
                        scene = assemble(scene)
                traj = simulate(
                    scene,
                    t_end=settings["t_end"],
                    dt=settings["dt"],
                    integrator=settings["integrator"],
                    save_every=settings["save_every"],
                    **settings["options"],
                )
            except SolverError as err:
                traj, error = err.trajectory, _message(err)
            except (ValueError, ArithmeticError) as err:
                error = _message(err)
            except Exception as err:
                err.add_note(f"in sweep member {index} with parameters {params!r}")
                raise
        result = MemberResult.from_trajectory(index, traj, error, time.perf_counter() - start, names)
        result.warning = " | ".join(" ".join(n.split()) for n in notes)
        if traj is not None and not error:
            result.energy_error = float(traj.info.get("energy_error", math.nan))
        results.append(result)
    return results


def _built(fn: Callable[..., Any], params: dict[str, Any]) -> Any:
    """``fn(**params)``, which must be an :class:`mbvi.Scene` or :class:`mbvi.LagrangianSystem` (else ValueError)."""
    from mbvi.lagrangian import LagrangianSystem
    from mbvi.scene import Scene

    scene = fn(**params)
    if not isinstance(scene, (Scene, LagrangianSystem)):
        call = ", ".join(f"{k}={v!r}" for k, v in params.items())
        got = "None" if scene is None else f"a {type(scene).__name__}"
        raise ValueError(f"build({call}) returned {got}, not an mbvi.Scene or mbvi.LagrangianSystem")
    return scene


def _check_options(spec: SceneFile | Callable[..., Any], members: list, settings: dict[str, Any], nsave: int) -> None:
    """Construct the integrator once, on the first member's system that builds: a bad option fails the sweep here.

    An unknown option, or a value the integrator's constructor rejects, is the same for every member, so it
    is a ``ValueError`` before anything runs rather than an error recorded for each member. Members whose
    ``build`` fails are passed over (their runs record, or raise, that as usual): with the first member's
    build failing, an unknown option was recorded for every other member and the sweep returned. ``nsave``: the
    states each member saves, for the dataset's size (a ValueError when it would not fit in memory).
    """
    from mbvi.assembly import assemble
    from mbvi.engine.runner import check_memory
    from mbvi.lagrangian import LagrangianSystem
    from mbvi.lagrangian.run import resolve
    from mbvi.simulate import check_capabilities, resolve_integrator

    fn = _build_function(spec)
    try:
        for _, params in members:
            try:  # what the member's own run reports: a failing build, an invalid scene, an integrator that cannot
                scene = _built(fn, params)  # run this member's scene
                system = scene if isinstance(scene, LagrangianSystem) else assemble(scene)
            except Exception:
                continue
            if isinstance(system, LagrangianSystem):  # an integrator that runs no LagrangianSystem runs no member
                cls = resolve(settings["integrator"])
            else:
                cls = resolve_integrator(settings["integrator"])
                try:
                    check_capabilities(cls, system)
                except ValueError:
                    continue
            break
        else:
            return
        cls(system, settings["dt"], **settings["options"])
    except (ValueError, TypeError) as err:
        raise ValueError(f"sweep: {' '.join(str(err).split())}") from err
    # the dataset gathered in this process: positions and velocities of each body (a LagrangianSystem's q and v),
    # four scalars, every member and saved state (50 members of 2e7 states ran towards 80 GB on a 24 GB machine)
    width = 2 * system.nq + 4 if isinstance(system, LagrangianSystem) else 6 * len(system.layout.bodies) + 4
    check_memory((len(members), nsave, width), "the sweep's dataset", "raise save_every, run shorter or split the grid")


def _message(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


# ---------------------------------------------------------------- the public function
def sweep(
    build: Callable[..., Any] | str | os.PathLike,
    grid: Mapping[str, Sequence[Any]],
    t_end: float,
    dt: float,
    integrator: Any = "verlet",
    save_every: int = 1,
    client: Any = None,
    *,
    progress: bool = False,
    scheduler: str | None = None,
    timing: bool = False,
    **options: Any,
) -> Any:
    """Simulate a scene over a grid of parameters, on Dask; results as an :class:`xarray.Dataset`.

    Every point of the Cartesian product of ``grid`` is a *member*: the scene
    ``build(**params)`` simulated by :func:`mbvi.simulate` from 0 to ``t_end``.

    Parameters
    ----------
    build : callable or str or path
        ``build(**params) -> mbvi.Scene``, or the path of a scene file (a
        module defining ``build``, as for ``mbvi run``). A path is the most
        portable choice: it runs in worker processes and on remote clusters
        (the file's source is shipped along).
    grid : dict of str to sequence
        Parameter name → values; keywords of ``build``. The dataset's
        dimensions follow the dict's order. Values that do not form a 1-D
        array of numbers, booleans or strings (tuples, objects) are labelled
        by their ``repr`` in the coordinate; ``build`` still receives the
        values themselves.
    t_end : float
        End time of every member, s.
    dt : float
        Step size, s.
    integrator : str or Integrator subclass, default: "verlet"
        A name from :func:`mbvi.integrators` or a class.
    save_every : int, default: 1
        Keep every n-th state (the last one is always kept).
    client : dask.distributed.Client, optional
        Run the members on this client's cluster (a ``LocalCluster``, a
        ``dask-jobqueue`` cluster, a scheduler address, a cloud deployment).
        Default: the local machine, one worker process per core.
    progress : bool, default: False
        Show a progress bar over members (tqdm).
    scheduler : {"processes", "threads", "synchronous"}, optional
        Local runs only: Dask's local scheduler. Default: the first member
        (or two) runs in this process, and the rest go to a temporary pool of
        ``os.cpu_count()`` worker processes (``"processes"``) when they would
        take more than ``POOL_WORTH`` (10 s) here, else run here too
        (``"synchronous"``: a pool's start-up costs seconds); ``"threads"``
        when ``build`` (or an option) cannot be pickled (cloudpickle
        serializes scene-file paths, module functions, lambdas and closures;
        a callable holding a lock or an open file it cannot). ``"synchronous"``
        runs in this process, for debugging.
    timing : bool, default: False
        Add ``wall_time``, the seconds each member took (not reproducible, so off by default).
    **options
        Passed to the integrator (e.g. ``alpha`` and ``method`` for ``csm``).

    Returns
    -------
    xarray.Dataset
        Dimensions: one per grid name (a coordinate holding its values), then
        ``time`` (s), ``body`` (body names) and ``xyz`` (``"x"``, ``"y"``,
        ``"z"``). With ``G`` the grid's shape:

        * ``energy``, ``kinetic``, ``potential`` — (*G, time), J;
        * ``constraint_error`` — (*G, time), max |g(q)|;
        * ``position`` — (*G, time, body, xyz), m (a rigid body's centre of mass);
        * ``velocity`` — (*G, time, body, xyz), m/s (these two, and the ``body`` and ``xyz`` axes, only
          when the members have bodies);
        * ``q``, ``v`` — (*G, time, coordinate), only when the members are
          Lagrangian systems (:class:`mbvi.LagrangianSystem`): their coordinates and velocities,
          in their own units, along a ``coordinate`` axis of their names
          (the union over the members, NaN where a member has no such one);
        * ``error`` — (*G), ``""`` where the member ran to ``t_end``, else
          ``"ExceptionType: message"``; its arrays hold the partial
          trajectory up to the failure (a :class:`mbvi.SolverError`'s
          ``err.trajectory``) and NaN after it;
        * ``warning`` — (*G), what the member's :func:`mbvi.simulate` warned
          about (a step too large for an accurate result, a spring wound past
          half a turn, dependent constraints), ``""`` where nothing, the
          messages joined by ``" | "``; a sweep with any also warns once;
        * ``energy_error`` — (*G), the member's ``traj.info["energy_error"]``:
          how far its energy balance strayed, over the energy in motion (NaN
          for a member that failed or whose run did not judge it);
        * ``wall_time`` — (*G), s spent on the member (build and simulate),
          only with ``timing=True`` (it is the one variable that differs
          between two runs of the same grid, so it is left out by default).

        ``attrs`` record the run settings (``t_end``, ``dt``,
        ``integrator``, ``save_every``, ``options`` as JSON, ``build``,
        ``mbvi_version``). Members whose scenes have different bodies share
        one ``body`` axis, the union of all names in order of appearance,
        with NaN where a member has no such body. Strings are fixed-width
        unicode, so ``ds.to_netcdf`` and ``ds.to_zarr(..., zarr_format=2)``
        write the dataset as it is.

    Raises
    ------
    ImportError
        Dask or xarray is not installed.
    ValueError
        A bad grid (empty, a reserved name, an empty value list), bad time
        settings, an unknown integrator (or one that runs none of the
        members, a LagrangianSystem's), an unknown scheduler, an option the
        integrator does not take or rejects (checked by constructing it on
        the first member's system), or a dataset that would not fit in this
        machine's memory — before anything runs.
    FileNotFoundError
        ``build`` is a path that does not exist.

    Notes
    -----
    Members are split into about ``4 × workers`` tasks (at most 256 members
    each) of consecutive grid points, so that the scheduling overhead stays
    small against the members' own cost; each member is still its own
    :func:`mbvi.simulate` run, so its numbers do not depend on the split.
    Local worker processes are started with ``spawn``: a script that calls
    ``sweep`` must guard its top level with ``if __name__ == "__main__":``.
    Starting them costs seconds (each imports mbvi and loads the compiled
    kernels from numba's cache), which is why the default keeps a sweep of
    a few seconds in this process.

    Examples
    --------
    >>> ds = mbvi.sweep("scenes/pendulum.py", {"theta0": [0.1, 0.5, 1.0], "g": [9.81]},
    ...                 t_end=20.0, dt=1e-3)  # doctest: +SKIP
    >>> ds.position.sel(body="bob", xyz="x").plot.line(x="time")  # doctest: +SKIP

    On a cluster, the same call with a client::

        from dask.distributed import Client, LocalCluster
        with LocalCluster(n_workers=4, threads_per_worker=1) as cluster, Client(cluster) as client:
            ds = mbvi.sweep("scenes/pendulum.py", grid, t_end=20.0, dt=1e-3, client=client)
    """
    try:
        import dask  # noqa: F401
        import xarray  # noqa: F401
    except ImportError as exc:
        raise ImportError(_INSTALL) from exc
    from mbvi.integrators.base import Integrator
    from mbvi.plugins import run_time_plugins
    from mbvi.runs import run_numbers
    from mbvi.simulate import resolve_integrator

    if client is None and scheduler not in (None, *SCHEDULERS):
        raise ValueError(f"sweep: scheduler must be one of {', '.join(map(repr, SCHEDULERS))}, got {scheduler!r}")
    progress, timing = Integrator.check_flag("progress", progress), Integrator.check_flag("timing", timing)
    names, values = _check_grid(grid)
    t_end, dt, _, save_every, nsteps = run_numbers(t_end, dt, 0.0, save_every, who="sweep")  # NumPy numbers too
    from mbvi.lagrangian.integrators import LagrangianIntegrator

    # (a LagrangianIntegrator class is for a build that returns a LagrangianSystem: each member resolves it)
    is_lagrangian = isinstance(integrator, type) and issubclass(integrator, LagrangianIntegrator)
    cls = integrator if is_lagrangian else resolve_integrator(integrator)
    settings = {
        "t_end": float(t_end),
        "dt": float(dt),
        "integrator": integrator,
        "save_every": int(save_every),
        "options": dict(options),
        "plugins": run_time_plugins(),  # registered again in worker processes, which find only installed ones
    }
    spec, label = _build_spec(build)
    shape = tuple(len(v) for v in values)
    members = [(i, dict(zip(names, combo, strict=True))) for i, combo in enumerate(itertools.product(*values))]
    _check_options(spec, members, settings, nsteps // save_every + 2)

    if client is not None:
        if scheduler is not None:
            raise ValueError("sweep: scheduler= chooses a local scheduler; it cannot be combined with client=")
        results = _run_on_client(client, spec, members, settings, progress)
    else:
        results = _run_locally(spec, members, settings, progress, scheduler)
    results.sort(key=lambda r: r.index)
    _say_warnings(results, members)
    ds = _dataset(names, values, shape, results, settings, cls.name, label)
    return ds if timing else ds.drop_vars("wall_time")


def _say_warnings(results: list[MemberResult], members: list) -> None:
    """One warning in the caller's process for the members that warned where the caller could not see it."""
    warned = [r for r in results if r.warning]
    if not warned:
        return
    first = warned[0]
    call = ", ".join(f"{k}={v!r}" for k, v in members[first.index][1].items())
    notices.warn(
        f"sweep: {len(warned)} of {len(results)} members warned (each member's warnings are the dataset's "
        f"'warning' variable, its energy balance 'energy_error'); the first, {call}: {first.warning}",
        RuntimeWarning,
    )


def _check_grid(grid: Mapping[str, Sequence[Any]]) -> tuple[list[str], list[list[Any]]]:
    if not isinstance(grid, Mapping) or not grid:
        raise ValueError(f"sweep: grid must be a non-empty dict of name → list of values, got {grid!r}")
    names, values = [], []
    for name, vals in grid.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"sweep: grid name {name!r} is not a Python identifier (a keyword of build)")
        if name in RESERVED:
            raise ValueError(
                f"sweep: grid name {name!r} is reserved, one of the dataset's own dimensions and variables "
                f"{RESERVED}: give build's parameter another name"
            )
        if (isinstance(vals, (str, bytes)) or not isinstance(vals, (Sequence, np.ndarray, range))
                or (isinstance(vals, np.ndarray) and vals.ndim == 0)):  # fmt: skip
            raise ValueError(f"sweep: grid[{name!r}] must be a list of values, got {vals!r}")
        vals = list(vals)
        if not vals:
            raise ValueError(f"sweep: grid[{name!r}] has no values")
        seen: set = set()
        for v in vals:  # (a repeated value made a coordinate with two rows for it: .sel gave both, alignment failed)
            try:
                hash(v)
                key = v
            except TypeError:  # a list or an array: by its values
                key = repr(np.asarray(v, dtype=object).tolist())
            if key in seen:
                raise ValueError(f"sweep: grid[{name!r}] has the value {v!r} twice")
            seen.add(key)
        names.append(name)
        values.append(vals)
    return names, values


def _build_spec(build: Any) -> tuple[SceneFile | Callable[..., Any], str]:
    """What to ship to workers, and a label for the dataset's attributes."""
    if isinstance(build, (str, os.PathLike)):
        from mbvi.scenefile import load_scene_module

        file = Path(build).resolve()
        load_scene_module(file)  # fail here, once, on a missing or broken file
        return SceneFile(str(file), file.read_text(encoding="utf-8")), str(build)
    if not callable(build):
        raise ValueError(f"sweep: build must be a callable or a scene file's path, got {build!r}")
    module = sys.modules.get(getattr(build, "__module__", None) or "")
    file = getattr(module, "__file__", None)
    if module is not None and module.__name__.startswith("_mbvi_scene_") and file and module.build is build:
        # a scene file's build loaded with load_scene_module: workers cannot import that module by name
        return _build_spec(file)[0], str(file)
    return build, f"{getattr(build, '__module__', '?')}.{getattr(build, '__qualname__', repr(build))}"


def _picklable(obj: Any) -> bool:
    import cloudpickle

    try:
        cloudpickle.dumps(obj)
    except Exception:
        return False
    return True


def _chunks(members: list, workers: int) -> list[list]:
    size = max(1, min(MAX_CHUNK, math.ceil(len(members) / (TASKS_PER_WORKER * max(1, workers)))))
    return [members[i : i + size] for i in range(0, len(members), size)]


def _bar(total: int, progress: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="member", desc="sweep", disable=not progress, leave=False)


def _run_locally(spec, members, settings, progress: bool, scheduler: str | None) -> list[MemberResult]:
    import dask
    from dask.callbacks import Callback

    bar = _bar(len(members), progress)

    class _Progress(Callback):
        def _posttask(self, key, result, dsk, state, worker_id):
            if isinstance(result, list):
                bar.update(len(result))

    first: list[MemberResult] = []
    try:
        if scheduler is None and not _picklable((spec, settings)):
            scheduler = "threads"
        elif scheduler is None:
            first, scheduler = _probe(spec, members, settings, bar)
            members = members[len(first) :]
            if not members:
                return first
        cores = os.cpu_count() or 1
        workers = 1 if scheduler == "synchronous" else cores
        chunks = _chunks(members, workers)
        log.info("sweep: %d members in %d tasks on the local %s scheduler", len(members), len(chunks), scheduler)
        tasks = [dask.delayed(run_members, pure=False)(spec, chunk, settings) for chunk in chunks]
        kwargs = {} if scheduler == "synchronous" else {"num_workers": min(workers, len(chunks))}
        with _Progress():
            done = dask.compute(*tasks, scheduler=scheduler, **kwargs)
    finally:
        bar.close()
    return first + [r for chunk in done for r in chunk]


def _probe(spec, members, settings, bar) -> tuple[list[MemberResult], str]:
    """Run the first member(s) here and choose where the rest runs: ``"processes"`` or ``"synchronous"``.

    The first member's time is an upper bound (it pays for loading the compiled kernels): when even that
    times the rest stays within :data:`POOL_WORTH`, the rest runs here. Otherwise the second member,
    timed without that cost, decides. Failed members (an error in ``build``, an early ``SolverError``)
    say nothing of the others' cost; with no member run to its end the pool is the safe choice, unless a
    single member is left (a pool would run it alone, after seconds of starting).
    """
    first: list[MemberResult] = []
    scheduler = "processes"
    for count in range(1, PROBE + 1):
        first += run_members(spec, members[len(first) : count], settings)
        bar.update(1)
        rest = len(members) - len(first)
        ran = [r.wall_time for r in first if not r.error]
        if rest <= 1 or (ran and ran[-1] * rest <= POOL_WORTH):
            scheduler = "synchronous"
            break
    estimate = f"~{ran[-1] * rest:.2g} s" if ran else "unknown (no member ran to its end)"
    log.info("sweep: the other %d members need %s here: %s", rest, estimate, scheduler)
    return first, scheduler


def _run_on_client(client, spec, members, settings, progress: bool) -> list[MemberResult]:
    try:
        from distributed import Client, as_completed
    except ImportError as exc:
        raise ImportError(_INSTALL) from exc
    if not isinstance(client, Client):
        raise ValueError(f"sweep: client must be a dask.distributed.Client, got {type(client).__name__}")
    if not _picklable((spec, settings)):
        raise ValueError(
            "sweep: build, the integrator or its options cannot be pickled, so they cannot be sent to a cluster; "
            "pass a scene file's path or a module-level function"
        )
    workers = sum(client.nthreads().values()) or 1
    chunks = _chunks(members, workers)
    log.info("sweep: %d members in %d tasks on %s", len(members), len(chunks), client)
    [spec_future] = client.scatter([spec], broadcast=True, hash=False)
    futures = [client.submit(run_members, spec_future, chunk, settings, pure=False) for chunk in chunks]
    bar = _bar(len(members), progress)
    results: list[MemberResult] = []
    try:
        for future in as_completed(futures):
            part = future.result()
            results.extend(part)
            bar.update(len(part))
    finally:
        bar.close()
        client.cancel([*futures, spec_future])
    return results


# ---------------------------------------------------------------- assembling the dataset
def _kind(value: Any) -> str:
    """What a grid value is for its label: a bool, a number, a string or something else."""
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, float, np.integer, np.floating)):
        return "number"
    return "str" if isinstance(value, str) else "other"


def _coordinate(values: list[Any]) -> np.ndarray:
    """A 1-D coordinate array for grid values: the values themselves when they are all numbers, all booleans or all
    strings; else each labelled on its own — a string as itself, anything else by its ``repr`` — or all by their
    ``repr`` when that would make two labels alike. (Mixed values were all labelled by ``repr``, strings quoted,
    so that ``ds.sel(name="one")`` missed; [1, 1.5, True] became the coordinate [1.0, 1.5, 1.0].)"""
    kinds = {_kind(v) for v in values}
    if len(kinds) == 1 and kinds <= {"bool", "number", "str"}:
        arr = np.asarray(values)
        if arr.ndim == 1 and arr.dtype.kind in "biufU":
            return arr
    labels = [v if isinstance(v, str) else repr(v) for v in values]
    if len(set(labels)) < len(labels):
        labels = [repr(v) for v in values]
    return np.array(labels)


def _time_axis(settings: dict[str, Any]) -> np.ndarray:
    """The saved times of a complete run, s: every ``save_every``-th step and the last one."""
    from mbvi.runs import step_count, whole_steps

    nsteps = step_count(settings["t_end"], settings["dt"], 0.0, settings["save_every"], who="sweep")
    steps = np.arange(0, nsteps + 1, settings["save_every"])
    if steps[-1] != nsteps:
        steps = np.append(steps, nsteps)
    t = steps * settings["dt"]
    if not whole_steps(settings["t_end"], settings["dt"]):  # a shorter last step ends the run at t_end, as each
        # member's does; a whole one at nsteps·dt, as theirs (3 × 0.1, not 0.3: the axes of two sweeps differed)
        t[-1] = settings["t_end"]
    return t


def _align(t: np.ndarray, tm: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the time axis ``t`` that a member's saved times ``tm`` fall on, and which of ``tm`` do.

    A member's times are normally a prefix of the axis (a partial run stops
    early); a solver with its own output times (``csm`` after a failure) keeps
    only the times that are on the axis.
    """
    n = len(tm)
    if n <= len(t) and np.array_equal(tm, t[:n]):
        return np.arange(n), np.arange(n)
    if not len(t) or not n:
        return np.empty(0, dtype=int), np.empty(0, dtype=int)
    hi = np.clip(np.searchsorted(t, tm), 0, len(t) - 1)
    lo = np.clip(hi - 1, 0, len(t) - 1)
    rows = np.where(np.abs(t[lo] - tm) < np.abs(t[hi] - tm), lo, hi)
    keep = np.nonzero(np.abs(t[rows] - tm) <= 1e-6 * dt)[0]
    return rows[keep], keep


def _dataset(names, values, shape, results: list[MemberResult], settings, integrator_name: str, label: str) -> Any:
    import xarray as xr

    from mbvi._version import __version__

    complete = [r for r in results if not r.error and len(r.t)]
    t = complete[0].t if complete else _time_axis(settings)
    nt = len(t)
    bodies: list[str] = []
    seen: set[str] = set()
    for r in results:
        for b in r.bodies:
            if b not in seen:
                seen.add(b)
                bodies.append(b)
    column = {b: j for j, b in enumerate(bodies)}
    nb = len(bodies)
    names_q: list[str] = []
    for r in results:
        names_q += [c for c in r.coordinates if c not in names_q]
    column_q = {c: j for j, c in enumerate(names_q)}
    nc = len(names_q)
    size = int(np.prod(shape))

    def scalars() -> np.ndarray:
        return np.full((size, nt), np.nan)

    energy, kinetic, potential, cerr = scalars(), scalars(), scalars(), scalars()
    position = np.full((size, nt, nb, 3), np.nan)
    velocity = np.full((size, nt, nb, 3), np.nan)
    coord, rate = np.full((size, nt, nc), np.nan), np.full((size, nt, nc), np.nan)
    wall, energy_error = np.full(size, np.nan), np.full(size, np.nan)
    errors, warned = [""] * size, [""] * size
    for r in results:
        i = r.index
        errors[i], warned[i], energy_error[i] = r.error, r.warning, r.energy_error
        wall[i] = r.wall_time
        rows, keep = _align(t, r.t, settings["dt"])
        if not len(rows):
            continue
        energy[i, rows], kinetic[i, rows], potential[i, rows] = r.energy[keep], r.kinetic[keep], r.potential[keep]
        cerr[i, rows] = r.constraint_error[keep]
        cols = [column[b] for b in r.bodies]
        position[i, rows[:, None], cols] = r.position[keep]
        velocity[i, rows[:, None], cols] = r.velocity[keep]
        if r.coordinates:
            cols = [column_q[c] for c in r.coordinates]
            coord[i, rows[:, None], cols] = r.q[keep]
            rate[i, rows[:, None], cols] = r.v[keep]

    grid_dims = tuple(names)
    per_body = (*grid_dims, "time", "body", "xyz")
    body_data = (
        {
            "position": (per_body, position.reshape(*shape, nt, nb, 3), {"units": "m", "long_name": "body position"}),
            "velocity": (per_body, velocity.reshape(*shape, nt, nb, 3), {"units": "m/s", "long_name": "body velocity"}),
        }
        if nb
        else {}
    )
    per_coordinate = (*grid_dims, "time", "coordinate")
    coordinate_data = (
        {
            "q": (per_coordinate, coord.reshape(*shape, nt, nc), {"long_name": "LagrangianSystem coordinates"}),
            "v": (per_coordinate, rate.reshape(*shape, nt, nc), {"long_name": "LagrangianSystem velocities"}),
        }
        if nc
        else {}
    )
    per_time = (*grid_dims, "time")
    coords = {name: (name, _coordinate(vals)) for name, vals in zip(names, values, strict=True)}
    coords["time"] = ("time", np.asarray(t, dtype=float), {"units": "s", "long_name": "time"})
    if nb:  # (a LagrangianSystem's members have no bodies: no zero-length axis, which netCDF cannot read back)
        coords["body"] = ("body", np.array(bodies, dtype=str))
        coords["xyz"] = ("xyz", np.array(["x", "y", "z"]))
    if nc:
        coords["coordinate"] = ("coordinate", np.array(names_q, dtype=str))
    data = {
        "energy": (per_time, energy.reshape(*shape, nt), {"units": "J", "long_name": "total energy"}),
        "kinetic": (per_time, kinetic.reshape(*shape, nt), {"units": "J", "long_name": "kinetic energy"}),
        "potential": (per_time, potential.reshape(*shape, nt), {"units": "J", "long_name": "potential energy"}),
        "constraint_error": (per_time, cerr.reshape(*shape, nt), {"long_name": "max |g(q)| over constraint rows"}),
        **body_data,
        **coordinate_data,
        "error": (grid_dims, np.array(errors, dtype=str).reshape(shape), {"long_name": "error ('' = ran)"}),
        "warning": (grid_dims, np.array(warned, dtype=str).reshape(shape), {"long_name": "warnings ('' = none)"}),
        "energy_error": (grid_dims, energy_error.reshape(shape), {"long_name": "energy error / energy in motion"}),
        "wall_time": (grid_dims, wall.reshape(shape), {"units": "s", "long_name": "wall time of the member"}),
    }
    attrs = {
        "t_end": settings["t_end"],
        "dt": settings["dt"],
        "integrator": integrator_name,
        "save_every": settings["save_every"],
        "options": json.dumps({k: repr(v) for k, v in settings["options"].items()}, sort_keys=True),
        "build": label,
        "mbvi_version": __version__,
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)


#: what marks a directory as a Zarr store (format 2: a group or an array; format 3)
ZARR_MARKERS = (".zgroup", ".zarray", "zarr.json")


def check_zarr_target(path: str | os.PathLike) -> None:
    """A ValueError when ``path`` is a non-empty directory that is not a Zarr store: writing one replaces the
    directory's whole content, and only a store's is this function's to replace."""
    path = Path(path)
    if path.is_dir() and any(path.iterdir()) and not any((path / m).exists() for m in ZARR_MARKERS):
        raise ValueError(
            f"sweep output {str(path)!r} is a directory with files that are not a Zarr store: writing there would "
            "delete them; choose another path"
        )


def netcdf_engine() -> str:
    """xarray's engine for a netCDF-4 file: h5netcdf (the sweep extra installs it), else netCDF4.

    Raises
    ------
    ImportError
        With neither installed (netCDF-3, xarray's fallback through scipy, has no 64-bit integers: a seed past
        2³¹ failed the write after the whole sweep had run), saying what to install.
    """
    import importlib.util

    for engine, module in (("h5netcdf", "h5netcdf"), ("netcdf4", "netCDF4")):
        if importlib.util.find_spec(module) is not None:
            return engine
    raise ImportError("writing a sweep to .nc needs h5netcdf (pip install 'mbvi[sweep]') or netCDF4")


def write(ds: Any, path: str | os.PathLike) -> None:
    """Write a sweep's dataset to a Zarr store (``.zarr``) or a netCDF file (``.nc``).

    Parameters
    ----------
    ds : xarray.Dataset
        A dataset returned by :func:`sweep`.
    path : str or path
        ``NAME.zarr`` writes Zarr format 2 with consolidated metadata (read by
        every Zarr library, ``xarray.open_zarr`` among them; format 3 has no
        specification yet for fixed-width strings), replacing an existing
        store (a directory with other files is refused, not emptied); ``NAME.nc`` writes netCDF-4 (HDF5, through
        h5netcdf: 64-bit integers such as a seed grid keep their type; netCDF-3, xarray's fallback without it,
        has no int64 and failed on a value past 2³¹ after the whole sweep had run).

    Raises
    ------
    ValueError
        For another suffix, or a ``.zarr`` directory that holds files but no Zarr store.
    ImportError
        For ``.nc`` without h5netcdf or netCDF4 (:func:`netcdf_engine`).
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".zarr", ".nc"):
        raise ValueError(f"sweep output {str(path)!r}: unsupported file type; use .zarr or .nc")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".zarr":
        check_zarr_target(path)
        ds.to_zarr(path, mode="w", zarr_format=2, consolidated=True)
    else:
        ds.to_netcdf(path, engine=netcdf_engine())
