"""Why a step failed, and what to try: the one owner of failure messages.

The NumPy integrators and the compiled engine fail the same ways (a
constrained drift that does not converge, a velocity-dependent drift whose
fixed point does not settle, a run that blows up, a load that raises); this
module turns each into a :class:`mbvi.SolverError` naming the culprit and a
step size, for both.
"""

from __future__ import annotations

import math

import numpy as np

from mbvi import kinematics
from mbvi.engine.contract import NonFinite
from mbvi.engine.fields import ST
from mbvi.engine.scheme import MAX_REFINE, WEIGHT
from mbvi.errors import LoadError, SolverError
from mbvi.system import System

__all__ = ["DRIFT_FAILED_MESSAGE", "diagnose", "drift_failure", "engine_failure", "instability", "kernel_failure",
           "stiff_kick", "velocity_law"]

#: a velocity-dependent drift whose fixed point does not settle
DRIFT_FAILED_MESSAGE = (
    "velocity-dependent forces: the implicit drift does not converge — the damping is too stiff for this "
    "step relative to the masses it acts on (e.g. joint damping on a body with a tiny rotational inertia); "
    "use a smaller dt, or integrator='implicit_euler', which solves it by Newton and damps it ('midpoint' solves "
    "it too, but a velocity its damping would stop within a step flips sign every step instead of decaying; a "
    "steep saturating law, tanh(v/ε) with a small ε, can defeat either's Newton at a large step)"
)
#: the velocity-dependent part of a force F(q, v) − F(q, 0) "jumps" when halving v leaves more than this share of it
#: (a damping's halves; Coulomb friction's sign(v) does not change)
JUMP_SHARE = 0.75


def diagnose(
    system, q: np.ndarray, v: np.ndarray, h: float, g: np.ndarray, lie: bool = False
) -> tuple[str | None, float]:
    """Blame a fast-spinning rigid body (h|ω| ≥ 1 has no RATTLE step) or the worst joint; a step to try.

    Parameters
    ----------
    system : mbvi.System
    q, v : ndarray, (nq,)
        The state at the start of the failing step.
    h : float
        The step, s (negative for a backward substep).
    g : ndarray
        The active constraint values where the solve stopped.
    lie : bool, default: False
        The step was the Lie-group one (:mod:`mbvi.engine.lieloop`), which exists at any spin: a fast body is
        named, without the RATTLE limit.
    """
    h = abs(h)  # a composition's backward substep runs backwards in time
    rot = system.layout.rotation_blocks
    if len(rot):
        idx = rot.reshape(-1, 3)[:, :, None] + np.arange(3)  # (bodies, column, component) of the rotation columns
        w = np.linalg.norm(kinematics.angular_velocity(q[idx], v[idx]), axis=1)
        i = int(np.argmax(w))
        if h * w[i] > 0.5:
            names = [n for n in system.layout.bodies if system.layout.kind(n) == "rigid"]
            if lie:
                return f"rigid body {names[i]!r} spins at |ω| = {w[i]:.3g} rad/s (h|ω| = {h * w[i]:.2f})", h / 4
            where = "past" if h * w[i] >= 1.0 else "near"  # (its solve slows down as h|ω| nears 1)
            return (
                f"rigid body {names[i]!r} spins at |ω| = {w[i]:.3g} rad/s (h|ω| = {h * w[i]:.2f}, {where} the RATTLE "
                "step's limit: one exists only for h|ω| < 1)"
            ), 0.5 / w[i]
    if len(g):
        r = int(np.argmax(np.abs(g) / system.active_scale))
        return system.rows.owner[int(system.active[r])], h / 4
    return None, h / 4


#: the built-in integrators whose step is implicit in the forces (A-stable for a linear spring)
IMPLICIT = frozenset({"midpoint", "implicit_euler"})


def instability(system, name: str, dt: float, t: float, k: int, *, finite: bool = False) -> SolverError:
    """The error for a run that blew up, naming the stiffest element when an explicit step explains it (``finite``:
    its states are still finite, its energy balance broke)."""
    stiff = system.stiffest_element() if isinstance(system, System) else None
    if stiff is not None and 2.0 / stiff[1] < 1.5 * dt:
        element, omega = stiff
        if name in IMPLICIT:  # stable for a linear spring at any step, but hω this large does not resolve it
            need = (f"at dt = {dt:.3g} s (hω ≈ {dt * omega:.3g}) a step does not resolve it: use dt < 2/ω = "
                    f"{2.0 / omega:.3g} s")  # fmt: skip
        else:
            need = (f"an explicit step needs dt < 2/ω = {2.0 / omega:.3g} s (or use integrator='midpoint', which is "
                    "A-stable)")  # fmt: skip
        return SolverError(
            f"integrator {name!r} went unstable: the stiffest element {element!r} has natural "
            f"frequencies up to ω ≈ {omega:.3g} rad/s and {need}",
            time=t,
            step=k,
            culprit=element,
            suggested_dt=1.8 / omega,
        )
    what = "went unstable, its energy growing without bound" if finite else "produced non-finite values"
    return SolverError(f"integrator {name!r} {what} (unstable; reduce dt)", time=t, step=k, suggested_dt=dt / 4)


def adaptive_remedy(stepper) -> str | None:
    """What to change for an integrator whose steps solve_ivp chooses to ``rtol`` and ``atol`` (csm): those, not
    dt, which only spaces the saved states (csm at rtol = atol = 1 blew up alike at every dt, told to reduce it).
    None for an integrator whose steps are dt's."""
    if not isinstance(getattr(stepper, "rtol", None), float):
        return None
    defaults = type(stepper).options
    return (f"its steps are solve_ivp's, chosen to rtol = {stepper.rtol:g} and atol = {stepper.atol:g}, and dt only "
            f"spaces the saved states: tighten rtol and atol (defaults {defaults.get('rtol', 1e-8):g}, "
            f"{defaults.get('atol', 1e-10):g})")  # fmt: skip


def reach(scheme: np.ndarray | None) -> tuple[float, float]:
    """The times a step of ``scheme`` evaluates its forces at, as fractions of h from its start: (lowest, highest).

    (0, 1) for one stage; a composition's stages run forwards and backwards in time, to their partial sums of
    the weights: ``yoshida4``'s from −0.35 h to 1.35 h, ``yoshida6``'s from −0.16 h to 1.02 h.
    """
    if scheme is None or len(scheme) == 0:
        return 0.0, 1.0
    ends = np.cumsum(np.asarray(scheme, dtype=float)[:, WEIGHT])
    return min(0.0, float(ends.min())), max(1.0, float(ends.max()))


def raise_interrupts(callbacks) -> None:
    """Raise, as it is, a KeyboardInterrupt or SystemExit that a load or force law called as Python met (the
    user's: a callback cannot raise through C, it records it)."""
    for cb in callbacks:
        exc = getattr(cb, "error", None)
        if exc is not None and not isinstance(exc, Exception):
            cb.reset()
            raise exc


def _load_error(cb, t: float, k: int) -> SolverError:
    """The LoadError naming the callback ``cb`` whose recorded error stopped the run at step k (time t); a
    KeyboardInterrupt or SystemExit is raised as it is (the user's)."""
    raise_interrupts((cb,))
    exc = cb.error
    # the loads check and name their element themselves (a ValueError); anything else is named here
    if isinstance(exc, ValueError):  # the loads check what they return and name their element
        return LoadError(exc.reason if isinstance(exc, SolverError) else str(exc), time=t, step=k, culprit=cb.name)
    if isinstance(exc, NonFinite):  # NaN or inf from a law called as Python, at a finite state
        return LoadError(f"{cb.name}: {exc}", time=t, step=k, culprit=cb.name)
    return LoadError(f"{cb.name}: its {cb.role} raised {type(exc).__name__}: {exc}", time=t, step=k,
                     culprit=cb.name)  # fmt: skip


def recorded_failure(callbacks, t0: float, h: float, t_end: float) -> SolverError | None:
    """The error a load or force law called as Python recorded during a compiled call that went on, or None.

    A callback cannot raise through C: it records its exception and returns NaN, and the step fails. But the
    run may take that step again and succeed (the implicit pair's Newton handing it to NumPy, the Simulator's
    fast call re-run, a transient failure), and an evaluation for the work alone fails no step: the exception
    was lost, a KeyboardInterrupt too. The earliest one recorded stops the run at the step it was met in
    (``err.step``; the step that ends at the time it was met, when it was met at a step's end). One met at the
    call's end ``t_end`` (s), where only the work reads the loads (symplectic Euler A), is forgotten: no step
    took it, and the next call's first step evaluates it again. A KeyboardInterrupt or SystemExit is raised as
    it is, wherever it was met.
    """
    raise_interrupts(callbacks)
    first = None
    slack = 1e-9 * max(1.0, abs(t_end))
    for cb in callbacks:
        if getattr(cb, "error", None) is None:
            continue
        when = float(getattr(cb, "time", getattr(cb, "error_time", t0)))
        if math.isnan(when):  # met at no known time (a gradient a plugin's step asked for): the step the call
            k = max(0, round((t_end - t0) / h)) if h > 0 else 0  # stopped at, whose start is t_end
            when = t0 + (k + 1) * h if h > 0 else t0
        elif when >= t_end - slack:
            cb.reset()
            continue
        if first is None or when < first[0]:
            first = (when, cb)
    if first is None:
        return None
    when, cb = first
    k = max(0, math.ceil((when - t0) / h - 1e-9) - 1) if h > 0 else 0
    return _load_error(cb, t0 + k * h, k)


def kernel_failure(callbacks, t: float, k: int, start: tuple | None = None,
                   span: tuple[float, float] = (0.0, 1.0)) -> SolverError | None:  # fmt: skip
    """The error for a step whose load or force law raised (a Python callback of the compiled loop), if one did.

    ``start``: ``(q, v, h)``, the failing step's start and size: a compiled kernel, which cannot raise through
    C (it writes NaN), is then called again as Python there (:class:`mbvi.engine.callbacks.CompiledWatch`) and
    named when it raises or returns non-finite values. ``span``: the step's :func:`reach` (the window, in steps
    from t, in which a failure recorded is this step's).
    """
    slack = 1e-9 * max(1.0, abs(t))
    if start is not None:
        h = abs(start[2])
        first, end = t + span[0] * h - slack, t + span[1] * h + slack
    else:
        first, end = t - slack, math.inf
    for cb in callbacks:
        when = getattr(cb, "time", getattr(cb, "error_time", float("nan")))
        # recorded outside the failing step: at a step that completed (an evaluation for the work alone, whose
        # failure no step took), or by another member of a batch (kept for that member's own diagnosis); a
        # composition's stages reach before and past the step (its span)
        if when < first or when > end:
            continue
        if cb.error is not None:
            return _load_error(cb, t, k)
    if start is not None:
        q, v, h = start
        for cb in callbacks:
            probe = getattr(cb, "probe", None)
            what = probe(np.asarray(q, dtype=float), np.asarray(v, dtype=float), t, h) if probe else None
            if what is not None:
                return LoadError(f"{cb.name}: {cb.source} {what}", time=t, step=k, culprit=cb.name)
    return None


def stiff_kick(system, q: np.ndarray, v: np.ndarray, t: float, h: float) -> bool:
    """Whether the part of the forces that reads the velocity kicks the velocities at the start of a step that
    failed by more than they are: h |M⁻¹ (F(q, v, t) − F(q, 0, t))| > |v| (largest entries), damping too stiff for
    the step (h c / m > 1).

    A step whose SHAKE fails at the fixed point's first iterate (the start's velocity) is SHAKE's own failure, a
    step too large for the joints, unless this kick is what threw it off its joints (a body moving into a damper
    of h c / m = 1000). Forces that do not change with the velocity (a hard push, a controller that reads the
    positions) are no damping. False without such forces, or when the force cannot be evaluated there.
    """
    if not getattr(system, "has_velocity_forces", False):
        return False
    kick = _velocity_kick(system.force, system.inv_mass, q, v, t, h)
    return kick is not None and kick > float(np.max(np.abs(v)))


def _velocity_kick(force, inv_mass: np.ndarray, q: np.ndarray, v: np.ndarray, t: float, h: float) -> float | None:
    """h |M⁻¹ (F(q, v, t) − F(q, 0, t))| (largest entry) of ``force(q, v, t)``: how far the part of it that reads
    the velocity kicks the velocities in a step; None when it cannot be evaluated there (the load's own failure
    is named elsewhere) or is not finite."""
    try:
        with np.errstate(all="ignore"):
            change = np.asarray(force(q, v, t), float) - np.asarray(force(q, np.zeros_like(v), t), float)
            kick = abs(h) * float(np.max(np.abs(inv_mass * change))) if change.size else 0.0
    except Exception:
        return None
    return kick if np.isfinite(kick) else None


def drift_failure(system, name: str, q: np.ndarray, v: np.ndarray, t: float, k: int, h: float) -> SolverError:
    """The error of a step whose fixed point on the step's mean velocity did not converge (velocity-dependent
    forces), at (q, v): stiff damping when its kick is (:func:`stiff_kick`); otherwise an element too stiff for
    the step when one is (:func:`instability`: a stiff spring's blow-up threw the fixed point off, and a drag of
    h c / m = 4e-5 took the blame, the spring unnamed); the damping message when nothing explains it."""
    if not stiff_kick(system, q, v, t, h):
        blown = instability(system, name, h, t, k)
        if blown.culprit is not None:
            return blown
    named = velocity_law(system, q, v, t, h)
    if named is None:
        return SolverError(DRIFT_FAILED_MESSAGE, time=t, step=k, suggested_dt=h / 4)
    who, said, jumps = named
    if jumps:  # no step size or integrator makes a jump a damping: the generic remedies would mislead
        return SolverError("velocity-dependent forces: the implicit drift does not converge. " + said,
                           time=t, step=k, culprit=who, suggested_dt=h / 4)  # fmt: skip
    return SolverError(f"{DRIFT_FAILED_MESSAGE}. {said}", time=t, step=k, culprit=who, suggested_dt=h / 4)


def velocity_law(system, q: np.ndarray, v: np.ndarray, t: float, h: float) -> tuple[str, str, bool] | None:
    """The force law whose force changes most with the velocity at (q, v) (:func:`_fastest_in_velocity`), a
    sentence on it, and whether its force jumps with the velocity (halving v leaves more than
    :data:`JUMP_SHARE` of its change: a Coulomb friction's sign(v)) rather than being a steep damping (h c/m a
    step, c its slope ∂F/∂v: a tanh(v/ε) friction below ε); None when no law's can be told."""
    fastest = _fastest_in_velocity(system, q, v, t, h)
    if fastest is None:
        return None
    who, kick, law = fastest
    speed = float(np.max(np.abs(v))) if len(v) else 0.0
    half = _velocity_kick(law.force, system.inv_mass, q, 0.5 * v, t, h)
    said = (f"The force that changes most with the velocity is that of {who!r} (a kick h|M⁻¹ΔF| of {kick:.3g} "
            f"against velocities up to {speed:.3g})")  # fmt: skip
    if half is not None and half > JUMP_SHARE * kick:
        return who, said + (
            f": at these speeds it jumps with the velocity rather than damping it (halving the velocity leaves "
            f"{min(half / kick, 1.0):.0%} of its change), as a Coulomb friction's sign(v) does, or a smoothing "
            "tanh(v/ε) whose ε is under these speeds; an implicit solve does not reliably cross such a jump at a "
            "stop, and a smaller dt alone may not cure it — smooth it (tanh(v/ε), or a larger ε)"
        ), True
    rate = f"{kick / speed:.3g}" if speed > 0.0 else "many"
    return who, said + f": a damping of h c/m ≈ {rate} a step (c its slope ∂F/∂v), too stiff for this step", False


def _fastest_in_velocity(system, q: np.ndarray, v: np.ndarray, t: float, h: float) -> tuple[str, float, object] | None:
    """The force law whose force changes most with the velocity at (q, v) — named by its element when it has one
    (an ``ExternalTorque 'friction'``'s callable), else by the law — its kick h |M⁻¹ (F(q, v) − F(q, 0))|, and the
    law; None when no law's can be told (a friction written as a load was "the damping is too stiff", naming
    nothing)."""
    best: tuple[str, float, object] | None = None
    for law in getattr(system, "force_laws", ()):
        if not law.velocity_dependent:
            continue
        kick = _velocity_kick(law.force, system.inv_mass, q, v, t, h)
        if kick is not None and kick > 0.0 and (best is None or kick > best[1]):
            names = [getattr(e, "name", None) for e in getattr(law, "elements", ())]
            best = (names[0] if len(names) == 1 and names[0] else law.name or type(law).__name__, kick, law)
    return best


def engine_failure(system, status: int, q: np.ndarray, v: np.ndarray, t: float, k: int, h: float, lie: bool,
                   name: str, callbacks=(), scheme: np.ndarray | None = None) -> SolverError:  # fmt: skip
    """The :class:`mbvi.SolverError` for a compiled step that ended with ``status`` (:data:`mbvi.engine.fields.ST`).

    ``lie``: the system's rigid bodies step on their Lie group, whose failing step was already retried in up to
    :data:`mbvi.engine.scheme.MAX_REFINE` substeps. ``scheme``: the step's (its stages' times bound the window in
    which a load's failure is this step's, :func:`reach`).
    """
    err = kernel_failure(callbacks, t, k, (q, v, h), reach(scheme))
    if err is not None:
        return err
    if status == ST.NONFINITE:
        return instability(system, name, h, t, k)
    if status == ST.DRIFT_FAILED or stiff_kick(system, q, v, t, h):
        return drift_failure(system, name, q, v, t, k, h)
    with np.errstate(all="ignore"):
        culprit, hint = diagnose(system, q, v, h, system.active_constraints(q + h * v), lie)
    what = "SHAKE (constrained drift) did not converge"
    if lie:
        what += f", even split into {MAX_REFINE} substeps"
    return SolverError(what, time=t, step=k, culprit=culprit, suggested_dt=hint)
