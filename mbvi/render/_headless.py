"""Choose an off-screen OpenGL window before VTK is imported.

VTK picks its render-window class when it is first imported. On a machine
without an X display the default (X11) window cannot be created, so mbvi asks
VTK for an EGL window, which renders on the GPU or through Mesa's software
rasterizer without any display server (no Xvfb needed).
"""

from __future__ import annotations

import os
import sys

__all__ = ["configure_headless"]


def configure_headless() -> bool:
    """Select VTK's EGL render window when there is no display.

    Does nothing when ``DISPLAY`` (or ``WAYLAND_DISPLAY``) is set, when the
    user already chose a window class through ``VTK_DEFAULT_OPENGL_WINDOW``,
    or on macOS and Windows, whose native windows render off screen anyway.

    Returns
    -------
    bool
        True if this call set ``VTK_DEFAULT_OPENGL_WINDOW``.
    """
    if not sys.platform.startswith("linux"):
        return False
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return False
    if "VTK_DEFAULT_OPENGL_WINDOW" in os.environ:
        return False
    os.environ["VTK_DEFAULT_OPENGL_WINDOW"] = "vtkEGLRenderWindow"
    return True
