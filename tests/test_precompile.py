"""``mbvi compile`` (:func:`mbvi.precompile.precompile`): after it, no first run of any kind compiles the engine.

The check runs other scenes than the ones precompile steps (another joint type, a damper, a batch of rigid
bodies, a Simulator, a composition) in a fresh process and listens to numba's compile events: a single
function of the engine's loops compiled there means a group missed an entry.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mbvi.cli import main
from mbvi.engine.cache import SAVE_LOCK
from mbvi.precompile import GROUPS, _outcome, _shares, precompile

FIRST_RUNS = r"""
import json, math
import numpy as np
from numba.core import event
import mbvi

compiled = []


class Compiles(event.Listener):
    def on_start(self, ev):
        fn = ev.data["dispatcher"].py_func
        if fn.__module__.startswith("mbvi.engine."):
            compiled.append(fn.__module__ + "." + fn.__qualname__)

    def on_end(self, ev):
        pass


event.register("numba:compile", Compiles())
rigid = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
rigid.add(mbvi.RigidBody("box", mass=2.0, inertia=(0.15, 0.2, 0.3), position=(0.0, 0.0, -0.5)))
rigid.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.05, 0.05, 0.01), position=(0.0, 0.0, -1.5)))
rigid.add(mbvi.Spherical("world", "box", anchor=(0.0, 0.0, 0.0)))
rigid.add(mbvi.Revolute("box", "arm", anchor=(0.0, 0.0, -1.0), axis=(1.0, 0.0, 0.0)))
chain = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
for i, name in enumerate("abc"):
    chain.add(mbvi.Particle(name, mass=1.0 + i, position=(0.5 * (i + 1), 0.0, 0.0)))
chain.add(mbvi.Rod("world", "a"))
chain.add(mbvi.Rod("a", "b"))
chain.add(mbvi.Rod("b", "c"))
chain.add(mbvi.Damper("world", "c", damping=0.2))
s0 = mbvi.assemble(rigid).initial_state()
mbvi.simulate(rigid, 0.01, 1e-3)
mbvi.simulate_batch(rigid, 0.01, 1e-3, initial_states=(np.repeat(s0.q[None], 3, 0), np.repeat(s0.v[None], 3, 0)))
mbvi.simulate(chain, 0.01, 1e-3)
mbvi.simulate(chain, 0.01, 1e-3, "implicit_euler")
mbvi.simulate(chain, 0.01, 1e-3, "yoshida4")
c0 = mbvi.assemble(chain).initial_state()
mbvi.simulate_batch(chain, 0.01, 1e-3, initial_states=(np.repeat(c0.q[None], 3, 0), np.repeat(c0.v[None], 3, 0)))
sim = mbvi.Simulator(rigid, dt=1e-3)
sim.step(5)
print(json.dumps(sorted(set(compiled))))
"""


def test_groups_are_dealt_to_processes_longest_first_each_once() -> None:
    for jobs in (1, 2, 3, 4, 9):
        shares = _shares(list(GROUPS), jobs)
        assert len(shares) == min(jobs, len(GROUPS))
        assert sorted(n for share in shares for n in share) == sorted(GROUPS)
    two = _shares(list(GROUPS), 2)
    loads = [sum(GROUPS[n][2] for n in share) for share in two]
    assert max(loads) <= 0.5 * sum(loads) + max(g[2] for g in GROUPS.values()) / 2  # no process gets it all


def test_after_precompile_no_first_run_compiles_the_engine() -> None:
    seconds = precompile(jobs=2)  # about a second when the engine is cached (make setup ran it)
    assert set(seconds) == set(GROUPS)
    env = {**os.environ, "MBVI_QUIET": "1"}
    out = subprocess.run([sys.executable, "-c", FIRST_RUNS], capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_precompile_refuses_an_unknown_group_or_jobs_below_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="unknown group 'gpu'"):
        precompile(groups=["gpu"])
    with pytest.raises(ValueError, match="jobs=0"):
        precompile(jobs=0)
    assert main(["compile", "--jobs", "0"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--jobs 0" in err


def test_precompile_deduplicates_groups_and_takes_any_integer_for_jobs() -> None:
    import numpy as np

    assert precompile(groups=[]) == {}
    assert set(precompile(jobs=np.int64(1), groups=["extras", "extras"])) == {"extras"}


def test_a_failed_or_killed_group_is_named_with_its_error_in_one_line() -> None:
    ok = ["ok rigid 20.70", "ok extras 7.60"]
    assert _outcome(["rigid", "extras"], 0, ok, "/tmp/x.log") is None
    lines = ["Traceback ...", "failed rigid TypingError: cannot type x", "ok extras 7.6"]
    said = _outcome(["rigid", "extras"], 1, lines, "/tmp/x.log")
    assert said == "rigid TypingError: cannot type x (the whole output: /tmp/x.log)"
    # killed after its first group: the one never reported, the status, the last line that says something
    said = _outcome(["rigid", "extras"], -9, ["ok rigid 20.70", "\x1b[1mMemoryError\x1b[0m", "During: lowering"], "L")
    assert said == "extras did not finish (exit status -9): MemoryError (the whole output: L)"
    said = _outcome(["batch"], None, ["stopped after 1800 s"], "L")
    assert said == "batch did not finish (killed): stopped after 1800 s (the whole output: L)"
    assert "exit status 3" in _outcome(["batch"], 3, ["ok batch 1.0"], "L")  # reported, yet the process failed


CACHED_FUNCTION = r"""
import sys
from mbvi.engine import kernels  # noqa: F401  (serializes numba's cache saves)
from numba import njit


@njit(cache=True)
def twice(x):
    return 2 * x


print("compiling", flush=True)
twice(1.5)
print("saved", flush=True)
"""


def test_numbas_cache_saves_wait_for_one_another_across_processes(tmp_path: Path) -> None:
    """A process saving a compiled function waits while another holds the save lock (the race of two
    processes writing one function's cache index is closed); without the lock it would not wait."""
    script = tmp_path / "cached.py"
    script.write_text(CACHED_FUNCTION)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "MBVI_QUIET": "1"}
    fd = os.open(SAVE_LOCK, os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "compiling"
        time.sleep(4.0)  # compiling `twice` takes a fraction of a second: the child now waits on its save
        assert child.poll() is None
        assert not list((tmp_path / "numba").rglob("*.nbi"))
    finally:
        os.close(fd)  # the lock goes with it
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0 and out.strip() == "saved"
    assert list((tmp_path / "numba").rglob("*.nbi")) and list((tmp_path / "numba").rglob("*.nbc"))


def test_every_cached_engine_file_that_reads_another_engine_file_is_hashed() -> None:
    """numba drops a cached function when its own file changes, not when a file it reads does; the engine's
    cache is dropped as a whole when one of ``cache.SOURCES`` changes. ``fastcall.py`` was not among them: its
    cached ``call`` builds the loop's arguments from the buffer table of ``fields.py``, and a new buffer there
    left it calling the new loop with the old layout, a segmentation fault at the first run. Every engine
    file with numba-cached code that imports another engine file must be hashed."""
    import ast

    from mbvi.engine import cache

    missing = []
    for path in sorted(cache.HERE.glob("*.py")):
        tree = ast.parse(path.read_text())
        cached = "cache=True" in path.read_text() or any(
            isinstance(n, ast.ImportFrom) and n.module == "mbvi.engine.kernels" and any(a.name in ("jit", "jit_alloc")
                                                                                       for a in n.names)
            for n in ast.walk(tree)
        )  # fmt: skip
        reads_engine = any(
            isinstance(n, ast.ImportFrom) and (n.module or "").startswith("mbvi.engine") for n in ast.walk(tree)
        )
        if cached and reads_engine and path.name not in cache.SOURCES and path.name != "callbacks.py":
            missing.append(path.name)  # (callbacks keys its own cache by the engine's stamp)
    assert missing == []
