"""Ctrl-C stops a long compiled run within a fraction of a second and keeps what was run (mbvi.interrupts).

A compiled run was one call into numba's code: Python handled SIGINT only when it returned (a 3e7-step pendulum
went on 25 s after Ctrl-C, then discarded what it had run), and a ``KeyboardInterrupt`` that landed in a load
called back from the loop was sometimes printed and swallowed by ctypes, the run completing as if nothing had
happened. Runs longer than a chunk are now called in chunks of about 0.2 s, SIGINT only sets a flag while they run,
and the run raises ``KeyboardInterrupt`` between chunks with the states run so far in ``.trajectory``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from mbvi import interrupts

CHILD = r"""
import sys, time, numpy as np, sympy as sp, mbvi
case = sys.argv[1]
if case == "lagrangian":
    th, w = sp.symbols("theta omega")
    system = mbvi.LagrangianSystem(w**2 / 2 + 9.81 * sp.cos(th), [th], [w], initial_state=mbvi.State([1.0], [0.0]))
else:
    system = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    system.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    system.add(mbvi.Rod("world", "bob"))
    if case == "python_load":  # a load numba cannot compile: called back from the loop as Python
        gains = {"k": 0.1}
        system.add(mbvi.ExternalForce("bob", force=lambda t: (0.0, gains["k"] * np.sin(t), 0.0)))
mbvi.simulate(system, 0.01, 1e-3)  # compiled and warm
from contextlib import contextmanager
from mbvi import interrupts
deferred = interrupts.deferred
@contextmanager
def running():  # the long run has begun: the parent presses Ctrl-C a second later
    with deferred() as interrupt:
        print("READY", flush=True)
        yield interrupt
interrupts.deferred = running
start = time.perf_counter()
try:
    mbvi.simulate(system, 1e6, 1e-3, save_every=1000)  # ~an hour or more
    print("DONE", flush=True)
except KeyboardInterrupt as exc:
    traj = exc.trajectory
    print("INTERRUPTED", len(traj.t), traj.t[-1], time.perf_counter() - start, flush=True)
"""


@pytest.mark.parametrize("case", ["particles", "python_load", "lagrangian"])
def test_ctrl_c_stops_a_long_run_at_once_with_the_states_run_so_far(case: str, tmp_path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), case], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)  # fmt: skip
    try:
        assert child.stdout.readline().strip() == "READY"
        time.sleep(1.0)
        sent = time.perf_counter()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
        took = time.perf_counter() - sent
    finally:
        if child.poll() is None:
            child.kill()
    words = out.split()
    assert words and words[0] == "INTERRUPTED", (out, err[-2000:])
    states, last = int(words[1]), float(words[2])
    assert took < 5.0  # a chunk is ~0.2 s (it waited for the whole run: minutes)
    # the states up to the chunk it came in, saved every 1000 steps (a load called back as Python, on a machine
    # busy with the test suite, took ~9000 steps in its second)
    assert states >= 2 and 1.0 <= last < 1e6
    assert "Exception ignored" not in err  # not swallowed in a callback


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals: main thread only")
def test_ctrl_c_during_a_run_is_a_flag_read_between_its_chunks() -> None:
    with interrupts.deferred() as interrupt:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)
        assert interrupt.requested
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    with pytest.raises(KeyboardInterrupt):  # outside a run: as Python does
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.01)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals: main thread only")
def test_ctrl_c_on_the_command_line_says_so_in_one_line_and_saves_what_was_run(tmp_path, capsys, monkeypatch) -> None:
    import mbvi
    from mbvi.cli import main

    scene = tmp_path / "pendulum.py"
    scene.write_text(
        "import mbvi\nT_END = 1e6\nDT = 1e-3\n\ndef build():\n    s = mbvi.Scene(gravity=(0, 0, -9.81))\n"
        "    s.add(mbvi.Particle('a', mass=1.0, position=(1, 0, 0)))\n    s.add(mbvi.Rod('world', 'a'))\n    return s\n"
    )
    out = tmp_path / "run.npz"
    press = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))  # Ctrl-C 1 s into the run
    deferred, began = interrupts.deferred, []

    @contextlib.contextmanager
    def running():  # the run has begun (its scene loaded, its kernels compiled): the key is pressed 1 s later
        with deferred() as interrupt:
            if not began:
                began.append(time.perf_counter())
                press.start()
            yield interrupt

    monkeypatch.setattr(interrupts, "deferred", running)
    try:
        code = main(["run", str(scene), "--option", "save_every=1000", "--out", str(out), "--no-progress"])
    finally:
        press.cancel()
    took = time.perf_counter() - began[0]
    err = capsys.readouterr().err
    assert code == 130 and took < 5.0, err[-2000:]
    assert len(err.strip().splitlines()) == 1 and err.startswith("mbvi: interrupted at t = "), err[-2000:]
    assert f"the states run so far are saved to {out}" in err
    kept = mbvi.Trajectory.load(out)
    assert len(kept.t) > 10 and kept.t[-1] == pytest.approx(float(err.split("at t = ")[1].split(" s;")[0]))


def test_ctrl_c_while_a_failed_runs_step_is_verified_leaves_the_failure_with_its_hint_unverified() -> None:
    """The verifying re-runs run at other steps: a Ctrl-C in one handed back that re-run's states (dt = 0.018)
    as the user's run's (dt = 0.05). Now the failure is raised as it is, its hint said not verified."""
    import mbvi
    from mbvi.runs import verify_step

    err = mbvi.SolverError("a step failed", time=1.0, step=20, suggested_dt=0.01)

    def rerun(dt: float, every: int):
        raise KeyboardInterrupt

    verify_step(err, rerun, 0.01, 10.0, 2, 0.01, 20.0)
    assert err.verified_dt is False and err.suggested_dt == 0.01
    assert str(err).endswith("(not verified: its re-run was interrupted)")


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals: main thread only")
def test_ctrl_c_during_a_simulators_long_step_keeps_it_at_the_chunks_end_with_its_states(monkeypatch) -> None:
    import mbvi

    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "bob"))
    sim = mbvi.Simulator(scene, dt=1e-3)
    press = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    deferred = interrupts.deferred

    @contextlib.contextmanager
    def running():
        with deferred() as interrupt:
            press.start()
            yield interrupt

    monkeypatch.setattr(interrupts, "deferred", running)
    with pytest.raises(KeyboardInterrupt) as stopped:
        sim.step(3 * 10**7)
    press.cancel()
    traj = stopped.value.trajectory
    assert 100 < len(traj.t) < 3 * 10**7 and traj.t[-1] == pytest.approx(sim.t)
    sim.step(5)  # it goes on from there
    assert sim.t == pytest.approx(traj.t[-1] + 5e-3)


@pytest.mark.filterwarnings("ignore::mbvi.RedundantConstraintWarning")
@pytest.mark.parametrize("case", ["parallelogram", "top", "lagrangian"])
def test_a_run_in_chunks_is_the_run_in_one_call_bit_for_bit(case: str, monkeypatch) -> None:
    """A long run is called in chunks sized by the clock (so Ctrl-C is read between them): where they stop must
    not change a number. A rigid scene's call ended with a fresh factor of A for the velocity it returned, where
    the run in one call refined an aged one, and a burst of NumPy steps was cut at a chunk's end: the parallelogram
    strayed by 61 % of its energy in one full test run in many, on a loaded machine."""
    import numpy as np
    import sympy as sp

    import mbvi

    if case == "parallelogram":
        from test_loops import parallelogram

        system, t_end, dt, every = mbvi.assemble(parallelogram()), 0.6, 1e-4, 10
    elif case == "top":
        from scene_loader import load_scene

        system, t_end, dt, every = load_scene("spinning_top").build(), 2.0, 1e-3, 7
    else:
        th, w = sp.symbols("theta omega")
        system = mbvi.LagrangianSystem(w**2 / 2 + 9.81 * sp.cos(th), [th], [w], initial_state=mbvi.State([1.0], [0.0]))
        t_end, dt, every = 5.0, 1e-3, 7
    runs = []
    for first, seconds in ((10**9, 1e9), (16, 1e-9), (300, 1e-3)):  # one call; 16 steps a call; as the clock says
        monkeypatch.setattr(interrupts, "FIRST_CHUNK", first)
        monkeypatch.setattr(interrupts, "CHECK_EVERY", seconds)
        runs.append(mbvi.simulate(system, t_end, dt, save_every=every))
    for run in runs[1:]:
        assert np.array_equal(run.q, runs[0].q) and np.array_equal(run.v, runs[0].v)
