"""Colours and sizes of rendered elements.

Sizes derive from the scene: a size unit is a fraction of the scene's
``length_scale``, capped by the typical spacing of linked bodies so that a
100-link chain does not turn into a row of overlapping balls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mbvi.render.frames import FrameData

__all__ = ["PALETTE", "Sizes", "Style", "palette_rgb"]

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
        Element colours.
    strain_cmap : str
        Matplotlib colormap name for beam strain (diverging: blue =
        compression, red = tension).
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
    def for_frames(cls, data: FrameData, scale: float = 1.0) -> Sizes:
        """Sizes for a sampled scene, times ``scale``."""
        unit = 0.06 * data.length_scale
        link = data.typical_link_length()
        if link is not None:
            unit = min(unit, 0.22 * link)
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
