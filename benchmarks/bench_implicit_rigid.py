"""The implicit pair on rigid bodies: the compiled loop against the NumPy Newton on the same equations.

Scenes of ``scenes/`` with rigid bodies, 2000 steps at each scene's dt, through ``mbvi.simulate`` as a user
calls it; the NumPy path is the same integrator with its compiled path switched off. Per case: µs per step of
each (the median over interleaved rounds, a warm-up run first), their ratio as the median [min–max] of the
per-round ratio, and how far the two runs' positions are apart (m).

    python benchmarks/bench_implicit_rigid.py [--rounds 3] [--steps 2000]

Measures, never asserts.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from unittest import mock

import numpy as np

import mbvi

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from scene_loader import SCENES, load_scene  # noqa: E402 - the tests' loader of scenes/

CASES = (("rigid_chain", "midpoint"), ("rigid_chain", "implicit_euler"), ("four_bar", "midpoint"),
         ("spinning_top", "midpoint"), ("spinning_top", "implicit_euler"))  # fmt: skip


def _timed(scene, t_end: float, dt: float, integrator: str, compiled: bool) -> tuple[float, np.ndarray]:
    with mock.patch.object(mbvi.get_integrator(integrator), "compiled", compiled):
        t0 = time.perf_counter()
        traj = mbvi.simulate(scene, t_end, dt, integrator)
        return time.perf_counter() - t0, traj.q


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    warnings.simplefilter("ignore", mbvi.RedundantConstraintWarning)
    print(f"mbvi {mbvi.__version__}: {args.steps} steps a run, {args.rounds} rounds")
    print(f"{'scene, integrator':<30} {'compiled µs':>12} {'NumPy µs':>10} {'NumPy / compiled':>24} {'max |Δq|':>9}")
    for name, integrator in CASES:
        module = load_scene(SCENES / f"{name}.py")
        scene, dt = module.build(), float(getattr(module, "DT", 1e-3))
        t_end = args.steps * dt
        _timed(scene, 10 * dt, dt, integrator, True)  # warm-up: kernels loaded, not timed
        _timed(scene, 10 * dt, dt, integrator, False)
        fast, slow, ratio = [], [], []
        for _ in range(args.rounds):
            a, qa = _timed(scene, t_end, dt, integrator, True)
            b, qb = _timed(scene, t_end, dt, integrator, False)
            fast.append(a / args.steps * 1e6)
            slow.append(b / args.steps * 1e6)
            ratio.append(b / a)
        spread = f"{statistics.median(ratio):.0f}× [{min(ratio):.0f}–{max(ratio):.0f}]"
        print(f"{name + ', ' + integrator:<30} {statistics.median(fast):>12.1f} {statistics.median(slow):>10.0f} "
              f"{spread:>24} {float(np.abs(qa - qb).max()):>9.1e}")  # fmt: skip


if __name__ == "__main__":
    main()
