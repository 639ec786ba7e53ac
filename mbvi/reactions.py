"""Joint reactions: the force and moment a joint exerts on one of its bodies, from the constraint multipliers.

The constraint force on the generalized coordinates is −Gᵀλ (M a = f − Gᵀλ); one joint's part of it is −Gᵀλ
over that joint's rows. Read on a body, it is a force on the body's centre (the translation coordinates) and a
moment about the joint's anchor (the rotation columns: Σ rᵢ × fᵢ about the centre, moved to the anchor).
:class:`mbvi.Equilibrium` reads them at rest; :meth:`mbvi.Trajectory.constraint_force` along a run, with λ of
the equations of motion at each saved state (:func:`multipliers`).
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from mbvi.kernels import AffineMap

__all__ = ["LoadSchedule", "generalized_forces", "joint_rows", "moment", "multipliers", "read_body"]


class LoadSchedule:
    """The values :meth:`mbvi.Simulator.set_load` gave a run's loads, and when: what acted at each saved state.

    The reactions of a Simulator's run are read after it, from the System whose loads hold the values set last;
    a state is read with the values that acted on the step out of it (set at its time or before).

    Parameters
    ----------
    start : list of (law, values)
        The laws of the loads (ExternalForce, ExternalTorque) and the values they held before the first set
        (a copy of their ``values``, :class:`mbvi.forcelaws.builtin._Prescribed`).
    log : list of (int, law, int, tuple of 3 float)
        Each set in order: the step it acts from (the state it was set at, 0 the first), the law, the load's
        index in it and the value.
    t0, dt : float
        The run's start and step, s: state k is at t0 + k dt.
    """

    def __init__(self, start: list, log: list, t0: float, dt: float) -> None:
        self._start, self._log = start, log
        self._laws = {id(law): law for law, _ in start}
        self._t0, self._dt = t0, dt
        self._times: list[int] | None = None  # made when first read (:meth:`_held`)
        self._values: list[dict] = []

    def _held(self) -> tuple[list[int], list[dict]]:
        """The steps from which the loads hold new values (−1: the start) and the values held from each on.

        Made when a reaction is first read, not with the trajectory: a copy of the law's values a set, 7 µs each
        (a Simulator's 2e5 sets made trajectory() take 3.5 s, and again at every call, read or not)."""
        if self._times is None:
            current = {id(law): values for law, values in self._start}
            times, values = [-1], [dict(current)]
            for step, law, i, value in self._log:
                held = current[id(law)].copy()
                held.hold(i, np.asarray(value, dtype=float))
                current[id(law)] = held
                if step == times[-1]:  # set again at that step: the last set holds
                    values[-1] = dict(current)
                else:
                    times.append(step)
                    values.append(dict(current))
            self._times, self._values = times, values
        return self._times, self._values

    def laws(self) -> list:
        """The laws of the loads (ExternalForce, ExternalTorque)."""
        return list(self._laws.values())

    def switches(self) -> list[int]:
        """The steps from which the loads hold new values (each the index of the state they were set at)."""
        if self._times is not None:
            return [k for k in self._times[1:] if k >= 0]
        return sorted({step for step, *_ in self._log if step >= 0})

    @contextlib.contextmanager
    def acting(self, t: float) -> Iterator[None]:
        """The laws hold the values that acted at time ``t`` (s) within the block, and their own again after."""
        step = round((t - self._t0) / self._dt)
        times, held = self._held()
        values = held[bisect.bisect_right(times, step) - 1]
        own = {key: law.values for key, law in self._laws.items()}
        try:
            for key, law in self._laws.items():
                law.values = values[key]
            yield
        finally:
            for key, law in self._laws.items():
                law.values = own[key]


def joint_rows(system: Any, joint: str) -> list[int]:
    """The indices of a joint's constraint rows in ``system.rows`` (ValueError naming an unknown joint)."""
    rows = [i for i, o in enumerate(system.rows.owner) if o.endswith(f"{joint!r}") and not o.startswith("RigidBody")]
    if not rows:
        raise ValueError(f"unknown joint {joint!r}")
    return rows


def read_body(system: Any, joint: str, body: str | None, ends: tuple[str, str] | None) -> str:
    """The body a joint's reaction is read on: ``body``, or its child b (its parent a when b is the world); a
    ValueError for the world, a body it does not join, or an unknown body. ``ends``: the joint's (a, b)."""
    if body is None and ends is not None:
        body = ends[0] if ends[1] == "world" else ends[1]  # (as documented: a weld listed ("bar", "world") raised)
    if body is None or body == "world":
        raise ValueError(f"joint {joint!r}: constraint forces are read on one of its bodies, not the world")
    if body not in system.layout.offset:
        raise ValueError(f"joint {joint!r}: unknown body {body!r}")
    if ends is not None and body not in ends:
        raise ValueError(f"joint {joint!r} joins {ends[0]!r} and {ends[1]!r}: it exerts no force on {body!r}")
    return body


def moment(system: Any, joint: str, body: str, q: np.ndarray, f: np.ndarray) -> np.ndarray:
    """The moment (N m, world frame, shape (n, 3)) of a joint's generalized force ``f`` (n, nq) on a rigid
    ``body``, about the joint's anchor on it, at configurations ``q`` (n, nq)."""
    layout = system.layout
    if layout.kind(body) != "rigid":
        raise ValueError(f"constraint_torque: body {body!r} is not a rigid body")
    o = layout.offset[body]
    r = q[:, o + 3 : o + 12].reshape(-1, 3, 3)  # rotation columns
    fr = f[:, o + 3 : o + 12].reshape(-1, 3, 3)
    about_centre = np.cross(r, fr).sum(axis=1)  # Σ rᵢ × fᵢ
    j = layout.joint_frames[joint]  # body-frame anchors (mbvi.geometry.LinkGeometry)
    anchor = j.anchor_a if body == j.a else j.anchor_b
    point = AffineMap.from_terms([layout.point(body, anchor)], layout.nq)
    arm = np.array([point(x)[0] for x in q]) - q[:, o : o + 3]
    return about_centre - np.cross(arm, f[:, o : o + 3])


def multipliers(
    system: Any, t: np.ndarray, q: np.ndarray, v: np.ndarray, loads: LoadSchedule | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """λ of the equations of motion at each state, shape (n, nc) (zero on rows the solves drop as redundant), and
    G's values on the active pattern (:attr:`mbvi.System.jacobian_pattern`) at each state, shape (n, entries):
    the factorizations evaluate them anyway, and a trajectory keeps them for the reactions of all its joints
    (:func:`generalized_forces`).

    G M⁻¹ Gᵀ λ = G M⁻¹ f + Ġ v with f = −∇U + F(q, v, t): the λ that keeps g̈ = 0, so that M a = f − Gᵀλ. At a
    state a run saved this is the reaction of the continuous equations there (the integrator's own multipliers
    are those of its steps, between states). Least-squares multipliers where G M⁻¹ Gᵀ is singular (a dead
    point), with the solver's warning. One factorization of G M⁻¹ Gᵀ a state (the runs' own sparse one).
    ``loads``: the values a Simulator's loads were set to along the run (else the System's own, at every state).
    """
    lam = np.zeros((len(t), system.nc))
    gdata = np.zeros((len(t), len(system.jacobian_pattern.rows)))
    act = system.active
    if not len(act):
        return lam, gdata
    w = system.inv_mass
    for k in range(len(t)):
        factor, gdata[k] = system.factor(q[k])
        with loads.acting(float(t[k])) if loads is not None else contextlib.nullcontext():
            f = system.generalized_acceleration_force(q[k], v[k], float(t[k]))
        lam[k, act] = factor.solve(system.G_matvec(gdata[k], w * f) + system.constraint_curvature(v[k])[act])
    return lam, gdata


def generalized_forces(system: Any, q: np.ndarray, lam: np.ndarray, gdata: np.ndarray, rows: list[int]) -> np.ndarray:
    """−Gᵀλ over the constraint ``rows`` only, at each configuration ``q`` (n, nq) with multipliers ``lam``
    (n, nc) and G's values ``gdata`` (n, entries) from :func:`multipliers`: shape (n, nq), N (N m per unit of a
    rotation column). A joint costs its own entries of G (evaluating the whole system's G at every state for each
    joint made reading N joints O(N²): 0.2 s a joint for 1000 pendulums over 2000 states)."""
    act = system.active
    pattern = system.jacobian_pattern
    entries = np.nonzero(np.isin(act[pattern.rows], rows))[0]  # the entries of G in the joint's rows
    contributions = -gdata[:, entries] * lam[:, act[pattern.rows[entries]]]  # (n, entries)
    out = np.zeros(q.shape)
    np.add.at(out.T, pattern.cols[entries], contributions.T)
    return out
