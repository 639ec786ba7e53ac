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
Every call must return 3 finite numbers (N for a force, N m for a torque):
an exception in the callable, or anything else it returns (a string, a tuple
of strings, ``None``, bools, NaN, another length), is a ``ValueError`` that
names the element, the call and what came back (:func:`load_value`).

A state-reading load makes its force law *velocity dependent*: the variational
integrators then evaluate it like damping, at the step's mean velocity (in the
RATTLE family, at the drift velocity v½ found by fixed-point iteration), which
keeps a PD controller's damping independent of the step size; the implicit
integrators (``midpoint``, ``implicit_euler``) differentiate the step's
residual, this force included, by finite differences.

Inside the compiled loop each callable load is its own kernel
(:mod:`mbvi.loadkernels`): compiled with numba against a compiled view whose
accessors resolve names at compile time when the function allows it, otherwise
called back as Python, one call per evaluation (the log says which and why).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from mbvi import kinematics as kin
from mbvi._validate import holds_bool, is_number
from mbvi.bodies import WORLD, RigidBody
from mbvi.errors import LoadError
from mbvi.geometry import BodyGeometry, LinkGeometry, joint_of_kind, vec3

__all__ = ["StateView", "call_load", "load_arity", "load_value", "state_view_factory"]


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


#: units of the values that loads return, by the element attribute that holds the callable
_UNITS = {"force": "N", "torque": "N m"}


def load_value(value: Any, owner: str, what: str, args: str) -> np.ndarray:
    """Check what a load callable returned: 3 finite real numbers, as a float array of shape (3,).

    Strings (``"1.0"``, ``("1", "2", "3")``), bools, ``None``, mappings, ragged or nested sequences of
    another size and non-finite values are refused, as they are for a constant load.

    Parameters
    ----------
    value : object
        What ``func(t)`` or ``func(t, state)`` returned.
    owner : str
        The element, e.g. ``"ExternalForce 'push'"``.
    what : str
        The attribute that holds the callable (``"force"``, ``"torque"``).
    args : str
        How it was called, e.g. ``"t=0.5"`` (for the message).

    Raises
    ------
    ValueError
        Naming the element, the call, what it returned and what was expected.
    """
    # the common returns first: a float array of 3, or a tuple/list of 3 Python floats or ints (not bools)
    if type(value) is np.ndarray and value.dtype.kind in "fiu" and value.size == 3:
        arr = value.astype(float).reshape(-1)
        if np.isfinite(arr).all():
            return arr
    elif type(value) in (tuple, list) and len(value) == 3 and all(type(x) in (float, int) for x in value):
        if all(math.isfinite(x) for x in value):
            return np.array(value, dtype=float)
    unit = _UNITS.get(what, "")
    expected = f"3 finite numbers ({unit})" if unit else "3 finite numbers"
    try:
        raw = np.asarray(value)
        numeric = (raw.dtype.kind in "iuf" or (raw.dtype.kind == "O" and all(is_number(x) for x in raw.flat))) and (
            not holds_bool(value)
        )
        arr = raw.astype(float).reshape(-1) if numeric else None
    except (TypeError, ValueError, OverflowError):  # ragged sequences, huge integers
        arr = None
    if arr is None or arr.shape != (3,) or not np.all(np.isfinite(arr)):
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        if args == "set_load":  # a value given, not a function's return
            raise ValueError(f"{owner}: set_load's value must be {expected}; got {shown} ({type(value).__name__})")
        raise ValueError(
            f"{owner}: {what}({args}) must return {expected}; it returned {shown} ({type(value).__name__})"
        )
    return arr


def call_load(
    func: Callable[..., Any], arity: int, t: float, state: StateView | None, owner: str, what: str
) -> np.ndarray:
    """Call a load and check its value (:func:`load_value`); errors are ValueErrors naming the element and the time
    (a :class:`mbvi.errors.LoadError` when the function raised: the run stops there, as a ``SolverError``).

    Returns
    -------
    ndarray, shape (3,)
        The load, N (force) or N m (torque).
    """
    args = f"t={t:g}" if arity == 1 else f"t={t:g}, state"
    try:
        value = func(t) if arity == 1 else func(t, state)
    except Exception as exc:
        raise LoadError(f"{owner}: {what}({args}) raised {type(exc).__name__}: {exc}", culprit=owner) from exc
    try:
        return load_value(value, owner, what, args)
    except ValueError as exc:  # not a force: the run stops there (a LoadError is a ValueError too)
        raise LoadError(str(exc), culprit=owner) from None


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
            raise ValueError(f"unknown body {name!r}; the bodies are {sorted(self._bodies)}") from None

    def _joint(self, name: str, kind: str) -> tuple[LinkGeometry, BodyGeometry | None, BodyGeometry | None]:
        link = self._links.get(name)
        if link is None or link.kind != kind:
            raise ValueError(joint_of_kind(name, kind, {k: j.kind for k, j in self._links.items()}))
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
        body = self._body(name)
        try:
            anchor = np.asarray(anchor, dtype=float).reshape(3)
        except (TypeError, ValueError):
            raise ValueError(f"point({name!r}, {anchor!r}): the anchor must be 3 numbers (m, body frame)") from None
        return kin.body_point(self._q, body, anchor)

    def joint_angle(self, name: str) -> float:
        """Angle of a revolute joint, rad: within π of its ``initial_angle`` (which it is at the start; a state does
        not count turns)."""
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
