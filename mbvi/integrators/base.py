"""The integrator contract.

An integrator plugin subclasses :class:`Integrator` and

1. sets the class attributes ``name`` (unique, registered) and ``order``
   (the global order of accuracy it promises; the test suite measures it),
   ``symplectic`` / ``variational`` where true, and ``handles``: what it
   integrates correctly — ``"constraints"`` (holonomic constraints, assumed
   by default) and ``"forces"`` (non-conservative forces: dampers, drag,
   loads — *not* assumed: :func:`mbvi.simulate` refuses a scene with such
   forces for an integrator that does not declare it);
2. takes ``(system, dt, **options)`` in ``__init__`` and raises ``ValueError``
   for an option it does not know (call ``super().__init__``, which stores
   ``self.system`` and ``self.dt`` and checks ``dt`` and the options);
3. implements ``step(state, t) -> State``: one step of size ``dt`` from time
   ``t``. The returned positions must satisfy the constraints to the solver
   tolerance when the method claims to (all built-in variational methods do),
   and velocities should be tangent to them. ``step`` is a template: the base
   class checks the state going in and coming out (finite, the right shape)
   around the implementation, so a direct call cannot skip those checks;
4. raises :class:`mbvi.SolverError` when a nonlinear solve fails (``simulate``
   adds the time, step and partial trajectory);
5. never keeps references to the Scene — it sees only the :class:`mbvi.System` —
   and never writes to the System: everything that changes during a run
   (tolerances, warm starts, factorizations) lives on the integrator instance.

It may override :meth:`Integrator.integrate` to run many steps at once (the
``csm`` baseline hands the whole interval to ``scipy.integrate.solve_ivp``).
:meth:`Integrator.run` is what :func:`mbvi.simulate` calls: it returns a
:class:`mbvi.engine.runner.RunResult` (the saved states, and the work of the
non-conservative forces where the run measures it). Integrators that are
schemes of the compiled engine (:class:`mbvi.integrators.compiled.Compiled`:
the RATTLE family, every :class:`mbvi.Composition`, the implicit pair) run
there as one compiled call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from mbvi._validate import is_number, positive_seconds
from mbvi.diagnosis import instability
from mbvi.engine.runner import RunResult, saved_states
from mbvi.errors import SolverError
from mbvi.integrators.stepkernel import run_kernel
from mbvi.state import State, real_array
from mbvi.system import System

__all__ = ["Integrator", "Recorder"]


def _own_step(cls: type, owner: type | None) -> Callable | None:
    """The ``_step`` a class of ``cls``'s MRO before ``owner`` writes itself (not one standing for a ``step`` a
    class writes), the most derived first; None when there is none."""
    for k in cls.__mro__:
        if k is owner:
            return None
        f = k.__dict__.get("_step")
        if f is not None and not getattr(f, "stands_for_step", False):
            return f
    return None


class Recorder:
    """Preallocated storage for saved states (used by :meth:`Integrator.integrate`)."""

    def __init__(self, nsave: int, nq: int) -> None:
        self.t = np.empty(nsave)
        self.q = saved_states((nsave, nq))
        self.v = saved_states((nsave, nq))
        self.n = 0

    def add(self, t: float, state: State) -> None:
        self.t[self.n] = t
        self.q[self.n] = state.q
        self.v[self.n] = state.v
        self.n += 1

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.t[: self.n], self.q[: self.n], self.v[: self.n]


def _work(saved: list[float], measured: bool) -> np.ndarray | None:
    return np.asarray(saved) if measured else None


#: the settings of a run (not an integrator's options), by the calls that take them
RUN_SETTINGS = {
    "t0": "simulate, simulate_batch and Simulator",
    "t_end": "simulate, simulate_batch and sweep",
    "save_every": "simulate, simulate_batch and sweep",
    "initial_state": "simulate (and Simulator, Simulator.reset)",
    "initial_states": "simulate_batch",
    "progress": "simulate and sweep",
    "timing": "sweep",
    "client": "sweep",
    "scheduler": "sweep",
}


def option_hints(unknown: list[str], options: dict) -> str:
    """What an unknown option may have been meant as: a setting of the run given to a call that does not take it
    (Simulator(save_every=10) was "verlet does not take save_every"), or a near spelling (saveevery)."""
    import difflib

    said = []
    for name in unknown:
        if name in RUN_SETTINGS:
            said.append(f"{name} is not an integrator option but a setting of the run, taken by {RUN_SETTINGS[name]}")
        elif close := difflib.get_close_matches(name, [*options, *RUN_SETTINGS], n=1):
            said.append(f"{name}: did you mean {close[0]}?")
    return "".join(f"; {s}" for s in said)


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
    #: True for a method that damps the energy by its nature (implicit Euler): a run of it warns only when it gains
    #: energy; any other warns when its energy balance strays (:func:`mbvi.runs.judged_by_balance`)
    dissipative: ClassVar[bool] = False
    #: what the method integrates correctly: "constraints", "forces"
    handles: ClassVar[frozenset[str]] = frozenset({"constraints"})
    #: options this class accepts, with defaults
    options: ClassVar[dict[str, Any]] = {}
    #: True when runs of this class are one compiled call (a scheme of the engine); a subclass that writes its
    #: own ``step`` runs its own step (False) unless it says otherwise
    compiled: ClassVar[bool] = False
    #: the compiled step, ``kernel(model, ws, q, v, t, h, params) -> int`` (numba-compilable; the contract of
    #: :mod:`mbvi.engine.api`): when set, a run is one compiled call that takes this step (``step`` stays the
    #: NumPy version: direct calls, and the systems the engine does not run)
    kernel: ClassVar[Callable | None] = None
    #: float rows of length nq the compiled step keeps from step to step (``ws[2]``)
    scratch_rows: ClassVar[int] = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        impl = cls.__dict__.get("step")
        if impl is not None and impl is not Integrator.step and not getattr(impl, "checked", False):
            # a subclass written against the documented contract implements step() itself: keep it as the
            # implementation (``_step``, marked as standing for it) and put the checking template in front of it,
            # a template of this class's own. The template runs the implementation of the most derived class
            # below it that writes ``_step`` itself, else this class's: a subclass's ``super().step(...)`` then
            # reaches this implementation (the one shared template called the subclass's own again, for ever),
            # and a subclass that overrides ``_step`` alone is what ``step`` runs, as ``simulate`` does

            def _step(self: Integrator, state: State, t: float, _impl: Callable = impl) -> State:
                return _impl(self, state, t)

            _step.stands_for_step = True  # type: ignore[attr-defined]
            if "_step" not in cls.__dict__:  # (one it writes itself stays: its step may call it)
                cls._step = _step

            def step(self: Integrator, state: State, t: float, _impl: Callable = impl, _owner: type = cls) -> State:
                return self._checked_step(state, t, _own_step(type(self), _owner) or _impl)

            step.__doc__, step.__name__, step.__qualname__ = Integrator.step.__doc__, "step", f"{cls.__qualname__}.step"
            step.checked = True  # type: ignore[attr-defined]
            cls.step = step
        if impl is not None or "_step" in cls.__dict__:  # its own algorithm: not the engine's scheme it inherits,
            if "compiled" not in cls.__dict__:
                cls.compiled = False
            if "kernel" not in cls.__dict__:  # nor the compiled step of the class it extends (unless it says so)
                cls.kernel = None

    def __init__(self, system: System, dt: float, **options: Any) -> None:
        label = self.name or type(self).__name__
        given, dt = dt, positive_seconds(dt)  # (NumPy numbers too, as simulate takes them)
        if dt is None:
            raise ValueError(f"{label}: dt must be a positive number, got {given!r}")
        unknown = set(options) - set(self.options)
        if unknown:
            raise ValueError(
                f"integrator {self.name!r} does not take option(s) {', '.join(sorted(unknown))}; "
                f"it takes: {', '.join(sorted(self.options)) or 'none'}" + option_hints(sorted(unknown), self.options)
            )
        self.system = system
        self.dt = float(dt)
        #: the options as given (a new instance with them starts a run afresh)
        self.given_options = dict(options)
        for key, default in self.options.items():
            setattr(self, key, options.get(key, default))

    @staticmethod
    def check_option(name: str, value: Any, *, integer: bool = False, minimum: float = 0.0) -> Any:
        """Return ``value`` if it is a finite number > ``minimum`` (an int when ``integer``), else ValueError."""
        ok = is_number(value) and math.isfinite(value)  # (NumPy scalars too: np.int64(40) was "not an integer")
        if integer:
            ok = ok and float(value).is_integer()
        if not ok or not value > minimum:
            kind = "an integer" if integer else "a number"
            raise ValueError(f"option {name!r} must be {kind} > {minimum:g}, got {value!r}")
        return int(value) if integer else float(value)

    @staticmethod
    def check_flag(name: str, value: Any) -> bool:
        """Return ``value`` as a bool if it is True or False (a NumPy bool too), else ValueError naming the option
        (``"no"`` or nan, taken as true, and None, as false, were not what was meant)."""
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"option {name!r} must be True or False, got {value!r}")
        return bool(value)

    def step(self, state: State, t: float) -> State:
        """Advance ``state`` from time ``t`` to ``t + dt``.

        Checks that ``state`` is finite and shaped (nq,), calls the method's
        implementation, and checks the result: a non-finite result raises
        :class:`mbvi.SolverError` (the step is unstable), never returns.
        """
        return self._checked_step(state, t, _own_step(type(self), None) or Integrator._step)

    def _checked_step(self, state: State, t: float, impl: Callable[[Any, State, float], State]) -> State:
        """:meth:`step`'s checks around ``impl(self, state, t)``: the state going in and the one coming out."""
        nq = self.system.nq
        q, v = state.q, state.v
        if np.shape(q) != (nq,) or np.shape(v) != (nq,):
            raise ValueError(f"{self.name}: state must have q and v of shape ({nq},)")
        if type(q) is not np.ndarray or type(v) is not np.ndarray or q.dtype != np.float64 or v.dtype != np.float64:
            # lists, float32 (whose Newton solves cannot reach the tolerance: "did not converge, try a smaller dt"
            # at every dt), ints: the step runs in float64 and returns float64
            state = State(real_array(q, f"{self.name}: the state's q"), real_array(v, f"{self.name}: the state's v"))
            q, v = state.q, state.v
        if not (np.isfinite(q).all() and np.isfinite(v).all()):
            raise ValueError(f"{self.name}: the state going into the step is not finite")
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = impl(self, state, t)
        self._check_returned(out)
        if not (np.isfinite(out.q).all() and np.isfinite(out.v).all()):
            raise instability(self.system, self.name, self.dt, t, 0)
        return out

    def _check_returned(self, out: Any) -> None:
        """ValueError naming the integrator when its step returned something other than an mbvi.State of the
        system's shape (a plugin's step: the run would fail further on, naming nothing)."""
        if not isinstance(out, State):
            raise ValueError(
                f"integrator {self.name!r}: step() returned {type(out).__name__}, not an mbvi.State "
                "(return mbvi.State(q, v))"
            )
        nq = self.system.nq
        if np.shape(out.q) != (nq,) or np.shape(out.v) != (nq,):
            raise ValueError(
                f"integrator {self.name!r}: step() returned q of shape {np.shape(out.q)} and v of shape "
                f"{np.shape(out.v)}; both must be ({nq},), the system's coordinates"
            )

    def _step(self, state: State, t: float) -> State:
        """The method's step (built-ins implement this; plugins may implement ``step`` instead)."""
        raise NotImplementedError(f"{type(self).__name__} implements neither step() nor _step()")

    def run(
        self, state: State, t0: float, nsteps: int, save_every: int = 1, callback: Callable[[int], None] | None = None
    ) -> RunResult:
        """Take ``nsteps`` steps from ``(state, t0)``, saving every ``save_every``-th state (and the last).

        What :func:`mbvi.simulate` calls. With a compiled :attr:`kernel` the run is one compiled call
        (:func:`mbvi.integrators.stepkernel.run_kernel`, whose loop measures the work of the non-conservative
        forces by the trapezoidal rule); otherwise it runs the NumPy step, measuring that work step by step
        (:meth:`_step_work`) when the system has such forces, so that the run's energy balance can be judged.

        Returns
        -------
        RunResult
            Saved times (nsave,), positions and velocities (nsave, nq), the initial state included.

        Raises
        ------
        SolverError
            With ``time`` and ``step`` set and ``partial``, a RunResult of the states saved so far.
        """
        if type(self).kernel is not None:
            out = run_kernel(self, state, t0, nsteps, save_every, callback)
            if out is not None:
                return out
        if type(self).integrate is not Integrator.integrate:  # a method of its own (csm): its states only
            t, q, v = self.integrate(state, t0, nsteps, save_every, callback)
            return RunResult(t, q, v)
        return self._run_numpy(state, t0, nsteps, save_every, callback)

    def _step_work(self, q0: np.ndarray, v0: np.ndarray, new: State, t: float, f0: np.ndarray | None = None
                  ) -> tuple[float, np.ndarray]:  # fmt: skip
        """Work of the non-conservative forces over a step from (q₀, v₀) at t to ``new``, J, by the trapezoidal
        rule ½ (F(q₀, v₀, t) + F(q₁, v₁, t + h))·(q₁ − q₀); and F at the step's end, which the next step's start
        reuses (``f0``: F at its start, when known)."""
        system = self.system
        start = system.force(q0, v0, t) if f0 is None else f0
        end = system.force(new.q, new.v, t + self.dt)
        return 0.5 * float((start + end) @ (new.q - q0)), end

    def kernel_params(self) -> np.ndarray:
        """The parameters the compiled :attr:`kernel` receives as ``params`` (float64; default: none)."""
        return np.zeros(0)

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
            With ``time`` and ``step`` set and ``partial``, a RunResult of the states saved so far.
        """
        out = self._run_numpy(state, t0, nsteps, save_every, callback, measure=False)
        return out.t, out.q, out.v

    def _run_numpy(self, state: State, t0: float, nsteps: int, save_every: int = 1,
                   callback: Callable[[int], None] | None = None, measure: bool = True) -> RunResult:  # fmt: skip
        """The NumPy step ``nsteps`` times (:meth:`integrate`), with the work of the non-conservative forces when
        ``measure`` and the system has them."""
        rec = Recorder(nsteps // save_every + 1 + (nsteps % save_every != 0), self.system.nq)
        rec.add(t0, state)
        measure = measure and self.system.has_forces
        work, saved_work, f_end = 0.0, [0.0], None
        step = self._step
        # a step that overflows is reported below as a SolverError (checked every step), not as warnings
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for k in range(nsteps):
                t = t0 + k * self.dt
                before = State(state.q.copy(), state.v.copy())  # (a step may update in place)
                try:
                    state = step(state, t)
                except SolverError as exc:
                    err = exc.located(t, k)
                    err.partial = RunResult(*rec.arrays(), _work(saved_work, measure)).ending_at(
                        t, before.q, before.v, work)  # the failing step's start, off the save grid  # fmt: skip
                    raise err from exc
                self._check_returned(state)
                if not (np.isfinite(state.q).all() and np.isfinite(state.v).all()):
                    err = instability(self.system, self.name, self.dt, t, k)
                    err.partial = RunResult(*rec.arrays(), _work(saved_work, measure)).ending_at(
                        t, before.q, before.v, work)  # fmt: skip
                    raise err
                if measure:
                    try:
                        dw, f_end = self._step_work(before.q, before.v, state, t, f_end)
                    except Exception:  # the end's load failed where only the work reads it: the start's alone
                        try:
                            start = f_end if f_end is not None else self.system.force(before.q, before.v, t)
                            dw, f_end = float(start @ (state.q - before.q)), None
                        except Exception:  # a measurement, not the run: the work stays unmeasured
                            measure = False
                            dw = 0.0
                    work += dw
                if (k + 1) % save_every == 0 or k + 1 == nsteps:
                    rec.add(t0 + (k + 1) * self.dt, state)
                    saved_work.append(work)
                if callback is not None:
                    callback(k + 1)
        return RunResult(*rec.arrays(), _work(saved_work, measure))
