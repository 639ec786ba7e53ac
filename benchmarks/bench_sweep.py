"""Members per second of ``mbvi.sweep`` against a plain serial loop of ``mbvi.simulate``.

Run: ``python benchmarks/bench_sweep.py [--rounds 3] [--n 8] [--t-end 4]``. The grid is
the double pendulum over n × n release angles (verlet, dt = 1e-3 s). Each round
runs, in this order, the serial loop, the local default (two members here,
then a temporary pool of worker processes, start-up included, only when the
rest would take over 10 s: this grid stays in the process), the local
``processes`` scheduler (the pool, its start-up included: every call pays it), the local
``threads`` scheduler, and a ``LocalCluster`` of 1 and of 2 single-threaded
worker processes (started once, before the rounds: a cluster outlives its
sweeps). Rounds interleave the variants so that a busy machine slows them
alike; reported are the median ratio to the serial loop of the same round and
its spread (min–max over rounds). Measures, never asserts.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENE = ROOT / "scenes" / "double_pendulum.py"
DT = 1e-3


def main() -> None:
    import numpy as np
    from distributed import Client, LocalCluster

    import mbvi
    from mbvi.cli import load_scene_module

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=8, help="release angles per axis (n² members)")
    parser.add_argument("--t-end", type=float, default=4.0, help="simulated time per member, s")
    args = parser.parse_args()
    angles = np.linspace(0.5, 2.5, args.n).tolist()
    grid = {"theta1": angles, "theta2": angles}
    members = args.n**2
    build = load_scene_module(SCENE).build

    def serial() -> None:
        for t1, t2 in itertools.product(angles, angles):
            mbvi.simulate(build(theta1=t1, theta2=t2), t_end=args.t_end, dt=DT)

    warnings.filterwarnings("ignore", module=r"distributed\..*")
    clusters = {
        k: LocalCluster(n_workers=k, threads_per_worker=1, processes=True, dashboard_address=None) for k in (1, 2)
    }
    clients = {k: Client(c) for k, c in clusters.items()}
    for client in clients.values():  # warm the workers: import mbvi, load the compiled kernels
        mbvi.sweep(str(SCENE), {"theta1": [1.0]}, t_end=0.01, dt=DT, client=client)
    serial()  # warm this process too

    variants = {
        "local default": lambda: mbvi.sweep(str(SCENE), grid, t_end=args.t_end, dt=DT),
        "local processes": lambda: mbvi.sweep(str(SCENE), grid, t_end=args.t_end, dt=DT, scheduler="processes"),
        "local threads": lambda: mbvi.sweep(str(SCENE), grid, t_end=args.t_end, dt=DT, scheduler="threads"),
        "LocalCluster, 1 worker": lambda: mbvi.sweep(str(SCENE), grid, t_end=args.t_end, dt=DT, client=clients[1]),
        "LocalCluster, 2 workers": lambda: mbvi.sweep(str(SCENE), grid, t_end=args.t_end, dt=DT, client=clients[2]),
    }
    rates: dict[str, list[float]] = {"serial loop": []}
    ratios: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        start = time.perf_counter()
        serial()
        base = members / (time.perf_counter() - start)
        rates["serial loop"].append(base)
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            rate = members / (time.perf_counter() - start)
            rates.setdefault(name, []).append(rate)
            ratios[name].append(rate / base)
    for client in clients.values():
        client.close()
    for cluster in clusters.values():
        cluster.close()

    print(
        f"mbvi.sweep: double pendulum, {members} members × {round(args.t_end / DT)} verlet steps, "
        f"{args.rounds} rounds, {os.cpu_count()} cores"
    )
    print(f"{'variant':<28} {'members/s':>10} {'ratio to serial':>16} {'spread':>15}")
    print(f"{'serial loop':<28} {statistics.median(rates['serial loop']):>10.1f} {1.0:>16.2f}")
    for name in variants:
        r = ratios[name]
        print(
            f"{name:<28} {statistics.median(rates[name]):>10.1f} {statistics.median(r):>16.2f} "
            f"{min(r):>7.2f}–{max(r):<7.2f}"
        )


if __name__ == "__main__":
    main()
