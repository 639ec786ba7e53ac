"""Batches stepped in lockstep (:mod:`mbvi.engine.lockstep`): every member is exactly its own serial run.

Each member of a chunk performs the operations of its serial run in the same
order, so a member equals, bit for bit, the serial compiled run started from
the batch's projected initial state — however the batch is cut into chunks,
and whichever members leave the common path (full Newton, failure).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mbvi
from mbvi.engine import lockstep, runner
from mbvi.engine.fields import ST

FAMILY = ("verlet", "symplectic_euler_a", "symplectic_euler_b", "yoshida4")


def _loaded_chain(damped: bool = False) -> mbvi.Scene:
    """Three particles on rods under gravity, a spring (a conservative family) and a constant force (work).

    ``damped``: and a damper and drag (velocity-dependent: each member's drift is a fixed point).
    """
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    for i, name in enumerate("abc"):
        scene.add(mbvi.Particle(name, mass=1.0 + i, position=(1.0 + i, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    scene.add(mbvi.Rod("b", "c"))
    scene.add(mbvi.Spring("world", "c", stiffness=20.0, rest_length=1.5))
    scene.add(mbvi.ExternalForce("c", force=(0.0, 3.0, 1.0)))
    if damped:
        scene.add(mbvi.Damper("world", "b", damping=0.4))
        scene.add(mbvi.Drag("c", coefficient=0.3))
    return scene


def _members(system: mbvi.System, count: int, scale: float, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    s0 = system.initial_state()
    rng = np.random.default_rng(seed)
    V = np.array([system.project_velocity(s0.q, scale * rng.normal(size=system.nq)) for _ in range(count)])
    return np.repeat(s0.q[None], count, axis=0), V


def _serial(system, integrator: str, dt: float, q: np.ndarray, v: np.ndarray, nsteps: int, save_every: int):
    stepper = mbvi.get_integrator(integrator)(system, dt)
    try:
        out = stepper.run(mbvi.State(q, v), 0.0, nsteps, save_every)
    except mbvi.SolverError as err:
        return err, None, None
    return out.q, out.v, out.work


def _batch(stepper, model, Q0, V0, nsteps: int, save_every: int, chunk: int | None = None, ends=None):
    """Every member through the compiled batch (:func:`mbvi.engine.runner.run_batch`): t, Q, V, work, info."""
    return runner.run_batch(
        model,
        stepper.method(),
        Q0,
        V0,
        t0=0.0,
        h=stepper.dt,
        nsteps=nsteps,
        save_every=save_every,
        tol=stepper.tol,
        maxiter=stepper.maxiter,
        length_scale=float(stepper.system.length_scale),
        max_turn=stepper.max_turn,
        chunk=chunk,
        ends=ends,
    )


@pytest.mark.parametrize("damped", [False, True], ids=["conservative", "damped"])
@pytest.mark.parametrize("integrator", FAMILY)
def test_each_member_is_its_serial_run_however_the_batch_is_chunked(integrator: str, damped: bool) -> None:
    scene = _loaded_chain(damped)
    system = mbvi.assemble(scene)
    model = system.engine_model()
    assert lockstep.eligible(0, mbvi.get_integrator(integrator).method())
    Q0, V0 = _members(system, 11, 1.0)
    dt, nsteps, every = 2e-3, 400, 7
    stepper = mbvi.get_integrator(integrator)(system, dt)
    runs = {c: _batch(stepper, model, Q0, V0, nsteps, every, chunk=c) for c in (0, 1, 4, 11, 32)}
    t, Q, V, W, info = runs[1]
    assert np.all(info[:, 0] == ST.DONE) and np.all(info[:, 4] == 0)
    for c, (_, Qc, Vc, Wc, ic) in runs.items():  # chunked or member by member (0): not even round-off differs
        assert np.array_equal(Qc, Q) and np.array_equal(Vc, V) and np.array_equal(Wc, W), c
        assert np.array_equal(ic[:, :3], info[:, :3]), c  # status, steps taken, states saved
    assert np.all(info[:, 1] == nsteps) and np.all(info[:, 2] == len(t))
    for b in (0, 5, 10):
        Qs, Vs, Ws = _serial(system, integrator, dt, Q[b, 0], V[b, 0], nsteps, every)
        assert np.array_equal(Qs, Q[b]) and np.array_equal(Vs, V[b]) and np.array_equal(Ws, W[b])
    # and the physics of every member: constraints to round-off, E − W in a band of O(h) (Euler) or O(h²)
    band = 2e-2 if integrator.startswith("symplectic_euler") else 1e-3
    for b in range(len(Q0)):
        traj = mbvi.Trajectory.from_states(system, t, Q[b], V[b], scene=scene)
        assert traj.constraint_error.max() <= 1e-11
        balance = traj.energy - W[b]
        assert np.ptp(balance) <= band * max(1.0, np.abs(traj.energy).max())
        assert np.ptp(W[b]) > 1e-3  # the constant force does work: the balance is not trivial


@pytest.mark.parametrize(
    ("integrator", "damped", "every"),
    [("verlet", False, 1), ("yoshida4", False, 3), ("verlet", True, 3)],
    ids=["verlet", "yoshida4-every-3", "damped-every-3"],
)
def test_members_that_need_full_newton_or_fail_leave_the_chunk_alone(integrator: str, damped: bool, every: int) -> None:
    """A double pendulum at a coarse step: fast members stall SHAKE (full Newton) or fail; slow ones do not.

    A member that leaves goes back to the start of its step (for ``yoshida4`` possibly in its second or
    third substep; with a damper, in its drift's fixed point) and finishes on the serial loop, saving
    every ``every``-th state.
    """
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    if damped:
        scene.add(mbvi.Damper("world", "b", damping=0.5))
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    speeds = np.concatenate([np.linspace(0.0, 8.0, 13), [40.0, 1e3]])
    V0 = np.array([system.project_velocity(s0.q, np.array([0, 0, -s, 0, 0, s], float)) for s in speeds])
    Q0 = np.repeat(s0.q[None], len(V0), axis=0)
    dt, nsteps = 0.03, 200
    stepper = mbvi.get_integrator(integrator)(system, dt)
    model = system.engine_model()
    ends = (np.zeros_like(Q0), np.zeros_like(V0), np.zeros(len(Q0)))
    _t, Q, V, W, info = _batch(stepper, model, Q0, V0, nsteps, every, chunk=len(Q0), ends=ends)
    newton = info[:, 4] > 0
    done = info[:, 0] == ST.DONE
    assert (done & ~newton).any() and (newton | ~done).any()  # some stay in lockstep, some leave it
    if integrator == "verlet" and not damped:
        assert (done & newton).any() and (~done).any()
    for b in range(len(Q0)):
        Qs, Vs, Ws = _serial(system, integrator, dt, Q[b, 0], V[b, 0], nsteps, every)
        if done[b]:
            assert np.array_equal(Qs, Q[b]) and np.array_equal(Vs, V[b]) and np.array_equal(Ws, W[b])
            assert info[b, 1] == nsteps and info[b, 2] == len(Qs)
        else:  # the serial run fails at the same step; the batch keeps the member's states up to it, and where the
            # member stopped: the failing step's start, which the serial run keeps too when it is off the save grid
            assert isinstance(Qs, mbvi.SolverError) and Qs.step == info[b, 1]
            j = info[b, 2]
            off_grid = info[b, 1] % every != 0
            assert len(Qs.partial.q) == j + off_grid and np.array_equal(Qs.partial.q[:j], Q[b, :j])
            assert np.array_equal(Qs.partial.v[:j], V[b, :j])
            if off_grid:
                assert np.array_equal(Qs.partial.q[j], ends[0][b]) and np.array_equal(Qs.partial.v[j], ends[1][b])
                assert Qs.partial.t[j] == pytest.approx(info[b, 1] * dt)
    # through the public API: the failure names its member and keeps everyone's trajectory
    if (~done).any():
        with pytest.raises(mbvi.SolverError) as err:
            mbvi.simulate_batch(scene, nsteps * dt, dt, initial_states=(Q0, V0), integrator=integrator,
                                save_every=every)  # fmt: skip
        assert err.value.member == int(np.flatnonzero(~done)[0])
        assert all(len(err.value.trajectory[b].t) == info[b, 2] for b in np.flatnonzero(done))
        for b in np.flatnonzero(~done):  # a failed member's: as its run alone keeps it, to its failing step's start
            part = err.value.trajectory[b]
            assert len(part.t) == info[b, 2] + (info[b, 1] % every != 0)
            assert part.t[-1] == pytest.approx(info[b, 1] * dt)
            assert np.array_equal(part.q[-1], ends[0][b] if info[b, 1] % every else Q[b, info[b, 2] - 1])


def test_a_member_at_a_singular_configuration_runs_as_it_would_alone() -> None:
    """A four-bar member at its toggle (all links collinear: A = G M⁻¹ Gᵀ singular) among regular ones."""
    P = np.array([2.0, 0.0, 0.0])
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    a = np.array([np.cos(1.0), 0.0, np.sin(1.0)])
    # b: distance 2 from a and 1 from P, in the x-z plane
    d = P - a
    L = np.linalg.norm(d)
    x = (L**2 + 4.0 - 1.0) / (2 * L)
    perp = np.array([-d[2], 0.0, d[0]]) / L
    b = a + x * d / L + np.sqrt(4.0 - x**2) * perp
    scene.add(mbvi.Particle("a", mass=1.0, position=tuple(a)))
    scene.add(mbvi.Particle("b", mass=1.0, position=tuple(b)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    scene.add(mbvi.Rod("world", "b", anchor_a=tuple(P)))
    system = mbvi.assemble(scene)
    s0 = system.initial_state()
    toggle = np.array([1.0, 0.0, 0.0, 3.0, 0.0, 0.0])  # a = (1, 0, 0), b = (3, 0, 0): every link on the x axis
    assert np.abs(system.rows.values(toggle[None])[0, system.active] / system.active_scale).max() <= 1e-15
    Q0 = np.array([s0.q, toggle, s0.q, s0.q])
    V0 = np.array([np.zeros(6), [0, 0, 0.5, 0, 0, 0.0], [0, 0.3, 0, 0, -0.2, 0], np.zeros(6)])
    dt, nsteps = 1e-3, 100
    stepper = mbvi.get_integrator("verlet")(system, dt)
    _t, Q, V, _W, info = _batch(stepper, system.engine_model(), Q0, V0, nsteps, 1, chunk=4)
    for b in range(4):
        Qs, Vs, _ = _serial(system, "verlet", dt, Q[b, 0], V[b, 0], nsteps, 1)
        if isinstance(Qs, mbvi.SolverError):  # fails where the serial run fails, keeping the same states
            assert info[b, 0] != ST.DONE and Qs.step == info[b, 1]
            assert np.array_equal(Qs.partial.q, Q[b, : info[b, 2]])
        else:
            assert info[b, 0] == ST.DONE
            assert np.array_equal(Qs, Q[b]) and np.array_equal(Vs, V[b])
    assert info[1, 3] > 0  # the toggle member was factored with the pseudo-inverse (on the serial loop)
    assert np.all(info[[0, 2, 3], 3] == 0)  # the regular members never were


def test_an_empty_batch_is_empty() -> None:
    system = mbvi.assemble(_loaded_chain())
    stepper = mbvi.get_integrator("verlet")(system, 1e-3)
    empty = np.zeros((0, system.nq))
    t, Q, V, W, info = _batch(stepper, system.engine_model(), empty, empty, 10, 5)
    assert Q.shape == (0, 3, system.nq) and V.shape == Q.shape and W.shape == (0, 3) and info.shape == (0, 6)
    np.testing.assert_allclose(t, [0.0, 5e-3, 1e-2])


@pytest.mark.parametrize("integrator", ["verlet", "yoshida4"])
def test_members_under_a_stiff_drag_are_their_serial_runs_bit_for_bit(integrator: str) -> None:
    """The serial loop mixes the velocity fixed point of a stiff damping (Anderson) once it contracts by more
    than ¼ an iterate; the lockstep lanes iterate it plainly. Members at κ = h c/2m of 0.3 and 0.45 converged
    there to within the tolerance but differed from their serial runs by 3e-15: the batch's promise is bit for
    bit. A member whose iteration would be mixed now takes its step in the serial loop."""
    h, m = 1e-2, 2.0
    for kappa in (0.1, 0.3, 0.45, 0.8, 3.0):
        scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
        scene.add(mbvi.Particle("p", mass=m, position=(0, 0, 0), velocity=(0.5, 0, 3.0)))
        scene.add(mbvi.Drag("p", coefficient=2 * m * kappa / h))
        system = mbvi.assemble(scene)
        start = system.initial_state()
        states = [mbvi.State(start.q, start.v * s) for s in (1.0, -0.5, 2.0)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (κ = 3: verlet's flip, warned of by both)
            try:
                serial = [mbvi.simulate(system, 1.0, h, integrator, initial_state=s) for s in states]
            except mbvi.SolverError:  # (yoshida4's backward stage: a damping too stiff for it)
                with pytest.raises(mbvi.SolverError):
                    mbvi.simulate_batch(system, 1.0, h, states, integrator=integrator)
                continue
            batch = mbvi.simulate_batch(system, 1.0, h, states, integrator=integrator)
        for one, member in zip(serial, batch, strict=True):
            assert np.array_equal(one.q, member.q) and np.array_equal(one.v, member.v), kappa
