"""Cost per system-step of the double pendulum: serial ``verlet`` against batched RATTLE.

Run: ``python benchmarks/bench_batch.py``. For small mechanisms a step is call
overhead, not arithmetic; stepping B copies together amortizes it. Reported as
the speed-up over the serial integrator measured in the same process; each
figure the best of three timings after an untimed call.
"""

from __future__ import annotations

import functools
import time

import numpy as np

import mbvi


def scene() -> mbvi.Scene:
    s = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    s.add(mbvi.Particle("bob1", mass=1.0, position=(1.0, 0.0, 0.0)))
    s.add(mbvi.Particle("bob2", mass=1.0, position=(2.0, 0.0, 0.0)))
    s.add(mbvi.Rod("world", "bob1"))
    s.add(mbvi.Rod("bob1", "bob2"))
    return s


def best(fn, repeats: int = 3) -> float:
    """The shortest of ``repeats`` timings of ``fn()`` (after one untimed call: first use, caches), s."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    sc = scene()
    system = mbvi.assemble(sc)
    s0 = system.initial_state()
    steps = 2000
    serial = best(lambda: mbvi.simulate(sc, t_end=steps * 1e-3, dt=1e-3)) / steps
    print(f"serial verlet (mbvi.simulate, defaults): {serial * 1e6:.2f} us per step")
    print(f"{'B':>6} {'us per system-step':>20} {'speed-up':>9}")
    rng = np.random.default_rng(0)
    for B in (1, 16, 256, 4096):
        V = np.array([system.project_velocity(s0.q, rng.normal(size=system.nq)) for _ in range(B)])
        Q = np.repeat(s0.q[None], B, axis=0)
        n = max(50, min(steps, 200_000 // B))
        run = functools.partial(mbvi.simulate_batch, sc, t_end=n * 1e-3, dt=1e-3, initial_states=(Q, V), save_every=n)
        per = best(run) / (n * B)
        print(f"{B:>6} {per * 1e6:>20.2f} {serial / per:>9.1f}")


if __name__ == "__main__":
    main()
