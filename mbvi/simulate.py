"""simulate(): assemble a scene, pick an integrator, step, and return a Trajectory."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mbvi import notices
from mbvi.assembly import assemble
from mbvi.diagnosis import adaptive_remedy, instability
from mbvi.engine.scheme import IMPLICIT_EULER, MIDPOINT, is_rattle
from mbvi.errors import LoadError, SolverError
from mbvi.integrators.base import Integrator
from mbvi.integrators.compiled import Compiled
from mbvi.plugins import check_given_class, get_integrator
from mbvi.runs import (
    BLOW_UP,
    THROUGHPUT_SHARE,
    VERIFY_BUDGET,
    WARN_ENERGY,
    WARN_ENERGY_BASELINE,
    counted,
    energy_given,
    energy_scales,
    energy_throughput,
    hint_to_verify,
    judged_by_balance,
    last_step,
    progress_bar,
    run_info,
    run_numbers,
    steady_drift,
    verify_hint,
)
from mbvi.scene import Scene
from mbvi.state import State, real_array
from mbvi.system import System
from mbvi.trajectory import Trajectory

__all__ = [
    "assembled",
    "check_capabilities",
    "energy_error",
    "energy_scales",
    "given_state",
    "joint_state",
    "resolve_integrator",
    "simulate",
]


def assembled(scene: Scene | System) -> tuple[System, Scene | None]:
    """The System a run steps, and the scene it came from: a scene assembled now, or a System as it is given
    (the scene None), whose NumPy solver then warns in this run of what it met in an earlier one."""
    if not isinstance(scene, System):
        return assemble(scene), scene
    if (solver := vars(scene).get("solver")) is not None:  # (built when a NumPy step first needed it)
        solver.warn_again()
    return scene, None


def resolve_integrator(integrator: str | type[Integrator]) -> type[Integrator]:
    """A registered integrator name or an :class:`mbvi.Integrator` subclass → the class.

    A class passes the checks registration makes (:func:`mbvi.plugins.check_given_class`: ValueError naming it),
    and a :class:`mbvi.Composition` given as a class is bound to its base here.
    """
    if isinstance(integrator, str):
        return get_integrator(integrator)
    if isinstance(integrator, type) and issubclass(integrator, Integrator):
        check_given_class(integrator)
        return integrator
    raise ValueError(f"integrator must be a registered name or an mbvi.Integrator subclass, got {integrator!r}")


def simulate(
    scene: Scene | System,
    t_end: float,
    dt: float,
    integrator: str | type[Integrator] = "verlet",
    *,
    t0: float = 0.0,
    initial_state: State | None = None,
    save_every: int = 1,
    progress: bool = False,
    **options: Any,
) -> Trajectory:
    """Simulate a scene from ``t0`` to ``t_end`` with steps of ``dt``.

    Parameters
    ----------
    scene : mbvi.Scene, mbvi.System or mbvi.LagrangianSystem
        A scene; or a scene already assembled (:func:`mbvi.assemble`: a
        System is built once, and runs of it reuse its compiled model, as
        MuJoCo's runs reuse one compiled ``MjModel``); or a system in its own
        coordinates (run by the integrators of
        :mod:`mbvi.lagrangian.integrators`, same names; ``initial_state``
        defaults to the system's own). One System runs in one thread at a
        time: its compiled model keeps the record of a load that raised, and
        two threads running it at once can report each other's failures
        (their states are their own); give each thread its own System, or
        run many states of one with :func:`mbvi.simulate_batch`.
    t_end : float
        End time, s. The number of steps is ``ceil((t_end − t0)/dt)`` (rounded
        when within 1e-9 of an integer relative to it, at most 1e-3 of a step;
        otherwise the last step is shorter and the run ends at t_end).
    dt : float
        Step size, s: at least two float spacings of the clock at t0 and t_end (t0 = 1.7e9 s, a Unix time
        stamp, has times 2.4e-7 s apart; a finer step is refused, its times would repeat).
    integrator : str or Integrator subclass, default: "verlet"
        A name from :func:`mbvi.integrators` or a class.
    t0 : float, default: 0
        Start time, s.
    initial_state : mbvi.State, optional
        Start here instead of the scene's initial state (e.g. an equilibrium's ``eq.state``).
    save_every : int, default: 1
        Keep every n-th state (the last state is always kept).
    progress : bool, default: False
        Show a progress bar (tqdm).
    **options
        Passed to the integrator (e.g. ``alpha``, ``method`` for ``csm``).

    Returns
    -------
    Trajectory

    Raises
    ------
    ValueError
        Bad input (naming the element at fault) or an unknown integrator/option.
    SolverError
        A step failed; ``err.trajectory`` holds everything computed before it.
    """
    return _simulate(True, scene, t_end, dt, integrator, t0=t0, initial_state=initial_state, save_every=save_every,
                     progress=progress, **options)  # fmt: skip


def _simulate(verify: bool, scene: Scene | System, t_end: float, dt: float, integrator: str | type[Integrator],
              *, t0: float, initial_state: State | None, save_every: int, progress: bool,
              **options: Any) -> Trajectory:  # fmt: skip
    """:func:`simulate`; ``verify``: a failed run's step-size hint is checked by re-running (False in those
    re-runs)."""
    from mbvi.lagrangian import LagrangianSystem

    progress = Integrator.check_flag("progress", progress)  # ("no" showed a bar)

    if isinstance(scene, LagrangianSystem):  # a system in the user's own coordinates: its own integrators
        from mbvi.lagrangian.run import simulate_lagrangian

        return simulate_lagrangian(scene, t_end, dt, integrator, t0=t0, initial_state=initial_state,
                                   save_every=save_every, progress=progress, **options)  # fmt: skip
    if not isinstance(scene, (Scene, System)):
        raise ValueError(
            f"simulate expects an mbvi.Scene, mbvi.System or mbvi.LagrangianSystem, got {type(scene).__name__}"
        )
    t_end, dt, t0, save_every, nsteps = run_numbers(t_end, dt, t0, save_every)  # numpy numbers too
    cls = resolve_integrator(integrator)
    # what a re-run verifying a step re-runs: the scene, or the System itself (not assembled again)
    source = scene
    system, scene = assembled(scene)
    check_capabilities(cls, system)
    state = system.initial_state() if initial_state is None else given_state(system, initial_state)
    stepper = cls(system, dt, **options)
    info = run_info(cls, dt, options)
    bar, callback = progress_bar(nsteps, cls.name) if progress else (None, None)
    last = last_step(t_end, dt, t0, nsteps)
    began = time.perf_counter()  # (a NumPy path's failure: its hint verified when re-runs at this pace fit)
    try:
        if last == dt:
            result = stepper.run(state, float(t0), nsteps, save_every, callback)
        else:  # t_end − t0 is not a whole number of steps: the last one is shorter, and the run ends at t_end
            result = _ending_at(stepper, cls, system, state, float(t0), nsteps, save_every, callback, last, options)
            info["last_dt"] = last
    except KeyboardInterrupt as stopped:  # Ctrl-C between chunks of a long run (mbvi.interrupts): what was run
        part = getattr(stopped, "partial", None)
        if verify and part is not None and len(part.t):  # (not a verifying re-run's: verify_step takes it)
            work = _measured(getattr(part, "work", None), part.t)
            stopped.trajectory = Trajectory.from_states(system, part.t, part.q, part.v, scene=scene, info=info,
                                                        work=work)  # fmt: skip
        raise
    except SolverError as failed:
        err = failed
        part = err.partial
        if part is not None and len(part.t):
            work = _measured(getattr(part, "work", None), part.t)
            with np.errstate(over="ignore", invalid="ignore"):  # the last states of a blow-up are huge
                err.trajectory = Trajectory.from_states(system, part.t, part.q, part.v, scene=scene, info=info,
                                                        work=work)  # fmt: skip
            # a step that failed on non-finite values after the balance had already broken: the blow-up's start
            # is the error, with the states up to it (not those of 1e140 J the run went on to)
            earlier = _blow_up(err.trajectory, stepper, system, failed=True)
            if earlier is not None and earlier.step is not None and (err.step is None or earlier.step <= err.step):
                err = earlier
        if verify:
            pace = (time.perf_counter() - began) / max(1, err.step or 0)
            _verify_suggestion(err, source, stepper, t_end, t0, initial_state, options, pace)
        if err is failed:
            raise
        raise err from failed
    finally:
        if bar is not None:
            bar.close()
    counted(info, result.counters)  # substeps a fast body took; steps the NumPy path took (stiff implicit steps)
    _warn_refined_without_max_turn(info.get("refined_steps", 0), stepper, nsteps)
    with np.errstate(over="ignore", invalid="ignore"):  # a blown-up run is judged below, not warned about
        traj = Trajectory.from_states(system, result.t, result.q, result.v, scene=scene, info=info,
                                      work=_measured(result.work, result.t))  # fmt: skip
    try:
        _check_energy_balance(traj, stepper, system)
    except SolverError as err:  # a run that blew up: its hint verified like a failed step's
        if verify:
            pace = (time.perf_counter() - began) / max(1, nsteps)
            _verify_suggestion(err, source, stepper, t_end, t0, initial_state, options, pace)
        raise
    _warn_energy_error(traj, stepper, system)
    _warn_stiff_damping(traj, stepper, system)
    _warn_wound_springs(traj, system)
    _warn_fast_turn_without_max_turn(traj, stepper, system)
    return traj


def damping_rate(system: System, q: np.ndarray, v: np.ndarray, t: float, speed: float | None = None,
                 iterations: int = 40) -> tuple[float, int]:  # fmt: skip
    """The fastest rate c/m (1/s) at which the velocity-dependent forces damp a motion the joints allow, at (q, v, t),
    and the coordinate that motion moves most.

    The largest eigenvalue of M⁻¹ D, D = −∂F/∂v, on the velocities G(q) v = 0: power iteration with the
    mass-weighted projection onto them (a damper along a rod damps nothing), D x by central differences of F
    along x (two force evaluations an iteration, whatever the size of the scene), the rate read as the Rayleigh
    quotient xᵀ D x / xᵀ M x of the mode found (a force that turns the velocity without taking energy, v × B,
    or one that feeds it, damps nothing). ``speed`` (m/s) scales the differences (default: the largest of |v|
    and the length scale per second).
    """
    if speed is None:
        speed = max(float(np.max(np.abs(v), initial=0.0)), float(system.length_scale))
    factor = gdata = None
    if len(system.active):
        _, gdata = system.active_values_and_jacobian(q)
        factor = system.solver.factor(gdata)

    def tangent(x: np.ndarray) -> np.ndarray:
        return x if factor is None else system.project_velocity(q, x, factor, gdata)

    def damping(x: np.ndarray) -> np.ndarray:  # D x, N
        eps = 1e-6 * speed / max(float(np.max(np.abs(x))), 1e-300)
        return -(system.force(q, v + eps * x, t) - system.force(q, v - eps * x, t)) / (2.0 * eps)

    def size(x: np.ndarray) -> float:
        return float(np.sqrt(x @ (system.mass * x)))  # the M-norm: a kinetic energy's measure

    x = tangent(np.random.default_rng(0).standard_normal(system.nq) * np.sqrt(system.inv_mass))
    growth = size(x)
    for _ in range(iterations):
        if not (growth > 0.0 and np.isfinite(growth)):
            return 0.0, 0
        x = x / growth
        x = tangent(system.inv_mass * damping(x))
        growth = size(x)
    if not (growth > 0.0 and np.isfinite(growth)):
        return 0.0, 0
    x = x / growth
    # the mode's own damping, xᵀ D x with xᵀ M x = 1, at most its growth (where the joints leave no damped motion the
    # iteration amplifies the projection's round-off, normal to them: its growth is that round-off)
    rate = min(float(x @ damping(x)), growth)
    return (rate if rate > 0.0 and np.isfinite(rate) else 0.0), int(np.argmax(np.abs(x) * np.sqrt(system.mass)))


def _warn_refined_without_max_turn(refined: int, stepper: Integrator, steps: int) -> None:
    """Steps taken in substeps with ``max_turn=math.inf`` (which turns the turn rule off) were retried so because
    their drift found no solution at dt: most often the fixed point of a force that reads the velocity (a PD
    torque's kd, a damper) contracting too slowly for the step (h c/2m past ½). The run's step is then a fraction
    of dt, and a convergence study that halves dt sees nothing change: a RuntimeWarning says so."""
    import math

    if not refined or getattr(stepper, "max_turn", None) != math.inf:
        return
    notices.warn(
        f"integrator {stepper.name!r} at dt = {stepper.dt:g} s took {refined} of {steps} steps in substeps although "
        "max_turn=inf: their drift found no solution at this dt (most often forces that read the velocity, a "
        "damping or a controller's kd, too stiff for the step: h c/2m past 1/2), so those steps ran at a fraction "
        "of dt; a convergence study must use a dt at which traj.info['refined_steps'] is 0",
        RuntimeWarning,
    )


#: with ``max_turn=math.inf``, a saved state whose body turns by more than this in a step (h|ω|, rad) warns: the
#: rotation update's angle error grows as (h|ω|)²/3 a step, which the energy does not show (a gimbal's yaw, carrying
#: a wheel at h|ω| = 1, ran 1 % slow, at 10: 35 %, its energy exact to 1e-14 and its joint_rate reading 2 rad/s)
FAST_TURN = 1.0


def _warn_fast_turn_without_max_turn(traj: Trajectory, stepper: Integrator, system) -> None:
    """A RuntimeWarning naming the body when a run with ``max_turn=math.inf`` turned a rigid body by more than
    :data:`FAST_TURN` in a step at a saved state (the default ``max_turn`` splits such steps)."""
    import math

    # (the option set to inf by the user: an integrator without it, midpoint or implicit_euler, has no turn rule)
    if "max_turn" not in getattr(type(stepper), "options", {}) or getattr(stepper, "max_turn", None) != math.inf:
        return
    names = [n for n in system.layout.bodies if system.layout.kind(n) == "rigid"]
    if not names or not len(traj.t):
        return
    v, worst = traj.v, (0.0, 0, 0)  # (|ω|², state, body)
    with np.errstate(all="ignore"):
        for b, name in enumerate(names):  # |Ṙ|² = 2|ω|² (Ṙ = ω̂R): the rotation columns' rates, no copy of them
            o = system.layout.offset[name]
            spin2 = 0.5 * np.einsum("ij,ij->i", v[:, o + 3 : o + 12], v[:, o + 3 : o + 12])
            k = int(np.argmax(spin2))
            if not np.isfinite(spin2[k]):
                return
            if spin2[k] > worst[0]:
                worst = (float(spin2[k]), k, b)
    spin2, k, b = worst
    turn = abs(stepper.dt) * math.sqrt(spin2)
    if turn <= FAST_TURN:
        return
    notices.warn(
        f"integrator {stepper.name!r} at dt = {stepper.dt:g} s with max_turn=inf turned rigid body {names[b]!r} by "
        f"h|ω| = {turn:.3g} rad in a step (at t = {traj.t[k]:.6g} s): the rotation's angle error, ~(h|ω|)²/3 a step, "
        "is no energy error and the energy does not show it, but what the spin drives (a gimbal it turns) lags by "
        "it; keep the default max_turn (it splits such steps) or reduce dt",
        RuntimeWarning,
    )


#: the share of a velocity midpoint's flip may leave after one step before it warns: just past h c/m = 2 the
#: factor (a − 1)/(a + 1) is nearly 0 (the motion stops at once, as it should: a warning there, with a dt to use
#: that was the one in use, was a false alarm); at h c/m = 2.44 it is 0.1, where the exact decay leaves 0.09
FLIP_LEFT = 0.1


def flip_factor(scheme: np.ndarray, h: float, rate: float) -> float:
    """What one step of ``scheme`` leaves of a velocity under linear damping of rate c/m = ``rate`` (1/s): the
    product over its stages of (1 − a₁ h_s c/m)/(1 + a₀ h_s c/m) (a RATTLE stage, the force at the stage's
    mean velocity: its kicks a₀ h_s, a₁ h_s), (1 − h_s c/2m)/(1 + h_s c/2m) (midpoint) or 1/(1 + h_s c/m)
    (implicit Euler). Negative: the step flips the velocity's sign, where the motion stops within it."""
    out = 1.0
    for kind, w, a0, a1, _row in np.asarray(scheme, dtype=float):
        hs = w * h * rate
        if int(kind) == MIDPOINT:
            a0 = a1 = 0.5
        elif int(kind) == IMPLICIT_EULER:
            a0, a1 = 1.0, 0.0
        out *= (1.0 - a1 * hs) / (1.0 + a0 * hs)
    return out


def _warn_stiff_damping(traj: Trajectory, stepper: Integrator, system) -> None:
    """A method that flips the velocity under damping that stops a motion within a step (``midpoint``, A-stable,
    not L-stable; ``verlet`` and its compositions, whose drift solves for the force at the step's mean velocity
    as midpoint does): along it the velocity flips sign every step, shrinking by (1 − a)/(1 + a) (a = h c/2m)
    instead of vanishing, and the energy balance, exact for linear damping, does not show it (vx = 1, −0.996,
    0.992 … under a drag that stops it in 1e-5 s). A RuntimeWarning names it and the remedy. Judged at the first
    state and at the fastest one (a drag quadratic in the speed damps nothing at rest); a force that cannot be
    evaluated there leaves it unjudged."""
    if not (isinstance(system, System) and system.has_velocity_forces and isinstance(stepper, Compiled)):
        return
    scheme = np.asarray(stepper.method(), dtype=float)
    if len(traj.t) < 2 or np.any(scheme[:, 1] < 0.0):  # a backward stage is not solved at its step (substeps)
        return
    rate, coordinate = 0.0, 0
    with np.errstate(all="ignore"):
        fastest = int(np.nanargmax(traj.kinetic)) if np.isfinite(traj.kinetic).any() else 0
        for k in dict.fromkeys((0, fastest)):
            try:
                with notices.kept(quiet=True):  # (a singular G M⁻¹ Gᵀ's warning is the run's, said once)
                    found = damping_rate(system, traj.q[k], traj.v[k], float(traj.t[k]),
                                         speed=float(system.length_scale) / stepper.dt)  # fmt: skip
            except Exception:  # (a measurement after a run that completed: not the run's failure)
                continue
            if found[0] > rate:
                rate, coordinate = found
    left = flip_factor(scheme, stepper.dt, rate)
    if not left < -FLIP_LEFT:
        return
    body = next((n for n, o in system.layout.offset.items()
                 if o <= coordinate < o + system.layout.bodies[n].ncoords), "?")  # fmt: skip
    ends = [0.5 * w if int(k) == MIDPOINT else a1 * w for k, w, _a0, a1, _r in scheme if int(k) != IMPLICIT_EULER]
    no_flip = 1.0 / (rate * max(ends))  # the dt at which the first stage's end kick stops the motion
    notices.warn(
        f"integrator {stepper.name!r} at dt = {stepper.dt:g} s: the damping is stiff for this step (a motion of "
        f"body {body!r} is damped at c/m = {rate:.3g} 1/s, h c/m = {stepper.dt * rate:.3g} > {1 / max(ends):.3g}): "
        f"{stepper.name} flips "
        f"its velocity's sign every step, shrinking it by only {abs(left):.3g}, where the motion stops within a "
        f"step; the result is not accurate (use integrator='implicit_euler', which damps it, or dt <= {no_flip:.3g} s)",
        RuntimeWarning,
    )


def torsion_springs(system: System) -> list:
    """The system's :class:`mbvi.TorsionSpring` elements."""
    from mbvi.forces import TorsionSpring

    return [e for law in system.laws for e in getattr(law, "elements", ()) if isinstance(e, TorsionSpring)]


def _warn_wound_springs(traj: Trajectory, system: System) -> None:
    """A TorsionSpring whose joint turned more than half a turn from rest met its law's cusp (the law is periodic:
    :class:`mbvi.TorsionSpring`): a RuntimeWarning names it."""
    import math

    for spring in torsion_springs(system):
        if spring.stiffness == 0.0 or len(traj.t) < 2:
            continue
        with np.errstate(invalid="ignore"):
            off = traj.joint_angle(spring.joint) - spring.rest_angle
            # the law reads θ − θ₀ in (−π, π]: the turn the joint starts on is not a winding
            start = math.remainder(float(off[0]), 2 * math.pi)
            turn = float(np.max(np.abs(off - (off[0] - start))))
        if turn > np.pi:
            notices.warn(
                f"{spring.owner}: joint {spring.joint!r} turned {turn:.3g} rad from the spring's rest, past half a "
                "turn, where the spring's periodic law U = ½k(θ − θ₀)² (θ − θ₀ in (−π, π]) jumps in torque: the "
                "motion past it is not that of a spring that winds",
                RuntimeWarning,
            )


def energy_error(traj: Trajectory, system, work: np.ndarray | None) -> tuple[float, float, float, float, float] | None:
    """How far the run's energy balance E − E₀ − W strayed, against the energy in motion.

    Returns
    -------
    (relative, absolute, time, gain, motion) or None
        The largest |E − E₀ − W| (J) over the saved states, as a fraction of the energy in motion (the larger of
        the largest kinetic energy and the swing of the potential, J; with non-conservative forces, at least a
        tenth of the energy they moved through the system, :func:`mbvi.runs.energy_throughput`, over the saved
        states, so that a run saved coarsely is judged the more strictly), when it happened (s), the largest
        gain E − E₀ − W as a fraction of the energy the run had to give at the start (T₀ and U₀ above the lowest
        U it reached, or the largest |W| when more: a gain is judged against what was there, not against the
        motion the gain itself made — an implicit Euler step that took the wrong root flipped a pendulum over
        and tripled its energy, judged against that tripled motion), and that scale (J: ``info["energy_in_motion"]``,
        what plots divide by); None when
        it cannot be judged (non-conservative forces whose work the run did not measure).
    """
    e = traj.energy
    if len(e) < 2 or not np.isfinite(e).all():
        return None
    if system.has_forces:
        if work is None or len(work) != len(e):
            return None
        balance = e - e[0] - work
    else:
        balance = e - e[0]
    # the energy in motion; at least a thousandth of the system's energy scale (a body resting in equilibrium moves
    # by round-off, and its round-off-sized energy error is no error)
    drift = steady_drift(traj.v, system)
    scale = float(energy_scales(traj.kinetic, traj.potential, system, drift)[1])
    if system.has_forces:  # a driven run's balance against what its forces moved through it, too
        scale = max(scale, THROUGHPUT_SHARE * float(energy_throughput(work)))
    k = int(np.argmax(np.abs(balance)))
    worst = abs(float(balance[k]))
    given = energy_given(traj.kinetic, traj.potential, work, system, drift)
    return worst / scale, worst, float(traj.t[k]), float(np.max(balance)) / given, scale


def _warn_energy_error(traj: Trajectory, stepper: Integrator, system) -> None:
    """A completed run whose energy error is large (W: ``traj.work``) is not returned silently: a RuntimeWarning
    names it."""
    err = energy_error(traj, system, traj.work)
    if err is None:
        return
    traj.info["energy_error"], traj.info["energy_in_motion"] = err[0], err[4]
    baseline = not (stepper.variational or stepper.symplectic)
    if baseline and err[3] > WARN_ENERGY_BASELINE:  # a gain judged against what was there, not the motion it made
        notices.warn(
            f"integrator {stepper.name!r} at dt = {stepper.dt:g} s: the energy balance E − E₀ − W gained "
            f"{err[3]:.3g} times the energy the run had to give at the start (it strayed by {err[1]:.3g} J by "
            f"t = {err[2]:.4g} s); the result is not {'a solution' if err[3] > 1.0 else 'accurate'} "
            f"({_remedy(stepper, system, traj)})",
            RuntimeWarning,
        )
    elif judged_by_balance(stepper) and err[0] > WARN_ENERGY:  # (implicit Euler's loss is its nature)
        notices.warn(
            f"integrator {stepper.name!r} at dt = {stepper.dt:g} s: the energy balance E − E₀ − W strayed by "
            f"{err[1]:.3g} J, {err[0]:.0%} of the energy in motion, by t = {err[2]:.4g} s; the result is not "
            f"accurate ({_remedy(stepper, system, traj)})",
            RuntimeWarning,
        )


#: a constraint tolerance this many times the integrator's default is loose enough to be the first suspect
LOOSE_TOL = 100.0


def _remedy(stepper: Integrator, system: Any = None, traj: Trajectory | None = None) -> str:
    """What to change first: a plugin law whose gradient is not its potential's derivative (the balance cannot
    hold at any dt: :func:`law_at_odds`), a loose ``tol`` (SHAKE stops as soon as its residual is under it, with
    a sign that depends on the state: energy and momentum creep by about tol a step, whatever dt, and a smaller dt
    only takes more steps), else dt."""
    odd = law_at_odds(system, [traj.q[0], traj.q[-1]]) if system is not None and traj is not None else None
    if odd is not None:
        return odd
    tol, default = getattr(stepper, "tol", None), type(stepper).options.get("tol")
    # SHAKE's residual only: a RATTLE-family scheme on constraint rows (the implicit pair's solves converge
    # below tol; a system without rows solves nothing)
    shake = isinstance(stepper, Compiled) and len(stepper.system.active) > 0 and is_rattle(stepper.method())
    if shake and isinstance(tol, float) and isinstance(default, float) and tol > LOOSE_TOL * default:
        return (f"tol = {tol:g} is loose: the solves' residual makes the energy creep step by step whatever dt, "
                f"and a smaller dt only takes more steps; tighten tol, e.g. to its default {default:g}")  # fmt: skip
    return adaptive_remedy(stepper) or f"reduce dt, e.g. to {stepper.dt / 4:g} s"  # (csm: its rtol and atol)


#: a law's gradient along a direction differs from its potential's central difference by more than this
#: fraction of |∇U|: it is not that potential's gradient
GRADIENT_AT_ODDS = 1e-4


def law_at_odds(system: Any, states: list[np.ndarray]) -> str | None:
    """What to say of a plugin force law whose ``gradient`` is not the derivative of its ``potential``, or None.

    The run integrates the gradient and measures the energy with the potential: when they disagree (a constant
    typed differently in the two) the balance strays by the same amount at every dt, and "reduce dt" cannot mend
    it. Each plugin law with a potential is checked along one direction at each of ``states`` (shape (nq,)) by a
    central difference of its potential; mbvi's own laws are tested elsewhere. Two potential evaluations and one
    gradient per law and state; a law that cannot be evaluated there is not judged.
    """
    rng = np.random.default_rng(0)
    for law in getattr(system, "laws", ()):
        if not getattr(law, "has_potential", False) or type(law).__module__.startswith("mbvi."):
            continue
        for q in states:
            q = np.asarray(q, dtype=float)
            d = rng.standard_normal(len(q))
            d /= np.linalg.norm(d)
            eps = 1e-6 * max(float(getattr(system, "length_scale", 1.0)), float(np.max(np.abs(q), initial=0.0)))
            try:
                with np.errstate(all="ignore"):
                    g = np.asarray(law.gradient(q), dtype=float)
                    u = [float(law.potential(q + s * eps * d)) for s in (1.0, -1.0, 2.0, -2.0)]
            except Exception:
                continue
            slope, wider = (u[0] - u[1]) / (2 * eps), (u[2] - u[3]) / (4 * eps)
            # what the difference itself errs by: its truncation (the wider one's is 4 times the narrower's: a
            # third derivative of U) and the round-off of U's values over the width
            slack = 2.0 * abs(wider - slope) + 1e3 * np.finfo(float).eps * max(abs(x) for x in u) / eps
            along, size = float(g @ d), float(np.linalg.norm(g))
            if np.isfinite(slope) and np.isfinite(along) and abs(along - slope) > GRADIENT_AT_ODDS * max(
                    size, abs(slope)) + slack:  # fmt: skip
                return (f"force law {law.name!r}: its gradient is not the derivative of its potential (along a "
                        f"direction, ∇U·d = {along:.6g} where U changes at {slope:.6g}), so no dt mends the "
                        "balance; mbvi.check_force_law finds where they differ")  # fmt: skip
    return None


def _ending_at(stepper, cls, system, state: State, t0: float, nsteps: int, save_every: int, callback, last: float,
               options: dict):  # fmt: skip
    """nsteps − 1 steps of dt, then one of ``last`` (< dt) that ends the run at t_end, as one RunResult."""
    from mbvi.engine.runner import RunResult

    dt = stepper.dt
    head = stepper.run(state, t0, nsteps - 1, save_every, callback) if nsteps > 1 else None
    start = State(head.q[-1], head.v[-1]) if head is not None else state
    t1 = t0 + (nsteps - 1) * dt
    tail_stepper = cls(system, last, **options)
    try:
        tail = tail_stepper.run(start, t1, 1, 1)
    except SolverError as err:
        if head is not None and err.partial is not None:
            err.partial = head
        raise
    if callback is not None:  # the last, shorter step is one of the run's (a progress bar closed one short)
        callback(nsteps)
    if head is None:
        return tail
    work = None
    if head.work is not None and tail.work is not None:
        work = np.concatenate([head.work, head.work[-1] + tail.work[1:] - tail.work[0]])
    counters = dict(head.counters)
    for key, value in tail.counters.items():
        counters[key] = counters.get(key, 0) + value
    # the head keeps its last state; off the save_every grid it is not one of the run's (the run's last is the tail's)
    keep = slice(None) if (nsteps - 1) % save_every == 0 else slice(None, -1)
    if work is not None:
        work = np.concatenate([work[: len(head.t)][keep], work[len(head.t) :]])
    return RunResult(np.concatenate([head.t[keep], tail.t[1:]]), np.concatenate([head.q[keep], tail.q[1:]]),
                     np.concatenate([head.v[keep], tail.v[1:]]), work, counters)  # fmt: skip


def given_state(system, initial_state: State, who: str = "simulate") -> State:
    """A user's initial state checked against ``system`` (a copy): ValueError naming ``who`` when it is not one."""
    if not isinstance(initial_state, State):
        raise ValueError(f"{who}: initial_state must be an mbvi.State, got {type(initial_state).__name__}")
    q = real_array(initial_state.q, f"{who}: initial_state's q")
    v = real_array(initial_state.v, f"{who}: initial_state's v")
    if q.shape != (system.nq,) or v.shape != (system.nq,):
        raise ValueError(f"{who}: initial_state must have q and v of shape ({system.nq},)")
    if not (np.isfinite(q).all() and np.isfinite(v).all()):
        raise ValueError(f"{who}: initial_state is not finite")
    return on_the_joints(system, q, v, who)


#: the relative residual of a joint past which a given initial position violates it (below it, the position is
#: brought onto the joints: a state saved by a run at a looser tolerance)
GIVEN_POSITION_TOL = 1e-6


def on_the_joints(system, q: np.ndarray, v: np.ndarray, who: str) -> State:
    """A given state on the joints, as the scene's own initial state is: positions that violate a joint are a
    ValueError naming it (those off by round-off are brought onto the joints), velocities off them are projected
    (mass-weighted) with a :class:`mbvi.ConstraintWarning`."""

    from mbvi.errors import ConstraintWarning

    try:
        state, corr = joint_state(system, q, v)
    except ValueError as exc:
        raise ValueError(
            f"{who}: initial_state violates {exc}; give positions on the joints (e.g. a trajectory's or an "
            "equilibrium's state)"
        ) from None
    if corr:
        notices.warn(
            f"{who}: the initial velocities violate the joints; projected onto them: "
            f"{system.projected_velocities(state.q, v, state.v)}",
            ConstraintWarning,
        )
    return state


def joint_state(system, q: np.ndarray, v: np.ndarray) -> tuple[State, float]:
    """The rule of :func:`on_the_joints`, without its warning: the state it starts from and the velocity change.

    Parameters
    ----------
    system : mbvi.System
        The assembled system.
    q, v : ndarray, shape (nq,)
        The given positions and velocities (finite).

    Returns
    -------
    state : mbvi.State
        ``(q, v)`` as given (the same arrays, bit for bit) when on the joints; else positions off by round-off
        brought onto them and velocities off them projected (mass-weighted).
    change : float
        The largest change of a velocity coordinate when the velocities were projected, else 0.

    Raises
    ------
    ValueError
        The positions violate a joint by more than :data:`GIVEN_POSITION_TOL` (relative); the message is the
        joint and its residual only (the caller says whose state it is).
    """
    rows = system.rows
    if rows.n:
        g = rows.values(q)
        rel = np.abs(g) / rows.scale
        worst = int(np.argmax(rel))
        if rel[worst] > GIVEN_POSITION_TOL:
            raise ValueError(f"{rows.owner[worst]} (residual {g[worst]:.3g})")
        if rel[worst] > 1e-10:  # else left as given, bit for bit (a run's state continues as the run would)
            q = system.project_position(q)
    if len(system.active):
        projected = system.project_velocity(q, v)
        corr = float(np.max(np.abs(projected - v)))
        if corr > 1e-9 * max(float(np.max(np.abs(v))), 1e-300) and corr > 1e-12:
            return State(q, projected), corr
    return State(q, v), 0.0


def check_capabilities(cls: type[Integrator], system) -> None:
    """Refuse a system the integrator declares it cannot integrate (rather than dropping forces silently)."""
    handles = cls.handles
    if system.has_forces and "forces" not in handles:
        names = sorted({type(law).__name__ for law in system.force_laws})
        raise ValueError(
            f"integrator {cls.name!r} does not declare that it handles non-conservative forces "
            f"(handles = {sorted(handles)}), and this scene has some ({', '.join(names)}); use a built-in "
            "integrator, or declare handles = frozenset({'constraints', 'forces'}) in the plugin if it applies "
            "system.force(q, v, t)"
        )
    if len(system.active) and "constraints" not in handles:
        raise ValueError(f"integrator {cls.name!r} does not handle constraints, and this scene has joints")


def _measured(work: np.ndarray | None, t: np.ndarray) -> np.ndarray | None:
    """The run's work at its saved states when it measured it (one value a state), else None."""
    return None if work is None or len(work) != len(t) else np.asarray(work, dtype=float)


def _energy_scale(traj: Trajectory, system) -> float:
    """A size of the energies in play at the start: kinetic, potential and m g L of the bodies, J."""
    return float(energy_scales(traj.kinetic, traj.potential, system)[0])


def _check_energy_balance(traj: Trajectory, stepper: Integrator, system) -> None:
    """A blown-up run is never returned as a result: E − E₀ − W (W the work of the non-conservative forces,
    ``traj.work``)."""
    err = _blow_up(traj, stepper, system, warn=True)
    if err is not None:
        raise err


def _blow_up(traj: Trajectory, stepper: Integrator, system, warn: bool = False,
             failed: bool = False) -> SolverError | None:  # fmt: skip
    """The :class:`SolverError` of a run whose energy balance broke (W: ``traj.work``), at the first state past the
    bound, with the states up to it; None when it held. A baseline's (not variational) broken balance warns (with
    ``warn``), unless the run ``failed`` at a step after it: the blow-up is then the error (a projection that did
    not converge at 1e32 J named no culprit and kept the states of the blow-up)."""
    e, work = traj.energy, traj.work
    if len(e) < 2:
        return None
    if work is None or len(work) != len(e):
        work = np.zeros(len(e)) if not system.has_forces else None
    with np.errstate(all="ignore"):
        balance = e - e[0] - (work if work is not None else 0.0)
        if work is None:  # forces without a measured work: judge the growth only
            balance = np.maximum(balance, 0.0)
    scale = _energy_scale(traj, system)
    with np.errstate(all="ignore"):
        # a blow-up strays by a thousand times the energy in play at the start and by about all the energy in
        # motion up to it (its own kinetic energy included): a driven run that gained 4e6 J, its balance off by
        # 1e4 J (0.24 %), had been called blown up against the 9.8 J of its start
        motion = np.maximum(traj.kinetic, np.abs(traj.potential - traj.potential[0]))
        if work is not None:
            motion = np.maximum(motion, np.abs(work))
        bound = np.maximum(BLOW_UP * scale, 0.5 * np.fmax.accumulate(motion))
        bad = ~(np.abs(balance) <= bound)
    if not bad.any():
        return None
    k = int(np.argmax(bad))  # the first saved state past the bound
    drift = abs(float(balance[k]))
    step = round((float(traj.t[k]) - float(traj.t[0])) / stepper.dt)
    finite = bool(np.isfinite(traj.q[k]).all() and np.isfinite(traj.v[k]).all())
    faulty = _faulty_potential(system, traj.q[k]) if finite and not np.isfinite(traj.potential[k]) else None
    if faulty is not None:  # a law's energy is NaN at a state of moderate size: the law's fault, not the step's
        out = LoadError(f"force law {faulty!r}: its potential(q) returned non-finite values at a finite state",
                        time=float(traj.t[k]), step=step, culprit=f"force law {faulty!r}")  # fmt: skip
        with np.errstate(all="ignore"):
            out.trajectory = traj.head(k)
        return out
    err = instability(system, stepper.name, stepper.dt, float(traj.t[k]), step, finite=finite)
    why, adaptive = err.reason, adaptive_remedy(stepper)
    if adaptive is not None:  # csm: its tolerances, not dt (no dt to suggest)
        why, err.suggested_dt = f"integrator {stepper.name!r} went unstable: {adaptive}", None
    reason = (
        f"the energy balance broke: E − E₀ − W reached {drift:.3g} J against an energy scale of {scale:.3g} J "
        f"by t = {traj.t[k]:.6g} s (the run blew up); {why}"
    )
    if stepper.variational or stepper.symplectic or failed:
        out = SolverError(reason, time=float(traj.t[k]), step=step, culprit=err.culprit, suggested_dt=err.suggested_dt)
        with np.errstate(all="ignore"):  # (the run's later states may be huge)
            out.trajectory = traj.head(k + 1)  # the states up to the one that broke the balance
        return out
    if warn:
        notices.warn(f"integrator {stepper.name!r}: {reason}", RuntimeWarning)
    return None


def _faulty_potential(system: System, q: np.ndarray) -> str | None:
    """The name of a force law whose potential is NaN at q, when q is of moderate size (below 1e100: beyond, a
    blow-up's overflow is no law's fault), else None."""
    if not np.max(np.abs(q), initial=0.0) < 1e100:
        return None
    for law in system.potential_laws:
        try:
            with np.errstate(all="ignore"):
                u = np.asarray(law.potential(q), dtype=float)
        except Exception:  # (what it raises was named when the energies were computed)
            continue
        if np.isnan(u).any():
            return law.name or type(law).__name__
    return None


def _verify_suggestion(err: SolverError, scene: Scene | System, stepper: Integrator, t_end: float, t0: float, state,
                       options, pace: float = 0.0):  # fmt: skip
    """Replace the solver's step-size hint by one that a re-run confirms (halving from it), within a budget: the
    re-run must complete and keep what the integrator keeps (:func:`mbvi.runs.verify_hint`: a variational one, its
    energy within 1 % of the energy in motion; a baseline, no energy gained beyond 10 % of what it had). A
    NumPy-path re-run is verified when one at the hint, at the failed run's ``pace`` (s a step), fits in the
    budget; else the hint is halved, unverified (explicit Euler's unverified hint gained 96 % of a chain's
    energy). ``stepper``: the failed run's integrator, on its system (the re-runs start from ``scene`` again)."""
    cls, dt, system = type(stepper), stepper.dt, stepper.system
    hint = hint_to_verify(err, dt)
    if hint is None:
        return
    compiled = stepper.engine_model() is not None if cls.compiled else cls.kernel is not None
    if not compiled and not 0.0 < pace * (t_end - t0) / hint <= VERIFY_BUDGET:
        # a NumPy-path re-run that may take long: give the hint a margin instead, and say it is not verified
        err.suggested_dt = hint / 2
        err.unverified()
        return

    def rerun(candidate: float, every: int) -> Trajectory:
        return _simulate(False, scene, t_end, candidate, cls, t0=t0, initial_state=state, save_every=every,
                         progress=False, **options)  # fmt: skip

    def gain(run: Trajectory) -> float | None:  # a baseline's: what energy_error judges it by
        judged = energy_error(run, system, run.work)
        if judged is None:
            return None
        # (one that does not damp by nature warns when its balance strays, too: a step verified by its gain alone
        # could run and warn; both bounds are a tenth)
        return max(judged[3], judged[0]) if judged_by_balance(cls) else judged[3]

    # (system: assembled above, to tell compiled from not); a kept state: q, v and what is derived from them
    verify_hint(err, rerun, hint, t_end - t0, cls, gain, 3 * system.nq, 0.0 if compiled else pace)
