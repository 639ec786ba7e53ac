"""simulate(): assemble a scene, pick an integrator, step, and return a Trajectory."""

from __future__ import annotations

from typing import Any

import numpy as np

from mbvi.assembly import assemble
from mbvi.diagnosis import instability
from mbvi.errors import SolverError
from mbvi.integrators.base import Integrator
from mbvi.integrators.rattle import Composition
from mbvi.plugins import bind_composition, get_integrator
from mbvi.runs import progress_bar, run_info, step_count
from mbvi.scene import Scene
from mbvi.state import State
from mbvi.trajectory import Trajectory

__all__ = ["check_capabilities", "given_state", "resolve_integrator", "simulate"]

#: a run whose energy left its balance by this many energy scales has blown up
BLOW_UP = 1e3
#: wall-clock budget for verifying a suggested step size by re-running, s
VERIFY_BUDGET = 20.0


def resolve_integrator(integrator: str | type[Integrator]) -> type[Integrator]:
    """A registered integrator name or an :class:`mbvi.Integrator` subclass → the class.

    A :class:`mbvi.Composition` given as a class is bound to its base here (ValueError naming it when its
    weights or base are wrong).
    """
    if isinstance(integrator, str):
        return get_integrator(integrator)
    if isinstance(integrator, type) and issubclass(integrator, Integrator):
        if issubclass(integrator, Composition) and integrator.__dict__.get("scheme") is None:
            bind_composition(integrator)
        return integrator
    raise ValueError(f"integrator must be a registered name or an mbvi.Integrator subclass, got {integrator!r}")


def simulate(
    scene: Scene,
    t_end: float,
    dt: float,
    integrator: str | type[Integrator] = "verlet",
    *,
    t0: float = 0.0,
    initial_state: State | None = None,
    save_every: int = 1,
    progress: bool = False,
    _verify: bool = True,
    **options: Any,
) -> Trajectory:
    """Simulate a scene from ``t0`` to ``t_end`` with steps of ``dt``.

    Parameters
    ----------
    scene : mbvi.Scene or mbvi.LagrangianSystem
        A scene, or a system in its own coordinates (run by the integrators of
        :mod:`mbvi.lagrangian.integrators`, same names; ``initial_state``
        defaults to the system's own).
    t_end : float
        End time, s. The number of steps is ``ceil((t_end − t0)/dt)`` (rounded
        when within 1e-9 of an integer).
    dt : float
        Step size, s.
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
    from mbvi.lagrangian import LagrangianSystem

    if isinstance(scene, LagrangianSystem):  # a system in the user's own coordinates: its own integrators
        from mbvi.lagrangian.run import simulate_lagrangian

        return simulate_lagrangian(scene, t_end, dt, integrator, t0=t0, initial_state=initial_state,
                                   save_every=save_every, progress=progress, **options)  # fmt: skip
    if not isinstance(scene, Scene):
        raise ValueError(f"simulate expects an mbvi.Scene, got {type(scene).__name__}")
    nsteps = step_count(t_end, dt, t0, save_every)
    cls = resolve_integrator(integrator)
    system = assemble(scene)
    check_capabilities(cls, system)
    state = system.initial_state() if initial_state is None else given_state(system, initial_state)
    stepper = cls(system, dt, **options)
    info = run_info(cls, dt, options)
    bar, callback = progress_bar(nsteps, cls.name) if progress else (None, None)
    try:
        result = stepper.run(state, float(t0), nsteps, save_every, callback)
    except SolverError as err:
        part = err.partial
        if part is not None and len(part.t):
            with np.errstate(over="ignore", invalid="ignore"):  # the last states of a blow-up are huge
                err.trajectory = Trajectory.from_states(system, part.t, part.q, part.v, scene=scene, info=info)
        if _verify:
            _verify_suggestion(err, scene, cls, dt, t_end, t0, initial_state, options)
        raise
    finally:
        if bar is not None:
            bar.close()
    counters = result.counters
    if "refined_steps" in counters:  # steps a fast body had taken in substeps
        info["refined_steps"] = counters["refined_steps"]
    if counters.get("numpy_steps"):  # compiled run: steps the NumPy path took (stiff implicit steps)
        info["numpy_steps"] = counters["numpy_steps"]
    with np.errstate(over="ignore", invalid="ignore"):  # a blown-up run is judged below, not warned about
        traj = Trajectory.from_states(system, result.t, result.q, result.v, scene=scene, info=info)
    _check_energy_balance(traj, stepper, system, result.work)
    return traj


def given_state(system, initial_state: State, who: str = "simulate") -> State:
    """A user's initial state checked against ``system`` (a copy): ValueError naming ``who`` when it is not one."""
    if not isinstance(initial_state, State):
        raise ValueError(f"{who}: initial_state must be an mbvi.State, got {type(initial_state).__name__}")
    q = np.array(initial_state.q, dtype=float)
    v = np.array(initial_state.v, dtype=float)
    if q.shape != (system.nq,) or v.shape != (system.nq,):
        raise ValueError(f"{who}: initial_state must have q and v of shape ({system.nq},)")
    if not (np.isfinite(q).all() and np.isfinite(v).all()):
        raise ValueError(f"{who}: initial_state is not finite")
    return State(q, v)


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


def _energy_scale(traj: Trajectory, system) -> float:
    """A size of the energies in play at the start: kinetic, potential and m g L of the bodies, J."""
    e0 = abs(traj.kinetic[0]) + abs(traj.potential[0])
    return max(e0, float(np.sum(system.mass[::3])) * 9.81 * system.length_scale, 1e-300)


def _check_energy_balance(traj: Trajectory, stepper: Integrator, system, work: np.ndarray | None) -> None:
    """A blown-up run is never returned as a result: E − E₀ − W (W the work of the non-conservative forces)."""
    e = traj.energy
    if len(e) < 2:
        return
    if not np.isfinite(e).all():
        drift = np.inf
    else:
        if work is None or len(work) != len(e):
            work = np.zeros(len(e)) if not system.has_forces else None
        drift = float(np.max(np.abs(e - e[0] - (work if work is not None else 0.0))))
        if work is None:  # forces without a measured work: judge the growth only
            drift = float(np.max(e - e[0]))
    scale = _energy_scale(traj, system)
    if not drift > BLOW_UP * scale:
        return
    k = int(np.argmax(~np.isfinite(e) | (np.abs(e - e[0]) > BLOW_UP * scale)))
    err = instability(system, stepper.name, stepper.dt, float(traj.t[k]), k)
    reason = (
        f"the energy balance broke: E − E₀ − W reached {drift:.3g} J against an energy scale of {scale:.3g} J "
        f"by t = {traj.t[k]:.6g} s (the run blew up); {err.reason}"
    )
    if stepper.variational or stepper.symplectic:
        bad = SolverError(reason, time=float(traj.t[k]), step=k, culprit=err.culprit, suggested_dt=err.suggested_dt)
        bad.trajectory = traj
        raise bad
    import warnings

    warnings.warn(f"integrator {stepper.name!r}: {reason}", RuntimeWarning, stacklevel=3)


def _verify_suggestion(err: SolverError, scene: Scene, cls, dt: float, t_end: float, t0: float, state, options):
    """Replace the solver's step-size hint by one that a re-run confirms (halving from it), within a budget."""
    import time

    hint = err.suggested_dt
    if hint is None or not hint < dt or err.time is None:
        return
    compiled = cls.compiled or cls.kernel is not None
    if compiled:
        try:
            compiled = cls(assemble(scene), dt, **options).engine_model() is not None if cls.compiled else True
        except ValueError:
            return
    if not compiled:
        # a NumPy-path re-run may take long: give the hint a margin instead, and say it is not verified
        err.suggested_dt = hint / 2
        err.verified_dt = False
        err.args = (err._compose() + " (not verified)",)
        return
    start = time.perf_counter()
    candidate = float(hint)
    for _ in range(6):
        if time.perf_counter() - start > VERIFY_BUDGET:
            break
        try:
            simulate(scene, t_end, candidate, cls, t0=t0, initial_state=state, save_every=max(1, int(1e9)),
                     _verify=False, **options)  # fmt: skip
        except SolverError:
            candidate /= 2
            continue
        except ValueError:
            return
        err.suggested_dt = candidate
        err.verified_dt = True
        err.args = (err._compose() + " (verified: a run at that dt completes)",)
        return
    err.verified_dt = False
