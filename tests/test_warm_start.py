"""SHAKE's warm start: the multipliers extrapolated from the last steps.

The constraint impulses of a smooth motion change by O(h) a step, so the
linear extrapolation 2Λₖ − Λₖ₋₁ misses the next one by O(h²) where the last
one misses it by O(h), and a cubic through the last four by O(h⁴): SHAKE then
starts closer to its solution and needs fewer iterations. The order is the
one that best predicted the last step. The solution itself is not changed
(SHAKE converges to the same tolerance), which the agreement tests of
``test_engine.py`` hold.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
from scene_loader import SCENES, load_scene, rigid_chain, verlet_drifts

import mbvi
from mbvi.engine import kernels as K

mbvi.integrators()  # load the built-in plugins so their modules can be reached
RATTLE = sys.modules["mbvi.integrators.rattle"]


def _double_pendulum() -> mbvi.Scene:
    """``scenes/double_pendulum.py`` as built by default: both rods released horizontal."""
    return load_scene(SCENES / "double_pendulum.py").build()


def _predictor(impl: str):
    return RATTLE.predict_multipliers if impl == "numpy" else K.predict_multipliers


@pytest.mark.parametrize("impl", ["numpy", "compiled"])
def test_prediction_rule(impl: str) -> None:
    """Cold (all zero) → nothing to extrapolate from; one known step → kept; two → 2Λₖ − Λₖ₋₁."""
    predict = _predictor(impl)
    lam, hist = np.zeros(2), np.zeros((4, 2))
    predict(lam, hist)  # a cold start stays cold and forgets any history
    assert np.all(lam == 0.0) and np.all(np.isnan(hist))
    lam[:] = (3.0, -1.0)  # the first converged multipliers: no history yet
    predict(lam, hist)
    np.testing.assert_array_equal(lam, (3.0, -1.0))
    np.testing.assert_array_equal(hist[0], (3.0, -1.0))
    assert np.all(np.isnan(hist[1:]))
    lam[:] = (4.0, -0.5)  # the second: extrapolate linearly (too short a history to compare orders)
    predict(lam, hist)
    np.testing.assert_array_equal(lam, (5.0, 0.0))
    np.testing.assert_array_equal(hist[:2], [(4.0, -0.5), (3.0, -1.0)])
    lam[:] = 0.0  # a cold start again (a refined step): the history goes
    predict(lam, hist)
    assert np.all(lam == 0.0) and np.all(np.isnan(hist))


@pytest.mark.parametrize("impl", ["numpy", "compiled"])
def test_cubic_multipliers_are_predicted_exactly(impl: str) -> None:
    """Multipliers on a cubic in time: once four steps are known the cubic is chosen and is exact."""
    predict = _predictor(impl)
    cubic = lambda k: np.array([1.0 + 0.5 * k - 0.25 * k**2 + 0.125 * k**3, 2.0 - k**3 / 16.0])  # noqa: E731
    lam, hist = np.zeros(2), np.zeros((4, 2))
    for k in range(8):
        lam[:] = cubic(k)  # what SHAKE converged to at step k
        predict(lam, hist)
        if k >= 4:
            np.testing.assert_allclose(lam, cubic(k + 1), rtol=1e-14, atol=1e-13)
    np.testing.assert_array_equal(hist, [cubic(7), cubic(6), cubic(5), cubic(4)])


@pytest.mark.parametrize("impl", ["numpy", "compiled"])
def test_oscillating_multipliers_are_not_extrapolated(impl: str) -> None:
    """Multipliers that flip sign every step (a motion not resolved by the step): every polynomial through
    them predicts worse than the last value, so the last value is kept instead of amplified."""
    predict = _predictor(impl)
    lam, hist = np.zeros(1), np.zeros((4, 1))
    for k in range(8):
        lam[:] = 1.0 + 0.5 * (-1) ** k
        predict(lam, hist)
        if k >= 2:  # two steps known: orders can be compared
            assert lam[0] == 1.0 + 0.5 * (-1) ** k


def test_compiled_prediction_is_the_numpy_one_bit_for_bit() -> None:
    """The two twins do the same operations: a noisy smooth sequence gives identical warm starts."""
    rng = np.random.default_rng(3)
    lam_n, hist_n, lam_c, hist_c = np.zeros(5), np.zeros((4, 5)), np.zeros(5), np.zeros((4, 5))
    for k in range(40):
        value = np.sin(0.1 * k + np.arange(5)) + 1e-6 * rng.standard_normal(5) * (k % 7 == 0)
        lam_n[:] = lam_c[:] = value
        RATTLE.predict_multipliers(lam_n, hist_n)
        K.predict_multipliers(lam_c, hist_c)
        np.testing.assert_array_equal(lam_n, lam_c)
        np.testing.assert_array_equal(hist_n, hist_c)


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


def _linear(lam: np.ndarray, hist: np.ndarray) -> None:
    """The linear rule alone, 2Λₖ − Λₖ₋₁, as a reference."""
    cold = not np.any(lam)
    now = lam.copy()
    if not cold and not np.isnan(hist[0, 0]):
        lam[:] = 2.0 * now - hist[0]
    hist[0] = np.nan if cold else now


def test_extrapolated_start_saves_shake_iterations(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted on the NumPy path: constraint evaluations per step from the last step's multipliers, their
    linear extrapolation and the order chosen by the last step's miss (on the swinging double pendulum
    about 2.7, 2.0 and 1.7: the chosen order often needs a single drift)."""
    system = mbvi.assemble(_double_pendulum())
    counts = {}
    for label, rule in (("last", lambda lam, hist: None), ("linear", _linear), ("chosen", None)):
        if rule is not None:
            monkeypatch.setattr(RATTLE, "predict_multipliers", rule)
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
    assert counts["linear"] <= counts["last"] - 0.3, counts
    assert counts["chosen"] <= counts["linear"] - 0.2, counts


def test_rigid_chain_orders_are_compared_by_the_impulse_they_apply() -> None:
    """A 32-link rigid chain whipping after it swung down (3000 steps from 0.5 s in): its multipliers carry
    noise along the soft modes of A = G M⁻¹ Gᵀ, which moves nothing but, measured on Λ, hides how much better
    the cubic predicts. Compared by the impulse M⁻¹GᵀΛ each order would have applied, the warm start needs
    fewer constrained drifts (2.24 a step against 2.28) and fewer factorizations of A (839 against 925)."""
    system = mbvi.assemble(rigid_chain(32))
    _, Q, V = mbvi.get_integrator("verlet")(system, 1e-3).integrate(system.initial_state(), 0.0, 500, save_every=500)
    start = mbvi.State(Q[-1], V[-1])
    drifts_z, factors_z = verlet_drifts(system, start, 3000, by_impulse=True)
    drifts_lam, factors_lam = verlet_drifts(system, start, 3000, by_impulse=False)
    assert drifts_z <= 2.26 * 3000, drifts_z
    assert drifts_lam >= drifts_z + 60, (drifts_lam, drifts_z)
    assert factors_lam >= factors_z + 40, (factors_lam, factors_z)
