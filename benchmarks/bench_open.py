"""The open engine: what users write themselves, against the built-ins and MuJoCo, in one process.

Run: ``python benchmarks/bench_open.py`` (a target of ``make bench``; ``--quick`` for a smoke run,
``--rounds N``). Needs the ``bench`` extra (MuJoCo) and the example plugins (``make setup`` installs them).

Cases, all at dt = 1e-3, gravity 9.81 m/s² along −z; µs per step, the median over interleaved rounds, ratios
as the median [min–max] of the per-round ratio. Each case has a *held-apart* variant (other masses, lengths,
gains) so that no figure is a kernel tuned to one geometry:

1. a plugin force law: the double pendulum under ``QuadraticDrag`` (the plugin's compiled kernel) against
   the same under the built-in ``Drag``; variant: a 3-link chain of other masses;
2. plugin integrators: ``leapfrog`` (a compiled step kernel) against ``verlet``; ``forest_ruth`` (a
   3-stage composition) against three ``verlet`` steps;
3. a controller: a rigid pendulum on a hinge held by a PD torque written as ``ExternalTorque(arm,
   lambda t, state: …)`` (compiled from the user's function) against the same law built in
   (``TorsionSpring`` + ``JointDamping``), against the same function called back as Python, and against
   MuJoCo stepped from Python (``d.qfrc_applied`` set and ``mj_step`` once per step); and the built-in law
   at gains a robot's controller takes (h kd/2J = 0.77), whose drift's velocity fixed point is mixed
   (Anderson) instead of taken in substeps, against the same law at mild gains;
4. ``mbvi.Simulator`` in a Python loop (two ``view`` reads, ``set_load``, ``step``) against the same MuJoCo
   loop;
5. the seeds' double pendulum in its angles (``LagrangianSystem``, ``symplectic_euler_b``, ``verlet``,
   ``midpoint``) against the particle double pendulum under ``verlet``; and, in fresh processes, the time
   to build the system and have its compiled kernels, cold (an empty kernel cache) and cached;
6. what ``simulate`` costs with its defaults (``save_every=1``, the trajectory's derived quantities) beside
   the engine loop alone, on the 32-link rigid chain of ``bench_engine.py`` whipping for 20 s (and its first
   second, the length ``bench_engine.py`` times), against MuJoCo's Euler stepping alone and MuJoCo's
   ``rollout`` recording every state with its energy on (what a MuJoCo user gets as a trajectory); and the
   first second through ``simulate`` of a System assembled once (as MuJoCo's runs reuse one compiled model).

The engine loop is timed through ``Integrator.run`` (one compiled call, ``save_every`` = the step count);
``simulate`` as a user calls it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:
    import mujoco
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise SystemExit("bench_open needs MuJoCo: pip install -e '.[bench]'") from exc

import numpy as np

import mbvi

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import MujocoRun, mj_rigid_chain, rigid_chain

DT = 1e-3
G = 9.81
ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------ scenes
def pendulum_pair(drag=None, masses=(1.0, 1.0), links: int = 2) -> mbvi.Scene:
    """Point masses on 1 m rods from the origin, released horizontal; ``drag(body)`` adds a drag element."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    parent = "world"
    for i in range(links):
        name = f"b{i}"
        s.add(mbvi.Particle(name, mass=masses[i % len(masses)], position=(i + 1.0, 0.0, 0.0)))
        s.add(mbvi.Rod(parent, name))
        if drag is not None:
            s.add(drag(name))
        parent = name
    return s


def arm(torque=None, m=1.0, d=0.5, inertia=(0.01, 0.01, 0.002)) -> mbvi.Scene:
    """A rigid arm of mass m (kg), centre d (m) below a hinge about y at the origin."""
    s = mbvi.Scene(gravity=(0.0, 0.0, -G))
    s.add(mbvi.RigidBody("arm", mass=m, inertia=inertia, position=(0.0, 0.0, -d)))
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    if torque is not None:
        s.add(mbvi.ExternalTorque("arm", torque=torque, name="motor"))
    return s


def pd_function(kp: float, kd: float, target: float):
    def pd(t, state):
        return (0.0, kp * (target - state.joint_angle("hinge")) - kd * state.joint_rate("hinge"), 0.0)

    return pd


def pd_python(kp: float, kd: float, target: float):
    gains = {"kp": kp, "kd": kd}  # a dict: numba cannot compile it, so the function is called back as Python

    def pd(t, state):
        return (0.0, gains["kp"] * (target - state.joint_angle("hinge")) - gains["kd"] * state.joint_rate("hinge"),
                0.0)  # fmt: skip

    return pd


def pd_built_in(kp: float, kd: float, target: float, **kw) -> mbvi.Scene:
    s = arm(**kw)
    s.add(mbvi.TorsionSpring("hinge", kp, rest_angle=target))
    s.add(mbvi.JointDamping("hinge", kd))
    return s


def mj_arm(m=1.0, d=0.5, inertia=(0.01, 0.01, 0.002)):
    spec = mujoco.MjSpec()
    spec.option.timestep = DT
    spec.option.gravity = [0.0, 0.0, -G]
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_EULER
    spec.option.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    body = spec.worldbody.add_body(pos=[0, 0, 0])
    body.add_joint(type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 1, 0])
    body.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.01, 0, 0], pos=[0, 0, -d], mass=m)
    model = spec.compile()
    model.body_inertia[1] = inertia
    return model


# ------------------------------------------------------------------------------------------------ timers
def engine(scene, integrator: str = "verlet"):
    """A timer of the engine loop: seconds per step of one compiled call from the initial state."""
    system = mbvi.assemble(scene)
    stepper = mbvi.get_integrator(integrator)(system, DT)
    state = system.initial_state()
    stepper.run(state, 0.0, 10, save_every=10)

    def time_it(n: int) -> float:
        t0 = time.perf_counter()
        stepper.run(state, 0.0, n, save_every=n)
        return (time.perf_counter() - t0) / n

    return time_it


def lagrangian(system, integrator: str):
    from mbvi.lagrangian.integrators import INTEGRATORS

    stepper = INTEGRATORS[integrator](system, DT)
    s = system.initial_state()
    stepper.integrate(s.q, s.v, 0.0, 10, 10)

    def time_it(n: int) -> float:
        t0 = time.perf_counter()
        stepper.integrate(s.q, s.v, 0.0, n, n)
        return (time.perf_counter() - t0) / n

    return time_it


def simulate_defaults(scene, integrator: str = "verlet"):
    mbvi.simulate(scene, 10 * DT, DT, integrator)

    def time_it(n: int) -> float:
        t0 = time.perf_counter()
        mbvi.simulate(scene, n * DT, DT, integrator)
        return (time.perf_counter() - t0) / n

    return time_it


def derived_share(scene, read_all: bool = False):
    """Seconds per step of the trajectory's derived quantities: what ``simulate`` computes (the energies; the
    momenta and the constraint error wait until read), or, with ``read_all``, everything once read."""
    cache: dict = {}

    def time_it(n: int) -> float:
        if n not in cache:
            traj = mbvi.simulate(scene, n * DT, DT)
            cache[n] = (mbvi.assemble(scene), traj.t, traj.q, traj.v)
        system, t, q, v = cache[n]
        t0 = time.perf_counter()
        traj = mbvi.Trajectory.from_states(system, t, q, v)
        if read_all:
            traj.momentum, traj.angular_momentum, traj.constraint_error  # noqa: B018 - computed when read
        return (time.perf_counter() - t0) / n

    return time_it


def mujoco_rollout(model):
    """A timer of MuJoCo's ``rollout``: every state recorded, the energy computed at each step."""
    from mujoco import rollout

    data, spec = mujoco.MjData(model), mujoco.mjtState.mjSTATE_FULLPHYSICS

    def time_it(n: int) -> float:
        model.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_ENERGY
        try:
            mujoco.mj_resetData(model, data)
            s0 = np.zeros(mujoco.mj_stateSize(model, spec))
            mujoco.mj_getState(model, data, s0, spec)
            t0 = time.perf_counter()
            states, _ = rollout.rollout(model, data, s0[None], nstep=n)
            seconds = (time.perf_counter() - t0) / n
        finally:
            model.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_ENERGY)
        if not np.all(np.isfinite(states)):
            raise RuntimeError("MuJoCo's rollout is not finite")
        return seconds

    return time_it


def mujoco_python_loop(model, kp: float, kd: float, target: float):
    data = mujoco.MjData(model)

    def time_it(n: int) -> float:
        mujoco.mj_resetData(model, data)
        qpos, qvel, qfrc = data.qpos, data.qvel, data.qfrc_applied
        t0 = time.perf_counter()
        for _ in range(n):
            qfrc[0] = kp * (target - qpos[0]) - kd * qvel[0]
            mujoco.mj_step(model, data)
        return (time.perf_counter() - t0) / n

    return time_it


def simulator_loop(scene, kp: float, kd: float, target: float):
    def time_it(n: int) -> float:
        sim = mbvi.Simulator(scene, DT)
        sim.step()
        view, set_load, step = sim.view, sim.set_load, sim.step
        t0 = time.perf_counter()
        for _ in range(n):
            theta, rate = view.joint_angle("hinge"), view.joint_rate("hinge")
            set_load("motor", (0.0, kp * (target - theta) - kd * rate, 0.0))
            step()
        return (time.perf_counter() - t0) / n

    time_it(100)
    return time_it


def cold_and_cached() -> list[tuple[float, float]]:
    """Seconds to build the angle double pendulum and have its compiled kernels, in fresh processes: with an
    empty kernel cache, then with the cache the first left (the engine's own loop cached in both). Each as
    (after numba's once-per-process start, which any compiled call pays, is done; including it)."""
    script = (
        "import time, sys; sys.path.insert(0, {!r})\n"
        "import numba, sympy, mbvi, mbvi.engine.lagrange, mbvi.lagrangian.codegen\n"
        "from scene_loader import load_scene\n"
        "warm = {}\n"
        "t0 = time.perf_counter()\n"
        "if warm: numba.njit(lambda x: x + 1)(1)\n"
        "t1 = time.perf_counter(); s = load_scene('double_pendulum_angles').build(); s.compiled_kernels()\n"
        "print(time.perf_counter() - t1, time.perf_counter() - t0)\n"
    )
    out = []
    for warm in (True, False):
        with tempfile.TemporaryDirectory() as cache:
            env = {**os.environ, "MBVI_CACHE_DIR": cache, "MBVI_QUIET": "1"}
            for _ in range(2):
                code = script.format(str(ROOT / "tests"), warm)
                done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
                out.append(float(done.stdout.split()[0 if warm else 1]))
    return [(out[0], out[2]), (out[1], out[3])]


# ------------------------------------------------------------------------------------------------ report
def med(xs: list[float]) -> float:
    return statistics.median(xs)


def ratio(a: list[float], b: list[float]) -> str:
    r = [x / y for x, y in zip(a, b, strict=True)]
    return f"{med(r):.2f} [{min(r):.2f}–{max(r):.2f}]"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="short runs and 2 rounds (a smoke test)")
    ap.add_argument("--rounds", type=int, default=None)
    args = ap.parse_args(argv)
    rounds = args.rounds or (2 if args.quick else 5)
    n = 2000 if args.quick else 20000
    nchain = 200 if args.quick else 20000
    print(f"mbvi {mbvi.__version__}, MuJoCo {mujoco.__version__}; dt = {DT}, {rounds} rounds, {n} steps a case")

    from mbvi_quadratic_drag import QuadraticDrag

    from mbvi.lagrangian import LagrangianSystem  # noqa: F401 - sympy loaded before timing

    sys.path.insert(0, str(ROOT / "tests"))
    from scene_loader import load_scene

    angles = load_scene("double_pendulum_angles").build
    kp, kd, target = 20.0, 2.0, 0.5
    kp2, kd2, target2 = 35.0, 1.2, -0.3  # the held-apart controller
    other = dict(m=2.0, d=0.3, inertia=(0.02, 0.03, 0.015))
    timers = {
        # 1. plugin force law
        "drag: QuadraticDrag (plugin kernel)": engine(pendulum_pair(lambda b: QuadraticDrag(b, coefficient=0.4))),
        "drag: Drag (built-in)": engine(pendulum_pair(lambda b: mbvi.Drag(b, coefficient=0.4))),
        "drag, 3 links: QuadraticDrag": engine(
            pendulum_pair(lambda b: QuadraticDrag(b, coefficient=0.3), (0.5, 2.0, 1.0), 3)
        ),
        "drag, 3 links: Drag": engine(pendulum_pair(lambda b: mbvi.Drag(b, coefficient=0.3), (0.5, 2.0, 1.0), 3)),
        # 2. plugin integrators
        "leapfrog (plugin step kernel)": engine(pendulum_pair(), "leapfrog"),
        "verlet": engine(pendulum_pair()),
        "forest_ruth (3-stage composition)": engine(pendulum_pair(), "forest_ruth"),
        # 3. controllers
        "PD: (t, state) function, compiled": engine(arm(pd_function(kp, kd, target))),
        "PD: built in": engine(pd_built_in(kp, kd, target)),
        "PD: function called as Python": engine(arm(pd_python(kp, kd, target))),
        "PD: MuJoCo, Python loop": mujoco_python_loop(mj_arm(), kp, kd, target),
        "PD other arm: compiled": engine(arm(pd_function(kp2, kd2, target2), **other)),
        "PD other arm: built in": engine(pd_built_in(kp2, kd2, target2, **other)),
        "PD other arm: MuJoCo, Python loop": mujoco_python_loop(mj_arm(**other), kp2, kd2, target2),
        # stiff gains (h kd/2J = 0.77, 0.71): the drift's velocity fixed point mixed, not taken in substeps
        "stiff PD: built in": engine(pd_built_in(50.0, 400.0, target)),
        "stiff PD other arm: built in": engine(pd_built_in(50.0, 300.0, target2, **other)),
        # 4. Simulator
        "Simulator loop": simulator_loop(arm((0.0, 0.0, 0.0)), kp, kd, target),
        "Simulator loop, other arm": simulator_loop(arm((0.0, 0.0, 0.0), **other), kp2, kd2, target2),
        # 5. Lagrangian
        "angles: symplectic_euler_b": lagrangian(angles(), "symplectic_euler_b"),
        "angles: verlet": lagrangian(angles(), "verlet"),
        "angles: midpoint": lagrangian(angles(), "midpoint"),
        "angles, m2 = 2, l2 = 0.7: symplectic_euler_b": lagrangian(angles(m2=2.0, l2=0.7), "symplectic_euler_b"),
        "particles: verlet": engine(pendulum_pair()),
        # 6. simulate with defaults
        "32-link chain: simulate (defaults)": simulate_defaults(rigid_chain(32)),
        "32-link chain: engine loop": engine(rigid_chain(32)),
        "32-link chain: derived quantities simulate computes": derived_share(rigid_chain(32)),
        "32-link chain: every derived quantity, once read": derived_share(rigid_chain(32), read_all=True),
        "32-link chain: MuJoCo Euler": MujocoRun(mj_rigid_chain(32)).time,
        "32-link chain: MuJoCo rollout, states and energy": mujoco_rollout(mj_rigid_chain(32)),
        "32-link, 1 s: simulate (defaults)": simulate_defaults(rigid_chain(32)),
        "32-link, 1 s: simulate of an assembled System": simulate_defaults(mbvi.assemble(rigid_chain(32))),
        "32-link, 1 s: engine loop": engine(rigid_chain(32)),
        "32-link, 1 s: MuJoCo Euler": MujocoRun(mj_rigid_chain(32)).time,
    }
    steps = {k: (nchain if k.startswith("32-link chain") else n) for k in timers}
    steps.update({k: min(nchain, 1000) for k in timers if k.startswith("32-link, 1 s")})
    times: dict[str, list[float]] = {k: [] for k in timers}
    t_start = time.perf_counter()
    for _ in range(rounds):
        for key, fn in timers.items():
            # each case warms up first: right after a heavy case (a Python callback's run, the 32-link NumPy
            # arrays) the next timing runs up to 2x slow for some 20 ms, whatever it is
            fn(max(steps[key] // 10, 10))
            times[key].append(fn(steps[key]))
    print(f"rounds took {time.perf_counter() - t_start:.1f} s\n")
    print(f"{'case':56s} {'µs/step':>9s}")
    for key, xs in times.items():
        print(f"{key:56s} {med(xs) * 1e6:9.3f}")
    t = times
    comparisons = [
        ("QuadraticDrag / Drag", "drag: QuadraticDrag (plugin kernel)", "drag: Drag (built-in)"),
        ("QuadraticDrag / Drag, 3 links", "drag, 3 links: QuadraticDrag", "drag, 3 links: Drag"),
        ("leapfrog / verlet", "leapfrog (plugin step kernel)", "verlet"),
        ("PD compiled / built in", "PD: (t, state) function, compiled", "PD: built in"),
        ("PD compiled / MuJoCo Python loop", "PD: (t, state) function, compiled", "PD: MuJoCo, Python loop"),
        ("PD called as Python / built in", "PD: function called as Python", "PD: built in"),
        ("PD other arm: compiled / built in", "PD other arm: compiled", "PD other arm: built in"),
        ("PD other arm: compiled / MuJoCo", "PD other arm: compiled", "PD other arm: MuJoCo, Python loop"),
        ("stiff PD / PD, built in", "stiff PD: built in", "PD: built in"),
        ("stiff PD / PD, built in, other arm", "stiff PD other arm: built in", "PD other arm: built in"),
        ("Simulator loop / MuJoCo Python loop", "Simulator loop", "PD: MuJoCo, Python loop"),
        ("Simulator loop, other arm / MuJoCo", "Simulator loop, other arm", "PD other arm: MuJoCo, Python loop"),
        ("angles SEB / particles verlet", "angles: symplectic_euler_b", "particles: verlet"),
        ("angles verlet / particles verlet", "angles: verlet", "particles: verlet"),
        ("angles midpoint / particles verlet", "angles: midpoint", "particles: verlet"),
        (
            "angles (m2 = 2, l2 = 0.7) SEB / particles",
            "angles, m2 = 2, l2 = 0.7: symplectic_euler_b",
            "particles: verlet",
        ),
        ("32-link: simulate / MuJoCo Euler", "32-link chain: simulate (defaults)", "32-link chain: MuJoCo Euler"),
        (
            "32-link: simulate / MuJoCo rollout",
            "32-link chain: simulate (defaults)",
            "32-link chain: MuJoCo rollout, states and energy",
        ),
        ("32-link: engine loop / MuJoCo Euler", "32-link chain: engine loop", "32-link chain: MuJoCo Euler"),
        ("32-link: simulate / engine loop", "32-link chain: simulate (defaults)", "32-link chain: engine loop"),
        (
            "32-link: derived quantities / simulate",
            "32-link chain: derived quantities simulate computes",
            "32-link chain: simulate (defaults)",
        ),
        ("32-link, 1 s: simulate / MuJoCo Euler", "32-link, 1 s: simulate (defaults)", "32-link, 1 s: MuJoCo Euler"),
        (
            "32-link, 1 s: simulate(System) / MuJoCo Euler",
            "32-link, 1 s: simulate of an assembled System",
            "32-link, 1 s: MuJoCo Euler",
        ),
        ("32-link, 1 s: engine loop / MuJoCo Euler", "32-link, 1 s: engine loop", "32-link, 1 s: MuJoCo Euler"),
    ]
    print(f"\n{'ratio':52s} median [min–max] over rounds")
    for label, a, b in comparisons:
        print(f"{label:52s} {ratio(t[a], t[b])}")
    three = [x / (3 * y) for x, y in zip(t["forest_ruth (3-stage composition)"], t["verlet"], strict=True)]
    print(f"{'forest_ruth / 3 verlet steps':52s} {med(three):.2f} [{min(three):.2f}–{max(three):.2f}]")
    (cold, cold_all), (cached, cached_all) = cold_and_cached()
    print(
        f"\nangle double pendulum, build + compiled kernels (fresh processes): {cold:.2f} s with an empty kernel "
        f"cache, {cached:.2f} s from the cache; with numba's once-per-process start: {cold_all:.2f} s and "
        f"{cached_all:.2f} s"
    )


if __name__ == "__main__":
    main()
