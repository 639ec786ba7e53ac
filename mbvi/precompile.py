"""Compile the engine's loops for this machine ahead of the first run: ``mbvi compile``.

numba compiles each of the engine's loops on its first run and caches it on disk: the first ``simulate`` of a
particle scene waits ~15 s, the first of rigid bodies ~27 s, the first batch ~10 s (a new user function later
compiles only itself, ~2 s). :func:`precompile` runs a few steps of a small scene of every kind — the groups of
:data:`GROUPS` — in parallel processes, one per core, so that no later first run waits; ``make setup`` calls
it. A group already cached takes about a second. The cache is the machine's until mbvi's engine changes
(an update drops it: run ``mbvi compile`` again). Scenes are built here, not read from ``scenes/``, so that an
installed package compiles the same way.
"""

from __future__ import annotations

import math
import operator
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mbvi.assembly import assemble
from mbvi.batch import simulate_batch
from mbvi.bodies import Particle, RigidBody
from mbvi.forces import Damper
from mbvi.joints import Revolute, Rod
from mbvi.plugins import integrators
from mbvi.scene import Scene
from mbvi.simulate import simulate
from mbvi.simulator import Simulator
from mbvi.state import State

__all__ = ["GROUPS", "cores", "precompile"]


def _double_pendulum(damped: bool = False) -> Scene:
    s = Scene(gravity=(0.0, 0.0, -9.81))
    s.add(Particle("a", mass=1.0, position=(math.sin(0.8), 0.0, -math.cos(0.8))))
    s.add(Particle("b", mass=1.0, position=(math.sin(0.8) + 1.0, 0.0, -math.cos(0.8))))
    s.add(Rod("world", "a"))
    s.add(Rod("a", "b"))
    if damped:
        s.add(Damper("world", "b", damping=0.1))
    return s


def _rigid_pair() -> Scene:
    s = Scene(gravity=(0.0, 0.0, -9.81))
    inertia = (1e-3, 0.08, 0.08)
    s.add(RigidBody("l0", mass=1.0, inertia=inertia, position=(0.5, 0.0, 0.0)))
    s.add(RigidBody("l1", mass=1.0, inertia=inertia, position=(1.5, 0.0, 0.0)))
    s.add(Revolute("world", "l0", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))
    s.add(Revolute("l0", "l1", anchor=(1.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0)))
    return s


def _batch(scene: Scene) -> None:
    s0 = assemble(scene).initial_state()
    simulate_batch(scene, 0.01, 1e-3, initial_states=(np.repeat(s0.q[None], 2, 0), np.repeat(s0.v[None], 2, 0)))


def _particles() -> None:
    simulate(_double_pendulum(), 0.01, 1e-3)
    simulate(_double_pendulum(), 0.01, 1e-3, "midpoint")
    Simulator(_double_pendulum(), dt=1e-3).step(3)  # the direct call of a compiled step (engine.fastcall)


def _batches() -> None:
    _batch(_double_pendulum())
    _batch(_double_pendulum(damped=True))


def _rigid() -> None:
    traj = simulate(_rigid_pair(), 0.01, 1e-3)
    traj.constraint_error, traj.angular_momentum  # noqa: B018 - the derived quantities compile when first read
    Simulator(_rigid_pair(), dt=1e-3).step(3)


def _plugins_and_lagrangians() -> None:
    import sympy as sp

    from mbvi.lagrangian import LagrangianSystem

    if "leapfrog" in integrators():  # the example plugin's compiled step, when installed
        simulate(_double_pendulum(), 0.01, 1e-3, "leapfrog")
    th, w = sp.symbols("theta omega")
    pendulum = LagrangianSystem(w**2 / 2 + 9.81 * sp.cos(th), coordinates=[th], velocities=[w],
                                initial_state=State([1.0], [0.0]), name="pendulum")  # fmt: skip
    simulate(pendulum, 0.01, 1e-3)


#: name → (what it compiles, the runs that compile it, seconds it takes on a fresh machine, about)
GROUPS: dict[str, tuple[str, Callable[[], None], float]] = {
    "rigid": ("the loop of rigid bodies, the Simulator's calls of it, a trajectory's derived quantities", _rigid, 27.0),
    "particles": ("the loops of particles and rods (the implicit pair's too), the Simulator's calls", _particles, 22.0),
    "batch": ("simulate_batch's loop in lockstep", _batches, 17.0),
    "extras": ("a plugin's compiled step and LagrangianSystem's loop", _plugins_and_lagrangians, 12.0),
}


def _shares(names: Sequence[str], jobs: int) -> list[list[str]]:
    """The groups dealt to ``jobs`` processes, the longest first to the least loaded."""
    shares: list[list[str]] = [[] for _ in range(max(1, min(jobs, len(names))))]
    load = [0.0] * len(shares)
    for name in sorted(names, key=lambda n: -GROUPS[n][2]):
        k = load.index(min(load))
        shares[k].append(name)
        load[k] += GROUPS[name][2]
    return shares


def cores() -> int:
    """The processors this process may run on (its affinity where the system tells it, else the machine's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: how a child process reports: ``ok NAME SECONDS`` or ``failed NAME TYPE: MESSAGE`` (one line each)
_OK, _FAILED = "ok", "failed"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _outcome(share: Sequence[str], returncode: int | None, lines: Sequence[str], log: str) -> str | None:
    """What went wrong in the process that ran ``share`` (None: every group reported ok).

    A group that reported its failure is named with its error; groups never reported (a process killed, or
    one that died) are named with the exit status and the last line of output that says something.
    """
    done = {ln.split()[1] for ln in lines if ln.startswith(_OK + " ") and len(ln.split()) > 2}
    for ln in lines:
        if ln.startswith(_FAILED + " "):
            return f"{ln[len(_FAILED) + 1 :]} (the whole output: {log})"
    missing = [n for n in share if n not in done]
    if not missing and returncode == 0:
        return None
    said = [_ANSI.sub("", ln).strip() for ln in lines if not ln.startswith((_OK + " ", _FAILED + " "))]
    said = [ln for ln in said if ln and not ln.startswith("During:")]
    last = said[-1] if said else "no output"
    what = ", ".join(missing) if missing else ", ".join(share)
    status = "killed" if returncode is None else f"exit status {returncode}"
    return f"{what} did not finish ({status}): {last} (the whole output: {log})"


def precompile(jobs: int | None = None, groups: Sequence[str] | None = None,
               say: Callable[[str], None] | None = None, timeout: float = 1800.0) -> dict[str, float]:  # fmt: skip
    """Compile the engine's loops (and cache them on disk) in ``jobs`` parallel processes.

    Parameters
    ----------
    jobs : int, optional
        Processes (default: the processors this process may use, :func:`cores`).
    groups : sequence of str, optional
        Names of :data:`GROUPS` (default: all; each once).
    say : callable, optional
        Called with a line for each group as soon as it finishes.
    timeout : float, default: 1800
        Seconds before the processes still running are stopped (a failure).

    Returns
    -------
    dict of str to float
        Seconds each group took, in its process.

    Raises
    ------
    ValueError
        An unknown group or a ``jobs`` below 1.
    RuntimeError
        A group failed or did not finish: which, why, and where the process's whole output is.
    """
    names = list(dict.fromkeys(GROUPS if groups is None else groups))
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        raise ValueError(f"precompile: unknown group {unknown[0]!r}; the groups are {', '.join(GROUPS)}")
    if jobs is None:
        jobs = cores()
    try:
        jobs = operator.index(jobs)
    except TypeError:
        raise ValueError(f"precompile: jobs={jobs!r}: expected a positive integer") from None
    if isinstance(jobs, bool) or jobs < 1:
        raise ValueError(f"precompile: jobs={jobs!r}: expected a positive integer")
    if not names:
        return {}
    from mbvi.engine.cache import ensure_fresh

    ensure_fresh()  # here, once: processes that each dropped stale files could drop one another's new ones
    env = dict(os.environ, MBVI_QUIET="1")
    seconds: dict[str, float] = {}
    speak = threading.Lock()
    runs = []

    def read(proc: subprocess.Popen, lines: list[str]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            lines.append(line)
            parts = line.split()
            if len(parts) == 3 and parts[0] == _OK and parts[1] in GROUPS:
                seconds[parts[1]] = float(parts[2])
                if say is not None:
                    with speak:
                        say(f"{parts[1]:<10} {float(parts[2]):5.1f} s  {GROUPS[parts[1]][0]}")

    for share in _shares(names, jobs):
        command = [sys.executable, "-m", "mbvi.precompile", *share]
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        lines: list[str] = []
        reader = threading.Thread(target=read, args=(proc, lines), daemon=True)
        reader.start()
        runs.append((share, proc, lines, reader))
    deadline = time.monotonic() + timeout
    failures = []
    for share, proc, lines, reader in runs:
        returncode: int | None
        try:
            returncode = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            lines.append(f"stopped after {timeout:g} s")
            returncode = None
        reader.join()
        if proc.stdout is not None:
            proc.stdout.close()
        log = os.path.join(tempfile.gettempdir(), f"mbvi-compile-{'-'.join(share)}.log")
        try:
            Path(log).write_text("\n".join(lines) + "\n")
        except OSError:
            log = "not kept"
        failure = _outcome(share, returncode, lines, log)
        if failure is not None:
            failures.append(failure)
    if failures:
        raise RuntimeError("precompile: " + "; ".join(failures))
    return seconds


def _main(names: Sequence[str]) -> int:
    """In a child process: run each group, printing ``ok NAME SECONDS`` or ``failed NAME TYPE: MESSAGE``."""
    import traceback
    import warnings

    warnings.simplefilter("ignore")
    status = 0
    for name in names:
        t = time.perf_counter()
        try:
            GROUPS[name][1]()
        except Exception as exc:  # reported, and the next group still compiles
            traceback.print_exc()
            first = (str(exc).strip().splitlines() or [""])[0]
            print(f"{_FAILED} {name} {type(exc).__name__}: {_ANSI.sub('', first)}", flush=True)
            status = 1
            continue
        print(f"{_OK} {name} {time.perf_counter() - t:.2f}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
