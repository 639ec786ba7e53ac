"""Parts of a trajectory (``frame``, ``head``) are parts of the run: the frame asked for or an error, the joints'
turns counted as the whole run counts them, and plots of nothing refused by name."""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest

import mbvi

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def wheel() -> mbvi.Trajectory:
    """A wheel spinning at 5 rad/s about its axle, free of gravity: its angle is 5 t (1.6 turns in 2 s)."""
    scene = mbvi.Scene(gravity=None)
    scene.add(mbvi.RigidBody("wheel", mass=1.0, inertia=(0.45, 0.25, 0.25), angular_velocity=(5.0, 0.0, 0.0)))
    scene.add(mbvi.Revolute("world", "wheel", anchor=(0, 0, 0), axis=(1, 0, 0), name="axle"))
    return mbvi.simulate(scene, t_end=2.0, dt=1e-3)


def test_a_frame_is_the_one_asked_for_or_an_error(wheel: mbvi.Trajectory) -> None:
    """frame(5000) of 2001 states was an empty trajectory, and the error came later, elsewhere."""
    n = len(wheel.t)
    for i in (0, 7, n - 1, -1, -n):
        np.testing.assert_array_equal(wheel.frame(i).q[0], wheel.q[i])
        assert wheel.frame(i).t[0] == wheel.t[i]
    for i in (n, 5000, -n - 1):
        with pytest.raises(IndexError, match=f"frame {i} out of range for a trajectory of {n} states"):
            wheel.frame(i)


@pytest.mark.parametrize("k", [1, 700, 1800, 2000])
def test_a_part_of_a_run_counts_its_joints_turns_as_the_run_does(wheel: mbvi.Trajectory, k: int) -> None:
    """At t = 1.8 s the axle has turned 9 rad; frame(1800) said 2.717 (9 − 2π: a state alone knows no turns)."""
    whole = wheel.joint_angle("axle")
    np.testing.assert_allclose(whole, 5.0 * wheel.t, rtol=0, atol=2e-4)  # (the Cayley step's phase error)
    assert wheel.frame(k).joint_angle("axle")[0] == pytest.approx(whole[k], abs=1e-12)
    later = wheel._sliced(slice(k, None))  # a part from k on (what a frame is, longer)
    np.testing.assert_allclose(later.joint_angle("axle"), whole[k:], rtol=0, atol=1e-12)
    assert wheel.frame(k).frame(0).joint_angle("axle")[0] == pytest.approx(whole[k], abs=1e-12)
    assert 5.0 * wheel.t[k] > math.pi or k < 700  # (a part past half a turn: the case that failed)


@pytest.mark.parametrize("plot", ["energy", "energy_error", "momentum", "constraint_error", "summary"])
def test_a_plot_of_a_trajectory_with_no_states_is_refused_by_name(wheel: mbvi.Trajectory, plot: str) -> None:
    """plot.energy_error(traj.head(0)) raised IndexError('index 0 is out of bounds for axis 0 with size 0')."""
    with pytest.raises(ValueError, match=f"{plot}: the trajectory has no states to plot"):
        getattr(mbvi.plot, plot)(wheel.head(0))
    with pytest.raises(ValueError, match="compare: 'empty': the trajectory has no states to plot"):
        mbvi.plot.compare({"run": wheel, "empty": wheel.head(0)})


def test_a_part_saved_or_pickled_keeps_its_turns_without_the_whole_run(wheel: mbvi.Trajectory, tmp_path) -> None:
    """A frame held the whole run to count its turns: pickled it was the run's size, and saved it lost them."""
    import pickle

    part = wheel.frame(1800)
    expected = wheel.joint_angle("axle")[1800]
    assert len(pickle.dumps(part)) < 0.05 * len(pickle.dumps(wheel))
    assert pickle.loads(pickle.dumps(wheel.frame(1800))).joint_angle("axle")[0] == pytest.approx(expected, abs=1e-12)
    part.save(tmp_path / "part.npz")
    loaded = mbvi.Trajectory.load(tmp_path / "part.npz")
    assert loaded.joint_angle("axle")[0] == pytest.approx(expected, abs=1e-12)
    assert loaded.info["joint_turns"]["axle"] == pytest.approx(2 * math.pi)


def test_a_part_of_a_part_counts_from_its_own_start_and_leaves_the_run_as_it_was(wheel, tmp_path) -> None:
    """Parts shared their run's info: a part of a part took the part's turns taken at another start (2.43 rad for
    15.0), a saved part's frames likewise, and a sub-part wrote its turns into its parent's."""
    whole = wheel.joint_angle("axle")
    part = wheel._sliced(slice(500, None))
    part.joint_angle("axle")  # (its turns now known)
    assert part.frame(1300).joint_angle("axle")[0] == pytest.approx(whole[1800], abs=1e-12)
    part.save(tmp_path / "part.npz")
    loaded = mbvi.Trajectory.load(tmp_path / "part.npz")
    assert loaded.frame(1300).joint_angle("axle")[0] == pytest.approx(whole[1800], abs=1e-12)
    assert loaded.head(3).joint_angle("axle")[0] == pytest.approx(whole[500], abs=1e-12)
    before = dict(part.info.get("joint_turns", {}))
    part.frame(1300).joint_angle("axle")
    assert part.info.get("joint_turns", {}) == before and "joint_turns" not in wheel.info
    assert part.joint_angle("axle")[0] == pytest.approx(whole[500], abs=1e-12)


def test_a_part_does_not_carry_the_whole_runs_energy_figures(wheel) -> None:
    """A blown-up run's head (the SolverError's trajectory) carried the whole run's 1.5e25 J scale: its plotted
    error read 8.5e-20 against its own 1.56."""
    assert "energy_error" in wheel.info and "energy_in_motion" in wheel.info
    part = wheel.head(100)
    assert "energy_error" not in part.info and "energy_in_motion" not in part.info
    assert part.info["integrator"] == wheel.info["integrator"]


def test_a_scene_without_bodies_has_a_trajectory_that_saves_and_loads(tmp_path) -> None:
    """Its momentum raised "cannot reshape array of size 0 into shape (0)", after which the trajectory had lost
    the means to compute it (KeyError '_make_momentum') and could not be saved: `mbvi run --out` wrote nothing."""
    traj = mbvi.simulate(mbvi.Scene(), t_end=0.01, dt=0.001)
    assert traj.q.shape == (11, 0)
    np.testing.assert_array_equal(traj.momentum, np.zeros((11, 3)))
    np.testing.assert_array_equal(traj.angular_momentum, np.zeros((11, 3)))
    traj.save(tmp_path / "empty.npz")
    back = mbvi.Trajectory.load(tmp_path / "empty.npz")
    np.testing.assert_array_equal(back.t, traj.t)


def test_a_derived_quantity_that_fails_once_can_be_read_again() -> None:
    """The function computing it was dropped before it ran: a failure (or a Ctrl-C) while computing it left the
    trajectory without it for good (KeyError '_make_momentum' at every later read, and at save)."""
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.Particle("p", mass=2.0, position=(0.0, 0.0, 0.0), velocity=(1.0, 0.0, 0.0)))
    part = mbvi.simulate(scene, t_end=0.1, dt=0.01)
    make = part.__dict__["_make_momentum"]
    calls = []

    def interrupted():
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return make()

    part.__dict__["_make_momentum"] = interrupted
    with pytest.raises(KeyboardInterrupt):
        _ = part.momentum
    np.testing.assert_allclose(part.momentum, 2.0 * part.v, rtol=0, atol=1e-15)


def test_a_slice_of_a_run_is_its_frames_and_counts_their_turns(wheel: mbvi.Trajectory) -> None:
    """docs/joints.md speaks of "a slice" of a run; ``traj[10:20]`` was a TypeError (not subscriptable). A slice
    holds those frames; its axle angle is the run's, turns counted (5 t: 9 rad at 1.8 s), every s-th frame too."""
    whole = wheel.joint_angle("axle")
    part = wheel[1500:1900]
    np.testing.assert_array_equal(part.t, wheel.t[1500:1900])
    np.testing.assert_array_equal(part.q, wheel.q[1500:1900])
    np.testing.assert_allclose(part.joint_angle("axle"), whole[1500:1900], atol=1e-9)
    assert part.joint_angle("axle")[-1] == pytest.approx(5.0 * 1.899, abs=1e-3)  # past 1.5 turns (verlet: 1e-4 off)
    sparse = wheel[1000::50]
    np.testing.assert_array_equal(sparse.t, wheel.t[1000::50])
    np.testing.assert_allclose(sparse.joint_angle("axle"), whole[1000::50], atol=1e-9)
    np.testing.assert_array_equal(wheel[-1].q, wheel.frame(-1).q)
    assert len(wheel[5:5]) == 0


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda tr: tr.head(2.7), ValueError, r"head: expected a whole number of frames, got 2.7"),
    (lambda tr: tr.head(-3), ValueError, r"head\(-3\): the count of frames must be 0 or more"),
    (lambda tr: tr.head(None), ValueError, r"head: expected a whole number of frames, got None"),
    (lambda tr: tr.frame(1.5), ValueError, r"frame: expected a whole number of frames, got 1.5"),
    (lambda tr: tr[::-1], ValueError, r"a positive step"),
    (lambda tr: tr[1.5], TypeError, r"indexed by a frame number or a slice, not float"),
])  # fmt: skip
def test_a_part_asked_with_what_is_not_a_count_of_frames_is_refused(wheel, call, error, match) -> None:
    """``head(2.7)`` gave 2 frames and ``head(-3)`` none, silently; ``frame(1.5)`` and ``head(None)`` raised
    raw TypeErrors."""
    with pytest.raises(error, match=match):
        call(wheel)
    assert len(wheel.head(np.int64(3))) == 3 and len(wheel.head(10**9)) == len(wheel)


def test_rotations_come_as_scipy_rotations_too(wheel: mbvi.Trajectory) -> None:
    """DESIGN.md: users see rotations "also as scipy.spatial.transform.Rotation"; nothing gave one. The wheel's
    rotation vector is (5 t, 0, 0) while it turns less than π."""
    rot = wheel.rotation("wheel", as_rotation=True)
    assert len(rot) == len(wheel.t)
    np.testing.assert_allclose(rot.as_matrix(), wheel.rotation("wheel"), atol=1e-12)
    k = 500  # t = 0.5 s: 2.5 rad about x
    np.testing.assert_allclose(rot[k].as_rotvec(), [wheel.joint_angle("axle")[k], 0.0, 0.0], atol=1e-10)
    assert rot[k].as_rotvec()[0] == pytest.approx(5.0 * wheel.t[k], abs=1e-4)
    assert len(wheel[3:3].rotation("wheel", as_rotation=True)) == 0
