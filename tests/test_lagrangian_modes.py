"""``mbvi.modes`` of a LagrangianSystem: small oscillations in the system's own coordinates, against closed
forms and against the same mechanism written as a scene."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp

import mbvi

G = 9.81
t1, t2, w1, w2 = sp.symbols("theta1 theta2 omega1 omega2")
x, y, vx, vy = sp.symbols("x y v_x v_y")


def double_pendulum(m1: float, m2: float, l1: float, l2: float) -> tuple[mbvi.LagrangianSystem, np.ndarray, np.ndarray]:
    """The double pendulum in its two angles (a configuration-dependent inertia), with M and K at the bottom."""
    T = (m1 + m2) * l1**2 * w1**2 / 2 + m2 * l2**2 * w2**2 / 2 + m2 * l1 * l2 * w1 * w2 * sp.cos(t1 - t2)
    U = -(m1 + m2) * G * l1 * sp.cos(t1) - m2 * G * l2 * sp.cos(t2)
    M = np.array([[(m1 + m2) * l1**2, m2 * l1 * l2], [m2 * l1 * l2, m2 * l2**2]])
    K = np.diag([(m1 + m2) * G * l1, m2 * G * l2])
    return mbvi.LagrangianSystem(T - U, [t1, t2], [w1, w2]), M, K


@pytest.mark.parametrize("masses", [(1.0, 1.0, 1.0, 1.0), (1.0, 2.0, 1.0, 0.5), (3.0, 0.2, 0.4, 1.5)])
def test_double_pendulum_in_its_angles_has_the_closed_form_frequencies(masses) -> None:
    system, M, K = double_pendulum(*masses)
    omega, shapes = mbvi.modes(system)
    # det(K − ω² M) = 0: a quadratic in ω², solved by hand
    a = np.linalg.det(M)
    b = -(K[0, 0] * M[1, 1] + K[1, 1] * M[0, 0])
    c = K[0, 0] * K[1, 1]
    roots = np.sort([(-b - math.sqrt(b * b - 4 * a * c)) / (2 * a), (-b + math.sqrt(b * b - 4 * a * c)) / (2 * a)])
    np.testing.assert_allclose(omega, np.sqrt(roots), rtol=1e-10)
    np.testing.assert_allclose(shapes.T @ M @ shapes, np.eye(2), atol=1e-10)
    for k in range(2):  # each shape is in the null space of K − ω² M
        np.testing.assert_allclose((K - omega[k] ** 2 * M) @ shapes[:, k], 0.0, atol=1e-9 * np.abs(K).max())


def test_the_equilibrium_or_the_system_give_the_same_modes_and_count_selects() -> None:
    system, _, _ = double_pendulum(1.0, 1.0, 1.0, 1.0)
    a = mbvi.modes(system)[0]
    b, shape = mbvi.modes(mbvi.equilibrium(system), count=1)
    np.testing.assert_allclose(b, a[:1], rtol=1e-12)
    assert shape.shape == (2, 1)


def test_a_constrained_cartesian_pendulum_oscillates_on_the_circle_tangent() -> None:
    """x, y with x² + y² = l²: one mode of ω = √(g/l), horizontal at the bottom."""
    ell = 2.0
    system = mbvi.LagrangianSystem((vx**2 + vy**2) / 2 - G * y, [x, y], [vx, vy], constraints=[x**2 + y**2 - ell**2])
    eq = mbvi.equilibrium(system, initial_state=np.array([0.3, -1.9]))
    omega, shapes = mbvi.modes(eq)
    np.testing.assert_allclose(omega, [math.sqrt(G / ell)], rtol=1e-10)
    np.testing.assert_allclose(np.abs(shapes[:, 0]), [1.0, 0.0], atol=1e-10)


def test_modes_in_joint_coordinates_match_the_scene_in_maximal_coordinates() -> None:
    """The same triple pendulum as a scene (particles on rods) and as its joint-coordinate Lagrangian."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -G))
    parent = "world"
    for i, (m, z) in enumerate(((1.0, -1.0), (0.5, -1.7), (2.0, -3.0))):
        scene.add(mbvi.Particle(f"bob{i}", mass=m, position=(0.0, 0.0, z)))
        scene.add(mbvi.Rod(parent, f"bob{i}"))
        parent = f"bob{i}"
    maximal = mbvi.modes(scene)[0]
    joint = mbvi.modes(mbvi.LagrangianSystem.from_scene(scene))[0]
    # the scene's particles also swing out of the plane: each planar frequency appears there twice
    np.testing.assert_allclose(joint, np.unique(np.round(maximal, 9))[: len(joint)], rtol=1e-8)


def test_a_gyroscopic_system_has_no_undamped_modes_and_says_so() -> None:
    """A charged particle in a magnetic field and a harmonic trap: L linear in v."""
    L = (vx**2 + vy**2) / 2 + (x * vy - y * vx) / 2 - (x**2 + y**2) / 2
    with pytest.raises(ValueError, match="gyroscopic"):
        mbvi.modes(mbvi.LagrangianSystem(L, [x, y], [vx, vy]))


def test_a_damper_is_left_out_as_for_a_scene() -> None:
    L = vx**2 / 2 - 2 * x**2
    damped = mbvi.modes(mbvi.LagrangianSystem(L, [x], [vx], force=[-0.3 * vx]))[0]
    np.testing.assert_allclose(damped, [2.0], rtol=1e-12)


def test_an_unstable_equilibrium_has_an_imaginary_frequency_returned_negative() -> None:
    """The inverted pendulum (θ from the top: U = g cos θ, l = m = 1) at its top, ω² = −g/l."""
    from mbvi.lagrangian.statics import LagrangianEquilibrium

    system = mbvi.LagrangianSystem(w1**2 / 2 - G * sp.cos(t1), [t1], [w1])
    top = LagrangianEquilibrium(
        q=np.zeros(1), multipliers=np.zeros(0), potential=G, stable=False, tangent_eigenvalues=np.array([-G]),
        iterations=0, residual=0.0, system=system,
    )  # fmt: skip
    omega, _ = mbvi.modes(top)
    np.testing.assert_allclose(omega, [-math.sqrt(G)], rtol=1e-12)
