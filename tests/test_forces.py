"""Force laws: derivatives against finite differences, and the physics each law must obey.

Every built-in law is checked with :func:`mbvi.check_force_law` on random scenes
(particles and rigid bodies with off-centre anchors, several instances of each
law, revolute and prismatic joints, beams). The physics checks are independent
of the laws' code: potentials and dissipated powers are recomputed from the
trajectory's geometry (points, rotations, joint angles by
``scipy.spatial.transform.Rotation``), and internal forces must obey Newton's
third law and rotational invariance (no net force, no net torque).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import mbvi
from mbvi.beam import BeamBending
from mbvi.forcelaws.base import ForceLaw

BUILTIN = [
    "beam_bending",
    "damper",
    "drag",
    "external_force",
    "external_torque",
    "gravity",
    "joint_damping",
    "spring",
    "torsion_spring",
]


def _random_inertia(rng: np.random.Generator) -> np.ndarray:
    """A full (non-diagonal) inertia tensor with distinct principal moments that satisfy the triangle inequality."""
    moments = rng.uniform(0.2, 0.4, 3)
    V = Rotation.random(random_state=int(rng.integers(1 << 30))).as_matrix()
    return V @ np.diag(moments) @ V.T


def _unit(rng: np.random.Generator) -> np.ndarray:
    x = rng.normal(size=3)
    return x / np.linalg.norm(x)


def random_scene(seed: int, world: bool = True) -> mbvi.Scene:
    """Particles, rigid bodies (random orientations, full inertia tensors), joints and several
    instances of every built-in law with off-centre anchors.

    With ``world=False`` nothing is attached to the world and there is no gravity or external
    load: every force is internal, so the system is free and isolated.
    """
    rng = np.random.default_rng(seed)
    scene = mbvi.Scene(gravity=rng.normal(size=3) + (0.0, 0.0, -9.81) if world else None)
    for i in range(3):
        scene.add(mbvi.Particle(f"p{i}", mass=rng.uniform(0.5, 2.0), position=rng.normal(size=3)))
    for i in range(4):
        scene.add(
            mbvi.RigidBody(
                f"b{i}",
                mass=rng.uniform(0.5, 2.0),
                inertia=_random_inertia(rng),
                position=rng.normal(size=3) + (2.0 * i, 0.0, 0.0),
                orientation=Rotation.random(random_state=seed + 10 * i),
            )
        )

    def off(body: str = "b") -> np.ndarray | None:
        # an off-centre body-frame anchor on rigid bodies; particles have no frame to carry one
        return rng.normal(scale=0.3, size=3) if body[0] in "bw" else None

    # joints: revolute b0-b1 and b1-b2 (anchors away from both centres), prismatic b2-b3
    scene.add(mbvi.Revolute("b0", "b1", anchor=rng.normal(size=3) + (1.0, 0, 0), axis=_unit(rng), name="h1"))
    scene.add(mbvi.Revolute("b1", "b2", anchor=rng.normal(size=3) + (3.0, 0, 0), axis=_unit(rng), name="h2"))
    scene.add(mbvi.Prismatic("b2", "b3", axis=_unit(rng), name="s1"))
    if world:
        scene.add(mbvi.Revolute("world", "b0", anchor=rng.normal(size=3), axis=_unit(rng), name="h0"))
        scene.add(mbvi.Prismatic("world", "p2", axis=_unit(rng), name="s0"))
    pairs = [("p0", "b0"), ("b1", "p1"), ("b2", "b3"), ("p0", "p1")] + ([("world", "b1")] if world else [])
    for a, b in pairs:
        scene.add(
            mbvi.Spring(
                a, b, stiffness=rng.uniform(1, 5), rest_length=rng.uniform(0.5, 2), anchor_a=off(a), anchor_b=off(b)
            )
        )
        scene.add(mbvi.Damper(a, b, damping=rng.uniform(0.1, 1), anchor_a=off(a), anchor_b=off(b)))
    scene.add(mbvi.Spring("b0", "b3", stiffness=2.0, anchor_a=off(), anchor_b=off()))  # rest length: initial distance
    for j in ["h1", "h2", "s1"] + (["h0", "s0"] if world else []):
        scene.add(mbvi.JointDamping(j, coefficient=rng.uniform(0.1, 1)))
    for j in ["h1", "h2"] + (["h0"] if world else []):
        scene.add(mbvi.TorsionSpring(j, stiffness=rng.uniform(1, 3), rest_angle=rng.uniform(-1, 1)))
    for beam, clamp in (("beam", "start" if world else None), ("rod", None)):
        start = rng.normal(size=3) + (0, 3.0, 0) if beam == "beam" else rng.normal(size=3) + (0, -3.0, 0)
        scene.add(
            mbvi.Beam(
                beam,
                start=start,
                end=start + _unit(rng),
                segments=4,
                density=500.0,
                area=1e-3,
                youngs_modulus=2e4,
                second_moment=1e-5,
                clamp=clamp,
            )
        )
    if world:
        for body in ("p0", "b1", "b3"):
            scene.add(mbvi.Drag(body, coefficient=rng.uniform(0.1, 1), anchor=off(body)))
        scene.add(mbvi.ExternalForce("b0", force=rng.normal(size=3), anchor=off()))
        scene.add(mbvi.ExternalForce("p1", force=lambda t: (np.sin(t), np.cos(2 * t), t)))
        scene.add(mbvi.ExternalForce("b2", force=lambda t: (1.0, -t, 0.5 * t * t), anchor=off()))
        scene.add(mbvi.ExternalTorque("b1", torque=rng.normal(size=3)))
        scene.add(mbvi.ExternalTorque("b3", torque=lambda t: (np.cos(t), 0.3, -t)))
    return scene


@functools.cache
def random_system(seed: int) -> mbvi.System:
    return mbvi.assemble(random_scene(seed))


@functools.cache
def moving_state(seed: int, world: bool = True) -> tuple[mbvi.Trajectory, np.ndarray, np.ndarray, float]:
    """A state on the constraint manifold, reached by simulating the random scene (q, v, t)."""
    scene = random_scene(seed, world)
    rng = np.random.default_rng(seed)
    system = mbvi.assemble(scene)
    s = system.initial_state()
    # start moving: a random velocity projected onto the joints, then let the forces act
    state = mbvi.State(s.q, system.project_velocity(s.q, 0.5 * rng.normal(size=system.nq)))
    traj = mbvi.simulate(scene, t_end=0.5, dt=2e-3, initial_state=state, t0=0.4)
    return traj, traj.q[-1], traj.v[-1], float(traj.t[-1])


def law_of(system: mbvi.System, name: str) -> ForceLaw:
    (law,) = [law for law in system.laws if law.name == name]
    return law


# -- registration ----------------------------------------------------------------------------------


def test_every_builtin_law_is_registered_for_its_element():
    names = mbvi.force_laws()
    assert set(BUILTIN) <= set(names)
    elements = {
        "gravity": mbvi.Gravity,
        "spring": mbvi.Spring,
        "damper": mbvi.Damper,
        "drag": mbvi.Drag,
        "external_force": mbvi.ExternalForce,
        "external_torque": mbvi.ExternalTorque,
        "joint_damping": mbvi.JointDamping,
        "torsion_spring": mbvi.TorsionSpring,
        "beam_bending": BeamBending,
    }
    for name, element in elements.items():
        law = mbvi.get_force_law(name)
        assert issubclass(law, mbvi.ForceLaw) and law.name == name and law.element is element
        assert law.has_potential != law.has_force  # each built-in is conservative or not, never both


def test_the_random_scene_has_several_instances_of_every_law():
    system = random_system(0)
    assert {law.name for law in system.laws} == set(BUILTIN)
    for law in system.laws:  # one vectorized law object per element type
        assert len(law.elements) >= (1 if law.name in ("gravity", "beam_bending") else 2), law.name


# -- derivatives -----------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", BUILTIN)
def test_derivatives_pass_the_finite_difference_check(name, seed):
    system = random_system(seed)
    rng = np.random.default_rng(100 + seed)
    q = system.layout.q0 + 0.1 * rng.normal(size=system.nq)  # off the constraints too: laws live on all of ℝⁿ
    v = rng.normal(size=system.nq)
    law = law_of(system, name)
    errors = mbvi.check_force_law(law, q, v, t=rng.uniform(0, 3), rtol=1e-6)
    expected = {"gradient", "hessian"} if law.has_potential else {"force_dq", "force_dv"}
    assert set(errors) == expected
    assert max(errors.values()) <= 1e-6


@pytest.mark.parametrize("name", BUILTIN)
def test_builtin_derivatives_are_analytic(name):
    """No built-in law relies on the finite-difference defaults, so the check above compares two
    independent computations (and implicit integrators get exact Jacobians)."""
    law = mbvi.get_force_law(name)
    if law.has_potential:
        assert law.hessian is not ForceLaw.hessian
        assert law.gradient is not ForceLaw.gradient
    else:
        assert law.force_jacobians is not ForceLaw.force_jacobians


def test_potential_hessians_are_symmetric():
    system = random_system(1)
    q = system.layout.q0 + 0.1 * np.random.default_rng(5).normal(size=system.nq)
    for law in system.potential_laws:
        H = law.hessian(q).toarray()
        assert np.max(np.abs(H - H.T)) <= 1e-10 * max(1.0, np.max(np.abs(H))), law.name


def test_the_checker_catches_a_wrong_derivative():
    system = random_system(0)
    q, v = system.layout.q0, np.ones(system.nq)
    spring, damper = law_of(system, "spring"), law_of(system, "damper")

    class WrongHessian(type(spring)):
        def hessian(self, q):
            return 1.01 * super().hessian(q)

    class WrongJacobian(type(damper)):
        def force_jacobians(self, q, v, t):
            dq, dv = super().force_jacobians(q, v, t)
            return dq.T, dv  # ∂F/∂q of a damper is not symmetric

    with pytest.raises(AssertionError, match="hessian"):
        mbvi.check_force_law(WrongHessian(spring.elements, system.layout), q, v, 0.0)
    bad = WrongJacobian(damper.elements, system.layout)
    with pytest.raises(AssertionError, match=r"dF/dq"):
        mbvi.check_force_law(bad, q + 0.1, v, 0.0)


# -- internal forces: Newton's third law and rotational invariance ---------------------------------


@pytest.mark.parametrize("name", ["spring", "damper", "joint_damping", "torsion_spring", "beam_bending"])
def test_internal_forces_have_no_net_force_and_no_net_torque(name):
    """Σ F over translations = 0 (momentum) and Σ_blocks q_b × F_b = 0 (angular momentum about the origin).

    For a generalized force F the rate of change of the system's angular momentum
    Σ_b m_b q_b × q̇_b is Σ_b q_b × F_b over all 3-blocks (a force f at the body point
    x + Σ pᵢ rᵢ enters as f on x and pᵢ f on rᵢ, whose moments add up to P × f).
    """
    traj, q, v, t = moving_state(3, world=False)
    system = mbvi.assemble(traj.scene)
    law = law_of(system, name)
    F = -law.gradient(q) if law.has_potential else law.force(q, v, t)
    assert np.max(np.abs(F)) > 1e-3  # the state is loaded
    tb = system.layout.translation_blocks
    net_force = F[(tb[:, None] + np.arange(3)).ravel()].reshape(-1, 3).sum(axis=0)
    net_torque = np.cross(q.reshape(-1, 3), F.reshape(-1, 3)).sum(axis=0)
    scale = np.max(np.abs(F)) * max(1.0, np.max(np.abs(q)))
    assert np.max(np.abs(net_force)) <= 1e-12 * scale
    assert np.max(np.abs(net_torque)) <= 1e-10 * scale


def test_free_isolated_system_conserves_momentum_and_angular_momentum():
    """With internal forces only (springs, dampers, joint friction, torsion, beams), the forced
    variational integrator conserves both momentum maps while energy is dissipated."""
    scene = random_scene(4, world=False)
    system = mbvi.assemble(scene)
    s = system.initial_state()
    v = system.project_velocity(s.q, np.random.default_rng(4).normal(size=system.nq))
    traj = mbvi.simulate(scene, t_end=0.2, dt=2e-3, initial_state=mbvi.State(s.q, v))
    assert np.max(np.abs(traj.momentum - traj.momentum[0])) <= 1e-11 * np.max(np.abs(traj.momentum[0]))
    L0 = np.max(np.abs(traj.angular_momentum[0]))
    assert np.max(np.abs(traj.angular_momentum - traj.angular_momentum[0])) <= 1e-9 * L0
    assert traj.energy[-1] < traj.energy[0]


# -- potentials and powers against the geometry ----------------------------------------------------


def _relative_angle(traj: mbvi.Trajectory, joint: mbvi.Joint) -> np.ndarray:
    """Revolute angle (zero at assembly) from the relative rotation: R_aᵀR_b = Rot(axis_a, θ) (R_aᵀR_b)₀ (scipy)."""
    start = mbvi.Trajectory.from_scene(traj.scene)
    rel0 = start.rotation(joint.a)[0].T @ start.rotation(joint.b)[0]
    rel = np.swapaxes(traj.rotation(joint.a), 1, 2) @ traj.rotation(joint.b)
    axis_a = traj.geometry.link(joint.name).axis_a  # axis in a's body frame
    return Rotation.from_matrix(rel @ rel0.T).as_rotvec() @ np.asarray(axis_a)


def test_potentials_match_the_geometry():
    traj, q, _, _ = moving_state(0)
    scene = traj.scene
    system = mbvi.assemble(scene)
    frame = traj.frame(-1)
    start = mbvi.Trajectory.from_scene(scene)
    g = scene.gravity
    forces = {}
    for f in scene.forces:
        forces.setdefault(type(f).__name__, []).append(f)

    # gravity: −Σ m g·x over bodies (beam nodes included)
    U = -sum(b.mass * g @ frame.position(b.name)[0] for b in scene.bodies)
    assert law_of(system, "gravity").potential(q) == pytest.approx(U, rel=1e-12)

    # springs: ½ k (|P_b − P_a| − L₀)², L₀ defaulting to the initial distance
    U = 0.0
    for s in forces["Spring"]:
        d = np.linalg.norm(frame.point(s.b, s.anchor_b)[0] - frame.point(s.a, s.anchor_a)[0])
        L0 = s.rest_length
        if L0 is None:
            L0 = np.linalg.norm(start.point(s.b, s.anchor_b)[0] - start.point(s.a, s.anchor_a)[0])
        U += 0.5 * s.stiffness * (d - L0) ** 2
    assert law_of(system, "spring").potential(q) == pytest.approx(U, rel=1e-10)

    # torsion springs: ½ k (θ − θ₀)² with θ from the relative rotation
    U = 0.0
    for s in forces["TorsionSpring"]:
        theta = _relative_angle(frame, scene.joint(s.joint))[0]
        U += 0.5 * s.stiffness * (theta - s.rest_angle) ** 2
    assert abs(U) > 1e-3
    assert law_of(system, "torsion_spring").potential(q) == pytest.approx(U, rel=1e-9)

    # beam bending: Σ κ (1 − cos φ) at interior nodes (κ = EI/ℓ) and at the clamp (κ = 2EI/ℓ)
    U = 0.0
    for beam in scene.beams.values():
        x = np.stack([frame.position(n)[0] for n in beam.nodes])
        e = np.diff(x, axis=0)
        e /= np.linalg.norm(e, axis=1, keepdims=True)
        EI = beam.youngs_modulus * beam.second_moment
        U += EI / beam.segment_length * np.sum(1.0 - np.einsum("ij,ij->i", e[:-1], e[1:]))
        if beam.clamp == "start":
            U += 2 * EI / beam.segment_length * (1.0 - e[0] @ (beam.end - beam.start) / beam.length)
    assert law_of(system, "beam_bending").potential(q) == pytest.approx(U, rel=1e-9)


def test_dissipative_and_driving_powers_match_the_geometry():
    """F·v of each non-conservative law against point velocities, angular velocities and joint rates
    obtained by finite differences of the trajectory's geometry along the motion."""
    traj, q, v, t = moving_state(1)
    scene = traj.scene
    system = mbvi.assemble(scene)
    eps = 1e-6  # central differences along the straight line q ± ε v
    pair = mbvi.Trajectory.from_states(
        system, [t - eps, t + eps], np.stack([q - eps * v, q + eps * v]), [v, v], scene=scene
    )

    def point_velocity(body, anchor):
        x = pair.point(body, anchor)
        return (x[1] - x[0]) / (2 * eps)

    def check(name, expected):
        assert abs(expected) > 1e-3, name  # the motion is not trivial
        assert law_of(system, name).force(q, v, t) @ v == pytest.approx(expected, rel=1e-6), name

    elements = {}
    for f in scene.forces:
        elements.setdefault(type(f).__name__, []).append(f)
    # drag: −Σ c |v_P|²
    expected = -sum(d.coefficient * np.sum(point_velocity(d.body, d.anchor) ** 2) for d in elements["Drag"])
    check("drag", expected)
    # dampers: −Σ c (ḋ·d̂)²
    expected = 0.0
    for d in elements["Damper"]:
        sep = traj.point(d.b, d.anchor_b)[-1] - traj.point(d.a, d.anchor_a)[-1]
        rate = (point_velocity(d.b, d.anchor_b) - point_velocity(d.a, d.anchor_a)) @ sep / np.linalg.norm(sep)
        expected -= d.damping * rate**2
    check("damper", expected)
    # joint friction: −Σ b θ̇² (revolute: θ from the relative rotation; prismatic: sliding along the axis)
    expected = 0.0
    for d in elements["JointDamping"]:
        joint = scene.joint(d.joint)
        if joint.kind == "revolute":
            rate = np.diff(_relative_angle(pair, joint))[0] / (2 * eps)
        else:
            rate = np.diff(pair.joint_displacement(joint.name))[0] / (2 * eps)
        expected -= d.coefficient * rate**2
    check("joint_damping", expected)
    # prescribed forces: Σ f(t)·v_P; prescribed torques: Σ τ(t)·ω
    expected = 0.0
    for e in elements["ExternalForce"]:
        f = e.force(t) if callable(e.force) else e.force
        expected += np.asarray(f) @ point_velocity(e.body, e.anchor)
    check("external_force", expected)
    expected = 0.0
    for e in elements["ExternalTorque"]:
        tau = e.torque(t) if callable(e.torque) else e.torque
        R = pair.rotation(e.body)
        omega = Rotation.from_matrix(R[1] @ R[0].T).as_rotvec() / (2 * eps)
        expected += np.asarray(tau) @ omega
    check("external_torque", expected)


def test_external_loads_are_evaluated_at_the_given_time():
    system = random_system(2)
    q, v = system.layout.q0, np.zeros(system.nq)
    law = law_of(system, "external_force")
    forced = [e for e in law.elements if callable(e.force)]
    assert forced
    o = system.layout.offset["p1"]  # particle p1 carries (sin t, cos 2t, t) on its own 3 coordinates
    for t in (0.0, 0.7, 2.5):
        assert law.force(q, v, t)[o : o + 3] == pytest.approx([np.sin(t), np.cos(2 * t), t], abs=1e-15)


def test_bad_callable_load_names_the_element():
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.Particle("p", mass=1.0))
    scene.add(mbvi.ExternalForce("p", force=lambda t: (1.0, 2.0), name="push"))
    with pytest.raises(ValueError, match="push"):
        mbvi.simulate(scene, t_end=0.1, dt=0.01)
