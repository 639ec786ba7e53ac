"""The rigid-body envelope of every built-in variational integrator: how far a body may turn per step.

A free body (J = 1, 2, 2.5) tumbles near its intermediate axis for 2000
steps of 1e-2 s at h|ω| = 0.5 … 5 rad per step. Printed: whether the run
completes and its largest relative energy deviation, for the compiled
RATTLE family with step refinement off (``max_turn=inf``: one Cayley step per
step) and on (the default, 0.1 rad), and for ``midpoint``, which steps the
rotation columns. Run: ``python benchmarks/rotation_envelope.py``.
"""

from __future__ import annotations

import math

import numpy as np

import mbvi

J = np.array([1.0, 2.0, 2.5])
DT = 1e-2
TURNS = (0.5, 1.0, 2.0, 5.0)


def band(integrator: str, turn: float, **options) -> str:
    w = np.array([0.01, 1.0, 0.01])
    w *= turn / DT / np.linalg.norm(w)
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("body", mass=1.0, inertia=J, angular_velocity=w))
    try:
        traj = mbvi.simulate(scene, 2000 * DT, DT, integrator, **options)
    except mbvi.SolverError as err:
        return f"fails at step {err.step}"
    return f"{np.max(np.abs(traj.energy / traj.energy[0] - 1.0)):.1e}"


def main() -> None:
    rows = []
    for name in ("verlet", "symplectic_euler_b", "yoshida4"):
        rows.append((f"`{name}`, max_turn = inf", [band(name, t, max_turn=math.inf) for t in TURNS]))
        rows.append((f"`{name}` (default max_turn = 0.1)", [band(name, t) for t in TURNS]))
    rows.append(("`midpoint` (rotation columns)", [band("midpoint", t) for t in TURNS]))
    for label, cells in rows:
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
