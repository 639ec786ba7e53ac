"""Work–precision and long-horizon energy: csm (Baumgarte + solve_ivp) against verlet and yoshida4.

Double pendulum of scenes/double_pendulum.py. Error: max over the run of the bobs'
position error against a tight reference (csm, rtol = atol = 1e-12), on a horizon
short enough that chaos does not amplify it beyond the integrators' own error.
Work: wall-clock time of ``mbvi.simulate`` (one warm-up run first, so compilation
is not counted). Long horizon: a rigid pendulum for T_LONG s, max |E − E0| and the
constraint error.

    python benchmarks/bench_work_precision.py [--t 2] [--t-long 500]

Prints Markdown tables (the ones in docs/integrators.md). Measures, never asserts.
"""

from __future__ import annotations

import argparse
import subprocess
import time
from pathlib import Path

import numpy as np

import mbvi
from mbvi.cli import load_scene_module

ROOT = Path(__file__).resolve().parents[1]


def _double():
    return load_scene_module(ROOT / "scenes" / "double_pendulum.py").build()


def _bobs(traj):
    return np.concatenate([traj.position(n) for n in traj.body_names], axis=1)


def _run(scene, t_end, dt, integrator, **options):
    mbvi.simulate(scene, t_end=min(t_end, 20 * dt), dt=dt, integrator=integrator, **options)  # warm-up
    start = time.process_time()
    traj = mbvi.simulate(scene, t_end=t_end, dt=dt, integrator=integrator, **options)
    return traj, time.process_time() - start


def work_precision(t_end: float) -> list[tuple[str, str, float, float, float]]:
    scene = _double()
    out_dt = 1e-2  # compare at the same times
    ref, _ = _run(scene, t_end, out_dt, "csm", rtol=1e-12, atol=1e-12)
    ref_x = _bobs(ref)
    rows = []
    for rtol in (1e-4, 1e-6, 1e-8, 1e-10):
        traj, cpu = _run(scene, t_end, out_dt, "csm", rtol=rtol)
        rows.append(
            ("csm", f"rtol={rtol:g}", cpu, float(np.abs(_bobs(traj) - ref_x).max()), traj.constraint_error.max())
        )
    for name in ("verlet", "yoshida4"):
        for dt in (1e-2, 2.5e-3, 1e-3, 2.5e-4):
            traj, cpu = _run(scene, t_end, dt, name)
            every = round(out_dt / dt)
            err = float(np.abs(_bobs(traj)[::every] - ref_x).max())
            rows.append((name, f"dt={dt:g}", cpu, err, traj.constraint_error.max()))
    return rows


def long_horizon(t_long: float) -> list[tuple[str, str, float, float, float]]:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(np.sin(1.0), 0.0, -np.cos(1.0))))
    scene.add(mbvi.Rod("world", "bob"))
    rows = []
    for name, label, kw in (
        ("csm", "rtol=1e-3 (solve_ivp default)", {"dt": 1e-2, "rtol": 1e-3}),
        ("csm", "rtol=1e-8 (mbvi default)", {"dt": 1e-2}),
        ("verlet", "dt=1e-2", {"dt": 1e-2}),
        ("verlet", "dt=1e-3", {"dt": 1e-3}),
    ):
        dt = kw.pop("dt")
        traj, cpu = _run(scene, t_long, dt, name, **kw)
        e = traj.energy
        n = len(e)
        drift = float(np.mean(e[-n // 10 :]) - np.mean(e[: n // 10]))
        rows.append((name, label, cpu, float(np.abs(e - e[0]).max()), drift, float(traj.constraint_error.max())))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--t", type=float, default=2.0, help="work–precision horizon, s")
    parser.add_argument("--t-long", type=float, default=500.0, help="long-horizon run, s")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    print(f"commit {commit.stdout.strip()}\n")
    print(f"Double pendulum, {args.t:g} s: error against csm rtol = atol = 1e-12\n")
    print("| integrator | setting | CPU s | max position error, m | max constraint error |")
    print("|---|---|---|---|---|")
    for name, setting, cpu, err, cerr in work_precision(args.t):
        print(f"| `{name}` | {setting} | {cpu:.3f} | {err:.1e} | {cerr:.1e} |")
    print(f"\nPendulum (m g l = 9.81 J), {args.t_long:g} s\n")
    print("| integrator | setting | CPU s | max abs(E − E0), J | drift (last 10% − first 10%), J | constraint |")
    print("|---|---|---|---|---|---|")
    for name, setting, cpu, band, drift, cerr in long_horizon(args.t_long):
        print(f"| `{name}` | {setting} | {cpu:.2f} | {band:.1e} | {drift:+.1e} | {cerr:.1e} |")


if __name__ == "__main__":
    main()
