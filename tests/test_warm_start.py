"""SHAKE's warm start: the multipliers extrapolated from the last two steps.

The constraint impulses of a smooth motion change by O(h) a step, so the
linear extrapolation 2Λₖ − Λₖ₋₁ misses the next one by O(h²) where the last
one misses it by O(h): SHAKE then starts closer to its solution and needs
fewer iterations. The solution itself is not changed (SHAKE converges to the
same tolerance), which the agreement tests of ``test_engine.py`` hold.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from scene_loader import SCENES, load_scene

import mbvi
from mbvi.engine import kernels as K

mbvi.integrators()  # load the built-in plugins so their modules can be reached
RATTLE = sys.modules["mbvi.integrators.rattle"]


def _double_pendulum() -> mbvi.Scene:
    """``scenes/double_pendulum.py`` as built by default: both rods released horizontal."""
    return load_scene(SCENES / "double_pendulum.py").build()


@pytest.mark.parametrize("impl", ["numpy", "compiled"])
def test_prediction_rule(impl: str) -> None:
    """Cold (all zero) → nothing to extrapolate from; one known step → kept; two → 2Λₖ − Λₖ₋₁."""
    predict = RATTLE.predict_multipliers if impl == "numpy" else K.predict_multipliers
    lam, prev = np.zeros(2), np.zeros(2)
    predict(lam, prev)  # a cold start stays cold and forgets any history
    assert np.all(lam == 0.0) and np.all(np.isnan(prev))
    lam[:] = (3.0, -1.0)  # the first converged multipliers: no history yet
    predict(lam, prev)
    np.testing.assert_array_equal(lam, (3.0, -1.0))
    np.testing.assert_array_equal(prev, (3.0, -1.0))
    lam[:] = (4.0, -0.5)  # the second: extrapolate
    predict(lam, prev)
    np.testing.assert_array_equal(lam, (5.0, 0.0))
    np.testing.assert_array_equal(prev, (4.0, -0.5))


def test_extrapolation_is_second_order_accurate() -> None:
    """On a swinging double pendulum the extrapolated impulse misses the next by O(h²), the last one by O(h)."""
    system = mbvi.assemble(_double_pendulum())
    misses = {}
    for dt in (2e-3, 1e-3):
        stepper = RATTLE.Verlet(system, dt)
        state = system.initial_state()
        history = []
        for k in range(round(0.2 / dt)):
            state = stepper.step(state, k * dt)
            history.append(stepper._lam[0].copy())
        # the same window of time, 0.1 … 0.2 s; Λ is the drift's impulse times h: Λ/h² is a force, N
        lam = np.array(history[round(0.1 / dt) :]) / dt**2
        last = np.abs(lam[2:] - lam[1:-1]).max()
        extrapolated = np.abs(lam[2:] - (2 * lam[1:-1] - lam[:-2])).max()
        misses[dt] = (last, extrapolated)
        assert extrapolated < 0.05 * last, (dt, last, extrapolated)
    assert 1.6 <= misses[2e-3][0] / misses[1e-3][0] <= 2.4  # O(h)
    assert 3.2 <= misses[2e-3][1] / misses[1e-3][1] <= 4.8  # O(h²)


def test_extrapolated_start_saves_shake_iterations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted on the NumPy path: fewer constraint evaluations per step than the last step's multipliers."""
    system = mbvi.assemble(_double_pendulum())
    counts = {}
    for label in ("last", "extrapolated"):
        if label == "last":
            monkeypatch.setattr(RATTLE, "predict_multipliers", lambda lam, prev: None)
        else:
            monkeypatch.undo()
        calls = [0]
        values = system.active_constraints

        def counting(q, _values=values, _calls=calls):
            _calls[0] += 1
            return _values(q)

        monkeypatch.setattr(system, "active_constraints", counting)
        stepper = RATTLE.Verlet(system, 1e-3)
        state = system.initial_state()
        for k in range(400):
            state = stepper.step(state, k * 1e-3)
        counts[label] = calls[0] / 400
        monkeypatch.undo()
    assert counts["extrapolated"] <= counts["last"] - 0.3, counts
