"""First use: what a fresh machine compiles, and what a cached process start costs.

Run: ``python benchmarks/bench_first_use.py`` (a target of ``make bench``; ``--rounds N``, default 2).

Each round starts fresh Python processes with empty caches (a temporary ``NUMBA_CACHE_DIR`` for numba's
compiled code and ``MBVI_CACHE_DIR`` for mbvi's generated kernels), as a new user's first run meets them,
and times in the first one, one after the other:

1. the first ``mbvi.simulate`` (a double pendulum of particles: the serial loop compiles);
2. the first ``mbvi.simulate_batch`` after it (the batch loop compiles);
3. the first ``simulate`` of a rigid body on a hinge (the loop of rigid bodies compiles);
4. a new user kernel: a double pendulum under a ``(t, state)`` load of the user's own function (a new
   function compiles, with the state view's accessors it calls; the engine's loops must not: numba's
   compile events of their modules are counted);

then, in a second process on the caches the first left, the whole cached start: import, the three scenes
and the user load, ``python`` start-up included. Then, each on empty caches of its own: the first ``simulate``
of a rigid body in a process that ran nothing before (what a robot user meets first), and ``mbvi compile``
(what ``make setup`` runs: every loop, in a process per core) followed by the four first runs in a new
process. Wall seconds, median [min–max] over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HEADER = r"""
import json, math, sys, time
t_start = time.perf_counter()
from numba.core import event
import mbvi

engine_compiles = []
LOOPS = {"mbvi.engine." + m for m in ("loop", "lieloop", "lockstep", "kernels", "steps", "lie", "scheme", "api",
                                      "runner", "rotation", "extrapolation", "lagrange")}


class Compiles(event.Listener):
    def on_start(self, ev):
        fn = ev.data["dispatcher"].py_func
        if fn.__module__ in LOOPS:  # the engine's loops and kernels (not the view a user kernel compiles with)
            engine_compiles.append(fn.__module__ + "." + fn.__qualname__)

    def on_end(self, ev):
        pass


def pendulum(load=None):
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    s.add(mbvi.Particle("a", mass=1.0, position=(math.sin(0.8), 0.0, -math.cos(0.8))))
    s.add(mbvi.Particle("b", mass=1.0, position=(math.sin(0.8) + 1.0, 0.0, -math.cos(0.8))))
    s.add(mbvi.Rod("world", "a"))
    s.add(mbvi.Rod("a", "b"))
    if load is not None:
        s.add(mbvi.ExternalForce("b", force=load, name="push"))
    return s


def arm():
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    s.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.1, 0.1, 0.02), position=(0.5, 0.0, 0.0)))
    s.add(mbvi.Revolute("world", "arm", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="hinge"))
    return s


def push(t, state):  # a user's controller: damps the lower bob's vertical velocity
    return (0.0, 0.0, -0.3 * state.velocity("b")[2])

"""
SCRIPT = HEADER + r"""
out = {}
t0 = time.perf_counter()
dp = pendulum()
mbvi.simulate(dp, 0.01, 1e-3)
out["simulate"] = time.perf_counter() - t0
t0 = time.perf_counter()
s0 = mbvi.assemble(dp).initial_state()
mbvi.simulate_batch(dp, 0.01, 1e-3, initial_states=[s0, s0])
out["batch"] = time.perf_counter() - t0
t0 = time.perf_counter()
mbvi.simulate(arm(), 0.01, 1e-3)
out["rigid"] = time.perf_counter() - t0
event.register("numba:compile", Compiles())
t0 = time.perf_counter()
mbvi.simulate(pendulum(push), 0.01, 1e-3)
out["kernel"] = time.perf_counter() - t0
out["engine_compiles"] = len(engine_compiles)
out["total"] = time.perf_counter() - t_start
print(json.dumps(out))
"""


RIGID_FIRST = HEADER + r"""
t0 = time.perf_counter()
mbvi.simulate(arm(), 0.01, 1e-3)
print(json.dumps({"rigid_alone": time.perf_counter() - t0}))
"""


def run(env: dict, script: str = SCRIPT) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["process"] = time.perf_counter() - t0
    return out


def fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):6.2f} s [{min(xs):.2f}–{max(xs):.2f}]"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    cold: list[dict] = []
    warm: list[dict] = []
    alone: list[dict] = []
    setup: list[float] = []
    after: list[dict] = []

    def fresh(tmp: str) -> dict:
        return {**os.environ, "NUMBA_CACHE_DIR": os.path.join(tmp, "numba"),
                "MBVI_CACHE_DIR": os.path.join(tmp, "mbvi"), "MBVI_QUIET": "1"}  # fmt: skip

    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            env = fresh(tmp)
            cold.append(run(env))
            warm.append(run(env))
        with tempfile.TemporaryDirectory() as tmp:
            alone.append(run(fresh(tmp), RIGID_FIRST))
        with tempfile.TemporaryDirectory() as tmp:  # what make setup does: mbvi compile, then the first runs
            env = fresh(tmp)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "mbvi", "compile"], env=env, capture_output=True, check=True)
            setup.append(time.perf_counter() - t0)
            after.append(run(env))
    print(f"first use, empty caches ({args.rounds} rounds, fresh processes; wall time, median [min–max]):")
    print(f"  first simulate (serial loop compiles)            {fmt([c['simulate'] for c in cold])}")
    print(f"  first simulate_batch, after it (batch loop)      +{fmt([c['batch'] for c in cold])}")
    print(f"  first rigid body (loop of rigid bodies)          +{fmt([c['rigid'] for c in cold])}")
    compiles = max(c["engine_compiles"] for c in cold)
    print(f"  a new user kernel ((t, state) load)              +{fmt([c['kernel'] for c in cold])}"
          f"  (engine loop functions compiled for it: {compiles})")  # fmt: skip
    print(f"  the whole first process                          {fmt([c['process'] for c in cold])}")
    print(f"cached start (a second process: start-up, import, the same four runs)  {fmt([w['process'] for w in warm])}")
    print(f"a rigid body as the first simulate of all (a fresh process)  {fmt([a['rigid_alone'] for a in alone])}")
    print(f"`mbvi compile` on empty caches (make setup runs it; {os.cpu_count()} processes)  {fmt(setup)}")
    keys = ("simulate", "batch", "rigid", "kernel")
    print(f"  then the four first runs of a new process, each: {', '.join(fmt([a[k] for a in after]) for k in keys)}")


if __name__ == "__main__":
    main()
