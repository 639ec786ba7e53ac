"""What happens when a user's function is being compiled and something else intervenes.

An exception that is not numba's — a signal handler's deadline, a timeout — reaches the caller and leaves nothing
behind: the next run compiles the function. (Every exception was taken for numba's refusal, swallowed, and the
function called as Python for the rest of the process: a controller's run 30 times slower.) A cache directory
numba cannot write compiles in memory, not as Python.
"""

from __future__ import annotations

import logging

import pytest

import mbvi
from mbvi.engine import callbacks

KP, KD, TARGET = 20.0, 2.0, 0.5


class Deadline(Exception):
    """A user's own deadline, raised from a signal handler."""


def _arm(torque) -> mbvi.Scene:
    scene = mbvi.Scene(gravity=(0.0, 0.0, -9.81))
    scene.add(mbvi.RigidBody("arm", mass=1.0, inertia=(0.01, 0.01, 0.002), position=(0.0, 0.0, -0.5)))
    scene.add(mbvi.Revolute("world", "arm", anchor=(0, 0, 0), axis=(0, 1, 0), name="hinge"))
    scene.add(mbvi.ExternalTorque("arm", torque=torque, name="motor"))
    return scene


# (each test's controller a function of its own: compiled the first time this process meets it)
def held_pd(t, state):
    """The PD of docs/controllers.md, holding the arm at 0.5 rad against gravity."""
    return (0.0, KP * (TARGET - state.joint_angle("hinge")) - KD * state.joint_rate("hinge"), 0.0)


def cached_pd(t, state):
    """The same PD, a function of its own (its own compiled code and cache entry)."""
    return (0.0, KP * (TARGET - state.joint_angle("hinge")) - KD * state.joint_rate("hinge"), 0.0)


def _settles(traj: mbvi.Trajectory) -> None:
    # kp (θ* − θ) = m g d sin θ: 0.4036673722 rad (docs/controllers.md)
    assert traj.joint_angle("hinge")[-1] == pytest.approx(0.4036673722, abs=1e-6)


def test_a_deadline_met_while_a_controller_compiles_reaches_the_caller_and_the_next_run_compiles(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = callbacks.import_generated

    def interrupted(name, path):
        raise Deadline("time budget exceeded")

    monkeypatch.setattr(callbacks, "import_generated", interrupted)
    with caplog.at_level(logging.WARNING), pytest.raises(Deadline, match="time budget exceeded"):
        mbvi.simulate(_arm(held_pd), t_end=0.01, dt=1e-3)
    assert not any(isinstance(exc, Deadline) for exc in callbacks._failed.values())  # not taken for numba's
    monkeypatch.setattr(callbacks, "import_generated", real)
    with caplog.at_level(logging.WARNING):
        traj = mbvi.simulate(_arm(held_pd), t_end=6.0, dt=1e-3)
    _settles(traj)
    assert "does not compile with numba" not in caplog.text  # compiled, not called as Python


def test_numbas_own_refusal_is_still_called_as_python(caplog: pytest.LogCaptureFixture) -> None:
    """The other side: a controller numba cannot compile (it reads a dict) runs as Python, said once."""
    gains = {"kp": KP, "kd": KD}

    def dict_pd(t, state):
        return (0.0, gains["kp"] * (TARGET - state.joint_angle("hinge")) - gains["kd"] * state.joint_rate("hinge"),
                0.0)  # fmt: skip

    with caplog.at_level(logging.WARNING):
        traj = mbvi.simulate(_arm(dict_pd), t_end=6.0, dt=1e-3)
    _settles(traj)
    assert "does not compile with numba" in caplog.text


def test_a_cache_numba_cannot_write_compiles_in_memory(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A shared cache, read-only, holding the generated module: numba refuses to cache ("no locator"), and the
    controller ran as Python (20 times slower); it compiles in this process instead."""

    def read_only(name, path):
        raise RuntimeError(f"cannot cache function 'kernel': no locator available for file {str(path)!r}")

    monkeypatch.setattr(callbacks, "import_generated", read_only)
    with caplog.at_level(logging.WARNING):
        traj = mbvi.simulate(_arm(cached_pd), t_end=6.0, dt=1e-3)
    _settles(traj)
    assert "does not compile with numba" not in caplog.text  # compiled (in memory), not called as Python


def test_interruptions_are_told_apart_from_numbas_errors() -> None:
    from numba.core.errors import TypingError

    assert callbacks.interrupted(Deadline()) and callbacks.interrupted(TimeoutError())
    assert callbacks.interrupted(MemoryError())
    assert not callbacks.interrupted(TypingError("cannot type"))
    assert not callbacks.interrupted(NotImplementedError()) and not callbacks.interrupted(ValueError())
    assert callbacks.cannot_cache(PermissionError()) and not callbacks.cannot_cache(TimeoutError())
    assert not callbacks.cannot_cache(RuntimeError("something else"))
