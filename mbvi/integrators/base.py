"""The integrator contract.

An integrator plugin subclasses :class:`Integrator` and

1. sets the class attributes ``name`` (unique, registered) and ``order``
   (the global order of accuracy it promises; the test suite measures it),
   and ``symplectic`` / ``variational`` where true;
2. takes ``(system, dt, **options)`` in ``__init__`` and raises ``ValueError``
   for an option it does not know (call ``super().__init__``, which stores
   ``self.system`` and ``self.dt`` and checks ``dt``);
3. implements ``step(state, t) -> State``: one step of size ``dt`` from time
   ``t``. The returned positions must satisfy the constraints to the solver
   tolerance when the method claims to (all built-in variational methods do),
   and velocities should be tangent to them;
4. raises :class:`mbvi.SolverError` when a nonlinear solve fails (``simulate``
   adds the time, step and partial trajectory);
5. never keeps references to the Scene — it sees only the :class:`mbvi.System`.

It may override :meth:`Integrator.integrate` to run many steps at once (the
``csm`` baseline hands the whole interval to ``scipy.integrate.solve_ivp``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from mbvi.errors import SolverError
from mbvi.state import State
from mbvi.system import System

__all__ = ["Integrator", "Recorder"]


class Recorder:
    """Preallocated storage for saved states (used by :meth:`Integrator.integrate`)."""

    def __init__(self, nsave: int, nq: int) -> None:
        self.t = np.empty(nsave)
        self.q = np.empty((nsave, nq))
        self.v = np.empty((nsave, nq))
        self.n = 0

    def add(self, t: float, state: State) -> None:
        self.t[self.n] = t
        self.q[self.n] = state.q
        self.v[self.n] = state.v
        self.n += 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.t[: self.n], self.q[: self.n], self.v[: self.n]


class Integrator:
    """Abstract base class of time integrators (see the module docstring for the contract).

    Parameters
    ----------
    system : mbvi.System
        The assembled system.
    dt : float
        Step size, s (> 0).
    **options
        Method-specific options; unknown ones raise ``ValueError``.
    """

    name: ClassVar[str] = ""
    order: ClassVar[int] = 1
    symplectic: ClassVar[bool] = False
    variational: ClassVar[bool] = False
    #: options this class accepts, with defaults
    options: ClassVar[dict[str, Any]] = {}

    def __init__(self, system: System, dt: float, **options: Any) -> None:
        if not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
            raise ValueError(f"{self.name or type(self).__name__}: dt must be a positive number, got {dt!r}")
        unknown = set(options) - set(self.options)
        if unknown:
            raise ValueError(
                f"integrator {self.name!r} does not take option(s) {', '.join(sorted(unknown))}; "
                f"it takes: {', '.join(sorted(self.options)) or 'none'}"
            )
        self.system = system
        self.dt = float(dt)
        for key, default in self.options.items():
            setattr(self, key, options.get(key, default))

    def step(self, state: State, t: float) -> State:
        """Advance ``state`` from time ``t`` to ``t + dt``."""
        raise NotImplementedError

    def _instability(self, t: float, k: int) -> SolverError:
        """The error for a run that blew up, naming the stiffest element when there is one."""
        stiff = self.system.stiffest_element()
        if stiff is not None and 2.0 / stiff[1] < 1.5 * self.dt:
            name, omega = stiff
            return SolverError(
                f"integrator {self.name!r} went unstable: the stiffest element {name!r} has natural "
                f"frequencies up to ω ≈ {omega:.3g} rad/s and an explicit step needs dt < 2/ω = {2.0 / omega:.3g} s "
                "(or use integrator='midpoint', which is A-stable)",
                time=t,
                step=k,
                culprit=name,
                suggested_dt=1.8 / omega,
            )
        return SolverError(
            f"integrator {self.name!r} produced non-finite values (unstable; reduce dt)",
            time=t,
            step=k,
            suggested_dt=self.dt / 4,
        )

    def integrate(
        self, state: State, t0: float, nsteps: int, save_every: int = 1, callback: Callable[[int], None] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Take ``nsteps`` steps from ``(state, t0)``, saving every ``save_every``-th state.

        Returns
        -------
        t, q, v : ndarray
            Saved times (nsave,), positions and velocities (nsave, nq), the
            initial state included.

        Raises
        ------
        SolverError
            With ``time`` and ``step`` set and ``partial`` = (t, q, v) saved so far.
        """
        rec = Recorder(nsteps // save_every + 1 + (nsteps % save_every != 0), self.system.nq)
        rec.add(t0, state)
        step = self.step
        # a step that overflows is reported below as a SolverError (checked every step), not as warnings
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for k in range(nsteps):
                t = t0 + k * self.dt
                try:
                    state = step(state, t)
                except SolverError as exc:
                    err = exc.located(t, k)
                    err.partial = rec.arrays()
                    raise err from exc
                if not (np.isfinite(state.q).all() and np.isfinite(state.v).all()):
                    err = self._instability(t, k)
                    err.partial = rec.arrays()
                    raise err
                if (k + 1) % save_every == 0 or k + 1 == nsteps:
                    rec.add(t0 + (k + 1) * self.dt, state)
                if callback is not None:
                    callback(k + 1)
        return rec.arrays()
