"""Rigid bodies in maximal coordinates: mass properties, read-outs and classical motions.

References are independent of mbvi: closed-form mass properties or quadrature,
Euler's equations integrated with scipy's DOP853, the elliptic-integral period
of the compound pendulum and the steady-precession relation of the heavy top.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.integrate import quad, solve_ivp
from scipy.optimize import brentq
from scipy.spatial.transform import Rotation
from scipy.special import ellipk

import mbvi

# -- mass properties ------------------------------------------------------------------------------


def _axisymmetric_properties(profile, z0: float, z1: float) -> tuple[float, float, float]:
    """Volume and unit-density moments (Ixx, Izz) of a solid of revolution about z, by quadrature.

    ``profile(z)`` is the radius of the cross-section at height z; slices are disks.
    """
    vol = quad(lambda z: math.pi * profile(z) ** 2, z0, z1, epsabs=0, epsrel=1e-13, limit=200)[0]
    izz = quad(lambda z: 0.5 * math.pi * profile(z) ** 4, z0, z1, epsabs=0, epsrel=1e-13, limit=200)[0]
    ixx = quad(
        lambda z: math.pi * profile(z) ** 2 * (0.25 * profile(z) ** 2 + z * z),
        z0,
        z1,
        epsabs=0,
        epsrel=1e-13,
        limit=200,
    )[0]
    return vol, ixx, izz


def test_box_sphere_cylinder_mass_properties_match_closed_forms() -> None:
    rho = 750.0
    a, b, c = 0.3, 0.2, 0.5
    m, J = mbvi.Box((a, b, c)).mass_properties(rho)
    mb = rho * a * b * c
    assert m == pytest.approx(mb, rel=1e-14)
    np.testing.assert_allclose(J, mb / 12 * np.array([b * b + c * c, a * a + c * c, a * a + b * b]), rtol=1e-14)

    r = 0.2
    m, J = mbvi.Sphere(r).mass_properties(rho)
    ms = rho * 4 / 3 * math.pi * r**3
    assert m == pytest.approx(ms, rel=1e-14)
    np.testing.assert_allclose(J, np.full(3, 2 / 5 * ms * r * r), rtol=1e-14)
    # and the sphere as a solid of revolution
    _, ixx, izz = _axisymmetric_properties(lambda z: math.sqrt(max(r * r - z * z, 0.0)), -r, r)
    np.testing.assert_allclose(J, rho * np.array([ixx, ixx, izz]), rtol=1e-9)

    r, h = 0.1, 0.7
    m, J = mbvi.Cylinder(r, h).mass_properties(rho)
    mc = rho * math.pi * r * r * h
    assert m == pytest.approx(mc, rel=1e-14)
    np.testing.assert_allclose(
        J, mc * np.array([(3 * r * r + h * h) / 12, (3 * r * r + h * h) / 12, r * r / 2]), rtol=1e-14
    )


@pytest.mark.parametrize(("radius", "length"), [(0.1, 0.8), (0.25, 0.1), (0.2, 0.0)])
def test_capsule_mass_properties_match_numeric_integration(radius: float, length: float) -> None:
    half = length / 2

    def profile(z: float) -> float:
        if abs(z) <= half:
            return radius
        return math.sqrt(max(radius * radius - (abs(z) - half) ** 2, 0.0))

    rho = 1200.0
    vol, ixx, izz = _axisymmetric_properties(profile, -half - radius, half + radius)
    if length > 0:  # split at the cap seams so quad sees smooth pieces
        parts = [
            _axisymmetric_properties(profile, z0, z1)
            for z0, z1 in [(-half - radius, -half), (-half, half), (half, half + radius)]
        ]
        vol, ixx, izz = (sum(p[i] for p in parts) for i in range(3))
    m, J = mbvi.Capsule(radius, length).mass_properties(rho)
    assert m == pytest.approx(rho * vol, rel=1e-10)
    np.testing.assert_allclose(J, rho * np.array([ixx, ixx, izz]), rtol=1e-9)


def test_rigid_body_takes_mass_and_inertia_from_shape_and_density() -> None:
    shape = mbvi.Capsule(0.05, 0.4)
    body = mbvi.RigidBody("link", shape=shape, density=2700.0)
    m, J = shape.mass_properties(2700.0)
    assert body.mass == pytest.approx(m, rel=1e-14)
    np.testing.assert_allclose(np.sort(body.principal_inertia), np.sort(J), rtol=1e-12)
    np.testing.assert_allclose(body.inertia, np.diag(J), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    ("inertia", "match"),
    [
        ((1.0, 1.0, -0.1), "positive definite"),
        ((1.0, 1.0, 2.5), "triangle"),
        ((1.0, 2.0, 3.0), "triangle"),  # a flat lamina: d₃ = 0
        (np.array([[1.0, 0.2, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), "symmetric"),
        (np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]), "positive definite"),
    ],
)
def test_bad_inertia_is_a_value_error_naming_the_body(inertia, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        mbvi.RigidBody("slab", mass=1.0, inertia=inertia)
    assert "slab" in str(info.value)


# -- read-outs ------------------------------------------------------------------------------------


def _tensor(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random non-principal inertia tensor J = V diag(moments) Vᵀ (V a rotation)."""
    rng = np.random.default_rng(seed)
    moments = np.array([0.4, 0.7, 0.9]) * rng.uniform(0.8, 1.2)
    V = Rotation.random(random_state=rng).as_matrix()
    return V @ np.diag(moments) @ V.T, moments, V


def test_initial_state_energy_momentum_and_read_outs_of_a_free_body() -> None:
    J, _, _ = _tensor(1)
    R = Rotation.from_euler("zyx", [0.3, -1.1, 2.0])
    m, x, v, w = 3.0, np.array([0.2, -0.5, 1.0]), np.array([1.0, 2.0, -0.5]), np.array([0.7, -1.3, 2.1])
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("b", mass=m, inertia=J, position=x, orientation=R, velocity=v, angular_velocity=w))
    traj = mbvi.simulate(scene, 0.0, 1e-3)
    Rm = R.as_matrix()
    J_world = Rm @ J @ Rm.T
    np.testing.assert_allclose(traj.rotation("b")[0], Rm, atol=1e-14)
    np.testing.assert_allclose(traj.angular_velocity("b")[0], w, rtol=1e-13)
    np.testing.assert_allclose(traj.position("b")[0], x, rtol=1e-15)
    assert traj.kinetic[0] == pytest.approx(0.5 * m * v @ v + 0.5 * w @ J_world @ w, rel=1e-13)
    np.testing.assert_allclose(traj.momentum[0], m * v, rtol=1e-14)
    np.testing.assert_allclose(traj.angular_momentum[0], m * np.cross(x, v) + J_world @ w, rtol=1e-13)
    anchor = np.array([0.1, 0.2, -0.3])
    np.testing.assert_allclose(traj.point("b", anchor)[0], x + Rm @ anchor, atol=1e-14)


# -- the free body: Dzhanibekov's intermediate-axis flip -------------------------------------------

J_FREE = np.array([1.0, 2.0, 2.5])
W_FREE = np.array([1e-2, 4.0, 1e-2])  # mostly about the intermediate axis, slightly perturbed


def _euler_reference(t: np.ndarray, J: np.ndarray, w0: np.ndarray):
    """Body-frame ω(t) from Euler's equations J ω̇ = (Jω) × ω (DOP853, rtol 1e-12) and the sign changes of ω₂."""

    def rhs(_t, w):
        return np.cross(J * w, w) / J

    def flip(_t, w):
        return w[1]

    sol = solve_ivp(rhs, (0.0, t[-1]), w0, method="DOP853", rtol=1e-12, atol=1e-12, events=flip, dense_output=True)
    return sol.sol(t).T, sol.t_events[0]


def _free_spin(dt: float, t_end: float, integrator: str = "verlet"):
    R0 = Rotation.from_euler("xyz", [0.4, -0.2, 1.0])  # the body axes need not be the world axes
    scene = mbvi.Scene(gravity=None)
    scene.add(
        mbvi.RigidBody(
            "tee",
            mass=1.3,
            inertia=J_FREE,
            position=(0.1, 0.2, 0.3),
            orientation=R0,
            velocity=(0.2, 0.0, -0.1),
            angular_velocity=R0.apply(W_FREE),
        )
    )
    traj = mbvi.simulate(scene, t_end, dt, integrator)
    R = traj.rotation("tee")
    w_body = np.einsum("nji,nj->ni", R, traj.angular_velocity("tee"))
    return traj, R, w_body


def _sign_changes(t: np.ndarray, y: np.ndarray) -> np.ndarray:
    i = np.where(np.sign(y[:-1]) != np.sign(y[1:]))[0]
    return t[i] - y[i] * (t[i + 1] - t[i]) / (y[i + 1] - y[i])


def test_dzhanibekov_flip_happens_when_euler_equations_predict() -> None:
    t_end, dt = 15.0, 2e-3
    traj, R, w_body = _free_spin(dt, t_end)
    ref, ref_flips = _euler_reference(traj.t, J_FREE, W_FREE)
    assert len(ref_flips) == 2  # two flips of the intermediate axis within t_end
    flips = _sign_changes(traj.t, w_body[:, 1])
    assert len(flips) == len(ref_flips)
    np.testing.assert_allclose(flips, ref_flips, rtol=1e-4)
    # the whole body-frame angular velocity history
    assert np.max(np.abs(w_body - ref)) <= 1e-3 * np.linalg.norm(W_FREE)
    # invariants
    E = traj.energy
    assert np.ptp(E) <= 1e-3 * E[0]
    L = traj.angular_momentum
    assert np.max(np.abs(L - L[0])) <= 1e-9 * np.linalg.norm(L[0])
    P = traj.momentum
    assert np.max(np.abs(P - P[0])) <= 1e-12 * np.linalg.norm(P[0])
    assert np.max(np.abs(np.einsum("nki,nkj->nij", R, R) - np.eye(3))) <= 1e-10
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-10)
    # the centre of mass moves uniformly
    np.testing.assert_allclose(traj.position("tee"), (0.1, 0.2, 0.3) + traj.t[:, None] * [0.2, 0.0, -0.1], atol=1e-11)


def test_free_body_converges_at_second_order_to_euler_equations() -> None:
    errors = []
    for dt in (4e-3, 2e-3):
        traj, _, w_body = _free_spin(dt, 6.0)
        ref, _ = _euler_reference(traj.t, J_FREE, W_FREE)
        errors.append(np.max(np.abs(w_body - ref)))
    order = math.log2(errors[0] / errors[1])
    assert 1.8 <= order <= 2.2, f"measured order {order:.2f} (errors {errors})"


@pytest.mark.parametrize(("integrator", "dt"), [("yoshida4", 4e-3), ("midpoint", 4e-3)])
def test_free_body_under_other_variational_integrators(integrator: str, dt: float) -> None:
    traj, R, w_body = _free_spin(dt, 6.0, integrator)
    ref, ref_flips = _euler_reference(traj.t, J_FREE, W_FREE)
    tol = 1e-5 if integrator == "yoshida4" else 3e-3
    assert np.max(np.abs(w_body - ref)) <= tol * np.linalg.norm(W_FREE)
    np.testing.assert_allclose(_sign_changes(traj.t, w_body[:, 1]), ref_flips, rtol=1e-3)
    L = traj.angular_momentum
    assert np.max(np.abs(L - L[0])) <= 1e-9 * np.linalg.norm(L[0])
    assert np.ptp(traj.energy) <= 1e-3 * traj.energy[0]
    assert np.max(np.abs(np.einsum("nki,nkj->nij", R, R) - np.eye(3))) <= 1e-10


# -- equivalent descriptions give the same motion -------------------------------------------------


def _hanging_body(inertia, orientation, anchor_b) -> mbvi.Scene:
    """A rigid body hanging from the world by a rod at a body-frame anchor, swinging in 3D."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(
        mbvi.RigidBody(
            "b",
            mass=1.5,
            inertia=inertia,
            position=(0.3, 0.1, -0.8),
            orientation=orientation,
            velocity=(0.4, -0.3, 0.0),
            angular_velocity=(1.0, -2.0, 0.5),
        )
    )
    scene.add(mbvi.Rod("world", "b", anchor_a=(0.0, 0.0, 0.2), anchor_b=anchor_b))
    return scene


def test_full_inertia_tensor_moves_like_the_rotated_principal_body() -> None:
    J, moments, V = _tensor(7)
    R_user = Rotation.from_euler("xyz", [0.3, 0.8, -0.4]).as_matrix()
    anchor = np.array([0.05, -0.1, 0.2])
    # the same physical body, described in its user frame (full tensor) or in its principal frame
    full = _hanging_body(J, R_user, anchor)
    principal = _hanging_body(moments, R_user @ V, V.T @ anchor)
    with pytest.warns(mbvi.ConstraintWarning):  # the random velocities are projected onto the rod
        a = mbvi.simulate(full, 1.0, 1e-3)
    with pytest.warns(mbvi.ConstraintWarning):
        b = mbvi.simulate(principal, 1.0, 1e-3)
    np.testing.assert_allclose(a.position("b"), b.position("b"), atol=1e-10)
    np.testing.assert_allclose(a.rotation("b"), b.rotation("b") @ V.T, atol=1e-10)
    np.testing.assert_allclose(a.angular_velocity("b"), b.angular_velocity("b"), atol=1e-9)
    # two coordinate descriptions, each SHAKE converged to its 1e-12 tolerance: energies agree to ~1e-12 a step
    np.testing.assert_allclose(a.energy, b.energy, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(a.point("b", anchor), b.point("b", V.T @ anchor), atol=1e-10)
    # the rod holds its length between the two anchors
    length = np.linalg.norm(a.point("b", anchor) - (0.0, 0.0, 0.2), axis=1)
    np.testing.assert_allclose(length, length[0], atol=1e-10)


def test_orientation_as_scipy_rotation_equals_the_matrix() -> None:
    rot = Rotation.from_rotvec([0.4, -1.2, 0.7])
    with pytest.warns(mbvi.ConstraintWarning):
        a = mbvi.simulate(_hanging_body((0.2, 0.3, 0.4), rot, (0.0, 0.0, 0.1)), 0.3, 1e-3)
    with pytest.warns(mbvi.ConstraintWarning):
        b = mbvi.simulate(_hanging_body((0.2, 0.3, 0.4), rot.as_matrix(), (0.0, 0.0, 0.1)), 0.3, 1e-3)
    np.testing.assert_allclose(a.q, b.q, atol=1e-14)
    np.testing.assert_allclose(a.rotation("b")[0], rot.as_matrix(), atol=1e-14)


def test_orientation_that_is_not_a_rotation_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="rotation"):
        mbvi.RigidBody("b", mass=1.0, inertia=(1, 1, 1), orientation=np.diag([1.0, 1.0, -1.0]))
    with pytest.raises(ValueError, match="rotation"):
        mbvi.RigidBody("b", mass=1.0, inertia=(1, 1, 1), orientation=2 * np.eye(3))


def test_a_stack_of_rotations_is_a_value_error_naming_the_body() -> None:
    """A scipy Rotation holding one or two rotations was taken as an orientation of shape (1, 3, 3) or
    (2, 3, 3), and the run failed far away (an IndexError in a cross product, naming nothing)."""
    for stack in ([[0.1, 0.2, 0.3]], [[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]]):
        with pytest.raises(ValueError, match=rf"RigidBody 'link': orientation must be a single rotation.*{len(stack)}"):
            mbvi.RigidBody("link", mass=1.0, inertia=(1, 1, 1), orientation=Rotation.from_rotvec(stack))


@pytest.mark.parametrize("scale", [1.0, 1e-6, 1e-10])
def test_an_asymmetric_inertia_tensor_is_refused_at_every_scale(scale: float) -> None:
    """At 1e-10 kg m² (a millimetre body) the tolerance, absolute below 1 kg m², let J₀₁ = 1, J₁₀ = 0 through,
    silently made 0.5 each."""
    J = scale * np.array([[2.0, 1.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.0]])
    with pytest.raises(ValueError, match=r"RigidBody 'chip': inertia tensor must be symmetric"):
        mbvi.RigidBody("chip", mass=1e-3, inertia=J)
    rounded = 0.5 * (J + J.T)
    rounded[0, 1] += scale * 1e-12  # asymmetric by round-off only: taken, symmetrized
    body = mbvi.RigidBody("chip", mass=1e-3, inertia=rounded)
    np.testing.assert_allclose(body.inertia, 0.5 * (J + J.T), rtol=0, atol=scale * 1e-11)


# -- physical pendulum on a revolute joint ---------------------------------------------------------


def test_physical_pendulum_period_matches_elliptic_integral() -> None:
    m, ell, g, theta0 = 2.0, 0.4, 9.81, 1.0
    J, _, _ = _tensor(3)
    J = 0.05 * J  # a generic body whose principal axes are not the hinge axis
    axis = np.array([0.0, 1.0, 0.0])
    tilt = Rotation.from_rotvec(theta0 * axis)
    R0 = tilt * Rotation.from_euler("xyz", [0.3, 0.2, -0.5])
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    scene.add(mbvi.RigidBody("p", mass=m, inertia=J, position=tilt.apply([0.0, 0.0, -ell]), orientation=R0))
    scene.add(mbvi.Revolute("world", "p", anchor=(0.0, 0.0, 0.0), axis=axis, name="hinge"))
    traj = mbvi.simulate(scene, 6.0, 1e-3)
    # compound pendulum: I_hinge = nᵀ J_world n + m ℓ², equivalent length I_hinge / (m ℓ)
    Rm = R0.as_matrix()
    I_hinge = axis @ Rm @ J @ Rm.T @ axis + m * ell * ell
    period = 4 * math.sqrt(I_hinge / (m * g * ell)) * ellipk(math.sin(theta0 / 2) ** 2)
    theta = theta0 + traj.joint_angle("hinge")
    t = traj.t
    i = np.where((theta[:-1] > 0) & (theta[1:] <= 0))[0]  # downward zero crossings (θ̈ = 0 there)
    crossings = t[i] + theta[i] / (theta[i] - theta[i + 1]) * (t[i + 1] - t[i])
    assert len(crossings) >= 3
    np.testing.assert_allclose(np.diff(crossings), period, rtol=1e-4)
    # the swing keeps its amplitude, and the com stays on its circle about the hinge
    assert np.max(np.abs(theta)) == pytest.approx(theta0, rel=1e-4)
    np.testing.assert_allclose(np.linalg.norm(traj.position("p"), axis=1), ell, rtol=1e-11)
    np.testing.assert_allclose(traj.position("p")[:, 1], 0.0, atol=1e-11)


# -- heavy symmetric top --------------------------------------------------------------------------


def _top(theta: float, spin: float, precession: float, m=1.0, ell=0.1, A=0.003, C=0.005, g=9.81):
    tilt = Rotation.from_rotvec([theta, 0.0, 0.0])
    e3 = tilt.apply([0.0, 0.0, 1.0])
    omega = precession * np.array([0.0, 0.0, 1.0]) + (spin - precession * math.cos(theta)) * e3
    com = ell * e3
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    scene.add(
        mbvi.RigidBody(
            "top",
            mass=m,
            inertia=(A, A, C),
            position=com,
            orientation=tilt,
            velocity=np.cross(omega, com),
            angular_velocity=omega,
        )
    )
    scene.add(mbvi.Spherical("world", "top", anchor=(0.0, 0.0, 0.0), name="tip"))
    return scene


@pytest.mark.parametrize("spin", [60.0, 200.0])
def test_heavy_top_steady_precession_rate(spin: float) -> None:
    m, ell, A, C, g, theta = 1.0, 0.1, 0.003, 0.005, 9.81, 0.5
    A_tip = A + m * ell * ell  # transverse moment about the tip
    # steady precession: A_tip cosθ Ω² − C ω₃ Ω + m g ℓ = 0, slow root
    b = C * spin
    exact = (b - math.sqrt(b * b - 4 * A_tip * math.cos(theta) * m * g * ell)) / (2 * A_tip * math.cos(theta))
    gyroscopic = m * g * ell / (C * spin)
    traj = mbvi.simulate(_top(theta, spin, exact, m, ell, A, C, g), 1.5, 5e-4)
    e3 = traj.rotation("top")[:, :, 2]
    phi = np.unwrap(np.arctan2(e3[:, 1], e3[:, 0]))
    rate = np.polyfit(traj.t, phi, 1)[0]
    assert rate == pytest.approx(exact, rel=1e-4)
    # no nutation: the axis keeps its tilt, and the spin about it is constant
    np.testing.assert_allclose(np.arccos(np.clip(e3[:, 2], -1, 1)), theta, atol=1e-4)
    spin_t = np.einsum("ij,ij->i", traj.angular_velocity("top"), e3)
    np.testing.assert_allclose(spin_t, spin, rtol=1e-9)
    # the fast-top value m g ℓ / (C ω₃) is off by the first correction A cosθ m g ℓ / (C ω₃)²
    correction = A_tip * math.cos(theta) * m * g * ell / (C * spin) ** 2
    assert rate / gyroscopic - 1 == pytest.approx(correction, rel=0.1 + 3 * correction)
    # L_z (about the vertical through the fixed tip) is conserved: gravity has no torque about it
    Lz = traj.angular_momentum[:, 2]
    np.testing.assert_allclose(Lz, Lz[0], rtol=1e-10)


def test_top_started_off_steady_precession_nutates() -> None:
    """The test above can fail: with no initial precession the axis nods (nutation) instead."""
    traj = mbvi.simulate(_top(0.5, 60.0, 0.0), 0.5, 5e-4)
    tilt = np.arccos(traj.rotation("top")[:, 2, 2])
    assert np.ptp(tilt) > 1e-3


# -- the RATTLE step limit ------------------------------------------------------------------------


def _rotor_and_idle(spin: float, gravity=(0.0, 0.0, -9.81)) -> mbvi.Scene:
    w = spin * np.array([0.3, 1.0, 0.1]) / np.linalg.norm([0.3, 1.0, 0.1])
    scene = mbvi.Scene(gravity=gravity)
    scene.add(mbvi.RigidBody("rotor", mass=1.0, inertia=(1.0, 2.0, 2.5), angular_velocity=w))
    scene.add(mbvi.RigidBody("idle", mass=1.0, inertia=(1.0, 1.0, 1.0), position=(1, 0, 0)))
    return scene


def test_spin_beyond_the_rattle_limit_under_midpoint_raises_a_solver_error_naming_the_body() -> None:
    """The implicit midpoint rule steps the rotation columns: no step once h|ω| ≳ 1, and it says so."""
    dt, spin = 1e-3, 1050.0  # h|ω| = 1.05
    scene = _rotor_and_idle(spin)
    with pytest.raises(mbvi.SolverError) as info:
        mbvi.simulate(scene, 0.01, dt, "midpoint")
    err = info.value
    assert "rotor" in str(err) and "h|ω|" in str(err)
    assert err.step == 0 and len(err.trajectory.t) == 1
    assert err.suggested_dt is not None and 0 < err.suggested_dt * spin < 1.0
    traj = mbvi.simulate(scene, 0.01, err.suggested_dt, "midpoint")
    assert np.isfinite(traj.q).all()


@pytest.mark.parametrize("integrator", ["verlet", "symplectic_euler_a", "symplectic_euler_b", "yoshida4"])
@pytest.mark.parametrize("turn", [1.05, 3.0, 10.0])
# 10 rad a step, substepping off: the momentum maps stay exact but the energy is off by 12 %, which simulate says
@pytest.mark.filterwarnings("ignore:integrator .* the energy balance:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:integrator .* with max_turn=inf turned rigid body:RuntimeWarning")
def test_spin_beyond_the_rattle_limit_is_stepped_on_the_lie_group(integrator: str, turn: float) -> None:
    """h|ω| = 1.05 … 10 rad per step, refinement off: every step exists and keeps the momentum maps exactly."""
    dt = 1e-3
    scene = _rotor_and_idle(turn / dt, gravity=None)
    traj = mbvi.simulate(scene, 0.2, dt, integrator, max_turn=math.inf)
    assert traj.info["refined_steps"] == 0
    L = traj.angular_momentum
    assert np.max(np.abs(L - L[0])) <= 1e-12 * np.linalg.norm(L[0])
    R = traj.rotation("rotor")
    assert np.max(np.abs(np.einsum("nki,nkj->nij", R, R) - np.eye(3))) <= 1e-12
    # |π| is a Casimir of the body-frame motion: the body-frame momentum keeps its length
    pi = np.einsum("nji,nj->ni", R, traj.angular_velocity("rotor")) * [1.0, 2.0, 2.5]
    np.testing.assert_allclose(np.linalg.norm(pi, axis=1), np.linalg.norm(pi[0]), rtol=1e-12)


@pytest.mark.parametrize("turn", [0.5, 0.9, 2.0, 10.0])
@pytest.mark.filterwarnings("ignore:integrator .* with max_turn=inf turned rigid body:RuntimeWarning")
def test_uniform_spin_turns_by_the_cayley_angle_per_step(turn: float) -> None:
    """About a principal axis a step turns by 2 atan(x/2), x + x³/4 = h|ω| (the Cayley discrete Lagrangian)."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("rotor", mass=1.0, inertia=(1.0, 2.0, 2.5), angular_velocity=(0.0, 0.0, turn / 1e-3)))
    traj = mbvi.simulate(scene, 0.01, 1e-3, max_turn=math.inf)
    x = brentq(lambda x: x + x**3 / 4 - turn, 0.0, turn)
    R = traj.rotation("rotor")
    per_step = [Rotation.from_matrix(R[k].T @ R[k + 1]).magnitude() for k in range(len(R) - 1)]
    np.testing.assert_allclose(per_step, 2 * math.atan(x / 2), rtol=1e-12)
    np.testing.assert_allclose(traj.angular_velocity("rotor")[:, 2], turn / 1e-3, rtol=1e-13)


def test_substeps_make_a_fast_body_s_run_the_same_at_every_step_above_max_turn_over_omega() -> None:
    """What docs/integrators.md tells a convergence study: with the default ``max_turn`` a body at |ω| = 100 rad/s
    is stepped at max_turn/|ω| ≈ 1e-3 s (a power-of-two fraction of dt) whatever dt above it is asked for, so
    halving dt changes nothing and the runs say so (``refined_steps``); with ``max_turn=math.inf`` the error
    falls as dt² (order 2 between the two steps, against a run at a quarter of the smaller one)."""
    scene = _rotor_and_idle(100.0, gravity=None)

    def final_rotation(dt: float, **options) -> tuple[np.ndarray, dict]:
        traj = mbvi.simulate(scene, 0.4, dt, **options)
        return traj.rotation("rotor")[-1], traj.info

    coarse, info = final_rotation(8e-3)
    fine, _ = final_rotation(4e-3)
    assert info["refined_steps"] > 0
    np.testing.assert_allclose(coarse, fine, rtol=0, atol=1e-10)  # the same substeps of 1e-3 s
    reference, _ = final_rotation(2.5e-4, max_turn=math.inf)
    e_coarse = np.abs(final_rotation(2e-3, max_turn=math.inf)[0] - reference).max()
    e_fine = np.abs(final_rotation(1e-3, max_turn=math.inf)[0] - reference).max()
    order = math.log2(e_coarse / e_fine)
    assert 1.7 <= order <= 2.4, f"measured order {order:.2f} ({e_coarse:.3g}, {e_fine:.3g})"


def _gimbal() -> mbvi.Scene:
    """A frame yawing at 2 rad/s about z carrying a wheel spinning at 1000 rad/s on an axle along x (no gravity)."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("frame", mass=1.0, inertia=(0.1, 0.1, 0.15), angular_velocity=(0.0, 0.0, 2.0)))
    scene.add(mbvi.RigidBody("wheel", mass=0.5, inertia=(0.02, 0.011, 0.011), angular_velocity=(1000.0, 0.0, 2.0)))
    scene.add(mbvi.Revolute("world", "frame", anchor=(0, 0, 0), axis=(0, 0, 1), name="yaw"))
    scene.add(mbvi.Revolute("frame", "wheel", anchor=(0, 0, 0), axis=(1, 0, 0), name="axle"))
    return scene


def test_a_spin_past_a_radian_a_step_with_max_turn_off_warns_naming_the_body() -> None:
    """max_turn=inf at dt = 1e-2 (h|ω| = 10): the yaw the wheel rides on ran 14 % slow (1.728 rad at 1 s for 2), its
    energy exact to 1e-14, silently; it warns now, naming the wheel. The default max_turn keeps the yaw."""
    with pytest.warns(RuntimeWarning, match=r"max_turn=inf turned rigid body 'wheel' by h\|ω\| = 10 rad"):
        off = mbvi.simulate(_gimbal(), 1.0, 1e-2, max_turn=math.inf)
    assert abs(off.joint_angle("yaw")[-1] - 2.0) > 0.1  # what it warns of
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        kept = mbvi.simulate(_gimbal(), 1.0, 1e-2)
        slow = mbvi.simulate(_gimbal(), 1.0, 1e-4, max_turn=math.inf)  # h|ω| = 0.1: silent
    assert abs(kept.joint_angle("yaw")[-1] - 2.0) < 1e-2 and abs(slow.joint_angle("yaw")[-1] - 2.0) < 1e-3
    with warnings.catch_warnings(record=True) as caught:  # an integrator with no turn rule is not told of one
        warnings.simplefilter("always")
        mbvi.simulate(_gimbal(), 0.02, 2e-3, "implicit_euler")  # h|ω| = 2
    assert not [w for w in caught if "max_turn" in str(w.message)]


def test_a_batch_member_counts_its_steps_taken_in_substeps_as_its_run_alone_does() -> None:
    """A top at 400 rad/s at dt = 2e-3 (h|ω| = 0.8: every step in substeps): the serial run and a Simulator said
    refined_steps = 100; the same member of simulate_batch, bit for bit the same states, had no refined_steps."""
    tilt = Rotation.from_rotvec([0.5, 0.0, 0.0]).as_matrix()
    w = 400.0 * tilt[:, 2]
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("top", mass=1.0, inertia=(0.02, 0.02, 0.03), position=0.1 * tilt[:, 2],
                             orientation=tilt, velocity=np.cross(w, 0.1 * tilt[:, 2]), angular_velocity=w))  # fmt: skip
    scene.add(mbvi.Spherical("world", "top", anchor=(0.0, 0.0, 0.0)))
    alone = mbvi.simulate(scene, 0.2, 2e-3)
    (member,) = mbvi.simulate_batch(scene, 0.2, 2e-3, initial_states=(alone.q[:1], alone.v[:1]))
    np.testing.assert_array_equal(member.q, alone.q)
    assert alone.info["refined_steps"] == 100 and member.info["refined_steps"] == 100
    shorter = mbvi.simulate(scene, 0.201, 2e-3)  # a shorter last step: the head's count and the last step's
    (member,) = mbvi.simulate_batch(scene, 0.201, 2e-3, initial_states=(alone.q[:1], alone.v[:1]))
    assert member.info["refined_steps"] == shorter.info["refined_steps"] >= 100
