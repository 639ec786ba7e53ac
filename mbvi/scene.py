"""Scenes: a networkx graph of bodies (nodes) and joints (edges), with forces attached."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from typing import Any

import networkx as nx
import numpy as np

from mbvi._validate import recheck, vector3
from mbvi.bodies import WORLD, Body, RigidBody
from mbvi.forces import Force
from mbvi.joints import Joint

__all__ = ["ForceList", "Scene"]


class Scene:
    """A mechanical scene.

    Parameters
    ----------
    gravity : array_like, shape (3,), default: (0, 0, -9.81)
        Gravitational acceleration, m/s². ``None`` or zeros for none.

    Attributes
    ----------
    graph : networkx.MultiGraph
        Bodies are nodes (attribute ``body``; the node ``"world"`` is fixed),
        joints are edges keyed by joint name (attribute ``joint``).
    forces : ForceList of mbvi.forces.Force
        Force elements in insertion order (read-only: forces join through :meth:`add`).

    Examples
    --------
    >>> import mbvi
    >>> scene = mbvi.Scene(gravity=(0, 0, -9.81))
    >>> _ = scene.add(mbvi.Particle("bob", mass=1.0, position=(1, 0, 0)))
    >>> _ = scene.add(mbvi.Rod("world", "bob"))
    >>> sorted(scene.graph.nodes)
    ['bob', 'world']
    """

    def __init__(self, gravity: Any = (0.0, 0.0, -9.81)) -> None:
        self.gravity = gravity
        self._added: set[int] = set()  # the ids of the elements added (one object added twice is refused)
        self._graph = nx.MultiGraph()
        self._graph.add_node(WORLD, body=None)
        self._bodies: dict[str, Body] = {}
        self._joints: dict[str, Joint] = {}
        self._forces: list[Force] = []
        self._forces_view = ForceList(self._forces)
        self._force_names: set[str] = set()
        self.beams: dict[str, Any] = {}

    # -- adding ----------------------------------------------------------------------------------
    def add(self, element: Any) -> Any:
        """Add a body, joint, force or composite element (e.g. a beam); returns it.

        A joint or force without an explicit name whose default name is taken here is renamed ``name#2``, …;
        one already in another scene is added as a renamed copy (the one returned), so that the other scene
        keeps it under the name it knows.

        Raises
        ------
        ValueError
            Duplicate name, unknown body or joint, an element already in the scene (one object added twice would
            act twice: a spring of twice the stiffness, a joint's rows twice), or an element of unknown type. A
            composite element that fails leaves the scene as it was.
        """
        if id(element) in self._added:  # (the scene holds its elements: their ids are theirs while they are in it)
            kind = type(element).__name__
            raise ValueError(f"{kind} {getattr(element, 'name', '')!r} is already in the scene: add a new {kind} for "
                             "a second one")  # fmt: skip
        if isinstance(element, Body):
            if element.name in self._bodies:
                raise ValueError(f"duplicate body name {element.name!r}")
            self._bodies[element.name] = element
            self._graph.add_node(element.name, body=element)
        elif isinstance(element, Joint):
            for b in (element.a, element.b):
                self._require_body(b, element)
            element.check_bodies(self._body_kind)  # (a hinge on a particle was taken, and refused at assembly)
            element = self._named(element, self._unique(element.name, element.explicit_name, "joint", element))
            self._joints[element.name] = element
            self._graph.add_edge(element.a, element.b, key=element.name, joint=element)
        elif isinstance(element, Force):
            self._require_targets(element)
            if hasattr(element, "check_targets"):  # (a plugin's element may be no mbvi.Force subclass)
                element.check_targets(self._body_kind, lambda j: self._joints[j].kind)
            element = self._named(element, self._unique(element.name, element.explicit_name, "force", element))
            element._added_targets = _targets(element)  # (check() finds them changed: a spring's b set anew)
            self._forces.append(element)
        elif hasattr(element, "expand"):
            if element.name in self.beams or element.name in self._bodies:
                raise ValueError(f"duplicate name {element.name!r}")
            marks = len(self._bodies), len(self._joints), len(self._forces), len(self.beams)  # (not a copy: O(beam))
            try:
                self.beams[element.name] = element
                for part in element.expand():
                    self.add(part)
            except Exception as exc:  # as it was: no half-added beam (its first nodes were simulated, its name taken)
                self._take_back(*marks)
                who = f"{type(element).__name__} {element.name!r}"
                if type(exc) is ValueError and not str(exc).startswith(who):  # a part's error: say whose part
                    raise ValueError(f"{who}: {exc} (a part it adds)") from None
                raise
        else:
            raise ValueError(f"cannot add {element!r} to a scene (not a body, joint or force)")
        self._added.add(id(element))
        original = getattr(element, "_copied_from", None)
        if original is not None:  # a renamed copy: the object given is in the scene too (a second add is refused)
            self._added.add(id(original))
        element._in_scenes = getattr(element, "_in_scenes", 0) + 1
        return element

    def _take_back(self, bodies: int, joints: int, forces: int, beams: int) -> None:
        """Remove what a composite element that failed added past the scene's first ``bodies``, ``joints``,
        ``forces`` and ``beams`` (its own name, the composites inside it; an add that fails changes nothing, so
        these are its parts that were taken). In place, so that a view of the graph or of the forces list taken
        before stays the scene's; its cost is the scene's size, on failure only."""
        gone = [*list(self._bodies.values())[bodies:], *list(self._joints.values())[joints:], *self._forces[forces:]]
        for element in [*gone, *list(self.beams.values())[beams:]]:
            if id(element) in self._added:  # (an add this scene completed: counted once more in a scene)
                self._added.discard(id(element))
                element._in_scenes = max(getattr(element, "_in_scenes", 1) - 1, 0)
        for element in gone:
            if isinstance(element, Joint):
                del self._joints[element.name]
                if self._graph.has_edge(element.a, element.b, key=element.name):
                    self._graph.remove_edge(element.a, element.b, key=element.name)
            elif isinstance(element, Body):
                del self._bodies[element.name]
                self._graph.remove_node(element.name)
            else:
                self._force_names.discard(element.name)
        del self._forces[forces:]
        for name in list(self.beams)[beams:]:
            del self.beams[name]

    @staticmethod
    def _named(element: Any, name: str) -> Any:
        """``element`` under ``name``: renamed in place, or, when it is already in another scene (under its
        old name, which that scene files it by and its loads and joint references use), a renamed copy."""
        if name == element.name:
            return element
        if getattr(element, "_in_scenes", 0):
            original, element = element, copy.copy(element)
            for key, value in vars(element).items():  # (its arrays and records its own: an edit of one in place
                # changed both)
                if isinstance(value, (np.ndarray, list, dict, set)):
                    vars(element)[key] = value.copy()
            element._in_scenes, element._copied_from = 0, original  # (holds it: its id stays its own)
        element.name = name
        return element

    def __copy__(self) -> Scene:
        """A scene of the same elements whose records are its own: adding to the copy leaves this one as it is."""
        new = Scene.__new__(Scene)
        new.__dict__.update(self.__dict__)
        new._gravity = self._gravity.copy()
        new._bodies, new._joints, new.beams = dict(self._bodies), dict(self._joints), dict(self.beams)
        new._forces, new._force_names, new._added = list(self._forces), set(self._force_names), set(self._added)
        new._forces_view = ForceList(new._forces)
        new._graph = self._graph.copy()
        return new

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["_added"]  # (ids are this process's and these objects': rebuilt from the copies)
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        if "forces" in state:  # (pickled when the forces were a plain list attribute)
            state["_forces"] = list(state.pop("forces"))
            state["_forces_view"] = ForceList(state["_forces"])
        if "gravity" in state:
            state["_gravity"] = state.pop("gravity")
        self.__dict__.update(state)
        elements = (*self._bodies.values(), *self._joints.values(), *self._forces, *self.beams.values())
        self._added = {id(e) for e in elements}

    @property
    def graph(self) -> nx.MultiGraph:
        """The scene as a ``networkx.MultiGraph`` (bodies as nodes with ``body=``, joints as edges with ``joint=``),
        read-only: a scene changes through :meth:`add` (a node removed from the graph was still simulated; the
        bodies and joints are the scene's own record)."""
        return nx.freeze(self._graph.copy(as_view=True))

    def _body_kind(self, name: str) -> str:
        """"world", "particle" or "rigid" (a beam's nodes are particles)."""
        if name == WORLD:
            return "world"
        return "rigid" if isinstance(self._bodies[name], RigidBody) else "particle"

    def _require_targets(self, force: Any) -> None:
        """A ValueError naming ``force`` when a body or joint it acts on is not in the scene."""
        for b in getattr(force, "bodies", ()):
            self._require_body(b, force)
        for j in getattr(force, "joints", ()):
            if j not in self._joints:
                raise ValueError(f"{_owner(force)}: unknown joint {j!r}")

    def _require_body(self, name: str, element: Any) -> None:
        if name != WORLD and name not in self._bodies:
            raise ValueError(f"{type(element).__name__} {element.name!r}: unknown body {name!r}")

    def _unique(self, name: str, explicit: bool, kind: str, element: Any) -> str:
        def taken(n: str) -> bool:  # (no union of every name at each add: a scene of n elements was O(n²))
            return n in self._joints or n in self._force_names

        if taken(name):
            if explicit:
                raise ValueError(f"duplicate {kind} name {name!r}")
            i = 2
            while taken(f"{name}#{i}"):
                i += 1
            name = f"{name}#{i}"
        if kind == "force":
            self._force_names.add(name)
        return name

    # -- queries ---------------------------------------------------------------------------------
    @property
    def gravity(self) -> np.ndarray:
        """Gravitational acceleration, m/s², shape (3,); zeros for none (``None`` when set)."""
        return self._gravity

    @gravity.setter
    def gravity(self, value: Any) -> None:
        self._gravity = np.zeros(3) if value is None else vector3(value, "gravity", "Scene")

    @property
    def forces(self) -> ForceList:
        """Force elements in insertion order: a read-only live view (a force joins through :meth:`add`, which
        checks it)."""
        return self._forces_view

    @property
    def bodies(self) -> list[Body]:
        """Bodies in insertion order (the world excluded)."""
        return list(self._bodies.values())

    @property
    def joints(self) -> list[Joint]:
        """Joints in insertion order."""
        return list(self._joints.values())

    def body(self, name: str) -> Body:
        """The body called ``name``."""
        try:
            return self._bodies[name]
        except KeyError:
            raise ValueError(f"unknown body {name!r}") from None

    def joint(self, name: str) -> Joint:
        """The joint called ``name``."""
        try:
            return self._joints[name]
        except KeyError:
            raise ValueError(f"unknown joint {name!r}") from None

    def has_loops(self) -> bool:
        """True when the joint graph has a cycle (closed kinematic loop)."""
        G = nx.Graph()
        G.add_nodes_from(self._graph.nodes)
        for a, b, _ in self._graph.edges(keys=True):
            if G.has_edge(a, b) or a == b:
                return True
            G.add_edge(a, b)
        return not nx.is_forest(G)

    @classmethod
    def from_urdf(
        cls,
        path_or_xml: str | os.PathLike | bytes,
        joint_positions: Mapping[str, float] | None = None,
        gravity: Any = (0.0, 0.0, -9.81),
    ) -> Scene:
        """A scene from a URDF robot description (needs ``pip install 'mbvi[urdf]'``).

        Links become rigid bodies and joints ``Revolute``/``Prismatic``/``Fixed``
        joints, named as in the URDF; the root link is fixed to the world. See
        :func:`mbvi.urdf.scene_from_urdf` for what is read, what is ignored
        (with a warning) and the errors.

        Parameters
        ----------
        path_or_xml : str, path-like or bytes
            A URDF file, or its XML text.
        joint_positions : mapping of str to float, optional
            Initial joint coordinates by URDF joint name, rad or m.
        gravity : array_like, shape (3,), default: (0, 0, -9.81)
            m/s².

        Returns
        -------
        Scene
        """
        from mbvi.urdf import scene_from_urdf

        return scene_from_urdf(path_or_xml, joint_positions=joint_positions, gravity=gravity, scene_type=cls)

    def check(self) -> None:
        """Check that the scene's elements are still as they were added (:func:`mbvi.assemble` calls it).

        An element's attributes are checked when set; this finds what bypassed that: a name, or a joint's or
        force's body, changed after the element was added (the scene, its joints and its forces know the
        element by the name it had), and an array attribute edited in place (``particle.position[0] = nan``,
        ``joint.axis[:] = 0``). O(elements).

        Raises
        ------
        ValueError
            Naming the element and what changed.
        """
        self.gravity = self._gravity  # (an array edited in place)
        for key, body in self._bodies.items():
            if body.name != key:
                raise ValueError(f"{_owner(body)}: renamed after it was added to the scene as {key!r} (the scene, "
                                 "its joints and forces know it by that name): add a new body instead")  # fmt: skip
        for key, joint in self._joints.items():
            if joint.name != key:
                raise ValueError(f"{_owner(joint)}: renamed after it was added to the scene as {key!r}: add a new "
                                 "joint instead")  # fmt: skip
            if not self._graph.has_edge(joint.a, joint.b, key=key):
                raise ValueError(f"{_owner(joint)}: its bodies were changed after it was added to the scene (now "
                                 f"{joint.a!r} and {joint.b!r}): add a new joint instead")  # fmt: skip
        names = set(self._joints)
        for force in self._forces:
            if force.name not in self._force_names:
                raise ValueError(f"{_owner(force)}: renamed after it was added to the scene (the scene knows it by "
                                 "the name it had): add a new force instead")  # fmt: skip
            if force.name in names:
                raise ValueError(f"{_owner(force)}: its name was changed after it was added to the scene, to one "
                                 "another joint or force has")  # fmt: skip
            names.add(force.name)
            added = getattr(force, "_added_targets", None)
            if added is not None and _targets(force) != added:
                now = _targets(force)
                changed = (["bodies"] if now[0] != added[0] else []) + [
                    f"{n} ({was!r} → {is_!r})" for n, was, is_ in zip(("a", "b", "body", "joint"), added[1], now[1],
                                                                       strict=True) if was != is_]  # fmt: skip
                raise ValueError(f"{_owner(force)}: what it acts on was changed after it was added to the scene "
                                 f"({', '.join(changed)}): add a new force instead")  # fmt: skip
            self._require_targets(force)
        recheck([*self._bodies.values(), *self._joints.values(), *self._forces])

    def __repr__(self) -> str:
        return f"Scene({len(self._bodies)} bodies, {len(self._joints)} joints, {len(self._forces)} forces)"


def _targets(force: Any) -> tuple:
    """What a force acts on, every way it says so: its ``bodies`` and its ``a``, ``b`` or ``body`` (the laws read
    these; a spring's ``b`` set anew moved the force while ``bodies`` still named the old body)."""
    bodies = tuple(getattr(force, "bodies", ()) or ())
    return bodies, tuple(getattr(force, n, None) for n in ("a", "b", "body", "joint"))


def _owner(element: Any) -> str:
    """How messages name an element: its type and name."""
    return f"{type(element).__name__} {getattr(element, 'name', '?')!r}"


class ForceList(Sequence):
    """A scene's forces, read-only and live (:attr:`Scene.forces`): a force joins a scene through
    :meth:`Scene.add`, which checks it and refuses one added twice (it would act twice)."""

    def __init__(self, items: list) -> None:
        self._items = items

    def __getitem__(self, i: Any) -> Any:
        return self._items[i]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Any:
        return iter(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ForceList, list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._items)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("scene.forces is read-only: add a force with scene.add(force), which checks it (a "
                         "scene does not remove elements: build a new one, or copy.copy the scene before adding)")

    append = extend = insert = remove = pop = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = _refuse

