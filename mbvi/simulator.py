"""Stepping from Python: :class:`Simulator`, MuJoCo's ``mj_step`` loop at compiled speed.

A control loop, a reinforcement-learning environment or an interactive session
reads the state, sets loads and steps, one step at a time::

    sim = mbvi.Simulator(scene, dt=1e-3)
    for _ in range(5000):
        theta, rate = sim.view.joint_angle("hinge"), sim.view.joint_rate("hinge")
        sim.set_load("motor", (0.0, kp * (target - theta) - kd * rate, 0.0))
        sim.step()
    traj = sim.trajectory()

Each ``step`` continues one compiled run (:class:`mbvi.integrators.compiled.Drive`: the run state, SHAKE's
warm starts and the substep counts carry over), so n calls of ``step()`` give exactly the states of one
:func:`mbvi.simulate` call of n steps, and a call costs about a microsecond on top of the step itself (the
compiled loop is called through its address, :mod:`mbvi.engine.fastcall`). Integrators the engine does not run
as a scheme (plugin steps, the NumPy baselines, ``csm``) step through their own ``run`` from the current state,
``n`` steps per call; for those that keep no state between steps the states are again those of one run
(``csm`` restarts ``solve_ivp`` at every call: its states agree to its tolerance).

Every state stepped is kept (2 nq floats a step) for :meth:`Simulator.trajectory`.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from mbvi import notices
from mbvi._validate import as_float, coordinate_key, is_number, positive_seconds
from mbvi.engine.fields import RI
from mbvi.engine.runner import saved_states
from mbvi.errors import SolverError
from mbvi.geometry import joint_of_kind
from mbvi.integrators.base import Integrator
from mbvi.integrators.compiled import CHUNK, Compiled, Drive
from mbvi.loads import load_value
from mbvi.runs import counted, run_info, time_resolution
from mbvi.scene import Scene
from mbvi.simulate import assembled, check_capabilities, given_state, resolve_integrator
from mbvi.state import State
from mbvi.system import System
from mbvi.trajectory import Trajectory

__all__ = ["JUDGE_EVERY", "CoordinateView", "LiveView", "Simulator"]

#: states a Simulator steps between two judgements of its energy balance (a blow-up found is rolled back). A
#: judgement of 1024 states costs ~40 µs for a rigid arm (1 % of its steps in a Python control loop: at 256 it was
#: 4 %), 0.4 ms for a 32-link chain (2 % of its ~20 ms of steps)
JUDGE_EVERY = 1024


def _own_loads(system: System) -> System:
    """``system``, or a shallow copy of it whose ExternalForce/ExternalTorque laws and engine model are its own
    when it has such loads: :meth:`Simulator.set_load` then changes this simulator's loads, not those of every
    other run of the System (an RL environment's copies share one assembled System)."""
    if not any(getattr(law, "values", None) is not None for law in system.force_laws):
        return system
    own = copy.copy(system)
    laws = []
    for law in system.laws:
        values = getattr(law, "values", None)
        if values is not None and hasattr(values, "hold"):
            law = copy.copy(law)
            law.values = values.copy()
        laws.append(law)
    own.laws = laws
    own.potential_laws = [law for law in laws if law.has_potential]
    own.force_laws = [law for law in laws if law.has_force]
    own._engine = False  # its own model, built from its own laws on first use
    return own


class _StateArrays:
    """``q`` and ``v`` of a view: read-only views of the simulator's current state (no copy)."""

    __slots__ = ()

    @property
    def q(self) -> np.ndarray:
        """Generalized coordinates, shape (nq,) (a read-only view of the current state)."""
        out = self._q.view()
        out.flags.writeable = False
        return out

    @property
    def v(self) -> np.ndarray:
        """Generalized velocities, shape (nq,) (a read-only view of the current state)."""
        out = self._v.view()
        out.flags.writeable = False
        return out


class LiveView(_StateArrays):
    """The current state of a :class:`Simulator`, read where it lives (no copy, always up to date).

    The accessors of :class:`mbvi.loads.StateView`, compiled (about a quarter of a microsecond a call): ``position``,
    ``velocity``, ``rotation``, ``angular_velocity``, ``point``, ``joint_angle``, ``joint_rate``,
    ``joint_displacement``, ``joint_displacement_rate``; ``q`` and ``v`` are read-only views of the state.
    """

    __slots__ = ("_arrays", "_bodies", "_frame", "_joint", "_point", "_position", "_q", "_rev", "_rot", "_slide",
                 "_v", "_w")  # fmt: skip

    def __init__(self, q: np.ndarray, v: np.ndarray, layout: Any) -> None:
        from mbvi.engine import stateview as SV
        from mbvi.engine.fastcall import direct, view_frame
        from mbvi.loadkernels import compiled_view

        view, ints, floats = compiled_view(None, layout, every_name=True)
        self._bodies = dict(view._mbvi_bodies)
        self._rev = {name: j for name, (kind, j) in view._mbvi_joints.items() if kind == "revolute"}
        self._slide = {name: j for name, (kind, j) in view._mbvi_joints.items() if kind == "prismatic"}
        self._q, self._v = q, v
        self._arrays = (q, v, ints, floats)  # the frame holds their addresses: kept alive here
        fr = self._frame = view_frame(q, v, ints, floats)
        # the accessors' compiled entries themselves: every call has these argument types
        self._position = direct(SV.live_position, fr, 0, False)
        self._rot, self._w = direct(SV.live_rotation, fr, 0), direct(SV.live_angular_velocity, fr, 0)
        self._point, self._joint = direct(SV.live_point, fr, 0, 0.0, 0.0, 0.0), direct(SV.live_joint, fr, 0, 0)

    def _body(self, name: str) -> int:
        slot = self._bodies.get(name)
        if slot is None:
            if name == "world":
                return -1
            raise ValueError(f"unknown body {name!r}; the bodies are {sorted(self._bodies)}")
        return slot

    def _unknown(self, name: str, kind: str) -> ValueError:
        """The error for a joint ``name`` that is not one of ``kind`` here (its own kind named when it has one)."""
        kinds = {**dict.fromkeys(self._rev, "revolute"), **dict.fromkeys(self._slide, "prismatic")}
        return ValueError(joint_of_kind(name, kind, kinds))

    def position(self, name: str) -> np.ndarray:
        """Position of a body's origin (centre of mass), m, shape (3,)."""
        return self._position(self._frame, self._body(name), False)

    def velocity(self, name: str) -> np.ndarray:
        """Velocity of a body's origin, m/s, shape (3,)."""
        return self._position(self._frame, self._body(name), True)

    def rotation(self, name: str) -> np.ndarray:
        """Body-to-world rotation in the user's body frame, shape (3, 3) (identity for particles)."""
        return self._rot(self._frame, self._body(name))

    def angular_velocity(self, name: str) -> np.ndarray:
        """Angular velocity in the world frame, rad/s, shape (3,) (zero for particles)."""
        return self._w(self._frame, self._body(name))

    def point(self, name: str, anchor: Any) -> np.ndarray:
        """World position of a body-frame point, m, shape (3,)."""
        try:
            a0, a1, a2 = (float(x) for x in np.asarray(anchor, dtype=float).reshape(3))
        except (TypeError, ValueError):
            raise ValueError(f"point({name!r}, {anchor!r}): the anchor must be 3 numbers (m, body frame)") from None
        return self._point(self._frame, self._body(name), a0, a1, a2)

    def joint_angle(self, name: str) -> float:
        """Angle of a revolute joint, rad: within π of its ``initial_angle`` (which it is at the start; a state does
        not count turns)."""
        j = self._rev.get(name)
        if j is None:
            raise self._unknown(name, "revolute")
        return self._joint(self._frame, j, 0)

    def joint_rate(self, name: str) -> float:
        """Rate of a revolute joint angle, rad/s."""
        j = self._rev.get(name)
        if j is None:
            raise self._unknown(name, "revolute")
        return self._joint(self._frame, j, 1)

    def joint_displacement(self, name: str) -> float:
        """Displacement of a prismatic joint along its axis, m."""
        j = self._slide.get(name)
        if j is None:
            raise self._unknown(name, "prismatic")
        return self._joint(self._frame, j, 2)

    def joint_displacement_rate(self, name: str) -> float:
        """Rate of a prismatic joint displacement, m/s."""
        j = self._slide.get(name)
        if j is None:
            raise self._unknown(name, "prismatic")
        return self._joint(self._frame, j, 3)

    def __repr__(self) -> str:
        return f"LiveView({len(self._bodies)} bodies, {len(self._rev) + len(self._slide)} joints)"


class CoordinateView(_StateArrays):
    """The current state of a :class:`Simulator` of a :class:`mbvi.LagrangianSystem`, where it lives.

    ``q``, ``v``: read-only views of its generalized coordinates and velocities; ``coordinate(name)`` and
    ``rate(name)`` by the coordinate's name; ``position(name)`` of a body of a system built by
    :meth:`mbvi.LagrangianSystem.from_scene`.
    """

    __slots__ = ("_index", "_q", "_system", "_v")

    def __init__(self, q: np.ndarray, v: np.ndarray, system: Any) -> None:
        self._q, self._v, self._system = q, v, system
        self._index = {name: i for i, name in enumerate(system.coordinate_names)}

    def _i(self, name: str) -> int:
        i = self._index.get(coordinate_key(name))  # (the Symbol the system was built from too)
        if i is None:
            raise ValueError(f"unknown coordinate {name!r}; the coordinates are {list(self._index)}")
        return i

    def coordinate(self, name: str) -> float:
        """The coordinate ``name`` (its own unit)."""
        return float(self._q[self._i(name)])

    def rate(self, name: str) -> float:
        """Its rate (unit per s)."""
        return float(self._v[self._i(name)])

    def position(self, name: str) -> np.ndarray:
        """Position of a body (systems built from a scene), m, shape (3,)."""
        return np.asarray(self._system.body_position(name, self._q), dtype=float)

    def __repr__(self) -> str:
        return f"CoordinateView({list(self._index)})"


class Simulator:
    """Step a scene from Python, one step or n at a time, reading the state and setting loads in between.

    Parameters
    ----------
    scene_or_system : mbvi.Scene, mbvi.LagrangianSystem or mbvi.System
        What to step (a scene is assembled here; a System is stepped as given, and its loads set; a
        LagrangianSystem runs its own compiled loop, :mod:`mbvi.engine.lagrange`).
    dt : float
        Step size, s.
    integrator : str or Integrator subclass, default: "verlet"
        Any registered integrator (:func:`mbvi.integrators`) or class.
    initial_state : mbvi.State, optional
        Where to start (default: the scene's initial state).
    t0 : float, default: 0
        Start time, s.
    **options
        Passed to the integrator, as in :func:`mbvi.simulate`.

    Attributes
    ----------
    system : mbvi.System
        The assembled system.
    dt : float
        The step, s (read only: a simulator steps with the dt it was made with).
    t0 : float
        The start time, s (read only).

    Raises
    ------
    ValueError
        Bad input: an unknown integrator or option, an initial state of the wrong shape or not finite.

    Examples
    --------
    >>> sim = mbvi.Simulator(scene, dt=1e-3)                   # doctest: +SKIP
    >>> sim.step(100); sim.t                                   # doctest: +SKIP
    0.1
    """

    def __init__(
        self,
        scene_or_system: Scene | System,
        dt: float,
        integrator: str | type[Integrator] = "verlet",
        initial_state: State | None = None,
        *,
        t0: float = 0.0,
        **options: Any,
    ) -> None:
        from mbvi.lagrangian import LagrangianSystem

        given, dt = dt, positive_seconds(dt)  # (a float32 0.01 as 0.01)
        if dt is None:
            raise ValueError(f"Simulator: dt must be a positive finite number of seconds, got {given!r}")
        if not (is_number(t0) and math.isfinite(float(t0))):  # (as simulate: NumPy numbers too, not a bool)
            raise ValueError(f"Simulator: t0 must be a finite number of seconds, got {t0!r}")
        t0 = as_float(t0)
        time_resolution(t0, t0, dt, "Simulator")
        self._dt, self._t0 = dt, t0
        self._drive = self._lagrangian = self._fast = None
        self._capacity = 0
        self._view: Any = None
        self._loads: dict = {}
        # each set_load: (the step it acts from, the load's number in _loads, its value): the reactions read the
        # states with the values that acted on them (mbvi.reactions.LoadSchedule); a tuple appended (0.2 µs; an
        # array.array of floats took 0.6)
        self._load_log: list[tuple] = []
        self._credits: dict[int, float] = {}  # the work credited to each set_load switch (_credit_switched_loads)
        self._loads_before: list = []  # (law, its values before the first set in the log)
        # the energy balance, judged every JUDGE_EVERY states (see _judge)
        self._judged, self._judge_at, self._warned = 1, JUDGE_EVERY, False
        self._blown: tuple[int, float] | None = None  # a baseline's first blow-up: (saved state, balance error J)
        self._wound = False  # a TorsionSpring wound past half a turn was named (once a simulator)
        self._balance0: tuple[float, float, float] | None = None  # (E₀, the energy scale of the start, U₀), J
        self._motion = 0.0  # the largest energy in motion judged so far (a start with no energy in play), J
        self._room = 0  # kept states the memory check has allowed
        self._work = np.zeros(1)  # a Lagrangian system's work W at each saved state judged, J
        if isinstance(scene_or_system, LagrangianSystem):
            self.scene, self.system = None, scene_or_system
            self._start_lagrangian(integrator, initial_state, options)
            return
        if not isinstance(scene_or_system, (Scene, System)):
            raise ValueError(
                "Simulator expects an mbvi.Scene, mbvi.LagrangianSystem or mbvi.System, got "
                f"{type(scene_or_system).__name__}"
            )
        system, self.scene = assembled(scene_or_system)
        self.system = system if self.scene is not None else _own_loads(system)
        cls = resolve_integrator(integrator)
        system = self.system
        check_capabilities(cls, system)
        state = system.initial_state() if initial_state is None else given_state(system, initial_state, "Simulator")
        self._start = State(state.q.copy(), state.v.copy())
        self.stepper = cls(system, float(dt), **options)
        self._info = run_info(cls, dt, options)
        # what its loads' callables read now: its compiled run froze them (its reactions must read the same)
        self._load_keys = system._load_reads()
        compiled = isinstance(self.stepper, Compiled)
        kernel = getattr(type(self.stepper), "kernel", None) is not None  # a compiled step plugin: the engine's model
        model = self.stepper.engine_model() if compiled else system.engine_model() if kernel else None
        self._loads = self._named_loads(model, q_model=kernel)
        if compiled and model is not None:
            self._drive = Drive(self.stepper, model, state, self.t0, None)
            q, v = self._drive.rs.q, self._drive.rs.v
        else:
            q, v = state.q.copy(), state.v.copy()
            self._Q, self._V, self._k = [q.copy()], [v.copy()], 0
            # the work of the loads at each state, as the NumPy step measures it (None: not measured)
            self._W: list[float] | None = [0.0]
        self._q, self._v = q, v

    def _start_lagrangian(self, integrator: Any, initial_state: State | None, options: dict) -> None:
        """A system in its own coordinates: its integrators' :class:`mbvi.lagrangian.integrators.Run`, open-ended."""
        from mbvi.lagrangian.integrators import Run
        from mbvi.lagrangian.run import resolve

        system = self.system
        cls = resolve(integrator)
        state = system.initial_state(initial_state, t=self.t0)
        self._start = State(state.q.copy(), state.v.copy())
        self.stepper = cls(system, self.dt, **options)
        self._info = run_info(cls, self.dt, options, system="lagrangian", coordinates=system.coordinate_names,
                              constraints=system.nc, angles=list(system.angles))  # fmt: skip
        q, v = state.q.copy(), state.v.copy()
        p = np.array(system.momentum(q, v, self.t0), dtype=float)
        size = 64
        out = (saved_states((size, system.nq)), saved_states((size, system.nq)), saved_states((size, system.nq)))
        out[0][0], out[1][0], out[2][0] = q, v, p
        self._lagrangian = Run(self.stepper, q, v, p, self.t0, None, 1, out)
        self._q, self._v = q, v

    def _check_room(self, n: int) -> None:
        """A ValueError when the states kept after n more steps would not fit in memory (a Simulator keeps all).
        Checked when they grow past an eighth more than last checked (not at every step: ~1 µs)."""
        from mbvi.engine.runner import check_memory

        count = self._saved() + n
        if count <= self._room:
            return
        rows = 3 if self._lagrangian is not None else 2  # q, v (and p)
        check_memory((count, rows * self.system.nq), f"Simulator.step({n}): the states a Simulator then keeps",
                     "step fewer, or go on in a new Simulator from sim.state")  # fmt: skip
        self._room = count + max(1024, count // 8)

    def reset(self, initial_state: State | None = None) -> None:
        """Start again at ``t0``: from ``initial_state`` (checked as the constructor checks it), else from the
        state the simulator started from; the states stepped so far are dropped.

        The next steps are those of a new ``Simulator`` made from that state (bit for bit on the engine's
        path: a fresh run state), with the loads as ``set_load`` left them. ``sim.view`` stays live.

        Raises
        ------
        ValueError
            A state of the wrong shape, not finite, or off the joints (named as the constructor names it).
        """
        system = self.system
        if initial_state is None:
            state = self._start
        elif self._lagrangian is not None:
            state = system.initial_state(initial_state, t=self.t0)
        else:
            state = given_state(system, initial_state, "Simulator.reset")
        q, v = state.q.copy(), state.v.copy()
        if self._drive is not None:
            self._drive.restart(q, v)  # its first saved state, and a new run's workspace and counters
        elif self._lagrangian is not None:
            run = self._lagrangian
            run.out[0][0], run.out[1][0] = q, v
            run.out[2][0] = np.array(system.momentum(q, v, self.t0), dtype=float)
        else:
            self._Q[0], self._V[0], self._W = q, v, [0.0]
        self._rewind(0)
        if self._load_log:  # a new run, from the loads as set_load left them
            self._loads_before, self._load_log = self._load_values(), []
        self._credits = {}
        self._balance0, self._warned, self._work, self._motion = None, False, np.zeros(1), 0.0
        self._wound = False

    # -- the energy balance ---------------------------------------------------------------------
    def _saved(self) -> int:
        """States saved so far, the initial one included."""
        if self._drive is not None:
            return self._drive.j
        return self._lagrangian.j if self._lagrangian is not None else len(self._Q)

    def _balance(self, a: int, b: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """E − E₀ − W of saved states a … b − 1 (W None: forces whose work is not measured, judge E − E₀), W, and
        the energies in motion max(|T|, |U − U₀|, |W|) of those states, J."""
        system = self.system
        with np.errstate(all="ignore"):
            if self._lagrangian is not None:
                from mbvi.lagrangian.run import work_done

                run = self._lagrangian
                t, Q, V = run.times(b)[a:], run.out[0][a:b], run.out[1][a:b]
                e = np.asarray(system.energy(Q, V, t), dtype=float).reshape(-1)
                u = np.asarray(system.potential(Q, t), dtype=float).reshape(-1)
                # from the state before, as the run's judgement integrates it (None: conservative, E is kept)
                step = work_done(system, run.times(b)[a - 1 :], run.out[0][a - 1 : b], run.out[1][a - 1 : b])
                work = np.zeros(len(e))
                if step is not None:
                    if len(self._work) < b:
                        grown = np.zeros(max(b, 2 * len(self._work)))
                        grown[: len(self._work)] = self._work
                        self._work = grown
                    work = self._work[a - 1] + step[1:]
                    self._work[a:b] = work
            else:
                if self._drive is not None:
                    Q, V, Wk = self._drive.Q[a:b], self._drive.V[a:b], self._drive.Wk[a:b]
                else:
                    Q, V = np.array(self._Q[a:b]), np.array(self._V[a:b])
                    Wk = None if self._W is None else np.array(self._W[a:b])
                u = np.asarray(system.potential(Q), dtype=float).reshape(-1)
                e = np.asarray(system.kinetic(V), dtype=float).reshape(-1) + u
                work = Wk if system.has_forces else np.zeros(len(e))
            motion = np.maximum(np.abs(e - u), np.abs(u - self._balance0[2]))
            if work is not None:
                motion = np.maximum(motion, np.abs(work))
        return e - self._balance0[0] - (work if work is not None else 0.0), work, motion

    def _judge(self, failure: SolverError | None = None) -> None:
        """The states saved since the last judgement, judged as :func:`mbvi.simulate` judges a run: an energy
        balance E − E₀ − W past :data:`mbvi.runs.BLOW_UP` times the energy in play at the start is a blow-up.
        For a variational or symplectic integrator the simulator goes back to the last state before it and a
        :class:`SolverError` says so (the states between two judgements, :data:`JUDGE_EVERY`, are not kept);
        for the others (a baseline's energy grows) a RuntimeWarning, once, while it steps on — and the error, back
        before that first blow-up, once a step fails after it, in the same call or a later one (as
        :func:`mbvi.simulate` makes it the error). ``failure``: a step failed (the error raised instead when no
        blow-up came before it)."""
        from mbvi.runs import BLOW_UP, energy_scales

        count = self._saved()
        start = self._judged
        if self._balance0 is None:
            system = self.system
            with np.errstate(all="ignore"):
                if self._lagrangian is not None:
                    q0, v0 = self._lagrangian.out[0][0], self._lagrangian.out[1][0]
                    e0, u0 = float(system.energy(q0, v0, self.t0)), float(system.potential(q0, self.t0))
                    t0, scale_of = e0 - u0, None
                else:
                    saved = (self._drive.Q, self._drive.V) if self._drive is not None else (self._Q, self._V)
                    q0, v0 = saved[0][0], saved[1][0]
                    t0, u0 = float(system.kinetic(v0)), float(system.potential(q0))
                    e0, scale_of = t0 + u0, system
            self._balance0 = (e0, float(energy_scales(np.array([t0]), np.array([u0]), scale_of)[0]), u0)
        self._judged, self._judge_at = count, count + JUDGE_EVERY
        if count <= start:
            if failure is not None and self._blown is not None:
                self._blown_error(failure)
            return
        drift, work, motion = self._balance(start, count)
        scale = self._balance0[1]
        if work is None:  # forces whose work is not measured: the energy's growth only
            drift = np.maximum(drift, 0.0)
        bound = BLOW_UP * scale
        if scale <= 1e-290:  # no energy in play at the start (a LagrangianSystem at rest where U = 0): judged
            # against the energy in motion up to each state, as simulate judges a LagrangianSystem's run by its
            # energy in motion (a jump of a thousandfold from a step to the next, or a non-finite state)
            bound = BLOW_UP * np.maximum.accumulate(np.maximum(motion, self._motion))
        else:  # a blow-up strays by about all the energy in motion too, as simulate judges it (a slider driven
            # by 1e6 N, 4e9 J of work, its balance off by 2.5e-6 of it, was rolled back as blown up)
            bound = np.maximum(bound, 0.5 * np.fmax.accumulate(np.maximum(motion, self._motion)))
            if self._lagrangian is not None:  # no m g L floor under the scale (a start near U = 0, T = 0 has almost
                # none in play): a blow-up gains energy (a loss, a damped or implicit run's, is none)
                drift = np.where(np.isfinite(drift), np.maximum(drift, 0.0), drift)
        self._motion = max(self._motion, float(np.max(motion)))
        bad = ~(np.abs(drift) <= bound)
        if not bad.any():
            if failure is not None and self._blown is not None:
                self._blown_error(failure)
            return
        kb = start + int(np.argmax(bad))  # the first saved state past the bound (a step, the run saving each)
        stepper = self.stepper
        worst = float(np.abs(drift[kb - start]))
        if not (stepper.variational or stepper.symplectic):
            if self._blown is None:  # the first blow-up: a step failing later, in this call or another, is its fault
                self._blown = (kb, worst)
            if failure is not None:
                self._blown_error(failure)
            if not self._warned:
                self._warned = True
                notices.warn(f"integrator {stepper.name!r}: the energy balance broke: E − E₀ − W reached "
                             f"{worst:.3g} J against {scale:.3g} J by t = {self.t0 + kb * self.dt:.6g} s (the run "
                             "blew up)", RuntimeWarning)  # fmt: skip
            return
        self._blown_error(failure, kb, worst)

    def _blown_error(self, failure: SolverError | None, kb: int | None = None, worst: float | None = None) -> None:
        """Back to the last state before the blow-up at saved state ``kb`` (of balance error ``worst``, J; by default
        the first blow-up a baseline was warned of) and raise it as a :class:`SolverError` (from ``failure``, the
        step that failed after it: a baseline's blow-up that ends in a failing step is the error, as in
        :func:`mbvi.simulate`, not the controller that overflowed on its 1e304 m, nor the states up to there)."""
        if kb is None:
            kb, worst = self._blown
        stepper, scale = self.stepper, self._balance0[1]
        self._rewind(kb - 1)
        t_bad = self.t0 + kb * self.dt
        if self._lagrangian is not None:
            culprit, hint = None, self.dt / 4
        else:
            from mbvi.diagnosis import instability

            known = instability(self.system, stepper.name, self.dt, t_bad, kb)
            culprit, hint = known.culprit, known.suggested_dt
        err = SolverError(
            f"the energy balance broke: E − E₀ − W reached {worst:.3g} J against an energy scale of {scale:.3g} J "
            f"(the run blew up); the simulator is back at t = {self.t:.6g} s, its last state before",
            time=t_bad, step=kb, culprit=culprit, suggested_dt=hint,
        )  # fmt: skip
        err.trajectory = self._states()
        if failure is not None:
            raise err from failure
        raise err

    def _rewind(self, g: int) -> None:
        """Back to saved state ``g`` (a step: the simulator saves each), the states after it dropped."""
        self._judged, self._judge_at = g + 1, g + 1 + JUDGE_EVERY
        # a value set after state g still holds: it acts from g on
        self._load_log[:] = [(min(k, g), *rest) for k, *rest in self._load_log]
        self._credits = {k: c for k, c in self._credits.items() if k + 1 < g}  # (those that read dropped states go)
        if self._blown is not None and self._blown[0] > g:
            self._blown = None  # (its states are dropped)
        if self._drive is not None:
            drive = self._drive
            drive.j, drive.k = g + 1, g
            drive.Wk[-1] = drive.Wk[g]  # the running total the next call starts from (see _slow_step)
            drive.restore()
            self._arm()
        elif self._lagrangian is not None:
            run = self._lagrangian
            run.k, run.j = g, g + 1
            for now, saved in zip((run.q, run.v, run.p), run.out, strict=True):
                now[:] = saved[g]
        else:
            del self._Q[g + 1 :], self._V[g + 1 :]
            if self._W is not None:
                del self._W[g + 1 :]
            self._k = g
            self._q[:], self._v[:] = self._Q[-1], self._V[-1]

    def _step_lagrangian(self, n: int) -> None:
        run = self._lagrangian
        need = run.k + n + 1
        if need > len(run.out[0]):
            size = max(need, 2 * len(run.out[0]))
            grown = tuple(saved_states((size, a.shape[1])) for a in run.out)
            for new, old in zip(grown, run.out, strict=True):
                new[: run.j] = old[: run.j]
            run.out = grown
        try:
            run.advance_to(run.k + n)
        except SolverError as err:
            self._judge(failure=err)
            err.trajectory = self._states()
            raise
        except KeyboardInterrupt as stopped:  # Ctrl-C between chunks: the simulator is at the chunk's end
            stopped.trajectory = self._states()
            raise

    # -- the loads --------------------------------------------------------------------------------
    def _named_loads(self, model, q_model: bool = True) -> dict[str, tuple[Any, int, str, list]]:
        """name → (law, index in it, attribute, where the compiled model keeps its value) for every
        ExternalForce and ExternalTorque (:func:`mbvi.engine.model.value_offsets`; none on the NumPy path)."""
        from mbvi.engine.model import value_offsets

        out = {}
        for law in self.system.force_laws:
            values = getattr(law, "values", None)
            if law.name in ("external_force", "external_torque") and values is not None:
                for i, e in enumerate(law.elements):
                    slots = value_offsets(model, e.owner, q_model) if model is not None else []
                    # written through a memoryview: a float stored without NumPy's scalar conversion
                    slots = [(memoryview(F), o, kernel) for F, o, kernel in slots]
                    # the law's own copy of the value (what the NumPy path reads), written as floats too
                    row = memoryview(values.values0.reshape(-1))[3 * i : 3 * i + 3]
                    callable_load = any(j == i for j, *_ in values.callables)
                    out[e.name] = (law, i, values.attr, slots, row, callable_load, len(out))
        return out

    def _load_values(self) -> list:
        """(law, a copy of its values) of every ExternalForce and ExternalTorque law."""
        laws = {id(found[0]): found[0] for found in self._loads.values()}.values()
        return [(law, law.values.copy()) for law in laws]

    def set_load(self, name: str, value: Any) -> None:
        """Hold the named ``ExternalForce``/``ExternalTorque`` at ``value`` until it is set again.

        Parameters
        ----------
        name : str
            The element's name.
        value : sequence of 3 float
            The world force (N, at the element's anchor) or torque (N m). A load given as a function is replaced
            by this value from now on.

        Raises
        ------
        ValueError
            An unknown name, or a value that is not 3 finite numbers; the simulator is unchanged.
        """
        found = self._loads.get(name)
        if found is None:
            if self._lagrangian is not None:
                raise ValueError(f"Simulator.set_load: a LagrangianSystem has no named loads ({name!r}); its forces "
                                 "are the expressions it was given")  # fmt: skip
            known = sorted(self._loads)
            raise ValueError(f"Simulator.set_load: unknown load {name!r}; the ExternalForce/ExternalTorque are {known}")
        law, i, attr, slots, row, callable_load, number = found
        try:  # (an array's tolist(): Python floats, where iterating it makes NumPy scalars, 8 µs a call)
            f0, f1, f2 = value.tolist() if type(value) is np.ndarray else value
        except (TypeError, ValueError):
            f0 = None
        if type(f0) is np.float64 and type(f1) is np.float64 and type(f2) is np.float64:  # a policy's NumPy floats
            f0, f1, f2 = float(f0), float(f1), float(f2)
        # 3 finite Python floats (x − x is 0 for finite x only); anything else is checked (and named) below
        if not (type(f0) is float and type(f1) is float and type(f2) is float and f0 - f0 == 0.0 and f1 - f1 == 0.0
                and f2 - f2 == 0.0):  # fmt: skip
            f0, f1, f2 = (float(x) for x in load_value(value, law.elements[i].owner, attr, "set_load"))
        for F, o, kernel in slots:
            if kernel:
                F[o + 4], F[o + 5], F[o + 6], F[o + 3] = f0, f1, f2, 1.0
            else:
                F[o], F[o + 1], F[o + 2] = f0, f1, f2
        # the law holds it too: the NumPy path reads it there (a plugin's step, or a step the engine hands back);
        # as mbvi.forcelaws.builtin._Prescribed.hold, through a memoryview (a NumPy call costs a µs a step)
        if not self._load_log:  # the laws' values before the first set: the reactions read the states before it
            self._loads_before = self._load_values()
        self._load_log.append((self.steps, number, f0, f1, f2))
        row[0], row[1], row[2] = f0, f1, f2
        if callable_load:
            law.values.held.add(i)

    # -- stepping ---------------------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Take ``n`` steps (one compiled call; more than :data:`mbvi.integrators.compiled.CHUNK`, in calls of about
        0.2 s each, between which Ctrl-C stops it: :mod:`mbvi.interrupts`).

        Raises
        ------
        ValueError
            When ``n`` is not a positive integer.
        SolverError
            A step failed: the simulator stays at the last good state (``t`` and ``state`` there), and
            ``err.trajectory`` holds every state stepped so far.
        """
        try:  # the fast path costs nothing more inside a try (zero-cost exceptions)
            fast = self._fast
            if fast is not None and type(n) is int and n > 0:  # the common case: one compiled call, nothing else
                frame, call, drive = fast
                k = drive.k
                if k + n < self._capacity and n <= CHUNK:  # (more: in chunks, Ctrl-C read between them)
                    if call(frame, k, k + n, drive.j) == 0:  # ST.DONE
                        drive.k = k + n
                        drive.j += n
                        if self._watched and any(cb.error is not None for cb in self._watched):
                            self._recorded_failure()  # a load raised in a step the call then took again
                        if drive.j >= self._judge_at:
                            self._judge()
                        return
                    info = drive.info
                    drive.k, drive.j = int(info[RI.STEP]), int(info[RI.SAVED])  # what it did before it stopped
                    self._fast = None
                else:
                    self._check_room(n)
                self._slow_step(k + n)
                if drive.j >= self._judge_at:
                    self._judge()
                return
            if type(n) is not int or n < 1:
                if isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1:
                    n = int(n)
                else:
                    raise ValueError(f"Simulator.step: n must be a positive integer, got {n!r}")
            self._check_room(n)
            if self._drive is not None:
                self._slow_step(self._drive.k + n)
            elif self._lagrangian is not None:
                self._step_lagrangian(n)
            else:
                self._step_numpy(n)
            if self._saved() >= self._judge_at:
                self._judge()
        except SolverError as err:  # a hint the Simulator cannot verify (simulate re-runs to verify its own)
            err.unverified("mbvi.simulate from this state verifies a step size by re-running")
            raise

    def _slow_step(self, kstop: int) -> None:
        """The steps up to ``kstop`` through :meth:`mbvi.integrators.compiled.Drive.advance_to`: a first call,
        growing the saved states, the NumPy step for what the engine hands back, a failure."""
        drive = self._drive
        drive.rs.work = float(drive.Wk[-1])  # the running total, as the fast path's calls left it
        try:
            drive.advance_to(kstop)
        except SolverError as err:
            self._fail(err)
        except KeyboardInterrupt as stopped:  # Ctrl-C between chunks: the simulator is at the chunk's end
            stopped.trajectory = self.trajectory()
            raise
        finally:
            self._arm()

    def _fail(self, err: SolverError) -> None:
        """Back to the last good state (the failing step's start), and raise ``err`` with every state before it."""
        drive = self._drive
        drive.restore()
        drive.k = drive.j - 1
        self._judge(failure=err)  # a blow-up before the failing step: back to before it, and said so
        err.trajectory = self._states()
        raise err

    def _recorded_failure(self) -> None:
        """The fast call went on past a load's error (recorded, not raised: a callback cannot raise through C):
        the run stops at the step it was met in (:func:`mbvi.diagnosis.recorded_failure`)."""
        from mbvi.diagnosis import recorded_failure

        drive = self._drive
        err = recorded_failure(drive.model.callbacks, drive.t0, drive.h, drive.t0 + drive.k * drive.h)
        if err is None:
            return
        drive.back_to(err.step)
        try:
            self._fail(err)
        finally:
            self._arm()

    def _arm(self) -> None:
        """The fast path's arrays, when the compiled loop can be called through its address (else None)."""
        drive = self._drive
        call = drive.call
        self._fast = None
        from mbvi.engine.callbacks import CompiledWatch

        #: the loads that record their errors (called as Python, or compiled loads' failure records), which a
        #: fast call that went on must not drop (a CompiledWatch records none: it probes after a failure)
        self._watched = [cb for cb in drive.model.callbacks if not isinstance(cb, CompiledWatch)]
        self._capacity = len(drive.Q) - 1
        drive.k, drive.j = int(drive.k), int(drive.j)  # Python ints: the types the fast path's entry takes
        if call.frame is not None and not drive.rs.fresh:
            from mbvi.engine.fastcall import call_steps, direct

            # its compiled entry: step() passes exactly these types (a Python int below the capacity)
            self._fast = (call.frame, direct(call_steps, call.frame, 0, 1, 0), drive)

    def _step_numpy(self, n: int) -> None:
        t = self.t0 + self._k * self.dt
        try:
            out = self.stepper.run(State(self._q.copy(), self._v.copy()), t, n)
        except SolverError as err:
            k0 = self._k
            err.step = None if err.step is None else err.step + k0  # the run's step, not this call's
            err.args = (err._compose(),)
            part = err.partial
            if part is not None and len(part.t) > 1:
                with np.errstate(over="ignore", invalid="ignore"):
                    self._append(part.q[1:], part.v[1:], part.work)
            self._judge(failure=err)
            err.trajectory = self._states()
            raise
        self._append(out.q[1:], out.v[1:], out.work)

    def _append(self, Q: np.ndarray, V: np.ndarray, work: np.ndarray | None = None) -> None:
        """States a NumPy run stepped from the current one, and its work from there (``work[0]`` = 0 at it)."""
        if self._W is not None:
            if work is None or len(work) != len(Q) + 1:
                self._W = None  # the step measures no work (or not for all): E − E₀ alone is judged
            else:
                self._W.extend(self._W[-1] + np.asarray(work[1:], dtype=float))
        self._Q.extend(Q)
        self._V.extend(V)
        self._k += len(Q)
        self._q[:], self._v[:] = self._Q[-1], self._V[-1]

    # -- reading ----------------------------------------------------------------------------------
    @property
    def steps(self) -> int:
        """Steps taken so far."""
        if self._drive is not None:
            return self._drive.k
        return self._lagrangian.k if self._lagrangian is not None else self._k

    @property
    def t(self) -> float:
        """The current time, s."""
        return self.t0 + self.steps * self.dt

    @property
    def state(self) -> State:
        """A copy of the current state."""
        return State(self._q.copy(), self._v.copy())

    @property
    def view(self) -> LiveView | CoordinateView:
        """The live view of the current state (the accessors of :class:`mbvi.loads.StateView`, compiled; for a
        :class:`mbvi.LagrangianSystem` its coordinates, velocities and bodies)."""
        if self._view is None:
            if self._lagrangian is not None:
                self._view = CoordinateView(self._q, self._v, self.system)
            else:
                self._view = LiveView(self._q, self._v, self.system.layout)
        return self._view

    def trajectory(self) -> Trajectory:
        """Every state stepped so far (the initial one included), as a :class:`mbvi.Trajectory`.

        Judged as :func:`mbvi.simulate` judges its result: the states not judged yet are (a blow-up is a
        :class:`SolverError`, the simulator back before it), and a balance that strayed past a tenth of the
        energy in motion warns (once a simulator).

        Raises
        ------
        SolverError
            The run blew up since the last judgement.
        """
        self._judge()
        traj = self._states()
        if not self._warned and len(traj.t) > 1:
            # what it warned, kept in this thread (warnings.catch_warnings changes the process's filters: a
            # simulator in another thread would lose its warnings meanwhile)
            with notices.kept() as given:
                if self._lagrangian is not None:
                    from mbvi.lagrangian.run import judge_energy

                    judge_energy(traj, self.system, type(self.stepper), self.dt)
                else:
                    from mbvi.simulate import _warn_energy_error

                    _warn_energy_error(traj, self.stepper, self.system)
            self._warned = any("energy" in message for message in given)
        if not self._wound and self._lagrangian is None and len(traj.t) > 1:
            from mbvi.simulate import _warn_wound_springs

            with notices.kept() as given:
                _warn_wound_springs(traj, self.system)  # as simulate names it
            self._wound = bool(given)
        return traj

    def _states(self) -> Trajectory:
        """The states stepped so far, unjudged."""
        if self._lagrangian is not None:
            from mbvi.lagrangian.run import trajectory

            run = self._lagrangian
            Q, V, P = (a[: run.j].copy() for a in run.out)
            return trajectory(self.system, run.times(run.j), Q, V, P, info=dict(self._info))
        if self._drive is not None:
            part = self._drive.partial()
            t, Q, V = part.t, part.q.copy(), part.v.copy()
        else:
            Q, V = np.array(self._Q), np.array(self._V)
            t = self.t0 + np.arange(len(Q)) * self.dt
        with np.errstate(over="ignore", invalid="ignore"):
            if self._drive is not None:
                work = self._drive.Wk[: len(t)].copy()
            else:
                work = None if self._W is None else np.array(self._W[: len(t)], dtype=float)
            info = dict(self._info)
            if self._drive is not None:  # how its steps went, as simulate's trajectory says it
                counted(info, self._drive.counters())
            traj = Trajectory.from_states(self.system, t, Q, V, scene=self.scene, info=info, work=work,
                                          load_keys=self._load_keys)  # fmt: skip
        if self._loads:  # the loads as set along the run (or as they are now, none set yet): a set after this
            from mbvi.reactions import LoadSchedule  # does not change the reactions of these states

            loads = [(found[0], found[1]) for found in self._loads.values()]
            sets = [(k, *loads[n], (f0, f1, f2)) for k, n, f0, f1, f2 in self._load_log]
            before = self._loads_before if self._load_log else self._load_values()
            traj._loads_along = LoadSchedule(before, sets, self.t0, self.dt)
            if self._load_log and traj.work is not None and isinstance(self.stepper, Compiled):
                _credit_switched_loads(self.system, self.stepper.method(), traj, traj._loads_along, self._credits)
        return traj

    @property
    def dt(self) -> float:
        """The step, s: fixed when the simulator is made (its compiled run steps with it)."""
        return self._dt

    @dt.setter
    def dt(self, value: Any) -> None:
        raise AttributeError(
            f"Simulator.dt is fixed when the simulator is made (its compiled run steps with dt = {self._dt:g} s); "
            "to go on with another step, make another from the state: mbvi.Simulator(scene, dt, integrator, "
            "initial_state=sim.state, t0=sim.t)"
        )

    @property
    def t0(self) -> float:
        """The start time, s (:meth:`reset` goes back to it)."""
        return self._t0

    @t0.setter
    def t0(self, value: Any) -> None:
        raise AttributeError("Simulator.t0 is fixed when the simulator is made; make another with t0=... instead")

    def __repr__(self) -> str:
        return f"Simulator({self.stepper.name!r}, dt={self.dt:g} s, t={self.t:g} s)"

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Not copied or pickled (it holds a compiled run in progress): the TypeError says what to do instead."""
        raise TypeError(
            "a Simulator cannot be copied or pickled (it holds a compiled run in progress); make another from the "
            "state: mbvi.Simulator(scene, dt, integrator, initial_state=sim.state, t0=sim.t), or go back to a "
            "start with sim.reset(state)"
        )


def _credit_switched_loads(system: System, scheme: np.ndarray, traj: Trajectory, schedule, known: dict) -> None:
    """Correct ``traj.work`` (in place) where :meth:`Simulator.set_load` switched a load under a method that kicks
    one end of its step (symplectic Euler A or B).

    Such a step measures its work by the trapezoid ½ (f₀ + f₁)·Δq, the end it does not kick evaluated for the
    measure alone, with the load of the call it is in. A load switched between two calls acts at their node
    with the new value (the next kick) under A, with the old one (the last kick) under B, and the trapezoid
    counts the other: (h/2)·ΔF·Δq a switch, one sign throughout under a policy that pushes the way it moves (a
    random-action loop's balance strayed by 1.8× the energy it ever held, and warned, of a right trajectory).
    Here each such node's force is the one its kick applied, as :func:`mbvi.simulate` counts a load held
    between nodes (a time function). A switch is credited once its kick was taken (A: the step out of it; B:
    the step into it, and the next one, whose start measured it); ``known`` keeps each switch's credit (the
    loads' own laws evaluated twice at its state) for the next call. A load that cannot be evaluated there (a
    table that ends) leaves it uncredited, as the step's own measure does."""
    scheme = np.asarray(scheme, dtype=float)
    if len(scheme) != 1 or int(scheme[0, 0]) != 0 or scheme[0, 2] * scheme[0, 3] != 0.0:
        return
    start_kicked = scheme[0, 2] != 0.0  # A: the kick at the step's start (its end measured with the old load)
    t, Q, V, W = traj.t, traj.q, traj.v, traj.work
    laws = schedule.laws()
    for k in schedule.switches():
        if not 1 <= k <= len(t) - 2:  # (step k taken: A's kick with the new value; B's start measured with it)
            continue
        credit = known.get(k)
        if credit is None:
            forces = []
            try:
                for at in (t[k - 1], t[k]):  # the values before the switch, and after it
                    with schedule.acting(float(at)), np.errstate(all="ignore"):
                        forces.append(sum(law.force(Q[k], V[k], float(t[k])) for law in laws))
            except Exception:  # (the measure only: the run stepped without it)
                continue
            change = np.asarray(forces[1] - forces[0], dtype=float)
            if start_kicked:  # step k−1's end: measured with the old value, kicked with the new
                credit = 0.5 * float(change @ (Q[k] - Q[k - 1]))
            else:  # step k's start: measured with the new value, kicked (by step k−1's end) with the old
                credit = -0.5 * float(change @ (Q[k + 1] - Q[k]))
            if not abs(credit) < math.inf:
                continue
            known[k] = credit
        W[k if start_kicked else k + 1 :] += credit
