"""Fuzz (issue 11): random valid and invalid scenes and calls, fixed seeds, a size CI can afford.

Every outcome must be a finite result, a ``ValueError``/``TypeError`` naming the
element or option at fault, or a :class:`mbvi.SolverError` saying when and why —
never another exception type, a NaN/inf in the trajectory, or a hang (small
``t_end``, few steps).
"""

from __future__ import annotations

import math
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
