"""Trajectory.load on damaged and inconsistent files: a ValueError saying so, never another exception."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp

import mbvi

FIELDS = ("t", "q", "v", "energy", "kinetic", "potential", "momentum", "angular_momentum", "constraint_error")


def _pendulum() -> mbvi.Trajectory:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -1.0))
    scene.add(mbvi.Particle("bob", mass=1.0, position=(np.sin(0.7), 0.0, -np.cos(0.7))))
    scene.add(mbvi.Rod("world", "bob"))
    return mbvi.simulate(scene, 0.1, 1e-2)


def _rigid() -> mbvi.Trajectory:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("p", mass=0.5, position=(0.3, 0.2, 0.0), velocity=(0.0, 0.1, 0.0)))
    scene.add(
        mbvi.RigidBody(
            "slab",
            mass=2.0,
            inertia=(0.1, 0.2, 0.25),
            position=(0.0, 0.0, -0.5),
            velocity=(-0.4, 0.0, 0.0),
            angular_velocity=(0.0, 0.8, 0.0),
        )
    )
    scene.add(mbvi.Revolute("world", "slab", anchor=(0.0, 0.0, 0.0), axis=(0.0, 1.0, 0.0), name="hinge"))
    return mbvi.simulate(scene, 0.1, 1e-2)


def _lagrangian() -> mbvi.Trajectory:
    th1, th2, w1, w2 = sp.symbols("theta1 theta2 omega1 omega2")
    T = w1**2 + w2**2 / 2 + w1 * w2 * sp.cos(th1 - th2)
    V = -2 * 9.81 * sp.cos(th1) - 9.81 * sp.cos(th2)
    system = mbvi.LagrangianSystem(
        T - V, coordinates=[th1, th2], velocities=[w1, w2], initial_state=mbvi.State([0.5, 0.2], [0.0, 0.0])
    )
    return mbvi.simulate(system, 0.1, 1e-2, integrator="verlet")


RUNS = {"pendulum": _pendulum, "rigid": _rigid, "lagrangian": _lagrangian}


@pytest.fixture(scope="module", params=list(RUNS))
def saved(request, tmp_path_factory) -> tuple[mbvi.Trajectory, bytes]:
    """A run, and the bytes of its saved file."""
    traj = RUNS[request.param]()
    path = tmp_path_factory.mktemp(request.param) / "run.npz"
    traj.save(path)
    return traj, path.read_bytes()


def _assert_same(back: mbvi.Trajectory, traj: mbvi.Trajectory) -> None:
    for field in FIELDS:
        a, b = getattr(traj, field), getattr(back, field)
        assert a.shape == b.shape and np.array_equal(a, b, equal_nan=True), field
    assert back.geometry == traj.geometry and back.info == traj.info


def test_saved_runs_load_unchanged(saved, tmp_path) -> None:
    traj, raw = saved
    path = tmp_path / "run.npz"
    path.write_bytes(raw)
    _assert_same(mbvi.Trajectory.load(path), traj)


def test_flipped_bits_load_unchanged_or_raise_value_error(saved, tmp_path) -> None:
    """Flip one bit at every 7th byte of the file (which bit varies with the byte): each load
    either returns the same data or raises ValueError saying the file is not a trajectory."""
    traj, raw = saved
    path = tmp_path / "corrupt.npz"
    outcomes = {"same": 0, "refused": 0}
    for pos in range(0, len(raw), 7):
        damaged = bytearray(raw)
        damaged[pos] ^= 1 << (pos % 8)
        path.write_bytes(bytes(damaged))
        try:
            back = mbvi.Trajectory.load(path)
        except ValueError as exc:
            assert "corrupt.npz" in str(exc), (pos, str(exc))
            outcomes["refused"] += 1
        except Exception as exc:  # the point of the test: nothing else may escape
            pytest.fail(f"flipping a bit of byte {pos} of {len(raw)} leaked {type(exc).__name__}: {exc}")
        else:
            _assert_same(back, traj)
            outcomes["same"] += 1
    assert outcomes["refused"] > 0 and outcomes["same"] > 0, outcomes


@pytest.mark.parametrize("seed", range(4))
def test_damaged_stretches_and_truncations_raise_value_error(saved, tmp_path, seed) -> None:
    """Random bytes over a stretch of the file, or the file cut short: ValueError or the same data."""
    traj, raw = saved
    rng = np.random.default_rng(seed)
    path = tmp_path / "corrupt.npz"
    for _ in range(40):
        damaged = bytearray(raw)
        if rng.random() < 0.3:
            damaged = damaged[: int(rng.integers(0, len(raw)))]
        else:
            start = int(rng.integers(0, len(raw)))
            stop = min(len(raw), start + int(rng.integers(1, 16)))
            damaged[start:stop] = rng.integers(0, 256, stop - start, dtype=np.uint8).tobytes()
        path.write_bytes(bytes(damaged))
        try:
            back = mbvi.Trajectory.load(path)
        except ValueError:
            continue
        except Exception as exc:
            pytest.fail(f"seed {seed}: a damaged file leaked {type(exc).__name__}: {exc}")
        _assert_same(back, traj)


# ---------------------------------------------------------------- inconsistent files
def _rewrite(path, traj: mbvi.Trajectory, **replace) -> None:
    """Save ``traj``'s fields to ``path`` as Trajectory.save does, some replaced."""
    arrays = {k: getattr(traj, k) for k in FIELDS} | replace
    meta = json.dumps({"geometry": traj.geometry.to_dict(), "info": traj.info, "format": 2})
    np.savez_compressed(path, meta=np.array(meta), **arrays)


def _inconsistent_cases(traj: mbvi.Trajectory) -> dict[str, tuple[dict, str]]:
    n, nq = traj.q.shape
    return {
        "q rows": ({"q": traj.q[:5]}, r"q has shape \(5, "),
        "v rows": ({"v": traj.v[:-1]}, rf"v has shape \({n - 1}, "),
        "q columns": ({"q": np.zeros((n, nq + 4))}, rf"q has {nq + 4} columns.*{nq} generalized coordinates"),
        "v columns": ({"v": traj.v[:, :-1]}, rf"v has {nq - 1} columns.*{nq} generalized coordinates"),
        "both columns": (
            {"q": np.zeros((n, nq + 1)), "v": np.zeros((n, nq + 1))},
            rf"q has {nq + 1} columns",
        ),
        "q 1-D": ({"q": traj.q.ravel()}, r"q has shape \(\d+,\)"),
        "t 2-D": ({"t": traj.t[:, None]}, r"t has shape"),
        "t longer": ({"t": np.arange(n + 3, dtype=float)}, rf"q has shape \({n}, {nq}\), expected \({n + 3}, nq\)"),
        "energy": ({"energy": traj.energy[:3]}, r"energy has shape \(3,\)"),
        "kinetic": ({"kinetic": np.zeros((n, 2))}, r"kinetic has shape"),
        "potential": ({"potential": traj.potential[1:]}, r"potential has shape"),
        "constraint_error": ({"constraint_error": traj.constraint_error[:1]}, r"constraint_error has shape"),
        "momentum": ({"momentum": traj.momentum[:2]}, r"momentum has shape \(2, "),
        "angular_momentum": ({"angular_momentum": np.zeros(n)}, r"angular_momentum has shape"),
        # these two loaded: rendering the reversed file failed with an IndexError
        "momentum columns": ({"momentum": np.zeros((n, 5))}, rf"momentum has shape \({n}, 5\), expected"),
        "t reversed": ({"t": traj.t[::-1].copy()}, r"its times t do not increase"),
    }


CASES = list(_inconsistent_cases(_pendulum()))


@pytest.mark.parametrize("case", CASES)
def test_inconsistent_arrays_raise_value_error_naming_the_problem(saved, tmp_path, case) -> None:
    traj, _ = saved
    replace, message = _inconsistent_cases(traj)[case]
    path = tmp_path / "inconsistent.npz"
    _rewrite(path, traj, **replace)
    with pytest.raises(ValueError, match=message) as info:
        mbvi.Trajectory.load(path)
    assert "inconsistent.npz" in str(info.value)


def test_the_reviewed_examples(tmp_path) -> None:
    """q of 5 rows against 11 times; 7 columns against a particle's 3 coordinates (both loaded before)."""
    traj = _pendulum()
    assert traj.q.shape == (11, 3)
    path = tmp_path / "bad.npz"
    _rewrite(path, traj, q=traj.q[:5], v=traj.v[:5])
    with pytest.raises(ValueError, match=r"bad\.npz.*q has shape \(5, 3\), expected \(11, nq\)"):
        mbvi.Trajectory.load(path)
    _rewrite(path, traj, q=np.zeros((11, 7)), v=np.zeros((11, 7)))
    with pytest.raises(ValueError, match=r"bad\.npz.*q has 7 columns, but the geometry has 3 generalized"):
        mbvi.Trajectory.load(path)


def test_bodies_that_do_not_tile_the_coordinates_raise_value_error(tmp_path) -> None:
    traj = _rigid()
    geometry = traj.geometry.to_dict()
    geometry["bodies"][0]["offset"] = 5
    path = tmp_path / "offsets.npz"
    arrays = {k: getattr(traj, k) for k in FIELDS}
    np.savez_compressed(path, meta=np.array(json.dumps({"geometry": geometry, "info": traj.info})), **arrays)
    with pytest.raises(ValueError, match=r"offsets\.npz.*body .* starts at coordinate \d+, expected \d+"):
        mbvi.Trajectory.load(path)


def test_consistent_rewrite_still_loads(saved, tmp_path) -> None:
    """The checks refuse only what is inconsistent: the same fields rewritten load unchanged."""
    traj, _ = saved
    path = tmp_path / "same.npz"
    _rewrite(path, traj)
    _assert_same(mbvi.Trajectory.load(path), traj)
