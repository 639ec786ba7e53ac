"""The engine's dense least squares (the full-Newton fallbacks of SHAKE) and the runs that need it.

:func:`mbvi.engine.dense.lstsq` replaced ``numpy.linalg.lstsq`` inside the compiled loops (whose LAPACK
wrapper cost every machine's first run ~3 s of compiling per loop): it must give numpy's minimum-norm
solution (of the system with its rows scaled alike) for every shape and rank, and a rigid chain whose
steps fall back on it must keep the method's order and its constraints.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scene_loader import rigid_chain

import mbvi
from mbvi.engine.dense import lstsq


@pytest.mark.parametrize("seed", range(4))
def test_lstsq_is_numpys_minimum_norm_solution_for_any_shape_and_rank(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(60):
        m, n = (int(k) for k in rng.integers(1, 14, 2))
        rank = int(rng.integers(0, min(m, n) + 1))
        A = rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n)) * 10.0 ** rng.uniform(-4, 4)
        b = rng.standard_normal(m)
        A0, b0 = A.copy(), b.copy()
        x = lstsq(A, b)
        assert np.array_equal(A, A0) and np.array_equal(b, b0)  # inputs untouched
        # numpy on the system with its rows scaled to a largest entry of 1, as lstsq weighs them
        big = np.abs(A).max(axis=1)
        d = np.where(big > 0, 1.0 / np.where(big > 0, big, 1.0), 1.0)
        DA, Db = d[:, None] * A, d * b
        ref = np.linalg.lstsq(DA, Db, rcond=1e-13)[0]
        assert np.linalg.norm(x - ref) <= 1e-10 * max(np.linalg.norm(ref), 1e-300)
        # the least-squares conditions themselves: (DA)ᵀ(DAx − Db) = 0
        scale = np.linalg.norm(DA) * (np.linalg.norm(DA) * np.linalg.norm(x) + np.linalg.norm(Db))
        assert np.linalg.norm(DA.T @ (DA @ x - Db)) <= 1e-11 * max(scale, 1e-300)
        if rank == min(m, n) == m:  # consistent: the unweighted least-squares solution of least norm, numpy's
            assert np.linalg.norm(x - np.linalg.lstsq(A, b)[0]) <= 1e-9 * np.linalg.norm(x)


def test_lstsq_of_a_constraint_counted_twice_shares_its_multiplier_by_the_least_norm() -> None:
    """Columns 0 and 1 parallel (one row's Jacobian, once doubled): only 2x₀ + x₁ is determined, and the
    least-norm split puts it along (2, 1)."""
    A = np.array([[2.0, 1.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    x = lstsq(A, np.array([3.0, 3.0, 6.0]))
    assert x == pytest.approx([1.2, 0.6, 2.0], abs=1e-14)


def test_lstsq_solves_rows_of_any_size() -> None:
    """Rows of very different or extreme size (a 1e-14 row is a constraint too; 1e155 squared overflows)."""
    assert lstsq(np.diag([1.0, 1e-14]), np.array([1.0, 1e-14])) == pytest.approx([1.0, 1.0], rel=1e-14)
    rng = np.random.default_rng(7)
    x = np.arange(1.0, 6.0)
    for size in (1e155, 1e-160, 1e-300, 1e200):
        A = rng.standard_normal((5, 5)) * size
        assert lstsq(A, A @ x) == pytest.approx(x, rel=1e-12)


def test_lstsq_of_a_zero_or_non_finite_system_is_zero() -> None:
    assert not lstsq(np.zeros((3, 2)), np.ones(3)).any()
    for bad in (np.nan, np.inf):
        A = np.eye(3)
        A[1, 1] = bad
        assert not lstsq(A, np.ones(3)).any()
        assert not lstsq(np.eye(3), np.array([1.0, bad, 1.0])).any()


def test_a_rigid_chain_whose_steps_need_the_full_newton_fallback_keeps_its_order_and_constraints() -> None:
    """A 10-link chain whipping at dt = 2e-2 with no substeps: SHAKE's quasi-Newton stalls on some steps
    and the dense full Newton finishes them; the energy band still falls as h² and the joints hold."""
    scene = rigid_chain(10)
    system = mbvi.assemble(scene)
    stepper = mbvi.get_integrator("verlet")(system, 2e-2, max_turn=math.inf)
    assert stepper.run(system.initial_state(), 0.0, 250).counters["newton"] > 0
    bands = []
    for dt in (2e-2, 1e-2):
        traj = mbvi.simulate(scene, 5.0, dt, "verlet", max_turn=math.inf)
        assert np.abs(traj.constraint_error).max() < 1e-10
        bands.append(np.ptp(traj.energy))
    assert 3.0 < bands[0] / bands[1] < 5.5  # second order: 4
