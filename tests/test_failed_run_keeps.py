"""What a failed or partial run hands back: the motion up to the failure whatever ``save_every``, a part's work
counted from its own start, a one-step Lagrangian csm run, and saved files mbvi cannot read refused by name."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import sympy as sp

import mbvi

T_KICK = 0.5005  # s: a 1e9 N load from here on makes the step of t = 0.501 s fail (step 501 at dt = 1e-3)


def _kicked(t: float) -> tuple[float, float, float]:
    return (0.0, 0.0, 1e9 if t > T_KICK else 0.0)


def kicked_particles() -> mbvi.Scene:
    """A double pendulum of particles whose bob takes a 1e9 N kick at 0.5005 s: SHAKE cannot follow."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("a", mass=1.0, position=(1, 0, 0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2, 0, 0)))
    scene.add(mbvi.Rod("a", "b"))
    scene.add(mbvi.ExternalForce("b", force=_kicked))
    return scene


def kicked_rigid() -> mbvi.Scene:
    """The same kick on a bob hanging by a rod from a rigid bar that swings on a hinge (the rigid-body loop)."""
    scene = mbvi.Scene()
    scene.add(mbvi.RigidBody("bar", mass=1.0, inertia=(0.01, 0.1, 0.1), position=(0.5, 0, 0)))
    scene.add(mbvi.Revolute("world", "bar", anchor=(0, 0, 0), axis=(0, 1, 0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2, 0, 0)))
    scene.add(mbvi.Rod("bar", "b", anchor_a=(0.5, 0, 0)))
    scene.add(mbvi.ExternalForce("b", force=_kicked))
    return scene


def kicked_free() -> mbvi.Scene:
    """The kick on a free particle falling under gravity (for an integrator without constraints)."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("b", mass=1.0, position=(0, 0, 0), velocity=(1, 0, 0)))
    scene.add(mbvi.ExternalForce("b", force=_kicked))
    return scene


class PlainEuler(mbvi.Integrator):
    """Symplectic Euler written in NumPy against the documented contract (a plugin without a compiled step: the
    NumPy path); a step that would leave 1e5 m/s leaves non-finite values instead, a failure."""

    name = "plain_euler"
    handles = frozenset({"forces"})

    def step(self, state: mbvi.State, t: float) -> mbvi.State:
        sysm = self.system
        v = state.v + self.dt * sysm.inv_mass * (sysm.force(state.q, state.v, t) - sysm.potential_gradient(state.q))
        if np.abs(v).max() > 1e5:
            return mbvi.State(state.q * np.nan, v)
        return mbvi.State(state.q + self.dt * v, v)


def _failure(scene_or_system, integrator, save_every: int) -> mbvi.SolverError:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(mbvi.SolverError) as err:
            mbvi.simulate(scene_or_system, t_end=1.0, dt=1e-3, integrator=integrator, save_every=save_every)
    return err.value


@pytest.mark.parametrize(
    ("build", "integrator"),
    [(kicked_particles, "verlet"), (kicked_particles, "midpoint"), (kicked_rigid, "verlet"),
     (kicked_free, PlainEuler)],
    ids=["particles-verlet", "particles-midpoint", "rigid-verlet", "numpy-plugin"],
)  # fmt: skip
def test_a_failed_run_saved_sparsely_keeps_the_state_its_failing_step_started_from(build, integrator) -> None:
    """Saved every 1000th state, a run failing at step 501 handed back the initial state alone: half a second of
    computed motion lost, nothing to restart from. It ends where the run saved every state ends, at that state."""
    every = _failure(build(), integrator, 1)
    sparse = _failure(build(), integrator, 1000)
    assert sparse.step == every.step and sparse.time == pytest.approx(every.time)
    dense, part = every.trajectory, sparse.trajectory
    assert part.t[-1] == pytest.approx(dense.t[-1]) == pytest.approx(every.time)
    assert len(part.t) == 2 and part.t[0] == 0.0
    scale = np.abs(dense.q[-1]).max() + 1e-300
    np.testing.assert_allclose(part.q[-1], dense.q[-1], rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(part.v[-1], dense.v[-1], rtol=0, atol=1e-6 * (np.abs(dense.v[-1]).max() + 1))
    if dense.work is not None:
        assert part.work is not None and part.work[-1] == pytest.approx(dense.work[-1], abs=1e-6)
    # off the grid of a run saved every 7th state too: its saved states, then the failing step's start
    seventh = _failure(build(), integrator, 7).trajectory
    assert len(seventh.t) == every.step // 7 + 2 and seventh.t[-1] == pytest.approx(every.time)


def test_a_failed_lagrangian_run_saved_sparsely_keeps_the_state_its_failing_step_started_from() -> None:
    """The same for a LagrangianSystem: a Cartesian pendulum (its rod a constraint) kicked by a 1e12 N force."""
    x, y, u, w, t = sp.symbols("x y u w t")
    system = mbvi.LagrangianSystem((u**2 + w**2) / 2 - 9.81 * y, [x, y], [u, w], constraints=[x**2 + y**2 - 1],
                                   force=[0, sp.Piecewise((1e12, t > T_KICK), (0, True))], time=t,
                                   initial_state=mbvi.State([1.0, 0.0], [0.0, 0.0]))  # fmt: skip
    every = _failure(system, "verlet", 1)
    sparse = _failure(system, "verlet", 1000)
    assert sparse.step == every.step
    assert len(sparse.trajectory.t) == 2 and sparse.trajectory.t[-1] == pytest.approx(every.time)
    np.testing.assert_allclose(sparse.trajectory.q[-1], every.trajectory.q[-1], atol=1e-10)
    np.testing.assert_allclose(sparse.trajectory.v[-1], every.trajectory.v[-1], atol=1e-8)


def test_a_part_of_a_damped_run_counts_its_work_from_its_own_start(tmp_path) -> None:
    """tr[2000:] of a pendulum with drag kept the whole run's work (−6.29 J at its first frame): its energy
    balance E − E₀ − W was off by 6.29 J, and the energy-error plot drew 184 % for an error of 2e-6."""
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1, 0, 0)))
    scene.add(mbvi.Rod("world", "bob"))
    scene.add(mbvi.Drag("bob", coefficient=0.5))
    run = mbvi.simulate(scene, t_end=4.0, dt=1e-3)
    whole = np.ptp(run.energy - run.energy[0] - run.work)
    assert run.work[2000] < -1.0  # the drag took a joule and more by then
    for part in (run[2000:], run[2000::10], run.frame(3000), run[1000:3001]):
        assert part.work[0] == 0.0
        assert np.ptp(part.energy - part.energy[0] - part.work) <= whole + 1e-12
    part = run[2000:]
    np.testing.assert_allclose(part.work, run.work[2000:] - run.work[2000], rtol=0, atol=1e-12)
    part.save(tmp_path / "part.npz")
    np.testing.assert_array_equal(mbvi.Trajectory.load(tmp_path / "part.npz").work, part.work)


@pytest.mark.parametrize("t_end", [0.0, 0.05])
def test_a_lagrangian_csm_run_of_no_or_one_short_step_ends_at_t_end(t_end: float) -> None:
    """csm on a LagrangianSystem with t_end = 0 or one step shorter than dt raised AttributeError ('list' object has
    no attribute 'T': solve_ivp's y over an empty interval)."""
    th, w = sp.symbols("theta omega")
    system = mbvi.LagrangianSystem(w**2 / 2 + 9.81 * sp.cos(th), [th], [w], initial_state=mbvi.State([1.0], [0.0]))
    run = mbvi.simulate(system, t_end=t_end, dt=0.1, integrator="csm")
    reference = mbvi.simulate(system, t_end=t_end, dt=0.1, integrator="verlet")
    np.testing.assert_array_equal(run.t, reference.t)
    assert run.t[-1] == t_end
    if t_end:  # one 0.05 s step from rest at 1 rad: θ − 1 = −½ g sin1 t² + g² sin1 cos1 t⁴/24 + O(t⁶)
        g, s, c = 9.81, math.sin(1.0), math.cos(1.0)
        assert run.q[-1, 0] - 1.0 == pytest.approx(-0.5 * g * s * t_end**2 + g**2 * s * c * t_end**4 / 24, rel=1e-5)


def _saved(tmp_path, **change) -> str:
    scene = mbvi.Scene()
    scene.add(mbvi.Particle("bob", mass=1.0, position=(1, 0, 0)))
    scene.add(mbvi.Rod("world", "bob"))
    run = mbvi.simulate(scene, t_end=0.01, dt=1e-3)
    path = tmp_path / "run.npz"
    run.save(path)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    meta = __import__("json").loads(str(arrays["meta"]))
    meta.update(change.pop("meta", {}))
    arrays["meta"] = np.array(__import__("json").dumps(meta))
    arrays.update(change)
    np.savez(path, **arrays)
    return str(path)


def test_a_file_of_another_format_or_of_non_real_numbers_is_refused_by_name(tmp_path) -> None:
    """A file saying format 99 loaded as if it were format 2; complex positions lost their imaginary part to a
    numpy warning."""
    with pytest.raises(ValueError, match=r"format 99; this mbvi reads formats 1, 2"):
        mbvi.Trajectory.load(_saved(tmp_path, meta={"format": 99}))
    path = _saved(tmp_path)
    q = np.load(path)["q"]
    with pytest.raises(ValueError, match=r"array 'q' holds complex128 values, not real numbers"):
        mbvi.Trajectory.load(_saved(tmp_path, q=q + 1j))
    with pytest.raises(ValueError, match=r"array 'energy' holds <U\d+ values"):
        mbvi.Trajectory.load(_saved(tmp_path, energy=np.load(path)["energy"].astype(str)))
    assert len(mbvi.Trajectory.load(_saved(tmp_path, meta={"format": 1})).t) == 11  # format 1 still loads


@pytest.mark.parametrize("save_every", [1, 10, 50])
def test_a_blow_up_saved_sparsely_is_said_to_be_one(save_every: int) -> None:
    """Explicit Euler at dt = 1e-2 on a double pendulum blows up near 5 s. Saved every state, the error said the
    energy balance broke and suggested a dt; saved every 10th, the blow-up's first saved state past the bound was
    the failing step's own start, and the error was the projection's ("did not converge", residual 8.8e5), with
    no dt to try, on a state of 4e25 J."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("a", mass=1.0, position=(1.0, 0.0, 0.0)))
    scene.add(mbvi.Particle("b", mass=1.0, position=(2.0, 0.0, 0.0)))
    scene.add(mbvi.Rod("world", "a"))
    scene.add(mbvi.Rod("a", "b"))
    with pytest.raises(mbvi.SolverError, match="the energy balance broke") as info:
        mbvi.simulate(scene, 20.0, 1e-2, "explicit_euler", save_every=save_every)
    err = info.value
    assert 4.0 < err.time < 6.0 and err.suggested_dt is not None and err.suggested_dt < 1e-2
