"""Bookkeeping every kind of run shares: its number of steps, its metadata, its progress bar."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from mbvi import notices
from mbvi._validate import as_float, is_number
from mbvi.errors import SolverError, member_failure

#: a run whose energy left its balance by this many energy scales has blown up
BLOW_UP = 1e3
#: a completed run whose energy error exceeds this fraction of the energy in motion warns (it is not accurate):
#: a variational or symplectic run, or a baseline that does not damp by its nature (:func:`judged_by_balance`)
WARN_ENERGY = 0.1
#: a baseline's run (not variational: explicit and implicit Euler, csm, plugins) that gained more than this fraction
#: of the energy it had to give at the start warns (not a solution): the bound its suggested steps are verified by
#: (:data:`VERIFY_GAIN`). Explicit Euler gaining 58 % of a pendulum's energy passed silently under the bound of 1.
WARN_ENERGY_BASELINE = 0.1

__all__ = [
    "energy_given", "energy_in_motion", "energy_scales", "energy_throughput", "judge_members", "judged_by_balance",
    "last_step",
    "least_motion", "named_members", "progress_bar", "run_info", "run_numbers", "steady_drift", "step_count",
    "verify_hint", "whole_steps",
]  # fmt: skip


#: t_end − t0 is a whole number n of steps when (t_end − t0)/dt is within this of n, relative to n (the quotient's
#: rounding, and a t_end summed from steps), and within :data:`WHOLE_STEPS_MOST` of a step: above 5e8 steps the
#: relative margin alone was half a step, and a run could end dt/2 short of t_end or past it, silently
WHOLE_STEPS_RELATIVE = 1e-9
WHOLE_STEPS_MOST = 1e-3


def whole_steps(t_end: float, dt: float, t0: float = 0.0) -> bool:
    """Whether t_end − t0 is a whole number of steps of dt (to :data:`WHOLE_STEPS_RELATIVE` of the count, at most
    :data:`WHOLE_STEPS_MOST` of a step)."""
    ratio = (t_end - t0) / dt
    return abs(ratio - round(ratio)) < min(WHOLE_STEPS_RELATIVE * max(1.0, ratio), WHOLE_STEPS_MOST)


def last_step(t_end: float, dt: float, t0: float, nsteps: int) -> float:
    """The length of a run's last step when it ends at t_end: dt, or what is left of t_end − t0 after the
    nsteps − 1 steps of dt before it (s)."""
    if whole_steps(t_end, dt, t0) or nsteps == 0:
        return dt
    return (t_end - t0) - (nsteps - 1) * dt


def step_count(t_end: float, dt: float, t0: float = 0.0, save_every: int = 1, who: str = "simulate") -> int:
    """Validated number of steps ``ceil((t_end − t0)/dt)`` (rounded when within 1e-9 of an integer, relative to it,
    and at most 1e-3: :func:`whole_steps`).

    When t_end − t0 is not a whole number of steps, :func:`mbvi.simulate` makes the last one shorter
    (:func:`last_step`) and ends at t_end."""
    return run_numbers(t_end, dt, t0, save_every, who)[-1]


def run_numbers(
    t_end: Any, dt: Any, t0: Any = 0.0, save_every: Any = 1, who: str = "simulate"
) -> tuple[float, float, float, int, int]:
    """A run's numbers validated (ValueError naming the one at fault) and as Python numbers (NumPy scalars and 0-d
    arrays accepted): ``(t_end, dt, t0, save_every, nsteps)``, nsteps as :func:`step_count` counts them."""
    t_end, dt, t0 = (_real(val, label, who) for label, val in (("t_end", t_end), ("dt", dt), ("t0", t0)))
    if dt <= 0:
        raise ValueError(f"{who}: dt must be positive, got {dt!r}")
    if t_end < t0:
        raise ValueError(f"{who}: t_end ({t_end}) is before t0 ({t0})")
    save_every = _count(save_every, "save_every", who)
    ratio = (t_end - t0) / dt
    if not ratio <= 10**10:  # (an infinite ratio, dt = 1e-310, was an OverflowError of round())
        raise ValueError(f"{who}: dt = {dt!r} over {t_end - t0!r} s is {ratio:.3g} steps; that is too many")
    nsteps = round(ratio) if whole_steps(t_end, dt, t0) else math.ceil(ratio)
    if nsteps > 10**10:
        raise ValueError(f"{who}: dt = {dt!r} over {t_end - t0!r} s is {nsteps:.3g} steps; that is too many")
    if nsteps // save_every > 2 * 10**8:
        raise ValueError(f"{who}: {nsteps // save_every:.3g} saved states would not fit in memory; raise save_every")
    time_resolution(t0, t_end, dt, who)  # (after the count: from t0 = 0, a step that fine is too many steps)
    return t_end, dt, t0, save_every, nsteps


#: the fewest float spacings of the clock a step may span: below one the steps' times t0 + k dt round to values
#: that repeat (a load read the wrong time, the saved times did not increase); at two they jitter by a quarter
#: of a step at most
MIN_TICKS = 2


def time_resolution(t0: float, t_end: float, dt: float, who: str = "simulate") -> None:
    """A ValueError naming dt and t0 when dt is below :data:`MIN_TICKS` float spacings of the times it runs at.

    t0 = 1.7e9 s (a Unix time stamp) has a float spacing of 2.4e-7 s: dt = 1e-7 made 102 states of 43 distinct
    times, and a saved run that :meth:`mbvi.Trajectory.load` refused."""
    tick = math.ulp(max(abs(t0), abs(t_end)))
    if dt < MIN_TICKS * tick:
        raise ValueError(
            f"{who}: dt = {dt!r} s is below the resolution of the clock at t0 = {t0!r} s (times there are floats "
            f"{tick:.3g} s apart: the steps' times would repeat or stand still); count time from a nearer origin "
            f"(t0 = 0) or take dt >= {MIN_TICKS * tick:.3g} s"
        )


def _real(val: Any, label: str, who: str) -> float:
    """``val`` as a finite float (:func:`mbvi._validate.is_number`: Python or NumPy numbers, a 0-d array; not a
    bool), or a ValueError naming it."""
    out = as_float(val) if is_number(val) else math.nan
    if not math.isfinite(out):
        raise ValueError(f"{who}: {label} must be a finite number, got {val!r}")
    return out


def _count(val: Any, label: str, who: str) -> int:
    """``val`` as a positive int (Python or NumPy integers; not a bool), or a ValueError naming it."""
    if isinstance(val, bool) or not isinstance(val, numbers.Integral) or int(val) < 1:
        raise ValueError(f"{who}: {label} must be a positive integer, got {val!r}")
    return int(val)


def run_info(cls: Any, dt: float, options: dict, **extra: Any) -> dict:
    """The metadata a Trajectory keeps about its run: integrator, step, order, options (as repr)."""
    options = {k: repr(v) for k, v in options.items()}
    name = cls.name or cls.__qualname__  # (a class given to a run may leave name unset)
    return {"integrator": name, "dt": float(dt), "order": int(cls.order), "options": options, **extra}


def counted(info: dict, counters: dict[str, int]) -> dict:
    """``info`` with what a trajectory reports of how its steps went (:attr:`mbvi.engine.runner.RunResult.counters`):
    ``refined_steps`` (steps taken in substeps) whenever the run counts them, ``numpy_steps`` (steps the NumPy path
    took) when there were any."""
    if "refined_steps" in counters:
        info["refined_steps"] = counters["refined_steps"]
    if counters.get("numpy_steps"):
        info["numpy_steps"] = counters["numpy_steps"]
    return info


def progress_bar(nsteps: int, label: str) -> tuple[Any, Callable[[int], None]]:
    """A tqdm bar over ``nsteps`` steps and the ``callback(k)`` that advances it every 100 steps."""
    from tqdm.auto import tqdm

    bar = tqdm(total=nsteps, unit="step", desc=label, leave=False)
    last = [0]

    def callback(k: int) -> None:
        if k - last[0] >= 100 or k == nsteps:
            bar.update(k - last[0])
            last[0] = k

    return bar, callback


def energy_in_motion(kinetic: np.ndarray, potential: np.ndarray, info: dict | None = None) -> float:
    """The energy in motion of one run, J: what its energy error is a fraction of.

    ``info["energy_in_motion"]`` when the run's judgement recorded it (:func:`mbvi.simulate`: with its system's
    m g L in the floor, the figure ``info["energy_error"]`` divides by); else, from the energies alone, the
    second of :func:`energy_scales` — the larger of the largest kinetic energy and the swing of the potential,
    at least a thousandth of the energy in play at the start. Unlike |E₀| it does not depend on where the
    potential is zero (a pendulum lifted by 1 km, or released a nanometre above its pivot's level, had its error
    divided by 1e4 J or by 1e-8 J). 1 J when nothing moves and nothing is in play.
    """
    recorded = (info or {}).get("energy_in_motion")
    if recorded is not None and np.isfinite(recorded) and recorded > 0:
        return float(recorded)
    kinetic, potential = np.asarray(kinetic, dtype=float), np.asarray(potential, dtype=float)
    if not kinetic.size:
        return 1.0
    with np.errstate(all="ignore"):
        motion = float(energy_scales(kinetic, potential, None)[1])
    return motion if np.isfinite(motion) and motion > 1e-300 else 1.0


#: an energy balance is judged against at least this share of the energy the non-conservative forces moved in and
#: out of the system (:func:`energy_throughput`)
THROUGHPUT_SHARE = 0.1


def energy_throughput(work: np.ndarray) -> np.ndarray:
    """Σ |ΔW| over the last axis (time; leading axes: members), J: the energy the non-conservative forces moved in
    and out of the system between the saved states (0 where it is not finite).

    A driven, damped run in its steady state takes in what it dissipates: its net work stays small, its motion
    too, and the quadrature of W errs by O(h²) of what flows through, an error that grows with the run. A driven
    oscillator at dt = 1e-2, accurate to 1.8e-5 m on a 0.128 m amplitude, had its balance stray by 16 % of its
    energy in motion at 400 s and 90 % at 2000 s (and at dt/4 by 22 % at 8000 s): judged against
    :data:`THROUGHPUT_SHARE` of this too, it is what it is, accurate, whatever the run's length (at dt = 0.1,
    its motion 1.5 % off, it still warns).
    """
    with np.errstate(all="ignore"):
        flow = np.sum(np.abs(np.diff(np.asarray(work, dtype=float), axis=-1)), axis=-1)
    return np.where(np.isfinite(flow), flow, 0.0)


def energy_scales(kinetic: np.ndarray, potential: np.ndarray, system: Any,
                  drift: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The two energy scales a run is judged against, J, over the last axis (time; leading axes: members).

    ``system``: the scene's :class:`mbvi.System` (its bodies' m g L, :attr:`mbvi.System.energy_unit`, is a floor
    of both scales), or None (a :class:`mbvi.LagrangianSystem`: no such floor). ``drift``: the kinetic energy of
    the whole system's steady motion at each state (:func:`steady_drift`), J, same shape as ``kinetic``, or None.

    Returns
    -------
    energy, motion : ndarray, shape ``kinetic.shape[:-1]``
        The energies in play at the start (|T₀| + |U₀|, at least the bodies' m g L), and the energy in motion:
        the larger of the largest T less the steady drift's and the swing of U, at least :func:`least_motion`.
        With a system the energy in motion is the same wherever the scene sits and however it drifts: U₀ depends
        on where gravity's potential is zero, and a pendulum hung at z = 1e4 m had its 34 % energy error judged
        against 1e-3 |U₀| = 98 J (1.5 %: no warning), two particles on a spring drifting at 30 m/s theirs against
        the drift's 900 J.
    """
    start = np.abs(kinetic[..., 0]) + np.abs(potential[..., 0])
    floor = 0.0 if system is None else system.energy_unit
    energy = np.maximum(np.maximum(start, floor), 1e-300)
    own = kinetic if drift is None else kinetic - drift
    motion = np.maximum(np.maximum(np.max(own, axis=-1), np.ptp(potential, axis=-1)),
                        least_motion(own[..., 0], potential[..., 0], system))  # fmt: skip
    return energy, np.maximum(motion, 1e-300)


def least_motion(kinetic0: np.ndarray, potential0: np.ndarray, system: Any) -> np.ndarray:
    """The least energy in motion a run is judged against, J (a body resting in equilibrium moves by round-off,
    and its round-off-sized energy error is no error): a thousandth of T₀ (less a steady drift) or of the bodies'
    m g L (:attr:`mbvi.System.energy_unit`), with a system; of |T₀| + |U₀| without (:func:`energy_scales`)."""
    if system is None:
        return 1e-3 * (np.abs(kinetic0) + np.abs(potential0))
    return 1e-3 * np.maximum(np.abs(kinetic0), system.energy_unit)


def energy_given(kinetic: np.ndarray, potential: np.ndarray, work: np.ndarray | None, system: Any,
                 drift: np.ndarray | None = None) -> float:  # fmt: skip
    """The energy a run had to give at the start, J: T₀ (less a steady drift) and U₀ above the lowest U it reached,
    or the largest |W| when more, at least :func:`least_motion`. What a baseline's gain is judged against: not
    the motion the gain itself made (an implicit Euler step that took the far root flipped a pendulum over and
    tripled its energy, judged against that tripled motion)."""
    own = float(kinetic[0]) - (0.0 if drift is None else float(drift[0]))
    given = own + float(potential[0]) - float(np.min(potential))
    if work is not None and len(work):
        given = max(given, float(np.max(np.abs(work))))
    return max(given, float(least_motion(own, potential[0], system)), 1e-300)  # (a scene without bodies: 0)


def steady_drift(v: np.ndarray, system: Any) -> np.ndarray | None:
    """The kinetic energy ½|P|²/M of the whole system's motion as one mass, J, shape (n,), at the velocities v
    (n, nq) of a run whose linear momentum P stays constant (a free system: its steady drift is a choice of
    frame, not of the dynamics); None when P changes (gravity, a joint to the world, loads) or there is no mass.
    """
    blocks = system.layout.translation_blocks
    total = float(np.sum(system.mass[blocks])) if len(blocks) else 0.0
    if not total > 0.0 or len(v) < 2:
        return None
    v = np.asarray(v, dtype=float)
    with np.errstate(all="ignore"):
        ends = np.asarray(system.momentum(v[[0, -1]]), dtype=float)  # (a system under gravity: told by two states)
        if not np.max(np.abs(ends[1] - ends[0])) <= 1e-9 * float(np.max(np.abs(ends))):
            return None
        P = np.asarray(system.momentum(v), dtype=float)
        size = float(np.max(np.abs(P)))
        if not (np.isfinite(size) and np.max(np.abs(P - P[0])) <= 1e-9 * size):
            return None
    return 0.5 * np.sum(P * P, axis=-1) / total


#: members a warning names before it counts the rest
MEMBERS_NAMED = 10


def named_members(members: list[int], count: int) -> str:
    """ "member 3 of 8", "members 0, 2 of 8", "members 0, 1, …, 9 and 5 more of 64": what a warning names."""
    listed = ", ".join(map(str, members[:MEMBERS_NAMED]))
    more = f" and {len(members) - MEMBERS_NAMED} more" if len(members) > MEMBERS_NAMED else ""
    return f"member{'s' if len(members) > 1 else ''} {listed}{more} of {count}"


def judge_members(trajs: list, judge: Callable[[Any], None], members: Any = None) -> None:
    """A batch's members judged each as :func:`mbvi.simulate` judges its run (``judge(traj)`` raises or warns):
    one that blew up is a SolverError naming the members that did (keeping every member's trajectory, the
    blown-up ones up to where they broke); the warnings of the others, one RuntimeWarning naming them.

    Parameters
    ----------
    trajs : list of Trajectory
        The members' runs.
    judge : callable
        A run's judgement: raises :class:`mbvi.SolverError`, or warns through :func:`mbvi.notices.warn`.
    members : iterable of int, optional
        The members that may fail it (the others are known to pass); default: all.
    """
    broken: dict[int, SolverError] = {}
    warned: list[tuple[int, str]] = []
    for b in range(len(trajs)) if members is None else members:
        with notices.kept(quiet=True) as notes:  # (the batch speaks for them, once)
            try:
                judge(trajs[b])
            except SolverError as exc:
                broken[b] = exc
        warned += [(b, note) for note in notes]
    if broken:
        failed = sorted(broken)
        kept = [broken[i].trajectory if i in broken else traj for i, traj in enumerate(trajs)]
        raise member_failure(broken[failed[0]], failed, len(trajs), kept)
    if warned:
        named = sorted({b for b, _ in warned})
        notices.warn(f"simulate_batch: {named_members(named, len(trajs))}: {warned[0][1]}", RuntimeWarning)


#: a suggested step is verified when its run keeps the energy error within this fraction of the energy in motion
VERIFY_ENERGY = 0.01
#: a baseline's (not variational, not symplectic) suggested step is verified when its run gains no more than this
#: fraction of the energy it had to give (its damping, implicit Euler's, is no failure: judged by the 1 % band of
#: the variational ones, a four-bar's hint shrank to 2e-5 s where 0.1 s runs)
VERIFY_GAIN = 0.1
#: wall-clock budget for verifying a suggested step size by re-running, s
VERIFY_BUDGET = 20.0
#: memory the states a verifying re-run keeps may take, bytes: as many as fit are kept (every step, when they
#: all fit), at least :data:`VERIFY_SAMPLES_MIN`; the energy is judged at them. A re-run saving every 256th step
#: of a pendulum in its angles missed the few steps of its pass by a pole of the coordinates (energy off by 6 %
#: there, back after) and called its dt "verified within 1 %"
VERIFY_MEMORY = 32 * 2**20
#: the fewest states a verifying re-run keeps (however large they are)
VERIFY_SAMPLES_MIN = 256


def judged_by_balance(cls: Any) -> bool:
    """Whether a run of the integrator ``cls`` warns when its balance |E − E₀ − W| strays past :data:`WARN_ENERGY` of
    the energy in motion: a variational or symplectic method, or a baseline that does not damp by its nature (its
    class's ``dissipative`` False: explicit Euler's gain, a projected leapfrog's loss of 60 % of a pendulum's
    energy are its errors). A dissipative one (implicit Euler) is judged by its gain alone
    (:data:`WARN_ENERGY_BASELINE`)."""
    return bool(cls.variational or cls.symplectic or not cls.dissipative)


def verify_samples(values: int) -> int:
    """How many states a verifying re-run keeps, when a state holds ``values`` floats (``VERIFY_MEMORY``)."""
    return max(VERIFY_SAMPLES_MIN, VERIFY_MEMORY // (8 * max(1, int(values))))


def verify_hint(err: SolverError, rerun: Callable[[float, int], Any], hint: float, span: float, cls: type,
                gain: Callable[[Any], float | None], values: int | None = None,
                per_step: float = 0.0) -> None:  # fmt: skip
    """:func:`verify_step` by what the integrator ``cls`` keeps: a variational or symplectic one, its energy within
    :data:`VERIFY_ENERGY` of the energy in motion; a baseline, whose damping is its nature (implicit Euler's band
    is ~1 at any dt), no energy gained beyond :data:`VERIFY_GAIN` of what it had to give (``gain(run)``, that
    fraction). A state of the run holds ``values`` floats: the re-runs keep what :func:`verify_samples` allows
    (None: :data:`VERIFY_SAMPLES_MIN`); ``per_step``: the time a step of the failed run took, s (0: not known), which
    the re-runs' cost is estimated from before one has run."""
    order = max(1, int(getattr(cls, "order", 1) or 1))
    samples = VERIFY_SAMPLES_MIN if values is None else verify_samples(values)
    if cls.variational or cls.symplectic:
        verify_step(err, rerun, hint, span, order, VERIFY_ENERGY, VERIFY_BUDGET, samples=samples, per_step=per_step)
    else:
        verify_step(err, rerun, hint, span, order, VERIFY_GAIN, VERIFY_BUDGET, gain,
                    "no energy gained beyond {within} of what it had to give", samples, per_step)  # fmt: skip


def hint_to_verify(err: SolverError, dt: float) -> float | None:
    """The step size a failed run's error suggests, when there is one to verify: smaller than the run's ``dt``, at
    a known time; else None."""
    hint = err.suggested_dt
    return hint if hint is not None and hint < dt and err.time is not None else None


def verify_step(err: SolverError, rerun: Callable[[float, int], Any], hint: float, span: float, order: int,
                energy: float, budget: float, figure: Callable[[Any], float | None] | None = None,
                kept: str = "its energy within {within} of the energy in motion",
                samples: int = VERIFY_SAMPLES_MIN, per_step: float = 0.0) -> None:  # fmt: skip
    """Replace a :class:`SolverError`'s step-size hint by one a re-run confirms (halving from ``hint``), within
    ``budget`` s of wall clock: the re-run ``rerun(dt, save_every)`` of the run's ``span`` (s), keeping about
    ``samples`` states (every step when it has no more), must complete and keep
    its energy error (its ``info["energy_error"]``, or ``figure(run)``: a baseline's gain) within ``energy`` (of
    the energy in motion; ``kept`` says what was kept, ``{within}`` the bound as a percentage). A re-run whose
    cost, estimated from the re-runs before it (time per step, of those that took 100 steps or more), would not fit
    in what is left of the budget is not started: the hint is then said to be unverified (a run of 1000 s whose
    verified step was 1e-5 s took 78 s to report its error). ``per_step`` (s), when known, is the estimate until a
    re-run has measured one (a failed run's few steps, with its setup, overstate it).
    """
    import time

    start = time.perf_counter()
    candidate = float(hint)
    tried: list[float] = []
    estimate, per_step = float(per_step), 0.0  # s a step: the caller's estimate, the largest a re-run measured
    within = f"{energy * 100:g} %"
    kept = kept.format(within=within)
    for _ in range(6):
        nsteps = max(1, round(span / candidate))
        if time.perf_counter() - start + (per_step or estimate) * nsteps > budget:
            if tried:  # out of time, not out of remedies: the step not tried is the hint, unverified
                err.suggested_dt = candidate
                err.unverified()
                return
            break
        tried.append(candidate)
        began = time.perf_counter()
        try:
            # judged here (the energy band decides): its warnings kept quietly, in this thread alone (the process's
            # filters set to "ignore" by members side by side in a threads sweep stayed so, every later warning
            # lost; and a member's warnings caught this re-run's, of a dt that was none of the user's)
            with notices.kept(quiet=True):
                run = rerun(candidate, max(1, -(-nsteps // max(1, samples))))
        except KeyboardInterrupt:  # Ctrl-C while verifying: the failure as it is, its hint not verified (the
            err.suggested_dt = candidate  # re-run's own states, at another dt, were handed back as the run's)
            err.unverified("its re-run was interrupted")
            return
        except SolverError as failed:
            taken = failed.step or 0
            if taken >= 100:  # (a failure within a few steps costs its setup and diagnosis: no time per step)
                per_step = max(per_step, (time.perf_counter() - began) / taken)
            candidate /= 2
            continue
        except ValueError:
            return
        per_step = max(per_step, (time.perf_counter() - began) / nsteps)
        band = run.info.get("energy_error") if figure is None else figure(run)
        if band is not None and band > energy:  # it ran, but not accurately: not a step to suggest
            # the energy error of a method of order p scales as dtᵖ: aim below the bound (at least halve)
            candidate *= min(0.5, max(1.0 / 16.0, 0.7 * (energy / band) ** (1.0 / order)))
            continue
        err.suggested_dt = candidate
        err.verified_dt = True
        err.args = (err._compose() + f" (verified: a run at that dt completes with {kept})",)
        return
    # no step tried kept the run sane: say so rather than pass the solver's estimate off as a remedy
    if tried:
        what = f"dt = {tried[0]:.3g}" if len(tried) == 1 else f"dt = {tried[0]:.3g} down to {tried[-1]:.3g}"
        err.verified_dt = False
        err.suggested_dt = None
        err.args = (err._compose() + f"; re-runs at {what} did not complete with {kept} either: a smaller step "
                    "alone may not cure it" + (f" ({err.ahead})" if err.ahead else ""),)  # fmt: skip
    else:
        err.unverified()
