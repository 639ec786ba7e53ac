"""Robot descriptions: a URDF file (or string) as an mbvi :class:`~mbvi.Scene`.

:func:`scene_from_urdf` (also :meth:`mbvi.Scene.from_urdf`) reads the file with
`yourdfpy <https://github.com/clemense/yourdfpy>`_ — a maintained, pure-Python
URDF parser that loads meshes only when asked (we never ask it: mbvi draws
meshes itself with PyVista's readers), with no compiled dependency beyond
lxml — and builds:

* one :class:`mbvi.RigidBody` per link with a mass, named as in the URDF, its
  centre of mass at the ``<inertial><origin>``, its full inertia tensor rotated
  from the inertial frame into the link frame (mbvi diagonalizes it), its body
  frame parallel to the link frame (``state.rotation(link)`` and
  ``traj.rotation(link)`` are the link frame's orientation; positions are the
  centre of mass);
* one :class:`mbvi.Revolute` (``revolute`` and ``continuous``),
  :class:`mbvi.Prismatic` or :class:`mbvi.Fixed` per joint, named as in the URDF,
  with its anchor at the joint frame's origin and its axis the ``<axis>``
  (normalized) in the joint frame; ``floating`` joints add no constraint (the
  child is free);
* ``joint_positions`` set the initial joint coordinates by forward kinematics
  through the tree, and the joints' angles (``traj.joint_angle``,
  ``state.joint_angle``) are measured like the URDF's: zero at the zero
  configuration;
* the root link (no parent joint) welded to the world by ``Fixed("world", root)``,
  or, when it has no mass, taken *as* the world;
* a link without mass (no ``<inertial>`` or mass 0) on a ``fixed`` joint merged
  into its parent (its visuals and child joints move with the parent);
* ``<dynamics damping>`` → :class:`mbvi.JointDamping`;
* ``<visual>`` boxes, cylinders, spheres and meshes (when the file exists; read
  by PyVista) drawn by :mod:`mbvi.render` at their origins.

What mbvi cannot represent — joint limits, joint friction, mimic couplings,
collision geometry, transmissions, calibration and safety controllers, visuals
of links merged into the world, mesh files that are not found — is named in one
``UserWarning`` line; nothing is dropped silently.
"""

from __future__ import annotations

import io
import math
import os
import warnings
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mbvi.bodies import WORLD, RigidBody
from mbvi.forces import JointDamping
from mbvi.joints import Fixed, Prismatic, Revolute
from mbvi.shapes import Shape

__all__ = ["Visuals", "scene_from_urdf"]

_MOVABLE = ("revolute", "continuous", "prismatic")
_KNOWN = (*_MOVABLE, "fixed", "floating")


@dataclass(frozen=True)
class Visuals(Shape):
    """A link's URDF visuals, for drawing only: primitives and meshes placed in the body frame.

    Parameters
    ----------
    parts : tuple of dict
        Each ``{"type": "box" | "cylinder" | "sphere" | "mesh", …, "transform": 16 floats}``:
        the primitive's parameters as in :meth:`mbvi.Box.describe` (URDF cylinders lie
        along z like mbvi's), ``{"path": str, "scale": [sx, sy, sz]}`` for a mesh, and the
        row-major 4×4 placement in the body frame (centre of mass at the origin), m.

    Notes
    -----
    It carries no mass properties (URDF links give theirs in ``<inertial>``):
    :meth:`volume` and :meth:`unit_inertia` raise.
    """

    parts: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)

    def volume(self) -> float:
        raise ValueError("Visuals carry no mass properties: give the body a mass and an inertia")

    def unit_inertia(self) -> np.ndarray:
        raise ValueError("Visuals carry no mass properties: give the body a mass and an inertia")

    def describe(self) -> dict:
        return {"type": "compound", "parts": [dict(p) for p in self.parts]}


def _read(source: str | os.PathLike | bytes) -> tuple[bytes, Path | None]:
    """The URDF's bytes and its directory (None for a string)."""
    if isinstance(source, str | bytes) and not source.strip():
        raise ValueError("URDF: the input is empty (expected a URDF file's path or its XML text)")
    if isinstance(source, bytes):
        return source.strip(), None
    if isinstance(source, str) and source.lstrip("\ufeff \t\r\n").startswith("<"):
        # (a triple-quoted string starts with a newline; a file read as text may start with a byte-order mark)
        return source.lstrip("\ufeff").strip().encode(), None
    path = Path(source)
    try:
        found = path.is_file()
    except OSError as exc:  # (a name too long for a file: XML text with something before its '<', say)
        raise ValueError(f"URDF: the input is neither XML text (starting with '<') nor a file's path ({exc.strerror}): "
                         f"{str(source)[:60]!r}…") from None  # fmt: skip
    if not found:
        raise FileNotFoundError(f"URDF file not found: {str(path)!r}")
    return path.read_bytes(), path.resolve().parent


_SHAPES = ("box", "cylinder", "sphere", "mesh")
_INERTIA = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
#: a joint's optional elements and their numeric attributes (one number each)
_JOINT_NUMBERS = {
    "dynamics": ("damping", "friction"),
    "limit": ("lower", "upper", "effort", "velocity"),
    "mimic": ("multiplier", "offset"),
    "calibration": ("rising", "falling"),
    "safety_controller": ("soft_lower_limit", "soft_upper_limit", "k_position", "k_velocity"),
}


def _floats(
    element: ET.Element | None,
    attr: str,
    count: int | tuple[int, ...],
    where: str,
    *,
    tag: str | None = None,
    required: bool = False,
    positive: bool = False,
    finite: bool = True,
    commas: bool = False,
) -> tuple[float, ...] | None:
    """Read a numeric attribute, or raise a ValueError naming where it is.

    Parameters
    ----------
    element : xml.etree.ElementTree.Element or None
        The element holding the attribute (None: absent, nothing to read).
    attr : str
        The attribute's name.
    count : int or tuple of int
        How many numbers it must hold (any of a tuple's counts).
    where : str
        The owner named in the message, e.g. ``"URDF joint 'elbow'"``.
    tag : str, optional
        The element's path in the message (default its tag), e.g. ``"inertial><mass"``.
    required : bool, default: False
        Whether a missing attribute is an error (else it reads as None).
    positive : bool, default: False
        Whether every number must be > 0 (sizes).
    finite : bool, default: True
        Whether NaN and infinities are errors.
    commas : bool, default: False
        Whether commas separate numbers too (yourdfpy allows it in ``<box size>`` and ``<mesh scale>``).

    Returns
    -------
    tuple of float or None
        The numbers, or None when the attribute is absent and not required.

    Raises
    ------
    ValueError
        ``"URDF joint 'elbow': <axis xyz> must be 3 numbers, got '0 1'"`` and the like.
    """
    if element is None:
        return None
    label = f"{where}: <{tag or element.tag} {attr}>"
    text = element.get(attr)
    if text is None:
        if required:
            raise ValueError(f"{label} is missing")
        return None
    counts = (count,) if isinstance(count, int) else count
    want = " or ".join(str(n) for n in counts)
    want = "a number" if counts == (1,) else f"{want} numbers"
    try:
        values = tuple(float(x) for x in (text.replace(",", " ") if commas else text).split())
    except ValueError:
        raise ValueError(f"{label} must be {want}, got {text!r}") from None
    if len(values) not in counts:
        raise ValueError(f"{label} must be {want}, got {text!r}")
    if finite and not all(math.isfinite(v) for v in values):
        raise ValueError(f"{label} must be finite, got {text!r}")
    if positive and not all(v > 0 for v in values):
        raise ValueError(f"{label} must be positive, got {text!r}")
    return values


def _check_geometry(element: ET.Element, where: str) -> None:
    """A ``<visual>`` or ``<collision>`` holds one well-formed shape with positive sizes."""
    label = f"{element.tag}><geometry"
    geometry = element.find("geometry")
    if geometry is None:
        raise ValueError(f"{where}: <{element.tag}> has no <geometry>")
    shapes = list(geometry)
    if len(shapes) != 1 or shapes[0].tag not in _SHAPES:
        got = ", ".join(f"<{s.tag}>" for s in shapes) or "nothing"
        raise ValueError(f"{where}: <{label}> must hold one of <box>, <cylinder>, <sphere>, <mesh>, got {got}")
    shape = shapes[0]
    tag = f"{label}><{shape.tag}"
    if shape.tag == "box":
        _floats(shape, "size", 3, where, tag=tag, required=True, positive=True, commas=True)
    elif shape.tag == "cylinder":
        for attr in ("radius", "length"):
            _floats(shape, attr, 1, where, tag=tag, required=True, positive=True)
    elif shape.tag == "sphere":
        _floats(shape, "radius", 1, where, tag=tag, required=True, positive=True)
    else:
        if not shape.get("filename"):
            raise ValueError(f"{where}: <{tag} filename> is missing")
        _floats(shape, "scale", (1, 3), where, tag=tag, commas=True)  # negative scales mirror: allowed


def _check_origin(element: ET.Element | None, where: str, tag: str) -> None:
    """An ``<origin>``'s ``xyz`` and ``rpy``, three numbers each when given."""
    for attr in ("xyz", "rpy"):
        _floats(element, attr, 3, where, tag=tag)


def _single(element, tags: tuple[str, ...], where: str) -> None:
    """A ValueError naming ``where`` when ``element`` holds more than one of a tag the URDF spec allows once (the
    parser reads the first and drops the others without a word)."""
    for tag in tags:
        if len(element.findall(tag)) > 1:
            raise ValueError(f"{where}: more than one <{tag}> (a URDF allows one; the others would be dropped)")


def _check(root: ET.Element) -> None:
    """Check what yourdfpy would read carelessly: numbers, shapes, parent and child links.

    Parameters
    ----------
    root : xml.etree.ElementTree.Element
        The ``<robot>`` element.

    Raises
    ------
    ValueError
        Naming the link, joint or material and the attribute: a malformed
        number, a non-positive size, a geometry without one known shape, a
        mesh without a file name, a joint without ``<parent link>`` or
        ``<child link>``.
    """
    if not root.get("name"):
        raise ValueError("URDF: <robot> has no name")
    for link in root.findall("link"):
        where = f"URDF link {link.get('name')!r}"
        _single(link, ("inertial",), where)  # (a second one was dropped, silently: the spec allows one)
        inertial = link.find("inertial")
        if inertial is not None:
            _single(inertial, ("origin", "mass", "inertia"), where + " <inertial>")
            _check_origin(inertial.find("origin"), where, "inertial><origin")
            _floats(inertial.find("mass"), "value", 1, where, tag="inertial><mass")
            for attr in _INERTIA:  # all six: yourdfpy reads a missing one as 1 kg m² (the spec requires them)
                _floats(inertial.find("inertia"), attr, 1, where, tag="inertial><inertia", required=True)
        for kind in ("visual", "collision"):
            for element in link.findall(kind):
                _check_origin(element.find("origin"), where, f"{kind}><origin")
                _check_geometry(element, where)
                if kind == "visual":
                    _floats(element.find("material/color"), "rgba", 4, where, tag="visual><material><color")
    for joint in root.findall("joint"):
        where = f"URDF joint {joint.get('name')!r}"
        for role in ("parent", "child"):
            element = joint.find(role)
            if element is None or not element.get("link"):
                raise ValueError(f"{where}: <{role} link> is missing")
        _check_origin(joint.find("origin"), where, "origin")
        _floats(joint.find("axis"), "xyz", 3, where)
        for tag, attrs in _JOINT_NUMBERS.items():
            for attr in attrs:  # limits may be infinite (they are not used)
                _floats(joint.find(tag), attr, 1, where, finite=tag != "limit")
    for material in root.findall("material"):
        _floats(material.find("color"), "rgba", 4, f"URDF material {material.get('name')!r}", tag="material><color")


def _parse(data: bytes, base: Path | None) -> tuple[Any, list[str]]:
    """Parse strictly (malformed XML is an error, not recovered), check it, and hand the tree to yourdfpy: its
    robot, and the names of the ``<transmission>`` elements (yourdfpy reads none: they were never warned of)."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        raise ValueError(f"URDF: malformed XML: {exc}") from None
    if root.tag != "robot":
        raise ValueError(f"URDF: the root element is <{root.tag}>, expected <robot>")
    names = [link.get("name") for link in root.findall("link")]
    for element in root.findall("link") + root.findall("joint"):
        if not element.get("name"):
            raise ValueError(f"URDF: a <{element.tag}> has no name")
    dup = sorted(n for n, count in Counter(names).items() if count > 1)
    if dup:
        raise ValueError(f"URDF link {dup[0]!r} is defined more than once")
    _check(root)
    try:
        import yourdfpy
    except ImportError as exc:  # pragma: no cover - the urdf extra is not installed
        raise ImportError("URDF import needs yourdfpy: pip install 'mbvi[urdf]'") from exc
    kwargs: dict[str, Any] = {"build_scene_graph": False, "load_meshes": False}
    if base is not None:
        kwargs["mesh_dir"] = str(base)
    transmissions = [t.get("name") or "(unnamed)" for t in root.findall("transmission")]
    try:
        return yourdfpy.URDF.load(io.BytesIO(data), **kwargs).robot, transmissions
    except Exception as exc:
        raise ValueError(f"URDF: {type(exc).__name__}: {exc}") from exc


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix about a unit axis (Rodrigues)."""
    K = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * K + (1 - math.cos(angle)) * (K @ K)


def _motion(kind: str, axis: np.ndarray, value: float) -> np.ndarray:
    """4×4 transform of a joint's motion at coordinate ``value`` (rad or m)."""
    T = np.eye(4)
    if kind in ("revolute", "continuous"):
        T[:3, :3] = _rotation(axis, value)
    elif kind == "prismatic":
        T[:3, 3] = value * axis
    return T


def _mass(link: Any) -> float:
    return 0.0 if link.inertial is None or link.inertial.mass is None else float(link.inertial.mass)


def _mesh_path(filename: str, base: Path | None) -> Path | None:
    """An existing file for a URDF mesh reference (``package://``, ``file://``, relative or absolute), or None."""
    name = filename
    for prefix in ("file://", "package://"):
        if name.startswith(prefix):
            name = name[len(prefix) :]
    rel = Path(name)
    # a relative name is looked up from the URDF's folder out (its package's root may be a parent), never
    # from the working directory, whose file of the same name may be another robot's; the working
    # directory only for URDF text, which has no folder
    candidates = [rel] if rel.is_absolute() or base is None else []
    if base is not None:
        candidates += [base / rel] + [p / rel for p in base.parents]
        if filename.startswith("package://") and len(rel.parts) > 1:  # package name dropped
            stripped = Path(*rel.parts[1:])
            candidates += [base / stripped] + [p / stripped for p in base.parents]
    for c in candidates:
        if c.is_file():
            return c.resolve()
    return None


def _visual_parts(link: Any, T: np.ndarray, base: Path | None, missing: list[str]) -> list[dict]:
    """Drawable parts of a link's visuals, placed by ``T`` (link frame → body frame)."""
    parts = []
    for vis in link.visuals:
        geom = vis.geometry
        if geom is None:
            continue
        origin = np.eye(4) if vis.origin is None else np.asarray(vis.origin, dtype=float)
        placement = [float(x) for x in (T @ origin).ravel()]
        if geom.box is not None:
            part = {"type": "box", "size": [float(x) for x in geom.box.size]}
        elif geom.cylinder is not None:
            part = {"type": "cylinder", "radius": float(geom.cylinder.radius), "length": float(geom.cylinder.length)}
        elif geom.sphere is not None:
            part = {"type": "sphere", "radius": float(geom.sphere.radius)}
        elif geom.mesh is not None:
            path = _mesh_path(geom.mesh.filename, base)
            if path is None:
                missing.append(f"{link.name}: {geom.mesh.filename}")
                continue
            scale = np.ones(3) if geom.mesh.scale is None else np.broadcast_to(np.asarray(geom.mesh.scale, float), 3)
            part = {"type": "mesh", "path": str(path), "scale": [float(x) for x in scale]}
        else:
            continue
        part["transform"] = placement
        parts.append(part)
    return parts


def scene_from_urdf(
    source: str | os.PathLike | bytes,
    joint_positions: Mapping[str, float] | None = None,
    gravity: Any = (0.0, 0.0, -9.81),
    *,
    scene_type: type,
) -> Any:
    """Build a scene from a URDF robot description (what :meth:`mbvi.Scene.from_urdf` calls).

    Parameters
    ----------
    source : str, path-like or bytes
        A URDF file's path, or its XML text (a string starting with ``<``).
    joint_positions : mapping of str to float, optional
        Initial coordinates of movable joints by URDF name: rad for revolute
        and continuous joints, m for prismatic ones (default 0).
    gravity : array_like, shape (3,), default: (0, 0, -9.81)
        m/s².
    scene_type : type
        The scene class to build (:class:`mbvi.Scene`; this module does not import it).

    Returns
    -------
    mbvi.Scene
        Bodies named as the URDF's links, joints as its joints (see :mod:`mbvi.urdf`).

    Raises
    ------
    ValueError
        Empty input, malformed XML, a malformed number (``<axis xyz="0 1"/>``,
        ``<mass value="heavy"/>``, …), a visual or collision shape with a
        size that is not positive or a mesh without a file name, a joint
        without ``<parent link>`` or ``<child link>`` or naming an unknown
        one, a link with two parent joints or in a cycle, a negative mass, an
        inertia that is not positive definite (or breaks the triangle
        inequality), a massless link that moves on a joint, an unsupported
        joint type (``planar``), a zero axis, or an unknown or fixed joint in
        ``joint_positions`` — naming the link or joint (and the attribute).
    FileNotFoundError
        When ``source`` is a path that does not exist.

    Warns
    -----
    UserWarning
        One line naming what the scene leaves out (limits, friction, mimic
        joints, collision geometry, …).
    """
    data, base = _read(source)
    robot, transmissions = _parse(data, base)
    links = {link.name: link for link in robot.links}
    joints = list(robot.joints)
    ignored: dict[str, list[str]] = {}

    def ignore(what: str, name: str) -> None:
        ignored.setdefault(what, []).append(name)

    # -- topology -------------------------------------------------------------------------------
    parent_joint: dict[str, Any] = {}
    children: dict[str, list[Any]] = {name: [] for name in links}
    names = [j.name for j in joints]
    counts = Counter(names)
    for j in joints:
        if counts[j.name] > 1:
            raise ValueError(f"URDF joint {j.name!r} is defined more than once")
        if j.type not in _KNOWN:
            raise ValueError(
                f"URDF joint {j.name!r}: type {j.type!r} is not supported (revolute, continuous, prismatic, "
                "fixed, floating)"
            )
        for role, link in (("parent", j.parent), ("child", j.child)):
            if link not in links:
                raise ValueError(f"URDF joint {j.name!r}: unknown {role} link {link!r}")
        if j.parent == j.child:
            raise ValueError(f"URDF joint {j.name!r}: joins link {j.child!r} to itself")
        if j.child in parent_joint:
            raise ValueError(
                f"URDF link {j.child!r} has two parent joints ({parent_joint[j.child].name!r}, {j.name!r}); "
                "closed loops are not expressible in URDF"
            )
        parent_joint[j.child] = j
        children[j.parent].append(j)
    roots = [name for name in links if name not in parent_joint]
    if not roots and links:
        raise ValueError(f"URDF: the joints form a cycle (link {next(iter(links))!r} has a parent)")

    # -- joint coordinates ----------------------------------------------------------------------
    by_name = {j.name: j for j in joints}
    q0: dict[str, float] = {}
    for name, value in dict(joint_positions or {}).items():
        j = by_name.get(name)
        if j is None:
            raise ValueError(f"joint_positions: unknown URDF joint {name!r}; the joints are {names}")
        if j.type not in _MOVABLE:
            raise ValueError(f"joint_positions: URDF joint {name!r} is {j.type}, it has no coordinate")
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"joint_positions: URDF joint {name!r}: {value!r} is not a number") from None
        if not math.isfinite(x):
            raise ValueError(f"joint_positions: URDF joint {name!r}: {value!r} is not finite")
        q0[name] = x

    # -- forward kinematics (breadth first from the roots) ----------------------------------------
    world_T: dict[str, np.ndarray] = {}
    axes: dict[str, np.ndarray] = {}
    order: list[str] = []
    queue = list(roots)
    for r in roots:
        world_T[r] = np.eye(4)
    while queue:
        name = queue.pop(0)
        order.append(name)
        for j in children[name]:
            axis = np.array([1.0, 0.0, 0.0]) if j.axis is None else np.asarray(j.axis, dtype=float)
            norm = float(np.linalg.norm(axis))
            if j.type in _MOVABLE and (not np.all(np.isfinite(axis)) or norm == 0.0):
                raise ValueError(f"URDF joint {j.name!r}: axis {axis.tolist()} has no direction")
            axes[j.name] = axis / norm if norm > 0 else axis
            origin = np.eye(4) if j.origin is None else np.asarray(j.origin, dtype=float)
            world_T[j.child] = world_T[name] @ origin @ _motion(j.type, axes[j.name], q0.get(j.name, 0.0))
            queue.append(j.child)
    if len(order) < len(links):
        stuck = sorted(set(links) - set(order))
        raise ValueError(f"URDF: links {stuck} are in a cycle of joints (not reachable from a root link)")

    # -- which mbvi body carries each link --------------------------------------------------------
    carrier: dict[str, str] = {}  # link → body name (WORLD for links merged into the world)
    bodies: set[str] = set()  # the links that are bodies: those with a mass (a massless "world" link is the world)
    for name in order:
        link = links[name]
        mass = _mass(link)
        if mass < 0 or not math.isfinite(mass):
            raise ValueError(f"URDF link {name!r}: mass {mass:g} kg must be positive")
        j = parent_joint.get(name)
        if mass > 0 and name == WORLD:
            raise ValueError(
                f"URDF link {WORLD!r} has a mass: {WORLD!r} is mbvi's fixed frame (a massless link of that name, "
                "as ROS descriptions fix a robot, is the world); rename the link"
            )
        if mass > 0:
            carrier[name] = name
            bodies.add(name)
        elif j is None:
            carrier[name] = WORLD
        elif j.type == "fixed":
            carrier[name] = carrier[j.parent]
        else:
            why = "mass 0 in its <inertial>" if links[name].inertial is not None else "no <inertial>"
            raise ValueError(
                f"URDF link {name!r} has no mass ({why}) but moves on {j.type} joint {j.name!r}: "
                "give it an <inertial> with a positive mass and inertia (mbvi bodies need both)"
            )

    # -- visuals of every link, on the body that carries it -------------------------------------------
    com_local = {
        name: np.asarray(links[name].inertial.origin, dtype=float)[:3, 3]
        if links[name].inertial.origin is not None
        else np.zeros(3)
        for name in order
        if name in bodies
    }
    missing_meshes: list[str] = []
    parts: dict[str, list[dict]] = {}
    for name in order:
        link = links[name]
        if link.collisions:
            ignore("collision geometry", name)
        body = carrier[name]
        if body == WORLD:
            if link.visuals:
                ignore("visuals of links fixed to the world", name)
            continue
        T_rel = np.linalg.inv(world_T[body]) @ world_T[name]  # link frame → carrier's link frame
        T_rel[:3, 3] -= com_local[body]  # … → body frame (centre of mass at the origin), m
        parts.setdefault(body, []).extend(_visual_parts(link, T_rel, base, missing_meshes))

    # -- bodies -----------------------------------------------------------------------------------
    scene = scene_type(gravity=gravity)
    for name in order:
        if name not in bodies:
            continue
        inertial = links[name].inertial
        R_in = np.eye(3) if inertial.origin is None else np.asarray(inertial.origin, dtype=float)[:3, :3]
        I_in = np.zeros((3, 3)) if inertial.inertia is None else np.asarray(inertial.inertia, dtype=float)
        T = world_T[name]
        try:
            scene.add(
                RigidBody(
                    name,
                    mass=_mass(links[name]),
                    inertia=R_in @ I_in @ R_in.T,  # from the inertial frame into the link frame, kg m²
                    position=T[:3, :3] @ com_local[name] + T[:3, 3],
                    orientation=T[:3, :3],
                    shape=Visuals(tuple(parts[name])) if parts.get(name) else None,
                )
            )
        except ValueError as exc:
            raise ValueError(f"URDF link {name!r}: {exc}") from None

    # -- joints -----------------------------------------------------------------------------------
    dampers: list[tuple[str, float]] = []
    for name in order:
        j = parent_joint.get(name)
        if j is None:
            continue
        a, b = carrier[j.parent], carrier[j.child]
        T = world_T[j.child]  # the joint frame, after the joint's motion
        anchor, axis = T[:3, 3], T[:3, :3] @ axes[j.name]
        if j.limit is not None and j.type != "fixed":
            ignore("joint limits", j.name)
        if j.mimic is not None:
            ignore("mimic couplings", j.name)
        if j.calibration is not None:
            ignore("calibration", j.name)
        if j.safety_controller is not None:
            ignore("safety controllers", j.name)
        damping = 0.0
        if j.dynamics is not None:
            damping = float(j.dynamics.damping or 0.0)
            if float(j.dynamics.friction or 0.0):  # (a string: "0.0" is no friction)
                ignore("joint friction", j.name)
        try:
            if j.type in ("revolute", "continuous"):
                scene.add(Revolute(a, b, anchor=anchor, axis=axis, name=j.name, initial_angle=q0.get(j.name, 0.0)))
            elif j.type == "prismatic":
                scene.add(
                    Prismatic(a, b, axis=axis, anchor=anchor, name=j.name, initial_displacement=q0.get(j.name, 0.0))
                )
            elif j.type == "fixed":
                if a != b:
                    scene.add(Fixed(a, b, anchor=anchor, name=j.name))
                continue
            else:  # floating: the child is a free body
                if damping:
                    ignore("damping of floating joints", j.name)
                continue
            if damping > 0:
                dampers.append((j.name, damping))  # (added after every joint: their names come first)
            elif damping < 0:
                raise ValueError(f"damping {damping:g} must be non-negative")
        except ValueError as exc:
            raise ValueError(f"URDF joint {j.name!r}: {exc}") from None
    for r in roots:  # after the robot's joints: their names come first (a joint named "world-base" was refused)
        if r in bodies:
            scene.add(Fixed(WORLD, r))
    for name, damping in dampers:
        law = JointDamping(name, damping, name=f"{name}:damping")
        law.explicit_name = False  # (a joint the robot calls "j:damping" keeps its name; this one moves over)
        scene.add(law)
    if transmissions:
        ignore("transmissions", ", ".join(transmissions))
    if missing_meshes:
        ignored["mesh files not found (not drawn)"] = missing_meshes
    if ignored:
        what = "; ".join(f"{k} ({', '.join(v)})" for k, v in ignored.items())
        warnings.warn(f"URDF {robot.name!r}: mbvi ignores {what}", UserWarning, stacklevel=3)
    return scene
