"""simulate() for a LagrangianSystem: pick a stepper, run it, and return a Trajectory."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mbvi import notices
from mbvi.errors import SolverError, member_failure
from mbvi.lagrangian.integrators import INTEGRATORS, LagrangianIntegrator
from mbvi.lagrangian.system import LagrangianSystem
from mbvi.state import State
from mbvi.trajectory import Trajectory

__all__ = ["geometry", "resolve", "simulate_lagrangian", "simulate_lagrangian_batch", "trajectory"]


def resolve(integrator: Any) -> type[LagrangianIntegrator]:
    """A registered name (or a :class:`LagrangianIntegrator` subclass) → the class that handles Lagrangian systems.

    Raises
    ------
    ValueError
        For a name (or scene integrator class) that does not handle Lagrangian systems.
    """
    if isinstance(integrator, type) and issubclass(integrator, LagrangianIntegrator):
        return integrator
    name = integrator if isinstance(integrator, str) else getattr(integrator, "name", repr(integrator))
    if isinstance(integrator, str) and integrator in INTEGRATORS:
        return INTEGRATORS[integrator]
    if isinstance(integrator, str):  # a name registered nowhere: said so (with the names), not "does not handle"
        from mbvi.plugins import get_integrator

        get_integrator(integrator)
    plugin = _plugin(integrator)
    if plugin is not None and "lagrangian" in plugin.handles:
        return _adapted(plugin)
    raise ValueError(
        f"integrator {name!r} does not handle Lagrangian systems (mbvi.LagrangianSystem); "
        f"the integrators that do are: {', '.join(sorted(INTEGRATORS))}"
    )


def _plugin(integrator: Any) -> Any:
    """The :class:`mbvi.Integrator` class a name or class stands for, if any."""
    from mbvi.integrators.base import Integrator
    from mbvi.plugins import get_integrator

    if isinstance(integrator, type) and issubclass(integrator, Integrator):
        return integrator
    if isinstance(integrator, str):
        try:
            return get_integrator(integrator)
        except ValueError:
            return None
    return None


def _adapted(cls: Any) -> type[LagrangianIntegrator]:
    """Run a plugin :class:`mbvi.Integrator` that declares ``"lagrangian"`` in ``handles``.

    Its ``step(state, t)`` gets ``mbvi.State(q, v)`` in the system's coordinates
    and generalized velocities; the momentum is p = ∂L/∂v at the result.
    """

    class Plugin(LagrangianIntegrator):
        name = cls.name
        order = cls.order
        variational = cls.variational
        symplectic = cls.symplectic
        options = dict(cls.options)

        def __init__(self, system: Any, dt: float, **options: Any) -> None:
            super().__init__(system, dt, **options)
            self.inner = cls(system, dt, **options)

        def step(self, q, v, p, t):
            out = self.inner.step(State(q, v), t)
            return out.q, out.v, self.system.momentum(out.q, out.v, t + self.dt)

    Plugin.__name__ = Plugin.__qualname__ = f"Lagrangian{cls.__name__}"
    return Plugin


def geometry(system: LagrangianSystem) -> dict:
    """The trajectory's JSON description of a Lagrangian system (no bodies: only coordinate names)."""
    return {
        "kind": "lagrangian",
        "name": system.name,
        "bodies": [],
        "links": [],
        "beams": [],
        "coordinates": system.coordinate_names,
        "velocities": [str(s) for s in system.velocities],
        "constraints": [str(e) for e in system.constraint_exprs],
        "length_scale": 1.0,
    }


def trajectory(system: LagrangianSystem, t: Any, q: Any, v: Any, p: Any = None, info: dict | None = None) -> Trajectory:
    """A :class:`mbvi.Trajectory` of saved states of a Lagrangian system.

    ``momentum`` is the generalized momentum p = ∂L/∂v, shape (n, nq);
    ``angular_momentum`` is empty, shape (n, 0); ``energy`` is v·∂L/∂v − L,
    ``potential`` is −L(q, 0) and ``kinetic`` their difference.
    """
    t = np.asarray(t, float)
    q = np.atleast_2d(np.asarray(q, float))
    v = np.atleast_2d(np.asarray(v, float))
    with np.errstate(all="ignore"):
        energy = system.energy(q, v, t)
        potential = system.potential(q, t)
        kinetic = energy - potential  # (inf − inf at a blow-up's last states)
        p = system.momentum(q, v, t) if p is None else np.asarray(p, float)
    return Trajectory(
        t,
        q,
        v,
        energy=energy,
        kinetic=kinetic,
        potential=potential,
        momentum=p,
        angular_momentum=np.zeros((len(t), 0)),
        constraint_error=system.constraint_error(q),
        geometry=geometry(system),
        scene=None,
        info=info,
    )


def simulate_lagrangian(
    system: LagrangianSystem,
    t_end: float,
    dt: float,
    integrator: Any = "verlet",
    *,
    t0: float = 0.0,
    initial_state: State | None = None,
    save_every: int = 1,
    progress: bool = False,
    _verify: bool = True,
    **options: Any,
) -> Trajectory:
    """:func:`mbvi.simulate` for a :class:`mbvi.LagrangianSystem` (it dispatches here).

    Parameters are those of :func:`mbvi.simulate`; ``initial_state`` defaults
    to the system's own. Velocities are generalized velocities.

    Raises
    ------
    ValueError
        Bad input, an integrator that does not handle Lagrangian systems, or
        no initial state anywhere.
    SolverError
        A step failed; ``err.trajectory`` holds everything computed before it.
    """
    from mbvi.runs import progress_bar, run_info, run_numbers

    t_end, dt, t0, save_every, nsteps = run_numbers(t_end, dt, t0, save_every)  # numpy numbers too
    cls = resolve(integrator)
    state = system.initial_state(initial_state, t=t0)
    stepper = cls(system, dt, **options)
    info = run_info(cls, dt, options, system="lagrangian", coordinates=system.coordinate_names, constraints=system.nc,
                    angles=list(system.angles))  # fmt: skip
    bar, callback = progress_bar(nsteps, cls.name) if progress else (None, None)
    from mbvi.runs import last_step

    last = last_step(t_end, dt, t0, nsteps)
    if last != dt:
        info["last_dt"] = last
    try:
        t, q, v, p = _to_the_end(stepper, state, float(t0), nsteps, save_every, last, options, callback)
    except KeyboardInterrupt as stopped:  # Ctrl-C between chunks of a long run (mbvi.interrupts): what was run
        pt, pq, pv, pp = getattr(stopped, "partial", None) or ([], [], [], [])
        if len(pt):
            stopped.trajectory = trajectory(system, pt, pq, pv, pp, info=info)
        raise
    except SolverError as err:
        pt, pq, pv, pp = getattr(err, "partial", ([], [], [], []))
        earlier = None
        if len(pt):
            err.trajectory = trajectory(system, pt, pq, pv, pp, info=info)
            earlier = _blow_up_start(err.trajectory, system, cls, dt)
        if earlier is not None and earlier.step is not None and (err.step is None or earlier.step < err.step):
            # the blow-up's start, with the states up to it (not those of 1e186 it went on to)
            _verified(earlier, system, stepper, t_end, t0, initial_state, options, _verify)
            raise earlier from err
        _verified(err, system, stepper, t_end, t0, initial_state, options, _verify)
        raise
    finally:
        if bar is not None:
            bar.close()
    traj = trajectory(system, t, q, v, p, info=info)
    try:
        judge_energy(traj, system, cls, dt)
    except SolverError as err:
        _verified(err, system, stepper, t_end, t0, initial_state, options, _verify)
        raise
    return traj


def _verified(err: SolverError, system: LagrangianSystem, stepper, t_end: float, t0: float, state, options: dict,
              verify: bool) -> None:  # fmt: skip
    """The error's step-size hint checked by re-running, as a scene's (:func:`mbvi.simulate._verify_suggestion`),
    when the integrator runs compiled (a NumPy-path re-run may take long: the hint is left, said unverified)."""
    from mbvi.runs import energy_given, hint_to_verify, verify_hint

    cls, dt = type(stepper), stepper.dt
    hint = hint_to_verify(err, dt)
    if not verify or stepper.compiled_kernels() is None or hint is None:
        err.unverified()
        return

    def rerun(candidate: float, every: int) -> Trajectory:
        return simulate_lagrangian(system, t_end, candidate, cls, t0=t0, initial_state=state, save_every=every,
                                   _verify=False, **options)  # fmt: skip

    def gain(run: Trajectory) -> float | None:  # a baseline's: its largest gain over the energy it had to give
        if len(run.t) < 2 or not np.isfinite(run.energy).all():
            return None
        balance = run.energy - run.energy[0] - (0.0 if run.work is None else run.work)
        return float(np.max(balance)) / energy_given(run.kinetic, run.potential, run.work, None)

    verify_hint(err, rerun, hint, t_end - t0, cls, gain, 3 * system.nq)  # a kept state: q, v, p


def _blow_up_start(traj: Trajectory, system: LagrangianSystem, cls: type, dt: float) -> SolverError | None:
    """The :class:`SolverError` of the first state past the blow-up bound among a failed run's finite states (as
    :func:`judge_energy` judges a completed run), None when they held."""
    from mbvi import notices

    with np.errstate(all="ignore"):
        ok = np.isfinite(traj.q).all(axis=1) & np.isfinite(traj.v).all(axis=1) & np.isfinite(traj.energy)
    n = len(ok) if ok.all() else int(np.argmax(~ok))
    if n < 2:
        return None
    with notices.kept(quiet=True):  # (its warnings are of a partial run: the error speaks)
        try:
            judge_energy(traj.head(n), system, cls, dt, failed=True)
        except SolverError as exc:
            return exc
    return None


def _to_the_end(stepper, state: State, t0: float, nsteps: int, save_every: int, last: float, options: dict,
                callback=None) -> tuple:  # fmt: skip
    """``nsteps`` steps of the stepper's dt, the last one ``last`` (≤ dt) so that the run ends at t_end."""
    if last == stepper.dt:
        return stepper.integrate(state.q, state.v, t0, nsteps, save_every, callback)
    t, q, v, p = stepper.integrate(state.q, state.v, t0, nsteps - 1, save_every, callback)
    tail = type(stepper)(stepper.system, last, **options).integrate(q[-1], v[-1], float(t[-1]), 1, 1)
    if callback is not None:  # the last, shorter step is one of the run's (a progress bar closed one short)
        callback(nsteps)
    # the head keeps its last state; off the save_every grid it is not one of the run's (as a scene's run,
    # mbvi.simulate._ending_at): the same saved times for the same options
    keep = slice(None) if (nsteps - 1) % save_every == 0 else slice(None, -1)
    return tuple(np.concatenate([a[keep], b[1:]]) for a, b in zip((t, q, v, p), tail, strict=True))


def work_done(system: LagrangianSystem, t: np.ndarray, q: np.ndarray, v: np.ndarray) -> np.ndarray | None:
    """W at each of the states (k, n) at times t (k,): ∫ (Q·v − ∂L/∂t) dt from the first, J, by trapezoids over
    them (as good as they are close); None for a conservative Lagrangian (no Q, no explicit t)."""
    power = system.derived.scalar.get("power")
    if power is None:
        return None
    p = power(np.asarray(q).T, np.asarray(v).T, t)
    return np.concatenate([[0.0], np.cumsum(0.5 * (p[1:] + p[:-1]) * np.diff(t))])


def _early_scale(kinetic: np.ndarray, potential: np.ndarray, work: np.ndarray | None) -> float:
    """The energy in motion (and the largest |work|) over the first tenth of the saved states (at least two), J: a
    scale of the run that a later blow-up has not yet inflated, as the energy in motion over the whole run is."""
    m = max(2, len(kinetic) // 10)
    with np.errstate(all="ignore"):
        scale = max(float(np.max(kinetic[:m])), float(np.ptp(potential[:m])))
        if work is not None:
            scale = max(scale, float(np.max(np.abs(work[:m]))))
    return scale if np.isfinite(scale) else 0.0


def _load_energy(system: LagrangianSystem, q0: np.ndarray, t: float) -> float:
    """An energy the loads at the start stand for, J: each coordinate's |∂L/∂q| and |Q| over its reach, or where
    they vanish (at rest in a balance) the curvature |∂²L/∂q²| over the reaches; 0 when L cannot be evaluated
    there.

    ``q0`` (n,): the start; a coordinate's reach is its size there (no floor of 1: an argon dimer's coordinate
    is 3.6e-10 m; not its swing over the run, which a blown-up run inflates). 1e-6 of the energy is the least
    energy in motion a run is judged against: a Cartesian pendulum resting where U = 0 had its 3e-15 J round-off
    judged as 100 % of its motion. (Not a thousandth: the reach is measured from the coordinates' origin, and the
    same pendulum hung 1e4 m from it had a 12 % energy error judged as 0.15 %, with no warning.)
    """
    q0 = np.asarray(q0, dtype=float)
    if not len(q0):
        return 0.0
    reach = np.abs(q0)
    try:
        with np.errstate(all="ignore"):
            _, Lq, _, Lqq, _, _ = system.point(q0, np.zeros_like(q0), t)
            force = np.abs(np.asarray(Lq, dtype=float)) + np.abs(system.force(q0, np.zeros_like(q0), t))
            size = max(float(np.max(force * reach)), float(np.max(np.abs(Lqq) * np.outer(reach, reach))))
    except (ValueError, ArithmeticError):
        return 0.0
    return size if np.isfinite(size) else 0.0


def judge_energy(traj: Trajectory, system: LagrangianSystem, cls: type, dt: float, failed: bool = False) -> None:
    """A completed run is judged as :func:`mbvi.simulate` judges a scene's, by its energy balance.

    For a conservative Lagrangian (no force Q, no explicit t) E = v·∂L/∂v − L is constant; for a forced or
    time-dependent one E − W is, W the work ∫ (Q·v − ∂L/∂t) dt integrated over the saved samples
    (trapezoids: the judgement is then as good as the samples are fine), kept as ``traj.work`` when every step
    was saved. A balance that strays by more than
    a tenth of the energy in motion (the larger of max T, the swing of U and, with work, the largest |W|)
    warns, naming it — for a forced run only when every step was saved, the work's quadrature being too
    coarse otherwise. A blow-up — a state that is not finite, or (judged as finely) a balance that gained as much
    as all the energy in motion and a thousand times the energy in play early in the run (:func:`_early_scale`) — is a
    :class:`mbvi.SolverError` keeping the trajectory up to it, and for a baseline (explicit or implicit Euler,
    csm: their drift is what they are compared for) a warning saying the run blew up, as a scene's is — unless the
    run ``failed`` at a step after it: the blow-up is then the error.
    """
    from mbvi.runs import (
        BLOW_UP,
        THROUGHPUT_SHARE,
        WARN_ENERGY,
        WARN_ENERGY_BASELINE,
        energy_given,
        energy_scales,
        energy_throughput,
        judged_by_balance,
    )

    if len(traj.t) < 2:
        return
    with np.errstate(all="ignore"):
        e = traj.energy
        start, motion = (float(x) for x in energy_scales(traj.kinetic, traj.potential, None))
        # at least a millionth of the loads' energy (a thousandth, its reach from the origin, hid errors)
        motion = max(motion, 1e-6 * _load_energy(system, traj.q[0], float(traj.t[0])))
        what = "the energy E = v·∂L/∂v − L, conserved by this Lagrangian,"
        fine = True
        t = np.asarray(traj.t, dtype=float)
        work = work_done(system, t, traj.q, traj.v)
        if work is not None:
            e = e - work
            big = float(np.max(np.abs(work))) if np.isfinite(work).all() else 0.0
            motion = max(motion, big, THROUGHPUT_SHARE * float(energy_throughput(work)))  # (what flowed through)
            what = "the energy balance E − W (W the work of Q and of L's explicit time dependence),"
            fine = bool(np.max(np.diff(t)) <= 1.0001 * abs(dt))
            if fine:  # the run's balance E − E₀ − W, as a scene's run keeps it (its plots read it)
                traj.work = work
        change = e - e[0]
        finite = bool(np.isfinite(e).all())
        k = int(np.argmax(np.abs(change))) if finite else int(np.argmax(~np.isfinite(e)))
        worst = abs(float(change[k])) if finite else np.inf
        early = max(start, _early_scale(traj.kinetic, traj.potential, work))
        # a blow-up gains energy (a loss, a damped or implicit run's, is none), and its balance strays by about all
        # the energy in motion (which includes the blow-up's own kinetic energy); judged only when the work's
        # quadrature is fine enough to judge by (a forced run saved every step), or on a state that is not finite
        gain = float(np.max(change)) if finite else np.inf
        blown = not finite or (fine and gain > BLOW_UP * early and gain > 0.5 * motion)
        if blown and finite:  # the first state past the bound
            k = int(np.argmax(change > BLOW_UP * early))
            worst = float(change[k])
    if fine:  # (a coarse quadrature's figure would be its own error)
        traj.info["energy_error"] = worst / motion if finite else math.inf
        traj.info["energy_in_motion"] = motion

    if blown:
        reason = (
            f"integrator {cls.name!r} at dt = {dt:g} s: {what[:-1]} strayed by {worst:.3g} J against "
            f"{early:.3g} J in play by t = {traj.t[k]:.4g} s (the run blew up)"
        )
        if not (cls.variational or cls.symplectic or failed):
            notices.warn(f"{reason}; the result is not a solution (reduce dt, e.g. to {dt / 4:g} s)",
                          RuntimeWarning)  # fmt: skip
            return
        err = SolverError(reason, time=float(traj.t[k]), step=round((float(traj.t[k]) - float(traj.t[0])) / dt),
                          suggested_dt=dt / 4)  # fmt: skip
        with np.errstate(all="ignore"):
            err.trajectory = traj.head(k + 1)
        err.unverified()
        raise err
    if not (cls.variational or cls.symplectic):  # a baseline: its gain against the energy it had to give, not
        # against the motion the gain itself made
        given = energy_given(traj.kinetic, traj.potential, work, None)
        if fine and gain > WARN_ENERGY_BASELINE * given:
            notices.warn(
                f"integrator {cls.name!r} at dt = {dt:g} s: {what} gained {gain / given:.3g} times the energy the "
                f"run had to give at the start (it strayed by {worst:.3g} J by t = {traj.t[k]:.4g} s); the result "
                f"is not {'a solution' if gain > given else 'accurate'} (reduce dt, e.g. to {dt / 4:g} s)",
                RuntimeWarning,
            )  # fmt: skip
            return
    if not judged_by_balance(cls) or worst <= WARN_ENERGY * motion or not fine:  # (implicit Euler's loss: its nature)
        return

    notices.warn(
        f"integrator {cls.name!r} at dt = {dt:g} s: {what} strayed by {worst:.3g} J, {worst / motion:.0%} of the "
        f"energy in motion, by t = {traj.t[k]:.4g} s; the result is not accurate (reduce dt, e.g. to {dt / 4:g} s)",
        RuntimeWarning,
    )


def simulate_lagrangian_batch(
    system: LagrangianSystem,
    t_end: float,
    dt: float,
    initial_states: Any,
    *,
    save_every: int = 1,
    integrator: Any = "verlet",
    t0: float = 0.0,
    **options: Any,
) -> list[Trajectory]:
    """:func:`mbvi.simulate_batch` for a :class:`mbvi.LagrangianSystem` (it dispatches here).

    Each member runs the system's compiled loop (or its NumPy steps) on its own, the members spread over
    numba's threads (the loop releases the GIL): member b equals ``simulate(system, …, initial_state=s_b)``.

    Raises
    ------
    ValueError
        Bad input (states of the wrong shape, not finite, or off the constraints, naming the member).
    SolverError
        A member failed: the message names it, ``err.member`` is its index and ``err.trajectory`` the list of
        every member's trajectory up to where it stopped.
    """
    from concurrent.futures import ThreadPoolExecutor

    from mbvi.engine.runner import threads
    from mbvi.runs import judge_members, last_step, run_info, run_numbers
    from mbvi.state import stack_states

    t_end, dt, t0, save_every, nsteps = run_numbers(t_end, dt, t0, save_every, "simulate_batch")  # numpy numbers too
    cls = resolve(integrator)
    stepper = cls(system, dt, **options)
    Q0, V0 = stack_states(initial_states, system.nq)
    states = []
    for b, (q, v) in enumerate(zip(Q0, V0, strict=True)):
        try:
            states.append(system.initial_state(State(q, v), warn=False, t=t0, flat=b == 0))
        except ValueError as exc:
            raise ValueError(f"simulate_batch: initial state {b}: {exc}") from None
    info = run_info(cls, dt, options, system="lagrangian", coordinates=system.coordinate_names, constraints=system.nc,
                    angles=list(system.angles), batch=len(states))  # fmt: skip
    stepper.compiled_kernels()  # compiled once, here, before the threads share it

    last = last_step(t_end, dt, t0, nsteps)
    if last != dt:
        info["last_dt"] = last

    def member(b: int) -> tuple:
        try:
            return _to_the_end(stepper, states[b], float(t0), nsteps, save_every, last, options), None
        except SolverError as err:
            return getattr(err, "partial", None), err

    with ThreadPoolExecutor(max(1, min(threads(), len(states)))) as pool:
        outcomes = list(pool.map(member, range(len(states))))
    trajs = []
    for (saved, _err), state in zip(outcomes, states, strict=True):
        if saved is None:
            saved = (np.array([t0]), state.q[None], state.v[None], None)
        trajs.append(trajectory(system, *saved, info=dict(info)))
    failed = [b for b, (_, err) in enumerate(outcomes) if err is not None]
    if failed:
        raise member_failure(outcomes[failed[0]][1], failed, len(states), trajs)
    # each member judged as simulate judges its run: a blow-up is a SolverError naming it, inaccuracy one warning
    judge_members(trajs, lambda traj: judge_energy(traj, system, cls, dt))
    return trajs
