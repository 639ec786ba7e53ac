"""The state space of two angles as a trail on a torus (the seed's picture of the double pendulum).

A configuration (θ₁, θ₂) of two angles lives on the torus T²: θ₁ runs around
the ring, θ₂ around the tube. :func:`torus` draws the ring as a translucent
surface and the trajectory as a line on it, coloured by time (with a colour
bar), and the two angle axes — the circles θ₂ = 0 and θ₁ = π/2 — marked every
π/2 rad and named after the coordinates.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from mbvi.render.frames import window_pixels

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

    The trail is coloured by time (colour bar ``time t (s)``); the two angle
    axes are drawn on the surface, marked every π/2 and labelled with the
    coordinates' names, in rad (``q[k]`` for a run without names).

    Parameters
    ----------
    traj : mbvi.Trajectory
        A run with at least two generalized coordinates (angles, rad), e.g. of
        the double pendulum as a :class:`mbvi.LagrangianSystem`.
    path : str or PathLike, optional
        Write the picture there, a PNG (``.png``, any case; ``.jpg``, ``.jpeg``, ``.bmp``, ``.tif`` and
        ``.tiff`` write those formats); without it the :class:`pyvista.Plotter` is returned
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
        For a trajectory with fewer than two coordinates, an unknown name or an index ``i`` or ``j`` out of
        range, a ``path`` of another suffix, or a ``window_size`` that is not two numbers of pixels in 1 … 16384.
    """
    import imageio.v3 as iio
    import pyvista as pv

    from mbvi.render._headless import configure_headless

    configure_headless()
    window_size = window_pixels(window_size, "torus")
    if path is not None and Path(path).suffix.lower() not in _IMAGE_SUFFIXES:
        raise ValueError(f"torus: cannot write {str(path)!r}: use a {', '.join(_IMAGE_SUFFIXES)} file name")
    q = np.asarray(traj.q, float)
    if q.ndim != 2 or q.shape[1] < 2:
        raise ValueError("torus: the trajectory needs at least two generalized coordinates")

    def column(k: int | str, name: str) -> np.ndarray:
        if isinstance(k, str):
            return np.asarray(traj.coordinate(k), float)
        n = q.shape[1]
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or not -n <= int(k) < n:
            raise ValueError(
                f"torus(): {name} must be a coordinate's name or an index in {-n} … {n - 1} (the run has {n} "
                f"coordinates), got {k!r}"
            )
        return q[:, int(k)]

    pts = torus_points(column(i, "i"), column(j, "j"), ring, tube * 1.02)
    plotter = pv.Plotter(off_screen=path is not None, window_size=list(window_size))
    plotter.set_background("white")
    surface = pv.ParametricTorus(ringradius=ring, crosssectionradius=tube)
    plotter.add_mesh(surface, color="lightsteelblue", opacity=0.35, smooth_shading=True)
    font = max(9, round(window_size[1] / 45))
    if len(pts) >= 2:
        line = pv.lines_from_points(pts)
        line["time"] = np.asarray(traj.t, float)
        bar = {"title": "time t (s)", "vertical": False, "fmt": "%.3g", "color": "#333333", "n_labels": 3,
               "position_x": 0.6, "position_y": 0.04, "width": 0.35, "height": 0.06,
               "title_font_size": font, "label_font_size": font}  # fmt: skip
        plotter.add_mesh(line, scalars="time", cmap="viridis", line_width=2, scalar_bar_args=bar)
    plotter.add_mesh(pv.Sphere(radius=0.06 * tube, center=pts[0]), color="black")
    _add_angle_axes(plotter, _coordinate_name(traj, i), _coordinate_name(traj, j), ring, tube, font)
    plotter.view_vector((1.0, 0.0, 0.7), viewup=(0.0, 0.0, 1.0))  # θ₁ = 0 faces the camera
    plotter.reset_camera()
    plotter.camera.zoom(1.15)  # room for the tick labels right of the ring
    if path is not None:
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        # PyVista's screenshot knows lower-case suffixes only: its pixels, written by the suffix in any case
        iio.imwrite(out, plotter.screenshot(None, return_img=True), extension=out.suffix.lower())
        plotter.close()
    return plotter


#: the image formats :func:`torus` writes (PyVista's screenshot formats)
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff")

#: tick marks on the angle axes: value, rad, and its label (VTK's fonts draw ASCII only)
_TICKS = ((0.0, "0"), (0.5 * np.pi, "pi/2"), (np.pi, "pi"), (1.5 * np.pi, "3pi/2"))


def _coordinate_name(traj: Any, k: int | str) -> str:
    """The name of coordinate ``k`` of ``traj``: given, the run's own, or ``q[k]``."""
    if isinstance(k, str):
        return k
    names = traj.coordinate_names
    return names[int(k)] if -len(names) <= int(k) < len(names) else f"q[{int(k)}]"


def _add_angle_axes(plotter: Any, name1: str, name2: str, ring: float, tube: float, font: int) -> None:
    """Draw and label the two angle axes on the torus.

    The θ₁ axis is the outer equator θ₂ = 0, marked at θ₁ = 0, π/2, π and
    3π/2 rad; the θ₂ axis is the tube's cross-section at θ₁ = π/2 (seen face
    on from the default camera; it meets the θ₁ axis at θ₂ = 0), marked at
    θ₂ = π/2, π and 3π/2 rad. A caption in the upper-left corner says which
    coordinate runs which way. VTK's fonts draw ASCII only (no θ, no π) and
    turn square brackets into parentheses, so units are written ``(rad)``.

    Parameters
    ----------
    plotter : pyvista.Plotter
        Where to draw.
    name1, name2 : str
        Names of the coordinates around the ring and around the tube.
    ring, tube : float
        Radii of the drawn torus.
    font : int
        Font size, points.
    """
    import pyvista as pv

    r = tube * 1.03  # just outside the surface, like the trail
    s = np.linspace(0.0, 2.0 * np.pi, 181)
    for a, b in ((s, np.zeros_like(s)), (np.full_like(s, 0.5 * np.pi), s)):
        plotter.add_mesh(pv.lines_from_points(torus_points(a, b, ring, r)), color="#555555", line_width=1.5)
    values = np.array([v for v, _ in _TICKS])
    points = np.concatenate(
        [torus_points(values, np.zeros(4), ring, r), torus_points(np.full(3, 0.5 * np.pi), values[1:], ring, r)]
    )
    labels = [f"{name1} = {text}" for _, text in _TICKS]  # θ₂ = 0 all along this circle
    labels += [f"{name2} = {text}" for _, text in _TICKS[1:]]
    plotter.add_point_labels(
        points, labels, name="angle ticks", font_size=font, text_color="#333333", point_color="#333333",
        point_size=6, shape=None, always_visible=True, render_points_as_spheres=True,
    )  # fmt: skip
    caption = f"around the ring: {name1} (rad)\naround the tube: {name2} (rad)"
    # anchored at the top (a viewport position anchors the text's bottom: two lines left the top at small sizes)
    plotter.add_text(caption, position="upper_left", font_size=font, color="#333333", name="angle axes")
