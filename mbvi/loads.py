"""Loads that read the state: ``ExternalForce``/``ExternalTorque`` callables of ``(t)`` or ``(t, state)``.

A load given as a callable is called at every force evaluation. Which form it
has is decided **once, at assembly**, from its signature
(:func:`inspect.signature`): one required positional parameter means
``load(t)``; two mean ``load(t, state)``, where ``state`` is a read-only
:class:`StateView` of the configuration and velocity the integrator is
evaluating the force at::

    def pd(t, state):
        theta, rate = state.joint_angle("hinge"), state.joint_rate("hinge")
        return (0.0, 0.0, kp * (target - theta) - kd * rate)

    scene.add(mbvi.ExternalTorque("arm", torque=pd))

A callable whose signature cannot be read (some C functions) is called as
``load(t)``; more than two required positional parameters is a ``ValueError``.

A state-reading load makes its force law *velocity dependent*: the variational
integrators then evaluate it like damping, at the step's mean velocity (in the
RATTLE family, at the drift velocity v½ found by fixed-point iteration), which
keeps a PD controller's damping independent of the step size; the implicit
integrators (``midpoint``, ``implicit_euler``) get its Jacobians (∂F/∂q, ∂F/∂v)
by central finite differences (:meth:`mbvi.ForceLaw.force_jacobians`). Such a
law has no compiled kernel: scenes with it step on the NumPy path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mbvi import kinematics as kin
from mbvi.bodies import WORLD, RigidBody
from mbvi.geometry import BodyGeometry, LinkGeometry, vec3

__all__ = ["StateView", "call_load", "load_arity", "state_view_factory"]


def load_arity(func: Callable[..., Any], owner: str, what: str) -> int:
    """How a load callable is called: 1 for ``func(t)``, 2 for ``func(t, state)``.

    Counts the required positional parameters of ``func``'s signature (bound
    ``self`` excluded). A signature that cannot be read counts as 1.

    Raises
    ------
    ValueError
        When ``func`` requires more than two positional arguments, or none and
        accepts none.
    """
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return 1
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    params = list(sig.parameters.values())
    required = [p for p in params if p.kind in positional and p.default is inspect.Parameter.empty]
    varargs = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
    n_pos = sum(p.kind in positional for p in params)
    if len(required) > 2:
        raise ValueError(
            f"{owner}: {what} callable must take (t) or (t, state); it requires {len(required)} positional "
            f"arguments ({', '.join(p.name for p in required)})"
        )
    if len(required) == 2:
        return 2
    if not required and n_pos == 0 and not varargs:
        raise ValueError(f"{owner}: {what} callable must take (t) or (t, state); it takes no positional argument")
    return 1


def call_load(func: Callable[..., Any], arity: int, t: float, state: StateView | None, owner: str, what: str) -> Any:
    """Call a load, re-raising any error as a ValueError naming the element and the time."""
    try:
        return func(t) if arity == 1 else func(t, state)
    except Exception as exc:
        args = f"t={t:g}" if arity == 1 else f"t={t:g}, state"
        raise ValueError(f"{owner}: {what}({args}) raised {type(exc).__name__}: {exc}") from exc


class StateView:
    """A read-only view of the current state, what a ``(t, state)`` load reads.

    Built by the force law at every evaluation over the integrator's arrays;
    nothing is copied until a method is called, and every method returns a
    fresh array (or float). Bodies and joints are named as in the scene.

    Parameters
    ----------
    q, v : ndarray, shape (nq,)
        Generalized positions and velocities (made read-only).
    bodies : mapping of str to BodyGeometry
        The scene's bodies (coordinate offsets and principal axes).
    links : mapping of str to LinkGeometry
        The scene's joints in their body frames.
    """

    __slots__ = ("_bodies", "_links", "_q", "_v")

    def __init__(
        self,
        q: np.ndarray,
        v: np.ndarray,
        bodies: Mapping[str, BodyGeometry],
        links: Mapping[str, LinkGeometry],
    ) -> None:
        self._q = q.view()
        self._q.flags.writeable = False
        self._v = v.view()
        self._v.flags.writeable = False
        self._bodies = bodies
        self._links = links

    @property
    def q(self) -> np.ndarray:
        """Generalized positions, shape (nq,) (read-only)."""
        return self._q

    @property
    def v(self) -> np.ndarray:
        """Generalized velocities, shape (nq,) (read-only)."""
        return self._v

    def _body(self, name: str) -> BodyGeometry | None:
        if name == WORLD:
            return None
        try:
            return self._bodies[name]
        except KeyError:
            raise ValueError(f"unknown body {name!r}") from None

    def _joint(self, name: str, kind: str) -> tuple[LinkGeometry, BodyGeometry | None, BodyGeometry | None]:
        link = self._links.get(name)
        if link is None or link.kind != kind:
            known = sorted(k for k, j in self._links.items() if j.kind == kind)
            raise ValueError(f"unknown {kind} joint {name!r}; the {kind} joints are {known}")
        return link, self._body(link.a), self._body(link.b)

    def position(self, name: str) -> np.ndarray:
        """Position of a body's origin (centre of mass), m, shape (3,)."""
        return kin.body_position(self._q, self._body(name))

    def velocity(self, name: str) -> np.ndarray:
        """Velocity of a body's origin, m/s, shape (3,)."""
        return kin.body_velocity(self._v, self._body(name))

    def rotation(self, name: str) -> np.ndarray:
        """Body-to-world rotation in the user's body frame, shape (3, 3) (identity for particles)."""
        return kin.body_rotation(self._q, self._body(name))

    def angular_velocity(self, name: str) -> np.ndarray:
        """Angular velocity in the world frame, rad/s, shape (3,) (zero for particles)."""
        return kin.body_angular_velocity(self._q, self._v, self._body(name))

    def point(self, name: str, anchor: Any) -> np.ndarray:
        """World position of a body-frame point, m, shape (3,)."""
        return kin.body_point(self._q, self._body(name), np.asarray(anchor, dtype=float))

    def joint_angle(self, name: str) -> float:
        """Angle of a revolute joint (its ``initial_angle`` at the start), rad, wrapped to (−π, π]."""
        return float(kin.joint_angle(self._q, *self._joint(name, "revolute")))

    def joint_rate(self, name: str) -> float:
        """Rate of a revolute joint angle, rad/s."""
        return float(kin.joint_rate(self._q, self._v, *self._joint(name, "revolute")))

    def joint_displacement(self, name: str) -> float:
        """Displacement of a prismatic joint along its axis, m."""
        return float(kin.joint_displacement(self._q, *self._joint(name, "prismatic")))

    def joint_displacement_rate(self, name: str) -> float:
        """Rate of a prismatic joint displacement, m/s."""
        return float(kin.joint_displacement_rate(self._q, self._v, *self._joint(name, "prismatic")))

    def __repr__(self) -> str:
        return f"StateView({len(self._bodies)} bodies, {len(self._links)} joints)"


def _body_geometry(name: str, body: Any, offset: int) -> BodyGeometry:
    if isinstance(body, RigidBody):
        axes = tuple(vec3(row) for row in body.principal_axes)
        return BodyGeometry(name, "rigid", float(body.mass), offset, principal_axes=axes)  # type: ignore[arg-type]
    return BodyGeometry(name, "particle", float(body.mass), offset)


def state_view_factory(layout: Any) -> Callable[[np.ndarray, np.ndarray], StateView]:
    """A function ``(q, v) -> StateView`` over a :class:`mbvi.layout.Layout`'s bodies and joints."""
    bodies = {name: _body_geometry(name, b, layout.offset[name]) for name, b in layout.bodies.items()}
    links = dict(layout.joint_frames)
    return lambda q, v: StateView(q, v, bodies, links)
