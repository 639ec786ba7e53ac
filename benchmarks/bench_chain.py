"""Time per step of an N-link particle chain on the NumPy path: mbvi's RATTLE against a hand-written one.

mbvi steps one ``Integrator.step`` call at a time here, the NumPy path that
plugins and the step-by-step API use, so its Python overhead per call is in
the times (and flattens the scaling exponent). The compiled run, one call for
the whole run, is timed by ``bench_engine.py``.

Run: ``python benchmarks/bench_chain.py`` (or ``make bench``). Prints a table of
microseconds per step for N = 8 … 4096, the scaling exponent between N = 256
and N = 4096, and mbvi's time as a ratio of a specialized ~60-line numpy
RATTLE (tridiagonal Cholesky) for the same chain, measured in the same process.
Nothing is asserted: the machines are noisy; ratios are what to compare.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.linalg.lapack import dpbtrf, dpbtrs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scenes"))

import chain

import mbvi

LINK = 0.05  # m per link
DT = 1e-3
ANGLE = 0.3  # rad from the vertical


class HandRattle:
    """Specialized RATTLE for a chain of equal point masses hanging from the origin."""

    def __init__(self, x: np.ndarray, v: np.ndarray, m: float, g: float, h: float, tol: float = 1e-12):
        self.x, self.v = x.copy(), v.copy()  # (N, 3)
        self.n = len(x)
        self.w = 1.0 / m
        self.a = np.array([0.0, 0.0, -g])
        self.h = h
        self.tol = tol
        self.L = np.linalg.norm(np.diff(np.vstack([np.zeros(3), x]), axis=0), axis=1)
        self.A = self._factor(self.x)

    def _edges(self, x):
        return np.diff(np.vstack([np.zeros(3), x]), axis=0)  # d_i = x_i - x_{i-1}

    def _factor(self, x):
        d = self._edges(x)
        # G rows: g_i = (|d_i|^2 - L_i^2) / (2 L_i); dg_i/dx_i = d_i/L_i, dg_i/dx_{i-1} = -d_i/L_i
        n = d / self.L[:, None]
        ab = np.zeros((2, self.n))
        ab[0] = self.w * np.einsum("ij,ij->i", n, n) * np.r_[1.0, np.full(self.n - 1, 2.0)]
        ab[1, :-1] = -self.w * np.einsum("ij,ij->i", n[1:], n[:-1])
        return dpbtrf(ab, lower=1)[0], n

    def _gt(self, n, lam):  # G^T lam, per particle
        f = n * lam[:, None]
        out = f.copy()
        out[:-1] -= f[1:]
        return out

    def _g(self, x):
        d = self._edges(x)
        return (np.einsum("ij,ij->i", d, d) - self.L**2) / (2 * self.L)

    def step(self):
        h, w = self.h, self.w
        c0, n0 = self.A
        vh = self.v + 0.5 * h * self.a
        x = self.x + h * vh
        for _ in range(100):
            g = self._g(x)
            if np.max(np.abs(g / self.L)) <= self.tol:
                break
            dx = w * self._gt(n0, dpbtrs(c0, g, lower=1)[0])
            x -= dx
            vh -= dx / h
        v = vh + 0.5 * h * self.a
        c1, n1 = self.A = self._factor(x)
        gv = np.einsum("ij,ij->i", n1, np.diff(np.vstack([np.zeros(3), v]), axis=0))
        v -= w * self._gt(n1, dpbtrs(c1, gv, lower=1)[0])
        self.x, self.v = x, v


def time_per_step(fn, steps: int, repeat: int = 3) -> float:
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        best = min(best, (time.perf_counter() - t0) / steps)
    return best


def bench(n: int, steps: int) -> tuple[float, float, str]:
    scene = chain.build(links=n, length=n * LINK, mass=float(n), angle=ANGLE)
    sysm = mbvi.assemble(scene)
    integ = mbvi.get_integrator("verlet")(sysm, DT)
    box = {"s": sysm.initial_state()}

    def mbvi_step():
        box["s"] = integ.step(box["s"], 0.0)

    x0 = sysm.layout.q0.reshape(-1, 3)
    hand = HandRattle(x0, np.zeros_like(x0), 1.0, 9.81, DT)
    for _ in range(5):
        mbvi_step()
        hand.step()
    t_mbvi = time_per_step(mbvi_step, steps)
    t_hand = time_per_step(hand.step, steps)
    # same physics: both trajectories agree
    diff = np.max(np.abs(box["s"].q.reshape(-1, 3) - hand.x))
    assert diff < 1e-8, diff
    return t_mbvi, t_hand, sysm.solver.kind


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,16,32,64,128,256,512,1024,2048,4096")
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print("the NumPy path, one Integrator.step call per step (the compiled run: bench_engine.py)")
    print(f"{'N':>6} {'mbvi us/step':>13} {'hand us/step':>13} {'ratio':>7}  factorization")
    res = {}
    for n in sizes:
        steps = max(20, min(args.steps, int(args.steps * 256 / n)))
        t_m, t_h, kind = bench(n, steps)
        res[n] = (t_m, t_h)
        print(f"{n:>6} {t_m * 1e6:>13.1f} {t_h * 1e6:>13.1f} {t_m / t_h:>7.2f}  {kind}")
    if 256 in res and 4096 in res:
        p = math.log(res[4096][0] / res[256][0]) / math.log(4096 / 256)
        ph = math.log(res[4096][1] / res[256][1]) / math.log(4096 / 256)
        print(f"scaling exponent 256→4096: mbvi {p:.2f}, hand-written {ph:.2f}")
    if 512 in res:
        print(f"N = 512: mbvi / hand-written RATTLE = {res[512][0] / res[512][1]:.2f}")


if __name__ == "__main__":
    main()
