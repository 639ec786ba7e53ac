"""Tests of the mbvi-compositions plugin: registration, the weights' order conditions, a run against a closed form.

Run with ``pytest plugins/mbvi-compositions`` after ``pip install -e plugins/mbvi-compositions``. mbvi's own suite
measures every registered integrator's order (``tests/test_integrators.py``), these included.
"""

from __future__ import annotations

import importlib.metadata as md
import math

import numpy as np
import pytest
from mbvi_compositions import ForestRuth, Suzuki4, Yoshida6

import mbvi


def test_registered_through_the_entry_point():
    eps = {ep.name: ep.value for ep in md.entry_points(group="mbvi")}
    assert eps.get("compositions") == "mbvi_compositions"
    for cls in (ForestRuth, Suzuki4, Yoshida6):
        assert mbvi.get_integrator(cls.name) is cls
        assert cls.symplectic and cls.variational


@pytest.mark.parametrize("cls", [ForestRuth, Suzuki4, Yoshida6])
def test_weights_solve_the_order_conditions(cls):
    """Symmetric, summing to 1; Σ wᵢ³ = 0 (order 4), and Σ wᵢ⁵ = 0 too for order 6 (the conditions of a symmetric
    composition of a symmetric second-order method, Hairer–Lubich–Wanner V.3.2)."""
    w = np.array(cls.weights)
    assert np.allclose(w, w[::-1], rtol=0, atol=0)
    assert math.fsum(w) == pytest.approx(1.0, abs=1e-15)
    assert abs(np.sum(w**3)) <= 1e-12
    if cls.order >= 6:
        assert abs(np.sum(w**5)) <= 1e-12


@pytest.mark.parametrize("name", ["forest_ruth", "suzuki4", "yoshida6"])
def test_harmonic_oscillator_to_its_order(name):
    """A particle on a spring (ω = 2): x(t) = cos 2t; halving dt divides the error by 2^order."""
    cls = mbvi.get_integrator(name)
    errors = []
    dts = (0.2, 0.1) if cls.order >= 6 else (0.1, 0.05)
    for dt in dts:
        scene = mbvi.Scene(gravity=None)
        scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0)))
        scene.add(mbvi.Spring("world", "p", stiffness=4.0, rest_length=0.0))
        traj = mbvi.simulate(scene, 4.0, dt, name)
        errors.append(abs(traj.position("p")[-1, 0] - math.cos(8.0)))
    assert math.log2(errors[0] / errors[1]) == pytest.approx(cls.order, abs=0.35)
