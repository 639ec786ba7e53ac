"""Inputs too large for the machine are a ValueError before anything runs, in csm and in statics.

* ``csm`` (Baumgarte + ``solve_ivp``) had no check on its saved states: 1000 pendulums for 15 s at dt = 1e-4, which
  ``verlet`` refuses at once (13.4 GiB of a 23.5 GiB machine), ran for 11 s and died in numpy's MemoryError. It now
  refuses them with the same ValueError, counting its own peak (:data:`mbvi.integrators.csm.CSM_ARRAYS`).
* ``mbvi.equilibrium`` and ``mbvi.modes`` work with dense (nq, nq) matrices and had no size check: 4000 independent
  pendulums (nq = 12000) would have taken some 17 GiB and half an hour. They now refuse, naming themselves and
  the coordinate count, when their peak (:data:`mbvi.statics.EQUILIBRIUM_ARRAYS`, :data:`mbvi.statics.MODES_ARRAYS`
  dense arrays) would exceed half of the machine's memory.

The machine's memory is monkeypatched (``mbvi.engine.runner.physical_memory``), so that nothing large is allocated.
"""

from __future__ import annotations

import importlib
import math
import time

import numpy as np
import pytest

import mbvi
import mbvi.engine.runner as runner
import mbvi.statics as statics

csm = importlib.import_module("mbvi.integrators.csm")  # (mbvi.integrators is also the function naming them)

G = 9.81


def _pendulums(n: int, length: float = 1.0) -> mbvi.Scene:
    """``n`` independent pendulums (nq = 3n), each bob hanging at 45° from its own pivot on the y axis."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    h = length / math.sqrt(2.0)
    for i in range(n):
        scene.add(mbvi.Particle(f"b{i}", mass=1.0, position=(h, float(i), -h)))
        scene.add(mbvi.Rod("world", f"b{i}", anchor_a=(0.0, float(i), 0.0)))
    return scene


def _machine(monkeypatch, memory: float) -> None:
    """This machine, as the memory checks see it, has ``memory`` bytes."""
    monkeypatch.setattr(runner, "physical_memory", lambda: float(memory))


def _never(*args, **kwargs):
    raise AssertionError("the dense or ODE work ran: the check must come before it")


# -- csm: saved states ---------------------------------------------------------------------------------------


def test_csm_refuses_saved_states_beyond_memory_before_solving(monkeypatch) -> None:
    """10001 saved states of 3 coordinates, 4 arrays of them and 16 derived floats a state (2.1 MiB), on a
    machine of 1 MiB (half of it allowed): refused with the ValueError every integrator gives (the one
    ``saved_states`` raises, which verlet's run calls), before solve_ivp is called."""
    _machine(monkeypatch, 2**20)
    monkeypatch.setattr(csm, "solve_ivp", _never)
    with pytest.raises(ValueError) as same:
        runner.saved_states((10001, 3))
    start = time.perf_counter()
    with pytest.raises(ValueError) as refused:
        mbvi.simulate(_pendulums(1), t_end=10.0, dt=1e-3, integrator="csm")
    assert time.perf_counter() - start < 5.0
    message = str(refused.value)
    assert message == str(same.value)
    # 4 arrays and what the trajectory derives a state (16 floats: 5.33 arrays of 3 coordinates)
    assert "9.33 arrays of 10001 × 3 numbers" in message and "of this machine's 0.000977 GiB" in message
    assert "save_every" in message


def test_csm_memory_check_counts_its_measured_peak(monkeypatch) -> None:
    """The run is refused just above the memory its :data:`CSM_ARRAYS` arrays need and runs just below it; saving
    fewer states (``save_every``, as the message says) makes the refused run fit."""
    assert csm.CSM_ARRAYS == 4  # solve_ivp's columns + sol.y, then sol.y + q + v (tracemalloc: 4.01–4.08)
    saved, nq = 2001, 3  # t_end = 2 s at dt = 1e-3
    need = (csm.CSM_ARRAYS + runner.DERIVED_PER_STATE / nq) * 8.0 * saved * nq
    _machine(monkeypatch, need / runner.MEMORY_SHARE * 1.01)
    traj = mbvi.simulate(_pendulums(1), t_end=2.0, dt=1e-3, integrator="csm")
    assert traj.q.shape == (saved, nq)
    _machine(monkeypatch, need / runner.MEMORY_SHARE * 0.99)
    with pytest.raises(ValueError, match=r"the run's saved states, 9.33 arrays of 2001 × 3 numbers, would take"):
        mbvi.simulate(_pendulums(1), t_end=2.0, dt=1e-3, integrator="csm")
    fewer = mbvi.simulate(_pendulums(1), t_end=2.0, dt=1e-3, integrator="csm", save_every=10)
    assert fewer.q.shape == (201, nq)


def test_a_normal_csm_run_is_unaffected() -> None:
    """With the machine's own memory a small csm run completes as before: the pendulum's energy and rod hold."""
    traj = mbvi.simulate(_pendulums(2), t_end=1.0, dt=1e-2, integrator="csm")
    assert traj.q.shape == (101, 6) and traj.v.shape == (101, 6)
    assert float(np.max(np.abs(traj.energy - traj.energy[0]))) < 1e-6
    assert float(np.max(traj.constraint_error)) < 1e-6


# -- statics and modes: dense matrices -----------------------------------------------------------------------


def test_equilibrium_refuses_a_dense_problem_beyond_memory(monkeypatch) -> None:
    """10 pendulums, nq = 30: 16 dense 30 × 30 arrays are 112.5 KiB; on a machine of 200 KB (100 KB allowed) the
    equilibrium is refused, naming itself and the coordinate count, before any dense matrix is formed."""
    _machine(monkeypatch, 2e5)
    monkeypatch.setattr(statics, "_dense_jacobian", _never)
    monkeypatch.setattr(statics, "_hessian_and_load_skew", _never)
    with pytest.raises(ValueError) as refused:
        mbvi.equilibrium(_pendulums(10))
    message = str(refused.value)
    assert message.startswith("equilibrium: a scene of 30 coordinates is solved with dense matrices")
    assert f"{statics.EQUILIBRIUM_ARRAYS} arrays of 30 × 30 numbers, would take" in message
    assert "O(nq²) memory and O(nq³) time" in message
    # modes of a scene computes its equilibrium first: the same refusal
    with pytest.raises(ValueError, match=r"^equilibrium: a scene of 30 coordinates"):
        mbvi.modes(_pendulums(10))


def test_modes_of_an_equilibrium_refuses_a_dense_problem_beyond_memory(monkeypatch) -> None:
    """An equilibrium found with the machine's memory; its modes on a machine too small for them are refused,
    naming modes and the coordinate count, before the eigenproblem is formed."""
    eq = mbvi.equilibrium(_pendulums(10))
    need = statics.MODES_ARRAYS * 8.0 * 30 * 30
    _machine(monkeypatch, need / runner.MEMORY_SHARE * 0.99)
    monkeypatch.setattr(statics, "_small_oscillations", _never)
    with pytest.raises(ValueError, match=r"^modes: a scene of 30 coordinates is solved with dense matrices"):
        mbvi.modes(eq)


def test_a_small_equilibrium_and_its_modes_still_work(monkeypatch) -> None:
    """Just above what the check counts (and with the machine's own memory) the pendulums hang straight down,
    each with U − W = −m g l, stable, and swing at √(g/l)."""
    length, n = 1.5, 10
    nq = 3 * n
    _machine(monkeypatch, statics.EQUILIBRIUM_ARRAYS * 8.0 * nq * nq / runner.MEMORY_SHARE * 1.01)
    eq = mbvi.equilibrium(_pendulums(n, length))
    for i in (0, n - 1):
        np.testing.assert_allclose(eq.position(f"b{i}"), (0.0, float(i), -length), atol=1e-9)
    assert eq.potential == pytest.approx(-n * G * length, rel=1e-12)
    assert eq.stable
    monkeypatch.undo()
    omega, shapes = mbvi.modes(eq)
    assert shapes.shape == (nq, 2 * n)
    np.testing.assert_allclose(omega, math.sqrt(G / length), rtol=1e-9)


def test_a_lagrangian_systems_csm_refuses_saved_states_beyond_memory_before_solving(monkeypatch) -> None:
    """The same check for a LagrangianSystem's csm (its own solve_ivp call), with its momenta counted too."""
    import scipy.integrate
    import sympy as sp

    th, w = sp.symbols("theta omega")
    system = mbvi.LagrangianSystem(w**2 / 2 + G * sp.cos(th), [th], [w], initial_state=mbvi.State([0.5], [0.0]))
    _machine(monkeypatch, 2**20)
    monkeypatch.setattr(scipy.integrate, "solve_ivp", _never)
    with pytest.raises(ValueError, match=r"saved states, 5 arrays of 60001 × 1 numbers.*save_every"):
        mbvi.simulate(system, t_end=60.0, dt=1e-3, integrator="csm")
    monkeypatch.undo()
    assert mbvi.simulate(system, t_end=0.1, dt=1e-3, integrator="csm").q.shape == (101, 1)
