"""What a call builds before its first step, and only what it needs.

* a system with rigid bodies run by the built-in loop (rotations on their group) never packs the configuration
  model with the rotations' rows (``Model.Iq``); an integrator plugin whose compiled step reads it packs it on
  first use, the same arrays as packed at once, and a load set from a ``Simulator`` reaches its steps: the arm's
  rate grows as τ t / (J + m d²) about the hinge (closed form);
* the NumPy path's factorization (``System.solver``) is built when a NumPy step first needs it;
* the rows that repeat an earlier row's U (``model._u_aliases``) are those a row-by-row comparison of their
  bytes finds, with signed zeros and rows of other lengths kept apart.
"""

from __future__ import annotations

import numpy as np
import pytest
from scene_loader import load_scene

import mbvi
from mbvi.engine import model as MD


def _rigid_chain(links: int = 4) -> mbvi.Scene:
    return load_scene("rigid_chain").build(links=links)


def test_the_built_in_loop_does_not_pack_the_rotation_rows_model() -> None:
    system = mbvi.assemble(_rigid_chain())
    stepper = mbvi.get_integrator("verlet")(system, 1e-3)
    out = stepper.run(system.initial_state(), 0.0, 200, save_every=50)
    assert np.all(np.isfinite(out.q))
    model = system.engine_model()
    assert model.q_model._arrays is None  # the Lie loop never read it
    Iq, Fq = model.Iq, model.Fq  # packed now
    fresh = MD.build(system.engine_spec())
    fresh_q = fresh.q_model.arrays()
    assert np.array_equal(Iq, fresh_q[0]) and np.array_equal(Fq, fresh_q[1])
    n_rows = int(Iq[MD.M.N])
    assert n_rows == system.nc  # every active row, the rotations' six a body included
    assert n_rows > int(model.I[MD.M.N])


def test_without_rigid_bodies_the_rotation_rows_model_is_the_model() -> None:
    system = mbvi.assemble(load_scene("double_pendulum").build())
    model = system.engine_model()
    assert model.Iq is model.I and model.Fq is model.F


def test_a_load_set_from_a_simulator_reaches_a_compiled_step_plugin_on_rigid_bodies() -> None:
    pytest.importorskip("mbvi_leapfrog")
    m, d, J = 2.0, 0.5, (0.03, 0.04, 0.02)
    s = mbvi.Scene(gravity=(0.0, 0.0, 0.0))
    s.add(mbvi.RigidBody("arm", mass=m, inertia=J, position=(0.0, 0.0, -d)))
    s.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    s.add(mbvi.ExternalTorque("arm", torque=(0.0, 0.0, 0.0), name="motor"))
    sim = mbvi.Simulator(s, dt=1e-3, integrator="leapfrog")
    tau, n = 0.7, 400
    sim.set_load("motor", (0.0, tau, 0.0))
    sim.step(n)
    expected = tau * n * 1e-3 / (J[1] + m * d**2)  # about the hinge: J_yy + m d²
    # leapfrog's error in the rate is 4.5e-8 here, and a quarter of it at half the step (second order)
    assert sim.view.joint_rate("hinge") == pytest.approx(expected, rel=1e-6)
    assert sim.view.joint_angle("hinge") == pytest.approx(0.5 * expected * n * 1e-3, rel=1e-8)


def test_the_numpy_factorization_is_built_when_a_numpy_step_needs_it() -> None:
    system = mbvi.assemble(load_scene("double_pendulum").build())
    mbvi.get_integrator("verlet")(system, 1e-3).run(system.initial_state(), 0.0, 100, save_every=100)
    assert "solver" not in vars(system)  # the compiled loop has its own
    out = mbvi.get_integrator("explicit_euler")(system, 1e-4).run(system.initial_state(), 0.0, 10, save_every=10)
    assert "solver" in vars(system)
    assert np.abs(system.constraints(out.q[-1])).max() < 1e-9


def _aliases_row_by_row(ur, uc, uv, cu, n):
    """The definition: a row repeats the first earlier row with the same bytes of terms and constant."""
    row = ur // 3
    starts = np.searchsorted(row, np.arange(n + 1))
    seen, keep, dst, src = {}, np.ones(len(ur), bool), [], []
    for r in range(n):
        a, b = starts[r], starts[r + 1]
        key = ((ur[a:b] % 3).tobytes(), uc[a:b].tobytes(), uv[a:b].tobytes(), cu[3 * r : 3 * r + 3].tobytes())
        if key in seen:
            keep[a:b] = False
            dst.append(r)
            src.append(seen[key])
        else:
            seen[key] = r
    return ur[keep], uc[keep], uv[keep], np.asarray(dst, np.int64), np.asarray(src, np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_repeated_rows_are_those_a_row_by_row_comparison_finds(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 40
    templates = []
    for _ in range(6):  # a few row shapes, repeated: some lengths 0 … 4, signed zeros among the values
        size = int(rng.integers(0, 5))
        templates.append((rng.integers(0, 3, size), rng.integers(0, 12, size),
                          rng.choice([1.0, -1.0, 0.0, -0.0, 0.5], size), rng.choice([0.0, -0.0, 1.0], 3)))  # fmt: skip
    ur, uc, uv, cu = [], [], [], []
    for r in range(n):
        comp, col, val, const = templates[int(rng.integers(len(templates)))]
        if rng.random() < 0.2:  # a near copy: one value's sign of zero or one column changed
            val = val.copy()
            if len(val):
                val[0] = -val[0] if val[0] == 0.0 else val[0]
                col = col.copy()
                col[0] = (col[0] + int(rng.integers(0, 2))) % 12
        ur += list(3 * r + np.sort(comp))
        uc += list(col)
        uv += list(val)
        cu += list(const)
    args = (np.asarray(ur, np.int64), np.asarray(uc, np.int64), np.asarray(uv, float), np.asarray(cu, float), n)
    got, want = MD._u_aliases(*args), _aliases_row_by_row(*args)
    assert len(want[3]) > 0  # the draw has repeats
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and np.array_equal(g, w)
        assert np.array_equal(np.signbit(g), np.signbit(w)) if g.dtype == float else True


def test_runs_on_threads_sharing_one_system_pack_the_rotation_rows_model_once() -> None:
    """Two threads' first runs of a compiled step plugin on one System both read ``Model.Iq``: it is packed
    once, whole (it was packed by both at once, one thread then failing with a TypeError: a helper's review)."""
    import sys
    import threading

    pytest.importorskip("mbvi_leapfrog")
    from scene_loader import rigid_chain

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: the race showed in 9 runs of 10 with a Simulator
    try:
        for _ in range(3):
            system = mbvi.assemble(rigid_chain(24))
            mbvi.simulate(system, 0.002, 1e-3)  # the built-in loop: the model, not its rotation rows' part
            errors, runs, barrier = [], [], threading.Barrier(2)

            def run(system=system, errors=errors, runs=runs, barrier=barrier) -> None:
                barrier.wait()
                try:
                    runs.append(mbvi.simulate(system, 0.002, 1e-3, integrator="leapfrog"))
                except Exception as exc:  # what a thread raised is the finding
                    errors.append(exc)

            threads = [threading.Thread(target=run) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors
            assert np.array_equal(runs[0].q, runs[1].q)
    finally:
        sys.setswitchinterval(interval)


def test_a_simulator_of_a_built_in_integrator_does_not_pack_the_rotation_rows_model() -> None:
    """Its loads are written where its runs read them: the model's F, not the rotation rows' model."""
    s = _rigid_chain(3)
    s.add(mbvi.ExternalTorque("link0", torque=(0.0, 0.0, 0.0), name="motor"))
    sim = mbvi.Simulator(s, dt=1e-3)
    sim.set_load("motor", (0.0, 0.0, 0.2))
    sim.step(10)
    assert sim.stepper.engine_model().q_model._arrays is None
