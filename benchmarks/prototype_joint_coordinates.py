"""A measurement for a design decision: the 32-link rigid chain stepped in joint coordinates.

Run: ``python benchmarks/prototype_joint_coordinates.py [--links N] [--rounds R]``. Not part of ``make bench``
and not part of mbvi: a hand-written prototype, kept so that its figures can be reproduced.

Issue 32 asks for the 32-link rigid chain of ``bench_engine.py`` through ``simulate`` with its defaults in at
most 2× MuJoCo's Euler step. mbvi steps rigid bodies in maximal coordinates under constraint rows (RATTLE on
the rotation group): SHAKE's drifts and a factor of A = G M⁻¹ Gᵀ every step, and RATTLE's velocity projection
for every saved state, come to ~4× MuJoCo. This file measures what a variational integrator in the joints'
own angles θ costs on the same chain, to tell whether that is the way to 2×. It knows this chain only (equal
links, axes y, z, y, …, gravity alone): a measure of the method, not a kernel to ship.

The method (the midpoint discrete Lagrangian L_d(θ₀, θ₁) = h L((θ₀ + θ₁)/2, (θ₁ − θ₀)/h), L = ½ θ̇ᵀ M(θ) θ̇ − V):
the discrete Euler–Lagrange equations in position–momentum form,

    M(θ̄) w − (h/2) F(θ̄, w) = p_k,   θ_{k+1} = θ_k + h w,   p_{k+1} = M(θ̄) w + (h/2) F(θ̄, w),

with θ̄ = θ_k + h w / 2 and F = ∂T/∂θ − ∂V/∂θ, solved for the mean rate w by Newton's iteration with M(θ_k)
as its matrix, from w extrapolated (quadratic) from the last three steps', until the correction left, estimated
from the iteration's contraction ρ as ρ/(1 − ρ) |Δw| h, is under 1e-12 rad. Every
term is a recursion over the chain, O(n): M(θ) w = (sᵢ · Hᵢ)ᵢ and ∂T/∂θᵢ = Hᵢ · (V_{λ(i)} × sᵢ), with sᵢ
joint i's spatial axis, V_{λ(i)} its parent's spatial velocity and Hᵢ the spatial momentum of the bodies
beyond joint i (at the rates w). M(θ_{k+1}) comes from the composite-rigid-body recursion and a dense Cholesky
factor (the chain's M is full); it serves the next step's iteration and the saved rate
θ̇_{k+1} = M(θ_{k+1})⁻¹ p_{k+1}, the discrete Legendre transform. No constraint rows, no projection: the saved
state is exact by construction. Each saved state writes θ, θ̇ and every body's position and rotation matrix
(what mbvi saves).

It prints: the agreement with mbvi's ``verlet`` (both second order: the difference shrinks 4× per halving of
dt), the energy band over the first 10 s and the 20-s whip against mbvi's, and µs per step against MuJoCo's
Euler step, mbvi's ``simulate`` with its defaults and its engine loop, interleaved over rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

import mbvi

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import RADIUS, MujocoRun, mj_rigid_chain, rigid_chain

DT = 1e-3
G = 9.81
MASS, LENGTH = 1.0, 1.0
_TRANSVERSE = MASS * (3 * RADIUS**2 + LENGTH**2) / 12
MOMENTS = np.array([MASS * RADIUS**2 / 2, _TRANSVERSE, _TRANSVERSE])  # a solid cylinder along its x, kg m²


@njit(cache=True)
def kinematics(theta, R, p, c, a):
    """Rotations R (n, 3, 3), joint points p (n, 3), mass centres c (n, 3), joint axes a (n, 3), world frame.

    Joint i turns about its parent's y (i even) or z (i odd) axis; link i runs 1 m along its own x."""
    n = len(theta)
    P = np.eye(3)
    x = np.zeros(3)
    for i in range(n):
        cs, sn = np.cos(theta[i]), np.sin(theta[i])
        k = 1 if i % 2 == 0 else 2
        for r in range(3):
            a[i, r] = P[r, k]
            if k == 1:  # about y: x' = c x − s z, z' = s x + c z
                R[i, r, 0] = cs * P[r, 0] - sn * P[r, 2]
                R[i, r, 1] = P[r, 1]
                R[i, r, 2] = sn * P[r, 0] + cs * P[r, 2]
            else:  # about z: x' = c x + s y, y' = −s x + c y
                R[i, r, 0] = cs * P[r, 0] + sn * P[r, 1]
                R[i, r, 1] = -sn * P[r, 0] + cs * P[r, 1]
                R[i, r, 2] = P[r, 2]
        for r in range(3):
            p[i, r] = x[r]
            c[i, r] = x[r] + 0.5 * LENGTH * R[i, r, 0]
            x[r] += LENGTH * R[i, r, 0]
        P = R[i]


@njit(inline="always")
def cross(u, v, out):
    out[0] = u[1] * v[2] - u[2] * v[1]
    out[1] = u[2] * v[0] - u[0] * v[2]
    out[2] = u[0] * v[1] - u[1] * v[0]


@njit(cache=True)
def forces(R, p, c, a, w, J, Mw, F, work):
    """Mw = M(θ) w, F = ∂T/∂θ − ∂V/∂θ at rates w: one pass out along the chain, one back (O(n))."""
    n = len(w)
    s2, xs, hb = work[0], work[1], work[2]  # (n, 3) each: p×a, the parent's V × s (two halves), h
    xs2, hL = work[3], work[4]
    om, vo, vc, t1, t2 = np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3), np.zeros(3)
    for i in range(n):
        cross(p[i], a[i], s2[i])
        # V_parent × s_i = (ω × a, ω × (p × a) + v_O × a)
        cross(om, a[i], xs[i])
        cross(om, s2[i], t1)
        cross(vo, a[i], t2)
        for r in range(3):
            xs2[i, r] = t1[r] + t2[r]
            om[r] += a[i, r] * w[i]
            vo[r] += s2[i, r] * w[i]
        cross(om, c[i], t1)
        for r in range(3):
            vc[r] = vo[r] + t1[r]
        # h_i = (I_c ω + c × m v_c, m v_c), I_c = R J Rᵀ
        for r in range(3):
            t1[r] = J[r] * (R[i, 0, r] * om[0] + R[i, 1, r] * om[1] + R[i, 2, r] * om[2])
        cross(c[i], vc, t2)
        for r in range(3):
            hL[i, r] = R[i, r, 0] * t1[0] + R[i, r, 1] * t1[1] + R[i, r, 2] * t1[2] + MASS * t2[r]
            hb[i, r] = MASS * vc[r]
    HL, HP, GL = np.zeros(3), np.zeros(3), np.zeros(3)
    GP = 0.0  # gravity's sum of forces is along z: (0, 0, GP)
    for i in range(n - 1, -1, -1):
        for r in range(3):
            HL[r] += hL[i, r]
            HP[r] += hb[i, r]
        # Σ c × (0, 0, −m g) = (−c_y m g, c_x m g, 0)
        GL[0] -= c[i, 1] * MASS * G
        GL[1] += c[i, 0] * MASS * G
        GP -= MASS * G
        Mw[i] = a[i, 0] * HL[0] + a[i, 1] * HL[1] + a[i, 2] * HL[2] + s2[i, 0] * HP[0] + s2[i, 1] * HP[1]
        Mw[i] += s2[i, 2] * HP[2]
        dT = HL[0] * xs[i, 0] + HL[1] * xs[i, 1] + HL[2] * xs[i, 2]
        dT += HP[0] * xs2[i, 0] + HP[1] * xs2[i, 1] + HP[2] * xs2[i, 2]
        Q = a[i, 0] * GL[0] + a[i, 1] * GL[1] + a[i, 2] * GL[2] + s2[i, 2] * GP
        F[i] = dT + Q


@njit(cache=True)
def mass_matrix(R, p, c, a, J, Mm, work):
    """M(θ) by the composite-rigid-body recursion (dense: a chain's M is full), then its Cholesky factor in
    place (lower triangle)."""
    n = len(a)
    K = np.zeros((3, 3))
    S = np.zeros(3)
    Mt = 0.0
    s2, L, P, t1 = work[0], np.zeros(3), np.zeros(3), np.zeros(3)
    for j in range(n):
        cross(p[j], a[j], s2[j])
    for j in range(n - 1, -1, -1):
        # the composite of bodies j … n−1 about the origin: inertia K, first moment S, mass Mt
        for r in range(3):
            for q in range(3):
                K[r, q] += (R[j, r, 0] * J[0] * R[j, q, 0] + R[j, r, 1] * J[1] * R[j, q, 1]
                            + R[j, r, 2] * J[2] * R[j, q, 2]) - MASS * c[j, r] * c[j, q]  # fmt: skip
        cc = c[j, 0] ** 2 + c[j, 1] ** 2 + c[j, 2] ** 2
        for r in range(3):
            K[r, r] += MASS * cc
            S[r] += MASS * c[j, r]
        Mt += MASS
        # its momentum at a unit rate of joint j: L = K a + S × (p × a), P = Mt (p × a) + a × S
        cross(S, s2[j], t1)
        for r in range(3):
            L[r] = K[r, 0] * a[j, 0] + K[r, 1] * a[j, 1] + K[r, 2] * a[j, 2] + t1[r]
        cross(a[j], S, t1)
        for r in range(3):
            P[r] = Mt * s2[j, r] + t1[r]
        for i in range(j + 1):
            Mm[j, i] = (a[i, 0] * L[0] + a[i, 1] * L[1] + a[i, 2] * L[2]
                        + s2[i, 0] * P[0] + s2[i, 1] * P[1] + s2[i, 2] * P[2])  # fmt: skip
    for j in range(n):  # Cholesky, lower triangle, by columns
        d = Mm[j, j]
        for k in range(j):
            d -= Mm[j, k] * Mm[j, k]
        d = np.sqrt(d)
        Mm[j, j] = d
        for i in range(j + 1, n):
            s = Mm[i, j]
            for k in range(j):
                s -= Mm[i, k] * Mm[j, k]
            Mm[i, j] = s / d


@njit(cache=True)
def chol_solve(Lm, b, x):
    n = len(b)
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= Lm[i, k] * x[k]
        x[i] = s / Lm[i, i]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for k in range(i + 1, n):
            s -= Lm[k, i] * x[k]
        x[i] = s / Lm[i, i]


@njit(cache=True)
def run(theta0, rate0, h, nsteps, save_every, tol, J, Th, Rt, Q, order=2):
    """nsteps steps from (θ₀, θ̇₀); saves θ, θ̇ (Th, Rt) and every body's mass centre and rotation (Q, 12 a
    body) every ``save_every`` steps. Returns the Newton iterations taken in all."""
    n = len(theta0)
    R, p, c, a = np.zeros((n, 3, 3)), np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3))
    work = np.zeros((5, n, 3))
    Mm = np.zeros((n, n))
    theta, mom, w, w1, wp = theta0.copy(), np.zeros(n), rate0.copy(), rate0.copy(), rate0.copy()
    wpp = rate0.copy()
    Mw, F, r, d, tb = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    kinematics(theta, R, p, c, a)
    forces(R, p, c, a, rate0, J, mom, F, work)  # p₀ = M(θ₀) θ̇₀
    mass_matrix(R, p, c, a, J, Mm, work)
    iters = 0
    j = 0
    for k in range(nsteps):
        for i in range(n):  # the mean rate, extrapolated from the last steps'
            if order == 2 and k > 2:
                w[i] = 3.0 * w1[i] - 3.0 * wp[i] + wpp[i]
            elif order >= 1 and k > 1:
                w[i] = 2.0 * w1[i] - wp[i]
            else:
                w[i] = w1[i]
        last = 0.0
        for it in range(50):
            for i in range(n):
                tb[i] = theta[i] + 0.5 * h * w[i]
            kinematics(tb, R, p, c, a)
            forces(R, p, c, a, w, J, Mw, F, work)
            for i in range(n):
                r[i] = Mw[i] - 0.5 * h * F[i] - mom[i]
            chol_solve(Mm, r, d)
            big = 0.0
            for i in range(n):
                w[i] -= d[i]
                big = max(big, abs(d[i]))
            iters += 1
            # done when the correction left to make, estimated from this step's contraction ρ as ρ/(1 − ρ) |Δw|, is
            # under tolerance (Hairer & Wanner's stopping rule for simplified Newton; the first correction alone
            # must be under it: another step's ρ, measured near round-off, may be far too small)
            rho = min(big / last, 0.5) if it > 0 else 1.0
            last = big
            if big * h <= tol or (it > 0 and rho / (1.0 - rho) * big * h <= tol):
                break
        for i in range(n):
            mom[i] = mom[i] + r[i] + h * F[i]  # M(θ̄) w + (h/2) F at the last evaluation
            theta[i] += h * w[i]
            wpp[i] = wp[i]
            wp[i] = w1[i]
            w1[i] = w[i]
        kinematics(theta, R, p, c, a)
        mass_matrix(R, p, c, a, J, Mm, work)
        if (k + 1) % save_every == 0:
            chol_solve(Mm, mom, Rt[j])
            for i in range(n):
                Th[j, i] = theta[i]
                for r_ in range(3):
                    Q[j, 12 * i + r_] = c[i, r_]
                    for q_ in range(3):
                        Q[j, 12 * i + 3 + 3 * r_ + q_] = R[i, r_, q_]
            j += 1
    return iters


def energy(theta, rate):
    """T + V of the chain at (θ, θ̇), J."""
    n = len(theta)
    R, p, c, a = np.zeros((n, 3, 3)), np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3))
    kinematics(theta, R, p, c, a)
    Mw, F = np.zeros(n), np.zeros(n)
    forces(R, p, c, a, rate, MOMENTS, Mw, F, np.zeros((5, n, 3)))
    return 0.5 * float(rate @ Mw) + MASS * G * float(c[:, 2].sum())


class JointRun:
    """The prototype from rest, horizontal: every state saved (simulate's default)."""

    def __init__(self, links: int, h: float = DT, tol: float = 1e-12, order: int = 2):
        self.n, self.h, self.tol, self.order = links, h, tol, order

    def run(self, nsteps: int, save_every: int = 1):
        m = nsteps // save_every
        Th, Rt, Q = np.empty((m, self.n)), np.empty((m, self.n)), np.empty((m, 12 * self.n))
        zero = np.zeros(self.n)
        self.iters = run(zero, zero, self.h, nsteps, save_every, self.tol, MOMENTS, Th, Rt, Q, self.order) / nsteps
        return Th, Rt, Q

    def time(self, nsteps: int) -> float:
        t0 = time.perf_counter()
        self.run(nsteps)
        return (time.perf_counter() - t0) / nsteps


def mbvi_positions(traj, links: int) -> np.ndarray:
    """The mass centres of mbvi's last saved state, (links, 3)."""
    return np.array([traj.position(f"link{i}")[-1] for i in range(links)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--links", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    n = args.links
    scene = rigid_chain(n)
    system = mbvi.assemble(scene)

    # --- the check: ∂T/∂θ and M(θ) w against finite differences of T at a random state
    rng = np.random.default_rng(1)
    th, w = rng.normal(size=n), rng.normal(size=n)
    R, p, c, a = np.zeros((n, 3, 3)), np.zeros((n, 3)), np.zeros((n, 3)), np.zeros((n, 3))

    def kinetic(t, v):
        kinematics(t, R, p, c, a)
        Mw, F = np.zeros(n), np.zeros(n)
        forces(R, p, c, a, v, MOMENTS, Mw, F, np.zeros((5, n, 3)))
        return 0.5 * float(v @ Mw), Mw, F

    _, Mw, F = kinetic(th, w)
    eps = 1e-6

    def lagrangian(t):
        kinetic_energy, _, _ = kinetic(t, w)
        return kinetic_energy - MASS * G * float(c[:, 2].sum())  # c as kinetic() left it, at t

    dL = np.array([(lagrangian(th + eps * e) - lagrangian(th - eps * e)) / (2 * eps) for e in np.eye(n)])
    Mm = np.zeros((n, n))
    kinematics(th, R, p, c, a)
    mass_matrix(R, p, c, a, MOMENTS, Mm, np.zeros((5, n, 3)))
    Lm = np.tril(Mm)
    print(
        "checks at a random state: |M w − L Lᵀ w| / |M w| = "
        f"{np.abs(Mw - Lm @ (Lm.T @ w)).max() / np.abs(Mw).max():.1e}"
        f", |F − ∂L/∂θ by finite differences| / |F| = {np.abs(F - dL).max() / np.abs(F).max():.1e}"
    )

    # --- agreement with mbvi's verlet over 1 s, and the order of the difference
    diffs = []
    for h in (2e-3, 1e-3, 5e-4):
        steps = round(1.0 / h)
        _, _, Qj = JointRun(n, h).run(steps, steps)
        traj = mbvi.simulate(scene, t_end=1.0, dt=h, save_every=steps)
        diffs.append(np.abs(Qj[-1].reshape(n, 12)[:, :3] - mbvi_positions(traj, n)).max())
    print(
        "max |Δ mass centre| against mbvi verlet after 1 s, dt = 2e-3, 1e-3, 5e-4: "
        + ", ".join(f"{d:.2e}" for d in diffs)
        + f" m (ratios {diffs[0] / diffs[1]:.2f}, {diffs[1] / diffs[2]:.2f}: both second order)"
    )

    # --- energy over the 20-s whip
    nwhip = 20000
    jr = JointRun(n)
    Th, Rt, _ = jr.run(nwhip, 10)
    e = np.array([energy(t, v) for t, v in zip(Th, Rt, strict=True)])
    drop = G * sum(i + 0.5 for i in range(n))
    traj = mbvi.simulate(scene, t_end=nwhip * DT, dt=DT, save_every=10)
    ours, theirs = np.abs(e - 0.0) / drop, np.abs(traj.energy - traj.energy[0]) / drop
    print(
        f"energy band / potential drop over the first 10 s: joint coordinates {ours[:1000].max():.2e}, mbvi verlet "
        f"{theirs[:1000].max():.2e}; over {nwhip * DT:g} s: {ours.max():.2e} and {theirs.max():.2e} (the whip is "
        f"chaotic: past ~10 s the runs, and their bands, are different trajectories'); Newton iterations a step "
        f"{jr.iters:.2f}"
    )

    # --- time per step, interleaved
    mj = MujocoRun(mj_rigid_chain(n))
    stepper = mbvi.get_integrator("verlet")(system, DT)
    s0 = system.initial_state()

    def mbvi_simulate(k):
        t0 = time.perf_counter()
        mbvi.simulate(scene, k * DT, DT)
        return (time.perf_counter() - t0) / k

    def mbvi_engine(k):
        t0 = time.perf_counter()
        stepper.run(s0, 0.0, k, save_every=k)
        return (time.perf_counter() - t0) / k

    timers = {"joint coordinates, every state saved": jr.time, "MuJoCo Euler": mj.time,
              "mbvi simulate (defaults)": mbvi_simulate, "mbvi engine loop, last state": mbvi_engine}  # fmt: skip
    res: dict[str, list[float]] = {k: [] for k in timers}
    for k in (1000, nwhip):
        for key in res:
            res[key] = []
        for _ in range(args.rounds):
            for key, fn in timers.items():
                fn(k // 10)
                res[key].append(fn(k))
        base = res["MuJoCo Euler"]
        print(f"\n{k} steps from rest ({k * DT:g} s), {args.rounds} rounds: µs a step, and / MuJoCo Euler "
              f"(median [min–max] of the per-round ratio); joint coordinates: {jr.iters:.2f} Newton iterations "
              "a step")  # fmt: skip
        for key, xs in res.items():
            rat = [x / y for x, y in zip(xs, base, strict=True)]
            print(f"  {key:40s} {statistics.median(xs) * 1e6:8.2f}   {statistics.median(rat):.2f} "
                  f"[{min(rat):.2f}–{max(rat):.2f}]")  # fmt: skip


if __name__ == "__main__":
    main()
