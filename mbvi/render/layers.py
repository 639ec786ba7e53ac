"""Actors that are built once and moved every frame by updating arrays in place.

Each layer owns one :class:`pyvista.PolyData` and one actor. Moving to a new
frame overwrites the mesh's point (and normal, and scalar) arrays in place —
no mesh is rebuilt, no actor is added or removed — so the cost of a frame is
a few vectorized NumPy operations plus the draw call, independent of how many
bodies share a layer.

Meshes are stored in single precision, as the graphics card draws them. So
that a scene far from the world's origin keeps its shape, each layer stores
its points relative to a fixed ``origin`` near the scene and stands its actor
there (see :mod:`mbvi.render.drawable`); updates take world coordinates.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyvista as pv
from numpy.typing import ArrayLike, NDArray

from mbvi.render.templates import Template
from mbvi.render.transforms import instance_normals, instance_points, tube_faces, tube_points

__all__ = ["BeamTube", "InstancedLayer", "LineLayer", "stand"]


def _set(array: Any, values: NDArray[Any]) -> None:
    """Overwrite a VTK-backed array in place (marks it modified)."""
    array[:] = values


def _origin(origin: ArrayLike | None) -> NDArray[np.float64]:
    return np.zeros(3) if origin is None else np.asarray(origin, dtype=float).reshape(3)


def stand(actor: Any, origin: NDArray[np.float64]) -> None:
    """Place ``actor`` at ``origin`` (double precision in VTK): its mesh holds coordinates relative to it."""
    if np.any(origin):
        actor.position = tuple(float(x) for x in origin)


class InstancedLayer:
    """``m`` copies of one template, each placed by a rotation, translation and scale.

    Parameters
    ----------
    plotter : pyvista.Plotter
        Where to add the actor.
    template : Template
        The mesh to copy.
    count : int
        Number of instances ``m``.
    colors : ndarray of uint8, shape (m, 3), optional
        One RGB colour per instance (else ``color``).
    color : str, optional
        Uniform colour.
    origin : array_like, shape (3,), optional
        The point the mesh's coordinates are relative to, m (default: the
        world's origin).
    **prop
        Passed to :meth:`pyvista.Plotter.add_mesh` (``specular``, ``opacity``…).
    """

    def __init__(
        self,
        plotter: pv.Plotter,
        template: Template,
        count: int,
        *,
        colors: NDArray[np.uint8] | None = None,
        color: str | None = None,
        origin: ArrayLike | None = None,
        **prop: Any,
    ) -> None:
        self.template = template
        self.count = count
        self.origin = _origin(origin)
        k = len(template.points)
        points = np.tile(template.points, (count, 1))
        self.mesh = pv.PolyData(points.astype(np.float32), template.tiled_faces(count))
        self.mesh.point_data["Normals"] = np.tile(template.normals, (count, 1)).astype(np.float32)
        self.mesh.point_data.active_normals_name = "Normals"
        kwargs: dict[str, Any] = {"smooth_shading": False, "specular": 0.3, "specular_power": 20.0}
        kwargs.update(prop)
        if colors is not None:
            self.mesh.point_data["rgb"] = np.repeat(np.asarray(colors, dtype=np.uint8), k, axis=0)
            kwargs.update(scalars="rgb", rgb=True, show_scalar_bar=False)
        else:
            kwargs["color"] = color
        self.actor = plotter.add_mesh(self.mesh, **kwargs)
        self.actor.prop.interpolation = "gouraud"
        stand(self.actor, self.origin)

    def update(
        self,
        translation: NDArray[np.floating],
        rotation: NDArray[np.floating] | None = None,
        scale: NDArray[np.floating] | None = None,
    ) -> None:
        """Place every instance.

        Parameters
        ----------
        translation : ndarray, shape (m, 3)
            Instance origins in the world, m.
        rotation : ndarray, shape (m, 3, 3), optional
            Instance rotations (template frame to world).
        scale : ndarray, shape (m, 3), optional
            Per-axis scale of the template.
        """
        if self.count == 0:
            return
        local = np.asarray(translation, dtype=float) - self.origin
        _set(self.mesh.points, instance_points(self.template.points, rotation, local, scale))
        if rotation is not None:
            _set(self.mesh.point_data["Normals"], instance_normals(self.template.normals, rotation, scale))


class LineLayer:
    """Polylines whose vertices move (dampers, bones, trails).

    Parameters
    ----------
    plotter : pyvista.Plotter
        Where to add the actor.
    lengths : sequence of int
        Number of vertices of each polyline.
    color : str
        Line colour (used unless ``colors`` is given).
    width : float
        Line width, pixels.
    tubes : bool, default: True
        Shade lines as tubes (``render_lines_as_tubes``).
    colors : ndarray of uint8, shape (len(lengths), 3), optional
        One RGB colour per polyline.
    origin : array_like, shape (3,), optional
        The point the mesh's coordinates are relative to, m (default: the
        world's origin).
    **prop
        Passed to :meth:`pyvista.Plotter.add_mesh`.
    """

    def __init__(
        self,
        plotter: pv.Plotter,
        lengths: list[int],
        *,
        color: str,
        width: float,
        tubes: bool = True,
        colors: NDArray[np.uint8] | None = None,
        origin: ArrayLike | None = None,
        **prop: Any,
    ) -> None:
        self.origin = _origin(origin)
        total = int(sum(lengths))
        cells: list[NDArray[np.int64]] = []
        start = 0
        for n in lengths:
            cells.append(np.concatenate([[n], np.arange(start, start + n)]))
            start += n
        self.mesh = pv.PolyData(np.zeros((total, 3), dtype=np.float32))
        if cells:
            self.mesh.lines = np.concatenate(cells).astype(np.int64)
        kwargs: dict[str, Any] = {"color": color}
        if colors is not None and total:
            self.mesh.point_data["rgb"] = np.repeat(np.asarray(colors, dtype=np.uint8), lengths, axis=0)
            kwargs = {"scalars": "rgb", "rgb": True, "show_scalar_bar": False}
        self.actor = plotter.add_mesh(
            self.mesh,
            line_width=width,
            render_lines_as_tubes=tubes,
            lighting=tubes,
            **kwargs,
            **prop,
        )
        stand(self.actor, self.origin)

    def update(self, points: NDArray[np.floating]) -> None:
        """Set all vertices, shape (total, 3), polyline-major, in world coordinates, m."""
        if len(points):
            _set(self.mesh.points, np.asarray(points, dtype=float) - self.origin)


class BeamTube:
    """A beam drawn as a tube through its nodes, coloured by axial strain.

    Parameters
    ----------
    plotter : pyvista.Plotter
        Where to add the actor.
    nodes : int
        Number of beam nodes ``k``.
    radius : float
        Tube radius, m.
    clim : float
        Colour range is ``[-clim, clim]`` (strain, dimensionless).
    cmap : str
        Diverging colormap.
    sides : int, default: 12
        Vertices per tube ring.
    scalar_bar : bool, default: False
        Show a strain colour bar.
    title : str, default: "strain"
        Colour bar title.
    font_size : int, default: 12
        Colour bar font size, points.
    origin : array_like, shape (3,), optional
        The point the mesh's coordinates are relative to, m (default: the
        world's origin).
    """

    def __init__(
        self,
        plotter: pv.Plotter,
        nodes: int,
        *,
        radius: float,
        clim: float,
        cmap: str,
        sides: int = 12,
        scalar_bar: bool = False,
        title: str = "strain",
        font_size: int = 12,
        origin: ArrayLike | None = None,
    ) -> None:
        self.origin = _origin(origin)
        self.radius = radius
        self.sides = sides
        points = np.zeros((nodes * sides, 3), dtype=np.float32)
        self.mesh = pv.PolyData(points, tube_faces(nodes, sides))
        self.mesh.point_data["Normals"] = np.zeros_like(points)
        self.mesh.point_data.active_normals_name = "Normals"
        self.mesh.point_data["strain"] = np.zeros(nodes * sides)
        bar_args = {
            "title": title,
            "vertical": False,
            "fmt": "%.1e",
            "color": "#333333",
            "height": 0.06,
            "width": 0.4,
            "position_x": 0.55,
            "position_y": 0.03,
            "n_labels": 2,
            "title_font_size": font_size,
            "label_font_size": font_size,
        }
        self.actor = plotter.add_mesh(
            self.mesh,
            scalars="strain",
            cmap=cmap,
            clim=(-clim, clim),
            smooth_shading=False,
            show_scalar_bar=scalar_bar,
            scalar_bar_args=bar_args,
            specular=0.2,
        )
        self.actor.prop.interpolation = "gouraud"
        stand(self.actor, self.origin)

    def update(self, nodes: NDArray[np.floating], strain: NDArray[np.floating]) -> None:
        """Move the tube onto ``nodes`` (k, 3), world coordinates in m, and colour it by node ``strain`` (k,)."""
        pts, normals = tube_points(np.asarray(nodes, dtype=float) - self.origin, self.radius, self.sides)
        _set(self.mesh.points, pts)
        _set(self.mesh.point_data["Normals"], normals)
        _set(self.mesh.point_data["strain"], np.repeat(strain, self.sides))
