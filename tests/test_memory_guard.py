"""A run too large for the machine is a ValueError before it starts, judged by the whole run's peak."""

from __future__ import annotations

import pytest
from scene_loader import load_scene

import mbvi
import mbvi.engine.runner as runner


def test_the_guard_counts_every_array_the_run_holds(monkeypatch) -> None:
    """Each saved-state array was checked alone against half the memory: a run of 0.7 GiB arrays on a 2 GiB
    machine passed, and peaked at 2.43 GiB (positions, velocities, and the trajectory's work of them). It now
    counts the run's :data:`RUN_ARRAYS` arrays: 0.3 GiB arrays (1.2 GiB in all) are refused before anything
    is allocated, saying how much and what to change."""
    monkeypatch.setattr(runner, "physical_memory", lambda: 2.0 * 2**30)
    nq, dt = 6, 1e-3  # (the double pendulum's two particles)
    steps = int(0.3 * 2**30 / (8 * nq))
    # and what the trajectory derives a state (16 floats: 2.67 arrays of 6 coordinates more)
    with pytest.raises(ValueError, match=r"6.67 arrays of .* would take 2 GiB of this machine's 2 GiB: keep fewer"):
        mbvi.simulate(load_scene("double_pendulum").build(), steps * dt, dt)
    per_array = runner.RUN_ARRAYS + runner.DERIVED_PER_STATE / nq
    assert per_array * 0.1 * 2**30 < runner.MEMORY_SHARE * 2.0 * 2**30  # 0.1 GiB arrays would run
