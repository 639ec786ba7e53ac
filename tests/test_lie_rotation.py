"""Rigid bodies at any spin: the Lie-group (Cayley) rotation update of the compiled RATTLE family.

The rotation-matrix RATTLE turns a body by asin(h|ω|) per step and has no
step once h|ω| ≥ 1; the Cayley update exists for every spin, keeps the
momentum maps exactly and RᵀR = I to round-off (see mbvi.engine.rotation).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scene_loader import load_scene, rigid_chain
from scipy.spatial.transform import Rotation

import mbvi
from mbvi.assembly import assemble
from mbvi.engine import rotation
from mbvi.engine.fields import LB, LT


def _orthonormality(R: np.ndarray) -> float:
    return float(np.max(np.abs(np.einsum("nki,nkj->nij", R, R) - np.eye(3))))


# -- the pieces ------------------------------------------------------------------------------------
def _hat(x: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -x[2], x[1]], [x[2], 0.0, -x[0]], [-x[1], x[0], 0.0]])


def test_cayley_map_and_its_inverse_momentum_equation() -> None:
    """cay(x) = (I − x̂/2)⁻¹(I + x̂/2), and x solves (I + x̂/2 + xxᵀ/4) J x = hπ to round-off at any size."""
    rng = np.random.default_rng(3)
    J = np.array([1.0, 2.0, 2.5])
    for scale in (1e-3, 1.0, 30.0, 1e4):
        x = rng.normal(size=3)
        C = np.empty((3, 3))
        rotation.cayley(x, C)
        np.testing.assert_allclose(C, np.linalg.solve(np.eye(3) - _hat(x) / 2, np.eye(3) + _hat(x) / 2), atol=1e-15)
        hpi = scale * rng.normal(size=3)
        y = hpi / J
        assert rotation.cayley_parameter(J, hpi, y)
        Jy = J * y
        np.testing.assert_allclose(Jy + np.cross(y, Jy) / 2 + y * (y @ Jy) / 4, hpi, rtol=0, atol=1e-14 * scale * 10)


@pytest.mark.parametrize("warm", [False, True])
def test_all_bodies_at_once_drift_is_the_body_by_body_cayley_solve_bit_for_bit(warm: bool) -> None:
    """The drift's Newton on every body at once (SIMD lanes, then the unsettled bodies alone) gives each body
    the Cayley parameter and R₁ = R₀ cay(x) of :func:`rotation.rotate_columns` from the same first guess, bit for
    bit: slow bodies settled by one step, and spins up to h|ω| = 300 that need the line search."""
    from mbvi.engine import lieloop

    rng = np.random.default_rng(11)
    nb, h = 40, 1e-3
    spins = np.repeat([1e-2, 1.0, 50.0, 300.0 / h], 10)  # |ω| (rad/s): none to 300 rad a step
    J = rng.uniform(0.01, 2.0, size=(nb, 3))
    w = rng.normal(size=(nb, 3))
    w *= (spins / np.linalg.norm(w, axis=1))[:, None]
    R0 = Rotation.random(nb, random_state=5).as_matrix()
    q0 = np.zeros(12 * nb)
    for b in range(nb):
        q0[12 * b + 3 : 12 * b + 12] = R0[b].T.ravel()  # column c of R at 3 + 3c
    head = np.zeros(LT.count, np.int64)
    bq, bv = 12 * np.arange(nb), 6 * np.arange(nb)
    IL = np.concatenate([head, bq, bv]).astype(np.int64)
    IL[LT.NB], IL[LT.NT], IL[LT.BQ], IL[LT.BV], IL[LT.J] = nb, 0, LT.count, LT.count + nb, 0
    FL = np.ascontiguousarray(J.T.ravel())
    uh = np.zeros(6 * nb)
    uh.reshape(nb, 6)[:, 3:] = w
    xs = np.zeros(6 * nb)
    xs[: 3 * nb] = (h * w + 1e-13 * rng.normal(size=(nb, 3))).T.ravel()  # a nearby drift's x (warm)
    xs[3 * nb :] = 1e-9 * rng.normal(size=3 * nb)  # the guess's misses at the last drift (cold)
    bufs = (np.zeros(3 * nb), np.zeros(13 * nb))
    all_bufs = tuple(np.zeros(1) for _ in range(LB.CW)) + bufs
    q1 = np.zeros_like(q0)
    x = xs.copy()
    assert lieloop._drift(IL, FL, q0, uh, h, q1, x, warm, all_bufs)
    X = x.reshape(6, nb)
    for b in range(nb):
        if warm:
            g = xs.reshape(6, nb)[:3, b]
        else:
            g = np.array(rotation.cayley_guess(*J[b], *(h * w[b]))) + xs.reshape(6, nb)[3:, b]
        ref = np.zeros_like(q0)
        ok, *xb = rotation.rotate_columns(*J[b], *w[b], h, q0, ref, 12 * b, *g)
        assert ok
        assert np.array_equal(X[:3, b], xb), b
        assert np.array_equal(q1[12 * b + 3 : 12 * b + 12], ref[12 * b + 3 : 12 * b + 12]), b
    assert np.any(bufs[1].reshape(13, nb)[9] != 0.0)  # some bodies went on alone
    assert np.any(bufs[1].reshape(13, nb)[9] == 0.0)  # and most did not


def test_velocity_coordinate_jacobian_matches_finite_differences_of_the_joints() -> None:
    """∂g/∂η from the configuration Jacobian (δR = R η̂) equals finite differences of g along R exp(εη̂)."""
    chain = load_scene("rigid_chain").build(links=3, length=0.9)
    system = assemble(chain)
    I, F, Iv, _, IL, FL = system.engine_model().arrays
    from mbvi.engine import kernels as K
    from mbvi.engine import lieloop
    from mbvi.engine.fields import M

    NNZ, NQ, PCOL, PROW, N = M.NNZ, M.NQ, M.PCOL, M.PROW, M.N

    rng = np.random.default_rng(0)
    q = system.layout.q0.copy()
    n, nv = int(I[N]), int(Iv[NQ])
    u, w, g0 = np.zeros(3 * n), np.zeros(3 * n), np.zeros(n)
    K.constraint_values(I, F, q, u, w, g0)
    gdq, gdv = np.zeros(int(I[NNZ])), np.zeros(int(Iv[NNZ]))
    lieloop._jacobian_v(I, F, IL, FL, q, u, w, gdq, gdv)
    G = np.zeros((n, nv))
    np.add.at(G, (Iv[Iv[PROW] : Iv[PROW] + len(gdv)], Iv[Iv[PCOL] : Iv[PCOL] + len(gdv)]), gdv)
    d = rng.normal(size=nv)
    eps = 1e-7
    qp = q.copy()
    for b in range(int(IL[LT.NB])):
        oq, ov = int(IL[IL[LT.BQ] + b]), int(IL[IL[LT.BV] + b])
        qp[oq : oq + 3] += eps * d[ov : ov + 3]
        R = q[oq + 3 : oq + 12].reshape(3, 3).T
        Rp = R @ Rotation.from_rotvec(eps * d[ov + 3 : ov + 6]).as_matrix()
        qp[oq + 3 : oq + 12] = Rp.T.ravel()
    gp = np.zeros(n)
    K.constraint_values(I, F, qp, u, w, gp)
    np.testing.assert_allclose((gp - g0) / eps, G @ d, atol=1e-6)


def _every_joint() -> mbvi.Scene:
    """Rigid bodies and particles on every joint type (each body off its joints' axes)."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    for i, name in enumerate(("a", "b", "c", "d")):
        s.add(mbvi.RigidBody(name, mass=1.0 + i, inertia=(0.2, 0.25, 0.3), position=(i, 0.1 * i, -0.2 * i)))
    s.add(mbvi.Particle("p", mass=0.5, position=(4.0, 0.3, -1.0)))
    s.add(mbvi.Revolute("world", "a", anchor=(-0.5, 0.0, 0.0), axis=(0.0, 1.0, 0.0)))
    s.add(mbvi.Spherical("a", "b", anchor=(0.5, 0.05, -0.1)))
    s.add(mbvi.Prismatic("b", "c", axis=(1.0, 0.0, 0.2)))
    s.add(mbvi.Fixed("c", "d", anchor=(2.5, 0.2, -0.5)))
    s.add(mbvi.Rod("d", "p", anchor_a=(0.2, 0.0, 0.1)))
    return s


@pytest.mark.parametrize("scene", ["rigid_chain", "spinning_top", "upright_top", "every_joint", "bench_chain"])
def test_the_fused_velocity_jacobian_is_the_two_step_one_bit_for_bit(scene: str) -> None:
    """U, W → G_v in one pass or through G on the configuration pattern: the same numbers, at a random
    configuration off the joints (each entry of G has one term, or two with a prismatic joint). The fused
    pass folds each product term's sign into its coefficients: no value may change by it."""
    from mbvi.engine import kernels as K
    from mbvi.engine import lieloop
    from mbvi.engine.fields import M

    NNZ, N = M.NNZ, M.N

    if scene == "every_joint":
        built = _every_joint()
    elif scene == "bench_chain":
        built = rigid_chain(8)
    elif scene == "upright_top":
        built = load_scene("spinning_top").build(tilt=0.0)  # its tip exactly on the body's z axis
    else:
        built = load_scene(scene).build()
    system = assemble(built)
    I, F, Iv, _, IL, FL = system.engine_model().arrays
    assert IL[LT.NB] > 0 and IL[LT.FUSED] == (2 if scene == "every_joint" else 1)  # prismatic: two terms
    # an entry's rotation terms in threes, summed three at a time; where every entry of G_v is one copy or
    # one three (the upright top, the benchmark's chain), it is written once, without a zero fill first (not
    # where an entry has two threes, as the rigid_chain scene's, or two terms a product, a prismatic joint's).
    # The tilted top's tip, rotated into the body frame, may keep a round-off component (-8e-19 m on one
    # machine, 0 on another) that is a second three in one entry: either path, the same numbers below.
    expected = {"spinning_top": (1, 2), "upright_top": (2,), "bench_chain": (2,)}.get(scene, (1,))
    assert IL[LT.ROT3] in expected
    q = system.layout.q0 + 0.3 * np.random.default_rng(1).normal(size=system.nq)  # off the joints too
    n = int(I[N])
    uw, g = np.zeros(6 * n), np.zeros(n)
    K.constraint_values(I, F, q, uw[: 3 * n], uw[3 * n :], g)
    two, one = np.zeros(int(Iv[NNZ])), np.full(int(Iv[NNZ]), np.nan)
    lieloop._jacobian_v(I, F, IL, FL, q, uw[: 3 * n], uw[3 * n :], np.zeros(int(I[NNZ])), two)
    lieloop._jacobian_v_fused(IL, FL, q, uw, one)
    assert np.any(two != 0.0)
    np.testing.assert_array_equal(one.view(np.int64), two.view(np.int64))  # zeros' signs too


# -- acceptance ------------------------------------------------------------------------------------
@pytest.mark.parametrize("integrator", ["verlet", "yoshida4"])
def test_free_body_near_its_intermediate_axis_at_two_radians_per_step(integrator: str) -> None:
    """h|ω| = 2: L to 1e-9 relative, energy within 5 %, RᵀR − I ≤ 1e-10 over 2000 steps (and the flip happens)."""
    J = np.array([1.0, 2.0, 2.5])
    R0 = Rotation.from_euler("xyz", [0.4, -0.2, 1.0])
    w = np.array([0.01, 1.0, 0.01])
    dt = 1e-2
    w *= 2.0 / dt / np.linalg.norm(w)
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("tee", mass=1.0, inertia=J, orientation=R0, angular_velocity=R0.apply(w)))
    traj = mbvi.simulate(scene, 2000 * dt, dt, integrator)
    L = traj.angular_momentum
    assert np.max(np.abs(L - L[0])) <= 1e-9 * np.linalg.norm(L[0])
    E = traj.energy
    assert np.max(np.abs(E - E[0])) <= 0.05 * E[0]
    assert _orthonormality(traj.rotation("tee")) <= 1e-10
    w_body = np.einsum("nji,nj->ni", traj.rotation("tee"), traj.angular_velocity("tee"))
    assert np.sum(np.sign(w_body[:-1, 1]) != np.sign(w_body[1:, 1])) >= 2  # it tumbles (Dzhanibekov flips)


@pytest.mark.filterwarnings("ignore:integrator .* with max_turn=inf turned rigid body:RuntimeWarning")
def test_free_body_energy_band_without_refinement_stays_bounded() -> None:
    """Refinement off (``max_turn=inf``), h|ω| = 2: every step exists; the energy oscillates in a band, no drift."""
    J = np.array([1.0, 2.0, 2.5])
    w = np.array([0.01, 1.0, 0.01])
    dt = 1e-2
    w *= 2.0 / dt / np.linalg.norm(w)
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("tee", mass=1.0, inertia=J, angular_velocity=w))
    traj = mbvi.simulate(scene, 20000 * dt, dt, max_turn=math.inf)
    E = traj.energy / traj.energy[0] - 1.0
    assert np.max(np.abs(E)) <= 0.1  # the Cayley map's O((h|ω|)²) band at 2 rad per step
    first, last = E[: len(E) // 10], E[-len(E) // 10 :]
    assert abs(np.mean(last) - np.mean(first)) <= 0.1 * np.ptp(E)  # no secular drift over 20 000 steps
    assert _orthonormality(traj.rotation("tee")) <= 1e-10


@pytest.mark.slow
def test_whipping_chain_completes_a_hundred_seconds_at_a_centisecond() -> None:
    """10 capsules of 0.1 m, 0.1 kg released horizontal: the tip whips at ~100 rad/s (h|ω| ≈ 1).

    The rotation-matrix RATTLE stops at 2.3 s; here the run completes 100 s at
    dt = 1e-2 with every joint held to 1e-9 and the energy in a band below 25 %
    of the available energy (the potential drop to hanging straight down).
    """
    scene = load_scene("rigid_chain").build(links=10, length=1.0, radius=0.01, density=2800.0)
    masses = np.array([b.mass for b in scene.bodies])
    assert np.allclose(masses, 0.1, rtol=0.01)
    traj = mbvi.simulate(scene, 100.0, 1e-2)
    assert traj.t[-1] == pytest.approx(100.0)
    assert traj.constraint_error.max() <= 1e-9
    ell = 0.1
    available = float(np.sum(masses * 9.81 * (np.arange(10) + 0.5) * ell))  # U(horizontal) − U(hanging)
    assert np.ptp(traj.energy) <= 0.25 * available
    spin = max(np.linalg.norm(traj.angular_velocity(b.name), axis=1).max() for b in scene.bodies)
    assert 1e-2 * spin > 0.5  # it did whip past where the old RATTLE failed


def test_whipping_chain_first_seconds_agree_with_a_fine_reference() -> None:
    """The refined large steps follow the motion: at dt = 1e-2 the first 1.5 s match dt = 1e-4 to 2 %."""
    scene = load_scene("rigid_chain").build(links=10, length=1.0, radius=0.01, density=2800.0)
    coarse = mbvi.simulate(scene, 1.5, 1e-2)
    fine = mbvi.simulate(scene, 1.5, 1e-4, save_every=100)
    tip_c, tip_f = coarse.position("link9"), fine.position("link9")
    assert np.max(np.abs(tip_c - tip_f)) <= 0.02 * 1.0


def test_batch_of_spinning_bodies_matches_serial_runs() -> None:
    """simulate_batch takes the same Lie-group steps as simulate, refinement included."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    w = np.array([0.0, 0.5, 150.0])  # h|ω| = 1.5: every step is refined
    scene.add(mbvi.RigidBody("top", mass=1.0, inertia=(1.0, 1.0, 0.5), position=(0, 0, 0.5),
                             velocity=np.cross(w, [0, 0, 0.5]), angular_velocity=w))  # fmt: skip
    scene.add(mbvi.Spherical("world", "top", anchor=(0, 0, 0)))
    system = assemble(scene)
    s0 = system.initial_state()
    Q = np.array([s0.q, s0.q])
    V = np.array([s0.v, 1.5 * s0.v])
    batch = mbvi.simulate_batch(scene, 0.5, 1e-2, initial_states=(Q, V))
    for b in range(2):
        serial = mbvi.simulate(scene, 0.5, 1e-2, initial_state=mbvi.State(Q[b], V[b]))
        np.testing.assert_allclose(batch[b].q, serial.q, atol=1e-12)
        assert batch[b].constraint_error.max() <= 1e-9
