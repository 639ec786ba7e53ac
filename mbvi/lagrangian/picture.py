"""The picture of a LagrangianSystem run (for ``mbvi run --render X.png`` and the gallery).

There are no bodies to draw: two free angles (the double pendulum's; an
angle is a coordinate L, Q and g do not see turn by 2π,
:attr:`mbvi.LagrangianSystem.angles`) are drawn as a trail on the torus of the two angles
(:func:`mbvi.render.torus.torus`); any other system as the phase portrait
of its first coordinate (:func:`mbvi.plot.phase_portrait`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["picture"]


def picture(traj: Any, path: str | os.PathLike[str], window_size: tuple[int, int] = (800, 600)) -> None:
    """Write the PNG picture of a Lagrangian run.

    Parameters
    ----------
    traj : mbvi.Trajectory
        A run of a :class:`mbvi.LagrangianSystem`.
    path : str or PathLike
        A ``.png`` file.
    window_size : (int, int), default: (800, 600)
        Image size, pixels.

    Raises
    ------
    ValueError
        For another file type (animations of Lagrangian runs are not drawn).
    """
    out = Path(path)
    if out.suffix.lower() != ".png":
        raise ValueError(
            f"a LagrangianSystem run has no bodies to animate; render it to a .png (its state-space picture), "
            f"not {out.suffix or path!r}, or use --plot"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    if traj.q.shape[1] == 2 and not traj.info.get("constraints") and all(traj.info.get("angles", (True, True))):
        from mbvi.render.torus import torus

        torus(traj, out, window_size=window_size)
        return
    from mbvi.plot import phase_portrait

    fig = phase_portrait(traj, 0)
    dpi = 100
    fig.set_size_inches(window_size[0] / dpi, window_size[1] / dpi)
    fig.savefig(out, dpi=dpi)
