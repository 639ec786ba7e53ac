"""mbvi's compiled engine against the field: MuJoCo 4 and a hand-written numba RATTLE, in one process.

Run: ``python benchmarks/bench_engine.py`` (first target of ``make bench``;
``--quick`` for a smoke run with small sizes, ``--rounds N`` to change the
number of rounds). Needs the ``bench`` extra (MuJoCo).

Cases (issue 10), all at dt = 1e-3 with gravity 9.81 m/s² along −z:

1. double pendulum: two 1 kg point masses on 1 m rods, released from the
   horizontal. mbvi ``verlet`` (two ``Rod``\\ s) against MuJoCo's Euler
   (two hinges, tiny spheres of 1 kg; ``mj_step(nstep=N)``, the C loop) and a
   hand-written numba RATTLE;
2. 32-link 3D rigid chain: solid cylinders of 1 kg, 1 m, radius 0.05 on
   revolute joints with axes alternating y and z, released horizontal along x;
3. 512-link point-mass chain (1 kg bobs on 1 m rods, released horizontal):
   mbvi against MuJoCo (ball joints, point-like masses) and the hand-written
   RATTLE, whose trajectory must agree with mbvi's to ~1e-8 (same computation);
4. serial-chain scaling of mbvi, N = 256 … 4096 links, with the fitted exponent;
5. batched double pendulums: ``mbvi.simulate_batch`` (B = 8192, both cores)
   against ``mujoco.rollout`` with 1 and 2 threads, and the compiled loop in
   lockstep chunks against the same loop member by member (``chunk=0``).

Rounds are interleaved: in each round every engine is timed on every case;
the table shows the median time per step over rounds and, for ratios, the
median and the min–max of the per-round ratio. Timings start from the same
initial state each time (same trajectory segment for every engine) and never
include model building; mbvi is timed through ``Integrator.integrate`` (one
compiled call, ``save_every`` = the step count), MuJoCo through
``mj_step(model, data, nstep=N)``.

Energy error: these systems start at rest with every mass at height 0, so
E(0) = 0 and a relative error "to |E(0)|" is undefined. The scale is the
potential-energy drop Δ = U(0) − U_min (the chain hanging straight down:
Σ m g × the depth of each mass centre); reported is max_t |E(t) − E(0)| / Δ
over the run, sampled every 10 steps (MuJoCo: ``mjENBL_ENERGY``, ``data.energy``
after ``mj_forward``).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numba import njit

try:
    import mujoco
    import mujoco.rollout
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit("bench_engine needs MuJoCo: pip install -e '.[bench]'") from exc

import mbvi

DT = 1e-3
G = 9.81
TOL = 1e-12  # mbvi's default relative constraint tolerance; the hand-written RATTLE uses the same
RADIUS = 0.05  # rigid-chain cylinders
POINT = 0.001  # radius of MuJoCo's "point" masses (inertia 4e-7 kg m² about their centre)


# ------------------------------------------------------------------------------------------------
# hand-written RATTLE for a chain of equal point masses hanging from the origin (numba, whole loop)
# ------------------------------------------------------------------------------------------------
@njit(cache=True)
def _factor(x, L, w, nrm, dg, lo):
    """Unit edge directions nrm at x and the LDLᵀ (Thomas) factor (dg, lo) of A = G M⁻¹ Gᵀ.

    Row i of G: g_i = (|d_i|² − L_i²)/(2 L_i), d_i = x_i − x_{i−1} (x_{−1} = origin),
    ∂g_i/∂x_i = n_i = d_i/L_i, ∂g_i/∂x_{i−1} = −n_i: A is tridiagonal,
    A_ii = w|n_i|²(1 or 2), A_i,i+1 = −w n_i·n_{i+1}.
    """
    n = len(L)
    for i in range(n):
        for c in range(3):
            nrm[i, c] = (x[i, c] - (x[i - 1, c] if i > 0 else 0.0)) / L[i]
    for i in range(n):
        a = w * (nrm[i, 0] ** 2 + nrm[i, 1] ** 2 + nrm[i, 2] ** 2) * (2.0 if i > 0 else 1.0)
        if i > 0:
            b = -w * (nrm[i - 1, 0] * nrm[i, 0] + nrm[i - 1, 1] * nrm[i, 1] + nrm[i - 1, 2] * nrm[i, 2])
            lo[i] = b / dg[i - 1]
            a -= lo[i] * b
        dg[i] = a


@njit(cache=True)
def _solve(dg, lo, r, y):
    """y = A⁻¹ r with the LDLᵀ factor of the tridiagonal A."""
    n = len(dg)
    y[0] = r[0]
    for i in range(1, n):
        y[i] = r[i] - lo[i] * y[i - 1]
    y[n - 1] /= dg[n - 1]
    for i in range(n - 2, -1, -1):
        y[i] = y[i] / dg[i] - lo[i + 1] * y[i + 1]


@njit(cache=True)
def _apply(nrm, w, lam, out):
    """out = M⁻¹ Gᵀ λ, per particle: w (λ_j n_j − λ_{j+1} n_{j+1})."""
    n = len(lam)
    for j in range(n):
        for c in range(3):
            out[j, c] = w * (lam[j] * nrm[j, c] - (lam[j + 1] * nrm[j + 1, c] if j + 1 < n else 0.0))


@njit(cache=True)
def _energy(x, v, m, g):
    e = 0.0
    for j in range(len(x)):
        e += 0.5 * m * (v[j, 0] ** 2 + v[j, 1] ** 2 + v[j, 2] ** 2) + m * g * x[j, 2]
    return e


@njit(cache=True)
def hand_rattle(x, v, L, m, g, h, nsteps, tol, maxiter, every, E):
    """RATTLE (Störmer–Verlet with SHAKE and the velocity projection) on x, v (N, 3), in place.

    SHAKE is the quasi-Newton iteration with A(x₀) = G(x₀) M⁻¹ G(x₀)ᵀ (the
    factor of the last velocity projection), stopped at max |g_i| / L_i ≤ tol.
    Energies every ``every`` steps go to E (E[0] = initial). Returns the number
    of SHAKE iterations, or −1 − k when step k did not converge.
    """
    n = len(L)
    w = 1.0 / m
    nrm0, nrm1 = np.empty((n, 3)), np.empty((n, 3))
    dg0, lo0, dg1, lo1 = np.empty(n), np.zeros(n), np.empty(n), np.zeros(n)
    x1, vh, dx = np.empty((n, 3)), np.empty((n, 3)), np.empty((n, 3))
    gv, dl = np.empty(n), np.empty(n)
    _factor(x, L, w, nrm0, dg0, lo0)
    if len(E):
        E[0] = _energy(x, v, m, g)
    iters = 0
    for k in range(nsteps):
        for j in range(n):  # kick h/2 and drift
            for c in range(3):
                vh[j, c] = v[j, c] - (0.5 * h * g if c == 2 else 0.0)
                x1[j, c] = x[j, c] + h * vh[j, c]
        ok = False
        for _ in range(maxiter):  # SHAKE
            r = 0.0
            for i in range(n):
                d0 = x1[i, 0] - (x1[i - 1, 0] if i > 0 else 0.0)
                d1 = x1[i, 1] - (x1[i - 1, 1] if i > 0 else 0.0)
                d2 = x1[i, 2] - (x1[i - 1, 2] if i > 0 else 0.0)
                gv[i] = (d0 * d0 + d1 * d1 + d2 * d2 - L[i] * L[i]) / (2.0 * L[i])
                r = max(r, abs(gv[i]) / L[i])
            if r <= tol:
                ok = True
                break
            iters += 1
            _solve(dg0, lo0, gv, dl)
            _apply(nrm0, w, dl, dx)
            for j in range(n):
                for c in range(3):
                    x1[j, c] -= dx[j, c]
                    vh[j, c] -= dx[j, c] / h
        if not ok:
            return -1 - k
        for j in range(n):  # kick h/2
            vh[j, 2] -= 0.5 * h * g
        _factor(x1, L, w, nrm1, dg1, lo1)
        for i in range(n):  # projection onto G(x₁) v = 0
            s = 0.0
            for c in range(3):
                s += nrm1[i, c] * (vh[i, c] - (vh[i - 1, c] if i > 0 else 0.0))
            gv[i] = s
        _solve(dg1, lo1, gv, dl)
        _apply(nrm1, w, dl, dx)
        for j in range(n):
            for c in range(3):
                v[j, c] = vh[j, c] - dx[j, c]
                x[j, c] = x1[j, c]
        nrm0, nrm1 = nrm1, nrm0
        dg0, dg1 = dg1, dg0
        lo0, lo1 = lo1, lo0
        if len(E) and (k + 1) % every == 0:
            E[(k + 1) // every] = _energy(x, v, m, g)
    return iters


class Hand:
    """The hand-written RATTLE on an N-link unit chain released horizontal along x."""

    def __init__(self, links: int):
        self.x0 = np.zeros((links, 3))
        self.x0[:, 0] = np.arange(1, links + 1)
        self.L = np.ones(links)
        self.iters = 0

    def run(self, nsteps: int, every: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x, v = self.x0.copy(), np.zeros_like(self.x0)
        E = np.zeros(nsteps // every + 1) if every else np.zeros(0)
        it = hand_rattle(x, v, self.L, 1.0, G, DT, nsteps, TOL, 60, max(every, 1), E)
        if it < 0:
            raise RuntimeError(f"hand-written RATTLE: SHAKE did not converge at step {-1 - it}")
        self.iters = it
        return x, v, E


# ------------------------------------------------------------------------------------------------
# scenes: mbvi and MuJoCo
# ------------------------------------------------------------------------------------------------
def point_chain(links: int) -> mbvi.Scene:
    """N bobs of 1 kg on 1 m rods, the first hanging from the origin, horizontal along x."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    for i in range(1, links + 1):
        s.add(mbvi.Particle(f"bob{i}", mass=1.0, position=(float(i), 0.0, 0.0)))
    s.add(mbvi.Rod("world", "bob1"))
    for i in range(1, links):
        s.add(mbvi.Rod(f"bob{i}", f"bob{i + 1}"))
    return s


def rigid_chain(links: int) -> mbvi.Scene:
    """Solid cylinders (1 kg, 1 m, radius 0.05) on revolute joints, axes y, z, y, …, along x."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    m, r, ell = 1.0, RADIUS, 1.0
    inertia = (m * r**2 / 2, m * (3 * r**2 + ell**2) / 12, m * (3 * r**2 + ell**2) / 12)
    parent = "world"
    for i in range(links):
        name = f"link{i}"
        s.add(mbvi.RigidBody(name, mass=m, inertia=inertia, position=(i + 0.5, 0.0, 0.0)))
        axis = (0.0, 1.0, 0.0) if i % 2 == 0 else (0.0, 0.0, 1.0)
        s.add(mbvi.Revolute(parent, name, anchor=(float(i), 0.0, 0.0), axis=axis))
        parent = name
    return s


def _mj_spec() -> mujoco.MjSpec:
    """An empty MuJoCo model: Euler, dt, gravity, no contacts (mbvi has none)."""
    spec = mujoco.MjSpec()
    spec.option.timestep = DT
    spec.option.gravity = [0.0, 0.0, -G]
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    return spec


def mj_point_chain(links: int, joint: str) -> mujoco.MjModel:
    """Nested bodies, each a joint at its start and a tiny 1 kg sphere 1 m further along x.

    Built with MjSpec: MJCF's XML parser refuses nesting deeper than ~500 bodies.
    """
    spec = _mj_spec()
    parent = spec.worldbody
    for i in range(links):
        body = parent.add_body(pos=[0.0 if i == 0 else 1.0, 0.0, 0.0])
        if joint == "hinge":
            body.add_joint(type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0.0, 1.0, 0.0])
        else:
            body.add_joint(type=mujoco.mjtJoint.mjJNT_BALL)
        body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[POINT, 0.0, 0.0], pos=[1.0, 0.0, 0.0], mass=1.0)
        parent = body
    return spec.compile()


def mj_rigid_chain(links: int) -> mujoco.MjModel:
    """Nested bodies, each a hinge (axes y, z, y, …) at its start and a 1 kg cylinder from 0 to 1 m along x."""
    spec = _mj_spec()
    parent = spec.worldbody
    for i in range(links):
        body = parent.add_body(pos=[0.0 if i == 0 else 1.0, 0.0, 0.0])
        body.add_joint(type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0.0, 1.0, 0.0] if i % 2 == 0 else [0.0, 0.0, 1.0])
        body.add_geom(
            type=mujoco.mjtGeom.mjGEOM_CYLINDER,
            fromto=[0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
            size=[RADIUS, 0.0, 0.0],
            mass=1.0,
        )
        parent = body
    return spec.compile()


# ------------------------------------------------------------------------------------------------
# timers: each returns seconds per step for one run from the initial state
# ------------------------------------------------------------------------------------------------
class MbviRun:
    def __init__(self, scene: mbvi.Scene, integrator: str = "verlet"):
        self.scene = scene
        self.system = mbvi.assemble(scene)
        self.stepper = mbvi.get_integrator(integrator)(self.system, DT)
        self.state = self.system.initial_state()
        self.q = self.state.q

    def time(self, nsteps: int) -> float:
        t0 = time.perf_counter()
        out = self.stepper.run(self.state, 0.0, nsteps, save_every=nsteps)
        dt = time.perf_counter() - t0
        self.q = out.q[-1]
        self.numpy_steps = out.counters.get("numpy_steps", 0)
        return dt / nsteps

    def energy_error(self, nsteps: int, scale: float) -> float:
        traj = mbvi.simulate(self.scene, t_end=nsteps * DT, dt=DT, save_every=10)
        return float(np.max(np.abs(traj.energy - traj.energy[0]))) / scale


class MujocoRun:
    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self.data = mujoco.MjData(model)

    def time(self, nsteps: int) -> float:
        mujoco.mj_resetData(self.model, self.data)
        t0 = time.perf_counter()
        mujoco.mj_step(self.model, self.data, nstep=nsteps)
        dt = time.perf_counter() - t0
        if not np.all(np.isfinite(self.data.qpos)):
            raise RuntimeError("MuJoCo state is not finite")
        return dt / nsteps

    def energy_error(self, nsteps: int, scale: float) -> float:
        m, d = self.model, self.data
        m.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
        try:
            mujoco.mj_resetData(m, d)
            mujoco.mj_forward(m, d)
            e0 = d.energy.sum()
            worst = 0.0
            for _ in range(nsteps // 10):
                mujoco.mj_step(m, d, nstep=10)
                mujoco.mj_forward(m, d)
                worst = max(worst, abs(d.energy.sum() - e0))
        finally:
            m.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_ENERGY)
        return worst / scale


class HandRun:
    def __init__(self, links: int):
        self.hand = Hand(links)

    def time(self, nsteps: int) -> float:
        t0 = time.perf_counter()
        self.x, _, _ = self.hand.run(nsteps)
        return (time.perf_counter() - t0) / nsteps

    def energy_error(self, nsteps: int, scale: float) -> float:
        _, _, E = self.hand.run(nsteps, every=10)
        return float(np.max(np.abs(E - E[0]))) / scale


def chain_drop(links: int) -> float:
    """U(0) − U_min of the unit point chain: Σ m g i."""
    return G * links * (links + 1) / 2


def best_of(fn: Callable[[], float], k: int) -> float:
    return min(fn() for _ in range(k))


class Stiff:
    """The steel cantilever of ``scenes/cantilever.py`` (20 segments, dt = 1e-3, stiff): compiled vs NumPy Newton."""

    def __init__(self, integrator: str, nsteps: int = 20):
        import importlib.util

        path = Path(__file__).parents[1] / "scenes" / "cantilever.py"
        spec = importlib.util.spec_from_file_location("cantilever", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        self.system = mbvi.assemble(module.build())
        self.stepper = mbvi.get_integrator(integrator)(self.system, module.DT)
        self.n = nsteps

    def compiled(self) -> float:
        t0 = time.perf_counter()
        self.stepper.integrate(self.system.initial_state(), 0.0, self.n, save_every=self.n)
        return (time.perf_counter() - t0) / self.n

    def numpy(self) -> float:
        t0 = time.perf_counter()
        mbvi.Integrator.integrate(self.stepper, self.system.initial_state(), 0.0, self.n, save_every=self.n)
        return (time.perf_counter() - t0) / self.n


# ------------------------------------------------------------------------------------------------
# batched double pendulums
# ------------------------------------------------------------------------------------------------
class Batch:
    """B double pendulums from the horizontal with random in-plane velocities, in mbvi and MuJoCo."""

    def __init__(self, B: int, nsteps: int):
        self.B, self.n = B, nsteps
        self.scene = point_chain(2)
        system = mbvi.assemble(self.scene)
        s0 = system.initial_state()
        rng = np.random.default_rng(0)
        V = rng.normal(scale=0.5, size=(B, system.nq))
        V[:, 1::3] = 0.0  # in the x-z plane, the plane of MuJoCo's hinges
        self.Q = np.repeat(s0.q[None], B, axis=0)
        self.V = np.array([system.project_velocity(s0.q, v) for v in V])
        self.system = system
        # the same members for MuJoCo: bob velocities (0, 0, vz1), (0, 0, vz2) at the horizontal are
        # hinge rates ω1 = −vz1, ω2 = 2 vz1 − vz2 (hinge axis y: ŷ × x̂ = −ẑ)
        self.model = mj_point_chain(2, "hinge")
        data = mujoco.MjData(self.model)
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        size = mujoco.mj_stateSize(self.model, spec)
        self.S0 = np.zeros((B, size))
        for b in range(B):
            vz1, vz2 = self.V[b, 2], self.V[b, 5]
            data.qpos[:] = 0.0
            data.qvel[:] = (-vz1, 2 * vz1 - vz2)
            mujoco.mj_getState(self.model, data, self.S0[b], spec)
        self.out = np.empty((B, nsteps, size))
        # check the mapping: MuJoCo's kinetic energy of member 0 equals mbvi's
        self.model.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
        mujoco.mj_setState(self.model, data, self.S0[0], spec)
        mujoco.mj_forward(self.model, data)
        self.model.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_ENERGY)
        self.mapping_error = abs(data.energy[1] - 0.5 * float(self.V[0] @ self.V[0]))

    def mbvi_api(self) -> float:
        """``mbvi.simulate_batch`` end to end (projection, trajectories included): seconds per pendulum-step."""
        t0 = time.perf_counter()
        mbvi.simulate_batch(self.scene, t_end=self.n * DT, dt=DT, initial_states=(self.Q, self.V), save_every=self.n)
        return (time.perf_counter() - t0) / (self.B * self.n)

    def mbvi_engine(self, chunk: int | None = None) -> float:
        """The compiled batch loop alone (``mbvi.engine.runner.run_batch``); ``chunk=0``: member by member."""
        from mbvi.engine import runner

        stepper = mbvi.get_integrator("verlet")(self.system, DT)
        model = self.system.engine_model()
        t0 = time.perf_counter()
        _, _, _, _, info = runner.run_batch(
            model,
            stepper.method(),
            self.Q,
            self.V,
            t0=0.0,
            h=DT,
            nsteps=self.n,
            save_every=self.n,
            tol=stepper.tol,
            maxiter=stepper.maxiter,
            length_scale=float(self.system.length_scale),
            max_turn=stepper.max_turn,
            chunk=chunk,
        )
        dt = time.perf_counter() - t0
        if np.any(info[:, 0] != 0):
            raise RuntimeError(f"mbvi batch: {int(np.sum(info[:, 0] != 0))} members failed")
        return dt / (self.B * self.n)

    def mujoco(self, nthread: int) -> float:
        datas = [mujoco.MjData(self.model) for _ in range(nthread)]
        t0 = time.perf_counter()
        mujoco.rollout.rollout(self.model, datas if nthread > 1 else datas[0], self.S0, nstep=self.n, state=self.out)
        return (time.perf_counter() - t0) / (self.B * self.n)


# ------------------------------------------------------------------------------------------------
# reporting
# ------------------------------------------------------------------------------------------------
def med(xs: list[float]) -> float:
    return statistics.median(xs)


def ratio(a: list[float], b: list[float]) -> str:
    """Median and min–max over rounds of a[r] / b[r]."""
    r = [x / y for x, y in zip(a, b, strict=True)]
    return f"{med(r):.3g} [{min(r):.3g}–{max(r):.3g}]"


def us(xs: list[float]) -> str:
    return f"{med(xs) * 1e6:.3g}"


def cache_state() -> str:
    """Whether numba's cache holds the serial loop and the batch loop (``bench_first_use.py`` times them cold)."""
    import numba

    import mbvi.engine  # runs the cache consistency check (drops stale files)

    root = Path(numba.config.CACHE_DIR) if numba.config.CACHE_DIR else Path(mbvi.engine.__file__).parent / "__pycache__"
    loops = {"serial loop": "loop.run_rattle", "batch loop": "lockstep.run_chunk"}
    have = {what: any(root.rglob(f"{stem}-*.nbi")) for what, stem in loops.items()}
    return ", ".join(f"{f}: {'warm' if ok else 'cold'}" for f, ok in have.items())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes and 2 rounds (a smoke test)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 5, 2 with --quick)")
    args = ap.parse_args(argv)
    quick = args.quick
    rounds = args.rounds or (2 if quick else 5)
    if quick:
        n_dp, n_rigid, t_rigid, n_long, n_long_mj, long_links = 2000, 200, 1000, 200, 5, 64
        sizes, n_scale, B, n_batch = [64, 128, 256], 100, 256, 100
    else:
        n_dp, n_rigid, t_rigid, n_long, n_long_mj, long_links = 20_000, 1000, 10_000, 1000, 5, 512
        sizes, n_scale, B, n_batch = [256, 512, 1024, 2048, 4096], 300, 8192, 100

    print(
        f"mbvi {mbvi.__version__}, MuJoCo {mujoco.__version__}; dt = {DT}, {rounds} rounds"
        + (" (--quick: small sizes)" if quick else "")
    )

    # --- compilation: first calls ------------------------------------------------------------------
    cache = cache_state()
    dp = point_chain(2)
    t0 = time.perf_counter()
    mbvi.simulate(dp, t_end=10 * DT, dt=DT)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    mbvi.simulate(dp, t_end=10 * DT, dt=DT)
    second = time.perf_counter() - t0
    s0 = mbvi.assemble(dp).initial_state()
    t0 = time.perf_counter()
    mbvi.simulate_batch(dp, t_end=10 * DT, dt=DT, initial_states=([s0, s0]), save_every=10)
    first_batch = time.perf_counter() - t0
    t0 = time.perf_counter()
    Hand(2).run(10)
    first_hand = time.perf_counter() - t0
    print(
        f"numba cache before the first call ({cache}); first mbvi.simulate {first:.2f} s "
        f"(second {second * 1e3:.1f} ms), first simulate_batch {first_batch:.2f} s, "
        f"hand-written RATTLE first call {first_hand:.2f} s"
    )

    # --- setup -------------------------------------------------------------------------------------
    t_setup = time.perf_counter()
    cases: dict[str, dict[str, Callable[[], float]]] = {}
    m_dp, j_dp, h_dp = MbviRun(dp), MujocoRun(mj_point_chain(2, "hinge")), HandRun(2)
    cases["dp"] = {
        "mbvi": lambda: best_of(lambda: m_dp.time(n_dp), 3),
        "mujoco": lambda: best_of(lambda: j_dp.time(n_dp), 3),
        "hand": lambda: best_of(lambda: h_dp.time(n_dp), 3),
    }
    m_rc, j_rc = MbviRun(rigid_chain(32)), MujocoRun(mj_rigid_chain(32))
    cases["rigid"] = {"mbvi": lambda: m_rc.time(n_rigid), "mujoco": lambda: j_rc.time(n_rigid)}
    m_lc, j_lc, h_lc = (
        MbviRun(point_chain(long_links)),
        MujocoRun(mj_point_chain(long_links, "ball")),
        HandRun(long_links),
    )
    cases["long"] = {
        "mbvi": lambda: m_lc.time(n_long),
        "mujoco": lambda: j_lc.time(n_long_mj),
        "hand": lambda: h_lc.time(n_long),
    }
    scaling = {n: MbviRun(point_chain(n)) for n in sizes}
    cases["scaling"] = {str(n): (lambda r=r: r.time(n_scale)) for n, r in scaling.items()}
    implicit = {
        (links, name): MbviRun(point_chain(links), name)
        for links in (2, 32)
        for name in ("verlet", "midpoint", "implicit_euler")
    }
    cases["implicit"] = {f"{n} {links}": (lambda r=r, k=n_dp // links: best_of(lambda: r.time(k), 3))
                         for (links, n), r in implicit.items()}  # fmt: skip
    stiff = {name: Stiff(name) for name in ("midpoint", "implicit_euler")}
    for name, st in stiff.items():
        cases["implicit"][f"{name} stiff"] = st.compiled
        cases["implicit"][f"{name} stiff numpy"] = st.numpy
    batch = Batch(B, n_batch)
    cases["batch"] = {
        "mbvi": batch.mbvi_api,
        "mbvi engine": batch.mbvi_engine,
        "member by member": lambda: batch.mbvi_engine(chunk=0),
        "mujoco 1 thread": lambda: batch.mujoco(1),
        "mujoco 2 threads": lambda: batch.mujoco(2),
    }
    # warm-up: one untimed call of each (MuJoCo's thread pool, first-touch memory)
    for case in cases.values():
        for fn in case.values():
            fn()
    print(f"setup and warm-up {time.perf_counter() - t_setup:.1f} s")

    # --- interleaved rounds ------------------------------------------------------------------------
    res: dict[str, dict[str, list[float]]] = {c: {e: [] for e in engines} for c, engines in cases.items()}
    t_rounds = time.perf_counter()
    for _ in range(rounds):
        for c, engines in cases.items():
            for e, fn in engines.items():
                fn()  # untimed first: right after another heavy case a timing runs up to 2x slow for some 20 ms
                res[c][e].append(fn())
    t_rounds = time.perf_counter() - t_rounds

    # --- same computation: mbvi and the hand-written RATTLE -----------------------------------------
    agree, iters = {}, {}
    for name, mr, hr, n in (("dp", m_dp, h_dp, 1000), ("long", m_lc, h_lc, n_long)):
        mr.time(n)
        hr.time(n)
        agree[name] = float(np.max(np.abs(mr.q.reshape(-1, 3) - hr.x)))
        iters[name] = hr.hand.iters / n

    # --- energy errors -----------------------------------------------------------------------------
    drop_dp = chain_drop(2)
    drop_rc = G * sum(i + 0.5 for i in range(32))
    en = {
        "dp": {
            "mbvi": m_dp.energy_error(n_dp, drop_dp),
            "mujoco": j_dp.energy_error(n_dp, drop_dp),
            "hand": h_dp.energy_error(n_dp, drop_dp),
        },
        "rigid": {"mbvi": m_rc.energy_error(t_rigid, drop_rc), "mujoco": j_rc.energy_error(t_rigid, drop_rc)},
    }

    # --- table -------------------------------------------------------------------------------------
    print(
        f"\nrounds took {t_rounds:.1f} s. Times: median over rounds, µs per step; ratios: median "
        f"[min–max] over rounds of the per-round ratio."
    )
    print("Energy error: max_t |E(t) − E(0)| / (U(0) − U_min), U_min = hanging straight down.\n")
    hdr = f"{'case':<34} {'mbvi':>9} {'MuJoCo':>9} {'hand':>9}  {'mbvi/MuJoCo':<22} {'mbvi/hand':<22} energy error"
    print(hdr)
    print("-" * len(hdr))
    r = res["dp"]
    e = en["dp"]
    print(
        f"{'double pendulum, ' + str(n_dp) + ' steps':<34} {us(r['mbvi']):>9} {us(r['mujoco']):>9} "
        f"{us(r['hand']):>9}  {ratio(r['mbvi'], r['mujoco']):<22} {ratio(r['mbvi'], r['hand']):<22} "
        f"mbvi {e['mbvi']:.2g}, MuJoCo {e['mujoco']:.2g}, hand {e['hand']:.2g} over {n_dp * DT:g} s"
    )
    r = res["rigid"]
    e = en["rigid"]
    print(
        f"{'32-link rigid chain, ' + str(n_rigid) + ' steps':<34} {us(r['mbvi']):>9} {us(r['mujoco']):>9} "
        f"{'':>9}  {ratio(r['mbvi'], r['mujoco']):<22} {'':<22} "
        f"mbvi {e['mbvi']:.2g}, MuJoCo {e['mujoco']:.2g} over {t_rigid * DT:g} s"
    )
    r = res["long"]
    print(
        f"{f'{long_links}-link point chain, {n_long} steps':<34} {us(r['mbvi']):>9} {us(r['mujoco']):>9} "
        f"{us(r['hand']):>9}  {ratio(r['mbvi'], r['mujoco']):<22} {ratio(r['mbvi'], r['hand']):<22} "
        f"(MuJoCo: ball joints, {n_long_mj} steps)"
    )
    print(
        f"\nMuJoCo / mbvi on the {long_links}-link chain: "
        f"{ratio(res['long']['mujoco'], res['long']['mbvi'])} (mbvi faster by this factor)"
    )
    print(
        f"hand-written RATTLE: {iters['dp']:.2f} SHAKE iterations per step (double pendulum), "
        f"{iters['long']:.2f} ({long_links} links)"
    )
    for name, d in agree.items():
        flag = "OK" if d < 1e-8 else "MISMATCH (> 1e-8)"
        what = "double pendulum after 1000 steps" if name == "dp" else f"{long_links}-link chain after {n_long} steps"
        print(f"mbvi vs hand-written RATTLE, {what}: max |Δx| = {d:.2g} m  {flag}")

    print(f"\nserial chain scaling (mbvi verlet, {n_scale} steps from the horizontal):")
    print(f"{'N':>6} {'µs/step':>9} {'ns/link':>8}")
    for n in sizes:
        t = med(res["scaling"][str(n)])
        print(f"{n:>6} {t * 1e6:>9.1f} {t * 1e9 / n:>8.1f}")
    exps = [
        math.log(res["scaling"][str(sizes[-1])][k] / res["scaling"][str(sizes[0])][k]) / math.log(sizes[-1] / sizes[0])
        for k in range(rounds)
    ]
    print(
        f"fitted exponent {sizes[0]} → {sizes[-1]}: {med(exps):.3f} [{min(exps):.3f}–{max(exps):.3f}]"
        f" (least squares over all sizes: "
        f"{np.polyfit(np.log(sizes), np.log([med(res['scaling'][str(n)]) for n in sizes]), 1)[0]:.3f})"
    )

    r = res["implicit"]
    print("\nthe implicit integrators, compiled (a fixed point around SHAKE), against verlet (µs per step):")
    for links in (2, 32):
        print(
            f"  {links:>2}-link point chain: verlet {us(r[f'verlet {links}'])}, "
            f"midpoint {us(r[f'midpoint {links}'])} ({ratio(r[f'midpoint {links}'], r[f'verlet {links}'])}), "
            f"implicit_euler {us(r[f'implicit_euler {links}'])} "
            f"({ratio(r[f'implicit_euler {links}'], r[f'verlet {links}'])}); "
            f"Newton steps {implicit[(links, 'midpoint')].numpy_steps}, "
            f"{implicit[(links, 'implicit_euler')].numpy_steps}"
        )
    for name in stiff:
        print(
            f"  steel cantilever (stiff, compiled Newton), {name}: {us(r[f'{name} stiff'])} µs per step, "
            f"NumPy Newton {us(r[f'{name} stiff numpy'])} ("
            f"{ratio(r[f'{name} stiff numpy'], r[f'{name} stiff'])} × faster compiled)"
        )

    r = res["batch"]
    print(f"\nbatched double pendulums, B = {B}, {n_batch} steps (pendulum-steps per second, median [min–max]):")
    for e_, xs in r.items():
        rates = [1.0 / x for x in xs]
        print(f"  {e_:<17} {med(rates):>10.3g}  [{min(rates):.3g}–{max(rates):.3g}]")
    print(
        f"  mbvi / MuJoCo 2 threads: {ratio(r['mujoco 2 threads'], r['mbvi'])} (rate ratio); "
        f"mbvi / MuJoCo 1 thread: {ratio(r['mujoco 1 thread'], r['mbvi'])}; engine / MuJoCo 2 threads: "
        f"{ratio(r['mujoco 2 threads'], r['mbvi engine'])}"
    )
    print(
        f"  lockstep chunks / member by member (the same compiled loop, chunk=0): "
        f"{ratio(r['member by member'], r['mbvi engine'])}"
    )
    print(
        f"  (same initial states as hinge rates: |ΔT| of member 0 = {batch.mapping_error:.2g} J, "
        "the spin of MuJoCo's spheres)"
    )


if __name__ == "__main__":
    main()
