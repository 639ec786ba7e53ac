"""Fuzz (issue 11): random valid and invalid scenes and calls, fixed seeds, a size CI can afford.

Every outcome must be a finite result, a ``ValueError``/``TypeError`` naming the
element or option at fault, or a :class:`mbvi.SolverError` saying when and why —
never another exception type, a NaN/inf in the trajectory, or a hang (small
``t_end``, few steps).
"""

from __future__ import annotations

import math
import re
import signal
import threading
import time
import warnings

import numpy as np
import pytest

import mbvi

INTEGRATORS = ["verlet", "midpoint", "symplectic_euler_a", "symplectic_euler_b", "implicit_euler", "explicit_euler"]
GARBAGE = ["x", None, True, -1.0, 0.0, math.nan, math.inf, 1e308, (1, 2), "1.0", [1, 2, 3]]


def _num(rng: np.random.Generator, lo: float, hi: float) -> object:
    """A valid number most of the time, garbage sometimes."""
    if rng.random() < 0.08:
        return GARBAGE[rng.integers(len(GARBAGE))]
    return float(rng.uniform(lo, hi))


def _vec(rng: np.random.Generator, scale: float) -> object:
    if rng.random() < 0.05:
        return GARBAGE[rng.integers(len(GARBAGE))]
    return tuple(float(x) for x in rng.normal(0.0, scale, 3))


def _build(rng: np.random.Generator, names: list[str]) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    n = int(rng.integers(1, 5))
    for i in range(n):
        name = f"b{i}"
        if rng.random() < 0.6:
            scene.add(mbvi.Particle(name, mass=_num(rng, 0.1, 3.0), position=_vec(rng, 1.0), velocity=_vec(rng, 0.5)))
        else:
            shape = mbvi.Box((0.2, 0.1, 0.1)) if rng.random() < 0.5 else mbvi.Sphere(_num(rng, 0.05, 0.3))
            scene.add(
                mbvi.RigidBody(
                    name,
                    shape=shape,
                    density=_num(rng, 100.0, 2000.0),
                    position=_vec(rng, 1.0),
                    angular_velocity=_vec(rng, 1.0),
                )
            )
        names.append(name)
    pool = ["world", *names]
    for _ in range(int(rng.integers(0, n + 1))):
        a, b = (pool[int(i)] for i in rng.integers(len(pool), size=2))
        kind = rng.integers(4)
        if kind == 0:
            scene.add(mbvi.Rod(a, b))
        elif kind == 1:
            scene.add(mbvi.Spring(a, b, stiffness=_num(rng, 1.0, 100.0)))
        elif kind == 2:
            scene.add(mbvi.Damper(a, b, damping=_num(rng, 0.0, 2.0)))
        else:
            scene.add(mbvi.Spherical(a, b))
    if rng.random() < 0.5:
        scene.add(mbvi.Drag(pool[int(rng.integers(len(pool)))], coefficient=_num(rng, 0.0, 1.0)))
    if rng.random() < 0.3:
        scene.add(mbvi.ExternalForce(pool[int(rng.integers(len(pool)))], force=_vec(rng, 1.0)))
    return scene


def _call(rng: np.random.Generator, scene: mbvi.Scene) -> object:
    what = rng.random()
    if what < 0.15:
        return mbvi.equilibrium(scene)
    integrator = INTEGRATORS[int(rng.integers(len(INTEGRATORS)))] if rng.random() < 0.93 else "nope"
    options: dict[str, object] = {}
    if rng.random() < 0.2:
        options["tol"] = _num(rng, 1e-12, 1e-8)
    if rng.random() < 0.1:
        options["bogus"] = 1
    dt = _num(rng, 1e-3, 2e-2) if rng.random() < 0.95 else float(rng.choice([1e-300, -1.0, math.nan]))
    t_end = 0.05  # a few steps: a hang would show as a timeout
    return mbvi.simulate(scene, t_end=t_end, dt=dt, integrator=integrator, **options)


def _names_something(message: str, names: list[str]) -> bool:
    """A ValueError/TypeError message names an element, a body, an option or a parameter."""
    keys = ["world", "dt", "t_end", "tol", "option", "integrator", "mass", "radius", "density", "position"]
    keys += ["velocity", "stiffness", "damping", "coefficient", "force", "inertia", "Rod", "Spring", "Damper"]
    keys += ["Spherical", "Drag", "Particle", "RigidBody", "Sphere", "Scene", "body", "joint", "equilibrium"]
    return any(k in message for k in keys + names)


def _check_outcome(seed: int) -> str:
    rng = np.random.default_rng(seed)
    names: list[str] = []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            scene = _build(rng, names)
            result = _call(rng, scene)
    except (ValueError, TypeError) as exc:
        assert _names_something(str(exc), names), f"seed {seed}: {type(exc).__name__} names nothing: {exc}"
        return "error"
    except mbvi.SolverError as exc:
        text = str(exc)
        assert "t =" in text or "step" in text or "iterations" in text, f"seed {seed}: SolverError without when: {exc}"
        return "solver"
    if isinstance(result, mbvi.Trajectory):
        for key in ("q", "v", "energy", "constraint_error"):
            arr = getattr(result, key)
            assert np.all(np.isfinite(arr)), f"seed {seed}: non-finite {key} in a returned trajectory"
    else:
        assert np.all(np.isfinite(result.q)), f"seed {seed}: non-finite equilibrium"
    return "ok"


#: seeds whose failures lie inside the integrators (owned by the engine rework), found by this fuzz
KNOWN_ENGINE_FAILURES: dict[int, str] = {}


@pytest.mark.parametrize("block", range(4))
def test_fuzz_scenes_and_calls(block: int) -> None:
    outcomes: dict[str, int] = {}
    for seed in range(block * 60, (block + 1) * 60):
        if seed in KNOWN_ENGINE_FAILURES:
            continue
        kind = _check_outcome(seed)
        outcomes[kind] = outcomes.get(kind, 0) + 1
    print(block, outcomes)
    assert outcomes.get("ok", 0) > 0 and outcomes.get("error", 0) > 0  # the fuzz exercises both sides


# -- random scenes and random API calls, each answered within a wall-clock bound ------------------------------
#
# A scene is "clean" (valid structure; masses, lengths and stiffnesses drawn log-uniformly, some of them from
# 1e-12 … 1e18) or, for about a third of the seeds, "dirty" (NaN, negative, zero, strings, bools, None and
# containers where numbers belong, unknown body and joint names, self-joints, anchors the bodies are not at,
# loads that return strings). The call is simulate (random integrator, dt, options), equilibrium (random
# options) or modes. Every call must answer within CALL_BOUND seconds with a finite result (a trajectory
# that blew up must come with a warning naming the energy), a ValueError naming the element or option at
# fault (once), or a SolverError saying when (simulate: the time and step) or after how many iterations
# (statics) and why.

CALL_BOUND = 8.0  # s, wall clock, per call (a typical call takes 10–100 ms; the slowest seen ~4 s, csm)
RANDOM_SEEDS = range(300)
RANDOM_INTEGRATORS = [*INTEGRATORS, "csm", "yoshida4", "leapfrog"]
BAD_NUMBERS = ["x", "1.0", None, True, -1.0, 0.0, math.nan, math.inf, -math.inf, 1e308, (1, 2), [1, 2, 3], {"a": 1}]
BAD_RETURNS = ["abc", ("1", "2", "3"), (1.0, 2.0), None, (math.nan, 0.0, 0.0), (True, 0.0, 0.0)]

#: seeds of the random test whose call does not answer in time inside the compiled engine or an integrator
#: (owned by the engine rework, reported there with a minimal reproducer), each skipped with its report. None
#: of RANDOM_SEEDS needs it; the generator finds two such reports beyond them, both correct SolverErrors that
#: take too long to arrive:
#: * "the verification of a suggested dt takes 10–15 s" (mbvi/simulate.py _verify_suggestion, VERIFY_BUDGET
#:   = 20 s, checked between re-runs): seeds 2221 and 3043 (symplectic_euler_b: 13.8 and 14.4 s, 0.5 and
#:   0.7 s with _verify=False), and a 5.2e-4 kg body (J = 3.8e-9 kg m²) on a Rod with a 0.86 N s/m Drag at
#:   an offset anchor, yoshida4 at dt = 5.5e-3 s (12.9 s; 0.0 s with _verify=False);
#: * "csm bounds right-hand-side evaluations, not time" (mbvi/integrators/csm.py): a 2.7e-12 kg body
#:   (J ≈ 1e-19 kg m²) on a Prismatic, a particle on a ball joint to it and a (t, state) torque of 1 N m:
#:   RK45 spends its 30000-evaluation cap on the NumPy path (11–28 s) before the SolverError.
KNOWN_ENGINE_HANGS: dict[int, str] = {}

#: words by which an error names an option, an argument or an element type
NAMING_WORDS = [
    "dt", "t_end", "tol", "integrator", "option", "initial_state", "count", "maxiter", "alpha", "method", "t must",
    "gravity", "world", "body", "joint", "mass", "inertia", "density", "radius", "size", "position", "velocity",
    "stiffness", "damping", "coefficient", "force", "torque", "anchor", "axis", "segments", "area",
    "Scene", "Particle", "RigidBody", "Sphere", "Box", "Rod", "Spherical", "Revolute", "Prismatic", "Fixed",
    "Spring", "Damper", "Drag", "ExternalForce", "ExternalTorque", "JointDamping", "TorsionSpring", "Beam",
]  # fmt: skip
DOUBLED_PREFIX = re.compile(r"(\b[A-Z]\w* '[^']*'): \1:")


class _CallTimeout(BaseException):
    """Raised by the SIGALRM handler when a call overruns :data:`CALL_BOUND` (a BaseException, as a
    KeyboardInterrupt is: the library's ``except Exception`` fallbacks must not take it for a failure of theirs)."""


class _CompileMeter:
    """Wall time numba spends compiling (or loading from its cache): while it holds its compiler lock (its
    ``numba:compiler_lock`` event, which a C callback's compilation raises too; ``numba:compile`` misses those).

    A call's first use of a compiled function in a process (a plugin's step, a load's wrapper) compiles it:
    seconds that measure numba and the machine, not whether the call hangs. The bound excludes them; an alarm
    that falls inside a compilation waits for its end.
    """

    def __init__(self) -> None:
        self.depth = 0
        self.total = 0.0
        self._since = 0.0

    def start(self) -> None:
        if self.depth == 0:
            self._since = time.perf_counter()
        self.depth += 1

    def end(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.total += time.perf_counter() - self._since


def _compile_meter() -> _CompileMeter:
    from numba.core import event

    meter = _CompileMeter()

    class _Listener(event.Listener):
        def on_start(self, ev) -> None:
            meter.start()

        def on_end(self, ev) -> None:
            meter.end()

    event.register("numba:compiler_lock", _Listener())
    return meter


COMPILING = _compile_meter()


def _log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))


class _RandomCase:
    """One seed: a random scene (built step by step) and one random call on it, described as it goes."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.dirty = self.rng.random() < 0.3
        self.names: list[str] = []
        self.steps: list[str] = []

    # -- values ----------------------------------------------------------------------------------------------
    def number(self, lo: float, hi: float, p_bad: float = 0.05, extreme: tuple[float, float] | None = (1e-12, 1e18)):
        rng = self.rng
        u = rng.random()
        if self.dirty and u < p_bad:
            return BAD_NUMBERS[int(rng.integers(len(BAD_NUMBERS)))]
        if extreme is not None and u > 0.85:
            return _log_uniform(rng, *extreme)
        return _log_uniform(rng, lo, hi)

    def vector(self, scale: float, p_bad: float = 0.03):
        if self.dirty and self.rng.random() < p_bad:
            return BAD_NUMBERS[int(self.rng.integers(len(BAD_NUMBERS)))]
        return tuple(float(x) for x in self.rng.normal(0.0, scale, 3))

    def load(self):
        rng = self.rng
        u = rng.random()
        if u < 0.5:
            return self.vector(1.0)
        value = BAD_RETURNS[int(rng.integers(len(BAD_RETURNS)))] if self.dirty and rng.random() < 0.5 else (0, 0, 1.0)
        if u < 0.75:
            return lambda t: value
        if u < 0.95:
            return lambda t, state: value
        return (lambda t: 1 / 0) if self.dirty else (lambda t: (math.sin(t), 0.0, 0.0))

    # -- the scene -------------------------------------------------------------------------------------------
    def scene(self) -> mbvi.Scene:
        rng = self.rng
        length = 1.0 if rng.random() < 0.7 else _log_uniform(rng, 1e-4, 1e6)
        gravity = BAD_NUMBERS[int(rng.integers(len(BAD_NUMBERS)))] if self.dirty and rng.random() < 0.1 else None
        scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81) if gravity is None else gravity)
        n = int(rng.integers(1, 5))
        rigid: list[str] = []
        for i in range(n):
            name, position = f"b{i}", self.vector(length)
            kind = rng.random()
            if kind < 0.55:
                mass = self.number(0.1, 10.0)
                scene.add(mbvi.Particle(name, mass=mass, position=position, velocity=self.vector(0.5 * length)))
            else:
                spin = self.vector(1.0)
                if kind < 0.75:
                    box = tuple(self.number(0.05 * length, 0.5 * length, 0.02, None) for _ in range(3))
                    body = mbvi.RigidBody(
                        name, shape=mbvi.Box(box), density=self.number(100.0, 3000.0), position=position,
                        velocity=self.vector(0.5 * length), angular_velocity=spin,
                    )  # fmt: skip
                elif kind < 0.85:
                    sphere = mbvi.Sphere(self.number(0.05 * length, 0.5 * length, 0.02, None))
                    body = mbvi.RigidBody(name, shape=sphere, density=self.number(100.0, 3000.0), position=position)
                else:
                    mass = self.number(0.1, 10.0)
                    moments = rng.uniform(0.5, 1.5, 3) * 0.05 * length**2
                    inertia = self.vector(1.0, 0.5) if self.dirty else tuple(moments * mass)
                    body = mbvi.RigidBody(name, mass=mass, inertia=inertia, position=position, angular_velocity=spin)
                scene.add(body)
                rigid.append(name)
            self.names.append(name)
        pool = ["world", *self.names]

        def pick() -> str:
            return "nobody" if self.dirty and rng.random() < 0.05 else pool[int(rng.integers(len(pool)))]

        joints: list[str] = []
        hinges: list[str] = []
        # most clean scenes hang every body from the world or an earlier body (a tree, often with an extra joint
        # closing a loop), so that statics has equilibria to find; the others may have free bodies
        tree = not self.dirty and rng.random() < 0.7
        for k in range(n + int(rng.integers(0, 2)) if tree else int(rng.integers(0, n + 2))):
            if self.dirty:
                a, b = pick(), pick()
            elif tree and k < n:
                b, a = self.names[k], pool[int(rng.integers(k + 1))]
            else:
                b = self.names[int(rng.integers(n))]
                others = [x for x in pool if x != b]
                a = others[int(rng.integers(len(others)))]
            kind = int(rng.integers(6))
            if not self.dirty and not (b in rigid and (a == "world" or a in rigid)):
                kind = [0, 1, 5][int(rng.integers(3))] if a == "world" or a in rigid else [0, 5][int(rng.integers(2))]
            anchor = self.vector(length) if self.dirty and rng.random() < 0.3 else None  # None: at b's origin
            if kind == 0:
                joint = mbvi.Rod(a, b)
            elif kind == 1:
                joint = mbvi.Spherical(a, b, anchor=anchor)
            elif kind == 2:
                joint = mbvi.Revolute(a, b, anchor=anchor, axis=self.vector(1.0))
                hinges.append(joint.name)
            elif kind == 3:
                joint = mbvi.Prismatic(a, b, axis=self.vector(1.0))
            elif kind == 4:
                joint = mbvi.Fixed(a, b, anchor=anchor)
            else:
                joint = mbvi.Rod(a, b, anchor_a=self.vector(0.1 * length), anchor_b=self.vector(0.1 * length))
            if joint.name in joints:
                continue
            scene.add(joint)
            joints.append(joint.name)
        self.names += joints
        for i in range(int(rng.integers(0, 4))):
            kind = int(rng.integers(8))
            a = pick() if self.dirty else self.names[int(rng.integers(n))]
            b = pick() if self.dirty else [x for x in pool if x != a][int(rng.integers(n))]
            if kind == 0:
                force = mbvi.Spring(a, b, stiffness=self.number(1.0, 1e3, extreme=(1e-6, 1e12)))
            elif kind == 1:
                force = mbvi.Damper(a, b, damping=self.number(1e-3, 2.0))
            elif kind == 2:
                force = mbvi.Drag(a, coefficient=self.number(1e-3, 1.0))
            elif kind == 3:
                force = mbvi.ExternalForce(a, force=self.load(), name=f"push{i}")
            elif kind == 4:
                body = rigid[0] if rigid and (not self.dirty or rng.random() < 0.8) else a
                force = mbvi.ExternalTorque(body, torque=self.load(), name=f"twist{i}")
            elif kind in (5, 6):
                choice = joints + ["no-joint"] if self.dirty else hinges
                if not choice:
                    continue
                joint = choice[int(rng.integers(len(choice)))]
                if kind == 5:
                    force = mbvi.JointDamping(joint, coefficient=self.number(1e-3, 1.0), name=f"friction{i}")
                else:
                    force = mbvi.TorsionSpring(joint, stiffness=self.number(1e-2, 10.0), name=f"torsion{i}")
            else:
                force = mbvi.Drag(a, coefficient=self.number(1e-3, 1.0), anchor=self.vector(0.1), name=f"drag{i}")
            scene.add(force)
            self.names.append(force.name)
        if rng.random() < 0.08:
            beam = mbvi.Beam(
                "beam", start=(0, 0, 0), end=(length, 0, 0), segments=int(rng.integers(2, 5)),
                density=self.number(100.0, 3000.0), area=self.number(1e-4, 1e-2, 0.02, None),
                youngs_modulus=self.number(1e6, 1e9, 0.02, None), clamp=[None, "start", "both"][int(rng.integers(3))],
            )  # fmt: skip
            scene.add(beam)
            self.names.append("beam")
        return scene

    # -- the call --------------------------------------------------------------------------------------------
    def call(self, scene: mbvi.Scene) -> object:
        rng = self.rng
        what = rng.random()
        if what < 0.3:
            options: dict[str, object] = {}
            if rng.random() < 0.15:
                options["tol"] = self.number(1e-12, 1e-6, 0.3, None)
            if rng.random() < 0.1:
                options["maxiter"] = [0, -1, 1, 5, "10", 2.5, True][int(rng.integers(7))]
            if rng.random() < 0.1:
                options["t"] = self.number(1e-3, 1.0, 0.3, None)
            if rng.random() < 0.1:
                options["initial_state"] = ["x", np.zeros(2), mbvi.State(np.zeros(3), np.zeros(3))][
                    int(rng.integers(3))
                ]
            self.steps.append(f"mbvi.equilibrium(scene, **{options!r})")
            eq = mbvi.equilibrium(scene, **options)
            if rng.random() < 0.3:
                name = self.names[int(rng.integers(len(self.names)))] if rng.random() < 0.7 else "zzz"
                self.steps.append(f"eq.position({name!r})")
                eq.position(name)
            return eq
        if what < 0.45:
            count = None if rng.random() < 0.7 else [0, 2, -1, "3", 2.5, True][int(rng.integers(6))]
            self.steps.append(f"mbvi.modes(scene, count={count!r})")
            return mbvi.modes(scene, count=count)
        integrator = RANDOM_INTEGRATORS[int(rng.integers(len(RANDOM_INTEGRATORS)))] if rng.random() < 0.95 else "nope"
        options = {}
        if rng.random() < 0.15:
            options["tol"] = self.number(1e-12, 1e-6, 0.3, None)
        if rng.random() < 0.05:
            options["bogus"] = 1
        if integrator == "csm" and rng.random() < 0.5:
            options["alpha"] = self.number(1.0, 100.0, 0.2, None)
        if rng.random() < 0.93:
            dt: object = _log_uniform(rng, 1e-5, 1e-1)
            t_end: float = float(dt) * int(rng.integers(2, 30))  # type: ignore[arg-type]
        else:
            dt, t_end = [math.nan, -1e-3, 0.0, "0.01", None, 1e300][int(rng.integers(6))], 0.05
        self.steps.append(f"mbvi.simulate(scene, t_end={t_end!r}, dt={dt!r}, integrator={integrator!r}, **{options!r})")
        traj = mbvi.simulate(scene, t_end=t_end, dt=dt, integrator=integrator, **options)
        if rng.random() < 0.2:
            name = self.names[int(rng.integers(len(self.names)))] if rng.random() < 0.7 else "zzz"
            self.steps.append(f"traj.position({name!r})")
            traj.position(name)
        return traj


def _bounded(case: _RandomCase) -> tuple[str, object, list[str], float]:
    """Build the scene and make the call under a wall-clock bound: (outcome, result or error, warnings, s).

    The seconds exclude numba's compilations during the call (:class:`_CompileMeter`).
    """
    use_alarm = threading.current_thread() is threading.main_thread()
    compiled_before = COMPILING.total

    def on_alarm(signum, frame):
        if COMPILING.depth > 0:  # compiling: not the call's own time; look again shortly
            signal.setitimer(signal.ITIMER_REAL, 0.25)
            return
        spent = time.perf_counter() - start - (COMPILING.total - compiled_before)
        if spent < CALL_BOUND:  # compilations took part of the bound: the call gets its whole bound
            signal.setitimer(signal.ITIMER_REAL, CALL_BOUND - spent)
            return
        raise _CallTimeout

    if use_alarm:
        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, CALL_BOUND)
    start = time.perf_counter()
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            scene = case.scene()
            outcome, result = "ok", case.call(scene)
    except _CallTimeout as exc:
        outcome, result = "timeout", exc
    except mbvi.SolverError as exc:
        outcome, result = "SolverError", exc
    except ValueError as exc:
        outcome, result = "ValueError", exc
    except Exception as exc:  # anything else is a failure, reported below with the seed
        outcome, result = "unexpected", exc
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0.0)
            signal.signal(signal.SIGALRM, previous)
    elapsed = time.perf_counter() - start - (COMPILING.total - compiled_before)
    return outcome, result, [str(w.message) for w in caught], elapsed


def _out_of_balance(eq: mbvi.Equilibrium) -> float:
    """Largest |∇U − F + Gᵀλ| at an equilibrium relative to the largest force in play, λ by plain least squares.

    Independent of the statics solver: an lstsq of Gᵀλ = −(∇U − F), which is exact at a true equilibrium (the
    equations are consistent there), in coordinates that are all lengths (a rotation column times the body's
    radius of gyration ρᵢ = √(dᵢ/m)) with the rows of G scaled to unit size, so that bodies 1e5 m wide do
    not make it ill-conditioned. The forces in play: the net loads there and at the start (a spring that
    holds a weight leaves no net load), the weights and the constraint forces.
    """
    sysm = eq.system
    body_mass = np.repeat(
        [b.mass for b in sysm.layout.bodies.values()], [b.ncoords for b in sysm.layout.bodies.values()]
    )
    rho = np.sqrt(sysm.mass / body_mass)  # 1 on positions, ρᵢ (m) on rotation columns

    def load(q: np.ndarray) -> np.ndarray:
        f = sysm.potential_gradient(q)
        return (f - sysm.force(q, np.zeros(sysm.nq), eq.t) if sysm.has_forces else f) / rho  # N

    f = load(eq.q)
    G = sysm.constraint_jacobian(eq.q).toarray()[sysm.active] / rho
    G = G / np.maximum(np.abs(G).max(axis=1, initial=0.0), 1e-300)[:, None]
    lam = np.linalg.lstsq(G.T, -f, rcond=None)[0] if len(G) else np.zeros(0)
    weights = sysm.mass[sysm.layout.translation_blocks] * float(np.linalg.norm(eq.scene.gravity))
    scale = max(
        float(np.max(np.abs(f))),
        float(np.max(np.abs(load(sysm.layout.q0)))),
        float(np.max(weights, initial=0.0)),
        float(np.max(np.abs(G.T @ lam), initial=0.0)),
        1e-300,
    )
    return float(np.max(np.abs(f + G.T @ lam))) / scale


def _random_problems(seed: int) -> tuple[str, list[str]]:
    """(what happened, e.g. "equilibrium: ok", and what is wrong with it) for one seed."""
    case = _RandomCase(seed)
    outcome, result, warned, elapsed = _bounded(case)
    where = f"seed {seed} ({' → '.join(case.steps) or 'building the scene'})"
    kind = f"{case.steps[0].split('(')[0].removeprefix('mbvi.') if case.steps else 'build'}: {outcome}"
    if outcome == "timeout" or elapsed > CALL_BOUND:
        return kind, [f"{where}: no answer within {CALL_BOUND} s ({elapsed:.1f} s)"]
    if outcome == "unexpected":
        return kind, [f"{where}: {type(result).__name__}: {result}"]
    text = str(result)
    problems = []
    if outcome == "ValueError":
        if isinstance(result, np.linalg.LinAlgError):  # a ValueError subclass, and scipy's derives from it
            problems.append(f"{where}: a LinAlgError reached the user: {text}")
        if not any(word in text for word in NAMING_WORDS + case.names):
            problems.append(f"{where}: the ValueError names no element or option: {text}")
        if DOUBLED_PREFIX.search(text):
            problems.append(f"{where}: the ValueError names its element twice: {text}")
        if "could not convert" in text or text.startswith("float()"):
            problems.append(f"{where}: numpy's message reached the user: {text}")
    elif outcome == "SolverError":
        assert isinstance(result, mbvi.SolverError)
        statics = "equilibrium" in text and "iteration" in text
        if not statics and (result.time is None or result.step is None or "at t =" not in text):
            problems.append(f"{where}: the SolverError does not say when: {text}")
    elif isinstance(result, mbvi.Trajectory):
        finite = all(np.all(np.isfinite(getattr(result, key))) for key in ("q", "v", "energy", "constraint_error"))
        if not finite and not any("energy" in w for w in warned):
            problems.append(f"{where}: a trajectory with NaN/inf came back without a warning naming the energy")
    elif isinstance(result, mbvi.Equilibrium):
        arrays = (result.q, result.multipliers, result.tangent_eigenvalues)
        if not all(np.all(np.isfinite(a)) for a in arrays):
            problems.append(f"{where}: a non-finite equilibrium came back")
        if result.stable and not np.all(result.tangent_eigenvalues > 0):
            problems.append(f"{where}: 'stable' with ω² {result.tangent_eigenvalues}")
        if result.system.nc and result.system.residual(result.system.active_constraints(result.q)) > 1e-9:
            problems.append(f"{where}: the equilibrium is off its constraints")
        if _out_of_balance(result) > 1e-6:
            problems.append(f"{where}: the equilibrium is out of balance by {_out_of_balance(result):.2g}")
    else:
        omega, shapes = result  # type: ignore[misc]
        if not (np.all(np.isfinite(omega)) and np.all(np.isfinite(shapes))):
            problems.append(f"{where}: non-finite modes")
    return kind, problems


@pytest.fixture(scope="module")
def compiled_engine() -> None:
    """Every integrator run once, untimed: the first call compiles (or loads) the engine."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.RigidBody("r", mass=1.0, inertia=(1.0, 1.0, 1.0), position=(1.0, 0.0, -1.0)))
    scene.add(mbvi.Rod("world", "p"))
    scene.add(mbvi.Spherical("p", "r", anchor=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Damper("world", "r", damping=0.1))
    points = mbvi.Scene(gravity=(0.0, 0.0, -9.81))  # without rigid bodies: the implicit pair's compiled loop too
    points.add(mbvi.Particle("p", mass=1.0, position=(1.0, 0.0, 0.0)))
    points.add(mbvi.Rod("world", "p"))
    points.add(mbvi.Damper("world", "p", damping=0.1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in RANDOM_INTEGRATORS:
            for built in (scene, points):
                mbvi.simulate(built, t_end=0.002, dt=1e-3, integrator=name)


@pytest.mark.parametrize("block", range(4))
def test_random_scenes_and_calls_answer_in_time_with_a_result_or_a_clear_error(block: int, compiled_engine) -> None:
    seeds = [s for s in RANDOM_SEEDS if s % 4 == block and s not in KNOWN_ENGINE_HANGS]
    outcomes: dict[str, int] = {}
    problems: list[str] = []
    for seed in seeds:
        kind, found = _random_problems(seed)
        outcomes[kind] = outcomes.get(kind, 0) + 1
        problems += found
    print(block, dict(sorted(outcomes.items())))
    assert not problems, "\n".join(problems)
    # the generator exercises every side: results of each call, clear errors of both kinds
    for kind in ("simulate: ok", "equilibrium: ok", "modes: ok", "build: ValueError", "simulate: ValueError"):
        assert outcomes.get(kind, 0) > 0, f"no '{kind}' among {outcomes}"
    assert sum(n for k, n in outcomes.items() if k.endswith("SolverError")) > 0
