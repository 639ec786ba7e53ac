"""Compile the engine's loops for this machine ahead of the first run: ``mbvi compile``.

numba compiles each of the engine's loops on its first run and caches it on disk: the first ``simulate`` of a
particle scene waits ~15 s, the first of rigid bodies ~27 s, the first batch ~10 s (a new user function later
compiles only itself, ~2 s). :func:`precompile` runs a few steps of a small scene of every kind — the groups of
:data:`GROUPS` — in parallel processes, one per core, so that no later first run waits; ``make setup`` calls
it. A group already cached takes about a second. Scenes are built here, not read from ``scenes/``, so that an
installed package compiles the same way.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

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

__all__ = ["GROUPS", "precompile"]


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
    simulate(_rigid_pair(), 0.01, 1e-3)
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
    "rigid": ("the loop of rigid bodies, and the Simulator's calls of it", _rigid, 27.0),
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


def precompile(jobs: int | None = None, groups: Sequence[str] | None = None,
               say: Callable[[str], None] | None = None) -> dict[str, float]:  # fmt: skip
    """Compile the engine's loops (and cache them on disk) in ``jobs`` parallel processes.

    Parameters
    ----------
    jobs : int, optional
        Processes (default: the machine's cores).
    groups : sequence of str, optional
        Names of :data:`GROUPS` (default: all).
    say : callable, optional
        Called with a line for each group as it finishes.

    Returns
    -------
    dict of str to float
        Seconds each group took, in its process.

    Raises
    ------
    ValueError
        An unknown group or a ``jobs`` below 1.
    RuntimeError
        A process failed; the message is its last line of output.
    """
    names = list(GROUPS) if groups is None else list(groups)
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        raise ValueError(f"precompile: unknown group {unknown[0]!r}; the groups are {', '.join(GROUPS)}")
    jobs = (os.cpu_count() or 1) if jobs is None else jobs
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"precompile: jobs={jobs!r}: expected a positive integer")
    from mbvi.engine.cache import ensure_fresh

    ensure_fresh()  # here, once: processes that each dropped stale files could drop one another's new ones
    env = dict(os.environ, MBVI_QUIET="1")
    procs = []
    for share in _shares(names, jobs):
        command = [sys.executable, "-m", "mbvi.precompile", *share]
        procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env))
    seconds: dict[str, float] = {}
    failure = None
    for proc in procs:
        out, _ = proc.communicate()
        lines = out.strip().splitlines()
        for line in lines:
            name, _, value = line.partition(" ")
            if name in GROUPS and value.replace(".", "", 1).isdigit():
                seconds[name] = float(value)
                if say is not None:
                    say(f"{name:<10} {float(value):5.1f} s  {GROUPS[name][0]}")
        if proc.returncode != 0 and failure is None:
            failure = lines[-1] if lines else f"exit status {proc.returncode}"
    if failure is not None:
        raise RuntimeError(f"precompile: a process failed: {failure}")
    return seconds


def _main(names: Sequence[str]) -> None:
    """In a child process: run each group, printing ``name seconds``."""
    import warnings

    warnings.simplefilter("ignore")
    for name in names:
        t = time.perf_counter()
        GROUPS[name][1]()
        print(name, f"{time.perf_counter() - t:.2f}", flush=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
