"""Many states of one system stepped by the same compiled RATTLE, in parallel.

Ensembles, Monte Carlo studies and maps over initial conditions run B copies
of one scene. :func:`simulate_batch` hands all of them to one compiled call
(:func:`mbvi.engine.loop.run_batch`), spread over the machine's cores: scenes
of particles under the RATTLE family step in chunks of members in lockstep
(:mod:`mbvi.engine.lockstep`, the serial loop's operations with the members
on the inner axis), any other batch, and any member that needs a fallback,
through the very loop :func:`mbvi.simulate` runs for one system — same warm
start, fallbacks and tolerances. Each member starts from its state as
:func:`mbvi.simulate` takes an ``initial_state`` (the lockstep chunks too: they
take the states as given), and therefore reproduces its serial run bit for bit.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from mbvi import notices
from mbvi.diagnosis import engine_failure, raise_interrupts
from mbvi.engine import lockstep
from mbvi.engine.fields import LT, RI, ST
from mbvi.engine.runner import RunResult, RunState, advance, nsave, run_batch, saved_states, saved_steps, threads
from mbvi.errors import ConstraintWarning, SolverError, member_failure
from mbvi.integrators.stepkernel import run_kernel_batch, step_failure
from mbvi.runs import (
    THROUGHPUT_SHARE,
    energy_scales,
    energy_throughput,
    judge_members,
    last_step,
    named_members,
    run_info,
    run_numbers,
    steady_drift,
)
from mbvi.scene import Scene
from mbvi.simulate import assembled, check_capabilities, joint_state, resolve_integrator
from mbvi.state import State, stack_states
from mbvi.system import System
from mbvi.trajectory import Trajectory

__all__ = ["simulate_batch"]


def simulate_batch(
    scene: Scene | System,
    t_end: float,
    dt: float,
    initial_states: Any,
    *,
    save_every: int = 1,
    integrator: str = "verlet",
    t0: float = 0.0,
    **options: Any,
) -> list[Trajectory]:
    """Simulate many initial states of one scene together, in parallel, with a compiled integrator.

    Parameters
    ----------
    scene : mbvi.Scene, mbvi.System or mbvi.LagrangianSystem
        A scene, or one already assembled (:func:`mbvi.assemble`, as :func:`mbvi.simulate` takes it), or a
        system in its own coordinates (its members run its compiled loop, member by member on every core; states
        are its generalized coordinates and velocities).
    t_end, dt : float
        End time and step size, s.
    initial_states : sequence of mbvi.State, or a tuple (Q, V) of arrays of shape (B, nq)
        One state per member (e.g. perturbations of ``assemble(scene).initial_state()``), each taken as
        :func:`mbvi.simulate` takes its ``initial_state``: positions must be on the joints (those off by
        round-off are brought onto them), velocities off them are projected (mass-weighted) with one
        :class:`mbvi.ConstraintWarning` naming the members and the largest change; a state on the joints is
        taken bit for bit.
    save_every : int, default: 1
        Keep every n-th state (the last one is always kept).
    integrator : str or Integrator subclass, default: "verlet"
        Any integrator. The schemes of the compiled engine (``verlet``, ``symplectic_euler_a``,
        ``symplectic_euler_b``, ``yoshida4``, any :class:`mbvi.Composition`; ``midpoint`` and
        ``implicit_euler`` for scenes without rigid bodies) run in the compiled batch loop; a plugin
        with a compiled step (:attr:`mbvi.Integrator.kernel`) runs it member by member on every core;
        any other integrator runs its members one by one in NumPy.
    t0 : float, default: 0
        Start time, s.
    **options
        Integrator options (``tol``, ``maxiter``).

    Returns
    -------
    list of Trajectory
        One per member, equal bit for bit to ``mbvi.simulate(scene, ..., initial_state=s)`` for that
        member (the same loop runs both from the same state; lockstep chunks take the states as given
        too), its ``work`` and ``info["energy_error"]`` included. Like ``simulate``, a run whose
        ``t_end − t0`` is not a whole number of steps ends at ``t_end`` with one shorter step, and each
        member's energy balance is judged as ``simulate`` judges it.

    Raises
    ------
    ValueError
        Bad input: an unknown integrator or option, states of the wrong shape or
        violating the constraints (naming the member).
    SolverError
        A member's step failed, or its run blew up (an integrator that promises a bounded energy): the
        message names the member, the time and the step; ``err.member`` is its index, ``err.members``
        those of every member that failed and ``err.trajectory`` the list of every member's trajectory
        up to where it stopped (the other members run to the end), whichever path ran them.

    Warns
    -----
    mbvi.ConstraintWarning
        Once, when initial velocities were projected onto the joints (naming the members).
    RuntimeWarning
        Once, naming the members whose energy error is large (as ``simulate`` warns for one run).

    Examples
    --------
    >>> import numpy as np, mbvi
    >>> scene = mbvi.Scene(gravity=(0, 0, -9.81))
    >>> _ = scene.add(mbvi.Particle("bob", mass=1.0, position=(1, 0, 0)))
    >>> _ = scene.add(mbvi.Rod("world", "bob"))
    >>> s0 = mbvi.assemble(scene).initial_state()
    >>> states = [mbvi.State(s0.q, s0.v + (0, w, 0)) for w in np.linspace(0, 1, 8)]
    >>> trajs = mbvi.simulate_batch(scene, t_end=1.0, dt=1e-2, initial_states=states)
    >>> len(trajs), trajs[0].q.shape
    (8, (101, 3))
    """
    from mbvi.lagrangian import LagrangianSystem

    if isinstance(scene, LagrangianSystem):  # a system in its own coordinates: its compiled loop, member by member
        from mbvi.lagrangian.run import simulate_lagrangian_batch

        return simulate_lagrangian_batch(scene, t_end, dt, initial_states, save_every=save_every,
                                         integrator=integrator, t0=t0, **options)  # fmt: skip
    if not isinstance(scene, (Scene, System)):
        raise ValueError(
            f"simulate_batch expects an mbvi.Scene, mbvi.System or mbvi.LagrangianSystem, got {type(scene).__name__}"
        )
    cls = resolve_integrator(integrator)
    t_end, dt, t0, save_every, nsteps = run_numbers(t_end, dt, t0, save_every, "simulate_batch")  # numpy numbers too
    last = last_step(t_end, dt, t0, nsteps)
    system, scene = assembled(scene)
    stepper = cls(system, dt, **options)
    check_capabilities(cls, system)
    if last != dt:  # t_end − t0 is not a whole number of steps: the last one shorter, ending at t_end, as simulate's
        return _ending_at(scene, system, cls, stepper, initial_states, t0, nsteps, save_every, last, options)
    trajs = _members(scene, system, cls, stepper, initial_states, float(t0), nsteps, save_every, options)
    _judge_energy(trajs, stepper, system)
    return trajs


def _members(scene, system, cls, stepper, initial_states, t0: float, nsteps: int, save_every: int,
             options: dict) -> list[Trajectory]:  # fmt: skip
    """Every member's run of ``nsteps`` steps of the stepper's dt (see :func:`simulate_batch`)."""
    dt = stepper.dt
    Q, V = _on_the_joints(system, *stack_states(initial_states, system.nq))
    info = run_info(cls, dt, options, batch=len(Q))
    if cls.kernel is not None:  # a plugin's compiled step: member by member, on every core
        out = run_kernel_batch(stepper, Q, V, float(t0), nsteps, save_every)
        if out is not None:
            return _kernel_members(stepper, system, scene, info, *out)
    # a scheme of the engine; None: the constraints are too wide for it
    model = stepper.engine_model() if cls.compiled else None
    if model is None:  # member by member on the NumPy path
        runs: dict[int, Any] = {}
        for b in range(len(Q)):
            runs[b] = _member(stepper, Q[b], V[b], float(t0), nsteps, save_every)
        return _finish(system, scene, info, [None] * len(Q), runs, {})
    for cb in model.callbacks:
        cb.reset()
    scheme = stepper.method()
    ends = (np.zeros_like(Q), np.zeros_like(V), np.zeros(len(Q)))  # where each member stopped (its state, work)
    if lockstep.eligible(int(model.IL[LT.NB]), scheme):  # particles under the RATTLE family: chunks in lockstep
        t, Qs, Vs, W, status = run_batch(
            model, scheme, Q, V, t0=float(t0), h=stepper.dt, nsteps=nsteps, save_every=save_every,
            tol=stepper.tol, maxiter=stepper.maxiter, length_scale=float(system.length_scale),
            max_turn=float(stepper.max_turn), project=False,  # the states are on the joints already, as simulate's
            ends=ends,
        )  # fmt: skip
    else:
        t, Qs, Vs, W, status = _engine_members(model, stepper, Q, V, float(t0), nsteps, save_every, ends)
    # a KeyboardInterrupt or SystemExit a load met is the user's (the members the loop hands back run again
    # below, and it was lost)
    raise_interrupts(model.callbacks)
    with np.errstate(over="ignore", invalid="ignore"):  # (each member's work as its run alone measures it)
        trajs = Trajectory.many_from_states(system, t, Qs, Vs, status[:, RI.SAVED], scene=scene, info=info, work=W)
    for b, traj in enumerate(trajs):  # its steps taken in substeps, as its run alone counts them
        traj.info["refined_steps"] = int(status[b, RI.REFINED])
    stopped: dict[int, Any] = {b: None for b in range(len(Q)) if status[b, RI.STATUS] not in (ST.DONE, ST.NEEDS_NUMPY)}
    for b in stopped:  # as a run alone keeps it: the failing step's start, off the save grid
        trajs[b] = _up_to_failure(system, scene, info, t, Qs[b], Vs[b], W[b], status[b], stepper.dt, ends, b)
    if stopped:  # the first one diagnosed now, before a run below resets the loads' record of an error
        b = min(stopped)
        stopped[b] = _engine_cause(system, model, stepper, status[b], ends[0][b], ends[1][b], float(t0))
    runs = {
        b: _member(stepper, Q[b], V[b], float(t0), nsteps, save_every)  # the whole member again, as it runs alone
        for b in range(len(Q))
        if status[b, RI.STATUS] == ST.NEEDS_NUMPY
    }
    return _finish(system, scene, info, trajs, runs, stopped)


def _ending_at(scene, system, cls, stepper, initial_states, t0: float, nsteps: int, save_every: int, last: float,
               options: dict) -> list[Trajectory]:  # fmt: skip
    """nsteps − 1 steps of the stepper's dt for every member, then one of ``last`` (< dt) ending at t_end: each
    member as :func:`mbvi.simulate` runs it (its head, then the same last step)."""
    dt = stepper.dt
    t1 = t0 + (nsteps - 1) * dt
    if nsteps > 1:
        heads = _members(scene, system, cls, stepper, initial_states, t0, nsteps - 1, save_every, options)
        starts = [(h.t, h.q, h.v) for h in heads]
        works = [h.work for h in heads]
        keep = slice(None) if (nsteps - 1) % save_every == 0 else slice(None, -1)  # as simulate: on the grid only
    else:
        Q, V = _on_the_joints(system, *stack_states(initial_states, system.nq))
        starts = [(np.array([t0]), Q[b][None], V[b][None]) for b in range(len(Q))]
        works = [np.zeros(1) for _ in starts]
        keep = slice(None)
    tail = cls(system, last, **options)
    trajs: list[Trajectory] = []
    for b, (t, q, v) in enumerate(starts):
        try:
            end = tail.run(State(q[-1].copy(), v[-1].copy()), t1, 1, 1)
        except SolverError as exc:
            rest = [Trajectory.from_states(system, tt, qq, vv, scene=scene) for tt, qq, vv in starts[b:]]
            raise member_failure(exc.located(exc.time, nsteps - 1), [b], len(starts), trajs + rest) from exc
        info = run_info(cls, dt, options, batch=len(starts))
        info["last_dt"] = last
        if "refined_steps" in end.counters:  # the head's and the last step's, as simulate counts them
            head = heads[b].info.get("refined_steps", 0) if nsteps > 1 else 0
            info["refined_steps"] = head + end.counters["refined_steps"]
        head_work, work = works[b], None
        if head_work is not None and end.work is not None and len(end.work) == len(end.t):  # as simulate joins them
            work = np.concatenate([head_work[keep], head_work[-1] + end.work[1:] - end.work[0]])
        with np.errstate(over="ignore", invalid="ignore"):
            whole = [np.concatenate([a[keep], e[1:]]) for a, e in ((t, end.t), (q, end.q), (v, end.v))]
            trajs.append(Trajectory.from_states(system, *whole, scene=scene, info=info, work=work))
    _judge_energy(trajs, stepper, system)
    return trajs


def _judge_energy(trajs: list[Trajectory], stepper, system) -> None:
    """Every member judged as :func:`mbvi.simulate` judges its run: one that blew up is a SolverError naming it
    (keeping every member's trajectory, the blown-up ones up to where they broke), for the integrators that
    promise a bounded energy; otherwise one RuntimeWarning names the members whose energy error is large."""
    from mbvi.simulate import _check_energy_balance, _warn_energy_error, _warn_wound_springs, torsion_springs

    def judge(traj: Trajectory) -> None:
        _check_energy_balance(traj, stepper, system)  # (W: the member's work, as its run alone measures it)
        _warn_energy_error(traj, stepper, system)

    judge_members(trajs, judge, _energy_suspects(trajs, system))
    if torsion_springs(system):  # a spring wound past half a turn, named as simulate names it (every member)
        judge_members(trajs, lambda traj: _warn_wound_springs(traj, system))


def _energy_suspects(trajs: list[Trajectory], system) -> list[int]:
    """The members whose energy may fail :func:`mbvi.simulate`'s judgement, for the exact one; every other member
    passes it (vectorized over members of one length: the exact judgement costs some 50 µs a member).

    A member passes when its energy is finite and max |E − E₀| is within a tenth of the least scale either test
    uses (the energy in motion, the larger of max T and the swing of U, and a tenth of the energy the forces
    moved through it, :func:`mbvi.runs.energy_throughput`; the energy scale): below the smallest threshold of
    both (:data:`mbvi.runs.WARN_ENERGY` = 0.1, :data:`mbvi.runs.BLOW_UP` = 1e3). With the work W of
    non-conservative forces the balance E − E₀ − W is; with such forces and W unknown (a member whose work was
    not measured), a rise of E is (as ``simulate`` judges a run without it).
    """
    sizes = {len(traj.t) for traj in trajs}
    if len(sizes) != 1 or sizes == {0}:
        return list(range(len(trajs)))
    E = np.stack([traj.energy for traj in trajs])
    T = np.stack([traj.kinetic for traj in trajs])
    U = np.stack([traj.potential for traj in trajs])
    measured = all(traj.work is not None and len(traj.work) == len(traj.t) for traj in trajs)
    with np.errstate(all="ignore"):
        finite = np.all(np.isfinite(E), axis=1)
        change = E - E[:, :1]
        if measured:
            change = change - np.stack([traj.work for traj in trajs])
        drift = np.max(change, axis=1) if system.has_forces and not measured else np.max(np.abs(change), axis=1)
        # a free system's motion as one mass; a system whose first member's momentum changes is no free one (its
        # other members' is checked only when that one's is kept: a batch of thousands under gravity pays once)
        first = steady_drift(trajs[0].v, system)
        steady = [first] + ([steady_drift(traj.v, system) for traj in trajs[1:]] if first is not None else [])
        boost = None if all(d is None for d in steady) else np.stack([np.zeros_like(t) if d is None else d
                                                                      for d, t in zip(steady, T, strict=True)])
        energy_scale, motion = energy_scales(T, U, system, boost)
        if measured and system.has_forces:  # a driven run's balance against what its forces moved through it too
            motion = np.maximum(motion, THROUGHPUT_SHARE * energy_throughput(np.stack([traj.work for traj in trajs])))
        calm = finite & (drift <= 0.1 * np.minimum(motion, energy_scale))
        error = np.max(np.abs(change), axis=1) / motion  # simulate.energy_error's figure, for every member at once
    if E.shape[1] >= 2 and (measured or not system.has_forces):
        for b in np.flatnonzero(calm):  # (the others get theirs from the exact judgement)
            trajs[b].info["energy_error"] = float(error[b])
            trajs[b].info["energy_in_motion"] = float(motion[b])
    return [int(b) for b in np.flatnonzero(~calm)]


def _on_the_joints(system, Q: np.ndarray, V: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every member's state as :func:`mbvi.simulate` takes a given ``initial_state`` (its rule: ``joint_state``).

    ``Q`` and ``V`` (B, nq) are changed in place and returned: a member on the joints is left bit for bit,
    positions off them by round-off are brought onto them, velocities off them are projected (mass-weighted).
    One :class:`mbvi.ConstraintWarning` names the members whose velocities were projected and the largest
    change.

    Raises
    ------
    ValueError
        A member's positions violate a joint (naming the member and the joint).
    """
    changes: dict[int, float] = {}
    given: dict[int, np.ndarray] = {}
    for b in _off_the_joints(system, Q, V):
        try:
            state, change = joint_state(system, Q[b], V[b])
        except ValueError as exc:
            raise ValueError(
                f"simulate_batch: initial state {b} violates the constraints: {exc}; give positions on the joints "
                "(e.g. a trajectory's or an equilibrium's state)"
            ) from None
        v0 = V[b].copy()
        Q[b], V[b] = state.q, state.v
        if change:
            changes[b], given[b] = change, v0
    if changes:
        worst = max(changes, key=changes.__getitem__)
        members = list(changes)
        largest = f"largest change {changes[worst]:.3g}" + (f", member {worst}" if len(members) > 1 else "")
        largest += ": " + system.projected_velocities(Q[worst], given[worst], V[worst])
        notices.warn(
            f"simulate_batch: the initial velocities of {named_members(members, len(Q))} violate the joints; projected "
            f"onto them ({largest})",
            ConstraintWarning,
        )
    return Q, V


#: the relative residual of positions, and of velocities along the joints' normals, below which
#: :func:`_off_the_joints` takes a member to be on the joints without the exact check (whose threshold on the
#: velocity change is 1e-9; the screen's own round-off is ~1e-13)
SCREEN_POSITION, SCREEN_VELOCITY = 1e-10, 1e-11


def _off_the_joints(system, Q: np.ndarray, V: np.ndarray) -> np.ndarray:
    """The members whose states may be off the joints, for the exact rule of :func:`mbvi.simulate.joint_state`;
    every other member is on them (vectorized: the exact rule factors G M⁻¹ Gᵀ for each member, ~25 µs, which
    for 8192 pendulums cost 5× their whole run).

    Positions: max |g/scale| over the rows. Velocities: the rows' rates G(q) v, exact for the bilinear rows as the
    central difference (g(q + εv) − g(q − εv)) / 2ε, relative to the row's scale, the length scale and max |v|.
    """
    rows = system.rows
    if not rows.n or not len(Q):
        return np.arange(0)
    scale = rows.scale
    length = max(float(system.length_scale), 1e-300)
    speed = np.maximum(np.max(np.abs(V), axis=1), 1e-300)
    eps = (1e-3 * length / speed)[:, None]
    with np.errstate(all="ignore"):
        position = np.max(np.abs(rows.values(Q)) / scale, axis=1)
        rate = (rows.values(Q + eps * V) - rows.values(Q - eps * V)) / (2.0 * eps)
        velocity = np.max(np.abs(rate) / scale, axis=1) * length / speed
    moving = np.max(np.abs(V), axis=1) > 0.0
    suspect = ~(position <= SCREEN_POSITION) | (moving & ~(velocity <= SCREEN_VELOCITY))
    return np.flatnonzero(suspect)


def _engine_members(
    model, stepper, Q0: np.ndarray, V0: np.ndarray, t0: float, nsteps: int, save_every: int,
    ends: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Every member through the compiled loop :func:`mbvi.simulate` runs for it, member by member on every core.

    The loop starts from each member's state as given (already on the joints, as :func:`mbvi.simulate` takes
    it: no projection in the loop), so a member that completes is its serial run bit for bit. A member the loop
    hands back to the NumPy path or that fails stops there, as in :func:`mbvi.engine.runner.run_batch`.

    Returns
    -------
    t : ndarray, (nsave,)
    Q, V : ndarray, (B, nsave, nq)
    work : ndarray, (B, nsave)
        The work of the non-conservative forces at each saved state, J.
    status : ndarray of int, (B, RI.count)
        Per member: status, step reached, states saved, counters (:data:`mbvi.engine.fields.RI`).

    ``ends`` (Q, V (B, nq), W (B,)) receives where each member stopped: its state and work (a failed member's
    failing step's start).
    """
    system, scheme = stepper.system, stepper.method()
    B, nq = Q0.shape
    ns = nsave(nsteps, save_every)
    Q, V = saved_states((B, ns, nq), zero=True), saved_states((B, ns, nq), zero=True)
    Q[:, 0], V[:, 0] = Q0, V0
    Wk = np.zeros((B, ns + 1))
    status = np.zeros((B, RI.count), dtype=np.int64)
    options = dict(t0=t0, h=stepper.dt, nsteps=nsteps, save_every=save_every, tol=stepper.tol,
                   maxiter=stepper.maxiter, length_scale=float(system.length_scale),
                   max_turn=float(stepper.max_turn))  # fmt: skip

    def member(b: int) -> None:
        rs = RunState(model, scheme, Q0[b], V0[b])  # as mbvi.integrators.compiled.Drive starts a run
        advance(model, scheme, rs, k0=0, kstop=nsteps, out=(Q[b], V[b], Wk[b], status[b]), j0=1, **options)
        ends[0][b], ends[1][b], ends[2][b] = rs.q, rs.v, Wk[b, -1]

    nthreads = min(threads(), B)
    if nthreads <= 1:
        for b in range(B):
            member(b)
    else:  # the compiled loop releases the GIL
        with ThreadPoolExecutor(nthreads) as pool:
            for f in [pool.submit(member, b) for b in range(B)]:
                f.result()
    return t0 + saved_steps(ns, nsteps, save_every) * stepper.dt, Q, V, Wk[:, :ns], status


def _engine_cause(system, model, stepper, status: np.ndarray, q: np.ndarray, v: np.ndarray, t0: float):
    """Why a member stopped in the compiled loop at (q, v), its failing step's start
    (:func:`mbvi.diagnosis.engine_failure`, as a run alone is diagnosed): a SolverError."""
    k = int(status[RI.STEP])
    return engine_failure(system, int(status[RI.STATUS]), q, v, t0 + k * stepper.dt, k, stepper.dt, model.rigid,
                          stepper.name, model.callbacks, stepper.method())  # fmt: skip


def _up_to_failure(system, scene, info: dict, t: np.ndarray, Q: np.ndarray, V: np.ndarray, W: np.ndarray | None,
                   status: np.ndarray, h: float, ends: tuple, b: int) -> Trajectory:  # fmt: skip
    """A failed member's trajectory as its run alone keeps it: the states saved up to the failure, and the failing
    step's start (``ends``' member ``b``) when it is off the save grid."""
    j, k = int(status[RI.SAVED]), int(status[RI.STEP])
    part = RunResult(t[:j], Q[:j], V[:j], None if W is None else W[:j])
    part = part.ending_at(float(t[0] + k * h), ends[0][b], ends[1][b], None if W is None else float(ends[2][b]))
    with np.errstate(over="ignore", invalid="ignore"):
        return Trajectory.from_states(system, part.t, part.q, part.v, scene=scene, info=info, work=part.work)


def _member(stepper, q: np.ndarray, v: np.ndarray, t0: float, nsteps: int, save_every: int) -> Any:
    """One member run as :func:`mbvi.simulate` runs it alone (a fresh integrator's :meth:`~mbvi.Integrator.run`).

    Returns
    -------
    mbvi.engine.runner.RunResult or SolverError
        The run, or the error that stopped it (``partial``: the states saved before it).
    """
    stepper = type(stepper)(stepper.system, stepper.dt, **stepper.given_options)  # cold, as its own run
    try:
        return stepper.run(State(q.copy(), v.copy()), t0, nsteps, save_every)
    except SolverError as exc:
        if exc.partial is None or not len(exc.partial.t):  # nothing saved: the member's initial state
            exc.partial = RunResult(np.array([t0]), q[None].copy(), v[None].copy())
        return exc


def _finish(system, scene, info: dict, trajs: list, runs: dict, stopped: dict) -> list[Trajectory]:
    """The batch's trajectories; the first failure raised, naming its member and keeping every trajectory.

    Parameters
    ----------
    trajs : list of Trajectory or None
        Every member's trajectory from the batch loop (None: run alone, in ``runs``).
    runs : dict of int to RunResult or SolverError
        The members run alone (:func:`_member`): their result or the error that stopped them.
    stopped : dict of int to SolverError or None
        The members that failed in the batch loop: the error of the first (the others are not diagnosed).
    """
    causes: dict[int, Any] = dict(stopped)
    for b, run in runs.items():
        part = run.partial if isinstance(run, SolverError) else run
        work = getattr(part, "work", None)
        work = work if work is not None and len(work) == len(part.t) else None
        with np.errstate(over="ignore", invalid="ignore"):  # the last states of a blow-up are huge
            trajs[b] = Trajectory.from_states(system, part.t, part.q, part.v, scene=scene, info=dict(info),
                                              work=work)  # fmt: skip
        counters = getattr(part, "counters", None) or {}
        if "refined_steps" in counters:  # as its run alone counts them
            trajs[b].info["refined_steps"] = counters["refined_steps"]
        if isinstance(run, SolverError):
            causes[b] = run
    if not causes:
        return trajs
    failed = sorted(causes)
    err = member_failure(causes[failed[0]], failed, len(trajs), trajs)
    if failed[0] in runs:
        raise err from causes[failed[0]]
    raise err


def _kernel_members(stepper, system, scene, info, t, Qs, Vs, W, status, ends) -> list[Trajectory]:
    """The trajectories of a batch run through a plugin's compiled step; the first failure raised, naming it and,
    as a run alone does, what raised in it (the step or a load, called again as Python at the failing step)."""
    with np.errstate(over="ignore", invalid="ignore"):
        trajs = Trajectory.many_from_states(system, t, Qs, Vs, status[:, RI.SAVED], scene=scene, info=info, work=W)
    failed = [b for b in range(len(Qs)) if status[b, RI.STATUS] != ST.DONE]
    for b in failed:  # as a run alone keeps it: the failing step's start, off the save grid
        trajs[b] = _up_to_failure(system, scene, info, t, Qs[b], Vs[b], W[b], status[b], stepper.dt, ends, b)
    if failed:
        b = failed[0]
        k = int(status[b, RI.STEP])
        when = float(t[0] + k * stepper.dt)
        cause = step_failure(stepper, int(status[b, RI.STATUS]), ends[0][b], ends[1][b], when, k)
        raise member_failure(cause, failed, len(Qs), trajs)
    return trajs
