"""simulate(): assemble a scene, pick an integrator, step, and return a Trajectory."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mbvi.assembly import assemble
from mbvi.errors import SolverError
from mbvi.integrators.base import Integrator
from mbvi.plugins import get_integrator
from mbvi.scene import Scene
from mbvi.state import State
from mbvi.trajectory import Trajectory

__all__ = ["resolve_integrator", "simulate"]


def resolve_integrator(integrator: str | type[Integrator]) -> type[Integrator]:
    """A registered integrator name or an :class:`mbvi.Integrator` subclass → the class."""
    if isinstance(integrator, str):
        return get_integrator(integrator)
    if isinstance(integrator, type) and issubclass(integrator, Integrator):
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
    **options: Any,
) -> Trajectory:
    """Simulate a scene from ``t0`` to ``t_end`` with steps of ``dt``.

    Parameters
    ----------
    scene : mbvi.Scene
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
    if not isinstance(scene, Scene):
        raise ValueError(f"simulate expects an mbvi.Scene, got {type(scene).__name__}")
    for label, val in (("t_end", t_end), ("dt", dt), ("t0", t0)):
        if not isinstance(val, (int, float)) or not math.isfinite(val):
            raise ValueError(f"simulate: {label} must be a finite number, got {val!r}")
    if dt <= 0:
        raise ValueError(f"simulate: dt must be positive, got {dt!r}")
    if t_end < t0:
        raise ValueError(f"simulate: t_end ({t_end}) is before t0 ({t0})")
    if not isinstance(save_every, int) or save_every < 1:
        raise ValueError(f"simulate: save_every must be a positive integer, got {save_every!r}")
    cls = resolve_integrator(integrator)
    system = assemble(scene)
    state = system.initial_state() if initial_state is None else State(initial_state.q.copy(), initial_state.v.copy())
    if state.q.shape != (system.nq,) or state.v.shape != (system.nq,):
        raise ValueError(f"simulate: initial_state must have q and v of shape ({system.nq},)")
    ratio = (t_end - t0) / dt
    nsteps = round(ratio) if abs(ratio - round(ratio)) < 1e-9 * max(1.0, ratio) else math.ceil(ratio)
    stepper = cls(system, dt, **options)
    info = {
        "integrator": cls.name,
        "dt": float(dt),
        "order": cls.order,
        "options": {k: repr(v) for k, v in options.items()},
    }
    bar = None
    callback = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=nsteps, unit="step", desc=cls.name, leave=False)
        last = [0]

        def callback(k: int) -> None:
            if k - last[0] >= 100 or k == nsteps:
                bar.update(k - last[0])
                last[0] = k

    try:
        t, q, v = stepper.integrate(state, float(t0), nsteps, save_every, callback)
    except SolverError as err:
        pt, pq, pv = getattr(err, "partial", ([], [], []))
        if len(pt):
            with np.errstate(over="ignore", invalid="ignore"):  # the last states of a blow-up are huge
                err.trajectory = Trajectory.from_states(system, pt, pq, pv, scene=scene, info=info)
        raise
    finally:
        if bar is not None:
            bar.close()
    return Trajectory.from_states(system, t, q, v, scene=scene, info=info)
