"""Many states of one system stepped by the same compiled RATTLE, in parallel.

Ensembles, Monte Carlo studies and maps over initial conditions run B copies
of one scene. :func:`simulate_batch` hands all of them to one compiled call
(:func:`mbvi.engine.loop.run_batch`), spread over the machine's cores: scenes
of particles under the RATTLE family step in chunks of members in lockstep
(:mod:`mbvi.engine.lockstep`, the serial loop's operations with the members
on the inner axis), any other batch, and any member that needs a fallback,
through the very loop :func:`mbvi.simulate` runs for one system — same warm
start, fallbacks and tolerances. Each member therefore reproduces its serial run.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from mbvi.assembly import assemble
from mbvi.diagnosis import engine_failure
from mbvi.engine.fields import RI, ST
from mbvi.engine.runner import run_batch
from mbvi.errors import SolverError
from mbvi.integrators.stepkernel import run_kernel_batch
from mbvi.runs import run_info, step_count
from mbvi.scene import Scene
from mbvi.simulate import resolve_integrator
from mbvi.state import State, stack_states
from mbvi.trajectory import Trajectory

__all__ = ["simulate_batch"]


def simulate_batch(
    scene: Scene,
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
    scene : mbvi.Scene or mbvi.LagrangianSystem
        A scene, or a system in its own coordinates (its members run its compiled loop, member by member on
        every core; states are its generalized coordinates and velocities).
    t_end, dt : float
        End time and step size, s.
    initial_states : sequence of mbvi.State, or a tuple (Q, V) of arrays of shape (B, nq)
        One state per member (e.g. perturbations of ``assemble(scene).initial_state()``);
        positions must satisfy the constraints, velocities are projected onto them.
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
        One per member, equal to ``mbvi.simulate(scene, ..., initial_state=s)`` for that
        member (the same compiled loop runs both).

    Raises
    ------
    ValueError
        Bad input: an unknown integrator or option, states of the wrong shape or
        violating the constraints (naming the member).
    SolverError
        A member's step failed: the message names the member, the time and the
        step; ``err.member`` is its index and ``err.trajectory`` the list of every
        member's trajectory up to where it stopped.

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
    cls = resolve_integrator(integrator)
    nsteps = step_count(t_end, dt, t0, save_every, "simulate_batch")
    system = assemble(scene)
    stepper = cls(system, dt, **options)
    Q, V = stack_states(initial_states, system.nq)
    if len(system.active):
        bad = np.abs(system.rows.values(Q)[:, system.active] / system.active_scale).max(axis=1)
        worst = int(np.argmax(bad))
        if bad[worst] > 1e-8:
            raise ValueError(
                f"simulate_batch: initial state {worst} violates the constraints (residual {bad[worst]:.3g})"
            )
    info = run_info(cls, dt, options, batch=len(Q))

    @functools.cache
    def projected() -> np.ndarray:  # the velocities on the constraints, once (the engine's own loop projects them)
        if not len(system.active):
            return V
        return np.array([system.project_velocity(q, v) for q, v in zip(Q, V, strict=True)])

    if cls.kernel is not None:  # a plugin's compiled step: member by member, on every core
        out = run_kernel_batch(stepper, Q, projected(), float(t0), nsteps, save_every)
        if out is not None:
            return _kernel_members(stepper, system, scene, info, *out)
    # a scheme of the engine; None: the constraints are too wide for it, or the implicit pair with rigid bodies
    model = stepper.engine_model() if cls.compiled else None
    if model is None:  # member by member on the NumPy path
        return [_serial(stepper, system, scene, q, v, t0, nsteps, save_every, info, b) for b, (q, v) in
                enumerate(zip(Q, projected(), strict=True))]  # fmt: skip
    for cb in model.callbacks:
        cb.reset()
    t, Qs, Vs, _, status = run_batch(
        model, stepper.method(), Q, V, t0=float(t0), h=stepper.dt, nsteps=nsteps, save_every=save_every,
        tol=stepper.tol, maxiter=stepper.maxiter, length_scale=float(system.length_scale),
        max_turn=float(stepper.max_turn),
    )  # fmt: skip
    failed = [b for b in range(len(Q)) if status[b, RI.STATUS] != ST.DONE]
    with np.errstate(over="ignore", invalid="ignore"):
        trajs = Trajectory.many_from_states(system, t, Qs, Vs, status[:, RI.SAVED], scene=scene, info=info)
    for b in failed:
        j = int(status[b, RI.SAVED])
        if status[b, RI.STATUS] == ST.NEEDS_NUMPY:  # finish this member on the NumPy path from its last saved state
            k = min((j - 1) * save_every, nsteps)
            rest = _serial(stepper, system, scene, Qs[b, j - 1], Vs[b, j - 1], t0 + k * dt, nsteps - k, save_every,
                           info, b)  # fmt: skip
            tb = np.concatenate([t[:j], rest.t[1:]])
            qb = np.concatenate([Qs[b, :j], rest.q[1:]])
            vb = np.concatenate([Vs[b, :j], rest.v[1:]])
            trajs[b] = Trajectory.from_states(system, tb, qb, vb, scene=scene, info=info)
    failed = [b for b in failed if status[b, RI.STATUS] != ST.NEEDS_NUMPY]
    if failed:
        b = failed[0]
        k = int(status[b, RI.STEP])
        j = int(status[b, RI.SAVED])
        cause = engine_failure(system, int(status[b, RI.STATUS]), Qs[b, j - 1], Vs[b, j - 1], t0 + k * dt, k, dt,
                               model.rigid, stepper.name, model.callbacks)  # fmt: skip
        err = type(cause)(  # a SolverError; a LoadError (also a ValueError) when a load or law raised
            f"member {b} of {len(Q)}" + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else "")
            + f": {cause.reason}",
            time=cause.time, step=cause.step, culprit=cause.culprit, suggested_dt=cause.suggested_dt,
            trajectory=trajs,
        )  # fmt: skip
        err.member = b
        err.members = failed
        raise err
    return trajs


def _kernel_members(stepper, system, scene, info, t, Qs, Vs, status) -> list[Trajectory]:
    """The trajectories of a batch run through a plugin's compiled step; the first failure raised (naming it)."""
    with np.errstate(over="ignore", invalid="ignore"):
        trajs = Trajectory.many_from_states(system, t, Qs, Vs, status[:, RI.SAVED], scene=scene, info=info)
    failed = [b for b in range(len(Qs)) if status[b, RI.STATUS] != ST.DONE]
    if failed:
        b = failed[0]
        k = int(status[b, RI.STEP])
        err = SolverError(
            f"member {b} of {len(Qs)}: integrator {stepper.name!r}: its compiled step failed",
            time=float(t[0] + k * stepper.dt), step=k, trajectory=trajs,
        )  # fmt: skip
        err.member = b
        err.members = failed
        raise err
    return trajs


def _serial(stepper, system, scene, q, v, t0, nsteps, save_every, info, member) -> Trajectory:
    """One member on the NumPy path (no compiled kernel, the implicit pair with rigid bodies, or a fallback)."""
    stepper = type(stepper)(system, stepper.dt, **stepper.given_options)  # each member starts cold, as its own run
    try:
        t, Qm, Vm = stepper.integrate(State(q.copy(), v.copy()), t0, nsteps, save_every)
    except SolverError as exc:
        raise SolverError(f"member {member}: {exc.reason}", time=exc.time, step=exc.step, culprit=exc.culprit,
                          suggested_dt=exc.suggested_dt) from exc  # fmt: skip
    return Trajectory.from_states(system, t, Qm, Vm, scene=scene, info=info)
