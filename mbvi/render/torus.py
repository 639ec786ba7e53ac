"""The state space of two angles as a trail on a torus (the seed's picture of the double pendulum).

A configuration (θ₁, θ₂) of two angles lives on the torus T²: θ₁ runs around
the ring, θ₂ around the tube. :func:`torus` draws the ring as a translucent
surface and the trajectory as a line on it, coloured by time.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["torus", "torus_points"]


def torus_points(theta1: Any, theta2: Any, ring: float = 2.0, tube: float = 0.8) -> np.ndarray:
    """Points of the torus for angles θ₁ (around the ring) and θ₂ (around the tube), shape (n, 3).

    Parameters
    ----------
    theta1, theta2 : array_like, shape (n,)
        Angles, rad.
    ring, tube : float, default: 2.0, 0.8
        Ring and tube radii (arbitrary units).
    """
    a, b = np.asarray(theta1, float), np.asarray(theta2, float)
    rho = ring + tube * np.cos(b)
    return np.stack([rho * np.cos(a), rho * np.sin(a), tube * np.sin(b)], axis=-1)


def torus(
    traj: Any,
    path: str | os.PathLike[str] | None = None,
    *,
    i: int | str = 0,
    j: int | str = 1,
    window_size: tuple[int, int] = (800, 600),
    ring: float = 2.0,
    tube: float = 0.8,
) -> Any:
    """Draw two angle coordinates of a trajectory as a trail on a torus (PyVista, headless).

    Parameters
    ----------
    traj : mbvi.Trajectory
        A run with at least two generalized coordinates (angles, rad), e.g. of
        the double pendulum as a :class:`mbvi.LagrangianSystem`.
    path : str or PathLike, optional
        Write a PNG there; without it the :class:`pyvista.Plotter` is returned
        unrendered (for notebooks).
    i, j : int or str, default: 0, 1
        The coordinates around the ring and around the tube (index or name).
    window_size : (int, int), default: (800, 600)
        Image size, pixels.
    ring, tube : float, default: 2.0, 0.8
        Radii of the drawn torus.

    Returns
    -------
    pyvista.Plotter
        The plotter (closed once ``path`` is written).

    Raises
    ------
    ValueError
        For a trajectory with fewer than two coordinates or an unknown name.
    """
    import pyvista as pv

    from mbvi.render._headless import configure_headless

    configure_headless()
    q = np.asarray(traj.q, float)
    if q.ndim != 2 or q.shape[1] < 2:
        raise ValueError("torus: the trajectory needs at least two generalized coordinates")

    def column(k: int | str) -> np.ndarray:
        if isinstance(k, str):
            return np.asarray(traj.coordinate(k), float)
        return q[:, int(k)]

    pts = torus_points(column(i), column(j), ring, tube * 1.02)
    plotter = pv.Plotter(off_screen=path is not None, window_size=list(window_size))
    plotter.set_background("white")
    surface = pv.ParametricTorus(ringradius=ring, crosssectionradius=tube)
    plotter.add_mesh(surface, color="lightsteelblue", opacity=0.35, smooth_shading=True)
    if len(pts) >= 2:
        line = pv.lines_from_points(pts)
        line["time"] = np.asarray(traj.t, float)
        plotter.add_mesh(line, scalars="time", cmap="viridis", line_width=2, show_scalar_bar=False)
    plotter.add_mesh(pv.Sphere(radius=0.06 * tube, center=pts[0]), color="black")
    plotter.view_vector((1.0, 0.0, 0.7), viewup=(0.0, 0.0, 1.0))  # θ₁ = 0 faces the camera
    plotter.reset_camera()
    plotter.camera.zoom(1.3)
    if path is not None:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        plotter.screenshot(str(out))
        plotter.close()
    return plotter
