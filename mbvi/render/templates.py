"""Template meshes that instanced layers copy, place and scale.

A template is a triangle mesh with point normals, in its own frame. Shapes
that are stretched along a segment (rods, springs) span ``z = 0 … 1`` so
that scaling ``z`` by the segment length and rotating ``z`` onto its direction
places them.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyvista as pv
from numpy.typing import NDArray

__all__ = [
    "Template",
    "body_shape",
    "box",
    "capsule",
    "compound",
    "cylinder",
    "helix",
    "mesh",
    "sphere",
    "unit_rod",
]


@dataclass(frozen=True)
class Template:
    """A mesh to be instanced.

    Attributes
    ----------
    points : ndarray, shape (k, 3)
        Vertices in the template frame, m.
    normals : ndarray, shape (k, 3)
        Unit point normals.
    faces : ndarray
        VTK face connectivity (``[n, i0, …, n, …]``).
    n_faces : int
        Number of faces.
    """

    points: NDArray[np.float64]
    normals: NDArray[np.float64]
    faces: NDArray[np.int64]
    n_faces: int

    @classmethod
    def from_polydata(cls, mesh: pv.PolyData, *, feature_angle: float = 40.0) -> Template:
        """Triangulate ``mesh`` and split vertices at sharp edges for crisp shading."""
        tri = mesh.triangulate().clean()
        tri = tri.compute_normals(
            cell_normals=False,
            point_normals=True,
            split_vertices=True,
            feature_angle=feature_angle,
            auto_orient_normals=False,
        )
        return cls(
            points=np.asarray(tri.points, dtype=float),
            normals=np.asarray(tri.point_data["Normals"], dtype=float),
            faces=np.asarray(tri.faces, dtype=np.int64),
            n_faces=int(tri.n_cells),
        )

    def tiled_faces(self, copies: int) -> NDArray[np.int64]:
        """Face array for ``copies`` instances stored one after another."""
        k = len(self.points)
        faces = self.faces.reshape(self.n_faces, -1)  # all triangles: rows of [3, i, j, k]
        offsets = (np.arange(copies) * k)[:, None, None]
        tiled = np.broadcast_to(faces, (copies, *faces.shape)).copy()
        tiled[:, :, 1:] += offsets
        return tiled.reshape(-1)


def sphere(radius: float = 1.0, resolution: int = 20) -> Template:
    """UV sphere about the origin."""
    return Template.from_polydata(
        pv.Sphere(radius=radius, theta_resolution=resolution, phi_resolution=max(resolution * 2 // 3, 6)),
        feature_angle=90.0,
    )


def box(size: tuple[float, float, float] = (1.0, 1.0, 1.0)) -> Template:
    """Axis-aligned box centred at the origin with edge lengths ``size``, m."""
    lx, ly, lz = size
    return Template.from_polydata(pv.Box(bounds=(-lx / 2, lx / 2, -ly / 2, ly / 2, -lz / 2, lz / 2)))


def cylinder(radius: float, length: float, resolution: int = 32) -> Template:
    """Capped cylinder centred at the origin along ``z``."""
    return Template.from_polydata(
        pv.Cylinder(center=(0, 0, 0), direction=(0, 0, 1), radius=radius, height=length, resolution=resolution)
    )


def capsule(radius: float, length: float, resolution: int = 24) -> Template:
    """Capsule along ``z``; ``length`` is the distance between cap centres, m."""
    mesh = pv.Capsule(
        center=(0, 0, 0), direction=(0, 0, 1), radius=radius, cylinder_length=max(length, 1e-9), resolution=resolution
    )
    return Template.from_polydata(mesh, feature_angle=90.0)


def unit_rod(radius: float, resolution: int = 16) -> Template:
    """Capped cylinder of the given radius spanning ``z = 0 … 1``."""
    return Template.from_polydata(
        pv.Cylinder(center=(0, 0, 0.5), direction=(0, 0, 1), radius=radius, height=1.0, resolution=resolution)
    )


def helix(
    coil_radius: float,
    wire_radius: float,
    turns: float = 8.0,
    lead: float = 0.1,
    samples_per_turn: int = 16,
    sides: int = 8,
    length: float = 1.0,
) -> Template:
    """A coil spring spanning ``z = 0 … length`` with straight leads at both ends.

    Drawn at another length L, the template is stretched along ``z`` by L / ``length``, and the wire and its end
    caps with it: build it at about the length it is drawn at.

    Parameters
    ----------
    coil_radius : float
        Radius of the coil, m.
    wire_radius : float
        Radius of the wire, m (in the unstretched template; stretching the
        spring along ``z`` thins the slanted wire a little).
    turns : float, default: 8
        Number of turns.
    lead : float, default: 0.1
        Fraction of the length taken by each straight lead.
    samples_per_turn : int, default: 16
        Centre-line samples per turn.
    sides : int, default: 8
        Sides of the wire tube.
    length : float, default: 1
        Length of the template along ``z``, m.
    """
    n = int(turns * samples_per_turn) + 1
    s = np.linspace(0.0, 1.0, n)
    ang = 2.0 * np.pi * turns * s
    coil = np.column_stack([coil_radius * np.cos(ang), coil_radius * np.sin(ang), lead + (1.0 - 2.0 * lead) * s])
    path = np.vstack(
        [[0.0, 0.0, 0.0], [coil_radius, 0.0, lead * 0.5], coil, [coil[-1, 0], coil[-1, 1], 1 - lead * 0.5], [0, 0, 1.0]]
    )
    path[:, 2] *= length
    line = pv.lines_from_points(path)
    return Template.from_polydata(line.tube(radius=wire_radius, n_sides=sides, capping=True), feature_angle=80.0)


def body_shape(shape: dict[str, Any]) -> Template:
    """Template for a rigid body's ``shape`` entry of the geometry dict.

    Parameters
    ----------
    shape : dict
        ``{"type": "sphere", "radius": r}``, ``{"type": "box", "size": [lx, ly, lz]}``,
        ``{"type": "cylinder", "radius": r, "length": l}`` or
        ``{"type": "capsule", "radius": r, "length": l}``, in the body frame;
        ``{"type": "mesh", "path": str, "scale": [sx, sy, sz]}`` (any file PyVista reads);
        ``{"type": "compound", "parts": [...]}``: several of these, each with a
        ``"transform"`` (row-major 4×4 placement in the body frame), as
        :class:`mbvi.urdf.Visuals` describes a URDF link.

    Raises
    ------
    ValueError
        For an unknown shape type.
    """
    kind = shape.get("type")
    if kind == "compound":
        return compound(shape["parts"])
    if kind == "mesh":
        return mesh(shape["path"], shape.get("scale", (1.0, 1.0, 1.0)))
    if kind == "sphere":
        return sphere(float(shape["radius"]), resolution=24)
    if kind == "box":
        return box(tuple(float(x) for x in shape["size"]))  # type: ignore[arg-type]
    if kind == "cylinder":
        return cylinder(float(shape["radius"]), float(shape["length"]))
    if kind == "capsule":
        return capsule(float(shape["radius"]), float(shape["length"]))
    raise ValueError(f"unknown shape type {kind!r}; expected sphere, box, cylinder, capsule, mesh or compound")


def mesh(path: str, scale: Any = (1.0, 1.0, 1.0)) -> Template:
    """A mesh file read by PyVista (STL, OBJ, PLY, VTK …), scaled per axis, in its own frame.

    Raises
    ------
    ValueError
        When the file cannot be read, or holds no polygons (VTK's readers return an empty mesh for a corrupt
        file: what they log about it is silenced, and this names the file instead).
    """
    from vtkmodules.vtkCommonCore import vtkObject

    shown = vtkObject.GetGlobalWarningDisplay()
    vtkObject.GlobalWarningDisplayOff()
    try:
        data = pv.read(path)
    except Exception as exc:
        raise ValueError(f"cannot read mesh {path!r}: {exc}") from None
    finally:
        vtkObject.SetGlobalWarningDisplay(shown)
    if isinstance(data, pv.MultiBlock):
        data = data.combine()
    if not isinstance(data, pv.PolyData):
        new_api = "algorithm" in inspect.signature(data.extract_surface).parameters  # PyVista ≥ 0.47
        data = data.extract_surface(**({"algorithm": "dataset_surface"} if new_api else {}))
    surface = data
    if surface.n_points == 0 or (surface.faces.size == 0 and surface.strips.size == 0):
        raise ValueError(f"cannot read mesh {path!r}: it holds no polygons (an empty, corrupt or point-only file)")
    surface = surface.scale(np.asarray(scale, dtype=float), inplace=False)
    return Template.from_polydata(surface)


def compound(parts: Any) -> Template:
    """One template from several shape descriptions, each placed by its ``"transform"`` (4×4, row-major)."""
    pts, nrm, faces, n_faces, offset = [], [], [], 0, 0
    for part in parts:
        T = np.asarray(part.get("transform", np.eye(4).ravel()), dtype=float).reshape(4, 4)
        t = body_shape({k: v for k, v in part.items() if k != "transform"})
        pts.append(t.points @ T[:3, :3].T + T[:3, 3])
        nrm.append(t.normals @ T[:3, :3].T)
        f = t.faces.reshape(t.n_faces, -1).copy()
        f[:, 1:] += offset
        faces.append(f.ravel())
        n_faces += t.n_faces
        offset += len(t.points)
    if not pts:
        raise ValueError("a compound shape needs at least one part")
    return Template(np.vstack(pts), np.vstack(nrm), np.concatenate(faces).astype(np.int64), n_faces)
