"""Statics finds a minimum: stiff elastic ropes converge, and stationary points that are not minima are left.

Two defects of ``mbvi.equilibrium`` found in review, each checked against a closed form:

* a stiff hanging rope (a ``Beam`` without bending, EA/ℓ a million times its weight per length) did not
  converge from a horizontal start, though U − W had all but reached its minimum: the Newton model is
  accurate only over a tiny region when a swing of the rope stretches its stiff springs at second order;
* a pendulum started exactly upright (zero gradient) was returned upright, a maximum of U − W on the
  constraints, as "the equilibrium". The contract is the minimum of U − W under g(q) = 0: the solver now
  leaves such a point along its most negative curvature and descends again.

Conventions (docs/DESIGN.md): gravity's potential is −m g·x, zero at the origin, so a bob hanging a
length l below its pivot at the origin has U − W = −m g l.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scene_loader import load_scene

import mbvi
import mbvi.statics

pendulum = load_scene("loaded_pendulum")

G = 9.81


# -- a stiff rope pinned at one end hangs straight down --------------------------------------------------


def _rope(youngs_modulus: float, segments: int, end: tuple[float, float, float]) -> mbvi.Scene:
    """A 1 m rope (beam without bending) of ρ = 1000 kg/m³, A = 1e-4 m², pinned at the origin, running to ``end``."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(
        mbvi.Beam("rope", (0.0, 0.0, 0.0), end, segments, density=1000.0, area=1e-4, youngs_modulus=youngs_modulus)
    )
    scene.add(mbvi.Spherical("world", "rope[0]", anchor=(0.0, 0.0, 0.0)))
    return scene


def _hanging_rope(youngs_modulus: float, segments: int, length: float = 1.0) -> tuple[np.ndarray, float]:
    """Closed form of a pinned elastic chain hanging straight down: node heights z (m) and U − W (J).

    Lumped masses m = ρAℓ per node (half at the ends); segment j carries the weight of the nodes below it,
    T_j = g Σ_{i>j} m_i, and stretches by T_j/k with k = EA/ℓ; U − W = Σ m_i g z_i + Σ_j T_j²/(2k).
    """
    ell = length / segments
    m = np.full(segments + 1, 1000.0 * 1e-4 * ell)
    m[[0, -1]] /= 2
    k = youngs_modulus * 1e-4 / ell
    tension = G * np.cumsum(m[::-1])[::-1][1:]  # T_j, j = 0 … N−1
    z = -np.concatenate([[0.0], np.cumsum(ell + tension / k)])
    return z, float(m @ (G * z) + np.sum(tension**2) / (2 * k))


@pytest.mark.parametrize("segments", [10, 30])
def test_a_stiff_rope_released_horizontal_hangs_straight_down_as_the_elastic_chain(segments: int) -> None:
    """E = 1e9 (steel-like: EA/ℓ ~ 1e6 N/m per 0.01 kg node) failed to converge; E = 1e7 is the softer control."""
    for youngs_modulus in (1e9, 1e7):
        eq = mbvi.equilibrium(_rope(youngs_modulus, segments, (1.0, 0.0, 0.0)))
        z, potential = _hanging_rope(youngs_modulus, segments)
        x = np.array([eq.position(f"rope[{i}]") for i in range(segments + 1)])
        np.testing.assert_allclose(x[:, :2], 0.0, atol=1e-9)
        np.testing.assert_allclose(x[:, 2], z, rtol=0, atol=1e-9)
        assert eq.potential == pytest.approx(potential, rel=1e-10)
        # the inextensible chain's −M g L/2 = −0.4905 J, lowered by the stretch: −Σ T²/(2k)
        assert -0.4905 - 2e-4 < eq.potential < -0.4905
        assert eq.stable
        # the pin carries the rope's whole weight
        np.testing.assert_allclose(eq.constraint_force("world-rope[0]"), [0, 0, 0.1 * G], rtol=0, atol=1e-8)


def test_a_stiff_rope_standing_straight_up_falls_to_hang_down() -> None:
    """Straight up is a stationary point (a compressed column, zero gradient): the minimum hangs below."""
    eq = mbvi.equilibrium(_rope(1e9, 10, (0.0, 0.0, 1.0)))
    z, potential = _hanging_rope(1e9, 10)
    x = np.array([eq.position(f"rope[{i}]") for i in range(11)])
    np.testing.assert_allclose(x[:, 2], z, rtol=0, atol=1e-9)
    assert eq.potential == pytest.approx(potential, rel=1e-10)
    assert eq.stable


# -- stationary points that are not minima are left --------------------------------------------------------


@pytest.mark.parametrize("mass", [2.0, 1e15, 1e-9])
def test_a_pendulum_started_exactly_upright_is_found_hanging(mass: float) -> None:
    length = 1.5
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("bob", mass=mass, position=(0.0, 0.0, length)))
    scene.add(mbvi.Rod("world", "bob"))
    eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.position("bob"), [0.0, 0.0, -length], rtol=0, atol=1e-12)
    assert eq.potential == pytest.approx(-mass * G * length, rel=1e-10)  # U − W = −m g l
    assert eq.multipliers == pytest.approx([mass * G], rel=1e-10)  # the rod in tension, holding the weight
    assert eq.stable
    np.testing.assert_allclose(eq.tangent_eigenvalues, G / length, rtol=1e-8)  # ω² = g/l, both planes


@pytest.mark.parametrize("axis", [(0.0, 1.0, 0.0), (1.0, 0.0, 0.0), (0.6, 0.8, 0.0)])
def test_a_rigid_pendulum_on_a_revolute_started_exactly_upright_is_found_hanging(axis: tuple) -> None:
    """A 1 m bar (box 0.1 × 0.1 × 1, 2 kg) hinged at one end, its centre of mass 0.5 m straight above the hinge."""
    mass, half = 2.0, 0.5
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.RigidBody("bar", mass=mass, shape=mbvi.Box((0.1, 0.1, 2 * half)), position=(0.0, 0.0, half)))
    scene.add(mbvi.Revolute("world", "bar", anchor=(0.0, 0.0, 0.0), axis=axis))
    eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.position("bar"), [0.0, 0.0, -half], rtol=0, atol=1e-10)
    assert eq.potential == pytest.approx(-mass * G * half, rel=1e-10)  # U − W = −m g d
    np.testing.assert_allclose(eq.constraint_force("world-bar"), [0.0, 0.0, mass * G], rtol=0, atol=1e-8)
    assert eq.stable
    # the compound pendulum: ω² = m g d / J_hinge, J_hinge = m (L² + w²)/12 + m d²
    j_hinge = mass * ((2 * half) ** 2 + 0.1**2) / 12 + mass * half**2
    np.testing.assert_allclose(eq.tangent_eigenvalues, mass * G * half / j_hinge, rtol=1e-8)


def test_a_double_pendulum_started_straight_up_is_found_hanging_straight_down() -> None:
    """Both rods upright is a maximum (four directions of negative curvature): the minimum hangs both down."""
    ma, mb = 1.0, 3.0
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.Particle("a", mass=ma, position=(0.0, 0.0, 1.0)))
    scene.add(mbvi.Particle("b", mass=mb, position=(0.0, 0.0, 1.7)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.position("a"), [0.0, 0.0, -1.0], rtol=0, atol=1e-10)
    np.testing.assert_allclose(eq.position("b"), [0.0, 0.0, -1.7], rtol=0, atol=1e-10)
    assert eq.potential == pytest.approx(-(ma * 1.0 + mb * 1.7) * G, rel=1e-10)
    np.testing.assert_allclose(eq.multipliers, [(ma + mb) * G, mb * G], rtol=1e-10)
    assert eq.stable


def test_the_upright_stationary_point_is_still_there_when_asked_for() -> None:
    """``minimum=False``: the stationary point the Newton iteration reaches, whatever its stability."""
    scene = pendulum.build(mass=2.0, length=1.5, g=G, force=0.0, theta0=math.pi)
    up = mbvi.equilibrium(scene, minimum=False)
    np.testing.assert_allclose(up.position("bob"), [0.0, 0.0, 1.5], atol=1e-12)
    assert up.potential == pytest.approx(2.0 * G * 1.5, rel=1e-12)
    assert not up.stable
    down = mbvi.equilibrium(scene)
    np.testing.assert_allclose(down.position("bob"), [0.0, 0.0, -1.5], atol=1e-12)
    assert down.potential == pytest.approx(-2.0 * G * 1.5, rel=1e-10)
    with pytest.raises(ValueError, match="minimum must be True or False"):
        mbvi.equilibrium(scene, minimum="yes")


def test_a_loaded_pendulum_started_at_its_upper_balance_leans_down_at_arctan_f_over_mg() -> None:
    """Under a load f the upper balance leans at π + atan(f/(mg)), U − W = +l √(f² + (mg)²); the minimum is
    its mirror, U − W = −l √(f² + (mg)²)."""
    mass, length, force = 2.0, 1.5, 7.0
    theta_up = math.pi + math.atan2(force, mass * G)
    eq = mbvi.equilibrium(pendulum.build(mass=mass, length=length, g=G, force=force, theta0=theta_up))
    x = eq.position("bob")
    assert x[0] / -x[2] == pytest.approx(force / (mass * G), rel=1e-8)
    assert x[2] < 0
    assert eq.potential == pytest.approx(-length * math.hypot(force, mass * G), rel=1e-10)
    assert eq.stable


def test_a_hinged_bar_leaves_its_upright_maximum_but_not_a_neutral_turn() -> None:
    """Upright above a horizontal hinge, a bar is at a maximum and falls to hang below; held horizontal by a
    hinge about the vertical, turning it changes nothing (ω² is round-off, of either sign): that is no saddle,
    and the bar is returned where it is, not strictly stable, and without a warning."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.RigidBody("bar", mass=3.0, shape=mbvi.Box((0.1, 0.1, 2.0)), position=(0.0, 0.0, 1.0)))
    scene.add(mbvi.Revolute("world", "bar", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))
    eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.position("bar"), [0.0, 0.0, -1.0], rtol=0, atol=1e-10)
    assert eq.potential == pytest.approx(-3.0 * G * 1.0, rel=1e-10)
    assert eq.stable
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    scene.add(mbvi.RigidBody("bar", mass=3.0, shape=mbvi.Box((2.0, 0.1, 0.1)), position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Revolute("world", "bar", anchor=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.position("bar"), [1.0, 0.0, 0.0], atol=1e-14)
    assert eq.potential == 0.0
    assert not eq.stable
    np.testing.assert_allclose(eq.tangent_eigenvalues, 0.0, atol=1e-12)  # neutral: not a strict minimum


def test_a_saddle_that_cannot_be_left_is_returned_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no escapes allowed, the upright pendulum is returned as it is, said to be no minimum."""
    monkeypatch.setattr(mbvi.statics, "_ESCAPES", 0)
    scene = pendulum.build(mass=2.0, length=1.5, g=G, force=0.0, theta0=math.pi)
    with pytest.warns(mbvi.statics.SaddleWarning, match=r"not a minimum \(ω² = -6.54 1/s²"):
        eq = mbvi.equilibrium(scene)
    np.testing.assert_allclose(eq.position("bob"), [0.0, 0.0, 1.5], atol=1e-12)
    assert not eq.stable
