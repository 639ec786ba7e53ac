"""Work the compiled Lie loop leaves out of a step, and why the result is the same.

RATTLE's velocity projection is made when a state is read, not at every step.

The projection onto G_v(q₁) u = 0 changes no position: the next step's SHAKE
multipliers absorb any velocity along M_v⁻¹ G_vᵀ. So a run carries u off the
joints between saved states (:func:`mbvi.engine.lieloop._substep`) and
projects what it saves and returns. These tests hold the three consequences:
positions as RATTLE's with a projection at every step, saved velocities on
the joints, and a loose tolerance (where a step's residual leaves a large
velocity off the joints) still projecting every step, with SHAKE's factor
rather than a new one at every step. And gravity alone is a
force computed once per run, with the same result bit for bit.
"""

from __future__ import annotations

import numpy as np
from scene_loader import rigid_chain, verlet_drifts

import mbvi

DT = 1e-3


def test_positions_do_not_depend_on_when_the_velocity_is_projected() -> None:
    """One run of 300 steps against 300 one-step runs, each of which returns a projected velocity
    (RATTLE as written): the same states, to SHAKE's tolerance."""
    system = mbvi.assemble(rigid_chain(8))
    s0 = system.initial_state()
    lazy = mbvi.get_integrator("verlet")(system, DT)
    _, Q, V = lazy.integrate(s0, 0.0, 300, save_every=300)
    each = mbvi.get_integrator("verlet")(system, DT)
    state = s0
    for k in range(300):
        _, q, v = each.integrate(state, k * DT, 1, save_every=1)
        state = mbvi.State(q[-1], v[-1])
    assert np.max(np.abs(Q[-1] - state.q)) <= 1e-10
    assert np.max(np.abs(V[-1] - state.v)) <= 1e-8 * np.abs(state.v).max()
    assert np.abs(Q[-1] - s0.q).max() > 0.1  # the chain fell: the comparison is not of two rests


def test_saved_velocities_are_on_the_joints_and_saving_changes_the_states_only_within_tolerance() -> None:
    """A saved state's projection refreshes SHAKE's factor of A, which otherwise serves a few steps: the
    iteration, not its solution, depends on what a run saves."""
    system = mbvi.assemble(rigid_chain(8))
    s0 = system.initial_state()
    sparse = mbvi.get_integrator("verlet")(system, DT).integrate(s0, 0.0, 350, save_every=7)
    dense = mbvi.get_integrator("verlet")(system, DT).integrate(s0, 0.0, 350, save_every=1)
    for q, v in zip(sparse[1], sparse[2], strict=True):
        joint_rates = system.constraint_jacobian(q) @ v
        assert np.abs(joint_rates).max() <= 1e-12 * max(1.0, np.abs(v).max())
    np.testing.assert_allclose(sparse[1], dense[1][::7], rtol=0, atol=1e-10)
    np.testing.assert_allclose(sparse[2], dense[2][::7], rtol=0, atol=1e-8)
    assert np.abs(sparse[1][-1] - sparse[1][0]).max() > 0.1  # the chain fell


def test_shake_with_an_older_factor_refined_holds_the_joints_and_the_energy() -> None:
    """SHAKE solves with a factor of A up to MAX_FACTOR_AGE steps old, refined once against A(q₀) per
    correction: the run is the one with a fresh factor at every step (saving every state refreshes it),
    to the solver tolerance, in positions and in energy."""
    from mbvi.engine import lieloop

    system = mbvi.assemble(rigid_chain(32))
    s0 = system.initial_state()
    old = mbvi.get_integrator("verlet")(system, DT).integrate(s0, 0.0, 400, save_every=400)
    fresh = mbvi.get_integrator("verlet")(system, DT).integrate(s0, 0.0, 400, save_every=1)
    assert lieloop.MAX_FACTOR_AGE > 1
    np.testing.assert_allclose(old[1][-1], fresh[1][-1], rtol=0, atol=1e-9)
    assert np.abs(system.constraint_error(old[1][-1])).max() <= 1e-11
    drop = 9.81 * sum(i + 0.5 for i in range(32))  # potential energy from horizontal to hanging down, J
    e_old, e_fresh = system.energy(old[1][-1], old[2][-1]), system.energy(fresh[1][-1], fresh[2][-1])
    assert abs(e_old - e_fresh) <= 1e-12 * drop


def test_a_loose_tolerance_still_projects_at_every_step() -> None:
    """At tol 1e-2 a step may leave ~tol ℓ/h = 10 m/s off the joints, which a step accepted as predicted
    does not absorb: left unprojected, it piled up and SHAKE failed 178 steps in. Every step projects there."""
    system = mbvi.assemble(rigid_chain(8))
    stepper = mbvi.get_integrator("verlet")(system, DT, tol=1e-2)
    _, Q, V = stepper.integrate(system.initial_state(), 0.0, 1000, save_every=10)
    assert np.all(np.isfinite(Q)) and np.all(np.isfinite(V))
    assert np.abs(Q[-1] - Q[0]).max() > 0.1  # the chain moved
    for q, v in zip(Q, V, strict=True):
        assert np.abs(system.constraint_jacobian(q) @ v).max() <= 1e-12 * max(1.0, np.abs(v).max())


def test_a_loose_tolerance_projects_with_shake_s_factor_and_does_not_refactor_every_step() -> None:
    """At tol 1e-6 each step's projection uses SHAKE's factor, of this or an earlier configuration, refined
    once on A(q₁) (the velocity it leaves along M_v⁻¹ G_vᵀ is the next SHAKE's to absorb, which changes no
    position): the 32-link chain makes one factorization of A in about eight steps instead of one every step,
    and its run is the one that projects exactly at every step (saving every state) to the tolerance."""
    system = mbvi.assemble(rigid_chain(32))
    s0, tol = system.initial_state(), 1e-6
    _, factors = verlet_drifts(system, s0, 1000, tol=tol)
    assert factors <= 250, factors  # 1001 when every step refactored
    lazy = mbvi.get_integrator("verlet")(system, DT, tol=tol).integrate(s0, 0.0, 1000, save_every=1000)
    each = mbvi.get_integrator("verlet")(system, DT, tol=tol).integrate(s0, 0.0, 1000, save_every=1)
    q, v = lazy[1][-1], lazy[2][-1]
    assert np.abs(q - each[1][-1]).max() <= tol * system.length_scale
    assert system.residual(system.active_constraints(q)) <= tol
    assert np.abs(system.constraint_jacobian(q) @ v).max() <= 1e-12 * np.abs(v).max()  # saved: projected
    drop = 9.81 * sum(i + 0.5 for i in range(32))  # potential energy from horizontal to hanging down, J
    assert abs(system.energy(q, v) - system.energy(each[1][-1], each[2][-1])) <= 1e-5 * drop
    assert np.abs(q - s0.q).max() > 1.0  # the chain fell


def test_gravity_alone_is_applied_as_a_constant_force_with_the_same_result_bit_for_bit() -> None:
    """Under gravity alone through the bodies' centres the Lie loop kicks with a force computed once per
    run. A spring of zero stiffness changes no force but makes the loop evaluate forces at every step:
    the two runs are the same to the last bit, for every method of the family."""
    plain = rigid_chain(6)
    evaluated = rigid_chain(6)
    evaluated.add(mbvi.Spring("link0", "link5", stiffness=0.0))
    for integrator in ("verlet", "symplectic_euler_a", "symplectic_euler_b", "yoshida4"):
        runs = []
        for scene in (plain, evaluated):
            system = mbvi.assemble(scene)
            runs.append(mbvi.get_integrator(integrator)(system, DT).integrate(system.initial_state(), 0.0, 400, 40))
        np.testing.assert_array_equal(runs[0][1], runs[1][1])
        np.testing.assert_array_equal(runs[0][2], runs[1][2])
        assert np.abs(runs[0][1][-1] - runs[0][1][0]).max() > 0.1  # the chain fell
