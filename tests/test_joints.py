"""Every joint type: invariants on random mechanisms, joint read-outs, and exact special cases.

The invariant tests follow Dojo's and RigidBodyDynamics.jl's practice: seeded
random trees of rigid bodies and particles joined by random joints, with random
inertias (principal moments or full tensors) and random velocities. Without
gravity and world joints, linear and angular momentum are conserved; with
gravity and world joints, the energy error stays in a band that does not grow;
the constraints hold to solver tolerance at every step.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import brentq
from scipy.spatial.transform import Rotation

import mbvi

JOINTS = ("rod", "spherical", "revolute", "prismatic", "fixed")


def _random_inertia(rng: np.random.Generator, mass: float) -> np.ndarray:
    """Inertia of a random box, as principal moments or as a full tensor in a random body frame."""
    moments = mass * mbvi.Box(tuple(rng.uniform(0.3, 0.8, 3))).unit_inertia()
    if rng.random() < 0.5:
        return moments
    V = Rotation.random(random_state=rng).as_matrix()
    return V @ np.diag(moments) @ V.T


def random_mechanism(
    seed: int,
    focus: str | None,
    *,
    bodies: int = 6,
    world: bool = False,
    gravity: bool = False,
    reverse: bool = False,
) -> tuple[mbvi.Scene, list[str]]:
    """A seeded random tree of rigid bodies and particles.

    Each joint is ``focus`` with probability 0.6 (the first two always), otherwise a
    random type (``focus=None``: always random), compatible with the bodies it joins. With ``world=False`` the tree
    is free (no joint to the world) and no joint fixes a world direction, so
    momentum is conserved; with ``world=True`` the root and possibly other
    bodies hang from the world. ``reverse=True`` lists every joint child-first,
    which describes the same mechanism.

    Returns
    -------
    scene, joint kinds used
    """
    rng = np.random.default_rng(seed)
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81) if gravity else None)
    placed: dict[str, tuple[str, np.ndarray]] = {}

    def add_body(name: str, kind: str, position: np.ndarray) -> None:
        v = rng.normal(0.0, 0.5, 3)
        mass = rng.uniform(0.5, 2.0)
        if kind == "rigid":
            scene.add(
                mbvi.RigidBody(
                    name,
                    mass=mass,
                    inertia=_random_inertia(rng, mass),
                    position=position,
                    orientation=Rotation.random(random_state=rng),
                    velocity=v,
                    angular_velocity=rng.normal(0.0, 1.0, 3),
                )
            )
        else:
            scene.add(mbvi.Particle(name, mass=mass, position=position, velocity=v))
        placed[name] = (kind, np.asarray(position, dtype=float))

    if not world:
        add_body("b0", "rigid", rng.normal(0.0, 0.3, 3))
    used = []
    for i in range(len(placed), bodies):
        if focus is not None and (i < 2 or rng.random() < 0.6):
            kind = focus
        else:
            kind = JOINTS[rng.integers(len(JOINTS))]

        def compatible(parent: str, kind: str = kind) -> bool:
            pk = "world" if parent == "world" else placed[parent][0]
            if kind == "fixed" and pk == "world":
                return False  # keep the mechanism mobile
            if kind in ("revolute", "fixed"):
                return pk != "particle"  # both ends need an orientation
            if kind == "prismatic" and not world:
                return pk == "rigid"  # a particle's sliding axis is fixed in the world
            return True

        candidates = [p for p in [*placed, *(["world"] if world else [])] if compatible(p)]
        fallback = not candidates
        if fallback:  # e.g. a weld with nothing to weld to: hang a rigid body by a ball joint instead
            kind, candidates = "spherical", [*placed, *(["world"] if world else [])]
        parent = candidates[rng.integers(len(candidates))]
        pk = "world" if parent == "world" else placed[parent][0]
        ppos = np.zeros(3) if parent == "world" else placed[parent][1]
        if fallback or kind in ("revolute", "fixed") or (kind == "prismatic" and pk == "rigid"):
            ck = "rigid"
        elif kind == "prismatic" and pk == "particle":
            ck = "particle"  # a rigid body cannot slide on a particle
        else:
            ck = ("rigid", "particle")[rng.integers(2)]
        offset = rng.normal(size=3)
        offset *= rng.uniform(0.4, 0.9) / np.linalg.norm(offset)
        name = f"b{i}"
        a, b = (name, parent) if reverse else (parent, name)
        if kind == "rod":
            add_body(name, ck, ppos + offset)
            anchor_p = {"rigid": rng.uniform(-0.2, 0.2, 3), "world": rng.uniform(-0.5, 0.5, 3)}.get(pk)
            anchor_c = rng.uniform(-0.2, 0.2, 3) if ck == "rigid" else None
            anchor_a, anchor_b = (anchor_c, anchor_p) if reverse else (anchor_p, anchor_c)
            scene.add(mbvi.Rod(a, b, anchor_a=anchor_a, anchor_b=anchor_b))
        else:
            anchor = ppos if pk == "particle" else ppos + 0.5 * offset
            add_body(name, ck, anchor if ck == "particle" else anchor + 0.5 * offset)
            if kind == "spherical":
                scene.add(mbvi.Spherical(a, b, anchor=anchor))
            elif kind == "revolute":
                scene.add(mbvi.Revolute(a, b, anchor=anchor, axis=rng.normal(size=3)))
            elif kind == "prismatic":
                scene.add(mbvi.Prismatic(a, b, axis=rng.normal(size=3), anchor=anchor))
            else:
                scene.add(mbvi.Fixed(a, b, anchor=anchor))
        used.append(kind)
    return scene, used


def _run(scene: mbvi.Scene, t_end: float, dt: float, integrator: str = "verlet") -> mbvi.Trajectory:
    # random velocities violate the joints: start from their mass-weighted projection
    state = mbvi.assemble(scene).initial_state(warn=False)
    return mbvi.simulate(scene, t_end, dt, integrator, initial_state=state)


def test_random_mechanisms_cover_every_joint_and_body_combination() -> None:
    """The generator below is not vacuous: it builds every joint type on rigid bodies and particles."""
    seen = set()
    for focus in JOINTS:
        for seed in range(2):
            for world in (False, True):
                scene, _ = random_mechanism(seed + 100 * world, focus, world=world)
                for j in scene.joints:
                    kinds = tuple("world" if n == "world" else type(scene.body(n)).__name__ for n in (j.a, j.b))
                    seen.add((type(j).__name__, *kinds))
    for joint in ("Rod", "Spherical", "Revolute", "Prismatic", "Fixed"):
        assert (joint, "RigidBody", "RigidBody") in seen
    for joint in ("Rod", "Spherical", "Revolute", "Prismatic"):  # a weld to the world only stops a tree
        assert (joint, "world", "RigidBody") in seen
    for joint in ("Rod", "Spherical", "Prismatic"):
        assert any(s[0] == joint and "Particle" in s for s in seen)


@pytest.mark.parametrize("reverse", [False, True], ids=["parent-first", "child-first"])
@pytest.mark.parametrize("focus", JOINTS)
def test_constraint_derivatives_match_finite_differences(focus: str, reverse: bool) -> None:
    """G = ∂g/∂q, Σλ∇²g, Ġv and G v of every joint type against central differences (off the manifold too)."""
    rng = np.random.default_rng(5)
    for world in (False, True):
        scene, _ = random_mechanism(11 + world, focus, world=world, reverse=reverse)
        system = mbvi.assemble(scene)
        q = system.initial_state(warn=False).q + 1e-2 * rng.normal(size=system.nq)
        v = rng.normal(size=system.nq)
        lam = rng.normal(size=system.nc)
        mbvi.check_jacobian(system.constraints, system.constraint_jacobian(q), q, rtol=1e-8, label="G")

        def weighted_force(x, system=system, lam=lam):
            return system.constraint_jacobian(x).T @ lam

        mbvi.check_jacobian(weighted_force, system.constraint_hessian(lam), q, rtol=1e-8, label="Σλ∇²g")
        G = system.constraint_jacobian(q)
        np.testing.assert_allclose(system.constraint_velocity(q, v), G @ v, rtol=1e-12, atol=1e-12)
        eps = 1e-5  # g̈ at zero acceleration: d²/dt² g(q + t v) = vᵀ∇²g v
        second = (
            system.constraints(q + eps * v) - 2 * system.constraints(q) + system.constraints(q - eps * v)
        ) / eps**2
        np.testing.assert_allclose(system.constraint_curvature(v), second, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("focus", JOINTS)
def test_listing_joints_child_first_gives_the_same_motion(focus: str) -> None:
    """Regression: a joint whose first body comes later in q once got a scrambled Jacobian."""
    trajs = []
    for reverse in (False, True):
        scene, _ = random_mechanism(21, focus, world=True, gravity=True, reverse=reverse)
        trajs.append(_run(scene, 0.5, 2e-3))
    np.testing.assert_allclose(trajs[0].q, trajs[1].q, atol=1e-8)
    assert trajs[1].constraint_error.max() <= 1e-10


def test_particle_chain_with_joints_listed_child_first() -> None:
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("a", mass=1.0, position=(1, 0, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2, 0, 0)))
    scene.add(mbvi.Rod("a", "world"))
    scene.add(mbvi.Rod("b", "a"))
    traj = mbvi.simulate(scene, 1.0, 1e-3)
    assert traj.constraint_error.max() <= 1e-10
    np.testing.assert_allclose(np.linalg.norm(traj.position("b") - traj.position("a"), axis=1), 1.0, rtol=1e-11)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("focus", JOINTS)
def test_free_random_mechanism_conserves_momentum(focus: str, seed: int) -> None:
    scene, used = random_mechanism(seed, focus, world=False, gravity=False)
    assert used.count(focus) >= 2
    traj = _run(scene, 1.0, 2e-3)
    P, L = traj.momentum, traj.angular_momentum
    assert np.linalg.norm(P[0]) > 0.1 and np.linalg.norm(L[0]) > 0.1
    assert np.max(np.abs(P - P[0])) <= 1e-9 * np.linalg.norm(P[0])
    assert np.max(np.abs(L - L[0])) <= 1e-9 * np.linalg.norm(L[0])
    assert traj.constraint_error.max() <= 1e-10
    # with no potential the energy is purely kinetic and stays in a narrow band
    assert np.ptp(traj.energy) <= 2e-3 * traj.energy[0]
    assert np.all(np.isfinite(traj.q))


def _energy_band(traj: mbvi.Trajectory) -> tuple[float, float, float, float]:
    """Energy error relative to the largest kinetic energy: band, first- and second-half bands, drift.

    The drift is the secular change |slope| T of a straight line fitted to E(t) − E₀:
    for a symplectic integrator it is a small fraction of the band (the error
    oscillates), for a drifting method it is the whole band.
    """
    err = (traj.energy - traj.energy[0]) / traj.kinetic.max()
    half = len(err) // 2
    first, second = float(np.abs(err[:half]).max()), float(np.abs(err[half:]).max())
    drift = abs(np.polyfit(traj.t - traj.t[0], err, 1)[0]) * (traj.t[-1] - traj.t[0])
    return max(first, second), first, second, float(drift)


def _assert_no_drift(traj: mbvi.Trajectory, band_max: float) -> None:
    band, first, second, drift = _energy_band(traj)
    assert band <= band_max
    roundoff = 1e-11  # a mechanism that is nearly linear keeps its energy to round-off, which random-walks
    assert second <= 3.0 * first + roundoff, f"energy band grows: {first:.3g} then {second:.3g}"
    assert drift <= 0.5 * band + roundoff, f"energy drifts: secular change {drift:.3g}, band {band:.3g}"


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("focus", JOINTS)
def test_grounded_random_mechanism_energy_has_no_drift(focus: str, seed: int) -> None:
    scene, used = random_mechanism(seed + 100, focus, world=True, gravity=True)
    assert used.count(focus) >= 2
    traj = _run(scene, 8.0, 4e-3)
    assert traj.kinetic.max() > 1.0  # the mechanism moves
    _assert_no_drift(traj, 2e-2)
    assert traj.constraint_error.max() <= 1e-10
    # halving the step divides the early energy error by four: the error is O(h²) and nothing else
    coarse = _run(scene, 1.0, 4e-3)
    fine = _run(scene, 1.0, 2e-3)
    e_coarse = np.abs(coarse.energy - coarse.energy[0]).max()
    e_fine = np.abs(fine.energy - fine.energy[0]).max()
    if e_coarse > 1e-9 * traj.kinetic.max():
        assert 3.5 <= e_coarse / e_fine <= 4.5


@pytest.mark.parametrize("integrator", ["midpoint", "yoshida4"])
@pytest.mark.parametrize("focus", JOINTS)
def test_random_mechanisms_under_midpoint_and_yoshida4_conserve_momentum(focus: str, integrator: str) -> None:
    scene, _ = random_mechanism(7, focus, world=False, gravity=False, bodies=4)
    traj = _run(scene, 0.4, 4e-3, integrator)
    P, L = traj.momentum, traj.angular_momentum
    assert np.max(np.abs(P - P[0])) <= 1e-9 * np.linalg.norm(P[0])
    assert np.max(np.abs(L - L[0])) <= 1e-9 * np.linalg.norm(L[0])
    assert traj.constraint_error.max() <= 1e-10


@pytest.mark.parametrize("integrator", ["midpoint", "yoshida4"])
def test_mechanism_with_every_joint_under_midpoint_and_yoshida4_has_no_energy_drift(integrator: str) -> None:
    scene, used = random_mechanism(219, None, world=True, gravity=True, bodies=7)
    assert set(used) == set(JOINTS)
    traj = _run(scene, 6.0, 4e-3, integrator)
    _assert_no_drift(traj, 1e-3)
    assert traj.constraint_error.max() <= 1e-10


def test_a_drifting_baseline_fails_the_drift_criterion() -> None:
    """Control: the criterion above catches the constraint-stabilized (CSM) baseline, which drifts."""
    scene, _ = random_mechanism(101, "spherical", world=True, gravity=True)
    traj = _run(scene, 8.0, 4e-3, "csm")
    band, _, _, drift = _energy_band(traj)
    assert drift > 0.5 * band


# -- joint read-outs --------------------------------------------------------------------------------


def _hinged_pair() -> mbvi.Scene:
    """Two rigid links on revolute joints with oblique axes, swinging in 3D under gravity."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(
        mbvi.RigidBody(
            "upper",
            shape=mbvi.Capsule(0.04, 0.5),
            density=800.0,
            position=(0.3, 0.0, -0.1),
            orientation=Rotation.from_euler("y", 80, degrees=True),
        )
    )
    scene.add(
        mbvi.RigidBody(
            "lower",
            shape=mbvi.Box((0.1, 0.05, 0.4)),
            density=800.0,
            position=(0.6, 0.1, -0.3),
            orientation=Rotation.from_euler("xz", [20, 30], degrees=True),
            angular_velocity=(0.0, 0.0, 0.0),
        )
    )
    scene.add(mbvi.Revolute("world", "upper", anchor=(0.0, 0.0, 0.0), axis=(0.1, 1.0, 0.2), name="shoulder"))
    scene.add(mbvi.Revolute("upper", "lower", anchor=(0.55, 0.05, -0.15), axis=(1.0, 0.3, 0.0), name="elbow"))
    return scene


def test_revolute_angle_and_rate_are_consistent() -> None:
    traj = mbvi.simulate(_hinged_pair(), 2.0, 1e-3)
    for joint in ("shoulder", "elbow"):
        angle, rate = traj.joint_angle(joint), traj.joint_rate(joint)
        assert abs(angle[0]) <= 1e-15 and np.ptp(angle) > 0.3
        fd = (angle[2:] - angle[:-2]) / (traj.t[2:] - traj.t[:-2])
        assert np.max(np.abs(fd - rate[1:-1])) <= 2e-4 * np.max(np.abs(rate))
    # the hinge holds: the child's axis stays the parent's axis, the anchor stays common
    R_u, R_l = traj.rotation("upper"), traj.rotation("lower")
    n0 = np.array([1.0, 0.3, 0.0]) / math.hypot(1.0, 0.3)
    np.testing.assert_allclose(R_u @ (R_u[0].T @ n0), R_l @ (R_l[0].T @ n0), atol=1e-10)
    anchor = np.array([0.55, 0.05, -0.15])
    up = traj.point("upper", R_u[0].T @ (anchor - traj.position("upper")[0]))
    low = traj.point("lower", R_l[0].T @ (anchor - traj.position("lower")[0]))
    np.testing.assert_allclose(up, low, atol=1e-10)


def test_revolute_angle_is_right_handed_about_the_axis() -> None:
    axis = np.array([1.0, -2.0, 0.5]) / np.linalg.norm([1.0, -2.0, 0.5])
    w = 3.0
    scene = mbvi.Scene(gravity=None)
    scene.add(
        mbvi.RigidBody(
            "wheel",
            mass=1.0,
            inertia=(0.3, 0.4, 0.5),
            position=(0.0, 0.0, 0.0),
            orientation=Rotation.from_rotvec([0.2, 0.3, 0.4]),
            angular_velocity=w * axis,
        )
    )
    scene.add(mbvi.Revolute("world", "wheel", axis=axis, name="axle"))
    traj = mbvi.simulate(scene, 1.0, 1e-3)
    np.testing.assert_allclose(traj.joint_rate("axle"), w, rtol=1e-9)
    # each step of a uniform spin turns by the Cayley angle 2 atan(x/2), x + x³/4 = h ω (mbvi.engine.rotation)
    x = brentq(lambda x: x + x**3 / 4 - 1e-3 * w, 0.0, 1.0)
    np.testing.assert_allclose(traj.joint_angle("axle"), np.arange(len(traj.t)) * 2 * math.atan(x / 2), atol=1e-12)
    # and the wheel's rotation is the rotation about +axis by that angle
    expected = Rotation.from_rotvec(traj.joint_angle("axle")[-1] * axis) * Rotation.from_rotvec([0.2, 0.3, 0.4])
    np.testing.assert_allclose(traj.rotation("wheel")[-1], expected.as_matrix(), atol=1e-10)


def _looping_pendulum() -> mbvi.Scene:
    """A rod pendulum released horizontal at 6.5 rad/s: it loops over its pivot, 2.1–8.9 rad/s."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.01), position=(0.5, 0.0, 0.0),
                             angular_velocity=(0.0, 6.5, 0.0), velocity=(0.0, 0.0, -3.25)))  # fmt: skip
    scene.add(mbvi.Revolute("world", "arm", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="pivot"))
    return scene


def test_turns_between_saved_states_are_counted_from_the_rate() -> None:
    # a uniform spin of 30 rad/s saved every 0.2 s turns 6 rad between saved states: the closed form above
    axis = np.array([0.0, 1.0, 0.0])
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("wheel", mass=1.0, inertia=(0.1, 0.1, 0.1), position=(0.0, 0.0, 0.0),
                             angular_velocity=30.0 * axis))  # fmt: skip
    scene.add(mbvi.Revolute("world", "wheel", axis=axis, name="axle"))
    traj = mbvi.simulate(scene, 2.0, 1e-3, save_every=200)
    x = brentq(lambda x: x + x**3 / 4 - 1e-3 * 30.0, 0.0, 1.0)
    np.testing.assert_allclose(traj.joint_angle("axle"), np.arange(11) * 200 * 2 * math.atan(x / 2), atol=1e-10)
    # a looping pendulum saved every 0.5 s (2.7–4.4 rad between saved states, numpy.unwrap counted turns backwards):
    # the angles of the run that saved every state, at the same times
    full = mbvi.simulate(_looping_pendulum(), 6.0, 1e-3)
    sparse = mbvi.simulate(_looping_pendulum(), 6.0, 1e-3, save_every=500)
    assert full.joint_angle("pivot")[-1] > 29.0
    at = np.searchsorted(full.t, sparse.t - 1e-9)
    np.testing.assert_allclose(sparse.joint_angle("pivot"), full.joint_angle("pivot")[at], atol=1e-8)


def test_turns_that_the_saved_rates_cannot_tell_are_a_warning() -> None:
    traj = mbvi.simulate(_looping_pendulum(), 6.0, 1e-3, save_every=900)
    with pytest.warns(RuntimeWarning, match="revolute joint 'pivot': its turns .* are in doubt"):
        traj.joint_angle("pivot")


@pytest.mark.parametrize("body", ["rigid", "particle"])
def test_prismatic_slider_on_an_incline_matches_uniform_acceleration(body: str) -> None:
    g, alpha = 9.81, 0.35
    axis = np.array([math.cos(alpha), 0.0, -math.sin(alpha)])  # downhill
    scene = mbvi.Scene(gravity=(0.0, 0.0, -g))
    x0 = np.array([0.2, 0.1, 0.5])
    if body == "rigid":
        scene.add(
            mbvi.RigidBody(
                "block",
                shape=mbvi.Box((0.2, 0.1, 0.1)),
                density=500.0,
                position=x0,
                orientation=Rotation.from_euler("y", -alpha),
            )
        )
    else:
        scene.add(mbvi.Particle("block", mass=1.0, position=x0))
    scene.add(mbvi.Prismatic("world", "block", axis=axis, name="slide"))
    traj = mbvi.simulate(scene, 1.0, 1e-2)
    s = traj.joint_displacement("slide")
    # the trapezoidal rule is exact for a constant acceleration g sin α along the axis
    np.testing.assert_allclose(s, 0.5 * g * math.sin(alpha) * traj.t**2, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(traj.joint_displacement_rate("slide"), g * math.sin(alpha) * traj.t, rtol=1e-11,
                               atol=1e-13)  # fmt: skip
    np.testing.assert_allclose(traj.position("block"), x0 + s[:, None] * axis, atol=1e-12)
    R = traj.rotation("block")
    np.testing.assert_allclose(R, np.broadcast_to(R[0], R.shape), atol=1e-12)
    # a revolute read-out of the slider says what it is (it said "unknown revolute joint 'slide'")
    with pytest.raises(ValueError, match=r"joint 'slide' is prismatic, not revolute .*joint_displacement"):
        traj.joint_angle("slide")
    with pytest.raises(ValueError, match=r"joint 'slide' is prismatic, not revolute .*joint_displacement"):
        mbvi.Simulator(scene, dt=1e-2).view.joint_angle("slide")  # (the live view said "unknown")


def test_prismatic_displacement_between_two_moving_bodies() -> None:
    scene = mbvi.Scene(gravity=None)
    R = Rotation.from_euler("xyz", [0.3, 0.5, -0.2])
    scene.add(
        mbvi.RigidBody(
            "rail",
            mass=2.0,
            inertia=(0.1, 0.2, 0.25),
            position=(0, 0, 0),
            orientation=R,
            angular_velocity=(0.0, 0.0, 1.0),
        )
    )
    scene.add(mbvi.RigidBody("carriage", mass=0.5, inertia=(0.01, 0.02, 0.02), position=(0.3, 0.2, 0.1), orientation=R))
    scene.add(mbvi.Spring("rail", "carriage", stiffness=20.0, rest_length=0.1))
    scene.add(mbvi.Prismatic("rail", "carriage", axis=(0.3, 0.2, 0.1), name="track"))
    with pytest.warns(mbvi.ConstraintWarning):  # the carriage must co-rotate with the rail
        traj = mbvi.simulate(scene, 2.0, 1e-3)
    d = traj.position("carriage") - traj.position("rail")
    n = traj.rotation("rail") @ (R.inv().apply(np.array([0.3, 0.2, 0.1]) / np.linalg.norm([0.3, 0.2, 0.1])))
    s = np.einsum("ij,ij->i", d, n) - np.linalg.norm([0.3, 0.2, 0.1])
    np.testing.assert_allclose(traj.joint_displacement("track"), s, atol=1e-10)
    assert np.ptp(s) > 0.05
    # its rate (a trajectory had none, only a state's view did) is the displacement's derivative, to O(h²) (but
    # where the spring passes through zero length, its force's kink)
    rate, mid = traj.joint_displacement_rate("track"), 0.5 * (traj.t[1:] + traj.t[:-1])
    slope = np.diff(s) / np.diff(traj.t)
    assert np.ptp(rate) > 1.0
    assert np.quantile(np.abs(slope - np.interp(mid, traj.t, rate)), 0.99) < 1e-4
    # the carriage stays on the rail's line and keeps the rail's orientation
    np.testing.assert_allclose(np.cross(d, n), 0.0, atol=1e-10)
    np.testing.assert_allclose(traj.rotation("carriage"), traj.rotation("rail"), atol=1e-10)


# -- a welded pair is one rigid body -----------------------------------------------------------------


def test_fixed_joint_welds_two_bodies_into_their_composite() -> None:
    rng = np.random.default_rng(3)
    m1, m2 = 1.0, 2.5
    J1 = _random_inertia(rng, m1)
    J2 = _random_inertia(rng, m2)
    J1, J2 = (np.diag(J) if J.ndim == 1 else J for J in (J1, J2))
    R1 = Rotation.random(random_state=rng).as_matrix()
    R2 = Rotation.random(random_state=rng).as_matrix()
    x1, x2 = np.array([0.1, 0.0, 0.2]), np.array([0.5, -0.3, 0.4])
    v, w = np.array([0.3, -0.2, 0.1]), np.array([1.5, -0.5, 2.0])
    scene = mbvi.Scene(gravity=None)
    scene.add(
        mbvi.RigidBody(
            "a", mass=m1, inertia=J1, position=x1, orientation=R1, velocity=v + np.cross(w, x1), angular_velocity=w
        )
    )
    scene.add(
        mbvi.RigidBody(
            "b", mass=m2, inertia=J2, position=x2, orientation=R2, velocity=v + np.cross(w, x2), angular_velocity=w
        )
    )
    scene.add(mbvi.Fixed("a", "b", anchor=(0.3, 0.0, 0.3)))
    traj = mbvi.simulate(scene, 2.0, 1e-3)
    # the composite, from the parallel-axis theorem, in the world frame
    m = m1 + m2
    xc = (m1 * x1 + m2 * x2) / m

    def shifted(J, R, mass, x):
        r = x - xc
        return R @ J @ R.T + mass * (r @ r * np.eye(3) - np.outer(r, r))

    Jc = shifted(J1, R1, m1, x1) + shifted(J2, R2, m2, x2)
    single = mbvi.Scene(gravity=None)
    single.add(mbvi.RigidBody("c", mass=m, inertia=Jc, position=xc, velocity=v + np.cross(w, xc), angular_velocity=w))
    ref = mbvi.simulate(single, 2.0, 1e-3)
    xc_t = (m1 * traj.position("a") + m2 * traj.position("b")) / m
    np.testing.assert_allclose(xc_t, ref.position("c"), atol=1e-10)
    # both parts rotate with the composite, at second order in dt (the two discretizations differ)
    np.testing.assert_allclose(traj.rotation("a"), ref.rotation("c") @ R1, atol=1e-5)
    np.testing.assert_allclose(traj.angular_velocity("b"), ref.angular_velocity("c"), atol=1e-4 * np.linalg.norm(w))
    np.testing.assert_allclose(traj.angular_momentum, ref.angular_momentum, rtol=1e-9, atol=1e-12)
    assert traj.constraint_error.max() <= 1e-10


# -- assembly errors -----------------------------------------------------------------------------------


def test_joint_input_errors_name_the_joint() -> None:
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("p", mass=1.0, position=(1, 0, 0)))
    scene.add(mbvi.RigidBody("r", mass=1.0, inertia=(1, 1, 1), position=(0, 0, -1)))
    with pytest.raises(ValueError, match=r"hinge.*particle"):  # refused when added (was: by assembly)
        scene.add(mbvi.Revolute("world", "p", anchor=(1, 0, 0), name="hinge"))

    scene = mbvi.Scene()
    scene.add(mbvi.Particle("p", mass=1.0, position=(1, 0, 0)))
    scene.add(mbvi.Spherical("world", "p", anchor=(0, 0, 0), name="ball"))
    with pytest.raises(ValueError, match=r"ball.*violate"):
        mbvi.assemble(scene)

    scene = mbvi.Scene()
    scene.add(mbvi.RigidBody("r", mass=1.0, inertia=(1, 1, 1), position=(0, 0, -1)))
    scene.add(mbvi.Rod("world", "r", anchor_b=(0, 0, 1), name="stick"))
    with pytest.raises(ValueError, match="stick"):
        mbvi.assemble(scene)  # the anchor sits on the world origin: zero length

    with pytest.raises(ValueError, match="itself"):
        mbvi.Fixed("r", "r")


def test_an_initial_angle_beyond_pi_is_read_as_given_by_the_trajectory_a_controller_and_a_view() -> None:
    """initial_angle = 4 rad read −2.28 (wrapped to (−π, π]): a PD to 4.5 from there never settled. The angle is
    now within π of initial_angle: 4 at the start, and the PD settles at its target."""
    import math

    def hinge(theta0: float, torque=None) -> mbvi.Scene:
        s = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
        s.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0.0, 0.0, -0.5)))
        s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="h", initial_angle=theta0))
        if torque is not None:
            s.add(mbvi.ExternalTorque("arm", torque=torque, name="m"))
        return s

    for theta0 in (4.0, -3.5, 2 * math.pi + 0.3):
        assert mbvi.simulate(hinge(theta0), 0.01, 1e-3).joint_angle("h")[0] == pytest.approx(theta0, abs=1e-12)

    def pd(t, state):
        return (0.0, 1.0 * (4.5 - state.joint_angle("h")) - 0.3 * state.joint_rate("h"), 0.0)

    traj = mbvi.simulate(hinge(4.0, pd), 20.0, 1e-3)
    assert traj.joint_angle("h")[-1] == pytest.approx(4.5, abs=1e-4)
    sim = mbvi.Simulator(hinge(4.0, pd), dt=1e-3)
    sim.step(20000)
    assert sim.view.joint_angle("h") == pytest.approx(traj.joint_angle("h")[-1], abs=1e-12)


def _flaps(n: int) -> mbvi.Scene:
    """n flaps, each on two coaxial hinges (a loop through the world: 5 of its 16 rows are redundant)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    turn = Rotation.from_rotvec([0.5, 0.0, 0.0])
    for i in range(n):
        y = 3.0 * i
        scene.add(mbvi.RigidBody(f"f{i}", mass=2.0, shape=mbvi.Box((1.0, 0.02, 0.6)), orientation=turn,
                                 position=np.array([0.0, y, 0.0]) + turn.apply([0.0, 0.0, -0.3])))  # fmt: skip
        scene.add(mbvi.Revolute("world", f"f{i}", anchor=(-0.4, y, 0.0), axis=(1.0, 0.0, 0.0), name=f"h1_{i}"))
        scene.add(mbvi.Revolute("world", f"f{i}", anchor=(0.4, y, 0.0), axis=(1.0, 0.0, 0.0), name=f"h2_{i}"))
    return scene


def test_redundant_loops_past_the_dense_check_are_checked_loop_by_loop(monkeypatch) -> None:
    """Past RANK_CHECK_MAX rows (6000) the redundancy check was skipped: 380 flaps on two coaxial hinges kept all
    6080 rows, and every step met a singular G M⁻¹ Gᵀ of 6080 rows through a dense pseudo-inverse (8 steps did
    not finish in 200 s). Each loop is now checked alone there: the same rows kept as the whole check keeps, and
    the flap swings as a compound pendulum about its hinge line, ω² = m g d / (I + m d²)."""
    from mbvi import assembly

    with pytest.warns(mbvi.RedundantConstraintWarning, match=r"15 of 48 constraint equations are redundant"):
        whole = mbvi.assemble(_flaps(3))
    monkeypatch.setattr(assembly, "RANK_CHECK_MAX", 20)  # (3 × 16 rows: past it)
    every = r"15 of 48 constraint equations, in 3 closed loops, are redundant .*'h2_0', .*'h2_1', .*'h2_2'"
    with pytest.warns(mbvi.RedundantConstraintWarning, match=every):
        by_loop = mbvi.assemble(_flaps(3))
    assert len(whole.active) == len(by_loop.active) == 3 * 11
    traj = mbvi.simulate(by_loop, 2.0, 1e-3)
    np.testing.assert_allclose(traj.q, mbvi.simulate(whole, 2.0, 1e-3).q, rtol=0, atol=1e-9)
    assert traj.constraint_error.max() < 1e-10
    d, inertia = 0.3, 2.0 * (0.02**2 + 0.6**2) / 12  # centre below the hinge line; I about the flap's x axis
    w = math.sqrt(2.0 * 9.81 * d / (inertia + 2.0 * d * d))
    angle = traj.joint_angle("h1_1")
    crossings = np.where(np.diff(np.sign(angle - angle.mean())) != 0)[0]
    period = 2 * np.mean(np.diff(traj.t[crossings]))
    assert period == pytest.approx(2 * math.pi / w * (1 + 0.5**2 / 16), rel=2e-3)  # amplitude 0.5 rad


def _long_loop(links: int, doubled: int | None = None) -> mbvi.Scene:
    """A ring of ``links`` particles joined by rods, lying in a circle without gravity (one loop), with the rod
    after particle ``doubled`` laid twice when given: that row depends on its twin."""
    scene = mbvi.Scene(gravity=None)
    radius = links / (2 * math.pi)
    for i in range(links):
        a = 2 * math.pi * i / links
        scene.add(mbvi.Particle(f"p{i}", mass=1.0, position=(radius * math.cos(a), radius * math.sin(a), 0.0)))
    for i in range(links):
        scene.add(mbvi.Rod(f"p{i}", f"p{(i + 1) % links}", name=f"r{i}"))
    if doubled is not None:
        scene.add(mbvi.Rod(f"p{doubled}", f"p{(doubled + 1) % links}", name="twin"))
    return scene


def test_a_long_loop_of_independent_rows_is_told_so_by_the_sparse_check(monkeypatch) -> None:
    """A loop of more than SPARSE_RANK_MIN rows was checked by a dense rank-revealing QR, whose cost grows as
    rows² × coordinates (a 2000-link chain hung between two points: 7 s of its assembly). The sparse G Gᵀ now
    says when every row is independent by a wide margin: its verdict is the dense QR's (all rows kept, no
    warning), and the dense QR is not made."""
    from mbvi import assembly

    scene = _long_loop(600)
    monkeypatch.setattr(assembly, "SPARSE_RANK_MIN", 10**9)  # the dense check alone
    dense = mbvi.assemble(scene)
    monkeypatch.setattr(assembly, "SPARSE_RANK_MIN", 400)
    monkeypatch.setattr(assembly.sla, "qr", lambda *a, **k: pytest.fail("the dense QR was made"))
    sparse = mbvi.assemble(scene)
    assert len(dense.active) == len(sparse.active) == 600
    np.testing.assert_array_equal(dense.active, sparse.active)


def test_a_redundant_row_in_a_long_loop_is_still_found_and_dropped(monkeypatch) -> None:
    """The sparse check must not call a loop independent when one of its rows repeats another: a rod laid
    twice in a 600-link ring. The dense QR then finds it, and the warning names it, as below SPARSE_RANK_MIN."""
    from mbvi import assembly

    scene = _long_loop(600, doubled=17)
    with pytest.warns(mbvi.RedundantConstraintWarning, match=r"1 of 601 constraint equations are redundant"):
        system = mbvi.assemble(scene)
    assert len(system.active) == 600
    Gs = sp.csr_matrix(system.constraint_jacobian(system.layout.q0))
    assert Gs.shape[0] == 601
    assert not assembly._surely_independent(Gs)
    assert assembly._surely_independent(Gs[:-1])  # without the twin: independent


def test_one_loop_past_the_dense_check_is_left_unchecked_not_factorized(monkeypatch) -> None:
    """A ring of links is one loop: checked alone past RANK_CHECK_MAX, it was the whole dense check again (a ring
    of 700 links: 6300 × 8400, minutes); it is left unchecked, as every scene past the cap was."""
    from mbvi import assembly

    scene = mbvi.Scene(gravity=None)
    corners = [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (1.0, 1.0, 0.0), (0.0, 1.0, 0.0)]
    for i, c in enumerate(corners):
        scene.add(mbvi.Particle(f"p{i}", mass=1.0, position=c))
    for i in range(4):
        scene.add(mbvi.Rod(f"p{i}", f"p{(i + 1) % 4}"))
    monkeypatch.setattr(assembly, "RANK_CHECK_MAX", 3)
    monkeypatch.setattr(assembly, "_kept_rows", lambda *a: pytest.fail("a loop past the cap was factorized"))
    assert len(mbvi.assemble(scene).active) == 4
