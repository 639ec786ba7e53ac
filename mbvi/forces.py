"""Force elements: what users add to a scene. Their physics lives in force laws.

Each element type is evaluated, for all its instances at once, by the force
law registered for it (see :mod:`mbvi.forcelaws`). Conventions: SI units;
anchors are body-frame points defaulting to the body origin (for the world,
world points).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from mbvi._validate import Checked, finite, positive, renamed_state, vector3
from mbvi._validate import name as check_name

__all__ = [
    "Damper",
    "Drag",
    "ExternalForce",
    "ExternalTorque",
    "Force",
    "Gravity",
    "JointDamping",
    "Spring",
    "TorsionSpring",
]


def _element_names(names: Any, kind: str, owner: str) -> tuple[str, ...]:
    """``names`` as a tuple of names, a ValueError naming the element otherwise (a list given for a body name was a
    TypeError, "unhashable type: 'list'", when the scene looked it up)."""
    out = tuple(names)
    for value in out:
        if not isinstance(value, str) or not value:
            raise ValueError(f"{owner}: a {kind} name must be a non-empty string, got {value!r}")
    return out


class Force:
    """Abstract base class of force elements.

    Subclasses set :attr:`bodies` (names of the bodies they act on) and
    :attr:`joints` (names of joints they refer to) so the scene can check them.
    """

    name: str
    explicit_name: bool = False

    bodies = Checked(lambda names, what, owner: _element_names(names, "body", owner),
                     "Names of the bodies the element acts on (the scene checks they exist).", default=())  # fmt: skip
    joints = Checked(lambda names, what, owner: _element_names(names, "joint", owner),
                     "Names of the joints the element refers to (the scene checks them).", default=())  # fmt: skip

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(renamed_state(state, type(self)))

    def check_targets(self, body_kind: Callable[[str], str], joint_kind: Callable[[str], str]) -> None:
        """A ValueError naming the element when it cannot act on its bodies or joints, of kinds ``body_kind(name)``
        ("world", "particle", "rigid") and ``joint_kind(name)`` ("revolute", "rod", …): checked by
        :meth:`mbvi.Scene.add`, so that the scene never holds an element its law refuses at assembly."""

    def _init_name(self, name: str | None, default: str) -> None:
        self.explicit_name = name is not None
        self.name = check_name(name if name is not None else default, type(self).__name__)

    @property
    def owner(self) -> str:
        return f"{type(self).__name__} {self.name!r}"

    def _check_pair(self) -> None:
        """A two-body element must join two different bodies (the world–world pair included)."""
        a, b = self.bodies
        if a == b:
            raise ValueError(f"{self.owner}: joins body {a!r} to itself")

    def _check_not_world(self) -> None:
        """A one-body element cannot act on the fixed world."""
        (body,) = self.bodies
        if body == "world":
            raise ValueError(f"{self.owner}: cannot act on 'world' (the world is fixed); name a body")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def _non_negative(value: Any, what: str, owner: str) -> float:
    return positive(value, what, owner, allow_zero=True)


def _optional_non_negative(value: Any, what: str, owner: str) -> float | None:
    return None if value is None else positive(value, what, owner, allow_zero=True)


def _anchor(value: Any, what: str, owner: str) -> np.ndarray:
    return np.zeros(3) if value is None else vector3(value, what, owner)


def _anchor_attribute() -> Checked:
    return Checked(_anchor, "Body-frame attachment point, m, shape (3,) (the world's: a world point).")


def _non_negative_attribute(doc: str) -> Checked:
    return Checked(_non_negative, doc)


def _vector_or_callable(value: Any, what: str, owner: str) -> np.ndarray | Callable[[float], Any]:
    if callable(value):
        return value
    return vector3(value, what, owner)


def _rest_angle(value: Any, what: str, owner: str) -> float:
    angle = finite(value, what, owner)
    if abs(angle) > math.pi:
        raise ValueError(
            f"{owner}: {what} must be within [−π, π] rad (the spring's law is periodic: it knows the joint angle up "
            f"to whole turns), got {angle!r}; {angle - 2 * math.pi * round(angle / (2 * math.pi))!r} is the same rest"
        )
    return angle


class Gravity(Force):
    """Uniform gravity on every body, potential −Σ m g·x (zero at the origin).

    :class:`mbvi.Scene` adds one from its ``gravity`` argument. One added with :meth:`mbvi.Scene.add` is a field
    on top of the scene's (equal to it, gravity acts twice): a scene's own gravity is ``Scene(gravity=...)``.
    """

    def __init__(self, g: Any = (0.0, 0.0, -9.81), name: str | None = None) -> None:
        self._init_name(name, "gravity")
        self.g = vector3(g, "gravity", self.owner)


class Spring(Force):
    """Linear spring between two body points, potential ½k(|d| − L₀)².

    Parameters
    ----------
    a, b : str
        Body names (``"world"`` allowed).
    stiffness : float
        k, N/m (≥ 0).
    rest_length : float, optional
        L₀, m. Default (None): the distance of the anchors where the bodies are when the
        scene is assembled (each :func:`mbvi.simulate`), so the spring starts unstressed
        wherever the bodies are moved before a run.
    anchor_a, anchor_b : array_like, shape (3,), optional
        Body-frame attachment points, m.
    name : str, optional
    """

    #: True for the axial springs a :class:`mbvi.Beam` adds (drawn as the beam, not as springs)
    internal: bool = False
    stiffness = _non_negative_attribute("k, N/m (≥ 0).")
    rest_length = Checked(_optional_non_negative,
                          "Rest length L₀, m (≥ 0), or None: the anchors' distance at assembly.")  # fmt: skip
    anchor_a, anchor_b = _anchor_attribute(), _anchor_attribute()

    def __init__(
        self,
        a: str,
        b: str,
        stiffness: float,
        rest_length: float | None = None,
        anchor_a: Any = None,
        anchor_b: Any = None,
        name: str | None = None,
    ) -> None:
        self._init_name(name, f"spring:{a}-{b}")
        self.bodies = (a, b)
        self.a, self.b = a, b
        self._check_pair()
        self.stiffness = stiffness
        self.rest_length = rest_length
        self.anchor_a, self.anchor_b = anchor_a, anchor_b


class Damper(Force):
    """Linear viscous damper between two body points: f = −c (ḋ·d̂) d̂ on b.

    Parameters
    ----------
    a, b : str
        Body names.
    damping : float
        c, N s/m (≥ 0).
    anchor_a, anchor_b : array_like, shape (3,), optional
    name : str, optional
    """

    damping = _non_negative_attribute("c, N s/m (≥ 0).")
    anchor_a, anchor_b = _anchor_attribute(), _anchor_attribute()

    def __init__(
        self, a: str, b: str, damping: float, anchor_a: Any = None, anchor_b: Any = None, name: str | None = None
    ) -> None:
        self._init_name(name, f"damper:{a}-{b}")
        self.bodies = (a, b)
        self.a, self.b = a, b
        self._check_pair()
        self.damping = damping
        self.anchor_a, self.anchor_b = anchor_a, anchor_b


class Drag(Force):
    """Linear air resistance at a body point: f = −c v.

    Parameters
    ----------
    body : str
    coefficient : float
        c, N s/m (≥ 0).
    anchor : array_like, shape (3,), optional
        Body-frame point where the drag acts (default: the origin / centre of mass).
    name : str, optional
    """

    coefficient = _non_negative_attribute("c, N s/m (≥ 0).")
    anchor = _anchor_attribute()

    def __init__(self, body: str, coefficient: float, anchor: Any = None, name: str | None = None) -> None:
        self._init_name(name, f"drag:{body}")
        self.bodies = (body,)
        self.body = body
        self._check_not_world()
        self.coefficient = coefficient
        self.anchor = anchor


class JointDamping(Force):
    """Viscous joint friction: torque −b θ̇ about a revolute axis (force −b ḋ along a prismatic axis).

    Parameters
    ----------
    joint : str
        Name of a revolute or prismatic joint.
    coefficient : float
        b, N m s/rad (revolute) or N s/m (prismatic).
    name : str, optional
    """

    coefficient = _non_negative_attribute("b, N m s/rad or N s/m (≥ 0).")

    def check_targets(self, body_kind: Callable[[str], str], joint_kind: Callable[[str], str]) -> None:
        if joint_kind(self.joint) not in ("revolute", "prismatic"):
            raise ValueError(f"{self.owner}: joint {self.joint!r} is not a revolute or prismatic joint")

    def __init__(self, joint: str, coefficient: float, name: str | None = None) -> None:
        self._init_name(name, f"joint-damping:{joint}")
        self.joints = (joint,)
        self.joint = joint
        self.coefficient = coefficient


class TorsionSpring(Force):
    """Torsion spring on a revolute joint, potential ½k(θ − θ₀)² for |θ − θ₀| ≤ π.

    The potential is a function of the configuration, which knows the joint angle up to whole turns: θ − θ₀ is
    taken in (−π, π], so the law is periodic, with a cusp half a turn from rest (a spring that winds further, a
    clock spring, is not this law). :func:`mbvi.simulate` warns, naming the spring, when a run's joint turns
    past it.

    Parameters
    ----------
    joint : str
        Name of a revolute joint.
    stiffness : float
        k, N m/rad.
    rest_angle : float, default: 0
        θ₀, rad, in [−π, π]: the joint angle at which the spring is relaxed (the joint's angle, as
        ``traj.joint_angle`` reads it: its ``initial_angle`` at the initial configuration).
    name : str, optional
    """

    stiffness = _non_negative_attribute("k, N m/rad (≥ 0).")
    rest_angle = Checked(_rest_angle, "θ₀, rad, in [−π, π].")

    def check_targets(self, body_kind: Callable[[str], str], joint_kind: Callable[[str], str]) -> None:
        if joint_kind(self.joint) != "revolute":
            raise ValueError(f"{self.owner}: joint {self.joint!r} is not a revolute joint")

    def __init__(self, joint: str, stiffness: float, rest_angle: float = 0.0, name: str | None = None) -> None:
        self._init_name(name, f"torsion-spring:{joint}")
        self.joints = (joint,)
        self.joint = joint
        self.stiffness = stiffness
        self.rest_angle = rest_angle


class ExternalForce(Force):
    """A prescribed world-frame force at a body point.

    Parameters
    ----------
    body : str
    force : array_like, shape (3,), or callable ``(t) -> (3,)`` or ``(t, state) -> (3,)``
        N; constant, a function of time, or of time and the state (a read-only
        :class:`mbvi.StateView`: ``state.position(name)``, ``state.joint_angle(name)`` …);
        the form is read from the number of required positional parameters (see :mod:`mbvi.loads`).
    anchor : array_like, shape (3,), optional
        Body-frame point of application (default: origin / centre of mass).
    name : str, optional
    """

    force = Checked(_vector_or_callable, "N, world frame, shape (3,), or a callable of (t) or (t, state).")
    anchor = _anchor_attribute()

    def __init__(self, body: str, force: Any, anchor: Any = None, name: str | None = None) -> None:
        self._init_name(name, f"force:{body}")
        self.bodies = (body,)
        self.body = body
        self._check_not_world()
        self.force = force
        self.anchor = anchor


class ExternalTorque(Force):
    """A prescribed world-frame torque on a rigid body.

    Parameters
    ----------
    body : str
        A rigid body.
    torque : array_like, shape (3,), or callable ``(t) -> (3,)`` or ``(t, state) -> (3,)``
        N m, world frame; constant, a function of time, or of time and the state
        (a read-only :class:`mbvi.StateView`), as for :class:`ExternalForce`.
    name : str, optional
    """

    torque = Checked(_vector_or_callable, "N m, world frame, shape (3,), or a callable of (t) or (t, state).")

    def check_targets(self, body_kind: Callable[[str], str], joint_kind: Callable[[str], str]) -> None:
        if body_kind(self.body) != "rigid":
            raise ValueError(f"{self.owner}: body {self.body!r} is not a rigid body (a torque needs orientation)")

    def __init__(self, body: str, torque: Any, name: str | None = None) -> None:
        self._init_name(name, f"torque:{body}")
        self.bodies = (body,)
        self.body = body
        self._check_not_world()
        self.torque = torque
