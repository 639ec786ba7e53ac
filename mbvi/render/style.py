"""Colours and sizes of rendered elements.

Sizes derive from the scene: a size unit is a fraction of the scene's
length scale — its bodies' spread, or the extent of their motion when that is
larger (a quarter of it in a scene with links), so that a ball thrown 80 m is
drawn for its flight — capped by the typical spacing of linked bodies so that
a 100-link chain does not turn into a row of overlapping balls. In a scene of
free rigid bodies alone the unit only sets the margins around them, and comes
from their size.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike, NDArray

from mbvi.render.frames import FrameData

__all__ = ["LINKED_MOTION_SHARE", "PALETTE", "RIGID_SHARE", "Sizes", "Style", "palette_rgb"]

#: Body colours (Tableau 10, slightly muted), cycled over bodies.
PALETTE: tuple[str, ...] = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)

#: in a scene with links, the length scale is at least this share of the motion's extent (a double pendulum's motion
#: spans up to four times its bodies' initial spread: its spheres keep the size that spread gives them); without
#: links it is at least the whole extent, as a still cloud of particles' is its spread
LINKED_MOTION_SHARE = 0.25
#: in a scene of free rigid bodies alone, the size unit is at least this share of their largest bounding radius (a
#: lone 1 m cube's unit is 0.06 m, as the scene's 1 m fallback length scale gave it; a 1 mm or 1 km cube's alike)
RIGID_SHARE = 0.07


def palette_rgb(count: int, offset: int = 0) -> NDArray[np.uint8]:
    """``count`` palette colours as RGB bytes, shape (count, 3), cycling from ``offset``."""
    rgb = np.array([[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in PALETTE], dtype=np.uint8)
    return rgb[(np.arange(count) + offset) % len(rgb)]


@dataclass(frozen=True)
class Style:
    """Colours of the non-body elements.

    Attributes
    ----------
    background : str
        Window background.
    rod, spring, damper, bone, joint, anchor, ground, grid, text : str
        Element colours: anything :class:`pyvista.Color` reads (a name such
        as ``"grey"``, ``"#6b6b6b"``, or an RGB sequence).
    strain_cmap : str
        Matplotlib colormap name for beam strain (diverging: blue =
        compression, red = tension).

    Raises
    ------
    ValueError
        For a colour or colormap PyVista cannot read, naming the field
        (``Style.rod: ...``); it failed only while drawing, in a worker
        process of :func:`mbvi.render.animate`.
    """

    background: str = "white"
    rod: str = "#6b6b6b"
    spring: str = "#3a6ea5"
    damper: str = "#2b2b2b"
    bone: str = "#8a8a8a"
    joint: str = "#444444"
    anchor: str = "#262626"
    ground: str = "#e9ecef"
    grid: str = "#c4c8cc"
    text: str = "#333333"
    strain_cmap: str = "coolwarm"

    def __post_init__(self) -> None:
        import pyvista as pv
        from pyvista.plotting.colors import get_cmap_safe

        for field in fields(self):
            value = getattr(self, field.name)
            if field.name == "strain_cmap":
                try:
                    get_cmap_safe(value)
                except (TypeError, ValueError, ModuleNotFoundError) as err:
                    raise ValueError(
                        f"Style.strain_cmap: {value!r} is not a colormap (a Matplotlib colormap name such as "
                        f"'coolwarm'): {_first_line(err)}"
                    ) from None
                continue
            problem = "" if value is not None else "PyVista would draw its default light blue"
            if value is not None:
                try:
                    pv.Color(value)
                except (TypeError, ValueError) as err:
                    problem = _first_line(err)
            if problem:
                raise ValueError(
                    f"Style.{field.name}: {value!r} is not a colour (a name such as 'grey', a hex string such as "
                    f"'#808080' or an RGB sequence of 0 … 1 or 0 … 255): {problem}"
                )


@dataclass(frozen=True)
class Sizes:
    """Sizes of drawn elements, m.

    Attributes
    ----------
    unit : float
        Base size: particle radius for a body of average mass.
    rod : float
        Rod radius.
    coil, wire : float
        Spring coil and wire radii.
    damper : float
        Damper line width, pixels.
    joint : float
        Joint marker size.
    anchor : float
        Edge of the world-anchor cubes.
    """

    unit: float
    rod: float
    coil: float
    wire: float
    damper: float
    joint: float
    anchor: float

    @classmethod
    def for_frames(
        cls,
        data: FrameData,
        scale: float = 1.0,
        *,
        extent: float | None = None,
        rigid_radii: ArrayLike | None = None,
    ) -> Sizes:
        """Sizes for a sampled scene, times ``scale``.

        The size unit is 6 % of the scene's length scale: the larger of
        ``data.length_scale`` and ``extent`` (:data:`LINKED_MOTION_SHARE`
        times ``extent`` in a scene with links, whose motion they bound),
        so that a particle that travels far is drawn for the whole picture
        the camera frames, not for where it started; at most 22 % of the
        typical link length, so that linked spheres do not overlap. When
        only rigid bodies are drawn (no particles, links or beams) the unit
        sizes nothing and only sets the margins around the bodies: it is 6 %
        of ``extent``, or :data:`RIGID_SHARE` times their largest bounding
        radius when that is more, so that a lone body fills the picture
        alike whatever its size (its length scale is a 1 m fallback).

        Parameters
        ----------
        data : FrameData
            The sampled scene.
        scale : float, default: 1
            Multiplies every size.
        extent : float, optional
            Largest side of the box around every drawn point over the frames,
            trails included, m. Default: that of ``data.all_points()``.
        rigid_radii : array_like, shape (r,), optional
            Bounding radii of the drawn rigid bodies' shapes, m (none known:
            the unit of a rigid-only scene follows its length scale).

        Returns
        -------
        Sizes
        """
        if extent is None:
            pts = data.all_points()
            extent = float(np.max(np.ptp(pts, axis=0))) if len(pts) else 0.0
        share = LINKED_MOTION_SHARE if _linked(data) else 1.0
        unit = 0.06 * max(data.length_scale, share * extent)
        link = data.typical_link_length()
        if link is not None:
            unit = min(unit, 0.22 * link)
        radii = np.asarray([] if rigid_radii is None else rigid_radii, dtype=float)
        if len(radii) and np.max(radii) > 0 and data.rigid and not (data.particles or _linked(data)):
            unit = max(0.06 * extent, RIGID_SHARE * float(np.max(radii)))
        unit *= scale
        return cls(
            unit=unit,
            rod=0.22 * unit,
            coil=0.5 * unit,
            wire=0.07 * unit,
            damper=3.0,
            joint=0.55 * unit,
            anchor=0.9 * unit,
        )

    def particle_radii(self, mass: NDArray[np.float64]) -> NDArray[np.float64]:
        """Sphere radius of each particle from its mass (∝ m^(1/3)), m."""
        if len(mass) == 0:
            return np.zeros(0)
        mean = float(np.mean(mass)) or 1.0
        return self.unit * np.clip((mass / mean) ** (1.0 / 3.0), 0.5, 2.0)


def _first_line(err: Exception) -> str:
    """The first non-blank line of ``err``'s message (PyVista's run to ten lines of examples)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


def _linked(data: FrameData) -> bool:
    """Whether ``data`` has links (rods, springs, dampers, joints) or beams, which bound its bodies' motion."""
    return bool(any(len(seg) for seg in data.segments.values()) or data.joints or len(data.world_anchors) or data.beams)
