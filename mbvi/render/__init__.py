"""3D rendering of scenes and trajectories with PyVista.

Rendering only reads a :class:`mbvi.Trajectory` (a scene is first turned
into a one-frame trajectory of its initial state); it never steps time.

* :func:`snapshot` — one frame to a PNG.
* :func:`animate` — a trajectory to a GIF or MP4.
* :func:`show` — an interactive window (or notebook view) with a time slider.

Rendering is headless by default: importing this package on Linux without a
display selects VTK's EGL render window (``VTK_DEFAULT_OPENGL_WINDOW``), so
no X server or Xvfb is needed. ``import mbvi`` does not import this package
(or PyVista); the first access to ``mbvi.render`` does.
"""

from __future__ import annotations

from mbvi.render._headless import configure_headless

configure_headless()

from mbvi.render.api import animate, show, snapshot  # noqa: E402
from mbvi.render.frames import FrameData, animation_indices  # noqa: E402
from mbvi.render.style import Sizes, Style  # noqa: E402
from mbvi.render.view import SceneView  # noqa: E402

__all__ = [
    "FrameData",
    "SceneView",
    "Sizes",
    "Style",
    "animate",
    "animation_indices",
    "show",
    "snapshot",
]
